// Tests of attn::detail::exp (include/attn/detail/exp.hpp): every float (all 2^32 bit
// patterns), a few million doubles and a million long doubles against the C library's exp in a
// wider type, the special cases, and constant evaluation; then the same for attn::detail::tanh
// (include/attn/detail/tanh.hpp), which is built on exp. Builds with the project's ordinary
// flags; tests/test_exp_fastmath.cpp repeats the checks under -ffast-math in its own executable.

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
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "float_scan.hpp"


namespace {

namespace ad = attn::detail;

// ---------------------------------------------------------------------------------------------
// Constant evaluation (clang's std::exp is not constexpr; attn's softmax static_asserts on this).
// ---------------------------------------------------------------------------------------------
constexpr double inf_d = std::numeric_limits<double>::infinity();
constexpr float inf_f = std::numeric_limits<float>::infinity();
constexpr long double inf_ld = std::numeric_limits<long double>::infinity();

template <class T>
constexpr bool within(T got, T want, T tol) {
  return got - want <= tol && want - got <= tol;
}

static_assert(ad::exp(0.0F) == 1.0F);
static_assert(ad::exp(-0.0F) == 1.0F);
static_assert(ad::exp(0.0) == 1.0);
static_assert(ad::exp(-0.0) == 1.0);
static_assert(ad::exp(0.0L) == 1.0L);
static_assert(ad::exp(-0.0L) == 1.0L);
static_assert(within(ad::exp(1.0), 2.718281828459045, 0x1p-51));     // 1 ulp of e
static_assert(within(ad::exp(-1.0), 0.36787944117144233, 0x1p-54));  // 1 ulp of 1/e
static_assert(within(ad::exp(1.0F), 2.71828183F, 0x1p-22F));         // 1 ulp
static_assert(within(ad::exp(10.0F), 22026.4658F, 0x1p-9F));         // 1 ulp
static_assert(within(ad::exp(1.0L), 2.71828182845904523536028747135266250L, 0x1p-61L));  // 2 ulp
static_assert(ad::exp(inf_d) == inf_d && ad::exp(inf_f) == inf_f && ad::exp(inf_ld) == inf_ld);
static_assert(std::bit_cast<std::uint64_t>(ad::exp(-inf_d)) == 0);  // +0, not -0
static_assert(std::bit_cast<std::uint32_t>(ad::exp(-inf_f)) == 0);
static_assert(ad::exp(-inf_ld) == 0.0L);
static_assert((std::bit_cast<std::uint64_t>(ad::exp(std::numeric_limits<double>::quiet_NaN())) &
               0x7fffffffffffffffULL) > 0x7ff0000000000000ULL);
static_assert((std::bit_cast<std::uint32_t>(ad::exp(std::numeric_limits<float>::signaling_NaN())) &
               0x7fffffffU) > 0x7f800000U);
static_assert(ad::exp(710.0) == inf_d && ad::exp(89.0F) == inf_f && ad::exp(11357.0L) == inf_ld);
static_assert(ad::exp(-746.0) == 0.0 && ad::exp(-104.0F) == 0.0F && ad::exp(-11400.0L) == 0.0L);
static_assert(ad::exp(-745.0) == 0x1p-1074);   // e^-745 = 0.57 * 2^-1074: the smallest subnormal
static_assert(ad::exp(-103.9F) == 0x1p-149F);  // e^-103.9 = 0.54 * 2^-149
static_assert(ad::exp(-11398.0L) > 0.0L &&
              ad::exp(-11398.0L) < std::numeric_limits<long double>::min());

// A constant-evaluated softmax over exp_inplace.
constexpr bool softmax_sums_to_one() {
  std::array<double, 19> v{};
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * static_cast<double>(i) - 9.0;
  const double max = v.back();
  for (double& e : v) e -= max;
  ad::exp_inplace(v.data(), v.size());
  double sum = 0;
  for (const double e : v) sum += e;
  return v.back() == 1.0 && within(sum, 2.541303847054071642, 1e-14);  // sum_{j<19} e^(-j/2)
}
static_assert(softmax_sums_to_one());

// ---------------------------------------------------------------------------------------------
// Exhaustive float test.
// ---------------------------------------------------------------------------------------------

using attn_test::every_float_spread;
using attn_test::f_max_finite_x;
using attn_test::f_min_nonzero_x;
using attn_test::classify_exp;
using attn_test::exp_kind;
using attn_test::float_ulp_error;
using attn_test::merge_worst;
using attn_test::scan_on_two_threads;
using attn_test::scan_summary;

struct float_scan {
  double max_err = 0;          // max ulp error over the `general` inputs
  std::uint32_t worst = 0;     // the x (bits) where it is
  std::uint64_t failures = 0;  // results outside the bound (or not the exact special result)
  std::uint32_t first_failure = 0;
  std::uint64_t checked = 0;   // inputs checked
  std::uint64_t compared = 0;  // of which compared with the reference
  std::uint64_t differ = 0;    // results of exp_inplace (the vector path) != the plain loop's
  /// Adds another thread's scan: the larger error, the first failure, the sums.
  void merge(const float_scan& s) {
    merge_worst(*this, s);
    compared += s.compared;
    differ += s.differ;
  }
};

constexpr std::size_t block = attn_test::scan_block;

bool block_ok(const std::uint32_t* yb, exp_kind k) {
  if (k == exp_kind::general) return false;
  std::uint32_t bad = 0;  // one branch-free loop over the whole block (it vectorizes)
  for (std::size_t i = 0; i < block; ++i)
    bad |= static_cast<std::uint32_t>(!attn_test::exp_exact_result(k, yb[i]));
  return bad == 0;
}

// Checks the blocks first, first + stride, ... of the 2^32 / 4096 blocks of bit patterns.
void scan_floats(std::uint64_t first, std::uint64_t stride, double bound, float_scan& result) {
  float_scan out;  // a local: the two threads' results would share a cache line
  std::vector<float> x(block);
  std::vector<float> y(block);
  std::vector<float> yv(block);
  std::vector<std::uint32_t> yb(block);
  std::vector<double> ref(block);
  for (std::uint64_t blk = first; blk < (std::uint64_t{1} << 32U) / block; blk += stride) {
    const auto base = static_cast<std::uint32_t>(blk * block);
    for (std::size_t i = 0; i < block; ++i)
      x[i] = std::bit_cast<float>(base + static_cast<std::uint32_t>(i));
    // exp_inplace_plain, because GCC -O2 vectorizes its loop (a plain y[i] = exp(x[i]) only at
    // -O3); "exp_inplace agrees with exp" checks that the two give the same bits. And exp_array
    // (the vector path every softmax takes) must give those bits too, for every float.
    std::copy(x.begin(), x.end(), y.begin());
    ad::exp_inplace_plain(y.data(), block);
    ad::exp_array(x.data(), yv.data(), block);
    std::uint32_t d = 0;
    for (std::size_t i = 0; i < block; ++i) {
      yb[i] = std::bit_cast<std::uint32_t>(y[i]);
      d += static_cast<std::uint32_t>(yb[i] != std::bit_cast<std::uint32_t>(yv[i]));
    }
    out.differ += d;
    out.checked += block;
    const exp_kind k0 = classify_exp(base);
    if (k0 == classify_exp(base + static_cast<std::uint32_t>(block - 1)) && block_ok(yb.data(), k0))
      continue;
    for (std::size_t i = 0; i < block; ++i) ref[i] = std::exp(static_cast<double>(x[i]));
    for (std::size_t i = 0; i < block; ++i) {
      const std::uint32_t b = base + static_cast<std::uint32_t>(i);
      bool ok = false;
      switch (classify_exp(b)) {
      case exp_kind::one:
        ok = yb[i] == 0x3f800000U;
        break;
      case exp_kind::pos_inf:
        ok = yb[i] == 0x7f800000U;
        break;
      case exp_kind::zero:
        ok = yb[i] == 0U;
        break;
      case exp_kind::nan:
        ok = (yb[i] & 0x7fffffffU) > 0x7f800000U;
        break;
      case exp_kind::general: {
        ++out.compared;
        const double err = float_ulp_error(y[i], ref[i]);
        ok = (yb[i] & 0x7f800000U) != 0x7f800000U && err <= bound;
        if (err > out.max_err) {
          out.max_err = err;
          out.worst = b;
        }
        break;
      }
      }
      if (!ok && out.failures++ == 0) out.first_failure = b;
    }
  }
  result = out;
}

// ---------------------------------------------------------------------------------------------
// Sampled double and long double tests.
// ---------------------------------------------------------------------------------------------

template <class T>
struct sample_stats {
  double max_err = 0;
  T worst = 0;
  std::size_t failures = 0;
  T first_failure = 0;
  std::size_t differ_from_array = 0;  // exp_array's results that are not exp's, bit for bit
};

// |y - ref| in ulps of T at ref (ref in the wider type W; subnormals share the smallest ulp; an
// infinite y counts as 2^max_exponent).
template <class T, class W>
double ulp_error_wide(T y, W ref) {
  using L = std::numeric_limits<T>;
  if (ref == 0)
    return static_cast<double>(std::fabs(static_cast<W>(y)) /
                               std::ldexp(W{1}, L::min_exponent - L::digits));
  const int e = std::max(std::ilogb(ref), L::min_exponent - 1);
  const W yw = std::isinf(y) ? std::ldexp(W{1}, L::max_exponent) : static_cast<W>(y);
  return static_cast<double>(std::fabs(yw - ref) / std::ldexp(W{1}, e - (L::digits - 1)));
}

template <class T>
void push_around(std::vector<T>& xs, T at, int ulps) {
  T lo = at;
  T hi = at;
  xs.push_back(at);
  for (int i = 0; i < ulps; ++i) {
    lo = std::nextafter(lo, -std::numeric_limits<T>::infinity());
    hi = std::nextafter(hi, std::numeric_limits<T>::infinity());
    xs.push_back(lo);
    xs.push_back(hi);
  }
}

// Inputs: uniform over the finite-result range and a bit beyond, uniform in [-1, 1], random
// magnitudes 2^-80 .. 2^10 of either sign, random bit patterns, and runs of consecutive values
// around the overflow, subnormal and underflow thresholds and around the k = round(x/ln2)
// rounding boundaries (k + 1/2) ln2.
template <class T>
std::vector<T> sample_inputs(std::size_t n_uniform, T x_lo, T x_hi, T sub_x, int near_ulps,
                             int k_step) {
  std::mt19937_64 gen(20240611);
  std::vector<T> xs;
  std::uniform_real_distribution<T> wide(x_lo - 2, x_hi + 2);
  std::uniform_real_distribution<T> unit(-1, 1);
  std::uniform_real_distribution<T> expo(-80, 10);
  for (std::size_t i = 0; i < n_uniform; ++i) xs.push_back(wide(gen));
  for (std::size_t i = 0; i < n_uniform / 2; ++i) xs.push_back(unit(gen));
  for (std::size_t i = 0; i < n_uniform / 4; ++i) {
    const T m = std::exp2(expo(gen));
    xs.push_back((gen() & 1U) != 0 ? m : -m);
  }
  if constexpr (sizeof(T) == 8) {
    for (std::size_t i = 0; i < n_uniform / 4; ++i) xs.push_back(std::bit_cast<T>(gen()));
  }
  for (const T at : {x_hi, x_lo, sub_x, T{0}}) push_around(xs, at, near_ulps);
  const T ln2 = static_cast<T>(0.693147180559945309417232121458176568L);
  for (int k = static_cast<int>(x_lo / ln2) - 1; k < static_cast<int>(x_hi / ln2) + 1; k += k_step)
    push_around(xs, (static_cast<T>(k) + T{0.5}) * ln2, 8);
  return xs;
}

// Every non-NaN result is compared with the reference through ulp_error_wide (which counts
// +inf as 2^max_exponent, so results near the overflow and underflow thresholds are held to
// the same bound), except that +inf is right where e^x rounds to +inf, and where the reference
// itself overflows (T as wide as W) the result must be +inf or within a few ulp of max().
// A zero result must be +0.
template <class T>
sample_stats<T> check_samples(const std::vector<T>& xs, double bound) {
  using W = long double;
  using L = std::numeric_limits<T>;
  std::vector<T> ys(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) ys[i] = ad::exp(xs[i]);  // the loop users write
  sample_stats<T> st;
  // exp_array (the vector path of softmax and attention) gives the same bits.
  std::vector<T> yv(xs.size());
  ad::exp_array(xs.data(), yv.data(), xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i)
    st.differ_from_array += static_cast<std::size_t>(std::memcmp(&ys[i], &yv[i], sizeof(T)) != 0);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const T x = xs[i];
    const T y = ys[i];
    bool ok = false;
    if (std::isnan(x)) {
      ok = std::isnan(y);
    } else if (y == 0 && std::signbit(y)) {
      ok = false;
    } else {
      const W ref = std::exp(static_cast<W>(x));
      // Where e^x rounds to +inf in T: max() + half an ulp (not representable when W is T).
      const W overflow =
          static_cast<W>(L::max()) + std::ldexp(W{1}, L::max_exponent - L::digits - 1);
      if (std::isinf(ref)) {
        ok = y == L::infinity() || (std::isfinite(y) && y >= L::max() * (1 - 4 * L::epsilon()));
      } else if (ref >= overflow && y == L::infinity()) {
        ok = true;
      } else {
        const double err = ulp_error_wide(y, ref);
        ok = err <= bound;
        if (err > st.max_err) {
          st.max_err = err;
          st.worst = x;
        }
      }
    }
    if (!ok && st.failures++ == 0) st.first_failure = x;
  }
  return st;
}

