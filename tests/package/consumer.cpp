// The program both package consumers build and run: it needs only attn's headers and C++20.
#include <attn/attn.hpp>

int main() {
  const attn::Vector<double, 2> q{3.0, 4.0};
  return attn::dot(q, q) == 25.0 ? 0 : 1;
}
