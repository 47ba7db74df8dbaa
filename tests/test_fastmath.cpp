// The library under -ffast-math (compiled into attn_exp_fastmath_tests, whose every file has the
// flag): what docs/errors.md ("Under -ffast-math") says still holds. The compiler may assume no
// value is NaN or ±inf here, so the checks look at bits, never at x != x or std::isnan.

#include <attn/attn.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "attn_catch.hpp"
#include "gelu_scan.hpp"

namespace {
/// β values that are not finite, made from their bits (a NaN of each sign, ±inf).
std::vector<double> non_finite_betas() {
  return {std::bit_cast<double>(std::uint64_t{0x7FF8000000000000u}),
          std::bit_cast<double>(std::uint64_t{0xFFF8000000000001u}),
          std::bit_cast<double>(std::uint64_t{0x7FF0000000000000u}),
          std::bit_cast<double>(std::uint64_t{0xFFF0000000000000u})};
}
}  // namespace

TEST_CASE("fast-math: a beta that is not finite is refused, found from its bits", "[fastmath][beta]") {
  const std::vector<double> x{0, 1, 2};
  const attn::Matrix<double> notes{{1, 0}, {0, 1}, {1, 1}};
  const attn::Matrix<double, 3, 2> fixed_notes{{1, 0}, {0, 1}, {1, 1}};
  const std::vector<double> q{0.5, -1};
  for (const double beta : non_finite_betas()) {
    std::vector<double> out(3, 7.0), w(3, 7.0), c(2, 7.0);
    const std::vector<double> before = out;
    REQUIRE_THROWS_AS(attn::softmax(x, out, {.beta = beta}), attn::domain_error);
    REQUIRE_THROWS_AS(attn::log_softmax(x, out, {.beta = beta}), attn::domain_error);
    REQUIRE_THROWS_AS((void)attn::logsumexp(x, {.beta = beta}), attn::domain_error);
    REQUIRE(std::memcmp(out.data(), before.data(), sizeof(double) * 3) == 0);
    REQUIRE_THROWS_AS(attn::attend(q, notes, attn::dot, out, w, c, {.beta = beta}), attn::domain_error);
    REQUIRE_THROWS_AS((void)attn::attend(q, fixed_notes, attn::dot, {.beta = beta}), attn::domain_error);
    REQUIRE_THROWS_AS((void)attn::attend_partial(q, notes, attn::dot, {.beta = beta}), attn::domain_error);
  }
  // finite as a double, not as a float: refused for float
  const std::vector<float> xf{0, 1};
  REQUIRE_THROWS_AS(attn::softmax(xf, {.beta = 1e39}), attn::domain_error);
  // finite input and β: the documented numbers (here e and 1 over 1 + e)
  const auto w = attn::softmax(std::vector<double>{0, 1});
  REQUIRE(std::fabs(w[1] - 0.7310585786300049) < 4 * std::numeric_limits<double>::epsilon());
}

TEST_CASE("fast-math: the throw_error policy throws before anything is written", "[fastmath][mask]") {
  // Every note scores −inf (an infinite key entry): no note is kept, and under throw_error the
  // call must throw before it writes. The check finds −inf on the bits, which the compiler may not
  // fold away as it may fold s == −inf here.
  const double inf = std::numeric_limits<double>::infinity();
  const attn::Matrix<double> notes{{-inf, 0}, {-inf, 1}};
  const attn::Matrix<double> queries{{1, 0}, {2, 0.5}};
  const attn::options throwing{.if_all_masked = attn::all_masked_policy::throw_error};
  const auto untouched = [](const double* p, std::size_t n) {  // every entry still 7, bit for bit
    for (std::size_t i = 0; i < n; ++i)
      if (std::bit_cast<std::uint64_t>(p[i]) != std::bit_cast<std::uint64_t>(7.0)) return false;
    return true;
  };
  std::vector<double> s(2, 7.0), w(2, 7.0), c(2, 7.0);
  REQUIRE_THROWS_AS(attn::attend(std::vector<double>{1, 0}, notes, attn::dot, s, w, c, throwing),
                    attn::domain_error);
  REQUIRE((untouched(s.data(), 2) && untouched(w.data(), 2) && untouched(c.data(), 2)));

  attn::Matrix<double> S(2, 2, 7.0), W(2, 2, 7.0), C(2, 2, 7.0);
  REQUIRE_THROWS_AS(attn::align(queries, notes, attn::dot, S.view(), W.view(), C.view(), throwing),
                    attn::domain_error);
  REQUIRE((untouched(S.data(), 4) && untouched(W.data(), 4) && untouched(C.data(), 4)));

  attn::Matrix<double> Y(2, 2, 7.0), A(2, 2, 7.0);
  REQUIRE_THROWS_AS(attn::scaled_dot_product_attention(queries, notes, notes,
                                                       {.out = Y.view(), .weights = A.view()}, throwing),
                    attn::domain_error);
  REQUIRE((untouched(Y.data(), 4) && untouched(A.data(), 4)));
}

