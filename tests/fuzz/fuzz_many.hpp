#pragma once
/// \file tests/fuzz/fuzz_many.hpp
/// What fuzz_sdpa and fuzz_heads share: the reference for many queries in long double loops of
/// their own (never attn's other paths), with a bound on attn's error carried along with every
/// number. A number of the reference is E{v, e}: v its exact value (long double; NaN or ±inf when
/// a non-finite input reaches it), e a bound on how far attn's T may be from v, derived from the
/// arithmetic (docs/errors.md, "The bounds"): a sum of `terms` products is off by the products'
/// own errors plus (terms + 2)·ε·Σ|terms| and (terms + 2)·η for underflow, in any order; softmax's
/// log-weights by the score errors times |β| plus ε·(4.1·Y + (n + 9)/2) and the one pass's
/// rescales. Every number whose terms come within a factor 16·(terms + 2) of T's largest is given
/// e = inf: it is not checked (T may overflow where long double does not). For long double
/// itself ε is doubled: the reference rounds as often as attn does.
///
/// Masked keys are left out of every sum (whatever they hold: the rule under test), and so are the
/// rows that see no key and the score terms of rows whose weights do not move; a NaN row (a kept
/// NaN score) makes every derivative NaN, a masked key's included (one query's rule). A gradient entry
/// that no term reaches must be exactly 0 (or, accumulating, what it held).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <type_traits>
#include <limits>
#include <vector>

#include "fuzz_common.hpp"

