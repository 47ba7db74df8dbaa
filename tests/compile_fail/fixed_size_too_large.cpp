// Must NOT compile: a fixed size whose numbers do not fit on the stack (2^20 floats, 4 MiB, past
// ATTN_STACK_ALLOCATION_LIMIT): attend's result would live there, and so would the Vector. The
// static_assert says to use attn::dynamic (the CTest test compile_fail_fixed_size_too_large).
// The control, with 1024 notes, compiles.

#include <attn/attn.hpp>

#include <vector>

int main() {
#if defined(ATTN_COMPILE_FAIL)
  constexpr std::size_t n = std::size_t{1} << 20;
#else
  constexpr std::size_t n = 1024;
#endif
  std::vector<float> storage(n * 4, 0.0f);
  const attn::MatrixView<const float, n, 4> notes(storage.data());
  const attn::Vector<float, 4> q{1, 0, 0, 0};
  const auto r = attn::attend(q, notes, attn::dot);
  return r.weights[0] > 0.0f ? 0 : 1;
}
