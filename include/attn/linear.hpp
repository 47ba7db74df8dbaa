#pragma once
/// \file attn/linear.hpp
/// The linear layer, y = x W + b, and its backward (docs/block.md):
///
///   Y = X W + b,   ∂L/∂X = dY Wᵀ,   ∂L/∂W = Xᵀ dY,   ∂L/∂b = Σ_rows dY,
///
/// X (rows × d_in), W (d_in × d_out) read where it lies: its rows (attn's d_in × d_out, a
/// row-major Eigen matrix) or its columns (PyTorch's d_out × d_in weight as
/// `attn::transposed(view)`, a column-major Eigen matrix). The piece the projections of
/// attn/heads.hpp and the feed-forward layer are made of: their products are these functions'.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "attn/attention.hpp"
#include "attn/detail/fingerprint.hpp"
#include "attn/detail/gemm.hpp"
#include "attn/detail/overlap.hpp"
#include "attn/detail/products.hpp"
#include "attn/error.hpp"
#include "attn/matrix.hpp"
#include "attn/vector.hpp"

namespace attn {

/// A linear layer's parameters, borrowed: W (d_in × d_out, rows or columns: the file comment)
/// and b (d_out), or no b.
template <real T>
struct linear_parameters {
  StridedMatrixView<const T> W{};  ///< d_in × d_out
  std::span<const T> b{};          ///< d_out, or none
};

/// Where linear_backward writes: ∂L/∂X (rows × d_in), ∂L/∂W (W's shape, in either layout), ∂L/∂b;
/// a view left empty is not computed. Each is overwritten, or added to when `accumulate`.
template <real T>
struct linear_gradients {
  MatrixView<T> input{};          ///< ∂L/∂X
  StridedMatrixView<T> W{};       ///< ∂L/∂W
  std::span<T> b{};               ///< ∂L/∂b
  bool accumulate = false;        ///< add to what the views hold
};

namespace detail {

/// A weight as the products read it: its rows, or its columns as rows (detail/products.hpp).
template <class T>
[[nodiscard]] constexpr stored_matrix<T> stored_of(StridedMatrixView<T> W) noexcept {
  if (columns_contiguous(W)) return {{W.data(), W.cols(), W.rows(), W.col_stride()}, true};
  return {{W.data(), W.rows(), W.cols(), W.row_stride()}, false};
}

/// A weight's fingerprint (detail/fingerprint.hpp) over its numbers as stored, complemented for
/// columns: what a backward compares with its forward's (heads, the feed-forward layer).
template <class T>
[[nodiscard]] std::uint64_t weight_fingerprint(StridedMatrixView<const T> m) noexcept {
  const stored_matrix<const T> w = stored_of(m);
  const std::uint64_t f = fingerprint(w.stored.data, w.stored.rows, w.stored.cols, w.stored.stride);
  return w.transposed ? ~f : f;
}

/// Refuses a weight (or, `written`, a weight's gradient) that is neither rows nor columns of
/// numbers, or whose stored rows overlap (dimension_error naming it and its strides).
template <class T>
constexpr void check_layout(const char* where, const char* what, StridedMatrixView<T> W,
                            bool written = false) {
  if (W.rows() == 0 || W.cols() == 0) return;
  const region<std::remove_const_t<T>> r = region_of(W);
  if ((rows_contiguous(W) || columns_contiguous(W)) && (!written || r.rows <= 1 || r.stride >= r.cols))
    return;
  attn::detail::raise<dimension_error>(
      std::string(where) + ": " + what + " (" + std::to_string(W.rows()) + "x" +
      std::to_string(W.cols()) + ") has row stride " + std::to_string(W.row_stride()) +
      " and column stride " + std::to_string(W.col_stride()) +
      (written ? ": it must be rows or columns that do not overlap"
               : ": neither its rows nor its columns lie one number apart") +
      " (row-major, or column-major as PyTorch's out x in weight viewed by attn::transposed)");
}

/// out = in W + b (or in W without b; added to out when `accumulate`), row by row: a row's
/// numbers are the same whatever rows are computed with it.
template <real T>
constexpr void project_into(MatrixView<const T> in, StridedMatrixView<const T> W,
                            std::span<const T> b, MatrixView<T> out, bool accumulate = false) {
  if (!b.empty()) add_to_rows(b.data(), tile_of(out), accumulate);
  multiply(tile_of(in), stored_of(W), tile_of(out), accumulate || !b.empty());
}

/// ∂L/∂W += inᵀ dP (or =), ∂L/∂b += Σ_t dP_t, ∂L/∂in += dP Wᵀ: one projection's backward.
template <real T>
void projection_backward(MatrixView<const T> in, StridedMatrixView<const T> W,
                         MatrixView<const T> dP, StridedMatrixView<T> dW, std::span<T> db,
                         MatrixView<T> d_in, bool accumulate, bool accumulate_input) {
  if (dW.rows() != 0)
    multiply_first_transposed(tile_of(in), tile_of(dP), stored_of(dW), accumulate);
  if (!db.empty()) sum_rows(tile_of(dP), db.data(), accumulate);
  if (d_in.rows() != 0)
    multiply_transposed(tile_of(dP), stored_of(W), tile_of(d_in), accumulate_input);
}

/// The checks of a linear layer's forward: W's layout and shape against X, b, Y; overlaps.
template <real T>
void check_linear(const char* where, MatrixView<const T> X, const linear_parameters<T>& p,
                  MatrixView<T> Y) {
  check_layout(where, "W", p.W);
  check_nonempty(where, "W", p.W.rows() * p.W.cols());
  check_equal(where, "columns of X", X.cols(), "rows of W", p.W.rows());
  if (!p.b.empty()) check_equal(where, "size of b", p.b.size(), "columns of W", p.W.cols());
  check_shape(where, "the output", Y.rows(), Y.cols(), X.rows(), p.W.cols());
  const region<T> y = region_of(Y);
  if (overlaps(y, region_of(X))) throw_overlap(where, "the output", "X");
  if (overlaps(y, region_of(p.W))) throw_overlap(where, "the output", "W");
  if (overlaps(y, region_of(p.b))) throw_overlap(where, "the output", "b");
}

}  // namespace detail

/// Y = X W + b (or Y += X W + b when `accumulate`). dimension_error naming the buffer and both
/// sizes (X's columns and W's rows, b, Y; a W of neither layout), overlap_error for Y over an
/// input; nothing written then.
template <matrix_like Xm, mutable_matrix_like Ym>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Ym>>
void linear(const Xm& X, const linear_parameters<matrix_scalar_of<Xm>>& p, Ym&& Y,
            bool accumulate = false) {
  using T = matrix_scalar_of<Xm>;
  const auto xv = as_view(X);
  const MatrixView<const T> x = xv;
  const MatrixView<T> y = as_mutable_view(Y);
  detail::check_linear<T>("attn::linear", x, p, y);
  detail::gemm_reserve<T>(std::max(x.rows(), x.cols()), std::max(x.rows(), p.W.cols()), x.cols());
  detail::project_into<T>(x, p.W, p.b, y, accumulate);
}

/// Returns X W + b (rows × d_out).
template <matrix_like Xm>
[[nodiscard]] Matrix<matrix_scalar_of<Xm>> linear(const Xm& X,
                                                  const linear_parameters<matrix_scalar_of<Xm>>& p) {
  using T = matrix_scalar_of<Xm>;
  const auto xv = as_view(X);
  Matrix<T> y(xv.rows(), p.W.cols());
  linear(X, p, y);
  return y;
}

/// The backward of linear: ∂L/∂X = dY Wᵀ, ∂L/∂W = Xᵀ dY (in ∂L/∂W's own layout), ∂L/∂b = Σ dY,
/// each into its view when given, overwritten or (accumulate) added to. A row of dY that is 0
/// adds nothing to ∂L/∂W whatever X's row holds (padding). Errors as linear, and for dY or a
/// gradient of another shape, a gradient over an input or another gradient; nothing written then.
template <matrix_like Xm, matrix_like Gm>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Gm>>
void linear_backward(const Xm& X, const linear_parameters<matrix_scalar_of<Xm>>& p, const Gm& dY,
                     const linear_gradients<matrix_scalar_of<Xm>>& g) {
  using T = matrix_scalar_of<Xm>;
  const char* where = "attn::linear_backward";
  const auto xv = as_view(X);
  const auto gv = as_view(dY);
  const MatrixView<const T> x = xv, dy = gv;
  detail::check_layout(where, "W", p.W);
  detail::check_nonempty(where, "W", p.W.rows() * p.W.cols());
  detail::check_equal(where, "columns of X", x.cols(), "rows of W", p.W.rows());
  if (!p.b.empty()) detail::check_equal(where, "size of b", p.b.size(), "columns of W", p.W.cols());
  detail::check_shape(where, "dL/dY", dy.rows(), dy.cols(), x.rows(), p.W.cols());
  if (g.input.rows() != 0) detail::check_shape(where, "dL/dX", g.input.rows(), g.input.cols(), x.rows(), x.cols());
  if (g.W.rows() != 0) {
    detail::check_shape(where, "dL/dW", g.W.rows(), g.W.cols(), p.W.rows(), p.W.cols());
    detail::check_layout(where, "dL/dW", g.W, true);
  }
  if (!g.b.empty()) detail::check_equal(where, "size of dL/db", g.b.size(), "columns of W", p.W.cols());
  {
    using detail::overlaps;
    using detail::region_of;
    const detail::region<T> outs[3] = {region_of(g.input), region_of(g.W), region_of(g.b)};
    const char* names[3] = {"dL/dX", "dL/dW", "dL/db"};
    const detail::region<T> ins[4] = {region_of(x), region_of(dy), region_of(p.W), region_of(p.b)};
    const char* in_names[4] = {"X", "dL/dY", "W", "b"};
    for (std::size_t o = 0; o < 3; ++o) {
      for (std::size_t o2 = 0; o2 < o; ++o2)
        if (overlaps(outs[o], outs[o2])) detail::throw_overlap(where, names[o], names[o2]);
      for (std::size_t i = 0; i < 4; ++i)
        if (overlaps(outs[o], ins[i])) detail::throw_overlap(where, names[o], in_names[i]);
    }
  }
  const std::size_t d = std::max({x.rows(), x.cols(), p.W.cols()});
  detail::gemm_reserve<T>(d, d, d);  // (∂L/∂W is written before ∂L/∂X's product runs)
  detail::projection_backward<T>(x, p.W, dy, g.W, g.b, g.input, g.accumulate, g.accumulate);
}

}  // namespace attn
