#pragma once
/// \file tests/well_formed.hpp
/// Strict checkers for the report formats, written from their grammars: XML 1.0 (elements,
/// attributes, character and entity references, comments; every character an XML `Char`),
/// JSON (RFC 8259) and CSV (RFC 4180, read back into cells). Each returns "" for a well-formed
/// document, else what is wrong and where. tests/cli/parse_outputs.py checks the same outputs
/// with Python's own parsers when python3 is installed.

#include <cstddef>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "attn/report/detail/utf8.hpp"

namespace attn_test {

namespace detail {

/// What both readers share: the text, the position in it, and the first problem found.
class reader {
protected:
  std::string_view s_;
  std::size_t i_ = 0;
  std::string error_;

  explicit reader(std::string_view s) : s_(s) {}
  bool fail(const std::string& what) {
    if (error_.empty()) error_ = what + " at byte " + std::to_string(i_);
    return false;
  }
  [[nodiscard]] bool at(std::string_view t) const { return s_.substr(i_).starts_with(t); }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
};

class xml_reader : reader {
  static bool name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           static_cast<unsigned char>(c) >= 0x80;
  }
  static bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.'; }
  bool name(std::string& out) {
    const std::size_t start = i_;
    if (i_ >= s_.size() || !name_start(s_[i_])) return fail("a name expected");
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    out = std::string(s_.substr(start, i_ - start));
    return true;
  }
  bool reference() {  // at '&'
    const std::size_t end = s_.find(';', i_);
    if (end == std::string_view::npos) return fail("'&' without ';'");
    const std::string_view ref = s_.substr(i_ + 1, end - i_ - 1);
    if (ref == "amp" || ref == "lt" || ref == "gt" || ref == "quot" || ref == "apos") {
      i_ = end + 1;
      return true;
    }
    if (ref.size() < 2 || ref[0] != '#') return fail("unknown entity &" + std::string(ref) + ";");
    const bool hex = ref[1] == 'x';
    const std::string_view digits = ref.substr(hex ? 2 : 1);
    if (digits.empty() || digits.size() > 8) return fail("bad character reference");
    char32_t c = 0;
    for (const char d : digits) {
      const bool dec = d >= '0' && d <= '9';
      const bool hx = hex && ((d >= 'a' && d <= 'f') || (d >= 'A' && d <= 'F'));
      if (!dec && !hx) return fail("bad character reference");
      c = c * (hex ? 16u : 10u) + static_cast<char32_t>(dec ? d - '0' : (d | 0x20) - 'a' + 10);
    }
    if (!attn::report::detail::xml_char(c)) return fail("a character reference to a non-Char");
    i_ = end + 1;
    return true;
  }
  bool attribute_value() {
    if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) return fail("a quoted attribute value expected");
    const char quote = s_[i_++];
    while (i_ < s_.size() && s_[i_] != quote) {
      if (s_[i_] == '<') return fail("'<' in an attribute value");
      if (s_[i_] == '&') {
        if (!reference()) return false;
      } else {
        ++i_;
      }
    }
    if (i_ >= s_.size()) return fail("an unterminated attribute value");
    ++i_;
    return true;
  }
  bool comment() {  // at "<!--"
    const std::size_t end = s_.find("--", i_ + 4);
    if (end == std::string_view::npos || !s_.substr(end).starts_with("-->")) return fail("'--' inside a comment");
    i_ = end + 3;
    return true;
  }
  bool element(int depth) {
    if (depth > 200) return fail("nesting too deep");
    if (!at("<")) return fail("'<' expected");
    ++i_;
    std::string tag;
    if (!name(tag)) return false;
    std::set<std::string> seen;
    while (true) {
      const std::size_t before = i_;
      skip_space();
      if (at("/>")) {
        i_ += 2;
        return true;
      }
      if (at(">")) {
        ++i_;
        break;
      }
      if (i_ == before) return fail("space expected before an attribute");
      std::string attr;
      if (!name(attr)) return false;
      if (!seen.insert(attr).second) return fail("attribute " + attr + " given twice");
      skip_space();
      if (!at("=")) return fail("'=' expected after " + attr);
      ++i_;
      skip_space();
      if (!attribute_value()) return false;
    }
    while (i_ < s_.size()) {
      if (at("</")) {
        i_ += 2;
        std::string closing;
        if (!name(closing)) return false;
        if (closing != tag) return fail("</" + closing + "> closes <" + tag + ">");
        skip_space();
        if (!at(">")) return fail("'>' expected");
        ++i_;
        return true;
      }
      if (at("<!--")) {
        if (!comment()) return false;
      } else if (at("<")) {
        if (!element(depth + 1)) return false;
      } else if (at("&")) {
        if (!reference()) return false;
      } else if (at("]]>")) {
        return fail("']]>' in text");
      } else {
        ++i_;
      }
    }
    return fail("<" + tag + "> is not closed");
  }

public:
  explicit xml_reader(std::string_view s) : reader(s) {}
  std::string check() {
    for (std::size_t k = 0; k < s_.size();) {
      const auto c = attn::report::detail::decode_utf8(s_, k);
      if (!c.valid) return "a byte that is not UTF-8 at byte " + std::to_string(k);
      if (!attn::report::detail::xml_char(c.code_point))
        return "a character XML cannot hold at byte " + std::to_string(k);
      k += c.length;
    }
    if (at("<?xml")) {
      const std::size_t end = s_.find("?>");
      if (end == std::string_view::npos) return "an unterminated XML declaration";
      i_ = end + 2;
    }
    skip_space();
    while (at("<!--")) {
      if (!comment()) return error_;
      skip_space();
    }
    if (!element(0)) return error_;
    skip_space();
    if (i_ != s_.size()) return "content after the root element at byte " + std::to_string(i_);
    return "";
  }
};

