#pragma once
/// \file attn/detail/math.hpp
/// `sqrt`, `log1p` and `log` that constant evaluation can call: at run time std::sqrt,
/// std::log1p and std::log, unchanged; in constant evaluation (where clang calls no <cmath>
/// function) implementations of their own, for float, double and long double. sqrt is correctly
/// rounded in both, so the same bits; log1p and log are within 1 ulp of the exact value in
/// constant evaluation (glibc's within 1 ulp at run time: docs/attention.md, "Constant
/// evaluation", tests/test_math.cpp). And tests that -ffast-math cannot fold away: for −inf,
/// and whether a double (β, a scale) is finite as a T.
/// Kernel layer: knows no public algorithm.
#include "attn/detail/config.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace attn::detail {

/// The largest |x| that is finite both as a double (where options keeps β and the parameters
/// keep a scale) and as a T: float's largest number for float, double's for double and long
/// double.
template <class T>
inline constexpr double finite_limit =
    static_cast<long double>(std::numeric_limits<T>::max()) <
            static_cast<long double>(std::numeric_limits<double>::max())
        ? static_cast<double>(std::numeric_limits<T>::max())
        : std::numeric_limits<double>::max();

/// Whether the double x is finite as a T: |x| ≤ finite_limit<T> (false for NaN and ±inf; 1e39
/// is finite as a double, inf as a float). On the bits (|x|'s as an integer, which orders like
/// |x| and puts NaN past inf): -ffinite-math-only lets a compiler fold a NaN's compares to true,
/// and clang does. The one home of the β and scale checks.
template <class T>
[[nodiscard]] constexpr bool finite_as(double x) noexcept {
  static_assert(std::numeric_limits<double>::is_iec559 && sizeof(double) == 8);
  constexpr std::uint64_t magnitude = 0x7fff'ffff'ffff'ffffULL;
  return (detail::bit_cast<std::uint64_t>(x) & magnitude) <=
         detail::bit_cast<std::uint64_t>(finite_limit<T>);
}

/// Whether finite_as<T> is narrower than a double's range (float): the messages then say
/// "finite as a float".
template <class T>
inline constexpr bool narrower_than_double = finite_limit<T> < std::numeric_limits<double>::max();

/// x is −inf, read from its bits at run time: -ffinite-math-only lets a compiler fold
/// x == −inf to false, and the checks that must throw before anything is written rest on this
/// test (docs/errors.md, "Under -ffast-math"). Compares the bytes that hold the value: x87's
/// 80-bit long double (64 digits) has padding beyond its 10.
template <class T>
[[nodiscard]] constexpr bool is_minus_infinity(T x) noexcept {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  if (std::is_constant_evaluated()) return x == minus_inf;
  constexpr std::size_t value_bytes = std::numeric_limits<T>::digits == 64 ? 10 : sizeof(T);
  unsigned char a[sizeof(T)], b[sizeof(T)];
  std::memcpy(a, &x, sizeof(T));
  std::memcpy(b, &minus_inf, sizeof(T));
  return std::memcmp(a, b, value_bytes) == 0;
}

/// a·b = p + e exactly (Dekker's product, Veltkamp's split), for products that neither overflow
/// nor underflow; constant evaluation only (a compiler that fuses multiply-adds at run time
/// breaks the split).
template <class T>
struct exact_product {
  T p;
  T e;
};

template <class T>
[[nodiscard]] constexpr exact_product<T> two_product(T a, T b) noexcept {
  constexpr int half = (std::numeric_limits<T>::digits + 1) / 2;
  constexpr T splitter = [] {
    T c = 1;
    for (int i = 0; i < half; ++i) c *= 2;
    return c + 1;
  }();
  const auto split = [](T x, T& hi, T& lo) {
    const T c = splitter * x;
    hi = c - (c - x);
    lo = x - hi;
  };
  T ah = 0, al = 0, bh = 0, bl = 0;
  split(a, ah, al);
  split(b, bh, bl);
  const T p = a * b;
  return {p, ((ah * bh - p) + ah * bl + al * bh) + al * bl};
}

