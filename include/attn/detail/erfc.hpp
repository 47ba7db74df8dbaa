#pragma once
/// \file attn/detail/erfc.hpp
/// The normal distribution's tail Φ(−s) = ½·erfc(s/√2), s ≥ 0, as vector arithmetic without a
/// branch, and on it GELU(x) = x·Φ(x) and GELU′(x) = Φ(x) + x·φ(x) (attn/activations.hpp) for
/// float and double: a loop over them vectorizes (libm's erfc does not, 16 ns a number).
///
/// The formula (the same for float and double, coefficients per type):
///
///   Φ(−s) = ½·t·e^(−s²/2 + P),  P = (1 − t)·Q(w),  t = 1/(1 + s/4),  w = α·t + β  (w in [−1, 1]
///   for s in [0, s_max]),
///
/// log(2Φ(−s)/t) + s²/2 is smooth in t on [0, 1] and 0 at t = 1 (Numerical Recipes' erfcc idea,
/// with our own fit): Q is a Chebyshev fit in w of it divided by 1 − t, computed with mpmath at
/// 50 digits (bench/fit_phi.py prints them), degree 10 for float (fit error
/// 9.4e−9 on |Q| ≈ 2), degree 24 for double (2.1e−17), coefficients rounded to T; they sum to 2.4
/// in magnitude, so Horner loses nothing to cancellation, and the factor 1 − t = s·t/4 makes P's
/// rounding vanish with s (fitting P itself cost 7 ulp near s = 0, where P sums terms of 0.8 to 0).
/// Relative accuracy for every s: no 1 − erf, and x ≥ 0 takes Φ(x) = 1 − Φ(−x), where Φ(−x) ≤ ½
/// cannot cancel.
///
/// The exponent −s²/2 is carried exactly: s = s_h + s_l with s_h the top half of s's significand
/// (a mask on the bits), so s_h² is exact and −s²/2 = −s_h²/2 − s_l(s + s_h)/2, the second
/// part 2^−12 (2^−26) of the first; e^(A + B) is then reduced as exp_ieee reduces, with A − k·ln2_hi
/// exact (`exp_split_scaled`). Rounding s² instead would cost s²·ε of relative error (100 ulp at
/// s = 14). s is clamped to s_max (15 for float, 39 for double), beyond which GELU is x or −0 and
/// GELU′ 1 or 0 in T, and the exponential is scaled by 2^bias so that it stays normal until the
/// last product, which rounds once into the subnormals.
///
/// Error (tests/test_activations.cpp with tests/gelu_scan.hpp, every float against long double):
/// GELU float ≤ 8 ulp (7.47 at most, with AVX-512's rcp14 path), its slope ≤ 5 ulp of the
/// magnitude of its two terms Φ and x·φ (4.44; they cancel near x = −0.75, where the slope is 0).
/// Double: 6.3 ulp and 3.3 ulp at most over 4M random doubles of [−40, 40] in development; the
/// test suite holds double to the condition-based bounds of "activations: values over every
/// octave". Where the error comes from: P's few roundings on |P| ≤ 1.7 (an absolute error of
/// the exponent, so a relative one of the result), the exponential's 0.9 ulp, t's, and the final
/// products.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "attn/detail/exp.hpp"
#include "attn/detail/simd.hpp"

