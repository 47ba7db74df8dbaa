// ReLU, GELU (erf) and GELU's tanh form (attn/activations.hpp; the unit's §9, W9): values and
// slopes against the formulas written out here in long double over every octave of finite
// inputs, the slopes against central differences, the backward as dY ⊙ act′(X), errors.
// Tolerances from the math: attn forms f(x) from x rounded into the arguments of erfc, exp and
// the sigmoid (x/√2, x²/2, u(x)), so it is backward stable — f(x(1 + δ)) with |δ| a few ε — and
// its error is the rounding of its few operations, 16ε·|f|, plus the condition of f at x,
// |x·f′(x)|·4ε (x ≪ 0: f is about e^(−x²/2), whose condition x² is 100 at x = −10). The slopes
// likewise with f′ and f″ (for the tanh form f″ by a central difference of the long double slope,
// used only to size the bound), and 16ε over the magnitudes of the slope's two terms, which have
// opposite signs for x < 0.
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

#include "attn/attn.hpp"
#include "attn/gradcheck.hpp"
#include "attn/report/format.hpp"
#include "attn_catch.hpp"
#include "gelu_scan.hpp"

using ld = long double;

namespace {

template <class T>
constexpr ld eps() {
  return static_cast<ld>(std::numeric_limits<T>::epsilon());
}

const ld sqrt2 = std::sqrt(2.0L), pi = 3.141592653589793238462643383279502884L;

ld gelu_ref(ld x) { return x * 0.5L * std::erfc(-x / sqrt2); }
ld gelu_slope_ref(ld x) { return 0.5L * std::erfc(-x / sqrt2) + x * std::exp(-x * x / 2) / std::sqrt(2 * pi); }
ld sigmoid_ref(ld z) { return z >= 0 ? 1 / (1 + std::exp(-z)) : std::exp(z) / (1 + std::exp(z)); }
ld u_of(ld x) { return std::sqrt(2 / pi) * (x + 0.044715L * x * x * x); }
ld gelu_tanh_ref(ld x) { return x * sigmoid_ref(2 * u_of(x)); }
// the slope's two terms: σ(2u) and 2x·u′·σ(2u)σ(−2u)
struct two_terms {
  ld a, b;
};
two_terms gelu_tanh_slope_terms(ld x) {
  const ld z = 2 * u_of(x), du = std::sqrt(2 / pi) * (1 + 3 * 0.044715L * x * x);
  const ld ss = sigmoid_ref(z) * sigmoid_ref(-z);  // e^(−|z|) beats any power of x: 0·x³ is 0
  return {sigmoid_ref(z), ss == 0 ? 0 : 2 * x * du * ss};
}

// Where an intermediate (Φ, φ, σ(2u)σ(−2u)) is subnormal in T it carries an absolute error of
// up to T's smallest subnormal, which the factors after it multiply: x, and 2x·u′ for the tanh
// form's slope. (Beyond |x| = 1000 every such intermediate is 0 and the results exact.)
template <class T>
ld subnormal_floor(ld x) {
  const ld factor = std::abs(x) < 1000 ? 4 + 4 * std::abs(x) * (1 + 0.14L * x * x) : 1;
  return static_cast<ld>(std::numeric_limits<T>::denorm_min()) * factor;
}

// inputs over every octave of T's finite range, both signs, and 0
template <class T>
std::vector<T> octaves() {
  std::vector<T> xs{T(0), -T(0)};
  std::mt19937_64 rng(95);
  std::uniform_real_distribution<double> frac(1, 2);
  for (int e = std::numeric_limits<T>::min_exponent - 1; e < std::numeric_limits<T>::max_exponent; ++e)
    for (int k = 0; k < (e > -64 && e < 64 ? 8 : 1); ++k) {  // dense where the functions bend
      const T x = std::ldexp(static_cast<T>(frac(rng)), e - 1);
      xs.push_back(x);
      xs.push_back(-x);
    }
  xs.push_back(std::numeric_limits<T>::max());
  xs.push_back(-std::numeric_limits<T>::max());
  return xs;
}

}  // namespace

