#pragma once
/// \file attn/detail/kernels.hpp
/// The inner loops every algorithm is built from, written so that GCC and Clang vectorize
/// them without -ffast-math: reductions keep `lanes` independent partial results (which is
/// also what makes them more accurate than one running sum), maps are branch-free.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "attn/detail/exp.hpp"
#include "attn/detail/simd.hpp"

/// On the loops that call exp: GCC and Clang inline every call in them (exp above all),
/// whatever the size of the function they end up in. Without it GCC stops inlining exp once
/// a caller has grown large, and the loop around the call is no longer vectorized.
#if defined(__GNUC__) || defined(__clang__)
#define ATTN_FLATTEN [[gnu::flatten]]
#define ATTN_ALWAYS_INLINE [[gnu::always_inline]] inline
#define ATTN_NOINLINE [[gnu::noinline]]
#else
#define ATTN_FLATTEN
#define ATTN_ALWAYS_INLINE inline
#define ATTN_NOINLINE
#endif

namespace attn::detail {

/// Independent partial results per reduction: 16 floats or 8 doubles fill one AVX-512
/// register, two AVX2 registers.
template <class T>
inline constexpr std::size_t lanes = 64 / sizeof(T) > 16 ? 16 : 64 / sizeof(T);

/// y += a·x.
template <class T>
constexpr void axpy(T a, const T* x, T* y, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

/// x *= a.
template <class T>
constexpr void scale(T* x, std::size_t n, T a) noexcept {
  for (std::size_t i = 0; i < n; ++i) x[i] *= a;
}

/// The signed integer as wide as T, for float and double (IEEE); void otherwise.
template <class T>
using ordered_int_t = std::conditional_t<
    std::numeric_limits<T>::is_iec559 && sizeof(T) == 4, std::int32_t,
    std::conditional_t<std::numeric_limits<T>::is_iec559 && sizeof(T) == 8, std::int64_t, void>>;

/// x's bits as a signed integer that orders like x (−0 just below +0, NaNs beyond ±inf): the
/// max of a row becomes an integer max, which GCC and Clang vectorize as a plain reduction
/// (a float `x > m ? x : m` is not vectorized by GCC 12 without -ffast-math).
template <class T>
[[nodiscard]] constexpr ordered_int_t<T> ordered_bits(T x) noexcept {
  using S = ordered_int_t<T>;
  using U = std::make_unsigned_t<S>;
  const U b = std::bit_cast<U>(x);
  return static_cast<S>(b ^ ((U{0} - (b >> (8 * sizeof(T) - 1))) >> 1));
}

/// The inverse of ordered_bits.
template <class T>
[[nodiscard]] constexpr T from_ordered_bits(ordered_int_t<T> k) noexcept {
  using U = std::make_unsigned_t<ordered_int_t<T>>;
  const U b = static_cast<U>(k);
  return std::bit_cast<T>(b ^ ((U{0} - (b >> (8 * sizeof(T) - 1))) >> 1));
}

/// max_i β·x_i (β = 1: max_i x_i); −inf for n == 0. Without NaN it is the max; with a NaN it
/// is NaN or the max of the rest (callers treat both as "this row holds a NaN").
template <class T>
[[nodiscard]] constexpr T scaled_max_of(const T* x, std::size_t n, T beta) noexcept {
  constexpr T lowest = -std::numeric_limits<T>::infinity();
  if constexpr (!std::is_void_v<ordered_int_t<T>>) {
    using S = ordered_int_t<T>;
    S m = ordered_bits(lowest);
    if (beta == T(1)) {
      for (std::size_t i = 0; i < n; ++i) {
        const S k = ordered_bits(x[i]);
        m = k > m ? k : m;
      }
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        const S k = ordered_bits(beta * x[i]);
        m = k > m ? k : m;
      }
    }
    return from_ordered_bits<T>(m);
  } else {
    constexpr std::size_t L = lanes<T>;
    T acc[L];
    for (std::size_t k = 0; k < L; ++k) acc[k] = lowest;
    for (std::size_t i = 0; i < n; ++i) {
      const T y = beta * x[i];
      acc[i % L] = y > acc[i % L] ? y : acc[i % L];
    }
    T m = lowest;
    for (std::size_t k = 0; k < L; ++k) m = acc[k] > m ? acc[k] : m;
    return m;
  }
}

/// The least and the largest of some numbers.
template <class T>
struct min_max {
  T min;
  T max;
};

/// min_i and max_i of β·x_i in one pass (the max as scaled_max_of gives it; {+inf, −inf} for
/// n == 0). With a NaN either may be NaN or pass over it: callers use the min only through
/// exps_in_range, which a NaN makes false.
template <class T>
[[nodiscard]] constexpr min_max<T> scaled_min_max_of(const T* x, std::size_t n, T beta) noexcept {
  constexpr T inf = std::numeric_limits<T>::infinity();
  if constexpr (!std::is_void_v<ordered_int_t<T>>) {
    using S = ordered_int_t<T>;
    S lo = ordered_bits(inf), hi = ordered_bits(-inf);
    if (beta == T(1)) {
      for (std::size_t i = 0; i < n; ++i) {
        const S k = ordered_bits(x[i]);
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
      }
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        const S k = ordered_bits(beta * x[i]);
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
      }
    }
    return {from_ordered_bits<T>(lo), from_ordered_bits<T>(hi)};
  } else {
    T lo = inf;
    for (std::size_t i = 0; i < n; ++i) lo = beta * x[i] < lo ? beta * x[i] : lo;
    return {lo, scaled_max_of(x, n, beta)};
  }
}

