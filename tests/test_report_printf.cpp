// The report's numbers where the standard library has no floating-point std::to_chars (the
// libc++ of emscripten 3.1.6, which compiles the lesson page): report::detail::printf_chars_string
// must write fixed notation exactly as to_chars does, and a shortest form that reads back as the
// same number; the SVG's legend ticks ("%.*g" at 10) as to_chars' general form at 10 digits. Checked
// here, natively, against the to_chars these compilers have.

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "attn/report/format.hpp"
#include "attn_catch.hpp"

namespace rd = attn::report::detail;

namespace {
std::string general10(double x) {
  std::array<char, 64> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), x, std::chars_format::general, 10);
  return std::string(buf.data(), r.ptr);
}
}  // namespace

TEST_CASE("report: printf's fixed notation is to_chars', digit for digit", "[report][printf]") {
  // Doubles over 40 binary orders of magnitude around 1 (where lessons' numbers are), both signs,
  // 0 to 17 decimals; then the exact ties, which both round to even on the exact value
  // (report::fixed rounds ties away from zero itself, on these digits).
  std::mt19937_64 random(20261205);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-20, 20), decimals(0, 17), sign(0, 1);
  for (int i = 0; i < 20000; ++i) {
    const double x = (sign(random) != 0 ? -1 : 1) * std::ldexp(mantissa(random), exponent(random));
    const int d = decimals(random);
    INFO("x = " << rd::to_chars_string(x) << ", decimals " << d);
    REQUIRE(rd::printf_chars_string(x, d) == rd::to_chars_string(x, d));
  }
  for (const double x : {0.5, 1.5, 2.5, -2.5, 0.0625, 0.125, -0.375, 1e-300, 0.0, -0.0, 123456789.5})
    for (int d = 0; d <= 4; ++d) {
      INFO("x = " << rd::to_chars_string(x) << ", decimals " << d);
      REQUIRE(rd::printf_chars_string(x, d) == rd::to_chars_string(x, d));
    }
  REQUIRE(rd::printf_chars_string(0.7361247243125939, 6) == "0.736125");  // E1's share of tea
}

TEST_CASE("report: printf's shortest form reads back as the same number", "[report][printf]") {
  std::mt19937_64 random(5);
  for (int i = 0; i < 20000; ++i) {
    double x;
    do {
      const std::uint64_t bits = random();
      std::memcpy(&x, &bits, sizeof x);
    } while (!std::isfinite(x));
    const std::string s = rd::printf_chars_string(x);
    INFO(s);
    REQUIRE(std::strtod(s.c_str(), nullptr) == x);
    // no more significant digits than to_chars' shortest form needs
    const std::string t = rd::to_chars_string(x);
    const auto digits = [](const std::string& text) {
      int n = 0;
      bool leading = true;
      for (const char c : text.substr(0, text.find_first_of("eE"))) {
        if (c < '0' || c > '9') continue;
        if (c != '0') leading = false;
        if (!leading) ++n;
      }
      return n;
    };
    REQUIRE(digits(s) <= std::max(digits(t), 1));
  }
  REQUIRE(rd::printf_chars_string(0.1f) == "0.1");  // float: the fewest digits for the float
}

TEST_CASE("report: the SVG ticks' %.*g at 10 digits is to_chars' general form", "[report][printf]") {
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> value(-1000.0, 1000.0);
  for (int i = 0; i < 20000; ++i) {
    const double x = value(random) * std::pow(10.0, static_cast<int>(random() % 30) - 15);
    INFO(general10(x));
    REQUIRE(rd::printf_string("%.*g", 10, x) == general10(x));
  }
}
