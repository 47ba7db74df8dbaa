// softmax, log_softmax and logsumexp: stability, accuracy, sharpness, masks and policies.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "attn/softmax.hpp"
#include "attn_catch.hpp"
#include "constant_options.hpp"

using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

// Compile-time probes: a call that must not compile is a `requires` that is false.
template <class X, class Y>
constexpr bool can_softmax_into = requires(X x, Y y) { attn::softmax(x, y); };
// Outputs must be writable and fit.
static_assert(can_softmax_into<const std::vector<double>&, std::vector<double>&>);
static_assert(!can_softmax_into<const std::vector<double>&, const std::vector<double>&>);
static_assert(!can_softmax_into<const std::array<double, 3>&, std::array<double, 4>&>);

// Constant evaluation, g++ and clang++ alike: softmax, log_softmax and logsumexp of
// x = (0, 0.5, 2) with β = 2 and entry 1 masked, in float, double and long double:
//   α = (1/(1 + e⁴), 0, e⁴/(1 + e⁴)),   log α = (−log(1 + e⁴), −inf, 4 − log(1 + e⁴)),
//   logsumexp = log(1 + e⁴).
// The references are Python's math printed to 17 digits (error ≤ 1e-16). Tolerances: the weights
// within B = ε(4.1·Y + (n + 9)/2) ≤ 23ε (Y = 4, n = 3: docs/errors.md, "The bounds"), the
// log-weights and logsumexp within ε(4.1·Y + 2|ℓ| + n + 8) ≤ 36ε, so 40ε, plus the references'.
namespace constant {
template <class T>
constexpr T tol = 40 * std::numeric_limits<T>::epsilon() + static_cast<T>(1e-15);
template <class T>
constexpr bool near_t(T x, long double y, long double scale = 1) {
  const long double t = static_cast<long double>(tol<T>) * scale;
  return static_cast<long double>(x) - y <= t && y - static_cast<long double>(x) <= t;
}
using attn_test::beta2_middle_masked;
template <class T>
constexpr std::array<T, 3> x{0, 0.5, 2};
template <class T>
constexpr std::array<T, 3> log_softmax_of() {
  std::array<T, 3> out{};
  attn::log_softmax(x<T>, out, beta2_middle_masked());
  return out;
}
template <class T>
constexpr std::array<T, 3> log_softmax_in_place() {
  std::array<T, 3> y = x<T>;
  attn::log_softmax_inplace(y, beta2_middle_masked());
  return y;
}
constexpr long double a0 = 0.01798620996209156L, lse = 4.0181499279178094L;
template <class T>
constexpr bool every_call() {
  const auto w = attn::softmax(x<T>, beta2_middle_masked());
  const auto l = log_softmax_of<T>();
  const auto li = log_softmax_in_place<T>();
  return near_t(w[0], a0) && w[1] == 0 && near_t(w[2], 1 - a0) && near_t(l[0], -lse, 4) &&
         l[1] == -std::numeric_limits<T>::infinity() && near_t(l[2], 4 - lse) && li[0] == l[0] &&
         li[2] == l[2] && near_t(attn::logsumexp(x<T>, beta2_middle_masked()), lse, 4) &&
         // and without a mask
         near_t(attn::logsumexp(x<T>), 2.3063557122291463L, 4) &&
         near_t(attn::softmax(x<T>)[0], 0.09962364806231833L);
}
static_assert(every_call<float>());
static_assert(every_call<double>());
static_assert(every_call<long double>());
}  // namespace constant

namespace {
template <class T>
constexpr T eps = std::numeric_limits<T>::epsilon();
constexpr double inf = std::numeric_limits<double>::infinity();

// Reference softmax in long double with std::exp, independent of the library's kernels.
template <class T>
std::vector<long double> reference_softmax(const std::vector<T>& x, long double beta = 1) {
  long double m = -std::numeric_limits<long double>::infinity();
  for (T v : x) m = std::max(m, beta * static_cast<long double>(v));
  std::vector<long double> e(x.size());
  long double s = 0;
  for (std::size_t j = 0; j < x.size(); ++j) s += e[j] = std::exp(beta * static_cast<long double>(x[j]) - m);
  for (auto& v : e) v /= s;
  return e;
}
}  // namespace

