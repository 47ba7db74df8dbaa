// attn::detail::exp (and attn::detail::tanh, built on it) under -ffast-math. This file must be compiled with -ffast-math (GCC and
// clang; CMake builds it as its own executable, attn_exp_fastmath_tests: inline functions
// compiled with different flags must not meet in one binary). There the compiler assumes that
// no value is a NaN or an infinity, so every check below looks at bits, never at x != x or
// std::isnan / std::isinf, which it folds to constants; the implementation finds its special
// cases in the bits for the same reason. Bound: 8 ulp (measured with g++ and clang: float
// 1.17, or 0.89 with FMA; double 1.8; long double 2 against libm's expl).
// If the program also runs with flush-to-zero (linking with -ffast-math sets FTZ/DAZ on x86),
// results below the smallest normal number may be +0.

#include <attn/detail/exp.hpp>
#include <attn/detail/tanh.hpp>

// Catch2 v3 or v2.13: the one CMake linked (ATTN_CATCH2_MAJOR), else the one installed.
#if defined(ATTN_CATCH2_MAJOR) ? ATTN_CATCH2_MAJOR >= 3 : __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_message.hpp>
#include <catch2/catch_test_macros.hpp>
#else
#include <catch2/catch.hpp>
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <math.h>  // ::exp, ::expl: the references, called through pointers (see below)
#include <random>
#include <vector>

#include "float_scan.hpp"


