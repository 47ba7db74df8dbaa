#pragma once
/// \file attn/detail/softmax_row.hpp
/// The finite-row softmax, w_j = exp(β x_j − m) / Σ_k exp(β x_k − m): its exps and sum over a
/// row in memory (blocks of vectors), in registers for short rows, and unrolled for rows whose
/// length is fixed at compile time — schedules of the same steps, with the same sums in the
/// same order, so they agree to the bit. Kernel layer: knows no public algorithm (the rules
/// for masks and non-finite rows are attn/softmax.hpp's).
#include "attn/detail/config.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "attn/detail/exp.hpp"
#include "attn/detail/reduce.hpp"
#include "attn/detail/rows.hpp"
#include "attn/detail/simd.hpp"

namespace attn::detail {

/// The length of a row known only at run time (std::dynamic_extent, attn::dynamic).
inline constexpr std::size_t dynamic_row = static_cast<std::size_t>(-1);

/// The type sums of exponentials are returned in: double for float, so that a softmax over a
/// million floats still has its sum right to about an ulp.
template <class T>
using sum_t = std::conditional_t<std::is_same_v<T, float>, double, T>;

/// 1/s rounded to T, as softmax forms it from a row's sum s (sum_t<T>(1) / s, then rounded to
/// T), for a sum that is a T already (a row of one block). For float by a float division: the
/// same bits (the double quotient rounded to float is the correctly rounded float quotient, as
/// double rounding is innocuous for division when 53 ≥ 2·24 + 2, Figueroa 1995), without the
/// conversions and the slower double divide on the row's critical path.
template <class T>
[[nodiscard]] constexpr T reciprocal_of_sum(T s) noexcept {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<sum_t<T>, double> &&
                std::numeric_limits<double>::digits >= 2 * std::numeric_limits<float>::digits + 2) {
    return T(1) / s;
  } else {
    return static_cast<T>(sum_t<T>(1) / static_cast<sum_t<T>>(s));
  }
}

/// keep ? v : T(0) without a branch. For float and double it works on the bits, so that the
/// loops around it stay branch-free (GCC will not if-convert a float `?:` that is followed
/// by float arithmetic under -ftrapping-math) and a masked v may hold anything.
template <class T>
[[nodiscard]] constexpr T keep_or_zero(bool keep, T v) noexcept {
  if constexpr (std::numeric_limits<T>::is_iec559 && sizeof(T) == 4) {
    return detail::bit_cast<T>(detail::bit_cast<std::uint32_t>(v) &
                            (0u - static_cast<std::uint32_t>(keep)));
  } else if constexpr (std::numeric_limits<T>::is_iec559 && sizeof(T) == 8) {
    return detail::bit_cast<T>(detail::bit_cast<std::uint64_t>(v) &
                            (std::uint64_t{0} - static_cast<std::uint64_t>(keep)));
  } else {
    return keep ? v : T(0);
  }
}

/// Whether every t_i = β x_i − m of a row with least β·x_i = lo and max m lies within
/// exp_in_range's range (86.5 for float, 708 for double): t ≤ 0 at every i, and t ≥ fl(lo − m),
/// as subtraction rounds monotonically. False for NaN or infinite lo or m, and for types
/// without the vector exp.
template <class T>
[[nodiscard]] constexpr bool exps_in_range(T lo, T m) noexcept {
  if constexpr (simd_type<T>) {
    constexpr T limit = detail::bit_cast<T>(exp_consts<T>::in_range_x);
    return m - m == T(0) && lo - m >= -limit;
  } else {
    return false;
  }
}

/// out_i = exp(β x_i − m)·f, and 0 where a mask is given and mask_i is false, as plain maps
/// that the compilers vectorize (flattened, so that exp is inlined into them whatever the
/// caller's size). `out` may alias `x`.
template <class T>
ATTN_FLATTEN constexpr void exp_shifted_plain(const T* x, T* out, std::size_t n, T beta, T m,
                                              const mask_byte* mask, T f = T(1)) noexcept {
  if (mask == nullptr) {
    if (f == T(1)) {
      for (std::size_t i = 0; i < n; ++i) out[i] = attn::detail::exp(scaled_minus(beta, x[i], m));
    } else {
      for (std::size_t i = 0; i < n; ++i)
        out[i] = attn::detail::exp(scaled_minus(beta, x[i], m)) * f;
    }
  } else {
    for (std::size_t i = 0; i < n; ++i)
      out[i] = keep_or_zero(mask[i], attn::detail::exp(scaled_minus(beta, x[i], m))) * f;
  }
}