TEST_CASE("softmax never overflows on finite input", "[softmax]") {
  SECTION("(1000, 1001, 1002) in float") {
    const std::vector<float> x{1000, 1001, 1002};
    std::vector<float> w(3);
    attn::softmax(x, w);
    const auto ref = reference_softmax(std::vector<float>{0, 1, 2});
    // exp is ≤ 1.5 ulp, the sum of 3 terms and one multiply by 1/sum add ≤ 3 half-ulps.
    for (std::size_t j = 0; j < 3; ++j) REQUIRE_THAT(w[j], WithinRel(static_cast<float>(ref[j]), 4 * eps<float>));
  }
  SECTION("(-1e30, 0, 1e30) in float") {
    const std::vector<float> x{-1e30f, 0, 1e30f};
    std::vector<float> w(3);
    attn::softmax(x, w);
    REQUIRE(w[0] == 0.0f);
    REQUIRE(w[1] == 0.0f);
    REQUIRE(w[2] == 1.0f);
  }
  SECTION("huge and subnormal scores in double") {
    const std::vector<double> x{std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min(), -1e308};
    const auto w = attn::softmax(x);
    REQUIRE(w[0] == 1.0);
    REQUIRE(w[1] == 0.0);
    REQUIRE(w[2] == 0.0);
  }
}

TEST_CASE("log_softmax keeps tiny probabilities", "[softmax]") {
  const std::vector<double> x{0, -50};
  std::vector<double> out(2);
  attn::log_softmax(x, out);
  // True values: −log1p(e^−50) and −50 − log1p(e^−50); log1p(y) = y(1 − y/2 + …) for y = e^−50.
  const double y = std::exp(-50.0);
  const double lse = y - y * y / 2;
  REQUIRE_THAT(out[0], WithinRel(-lse, 1e-15));
  REQUIRE_THAT(out[1], WithinRel(-50.0 - lse, 1e-15));
  REQUIRE_THAT(attn::logsumexp(x), WithinRel(lse, 1e-15));

  SECTION("a score whose β·x overflows while its log-weight does not") {
    // β·12 = −3.6e38 is beyond float, but β·12 − β·1 = −3.3e38 is not: the log-weight is the
    // exact-arithmetic one, β·(12 − 1) (fl(12 − 1) is exact; one rounding for the product).
    const std::vector<float> v{1, 12};
    std::vector<float> lw(2);
    const float beta = -3e37f;
    attn::log_softmax(v, lw, {.beta = beta});
    REQUIRE(lw[0] == 0.0f);
    REQUIRE_THAT(lw[1], WithinRel(beta * 11.0f, eps<float>));
  }
  SECTION("a log-weight beyond the type's range is -inf, also with |β| <= 1") {
    // x_0 − x_1 = −1.5·FLT_MAX: β x_0 − m = −5.1e38 exactly, which float rounds to −inf; the
    // other 65 entries are 0 (a row found by fuzz_softmax). Into a buffer and in place alike.
    std::vector<float> v(67, 0.0f);
    v[0] = -std::numeric_limits<float>::max();
    v[1] = std::numeric_limits<float>::max() / 2;
    std::vector<float> lw(v.size());
    attn::log_softmax(v, lw);
    REQUIRE(lw[0] == -std::numeric_limits<float>::infinity());
    REQUIRE(lw[1] == 0.0f);  // e^(x_j − x_1) underflows to 0 for every other entry
    attn::log_softmax_inplace(v);
    for (std::size_t j = 0; j < v.size(); ++j)
      REQUIRE(std::bit_cast<std::uint32_t>(v[j]) == std::bit_cast<std::uint32_t>(lw[j]));
  }
  SECTION("in place, with β and against the long double reference") {
    std::vector<double> v{3, -1, 0.25, 7, 7};
    const auto ref = reference_softmax(v, 0.5L);
    attn::log_softmax_inplace(v, {.beta = 0.5});
    for (std::size_t j = 0; j < v.size(); ++j)
      REQUIRE_THAT(v[j], WithinRel(static_cast<double>(std::log(ref[j])), 8 * eps<double>));
  }
}

TEST_CASE("sharpness β multiplies the scores", "[softmax]") {
  const std::vector<double> s{0, 0.5, 2};
  const auto twice = attn::softmax(std::vector<double>{0, 1, 4});
  const auto sharp = attn::softmax(s, {.beta = 2});
  for (std::size_t j = 0; j < 3; ++j) REQUIRE_THAT(sharp[j], WithinRel(twice[j], 2 * eps<double>));
  const auto flat = attn::softmax(s, {.beta = 0});
  for (double w : flat) REQUIRE(w == 1.0 / 3.0);
  REQUIRE_THROWS_AS(attn::softmax(s, {.beta = inf}), attn::domain_error);
  REQUIRE_THROWS_AS(attn::softmax(s, {.beta = std::nan("")}), attn::domain_error);
}