template <class T>
void check_special_cases() {
  using L = std::numeric_limits<T>;
  CHECK(ad::exp(T{0}) == T{1});
  CHECK(ad::exp(-T{0}) == T{1});
  CHECK(ad::exp(L::denorm_min()) == T{1});
  CHECK(ad::exp(-L::denorm_min()) == T{1});
  CHECK(ad::exp(L::min()) == T{1});
  CHECK(ad::exp(L::epsilon() / 4) == T{1});
  CHECK(std::isnan(ad::exp(L::quiet_NaN())));
  CHECK(std::isnan(ad::exp(-L::quiet_NaN())));
  CHECK(std::isnan(ad::exp(L::signaling_NaN())));
  CHECK(ad::exp(L::infinity()) == L::infinity());
  CHECK(ad::exp(-L::infinity()) == T{0});
  CHECK_FALSE(std::signbit(ad::exp(-L::infinity())));
  CHECK(ad::exp(L::max()) == L::infinity());
  CHECK(ad::exp(L::lowest()) == T{0});
  CHECK_FALSE(std::signbit(ad::exp(L::lowest())));
  CHECK(ad::exp(T{1000000}) == L::infinity());
  CHECK(ad::exp(T{-1000000}) == T{0});
  // Gradual underflow: e^x for x in the subnormal range, against the reference.
  const auto ref_of = [](T x) { return std::exp(static_cast<long double>(x)); };
  const T sub_lo = static_cast<T>(std::log(static_cast<long double>(L::denorm_min())));
  const T sub_hi = static_cast<T>(std::log(static_cast<long double>(L::min())));
  for (int i = 1; i < 64; ++i) {
    const T x = sub_lo + (sub_hi - sub_lo) * static_cast<T>(i) / 64;
    const T y = ad::exp(x);
    INFO("x = " << static_cast<double>(x));
    CHECK(y > 0);
    CHECK(y < L::min());
    CHECK(ulp_error_wide(y, ref_of(x)) <= 1.5);
  }
}

}  // namespace

