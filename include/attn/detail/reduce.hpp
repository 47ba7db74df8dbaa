#pragma once
/// \file attn/detail/reduce.hpp
/// Reductions over one row, written so that GCC and Clang vectorize them without -ffast-math:
/// the max (as an integer max on the bits), the least and the largest at once, the max over
/// kept entries, whether every number is finite. Kernel layer: knows no public algorithm.
#include "attn/detail/config.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace attn::detail {

/// Independent partial results per reduction: 16 floats or 8 doubles fill one AVX-512
/// register, two AVX2 registers.
template <class T>
inline constexpr std::size_t lanes = 64 / sizeof(T) > 16 ? 16 : 64 / sizeof(T);

/// The signed integer as wide as T, for float and double (IEEE); void otherwise.
template <class T>
using ordered_int_t = std::conditional_t<
    std::numeric_limits<T>::is_iec559 && sizeof(T) == 4, std::int32_t,
    std::conditional_t<std::numeric_limits<T>::is_iec559 && sizeof(T) == 8, std::int64_t, void>>;

/// x's bits as a signed integer that orders like x (−0 just below +0, NaNs beyond ±inf): the
/// max of a row becomes an integer max, which GCC and Clang vectorize as a plain reduction
/// (GCC does not vectorize a float `x > m ? x : m` without -ffast-math).
template <class T>
[[nodiscard]] constexpr ordered_int_t<T> ordered_bits(T x) noexcept {
  using S = ordered_int_t<T>;
  using U = std::make_unsigned_t<S>;
  const U b = detail::bit_cast<U>(x);
  return static_cast<S>(b ^ ((U{0} - (b >> (8 * sizeof(T) - 1))) >> 1));
}

/// The inverse of ordered_bits.
template <class T>
[[nodiscard]] constexpr T from_ordered_bits(ordered_int_t<T> k) noexcept {
  using U = std::make_unsigned_t<ordered_int_t<T>>;
  const U b = static_cast<U>(k);
  return detail::bit_cast<T>(b ^ ((U{0} - (b >> (8 * sizeof(T) - 1))) >> 1));
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

/// max_i x_i; as scaled_max_of with β = 1.
template <class T>
[[nodiscard]] constexpr T max_of(const T* x, std::size_t n) noexcept {
  return scaled_max_of(x, n, T(1));
}

/// max of β·x_i over the kept i (mask_i true), and how many are kept; NaN as in scaled_max_of.
template <class T>
constexpr T masked_scaled_max_of(const T* x, std::size_t n, T beta, const mask_byte* mask,
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

/// true when every x_i is finite.
template <class T>
[[nodiscard]] constexpr bool all_finite(const T* x, std::size_t n) noexcept {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad += (x[i] - x[i] == T(0)) ? 0u : 1u;
  return bad == 0;
}

/// Whether every |x_i| ≤ limit (false at a NaN).
template <class T>
[[nodiscard]] constexpr bool all_within(const T* x, std::size_t n, T limit) noexcept {
  std::size_t bad = 0;  // (no && between the two: each is a vector compare)
  for (std::size_t i = 0; i < n; ++i)
    bad += static_cast<std::size_t>(!(x[i] <= limit)) + static_cast<std::size_t>(!(x[i] >= -limit));
  return bad == 0;
}

}  // namespace attn::detail