namespace attn_fuzz {

/// T's constants for the bounds.
template <class T>
struct prec {
  static constexpr ld eps = (sizeof(T) == sizeof(ld) ? 2 : 1) * static_cast<ld>(std::numeric_limits<T>::epsilon());
  static constexpr ld eta = static_cast<ld>(std::numeric_limits<T>::denorm_min());
  static constexpr ld max = static_cast<ld>(std::numeric_limits<T>::max());
};

/// A number of the reference: exact value and bound on attn's error (above).
struct E {
  ld v = 0;
  ld e = 0;
};

inline constexpr ld inf_ld = std::numeric_limits<ld>::infinity();

/// Whether r can be checked: v and e finite.
inline bool checkable(const E& r) { return std::isfinite(r.v) && std::isfinite(r.e); }

/// a·b rounded `roundings` times in T.
template <class T>
E mul(E a, E b, int roundings = 1) {
  const ld A = std::abs(a.v) + a.e, B = std::abs(b.v) + b.e;
  E r{a.v * b.v, std::abs(a.v) * b.e + std::abs(b.v) * a.e + a.e * b.e + roundings * prec<T>::eps * A * B + prec<T>::eta};
  if (!(A * B * 16 < prec<T>::max)) r.e = inf_ld;
  return r;
}

/// a − b rounded once in T.
template <class T>
E sub(E a, E b) {
  const ld M = std::abs(a.v) + std::abs(b.v) + a.e + b.e;
  E r{a.v - b.v, a.e + b.e + prec<T>::eps * M};
  if (!(M * 16 < prec<T>::max)) r.e = inf_ld;
  return r;
}

/// A sum of terms (products or numbers) in any order: its value, the sum of the terms' own
/// errors and of their magnitudes, and how many there are (0: nothing reached the entry).
template <class T>
struct acc {
  ld v = 0, mag = 0, err = 0, fmag = 0;  // fmag: the magnitudes of the finite terms
  std::size_t terms = 0;
  bool unsure = false;  // a factor whose exact value is finite may be anything in T
  /// Adds the product a·b.
  void add(E a, E b) {
    const ld A = std::abs(a.v) + a.e, B = std::abs(b.v) + b.e;
    unsure = unsure || (std::isfinite(a.v) && !std::isfinite(a.e)) || (std::isfinite(b.v) && !std::isfinite(b.e));
    // ±inf times a number T may hold as 0 or with the other sign (a product that underflows:
    // 2.4e−38 · −1.9e−14 is −0 in float): ±inf or NaN in T, whatever the exact product is
    const auto sign_unknown = [](E x) { return x.e > 0 && !(std::abs(x.v) > x.e); };
    unsure = unsure || (std::isinf(a.v) && sign_unknown(b)) || (std::isinf(b.v) && sign_unknown(a));
    v += a.v * b.v;
    mag += A * B;
    if (std::isfinite(A) && std::isfinite(B)) fmag += A * B;
    err += std::abs(a.v) * b.e + std::abs(b.v) * a.e + a.e * b.e + prec<T>::eta;
    ++terms;
  }
  /// Adds a.
  void add(E a) {
    v += a.v;
    const ld A = std::abs(a.v) + a.e;
    mag += A;
    if (std::isfinite(A)) fmag += A;
    err += a.e;
    ++terms;
  }
  /// Adds the terms of another sum s, which attn may round on its own before adding it (a
  /// key/value head's gradient over its query heads, one after the other): one more rounding,
  /// counted as one more term, when both have terms.
  void merge(const acc& s) {
    if (s.terms == 0) return;
    if (terms != 0) ++terms;
    v += s.v;
    mag += s.mag;
    err += s.err;
    fmag += s.fmag;
    terms += s.terms;
    unsure = unsure || s.unsure;
  }
  /// The sum and its bound.
  [[nodiscard]] E get() const {
    const ld k = static_cast<ld>(terms + 2);
    E r{v, err + k * prec<T>::eps * mag + k * prec<T>::eta};
    if (!(mag * 16 * k < prec<T>::max)) r.e = inf_ld;
    return r;
  }
  /// Whether the finite terms alone could overflow T (then even which non-finite value the sum
  /// takes in T is not known).
  [[nodiscard]] bool may_overflow() const {
    return unsure || !(fmag * 16 * static_cast<ld>(terms + 2) < prec<T>::max);
  }
};

/// out (rows × cols) = in (rows × k) W (k × cols) + b: the reference of a projection.
template <class T>
std::vector<E> project(const std::vector<T>& in, std::size_t rows, std::size_t k, const std::vector<T>& W,
                       std::size_t cols, const std::vector<T>& b) {
  std::vector<E> out(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      acc<T> a;
      for (std::size_t m = 0; m < k; ++m) a.add(E{static_cast<ld>(in[r * k + m]), 0}, E{static_cast<ld>(W[m * cols + c]), 0});
      if (!b.empty()) a.add(E{static_cast<ld>(b[c]), 0});
      // a sum whose finite terms may overflow T is not known in T, not even which non-finite
      // value it takes (X_0·(−inf) + 5.6e38 is −inf exactly and NaN in float): anything, then,
      // which makes every score it reaches uncertain (a finite value, an infinite bound)
      const E s = a.get();
      out[r * cols + c] = !std::isfinite(s.v) && a.may_overflow() ? E{0, inf_ld} : s;
    }
  return out;
}

/// Y (rows × cols) = Z W_O + b_O, or Z + b_O without W_O (Z of zc columns, W_O zc × cols or
/// empty): the reference of the output projection.
template <class T>
std::vector<E> project_out(const std::vector<E>& Z, std::size_t rows, std::size_t zc, const std::vector<T>& WO,
                           std::size_t cols, const std::vector<T>& b) {
  std::vector<E> Y(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t o = 0; o < cols; ++o) {
      acc<T> a;
      if (!WO.empty())
        for (std::size_t c = 0; c < zc; ++c) a.add(Z[r * zc + c], E{static_cast<ld>(WO[c * cols + o]), 0});
      else
        a.add(Z[r * zc + o]);
      if (!b.empty()) a.add(E{static_cast<ld>(b[o]), 0});
      Y[r * cols + o] = a.get();
    }
  return Y;
}

/// Which keys query t of one head of one sentence may see: every mask given must allow.
struct unit_masks {
  const char* keys = nullptr;  ///< n entries, or none
  const char* rows = nullptr;  ///< T × n (row stride n), or none
  bool causal = false;
  std::size_t tq = 0, n = 0;
  [[nodiscard]] std::size_t limit(std::size_t t) const {
    if (!causal) return n;
    return t + n + 1 > tq ? std::min(t + n + 1 - tq, n) : 0;
  }
  [[nodiscard]] bool kept(std::size_t t, std::size_t j) const {
    return j < limit(t) && (keys == nullptr || keys[j] != 0) && (rows == nullptr || rows[t * n + j] != 0);
  }
  [[nodiscard]] bool any(std::size_t t) const {
    for (std::size_t j = 0; j < n; ++j)
      if (kept(t, j)) return true;
    return false;
  }
  /// Whether some row sees key j.
  [[nodiscard]] bool seen(std::size_t j) const {
    for (std::size_t t = 0; t < tq; ++t)
      if (kept(t, j)) return true;
    return false;
  }
};

/// What a row is: the masks allow no key; its kept scores are all −inf after β (none); a kept
/// NaN; a kept +inf; finite in exact arithmetic; or not known in T (finite terms that may
/// overflow decide it).
enum class row_is { masked_out, none, nan, pos_inf, finite, uncertain };

/// One head of one sentence: T queries over n keys, the reference forward and backward.
template <class T>
struct attention_ref {
  std::size_t tq = 0, n = 0, dk = 0, dv = 0;
  std::vector<E> Q, K, V;  ///< T × d_k, n × d_k, n × d_v (row-major)
  ld f = 1, beta = 1;      ///< the scale and β, as the T attn computes with
  unit_masks m;
  attn::all_masked_policy policy = attn::all_masked_policy::zeros;

