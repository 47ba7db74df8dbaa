#pragma once
/// \file attn/detail/exp.hpp
/// `attn::detail::exp`: a branch-free, `constexpr` exponential that compilers vectorize, for the
/// softmax and attention loops (`y[i] = exp(x[i] - m)`), and that stays correct under
/// `-ffast-math`.

#include <algorithm>
#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "attn/detail/config.hpp"
#include "attn/detail/simd.hpp"

namespace attn::detail {

/// The constants of the vectorizable float/double exponential (binary32 / binary64 only).
template <class T>
struct exp_consts;

template <>
struct exp_consts<float> {
  using uint = std::uint32_t;
  using sint = std::int32_t;
  static constexpr int mant_bits = 23;
  static constexpr uint abs_mask = 0x7fffffffU;
  static constexpr uint inf_bits = 0x7f800000U;
  static constexpr uint max_finite_x = 0x42b17217U;   // 88.7228317: exp(x) finite for x <= this
  static constexpr uint min_nonzero_x = 0xc2cff1b4U;  // -103.972076: exp(x) > 0 for x >= this
  static constexpr uint tiny_x = 0x33000000U;         // 2^-25: e^x rounds to 1 for |x| below
  static constexpr uint in_range_x = 0x42ad0000U;     // 86.5: |x| <= this gives k in [-125, 125]
  static constexpr float log2e = 0x1.715476p+0F;
  static constexpr float ln2_hi = 0x1.62e4p-1F;  // 16 significant bits: k * ln2_hi exact, |k| < 2^8
  static constexpr float ln2_lo = 0x1.7f7d1cp-20F;   // ln2 - ln2_hi
  static constexpr float shifter = 0x1.8p23F + 127;  // bias + round(t) in the low bits of t + this
};

template <>
struct exp_consts<double> {
  using uint = std::uint64_t;
  using sint = std::int64_t;
  static constexpr int mant_bits = 52;
  static constexpr uint abs_mask = 0x7fffffffffffffffULL;
  static constexpr uint inf_bits = 0x7ff0000000000000ULL;
  static constexpr uint max_finite_x = 0x40862e42fefa39efULL;   // 709.782712893384
  static constexpr uint min_nonzero_x = 0xc0874910d52d3051ULL;  // -745.1332191019411
  static constexpr uint tiny_x = 0x3c90000000000000ULL;         // 2^-54
  static constexpr uint in_range_x = 0x4086200000000000ULL;     // 708: k in [-1021, 1021]
  static constexpr double log2e = 0x1.71547652b82fep+0;
  static constexpr double ln2_hi = 0x1.62e42fee00000p-1;     // 32 significant bits (fdlibm's ln2HI)
  static constexpr double ln2_lo = 0x1.a39ef35793c76p-33;    // ln2 - ln2_hi (fdlibm's ln2LO)
  static constexpr double shifter = 0x1.8p52 + 4096 + 1023;  // + 4096 keeps the low bits >= 0
};

/// e^r on |r| <= 0.3467 for the float kernel: 1 + r + r^2 (c2 + c3 r + ... + c6 r^4), all in
/// Horner form (see the comment in `exp_ieee`). V is float or a vector of floats (the same
/// expression either way, so that both round alike).
template <class V>
[[nodiscard]] constexpr V exp_poly_float(V r) noexcept {
  const V p =
      0x1.fffffcp-2F +
      r * (0x1.55548cp-3F + r * (0x1.555858p-5F + r * (0x1.123dcap-7F + r * 0x1.6ac506p-10F)));
  return 1.0F + r * (1.0F + r * p);
}

/// e^r on |r| <= 0.34658 for the double kernel, r = hi - lo: 1 + (hi + (r^2 P(r) - lo)), with P
/// of degree 9 (so degree 11 for e^r). V is double or a vector of doubles. P is evaluated as
/// E(r^2) + r O(r^2), its even and odd coefficients in two Horner chains of four steps that run
/// side by side: the same nine multiply-adds as one chain of nine, half its latency, which is
/// most of the time of a short row.
template <class V>
[[nodiscard]] constexpr V exp_poly_double(V r, V hi, V lo) noexcept {
  const V r2 = r * r;
  const V even = 0x1.000000000000ap-1 +
                 r2 * (0x1.5555555550605p-5 +
                       r2 * (0x1.6c16c184b5d17p-10 +
                             r2 * (0x1.a019988af2c2cp-16 + r2 * 0x1.28aedd952c4b9p-22)));
  const V odd = 0x1.5555555555503p-3 +
                r2 * (0x1.1111111124d25p-7 +
                      r2 * (0x1.a01a013d648cbp-13 +
                            r2 * (0x1.71def3a4156ffp-19 + r2 * 0x1.add93f8282595p-26)));
  const V p = even + r * odd;
  return 1.0 + (hi + (r2 * p - lo));
}

/// e^r for the float kernel (hi and lo unused: r = hi - lo is accurate enough).
[[nodiscard]] constexpr float exp_poly(float r, float /*hi*/, float /*lo*/) noexcept {
  return exp_poly_float(r);
}

/// e^r for the double kernel.
[[nodiscard]] constexpr double exp_poly(double r, double hi, double lo) noexcept {
  return exp_poly_double(r, hi, lo);
}

/// `c ? a : b` on unsigned integers, as mask arithmetic so that it stays a data select: GCC
/// turns a `?:` into branches, may then sink arithmetic under them (where one arm folds to a
/// constant), and with -ftrapping-math does not if-convert FP arithmetic back, so the loop
/// would not vectorize.
template <class U>
[[nodiscard]] constexpr U exp_select(bool c, U a, U b) noexcept {
  const U m = U{0} - static_cast<U>(c);
  return (a & m) | (b & ~m);
}

/// `c ? 0 : b` on unsigned integers (one and-not).
template <class U>
[[nodiscard]] constexpr U exp_zero_if(bool c, U b) noexcept {
  return b & (static_cast<U>(c) - U{1});
}

/// exp(x) for IEEE binary32/binary64, branch-free: float <= 1.5 ulp (max over every float: 1.17
/// without FMA, 0.89 with), double < 1 ulp (0.87); NaN, +-inf, overflow, gradual underflow and
/// underflow to +0 exact, also under -ffast-math (where double reaches 1.8 ulp).
template <class T>
  requires std::same_as<T, float> || std::same_as<T, double>
[[nodiscard]] constexpr T exp_ieee(T x) noexcept {
  // Method (the same for float and double; there is no branch, only selects and integer ops,
  // so a loop over it vectorizes):
  //  * Cody-Waite reduction x = k*ln2 + r, k = round(x*log2(e)), |r| <= ln2/2 (+ 1e-5). k comes
  //    from the "shifter" 1.5*2^p + bias: adding it rounds x*log2(e) to an integer and leaves
  //    bias + k in the low bits (no float->int conversion, no rint: both constexpr and free of
  //    -fassociative-math, which would fold the usual (t + shifter) - shifter into t).
  //    ln2 = ln2_hi + ln2_lo, where ln2_hi has few enough bits (16 for float, fdlibm's 32 for
  //    double) that hi = x - k*ln2_hi is exact for all |k| <= 150 (1075); lo = k*ln2_lo.
  //  * e^r on |r| <= 0.3467 (float) / 0.34658 (double) by a minimax polynomial (Remez on the
  //    relative error of e^r, with 1 + r fixed, computed with mpmath, coefficients rounded to T
  //    one at a time and the rest re-solved): degree 6 for float (max error 3.2e-9 = 0.05 ulp),
  //    in Horner form; degree 11 for double (3.7e-18 = 0.03 ulp), as 1 + (hi + (r^2 P(r) - lo))
  //    so that the rounding of r never enters the linear term, P's even and odd parts as two
  //    Horner chains in r^2 (half the latency of one chain; 0.91 ulp at most against 0.87).
  //  * y * 2^k in two steps, (y * 2^k1) * 2^k2 with k1 = floor(k/2): adding k1 to y's exponent
  //    bits keeps it normal (y in [0.7, 1.42]), and the multiply by the normal 2^k2 rounds once,
  //    also where the result is subnormal (gradual underflow), with no select.
  //  * Special inputs: x is clamped into [min_nonzero_x, max_finite_x] on its bits (an
  //    integer min), so k and the arithmetic stay in range and never make an inf, a NaN or an
  //    underflow to 0 (constant evaluation rejects those; -ffinite-math-only assumes them
  //    away); the special results are selected at the end: NaN -> NaN (found from the bits),
  //    x > max_finite_x (incl. +inf) -> +inf, x < min_nonzero_x (incl. -inf) -> +0 (there the
  //    multiply is by 0, so masked-out scores cost no subnormal-arithmetic assist).
  using C = exp_consts<T>;
  using U = typename C::uint;
  using S = typename C::sint;

  constexpr int top = static_cast<int>(sizeof(U) * 8 - 1);
  const U ix = detail::bit_cast<U>(x);
  const U ax = ix & C::abs_mask;
  // x clamped, on its bits, into [min_nonzero_x, max_finite_x] by one signed integer min
  // against a bound that depends on the sign: above max_finite_x (incl. +inf, +NaN) to it,
  // below min_nonzero_x (incl. -inf, -NaN: on negative floats the signed order of the bits is
  // the order of |x|) to that. No compare: scalar code gets sar/cmov, not setcc, whose write
  // to the low byte of a register still holding the previous call's result would chain the
  // calls of a scalar loop into one long dependency; and the bound is not a constant, so
  // the compiler cannot specialize the clamped path into constants and branches.
  const U sign = static_cast<U>(static_cast<S>(ix) >> top);  // all ones for x < 0
  const auto bound =
      static_cast<S>(C::max_finite_x + (sign & (C::min_nonzero_x - C::max_finite_x)));
  U cb = static_cast<U>(std::min(static_cast<S>(ix), bound));
#if !defined(__FMA__)
  // Without FMA, c6*r is subnormal for |x| < 2^-117, and each such product costs a microcode
  // assist of ~100 cycles: |x| < tiny_x, where e^x rounds to 1, is computed as x = 0. (With
  // FMA every product of the polynomial is fused, and 1 + r*(...) rounds to 1 on its own.)
  cb &= static_cast<U>(static_cast<S>(C::tiny_x - 1 - ax) >> top);
#endif
  const T xc = detail::bit_cast<T>(cb);

  const U zb = detail::bit_cast<U>(xc * C::log2e + C::shifter);
  const auto k = static_cast<S>(zb - detail::bit_cast<U>(C::shifter));
  T kf;
  if constexpr (sizeof(T) == 4) {
    kf = static_cast<T>(k);
  } else {
    // int64 -> double needs AVX-512DQ and int64 -> int32 a lane shuffle: instead, the low 32
    // bits of zb are 5119 + k >= 0, and 2^52 + (5119 + k) - (2^52 + 5119) is exact.
    kf = detail::bit_cast<T>((zb & 0xffffffffULL) | 0x4330000000000000ULL) - (0x1p52 + 5119.0);
  }
  // hi = x - k*ln2_hi is exact, and must stay so: xor-ed with zb's sign bit (always 0: z > 0),
  // it is opaque to -fassociative-math, which would otherwise compute (x - lo) - k*ln2_hi or
  // factor k*ln2_hi + k*ln2_lo into k*ln2 (up to ~70 ulp off).
  const T hi = detail::bit_cast<T>(detail::bit_cast<U>(xc - kf * C::ln2_hi) ^ (zb >> top << top));
  const T lo = kf * C::ln2_lo;
  const T y = exp_poly(hi - lo, hi, lo);

  // (zb - k1) << mant_bits is 2^k2: the shifter's high bits shift out, leaving bias + k - k1.
  const S k1 = k >> 1;
  const T y1 = detail::bit_cast<T>(detail::bit_cast<U>(y) + (static_cast<U>(k1) << C::mant_bits));
  // The special results. These masks come from float compares: integer compares on ix would let
  // GCC correlate them with the clamp and take the loop out of vectorization. Below
  // min_nonzero_x, 2^k2 := +0 (x was clamped to min_nonzero_x, whose result is subnormal: this
  // way masked-out scores cost no subnormal-arithmetic assist); above max_finite_x +inf; for a
  // NaN (found from the bits: -ffinite-math-only folds x != x) a NaN, |x|'s bits.
  const bool under = x < detail::bit_cast<T>(C::min_nonzero_x);
  const T s2 = detail::bit_cast<T>(exp_zero_if(under, (zb - static_cast<U>(k1)) << C::mant_bits));
  U res = detail::bit_cast<U>(y1 * s2);
  const bool over = x > detail::bit_cast<T>(C::max_finite_x);
  const bool is_nan = static_cast<S>(ax) > static_cast<S>(C::inf_bits);
  res = exp_select(static_cast<bool>(static_cast<unsigned>(over) | static_cast<unsigned>(is_nan)),
                   is_nan ? ax : C::inf_bits, res);
  return detail::bit_cast<T>(res);
}

#if ATTN_VECTOR_EXTENSIONS
/// Sets the top bit of a lane of `bad` where |t| > in_range_x, t = ±inf or NaN (on the bits, so
/// that -ffinite-math-only cannot fold it): the top bit of in_range_x − |t|'s bits.
template <class T, std::size_t W>
[[gnu::always_inline]] inline void
exp_range_check(vec<T, W> t, vec<typename exp_consts<T>::uint, W>& bad) noexcept {
  using C = exp_consts<T>;
  bad |= C::in_range_x - (detail::bit_cast<vec<typename C::uint, W>>(t) & C::abs_mask);
}

/// e^t lane by lane, the arithmetic of `exp_ieee` without its clamp and its special cases:
/// bit for bit exp_ieee's result for |t| <= in_range_x (86.5 for float, 708 for double; there
/// k = round(t log2 e) is within [-125, 125] ([-1021, 1021]), so y * 2^k is normal and comes
/// from adding k to y's exponent bits). Outside it (|t| larger, inf, NaN) the lane's result is
/// meaningless, and `bad` gets a lane with its top bit set: the caller must then compute that
/// block with `exp`. Half the operations of exp_ieee: about 15 per vector. Without Check the
/// caller knows every lane in range (softmax rows whose least β x − m is within it), and `bad`
/// is left as it is.
template <class T, std::size_t W, bool Check = true>
[[gnu::always_inline]] inline vec<T, W>
exp_in_range(vec<T, W> t, vec<typename exp_consts<T>::uint, W>& bad) noexcept {
#if defined(__clang__)
  // Under -fassociative-math (which clang announces by no macro) clang could merge k*ln2_hi
  // and k*ln2_lo into k*ln2: not here.
#pragma clang fp reassociate(off)
#endif
  using C = exp_consts<T>;
  using U = typename C::uint;
  using VT = vec<T, W>;
  using VU = vec<U, W>;
  if constexpr (Check) exp_range_check<T, W>(t, bad);
  const VT z = t * C::log2e + C::shifter;
  const VU zb = detail::bit_cast<VU>(z);
  const VU k = zb - detail::bit_cast<U>(C::shifter);
  VT kf;
#if defined(__ASSOCIATIVE_MATH__)
  // GCC under -fassociative-math would fold z − shifter into t·log2e: k from the bits, as in
  // exp_ieee.
  if constexpr (sizeof(T) == 4) {
    kf = __builtin_convertvector(detail::bit_cast<vec<typename C::sint, W>>(k), VT);
  } else {
    kf = detail::bit_cast<VT>((zb & 0xffffffffULL) | 0x4330000000000000ULL) - (0x1p52 + 5119.0);
  }
#else
  // z and the shifter lie in [2^23, 2^24) ([2^52, 2^53)), where the spacing is 1: z − shifter
  // is k exactly (Sterbenz), in one operation instead of an integer subtract and a conversion.
  kf = z - C::shifter;
#endif
  VT hi = t - kf * C::ln2_hi;
#if defined(__ASSOCIATIVE_MATH__)
  // GCC under -fassociative-math: hi made opaque as in exp_ieee (zb's sign bit is 0).
  hi = detail::bit_cast<VT>(detail::bit_cast<VU>(hi) ^ (zb & (U{1} << (sizeof(U) * 8 - 1))));
#endif
  const VT lo = kf * C::ln2_lo;
  VT y;
  if constexpr (sizeof(T) == 4) {
    y = exp_poly_float(hi - lo);
  } else {
    y = exp_poly_double(hi - lo, hi, lo);
  }
  return detail::bit_cast<VT>(detail::bit_cast<VU>(y) + (k << C::mant_bits));
}

template <class U, std::size_t W, std::size_t... I>
[[gnu::always_inline]] inline vec<U, W / 2> or_halves(vec<U, W> v,
                                                      std::index_sequence<I...>) noexcept {
  return __builtin_shufflevector(v, v, static_cast<int>(I)...) |
         __builtin_shufflevector(v, v, static_cast<int>(I + W / 2)...);
}

/// Whether any lane of v has its top bit set.
template <class U, std::size_t W>
[[nodiscard]] [[gnu::always_inline]] inline bool any_top_bit(vec<U, W> v) noexcept {
  if constexpr (W == 1) {
    return (v[0] >> (sizeof(U) * 8 - 1)) != 0;
  } else {
    return any_top_bit<U, W / 2>(or_halves<U, W>(v, std::make_index_sequence<W / 2>{}));
  }
}
#endif

/// 2^e for e within T's normal exponent range (exact; constexpr, by squaring).
template <class T>
[[nodiscard]] constexpr T exp_pow2(int e) noexcept {
  T result{1};
  T base = e < 0 ? T{0.5L} : T{2};
  unsigned n = e < 0 ? static_cast<unsigned>(-e) : static_cast<unsigned>(e);
  while (n != 0) {
    if ((n & 1U) != 0) result *= base;
    n >>= 1U;
    if (n != 0) base *= base;  // never squares past what is needed (no overflow in constexpr)
  }
  return result;
}

/// What `exp_generic` needs to know about an input: NaN, +inf, -inf or finite.
enum class exp_class { finite, nan, pos_inf, neg_inf };

/// Classifies x. At run time it reads the bits of the x87 80-bit and IEEE binary128 formats,
/// so that -ffinite-math-only cannot fold the test away; other formats compare.
template <class T>
[[nodiscard]] constexpr exp_class exp_classify(T x) noexcept {
  using L = std::numeric_limits<T>;
  if (!std::is_constant_evaluated()) {
    if constexpr (std::endian::native == std::endian::little && L::max_exponent == 16384 &&
                  (L::digits == 64 || L::digits == 113) && sizeof(T) >= 10) {
      unsigned char b[sizeof(T)];
      std::memcpy(b, &x, sizeof(T));
      // x87: bytes 0..7 significand (bit 63 explicit), bytes 8..9 sign and exponent.
      // binary128: bytes 0..13 and the low half of 14..15 significand, bytes 14..15 s+e.
      constexpr std::size_t se_at = L::digits == 64 ? 8 : 14;
      const unsigned se =
          static_cast<unsigned>(b[se_at]) | (static_cast<unsigned>(b[se_at + 1]) << 8U);
      if ((se & 0x7fffU) != 0x7fffU) return exp_class::finite;
      bool frac_zero = true;
      if constexpr (L::digits == 64) {
        std::uint64_t m = 0;
        std::memcpy(&m, b, sizeof(m));
        frac_zero = (m << 1U) == 0;
      } else {
        for (std::size_t i = 0; i < 14; ++i) frac_zero = frac_zero && b[i] == 0;
      }
      if (!frac_zero) return exp_class::nan;
      return (se & 0x8000U) != 0 ? exp_class::neg_inf : exp_class::pos_inf;
    }
  }
  if (x != x) return exp_class::nan;
  if (x > L::max()) return exp_class::pos_inf;
  if (x < -L::max()) return exp_class::neg_inf;
  return exp_class::finite;
}

/// Degree of the Taylor series that `exp_generic` uses for T: the first n with
/// 0.3466^(n+1)/(n+1)! < 2^-(digits+5) (16 for the 64-bit x87 significand).
template <class T>
inline constexpr int exp_taylor_degree = [] {
  long double tol = 1;
  for (int i = 0; i < std::numeric_limits<T>::digits + 5; ++i) tol /= 2;
  long double term = 1;  // 0.3466^n / n!
  int n = 0;
  while (term >= tol || n < 3) {
    ++n;
    term = term * 0.3466L / static_cast<long double>(n);
  }
  return n - 1;
}();

/// Coefficients of P(r) = sum_{j=2}^{degree} r^(j-2) / j! (c[i] = 1/(i+2)!, each rounded once:
/// j! is exact in T for the degrees used).
template <class T>
inline constexpr std::array<T, static_cast<std::size_t>(exp_taylor_degree<T> - 1)> exp_taylor = [] {
  std::array<T, static_cast<std::size_t>(exp_taylor_degree<T> - 1)> c{};
  T fact{1};
  for (std::size_t i = 0; i < c.size(); ++i) {
    fact *= static_cast<T>(i + 2);
    c[i] = T{1} / fact;
  }
  return c;
}();

/// exp(x) for any other floating type (x87 long double, binary128, ...): a scalar, constexpr
/// path. x87 long double: < 1 ulp (tests/test_exp.cpp; under -ffast-math within 2,
/// docs/softmax.md); subnormal results rounded once; specials exact (also under -ffast-math,
/// for x87 and binary128).
template <class T>
[[nodiscard]] constexpr T exp_generic(T x) noexcept {
  // Same scheme as exp_ieee, in scalar form: k = round(x/ln2); r = x - k*ln2 with
  // ln2 = ln2_hi (32 bits, so k*ln2_hi is exact for |k| < 2^21) + ln2_lo; exp(r) by its Taylor
  // series up to the first degree whose remainder 0.3466^(n+1)/(n+1)! is below 2^-(digits+5)
  // (degree 16 for the 64-bit x87 significand); scaling by 2^k1 * 2^k2 as in exp_ieee.
  using L = std::numeric_limits<T>;
  switch (exp_classify(x)) {
  case exp_class::nan:
    return x + x;
  case exp_class::pos_inf:
    return x;
  case exp_class::neg_inf:
    return T{0};
  case exp_class::finite:
    break;
  }
  constexpr T ln2 = 0.693147180559945309417232121458176568075500134L;
  constexpr T log2e = 1.44269504088896340735992468100189213742664595L;
  constexpr T ln2_lo = 1.90821492927058781614426568075500134360255254e-10L;
  // Beyond these the result is 0 or +inf anyway; they keep k in range.
  constexpr T x_lo = static_cast<T>(L::min_exponent - L::digits - 2) * ln2 - T{1};
  constexpr T x_hi = static_cast<T>(L::max_exponent + 1) * ln2;
  const T xc = x < x_lo ? x_lo : (x > x_hi ? x_hi : x);
  const T t = xc * log2e;
  const auto k = static_cast<int>(t < 0 ? t - T{0.5L} : t + T{0.5L});
  const auto kf = static_cast<T>(k);
  // hi = x - k*ln2_hi, exact (k*ln2_hi is computed in integers). At run time it goes through a
  // volatile, so that -fassociative-math can neither compute (x - lo) - k*ln2_hi nor merge
  // k*ln2_hi and k*ln2_lo, either of which is off by thousands of ulp.
  T hi = xc - static_cast<T>(static_cast<long long>(k) * 0xb17217f7LL) * T{0x1p-32L};
  if (!std::is_constant_evaluated()) {
    volatile T opaque = hi;
    hi = opaque;
  }
  const T lo = kf * ln2_lo;
  const T r = hi - lo;
  constexpr auto& c = exp_taylor<T>;
  T p{0};
  for (std::size_t j = c.size(); j-- > 0;) p = p * r + c[j];
  const T y = T{1} + (hi + (r * r * p - lo));
  // y * 2^k with y in [0.7, 1.42]: decide overflow and underflow to 0 here, so that constant
  // evaluation never rounds to inf or 0. m: the exponent of the smallest subnormal.
  constexpr int m = L::min_exponent - L::digits;
  if (k > L::max_exponent || (k == L::max_exponent && y >= T{1})) return L::infinity();
  if (k < m - 1 || (k == m - 1 && y <= T{1})) return T{0};
  const int k1 = k >= 0 ? k / 2 : -((-k + 1) / 2);
  return y * exp_pow2<T>(k1) * exp_pow2<T>(k - k1);
}

/// exp(x) = e^x for float, double and long double; constexpr, noexcept, branch-free for
/// float/double (so `for (i...) y[i] = exp(x[i] - m);` vectorizes). Max error: float 1.5 ulp,
/// double 1 ulp, long double 1 ulp (x87); exp(+-0) = 1, exp(NaN) = NaN, exp(+inf) = +inf,
/// exp(-inf) = +0, overflow -> +inf, gradual underflow to subnormals, then +0. Under
/// -ffast-math the special cases still hold and the error stays <= 2 ulp (tested bound 8);
/// subnormal results become +0 when the FPU flushes to zero (a program linked with
/// -ffast-math).
template <class T>
  requires std::is_floating_point_v<T>
[[nodiscard]] constexpr T exp(T x) noexcept {
  using L = std::numeric_limits<T>;
  if constexpr (std::same_as<T, float> && L::is_iec559 && L::digits == 24) {
    return exp_ieee(x);
  } else if constexpr (std::same_as<T, double> && L::is_iec559 && L::digits == 53) {
    return exp_ieee(x);
  } else if constexpr (L::is_iec559 && L::digits == 53 && L::max_exponent == 1024) {
    return static_cast<T>(exp_ieee(static_cast<double>(x)));  // long double == double
  } else {
    return exp_generic(x);
  }
}

#if ATTN_VECTOR_EXTENSIONS
/// What the array kernels take the exp of: x itself, x − m (for β = 1, where β·x is x exactly),
/// or β·x − m with β·x rounded first (scaled_minus).
enum class exp_shift { none, minus_m, scaled_minus_m };

/// The argument of exp for x under Shift (exp_shift).
template <exp_shift Shift, class V, class T>
[[gnu::always_inline]] inline V exp_arg(V x, T beta, T m) noexcept {
  if constexpr (Shift == exp_shift::none) {
    return x;
  } else if constexpr (Shift == exp_shift::minus_m) {
    return x - m;
  } else {
    return scaled_minus(beta, x, m);
  }
}

/// out_i = exp(β x_i − m)·f (the argument as exp_arg<Shift>; f only if Scaled) for the
/// V·L numbers of one block (L: lanes of one vector), by `exp_in_range`; false if some lane is
/// out of its range (then the caller takes the block through `exp`, and `out` may hold anything
/// there). With `sums`, the block's vector v is also added to sums[v % 4] (sum_of's
/// accumulators), and on false they are left as they were. Each vector is stored as soon as it
/// is computed (kept in registers, the block would spill), unless out is x: then the block's
/// range is checked first, so that no input is overwritten before the check. Without Checked
/// every number is known in range: no check, and always true.
template <std::size_t V, exp_shift Shift, bool Scaled, bool Checked, class T>
[[gnu::always_inline]] inline bool
exp_block_in_range(const T* x, T* out, T beta, T m, T f,
                   vec<T, simd_lanes<T>>* sums = nullptr) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  using VT = vec<T, L>;
  using VU = vec<typename exp_consts<T>::uint, L>;
  // (plain loops, unrolled by pragma: a lambda folded over an index sequence was kept out of
  // line, with the partial sums in memory: docs/performance.md, "How each kernel gets there")
  VU bad = {};
  const bool in_place = Checked && x == out;
  if (in_place) {
    ATTN_UNROLL
    for (std::size_t v = 0; v < V; ++v)
      exp_range_check<T, L>(exp_arg<Shift>(load<T, L>(x + v * L), beta, m), bad);
    if (any_top_bit<typename exp_consts<T>::uint, L>(bad)) return false;
  }
  VT before[4] = {};  // (read only with sums; zeroed so that GCC -O3 sees it set)
  if (Checked && sums != nullptr)
    for (std::size_t k = 0; k < 4; ++k) before[k] = sums[k];
  ATTN_UNROLL
  for (std::size_t v = 0; v < V; ++v) {
    VT r = exp_in_range<T, L, Checked>(exp_arg<Shift>(load<T, L>(x + v * L), beta, m), bad);
    if constexpr (Scaled) r = r * f;
    std::memcpy(out + v * L, &r, sizeof r);
    if (sums != nullptr) sums[v % 4] += r;
  }
  if (!Checked || in_place || !any_top_bit<typename exp_consts<T>::uint, L>(bad)) return true;
  if (sums != nullptr)
    for (std::size_t k = 0; k < 4; ++k) sums[k] = before[k];
  return false;
}