// The scan of every float is a hidden test (CTest label `exhaustive`: CI runs it after the
// quick start, and in the native stage); the sampled scan, with the same checks, runs by default.
namespace {
void check_exp_scan(const float_scan& all, std::uint64_t spread, std::size_t n_extra,
                    double bound) {
  INFO(scan_summary(all));
  constexpr std::uint64_t n_blocks = attn_test::n_scan_blocks;
  CHECK(all.checked == ((n_blocks + spread - 1) / spread + n_extra) * block);
  CHECK(all.compared > 500000000U / spread);  // the rest have exact results
  CHECK(all.failures == 0);
  CHECK(all.max_err <= bound);
  CHECK(all.differ == 0);
}
}  // namespace

TEST_CASE("exp: every float (all 2^32 bit patterns)", "[.][exhaustive][exp]") {
  constexpr std::uint64_t spread = every_float_spread;
  constexpr double bound = 1.5;
  check_exp_scan(scan_on_two_threads<float_scan>(scan_floats, spread, bound), spread, 0, bound);
}

TEST_CASE("exp: every 64th block of floats, and every block at a change of kind", "[exp]") {
  constexpr std::uint64_t spread = attn_test::sampled_spread;
  constexpr double bound = 1.5;
  const auto extra = attn_test::boundary_blocks(classify_exp, spread);
  CHECK(extra.size() >= 8);  // the thresholds, inf and the NaNs, of either sign
  check_exp_scan(attn_test::scan_sampled<float_scan>(scan_floats, spread, bound, extra), spread,
                 extra.size(), bound);
}

