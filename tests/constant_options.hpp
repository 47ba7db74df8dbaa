#pragma once
// The options of the constant-evaluation tests (test_softmax.cpp, test_attention.cpp): β = 2 and
// the middle of three entries masked out, usable in a constant expression; and whether the
// dynamic sizes' storage (std::vector) is.
#include "attn/softmax.hpp"

/// 1 where std::vector is usable in constant expressions, so that the tests may evaluate dynamic
/// sizes there; 0 under libstdc++'s debug mode (-D_GLIBCXX_DEBUG), whose vector has no constexpr
/// member (fixed sizes, masks and views stay constexpr there: docs/attention.md).
#if defined(_GLIBCXX_DEBUG)
#define ATTN_TEST_CONSTEXPR_VECTOR 0
#else
#define ATTN_TEST_CONSTEXPR_VECTOR 1
#endif

#include <array>

namespace attn_test {

/// Keeps entries 0 and 2 of three.
inline constexpr std::array<bool, 3> keep_outer{true, false, true};

/// β = 2, mask keep_outer.
constexpr attn::options beta2_middle_masked() {
  attn::options opt;
  opt.beta = 2;
  opt.mask = keep_outer;
  return opt;
}

}  // namespace attn_test
