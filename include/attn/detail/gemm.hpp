#pragma once
/// \file attn/detail/gemm.hpp
/// One matrix product for every projection and its backward: C = A·B or C += A·B, A (m × k) and
/// B (k × n) read through any strides (so Aᵀ and Bᵀ are the same call with the strides
/// swapped), C row-major or column-major. The scheme of BLIS, OpenBLAS, Eigen's GEBP and
/// llamafile's tinyBLAS (docs/performance.md, "The matrix product"):
///
///   for each block of NC columns of B:            (B's block packed: KC × NC, in L3)
///     for each block of KC of the inner dimension:  (B packed in slivers of NR columns)
///       for each block of MC rows of A:             (A's block packed: MC × KC, in L2; slivers of MR rows)
///         for each sliver of B, each sliver of A:   the MR × NR micro-kernel, its accumulators in
///                                                   registers: KC rank-1 updates
///
/// The micro-kernel is written once with GCC/Clang vector types, MR × NR = MR × NV vectors, for
/// the register file the build targets (AVX-512: 14 × 2 vectors, AVX and AVX2: 6 × 2, SSE: 6 × 2;
/// long double and builds without vector types: 4 × 4 scalars).
///
/// The order of the sums is fixed: C_ij = (…((S₀ + S₁) + S₂) …) with S_b the block b of KC terms
/// summed in order of k from 0 (fused multiply-adds where the target has them), and added to C's
/// old value first when accumulating. It depends on the build and on K, never on m, n, the thread
/// count or which rows or columns a call computes: a row of C has the same bits whichever rows are
/// computed with it, and the one-thread and many-thread calls agree bit for bit. Kernel layer: raw
/// pointers and counts; no checks (the callers check shapes).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "attn/detail/config.hpp"
#include "attn/detail/simd.hpp"
#include "attn/detail/threads.hpp"

#if defined(ATTN_USE_CBLAS)
#include <type_traits>
#include <cblas.h>  // the CBLAS the program links (define ATTN_USE_CBLAS only with one)
#endif