  // the forward
  std::vector<E> S, A, Y, L;   ///< scores T × n, weights T × n, Y T × d_v, L T
  std::vector<row_is> kind;    ///< per row
  std::vector<ld> dmax, ymax;  ///< per row: the largest error of β·s, the largest |β·s|
  std::vector<char> values_off;  ///< per row: its β·s may overflow T (nothing checked)

  [[nodiscard]] E q(std::size_t t, std::size_t i) const { return Q[t * dk + i]; }
  [[nodiscard]] E k(std::size_t j, std::size_t i) const { return K[j * dk + i]; }
  [[nodiscard]] E v(std::size_t j, std::size_t i) const { return V[j * dv + i]; }

  /// Whether some row may be all masked under the throw_error policy, and whether one surely is.
  bool may_throw = false, must_throw = false;

  void forward() {
    const ld eps = prec<T>::eps, eta = prec<T>::eta;
    S.assign(tq * n, E{});
    A.assign(tq * n, E{});
    Y.assign(tq * dv, E{});
    L.assign(tq, E{});
    kind.assign(tq, row_is::finite);
    dmax.assign(tq, 0);
    ymax.assign(tq, 0);
    values_off.assign(tq, 0);
    const ld nan = std::numeric_limits<ld>::quiet_NaN();
    const ld r = static_cast<ld>(n / 16 + 2);  // the one pass's rescales: one per key block at most
    for (std::size_t t = 0; t < tq; ++t) {
      bool uncertain = false;
      for (std::size_t j = 0; j < n; ++j) {
        acc<T> a;
        for (std::size_t i = 0; i < dk; ++i) a.add(q(t, i), k(j, i));
        E s = mul<T>(E{f, 0}, a.get());
        if (dk == 0) s = E{0, 0};  // the empty sum, whatever the scale
        S[t * n + j] = s;
        if (m.kept(t, j) && (a.may_overflow() || (std::isfinite(s.v) && !std::isfinite(s.e)))) uncertain = true;
      }
      if (!m.any(t)) {
        kind[t] = row_is::masked_out;
      } else if (uncertain) {
        kind[t] = row_is::uncertain;
      } else {
        bool is_nan = false, pos_inf = false, finite = false;
        for (std::size_t j = 0; j < n; ++j) {
          if (!m.kept(t, j)) continue;
          const ld s = S[t * n + j].v;
          if (std::isnan(s) || (beta == 0 && std::isinf(s))) is_nan = true;
          if (std::isinf(s) && ((s > 0) == (beta > 0))) pos_inf = true;
          if (std::isfinite(s)) finite = true;
        }
        kind[t] = is_nan ? row_is::nan : pos_inf ? row_is::pos_inf : finite ? row_is::finite : row_is::none;
      }
      const bool nothing = kind[t] == row_is::masked_out || kind[t] == row_is::none;
      if (nothing) must_throw = true;
      if (nothing || kind[t] == row_is::uncertain) may_throw = true;
      switch (kind[t]) {
        case row_is::masked_out:
        case row_is::none: {
          const ld w = policy == attn::all_masked_policy::uniform ? 1 / static_cast<ld>(n)
                       : policy == attn::all_masked_policy::nan   ? nan
                                                                  : 0;
          for (std::size_t j = 0; j < n; ++j) A[t * n + j] = E{w, 0};
          L[t] = E{policy == attn::all_masked_policy::nan ? nan : -inf_ld, 0};
          for (std::size_t i = 0; i < dv; ++i) {
            if (policy != attn::all_masked_policy::uniform) {
              Y[t * dv + i] = E{w, 0};
              continue;
            }
            acc<T> a;  // the mean of every value, masked or not
            for (std::size_t j = 0; j < n; ++j) a.add(E{w, eps * w}, v(j, i));
            Y[t * dv + i] = a.get();
          }
          break;
        }
        case row_is::uncertain:
          for (std::size_t j = 0; j < n; ++j) A[t * n + j] = E{nan, inf_ld};
          for (std::size_t i = 0; i < dv; ++i) Y[t * dv + i] = E{nan, inf_ld};
          L[t] = E{nan, inf_ld};
          break;
        case row_is::nan:
          for (std::size_t j = 0; j < n; ++j) A[t * n + j] = E{nan, 0};
          for (std::size_t i = 0; i < dv; ++i) Y[t * dv + i] = E{nan, 0};
          L[t] = E{nan, 0};
          break;
        case row_is::pos_inf: {
          std::size_t count = 0;
          for (std::size_t j = 0; j < n; ++j) count += m.kept(t, j) && std::isinf(S[t * n + j].v) && (S[t * n + j].v > 0) == (beta > 0);
          const ld w = 1 / static_cast<ld>(count);
          for (std::size_t j = 0; j < n; ++j) {
            const bool share = m.kept(t, j) && std::isinf(S[t * n + j].v) && (S[t * n + j].v > 0) == (beta > 0);
            A[t * n + j] = share ? E{w, eps * w} : E{0, 0};
          }
          L[t] = E{inf_ld, 0};
          break;
        }
        case row_is::finite: {
          ld mx = -inf_ld, Ym = 0, dm = 0;
          for (std::size_t j = 0; j < n; ++j) {
            const E s = S[t * n + j];
            if (!m.kept(t, j) || !std::isfinite(s.v)) continue;
            const ld y = beta * s.v;
            mx = std::max(mx, y);
            Ym = std::max(Ym, std::abs(y));
            dm = std::max(dm, std::abs(beta) * s.e + eps * std::abs(y) + eta);
          }
          ld sum = 0;
          for (std::size_t j = 0; j < n; ++j)
            if (m.kept(t, j) && std::isfinite(S[t * n + j].v)) sum += std::exp(beta * S[t * n + j].v - mx);
          const ld lse = mx + std::log(sum);
          const ld pass = eps * ((r + 2) * Ym + 2 * r + 4);
          const ld theta = 2 * dm + eps * (ld(4.1) * Ym + (static_cast<ld>(n) + 9) / 2) + pass;
          const bool off = !(Ym * 64 < prec<T>::max);
          values_off[t] = off ? 1 : 0;
          dmax[t] = dm;
          ymax[t] = Ym;
          L[t] = E{lse, off ? inf_ld : dm + eps * (ld(4.1) * Ym + static_cast<ld>(n) + 8) + 2 * eps * std::abs(lse) + pass};
          for (std::size_t j = 0; j < n; ++j) {
            if (!m.kept(t, j)) {
              A[t * n + j] = E{0, 0};
              continue;
            }
            const E s = S[t * n + j];
            if (!std::isfinite(s.v)) {  // β·s = −inf: weight 0
              A[t * n + j] = E{0, 0};
              continue;
            }
            const ld a = std::exp(beta * s.v - lse);
            A[t * n + j] = E{a, off ? inf_ld : (std::expm1(theta)) * a + eta};
          }
          break;
        }
      }
      if (kind[t] == row_is::finite || kind[t] == row_is::pos_inf) {
        for (std::size_t i = 0; i < dv; ++i) {
          acc<T> a;
          for (std::size_t j = 0; j < n; ++j)
            if (m.kept(t, j)) a.add(A[t * n + j], v(j, i));
          Y[t * dv + i] = a.get();
        }
      }
    }
  }