/// exp_shifted_plain's numbers; at run time, for float and double without a mask, through
/// whole vectors (exp_shifted_vec: β·x − m with β·x rounded, as scaled_minus, which for β = 1
/// is x − m exactly, then times f, which for f = 1 changes nothing).
template <class T>
ATTN_FLATTEN constexpr void exp_shifted(const T* x, T* out, std::size_t n, T beta, T m,
                                        const mask_byte* mask = nullptr, T f = T(1)) noexcept {
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    if (mask == nullptr && !std::is_constant_evaluated()) {
      exp_shifted_vec<exp_shift::scaled_minus_m, true, true>(x, out, n, beta, m, f);
      return;
    }
  }
#endif
  exp_shifted_plain(x, out, n, beta, m, mask, f);
}

/// e_j = exp(β s_j − m) for N numbers, N fixed at compile time and small: the exps of a short
/// row as one vector of P = N rounded up to 4 lanes. At run time, for float and double, that
/// vector is built in a register (stored and reloaded it would cost a store-forwarding stall,
/// on the critical path of a small attend) and goes through exp_in_range when all N are in its
/// range; otherwise, and in constant evaluation, a plain loop of exp. The same bits either way.
template <std::size_t N, class T>
ATTN_FLATTEN ATTN_ALWAYS_INLINE constexpr void exp_small_shifted(const T* s, T beta, T m,
                                                                 T* e) noexcept {
  constexpr std::size_t P = (N + 3) / 4 * 4;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T> &&
                (P * sizeof(T) == 16 || P * sizeof(T) == 32 || P * sizeof(T) == 64) &&
                P * sizeof(T) <= simd_bytes) {
    if (!std::is_constant_evaluated()) {
      using U = typename exp_consts<T>::uint;
      vec<T, P> t = {};
      if (beta == T(1)) {  // β·s is s: no product to keep apart
        for (std::size_t j = 0; j < N; ++j) t[j] = s[j] - m;
      } else {
        for (std::size_t j = 0; j < N; ++j) t[j] = scaled_minus(beta, s[j], m);
      }
      vec<U, P> bad = {};
      const vec<T, P> y = exp_in_range<T, P>(t, bad);
      if (!any_top_bit<U, P>(bad)) {
        for (std::size_t j = 0; j < N; ++j) e[j] = y[j];
        return;
      }
    }
  }
#endif
  T x[P];
  for (std::size_t j = 0; j < N; ++j) x[j] = scaled_minus(beta, s[j], m);
  for (std::size_t j = N; j < P; ++j) x[j] = T(0);
  for (std::size_t j = 0; j < P; ++j) x[j] = attn::detail::exp(x[j]);  // P lanes: whole vectors
  for (std::size_t j = 0; j < N; ++j) e[j] = x[j];
}

#if ATTN_VECTOR_EXTENSIONS
/// The largest lane of v by compares, as a tree of halves (NaN lanes may be passed over).
template <class T, std::size_t W>
[[nodiscard]] [[gnu::always_inline]] inline T max_lane(vec<T, W> v) noexcept {
  if constexpr (W == 1) {
    return v[0];
  } else {
    const auto halves = [&]<std::size_t... I>(std::index_sequence<I...>) {
      const vec<T, W / 2> lo = __builtin_shufflevector(v, v, static_cast<int>(I)...);
      const vec<T, W / 2> hi = __builtin_shufflevector(v, v, static_cast<int>(I + W / 2)...);
      return hi > lo ? hi : lo;
    };
    return max_lane<T, W / 2>(halves(std::make_index_sequence<W / 2>{}));
  }
}

#endif