namespace {

namespace ad = attn::detail;

constexpr double bound = 8.0;

// The references: the C library's exp and expl, called through volatile pointers. Under
// -ffast-math GCC expands std::exp(long double) inline with x87 f2xm1/fscale, which is off by
// hundreds of ulp, and std::exp(double) into libmvec calls; a call through a pointer it cannot
// see through reaches libm's own functions (each within an ulp of e^x).
double (*volatile ref_exp)(double) = &::exp;
long double (*volatile ref_expl)(long double) = &::expl;
double (*volatile ref_tanh)(double) = &::tanh;
long double (*volatile ref_tanhl)(long double) = &::tanhl;

static_assert(ad::exp(0.0F) == 1.0F && ad::exp(0.0) == 1.0 && ad::exp(0.0L) == 1.0L);
static_assert(ad::exp(1.0) - 2.718281828459045 < 0x1p-50 &&
              2.718281828459045 - ad::exp(1.0) < 0x1p-50);

// True when the FPU flushes subnormal results to zero (MXCSR.FTZ, set by crtfastmath.o when the
// program is linked with -ffast-math).
bool flushes_to_zero() {
  volatile float tiny = 0x1p-126F;
  const float half = tiny * 0.5F;
  return std::bit_cast<std::uint32_t>(half) == 0;
}

// Bits of float and double.
template <class T>
struct bits_of;
template <>
struct bits_of<float> {
  using type = std::uint32_t;
  static constexpr type abs = 0x7fffffffU;
  static constexpr type inf = 0x7f800000U;
};
template <>
struct bits_of<double> {
  using type = std::uint64_t;
  static constexpr type abs = 0x7fffffffffffffffULL;
  static constexpr type inf = 0x7ff0000000000000ULL;
};

template <class T>
bool is_nan(T v) {
  if constexpr (sizeof(T) <= 8) {
    using B = bits_of<T>;
    return (std::bit_cast<typename B::type>(v) & B::abs) > B::inf;
  } else {
    return ad::exp_classify(v) == ad::exp_class::nan;  // reads the bytes at run time
  }
}
template <class T>
bool is_pos_inf(T v) {
  if constexpr (sizeof(T) <= 8) {
    return std::bit_cast<typename bits_of<T>::type>(v) == bits_of<T>::inf;
  } else {
    return ad::exp_classify(v) == ad::exp_class::pos_inf;
  }
}
template <class T>
bool is_pos_zero(T v) {
  if constexpr (sizeof(T) <= 8) {
    return std::bit_cast<typename bits_of<T>::type>(v) == 0;
  } else {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    return std::all_of(b, b + 10, [](unsigned char c) { return c == 0; });  // x87: 10 value bytes
  }
}

// a and b have the same value bits. (Under -ffast-math, `y == 1` may be compiled as
// `y - 1 == 0` and that, with y = 1 + q reassociated, as `q == 0`.)
template <class T>
bool same(T a, T b) {
  unsigned char ba[sizeof(T)];
  unsigned char bb[sizeof(T)];
  std::memcpy(ba, &a, sizeof(T));
  std::memcpy(bb, &b, sizeof(T));
  return std::memcmp(ba, bb, sizeof(T) == 16 ? 10 : sizeof(T)) == 0;  // x87: 10 value bytes
}

// |y - ref| in ulps of T at ref, y finite (ref > 0 in the wider type W).
template <class T, class W>
double ulp_error(T y, W ref) {
  using L = std::numeric_limits<T>;
  const int e = std::max(std::ilogb(ref), L::min_exponent - 1);
  return static_cast<double>(std::fabs(static_cast<W>(y) - ref) /
                             std::ldexp(W{1}, e - (L::digits - 1)));
}

// ---------------------------------------------------------------------------------------------
// Every float.
// ---------------------------------------------------------------------------------------------
using attn_test::classify_exp;
using attn_test::exp_exact_result;
using attn_test::exp_kind;
using attn_test::f_max_finite_x;
using attn_test::f_min_nonzero_x;
using attn_test::float_ulp_error;

struct float_scan {
  double max_err = 0;
  std::uint32_t worst = 0;
  std::uint64_t failures = 0;
  std::uint32_t first_failure = 0;
  std::uint64_t checked = 0;
  void merge(const float_scan& s) { attn_test::merge_worst(*this, s); }
};

constexpr std::size_t block = attn_test::scan_block;


void scan_floats(std::uint64_t first, std::uint64_t stride, bool ftz, float_scan& result) {
  float_scan out;
  std::vector<float> x(block);
  std::vector<float> y(block);
  std::vector<double> ref(block);
  for (std::uint64_t blk = first; blk < (std::uint64_t{1} << 32U) / block; blk += stride) {
    const auto base = static_cast<std::uint32_t>(blk * block);
    for (std::size_t i = 0; i < block; ++i)
      x[i] = std::bit_cast<float>(base + static_cast<std::uint32_t>(i));
    std::copy(x.begin(), x.end(), y.begin());
    ad::exp_inplace(y.data(), block);
    out.checked += block;
    const exp_kind k0 = classify_exp(base);
    if (k0 != exp_kind::general && k0 == classify_exp(base + static_cast<std::uint32_t>(block - 1))) {
      std::uint32_t bad = 0;  // a uniform block with an exact expected result
      for (std::size_t i = 0; i < block; ++i)
        bad |= static_cast<std::uint32_t>(!exp_exact_result(k0, std::bit_cast<std::uint32_t>(y[i])));
      if (bad == 0) continue;
    }
    for (std::size_t i = 0; i < block; ++i) ref[i] = ref_exp(static_cast<double>(x[i]));
    for (std::size_t i = 0; i < block; ++i) {
      const std::uint32_t b = base + static_cast<std::uint32_t>(i);
      const auto yb = std::bit_cast<std::uint32_t>(y[i]);
      const exp_kind k = classify_exp(b);
      bool ok = false;
      if (k != exp_kind::general) {
        ok = exp_exact_result(k, yb);
      } else if ((yb & 0x7f800000U) == 0x7f800000U) {
        ok = false;  // inf or NaN where e^x is finite and nonzero
      } else if (ftz && yb == 0 && ref[i] < 0x1p-126 * (1 + 0x1p-20)) {
        ok = true;  // flushed to zero
      } else {
        const double err = float_ulp_error(y[i], ref[i]);
        ok = err <= bound;
        if (err > out.max_err) {
          out.max_err = err;
          out.worst = b;
        }
      }
      if (!ok && out.failures++ == 0) out.first_failure = b;
    }
  }
  result = out;
}

// ---------------------------------------------------------------------------------------------
// Sampled double and long double.
// ---------------------------------------------------------------------------------------------
template <class T>
struct sample_stats {
  double max_err = 0;
  T worst = 0;
  std::size_t failures = 0;
  T first_failure = 0;
};

template <class T>
std::vector<T> sample_inputs(std::size_t n, T x_lo, T x_hi) {
  std::mt19937_64 gen(7);
  std::vector<T> xs;
  std::uniform_real_distribution<T> wide(x_lo, x_hi);
  std::uniform_real_distribution<T> unit(-1, 1);
  for (std::size_t i = 0; i < n; ++i) xs.push_back(wide(gen));
  for (std::size_t i = 0; i < n / 2; ++i) xs.push_back(unit(gen));
  T a = x_lo;
  T b = x_hi;
  for (int i = 0; i < 1000; ++i) {  // the ends of the finite-result range
    xs.push_back(a);
    xs.push_back(b);
    a = std::nextafter(a, T{0});
    b = std::nextafter(b, T{0});
  }
  return xs;
}

// x within [x_lo, x_hi], where e^x is finite and not 0 in T.
template <class T>
sample_stats<T> check_samples(const std::vector<T>& xs, bool ftz) {
  using L = std::numeric_limits<T>;
  std::vector<T> ys(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) ys[i] = ad::exp(xs[i]);
  sample_stats<T> st;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const long double ref = ref_expl(static_cast<long double>(xs[i]));
    const T y = ys[i];
    bool ok = false;
    if (is_nan(y) || is_pos_inf(y)) {
      ok = false;
    } else if (ftz && sizeof(T) <= 8 && is_pos_zero(y) &&
               ref < static_cast<long double>(L::min())) {
      ok = true;
    } else {
      const double err = ulp_error(y, ref);
      ok = err <= bound;
      if (err > st.max_err) {
        st.max_err = err;
        st.worst = xs[i];
      }
    }
    if (!ok && st.failures++ == 0) st.first_failure = xs[i];
  }
  return st;
}