  // the backward: sums per entry of ∂L/∂Q, ∂L/∂K, ∂L/∂V
  std::vector<acc<T>> dQ, dK, dV;
  bool nan_everywhere = false;  ///< a row that sees no key (masks, or all −inf) under the nan policy
  std::vector<char> nan_query;  ///< rows whose ∂L/∂Q must be NaN (NaN rows, that nan policy)
  /// ∂L/∂S (T × n, S the scores before β: dS without the scale) per entry, and its rule.
  enum class ds_rule : char { bound, zero, nan, unchecked };
  std::vector<E> dS;
  std::vector<ds_rule> dS_rule;

  /// From dY (T × d_v), and the forward above (whose Y and L attn saved).
  void backward(const std::vector<E>& dY) {
    const ld eps = prec<T>::eps, eta = prec<T>::eta, nan = std::numeric_limits<ld>::quiet_NaN();
    dQ.assign(tq * dk, acc<T>{});
    dK.assign(n * dk, acc<T>{});
    dV.assign(n * dv, acc<T>{});
    nan_query.assign(tq, 0);
    dS.assign(tq * n, E{});
    dS_rule.assign(tq * n, ds_rule::zero);  // masked entries, rows whose weights do not move
    const auto dy = [&](std::size_t t, std::size_t i) { return dY[t * dv + i]; };
    const E NaN{nan, 0};
    for (std::size_t t = 0; t < tq; ++t) {
      // ∂L/∂S's rules per row: no key kept (masks, or every kept score −inf) NaN under nan (a
      // row of kept −inf: its kept entries; the masked ones are one query's to say), else 0;
      // a NaN row NaN where kept; a +inf row 0; a finite row its bound where kept, 0 where masked
      for (std::size_t j = 0; j < n; ++j) {
        ds_rule& rule = dS_rule[t * n + j];
        const bool kept = m.kept(t, j);
        if (kind[t] == row_is::uncertain) rule = ds_rule::unchecked;
        else if (kind[t] == row_is::masked_out && policy == attn::all_masked_policy::nan) rule = ds_rule::nan;
        else if ((kind[t] == row_is::none && policy == attn::all_masked_policy::nan) || kind[t] == row_is::nan)
          rule = kept ? ds_rule::nan : ds_rule::unchecked;
      }
      switch (kind[t]) {
        case row_is::masked_out:
        case row_is::none:
          if (policy == attn::all_masked_policy::uniform) {
            const ld w = 1 / static_cast<ld>(n);
            for (std::size_t j = 0; j < n; ++j)
              for (std::size_t i = 0; i < dv; ++i) dV[j * dv + i].add(E{w, eps * w}, dy(t, i));
          } else if (policy == attn::all_masked_policy::nan) {
            // every derivative NaN (docs/errors.md), the keys the row does not see too: a row
            // whose kept scores are all −inf as one the masks leave empty
            nan_everywhere = true;
            nan_query[t] = 1;
            for (std::size_t i = 0; i < dk; ++i) dQ[t * dk + i].add(NaN);
            for (std::size_t j = 0; j < n; ++j) {
              for (std::size_t i = 0; i < dk; ++i) dK[j * dk + i].add(NaN);
              for (std::size_t i = 0; i < dv; ++i) dV[j * dv + i].add(NaN);
            }
          }
          break;
        case row_is::uncertain:
        case row_is::nan:
          if (kind[t] == row_is::nan) nan_query[t] = 1;
          for (std::size_t i = 0; i < dk; ++i) dQ[t * dk + i].add(NaN);
          for (std::size_t j = 0; j < n; ++j) {
            const bool all_v = kind[t] == row_is::uncertain && policy == attn::all_masked_policy::uniform;
            // a NaN row makes every derivative NaN, a masked key's too (one query's rule,
            // docs/errors.md: "the whole row NaN: … every derivative"); its NaN is the row's own.
            // A row whose scores may overflow may be such a row: then nothing is held there.
            const bool every = true;
            if (!m.kept(t, j) && !all_v && !every) continue;
            if (m.kept(t, j) || every)
              for (std::size_t i = 0; i < dk; ++i) dK[j * dk + i].add(NaN);
            for (std::size_t i = 0; i < dv; ++i) dV[j * dv + i].add(NaN);
          }
          break;
        case row_is::pos_inf:  // the weights do not move: ∂L/∂V only
          for (std::size_t j = 0; j < n; ++j)
            if (m.kept(t, j))
              for (std::size_t i = 0; i < dv; ++i) dV[j * dv + i].add(A[t * n + j], dy(t, i));
          break;
        case row_is::finite: {
          // P = exp(β ŝ − L̂) from attn's L̂: off by the score's error, L's and two roundings
          const ld thp = dmax[t] + L[t].e + eps * (ymax[t] + std::abs(L[t].v)) + 3 * eps;
          acc<T> d;
          for (std::size_t i = 0; i < dv; ++i) d.add(dy(t, i), Y[t * dv + i]);
          const E D = d.get();
          for (std::size_t j = 0; j < n; ++j) {
            if (!m.kept(t, j)) continue;
            const ld pv = A[t * n + j].v;
            const E P{pv, (pv == 0 && !std::isfinite(S[t * n + j].v)) ? 0 : std::expm1(thp) * pv + eta};
            acc<T> u;
            for (std::size_t i = 0; i < dv; ++i) u.add(dy(t, i), v(j, i));
            const E x = sub<T>(u.get(), D);
            E dSj = mul<T>(E{f, 0}, mul<T>(E{beta, 0}, mul<T>(P, x)));
            // in another order two of the factors may underflow first (a subnormal β), and the
            // others then multiply what that lost
            dSj.e += eta * (1 + std::abs(x.v) + x.e) * (1 + std::abs(f)) * (1 + std::abs(beta)) * 2;
            // ∂L/∂S_tj = β P (u − D), before the scale: the same factors but f
            E g = mul<T>(E{beta, 0}, mul<T>(P, x));
            g.e += eta * (1 + std::abs(x.v) + x.e) * (1 + std::abs(beta)) * 2;
            dS[t * n + j] = g;
            dS_rule[t * n + j] = ds_rule::bound;
            for (std::size_t i = 0; i < dk; ++i) {
              dQ[t * dk + i].add(dSj, k(j, i));
              dK[j * dk + i].add(dSj, q(t, i));
            }
            for (std::size_t i = 0; i < dv; ++i) dV[j * dv + i].add(P, dy(t, i));
          }
          break;
        }
      }
    }
  }
};

/// Checks attn's got against r: within r.e of r.v when r is checkable.
template <class T>
void expect_near(const char* what, std::size_t a, std::size_t b, T got, E r) {
  if (!checkable(r)) return;
  ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(got) - r.v) <= r.e, "%s (%zu, %zu) is %.21Lg, reference %.21Lg, bound %Lg",
                  what, a, b, static_cast<ld>(got), r.v, r.e);
}

