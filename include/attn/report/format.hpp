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
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "attn/report/detail/unicode_width.hpp"
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

/// Writes x with std::to_chars(args...) into a string, growing the buffer if it must.
template <class T, class... Args>
[[nodiscard]] std::string to_chars_string(T x, Args... args) {
  std::array<char, 128> small{};
  auto r = std::to_chars(small.data(), small.data() + small.size(), x, args...);
  if (r.ec == std::errc()) return std::string(small.data(), r.ptr);
  // fixed notation of a huge number: up to max_exponent10 digits before the point
  std::vector<char> big(static_cast<std::size_t>(std::numeric_limits<T>::max_exponent10) + 4096);
  r = std::to_chars(big.data(), big.data() + big.size(), x, args...);
  return std::string(big.data(), r.ptr);
}

/// True when x lies exactly halfway between two numbers of `decimals` decimals. Such an x has
/// at most decimals + 1 binary fraction digits (x·10^(d+1) = k·5 needs 2^e | 10^(d+1)), so
/// x·2^(d+1) is a whole number and to_chars with d + 1 decimals writes x exactly.
template <class T>
[[nodiscard]] bool is_decimal_tie(T x, int decimals) {
  if (decimals > std::numeric_limits<T>::max_exponent) return false;
  const T scaled = std::ldexp(x, decimals + 1);  // exact: a power-of-two scaling
  if (!std::isfinite(scaled) || scaled != std::trunc(scaled)) return false;
  const std::string s = to_chars_string(x, std::chars_format::fixed, decimals + 1);
  return !s.empty() && s.back() == '5';
}

}  // namespace detail

/// Returns x with exactly `decimals` digits after the point (none and no point when 0),
/// rounded half away from zero ("0.0625" → "0.063", as taught in school), in any locale.
/// A result that rounds to zero has no minus sign. NaN, +inf and −inf give "nan", "inf",
/// "-inf". A negative `decimals` counts as 0.
template <real T>
[[nodiscard]] std::string fixed(T x, int decimals) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  if (decimals < 0) decimals = 0;
  // to_chars rounds an exact tie to even; step one ulp away from zero to round it up instead
  if (detail::is_decimal_tie(x, decimals))
    x = std::nextafter(x, x < 0 ? -std::numeric_limits<T>::infinity()
                                : std::numeric_limits<T>::infinity());
  std::string s = detail::to_chars_string(x, std::chars_format::fixed, decimals);
  if (detail::is_negative_zero_text(s)) s.erase(0, 1);
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
  std::size_t i = 0;
  while (i < utf8.size()) {
    const auto b = static_cast<unsigned char>(utf8[i]);
    std::size_t len = 1;
    char32_t c = b;
    if (b >= 0xF0 && b < 0xF8) {
      len = 4;
      c = b & 0x07u;
    } else if (b >= 0xE0) {
      len = b < 0xF0 ? 3 : 1;
      c = b & 0x0Fu;
    } else if (b >= 0xC2) {
      len = 2;
      c = b & 0x1Fu;
    } else if (b >= 0x80) {
      len = 1;  // a stray continuation byte or an invalid lead byte
    }
    bool valid = len == 1 || i + len <= utf8.size();
    for (std::size_t k = 1; valid && k < len; ++k) {
      const auto cb = static_cast<unsigned char>(utf8[i + k]);
      if ((cb & 0xC0u) != 0x80u) valid = false;
      c = (c << 6) | (cb & 0x3Fu);
    }
    if (!valid) {
      width += 1;
      i += 1;
      continue;
    }
    if (len == 1 && b >= 0x80)
      width += 1;
    else
      width += static_cast<std::size_t>(detail::code_point_width(c));
    i += len;
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