namespace attn::detail {

/// A matrix as the product reads it: element (i, j) at data[i·rs + j·cs].
template <class T>
struct gemm_matrix {
  T* data;
  std::size_t rs, cs;
  [[nodiscard]] constexpr gemm_matrix<const T> as_const() const noexcept { return {data, rs, cs}; }
  /// The transpose: the same numbers, strides swapped.
  [[nodiscard]] constexpr gemm_matrix transposed() const noexcept { return {data, cs, rs}; }
};

/// The blocking of T's product for this build: lanes per vector W, vectors per row of the
/// micro-tile NV (NR = NV·W columns), rows MR, and the cache blocks KC, MC, NC.
template <class T>
struct gemm_blocking {
  static constexpr bool vector = simd_type<T>;
  static constexpr std::size_t W = vector ? simd_bytes / sizeof(T) : 1;
  static constexpr std::size_t NV = vector ? 2 : 4;
  static constexpr std::size_t MR = vector ? (simd_bytes == 64 ? 14 : 6) : 4;
  static constexpr std::size_t NR = NV * W;
  // B's sliver (KC × NR) stays in L1 while A's slivers stream from L2
  static constexpr std::size_t KC = vector ? 256 : 128;
  static constexpr std::size_t MC = MR * (vector ? 24 : 16);
  static constexpr std::size_t NC = NR * (vector ? 128 : 64);
};

/// Panels of at most this many bytes are packed on the stack.
inline constexpr std::size_t gemm_stack_bytes = 8192;

/// The packed panels of one thread, grown once and reused (a product allocates only the first
/// time it meets a larger block on this thread).
template <class T>
struct gemm_buffers {
  std::vector<T> a, b;
  /// n numbers of v, from a 64-byte boundary (v grown, once, to hold them).
  static T* aligned(std::vector<T>& v, std::size_t n) {
    const std::size_t pad = 64 / sizeof(T) + 1;
    if (v.size() < n + pad) v.resize(n + pad);
    const std::uintptr_t p = reinterpret_cast<std::uintptr_t>(v.data());
    return v.data() + ((64 - p % 64) % 64) / sizeof(T);
  }
  static gemm_buffers& of_this_thread() {
    thread_local gemm_buffers buffers;
    return buffers;
  }
};

/// Packs rows [i0, i0 + mc) × inner [k0, k0 + kc) of A into slivers of MR rows: sliver s holds
/// for each k the MR numbers A(i0 + s·MR + r, k0 + k), 0 past the last row.
template <class T, std::size_t MR>
void pack_a(gemm_matrix<const T> A, std::size_t i0, std::size_t mc, std::size_t k0, std::size_t kc,
            T* out) noexcept {
  for (std::size_t s = 0; s < mc; s += MR) {
    const std::size_t rows = std::min(MR, mc - s);
    if (A.cs == 1 && rows == MR) {
      const T* src[MR];
      for (std::size_t r = 0; r < MR; ++r) src[r] = A.data + (i0 + s + r) * A.rs + k0;
      for (std::size_t k = 0; k < kc; ++k)
        for (std::size_t r = 0; r < MR; ++r) out[k * MR + r] = src[r][k];
    } else if (A.rs == 1 && rows == MR) {  // Aᵀ stored row-major: MR numbers side by side per k
      for (std::size_t k = 0; k < kc; ++k)
        std::memcpy(out + k * MR, A.data + (k0 + k) * A.cs + i0 + s, MR * sizeof(T));
    } else {
      for (std::size_t k = 0; k < kc; ++k)
        for (std::size_t r = 0; r < MR; ++r)
          out[k * MR + r] = r < rows ? A.data[(i0 + s + r) * A.rs + (k0 + k) * A.cs] : T(0);
    }
    out += kc * MR;
  }
}

/// Packs inner [k0, k0 + kc) × columns [j0, j0 + nc) of B into slivers of NR columns: sliver s
/// holds for each k the NR numbers B(k0 + k, j0 + s·NR + c), 0 past the last column.
template <class T, std::size_t NR>
void pack_b(gemm_matrix<const T> B, std::size_t k0, std::size_t kc, std::size_t j0, std::size_t nc,
            T* out) noexcept {
  for (std::size_t s = 0; s < nc; s += NR) {
    const std::size_t cols = std::min(NR, nc - s);
    if (B.cs == 1 && cols == NR) {
      for (std::size_t k = 0; k < kc; ++k)
        std::memcpy(out + k * NR, B.data + (k0 + k) * B.rs + j0 + s, NR * sizeof(T));
    } else if (B.rs == 1 && cols == NR) {  // Bᵀ stored row-major: each column's numbers side by side
      for (std::size_t c = 0; c < NR; ++c) {
        const T* src = B.data + (j0 + s + c) * B.cs + k0;
        for (std::size_t k = 0; k < kc; ++k) out[k * NR + c] = src[k];
      }
    } else {
      for (std::size_t k = 0; k < kc; ++k)
        for (std::size_t c = 0; c < NR; ++c)
          out[k * NR + c] = c < cols ? B.data[(k0 + k) * B.rs + (j0 + s + c) * B.cs] : T(0);
    }
    out += kc * NR;
  }
}

/// The MR × NR micro-kernel: acc = Σ_k a_k b_kᵀ over kc packed steps (from 0, in order of k),
/// then C = acc (first) or C += acc, for the rows × cols of the tile that lie in C (row-major C:
/// row stride crs, columns one apart).
template <class T, std::size_t MR, std::size_t NV, std::size_t W>
[[gnu::always_inline]] inline void micro_kernel(std::size_t kc, const T* __restrict pa,
                                                const T* __restrict pb, T* __restrict c, std::size_t crs,
                                                std::size_t rows, std::size_t cols, bool first) noexcept {
  constexpr std::size_t NR = NV * W;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (W > 1) {
    using V = vec<T, W>;
    V acc[MR][NV];
#pragma GCC unroll 16
    for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) acc[r][v] = V{};
    for (std::size_t k = 0; k < kc; ++k) {
      V b[NV];
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) b[v] = load<T, W>(pb + k * NR + v * W);
#pragma GCC unroll 16
      for (std::size_t r = 0; r < MR; ++r) {
        const V a = pa[k * MR + r] - V{};  // a broadcast (x − 0 is x: no add, unlike 0 + x for −0)
#pragma GCC unroll 4
        for (std::size_t v = 0; v < NV; ++v) acc[r][v] += a * b[v];
      }
    }
    if (rows == MR && cols == NR) {
#pragma GCC unroll 16
      for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (std::size_t v = 0; v < NV; ++v) {
          T* p = c + r * crs + v * W;
          V out = acc[r][v];
          if (!first) out = load<T, W>(p) + out;
          std::memcpy(p, &out, sizeof out);
        }
      return;
    }
    alignas(64) T tile[MR][NR];
    std::memcpy(tile, acc, sizeof tile);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < cols; ++j) c[r * crs + j] = first ? tile[r][j] : c[r * crs + j] + tile[r][j];
    return;
  }
