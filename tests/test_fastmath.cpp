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