template <class T>
void check_special_cases() {
  using L = std::numeric_limits<T>;
  CHECK(same(ad::exp(T{0}), T{1}));
  CHECK(same(ad::exp(-T{0}), T{1}));
  CHECK(same(ad::exp(L::denorm_min()), T{1}));
  CHECK(same(ad::exp(-L::denorm_min()), T{1}));
  CHECK(is_nan(ad::exp(L::quiet_NaN())));
  CHECK(is_nan(ad::exp(-L::quiet_NaN())));
  CHECK(is_nan(ad::exp(L::signaling_NaN())));
  CHECK(is_pos_inf(ad::exp(L::infinity())));
  CHECK(is_pos_zero(ad::exp(-L::infinity())));
  CHECK(is_pos_inf(ad::exp(L::max())));
  CHECK(is_pos_zero(ad::exp(L::lowest())));
  CHECK(is_pos_inf(ad::exp(T{100000})));
  CHECK(is_pos_zero(ad::exp(T{-100000})));
  // Values read at run time, so that nothing is folded at compile time.
  std::vector<T> v = {L::quiet_NaN(), L::infinity(), -L::infinity(), T{0}, T{1}, T{-1}};
  for (T& e : v) e = ad::exp(e);
  CHECK(is_nan(v[0]));
  CHECK(is_pos_inf(v[1]));
  CHECK(is_pos_zero(v[2]));
  CHECK(same(v[3], T{1}));
  CHECK(ulp_error(v[4], ref_expl(1.0L)) <= bound);
  CHECK(ulp_error(v[5], ref_expl(-1.0L)) <= bound);
}

}  // namespace