/// Checks a gradient entry: reached by no term, exactly `init` (0 unless accumulating); else
/// within the bound of its sum (with init as one more term).
template <class T>
void expect_gradient(const char* what, std::size_t a, std::size_t b, T got, acc<T> s, bool accumulate, T init) {
  if (s.terms == 0) {
    ATTN_FUZZ_CHECK(got == (accumulate ? init : T(0)), "%s (%zu, %zu) is %.21Lg: nothing reaches it (masked), so %s",
                    what, a, b, static_cast<ld>(got), accumulate ? "what it held" : "0");
    return;
  }
  if (accumulate) s.add(E{static_cast<ld>(init), 0});
  expect_near<T>(what, a, b, got, s.get());
}

/// The bytes that hold a T's value: all but x87 long double's 6 bytes of padding (which a copy
/// need not keep).
template <class T>
inline constexpr std::size_t value_bytes =
    std::numeric_limits<T>::digits == 64 && sizeof(T) > 10 ? std::size_t{10} : sizeof(T);

/// The same bits (of the value), or both NaN: which NaN (its sign and payload) an operation with
/// two NaN operands returns is the hardware's choice of operand, and compilers commute a + b and
/// pick an FMA form freely, so the same sums in another code path (a partial tile of the product,
/// a piece of rows on a thread) may give −NaN where one thread gave +NaN (fuzz_heads,
/// heads/threads_nan_sign). The promise "bit for bit" is about numbers; a NaN stays a NaN.
template <class T>
bool same_number(const T& a, const T& b) {
  if (a != a && b != b) return true;
  return std::memcmp(&a, &b, value_bytes<T>) == 0;
}