namespace attn::detail {

#if ATTN_VECTOR_EXTENSIONS

/// The constants of the Φ kernel per type: s_max, the scale 2^bias of the exponential, the mask
/// that keeps the top half of a significand, α and β of w = α·t + β.
template <class T>
struct phi_consts;

template <>
struct phi_consts<float> {
  static constexpr float s_max = 15.0F;           // Φ(−15)·15 = 5.5e−50: GELU is −0 below −15
  static constexpr int bias = 64;                  // k ≥ −165 at s = 15: k + 64 stays normal
  static constexpr float scale_down = 0x1p-64F;    // 2^−bias
  static constexpr std::uint32_t split_mask = 0xfffff000U;  // s_h: 12 significant bits
  static constexpr float alpha = 38.0F / 15.0F;    // 2/(1 − a), a = 1/(1 + 15/4) = 4/19
  static constexpr float beta = -23.0F / 15.0F;    // −(1 + a)/(1 − a)
};

template <>
struct phi_consts<double> {
  static constexpr double s_max = 39.0;            // Φ(−39)·39 = 5e−332: GELU is −0 below −39
  static constexpr int bias = 128;                 // k ≥ −1100 at s = 39
  static constexpr double scale_down = 0x1p-128;
  static constexpr std::uint64_t split_mask = 0xfffffffff8000000ULL;  // s_h: 26 significant bits
  static constexpr double alpha = 86.0 / 39.0;     // a = 1/(1 + 39/4) = 4/43
  static constexpr double beta = -47.0 / 39.0;
};

/// Σ c_i w^i by its even and odd coefficients, two Horner chains in w² side by side: the same
/// multiply-adds as one chain, half its latency (the loop's chain of dependent operations, not
/// their count, bounded its speed: about 60 operations a vector in flight against a 224-entry
/// reorder buffer).
template <class V, class E, std::size_t N>
[[nodiscard]] [[gnu::always_inline]] inline V phi_poly_eval(const E (&c)[N], V w) noexcept {
  const V w2 = w * w;
  constexpr std::size_t top_even = (N - 1) / 2 * 2, top_odd = N % 2 == 0 ? N - 1 : N - 2;
  V even = V{} + c[top_even], odd = V{} + c[top_odd];
  ATTN_UNROLL
  for (std::size_t i = top_even; i >= 2; i -= 2) even = even * w2 + c[i - 2];
  ATTN_UNROLL
  for (std::size_t i = top_odd; i >= 3; i -= 2) odd = odd * w2 + c[i - 2];
  return even + w * odd;
}

/// Q(w) for float: degree 10, Horner over the coefficients, lowest first.
template <class V>
[[nodiscard]] [[gnu::always_inline]] inline V phi_poly_float(V w) noexcept {
  constexpr float c[] = {
      -0x1.021b92p+1F, -0x1.fb081ep-3F, 0x1.8613ccp-5F, 0x1.dfd014p-6F,
      -0x1.71663cp-11F, -0x1.ff409ap-9F, -0x1.776d1ap-12F, 0x1.188bf2p-11F,
      0x1.99a93ep-14F, -0x1.d6d288p-15F, -0x1.cbdp-17F,
  };
  return phi_poly_eval(c, w);
}

/// Q(w) for double: degree 24, Horner.
template <class V>
[[nodiscard]] [[gnu::always_inline]] inline V phi_poly_double(V w) noexcept {
  constexpr double c[] = {
      -0x1.fa8973399e04bp+0, -0x1.31a23e3ab0d9ap-2, 0x1.75ca032d612e3p-5,
      0x1.66a36a5610448p-5, 0x1.ce9c86fcd3b11p-9, -0x1.b79d5dfd3255bp-8,
      -0x1.02cf7587a8c29p-9, 0x1.060884354e2e4p-10, 0x1.2c813955c2a48p-11,
      -0x1.14ef87978c56ep-13, -0x1.29813a0212149p-13, 0x1.94bed7e54c785p-17,
      0x1.0e233db15c91fp-15, 0x1.589c87a2963abp-21, -0x1.c88e27f50496fp-18,
      -0x1.9ae919a740047p-21, 0x1.6484c63e5deacp-20, 0x1.2978f88576ae6p-22,
      -0x1.f598c6984c8bbp-23, -0x1.3a289c7f18e34p-24, 0x1.2cfb75d0e42b7p-25,
      0x1.dbb40bbf72466p-27, -0x1.120ed2e03f04fp-28, -0x1.7ed29a1a25af4p-30,
      0x1.185a56d7a52c4p-32,
  };
  return phi_poly_eval(c, w);
}

/// Lane by lane a where the mask m (all ones or 0, as a compare gives) is set, else b.
template <class VT, class VM>
[[nodiscard]] [[gnu::always_inline]] inline VT select_by(VM m, VT a, VT b) noexcept {
  using VU = decltype(detail::bit_cast<VM>(a));
  return detail::bit_cast<VT>((detail::bit_cast<VU>(a) & m) | (detail::bit_cast<VU>(b) & ~m));
}

/// e^(A + B)·2^Bias lane by lane, A exact and |B| ≤ 2, A + B in [−(125 + Bias)·ln2 + 1, 0]
/// (float; [−(1021 + Bias)·ln2 + 1, 0] for double): exp_in_range's reduction with the argument
/// in two parts, hi = A − k·ln2_hi exact and lo = k·ln2_lo − B, so that A's size costs nothing.
template <class T, std::size_t W, int Bias>
[[nodiscard]] [[gnu::always_inline]] inline vec<T, W> exp_split_scaled(vec<T, W> A, vec<T, W> B) noexcept {
#if defined(__clang__)
#pragma clang fp reassociate(off)
#endif
  using C = exp_consts<T>;
  using U = typename C::uint;
  using VT = vec<T, W>;
  using VU = vec<U, W>;
  const VT z = (A + B) * C::log2e + C::shifter;
  const VU zb = detail::bit_cast<VU>(z);
  const VU k = zb - detail::bit_cast<U>(C::shifter);
  VT kf;
#if defined(__ASSOCIATIVE_MATH__)
  if constexpr (sizeof(T) == 4) {
    kf = __builtin_convertvector(detail::bit_cast<vec<typename C::sint, W>>(k), VT);
  } else {
    kf = detail::bit_cast<VT>((zb & 0xffffffffULL) | 0x4330000000000000ULL) - (0x1p52 + 5119.0);
  }
#else
  kf = z - C::shifter;
#endif
  VT hi = A - kf * C::ln2_hi;
#if defined(__ASSOCIATIVE_MATH__)
  hi = detail::bit_cast<VT>(detail::bit_cast<VU>(hi) ^ (zb & (U{1} << (sizeof(U) * 8 - 1))));
#endif
  const VT lo = kf * C::ln2_lo - B;
  const VT r = hi - lo;
  VT y;
  if constexpr (sizeof(T) == 4) {
    y = exp_poly_float(r);
  } else {
    y = exp_poly_double(r, r, VT{});
  }
  return detail::bit_cast<VT>(detail::bit_cast<VU>(y) + ((k + static_cast<U>(Bias)) << C::mant_bits));
}

/// 1/d lane by lane for d in [1, 11]: with AVX-512, for a whole register, rcp14 (relative error
/// below 2^−14) and Newton steps r + r(1 − d r), one for float (2^−28) and two for double
/// (2^−56), 3 and 5 operations in place of a division whose throughput is one per 10 (16)
/// cycles; elsewhere the division.
template <class T, std::size_t W>
[[nodiscard]] [[gnu::always_inline]] inline vec<T, W> reciprocal_near(vec<T, W> d) noexcept {
#if defined(__AVX512F__)
  if constexpr (W * sizeof(T) == 64) {
    vec<T, W> r;
    if constexpr (sizeof(T) == 4) {
      r = __builtin_ia32_rcp14ps512_mask(d, d, static_cast<unsigned short>(0xffff));
    } else {
      r = __builtin_ia32_rcp14pd512_mask(d, d, static_cast<unsigned char>(0xff));
    }
    r = r + r * (T(1) - d * r);
    if constexpr (sizeof(T) == 8) r = r + r * (T(1) - d * r);
    return r;
  }
#endif
  return T(1) / d;
}

/// a·b, with b > 0 made of bits the compiler cannot see (an exponential's): the product xor-ed
/// with b's sign bit (0), which no reassociation under -ffast-math can split apart.
template <class VT>
[[nodiscard]] [[gnu::always_inline]] inline VT opaque_product(VT a, VT b) noexcept {
  using VU = decltype(a < b);
  using U = std::remove_cvref_t<decltype(std::declval<VU>()[0])>;
  constexpr auto sign = static_cast<U>(U{1} << (sizeof(U) * 8 - 1));
  return detail::bit_cast<VT>(detail::bit_cast<VU>(a * b) ^ (detail::bit_cast<VU>(b) & sign));
}

/// GELU(x) (Slope false) or GELU′(x) (Slope true) on the W lanes of x, by the file comment's
/// formula with m = x_c·Φ(−s) (x_c: x clamped to ±s_max): GELU = x − m for x ≥ 0 and m below;
/// GELU′ = 1 − D for x ≥ 0 and D below, D = Φ(−s) − s·φ(s) = e^(−s²/2)·(½t·e^P − s/√(2π)).
/// NaN gives NaN, ±inf gives ±inf or −0 (slope 1 or 0), ±0 gives ±0 (slope ½). The side is taken
/// from x's sign bit (so −0 is −0) by bit selects, which -ffast-math cannot fold.
template <class T, std::size_t W, bool Slope>
[[nodiscard]] [[gnu::always_inline]] inline vec<T, W> gelu_erf_vec(vec<T, W> x) noexcept {
  using C = exp_consts<T>;
  using K = phi_consts<T>;
  using U = typename C::uint;
  using S = typename C::sint;
  using VT = vec<T, W>;
  using VU = vec<U, W>;
  constexpr U sign_bit = ~C::abs_mask;
  const VU ix = detail::bit_cast<VU>(x);
  const VT s = detail::bit_cast<VT>(ix & C::abs_mask);
  // s clamped to s_max (a min: a NaN stays a NaN, and makes the result one)
  const VT sc = K::s_max < s ? VT{} + K::s_max : s;
  const VT t = reciprocal_near<T, W>(sc * T(0.25) + T(1));
  const VT w = t * K::alpha + K::beta;
  VT q;
  if constexpr (sizeof(T) == 4) {
    q = phi_poly_float(w);
  } else {
    q = phi_poly_double(w);
  }
  const VT p = ((sc * t) * T(0.25)) * q;  // P = (1 − t)·Q, 1 − t = s·t/4: no cancellation near s = 0
  const VT sh = detail::bit_cast<VT>(detail::bit_cast<VU>(sc) & K::split_mask);
  const VT sl = sc - sh;
  const VT A = sh * (sh * T(-0.5));     // exact
  const VT Bsq = (sl * (sc + sh)) * T(-0.5);
  // all ones where x's sign bit is set
  const VU negative = detail::bit_cast<VU>(detail::bit_cast<vec<S, W>>(ix) >> (sizeof(U) * 8 - 1));
  if constexpr (!Slope) {
    const VT Y = exp_split_scaled<T, W, K::bias>(A, Bsq + p);  // 2^bias·e^(−s²/2 + P)
    const VT xc = detail::bit_cast<VT>(detail::bit_cast<VU>(sc) | (ix & sign_bit));
    // x_c·Φ(−s) = (x_c·Y)·(t·2^−bias/2), rounded once at the end. x_c·Y is made opaque (xor-ed
    // with Y's sign bit, 0) so that -ffast-math cannot reassociate the product into
    // (x_c·2^−bias)·Y, which underflows for tiny x (and flushes to 0 under FTZ).
    const VT m = opaque_product(xc, Y) * (t * (T(0.5) * K::scale_down));
    return select_by(negative, m, x - m);
  } else {
    const VT Ye = exp_split_scaled<T, W, K::bias>(A, Bsq);  // 2^bias·e^(−s²/2)
    VU unused = {};
    const VT g = (t * T(0.5)) * exp_in_range<T, W, false>(p, unused);  // |P| < 1.7
    constexpr T inv_sqrt_2pi = T(0.398942280401432677939946059934381868L);
    const VT D = (Ye * (g - sc * inv_sqrt_2pi)) * K::scale_down;
    return select_by(negative, D, T(1) - D);
  }
}

/// gelu_erf_vec on one number: computed in a whole register (simd_lanes<T>), so with the very
/// arithmetic of the array loop, hence its bits.
template <class T, bool Slope>
[[nodiscard]] inline T gelu_erf(T x) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  const vec<T, L> v = x - vec<T, L>{};  // x in every lane (x − 0 is x, −0 included)
  return gelu_erf_vec<T, L, Slope>(v)[0];
}