/// Whether every t_i = β x_i − m of a row with least β·x_i = lo and max m lies within
/// exp_in_range's range (86.5 for float, 708 for double): t ≤ 0 at every i, and t ≥ fl(lo − m),
/// as subtraction rounds monotonically. False for NaN or infinite lo or m, and for types
/// without the vector exp.
template <class T>
[[nodiscard]] constexpr bool exps_in_range(T lo, T m) noexcept {
  if constexpr (simd_type<T>) {
    constexpr T limit = std::bit_cast<T>(exp_consts<T>::in_range_x);
    return m - m == T(0) && lo - m >= -limit;
  } else {
    return false;
  }
}

/// max_i x_i; as scaled_max_of with β = 1.
template <class T>
[[nodiscard]] constexpr T max_of(const T* x, std::size_t n) noexcept {
  return scaled_max_of(x, n, T(1));
}

/// max of β·x_i over the kept i (mask_i true), and how many are kept; NaN as in scaled_max_of.
template <class T>
constexpr T masked_scaled_max_of(const T* x, std::size_t n, T beta, const bool* mask,
                                 std::size_t& kept) noexcept {
  constexpr T lowest = -std::numeric_limits<T>::infinity();
  std::size_t count = 0;
  if constexpr (!std::is_void_v<ordered_int_t<T>>) {
    using S = ordered_int_t<T>;
    const S low = ordered_bits(lowest);
    S m = low;
    for (std::size_t i = 0; i < n; ++i) {
      const S k = mask[i] ? ordered_bits(beta * x[i]) : low;
      m = k > m ? k : m;
      count += mask[i] ? 1u : 0u;
    }
    kept = count;
    return from_ordered_bits<T>(m);
  } else {
    T m = lowest;
    for (std::size_t i = 0; i < n; ++i) {
      const T y = beta * x[i];
      count += mask[i] ? 1u : 0u;
      m = (mask[i] && y > m) ? y : m;
    }
    kept = count;
    return m;
  }
}

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
/// loops around it stay branch-free (GCC 12 will not if-convert a float `?:` that is followed
/// by float arithmetic under -ftrapping-math) and a masked v may hold anything.
template <class T>
[[nodiscard]] constexpr T keep_or_zero(bool keep, T v) noexcept {
  if constexpr (std::numeric_limits<T>::is_iec559 && sizeof(T) == 4) {
    return std::bit_cast<T>(std::bit_cast<std::uint32_t>(v) & (0u - static_cast<std::uint32_t>(keep)));
  } else if constexpr (std::numeric_limits<T>::is_iec559 && sizeof(T) == 8) {
    return std::bit_cast<T>(std::bit_cast<std::uint64_t>(v) &
                            (std::uint64_t{0} - static_cast<std::uint64_t>(keep)));
  } else {
    return keep ? v : T(0);
  }
}

