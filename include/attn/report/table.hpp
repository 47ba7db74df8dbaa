#pragma once
/// \file attn/report/table.hpp
/// One table, four spellings: aligned text for a terminal, GitHub-flavoured Markdown, LaTeX
/// (booktabs) and CSV (RFC 4180, "\n" line ends).
///
///   auto t = attn::report::matrix_table(r.weights, {"मैं", "चाय"}, {"I", "drink", "tea"}, 3);
///   std::cout << attn::report::to_markdown(t);
///
/// Text and Markdown pad columns by display width, so Devanagari and CJK labels line up.
/// LaTeX: a cell may carry its own LaTeX spelling; otherwise its text is escaped, and a run of
/// non-ASCII characters becomes \attnlabel{<text>}{?}. latex_label_macro() defines \attnlabel
/// so that XeLaTeX and LuaLaTeX typeset the text and pdfLaTeX (which has no Devanagari)
/// typesets the fallback instead of stopping with an error.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <charconv>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "attn/error.hpp"
#include "attn/matrix.hpp"
#include "attn/report/detail/utf8.hpp"
#include "attn/report/format.hpp"

namespace attn::report {

/// How a column lines up its cells.
enum class align { left, right };

/// One cell: its text (UTF-8; used by text, Markdown and CSV) and, optionally, its LaTeX
/// spelling (used verbatim by to_latex; when empty, to_latex escapes `text`).
struct cell {
  std::string text;
  std::string latex;