TEST_CASE("fast-math: a scale that is not finite is refused, found from its bits", "[fastmath][scale]") {
  // a NaN or ±inf scale (multi_head_parameters::score, dot_scaled_by) was accepted here: the
  // check was `s - s == 0`, which the compiler may fold to true; it reads the bits now
  const attn::Matrix<double> X{{1, 0}, {0, 1}, {1, 1}}, W{{1, 0.5}, {-0.5, 1}};
  const attn::Matrix<double> queries{{1, 0}, {2, 0.5}};
  attn::multi_head_cache<double> cache;
  for (const double scale : non_finite_betas()) {
    attn::Matrix<double> Y(3, 2, 7.0), Ys(2, 2, 7.0);
    std::vector<double> s(3, 7.0), w(3, 7.0), c(2, 7.0);
    attn::multi_head_parameters<double> p{.W_Q = W.view(), .W_K = W.view(), .W_V = W.view()};
    p.score = attn::dot_scaled_by{scale};
    REQUIRE_THROWS_AS(attn::multi_head_attention(X, p, {.out = Y.view()}, cache), attn::domain_error);
    REQUIRE_THROWS_AS(attn::attend(std::vector<double>{1, 0}, X, attn::dot_scaled_by{scale}, s, w, c),
                      attn::domain_error);
    REQUIRE_THROWS_AS(attn::scaled_dot_product_attention(queries, X, X, attn::dot_scaled_by{scale}, {.out = Ys.view()}),
                      attn::domain_error);
    for (const double x : {Y(2, 1), Ys(1, 1), s[2], w[2], c[1]})
      REQUIRE(std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(7.0));
  }
  // finite as a double, not as a float
  const attn::Matrix<float> Xf(3, 2, 0.5f), Wf(2, 2, 0.25f);
  attn::Matrix<float> Yf(3, 2, 7.0f);
  attn::multi_head_cache<float> cache_f;
  attn::multi_head_parameters<float> pf{.W_Q = Wf.view(), .W_K = Wf.view(), .W_V = Wf.view()};
  pf.score = attn::dot_scaled_by{1e39};
  REQUIRE_THROWS_AS(attn::multi_head_attention(Xf, pf, {.out = Yf.view()}, cache_f), attn::domain_error);
  REQUIRE(Yf(2, 1) == 7.0f);
}

TEMPLATE_TEST_CASE("fast-math: GELU and its slope stay finite and right for every finite x", "[fastmath][activations]",
                   float, double) {
  // No intermediate overflows for a finite x (beyond |x| = 10⁶ both GELUs are x or −0), so the
  // assumption that no inf arises holds, and the values are those of the build without the flag
  // to within the reordering it allows (a few ε, far inside the bounds below). Finiteness is
  // read from the bits.
  using T = TestType;
  using ld = long double;
  const auto finite_bits = [](T v) {
    if constexpr (sizeof(T) == 4)
      return (std::bit_cast<std::uint32_t>(v) & 0x7F800000u) != 0x7F800000u;
    else
      return (std::bit_cast<std::uint64_t>(v) & 0x7FF0000000000000u) != 0x7FF0000000000000u;
  };
  const ld tol = sizeof(T) == 4 ? 1e-5L : 1e-12L;
  for (const T x : {-std::numeric_limits<T>::max(), T(-1e30), T(-1e7), T(-2e6), T(-50), T(-10), T(-3), T(-1), T(-1e-3),
                    T(0), T(1e-3), T(0.5), T(1), T(3), T(10), T(50), T(2e6), T(1e30), std::numeric_limits<T>::max()}) {
    INFO("x = " << static_cast<double>(x));
    for (const auto a : {attn::activation::gelu, attn::activation::gelu_tanh}) {
      const T y = attn::activate(a, x), d = attn::activation_derivative(a, x);
      CHECK(finite_bits(y));
      CHECK(finite_bits(d));
      const ld X = x, cdf = 0.5L * std::erfc(-X / std::sqrt(2.0L));
      if (a == attn::activation::gelu) {
        CHECK(std::abs(static_cast<ld>(y) - X * cdf) <= tol * std::abs(X * cdf) + 1e-300L);
        const ld pdf = std::abs(X) < 1e100L ? std::exp(-X * X / 2) / std::sqrt(2 * 3.14159265358979323846L) : 0;
        CHECK(std::abs(static_cast<ld>(d) - (cdf + X * pdf)) <= tol * (cdf + std::abs(X * pdf)) + 1e-300L);
      } else if (std::abs(X) > 10) {  // the tanh form: x or 0, slope 1 or 0, beyond ±10 to the tolerance
        CHECK(std::abs(static_cast<ld>(y) - (X > 0 ? X : 0)) <= tol * std::abs(X) + 1e-30L);
        CHECK(std::abs(static_cast<ld>(d) - (X > 0 ? 1 : 0)) <= tol + 1e-30L);
      }
    }
  }
}