TEST_CASE("exp: float thresholds agree with the reference", "[exp]") {
  // The constants that the exhaustive test takes as known.
  const float max_finite = std::bit_cast<float>(f_max_finite_x);
  const float min_nonzero = std::bit_cast<float>(f_min_nonzero_x);
  CHECK(std::isfinite(static_cast<float>(std::exp(static_cast<double>(max_finite)))));
  CHECK(std::isinf(
      static_cast<float>(std::exp(static_cast<double>(std::nextafter(max_finite, 100.0F))))));
  CHECK(static_cast<float>(std::exp(static_cast<double>(min_nonzero))) ==
        std::numeric_limits<float>::denorm_min());
  CHECK(static_cast<float>(std::exp(static_cast<double>(std::nextafter(min_nonzero, -200.0F)))) ==
        0.0F);
  CHECK(std::exp(static_cast<double>(std::bit_cast<float>(0x33000000U))) - 1.0 <=
        0x1p-25 * 1.0000001);
  // And the implementation meets them exactly.
  CHECK(std::isfinite(ad::exp(max_finite)));
  CHECK(std::isinf(ad::exp(std::nextafter(max_finite, 100.0F))));
  CHECK(ad::exp(min_nonzero) == std::numeric_limits<float>::denorm_min());
  CHECK(ad::exp(std::nextafter(min_nonzero, -200.0F)) == 0.0F);
}

TEST_CASE("exp: double within 1 ulp of std::exp(long double)", "[exp]") {
  const double max_finite = std::bit_cast<double>(0x40862e42fefa39efULL);   // 709.78
  const double min_nonzero = std::bit_cast<double>(0xc0874910d52d3051ULL);  // -745.13
  const double sub_x = std::log(std::numeric_limits<double>::min());        // -708.40
  const std::vector<double> xs =
      sample_inputs<double>(2000000, min_nonzero, max_finite, sub_x, 20000, 1);
  const auto st = check_samples(xs, 1.0);
  INFO(xs.size() << " samples; max error " << st.max_err << " ulp at x = " << st.worst << "; "
                 << st.failures << " failures, the first at x = " << st.first_failure);
  CHECK(st.failures == 0);
  CHECK(st.max_err <= 1.0);
  CHECK(st.differ_from_array == 0);
  // The thresholds are exact.
  CHECK(std::isfinite(ad::exp(max_finite)));
  CHECK(std::isinf(ad::exp(std::nextafter(max_finite, 1000.0))));
  CHECK(ad::exp(min_nonzero) == std::numeric_limits<double>::denorm_min());
  CHECK(ad::exp(std::nextafter(min_nonzero, -1000.0)) == 0.0);
  CHECK(std::exp(static_cast<long double>(max_finite)) <
        static_cast<long double>(std::numeric_limits<double>::max()));
  CHECK(std::exp(static_cast<long double>(min_nonzero)) > 0x1p-1075L);
  CHECK(std::exp(static_cast<long double>(std::nextafter(min_nonzero, -1000.0))) < 0x1p-1075L);
}

