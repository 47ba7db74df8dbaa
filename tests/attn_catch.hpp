#pragma once
/// \file tests/attn_catch.hpp
/// The one Catch2 include for attn's tests, so that a test reads the same under Catch2 v3 and
/// v2.13:
///   REQUIRE_THAT(x, Catch::Matchers::WithinRel(ref, tol));
///   REQUIRE_THAT(x, Catch::Matchers::WithinAbs(ref, tol));
///   GENERATE(...), TEMPLATE_TEST_CASE(...), REQUIRE_THROWS_AS(...), STATIC_REQUIRE(...).
/// Under v3 it includes only the headers those need, never <catch2/catch_all.hpp>.

// CMake says which Catch2 it linked (ATTN_CATCH2_MAJOR); otherwise look at the include path.
#if defined(ATTN_CATCH2_MAJOR)
#define ATTN_CATCH2_V3 (ATTN_CATCH2_MAJOR >= 3)
#elif __has_include(<catch2/catch_test_macros.hpp>)
#define ATTN_CATCH2_V3 1
#else
#define ATTN_CATCH2_V3 0
#endif

#if ATTN_CATCH2_V3
#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_exception.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#else
#include <catch2/catch.hpp>
#endif

namespace attn_test {
/// Whether this build fuses a·b + c into one FMA (GCC's default -ffp-contract=fast and clang's
/// -ffp-contract=on do, on a target with FMA: -march=native, -mfma, AArch64): a·a − b then
/// keeps the rounding error of a·a. Two paths give the same bits only without fusion; with it,
/// each path fuses where the compiler chooses in its own code, and they agree to rounding.
inline bool fma_contracted() {
  volatile double va = 1 + 0x1p-30;
  const double a = va;
  return a * a - (1 + 0x1p-29) != 0;
}
}  // namespace attn_test
