#pragma once
/// \file attn/detail/products.hpp
/// The three matrix products the projections and their backward are made of, row by row on the
/// row kernels (C held a row at a time, the rows of the other factor eight at a time):
///
///   C = A B    C_t = Σ_i A_ti B_i          (add_weighted_rows over B's rows)
///   C = A Bᵀ   C_tj = A_t · B_j           (dot_rows over B's rows)
///   C = Aᵀ B   C_i = Σ_t A_ti B_t          (A's column i gathered, then add_weighted_rows)
///
/// each written over C or added to it; and the same on a weight stored either way
/// (stored_matrix: its rows, or its columns as rows, PyTorch's out × in), which the projections
/// use: those run on the packed product of detail/gemm.hpp (the row kernels stay for constant
/// evaluation and for ∂L/∂W = Xᵀ dP when X holds NaN or inf). Kernel layer: raw rows and strides
/// (tile_matrix).

#include "attn/detail/config.hpp"

#include <cstddef>
#include <type_traits>

#include "attn/detail/gemm.hpp"
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

/// Entries [t0, t0 + nb) of column i of A, as multiply_first_transposed weighs B's rows by them:
/// a non-finite A_ti is taken as 0 here and its terms are added by add_non_finite_terms. Returns
/// whether there was one.
template <class T>
constexpr bool column_of(const tile_matrix<const T>& A, std::size_t i, std::size_t t0,
                         std::size_t nb, T* column) noexcept {
  bool non_finite = false;
  for (std::size_t r = 0; r < nb; ++r) {
    const T a = A.row(t0 + r)[i];
    const bool finite = a - a == T(0);
    column[r] = finite ? a : T(0);
    non_finite = non_finite || !finite;
  }
  return non_finite;
}

/// out_j += A_ti B_tj over the rows t in [t0, t0 + nb) whose A_ti is not finite and the
/// columns j in [p0, p0 + pc) where B_tj ≠ 0: a zero factor contributes nothing (∂L/∂W = Xᵀ dP:
/// a masked key's or a masked-out row's dP_tj is 0 in the heads that do not see it, whatever the
/// input row holds). Such terms are ±inf or NaN, so where they are added to the finite ones
/// does not change the sum (but for finite sums that overflow: docs/errors.md).
template <class T>
constexpr void add_non_finite_terms(const tile_matrix<const T>& A, const tile_matrix<const T>& B,
                                    std::size_t i, std::size_t t0, std::size_t nb, std::size_t p0,
                                    std::size_t pc, T* out) noexcept {
  for (std::size_t r = 0; r < nb; ++r) {
    const T a = A.row(t0 + r)[i];
    if (a - a == T(0)) continue;
    const T* b = B.row(t0 + r) + p0;
    for (std::size_t j = 0; j < pc; ++j)
      if (b[j] != T(0)) out[j] += a * b[j];
  }
}

/// C (m × p) = Aᵀ B for A (r × m) and B (r × p), or C += Aᵀ B: column i of A, 256 rows at a
/// time, weighs the rows of B into row i of C. A term whose B_tj is 0 contributes nothing,
/// whatever A_ti holds (∂L/∂W = Xᵀ dP: a masked key's or a masked-out row's dP_tj is 0, and its
/// input row may hold NaN or inf); a finite A_ti costs one compare.
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
      const bool non_finite = column_of(A, i, t0, nb, column);
      add_weighted_rows(column, B.row(t0), B.stride, nb, B.cols, c);
      if (non_finite) add_non_finite_terms(A, B, i, t0, nb, 0, B.cols, c);
    }
  }
}

/// multiply_first_transposed written into the columns of Ct (p × m): Ct_ji = (Aᵀ B)_ij, or
/// += (∂L/∂W for a W stored as its transpose, PyTorch's out × in). The same numbers, bit for
/// bit: every column of a row of Aᵀ B is summed on its own (add_weighted_rows), so a row taken
/// 256 columns at a time, into a buffer that starts from Ct's column, adds what C's row would.
template <class T>
constexpr void multiply_first_transposed_into_columns(const tile_matrix<const T>& A,
                                                      const tile_matrix<const T>& B,
                                                      const tile_matrix<T>& Ct,
                                                      bool accumulate) noexcept {
  constexpr std::size_t chunk = 256;
  T column[chunk];
  T part[chunk];
  for (std::size_t i = 0; i < A.cols; ++i) {
    for (std::size_t p0 = 0; p0 < B.cols; p0 += chunk) {
      const std::size_t pc = B.cols - p0 < chunk ? B.cols - p0 : chunk;
      for (std::size_t j = 0; j < pc; ++j) part[j] = accumulate ? Ct.row(p0 + j)[i] : T(0);
      for (std::size_t t0 = 0; t0 < A.rows; t0 += chunk) {
        const std::size_t nb = A.rows - t0 < chunk ? A.rows - t0 : chunk;
        const bool non_finite = column_of(A, i, t0, nb, column);
        add_weighted_rows(column, B.row(t0) + p0, B.stride, nb, pc, part);
        if (non_finite) add_non_finite_terms(A, B, i, t0, nb, p0, pc, part);
      }
      for (std::size_t j = 0; j < pc; ++j) Ct.row(p0 + j)[i] = part[j];
    }
  }
}