#endif
  // one number at a time (no vector types: long double, or ATTN_NO_VECTOR_EXTENSIONS)
  T acc[MR][NR] = {};
  for (std::size_t k = 0; k < kc; ++k)
    for (std::size_t r = 0; r < MR; ++r)
      for (std::size_t j = 0; j < NR; ++j) acc[r][j] += pa[k * MR + r] * pb[k * NR + j];
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < cols; ++j) c[r * crs + j] = first ? acc[r][j] : c[r * crs + j] + acc[r][j];
}

/// The packed panels a product of at most m × n × k grows this thread's buffers to.
struct gemm_panels {
  std::size_t a, b;
};
template <class T>
[[nodiscard]] constexpr gemm_panels gemm_panel_sizes(std::size_t m, std::size_t n, std::size_t k) noexcept {
  using G = gemm_blocking<T>;
  const std::size_t kc = std::min(G::KC, k);
  return {std::min(G::MC, (m + G::MR - 1) / G::MR * G::MR) * kc,
          kc * std::min(G::NC, (n + G::NR - 1) / G::NR * G::NR)};
}

/// Grows this thread's panels for products of up to m × n × k (either way round) now, so that the
/// products of a call allocate nothing after it has begun writing (a std::bad_alloc then comes
/// before the first write). One thread's calls: worker threads grow their own.
template <class T>
void gemm_reserve(std::size_t m, std::size_t n, std::size_t k) {
  const std::size_t d = std::max({m, n});
  const gemm_panels p = gemm_panel_sizes<T>(d, d, k);
  if (p.a + p.b <= gemm_stack_bytes / sizeof(T)) return;  // (packed on the stack)
  gemm_buffers<T>& buf = gemm_buffers<T>::of_this_thread();
  (void)gemm_buffers<T>::aligned(buf.a, p.a);
  (void)gemm_buffers<T>::aligned(buf.b, p.b);
}

/// One row of C (m = 1, B's rows contiguous: B.cs = 1), columns [j_begin, j_end): the
/// micro-kernel's sums for that row — per block of KC from k = 0, acc += a_k·b_k in order of k
/// (fused where the micro-kernel fuses: the same expression), each block then written to C or
/// added to it — read straight from B, unpacked. A decoding step's products are one row against
/// a whole weight, where packing B cost as much as the product (docs/performance.md, "The tiny
/// transformer"). The same bits as the packed path: a row of C never depends on the rows beside it.
template <class T>
void gemm_one_row(std::size_t k, gemm_matrix<const T> A, gemm_matrix<const T> B, T* C, bool accumulate,
                  std::size_t j_begin, std::size_t j_end) noexcept {
  using G = gemm_blocking<T>;
  std::size_t j = j_begin;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (G::W > 1) {
    constexpr std::size_t W = G::W, NV = G::NV, NR = G::NR;
    using V = vec<T, W>;
    alignas(64) T tail[G::KC][NR];  // a last partial sliver's columns, zero-padded as pack_b pads them
    for (; j < j_end; j += NR) {
      const std::size_t cols = std::min(NR, j_end - j);
      for (std::size_t k0 = 0; k0 < k; k0 += G::KC) {
        const std::size_t kc = std::min(G::KC, k - k0);
        const T* b = B.data + k0 * B.rs + j;
        std::size_t brs = B.rs;
        if (cols < NR) {
          for (std::size_t q = 0; q < kc; ++q)
            for (std::size_t c = 0; c < NR; ++c) tail[q][c] = c < cols ? b[q * B.rs + c] : T(0);
          b = &tail[0][0];
          brs = NR;
        }
        V acc[NV];
#pragma GCC unroll 4
        for (std::size_t v = 0; v < NV; ++v) acc[v] = V{};
        for (std::size_t q = 0; q < kc; ++q) {
          const V a = A.data[(k0 + q) * A.cs] - V{};  // (as the micro-kernel broadcasts: x − 0 is x)
#pragma GCC unroll 4
          for (std::size_t v = 0; v < NV; ++v) acc[v] += a * load<T, W>(b + q * brs + v * W);
        }
        const bool first = k0 == 0 && !accumulate;
        alignas(64) T out[NR];
        std::memcpy(out, acc, sizeof out);
        for (std::size_t c = 0; c < cols; ++c) C[j + c] = first ? out[c] : C[j + c] + out[c];
      }
    }
    return;
  }
#endif
  // one number at a time, as the micro-kernel's scalar path
  for (; j < j_end; ++j)
    for (std::size_t k0 = 0; k0 < k; k0 += G::KC) {
      const std::size_t kc = std::min(G::KC, k - k0);
      T acc = T(0);
      for (std::size_t q = 0; q < kc; ++q) acc += A.data[(k0 + q) * A.cs] * B.data[(k0 + q) * B.rs + j];
      C[j] = k0 == 0 && !accumulate ? acc : C[j] + acc;
    }
}