/// GELU's tanh form, x·σ(z) with z = 2u = 2√(2/π)(x + 0.044715x³) (attn/activations.hpp), and
/// its slope σ(z) + 2x·u′·σ(z)σ(−z), on the W lanes of x, with attn's exponential: e = e^(−|z|)
/// (exp_split_scaled, scaled by 2^bias so that it stays normal), σ(|z|) = 1/(1 + e) and
/// σ(−|z|) = e/(1 + e) — the stable halves, no 1 + tanh. |x| is clamped to x_max (11 for float,
/// 22 for double), beyond which σ(z) is 1 in T and x·σ(−|z|) below half the least subnormal.
template <class T>
inline constexpr T gelu_tanh_x_max = sizeof(T) == 4 ? T(11) : T(22);

template <class T, std::size_t W, bool Slope>
[[nodiscard]] [[gnu::always_inline]] inline vec<T, W> gelu_tanh_vec(vec<T, W> x) noexcept {
  using C = exp_consts<T>;
  using K = phi_consts<T>;
  using U = typename C::uint;
  using S = typename C::sint;
  using VT = vec<T, W>;
  using VU = vec<U, W>;
  constexpr U sign_bit = ~C::abs_mask;
  constexpr T k1 = T(0.797884560802865355879892119868763737L);  // √(2/π)
  constexpr T k3 = T(0.044715L);
  const VU ix = detail::bit_cast<VU>(x);
  const VT s = detail::bit_cast<VT>(ix & C::abs_mask);
  const VT sc = gelu_tanh_x_max<T> < s ? VT{} + gelu_tanh_x_max<T> : s;  // a NaN stays one
  const VT s2 = sc * sc;
  const VT a = (T(2) * k1) * (sc + k3 * (s2 * sc));  // |z|
  const VT E = exp_split_scaled<T, W, K::bias>(VT{} - a, VT{});  // 2^bias·e^(−|z|)
  const VT e = E * K::scale_down;
  const VT r = reciprocal_near<T, W>(T(1) + e);  // σ(|z|)
  const VU negative = detail::bit_cast<VU>(detail::bit_cast<vec<S, W>>(ix) >> (sizeof(U) * 8 - 1));
  const VT xc = detail::bit_cast<VT>(detail::bit_cast<VU>(sc) | (ix & sign_bit));
  if constexpr (!Slope) {
    const VT below = (opaque_product(xc, E) * r) * K::scale_down;  // x·σ(−|z|), rounded once at the end
    return select_by(negative, below, x * r);
  } else {
    const VT du2 = (T(2) * k1) * (T(1) + (T(3) * k3) * s2);  // 2u′
    // x ≥ 0: σ(z) + 2x·u′·σσ = r + (2s·u′·E·r²)·2^−bias; x < 0: σ(−s)(1 − 2s·u′·σ(s)) = (E·r·(1 − 2s·u′·r))·2^−bias
    const VT sdu = sc * du2;
    const VT Er = E * r;
    const VT above = r + ((sdu * Er) * r) * K::scale_down;
    const VT below = (Er * (T(1) - sdu * r)) * K::scale_down;
    const VT d = select_by(negative, below, above);
    const VU is_nan = U{0} - ((C::inf_bits - (ix & C::abs_mask)) >> (sizeof(U) * 8 - 1));
    return select_by(is_nan, x, d);
  }
}

