#pragma once
/// \file attn/detail/simd.hpp
/// Dot products and sums written with GCC/Clang vector types, for the one thing plain loops
/// do not get right: the horizontal sum at the end of a reduction. GCC vectorizes the
/// loop of `acc[k] += a[i + k] * b[i + k]` and then takes the partial sums apart into scalars
/// to add them up (dozens of instructions per dot product, which is most of the work for
/// notes of 64 numbers); with vector types the partial sums stay in one register and the
/// horizontal sum is a handful of shuffles. The vector is one machine register wide (64 bytes
/// with AVX-512, 32 with AVX, else 16), never wider: GCC splits wider ones through memory.
///
/// Every function here also has a plain path, taken in constant evaluation, for other
/// compilers, for long double, and with ATTN_NO_VECTOR_EXTENSIONS defined. It adds in the
/// same order as the vector path (constant evaluation does not fuse multiply-adds, though).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "attn/detail/config.hpp"
#include "attn/detail/prefetch.hpp"

namespace attn::detail {

/// Bytes in one vector register of the target (what the compiler was told it may use).
#if defined(__AVX512F__)
inline constexpr std::size_t simd_bytes = 64;
#elif defined(__AVX__)
inline constexpr std::size_t simd_bytes = 32;
#else
inline constexpr std::size_t simd_bytes = 16;
#endif

/// Whether T gets the vector path (float and double).
template <class T>
inline constexpr bool simd_type = ATTN_VECTOR_EXTENSIONS != 0 &&
                                  std::numeric_limits<T>::is_iec559 &&
                                  (sizeof(T) == 4 || sizeof(T) == 8);

/// Partial sums per dot product or sum: the lanes of one register for float and double
/// (16/8 with AVX-512, 8/4 with AVX), 4 otherwise.
template <class T>
inline constexpr std::size_t simd_lanes = simd_type<T> ? simd_bytes / sizeof(T) : 4;

/// Σ_k acc[k] for W (a power of two) partial sums, as a tree: level by level
/// acc[k] += acc[k + W/2], the order the vector path's shuffles add in.
template <std::size_t W, class T>
[[nodiscard]] constexpr T reduce(T* acc) noexcept {
  static_assert(W != 0 && (W & (W - 1)) == 0, "reduce: W must be a power of two");
  if constexpr (W == 1) {
    return acc[0];
  } else {
    // one level per instantiation, so that every loop has a constant trip count and unrolls
    for (std::size_t k = 0; k < W / 2; ++k) acc[k] += acc[k + W / 2];
    return reduce<W / 2>(acc);
  }
}

/// β·x, rounded on its own (for float or double, or a vector of them no wider than a register;
/// other types as they are): the product is opaque to the optimizer, so that an expression
/// built on it — β·x − m above all — is not fused with it into one FMA. GCC (whose default is
/// -ffp-contract=fast) and clang (-ffp-contract=on) fuse a·b − c wherever the target has FMA
/// (-march=native, -mfma, AArch64), and the fused β·x − m skips the rounding of β·x: for the
/// max itself it is then β·x_max − fl(β·x_max), an ulp of β·x_max, not 0. At β·x ≈ 3e39 in
/// double that is ±10^23, and e^t is inf or 0 where it must be 1 (a NaN row); with β = 10^5 the
/// sure answer is not exactly 1. Costs one instruction where fusing would have saved one.
template <class T, class V>
[[nodiscard]] [[gnu::always_inline]] inline constexpr V rounded_product(T beta, V x) noexcept {
  V y = beta * x;
#if defined(__GNUC__) || defined(__clang__)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (!std::is_constant_evaluated()) {
#if defined(__x86_64__) || defined(__i386__)
      __asm__("" : "+v"(y));
#elif defined(__aarch64__)
      __asm__("" : "+w"(y));
#else
      __asm__("" : "+m"(y));
#endif
    }
  }
#endif
  return y;
}

