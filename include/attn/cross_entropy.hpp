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
/// attn::log_softmax's entry y_t negated, bit for bit (the same max, the same sum below the max,
/// the same log1p: softmax.hpp's kernels): no exp overflows and no cancellation of two large
/// numbers, so logits of ±1e4 give the loss to a few ulps of ℓ_t.
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

/// One counted row's pieces: m (the max), below = Σ_{j ≠ argmax} exp(z_j − m) (ties at the max
/// count 1 each beyond the first: softmax.hpp's sum_below_max), and the row's kind.
template <class T>
struct cross_entropy_row {
  T max, below;
  bool finite;
};

template <class T>
cross_entropy_row<T> cross_entropy_row_of(const T* z, std::size_t V) {
  const row_scan<T> s = scan_row(z, V, T(1), nullptr);
  if (classify(z, V, s, nullptr, T(1)) != row_kind::finite) return {T(0), T(0), false};
  return {s.max, sum_below_max(z, V, T(1), s.max, nullptr), true};
}

/// ℓ = −((z_y − m) − log1p(below)): log_softmax's entry y, negated.
template <class T>
T cross_entropy_row_loss(const T* z, std::size_t y, const cross_entropy_row<T>& r) {
  if (!r.finite) return std::numeric_limits<T>::quiet_NaN();
  return -(scaled_minus(T(1), z[y], r.max) - log1p(r.below));
}

/// The gradient row (softmax(z) − onehot(y))·c, written or added. p_j = e_j/S with
/// e_j = exp(z_j − m) (exp_shifted, its factor c/S), S = 1 + below. At the target, when it is the
/// argmax (z_y = m), p_y − 1 = −below/S is formed from the other terms (no cancellation as p_y → 1).
template <class T>
void cross_entropy_row_gradient(const T* z, std::size_t V, std::size_t y,
                                const cross_entropy_row<T>& r, T c, T* g, bool accumulate) {
  if (!r.finite) {
    fill(g, V, std::numeric_limits<T>::quiet_NaN());
    return;
  }
  const T zy = z[y];  // read before g (which may be z itself) is written
  const T S = T(1) + r.below;
  const T f = c / S;
  const T gy = zy == r.max ? -(r.below * f) : exp(zy - r.max) * f - c;
  if (!accumulate) {
    exp_shifted(z, g, V, T(1), r.max, nullptr, f);
    g[y] = gy;
    return;
  }
  constexpr std::size_t chunk = 256;  // e_j·f a chunk at a time on the stack: no allocation
  T e[chunk];
  for (std::size_t j0 = 0; j0 < V; j0 += chunk) {
    const std::size_t len = V - j0 < chunk ? V - j0 : chunk;
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
  sum_t<T> total = 0;
  for (std::size_t t = 0; t < rows; ++t) {
    const std::int64_t yt = targets[t];
    if (yt == opt.ignore_index) {
      if (!losses.empty()) losses[t] = T(0);
      if (want_grad && !accumulate) fill(grad.row(t).data(), V, T(0));
      continue;
    }
    const auto y = static_cast<std::size_t>(yt);
    const T* z = Z.row(t).data();
    const cross_entropy_row<T> r = cross_entropy_row_of(z, V);
    const T loss = cross_entropy_row_loss(z, y, r);
    if (want_grad) cross_entropy_row_gradient(z, V, y, r, c, grad.row(t).data(), accumulate);
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