/// out_i = exp(β x_i − m)·f, and 0 where a mask is given and mask_i is false. `out` may
/// alias `x`. Every exp of the library's rows runs in this loop: at run time, for float and
/// double without a mask, through whole vectors (exp_shifted_vec); otherwise a plain map that
/// the compilers vectorize, small enough that exp is inlined into it whatever the caller's size.
template <class T>
ATTN_FLATTEN constexpr void exp_shifted(const T* x, T* out, std::size_t n, T beta, T m, const bool* mask = nullptr,
                           T f = T(1)) noexcept {
  if (mask == nullptr) {
#if ATTN_VECTOR_EXTENSIONS
    if constexpr (simd_type<T>) {
      if (!std::is_constant_evaluated()) {
        // β = 1 (the usual case) needs no product: x − m, one operation per vector
        if (f == T(1)) {
          if (beta == T(1)) {
            exp_shifted_vec<exp_shift::minus_m, false, true>(x, out, n, beta, m, f);
          } else {
            exp_shifted_vec<exp_shift::scaled_minus_m, false, true>(x, out, n, beta, m, f);
          }
        } else {
          exp_shifted_vec<exp_shift::scaled_minus_m, true, true>(x, out, n, beta, m, f);
        }
        return;
      }
    }
#endif
    if (f == T(1)) {
      for (std::size_t i = 0; i < n; ++i) out[i] = attn::detail::exp(scaled_minus(beta, x[i], m));
    } else {
      for (std::size_t i = 0; i < n; ++i) out[i] = attn::detail::exp(scaled_minus(beta, x[i], m)) * f;
    }
  } else {
    for (std::size_t i = 0; i < n; ++i)
      out[i] = keep_or_zero(mask[i], attn::detail::exp(scaled_minus(beta, x[i], m))) * f;
  }
}