/// β·x − m with β·x rounded first (rounded_product): exactly 0 at the max, ≤ 0 below it.
template <class T, class V>
[[nodiscard]] [[gnu::always_inline]] inline constexpr V scaled_minus(T beta, V x, T m) noexcept {
  return rounded_product(beta, x) - m;
}

#if ATTN_VECTOR_EXTENSIONS
/// Bytes / sizeof(E) numbers of type E (float, double or a fixed-width integer) in one vector.
template <class E, std::size_t Bytes>
  requires std::is_arithmetic_v<E>
struct vector_of {
  typedef E type __attribute__((vector_size(Bytes)));
};
/// W numbers of type T in one vector.
template <class T, std::size_t W>
using vec = typename vector_of<T, W * sizeof(T)>::type;

/// W numbers from p (any alignment).
// GCC -Warray-bounds: once a kernel is inlined into a caller whose buffer it can size (a
// std::vector of 3 doubles, a fixed-size result), GCC reports the vector loads of loop
// iterations that the row length rules out but that it could not fold away (each kernel loads
// whole vectors only below n / lanes · lanes). Which callers it reports moves with every
// inlining decision, so the false report is silenced here, at the one place every vector load
// goes through; the sanitizer builds (docs/errors.md) check the real bounds.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif
template <class T, std::size_t W>
[[gnu::always_inline]] inline vec<T, W> load(const T* p) noexcept {
  vec<T, W> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// Lane of fold's first operand for output lane O: x and y (y's lanes count from W) hold rows
/// of G lanes, the output rows of G/2, x's rows first.
template <std::size_t O, std::size_t W, std::size_t G>
inline constexpr int fold_lane = static_cast<int>((O / (G / 2) < W / G ? 0 : W - (W / G) * G) +
                                                  (O / (G / 2)) * G + O % (G / 2));

template <class T, std::size_t W, std::size_t G, std::size_t... O>
[[gnu::always_inline]] inline vec<T, sizeof...(O)> fold_impl(vec<T, W> x, vec<T, W> y,
                                                             std::index_sequence<O...>) noexcept {
  return __builtin_shufflevector(x, y, fold_lane<O, W, G>...) +
         __builtin_shufflevector(x, y, (fold_lane<O, W, G> + static_cast<int>(G / 2))...);
}

/// One level of the tree for two vectors at once: x and y each hold W/G rows of G lanes; the
/// result holds x's rows then y's, G/2 lanes each, lane k being lane k + lane k + G/2 of the
/// row before (reduce's order).
template <class T, std::size_t W, std::size_t G>
[[gnu::always_inline]] inline vec<T, W> fold(vec<T, W> x, vec<T, W> y) noexcept {
  return fold_impl<T, W, G>(x, y, std::make_index_sequence<W>{});
}

/// One level of the tree within one vector of W/G rows of G lanes: half as many lanes.
template <class T, std::size_t W, std::size_t G>
[[gnu::always_inline]] inline vec<T, W / 2> fold(vec<T, W> x) noexcept {
  return fold_impl<T, W, G>(x, x, std::make_index_sequence<W / 2>{});
}

template <class T, std::size_t W, std::size_t G, std::size_t... K>
[[gnu::always_inline]] inline vec<T, W> fold_rows_impl(vec<T, W> x,
                                                       std::index_sequence<K...>) noexcept {
  return x + __builtin_shufflevector(x, x, static_cast<int>(K ^ (G / 2))...);
}

/// One level of the tree within each row of G lanes of x, in place: lane k of a row becomes
/// lane k + lane k + G/2 for k < G/2 (fold's numbers; the lanes past G/2 hold the same sums).
/// The lanes are swapped within rows, which for rows of up to 16 bytes stay within 128-bit
/// lanes: an in-lane shuffle, one cycle where one across lanes takes three or four.
template <class T, std::size_t W, std::size_t G>
[[gnu::always_inline]] inline vec<T, W> fold_rows(vec<T, W> x) noexcept {
  return fold_rows_impl<T, W, G>(x, std::make_index_sequence<W>{});
}

/// Σ of the W lanes of v in reduce<W>'s order: add the upper half to the lower, repeat.
template <class T, std::size_t W>
[[gnu::always_inline]] inline T hsum(vec<T, W> v) noexcept {
  if constexpr (W == 4) {
    return (v[0] + v[2]) + (v[1] + v[3]);
  } else if constexpr (W == 2) {
    return v[0] + v[1];
  } else {
    return hsum<T, W / 2>(fold<T, W, W>(v));
  }
}

/// The four horizontal sums of a0..a3, each in hsum's order exactly (so in reduce's), with
/// the shuffles shared between rows: about four instructions per row instead of ten.
template <class T, std::size_t W>
[[gnu::always_inline]] inline void hsum4(vec<T, W> a0, vec<T, W> a1, vec<T, W> a2, vec<T, W> a3,
                                         T* out) noexcept {
  if constexpr (W < 4) {
    out[0] = hsum<T, W>(a0);
    out[1] = hsum<T, W>(a1);
    out[2] = hsum<T, W>(a2);
    out[3] = hsum<T, W>(a3);
  } else {
    const vec<T, W> u = fold<T, W, W / 2>(fold<T, W, W>(a0, a1), fold<T, W, W>(a2, a3));
    // u: four rows of W/4 lanes; fold within until one lane per row
    if constexpr (W == 4) {
      std::memcpy(out, &u, 4 * sizeof(T));
    } else if constexpr (W == 8) {
      const vec<T, W> t = fold_rows<T, W, 2>(u);
      const vec<T, 4> r = __builtin_shufflevector(t, t, 0, 2, 4, 6);
      std::memcpy(out, &r, 4 * sizeof(T));
    } else {
      static_assert(W == 16, "hsum4: 4, 8 or 16 lanes");
      const vec<T, W> t = fold_rows<T, W, 2>(fold_rows<T, W, 4>(u));
      const vec<T, 4> r = __builtin_shufflevector(t, t, 0, 4, 8, 12);
      std::memcpy(out, &r, 4 * sizeof(T));
    }
  }
}
#endif

#if ATTN_VECTOR_EXTENSIONS
/// Lane k of the first and of the second row of a transpose stage (rows x and y, y's lanes
/// counted from W): the B-blocks of lanes swapped between them.
template <std::size_t W, std::size_t B>
inline constexpr auto transpose_lane = [](std::size_t k, bool second) {
  return static_cast<int>(second ? ((k & B) != 0 ? W + k : k + B) : ((k & B) != 0 ? W + k - B : k));
};

template <class T, std::size_t W, std::size_t B, std::size_t... K>
[[gnu::always_inline]] inline void transpose_stage(vec<T, W>* rows,
                                                   std::index_sequence<K...>) noexcept {
  ATTN_UNROLL
  for (std::size_t i = 0; i < W; ++i) {
    if ((i & B) != 0) continue;
    const vec<T, W> x = rows[i], y = rows[i + B];
    rows[i] = __builtin_shufflevector(x, y, transpose_lane<W, B>(K, false)...);
    rows[i + B] = __builtin_shufflevector(x, y, transpose_lane<W, B>(K, true)...);
  }
  if constexpr (B > 1) transpose_stage<T, W, B / 2>(rows, std::index_sequence<K...>{});
}

/// The W × W numbers at src (row i at src + i·ss) written transposed to dst (row i at
/// dst + i·ds): W rows of one vector, log2 W stages of two-source shuffles.
template <class T, std::size_t W>
[[gnu::always_inline]] inline void transpose_square(const T* src, std::size_t ss, T* dst,
                                                    std::size_t ds) noexcept {
  vec<T, W> rows[W];
  ATTN_UNROLL
  for (std::size_t i = 0; i < W; ++i) rows[i] = load<T, W>(src + i * ss);
  transpose_stage<T, W, W / 2>(rows, std::make_index_sequence<W>{});
  ATTN_UNROLL
  for (std::size_t i = 0; i < W; ++i) std::memcpy(dst + i * ds, &rows[i], sizeof rows[i]);
}
#endif

/// sum_of_products' plain form (constant evaluation, other compilers, long double): the same order
/// as the vector form below.
template <class T>
[[nodiscard]] constexpr T sum_of_products_plain(const T* a, const T* b, std::size_t n) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  T head = 0;
  std::size_t i = 0;
  if (n >= L) {
    T acc[L] = {};
    for (; i + L <= n; i += L)
      for (std::size_t k = 0; k < L; ++k) acc[k] += a[i + k] * b[i + k];
    head = reduce<L>(acc);
  }
  T tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return head + tail;
}