TEST_CASE("exp fast-math: this file is compiled with -ffast-math", "[exp][fastmath]") {
#if defined(__GNUC__) && !defined(__FAST_MATH__)
  FAIL("tests/test_exp_fastmath.cpp must be compiled with -ffast-math");
#endif
  SUCCEED();
}

namespace {
void check_scan(const float_scan& all, bool ftz, std::uint64_t spread, std::size_t n_extra) {
  INFO("flush to zero: " << ftz << "; " << attn_test::scan_summary(all));
  constexpr std::uint64_t n_blocks = attn_test::n_scan_blocks;
  CHECK(all.checked == ((n_blocks + spread - 1) / spread + n_extra) * block);
  CHECK(all.failures == 0);
  CHECK(all.max_err <= bound);
}
}  // namespace

// Hidden, CTest label `exhaustive` (as in tests/test_exp.cpp); the sampled scan below runs by
// default.
TEST_CASE("exp fast-math: every float within 8 ulp, specials exact",
          "[.][exhaustive][exp][fastmath]") {
  constexpr std::uint64_t spread = attn_test::every_float_spread;
  const bool ftz = flushes_to_zero();
  check_scan(attn_test::scan_on_two_threads<float_scan>(scan_floats, spread, ftz), ftz, spread, 0);
}

TEST_CASE("exp fast-math: every 64th block of floats, and every block at a change of kind",
          "[exp][fastmath]") {
  constexpr std::uint64_t spread = attn_test::sampled_spread;
  const bool ftz = flushes_to_zero();
  const auto extra = attn_test::boundary_blocks(classify_exp, spread);
  CHECK(extra.size() >= 8);
  check_scan(attn_test::scan_sampled<float_scan>(scan_floats, spread, ftz, extra), ftz, spread,
             extra.size());
}

TEST_CASE("exp fast-math: double and long double within 8 ulp", "[exp][fastmath]") {
  const bool ftz = flushes_to_zero();
  {
    const double lo = std::bit_cast<double>(0xc0874910d52d3051ULL);
    const double hi = std::bit_cast<double>(0x40862e42fefa39efULL);
    const auto st = check_samples(sample_inputs<double>(1000000, lo, hi), ftz);
    INFO("double: max error " << st.max_err << " ulp at " << st.worst << "; " << st.failures
                              << " failures, the first at " << st.first_failure);
    CHECK(st.failures == 0);
  }
  {
    using L = std::numeric_limits<long double>;
    const long double lo = std::log(L::denorm_min()) + 0.01L;
    const long double hi = std::log(L::max()) - 0.01L;
    const auto st = check_samples(sample_inputs<long double>(200000, lo, hi), ftz);
    INFO("long double: max error " << st.max_err << " ulp at " << static_cast<double>(st.worst)
                                   << "; " << st.failures << " failures, the first at "
                                   << static_cast<double>(st.first_failure));
    CHECK(st.failures == 0);
  }
}

TEST_CASE("exp fast-math: special cases", "[exp][fastmath]") {
  SECTION("float") { check_special_cases<float>(); }
  SECTION("double") { check_special_cases<double>(); }
  SECTION("long double") { check_special_cases<long double>(); }
  SECTION("thresholds") {
    CHECK(!is_pos_inf(ad::exp(std::bit_cast<float>(f_max_finite_x))));
    CHECK(is_pos_inf(ad::exp(std::bit_cast<float>(f_max_finite_x + 1))));
    CHECK(is_pos_zero(ad::exp(std::bit_cast<float>(f_min_nonzero_x + 1))));
    CHECK(!is_pos_inf(ad::exp(std::bit_cast<double>(0x40862e42fefa39efULL))));
    CHECK(is_pos_inf(ad::exp(std::bit_cast<double>(0x40862e42fefa39f0ULL))));
    CHECK(is_pos_zero(ad::exp(std::bit_cast<double>(0xc0874910d52d3052ULL))));
    if (!flushes_to_zero()) {
      CHECK(same(ad::exp(std::bit_cast<float>(f_min_nonzero_x)),
                 std::numeric_limits<float>::denorm_min()));
      CHECK(same(ad::exp(std::bit_cast<double>(0xc0874910d52d3051ULL)),
                 std::numeric_limits<double>::denorm_min()));
    }
  }
}