TEST_CASE("exp: long double within 2.5 ulp of std::exp(long double)", "[exp]") {
  // attn's long double exp is within 1 ulp of e^x (max 0.85 ulp, measured against libquadmath's
  // expq); glibc's expl, the reference here, is itself off by up to ~1.1 ulp.
  using L = std::numeric_limits<long double>;
  const long double x_hi = std::log(L::max());
  const long double sub_x = std::log(L::min());
  const long double x_lo = std::log(L::denorm_min()) - std::log(2.0L);  // e^x = denorm_min / 2
  const std::vector<long double> xs =
      sample_inputs<long double>(400000, x_lo, x_hi, sub_x, 2000, 7);
  const auto st = check_samples(xs, 2.5);
  INFO(xs.size() << " samples; max error " << static_cast<double>(st.max_err)
                 << " ulp at x = " << static_cast<double>(st.worst) << "; " << st.failures
                 << " failures, the first at x = " << static_cast<double>(st.first_failure));
  CHECK(st.failures == 0);
  CHECK(st.max_err <= 2.5);
}

TEST_CASE("exp: special cases", "[exp]") {
  SECTION("float") { check_special_cases<float>(); }
  SECTION("double") { check_special_cases<double>(); }
  SECTION("long double") { check_special_cases<long double>(); }
  SECTION("NaNs of either sign, quiet or signaling, come back NaN") {
    for (const std::uint32_t b : {0x7f800001U, 0x7fc00000U, 0xff800123U, 0xffffffffU})
      CHECK((std::bit_cast<std::uint32_t>(ad::exp(std::bit_cast<float>(b))) & 0x7fffffffU) >
            0x7f800000U);
    for (const std::uint64_t b : {0x7ff0000000000123ULL, 0xfff8000000000000ULL})
      CHECK((std::bit_cast<std::uint64_t>(ad::exp(std::bit_cast<double>(b))) &
             0x7fffffffffffffffULL) > 0x7ff0000000000000ULL);
  }
  SECTION("a few values") {
    CHECK(within(ad::exp(1.0F), 2.71828183F, 0x1p-22F));
    CHECK(within(ad::exp(-1.0F), 0.367879441F, 0x1p-25F));
    CHECK(within(ad::exp(1.0), 2.718281828459045, 0x1p-51));
    CHECK(within(ad::exp(0.5), 1.6487212707001282, 0x1p-52));
    CHECK(within(ad::exp(-20.0), 2.061153622438558e-09, 2.061153622438558e-09 * 0x1p-52));
    CHECK(within(ad::exp(700.0), 1.0142320547350045e304, 1.0142320547350045e304 * 0x1p-52));
  }
  SECTION("exp_inplace agrees with exp, bit for bit, block and tail") {
    std::vector<float> v(100003);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = -110.0F + 0.002F * static_cast<float>(i);
    v[7] = std::numeric_limits<float>::quiet_NaN();
    v[8] = -std::numeric_limits<float>::infinity();
    const std::vector<float> x = v;
    std::vector<float> y(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) y[i] = ad::exp(x[i]);  // the loop users write
    ad::exp_inplace(v.data(), v.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < v.size(); ++i)
      differ += static_cast<std::size_t>(std::bit_cast<std::uint32_t>(v[i]) !=
                                         std::bit_cast<std::uint32_t>(y[i]));
    CHECK(differ == 0);
    std::vector<double> d(1001);
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = -750.0 + 1.46 * static_cast<double>(i);
    const std::vector<double> dx = d;
    ad::exp_inplace(d.data(), d.size());
    for (std::size_t i = 0; i < d.size(); ++i)
      CHECK(std::bit_cast<std::uint64_t>(d[i]) == std::bit_cast<std::uint64_t>(ad::exp(dx[i])));
    ad::exp_inplace(d.data(), 0);
  }
}