TEST_CASE("masks and the all-masked policy", "[softmax][mask]") {
  const std::vector<double> s{1, 2, 3, 4};
  const std::array<bool, 4> keep{true, false, true, false};
  const auto w = attn::softmax(s, {.mask = keep});
  REQUIRE(w[1] == 0.0);
  REQUIRE(w[3] == 0.0);
  const auto two = attn::softmax(std::vector<double>{1, 3});
  REQUIRE_THAT(w[0], WithinRel(two[0], 2 * eps<double>));
  REQUIRE_THAT(w[2], WithinRel(two[1], 2 * eps<double>));
  std::vector<double> lw(4);
  attn::log_softmax(s, lw, {.mask = keep});
  REQUIRE(lw[1] == -inf);
  const auto ref = reference_softmax(std::vector<double>{1, 3});
  REQUIRE_THAT(lw[2], WithinRel(static_cast<double>(std::log(ref[1])), 4 * eps<double>));

  const std::array<bool, 4> none{};
  using attn::all_masked_policy;
  SECTION("zeros (default)") {
    const auto z = attn::softmax(s, {.mask = none});
    for (double x : z) REQUIRE(x == 0.0);
    attn::log_softmax(s, lw, {.mask = none});
    for (double x : lw) REQUIRE(x == -inf);
    REQUIRE(attn::logsumexp(s, {.mask = none}) == -inf);
  }
  SECTION("uniform") {
    const auto u = attn::softmax(s, {.mask = none, .if_all_masked = all_masked_policy::uniform});
    for (double x : u) REQUIRE(x == 0.25);
  }
  SECTION("nan") {
    const auto n = attn::softmax(s, {.mask = none, .if_all_masked = all_masked_policy::nan});
    for (double x : n) REQUIRE(std::isnan(x));
  }
  SECTION("throw_error leaves the output untouched") {
    std::vector<double> out{7, 7, 7, 7};
    REQUIRE_THROWS_AS(attn::softmax(s, out, {.mask = none, .if_all_masked = all_masked_policy::throw_error}),
                      attn::domain_error);
    for (double x : out) REQUIRE(x == 7.0);
  }
  SECTION("a row of −inf counts as all masked") {
    const std::vector<double> neg{-inf, -inf};
    for (double x : attn::softmax(neg)) REQUIRE(x == 0.0);
    REQUIRE_THROWS_AS(attn::softmax(neg, {.if_all_masked = all_masked_policy::throw_error}), attn::domain_error);
  }
  SECTION("a mask of the wrong size is a dimension_error") {
    const std::array<bool, 3> short_mask{true, true, true};
    REQUIRE_THROWS_AS(attn::softmax(s, {.mask = short_mask}), attn::dimension_error);
  }
}

TEST_CASE("NaN, +inf and empty input follow the documented rules", "[softmax][errors]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double w : attn::softmax(std::vector<double>{1, nan, 2})) REQUIRE(std::isnan(w));
  for (double w : attn::softmax(std::vector<double>{-inf, nan})) REQUIRE(std::isnan(w));
  for (double w : attn::softmax(std::vector<double>{inf, nan})) REQUIRE(std::isnan(w));
  // A NaN in a masked entry is ignored.
  const std::array<bool, 3> keep{true, false, true};
  const auto masked_nan = attn::softmax(std::vector<double>{0, nan, 0}, {.mask = keep});
  REQUIRE(masked_nan[0] == 0.5);
  REQUIRE(masked_nan[1] == 0.0);
  // +inf entries share the weight.
  const auto w = attn::softmax(std::vector<double>{inf, 3, inf, -inf});
  REQUIRE(w[0] == 0.5);
  REQUIRE(w[1] == 0.0);
  REQUIRE(w[2] == 0.5);
  REQUIRE(w[3] == 0.0);
  std::vector<double> lw(4);
  attn::log_softmax(std::vector<double>{inf, 3, inf, -inf}, lw);
  REQUIRE_THAT(lw[0], WithinRel(-std::log(2.0), eps<double>));
  REQUIRE(lw[1] == -inf);
  REQUIRE(attn::logsumexp(std::vector<double>{inf, 1}) == inf);
  // −inf entries get weight 0 next to finite ones.
  const auto m = attn::softmax(std::vector<double>{-inf, 0});
  REQUIRE(m[0] == 0.0);
  REQUIRE(m[1] == 1.0);
  // Empty input, and an output of the wrong size, throw and leave the output untouched.
  const std::vector<double> empty;
  std::vector<double> out{5, 5};
  REQUIRE_THROWS_AS(attn::softmax(empty, std::span<double>(out.data(), 0)), attn::dimension_error);
  REQUIRE_THROWS_AS(attn::softmax(std::vector<double>{1, 2, 3}, out), attn::dimension_error);
  REQUIRE(out == std::vector<double>{5, 5});
  REQUIRE_THROWS_AS(attn::logsumexp(empty), attn::dimension_error);
}

