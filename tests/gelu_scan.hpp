#pragma once
// The scan of every float of GELU (erf) and its slope (attn/activations.hpp on
// detail/erfc.hpp), shared by tests/test_activations.cpp and, under -ffast-math,
// tests/test_fastmath.cpp: through the public loops (activate and activation_backward on a row
// of 4096 floats), against long double, with the scalar functions checked for the same bits.
//
// What must hold, by the bits of x:
//   * NaN: NaN, value and slope (not under -ffast-math, which assumes no NaN);
//   * |x| ≥ 15 (±inf included): GELU is x (x > 0) or 0 (−0 without -ffast-math), its slope 1 or
//     0: 1 − Φ(15) is 3.7e−51 and 15·Φ(−15) 5.5e−50, both far below half of float's least
//     subnormal, so these are the correctly rounded values;
//   * elsewhere |GELU − ref| ≤ value_ulps·ulp(ref) and |GELU′ − ref′| ≤ slope_ulps·ulp(Φ + |x|φ):
//     the slope's bound is on the magnitude of its two terms, which cancel near x = −0.75 where
//     the slope is 0 (the slope's condition is unbounded there; its absolute error is not).
//     ulp(r) is 2^(max(e, −126) − 23) for r in [2^e, 2^(e+1)): subnormal results count in
//     float's least subnormal.
// The reference: for |x| < 2^−6, Φ(x) = ½ + φ(0)(x − x³/6 + x⁵/40 − x⁷/336 + x⁹/3456) (the next
// term, x¹¹/42240, is below 2^−80 of the sum there) and φ by its series likewise; above,
// erfc and exp in long double (64-bit significands: 2^−63 relative, 2^40 times finer than float's
// ulp).
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "attn/attn.hpp"
#include "float_scan.hpp"