// ---------------------------------------------------------------------------------------------
// tanh: constant evaluation, every float, sampled doubles, special cases.
// ---------------------------------------------------------------------------------------------
namespace {

static_assert(std::bit_cast<std::uint32_t>(ad::tanh(0.0F)) == 0U);
static_assert(std::bit_cast<std::uint32_t>(ad::tanh(-0.0F)) == 0x80000000U);
static_assert(std::bit_cast<std::uint64_t>(ad::tanh(-0.0)) == 0x8000000000000000ULL);
static_assert(ad::tanh(inf_f) == 1.0F && ad::tanh(-inf_f) == -1.0F);
static_assert(ad::tanh(inf_d) == 1.0 && ad::tanh(-inf_d) == -1.0);
static_assert(within(ad::tanh(0.5), 0.46211715726000974, 0x1p-54));  // 1 ulp
static_assert(within(ad::tanh(-1.0), -0.76159415595576489, 0x1p-53));
static_assert(within(ad::tanh(1.5F), 0.905148254F, 0x1p-24F));
static_assert(ad::tanh(20.0) == 1.0 && ad::tanh(9.5F) == 1.0F);

// What tanh must give, by the bits of x: exactly x for |x| < 2^-12 (there |tanh x − x| < x³/3
// is under half an ulp of x, so tanh(x) rounds to x: checked by "tanh: float thresholds"),
// exactly ±1 for |x| >= 10 (tanh rounds to 1 from 9.0109 on), a NaN for a NaN, and otherwise
// within the bound of the reference.
enum class tanh_kind { same, general, one, nan };
constexpr std::uint32_t tanh_same_below = 0x39800000U;  // 2^-12
constexpr std::uint32_t tanh_one_from = 0x41200000U;    // 10

constexpr tanh_kind tanh_classify(std::uint32_t b) {
  const std::uint32_t a = b & 0x7fffffffU;
  if (a > 0x7f800000U) return tanh_kind::nan;
  if (a >= tanh_one_from) return tanh_kind::one;
  if (a < tanh_same_below) return tanh_kind::same;
  return tanh_kind::general;
}

bool tanh_exact(std::uint32_t xb, std::uint32_t yb, tanh_kind k) {
  switch (k) {
  case tanh_kind::same: return yb == xb;
  case tanh_kind::one: return yb == (0x3f800000U | (xb & 0x80000000U));
  case tanh_kind::nan: return (yb & 0x7fffffffU) > 0x7f800000U;
  case tanh_kind::general: return false;
  }
  return false;
}

struct tanh_scan {
  double max_err = 0;
  std::uint32_t worst = 0;
  std::uint64_t failures = 0;
  std::uint32_t first_failure = 0;
  std::uint64_t checked = 0;
  std::uint64_t compared = 0;   // with the reference
  std::uint64_t not_odd = 0;    // tanh_array(−x) != −tanh_array(x), bit for bit
  std::uint64_t differ = 0;     // tanh (the scalar function) != tanh_array, bit for bit
  std::uint64_t scalar_checked = 0;
  /// Adds another thread's scan.
  void merge(const tanh_scan& s) {
    merge_worst(*this, s);
    compared += s.compared;
    not_odd += s.not_odd;
    differ += s.differ;
    scalar_checked += s.scalar_checked;
  }
};

// Whether every result of a block of one exact kind (not general) is that kind's (a loop that
// vectorizes: most of the 2^32 inputs are of these kinds).
bool tanh_block_ok(const float* x, const float* y, tanh_kind k) {
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < block; ++i)
    bad |= static_cast<std::uint32_t>(!tanh_exact(std::bit_cast<std::uint32_t>(x[i]),
                                                  std::bit_cast<std::uint32_t>(y[i]), k));
  return bad == 0;
}

// Blocks first, first + stride, ... of the 2^32 / 4096 bit patterns, through tanh_array (the
// vector path the additive score takes). Every block holding an input whose tanh is not exact
// (about 2.6e8 of them) is compared with the reference, through tanh_array of the negated inputs
// (odd to the bit) and, every 4th, with the scalar tanh (the same bits); of the blocks where every
// result is exact (x itself, ±1 or NaN: the other 4e9 inputs, and the bulk of the time at SSE2's
// speed) every uniform_every-th (16th in the exhaustive scan) is checked, with the scalar tanh as
// well. The blocks where one kind gives way to another are all checked.
struct tanh_scan_args {
  double bound;
  std::uint64_t uniform_every;  // of the blocks of one exact kind, every this many is checked
};

void scan_tanh_floats(std::uint64_t first, std::uint64_t stride, tanh_scan_args args,
                      tanh_scan& result) {
  const double bound = args.bound;
  tanh_scan out;
  std::vector<float> x(block);
  std::vector<float> nx(block);
  std::vector<float> y(block);
  std::vector<float> ny(block);
  std::uint64_t visit = 0;  // blocks this thread has come to (what "every 16th" counts)
  for (std::uint64_t blk = first; blk < (std::uint64_t{1} << 32U) / block; blk += stride, ++visit) {
    const auto base = static_cast<std::uint32_t>(blk * block);
    const tanh_kind k0 = tanh_classify(base);
    const bool uniform = k0 != tanh_kind::general &&
                         k0 == tanh_classify(base + static_cast<std::uint32_t>(block - 1));
    if (uniform && visit % args.uniform_every != 0) continue;
    for (std::size_t i = 0; i < block; ++i) x[i] = std::bit_cast<float>(base + static_cast<std::uint32_t>(i));
    ad::tanh_array(x.data(), y.data(), block);
    out.checked += block;
    const bool scalar_too = uniform || visit % 4 == 0;
    if (scalar_too) {
      std::uint32_t d = 0;
      for (std::size_t i = 0; i < block; ++i)
        d += static_cast<std::uint32_t>(std::bit_cast<std::uint32_t>(ad::tanh(x[i])) !=
                                        std::bit_cast<std::uint32_t>(y[i]));
      out.differ += d;
      out.scalar_checked += block;
    }
    if (uniform && tanh_block_ok(x.data(), y.data(), k0)) continue;
    for (std::size_t i = 0; i < block; ++i) nx[i] = -x[i];
    ad::tanh_array(nx.data(), ny.data(), block);
    for (std::size_t i = 0; i < block; ++i) {
      const std::uint32_t b = base + static_cast<std::uint32_t>(i);
      const std::uint32_t yb = std::bit_cast<std::uint32_t>(y[i]);
      out.not_odd += static_cast<std::uint64_t>(std::bit_cast<std::uint32_t>(ny[i]) != (yb ^ 0x80000000U));
      const tanh_kind k = tanh_classify(b);
      bool ok = false;
      if (k == tanh_kind::general) {
        ++out.compared;
        const double ref = std::tanh(static_cast<double>(x[i]));
        // ulp_error takes a positive reference; tanh is odd, and y has ref's sign or is wrong.
        const bool same_sign = (yb >> 31U) == static_cast<std::uint32_t>(ref < 0);
        const double err = float_ulp_error(std::fabs(y[i]), std::fabs(ref));
        ok = same_sign && err <= bound;
        if (err > out.max_err) {
          out.max_err = err;
          out.worst = b;
        }
      } else {
        ok = tanh_exact(b, yb, k);
      }
      if (!ok && out.failures++ == 0) out.first_failure = b;
    }
  }
  result = out;
}

