#pragma once
/// \file attn/report/json.hpp
/// A small JSON writer that gives the same bytes on every machine and in every locale:
/// numbers are shortest round-trip text (std::to_chars), non-finite numbers are `null`, keys
/// stay in the order written, nesting is indented by two spaces and arrays of numbers may be
/// kept on one line.
///
///   attn::report::json_writer j;
///   j.begin_object().key("weights").numbers(r.weights).end_object();
///   std::cout << j.str();   // {\n  "weights": [0.10032870532678914, ...]\n}\n

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "attn/error.hpp"
#include "attn/matrix.hpp"
#include "attn/report/detail/utf8.hpp"
#include "attn/report/format.hpp"
#include "attn/vector.hpp"

namespace attn::report {

/// Returns `s` as a JSON string literal: quotes, backslashes and control characters escaped,
/// other UTF-8 kept as it is; a byte that is not valid UTF-8 becomes U+FFFD.
[[nodiscard]] inline std::string json_quote(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "\"";
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      switch (b) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (b < 0x20) {
            out += "\\u00";
            out += hex[b >> 4];
            out += hex[b & 0xF];
          } else {
            out += static_cast<char>(b);
          }
      }
      ++i;
      continue;
    }
    // a multi-byte sequence: kept if it is well formed (no overlong forms, no surrogates)
    const detail::utf8_char c = detail::decode_utf8(s, i);
    if (c.valid)
      out.append(s.substr(i, c.length));
    else
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
    i += c.length;
  }
  out += '"';
  return out;
}

/// Writes one JSON document into a string. Call the members in document order; `key` before
/// every value inside an object. Compact containers (and everything inside them) are written
/// on one line; the others put each member on its own line.
class json_writer {
  struct level {
    bool object;
    bool compact;
    std::size_t count;
  };
  std::string out_;
  std::vector<level> stack_;
  bool after_key_ = false;

  void newline_indent(std::size_t depth) {
    out_ += '\n';
    out_.append(2 * depth, ' ');
  }
  void before_value() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (stack_.empty()) return;
    level& l = stack_.back();
    if (l.object)
      attn::detail::raise<std::logic_error>(
          "attn::report::json_writer: a value inside an object needs a key");
    if (l.count++ > 0) out_ += ',';
    if (l.compact) {
      if (l.count > 1) out_ += ' ';
    } else {
      newline_indent(stack_.size());
    }
  }
  json_writer& open(bool object, bool compact) {
    before_value();
    const bool inherited = !stack_.empty() && stack_.back().compact;
    out_ += object ? '{' : '[';
    stack_.push_back({object, compact || inherited, 0});
    return *this;
  }
  json_writer& close(bool object) {
    if (stack_.empty() || stack_.back().object != object || after_key_)
      attn::detail::raise<std::logic_error>(
          "attn::report::json_writer: unbalanced end_object/end_array");
    const level l = stack_.back();
    stack_.pop_back();
    if (l.count > 0 && !l.compact) newline_indent(stack_.size());
    out_ += object ? '}' : ']';
    if (stack_.empty()) out_ += '\n';
    return *this;
  }

public:
  /// Opens an object (`compact`: on one line).
  json_writer& begin_object(bool compact = false) { return open(true, compact); }
  json_writer& end_object() { return close(true); }
  /// Opens an array (`compact`: on one line).
  json_writer& begin_array(bool compact = false) { return open(false, compact); }
  json_writer& end_array() { return close(false); }

  /// Writes the key of the next member of the current object.
  json_writer& key(std::string_view k) {
    if (stack_.empty() || !stack_.back().object || after_key_)
      attn::detail::raise<std::logic_error>("attn::report::json_writer: a key outside an object");
    level& l = stack_.back();
    if (l.count++ > 0) out_ += ',';
    if (l.compact) {
      if (l.count > 1) out_ += ' ';
    } else {
      newline_indent(stack_.size());
    }
    out_ += json_quote(k);
    out_ += ": ";
    after_key_ = true;
    return *this;
  }

  json_writer& string(std::string_view s) {
    before_value();
    out_ += json_quote(s);
    return *this;
  }
  json_writer& boolean(bool b) {
    before_value();
    out_ += b ? "true" : "false";
    return *this;
  }
  json_writer& null() {
    before_value();
    out_ += "null";
    return *this;
  }
  /// A whole number, written exactly.
  json_writer& integer(long long n) {
    before_value();
    out_ += std::to_string(n);
    return *this;
  }
  /// A number as shortest round-trip text (at most max_digits10 significant digits, and
  /// exactly the same value when read back); `null` when x is NaN or infinite.
  template <real T>
  json_writer& number(T x) {
    before_value();
    out_ += std::isfinite(x) ? shortest(x) : std::string("null");
    return *this;
  }
  /// A compact array of numbers.
  template <vector_like V>
  json_writer& numbers(const V& v) {
    begin_array(true);
    for (const auto x : as_span(v)) number(x);
    return end_array();
  }
  /// An array of rows, each a compact array of numbers.
  template <matrix_like M>
  json_writer& matrix(const M& m) {
    const auto v = as_view(m);
    begin_array();
    for (std::size_t i = 0; i < v.rows(); ++i) numbers(v.row(i));
    return end_array();
  }
  /// A compact array of strings.
  json_writer& strings(const std::vector<std::string>& v) {
    begin_array(true);
    for (const auto& s : v) string(s);
    return end_array();
  }
  /// A compact array of fixed(x, decimals) strings: the rounded numbers as they are printed.
  template <vector_like V>
  json_writer& rounded(const V& v, int decimals) {
    begin_array(true);
    for (const auto x : as_span(v)) string(fixed(x, decimals));
    return end_array();
  }

  /// The document so far (complete, ending in "\n", once the outermost container is closed).
  [[nodiscard]] const std::string& str() const noexcept { return out_; }
  /// True when every container opened has been closed.
  [[nodiscard]] bool complete() const noexcept { return stack_.empty() && !out_.empty(); }
};

}  // namespace attn::report