TEMPLATE_TEST_CASE("softmax properties over random inputs", "[softmax][property]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(42);
  for (std::size_t n : {1u, 2u, 3u, 15u, 16u, 17u, 100u, 1000u}) {
    for (T scale : {T(1e-3), T(1), T(30)}) {
      std::normal_distribution<double> normal(0, static_cast<double>(scale));
      std::vector<T> x(n);
      for (auto& v : x) v = static_cast<T>(normal(rng));
      const auto w = attn::softmax(x);
      // Each weight is e_j·(1/S) with e_j within 1.5 ulp and S summed with error ≤ (n−1)u·S:
      // |Σα − 1| ≤ (n + 4)·ε.
      long double sum = 0;
      for (T a : w) {
        REQUIRE(a >= T(0));
        sum += a;
      }
      REQUIRE(std::abs(sum - 1.0L) <= static_cast<long double>(n + 4) * eps<T>);
      // Against the long double reference: relative error of the largest weights is bounded
      // by the exponent's rounding |β x − m|·ε plus the same (n + 4)·ε.
      const auto ref = reference_softmax(x);
      T spread = 0;
      for (T v : x) spread = std::max(spread, std::abs(v));
      for (std::size_t j = 0; j < n; ++j)
        REQUIRE(std::abs(static_cast<long double>(w[j]) - ref[j]) <=
                static_cast<long double>((2 * spread + static_cast<T>(n) + 4) * eps<T>) * ref[j] +
                    std::numeric_limits<T>::denorm_min());
      // Adding a constant c to every score changes nothing but the rounding of β x − m, whose
      // error is ≤ (|c| + |x|)·ε per entry.
      const T c = T(1000) * scale;
      std::vector<T> shifted(x);
      for (auto& v : shifted) v += c;
      const auto ws = attn::softmax(shifted);
      for (std::size_t j = 0; j < n; ++j)
        REQUIRE(std::abs(ws[j] - w[j]) <= (4 * (c + spread) + static_cast<T>(n) + 8) * eps<T> * w[j] +
                                                std::numeric_limits<T>::denorm_min());
    }
  }
}

TEMPLATE_TEST_CASE("β → ∞ picks the argmax, β = 0 gives the uniform weights", "[softmax][property]", float, double) {
  using T = TestType;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-3, 3);
  for (std::size_t n : {2u, 5u, 40u}) {
    std::vector<T> x(n);
    for (auto& v : x) v = static_cast<T>(u(rng));
    std::size_t best = 0;
    for (std::size_t j = 1; j < n; ++j)
      if (x[j] > x[best]) best = j;
    // Make the gap to the runner-up at least 0.01: then β = 1e5 puts e^{−1000} on the others.
    for (std::size_t j = 0; j < n; ++j)
      if (j != best) x[j] = std::min(x[j], static_cast<T>(x[best] - T(0.01)));
    const auto sharp = attn::softmax(x, {.beta = 1e5});
    for (std::size_t j = 0; j < n; ++j) REQUIRE(sharp[j] == (j == best ? T(1) : T(0)));
    const auto flat = attn::softmax(x, {.beta = 0});
    for (T a : flat) REQUIRE_THAT(static_cast<double>(a), WithinRel(1.0 / static_cast<double>(n), 2 * static_cast<double>(eps<T>)));
  }
}

TEST_CASE("float softmax of a million scores is within 1e-6 relative of double", "[softmax][long]") {
  // The sum of 2^20 exponentials is kept in double, so the float weights carry only their own
  // roundings: exp (≤ 1.5 ulp), x − m (≤ 2^-22 absolute for scores in [−4, 4)) and the scaling.
  const std::size_t n = std::size_t{1} << 20;
  std::mt19937_64 rng(20);
  std::uniform_real_distribution<double> u(-4, 4);
  std::vector<float> xf(n);
  for (auto& v : xf) v = static_cast<float>(u(rng));
  const std::vector<double> xd(xf.begin(), xf.end());
  const auto wf = attn::softmax(xf);
  const auto wd = attn::softmax(xd);
  double worst = 0, sum = 0;
  for (std::size_t j = 0; j < n; ++j) {
    worst = std::max(worst, std::abs(static_cast<double>(wf[j]) - wd[j]) / wd[j]);
    sum += static_cast<double>(wf[j]);
  }
  REQUIRE(worst <= 1e-6);
  REQUIRE(std::abs(sum - 1) <= 1e-6);
}