/// exp_shifted without a mask at run time, for float and double (the argument as exp_arg<Shift>,
/// times f if Scaled): blocks of 8 vectors, then of 4, then single vectors, then groups of 4
/// lanes and the last 1-3 numbers gathered into one group, each through exp_in_range; a block
/// holding a number out of its range (|β x_i − m| > 86.5 for float, 708 for double, or not
/// finite) is done by `exp`. The same numbers as the scalar loop, to the bit. With `sums`, the
/// blocks of 8 and 4 vectors — together the first n / (4·L) · 4·L numbers, sum_of's `whole` —
/// are also added into sum_of's four accumulators, in sum_of's order. Without Checked the
/// caller knows every number in range, and none is checked.
template <exp_shift Shift, bool Scaled, bool Checked, class T>
[[gnu::flatten]] inline void exp_shifted_vec(const T* x, T* out, std::size_t n, T beta, T m, T f,
                                             vec<T, simd_lanes<T>>* sums = nullptr) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  constexpr std::size_t V = 8;
  const auto scalar = [&](std::size_t i0, std::size_t count, vec<T, L>* block_sums = nullptr) {
    for (std::size_t i = i0; i < i0 + count; ++i) {
      const T e = attn::detail::exp(exp_arg<Shift>(x[i], beta, m));
      out[i] = Scaled ? e * f : e;
    }
    if (block_sums != nullptr)
      for (std::size_t v = 0; v < count / L; ++v) block_sums[v % 4] += load<T, L>(out + i0 + v * L);
  };
  std::size_t i = 0;
  for (; i + V * L <= n; i += V * L)
    if (!exp_block_in_range<V, Shift, Scaled, Checked>(x + i, out + i, beta, m, f, sums))
      scalar(i, V * L, sums);
  for (; i + 4 * L <= n; i += 4 * L)
    if (!exp_block_in_range<4, Shift, Scaled, Checked>(x + i, out + i, beta, m, f, sums))
      scalar(i, 4 * L, sums);
  for (; i + L <= n; i += L)
    if (!exp_block_in_range<1, Shift, Scaled, Checked>(x + i, out + i, beta, m, f)) scalar(i, L);
  // The tail, under one vector: groups of Q = 4 lanes loaded whole, then the last 1 to Q − 1
  // numbers gathered lane by lane into one group (its other lanes repeat the first number and
  // are not stored). Copied through a buffer in memory instead, the group's load would wait
  // for the copy's narrower stores (a store-forwarding stall) on every short row.
  constexpr std::size_t Q = L < 4 ? L : 4;
  using U = typename exp_consts<T>::uint;
  const auto group = [&](vec<T, Q> t, std::size_t i0, std::size_t count) {
    t = exp_arg<Shift>(t, beta, m);
    vec<U, Q> bad = {};
    vec<T, Q> y = exp_in_range<T, Q, Checked>(t, bad);
    if constexpr (Scaled) y = y * f;
    if (Checked && any_top_bit<U, Q>(bad)) {
      scalar(i0, count);
    } else if (count == Q) {
      std::memcpy(out + i0, &y, sizeof y);
    } else {
      for (std::size_t k = 0; k < count; ++k) out[i0 + k] = y[k];
    }
  };
  for (; i + Q <= n; i += Q) group(load<T, Q>(x + i), i, Q);
  if (i < n) {
    const std::size_t rest = n - i;
    vec<T, Q> t;
    for (std::size_t k = 0; k < Q; ++k) t[k] = x[i + (k < rest ? k : 0)];
    group(t, i, rest);
  }
}

