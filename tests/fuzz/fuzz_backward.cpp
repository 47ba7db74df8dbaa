// libFuzzer target: backward into caller buffers (notes, or keys ≠ values) with dot or
// scaled_dot, in float or double, at 0 to 80 notes of length 0 to 8, with any dL/dc, β, mask and
// policy, and now and then a buffer of the wrong size. Checks (docs/errors.md, "Fuzzing"):
// exactly the documented exceptions, every gradient untouched on a throw; masked notes get
// exactly 0 whatever they hold; a NaN row gives NaN; a row whose weights do not move gives
// zero score gradients; otherwise every gradient lies within its bound of the long double
// reference computed from the weights softmax gives (backward's own arithmetic; the weights'
// error is fuzz_attend's and fuzz_softmax's to check).
//
// Then, on the same input, backward_from_weights and backward_from_forward from attend's own
// weights α̂ and context ĉ (any of the right sizes where attend throws), now and then with one
// weight or one context number too many: exactly the documented exceptions, nothing written
// then; a note of weight 0 gets exactly 0; NaN weights give NaN score gradients; from_weights
// lies within the same bounds of the reference formed from α̂; and backward_from_forward is
// backward_from_weights to the bit where it falls back to it (docs/derivatives.md: the mask
// keeps no note, d_v = 0, a weight above 1/2, a non-finite weight, context, dL/dc or query),
// else within docs/derivatives.md's bound ρ of it.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_common.hpp"