TEMPLATE_TEST_CASE("Short rows in registers give the general path's numbers to the bit", "[softmax]", float,
                   double) {
  // Without a mask, rows of one to eight vectors go through softmax_short_row (registers); a
  // mask that keeps everything takes the general path (the max on the bits, exp lane by lane,
  // sum_of), which must give the same numbers. Spreads of 1 and 10 keep every β x − m in
  // exp_in_range's range; 300 does not, and the row falls back. In place as well. To the bit
  // where the build fuses no multiply-adds (attn_test::fma_contracted), to rounding where it does.
  using T = TestType;
  std::mt19937_64 rng(61);
  for (std::size_t n = 1; n <= 140; ++n) {
    for (const double spread : {1.0, 10.0, 300.0}) {
      for (const double beta : {1.0, 0.7, -2.0}) {
        std::normal_distribution<double> normal(0, spread);
        std::vector<T> x(n);
        for (auto& v : x) v = static_cast<T>(normal(rng));
        const auto keep = std::make_unique<bool[]>(n);
        std::fill_n(keep.get(), n, true);
        const std::span<const bool> all(keep.get(), n);
        std::vector<T> fast(n), general(n), in_place(x);
        attn::softmax(x, fast, {.beta = beta});
        attn::softmax(x, general, {.beta = beta, .mask = all});
        attn::softmax_inplace(in_place, {.beta = beta});
        INFO("n=" << n << " spread=" << spread << " beta=" << beta);
        if (!attn_test::fma_contracted()) {
          REQUIRE(fast == general);
          REQUIRE(in_place == general);
          continue;
        }
        // Fused multiply-adds: each path's exp fuses where the compiler chooses, so they agree
        // to rounding. Each exp is within 1.5 ulp of e^t, so two differ by at most 3ε
        // relative; their sums by that and each path's own (n − 1) roundings; the reciprocal
        // and the product add one rounding each per path: (2n + 10)ε relative in all.
        const T tol = static_cast<T>(2 * n + 10) * std::numeric_limits<T>::epsilon();
        for (std::size_t j = 0; j < n; ++j) {
          REQUIRE(std::abs(fast[j] - general[j]) <= tol * general[j]);
          REQUIRE(std::abs(in_place[j] - general[j]) <= tol * general[j]);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("Constant evaluation: softmax to the bit, log_softmax and logsumexp within log1p's 2 ulp",
                   "[softmax][constexpr]", float, double, long double) {
  using T = TestType;
  // softmax in constant evaluation takes the same steps as at run time (the same bits where no
  // multiply-add is fused). log_softmax and logsumexp differ only in log1p: within 1 ulp of the
  // exact value in constant evaluation, glibc's within 1 at run time (tests/test_math.cpp), so
  // the log-sum-exp term within 2 ulp of itself (|lse| < 8: 2·8ε), and the rest the same.
  constexpr auto w = attn::softmax(constant::x<T>, constant::beta2_middle_masked());
  constexpr auto l = constant::log_softmax_of<T>();
  constexpr T lse = attn::logsumexp(constant::x<T>, constant::beta2_middle_masked());
  const auto w_run = attn::softmax(constant::x<T>, constant::beta2_middle_masked());
  std::array<T, 3> l_run{};
  attn::log_softmax(constant::x<T>, l_run, constant::beta2_middle_masked());
  const T lse_run = attn::logsumexp(constant::x<T>, constant::beta2_middle_masked());
  const T log_tol = 16 * std::numeric_limits<T>::epsilon();
  for (std::size_t j = 0; j < 3; ++j) {
    if (attn_test::fma_contracted())
      CHECK(std::fabs(w[j] - w_run[j]) <= 2 * constant::tol<T>);
    else
      CHECK(w[j] == w_run[j]);
    if (j == 1)
      CHECK(l[j] == l_run[j]);  // −inf
    else
      CHECK(std::fabs(l[j] - l_run[j]) <= log_tol);
  }
  CHECK(std::fabs(lse - lse_run) <= log_tol);
}
