#pragma once
/// \file attn/feed_forward.hpp
/// The position-wise feed-forward layer of a transformer block (the unit's §9; docs/block.md):
///
///   H⁻ = X W₁ + b₁,   H = act(H⁻),   Y = H W₂ + b₂,
///
/// X (rows × d_model), W₁ (d_model × d_ff), W₂ (d_ff × d_out), each weight in either layout
/// (attn/linear.hpp), act ReLU, GELU or GELU tanh (attn/activations.hpp). Its backward:
///
///   ∂L/∂H = dY W₂ᵀ,  ∂L/∂H⁻ = ∂L/∂H ⊙ act′(H⁻),  ∂L/∂X = ∂L/∂H⁻ W₁ᵀ,
///   ∂L/∂W₂ = Hᵀ dY,  ∂L/∂b₂ = Σ dY,  ∂L/∂W₁ = Xᵀ ∂L/∂H⁻,  ∂L/∂b₁ = Σ ∂L/∂H⁻.
///
/// The forward keeps H⁻ and H in a cache (the hidden layer before and after the activation,
/// reachable for lessons), with a fingerprint of what it was given; the backward refuses other
/// inputs (forward_mismatch_error). Calls of the same shapes allocate nothing.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "attn/activations.hpp"
#include "attn/detail/fingerprint.hpp"
#include "attn/error.hpp"
#include "attn/linear.hpp"
#include "attn/matrix.hpp"
#include "attn/vector.hpp"