/// w = softmax(β·s) for N numbers, N fixed at compile time and small, in registers, when every
/// t_j = β s_j − m (m = max_j β s_j) lies within exp_in_range's range: then every s_j is
/// finite and every weight nonzero (each is at least e^-86.5/N for float, e^-708/N for double),
/// and the weights are softmax's to the bit (the max is taken by compares, which can differ
/// from softmax's only in the sign of a zero max, and no t_j = x − (±0) shows that in its
/// exp). Returns false, writing nothing, for any other row (a NaN, ±inf, scores too far apart)
/// and where the row does not fit one register or sums in other than plain order; the caller
/// then takes the general path.
template <std::size_t N, class T>
ATTN_ALWAYS_INLINE constexpr bool softmax_small_in_range([[maybe_unused]] const T* s,
                                                         [[maybe_unused]] T beta,
                                                         [[maybe_unused]] T* w) noexcept {
#if ATTN_VECTOR_EXTENSIONS
  constexpr std::size_t P = (N + 3) / 4 * 4;
  constexpr std::size_t bytes = P * sizeof(T);
  if constexpr (simd_type<T> && (bytes == 16 || bytes == 32 || bytes == 64) &&
                bytes <= simd_bytes && N < 4 * simd_lanes<T>) {
    if (!std::is_constant_evaluated()) {
      using U = typename exp_consts<T>::uint;
      vec<T, P> y;
      for (std::size_t j = 0; j < P; ++j) y[j] = s[j < N ? j : 0];  // the pad repeats s_0
      if (beta != T(1)) y = rounded_product(beta, y);  // β·s rounded: see rounded_product
      T m = y[0];  // over the N lanes alone (not a tree over all P lanes, pad included)
      for (std::size_t j = 1; j < N; ++j) m = y[j] > m ? y[j] : m;
      vec<U, P> bad = {};
      const vec<T, P> e = exp_in_range<T, P>(y - m, bad);
      if (any_top_bit<U, P>(bad)) return false;
      T sum = e[0];  // sum_of's order below four vectors' worth: in order (from 0; 0 + e_0 = e_0)
      for (std::size_t j = 1; j < N; ++j) sum += e[j];
      const vec<T, P> r = e * reciprocal_of_sum(sum);
      for (std::size_t j = 0; j < N; ++j) w[j] = r[j];
      return true;
    }
  }
#endif
  return false;
}

/// out_i = exp(β x_i − m) (0 where mask_i is false, if a mask is given); returns
/// sum_of(out, n), the same bits as exp_shifted followed by sum_of. `out` may alias `x`.
/// in_range: the caller knows every β x_i − m within exp_in_range's range (exps_in_range),
/// so the vector path checks none of them (the same numbers, a fifth fewer operations).
template <class T>
constexpr T exp_shifted_sum_of(const T* x, T* out, std::size_t n, T beta, T m,
                               const mask_byte* mask = nullptr, bool in_range = false) noexcept {
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    if (mask == nullptr && !std::is_constant_evaluated()) {
      if (in_range)
        return beta == T(1)
                   ? exp_shifted_sum_vec<exp_shift::minus_m, false>(x, out, n, beta, m)
                   : exp_shifted_sum_vec<exp_shift::scaled_minus_m, false>(x, out, n, beta, m);
      return beta == T(1)
                 ? exp_shifted_sum_vec<exp_shift::minus_m, true>(x, out, n, beta, m)
                 : exp_shifted_sum_vec<exp_shift::scaled_minus_m, true>(x, out, n, beta, m);
    }
  }
#endif
  exp_shifted_plain(x, out, n, beta, m, mask);
  return sum_of(out, n);
}