/// The correctly rounded √x for finite x ≥ 0, in constant evaluation: Newton's iteration on
/// x scaled into [1, 4), then the neighbour whose square brackets x (Tuckerman's test: y is √x
/// rounded to nearest iff y(y − u⁻) < x ≤ y(y + u), u⁻ and u the gaps below and above y, the
/// products exact by two_product).
template <class T>
[[nodiscard]] constexpr T sqrt_constant(T x) noexcept {
  if (!(x > T(0))) return x;  // ±0 (and what is not a number ≥ 0: not called with it)
  T m = x;
  T scale = 1;  // √x = √m · scale
  while (m >= T(4)) {
    m /= 4;
    scale *= 2;
  }
  while (m < T(1)) {
    m *= 4;
    scale /= 2;
  }
  T y = (m + 1) / 2;
  for (int i = 0; i < 8; ++i) y = (y + m / y) / 2;
  T u = 1;  // the gap above y in [1, 2)
  for (int i = 1; i < std::numeric_limits<T>::digits; ++i) u /= 2;
  for (int step = 0; step < 4; ++step) {
    const T below = y == T(1) ? u / 2 : u;
    const exact_product<T> hi = two_product(y, y + u);
    const exact_product<T> lo = two_product(y, y - below);
    if (m - hi.p > hi.e) {
      y += u;  // x > y(y + u): y is too small
    } else if (!(m - lo.p > lo.e)) {
      y -= below;  // x ≤ y(y − u⁻): too large
    } else {
      break;
    }
  }
  return y * scale;
}

/// log(u) + c/u-ish: k ln2 + log(1 + f) + c for u = 2^k (1 + f), 1 + f in [√½, √2), c a
/// correction already divided by u (log1p's rounding of 1 + x). fdlibm's scheme: s = f/(2 + f),
/// log(1 + f) = f − (f²/2 − s(f²/2 + R)), R = Σ_{i≥1} 2s^{2i}/(2i + 1) (to below 2^-(p+3)).
template <class T>
[[nodiscard]] constexpr T log_constant_of(T u, T c) noexcept {
  constexpr T sqrt2 = static_cast<T>(1.41421356237309504880168872420969807856967188L);
  constexpr T two64 = static_cast<T>(18446744073709551616.0L);
  int k = 0;
  T m = u;
  while (m >= two64) {
    m /= two64;
    k += 64;
  }
  while (m * two64 < T(1)) {
    m *= two64;
    k -= 64;
  }
  while (m >= sqrt2) {
    m /= 2;
    ++k;
  }
  while (m * sqrt2 < T(1)) {
    m *= 2;
    --k;
  }
  const T f = m - 1;  // exact: m in [√½, √2)
  const T s = f / (2 + f);
  const T z = s * s;
  constexpr int terms = std::numeric_limits<T>::digits / 5 + 2;  // z ≤ 0.0295 < 2^-5
  T R = 0;
  for (int i = terms; i >= 1; --i) R = z * (T(2) / T(2 * i + 1) + R);
  const T hfsq = f * f / 2;
  // k ln2 = k·ln2_hi + k·ln2_lo, ln2_hi of 32 bits (k·ln2_hi exact for |k| < 2^21 in double)
  // in double and long double; float takes double's result, rounded once.
  const T kf = static_cast<T>(k);
  const T ln2_hi = static_cast<T>(0xb17217f7p-32L);
  const T ln2_lo = static_cast<T>(1.90821492927058781614426568075500134360255254e-10L);
  return kf * ln2_hi + (f - (hfsq - (s * (hfsq + R) + (kf * ln2_lo + c))));
}

/// log1p(x) for finite x > −1 in constant evaluation (log(1 + x), accurate for tiny x: the
/// rounding of 1 + x is carried as a correction).
template <class T>
[[nodiscard]] constexpr T log1p_constant(T x) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(log1p_constant(static_cast<double>(x)));
  } else {
    if (x == T(0)) return x;
    const T u = 1 + x;
    const T c = u >= T(2) ? (T(1) - (u - x)) / u : (x - (u - 1)) / u;  // 1 + x − u, over u
    return log_constant_of(u, c);
  }
}

/// log(x) for finite x > 0 in constant evaluation.
template <class T>
[[nodiscard]] constexpr T log_constant(T x) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(log_constant(static_cast<double>(x)));
  } else {
    return log_constant_of(x, T(0));
  }
}

/// √x: std::sqrt at run time, sqrt_constant (the same bits) in constant evaluation.
template <class T>
[[nodiscard]] constexpr T sqrt(T x) noexcept {
  if (std::is_constant_evaluated()) return sqrt_constant(x);
  return std::sqrt(x);
}

/// log(1 + x): std::log1p at run time, log1p_constant in constant evaluation.
template <class T>
[[nodiscard]] constexpr T log1p(T x) noexcept {
  if (std::is_constant_evaluated()) return log1p_constant(x);
  return std::log1p(x);
}

/// log x: std::log at run time, log_constant in constant evaluation.
template <class T>
[[nodiscard]] constexpr T log(T x) noexcept {
  if (std::is_constant_evaluated()) return log_constant(x);
  return std::log(x);
}

}  // namespace attn::detail