TEST_CASE("fast-math: the initialisation's numbers are the same bits as without the flag", "[fastmath][init]") {
  // random_uniform(√(6/256), 11, 1, n), computed in Python (bits modulo 2⁶⁴, the double product,
  // its float32 rounding): the seed is read at run time, so the flag's code computes them
  volatile std::uint64_t seed = 11;
  const double bound = 0.15309310892394862;  // √(6/256), correctly rounded
  const std::uint64_t n[] = {0, 1, 2, 3, 1000};
  const double as_double[] = {-0.054737192768924345, -0.11278515709378659, -0.07090660525741713,
                              -0.07096986258363175, -0.027286651095667743};
  const std::uint32_t as_float[] = {0xbd60341bu, 0xbde6fbe8u, 0xbd91377bu, 0xbd9158a6u, 0xbcdf8841u};
  for (std::size_t k = 0; k < 5; ++k) {
    REQUIRE(attn::random_uniform<double>(bound, seed, 1, n[k]) == as_double[k]);
    REQUIRE(std::bit_cast<std::uint32_t>(attn::random_uniform<float>(bound, seed, 1, n[k])) == as_float[k]);
  }
}

TEST_CASE("fast-math: GELU (erf) in float, every 64th block of floats, within the bounds of the build without it",
          "[fastmath][activations]") {
  // tests/gelu_scan.hpp's checks without the NaNs and the sign of zero, which -ffast-math
  // does not keep; the bounds of test_activations.cpp (8 ulp, the slope 5 ulp of Φ + |x|φ):
  // detail/erfc.hpp's arithmetic has no operation -ffast-math may fold (the exact split of s,
  // the exponential's reduction are opaque to reassociation: exp_split_scaled).
  constexpr std::uint64_t spread = attn_test::sampled_spread * (ATTN_EXP_TEST_EVERY_FLOAT ? 1 : 8);
  const auto all = attn_test::scan_on_two_threads<attn_test::gelu_scan>(attn_test::scan_gelu_floats, spread,
                                                                        attn_test::gelu_scan_args{8.0, 5.0, false});
  INFO(attn_test::scan_summary(all) << "; slope: max error " << all.max_err_slope << " ulp");
  CHECK(all.failures == 0);
  CHECK(all.differ == 0);
  CHECK(all.compared > 0);
}

TEST_CASE("fast-math: the training pieces refuse non-finite hyper-parameters and logits, found from their bits",
          "[fastmath][training]") {
  // docs/errors.md, "Training": every such check reads bits (finite_as, is_minus_infinity, |x|'s
  // bits above inf's), so it holds where the compiler assumes no NaN or inf
  const double inf = std::bit_cast<double>(std::uint64_t{0x7FF0000000000000u});
  std::vector<double> p = {1, 2}, g = {0.5, -0.5}, m(2), v(2);
  attn::adamw_state<double> s{m, v};
  attn::sgd_state<double> none;
  attn::random_generator gen{1};
  const std::vector<double> z = {0, 1};
  for (const double bad : non_finite_betas()) {
    REQUIRE_THROWS_AS(attn::adamw_step(p, g, s, {.lr = bad}), attn::domain_error);
    REQUIRE_THROWS_AS(attn::adamw_step(p, g, s, {.beta2 = bad}), attn::domain_error);
    REQUIRE_THROWS_AS(attn::adamw_step(p, g, s, {.eps = bad}), attn::domain_error);
    REQUIRE_THROWS_AS(attn::sgd_step(p, g, none, {.momentum = bad}), attn::domain_error);
    REQUIRE_THROWS_AS(attn::sgd_step(p, g, none, {.dampening = bad}), attn::domain_error);
    REQUIRE_THROWS_AS(attn::sample(z, gen, {.temperature = bad}), attn::domain_error);
    REQUIRE_THROWS_AS(attn::sample(z, gen, {.top_p = bad}), attn::domain_error);
    if (bad != -inf) {  // NaN and +inf logits; −inf is a token of probability 0
      const std::vector<double> w = {0, bad};
      REQUIRE_THROWS_AS(attn::sample(w, gen), attn::domain_error);
      REQUIRE_THROWS_AS(attn::greedy(w), attn::domain_error);
    }
    if (bad != inf) REQUIRE_THROWS_AS(attn::clip_grad_norm(g, bad), attn::domain_error);
  }
  REQUIRE_THROWS_AS(attn::greedy(std::vector<double>{-inf, -inf}), attn::domain_error);
  REQUIRE(p == std::vector<double>{1, 2});
  REQUIRE(s.step == 0);
  REQUIRE(attn::clip_grad_norm(g, inf) > 0);  // +inf: nothing scaled
  REQUIRE(g == std::vector<double>{0.5, -0.5});
}