#if ATTN_VECTOR_EXTENSIONS
/// softmax(β·x) into out (which may be x) for W ≤ n ≤ NV·W numbers and no mask, in NV
/// vectors of W lanes in registers: the rows are loaded once (the last vector ends at x + n and
/// may overlap the one before), the max taken by compares, the exps formed, summed in sum_of's
/// order (its groups of four vectors of simd_lanes from the registers, when W is simd_lanes;
/// the rest from out, in order), scaled and stored once more. The same bits as softmax's
/// general path, when every β x_j − m lies within exp_in_range's range; for any other row (a
/// NaN, ±inf, scores too far apart) it returns false having written nothing (x untouched), and
/// the caller takes the general path. Short rows wait on one chain of dependent steps (the max,
/// the exps, the sum, its reciprocal): here nothing is stored and loaded again on it.
template <std::size_t NV, std::size_t W, class T>
[[gnu::always_inline]] inline bool softmax_in_registers(const T* x, T* out, std::size_t n,
                                                        T beta) noexcept {
  constexpr std::size_t L = simd_lanes<T>;  // sum_of's lanes
  static_assert(W == L || NV <= 2,
                "narrower vectors only below one of sum_of's, which adds in order there");
  using VT = vec<T, W>;
  using U = typename exp_consts<T>::uint;
  std::size_t at[NV];  // where vector v starts: v·W, the last ones n − W
  VT y[NV];
  ATTN_UNROLL
  for (std::size_t v = 0; v < NV; ++v) {
    at[v] = v * W + W <= n ? v * W : n - W;
    y[v] = load<T, W>(x + at[v]);
  }
  if (beta != T(1)) {
    ATTN_UNROLL
    for (std::size_t v = 0; v < NV; ++v) y[v] = rounded_product(beta, y[v]);  // see rounded_product
  }
  VT top = y[0];
  ATTN_UNROLL
  for (std::size_t v = 1; v < NV; ++v) top = y[v] > top ? y[v] : top;
  const T m = max_lane<T, W>(top);
  vec<U, W> bad = {};
  ATTN_UNROLL
  for (std::size_t v = 0; v < NV; ++v) y[v] = exp_in_range<T, W>(y[v] - m, bad);
  if (any_top_bit<U, W>(bad)) return false;
  // sum_of(out, n): four vectors of partial sums over its whole groups of four vectors (which
  // lie at v·L, before any overlapping vector), then the rest in order
  const std::size_t whole = n / (4 * L) * (4 * L);
  T head = 0;
  if constexpr (NV >= 4) {  // (fewer vectors never make a whole group of four)
    if (whole != 0) {
      // acc[v] starts at y[v], not at 0 + y[v]: the same number (an exp is never −0), one
      // dependent add less on the chain
      VT acc[4] = {y[0], y[1], y[2], y[3]};
      ATTN_UNROLL
      for (std::size_t v = 4; v < NV; ++v)
        if (v * L < whole) acc[v % 4] += y[v];
      head = hsum<T, L>((acc[0] + acc[2]) + (acc[1] + acc[3]));
    }
  }
  T sum = head;
  if (whole < n) {  // the rest, in order: from the exps stored (a scalar sum of lanes)
    ATTN_UNROLL
    for (std::size_t v = 0; v < NV; ++v) std::memcpy(out + at[v], &y[v], sizeof(VT));
    T tail = 0;
    for (std::size_t i = whole; i < n; ++i) tail += out[i];
    sum = head + tail;
  }
  const T inv = reciprocal_of_sum(sum);
  ATTN_UNROLL
  for (std::size_t v = 0; v < NV; ++v) {
    const VT r = y[v] * inv;
    std::memcpy(out + at[v], &r, sizeof(VT));
  }
  return true;
}

/// softmax_in_registers for 1 ≤ n < W numbers, W the lanes of the narrowest vector (16 bytes):
/// one vector whose lanes from n on repeat the last number (so the max, and the range check,
/// see only the row's own numbers), its first n exps summed in order, and only those n stored.
template <std::size_t W, class T>
[[gnu::always_inline]] inline bool softmax_in_padded_register(const T* x, T* out, std::size_t n,
                                                              T beta) noexcept {
  using VT = vec<T, W>;
  using U = typename exp_consts<T>::uint;
  VT y;
  ATTN_UNROLL
  for (std::size_t k = 0; k < W; ++k) y[k] = x[k < n ? k : n - 1];
  if (beta != T(1)) y = rounded_product(beta, y);  // see rounded_product
  const T m = max_lane<T, W>(y);
  vec<U, W> bad = {};
  y = exp_in_range<T, W>(y - m, bad);
  if (any_top_bit<U, W>(bad)) return false;
  T sum = 0;  // sum_of's order below one of its vectors: in order, from 0
  ATTN_UNROLL
  for (std::size_t k = 0; k < W; ++k)
    if (k < n) sum += y[k];
  const VT r = y * reciprocal_of_sum(sum);
  ATTN_UNROLL
  for (std::size_t k = 0; k < W; ++k)
    if (k < n) out[k] = r[k];
  return true;
}
#endif

#if ATTN_VECTOR_EXTENSIONS
/// softmax_in_registers for a row shorter than 2·W numbers: two vectors of W lanes when it has
/// at least W, else the same with half as many, down to one padded vector below 16 bytes.
template <std::size_t W, class T>
[[gnu::always_inline]] inline bool softmax_in_narrow_registers(const T* x, T* out, std::size_t n,
                                                               T beta) noexcept {
  constexpr std::size_t narrowest = 16 / sizeof(T);
  if constexpr (W >= narrowest) {
    if (n >= W) return softmax_in_registers<2, W>(x, out, n, beta);
    return softmax_in_narrow_registers<W / 2>(x, out, n, beta);
  } else {
    return softmax_in_padded_register<narrowest>(x, out, n, beta);
  }
}
#endif

