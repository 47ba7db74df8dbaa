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
  print_agreement_header();
  print_agreement<float>("float");
}
