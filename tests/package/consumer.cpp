// The program both package consumers build and run: it only needs attn's headers and C++20.
#if __has_include(<attn/attn.hpp>)
#include <attn/attn.hpp>
#else
#include <attn/extent.hpp>  // until the umbrella header lands
#endif

int main() { return attn::compatible_extents<3, attn::dynamic> ? 0 : 1; }
