#pragma once
/// \file attn/report/format.hpp
/// Numbers as text, the same in every locale (std::to_chars never reads the locale):
///   fixed(0.73612, 3)  == "0.736"   rounded half away from zero, never "-0.000"
///   shortest(0.5)      == "0.5"     the shortest text that reads back as the same number
/// and the terminal width of UTF-8 text (display_width("मैं") == 1), which tables use to line
/// up columns. Non-finite numbers are written "nan", "inf" and "-inf".

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>   // snprintf, where to_chars has no floating-point form
#include <cstdlib>  // strtod, likewise
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "attn/report/detail/unicode_width.hpp"
#include "attn/report/detail/utf8.hpp"
#include "attn/vector.hpp"

namespace attn::report {

namespace detail {

/// "-0", "-0.000", ...: a minus sign before nothing but zeros.
[[nodiscard]] inline bool is_negative_zero_text(std::string_view s) noexcept {
  if (s.empty() || s[0] != '-') return false;
  for (const char c : s.substr(1))
    if (c != '0' && c != '.') return false;
  return true;
}

/// printf(format, digits, x) as a string (the C library's, which is exact in musl and glibc).
template <class T>
[[nodiscard]] std::string printf_string(const char* format, int digits, T x) {
  const int length = std::snprintf(nullptr, 0, format, digits, static_cast<double>(x));
  if (length < 0) attn::detail::raise<std::length_error>("attn::report: a number cannot be written");
  std::string out(static_cast<std::size_t>(length) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, digits, static_cast<double>(x));
  out.pop_back();
  return out;
}

/// to_chars_string without floating-point std::to_chars, for the standard libraries that lack it
/// (the libc++ of Debian's emscripten 3.1.6, which compiles the lesson page): fixed notation is
/// "%.*f", which is x correctly rounded with ties to even as to_chars' fixed form (the same
/// text: test_report_printf.cpp); the shortest form is the fewest significant digits ("%.*g")
/// that read back as x (the same number, not always the same text: "1e+02" for 100).
template <class T>
[[nodiscard]] std::string printf_chars_string(T x, int precision = -1) {
  if (precision >= 0) return printf_string("%.*f", precision, x);
  for (int digits = 1;; ++digits) {
    std::string s = printf_string("%.*g", digits, x);
    if (digits >= std::numeric_limits<T>::max_digits10 || static_cast<T>(std::strtod(s.c_str(), nullptr)) == x)
      return s;
  }
}

/// x in fixed notation with `precision` decimals (0 or more), or, with no precision, in its
/// shortest form. The shortest form fits 128 bytes; fixed notation needs at most
/// max_exponent10 + 1 digits before the point, a sign, the point and the decimals.
template <class T>
[[nodiscard]] std::string to_chars_string(T x, int precision = -1) {
#if !defined(__cpp_lib_to_chars)
  return printf_chars_string(x, precision);
#else
  std::array<char, 128> small{};
  auto write = [&](char* first, char* last) {
    return precision < 0 ? std::to_chars(first, last, x)
                         : std::to_chars(first, last, x, std::chars_format::fixed, precision);
  };
  auto r = write(small.data(), small.data() + small.size());
  if (r.ec == std::errc()) return std::string(small.data(), r.ptr);
  std::string big(static_cast<std::size_t>(std::numeric_limits<T>::max_exponent10) + 8 +
                      static_cast<std::size_t>(precision < 0 ? 0 : precision),
                  '\0');
  r = write(big.data(), big.data() + big.size());
  if (r.ec != std::errc())
    attn::detail::raise<std::length_error>("attn::report: a number does not fit its buffer");
  big.resize(static_cast<std::size_t>(r.ptr - big.data()));
  return big;
#endif
}

/// The most digits after the point that any T's exact value has: T's smallest subnormal is
/// 2^-(digits - min_exponent), and 2^-k has exactly k decimals (1074 for a double).
template <class T>
inline constexpr int exact_decimals = std::numeric_limits<T>::digits - std::numeric_limits<T>::min_exponent;

/// x written exactly with decimals + 1 digits after the point when it lies exactly halfway
/// between two numbers of `decimals` decimals (its last digit is then 5), else "". Such an x
/// has at most decimals + 1 binary fraction digits (x·10^(d+1) = k·5 needs 2^e | 10^(d+1)), so
/// x·2^(d+1) is a whole number.
template <class T>
[[nodiscard]] std::string decimal_tie(T x, int decimals) {
  if (decimals >= exact_decimals<T>) return {};  // x ends before the digit a tie needs
  const T scaled = std::ldexp(x, decimals + 1);   // exact: a power-of-two scaling
  if (!std::isfinite(scaled) || scaled != std::trunc(scaled)) return {};
  std::string s = to_chars_string(x, decimals + 1);
  return s.back() == '5' ? s : std::string{};
}

/// Rounds the text of a tie ("-0.0625" for 3 decimals) away from zero ("-0.063"): drops the
/// final 5 and adds one in the last place left, carrying through nines ("9.95" → "10.0").
inline std::string round_tie_away(std::string s) {
  s.pop_back();
  if (s.back() == '.') s.pop_back();
  std::size_t i = s.size();
  while (i > 0) {
    char& c = s[--i];
    if (c == '.') continue;
    if (c == '-') break;
    if (c != '9') {
      ++c;
      return s;
    }
    c = '0';
  }
  s.insert(s[0] == '-' ? 1 : 0, 1, '1');  // every digit was 9
  return s;
}

}  // namespace detail

/// Returns x with exactly `decimals` digits after the point (none and no point when 0),
/// rounded half away from zero ("0.0625" → "0.063", as taught in school), in any locale.
/// A result that rounds to zero has no minus sign. NaN, +inf and −inf give "nan", "inf",
/// "-inf". A negative `decimals` counts as 0; any larger count is exact (the digits past x's
/// last one are zeros).
template <real T>
[[nodiscard]] std::string fixed(T x, int decimals) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  if (decimals < 0) decimals = 0;
  // to_chars rounds an exact tie to even; round it away from zero on its exact digits instead
  std::string s = detail::decimal_tie(x, decimals);
  // past exact_decimals every digit of x is 0: write those, then the zeros
  const int written = decimals < detail::exact_decimals<T> ? decimals : detail::exact_decimals<T>;
  s = s.empty() ? detail::to_chars_string(x, written) : detail::round_tie_away(std::move(s));
  if (detail::is_negative_zero_text(s)) s.erase(0, 1);
  s.append(static_cast<std::size_t>(decimals - written), '0');
  return s;
}

