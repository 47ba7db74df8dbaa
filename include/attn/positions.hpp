#pragma once
/// \file attn/positions.hpp
/// Where each word is (the unit's §8; conventions of NEXT_SECTIONS.md, docs/positions.md).
/// Attention alone is blind to order: these add it, to X or to the queries and keys.
///
///   sinusoidal, interleaved (the paper):  PE[p, 2i] = sin(p·ω_i),  PE[p, 2i+1] = cos(p·ω_i),
///   concatenated:                         PE[p, i]  = sin(p·ω_i),  PE[p, d/2+i] = cos(p·ω_i),
///                                         ω_i = base^(−2i/d), base = 10000, d even;
///   learned:                              X_t += P[offset + t]       (∂L/∂P[offset + t] += dY_t);
///   rotary (RoPE) on each head's d_k numbers, pair i = (x_2i, x_2i+1) (interleaved) or
///   (x_i, x_i+d_k/2) (half-split):        (a, b) ↦ (a cos φ − b sin φ, a sin φ + b cos φ),
///                                         φ = p·θ_i, θ_i = base^(−2i/d_k);
///   ALiBi: head i's logits gain           −m_i·(p_t − j),  m_i the paper's slopes.
///
/// Row t of each sentence of a batch (B sentences of T rows, stacked) sits at position
/// offset + t: with a cache of n − T earlier positions the new rows' offset is n − T. Angles are
/// formed in a wider type (double for float, long double otherwise) and each sine and cosine
/// rounded once to T, so an entry of PE is within one rounding of sin(p·ω_i) whatever p.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cmath>
#include <concepts>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "attn/detail/bias.hpp"
#include "attn/detail/overlap.hpp"
#include "attn/error.hpp"
#include "attn/matrix.hpp"
#include "attn/vector.hpp"

