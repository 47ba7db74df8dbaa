// Must NOT compile: the dot product of two fixed sizes that disagree (3 and 4). The compiler's
// message must name the rule, `compatible_extents` (the CTest test
// compile_fail_fixed_size_mismatch checks it).
//
// tests/compile_fail/CMakeLists.txt builds this file twice:
//   - with ATTN_COMPILE_FAIL defined: must fail, with a message matching `compatible_extents`;
//   - without it (the control): must compile, which proves that the failure comes from the
//     marked line and not from a typo or a missing include.

#include <attn/attn.hpp>

int main() {
  const attn::Vector<double, 3> a{1.0, 2.0, 3.0};
#if defined(ATTN_COMPILE_FAIL)
  const attn::Vector<double, 4> b{1.0, 1.0, 1.0, 1.0};
#else
  const attn::Vector<double, 3> b{1.0, 1.0, 1.0};
#endif
  const double d = attn::dot(a, b);
  return d == 6.0 ? 0 : 1;
}