namespace attn_test {

struct gelu_scan {
  double max_err = 0;  // the value's, in ulps
  std::uint32_t worst = 0;
  double max_err_slope = 0;
  std::uint32_t worst_slope = 0;
  std::uint64_t failures = 0;
  std::uint32_t first_failure = 0;
  std::uint64_t checked = 0;
  std::uint64_t compared = 0;  // against the reference (|x| < 15, finite)
  std::uint64_t differ = 0;    // scalar activate / activation_derivative != the loops', bit for bit
  void merge(const gelu_scan& s) {
    merge_worst(*this, s);
    if (s.max_err_slope > max_err_slope) {
      max_err_slope = s.max_err_slope;
      worst_slope = s.worst_slope;
    }
    compared += s.compared;
    differ += s.differ;
  }
};

struct gelu_scan_args {
  double value_ulps, slope_ulps;
  bool nan_and_signed_zero;  // checked (false under -ffast-math)
};

inline long double gelu_float_ulp(long double r) {
  const long double a = std::fabs(r);
  const int e = a == 0 ? -126 : std::ilogb(a);
  return std::ldexp(1.0L, (e < -126 ? -126 : e) - 23);
}

// Φ(x) and φ(x) in long double.
struct normal_ref {
  long double cdf, pdf;
};
inline normal_ref normal_at(long double x) {
  constexpr long double inv_sqrt_2pi = 0.398942280401432677939946059934381868L;
  if (std::fabs(x) < 0x1p-6L) {
    const long double x2 = x * x;
    const long double odd = x * (1 - x2 / 6 * (1 - x2 * (6.0L / 40) * (1 - x2 * (40.0L / 336) * (1 - x2 * (336.0L / 3456)))));
    const long double pdf = inv_sqrt_2pi * (1 - x2 / 2 * (1 - x2 / 4 * (1 - x2 / 6 * (1 - x2 / 8))));
    return {0.5L + inv_sqrt_2pi * odd, pdf};
  }
  return {0.5L * std::erfc(-x / std::sqrt(2.0L)), inv_sqrt_2pi * std::exp(-x * x / 2)};
}

// Blocks first, first + stride, ... of the 2^32 / 4096 bit patterns.
inline void scan_gelu_floats(std::uint64_t first, std::uint64_t stride, gelu_scan_args args, gelu_scan& result) {
  gelu_scan out;
  std::vector<float> x(scan_block), y(scan_block), d(scan_block), ones(scan_block, 1.0F);
  const attn::MatrixView<const float> X(x.data(), 1, scan_block), G(ones.data(), 1, scan_block);
  const attn::MatrixView<float> Y(y.data(), 1, scan_block), D(d.data(), 1, scan_block);
  std::uint64_t visit = 0;
  for (std::uint64_t blk = first; blk < n_scan_blocks; blk += stride, ++visit) {
    const auto base = static_cast<std::uint32_t>(blk * scan_block);
    for (std::size_t i = 0; i < scan_block; ++i) x[i] = std::bit_cast<float>(base + static_cast<std::uint32_t>(i));
    attn::activate(attn::activation::gelu, X, Y);
    attn::activation_backward(attn::activation::gelu, X, G, D);
    out.checked += scan_block;
    if (visit % 4 == 0)
      for (std::size_t i = 0; i < scan_block; ++i)
        out.differ += static_cast<std::uint64_t>(
            std::bit_cast<std::uint32_t>(attn::activate(attn::activation::gelu, x[i])) != std::bit_cast<std::uint32_t>(y[i]) ||
            std::bit_cast<std::uint32_t>(attn::activation_derivative(attn::activation::gelu, x[i])) !=
                std::bit_cast<std::uint32_t>(d[i]));
    for (std::size_t i = 0; i < scan_block; ++i) {
      const std::uint32_t b = base + static_cast<std::uint32_t>(i);
      const std::uint32_t a = b & 0x7fffffffU;
      const bool negative = (b >> 31U) != 0;
      bool ok = true;
      if (a > 0x7f800000U) {
        if (!args.nan_and_signed_zero) continue;
        ok = std::isnan(y[i]) && std::isnan(d[i]);
      } else if (a >= 0x41700000U) {  // |x| ≥ 15
        ok = negative ? y[i] == 0 && d[i] == 0 && (!args.nan_and_signed_zero || std::signbit(y[i]))
                      : y[i] == x[i] && d[i] == 1;
      } else {
        ++out.compared;
        const long double X1 = x[i];
        const normal_ref n = normal_at(X1);
        const long double ref = X1 * n.cdf, ref_slope = n.cdf + X1 * n.pdf;
        const double err = static_cast<double>(std::fabs(y[i] - ref) / gelu_float_ulp(ref));
        const double err_slope =
            static_cast<double>(std::fabs(d[i] - ref_slope) / gelu_float_ulp(n.cdf + std::fabs(X1) * n.pdf));
        // Under -ffast-math (linked with it: FTZ and DAZ) subnormal inputs read as 0 and
        // subnormal intermediates become 0: an absolute error of the least normal float times the
        // factors applied after (x_c, at most 15), so 16·FLT_MIN.
        constexpr long double flushed = 16 * static_cast<long double>(std::numeric_limits<float>::min());
        const bool ftz = !args.nan_and_signed_zero;
        ok = (err <= args.value_ulps || (ftz && std::fabs(y[i] - ref) <= flushed)) &&
             (err_slope <= args.slope_ulps || (ftz && std::fabs(d[i] - ref_slope) <= flushed)) &&
             (!args.nan_and_signed_zero || std::signbit(y[i]) == negative);
        if (ftz && (err > args.value_ulps || err_slope > args.slope_ulps)) continue;  // flushed: not a max
        if (err > out.max_err) {
          out.max_err = err;
          out.worst = b;
        }
        if (err_slope > out.max_err_slope) {
          out.max_err_slope = err_slope;
          out.worst_slope = b;
        }
      }
      if (!ok && out.failures++ == 0) out.first_failure = b;
    }
  }
  result = out;
}

}  // namespace attn_test