/// out_i = exp(β x_i − m) as exp_shifted_vec, returning sum_of(out, n) to the bit: the whole
/// groups of four vectors are summed from the registers that hold their exps, into sum_of's
/// four accumulators in sum_of's order; the rest (under four vectors) is added from `out` in
/// order, as sum_of's tail. One pass instead of two, with no horizontal sum per block. Checked
/// as for exp_shifted_vec.
template <exp_shift Shift, bool Checked, class T>
[[gnu::flatten]] inline T exp_shifted_sum_vec(const T* x, T* out, std::size_t n, T beta,
                                              T m) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  const std::size_t whole = n / (4 * L) * (4 * L);
  T head = 0;
  if (whole == 0) {  // a short row: no accumulators to set up and add across
    exp_shifted_vec<Shift, false, Checked>(x, out, n, beta, m, T(1));
  } else {
    vec<T, L> sums[4] = {};
    exp_shifted_vec<Shift, false, Checked>(x, out, n, beta, m, T(1), sums);
    head = hsum<T, L>((sums[0] + sums[2]) + (sums[1] + sums[3]));
  }
  T tail = 0;
  for (std::size_t i = whole; i < n; ++i) tail += out[i];
  return head + tail;
}
#endif

/// x[i] = exp(x[i]) for i < n, as a plain loop that compilers vectorize (exp_array's path in
/// constant evaluation and without vector extensions). The bulk runs over whole blocks of 64
/// bytes, the tail on its own: GCC at -O2 (its "very cheap" vectorizer cost model) vectorizes
/// only loops that need no epilogue and no alias check, which this loop shape gives it.
template <class T>
  requires std::is_floating_point_v<T>
