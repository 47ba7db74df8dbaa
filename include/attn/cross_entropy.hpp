#pragma once
/// \file attn/cross_entropy.hpp
/// Cross-entropy over every position of a sentence at once (the unit's §10: one pass trains every
/// next word; NEXT_SECTIONS.md, "Training"; docs/training.md). Logits Z (T × V, one row per
/// position), targets y (T, std::int64_t, PyTorch's type):
///
///   ℓ_t  = −log softmax(z_t)[y_t] = (m_t − z_{t,y_t}) + log1p(Σ_{j ≠ argmax} exp(z_{t,j} − m_t)),
///          m_t = max_j z_{t,j};
///   L    = (1/C)·Σ_{t counted} ℓ_t,   C = #{t : y_t ≠ ignore_index};
///   ∂L/∂z_t = (softmax(z_t) − onehot(y_t))·(g/C)  (g the upstream ∂/∂L, 1 for the loss itself),
///
/// and 0 for a position whose target is the ignore index (−100 by default, as PyTorch's). ℓ_t is
/// attn::log_softmax's formula at y_t, negated (the max by softmax.hpp's scan, log1p of the sum
/// below the max), its exps formed once by the softmax's vector kernel (exp_shifted) in chunks
/// of 256 and kept, when the gradient is written, as the gradient's row: one exp per logit for
/// the loss and the gradient together. No exp overflows and no two large numbers cancel, so
/// logits of ±1e4 give the loss to a few ulps of ℓ_t.
///
/// Policies (docs/training.md, docs/errors.md): no position counted (C = 0, all ignored, or
/// T = 0) gives L = 0 and a zero gradient (PyTorch's mean is NaN there; a NaN would poison the
/// optimizer's state on a padded-out batch); a counted row holding a NaN or a +inf, or nothing but
/// −inf, gives ℓ_t = NaN and a NaN gradient row (as PyTorch's); a −inf logit is a token of
/// probability 0 (its gradient entry 0), and a −inf at the target gives ℓ_t = +inf; the rows of
/// ignored positions are never read. A target outside [0, V) other than the ignore index throws
/// domain_error naming the function, the position and the value, before anything is written.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "attn/detail/overlap.hpp"
#include "attn/detail/rows.hpp"
#include "attn/detail/softmax_row.hpp"
#include "attn/error.hpp"
#include "attn/matrix.hpp"
#include "attn/softmax.hpp"
#include "attn/vector.hpp"