template <class T>
void check_tanh_special_cases() {
  using L = std::numeric_limits<T>;
  CHECK(ad::tanh(T{0}) == T{0});
  CHECK_FALSE(std::signbit(ad::tanh(T{0})));
  CHECK(std::signbit(ad::tanh(-T{0})));
  CHECK(ad::tanh(L::denorm_min()) == L::denorm_min());
  CHECK(ad::tanh(-L::min()) == -L::min());
  CHECK(ad::tanh(L::infinity()) == T{1});
  CHECK(ad::tanh(-L::infinity()) == T{-1});
  CHECK(ad::tanh(L::max()) == T{1});
  CHECK(ad::tanh(L::lowest()) == T{-1});
  CHECK(std::isnan(ad::tanh(L::quiet_NaN())));
  CHECK(std::isnan(ad::tanh(-L::quiet_NaN())));
  CHECK(std::isnan(ad::tanh(L::signaling_NaN())));
  CHECK(ad::tanh(T{1000}) == T{1});
  CHECK(ad::tanh(T{-1000}) == T{-1});
}

void check_tanh_scan(const tanh_scan& all, std::uint64_t spread, std::uint64_t uniform_every,
                     std::size_t n_extra, double bound) {
  INFO(scan_summary(all));
  // [2^-12, 10) of either sign: 15 binades of 2^23 floats and a quarter of one, twice.
  constexpr std::uint64_t n_general = 2 * (tanh_one_from - tanh_same_below);
  CHECK((spread == 1 ? all.compared == n_general : all.compared > n_general / spread * 9 / 10));
  CHECK(all.checked > all.compared + ((std::uint64_t{1} << 32U) - n_general) / uniform_every /
                                         spread * 9 / 10);
  CHECK(all.checked <= ((attn_test::n_scan_blocks + spread - 1) / spread + n_extra) * block);
  CHECK(all.scalar_checked > all.compared / 5);
  CHECK(all.failures == 0);
  CHECK(all.max_err <= bound);
  CHECK(all.not_odd == 0);
  CHECK(all.differ == 0);
}

// Bound 1.5 ulp; measured 1.07 with FMA (x = 0.760270476, just above the switch from the
// polynomial to 1 − 2/(e^(2x) + 1)), 1.10 without (x = 0.875921).
constexpr double tanh_bound = 1.5;

}  // namespace

// Hidden, CTest label `exhaustive`, as "exp: every float" above.
TEST_CASE("tanh: every float where it is not exact, every 16th block elsewhere",
          "[.][exhaustive][exp][tanh]") {
  constexpr std::uint64_t spread = every_float_spread;
  const tanh_scan all = scan_on_two_threads<tanh_scan>(scan_tanh_floats, spread,
                                                       tanh_scan_args{tanh_bound, 16});
  check_tanh_scan(all, spread, 16, 0, tanh_bound);
}

TEST_CASE("tanh: every 64th block of floats, and every block at a change of kind", "[exp][tanh]") {
  constexpr std::uint64_t spread = attn_test::sampled_spread;
  const auto extra = attn_test::boundary_blocks(tanh_classify, spread);
  CHECK(extra.size() >= 8);
  const tanh_scan all = attn_test::scan_sampled<tanh_scan>(
      scan_tanh_floats, spread, tanh_scan_args{tanh_bound, 1}, extra);
  check_tanh_scan(all, spread, 1, extra.size(), tanh_bound);
}