/// Σ_i a_i b_i added in order from +0: sum_of_products' tail, and the whole of it below one
/// vector's lanes (there dot adds it to 0, which changes nothing: a sum begun at +0 is never −0).
template <class T>
[[nodiscard]] constexpr T dot_in_order(const T* a, const T* b, std::size_t n) noexcept {
  T t = 0;
  for (std::size_t i = 0; i < n; ++i) t += a[i] * b[i];
  return t;
}

#if ATTN_VECTOR_EXTENSIONS
template <class T>
[[nodiscard]] inline T sum_of_products_vec(const T* a, const T* b, std::size_t n) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  const std::size_t whole = n / L * L;
  T head = 0;
  if (whole != 0) {
    vec<T, L> acc = {};
    for (std::size_t i = 0; i < whole; i += L) acc += load<T, L>(a + i) * load<T, L>(b + i);
    head = hsum<T, L>(acc);
  }
  return head + dot_in_order(a + whole, b + whole, n - whole);
}
#endif

/// Σ_i a_i b_i: simd_lanes<T> partial sums (lane k adds the products i ≡ k mod lanes of the
/// whole vectors), summed as a tree, plus the tail added in order. Below one vector: in order
/// (0 + the tail: the same number).
template <class T>
[[nodiscard]] constexpr T sum_of_products(const T* a, const T* b, std::size_t n) noexcept {
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    if (!std::is_constant_evaluated()) return sum_of_products_vec(a, b, n);
  }