/// Bits of n numbers equal.
template <class T>
bool same_bits(const T* a, const T* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (!same_number(a[i], b[i])) return false;
  return true;
}

/// Bits of two buffers equal.
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && same_bits(a.data(), b.data(), a.size());
}

/// A number for the clean inputs: small multiples of 1/16 mostly, else moderate (±2^±4), finite.
template <class T>
T clean_number(reader& r) {
  const std::uint8_t tag = r.byte();
  const T x = static_cast<T>(static_cast<std::int8_t>(r.byte())) / T(16);
  if (tag < 0xC0) return x;
  return std::ldexp(x, static_cast<int>(tag & 7u) - 4);
}

/// Any number (reader::number), but for long double no raw bits (an x87 pattern may be invalid):
/// a special value instead.
template <class T>
T wild_number(reader& r) {
  if constexpr (sizeof(T) == sizeof(ld) && !std::is_same_v<T, double>) {
    const std::uint8_t tag = r.byte();
    if (tag < 0x60) return static_cast<T>(static_cast<std::int8_t>(r.byte())) / T(16);
    if (tag < 0xF0) return std::ldexp(static_cast<T>(static_cast<std::int8_t>(r.byte())) / T(16), (tag & 0x3F) - 32);
    return reader::special<T>(tag & 0x0Fu);
  } else {
    return r.template number<T>();
  }
}

