// The one Catch2 main of attn's tests: compiled once (the object library attn_test_main) and
// linked into every test executable.

// Catch2 v2: this translation unit holds Catch2's implementation and its main().
// (Catch2 v3 ignores the macro; its implementation is the compiled Catch2::Catch2 library.)
#define CATCH_CONFIG_MAIN
#include "attn_catch.hpp"

#if ATTN_CATCH2_V3
#include <catch2/catch_session.hpp>

int main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
#endif
