#pragma once
/// \file attn/detail/products.hpp
/// The three matrix products the projections and their backward are made of, row by row on the
/// row kernels (C held a row at a time, the rows of the other factor eight at a time):
///
///   C = A B    C_t = Σ_i A_ti B_i          (add_weighted_rows over B's rows)
///   C = A Bᵀ   C_tj = A_t · B_j           (dot_rows over B's rows)
///   C = Aᵀ B   C_i = Σ_t A_ti B_t          (A's column i gathered, then add_weighted_rows)
///
/// each written over C or added to it. Kernel layer: raw rows and strides (tile_matrix).

#include "attn/detail/config.hpp"

#include <cstddef>

#include "attn/detail/rows.hpp"
#include "attn/detail/simd.hpp"
#include "attn/detail/tile.hpp"

namespace attn::detail {

/// C (r × p) = A (r × m) B (m × p), or C += A B.
template <class T>
constexpr void multiply(const tile_matrix<const T>& A, const tile_matrix<const T>& B,
                        const tile_matrix<T>& C, bool accumulate) noexcept {
  for (std::size_t t = 0; t < A.rows; ++t) {
    if (!accumulate) fill(C.row(t), C.cols, T(0));
    add_weighted_rows(A.row(t), B.data, B.stride, B.rows, B.cols, C.row(t));
  }
}

/// C (r × p) = A (r × m) Bᵀ (B is p × m), or C += A Bᵀ.
template <class T>
constexpr void multiply_transposed(const tile_matrix<const T>& A, const tile_matrix<const T>& B,
                                   const tile_matrix<T>& C, bool accumulate) noexcept {
  constexpr std::size_t chunk = 256;
  T part[chunk];
  for (std::size_t t = 0; t < A.rows; ++t) {
    T* c = C.row(t);
    for (std::size_t j0 = 0; j0 < B.rows; j0 += chunk) {
      const std::size_t nb = B.rows - j0 < chunk ? B.rows - j0 : chunk;
      T* out = accumulate ? part : c + j0;
      dot_rows(A.row(t), B.row(j0), B.stride, nb, A.cols, out);
      if (accumulate)
        for (std::size_t j = 0; j < nb; ++j) c[j0 + j] += part[j];
    }
  }
}

/// true when every x_i is 0.
template <class T>
[[nodiscard]] constexpr bool all_zero(const T* x, std::size_t n) noexcept {
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < n; ++i) nonzero += x[i] != T(0) ? 1u : 0u;
  return nonzero == 0;
}

/// C (m × p) = Aᵀ B for A (r × m) and B (r × p), or C += Aᵀ B: column i of A, 256 rows at a
/// time, weighs the rows of B into row i of C. A row of B that is all 0 contributes nothing,
/// whatever A's row holds (∂L/∂W = Xᵀ dP: a masked key's or a masked-out row's dP_t is 0, and
/// its input row may hold NaN or inf); a finite A_ti costs one compare.
template <class T>
constexpr void multiply_first_transposed(const tile_matrix<const T>& A,
                                         const tile_matrix<const T>& B, const tile_matrix<T>& C,
                                         bool accumulate) noexcept {
  constexpr std::size_t chunk = 256;
  T column[chunk];
  for (std::size_t i = 0; i < A.cols; ++i) {
    T* c = C.row(i);
    if (!accumulate) fill(c, C.cols, T(0));
    for (std::size_t t0 = 0; t0 < A.rows; t0 += chunk) {
      const std::size_t nb = A.rows - t0 < chunk ? A.rows - t0 : chunk;
      for (std::size_t r = 0; r < nb; ++r) {
        const T a = A.row(t0 + r)[i];
        column[r] = a - a == T(0) || !all_zero(B.row(t0 + r), B.cols) ? a : T(0);
      }
      add_weighted_rows(column, B.row(t0), B.stride, nb, B.cols, c);
    }
  }
}

/// Row t of M (r × p) = b for every t (b of p numbers), or M_t += b.
template <class T>
constexpr void add_to_rows(const T* b, const tile_matrix<T>& M, bool accumulate) noexcept {
  for (std::size_t t = 0; t < M.rows; ++t)
    for (std::size_t i = 0; i < M.cols; ++i) M.row(t)[i] = (accumulate ? M.row(t)[i] : T(0)) + b[i];
}

/// out_i = Σ_t M_ti (the sum of M's rows), or out_i += that.
template <class T>
constexpr void sum_rows(const tile_matrix<const T>& M, T* out, bool accumulate) noexcept {
  if (!accumulate) fill(out, M.cols, T(0));
  for (std::size_t t = 0; t < M.rows; ++t) axpy(T(1), M.row(t), out, M.cols);
}

}  // namespace attn::detail