  cell() = default;
  cell(std::string t) : text(std::move(t)) {}  // NOLINT: a string is a cell
  cell(const char* t) : text(t) {}             // NOLINT
  cell(std::string t, std::string l) : text(std::move(t)), latex(std::move(l)) {}
};

/// A title, a header row and rows of cells. Every row has as many cells as the header;
/// `aligns` gives one alignment per column (missing: the first column left, the others right).
struct table {
  cell title;
  std::string label;  ///< to_latex: the table's \label (empty: none)
  std::vector<cell> header;
  std::vector<std::vector<cell>> rows;
  std::vector<align> aligns;
};

namespace detail {

[[nodiscard]] inline align column_align(const table& t, std::size_t c) {
  if (c < t.aligns.size()) return t.aligns[c];
  return c == 0 ? align::left : align::right;
}

inline void check_table(const char* where, const table& t) {
  for (const auto& row : t.rows)
    attn::detail::check_equal(where, "cells in a row", row.size(), "cells in the header",
                              t.header.size());
}

/// The display width of each column over the header and every row of already-spelled cells.
[[nodiscard]] inline std::vector<std::size_t> column_widths(
    const std::vector<std::vector<std::string>>& lines, std::size_t columns, std::size_t minimum) {
  std::vector<std::size_t> w(columns, minimum);
  for (const auto& line : lines)
    for (std::size_t c = 0; c < columns; ++c) {
      const std::size_t d = display_width(line[c]);
      if (d > w[c]) w[c] = d;
    }
  return w;
}

inline void trim_trailing_spaces(std::string& line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
}

/// A letter or digit for Markdown's intraword rule (bytes of non-ASCII letters count).
[[nodiscard]] inline bool word_char(char c) noexcept {
  const auto b = static_cast<unsigned char>(c);
  return b >= 0x80 || (b >= '0' && b <= '9') || ((b | 0x20u) >= 'a' && (b | 0x20u) <= 'z');
}

/// Escapes what GitHub-flavoured Markdown (or pandoc's) would read as markup: emphasis, code,
/// tables, links and HTML, strikethrough and subscripts (~), entities (&), math ($) and
/// superscripts (^). An underscore inside a word ("h_j") cannot start emphasis there, so it
/// stays as it is.
[[nodiscard]] inline std::string markdown_escape(std::string_view text) {
  const std::string valid = valid_utf8(text);  // bytes that are not UTF-8 become U+FFFD
  const std::string_view s = valid;
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    switch (c) {
      case '_':
        if (i > 0 && i + 1 < s.size() && word_char(s[i - 1]) && word_char(s[i + 1])) {
          out += c;
          break;
        }
        [[fallthrough]];
      case '\\': case '|': case '*': case '`': case '<': case '>': case '[': case ']': case '~':
      case '&': case '$': case '^':
        out += '\\';
        out += c;
        break;
      case '\n': case '\r': out += ' '; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace detail

/// Returns the \attnlabel definition that to_latex's non-ASCII cells need (emit it once, before
/// the tables): \attnlabel{text}{fallback} typesets `text` under XeLaTeX and LuaLaTeX and
/// `fallback` under pdfLaTeX. Defined with \providecommand, so a document may define its own
/// first (for example with a Devanagari font: \newcommand{\attnlabel}[2]{{\devanagari #1}}).
[[nodiscard]] inline std::string latex_label_macro() {
  return "\\providecommand{\\attnlabel}[2]{\\ifdefined\\XeTeXrevision#1\\else"
         "\\ifdefined\\directlua#1\\else#2\\fi\\fi}\n";
}

namespace detail {
/// `s` with LaTeX's ten special characters escaped, and what pdfLaTeX's default OT1 fonts (and
/// T1's ligatures) would print otherwise set as typed: < > | as \textless, \textgreater,
/// \textbar; " as a typewriter " (OT1's roman fonts have none); [ ] braced, so that a cell
/// starting with [ is not read as the optional argument of the \\ before it; and {} between
/// the characters of a ligature (-- ,, '' `` !` ?`). Non-ASCII bytes are kept as they are.
[[nodiscard]] inline std::string latex_escape_ascii(std::string_view s) {
  std::string out;
  char previous = 0;
  for (const char ch : s) {
    const bool ligature = (ch == '-' && previous == '-') || (ch == ',' && previous == ',') ||
                          (ch == '\'' && previous == '\'') || (ch == '`' && (previous == '`' || previous == '!' || previous == '?'));
    if (ligature) out += "{}";
    previous = ch;
    switch (ch) {
      case '&': out += "\\&"; break;
      case '%': out += "\\%"; break;
      case '$': out += "\\$"; break;
      case '#': out += "\\#"; break;
      case '_': out += "\\_"; break;
      case '{': out += "\\{"; break;
      case '}': out += "\\}"; break;
      case '~': out += "\\textasciitilde{}"; break;
      case '^': out += "\\textasciicircum{}"; break;
      case '\\': out += "\\textbackslash{}"; break;
      case '<': out += "\\textless{}"; break;
      case '>': out += "\\textgreater{}"; break;
      case '|': out += "\\textbar{}"; break;
      case '"': out += "\\texttt{\\char34}"; break;
      case '[': out += "{[}"; break;
      case ']': out += "{]}"; break;
      case '\n': case '\r': out += ' '; break;
      default: out += ch;
    }
  }
  return out;
}
[[nodiscard]] inline bool valid_latex_label(std::string_view s) noexcept {
  for (const char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
          c == '.' || c == '-' || c == '_' || c == '/'))
      return false;
  return true;
}
[[nodiscard]] inline bool is_ascii(std::string_view s) noexcept {
  for (const char ch : s)
    if (static_cast<unsigned char>(ch) >= 0x80) return false;
  return true;
}
}  // namespace detail

/// Returns `s` escaped for LaTeX text mode: the ten special characters become commands, and
/// each run of non-ASCII characters becomes \attnlabel{<run>}{`fallback`}.
[[nodiscard]] inline std::string latex_escape(std::string_view s, std::string_view fallback = "?") {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t j = i;
    const bool ascii = static_cast<unsigned char>(s[i]) < 0x80;
    while (j < s.size() && (static_cast<unsigned char>(s[j]) < 0x80) == ascii) ++j;
    if (ascii) {
      out += detail::latex_escape_ascii(s.substr(i, j - i));
    } else {
      out += "\\attnlabel{";
      out += detail::valid_utf8(s.substr(i, j - i));
      out += "}{";
      out.append(fallback);
      out += '}';
    }
    i = j;
  }
  return out;
}

/// Returns a label for LaTeX: escaped, and when it holds any non-ASCII character the whole of
/// it wrapped as \attnlabel{<label>}{`fallback`} (the fallback is raw LaTeX, such as "$q_{1}$").
[[nodiscard]] inline std::string latex_label(std::string_view s, std::string_view fallback) {
  if (detail::is_ascii(s)) return detail::latex_escape_ascii(s);
  return "\\attnlabel{" + detail::latex_escape_ascii(detail::valid_utf8(s)) + "}{" + std::string(fallback) + "}";
}

/// Returns the table as aligned text: the title, the header, a rule of dashes under each
/// column, the rows; columns two spaces apart, no trailing spaces. Throws dimension_error if
/// a row's length differs from the header's.
[[nodiscard]] inline std::string to_text(const table& t) {
  detail::check_table("attn::report::to_text", t);
  const std::size_t n = t.header.size();
  std::vector<std::vector<std::string>> lines;
  lines.reserve(t.rows.size() + 1);
  std::vector<std::string> head;
  for (const auto& c : t.header) head.push_back(detail::valid_utf8(c.text));
  lines.push_back(std::move(head));
  for (const auto& row : t.rows) {
    std::vector<std::string> line;
    for (const auto& c : row) line.push_back(detail::valid_utf8(c.text));
    lines.push_back(std::move(line));
  }
  const auto w = detail::column_widths(lines, n, 1);
  std::string out;
  if (!t.title.text.empty()) out += detail::valid_utf8(t.title.text) + "\n";
  auto emit = [&](const std::vector<std::string>& line) {
    std::string s;
    for (std::size_t c = 0; c < n; ++c) {
      if (c > 0) s += "  ";
      s += detail::column_align(t, c) == align::left ? pad_right(line[c], w[c]) : pad_left(line[c], w[c]);
    }
    detail::trim_trailing_spaces(s);
    out += s + "\n";
  };
  emit(lines[0]);
  std::string rule;
  for (std::size_t c = 0; c < n; ++c) {
    if (c > 0) rule += "  ";
    rule.append(w[c], '-');
  }
  out += rule + "\n";
  for (std::size_t r = 1; r < lines.size(); ++r) emit(lines[r]);
  return out;
}

/// Returns the table in GitHub-flavoured Markdown: the title in bold and a blank line, then
/// the table with its columns padded to line up in the source. `|`, `\`, `*`, `_`, backticks,
/// angle and square brackets are escaped. Throws dimension_error as to_text.
[[nodiscard]] inline std::string to_markdown(const table& t) {
  detail::check_table("attn::report::to_markdown", t);
  const std::size_t n = t.header.size();
  std::vector<std::vector<std::string>> lines;
  std::vector<std::string> head;
  for (const auto& c : t.header) head.push_back(detail::markdown_escape(c.text));
  lines.push_back(std::move(head));
  for (const auto& row : t.rows) {
    std::vector<std::string> line;
    for (const auto& c : row) line.push_back(detail::markdown_escape(c.text));
    lines.push_back(std::move(line));
  }
  const auto w = detail::column_widths(lines, n, 3);
  std::string out;
  if (!t.title.text.empty()) out += "**" + detail::markdown_escape(t.title.text) + "**\n\n";
  auto emit = [&](const std::vector<std::string>& line) {
    std::string s = "|";
    for (std::size_t c = 0; c < n; ++c) {
      s += ' ';
      s += detail::column_align(t, c) == align::left ? pad_right(line[c], w[c]) : pad_left(line[c], w[c]);
      s += " |";
    }
    out += s + "\n";
  };
  emit(lines[0]);
  std::string rule = "|";
  for (std::size_t c = 0; c < n; ++c) {
    const bool left = detail::column_align(t, c) == align::left;
    rule += left ? " :" : " ";
    rule.append(w[c] - 1, '-');
    rule += left ? " |" : ": |";
  }
  out += rule + "\n";
  for (std::size_t r = 1; r < lines.size(); ++r) emit(lines[r]);
  return out;
}

/// Returns the table as a LaTeX `table` float: \centering, \caption (when there is a title),
/// \label (when there is one), a booktabs `tabular` (\toprule, \midrule, \bottomrule; `l`/`r`
/// columns). Needs \usepackage{booktabs}, and latex_label_macro() once when a cell holds
/// non-ASCII text. Throws dimension_error as to_text; domain_error for a label with other
/// characters than ASCII letters, digits and : . - _ /.
[[nodiscard]] inline std::string to_latex(const table& t) {
  detail::check_table("attn::report::to_latex", t);
  if (!detail::valid_latex_label(t.label))
    attn::detail::raise<domain_error>(
        "attn::report::to_latex: a \\label may hold only ASCII letters, digits and : . - _ /");
  const std::size_t n = t.header.size();
  auto spell = [](const cell& c) { return c.latex.empty() ? latex_escape(c.text) : c.latex; };
  std::string out = "\\begin{table}[htbp]\n  \\centering\n";
  if (!t.title.text.empty() || !t.title.latex.empty()) out += "  \\caption{" + spell(t.title) + "}\n";
  if (!t.label.empty()) out += "  \\label{" + t.label + "}\n";
  out += "  \\begin{tabular}{";
  for (std::size_t c = 0; c < n; ++c) out += detail::column_align(t, c) == align::left ? 'l' : 'r';
  out += "}\n    \\toprule\n";
  auto emit = [&](const std::vector<cell>& row) {
    std::string s = "    ";
    for (std::size_t c = 0; c < n; ++c) {
      if (c > 0) s += " & ";
      s += spell(row[c]);
    }
    detail::trim_trailing_spaces(s);
    out += s + " \\\\\n";
  };
  emit(t.header);
  out += "    \\midrule\n";
  for (const auto& row : t.rows) emit(row);
  out += "    \\bottomrule\n  \\end{tabular}\n\\end{table}\n";
  return out;
}

/// Returns `s` as one CSV field: quoted (with doubled quotes) when it holds a comma, a quote,
/// a line break, or spaces at either end. A field that a spreadsheet would run as a formula
/// (it starts with = + - @, a tab or a carriage return, and is not a plain number such as
/// "-0.25") gets a leading ', as OWASP's advice on CSV injection says: "=1+1" → "'=1+1".
[[nodiscard]] inline std::string csv_field(std::string_view text) {
  std::string guarded = detail::valid_utf8(text);  // bytes that are not UTF-8 become U+FFFD
  std::string_view s = guarded;
  if (!s.empty() && std::string_view("=+-@\t\r").find(s.front()) != std::string_view::npos) {
    const std::string_view digits = s.front() == '-' ? s.substr(1) : std::string_view{};
    double x = 0;
    const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), x);
    const bool number = !digits.empty() && (digits.front() == '.' || (digits.front() >= '0' && digits.front() <= '9')) &&
                        r.ec == std::errc() && r.ptr == digits.data() + digits.size();
    if (!number) {
      guarded.insert(0, 1, '\'');
      s = guarded;
    }
  }
  const bool quote = s.find_first_of(",\"\r\n") != std::string_view::npos ||
                     (!s.empty() && (s.front() == ' ' || s.back() == ' '));
  if (!quote) return std::string(s);
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

/// Returns the header and the rows as CSV (RFC 4180 quoting, "\n" line ends); the title is
/// left out. Throws dimension_error as to_text.
[[nodiscard]] inline std::string to_csv(const table& t) {
  detail::check_table("attn::report::to_csv", t);
  std::string out;
  auto emit = [&](const std::vector<cell>& row) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c > 0) out += ',';
      out += csv_field(row[c].text);
    }
    out += '\n';
  };
  emit(t.header);
  for (const auto& row : t.rows) emit(row);
  return out;
}