/// x filled from the input: any number (wild: NaN, ±inf, subnormals, huge) or a clean one.
template <class T>
void fill_numbers(reader& r, std::vector<T>& x, bool wild) {
  for (T& v : x) v = wild ? wild_number<T>(r) : clean_number<T>(r);
}

/// Garbage for a place no output may see: NaN of either sign, ±inf, ±max.
template <class T>
T garbage(reader& r) {
  static constexpr unsigned pick[6] = {2, 3, 0, 1, 4, 5};
  return reader::special<T>(pick[r.byte() % 6]);
}

/// The thread counts the threads overloads get: the usual, and huge ones.
inline std::size_t thread_count(std::uint8_t b) {
  static constexpr std::size_t counts[8] = {0, 1, 2, 3, 4, static_cast<std::size_t>(-1), std::size_t{1} << 61, 2};
  return counts[b % 8];
}

/// thrown(f), but any other exception (std::length_error, std::bad_alloc, …: none is documented
/// for these calls) fails the check, naming it.
template <class F>
int thrown_documented(const char* what, F&& f) {
  try {
    return thrown(f);
  } catch (const std::exception& e) {
    ATTN_FUZZ_CHECK(false, "%s threw an undocumented exception: %s", what, e.what());
  }
  return -1;
}

/// The entry point of a target whose run<T>(reader&) checks one input: the first byte picks
/// float, double or long double.
#define ATTN_FUZZ_FLOAT_DOUBLE_LONG_DOUBLE(run)                                       \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
    attn_fuzz::reader r(data, size);                                                  \
    switch (r.byte() % 3) {                                                           \
      case 0: run<float>(r); break;                                                   \
      case 1: run<double>(r); break;                                                  \
      default: run<long double>(r); break;                                            \
    }                                                                                 \
    return 0;                                                                         \
  }

}  // namespace attn_fuzz
