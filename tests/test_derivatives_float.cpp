// Derivatives in float: the suite of test_derivatives.cpp at float
// (a file of its own so that the two compile in parallel).
#include "derivatives_suite.hpp"

// ---------------------------------------------------------------------------------------------
// Every score, every derivative, three types
// ---------------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("derivatives agree with finite differences and with each other, every score (float)",
                   "[derivatives]", float) {
  SECTION("dot") { require_suite<TestType, dot_case>(); }
  SECTION("scaled_dot") { require_suite<TestType, scaled_dot_case>(); }
  SECTION("general") { require_suite<TestType, general_case>(); }
  SECTION("additive") { require_suite<TestType, additive_case>(); }
  SECTION("a user's score without parameters") { require_suite<TestType, distance_case>(); }
  SECTION("a user's score with parameters") { require_suite<TestType, weighted_dot_case>(); }
}

TEST_CASE("derivative agreement table (float)", "[derivatives-report][.]") {
  std::printf("%-18s %-12s %-26s %-26s\n", "score", "type", "finite differences (tol)", "Jt g vs backward (tol)");
  const auto row = [](const char* score, const char* type, const auto& t, double tol_fd, double tol_vjp) {
    std::printf("%-18s %-12s %9.2e (%8.2e)      %9.2e (%8.2e)   worst at %s[%zu,%zu] / %s[%zu]\n", score, type,
                static_cast<double>(t.fd.max_rel_error), tol_fd, static_cast<double>(t.vjp.max_rel_error), tol_vjp,
                t.fd.worst_rel.input.c_str(), t.fd.worst_rel.output, t.fd.worst_rel.index,
                t.vjp.worst_rel.input.c_str(), t.vjp.worst_rel.index);
  };
  const auto all = [&](auto tag, const char* type) {
    using T = decltype(tag);
    const double a = static_cast<double>(attn::gradcheck_tolerance<T>());
    const double b = static_cast<double>(attn::vjp_tolerance<T>());
    row("dot", type, run_suite<T>(maker<T, dot_case>(), true), a, b);
    row("scaled_dot", type, run_suite<T>(maker<T, scaled_dot_case>(), true), a, b);
    row("general", type, run_suite<T>(maker<T, general_case>(), false), a, b);
    row("additive", type, run_suite<T>(maker<T, additive_case>(), false), a, b);
    row("user distance", type, run_suite<T>(maker<T, distance_case>(), true), a, b);
    row("user weighted_dot", type, run_suite<T>(maker<T, weighted_dot_case>(), true), a, b);
  };
  all(float{}, "float");
}