/// C = A·B (or C += A·B when `accumulate`) for the columns [j_begin, j_end) of C, C row-major
/// (row stride crs). A is m × k, B is k × n.
template <class T>
void gemm_columns(std::size_t m, std::size_t k, gemm_matrix<const T> A, gemm_matrix<const T> B, T* C,
                  std::size_t crs, bool accumulate, std::size_t j_begin, std::size_t j_end) {
  using G = gemm_blocking<T>;
  if (m == 0 || j_end <= j_begin) return;
  if (k == 0) {
    if (!accumulate)
      for (std::size_t i = 0; i < m; ++i) std::fill(C + i * crs + j_begin, C + i * crs + j_end, T(0));
    return;
  }
  if (m == 1 && B.cs == 1) {
    gemm_one_row<T>(k, A, B, C, accumulate, j_begin, j_end);
    return;
  }
  const gemm_panels sizes = gemm_panel_sizes<T>(m, j_end - j_begin, k);
  // small products (the unit's examples, fixed sizes, one decoded row against small weights)
  // pack on the stack and allocate nothing; others into this thread's panels
  constexpr std::size_t stack_numbers = gemm_stack_bytes / sizeof(T);
  alignas(64) T stack[stack_numbers];
  T* pa;
  T* pb;
  if (sizes.a + sizes.b <= stack_numbers) {
    pa = stack;
    pb = stack + (sizes.a + 15) / 16 * 16;
    if (pb + sizes.b > stack + stack_numbers) pb = stack + sizes.a;
  } else {
    gemm_buffers<T>& buf = gemm_buffers<T>::of_this_thread();
    pa = gemm_buffers<T>::aligned(buf.a, sizes.a);
    pb = gemm_buffers<T>::aligned(buf.b, sizes.b);
  }
  for (std::size_t j0 = j_begin; j0 < j_end; j0 += G::NC) {
    const std::size_t nc = std::min(G::NC, j_end - j0);
    for (std::size_t k0 = 0; k0 < k; k0 += G::KC) {
      const std::size_t kc = std::min(G::KC, k - k0);
      const bool first = k0 == 0 && !accumulate;
      pack_b<T, G::NR>(B, k0, kc, j0, nc, pb);
      for (std::size_t i0 = 0; i0 < m; i0 += G::MC) {
        const std::size_t mc = std::min(G::MC, m - i0);
        pack_a<T, G::MR>(A, i0, mc, k0, kc, pa);
        for (std::size_t js = 0; js < nc; js += G::NR) {
          const std::size_t cols = std::min(G::NR, nc - js);
          const T* b_sliver = pb + (js / G::NR) * kc * G::NR;
          for (std::size_t is = 0; is < mc; is += G::MR) {
            const std::size_t rows = std::min(G::MR, mc - is);
            micro_kernel<T, G::MR, G::NV, G::W>(kc, pa + (is / G::MR) * kc * G::MR, b_sliver,
                                                C + (i0 + is) * crs + j0 + js, crs, rows, cols, first);
          }
        }
      }
    }
  }
}

#if defined(ATTN_USE_CBLAS)
/// ATTN_USE_CBLAS: the products of float and double go to the CBLAS the program links (OpenBLAS,
/// MKL, BLIS), as Eigen's EIGEN_USE_BLAS does; long double, and operands neither of whose strides
/// is 1, stay on attn's kernel. The sums are then in the BLAS's order: the bit-for-bit promises
/// of the file comment (a row alone, threads) are the BLAS's to keep, not attn's.
inline constexpr bool gemm_uses_cblas = true;

