#pragma once
/// \file attn/detail/json.hpp
/// A reader of the JSON a safetensors header holds, and no more: objects, arrays, strings (every
/// escape, \uXXXX with surrogate pairs; the raw bytes strict UTF-8) and non-negative integers.
/// Anything else — a fraction, an exponent, a minus sign, true, false, null — is refused, never
/// read as something else. It reads tokens; the caller says what it expects next. It allocates
/// only the strings it returns, and nests nothing (no recursion).

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "attn/detail/utf8.hpp"

namespace attn::detail {

/// Reads JSON tokens from `text`. `Fail` is called as fail(what, at) with a description and the
/// byte where the trouble is, and must not return (the caller throws its own error).
template <class Fail>
class json_reader {
  std::string_view s_;
  std::size_t i_ = 0;
  Fail fail_;

  [[noreturn]] void fail(const char* what, std::size_t at) {
    fail_(what, at);
    std::abort();  // Fail must not return; if it does, stop here rather than read on
  }

  unsigned hex4() {
    if (s_.size() - i_ < 4) fail("\\u needs four hexadecimal digits", i_);
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_];
      unsigned d = 0;
      if (c >= '0' && c <= '9')
        d = static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        d = static_cast<unsigned>(c - 'A' + 10);
      else
        fail("\\u needs four hexadecimal digits", i_);
      v = v * 16 + d;
      ++i_;
    }
    return v;
  }

public:
  /// Reads `text` from its first byte.
  json_reader(std::string_view text, Fail fail) : s_(text), fail_(fail) {}

  /// Where the next byte is.
  [[nodiscard]] std::size_t position() const noexcept { return i_; }

  /// Skips JSON's white space (space, tab, line feed, carriage return).
  void skip_space() noexcept {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  /// True when nothing but white space is left.
  [[nodiscard]] bool at_end() noexcept {
    skip_space();
    return i_ == s_.size();
  }

  /// The next byte after white space (not consumed); fails at the end of the text.
  [[nodiscard]] char peek() {
    skip_space();
    if (i_ == s_.size()) fail("the JSON ends early", i_);
    return s_[i_];
  }

  /// Consumes `c` after white space, or fails saying it was expected.
  void expect(char c, const char* what) {
    if (peek() != c) fail(what, i_);
    ++i_;
  }

  /// Consumes `c` after white space if it is next.
  [[nodiscard]] bool consume(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }

  /// A string, its escapes decoded (a \uXXXX high surrogate must be followed by a low one),
  /// as UTF-8; fails on a control character, a byte that is not UTF-8, or a lone surrogate.
  [[nodiscard]] std::string string() {
    expect('"', "expected a string");
    std::string out;
    for (;;) {
      if (i_ == s_.size()) fail("a string is not closed", i_);
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c < 0x20) fail("a control character in a string (JSON needs it escaped)", i_);
      if (c >= 0x80) {
        const utf8_char u = decode_utf8(s_, i_);
        if (!u.valid) fail("a byte that is not UTF-8", i_);
        out.append(s_.substr(i_, u.length));
        i_ += u.length;
        continue;
      }
      ++i_;
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (i_ == s_.size()) fail("a string is not closed", i_);
      const std::size_t at = i_ - 1;
      switch (s_[i_++]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          char32_t cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("a lone low surrogate (\\uDC00 to \\uDFFF)", at);
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.size() - i_ < 2 || s_[i_] != '\\' || s_[i_ + 1] != 'u')
              fail("a high surrogate not followed by a low one", at);
            i_ += 2;
            const char32_t low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("a high surrogate not followed by a low one", at);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: fail("an unknown escape in a string", at);
      }
    }
  }

  /// A non-negative integer in decimal, without sign, fraction or exponent, at most 2⁶⁴ − 1
  /// (a leading zero only in 0 itself, as JSON says).
  [[nodiscard]] std::uint64_t integer() {
    const char first = peek();
    const std::size_t at = i_;
    if (first == '-') fail("a negative number", at);
    if (first < '0' || first > '9') fail("expected a non-negative integer", at);
    std::uint64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      const auto d = static_cast<std::uint64_t>(s_[i_] - '0');
      if (v > (UINT64_MAX - d) / 10) fail("an integer beyond 2^64 - 1", at);
      v = v * 10 + d;
      ++i_;
    }
    if (first == '0' && i_ - at > 1) fail("an integer with a leading zero", at);
    if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E'))
      fail("a number that is not an integer", at);
    return v;
  }
};

}  // namespace attn::detail