constexpr void exp_inplace_plain(T* x, std::size_t n) noexcept {
  constexpr std::size_t block = 64 / sizeof(T) > 0 ? 64 / sizeof(T) : 1;
  const std::size_t bulk = n - n % block;
  for (std::size_t i = 0; i < bulk; ++i) x[i] = exp(x[i]);
  for (std::size_t i = bulk; i < n; ++i) x[i] = exp(x[i]);
}

/// y[i] = exp(x[i]) for i < n (y may alias x): the same numbers as `exp` on each, to the bit.
/// At run time, for float and double, whole vectors through exp_in_range (exp_shifted_vec).
template <class T>
  requires std::is_floating_point_v<T>
constexpr void exp_array(const T* x, T* y, std::size_t n) noexcept {
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    if (!std::is_constant_evaluated()) {
      exp_shifted_vec<exp_shift::none, false, true>(x, y, n, T(1), T(0), T(1));
      return;
    }
  }
#endif
  if (y != x)
    for (std::size_t i = 0; i < n; ++i) y[i] = x[i];
  exp_inplace_plain(y, n);
}

/// x[i] = exp(x[i]) for i < n (exp_array in place).
template <class T>
  requires std::is_floating_point_v<T>
constexpr void exp_inplace(T* x, std::size_t n) noexcept { exp_array(x, x, n); }

}  // namespace attn::detail
