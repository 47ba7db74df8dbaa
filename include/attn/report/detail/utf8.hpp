#pragma once
/// \file attn/report/detail/utf8.hpp
/// Strict UTF-8 decoding, one code point at a time, for the report writers that must know
/// what a label holds (JSON, XML, display widths): overlong forms, surrogates, code points
/// beyond U+10FFFF and truncated sequences are not UTF-8.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <string>
#include <string_view>

namespace attn::report::detail {

/// One decoded code point: its value and how many bytes it took, or `valid == false` (and a
/// length of 1) for a byte that does not start a well-formed sequence.
struct utf8_char {
  char32_t code_point;
  std::size_t length;
  bool valid;
};

/// Decodes the code point that starts at s[i] (i < s.size()).
[[nodiscard]] constexpr utf8_char decode_utf8(std::string_view s, std::size_t i) noexcept {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return {b, 1, true};
  std::size_t len = 0;
  char32_t c = 0, least = 0;
  if (b >= 0xC2 && b < 0xE0) {
    len = 2, c = b & 0x1Fu, least = 0x80;
  } else if (b >= 0xE0 && b < 0xF0) {
    len = 3, c = b & 0x0Fu, least = 0x800;
  } else if (b >= 0xF0 && b < 0xF5) {
    len = 4, c = b & 0x07u, least = 0x10000;
  }
  if (len == 0 || len > s.size() - i) return {b, 1, false};
  for (std::size_t k = 1; k < len; ++k) {
    const auto cb = static_cast<unsigned char>(s[i + k]);
    if ((cb & 0xC0u) != 0x80u) return {b, 1, false};
    c = (c << 6) | (cb & 0x3Fu);
  }
  if (c < least || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return {b, 1, false};
  return {c, len, true};
}

/// True when the code point may appear in an XML 1.0 document (its `Char` production):
/// tab, line feed, carriage return, U+0020..U+D7FF, U+E000..U+FFFD, U+10000..U+10FFFF.
[[nodiscard]] constexpr bool xml_char(char32_t c) noexcept {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
         (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

/// `s` with every byte that is not UTF-8 replaced by U+FFFD, so that a writer's output is valid
/// UTF-8 whatever it is given.
[[nodiscard]] inline std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const utf8_char c = decode_utf8(s, i);
    if (c.valid)
      out.append(s.substr(i, c.length));
    else
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
    i += c.length;
  }
  return out;
}

}  // namespace attn::report::detail
