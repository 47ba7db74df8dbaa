#pragma once
// The options of the constant-evaluation tests (test_softmax.cpp, test_attention.cpp): β = 2 and
// the middle of three entries masked out, usable in a constant expression.
#include "attn/softmax.hpp"

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