/// e_j = exp(β s_j − m) for N numbers, N fixed at compile time and small: the exps of a short
/// row as one vector of P = N rounded up to 4 lanes. At run time, for float and double, that
/// vector is built in a register (stored and reloaded it would cost a store-forwarding stall,
/// on the critical path of a small attend) and goes through exp_in_range when all N are in its
/// range; otherwise, and in constant evaluation, a plain loop of exp. The same bits either way.
template <std::size_t N, class T>
ATTN_FLATTEN ATTN_ALWAYS_INLINE constexpr void exp_small_shifted(const T* s, T beta, T m, T* e) noexcept {
  constexpr std::size_t P = (N + 3) / 4 * 4;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T> && (P * sizeof(T) == 16 || P * sizeof(T) == 32 || P * sizeof(T) == 64) &&
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
  if constexpr (simd_type<T> && (bytes == 16 || bytes == 32 || bytes == 64) && bytes <= simd_bytes &&
                N < 4 * simd_lanes<T>) {
    if (!std::is_constant_evaluated()) {
      using U = typename exp_consts<T>::uint;
      vec<T, P> y;
      for (std::size_t j = 0; j < P; ++j) y[j] = s[j < N ? j : 0];  // the pad repeats s_0
      if (beta != T(1)) y = rounded_product(beta, y);  // β·s rounded: see rounded_product
      T m = y[0];  // over the N lanes alone (a tree over all P, pad included, measured slower)
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
                               const bool* mask = nullptr, bool in_range = false) noexcept {
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    if (mask == nullptr && !std::is_constant_evaluated()) {
      if (in_range)
        return beta == T(1) ? exp_shifted_sum_vec<exp_shift::minus_m, false>(x, out, n, beta, m)
                            : exp_shifted_sum_vec<exp_shift::scaled_minus_m, false>(x, out, n, beta, m);
      return beta == T(1) ? exp_shifted_sum_vec<exp_shift::minus_m, true>(x, out, n, beta, m)
                          : exp_shifted_sum_vec<exp_shift::scaled_minus_m, true>(x, out, n, beta, m);
    }
  }
#endif
  exp_shifted(x, out, n, beta, m, mask);
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
  static_assert(W == L || NV <= 2, "narrower vectors only below one of sum_of's, which adds in order there");
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
                                   const bool* mask = nullptr, bool in_range = false) noexcept {
  sum_t<T> total = 0;
  for (std::size_t i0 = 0; i0 < n; i0 += exp_block) {
    const std::size_t nb = n - i0 < exp_block ? n - i0 : exp_block;
    total += static_cast<sum_t<T>>(exp_shifted_sum_of(
        x + i0, out + i0, nb, beta, m, mask == nullptr ? nullptr : mask + i0, in_range));
  }
  return total;
}

/// true when every x_i is finite.
template <class T>
[[nodiscard]] constexpr bool all_finite(const T* x, std::size_t n) noexcept {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad += (x[i] - x[i] == T(0)) ? 0u : 1u;
  return bad == 0;
}

/// One group of eight rows' contribution to column i of c: (w0 v0 + w2 v2 + w4 v4 + w6 v6) +
/// (w1 v1 + w3 v3 + w5 v5 + w7 v7), at element i of each row (E: T, or a vector of T loaded
/// from i on).
template <class E, class T, class Load>
[[gnu::always_inline]] inline constexpr E weighted_group(const T* w, const T* v, std::size_t stride,
                                                         Load load_at) noexcept {
  const E a = w[0] * load_at(v) + w[2] * load_at(v + 2 * stride) + w[4] * load_at(v + 4 * stride) +
              w[6] * load_at(v + 6 * stride);
  const E b = w[1] * load_at(v + stride) + w[3] * load_at(v + 3 * stride) +
              w[5] * load_at(v + 5 * stride) + w[7] * load_at(v + 7 * stride);
  return a + b;
}

/// Columns [i0, d) of add_weighted_rows, one at a time (its path past the whole vectors of
/// columns, and in constant evaluation): c_i += Σ_r w_r v_ri, eight rows at a time as
/// weighted_group adds them, then the rows past the last whole group in order.
template <class T>
ATTN_ALWAYS_INLINE constexpr void add_weighted_columns(const T* w, const T* V, std::size_t stride,
                                                       std::size_t rows, std::size_t i0,
                                                       std::size_t d, T* c) noexcept {
  const std::size_t groups = rows / 8 * 8;
  const auto at = [](const T* p) { return *p; };
  for (std::size_t i = i0; i < d; ++i) {
    T acc = c[i];
    std::size_t r = 0;
    for (; r < groups; r += 8) acc += weighted_group<T>(w + r, V + r * stride + i, stride, at);
    for (; r < rows; ++r) acc += w[r] * V[r * stride + i];
    c[i] = acc;
  }
}

#if ATTN_VECTOR_EXTENSIONS
/// add_weighted_rows for the first NV·L columns with all NV vectors of c in registers, eight
/// rows at a time (each weight broadcast once per group, not once per column vector): the same
/// sums as add_weighted_rows' scalar loop for the remaining columns, to the bit. With Prefetch,
/// the same columns of the same rows of `ahead` are prefetched into L2 as these are read (V
/// starts a line of its rows' columns, or as far into one as the rows themselves: a multiple
/// of 8 vectors in).
template <std::size_t NV, bool Prefetch, class T>
[[gnu::always_inline]] inline void add_weighted_rows_regs(const T* w, const T* V, std::size_t stride,
                                                          std::size_t rows, T* c,
                                                          [[maybe_unused]] const T* ahead) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  using VT = vec<T, L>;
  const auto at = [](const T* p) { return load<T, L>(p); };
  VT acc[NV];
  for (std::size_t k = 0; k < NV; ++k) acc[k] = load<T, L>(c + k * L);
  const std::size_t groups = rows / 8 * 8;
  std::size_t r = 0;
  for (; r < groups; r += 8) {
    const T* v = V + r * stride;
    for (std::size_t k = 0; k < NV; ++k) {
      if constexpr (Prefetch) {
        if (prefetch_at<L * sizeof(T)>(k, prefetch_lines::all))
          for (std::size_t g = 0; g < 8; ++g) prefetch_l2(ahead + (r + g) * stride + k * L);
      }
      acc[k] += weighted_group<VT>(w + r, v + k * L, stride, at);
    }
  }
  for (; r < rows; ++r)
    for (std::size_t k = 0; k < NV; ++k) acc[k] += w[r] * load<T, L>(V + r * stride + k * L);
  std::memcpy(c, acc, sizeof acc);
}

