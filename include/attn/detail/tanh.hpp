#pragma once
/// \file attn/detail/tanh.hpp
/// `attn::detail::tanh`: a branch-free, `constexpr` hyperbolic tangent that compilers
/// vectorize, for the additive score s = vᵀ tanh(W1 h + W2 q), whose n·k tanh calls were
/// scalar library calls: `tanh_array` is the vector loop.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "attn/detail/exp.hpp"

namespace attn::detail {

/// The constants of tanh_ieee (binary32 / binary64).
template <class T>
struct tanh_consts;

template <>
struct tanh_consts<float> {
  static constexpr float small_x = 0.75F;  // below: the odd polynomial; above: from exp(2|x|)
  static constexpr std::uint32_t clamp_x = 0x41200000U;  // 10: tanh(x) rounds to 1 from 9.01 on
  static constexpr std::uint32_t quiet_bit = 0x00400000U;
};

template <>
struct tanh_consts<double> {
  static constexpr double small_x = 0.75;
  static constexpr std::uint64_t clamp_x = 0x4034000000000000ULL;  // 20: rounds to 1 from 19.07 on
  static constexpr std::uint64_t quiet_bit = 0x0008000000000000ULL;
};

/// P(s) with tanh(a) ≈ a + a s P(s), s = a², on 0 <= a <= 0.75 for the float kernel: degree 6
/// in s, Horner form (relative error of the approximation 4.0e-10 = 0.007 ulp).
template <class V>
[[nodiscard]] constexpr V tanh_poly_float(V s) noexcept {
  return -0x1.555556p-2F +
         s * (0x1.111102p-3F +
              s * (-0x1.ba1528p-5F +
                   s * (0x1.65c1e8p-6F +
                        s * (-0x1.1c94b0p-7F + s * (0x1.9500bap-9F + s * -0x1.6d2f14p-11F)))));
}

/// P(s) as above for the double kernel: degree 12 in s (relative error 7.4e-18 = 0.07 ulp), its
/// even and odd coefficients in two Horner chains in s² that run side by side.
template <class V>
[[nodiscard]] constexpr V tanh_poly_double(V s) noexcept {
  const V s2 = s * s;
  const V even =
      -0x1.5555555555555p-2 +
      s2 * (-0x1.ba1ba1ba03fdep-5 +
            s2 * (-0x1.226e3434333f1p-7 +
                  s2 * (-0x1.7d9fdd51d36fap-10 +
                        s2 * (-0x1.f351c7b8d9d91p-13 +
                              s2 * (-0x1.215cdb73c8b35p-15 + s2 * -0x1.b87709c583a0fp-20)))));
  const V odd = 0x1.111111111101fp-3 +
                s2 * (0x1.664f487b7c37ep-6 +
                      s2 * (0x1.d6d397c6172ccp-9 +
                            s2 * (0x1.353280941795ap-11 +
                                  s2 * (0x1.8b4d9f3447ab6p-14 + s2 * 0x1.51282042d0b9ap-17))));
  return even + s * odd;
}

/// a + a s P(s), s = a², with T's polynomial: tanh(a) for 0 <= a < 0.75. V is T or a vector of
/// T (the same expression either way, so that both round alike).
template <class T, class V>
[[nodiscard]] constexpr V tanh_near_zero(V a) noexcept {
  const V s = a * a;
  V p;
  if constexpr (sizeof(T) == 4) {
    p = tanh_poly_float(s);
  } else {
    p = tanh_poly_double(s);
  }
  return a + a * (s * p);
}

/// 1 − 2/(e + 1) with e = e^(2a): tanh(a) for a >= 0.75. V is T or a vector of T.
template <class T, class V>
[[nodiscard]] constexpr V tanh_from_exp(V e) noexcept {
  return T(1) - T(2) / (e + T(1));
}

/// tanh(x) for IEEE binary32/binary64, branch-free: error <= 1.5 ulp (max over every float 1.07
/// with FMA, 1.10 without; double 1.05 over 2.8M samples); tanh(±0) = ±0, tanh(±inf) = ±1,
/// NaN -> NaN (quiet), tanh(x) = x for |x| < 2^-12 (2^-27 for double), subnormals included;
/// odd to the bit, |tanh(x)| <= 1. Under -ffast-math the specials hold and the error stays
/// under 2 ulp (tested bound 8).
template <class T>
  requires std::same_as<T, float> || std::same_as<T, double>
[[nodiscard]] constexpr T tanh_ieee(T x) noexcept {
  // Method, on a = |x| (the sign is put back at the end, so the result is odd exactly):
  //  * a < 0.75: tanh(a) = a + a s P(s), s = a², with P a near-minimax polynomial (Chebyshev
  //    fit of (tanh(a)/a − 1)/s, computed with mpmath; coefficients rounded to T).
  //  * a >= 0.75: tanh(a) = 1 − 2/(e^(2a) + 1), with `exp_ieee` (< 1 ulp): 2/(e^(2a) + 1) is
  //    at most 0.37 there, so its rounding errors shrink by that factor in 1 − q. Nearer 0
  //    they would not (the form loses accuracy as q nears 1, 1.6 ulp at a = 0.55); beyond the
  //    polynomial's reach (it needs more terms the farther from 0 it goes) is where this form
  //    is good. a is clamped to 10 (20 for double), where tanh rounds to 1 already, on its bits
  //    (so ±inf and NaN give finite arithmetic, which -ffinite-math-only assumes).
  //  * Both forms are computed and one selected (no branch; `tanh_vec` is the same arithmetic
  //    on vectors); a NaN is selected last, from its bits, and returned quieted.
  using C = exp_consts<T>;
  using K = tanh_consts<T>;
  using U = typename C::uint;
  using S = typename C::sint;
  const U ix = detail::bit_cast<U>(x);
  const U ax = ix & C::abs_mask;

  // The polynomial on min(a, 0.75), which is a wherever its result is taken (and finite
  // arithmetic elsewhere, as constant evaluation requires).
  const T an =
      detail::bit_cast<T>(static_cast<U>(std::min(static_cast<S>(ax), detail::bit_cast<S>(K::small_x))));
  const T near_zero = tanh_near_zero<T>(an);

  const T ac =
      detail::bit_cast<T>(static_cast<U>(std::min(static_cast<S>(ax), static_cast<S>(K::clamp_x))));
  const T e = exp_ieee(ac + ac);
  const T far = tanh_from_exp<T>(e);

  const U r = exp_select(static_cast<S>(ax) < detail::bit_cast<S>(K::small_x),
                         detail::bit_cast<U>(near_zero), detail::bit_cast<U>(far));
  const bool is_nan = static_cast<S>(ax) > static_cast<S>(C::inf_bits);
  return detail::bit_cast<T>(exp_select(is_nan, ix | K::quiet_bit, r | (ix & ~C::abs_mask)));
}

/// tanh(x) for finite x of a type without tanh_ieee (x87 long double, binary128) in constant
/// evaluation: e/(e + 2) with e = e^(2|x|) − 1 by its Taylor series below |x| = 0.55 (no
/// cancellation), 1 − 2/(e^(2|x|) + 1) with exp_generic above; odd. Within 4 ulp of std::tanh
/// (tests/test_math.cpp).
template <class T>
[[nodiscard]] constexpr T tanh_constant(T x) noexcept {
  if (x == T(0)) return x;
  const T a = x < T(0) ? -x : x;
  T r = 1;  // from 40 on, tanh rounds to 1 in every format up to binary128
  if (a < T(0.55L)) {
    const T y = 2 * a;
    T term = y;
    T em1 = y;
    for (int n = 2; n <= 40; ++n) {
      term = term * y / static_cast<T>(n);
      em1 += term;
    }
    r = em1 / (em1 + 2);
  } else if (a < T(40)) {
    r = T(1) - T(2) / (exp_generic(a + a) + T(1));
  }
  return x < T(0) ? -r : r;
}

/// tanh(x) for float, double and long double: branch-free and constexpr for float/double
/// (`tanh_ieee`: <= 1.5 ulp, specials exact, also under -ffast-math); other types take
/// std::tanh at run time and tanh_constant in constant evaluation.
template <class T>
  requires std::is_floating_point_v<T>
[[nodiscard]] constexpr T tanh(T x) noexcept {
  using L = std::numeric_limits<T>;
  if constexpr (std::same_as<T, float> && L::is_iec559 && L::digits == 24) {
    return tanh_ieee(x);
  } else if constexpr (std::same_as<T, double> && L::is_iec559 && L::digits == 53) {
    return tanh_ieee(x);
  } else if constexpr (L::is_iec559 && L::digits == 53 && L::max_exponent == 1024) {
    return static_cast<T>(tanh_ieee(static_cast<double>(x)));  // long double == double
  } else {
    if (std::is_constant_evaluated()) return tanh_constant(x);
    return std::tanh(x);
  }
}

#if ATTN_VECTOR_EXTENSIONS
/// Lane by lane, a where the mask m is all ones and b where it is 0 (exp_select on vectors).
template <class VU>
[[nodiscard]] [[gnu::always_inline]] inline VU select_lanes(VU m, VU a, VU b) noexcept {
  return (a & m) | (b & ~m);
}

/// `tanh_ieee` on the W lanes of x: the same arithmetic (the exp through `exp_in_range`, which
/// is exp_ieee to the bit for the arguments 2a <= 40 that occur), so the same bits lane by lane.
template <class T, std::size_t W>
[[nodiscard]] [[gnu::always_inline]] inline vec<T, W> tanh_vec(vec<T, W> x) noexcept {
  using C = exp_consts<T>;
  using K = tanh_consts<T>;
  using U = typename C::uint;
  using VT = vec<T, W>;
  using VU = vec<U, W>;
  const VU ix = detail::bit_cast<VU>(x);
  const VU ax = ix & C::abs_mask;
  const VT a = detail::bit_cast<VT>(ax);
  // The selects from floating-point compares (a NaN compares false: the clamps take it, and it
  // is put back last): 64-bit integer compares cost a long emulation before SSE4.2 and AVX-512.
  const VU below_small = detail::bit_cast<VU>(a < K::small_x);
  const VT an =
      detail::bit_cast<VT>(select_lanes<VU>(below_small, ax, VU{} + detail::bit_cast<U>(K::small_x)));
  const VT near_zero = tanh_near_zero<T>(an);

  const VU below_clamp = detail::bit_cast<VU>(a < detail::bit_cast<T>(K::clamp_x));
  const VT ac = detail::bit_cast<VT>(select_lanes<VU>(below_clamp, ax, VU{} + K::clamp_x));
  VU unused = {};
  const VT e = exp_in_range<T, W, false>(ac + ac, unused);
  const VT far = tanh_from_exp<T>(e);

  const VU r = select_lanes(below_small, detail::bit_cast<VU>(near_zero), detail::bit_cast<VU>(far)) |
               (ix & ~C::abs_mask);
  // NaN where |x|'s bits exceed inf's: the top bit of inf_bits − ax, spread over the lane.
  const VU is_nan = U{0} - ((C::inf_bits - ax) >> (sizeof(U) * 8 - 1));
  return detail::bit_cast<VT>(select_lanes(is_nan, ix | K::quiet_bit, r));
}
#endif

/// y[i] = tanh(x[i]) for i < n (y may alias x): the same numbers as `tanh` on each, to the bit;
/// at run time, for float and double, whole vectors through tanh_vec and the rest by tanh.
template <class T>
  requires std::is_floating_point_v<T>
constexpr void tanh_array(const T* x, T* y, std::size_t n) noexcept {
  std::size_t whole = 0;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    if (!std::is_constant_evaluated()) {
      constexpr std::size_t L = simd_lanes<T>;
      whole = n / L * L;
      for (std::size_t i = 0; i < whole; i += L) {
        const vec<T, L> t = tanh_vec<T, L>(load<T, L>(x + i));
        std::memcpy(y + i, &t, sizeof t);
      }
    }
  }
#endif
  for (std::size_t i = whole; i < n; ++i) y[i] = tanh(x[i]);
}

}  // namespace attn::detail