TEST_CASE("GELU(1): 0.841 exact and tanh form, which differ in the fourth decimal (W9)", "[activations][unit]") {
  const double exact = attn::activate(attn::activation::gelu, 1.0);
  const double tanh_form = attn::activate(attn::activation::gelu_tanh, 1.0);
  CHECK(attn::report::fixed(exact, 3) == "0.841");
  CHECK(attn::report::fixed(tanh_form, 3) == "0.841");
  CHECK(attn::report::fixed(exact, 4) == "0.8413");
  CHECK(attn::report::fixed(tanh_form, 4) == "0.8412");
  CHECK(std::abs(static_cast<ld>(exact) - gelu_ref(1)) <= 4 * eps<double>());
  CHECK(std::abs(static_cast<ld>(tanh_form) - gelu_tanh_ref(1)) <= 4 * eps<double>());
}

TEMPLATE_TEST_CASE("activations: values over every octave against long double", "[activations]", float, double,
                   long double) {
  using T = TestType;
  for (const T x : octaves<T>()) {
    INFO("x = " << static_cast<ld>(x));
    const ld X = x;
    CHECK(attn::activate(attn::activation::relu, x) == (x < T(0) ? T(0) : x));
    const ld g = attn::activate(attn::activation::gelu, x);
    const ld gt = attn::activate(attn::activation::gelu_tanh, x);
    const ld floor = subnormal_floor<T>(X);
    const two_terms tt = gelu_tanh_slope_terms(X);
    CHECK(std::abs(g - gelu_ref(X)) <=
          16 * eps<T>() * std::abs(gelu_ref(X)) + 4 * eps<T>() * std::abs(X * gelu_slope_ref(X)) + floor);
    CHECK(std::abs(gt - gelu_tanh_ref(X)) <=
          16 * eps<T>() * std::abs(gelu_tanh_ref(X)) + 4 * eps<T>() * std::abs(X * (tt.a + tt.b)) + floor);
    // x ≪ 0: tiny and negative, not 0 (1 + erf, 1 + tanh would give 0 or noise), until it underflows
    if (X < -2 && gelu_ref(X) < -1e3L * std::numeric_limits<T>::min()) CHECK(g < 0);
  }
  // GELU(−10) = −7.62e−23 (1 + erf(−10/√2) in double is 0): within its condition, 100, times 4ε
  CHECK(std::abs(attn::activate(attn::activation::gelu, -10.0) / static_cast<double>(gelu_ref(-10)) - 1) <= 1e-13);
  CHECK(attn::activate(attn::activation::gelu, -10.0) < -7e-23);
}