/// gelu_tanh_vec on one number, in a whole register (the array loop's bits).
template <class T, bool Slope>
[[nodiscard]] inline T gelu_tanh(T x) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  const vec<T, L> v = x - vec<T, L>{};
  return gelu_tanh_vec<T, L, Slope>(v)[0];
}

/// y[i] = GELU(x[i]) (Slope false) or dy[i]·GELU′(x[i]), added to y[i] when Accumulate (Slope
/// true; dy may be y) for i < n, the erf form or (Tanh) the tanh form: whole vectors, then the
/// rest as one padded vector. y may be x.
template <class T, bool Slope, bool Accumulate = false, bool Tanh = false>
inline void gelu_erf_array(const T* x, const T* dy, T* y, std::size_t n) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  using VT = vec<T, L>;
  const auto one = [&](VT v, VT g, VT prev) {
    VT r;
    if constexpr (Tanh) {
      r = gelu_tanh_vec<T, L, Slope>(v);
    } else {
      r = gelu_erf_vec<T, L, Slope>(v);
    }
    if constexpr (Slope) {
      r = g * r;
      if constexpr (Accumulate) r = prev + r;
    }
    return r;
  };
  std::size_t i = 0;
  for (; i + L <= n; i += L) {
    VT g{}, prev{};
    if constexpr (Slope) g = load<T, L>(dy + i);
    if constexpr (Accumulate) prev = load<T, L>(y + i);
    const VT r = one(load<T, L>(x + i), g, prev);
    std::memcpy(y + i, &r, sizeof r);
  }
  if (i < n) {
    const std::size_t rest = n - i;
    VT v{}, g{}, prev{};
    for (std::size_t k = 0; k < rest; ++k) {
      v[k] = x[i + k];
      if constexpr (Slope) g[k] = dy[i + k];
      if constexpr (Accumulate) prev[k] = y[i + k];
    }
    const VT r = one(v, g, prev);
    for (std::size_t k = 0; k < rest; ++k) y[i + k] = r[k];
  }
}

#endif  // ATTN_VECTOR_EXTENSIONS

}  // namespace attn::detail
