#pragma once
/// \file attn/report/detail/utf8.hpp
/// What the report writers need of UTF-8 (JSON, XML, display widths): the strict decoder of
/// attn/detail/utf8.hpp under the report's names, XML's characters, and a replacer.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <string>
#include <string_view>

#include "attn/detail/utf8.hpp"

namespace attn::report::detail {

// The decoder lives in attn/detail/utf8.hpp (the safetensors reader validates names with it too);
// the report writers call it by these names.
using attn::detail::decode_utf8;
using attn::detail::utf8_char;

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