namespace {

using namespace attn_fuzz;

/// Compares the gradients gs, gq, gk, gv (backward's rules from the weights alpha, which move
/// where flows) with the long double reference, within their bounds. Skips inputs that hold inf
/// or NaN (where they count) and those whose intermediates come within a factor 16(n + d + 8)
/// of T's range.
template <class T>
void check_reference(const char* what, const look<T>& in, const std::vector<T>& g, std::span<const T> alpha,
                     bool flows, T beta, const guarded<T>& gs, const guarded<T>& gq, const guarded<T>& gk,
                     const guarded<T>& gv) {
  const std::size_t n = in.n, dk = in.dk, dv = in.dv, dq = in.dq;
  const ld eps = std::numeric_limits<T>::epsilon(), eta = std::numeric_limits<T>::denorm_min();
  const ld max = std::numeric_limits<T>::max();
  bool finite_in = true;
  ld qmax = 0, kmax = 0, gmax = 0;
  for (const T x : in.q) finite_in = finite_in && std::isfinite(x), qmax = std::max(qmax, std::abs(static_cast<ld>(x)));
  for (const T x : g) finite_in = finite_in && std::isfinite(x), gmax = std::max(gmax, std::abs(static_cast<ld>(x)));
  std::vector<ld> u(n, 0);
  ld G = 0;
  for (std::size_t j = 0; j < n; ++j) {
    if (alpha[j] == T(0)) continue;  // never read
    if (!std::isfinite(alpha[j])) finite_in = false;
    ld Gj = 0;
    for (std::size_t i = 0; i < dk; ++i) {
      finite_in = finite_in && std::isfinite(in.keys[j * dk + i]);
      kmax = std::max(kmax, std::abs(static_cast<ld>(in.keys[j * dk + i])));
    }
    for (std::size_t i = 0; i < dv; ++i) {
      const T v = in.value(j, i);
      finite_in = finite_in && std::isfinite(v);
      u[j] += static_cast<ld>(g[i]) * static_cast<ld>(v);
      Gj += std::abs(static_cast<ld>(g[i]) * static_cast<ld>(v));
    }
    G = std::max(G, Gj);
  }
  const ld nd = static_cast<ld>(n + dk + dv + 8);
  const ld range = std::max(std::abs(static_cast<ld>(beta)), ld(1)) * (2 * G + gmax) * (1 + qmax) * (1 + kmax) *
                   (static_cast<ld>(n) + 1);
  if (!finite_in || !(range * 16 * nd < max)) return;

  const ld b = beta, f = in.factor();
  ld ubar = 0;
  for (std::size_t j = 0; j < n; ++j)
    if (alpha[j] != T(0)) ubar += static_cast<ld>(alpha[j]) * u[j];
  std::vector<ld> a(n, 0), ea(n, 0);  // ∂L/∂s_j and the bound on its error
  for (std::size_t j = 0; j < n; ++j) {
    if (!flows || alpha[j] == T(0)) continue;
    a[j] = b * static_cast<ld>(alpha[j]) * (u[j] - ubar);
    // ⟨g, v_j⟩ − ⟨g, c⟩ rounds by (n + d_v + 4)·ε·G; products that underflow lose (n + d_v + 2)·η
    ea[j] = std::abs(b) * static_cast<ld>(alpha[j]) * ld(1.03) *
                (static_cast<ld>(n + dv + 4) * eps * G + static_cast<ld>(n + dv + 2) * eta) +
            eps * std::abs(a[j]) + eta * (2 * G + 2);  // β·α_j itself may underflow, then times ≤ 2G
    ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(gs.data[j]) - a[j]) <= ea[j],
                    "%s: dL/ds_%zu is %.17g, reference %.17Lg, bound %Lg", what, j, double(gs.data[j]), a[j], ea[j]);
  }
  // ∂L/∂q = Σ_j a_j f k_j
  for (std::size_t i = 0; i < dq; ++i) {
    ld ref = 0, bound = 0, mag = 0, ksum = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (a[j] == 0 && ea[j] == 0) continue;  // notes with a_j = 0 add nothing, whatever they hold
      const ld kj = in.keys[j * dk + i];
      ref += a[j] * f * kj;
      mag += std::abs(a[j] * f * kj);
      bound += ea[j] * f * std::abs(kj);
      ksum += std::abs(kj);
    }
    bound += static_cast<ld>(n + 3) * eps * mag + eta * (static_cast<ld>(n) + ksum);
    ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(gq.data[i]) - ref) <= bound, "%s: dL/dq_%zu is %.17g, reference %.17Lg, bound %Lg",
                    what, i, double(gq.data[i]), ref, bound);
  }
  // ∂L/∂k_j = a_j f q (+ α_j g when the notes are also the values); ∂L/∂v_j = α_j g
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t i = 0; i < dk; ++i) {
      const ld qi = in.q[i];
      ld ref = a[j] * f * qi;
      ld bound = ea[j] * f * std::abs(qi) + 2 * eps * std::abs(ref) + eta * (1 + std::abs(qi));
      if (!in.separate && alpha[j] != T(0)) {
        const ld ag = static_cast<ld>(alpha[j]) * static_cast<ld>(g[i]);
        ref += ag;
        bound += 2 * eps * std::abs(ag) + eps * std::abs(ref) + eta;
      }
      ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(gk.data[j * dk + i]) - ref) <= bound,
                      "%s: dL/d%s_%zu[%zu] is %.17g, reference %.17Lg, bound %Lg", what, in.separate ? "k" : "h", j, i,
                      double(gk.data[j * dk + i]), ref, bound);
    }
    for (std::size_t i = 0; i < (in.separate ? dv : 0); ++i) {
      const ld ref = static_cast<ld>(alpha[j]) * static_cast<ld>(g[i]);
      ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(gv.data[j * dv + i]) - ref) <= eps * std::abs(ref) + eta,
                      "%s: dL/dv_%zu[%zu] is %.17g, reference %.17Lg", what, j, i, double(gv.data[j * dv + i]), ref);
    }
  }
}