#endif
  return sum_of_products_plain(a, b, n);
}

#if ATTN_VECTOR_EXTENSIONS
/// dot_rows' vector path (see dot_rows); returns how many rows it did (a multiple of 4). With
/// Prefetch, the same rows of `ahead` are prefetched into L2 as these are read, the `lines`
/// of the eight rows at a time (spread over the work, so that memory keeps streaming while
/// the rows are scored).
template <bool Prefetch, class T>
[[gnu::always_inline]] inline std::size_t
dot_rows_vec(const T* q, const T* H, std::size_t stride, std::size_t n, std::size_t d, T* out,
             const T* ahead, prefetch_lines lines) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  const std::size_t whole = d / L * L;  // the vector part of each row
  std::size_t j = 0;
  for (; j + 8 <= n; j += 8) {  // eight chains of fused multiply-adds in flight
    vec<T, L> a0 = {}, a1 = {}, a2 = {}, a3 = {}, a4 = {}, a5 = {}, a6 = {}, a7 = {};
    // one pointer that moves along the rows and eight offsets from it: few registers
    // live in the loop (eight row pointers were spilled), the same products
    const std::size_t s = stride;
    const T* p = H + j * stride;
    [[maybe_unused]] const T* pa = Prefetch ? ahead + j * stride : nullptr;
    for (std::size_t i = 0; i < whole; i += L, p += L) {
      if constexpr (Prefetch) {
        if (prefetch_at<L * sizeof(T)>(i / L, lines))
          for (std::size_t r = 0; r < 8; ++r) prefetch_l2(pa + r * s + i);
      }
      const vec<T, L> x = load<T, L>(q + i);
      a0 += x * load<T, L>(p);
      a1 += x * load<T, L>(p + s);
      a2 += x * load<T, L>(p + 2 * s);
      a3 += x * load<T, L>(p + 3 * s);
      a4 += x * load<T, L>(p + 4 * s);
      a5 += x * load<T, L>(p + 5 * s);
      a6 += x * load<T, L>(p + 6 * s);
      a7 += x * load<T, L>(p + 7 * s);
    }
    hsum4<T, L>(a0, a1, a2, a3, out + j);
    hsum4<T, L>(a4, a5, a6, a7, out + j + 4);
  }
  for (; j + 4 <= n; j += 4) {
    const T* h0 = H + j * stride;
    const T* h1 = h0 + stride;
    const T* h2 = h1 + stride;
    const T* h3 = h2 + stride;
    vec<T, L> a0 = {}, a1 = {}, a2 = {}, a3 = {};
    for (std::size_t i = 0; i < whole; i += L) {
      const vec<T, L> x = load<T, L>(q + i);
      a0 += x * load<T, L>(h0 + i);
      a1 += x * load<T, L>(h1 + i);
      a2 += x * load<T, L>(h2 + i);
      a3 += x * load<T, L>(h3 + i);
    }
    hsum4<T, L>(a0, a1, a2, a3, out + j);
  }
  if constexpr (Prefetch) prefetch_rows_l2(ahead + (n / 8 * 8) * stride, stride, n % 8, d);
  // The tails (d not a multiple of L), added in order after the vector part as
  // sum_of_products adds them, in a loop of their own: inside the loops above they cost registers.
  if (whole < d)
    for (std::size_t r = 0; r < j; ++r)
      out[r] += dot_in_order(q + whole, H + r * stride + whole, d - whole);
  return j;
}
#endif