/// A matrix W (m × p) as its numbers are stored: `stored` is W itself (m × p, its rows), or,
/// when `transposed`, Wᵀ (p × m: row j holds column j of W; PyTorch's out × in weights, a
/// column-major W). The products below read either without a copy.
template <class T>
struct stored_matrix {
  tile_matrix<T> stored;
  bool transposed = false;
};

/// A tile as the product reads it.
template <class T>
[[nodiscard]] constexpr gemm_matrix<T> gemm_of(const tile_matrix<T>& m) noexcept {
  return {m.data, m.stride, 1};
}
/// A stored weight as the product reads W itself: its rows, or its columns.
template <class T>
[[nodiscard]] constexpr gemm_matrix<T> gemm_of(const stored_matrix<T>& W) noexcept {
  return W.transposed ? gemm_matrix<T>{W.stored.data, 1, W.stored.stride} : gemm_of(W.stored);
}

/// Whether rows × cols numbers from data (rows `stride` apart) are all finite.
template <class T>
[[nodiscard]] constexpr bool tile_finite(const tile_matrix<const T>& m) noexcept {
  for (std::size_t t = 0; t < m.rows; ++t)
    for (std::size_t i = 0; i < m.cols; ++i)
      if (!(m.row(t)[i] - m.row(t)[i] == T(0))) return false;
  return true;
}

// The products on a stored weight run on gemm (detail/gemm.hpp) at run time; in constant
// evaluation (attn's fixed-size forms) on the row kernels above.

/// C = A W, or C += A W.
template <class T>
constexpr void multiply(const tile_matrix<const T>& A, const stored_matrix<const T>& W,
                        const tile_matrix<T>& C, bool accumulate) {
  if (!std::is_constant_evaluated()) {
    gemm<T>(A.rows, C.cols, A.cols, gemm_of(A), gemm_of(W), gemm_of(C), accumulate);
    return;
  }
  if (W.transposed)
    multiply_transposed(A, W.stored, C, accumulate);
  else
    multiply(A, W.stored, C, accumulate);
}

/// C = A Wᵀ, or C += A Wᵀ.
template <class T>
constexpr void multiply_transposed(const tile_matrix<const T>& A, const stored_matrix<const T>& W,
                                   const tile_matrix<T>& C, bool accumulate) {
  if (!std::is_constant_evaluated()) {
    gemm<T>(A.rows, C.cols, A.cols, gemm_of(A), gemm_of(W).transposed(), gemm_of(C), accumulate);
    return;
  }
  if (W.transposed)
    multiply(A, W.stored, C, accumulate);
  else
    multiply_transposed(A, W.stored, C, accumulate);
}

/// C = Aᵀ B, or C += Aᵀ B, written in C's layout (∂L/∂W = Xᵀ dP in the layout of its W). On gemm
/// when A is all finite; an A that holds NaN or inf (a padded row of X) takes the row kernels,
/// which leave out each term whose B entry is 0 (gemm would form 0·NaN).
/// `on_gemm`: whether to run on gemm — false where A (or the whole of which A is a block of
/// columns: a thread's piece must take its whole's path, for the same bits) holds NaN or inf.
template <class T>
constexpr void multiply_first_transposed(const tile_matrix<const T>& A,
                                         const tile_matrix<const T>& B,
                                         const stored_matrix<T>& C, bool accumulate, bool on_gemm) {
  if (!std::is_constant_evaluated() && on_gemm) {
    gemm<T>(A.cols, B.cols, A.rows, gemm_of(A).transposed(), gemm_of(B), gemm_of(C), accumulate);
    return;
  }
  if (C.transposed)
    multiply_first_transposed_into_columns(A, B, C.stored, accumulate);
  else
    multiply_first_transposed(A, B, C.stored, accumulate);
}

template <class T>
constexpr void multiply_first_transposed(const tile_matrix<const T>& A,
                                         const tile_matrix<const T>& B,
                                         const stored_matrix<T>& C, bool accumulate) {
  multiply_first_transposed(A, B, C, accumulate, !std::is_constant_evaluated() && tile_finite(A));
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