/// Returns the shortest text that reads back (std::from_chars, strtod) as exactly x: "0.5",
/// "0.1", "1e-05", "0.10032870532678914". Negative zero is written "0"; NaN, +inf and −inf
/// give "nan", "inf", "-inf".
template <real T>
[[nodiscard]] std::string shortest(T x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  if (x == T(0)) return "0";
  return detail::to_chars_string(x);
}

/// Returns the number of terminal columns UTF-8 text takes (wcwidth rules: combining marks
/// take none, East Asian wide characters two). A byte that is not valid UTF-8 counts one.
[[nodiscard]] constexpr std::size_t display_width(std::string_view utf8) noexcept {
  std::size_t width = 0;
  for (std::size_t i = 0; i < utf8.size();) {
    const detail::utf8_char c = detail::decode_utf8(utf8, i);
    width += c.valid ? static_cast<std::size_t>(detail::code_point_width(c.code_point)) : 1;
    i += c.length;
  }
  return width;
}

/// Returns `s` followed by spaces up to `width` display columns (`s` itself if wider).
[[nodiscard]] inline std::string pad_right(std::string_view s, std::size_t width) {
  std::string out(s);
  const std::size_t w = display_width(s);
  if (w < width) out.append(width - w, ' ');
  return out;
}

/// Returns spaces and then `s`, up to `width` display columns (`s` itself if wider).
[[nodiscard]] inline std::string pad_left(std::string_view s, std::size_t width) {
  const std::size_t w = display_width(s);
  std::string out(w < width ? width - w : 0, ' ');
  out.append(s);
  return out;
}

}  // namespace attn::report