TEST_CASE("tanh: float thresholds agree with the reference", "[exp][tanh]") {
  // Below 2^-12 the rounded tanh is x itself (it first differs at 0x1.713746p-12), and from 10
  // on it is 1 (from 0x1.205968p+3 = 9.0109 on): what the scan takes as exact.
  const float same_below = std::bit_cast<float>(tanh_same_below);
  CHECK(static_cast<float>(std::tanh(static_cast<double>(std::nextafter(same_below, 0.0F)))) ==
        std::nextafter(same_below, 0.0F));
  CHECK(static_cast<float>(std::tanh(static_cast<double>(0x1.713744p-12F))) == 0x1.713744p-12F);
  CHECK(static_cast<float>(std::tanh(static_cast<double>(0x1.713746p-12F))) != 0x1.713746p-12F);
  CHECK(static_cast<float>(std::tanh(static_cast<double>(0x1.205968p+3F))) == 1.0F);
  CHECK(static_cast<float>(std::tanh(static_cast<double>(0x1.205966p+3F))) < 1.0F);
}

TEST_CASE("tanh: double within 1.5 ulp of std::tanh(long double)", "[exp][tanh]") {
  // Inputs: uniform over [-25, 25] and [-1, 1], magnitudes 2^-80 .. 2^6 of either sign, random
  // bit patterns, and runs of consecutive values around the switch at 0.75, the clamp at 20,
  // where the rounded tanh reaches 1 (19.0613) and 2^-27 (below it tanh(x) rounds to x).
  std::mt19937_64 gen(20261201);
  std::vector<double> xs;
  std::uniform_real_distribution<double> wide(-25, 25);
  std::uniform_real_distribution<double> unit(-1, 1);
  std::uniform_real_distribution<double> expo(-80, 6);
  for (int i = 0; i < 1000000; ++i) xs.push_back(wide(gen));
  for (int i = 0; i < 1000000; ++i) xs.push_back(unit(gen));
  for (int i = 0; i < 500000; ++i) {
    const double m = std::exp2(expo(gen));
    xs.push_back((gen() & 1U) != 0 ? m : -m);
  }
  for (int i = 0; i < 200000; ++i) xs.push_back(std::bit_cast<double>(gen()));
  for (const double at : {0.75, -0.75, 20.0, 19.061303384358748, 0x1p-27, -0x1p-27})
    push_around(xs, at, 20000);
  std::vector<double> ys(xs.size());
  ad::tanh_array(xs.data(), ys.data(), xs.size());
  double max_err = 0;
  double worst = 0;
  std::size_t failures = 0;
  std::size_t differ = 0;
  double first_failure = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i];
    const double y = ys[i];
    differ += static_cast<std::size_t>(std::bit_cast<std::uint64_t>(ad::tanh(x)) !=
                                       std::bit_cast<std::uint64_t>(y));
    differ += static_cast<std::size_t>(std::bit_cast<std::uint64_t>(ad::tanh(-x)) !=
                                       (std::bit_cast<std::uint64_t>(y) ^ 0x8000000000000000ULL));
    bool ok = false;
    if (std::isnan(x)) {
      ok = std::isnan(y);
    } else {
      const long double ref = std::tanh(static_cast<long double>(x));
      const double err = ulp_error_wide(y, ref);
      ok = err <= 1.5 && std::signbit(y) == std::signbit(x) && std::fabs(y) <= 1.0;
      if (err > max_err) {
        max_err = err;
        worst = x;
      }
    }
    if (!ok && failures++ == 0) first_failure = x;
  }
  INFO(xs.size() << " samples; max error " << max_err << " ulp at x = " << worst << "; "
                 << failures << " failures, the first at x = " << first_failure);
  CHECK(failures == 0);
  CHECK(max_err <= 1.5);
  CHECK(differ == 0);
}

TEST_CASE("tanh: special cases", "[exp][tanh]") {
  SECTION("float") { check_tanh_special_cases<float>(); }
  SECTION("double") { check_tanh_special_cases<double>(); }
  SECTION("long double") { check_tanh_special_cases<long double>(); }
  SECTION("NaNs of either sign, quiet or signaling, come back quiet NaN") {
    for (const std::uint32_t b : {0x7f800001U, 0x7fc00000U, 0xff800123U, 0xffffffffU}) {
      const auto y = std::bit_cast<std::uint32_t>(ad::tanh(std::bit_cast<float>(b)));
      CHECK(((y & 0x7fffffffU) > 0x7f800000U && (y & 0x00400000U) != 0));
    }
    for (const std::uint64_t b : {0x7ff0000000000123ULL, 0xfff8000000000000ULL}) {
      const auto y = std::bit_cast<std::uint64_t>(ad::tanh(std::bit_cast<double>(b)));
      CHECK(((y & 0x7fffffffffffffffULL) > 0x7ff0000000000000ULL && (y & 0x0008000000000000ULL) != 0));
    }
  }
  SECTION("tanh_array: block and tail, in place") {
    std::vector<double> d(1003);
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = -25.0 + 0.05 * static_cast<double>(i);
    d[5] = std::numeric_limits<double>::quiet_NaN();
    d[6] = -std::numeric_limits<double>::infinity();
    const std::vector<double> dx = d;
    ad::tanh_array(d.data(), d.data(), d.size());
    for (std::size_t i = 0; i < d.size(); ++i)
      CHECK(std::bit_cast<std::uint64_t>(d[i]) == std::bit_cast<std::uint64_t>(ad::tanh(dx[i])));
    ad::tanh_array(d.data(), d.data(), 0);
  }
}