/// add_weighted_rows' vector part: returns how many columns it did (whole vectors of them).
template <bool Prefetch, class T>
[[gnu::always_inline]] inline std::size_t add_weighted_rows_vec(const T* w, const T* V,
                                                                std::size_t stride, std::size_t rows,
                                                                std::size_t d, T* c,
                                                                const T* ahead) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  const auto at = [&](std::size_t i) { return Prefetch ? ahead + i : nullptr; };
  std::size_t i = 0;
  // c in registers, up to 8 vectors of columns at a time, across all rows
  for (; i + 8 * L <= d; i += 8 * L)
    add_weighted_rows_regs<8, Prefetch>(w, V + i, stride, rows, c + i, at(i));
  const std::size_t last = (d - i) / L;
  switch (last) {
    case 1: add_weighted_rows_regs<1, Prefetch>(w, V + i, stride, rows, c + i, at(i)); break;
    case 2: add_weighted_rows_regs<2, Prefetch>(w, V + i, stride, rows, c + i, at(i)); break;
    case 3: add_weighted_rows_regs<3, Prefetch>(w, V + i, stride, rows, c + i, at(i)); break;
    case 4: add_weighted_rows_regs<4, Prefetch>(w, V + i, stride, rows, c + i, at(i)); break;
    case 5: add_weighted_rows_regs<5, Prefetch>(w, V + i, stride, rows, c + i, at(i)); break;
    case 6: add_weighted_rows_regs<6, Prefetch>(w, V + i, stride, rows, c + i, at(i)); break;
    case 7: add_weighted_rows_regs<7, Prefetch>(w, V + i, stride, rows, c + i, at(i)); break;
    default: break;
  }
  if constexpr (Prefetch) {
    const std::size_t groups = rows / 8 * 8;  // the rows past them were not prefetched above
    prefetch_rows_l2(ahead + groups * stride, stride, rows - groups, d);
  }
  return i + last * L;
}
#endif

/// c += Σ_{r < rows} w_r v_r, where v_r = V + r·stride holds d numbers. Up to 8 vectors of
/// columns at a time (that part of c held in registers), eight rows at a time: each group of
/// eight is summed on its own, in two chains, and then added to c, so the only chain through
/// c is one add per group; the rows past the last whole group are added one by one. The same
/// sums in every path (vector, tail columns, constant evaluation), so cutting the rows at
/// multiples of 8 gives the same numbers to the bit. Rows of weight 0 are not skipped: 0·inf
/// is NaN, so callers that may meet non-finite values check the result.
template <class T>
constexpr void add_weighted_rows(const T* w, const T* V, std::size_t stride, std::size_t rows,
                                 std::size_t d, T* c) noexcept {
  std::size_t i = 0;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    if (!std::is_constant_evaluated())  // (V for `ahead`: read only with Prefetch)
      i = add_weighted_rows_vec<false>(w, V, stride, rows, d, c, V);
  }
#endif
  add_weighted_columns(w, V, stride, rows, i, d, c);
}

/// add_weighted_rows (the same sums), with the `rows` rows of `ahead` (the same stride, d
/// numbers each), which the caller reads next, prefetched into L2 as these are added: a hint,
/// for rows that stream from memory.
template <class T>
inline void add_weighted_rows_prefetching(const T* w, const T* V, std::size_t stride,
                                          std::size_t rows, std::size_t d, T* c,
                                          [[maybe_unused]] const T* ahead) noexcept {
  std::size_t i = 0;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) i = add_weighted_rows_vec<true>(w, V, stride, rows, d, c, ahead);
