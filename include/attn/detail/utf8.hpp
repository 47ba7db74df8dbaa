#pragma once
/// \file attn/detail/utf8.hpp
/// Strict UTF-8, one code point at a time: overlong forms, surrogates, code points beyond
/// U+10FFFF and truncated sequences are not UTF-8. The one decoder: the report writers (labels)
/// and the safetensors reader (a header's names) both use it.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <string>
#include <string_view>

namespace attn::detail {

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

/// The index of the first byte of `s` that does not start a well-formed sequence, or
/// `std::string_view::npos` when all of `s` is UTF-8.
[[nodiscard]] constexpr std::size_t first_invalid_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const utf8_char c = decode_utf8(s, i);
    if (!c.valid) return i;
    i += c.length;
  }
  return std::string_view::npos;
}

/// Appends the UTF-8 encoding of code point c (c ≤ U+10FFFF, not a surrogate) to out.
inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace attn::detail