/// out_j = sum_of_products(q, h_j, d) for the n rows h_j = H + j·stride, eight rows at a time, then
/// four (q is loaded once for all of them, and eight chains of fused multiply-adds are in flight,
/// enough to keep two FMA units busy). Each row is summed in sum_of_products' order exactly.
template <class T>
constexpr void dot_rows(const T* q, const T* H, std::size_t stride, std::size_t n, std::size_t d,
                        T* out) noexcept {
  std::size_t j = 0;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    if (!std::is_constant_evaluated() && d >= simd_lanes<T>)
      j = dot_rows_vec<false>(q, H, stride, n, d, out, H, prefetch_lines::all);  // (no ahead)
  }
#endif
  if (d < simd_lanes<T>) {  // rows shorter than a vector: four in flight, each dot_in_order's
    const std::size_t fours = n / 4 * 4;
    for (; j < fours; j += 4) {
      const T* h = H + j * stride;
      T t0 = 0, t1 = 0, t2 = 0, t3 = 0;
      for (std::size_t i = 0; i < d; ++i) {
        t0 += q[i] * h[i];
        t1 += q[i] * h[stride + i];
        t2 += q[i] * h[2 * stride + i];
        t3 += q[i] * h[3 * stride + i];
      }
      out[j] = t0;
      out[j + 1] = t1;
      out[j + 2] = t2;
      out[j + 3] = t3;
    }
  }
  for (; j < n; ++j) out[j] = sum_of_products(q, H + j * stride, d);
}

/// dot_rows (the same numbers), with the `lines` of the n rows of `ahead` (the same stride, d
/// numbers each), which the caller reads next, prefetched into L2 while these are scored: a
/// hint, for rows that stream from memory.
template <class T>
inline void dot_rows_prefetching(const T* q, const T* H, std::size_t stride, std::size_t n,
                                 std::size_t d, T* out, [[maybe_unused]] const T* ahead,
                                 [[maybe_unused]] prefetch_lines lines) noexcept {
  std::size_t j = 0;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    if (d >= simd_lanes<T>) j = dot_rows_vec<true>(q, H, stride, n, d, out, ahead, lines);
  }
#endif
  for (; j < n; ++j) out[j] = sum_of_products(q, H + j * stride, d);
}

