// Must NOT compile: attn below C++20. The compiler's first diagnostic must be the #error of
// attn/detail/config.hpp ("attn needs C++20: compile with -std=c++20"), and at most the stop
// that follows it may come after (the CTest test compile_fail_below_cxx20 checks both).
//
// tests/compile_fail/CMakeLists.txt builds this file twice:
//   - as C++17 (ATTN_COMPILE_FAIL is defined too, unused): must fail with that one message;
//   - as C++20 (the control): must compile, so the failure comes from the standard alone.

#include <attn/attn.hpp>

int main() {
  const attn::Vector<double, 2> q{3.0, 4.0};
  return attn::dot(q, q) == 25.0 ? 0 : 1;
}