TEMPLATE_TEST_CASE("activations: slopes over every octave against long double and central differences",
                   "[activations][derivatives]", float, double, long double) {
  using T = TestType;
  for (const T x : octaves<T>()) {
    INFO("x = " << static_cast<ld>(x));
    const ld X = x;
    CHECK(attn::activation_derivative(attn::activation::relu, x) == (x > T(0) ? T(1) : T(0)));
    const ld floor = subnormal_floor<T>(X);
    const ld d = attn::activation_derivative(attn::activation::gelu, x);
    const ld want = gelu_slope_ref(X);
    // Φ + xφ: two terms, of opposite signs for x < 0
    const ld mag = 0.5L * std::erfc(-X / sqrt2) + std::abs(X) * std::exp(-X * X / 2) / std::sqrt(2 * pi);
    const ld pdf = std::exp(-X * X / 2) / std::sqrt(2 * pi);
    const ld second = pdf == 0 ? 0 : pdf * (2 - X * X);  // GELU″ = φ(2 − x²)
    CHECK(std::abs(d - want) <= 16 * eps<T>() * mag + 4 * eps<T>() * std::abs(X * second) + floor);
    const ld dt = attn::activation_derivative(attn::activation::gelu_tanh, x);
    const two_terms tt = gelu_tanh_slope_terms(X);
    const ld h = 1e-6L * std::max(1.0L, std::abs(X));
    const two_terms up = gelu_tanh_slope_terms(X + h), down = gelu_tanh_slope_terms(X - h);
    const ld second_t = std::abs(X) < 1e300L ? ((up.a + up.b) - (down.a + down.b)) / (2 * h) : 0;
    CHECK(std::abs(dt - (tt.a + tt.b)) <=
          16 * eps<T>() * (std::abs(tt.a) + std::abs(tt.b)) + 4 * eps<T>() * std::abs(X * second_t) + floor);
    CHECK(std::isfinite(static_cast<double>(d)));
    CHECK(std::isfinite(static_cast<double>(dt)));
  }
  // against central differences of the values (gradcheck's step and tolerance)
  for (const auto a : {attn::activation::relu, attn::activation::gelu, attn::activation::gelu_tanh})
    for (const T x0 : {T(-7.5), T(-3), T(-1.25), T(-0.5), T(-0.1), T(0.3), T(1), T(2.5), T(6)}) {
      const std::vector<T> x{x0};
      const auto f = [&](std::span<const T> v) { return std::vector<T>{attn::activate(a, v[0])}; };
      attn::Matrix<T> J(1, 1);
      J(0, 0) = attn::activation_derivative(a, x0);
      INFO("activation " << static_cast<int>(a) << ", x = " << static_cast<ld>(x0));
      CHECK(attn::check_jacobian(f, x, J).passed(attn::gradcheck_tolerance<T>()));
    }
}

TEST_CASE("activations: ReLU′(0) = 0; NaN and ±inf", "[activations][errors]") {
  using attn::activation;
  CHECK(attn::activation_derivative(activation::relu, 0.0) == 0.0);
  CHECK(attn::activation_derivative(activation::relu, -0.0) == 0.0);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const auto a : {activation::relu, activation::gelu, activation::gelu_tanh}) {
    CHECK(std::isnan(attn::activate(a, nan)));
    CHECK(std::isnan(attn::activation_derivative(a, nan)));
    CHECK(attn::activate(a, inf) == inf);
    CHECK(attn::activation_derivative(a, inf) == 1.0);
    CHECK(attn::activate(a, -inf) == 0.0);
    CHECK(attn::activation_derivative(a, -inf) == 0.0);
  }
}

TEMPLATE_TEST_CASE("activate and activation_backward on matrices: entry by entry, in place, accumulating",
                   "[activations][derivatives]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(96);
  std::normal_distribution<double> normal(0, 3);
  attn::Matrix<T> X(4, 5), G(4, 5);
  for (std::size_t k = 0; k < X.size(); ++k) {
    X.data()[k] = static_cast<T>(normal(rng));
    G.data()[k] = static_cast<T>(normal(rng));
  }
  for (const auto a : {attn::activation::relu, attn::activation::gelu, attn::activation::gelu_tanh}) {
    attn::Matrix<T> Y(4, 5), inplace = X, dX(4, 5, T(2)), dG = G;
    attn::activate(a, X, Y);
    attn::activate(a, inplace, inplace);
    attn::activation_backward(a, X, G, dX, true);
    attn::activation_backward(a, X, dG, dG);  // into dY itself
    for (std::size_t k = 0; k < X.size(); ++k) {
      const T y = attn::activate(a, X.data()[k]), slope = attn::activation_derivative(a, X.data()[k]);
      const T s = G.data()[k] * slope;
      CHECK(Y.data()[k] == y);
      CHECK(inplace.data()[k] == y);
      // accumulating, dX + dY·f′(x): one rounding of the sum, or none of the product where the
      // build fuses the two into an FMA (-march=native: attn_test::fma_contracted)
      CHECK((dX.data()[k] == T(2) + s ||
             (attn_test::fma_contracted() && dX.data()[k] == std::fma(G.data()[k], slope, T(2)))));
      CHECK(dG.data()[k] == s);
    }
  }
}

