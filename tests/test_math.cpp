// attn/detail/math.hpp and tanh's constant path: what constant evaluation computes where clang
// calls no <cmath> function, against the run-time functions. The tables are computed in
// constant evaluation (constexpr variables) and compared at run time:
//   sqrt: correctly rounded, so the bits of std::sqrt (IEEE's sqrt is correctly rounded);
//   log1p, log: within 1 ulp of the exact value (double against long double's log1pl; float
//     through double), within 2 ulp of glibc's (itself within 1);
//   tanh for long double (x87), which has no IEEE kernel: within 4 ulp of std::tanh.

#include <attn/detail/math.hpp>
#include <attn/detail/tanh.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "attn_catch.hpp"

namespace ad = attn::detail;

namespace {

constexpr std::size_t table_size = 400;

/// Input i of a table: (1 + frac(i·φ))·2^e with e running over [lo, hi], and at i % 7 == 0 an
/// integer (the lengths sqrt and log meet in attn: d, n, counts).
template <class T>
constexpr T input(std::size_t i, int lo, int hi) {
  if (i % 7 == 0) return static_cast<T>(i / 7 + 1);
  const long double phi = 0.6180339887498948482L * static_cast<long double>(i);
  const auto frac = static_cast<T>(phi - static_cast<long double>(static_cast<long long>(phi)));
  const int e = lo + static_cast<int>(i % static_cast<std::size_t>(hi - lo + 1));
  T scale = 1;
  for (int k = 0; k < (e < 0 ? -e : e); ++k) scale = e < 0 ? scale / 2 : scale * 2;
  return (1 + frac) * scale;
}

/// −x/(1 + x) in (−1, 0) for the x of the tables: log1p's negative arguments.
template <class T>
constexpr T negative(T x) {
  return -x / (1 + x);
}

template <class T, class F>
constexpr std::array<T, table_size> table(F f, int lo, int hi) {
  std::array<T, table_size> out{};
  for (std::size_t i = 0; i < table_size; ++i) out[i] = f(input<T>(i, lo, hi));
  return out;
}

template <class T>
constexpr auto sqrt_table = table<T>([](T x) { return ad::sqrt(x); }, -70, 70);
template <class T>
constexpr auto log1p_table = table<T>([](T x) { return ad::log1p(x); }, -60, 30);
template <class T>
constexpr auto log1p_negative_table = table<T>([](T x) { return ad::log1p(negative(x)); }, -40, 0);
template <class T>
constexpr auto log_table = table<T>([](T x) { return ad::log(x); }, -70, 70);

/// |a − b| in units of the last place of b (b's binade, for b ≠ 0).
template <class T>
long double ulps(T a, long double b) {
  if (b == 0) return a == 0 ? 0 : std::numeric_limits<long double>::infinity();
  int e = 0;
  (void)std::frexp(b, &e);
  const long double ulp = std::ldexp(1.0L, e - std::numeric_limits<T>::digits);
  return std::fabs(static_cast<long double>(a) - b) / ulp;
}

}  // namespace

TEMPLATE_TEST_CASE("math: sqrt in constant evaluation is std::sqrt to the bit", "[math]", float, double,
                   long double) {
  using T = TestType;
  for (std::size_t i = 0; i < table_size; ++i) {
    const T x = input<T>(i, -70, 70);
    INFO("x = " << x);
    REQUIRE(sqrt_table<T>[i] == std::sqrt(x));
  }
  STATIC_REQUIRE(ad::sqrt(T(0)) == T(0));
  STATIC_REQUIRE(ad::sqrt(T(4)) == T(2));
}

TEMPLATE_TEST_CASE("math: log1p and log in constant evaluation within 1 ulp", "[math]", float, double) {
  using T = TestType;
  long double worst = 0;
  for (std::size_t i = 0; i < table_size; ++i) {
    const T x = input<T>(i, -60, 30), xn = negative(input<T>(i, -40, 0)), xl = input<T>(i, -70, 70);
    const long double exact = std::log1p(static_cast<long double>(x));
    const long double exact_n = std::log1p(static_cast<long double>(xn));
    const long double exact_l = std::log(static_cast<long double>(xl));
    INFO("x = " << x << ", " << xn << ", " << xl);
    // long double's log1pl has 11 more bits than double: its own error is below 2^-10 ulp here
    REQUIRE(ulps(log1p_table<T>[i], exact) <= 1.0L);
    REQUIRE(ulps(log1p_negative_table<T>[i], exact_n) <= 1.0L);
    REQUIRE(ulps(log_table<T>[i], exact_l) <= 1.0L);
    // and against the run-time function (glibc: within 1 ulp itself)
    REQUIRE(ulps(log1p_table<T>[i], static_cast<long double>(std::log1p(x))) <= 2.0L);
    worst = std::max({worst, ulps(log1p_table<T>[i], exact), ulps(log1p_negative_table<T>[i], exact_n),
                      ulps(log_table<T>[i], exact_l)});
  }
  WARN("log1p and log in constant evaluation: worst " << static_cast<double>(worst) << " ulp");
  STATIC_REQUIRE(ad::log1p(T(0)) == T(0));
  STATIC_REQUIRE(ad::log(T(1)) == T(0));
}

TEST_CASE("math: long double log1p and log in constant evaluation within 2 ulp of libm's", "[math]") {
  using T = long double;
  for (std::size_t i = 0; i < table_size; ++i) {
    const T x = input<T>(i, -60, 30), xl = input<T>(i, -70, 70);
    INFO("x = " << x << ", " << xl);
    REQUIRE(ulps(log1p_table<T>[i], std::log1p(x)) <= 2.0L);
    REQUIRE(ulps(log_table<T>[i], std::log(xl)) <= 2.0L);
  }
}

TEST_CASE("tanh: long double's constant path within 4 ulp of std::tanh", "[math][tanh]") {
  using T = long double;
  if constexpr (std::numeric_limits<T>::digits == 53) {
    WARN("long double is double here: tanh_ieee in both, nothing to compare");
  } else {
    constexpr auto tanh_table = table<T>([](T x) { return ad::tanh_constant(x / 8); }, -30, 8);
    constexpr auto tanh_negative = table<T>([](T x) { return ad::tanh_constant(-x / 8); }, -30, 8);
    long double worst = 0;
    for (std::size_t i = 0; i < table_size; ++i) {
      const T x = input<T>(i, -30, 8) / 8;
      INFO("x = " << x);
      REQUIRE(ulps(tanh_table[i], std::tanh(x)) <= 4.0L);
      REQUIRE(tanh_negative[i] == -tanh_table[i]);
      worst = std::max(worst, ulps(tanh_table[i], std::tanh(x)));
    }
    WARN("long double tanh in constant evaluation: worst " << static_cast<double>(worst) << " ulp");
  }
}
