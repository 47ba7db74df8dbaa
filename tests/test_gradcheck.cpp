// The finite-difference checker itself (attn/gradcheck.hpp): its step and tolerances, and that it
// finds a wrong Jacobian entry and says where.
#include <cmath>
#include <limits>
#include <span>

#include "attn/attn.hpp"
#include "attn/gradcheck.hpp"
#include "attn_catch.hpp"

using attn::Matrix;
using attn::Vector;

TEST_CASE("gradcheck: the step and the tolerances follow from epsilon", "[derivatives][gradcheck]") {
  REQUIRE_THAT(attn::gradcheck_step(0.0), Catch::Matchers::WithinRel(std::cbrt(0x1p-52), 1e-15));
  REQUIRE_THAT(attn::gradcheck_step(-8.0), Catch::Matchers::WithinRel(8 * std::cbrt(0x1p-52), 1e-15));
  REQUIRE_THAT(attn::gradcheck_tolerance<double>(), Catch::Matchers::WithinRel(1e-7, 1e-12));
  // float: 1e-7·(2^29)^{2/3}; long double (x87, ε = 2^-63): 1e-7·(2^-11)^{2/3}
  const double f_ratio = static_cast<double>(std::numeric_limits<float>::epsilon()) / 0x1p-52;
  REQUIRE_THAT(static_cast<double>(attn::gradcheck_tolerance<float>()),
               Catch::Matchers::WithinRel(1e-7 * std::cbrt(f_ratio * f_ratio), 1e-6));
  const double ld_ratio = static_cast<double>(std::numeric_limits<long double>::epsilon()) / 0x1p-52;
  REQUIRE_THAT(static_cast<double>(attn::gradcheck_tolerance<long double>()),
               Catch::Matchers::WithinRel(1e-7 * std::cbrt(ld_ratio * ld_ratio), 1e-12));
  REQUIRE_THAT(attn::vjp_tolerance<double>(), Catch::Matchers::WithinRel(1e-12, 1e-12));
  REQUIRE_THAT(static_cast<double>(attn::vjp_tolerance<float>()), Catch::Matchers::WithinRel(1e-12 * f_ratio, 1e-6));
}

TEST_CASE("gradcheck: finds a wrong Jacobian entry and says where", "[derivatives][gradcheck]") {
  // f(x) = (x0·x1, sin x1): J = [[x1, x0], [0, cos x1]]
  const auto f = [](std::span<const double> x) { return Vector<double, 2>{x[0] * x[1], std::sin(x[1])}; };
  const Vector<double, 2> x{1.5, -0.25};
  Matrix<double, 2, 2> J{{-0.25, 1.5}, {0, std::cos(-0.25)}};
  const auto good = attn::check_jacobian(f, x, J, "x");
  REQUIRE(good.passed(attn::gradcheck_tolerance<double>()));
  REQUIRE(good.max_rel_error < 1e-9);
  J(1, 1) *= 1.001;
  const auto bad = attn::check_jacobian(f, x, J, "x");
  REQUIRE_FALSE(bad.passed(attn::gradcheck_tolerance<double>()));
  REQUIRE(bad.worst_rel.input == "x");
  REQUIRE(bad.worst_rel.output == 1);
  REQUIRE(bad.worst_rel.index == 1);
  REQUIRE_THAT(bad.max_abs_error, Catch::Matchers::WithinRel(0.001 * std::cos(-0.25), 1e-6));
  // a NaN never passes
  J(0, 0) = std::numeric_limits<double>::quiet_NaN();
  REQUIRE_FALSE(attn::check_jacobian(f, x, J).passed(1.0));
  // merging keeps the worst, with its place
  auto r = good;
  r.merge(bad);
  REQUIRE(r.max_rel_error == bad.max_rel_error);
  REQUIRE(r.worst_rel.index == 1);
}