TEST_CASE("tanh fast-math: floats and doubles within 8 ulp, specials exact", "[exp][tanh][fastmath]") {
  // Every 31st float of [-10, 10] (beyond, tanh is ±1 exactly) through tanh_array, the vector
  // path, and every 64th through the scalar tanh as well; measured 1.66 ulp with g++ (1.1
  // without -ffast-math). (Here the two may differ in the last bits: the compiler reassociates
  // the scalar and the vector arithmetic each its own way.)
  std::vector<float> x;
  for (std::uint32_t b = 0; b < 0x41200000U; b += 31) {
    x.push_back(std::bit_cast<float>(b));
    x.push_back(std::bit_cast<float>(b | 0x80000000U));
  }
  std::vector<float> y(x.size());
  ad::tanh_array(x.data(), y.data(), x.size());
  const bool ftz = flushes_to_zero();
  std::size_t failures = 0;
  std::size_t scalar_failures = 0;
  double max_err = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto xb = std::bit_cast<std::uint32_t>(x[i]);
    const auto yb = std::bit_cast<std::uint32_t>(y[i]);
    if ((xb & 0x7fffffffU) < 0x00800000U) {  // subnormal or zero: x itself, or ±0 under DAZ
      if (yb != xb && !(ftz && (yb & 0x7fffffffU) == 0)) ++failures;
      continue;
    }
    const double ref = ref_tanh(static_cast<double>(x[i]));
    const double err = ulp_error(std::fabs(y[i]), std::fabs(ref));
    max_err = std::max(max_err, err);
    if ((yb >> 31U) != (xb >> 31U) || !(err <= bound)) ++failures;
    if (i % 64 == 0) {
      const float ys = ad::tanh(x[i]);
      if ((std::bit_cast<std::uint32_t>(ys) >> 31U) != (xb >> 31U) ||
          !(ulp_error(std::fabs(ys), std::fabs(ref)) <= bound))
        ++scalar_failures;
    }
  }
  INFO("float: max error " << max_err << " ulp; " << failures << " failures");
  CHECK(failures == 0);
  CHECK(scalar_failures == 0);
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> u(-22, 22);
  double max_err_d = 0;
  for (int i = 0; i < 200000; ++i) {
    const double xd = u(gen);
    const double yd = ad::tanh(xd);
    max_err_d = std::max(max_err_d, ulp_error(std::fabs(yd), std::fabs(ref_tanhl(static_cast<long double>(xd)))));
  }
  INFO("double: max error " << max_err_d << " ulp");
  CHECK(max_err_d <= bound);
  // Specials, read at run time and checked on the bits.
  std::vector<float> sf = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), -0.0F, 1e30F};
  ad::tanh_array(sf.data(), sf.data(), sf.size());
  CHECK(is_nan(sf[0]));
  CHECK(same(sf[1], 1.0F));
  CHECK(same(sf[2], -1.0F));
  CHECK(std::bit_cast<std::uint32_t>(sf[3]) == 0x80000000U);
  CHECK(same(sf[4], 1.0F));
  std::vector<double> sd = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(), -0.0, -1e300};
  ad::tanh_array(sd.data(), sd.data(), sd.size());
  CHECK(is_nan(sd[0]));
  CHECK(same(sd[1], 1.0));
  CHECK(same(sd[2], -1.0));
  CHECK(std::bit_cast<std::uint64_t>(sd[3]) == 0x8000000000000000ULL);
  CHECK(same(sd[4], -1.0));
  CHECK(is_nan(ad::tanh(sd[0] + 0.0)));
}