/// out_a_j = sum_of_products(a, h_j, d) and out_b_j = sum_of_products(b, h_j, d) for the n rows h_j
/// = H + j·stride: two products from one read of each row from memory (four rows at a time, the
/// second product from L1), each summed in sum_of_products' order exactly.
template <class T>
constexpr void dot_rows2(const T* a, const T* b, const T* H, std::size_t stride, std::size_t n,
                         std::size_t d, T* out_a, T* out_b) noexcept {
  std::size_t j = 0;
#if ATTN_VECTOR_EXTENSIONS
  constexpr std::size_t L = simd_lanes<T>;
  if constexpr (simd_type<T>) {
    if (!std::is_constant_evaluated() && d >= L) {
      for (; j + 4 <= n; j += 4) {
        const T* h0 = H + j * stride;
        const T* h1 = h0 + stride;
        const T* h2 = h1 + stride;
        const T* h3 = h2 + stride;
        // a's four products, then b's over the same four rows (now in L1): one loop with both
        // had g++ reload each row and each of a and b for every product
        vec<T, L> a0 = {}, a1 = {}, a2 = {}, a3 = {}, b0 = {}, b1 = {}, b2 = {}, b3 = {};
        std::size_t i = 0;
        for (; i + L <= d; i += L) {
          const vec<T, L> x = load<T, L>(a + i);
          a0 += x * load<T, L>(h0 + i);
          a1 += x * load<T, L>(h1 + i);
          a2 += x * load<T, L>(h2 + i);
          a3 += x * load<T, L>(h3 + i);
        }
        hsum4<T, L>(a0, a1, a2, a3, out_a + j);
        for (std::size_t k = 0; k + L <= d; k += L) {
          const vec<T, L> y = load<T, L>(b + k);
          b0 += y * load<T, L>(h0 + k);
          b1 += y * load<T, L>(h1 + k);
          b2 += y * load<T, L>(h2 + k);
          b3 += y * load<T, L>(h3 + k);
        }
        hsum4<T, L>(b0, b1, b2, b3, out_b + j);
        if (i < d) {
          for (std::size_t r = 0; r < 4; ++r) {
            const T* h = H + (j + r) * stride;
            T ta = 0, tb = 0;
            for (std::size_t k = i; k < d; ++k) {
              ta += a[k] * h[k];
              tb += b[k] * h[k];
            }
            out_a[j + r] += ta;
            out_b[j + r] += tb;
          }
        }
      }
    }
  }
#endif
  for (; j < n; ++j) {
    out_a[j] = sum_of_products(a, H + j * stride, d);
    out_b[j] = sum_of_products(b, H + j * stride, d);
  }
}

/// Σ_i x_i: four vectors of partial sums (four chains of adds in flight), added as a tree,
/// plus the tail in order.
template <class T>
[[nodiscard]] constexpr T sum_of(const T* x, std::size_t n) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  const std::size_t whole = n / (4 * L) * (4 * L);
  T head = 0;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    if (!std::is_constant_evaluated()) {
      if (whole != 0) {
        vec<T, L> a0 = {}, a1 = {}, a2 = {}, a3 = {};
        for (std::size_t i = 0; i < whole; i += 4 * L) {
          a0 += load<T, L>(x + i);
          a1 += load<T, L>(x + i + L);
          a2 += load<T, L>(x + i + 2 * L);
          a3 += load<T, L>(x + i + 3 * L);
        }
        head = hsum<T, L>((a0 + a2) + (a1 + a3));
      }
      T tail = 0;
      for (std::size_t i = whole; i < n; ++i) tail += x[i];
      return head + tail;
    }
  }
#endif
  if (whole != 0) {
    T acc[4 * L] = {};
    for (std::size_t i = 0; i < whole; i += 4 * L)
      for (std::size_t k = 0; k < 4 * L; ++k) acc[k] += x[i + k];
    // (a0 + a2) + (a1 + a3), then the lanes: the first two levels of reduce<4L> per lane
    head = reduce<4 * L>(acc);
  }
  T tail = 0;
  for (std::size_t i = whole; i < n; ++i) tail += x[i];
  return head + tail;
}

}  // namespace attn::detail
