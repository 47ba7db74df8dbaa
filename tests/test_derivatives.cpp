// Derivatives of attention, checked: every Jacobian and every backward against central finite
// differences (attn/gradcheck.hpp), every Jacobian against its backward (Jᵀg = VJP), for dot,
// scaled_dot, general, additive and two scores defined in derivatives_suite.hpp, at several
// sizes and scales, with β ≠ 1 and masks.
// This file: the suite in double and long double; test_derivatives_float.cpp: the suite in float
// (two files so that they compile in parallel). The checker's own tests are test_gradcheck.cpp.
//
// `./attn_tests "[derivatives-report]"` prints the measured agreement per score and type.

#include "derivatives_suite.hpp"

// ---------------------------------------------------------------------------------------------
// Every score, every derivative, three types
// ---------------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("derivatives agree with finite differences and with each other, every score (double, long double)",
                   "[derivatives]", double, long double) {
  SECTION("dot") { require_suite<TestType, dot_case>(); }
  SECTION("scaled_dot") { require_suite<TestType, scaled_dot_case>(); }
  SECTION("general") { require_suite<TestType, general_case>(); }
  SECTION("additive") { require_suite<TestType, additive_case>(); }
  SECTION("a user's score without parameters") { require_suite<TestType, distance_case>(); }
  SECTION("a user's score with parameters") { require_suite<TestType, weighted_dot_case>(); }
}

TEST_CASE("derivative agreement table (double, long double)", "[derivatives-report][.]") {
  print_agreement_header();
  print_agreement<double>("double");
  print_agreement<long double>("long double");
}