#endif
  add_weighted_columns(w, V, stride, rows, i, d, c);
}

/// w_r = a_r f for the eight rows of a group (a_r itself for f = 1); whether all eight count
/// (no a_r is 0), so that accumulate_rows adds them as one group.
template <class T>
constexpr bool group_weights(const T* a, T f, T* w) noexcept {
  bool all = true;
  for (std::size_t r = 0; r < 8; ++r) {
    w[r] = f == T(1) ? a[r] : a[r] * f;
    all = all && a[r] != T(0);
  }
  return all;
}

/// accumulate_rows for rows shorter than a vector, a column at a time: each column's sum stays
/// in a register instead of being stored and loaded again for every row, and gets the same
/// additions in the same order. From_zero: y = Σ (y's numbers are not read), the same numbers
/// as y zeroed first, since each column's first addition is then to +0 either way.
template <bool From_zero, class T>
constexpr void accumulate_columns(const T* a, T f, const T* X, std::size_t stride, std::size_t rows,
                                  std::size_t d, T* y) noexcept {
  const std::size_t whole = rows / 8 * 8;
  const auto at = [](const T* p) { return *p; };
  for (std::size_t i = 0; i < d; ++i) {
    T acc = From_zero ? T(0) : y[i];
    for (std::size_t j = 0; j < whole; j += 8) {
      T w[8];
      if (group_weights(a + j, f, w)) {
        acc += weighted_group<T>(w, X + j * stride + i, stride, at);  // add_weighted_columns'
      } else {
        for (std::size_t r = 0; r < 8; ++r)
          if (a[j + r] != T(0)) acc += w[r] * X[(j + r) * stride + i];  // axpy's
      }
    }
    for (std::size_t j = whole; j < rows; ++j)
      if (a[j] != T(0)) acc += (f == T(1) ? a[j] : a[j] * f) * X[j * stride + i];
    y[i] = acc;
  }
}

/// y += Σ_j (a_j f) x_j over the rows x_j = X + j·stride (d numbers each), where a row with
/// a_j = 0 adds nothing at all, even if it holds inf or NaN. Eight rows at a time (as
/// add_weighted_rows) when all eight count, else row by row; the grouping starts at row 0, so
/// callers that cut the rows into pieces at multiples of 8 get the same sums to the bit.
/// f = 1 uses a_j as it is. Rows shorter than a vector go a column at a time
/// (accumulate_columns: the same sums).
template <class T>
constexpr void accumulate_rows(const T* a, T f, const T* X, std::size_t stride, std::size_t rows,
                               std::size_t d, T* y) noexcept {
  if (d < simd_lanes<T>) {
    accumulate_columns<false>(a, f, X, stride, rows, d, y);
    return;
  }
  const std::size_t whole = rows / 8 * 8;
  for (std::size_t j = 0; j < whole; j += 8) {
    T w[8];
    if (group_weights(a + j, f, w)) {
      add_weighted_rows(w, X + j * stride, stride, 8, d, y);
    } else {
      for (std::size_t r = 0; r < 8; ++r)
        if (a[j + r] != T(0)) axpy(w[r], X + (j + r) * stride, y, d);
    }
  }
  for (std::size_t j = whole; j < rows; ++j)
    if (a[j] != T(0)) axpy(f == T(1) ? a[j] : a[j] * f, X + j * stride, y, d);
}

/// y = Σ_j a_j x_j by accumulate_rows' rules into a y of zeros (the same numbers; short rows
/// without zeroing y first).
template <class T>
constexpr void weighted_sum_rows(const T* a, const T* X, std::size_t stride, std::size_t rows,
                                 std::size_t d, T* y) noexcept {
  if (d < simd_lanes<T>) {
    accumulate_columns<true>(a, T(1), X, stride, rows, d, y);
    return;
  }
  for (std::size_t i = 0; i < d; ++i) y[i] = T(0);
  accumulate_rows(a, T(1), X, stride, rows, d, y);
}

}  // namespace attn::detail