namespace attn {

/// What cross_entropy counts: a position whose target equals `ignore_index` is left out of the
/// mean (loss 0, gradient 0). −100 is PyTorch's default.
struct cross_entropy_options {
  std::int64_t ignore_index = -100;  ///< the target of a position that does not count
};

namespace detail {

[[noreturn]] ATTN_NOINLINE inline void throw_bad_target(const char* where, std::size_t t,
                                                        std::int64_t y, std::size_t V,
                                                        std::int64_t ignore) {
  raise<domain_error>(std::string(where) + ": the target at position " + std::to_string(t) +
                      " is " + std::to_string(y) + ", outside [0, " + std::to_string(V) +
                      ") (the vocabulary, the columns of the logits) and not the ignore index " +
                      std::to_string(ignore));
}

/// Checks the shapes and every target; returns the number of positions that count.
template <class T>
std::size_t check_cross_entropy(const char* where, MatrixView<const T> Z,
                                std::span<const std::int64_t> targets,
                                const cross_entropy_options& opt) {
  check_equal(where, "size of the targets", targets.size(), "rows of the logits", Z.rows());
  check_nonempty(where, "the vocabulary (columns of the logits)", Z.cols());
  const std::size_t V = Z.cols();
  std::size_t count = 0;
  for (std::size_t t = 0; t < targets.size(); ++t) {
    const std::int64_t y = targets[t];
    if (y == opt.ignore_index) continue;
    if (y < 0 || static_cast<std::uint64_t>(y) >= V) throw_bad_target(where, t, y, V, opt.ignore_index);
    ++count;
  }
  return count;
}

/// The chunk of a row whose exps a pass forms at once: on the stack when the caller gives no row
/// to write them into (the forward, the accumulating backward); the sum below the max is summed
/// chunk by chunk, so every mode forms the same bits.
inline constexpr std::size_t cross_entropy_chunk = 256;

/// One counted row's pieces: m (the max), below = Σ_{j ≠ a} exp(z_j − m) (a the first index of
/// the max, so ties at the max count 1 each beyond the first), and the row's kind.
template <class T>
struct cross_entropy_row {
  T max, below;
  std::size_t arg;  ///< a
  bool finite;
};

/// m, the first index of the max, and below: the exps by exp_shifted (the softmax's vector kernel)
/// into `e` (a row's worth when `whole`, else one chunk reused), e_a set to 0, each chunk summed
/// by sum_of and the chunks' sums added in sum_t<T>. With `whole`, e keeps the row's exps
/// (e_a = 0) for the caller to scale.
template <class T>
cross_entropy_row<T> cross_entropy_row_of(const T* z, std::size_t V, T* e, bool whole) {
  const row_scan<T> s = scan_row(z, V, T(1), nullptr);
  if (classify(z, V, s, nullptr, T(1)) != row_kind::finite) return {T(0), T(0), 0, false};
  std::size_t a = 0;
  while (a + 1 < V && !(z[a] == s.max)) ++a;  // (bounded: the max is one of the z_j)
  sum_t<T> below = 0;
  for (std::size_t j0 = 0; j0 < V; j0 += cross_entropy_chunk) {
    const std::size_t len = V - j0 < cross_entropy_chunk ? V - j0 : cross_entropy_chunk;
    T* ej = whole ? e + j0 : e;
    exp_shifted(z + j0, ej, len, T(1), s.max);
    if (a >= j0 && a < j0 + len) ej[a - j0] = T(0);
    below += static_cast<sum_t<T>>(sum_of(ej, len));
  }
  return {s.max, static_cast<T>(below), a, true};
}

/// ℓ = −((z_y − m) − log1p(below)): log_softmax's formula at y, negated.
template <class T>
T cross_entropy_row_loss(T zy, const cross_entropy_row<T>& r) {
  if (!r.finite) return std::numeric_limits<T>::quiet_NaN();
  return -(scaled_minus(T(1), zy, r.max) - log1p(r.below));
}

/// The gradient row (softmax(z) − onehot(y))·c, p_j = e_j/S, S = 1 + below: at the target, when
/// it is the argmax (z_y = m), p_y − 1 = −below/S is formed from the other terms (no cancellation
/// as p_y → 1); elsewhere e_j·(c/S). Written: g holds the row's exps (cross_entropy_row_of with
/// whole, e_a = 0), scaled in place. Accumulated: the exps once more, a chunk at a time on the
/// stack, with the factor c/S, added.
template <class T>
void cross_entropy_row_gradient(const T* z, std::size_t V, std::size_t y, T zy,
                                const cross_entropy_row<T>& r, T c, T* g, bool accumulate) {
  if (!r.finite) {
    if (accumulate)
      for (std::size_t j = 0; j < V; ++j) g[j] += std::numeric_limits<T>::quiet_NaN();
    else
      fill(g, V, std::numeric_limits<T>::quiet_NaN());
    return;
  }
  const T f = c / (T(1) + r.below);
  const T gy = zy == r.max ? -(r.below * f) : exp(zy - r.max) * f - c;
  if (!accumulate) {
    scale(g, V, f);
    g[r.arg] = f;  // e_a = exp(0) = 1 (set to 0 for the sum)
    g[y] = gy;
    return;
  }
  T e[cross_entropy_chunk];
  for (std::size_t j0 = 0; j0 < V; j0 += cross_entropy_chunk) {
    const std::size_t len = V - j0 < cross_entropy_chunk ? V - j0 : cross_entropy_chunk;
    exp_shifted(z + j0, e, len, T(1), r.max, nullptr, f);
    if (y >= j0 && y < j0 + len) e[y - j0] = gy;
    for (std::size_t j = 0; j < len; ++j) g[j0 + j] += e[j];
  }
}

template <class T>
T cross_entropy_views(const char* where, MatrixView<const T> Z, std::span<const std::int64_t> targets,
                      std::span<T> losses, MatrixView<T> grad, T upstream, bool accumulate,
                      const cross_entropy_options& opt) {
  const std::size_t count = check_cross_entropy(where, Z, targets, opt);
  const std::size_t rows = Z.rows(), V = Z.cols();
  const bool want_grad = grad.data() != nullptr;
  if (!losses.empty()) {
    check_equal(where, "size of the losses", losses.size(), "rows of the logits", rows);
    if (overlaps(region_of(losses), region_of(Z))) throw_overlap(where, "the losses", "the logits");
  }
  if (want_grad) {
    check_shape(where, "dL/dlogits", grad.rows(), grad.cols(), rows, V);
    const region<T> zr = region_of(Z), gr = region_of(grad);
    if (!same_numbers(zr, gr) && overlaps(gr, zr)) throw_overlap(where, "dL/dlogits", "the logits");
  }
  const T c = count == 0 ? T(0) : upstream / static_cast<T>(count);
  const bool write = want_grad && !accumulate;  // the exps go into the gradient's row
  T chunk[cross_entropy_chunk];
  sum_t<T> total = 0;
  for (std::size_t t = 0; t < rows; ++t) {
    const std::int64_t yt = targets[t];
    if (yt == opt.ignore_index) {
      if (!losses.empty()) losses[t] = T(0);
      if (write) fill(grad.row(t).data(), V, T(0));
      continue;
    }
    const auto y = static_cast<std::size_t>(yt);
    const T* z = Z.row(t).data();
    const T zy = z[y];  // read before the gradient's row (which may be z's) is written
    T* g = want_grad ? grad.row(t).data() : nullptr;
    const cross_entropy_row<T> r = cross_entropy_row_of(z, V, write ? g : chunk, write);
    const T loss = cross_entropy_row_loss(zy, r);
    if (want_grad) cross_entropy_row_gradient(z, V, y, zy, r, c, g, accumulate);
    if (!losses.empty()) losses[t] = loss;
    total += static_cast<sum_t<T>>(loss);
  }
  return count == 0 ? T(0) : static_cast<T>(total / static_cast<sum_t<T>>(count));
}

}  // namespace detail

/// L = (1/C)·Σ_{counted t} −log softmax(z_t)[y_t] (the file comment): logits T × V (any
/// matrix_like), targets of T entries in [0, V) or the ignore index. No position counted: 0
/// (PyTorch: NaN). dimension_error (targets' size ≠ T, V = 0), domain_error (a target out of range).
template <matrix_like Z>
[[nodiscard]] matrix_scalar_of<Z> cross_entropy(const Z& logits, std::span<const std::int64_t> targets,
                                                const cross_entropy_options& opt = {}) {
  using T = matrix_scalar_of<Z>;
  const auto zv = as_view(logits);
  return detail::cross_entropy_views<T>("attn::cross_entropy", MatrixView<const T>(zv), targets, {},
                                        {}, T(1), false, opt);
}

/// As above, and writes each position's loss ℓ_t into `losses` (T entries; 0 at an ignored
/// position, NaN for a counted row with a NaN, a +inf or nothing but −inf). Nothing is written on
/// an error; `losses` over the logits: overlap_error.
template <matrix_like Z, mutable_vector_like Losses>
  requires std::same_as<matrix_scalar_of<Z>, scalar_of<Losses>>
matrix_scalar_of<Z> cross_entropy(const Z& logits, std::span<const std::int64_t> targets, Losses&& losses,
                                  const cross_entropy_options& opt = {}) {
  using T = matrix_scalar_of<Z>;
  const auto zv = as_view(logits);
  const std::span<T> ls = as_mutable_span(losses);
  if (ls.empty() && targets.size() != 0)  // an empty output would read as "not asked for"
    detail::check_equal("attn::cross_entropy", "size of the losses", 0, "rows of the logits", targets.size());
  return detail::cross_entropy_views<T>("attn::cross_entropy", MatrixView<const T>(zv), targets, ls,
                                        {}, T(1), false, opt);
}

/// ∂L/∂Z = (softmax(z_t) − onehot(y_t))·(upstream/C) for every counted t, 0 for an ignored one;
/// written into `dlogits` (T × V), or added to what it holds when `accumulate` (ignored rows then
/// untouched). Returns L, the same bits as cross_entropy. dlogits may be the logits themselves
/// (the same numbers), not a part of them (overlap_error). No position counted: a zero gradient.
/// Errors as cross_entropy, plus dimension_error for dlogits' shape; nothing written on an error.
template <matrix_like Z, mutable_matrix_like G>
  requires std::same_as<matrix_scalar_of<Z>, matrix_scalar_of<G>>
matrix_scalar_of<Z> cross_entropy_backward(const Z& logits, std::span<const std::int64_t> targets,
                                           G&& dlogits, const cross_entropy_options& opt = {},
                                           matrix_scalar_of<Z> upstream = 1, bool accumulate = false) {
  using T = matrix_scalar_of<Z>;
  const auto zv = as_view(logits);
  const MatrixView<T> gv = as_mutable_view(dlogits);
  const char* where = "attn::cross_entropy_backward";
  if (gv.data() == nullptr)  // an empty view: its shape is checked (it reads as "not asked for")
    detail::check_shape(where, "dL/dlogits", gv.rows(), gv.cols(), zv.rows(), zv.cols());
  return detail::cross_entropy_views<T>(where, MatrixView<const T>(zv), targets, {}, gv, upstream,
                                        accumulate, opt);
}

}  // namespace attn