class json_reader : reader {
  bool literal(std::string_view word) {
    if (!s_.substr(i_).starts_with(word)) return fail("a value expected");
    i_ += word.size();
    return true;
  }
  bool digits() {
    const std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    return i_ > start || fail("a digit expected");
  }
  bool number() {
    if (s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else if (!digits()) {
      return false;
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (!digits()) return false;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digits()) return false;
    }
    return true;
  }
  bool string() {  // at '"'
    ++i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      const auto b = static_cast<unsigned char>(s_[i_]);
      if (b < 0x20) return fail("a raw control character in a string");
      if (b == '\\') {
        if (++i_ >= s_.size()) break;
        const char e = s_[i_];
        if (e == 'u') {
          for (int k = 1; k <= 4; ++k) {
            const char h = i_ + static_cast<std::size_t>(k) < s_.size() ? s_[i_ + static_cast<std::size_t>(k)] : ' ';
            if (!((h >= '0' && h <= '9') || ((h | 0x20) >= 'a' && (h | 0x20) <= 'f'))) return fail("bad \\u escape");
          }
          i_ += 5;
        } else if (std::string_view("\"\\/bfnrt").find(e) != std::string_view::npos) {
          ++i_;
        } else {
          return fail("bad escape");
        }
        continue;
      }
      const auto c = attn::report::detail::decode_utf8(s_, i_);
      if (!c.valid) return fail("a byte that is not UTF-8 in a string");
      i_ += c.length;
    }
    if (i_ >= s_.size()) return fail("an unterminated string");
    ++i_;
    return true;
  }
  bool value(int depth) {
    if (depth > 200) return fail("nesting too deep");
    skip_space();
    if (i_ >= s_.size()) return fail("a value expected");
    const char c = s_[i_];
    if (c == '"') return string();
    if (c == 't') return literal("true");
    if (c == 'f') return literal("false");
    if (c == 'n') return literal("null");
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    if (c != '{' && c != '[') return fail("a value expected");
    const bool object = c == '{';
    ++i_;
    skip_space();
    if (i_ < s_.size() && s_[i_] == (object ? '}' : ']')) {
      ++i_;
      return true;
    }
    while (true) {
      if (object) {
        skip_space();
        if (i_ >= s_.size() || s_[i_] != '"') return fail("a key expected");
        if (!string()) return false;
        skip_space();
        if (i_ >= s_.size() || s_[i_] != ':') return fail("':' expected");
        ++i_;
      }
      if (!value(depth + 1)) return false;
      skip_space();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == (object ? '}' : ']')) {
        ++i_;
        return true;
      }
      return fail("',' or a closing bracket expected");
    }
  }

public:
  explicit json_reader(std::string_view s) : reader(s) {}
  std::string check() {
    if (!value(0)) return error_;
    skip_space();
    if (i_ != s_.size()) return "content after the value at byte " + std::to_string(i_);
    return "";
  }
};

}  // namespace detail

/// "" when `s` is a well-formed XML 1.0 document, else what is wrong.
inline std::string xml_problem(std::string_view s) { return detail::xml_reader(s).check(); }

/// "" when `s` is one JSON value (RFC 8259) in valid UTF-8, else what is wrong.
inline std::string json_problem(std::string_view s) { return detail::json_reader(s).check(); }

/// The records of an RFC 4180 CSV text with "\n" or "\r\n" line ends, each a list of cells
/// with quotes undone. Throws std::invalid_argument on a quote inside an unquoted cell or an
/// unterminated quoted one.
inline std::vector<std::vector<std::string>> read_csv(std::string_view s) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string cell;
  std::size_t i = 0;
  bool quoted = false, any = false;
  while (i < s.size()) {
    const char c = s[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < s.size() && s[i + 1] == '"') {
          cell += '"';
          i += 2;
          continue;
        }
        quoted = false;
        ++i;
        if (i < s.size() && s[i] != ',' && s[i] != '\n' && s[i] != '\r')
          throw std::invalid_argument("text after a closing quote");
        continue;
      }
      cell += c;
      ++i;
      continue;
    }
    if (c == '"') {
      if (!cell.empty()) throw std::invalid_argument("a quote inside an unquoted cell");
      quoted = true;
      any = true;
      ++i;
    } else if (c == ',') {
      record.push_back(std::move(cell));
      cell.clear();
      any = true;
      ++i;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && (i + 1 >= s.size() || s[i + 1] != '\n')) throw std::invalid_argument("a bare CR");
      i += c == '\r' ? 2 : 1;
      record.push_back(std::move(cell));
      cell.clear();
      records.push_back(std::move(record));
      record.clear();
      any = false;
    } else {
      cell += c;
      any = true;
      ++i;
    }
  }
  if (quoted) throw std::invalid_argument("an unterminated quoted cell");
  if (any || !cell.empty()) {
    record.push_back(std::move(cell));
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace attn_test