/// Returns one plain cell per string (for labels held as strings).
[[nodiscard]] inline std::vector<cell> to_cells(const std::vector<std::string>& texts) {
  return std::vector<cell>(texts.begin(), texts.end());
}

/// Returns a number cell: fixed(x, decimals), spelled for LaTeX with a math minus ($-$0.5).
template <real T>
[[nodiscard]] cell number_cell(T x, int decimals) {
  std::string s = fixed(x, decimals);
  if (!s.empty() && s[0] == '-') return cell(s, "$-$" + s.substr(1));
  return cell(std::move(s));
}

/// Returns an input-number cell: shortest(x), the number exactly as it reads back.
template <real T>
[[nodiscard]] cell exact_cell(T x) {
  std::string s = shortest(x);
  if (!s.empty() && s[0] == '-') return cell(s, "$-$" + s.substr(1));
  return cell(std::move(s));
}

/// Returns the R×C matrix `m` as a table: header `corner` + `col_labels`, then one row per
/// matrix row, `row_labels[i]` first, numbers written fixed(x, decimals) (or shortest(x) when
/// decimals < 0). Throws dimension_error unless there are R row labels and C column labels.
template <matrix_like M>
[[nodiscard]] table matrix_table(const M& m, const std::vector<cell>& row_labels,
                                 const std::vector<cell>& col_labels, int decimals, cell corner = {},
                                 cell title = {}) {
  const auto v = as_view(m);
  attn::detail::check_equal("attn::report::matrix_table", "row labels", row_labels.size(), "rows",
                            v.rows());
  attn::detail::check_equal("attn::report::matrix_table", "column labels", col_labels.size(),
                            "columns", v.cols());
  table t;
  t.title = std::move(title);
  t.header.push_back(std::move(corner));
  for (const auto& c : col_labels) t.header.push_back(c);
  for (std::size_t i = 0; i < v.rows(); ++i) {
    std::vector<cell> row{row_labels[i]};
    for (std::size_t j = 0; j < v.cols(); ++j)
      row.push_back(decimals < 0 ? exact_cell(v(i, j)) : number_cell(v(i, j), decimals));
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace attn::report