TEST_CASE("activations: shapes and overlaps are refused by name, nothing written", "[activations][errors]") {
  attn::Matrix<double> X(2, 3, 1.0), Y(3, 2, 5.0), G(2, 3, 1.0), D(2, 2, 5.0);
  REQUIRE_THROWS_MATCHES(attn::activate(attn::activation::gelu, X, Y), attn::dimension_error,
                         Catch::Matchers::Message("attn::activate: the output is 3x2 but should be 2x3"));
  REQUIRE_THROWS_MATCHES(attn::activation_backward(attn::activation::gelu, X, G, D), attn::dimension_error,
                         Catch::Matchers::Message("attn::activation_backward: dL/dX is 2x2 but should be 2x3"));
  for (std::size_t k = 0; k < Y.size(); ++k) CHECK(Y.data()[k] == 5.0);
  REQUIRE_THROWS_AS(attn::activation_backward(attn::activation::gelu, X, G, X), attn::overlap_error);
  attn::Matrix<double> Z(3, 3, 1.0);
  REQUIRE_THROWS_AS(attn::activate(attn::activation::relu, attn::MatrixView<const double>(Z.data(), 2, 3),
                                   attn::MatrixView<double>(Z.data() + 3, 2, 3)),
                    attn::overlap_error);
}

// GELU (erf) and its slope in float, every float (tests/gelu_scan.hpp says what must hold). The
// bounds are the scan's maxima over all 2^32 floats, rounded up: 7.47 and 4.44 ulp with g++ -O1
// -march=native (AVX-512: the reciprocal by rcp14 and a Newton step), 7.47 and 3.62 with g++ -O2
// for SSE2 (a division). detail/erfc.hpp carries −x²/2 exactly, so the error is that of a few
// roundings — of P, the exponential's (0.9 ulp), t's and the final products — the same at every x.
namespace {
constexpr double gelu_value_ulps = 8.0, gelu_slope_ulps = 5.0;

void check_gelu_scan(const attn_test::gelu_scan& all, std::uint64_t spread) {
  INFO(attn_test::scan_summary(all) << "; slope: max error " << all.max_err_slope << " ulp at bits 0x" << std::hex
                                    << all.worst_slope);
  CHECK(all.failures == 0);
  CHECK(all.differ == 0);
  CHECK(all.checked >= attn_test::n_scan_blocks / spread * attn_test::scan_block);
  CHECK(all.compared > 0);
  WARN("GELU float: max " << all.max_err << " ulp (bound " << gelu_value_ulps << "), slope " << all.max_err_slope
                          << " ulp of Φ + |x|φ (bound " << gelu_slope_ulps << "), over " << all.compared << " floats");
}
}  // namespace

TEST_CASE("GELU: every float, value and slope, against long double", "[.][exhaustive][activations]") {
  constexpr std::uint64_t spread = attn_test::every_float_spread;
  check_gelu_scan(attn_test::scan_on_two_threads<attn_test::gelu_scan>(
                      attn_test::scan_gelu_floats, spread,
                      attn_test::gelu_scan_args{gelu_value_ulps, gelu_slope_ulps, true}),
                  spread);
}

TEST_CASE("GELU: every 64th block of floats, value and slope, against long double", "[activations]") {
  // (every 512th unoptimized or under a sanitizer, where the long double reference is slow)
  constexpr std::uint64_t spread = attn_test::sampled_spread * (ATTN_EXP_TEST_EVERY_FLOAT ? 1 : 8);
  check_gelu_scan(attn_test::scan_on_two_threads<attn_test::gelu_scan>(
                      attn_test::scan_gelu_floats, spread,
                      attn_test::gelu_scan_args{gelu_value_ulps, gelu_slope_ulps, true}),
                  spread);
}