namespace attn {

/// Where PE's sines and cosines go: pairs side by side (the paper) or the d/2 sines, then the d/2
/// cosines (the same numbers: column 2i of the first is column i of the second, 2i + 1 is d/2 + i).
enum class sinusoid_layout { interleaved, concatenated };

/// Which numbers RoPE rotates together: (x_2i, x_2i+1) (the paper's, "interleaved") or
/// (x_i, x_i+d_k/2) ("half-split", as many models ship it; the same rotation on permuted numbers).
enum class rotary_form { interleaved, half_split };

/// Sinusoidal encodings: the layout and the base of the frequencies (10000).
struct sinusoid {
  sinusoid_layout layout = sinusoid_layout::interleaved;  ///< where the sines and cosines go
  double base = 10000;  ///< ω_i = base^(−2i/d); finite and > 0, else domain_error
};

/// Rotary encodings: the form and the base of the frequencies (10000).
struct rotary {
  rotary_form form = rotary_form::interleaved;  ///< which numbers are paired
  double base = 10000;  ///< θ_i = base^(−2i/d_k); finite and > 0, else domain_error
};

namespace detail {

/// The type angles are formed in: double for float, long double otherwise.
template <real T>
using angle_type = std::conditional_t<std::is_same_v<T, float>, double, long double>;

/// base^(−2i/d), in W.
template <class W>
[[nodiscard]] inline W pair_frequency(double base, std::size_t i, std::size_t d) {
  return std::pow(static_cast<W>(base), -static_cast<W>(2 * i) / static_cast<W>(d));
}

/// The columns of pair i of d numbers: (2i, 2i + 1), or (i, d/2 + i) split in halves.
struct pair_columns {
  std::size_t first, second;
};
[[nodiscard]] constexpr pair_columns columns_of_pair(std::size_t i, std::size_t d,
                                                     bool interleaved) noexcept {
  return interleaved ? pair_columns{2 * i, 2 * i + 1} : pair_columns{i, d / 2 + i};
}

[[noreturn]] ATTN_NOINLINE inline void throw_odd_width(const char* where, const char* what,
                                                       std::size_t d) {
  raise<dimension_error>(std::string(where) + ": " + what + " is " + std::to_string(d) +
                         " but must be even (sines and cosines come in pairs)");
}

[[noreturn]] ATTN_NOINLINE inline void throw_bad_base(const char* where) {
  raise<domain_error>(std::string(where) + ": the base of the frequencies must be finite and above 0");
}

[[noreturn]] ATTN_NOINLINE inline void throw_not_sentences(const char* where, const char* what,
                                                           std::size_t rows, std::size_t batch) {
  raise<dimension_error>(std::string(where) + ": " + what + " has " + std::to_string(rows) +
                         " rows, which is not " + std::to_string(batch) +
                         " sentences of equal length (the batch)");
}

[[noreturn]] ATTN_NOINLINE inline void throw_positions_past_table(const char* where,
                                                                  std::size_t offset,
                                                                  std::size_t count,
                                                                  std::size_t table_rows) {
  raise<dimension_error>(std::string(where) + ": positions " + std::to_string(offset) + " to " +
                         std::to_string(offset + count - 1) + " need " +
                         std::to_string(offset + count) + " rows of the table but it has " +
                         std::to_string(table_rows));
}

[[noreturn]] ATTN_NOINLINE inline void throw_heads_split(const char* where, std::size_t cols,
                                                         std::size_t heads) {
  raise<dimension_error>(std::string(where) + ": " + std::to_string(cols) +
                         " columns are not " + std::to_string(heads) +
                         " heads of an even size (RoPE rotates pairs within each head)");
}

[[noreturn]] ATTN_NOINLINE inline void throw_more_queries_than_keys(const char* where,
                                                                    std::size_t tq, std::size_t n) {
  raise<dimension_error>(std::string(where) + ": " + std::to_string(tq) + " queries over " +
                         std::to_string(n) + " keys: the queries are the last positions of the keys");
}

inline void check_base(const char* where, double base) {
  if (!(base > 0 && base - base == 0)) throw_bad_base(where);
}

/// T, the rows of each sentence, after checking that `rows` is `batch` sentences of T rows.
inline std::size_t sentence_rows(const char* where, const char* what, std::size_t rows,
                                 std::size_t batch) {
  if (batch == 0 || rows % batch != 0) throw_not_sentences(where, what, rows, batch);
  return rows / batch;
}

/// Adds (or writes, when `add` is false) PE[offset + t] to row t of each sentence of X.
template <class T>
void sinusoids_into(const char* where, MatrixView<T> X, std::size_t offset, std::size_t batch,
                    const sinusoid& s, bool add) {
  const std::size_t d = X.cols();
  if (d % 2 != 0) throw_odd_width(where, "the width d", d);
  check_base(where, s.base);
  const std::size_t tq = sentence_rows(where, "X", X.rows(), batch);
  using W = angle_type<T>;
  const bool interleaved = s.layout == sinusoid_layout::interleaved;
  for (std::size_t i = 0; i < d / 2; ++i) {
    const W w = pair_frequency<W>(s.base, i, d);
    const pair_columns c = columns_of_pair(i, d, interleaved);
    for (std::size_t t = 0; t < tq; ++t) {
      const W angle = static_cast<W>(offset + t) * w;
      const T sn = static_cast<T>(std::sin(angle)), cs = static_cast<T>(std::cos(angle));
      for (std::size_t b = 0; b < batch; ++b) {
        T* row = X.row(b * tq + t).data();
        row[c.first] = add ? row[c.first] + sn : sn;
        row[c.second] = add ? row[c.second] + cs : cs;
      }
    }
  }
}

/// Positions between two whose cosines and sines rotate_pairs takes from std::cos and std::sin;
/// in between it turns the previous position's (cos, sin) by the step θ_i.
inline constexpr std::size_t rotary_restart = 32;

/// Rotates pair i of every head of row t of each sentence by sign·(offset + t)·θ_i: row by row,
/// the cosines and sines of one position formed once (64 pairs at a time, on the stack) for
/// every head and sentence, each row read and written once. The cosines and sines are formed in
/// W (double for float, long double for double): from std::cos and std::sin every
/// rotary_restart-th row, and in between by the angle-addition recurrence
/// (c, s) ← (c·cos θ − s·sin θ, s·cos θ + c·sin θ), two multiplies and an add each instead of
/// two library calls (3.3× a read-once loop before, docs/performance.md). Each step adds at most
/// 4ε_W of absolute error (the rounding of cos θ, sin θ and of the step's products and sums, on
/// numbers of magnitude ≤ 1), so over at most 31 steps 124ε_W: 2^−46 for float (ε_float is 2^−23),
/// 2^−57 for double with x87's long double (ε_double is 2^−52) — below a thirtieth of T's ulp,
/// within the 3ε of the rounding that tests/test_positions.cpp allows. Where W is not at least
/// 8 bits wider than T (long double itself), every row takes std::cos and std::sin.
template <class T>
void rotate_pairs(const char* where, MatrixView<T> x, std::size_t heads, std::size_t offset,
                  std::size_t batch, const rotary& r, bool inverse) {
  const std::size_t cols = x.cols();
  if (heads == 0 || cols % heads != 0 || (cols / heads) % 2 != 0)
    throw_heads_split(where, cols, heads);
  check_base(where, r.base);
  const std::size_t tq = sentence_rows(where, "the matrix", x.rows(), batch);
  const std::size_t dk = cols / heads, pairs = dk / 2;
  using W = angle_type<T>;
  const bool interleaved = r.form == rotary_form::interleaved;
  constexpr std::size_t chunk = 64;
  constexpr bool recur = std::numeric_limits<W>::digits >= std::numeric_limits<T>::digits + 8;
  T cs[chunk], sn[chunk];
  W theta[chunk], cw[chunk], sw[chunk], c_step[chunk], s_step[chunk];
  for (std::size_t i0 = 0; i0 < pairs; i0 += chunk) {
    const std::size_t np = pairs - i0 < chunk ? pairs - i0 : chunk;
    for (std::size_t i = 0; i < np; ++i) {
      theta[i] = pair_frequency<W>(r.base, i0 + i, dk);
      c_step[i] = std::cos(theta[i]);
      s_step[i] = std::sin(theta[i]);
    }
    for (std::size_t t = 0; t < tq; ++t) {
      if (!recur || t % rotary_restart == 0) {
        for (std::size_t i = 0; i < np; ++i) {
          const W angle = static_cast<W>(offset + t) * theta[i];
          cw[i] = std::cos(angle);
          sw[i] = std::sin(angle);
        }
      } else {
        for (std::size_t i = 0; i < np; ++i) {
          const W c = cw[i] * c_step[i] - sw[i] * s_step[i];
          sw[i] = sw[i] * c_step[i] + cw[i] * s_step[i];
          cw[i] = c;
        }
      }
      for (std::size_t i = 0; i < np; ++i) {
        cs[i] = static_cast<T>(cw[i]);
        sn[i] = inverse ? -static_cast<T>(sw[i]) : static_cast<T>(sw[i]);
      }
      for (std::size_t b = 0; b < batch; ++b) {
        T* row = x.row(b * tq + t).data();
        for (std::size_t h = 0; h < heads; ++h) {
          T* head = row + h * dk;
          for (std::size_t i = 0; i < np; ++i) {
            const pair_columns c = columns_of_pair(i0 + i, dk, interleaved);
            const T a = head[c.first], v = head[c.second];
            head[c.first] = a * cs[i] - v * sn[i];
            head[c.second] = a * sn[i] + v * cs[i];
          }
        }
      }
    }
  }
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Sinusoidal encodings
// ---------------------------------------------------------------------------------------------

/// Writes PE[offset + t] into row t of `out` (T × d, d even; a batch of B sentences of T rows
/// each gets the same rows). dimension_error for an odd d or rows that are not B sentences,
/// domain_error for a base that is not finite and positive; nothing written then.
template <mutable_matrix_like M>
void sinusoidal_encoding(M&& out, std::size_t offset = 0, std::size_t batch = 1,
                         const sinusoid& s = {}) {
  detail::sinusoids_into<matrix_scalar_of<M>>("attn::sinusoidal_encoding", as_mutable_view(out), offset,
                                             batch, s, false);
}

/// Returns PE for positions offset … offset + positions − 1 (positions × d).
template <real T>
[[nodiscard]] Matrix<T> sinusoidal_encoding(std::size_t positions, std::size_t d,
                                            std::size_t offset = 0, const sinusoid& s = {}) {
  if (d % 2 != 0) detail::throw_odd_width("attn::sinusoidal_encoding", "the width d", d);
  detail::check_base("attn::sinusoidal_encoding", s.base);
  Matrix<T> pe(positions, d);
  detail::sinusoids_into<T>("attn::sinusoidal_encoding", pe.view(), offset, 1, s, false);
  return pe;
}

/// X_t += PE[offset + t] for row t of each of the `batch` sentences stacked in X (B·T × d), in
/// place. Errors as sinusoidal_encoding, X untouched then.
template <mutable_matrix_like M>
void add_sinusoidal_encoding(M&& X, std::size_t offset = 0, std::size_t batch = 1,
                             const sinusoid& s = {}) {
  detail::sinusoids_into<matrix_scalar_of<M>>("attn::add_sinusoidal_encoding", as_mutable_view(X), offset,
                                             batch, s, true);
}

/// out = X + PE: row t of each sentence of X (B·T × d) plus PE[offset + t], into `out` of X's
/// shape (out may be X itself; a partial overlap is an overlap_error). Errors as
/// sinusoidal_encoding, out untouched then.
template <matrix_like Xm, mutable_matrix_like M>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<M>>
void add_sinusoidal_encoding(const Xm& X, M&& out, std::size_t offset = 0, std::size_t batch = 1,
                             const sinusoid& s = {}) {
  using T = matrix_scalar_of<M>;
  const char* where = "attn::add_sinusoidal_encoding";
  const auto xv = as_view(X);
  const MatrixView<const T> x = xv;
  const MatrixView<T> o = as_mutable_view(out);
  detail::check_shape(where, "the output", o.rows(), o.cols(), x.rows(), x.cols());
  if (x.cols() % 2 != 0) detail::throw_odd_width(where, "the width d", x.cols());
  detail::check_base(where, s.base);
  (void)detail::sentence_rows(where, "X", x.rows(), batch);
  const auto xr = detail::region_of(x), orr = detail::region_of(o);
  if (!detail::same_numbers(xr, orr) && detail::overlaps(xr, orr))
    detail::throw_overlap(where, "the output", "X");
  if (!detail::same_numbers(xr, orr))
    for (std::size_t t = 0; t < x.rows(); ++t)
      for (std::size_t i = 0; i < x.cols(); ++i) o(t, i) = x(t, i);
  detail::sinusoids_into<T>(where, o, offset, batch, s, true);
}

// ---------------------------------------------------------------------------------------------
// Learned positions
// ---------------------------------------------------------------------------------------------

/// X_t += P[offset + t] for row t of each of the `batch` sentences stacked in X (B·T × d), P the
/// table (T_max × d). dimension_error (X untouched) when the widths differ, the rows are not B
/// sentences, or offset + T > T_max; overlap_error when X and the table share a number.
template <mutable_matrix_like M, matrix_like P>
  requires std::same_as<matrix_scalar_of<M>, matrix_scalar_of<P>>
void add_learned_positions(M&& X, const P& table, std::size_t offset = 0, std::size_t batch = 1) {
  const char* where = "attn::add_learned_positions";
  using T = matrix_scalar_of<M>;
  const MatrixView<T> x = as_mutable_view(X);
  const auto pv = as_view(table);
  const MatrixView<const T> p = pv;
  detail::check_equal(where, "columns of X", x.cols(), "columns of the table", p.cols());
  if (detail::overlaps(detail::region_of(x), detail::region_of(p))) detail::throw_overlap(where, "X", "the table");
  const std::size_t tq = detail::sentence_rows(where, "X", x.rows(), batch);
  if (tq != 0 && (offset > p.rows() || tq > p.rows() - offset))
    detail::throw_positions_past_table(where, offset, tq, p.rows());
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t t = 0; t < tq; ++t) {
      const auto* src = p.row(offset + t).data();
      auto* dst = x.row(b * tq + t).data();
      for (std::size_t i = 0; i < x.cols(); ++i) dst[i] += src[i];
    }
}

/// The backward of add_learned_positions: ∂L/∂P[offset + t] += Σ_b dY_(b·T + t), added to what
/// dTable holds (a table's gradient accumulates over the batch and the steps); ∂L/∂X is dY
/// itself. Errors as add_learned_positions, dTable untouched then.
template <matrix_like G, mutable_matrix_like D>
  requires std::same_as<matrix_scalar_of<G>, matrix_scalar_of<D>>
void learned_positions_backward(const G& dY, D&& dTable, std::size_t offset = 0,
                                std::size_t batch = 1) {
  const char* where = "attn::learned_positions_backward";
  using T = matrix_scalar_of<D>;
  const auto gv = as_view(dY);
  const MatrixView<const T> g = gv;
  const MatrixView<T> d = as_mutable_view(dTable);
  detail::check_equal(where, "columns of dL/dY", g.cols(), "columns of the table's gradient", d.cols());
  if (detail::overlaps(detail::region_of(d), detail::region_of(g)))
    detail::throw_overlap(where, "the table's gradient", "dL/dY");
  const std::size_t tq = detail::sentence_rows(where, "dL/dY", g.rows(), batch);
  if (tq != 0 && (offset > d.rows() || tq > d.rows() - offset))
    detail::throw_positions_past_table(where, offset, tq, d.rows());
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t t = 0; t < tq; ++t) {
      const auto* src = g.row(b * tq + t).data();
      auto* dst = d.row(offset + t).data();
      for (std::size_t i = 0; i < g.cols(); ++i) dst[i] += src[i];
    }
}

// ---------------------------------------------------------------------------------------------
// Rotary encodings (RoPE)
// ---------------------------------------------------------------------------------------------

/// Rotates, in place, each head's pairs of row t of each sentence by φ = (offset + t)·θ_i:
/// x is B·T × h·d_k (Q or K, head i in columns [i·d_k, (i+1)·d_k), d_k even). With a cache of n
/// positions and T new queries: queries at offset n − T, keys at 0. dimension_error when the
/// columns are not h heads of an even size or the rows not B sentences; domain_error for a bad
/// base; x untouched then.
template <mutable_matrix_like M>
void apply_rotary(M&& x, std::size_t heads = 1, std::size_t offset = 0, std::size_t batch = 1,
                  const rotary& r = {}) {
  detail::rotate_pairs<matrix_scalar_of<M>>("attn::apply_rotary", as_mutable_view(x), heads, offset,
                                            batch, r, false);
}

/// The backward of apply_rotary, in place on the gradient: a rotation's transpose is its inverse,
/// so ∂L/∂x = R(−φ) ∂L/∂y, pair by pair. Errors as apply_rotary.
template <mutable_matrix_like M>
void rotary_backward(M&& grad, std::size_t heads = 1, std::size_t offset = 0,
                     std::size_t batch = 1, const rotary& r = {}) {
  detail::rotate_pairs<matrix_scalar_of<M>>("attn::rotary_backward", as_mutable_view(grad), heads,
                                            offset, batch, r, true);
}

// ---------------------------------------------------------------------------------------------
// ALiBi
// ---------------------------------------------------------------------------------------------

namespace detail {
/// Slope i of h heads (alibi_slopes' rule; i < h): 2^(−8(k+1)/c') for the k and c' of the rule,
/// rounded once to T.
template <real T>
[[nodiscard]] constexpr T alibi_slope(std::size_t i, std::size_t h) {
  std::size_t c = 1;
  while (c * 2 <= h) c *= 2;  // the largest power of 2 not above h
  const auto slope = [](std::size_t k, std::size_t heads) {  // 2^(−8(k+1)/heads)
    return static_cast<T>(std::exp2(-8.0L * static_cast<long double>(k + 1) /
                                    static_cast<long double>(heads)));
  };
  return i < c ? slope(i, c) : slope(2 * (i - c), 2 * c);
}
}  // namespace detail

/// The paper's slopes for h = out.size() heads: for h a power of 2, m_i = 2^(−8(i+1)/h); else,
/// with c the largest power of 2 below h, the c slopes of c heads, then the slopes of 2c heads at
/// the even indices 0, 2, 4, …, the first h − c of them (h = 3: 1/16, 1/256, 1/4). Each is
/// 2^(−e) for an exact e, rounded once to T.
template <real T>
void alibi_slopes(std::span<T> out) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = detail::alibi_slope<T>(i, out.size());
}

/// The slopes of alibi_slopes(span) for `heads` heads, returned.
template <real T = double>
[[nodiscard]] std::vector<T> alibi_slopes(std::size_t heads) {
  std::vector<T> m(heads);
  alibi_slopes(std::span<T>(m));
  return m;
}

/// Writes ALiBi's bias of one head into `out` (T × n): out(t, j) = −slope·(p_t − j), p_t = t + n − T
/// the query's position (T = n without a cache). No absolute value: without a causal mask the
/// bias of a later key is positive. For a lesson's table, or as an additive bias on the logits.
template <mutable_matrix_like M>
void alibi_bias(M&& out, matrix_scalar_of<M> slope) {
  using T = matrix_scalar_of<M>;
  const MatrixView<T> o = as_mutable_view(out);
  const std::size_t tq = o.rows(), n = o.cols();
  if (tq > n) detail::throw_more_queries_than_keys("attn::alibi_bias", tq, n);
  for (std::size_t t = 0; t < tq; ++t)
    for (std::size_t j = 0; j < n; ++j) o(t, j) = detail::alibi_term(slope, t + n - tq, j);
}

}  // namespace attn