/// An operand of rows × cols as CBLAS takes it, row-major: itself (NoTrans, its rows `ld`
/// apart) or its transpose (Trans, its columns `ld` apart); false when it is neither. (A stride
/// of a dimension of size 1 is never read, so it need not meet CBLAS's ld ≥ that size.)
template <class T>
[[nodiscard]] inline bool cblas_operand(gemm_matrix<const T> M, std::size_t rows, std::size_t cols,
                                        CBLAS_TRANSPOSE& t, int& ld) noexcept {
  if (M.cs == 1 && (rows == 1 || M.rs >= cols)) {
    t = CblasNoTrans;
    ld = static_cast<int>(rows == 1 ? std::max<std::size_t>(cols, 1) : M.rs);
    return true;
  }
  if (M.rs == 1 && (cols == 1 || M.cs >= rows)) {
    t = CblasTrans;
    ld = static_cast<int>(cols == 1 ? std::max<std::size_t>(rows, 1) : M.cs);
    return true;
  }
  return false;
}

/// C = A·B (+ C) on the CBLAS, C row-major; false when it cannot take these operands.
template <class T>
bool cblas_gemm(std::size_t m, std::size_t n, std::size_t k, gemm_matrix<const T> A, gemm_matrix<const T> B,
                T* C, std::size_t crs, bool accumulate) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    CBLAS_TRANSPOSE ta, tb;
    int lda, ldb;
    if (m == 0 || n == 0 || k == 0 || !cblas_operand(A, m, k, ta, lda) || !cblas_operand(B, k, n, tb, ldb))
      return false;
    const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
    const int ldc = static_cast<int>(m == 1 ? n : std::max<std::size_t>(crs, n));
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A.data, lda, B.data, ldb, accumulate ? 1.0f : 0.0f, C, ldc);
    else
      cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, A.data, lda, B.data, ldb, accumulate ? 1.0 : 0.0, C, ldc);
    return true;
  } else {
    return false;
  }
}
#else
/// Whether the products go to a CBLAS (ATTN_USE_CBLAS: see there).
inline constexpr bool gemm_uses_cblas = false;
#endif

/// C = A·B or C += A·B: A (m × k), B (k × n), C (m × n) at c with strides (crs, ccs), one of
/// which is 1 (row-major or column-major C; a column-major C is computed as Cᵀ = Bᵀ Aᵀ, the same
/// sums). Deterministic (the file comment).
template <class T>
void gemm(std::size_t m, std::size_t n, std::size_t k, gemm_matrix<const T> A, gemm_matrix<const T> B,
          gemm_matrix<T> C, bool accumulate) {
#if defined(ATTN_USE_CBLAS)
  if (C.cs == 1 ? cblas_gemm<T>(m, n, k, A, B, C.data, C.rs, accumulate)
                : cblas_gemm<T>(n, m, k, B.transposed(), A.transposed(), C.data, C.cs, accumulate))
    return;
#endif
  if (C.cs == 1)
    gemm_columns<T>(m, k, A, B, C.data, C.rs, accumulate, 0, n);
  else
    gemm_columns<T>(n, k, B.transposed(), A.transposed(), C.data, C.cs, accumulate, 0, m);
}

/// gemm on `threads` threads (detail::usable_threads): C's columns (its rows when C is
/// column-major) in pieces of whole NR-column slivers, each piece one thread's gemm_columns with
/// its own packed panels. Each C_ij is summed as in one thread: the same bits.
template <class T>
void gemm(std::size_t m, std::size_t n, std::size_t k, gemm_matrix<const T> A, gemm_matrix<const T> B,
          gemm_matrix<T> C, bool accumulate, std::size_t threads) {
  if (C.cs != 1) {
    gemm<T>(n, m, k, B.transposed(), A.transposed(), C.transposed(), accumulate, threads);
    return;
  }
#if defined(ATTN_USE_CBLAS)
  if (cblas_gemm<T>(m, n, k, A, B, C.data, C.rs, accumulate)) return;  // (the BLAS's own threads)
#endif
  using G = gemm_blocking<T>;
  const std::size_t slivers = (n + G::NR - 1) / G::NR;
  const std::size_t pieces = std::min(usable_threads(threads), slivers);
  if (pieces <= 1 || m * n * k < 32768) {  // (below about 2^15 multiply-adds a thread costs more)
    gemm_columns<T>(m, k, A, B, C.data, C.rs, accumulate, 0, n);
    return;
  }
  split_over_threads(pieces, pieces, [&](std::size_t p) {
    const std::size_t j0 = slivers * p / pieces * G::NR, j1 = std::min(n, slivers * (p + 1) / pieces * G::NR);
    gemm_columns<T>(m, k, A, B, C.data, C.rs, accumulate, j0, j1);
  });
}

}  // namespace attn::detail