/// backward's checks (the file comment): s are the scores (score_all's), k the row's kind.
template <class T>
void check_backward(const look<T>& in, const std::vector<T>& g, const attn::options& opt, const mask_view& mask,
                    std::span<const T> s, kind k, T beta) {
  const std::size_t n = in.n, dk = in.dk, dv = in.dv, dq = in.dq;
  const int expected = in.broken != 0 || n == 0                                                        ? 1
                       : !beta_ok<T>(in.beta)                                                          ? 2
                       : k == kind::none_kept && in.policy == attn::all_masked_policy::throw_error ? 2
                                                                                                      : 0;
  guarded<T> gs(n + (in.broken == 1 ? 1 : 0)), gq(dq), gk(n * dk), gv(in.separate ? n * dv : 0);
  const int got = thrown([&] {
    attn::MatrixView<T> gkv(gk.data.data(), n, dk);
    in.with_score([&](const auto& score) {
      if (in.separate) {
        attn::MatrixView<T> gvv(gv.data.data(), n, dv);
        attn::backward(in.q, in.key_view(), in.value_view(), score, g, {gs.data, gq.data, gkv, gvv}, opt);
      } else {
        attn::backward(in.q, in.key_view(), score, g, {gs.data, gq.data, gkv}, opt);
      }
    });
  });
  ATTN_FUZZ_CHECK(got == expected, "backward threw %d, expected %d", got, expected);
  if (got != 0) {
    ATTN_FUZZ_CHECK(gs.untouched() && gq.untouched() && gk.untouched() && gv.untouched(), "a throw wrote to an output");
    return;
  }

  // The weights backward works from: softmax of the same scores (the same code, bit for bit).
  std::vector<T> alpha(n);
  attn::softmax(s, std::span<T>(alpha), opt);
  const bool nan_row = k == kind::nan || (k == kind::none_kept && in.policy == attn::all_masked_policy::nan);
  if (nan_row) {
    for (std::size_t j = 0; j < n; ++j) ATTN_FUZZ_CHECK(std::isnan(gs.data[j]), "NaN row: dL/ds_%zu is %g", j, double(gs.data[j]));
    return;
  }
  // Masked notes: exactly 0, whatever they or dL/dc hold (except under uniform on a row where
  // every note is masked: then c is the mean of the values and dL/dv_j = g/n).
  const bool uniform_row = k == kind::none_kept && in.policy == attn::all_masked_policy::uniform;
  for (std::size_t j = 0; j < n && !uniform_row; ++j) {
    if (mask.kept(j)) continue;
    ATTN_FUZZ_CHECK(gs.data[j] == T(0), "masked note %zu: dL/ds is %g", j, double(gs.data[j]));
    for (std::size_t i = 0; i < dk; ++i) ATTN_FUZZ_CHECK(gk.data[j * dk + i] == T(0), "masked note %zu: dL/dk", j);
    for (std::size_t i = 0; i < (in.separate ? dv : 0); ++i)
      ATTN_FUZZ_CHECK(gv.data[j * dv + i] == T(0), "masked note %zu: dL/dv", j);
  }
  const bool flows = k == kind::finite;  // pos_inf and all-masked rows: the weights do not move
  if (!flows)
    for (std::size_t j = 0; j < n; ++j)
      ATTN_FUZZ_CHECK(gs.data[j] == T(0), "weights that do not move: dL/ds_%zu is %g", j, double(gs.data[j]));

  check_reference<T>("backward", in, g, alpha, flows, beta, gs, gq, gk, gv);
}

/// The rules backward_from_weights and backward_from_forward follow whatever the weights
/// alpha: a note of weight 0 gets exactly 0; where the mask keeps no note (flows false) the
/// weights are held fixed, so every dL/ds is 0 but a NaN weight's (the nan policy's), which is
/// NaN; else a NaN weight makes every score gradient of a note of nonzero weight NaN.
template <class T>
void check_weight_rules(const char* what, const look<T>& in, std::span<const T> alpha, bool flows,
                        const guarded<T>& gs, const guarded<T>& gk, const guarded<T>& gv) {
  const std::size_t n = in.n, dk = in.dk, dv = in.dv;
  bool any_nan = false;
  for (std::size_t j = 0; j < n; ++j) any_nan = any_nan || std::isnan(alpha[j]);
  for (std::size_t j = 0; j < n; ++j) {
    if (!flows)
      ATTN_FUZZ_CHECK(std::isnan(alpha[j]) ? std::isnan(gs.data[j]) : gs.data[j] == T(0),
                      "%s: weights held fixed, dL/ds_%zu is %g (weight %g)", what, j, double(gs.data[j]),
                      double(alpha[j]));
    if (alpha[j] != T(0)) {
      if (flows && any_nan)
        ATTN_FUZZ_CHECK(std::isnan(gs.data[j]), "%s: NaN weights, dL/ds_%zu is %g", what, j, double(gs.data[j]));
      continue;
    }
    ATTN_FUZZ_CHECK(gs.data[j] == T(0), "%s: weight 0, dL/ds_%zu is %g", what, j, double(gs.data[j]));
    for (std::size_t i = 0; i < dk; ++i)
      ATTN_FUZZ_CHECK(gk.data[j * dk + i] == T(0), "%s: weight 0, dL/dk_%zu[%zu] is %g", what, j, i,
                      double(gk.data[j * dk + i]));
    for (std::size_t i = 0; i < (in.separate ? dv : 0); ++i)
      ATTN_FUZZ_CHECK(gv.data[j * dv + i] == T(0), "%s: weight 0, dL/dv_%zu[%zu] is %g", what, j, i,
                      double(gv.data[j * dv + i]));
  }
}