namespace attn {

/// The feed-forward layer's parameters, borrowed: W₁, b₁ (or none), W₂, b₂ (or none) and the
/// activation (ReLU unless given: PyTorch's TransformerEncoderLayer's default).
template <real T>
struct feed_forward_parameters {
  StridedMatrixView<const T> W_1{};  ///< d_model × d_ff
  std::span<const T> b_1{};          ///< d_ff, or none
  StridedMatrixView<const T> W_2{};  ///< d_ff × d_out
  std::span<const T> b_2{};          ///< d_out, or none
  activation act = activation::relu; ///< between the two products
};

/// What the forward keeps and the backward reads, sized by the forward and reused.
template <real T>
struct feed_forward_cache {
  Matrix<T> pre;          ///< H⁻ = X W₁ + b₁ (rows × d_ff)
  Matrix<T> hidden;       ///< H = act(H⁻)
  Matrix<T> grad_hidden;  ///< the backward's ∂L/∂H, then ∂L/∂H⁻ (written by every backward)
  std::uint64_t forward[6] = {};  ///< fingerprints of X, W₁, b₁, W₂, b₂ and act; [0] = 0: none
};

/// Where feed_forward_backward writes; a view left empty is not computed. Each is overwritten,
/// or added to when `accumulate`.
template <real T>
struct feed_forward_gradients {
  MatrixView<T> input{};       ///< ∂L/∂X
  StridedMatrixView<T> W_1{};  ///< ∂L/∂W₁ (in its own layout)
  std::span<T> b_1{};          ///< ∂L/∂b₁
  StridedMatrixView<T> W_2{};  ///< ∂L/∂W₂
  std::span<T> b_2{};          ///< ∂L/∂b₂
  bool accumulate = false;     ///< add to what the views hold
};

namespace detail {

/// forward_mismatch_error "<where>: the cache holds no forward of these shapes (call <first>
/// first)" (out of line: GCC 12 at -O2 reports false -Warray-bounds on a string built inline).
[[noreturn]] ATTN_NOINLINE inline void throw_no_forward(const char* where, const char* first) {
  raise<forward_mismatch_error>(std::string(where) + ": the cache holds no forward of these shapes (call " + first +
                                " first)");
}

/// forward_mismatch_error "<where>: <what> is not the forward's (the backward must be given its
/// forward's <given>)".
[[noreturn]] ATTN_NOINLINE inline void throw_not_the_forwards(const char* where, const char* what,
                                                              const char* given) {
  raise<forward_mismatch_error>(std::string(where) + ": " + what +
                                " is not the forward's (the backward must be given its forward's " + given + ")");
}

template <class T>
void feed_forward_record(MatrixView<const T> X, const feed_forward_parameters<T>& p, std::uint64_t (&r)[6]) {
  r[0] = fingerprint(X.data(), X.rows(), X.cols(), X.row_stride()) | 1u;  // never 0
  r[1] = weight_fingerprint(p.W_1);
  r[2] = fingerprint(p.b_1.data(), 1, p.b_1.size(), p.b_1.size());
  r[3] = weight_fingerprint(p.W_2);
  r[4] = fingerprint(p.b_2.data(), 1, p.b_2.size(), p.b_2.size());
  r[5] = static_cast<std::uint64_t>(p.act);
}

template <real T>
void check_feed_forward(const char* where, MatrixView<const T> X, const feed_forward_parameters<T>& p) {
  check_layout(where, "W_1", p.W_1);
  check_layout(where, "W_2", p.W_2);
  check_nonempty(where, "W_1", p.W_1.rows() * p.W_1.cols());
  check_nonempty(where, "W_2", p.W_2.rows() * p.W_2.cols());
  check_equal(where, "columns of X", X.cols(), "rows of W_1", p.W_1.rows());
  check_equal(where, "rows of W_2", p.W_2.rows(), "columns of W_1", p.W_1.cols());
  if (!p.b_1.empty()) check_equal(where, "size of b_1", p.b_1.size(), "columns of W_1", p.W_1.cols());
  if (!p.b_2.empty()) check_equal(where, "size of b_2", p.b_2.size(), "columns of W_2", p.W_2.cols());
}

}  // namespace detail

namespace detail {

/// feed_forward on views; `record`: the fingerprints the backward checks (a decoding step, which
/// no backward follows, leaves them out: they read every weight once more).
template <real T>
void feed_forward_views(const char* where, MatrixView<const T> x, const feed_forward_parameters<T>& p, MatrixView<T> y,
                        feed_forward_cache<T>& cache, bool record) {
  check_feed_forward<T>(where, x, p);
  check_shape(where, "the output", y.rows(), y.cols(), x.rows(), p.W_2.cols());
  const region<T> yr = region_of(y);
  const region<T> ins[7] = {region_of(x),   region_of(p.W_1), region_of(p.b_1),
                            region_of(p.W_2), region_of(p.b_2),
                            region_of(cache.pre.view()), region_of(cache.hidden.view())};
  const char* names[7] = {"X", "W_1", "b_1", "W_2", "b_2", "the cache", "the cache"};
  for (std::size_t i = 0; i < 7; ++i)
    if (overlaps(yr, ins[i])) throw_overlap(where, "the output", names[i]);
  cache.forward[0] = 0;
  ensure_shape(cache.pre, x.rows(), p.W_1.cols());
  ensure_shape(cache.hidden, x.rows(), p.W_1.cols());
  const std::size_t d = std::max({x.rows(), x.cols(), p.W_1.cols(), p.W_2.cols()});
  gemm_reserve<T>(d, d, d);
  project_into<T>(x, p.W_1, p.b_1, cache.pre.view());
  activate(p.act, cache.pre, cache.hidden);
  project_into<T>(cache.hidden.view(), p.W_2, p.b_2, y);
  if (record) feed_forward_record<T>(x, p, cache.forward);
}

}  // namespace detail

/// Y = act(X W₁ + b₁) W₂ + b₂ into Y (rows × d_out), H⁻ and H into the cache. dimension_error
/// naming the buffer and both sizes, overlap_error for Y over an input; nothing written then.
template <matrix_like Xm, mutable_matrix_like Ym>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Ym>>
void feed_forward(const Xm& X, const feed_forward_parameters<matrix_scalar_of<Xm>>& p, Ym&& Y,
                  feed_forward_cache<matrix_scalar_of<Xm>>& cache) {
  using T = matrix_scalar_of<Xm>;
  const auto xv = as_view(X);
  detail::feed_forward_views<T>("attn::feed_forward", xv, p, as_mutable_view(Y), cache, true);
}

/// Returns act(X W₁ + b₁) W₂ + b₂, H⁻ and H into the cache.
template <matrix_like Xm>
[[nodiscard]] Matrix<matrix_scalar_of<Xm>> feed_forward(const Xm& X,
                                                        const feed_forward_parameters<matrix_scalar_of<Xm>>& p,
                                                        feed_forward_cache<matrix_scalar_of<Xm>>& cache) {
  using T = matrix_scalar_of<Xm>;
  Matrix<T> y(as_view(X).rows(), p.W_2.cols());
  feed_forward(X, p, y, cache);
  return y;
}

/// The backward (the file comment's formulas) from the forward's cache. forward_mismatch_error
/// naming what differs when X, a parameter or the activation is not the forward's (or the cache
/// holds no forward); dimension_error / overlap_error as the forward, and for dY or a gradient
/// of another shape; nothing written then (the cache's ∂L/∂H is scratch).
template <matrix_like Xm, matrix_like Gm>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Gm>>
void feed_forward_backward(const Xm& X, const feed_forward_parameters<matrix_scalar_of<Xm>>& p,
                           feed_forward_cache<matrix_scalar_of<Xm>>& cache, const Gm& dY,
                           const feed_forward_gradients<matrix_scalar_of<Xm>>& g) {
  using T = matrix_scalar_of<Xm>;
  const char* where = "attn::feed_forward_backward";
  const auto xv = as_view(X);
  const auto gv = as_view(dY);
  const MatrixView<const T> x = xv, dy = gv;
  detail::check_feed_forward<T>(where, x, p);
  const std::size_t rows = x.rows(), d_ff = p.W_1.cols(), d_out = p.W_2.cols();
  detail::check_shape(where, "dL/dY", dy.rows(), dy.cols(), rows, d_out);
  if (g.input.rows() != 0) detail::check_shape(where, "dL/dX", g.input.rows(), g.input.cols(), rows, x.cols());
  const auto weight = [&](const char* what, StridedMatrixView<T> m, StridedMatrixView<const T> like) {
    if (m.rows() == 0) return;
    detail::check_shape(where, what, m.rows(), m.cols(), like.rows(), like.cols());
    detail::check_layout(where, what, m, true);
  };
  weight("dL/dW_1", g.W_1, p.W_1);
  weight("dL/dW_2", g.W_2, p.W_2);
  if (!g.b_1.empty()) detail::check_equal(where, "size of dL/db_1", g.b_1.size(), "columns of W_1", d_ff);
  if (!g.b_2.empty()) detail::check_equal(where, "size of dL/db_2", g.b_2.size(), "columns of W_2", d_out);
  {
    using detail::overlaps;
    using detail::region_of;
    const detail::region<T> outs[5] = {region_of(g.input), region_of(g.W_1), region_of(g.b_1), region_of(g.W_2),
                                       region_of(g.b_2)};
    const char* names[5] = {"dL/dX", "dL/dW_1", "dL/db_1", "dL/dW_2", "dL/db_2"};
    const detail::region<T> ins[8] = {region_of(x),       region_of(dy),        region_of(p.W_1),
                                      region_of(p.b_1),   region_of(p.W_2),     region_of(p.b_2),
                                      region_of(cache.pre.view()), region_of(cache.hidden.view())};
    for (std::size_t o = 0; o < 5; ++o) {
      for (std::size_t o2 = 0; o2 < o; ++o2)
        if (overlaps(outs[o], outs[o2])) detail::throw_overlap(where, names[o], names[o2]);
      for (const auto& in : ins)
        if (overlaps(outs[o], in)) detail::throw_overlap(where, names[o], "an input or the cache");
    }
  }
  // the forward this cache holds must be this one
  std::uint64_t now[6];
  detail::feed_forward_record<T>(x, p, now);
  if (cache.forward[0] == 0 || cache.pre.rows() != rows || cache.pre.cols() != d_ff)
    detail::throw_no_forward(where, "feed_forward");
  static constexpr const char* what[6] = {"X", "W_1", "b_1", "W_2", "b_2", "the activation"};
  for (std::size_t i = 0; i < 6; ++i)
    if (now[i] != cache.forward[i]) detail::throw_not_the_forwards(where, what[i], "inputs and parameters");
  detail::ensure_shape(cache.grad_hidden, rows, d_ff);
  const std::size_t d = std::max({rows, x.cols(), d_ff, d_out});
  detail::gemm_reserve<T>(d, d, d);  // (the products allocate nothing once gradients are written)
  // ∂L/∂W₂, ∂L/∂b₂ and ∂L/∂H = dY W₂ᵀ
  detail::projection_backward<T>(cache.hidden.view(), p.W_2, dy, g.W_2, g.b_2, cache.grad_hidden.view(),
                                 g.accumulate, false);
  // ∂L/∂H⁻ = ∂L/∂H ⊙ act′(H⁻), in place
  activation_backward(p.act, cache.pre, cache.grad_hidden, cache.grad_hidden);
  // ∂L/∂W₁, ∂L/∂b₁ and ∂L/∂X
  detail::projection_backward<T>(x, p.W_1, cache.grad_hidden.view(), g.W_1, g.b_1, g.input, g.accumulate,
                                 g.accumulate);
}

}  // namespace attn