/// softmax_in_registers for a row of 1 to 8·simd_lanes numbers with no mask, in as few vectors
/// as hold it (below one vector of simd_lanes, in narrower ones); false, writing nothing, for
/// longer rows and in constant evaluation.
template <class T>
[[nodiscard]] constexpr bool softmax_short_row([[maybe_unused]] const T* x, [[maybe_unused]] T* out,
                                               [[maybe_unused]] std::size_t n,
                                               [[maybe_unused]] T beta) noexcept {
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    if (!std::is_constant_evaluated()) {
      constexpr std::size_t L = simd_lanes<T>;
      if (n == 0 || n > 8 * L) return false;
      if (n < L) return softmax_in_narrow_registers<L / 2>(x, out, n, beta);
      if (n == L) return softmax_in_registers<1, L>(x, out, n, beta);
      if (n <= 2 * L) return softmax_in_registers<2, L>(x, out, n, beta);
      if (n <= 4 * L) return softmax_in_registers<4, L>(x, out, n, beta);
      return softmax_in_registers<8, L>(x, out, n, beta);
    }
  }
#endif
  return false;
}

/// Elements per block of exp_shifted_sum: a block's exps are summed while still in L1, each
/// partial sum of a block adds at most 16 numbers, and the blocks' sums add up in sum_t<T>.
inline constexpr std::size_t exp_block = 1024;

/// out_i = exp(β x_i − m) (0 where mask_i is false, if a mask is given); returns Σ_i out_i.
/// `out` may alias `x`.
template <class T>
constexpr sum_t<T> exp_shifted_sum(const T* x, T* out, std::size_t n, T beta, T m,
                                   const mask_byte* mask = nullptr, bool in_range = false) noexcept {
  sum_t<T> total = 0;
  for (std::size_t i0 = 0; i0 < n; i0 += exp_block) {
    const std::size_t nb = n - i0 < exp_block ? n - i0 : exp_block;
    total += static_cast<sum_t<T>>(exp_shifted_sum_of(
        x + i0, out + i0, nb, beta, m, mask == nullptr ? nullptr : mask + i0, in_range));
  }
  return total;
}

/// The finite-row softmax: out_j = e_j / Σ_k e_k, e_j = exp(β x_j − m) (0 where a mask is given
/// and mask_j is false), for a row whose max m of β·x over the kept entries is finite. out may
/// alias x. The sum is a T within one block of exp_block numbers, else sum_t<T> over blocks, and
/// 1/sum is rounded once. N: the row's length when fixed at compile time (N == n), whose exps go
/// through whole vectors in registers, the same numbers. in_range: exps_in_range holds for the
/// row (its exps need no range check; only the dynamic schedule uses it).
template <std::size_t N = dynamic_row, class T>
ATTN_ALWAYS_INLINE constexpr void softmax_finite_row(const T* x, T* out, std::size_t n, T beta, T m,
                                                     const mask_byte* mask, bool in_range) {
  if constexpr (N != dynamic_row) {
    exp_small_shifted<N>(x, beta, m, out);
    if (mask != nullptr)
      for (std::size_t j = 0; j < N; ++j) out[j] = keep_or_zero(mask[j], out[j]);
    T sum = 0;  // sum_of's order: below four vectors' worth it adds in order (one add fewer here)
    if constexpr (N < 4 * simd_lanes<T>) {
      for (std::size_t j = 0; j < N; ++j) sum += out[j];
    } else {
      sum = sum_of(out, N);
    }
    scale(out, N, reciprocal_of_sum(sum));
  } else if (n <= exp_block) {  // one block: its sum is the total, and a T
    scale(out, n, reciprocal_of_sum(exp_shifted_sum_of(x, out, n, beta, m, mask, in_range)));
  } else {
    // 1/sum rounded once from the wide sum; a NaN anywhere made sum NaN, so the row is NaN
    scale(out, n,
          static_cast<T>(sum_t<T>(1) / exp_shifted_sum(x, out, n, beta, m, mask, in_range)));
  }
}

/// One entry of the softmax-backward step, ∂L/∂x_j = β α_j (u_j − ū) with δ = u_j − ū (or, for
/// the dominant weight, softmax_backward_terms' u_m − ū (attn/softmax.hpp)): exactly 0 for a weight of 0 (a masked
/// entry) and for β = 0 (or a β·α_j that underflows to 0), whatever δ holds (±inf that overflowed
/// included). A NaN α_j (a NaN row) gives NaN.
template <class T>
[[nodiscard]] constexpr T softmax_backward_entry(T alpha, T delta, T beta) noexcept {
  const T ba = beta * alpha;  // 0 for α_j = 0, and for β = 0: the weights do not move
  return ba == T(0) ? T(0) : ba * delta;
}

}  // namespace attn::detail