/// Whether x and y agree within bound (equal, both NaN, or |x − y| ≤ bound).
template <class T>
bool agree(T x, T y, ld bound) {
  return x == y || (std::isnan(x) && std::isnan(y)) ||
         std::abs(static_cast<ld>(x) - static_cast<ld>(y)) <= bound;
}

/// backward_from_weights and backward_from_forward from attend's weights and context (the file
/// comment). wrong: 1 one weight too many, 2 one context number too many.
template <class T>
void check_from_forward(const look<T>& in, const std::vector<T>& g, const attn::options& opt, const mask_view& mask,
                        std::span<const T> s, T beta, int wrong) {
  const std::size_t n = in.n, dk = in.dk, dv = in.dv, dq = in.dq;
  std::vector<T> alpha(n + (wrong == 1 ? 1 : 0), T(0)), c(dv + (wrong == 2 ? 1 : 0), T(0));
  in.with_score([&](const auto& score) {
    (void)thrown([&] {  // where attend throws, the weights and the context stay 0
      const auto keep = [&](const auto& f) {
        std::copy(f.weights.begin(), f.weights.end(), alpha.begin());
        std::copy(f.context.begin(), f.context.end(), c.begin());
      };
      if (in.separate)
        keep(attn::attend(in.q, in.key_view(), in.value_view(), score, opt));
      else
        keep(attn::attend(in.q, in.key_view(), score, opt));
    });
  });
  dump<T>("attend's weights", alpha);
  dump<T>("attend's context", c);
  guarded<T> ws(n + (in.broken == 1 ? 1 : 0)), wq(dq), wk(n * dk), wv(in.separate ? n * dv : 0);
  guarded<T> fs(n + (in.broken == 1 ? 1 : 0)), fq(dq), fk(n * dk), fv(in.separate ? n * dv : 0);
  const attn::saved_forward<T> saved_weights{alpha}, saved_both{alpha, c};
  const auto call = [&](bool from_forward, guarded<T>& gs, guarded<T>& gq, guarded<T>& gk, guarded<T>& gv) {
    return thrown([&] {
      attn::MatrixView<T> gkv(gk.data.data(), n, dk);
      in.with_score([&](const auto& score) {
        if (in.separate) {
          attn::MatrixView<T> gvv(gv.data.data(), n, dv);
          if (from_forward)
            attn::backward(in.q, in.key_view(), in.value_view(), score, saved_both, g, {gs.data, gq.data, gkv, gvv},
                           opt);
          else
            attn::backward(in.q, in.key_view(), in.value_view(), score, saved_weights, g,
                           {gs.data, gq.data, gkv, gvv}, opt);
        } else if (from_forward) {
          attn::backward(in.q, in.key_view(), score, saved_both, g, {gs.data, gq.data, gkv}, opt);
        } else {
          attn::backward(in.q, in.key_view(), score, saved_weights, g, {gs.data, gq.data, gkv}, opt);
        }
      });
    });
  };
  // sizes first (the buffers, the weights, the mask), then β, then (backward_from_forward) the
  // context's size; the all-masked policy is not applied again: the weights carry it
  const int expect_w = in.broken != 0 || n == 0 || wrong == 1 ? 1 : !beta_ok<T>(in.beta) ? 2 : 0;
  const int expect_f = expect_w != 0 ? expect_w : wrong == 2 ? 1 : 0;
  const int got_w = call(false, ws, wq, wk, wv), got_f = call(true, fs, fq, fk, fv);
  ATTN_FUZZ_CHECK(got_w == expect_w, "backward_from_weights threw %d, expected %d", got_w, expect_w);
  ATTN_FUZZ_CHECK(got_f == expect_f, "backward_from_forward threw %d, expected %d", got_f, expect_f);
  if (got_f != 0)
    ATTN_FUZZ_CHECK(fs.untouched() && fq.untouched() && fk.untouched() && fv.untouched(),
                    "backward_from_forward: a throw wrote to an output");
  if (got_w != 0) {
    ATTN_FUZZ_CHECK(ws.untouched() && wq.untouched() && wk.untouched() && wv.untouched(),
                    "backward_from_weights: a throw wrote to an output");
    return;
  }
  const std::span<const T> a(alpha.data(), n);
  bool kept = mask.n == 0;
  for (std::size_t j = 0; j < mask.n; ++j) kept = kept || mask.kept(j);
  check_weight_rules<T>("backward_from_weights", in, a, kept, ws, wk, wv);
  check_reference<T>("backward_from_weights", in, g, a, kept, beta, ws, wq, wk, wv);
  if (got_f != 0) return;
  check_weight_rules<T>("backward_from_forward", in, a, kept, fs, fk, fv);

  // The one pass, or backward_from_weights to the bit.
  bool one_pass = kept && dv > 0;
  for (const T x : a) one_pass = one_pass && std::isfinite(x) && x <= T(0.5);
  for (const T x : c) one_pass = one_pass && std::isfinite(x);
  for (const T x : g) one_pass = one_pass && std::isfinite(x);
  for (const T x : in.q) one_pass = one_pass && std::isfinite(x);
  if (!one_pass) {
    const auto same = [](const guarded<T>& x, const guarded<T>& y) {
      return x.data.empty() || std::memcmp(x.data.data(), y.data.data(), x.data.size() * sizeof(T)) == 0;
    };
    ATTN_FUZZ_CHECK(same(fs, ws) && same(fq, wq) && same(fk, wk) && same(fv, wv),
                    "backward_from_forward's fallback is not backward_from_weights to the bit");
    return;
  }
  // docs/derivatives.md's bound, against backward_from_weights from the same weights, with the
  // terms of products that underflow: w_j = ⟨|g|, |v_j|⟩, U = Σ α_k w_k, σ_j = |β| α_j (U + w_j),
  // M = max |β s_j| over kept notes, ρ = (3n + d_v + ⌈n/64⌉ + 16 + 11 M) ε.
  const ld eps = std::numeric_limits<T>::epsilon(), eta = std::numeric_limits<T>::denorm_min();
  const ld bl = std::abs(static_cast<ld>(beta)), f = in.factor();
  ld M = 0, U = 0;
  bool finite_in = true;
  for (std::size_t j = 0; j < n; ++j)
    if (mask.kept(j)) M = std::max(M, std::abs(static_cast<ld>(beta) * static_cast<ld>(s[j])));
  std::vector<ld> w(n, 0);
  ld wmax = 0, qmax = 0, kmax = 0;
  for (const T x : in.q) qmax = std::max(qmax, std::abs(static_cast<ld>(x)));
  for (std::size_t j = 0; j < n; ++j) {
    if (a[j] == T(0)) continue;
    for (std::size_t i = 0; i < dk; ++i) {
      finite_in = finite_in && std::isfinite(in.keys[j * dk + i]);
      kmax = std::max(kmax, std::abs(static_cast<ld>(in.keys[j * dk + i])));
    }
    for (std::size_t i = 0; i < dv; ++i) w[j] += std::abs(static_cast<ld>(g[i]) * static_cast<ld>(in.value(j, i)));
    wmax = std::max(wmax, w[j]);
    U += static_cast<ld>(a[j]) * w[j];
  }
  // as check_reference: no intermediate within a factor 16(n + d + 8) of T's range
  const ld nd = static_cast<ld>(n + dk + dv + 8);
  const ld range = (bl + 1) * 2 * (wmax + U) * (1 + qmax) * (1 + kmax) * (static_cast<ld>(n) + 1);
  if (!finite_in || !std::isfinite(M) || !(range * 16 * nd < static_cast<ld>(std::numeric_limits<T>::max()))) return;
  const ld rho = (3 * static_cast<ld>(n) + static_cast<ld>(dv) + static_cast<ld>((n + 63) / 64) + 16 + 11 * M) * eps;
  ld gsum = 0;
  for (const T x : g) gsum += std::abs(static_cast<ld>(x));
  std::vector<ld> sigma(n), slack(n);
  for (std::size_t j = 0; j < n; ++j) {
    sigma[j] = bl * static_cast<ld>(a[j]) * (U + w[j]);
    // products that underflow: in ū each of attend's context numbers may lose (n + b + 2)·η (its
    // n products, b block factors, the division), which ⟨g, ĉ⟩ multiplies by Σ|g_i|
    slack[j] = eta * (2 + 2 * (U + w[j])) +
               bl * static_cast<ld>(a[j]) * eta * (static_cast<ld>(n + dv + 4) + static_cast<ld>(n + (n + 63) / 64 + 2) * gsum);
    ATTN_FUZZ_CHECK(agree(fs.data[j], ws.data[j], rho * sigma[j] + slack[j]),
                    "backward_from_forward: dL/ds_%zu is %.17g, backward_from_weights' %.17g, bound %Lg", j,
                    double(fs.data[j]), double(ws.data[j]), rho * sigma[j] + slack[j]);
  }
  for (std::size_t i = 0; i < dq; ++i) {
    ld bound = 0, ksum = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (a[j] == T(0)) continue;
      const ld kj = std::abs(static_cast<ld>(in.keys[j * dk + i]));
      bound += (2 * rho * sigma[j] + slack[j]) * f * kj;
      ksum += kj;
    }
    bound += 2 * static_cast<ld>(n + 3) * eta * (1 + ksum);
    ATTN_FUZZ_CHECK(agree(fq.data[i], wq.data[i], bound),
                    "backward_from_forward: dL/dq_%zu is %.17g, backward_from_weights' %.17g, bound %Lg", i,
                    double(fq.data[i]), double(wq.data[i]), bound);
  }
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t i = 0; i < dk; ++i) {
      ld bound = (2 * rho * sigma[j] + slack[j]) * f * std::abs(static_cast<ld>(in.q[i])) + 2 * eta;
      if (!in.separate) bound += rho * static_cast<ld>(a[j]) * std::abs(static_cast<ld>(g[i])) + 2 * eta;
      ATTN_FUZZ_CHECK(agree(fk.data[j * dk + i], wk.data[j * dk + i], bound),
                      "backward_from_forward: dL/d%s_%zu[%zu] is %.17g, backward_from_weights' %.17g, bound %Lg",
                      in.separate ? "k" : "h", j, i, double(fk.data[j * dk + i]), double(wk.data[j * dk + i]), bound);
    }
    for (std::size_t i = 0; i < (in.separate ? dv : 0); ++i) {
      const ld bound = rho * static_cast<ld>(a[j]) * std::abs(static_cast<ld>(g[i])) + eta;
      ATTN_FUZZ_CHECK(agree(fv.data[j * dv + i], wv.data[j * dv + i], bound),
                      "backward_from_forward: dL/dv_%zu[%zu] is %.17g, backward_from_weights' %.17g, bound %Lg", j, i,
                      double(fv.data[j * dv + i]), double(wv.data[j * dv + i]), bound);
    }
  }
}

template <class T>
void run(reader& r) {
  const look<T> in(r, 2);
  std::vector<T> g(in.dv + (in.broken == 2 ? 1 : 0));
  for (T& x : g) x = r.template number<T>();
  const std::uint8_t wb = r.byte();  // (past the end of the older inputs: 0)
  const int wrong = wb < 0xF0 ? 0 : 1 + wb % 2;
  const mask_view mask(in.mask);
  const attn::options opt{.beta = in.beta, .mask = mask.span(), .if_all_masked = in.policy};
  const T beta = beta_as<T>(in.beta);
  in.dump();
  dump<T>("dL/dc", g);
  if (verbose) std::fprintf(stderr, "wrong %d\n", wrong);
  std::vector<T> s(in.n);
  in.with_score([&](const auto& score) { attn::score_all<T>(score, in.q, in.key_view(), s); });
  const kind k = classify<T>(s, beta, mask);
  check_backward<T>(in, g, opt, mask, s, k, beta);
  check_from_forward<T>(in, g, opt, mask, s, beta, wrong);
}

}  // namespace

ATTN_FUZZ_FLOAT_OR_DOUBLE(run)
