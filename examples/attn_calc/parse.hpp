#pragma once
/// \file examples/attn_calc/parse.hpp
/// attn-calc's command line, read into a `config` whose every size has been checked, or a
/// `usage_error` whose message names the option and the problem (main prints it on one line and
/// exits with code 2). Header-only so that tests can include it.
///
/// Numbers are read with std::from_chars: a '.' decimal point in every locale, exponents
/// allowed ("1e-3"), a leading '+' allowed, "nan" and "inf" refused. A matrix is written
/// inline, rows separated by ';' and numbers by ',' ("1,0,0;0,1,0"), or read from a file with
/// '@' ("@notes.csv": one row per line, ',' between numbers, blank lines and lines starting
/// with '#' skipped).

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "attn/matrix.hpp"

namespace attn_calc {

/// Bad input: the message names the option and what is wrong with it.
class usage_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class score_kind { dot, scaled_dot, general, additive };
enum class output_format { text, md, latex, json, csv, csv_long, svg };
/// Which of the unit's worked examples filled in the inputs the command line left out.
enum class unit_example { none, e3_alignment_map, e5_additive };

/// A matrix read from the command line or a file: row-major, rows × cols numbers.
struct matrix {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<double> data;

  [[nodiscard]] attn::MatrixView<const double> view() const {
    return attn::MatrixView<const double>(data.data(), rows, cols);
  }
  [[nodiscard]] bool empty() const noexcept { return rows == 0; }
};

/// Everything attn-calc computes from, checked.
struct config {
  score_kind score = score_kind::dot;
  output_format format = output_format::text;
  matrix queries;                         ///< T × d_q, one query per row
  matrix notes;                           ///< n × d_h, one note per row
  matrix W;                               ///< general: d_q × d_h
  matrix W1;                              ///< additive: k × d_h
  matrix W2;                              ///< additive: k × d_q
  std::vector<double> v;                  ///< additive: k
  double beta = 1.0;                      ///< sharpness: scores are multiplied by beta
  std::vector<char> mask;                 ///< empty, or one 0/1 per note (0 masks it out)
  std::vector<std::string> query_labels;  ///< one per query
  std::vector<std::string> note_labels;   ///< one per note
  int decimals = 3;                       ///< digits after the point in printed numbers
  bool jacobian = false;                  ///< also ∂c/∂h_j and ∂c/∂q, checked by finite differences
  bool help = false;                      ///< --help: print the help and nothing else
  unit_example example = unit_example::none;
};

[[nodiscard]] inline std::string_view trim(std::string_view s) noexcept {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

/// Returns the finite number `text` spells (surrounding spaces allowed); `what` names the
/// option in the error.
[[nodiscard]] inline double parse_number(std::string_view text, std::string_view what) {
  const std::string_view t = trim(text);
  if (t.empty()) throw usage_error(std::string(what) + ": a number is missing (empty field)");
  std::string_view digits = t;
  if (digits.front() == '+') digits.remove_prefix(1);
  double x = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), x);
  if (ec == std::errc::result_out_of_range)
    throw usage_error(std::string(what) + ": \"" + std::string(t) + "\" is out of the range of a double");
  const bool two_signs = !digits.empty() && digits.size() < t.size() &&
                         (digits.front() == '+' || digits.front() == '-');
  if (ec != std::errc() || ptr != digits.data() + digits.size() || two_signs)
    throw usage_error(std::string(what) + ": \"" + std::string(t) + "\" is not a number");
  if (!std::isfinite(x))
    throw usage_error(std::string(what) + ": \"" + std::string(t) + "\" is not a finite number");
  return x;
}

/// Returns the whole number `text` spells, which must lie in [lo, hi].
[[nodiscard]] inline int parse_int(std::string_view text, std::string_view what, int lo, int hi) {
  const std::string_view t = trim(text);
  int x = 0;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size())
    throw usage_error(std::string(what) + ": \"" + std::string(t) + "\" is not a whole number");
  if (x < lo || x > hi)
    throw usage_error(std::string(what) + ": " + std::to_string(x) + " is outside " +
                      std::to_string(lo) + ".." + std::to_string(hi));
  return x;
}

/// Returns the matrix `text` spells: rows separated by ';' or line breaks, numbers by ','.
/// Blank rows (and, when `comments`, rows starting with '#') are skipped. Throws usage_error
/// for a bad number, rows of different lengths, or no numbers at all.
[[nodiscard]] inline matrix parse_matrix(std::string_view text, std::string_view what,
                                         bool comments = false) {
  matrix m;
  std::size_t line_no = 0;
  while (!text.empty() || line_no == 0) {
    const auto end = text.find_first_of(";\n");
    const std::string_view line = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    ++line_no;
    if (line.empty() || (comments && line.front() == '#')) continue;
    std::size_t count = 0;
    std::string_view rest = line;
    while (true) {
      const auto comma = rest.find(',');
      m.data.push_back(parse_number(rest.substr(0, comma), what));
      ++count;
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
    if (m.rows > 0 && count != m.cols)
      throw usage_error(std::string(what) + ": row " + std::to_string(m.rows + 1) + " has " +
                        std::to_string(count) + " numbers but row 1 has " + std::to_string(m.cols));
    m.cols = count;
    ++m.rows;
  }
  if (m.rows == 0) throw usage_error(std::string(what) + ": no numbers given");
  return m;
}

/// Returns the contents of the file `path`; throws usage_error naming `what` if it cannot be read.
[[nodiscard]] inline std::string read_file(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw usage_error(std::string(what) + ": \"" + path + "\" is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw usage_error(std::string(what) + ": cannot read the file \"" + path + "\"");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw usage_error(std::string(what) + ": cannot read the file \"" + path + "\"");
  return std::move(s).str();
}

/// A matrix argument: "@path" reads the file, anything else is the matrix itself.
[[nodiscard]] inline matrix matrix_argument(std::string_view arg, std::string_view what) {
  if (!arg.empty() && arg.front() == '@') {
    const std::string path(arg.substr(1));
    if (path.empty()) throw usage_error(std::string(what) + ": '@' needs a file name");
    return parse_matrix(read_file(path, what), std::string(what) + " (" + path + ")", true);
  }
  return parse_matrix(arg, what);
}

/// True when `s` is well-formed UTF-8 without control characters (labels go into tables,
/// JSON, LaTeX and SVG, where a line break or a stray byte would break the layout).
[[nodiscard]] inline bool printable_utf8(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x20 || b == 0x7F) return false;
    std::size_t len = 1;
    char32_t c = b;
    if (b >= 0x80) {
      if (b >= 0xC2 && b < 0xE0) len = 2, c = b & 0x1Fu;
      else if (b >= 0xE0 && b < 0xF0) len = 3, c = b & 0x0Fu;
      else if (b >= 0xF0 && b < 0xF5) len = 4, c = b & 0x07u;
      else return false;
      if (i + len > s.size()) return false;
      for (std::size_t k = 1; k < len; ++k) {
        const auto cb = static_cast<unsigned char>(s[i + k]);
        if ((cb & 0xC0u) != 0x80u) return false;
        c = (c << 6) | (cb & 0x3Fu);
      }
      const char32_t least = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
      if (c < least || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) || (c >= 0x80 && c < 0xA0)) return false;
    }
    i += len;
  }
  return true;
}

/// Returns the comma-separated labels of `text` (spaces around each trimmed); none may be empty.
[[nodiscard]] inline std::vector<std::string> parse_labels(std::string_view text, std::string_view what) {
  std::vector<std::string> labels;
  while (true) {
    const auto comma = text.find(',');
    const std::string_view label = trim(text.substr(0, comma));
    const std::string which = std::string(what) + ": label " + std::to_string(labels.size() + 1);
    if (label.empty()) throw usage_error(which + " is empty");
    if (!printable_utf8(label)) throw usage_error(which + " is not printable UTF-8 text");
    labels.emplace_back(label);
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  return labels;
}

[[nodiscard]] inline std::string_view score_name(score_kind s) noexcept {
  switch (s) {
    case score_kind::dot: return "dot";
    case score_kind::scaled_dot: return "scaled_dot";
    case score_kind::general: return "general";
    case score_kind::additive: return "additive";
  }
  return "dot";
}

[[nodiscard]] inline std::string_view format_name(output_format f) noexcept {
  switch (f) {
    case output_format::text: return "text";
    case output_format::md: return "md";
    case output_format::latex: return "latex";
    case output_format::json: return "json";
    case output_format::csv: return "csv";
    case output_format::csv_long: return "csv-long";
    case output_format::svg: return "svg";
  }
  return "text";
}

/// The unit's "I drink tea" example (Unit 18, section 1): each note points at its own word.
inline void use_unit_notes(config& c) {
  c.notes = matrix{3, 3, {1, 0, 0, 0, 1, 0, 0, 0, 1}};
  c.note_labels = {"I", "drink", "tea"};
}

/// The decoder's states for मैं चाय पीता हूँ. चाय's is the unit's q = (0, 0.5, 2); the
/// unit gives no others, so these are chosen to show its map: मैं looks hardest at "I", पीता
/// back at "drink", and हूँ, which has no single English partner, spreads over "I" and "drink".
inline void use_unit_queries(config& c) {
  c.queries = matrix{4, 3, {2, 0.5, 0, 0, 0.5, 2, 0, 2, 0.5, 1.5, 1.5, 0}};
  c.query_labels = {"मैं", "चाय", "पीता", "हूँ"};
}

/// The unit's additive score by hand: W1 = W2 = I, v = (1, 1), q = (0.5, −0.5).
inline void use_unit_additive(config& c) {
  c.queries = matrix{1, 2, {0.5, -0.5}};
  c.notes = matrix{3, 2, {1, 0, 0, 1, 1, 1}};
  c.W1 = matrix{2, 2, {1, 0, 0, 1}};
  c.W2 = matrix{2, 2, {1, 0, 0, 1}};
  c.v = {1, 1};
}

namespace detail {

inline void need(bool ok, const std::string& message) {
  if (!ok) throw usage_error(message);
}

/// "1 note", "3 notes", "2 entries".
inline std::string count(std::size_t n, std::string_view one, std::string_view many = {}) {
  if (n == 1) return "1 " + std::string(one);
  return std::to_string(n) + " " + (many.empty() ? std::string(one) + "s" : std::string(many));
}

/// Every size check, after all options are read.
inline void check_sizes(const config& c) {
  const std::size_t dq = c.queries.cols, dh = c.notes.cols, n = c.notes.rows;
  switch (c.score) {
    case score_kind::dot:
    case score_kind::scaled_dot:
      need(dq == dh, "--q has " + count(dq, "number") + " per query but each note has " +
                         std::to_string(dh) + "; --score " + std::string(score_name(c.score)) +
                         " needs the same length (--score general or additive allow different ones)");
      break;
    case score_kind::general:
      need(c.W.rows == dq && c.W.cols == dh,
           "--W is " + std::to_string(c.W.rows) + "x" + std::to_string(c.W.cols) +
               " but --score general needs (query length) x (note length) = " + std::to_string(dq) +
               "x" + std::to_string(dh));
      break;
    case score_kind::additive: {
      const std::size_t k = c.v.size();
      need(c.W1.cols == dh, "--W1 has " + count(c.W1.cols, "column") + " but each note has " +
                                std::to_string(dh) + " numbers");
      need(c.W2.cols == dq, "--W2 has " + count(c.W2.cols, "column") + " but each query has " +
                                std::to_string(dq) + " numbers");
      need(c.W1.rows == k, "--W1 has " + count(c.W1.rows, "row") + " but --v has " +
                               count(k, "number") + " (both are the hidden size k)");
      need(c.W2.rows == k, "--W2 has " + count(c.W2.rows, "row") + " but --v has " +
                               count(k, "number") + " (both are the hidden size k)");
      break;
    }
  }
  if (!c.mask.empty())
    need(c.mask.size() == n, "--mask has " + count(c.mask.size(), "entry", "entries") +
                                 " but there are " + count(n, "note"));
  need(c.note_labels.size() == n, "--note-labels gives " + count(c.note_labels.size(), "label") +
                                      " but there are " + count(n, "note"));
  need(c.query_labels.size() == c.queries.rows,
       "--query-labels gives " + count(c.query_labels.size(), "label") + " but there are " +
           count(c.queries.rows, "query", "queries"));
}

inline std::vector<std::string> numbered(std::string_view stem, std::size_t n) {
  if (n == 1 && stem == "q") return {"q"};
  std::vector<std::string> out;
  for (std::size_t i = 1; i <= n; ++i) out.push_back(std::string(stem) + std::to_string(i));
  return out;
}

}  // namespace detail

/// Reads attn-calc's arguments (without the program name) into a checked config. Options take
/// their value as the next argument or after '=' ("--beta 2", "--beta=2"). Throws usage_error
/// for an unknown option, a missing or bad value, an option given twice, or sizes that do not fit.
[[nodiscard]] inline config parse_args(const std::vector<std::string_view>& args) {
  config c;
  struct raw {
    std::string_view value;
    bool given = false;
  };
  raw score, format, q, notes, W, W1, W2, v, beta, mask, note_labels, query_labels, decimals;
  const std::pair<std::string_view, raw*> valued[] = {
      {"--score", &score},     {"--format", &format},           {"--q", &q},
      {"--notes", &notes},     {"--W", &W},                     {"--W1", &W1},
      {"--W2", &W2},           {"--v", &v},                     {"--beta", &beta},
      {"--mask", &mask},       {"--note-labels", &note_labels}, {"--query-labels", &query_labels},
      {"--decimals", &decimals}};
  bool jacobian_given = false;

  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view name = args[i];
    std::string_view inline_value;
    bool has_inline = false;
    if (name.starts_with("--")) {
      if (const auto eq = name.find('='); eq != std::string_view::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_inline = true;
      }
    }
    if (name == "--help" || name == "-h") {
      c.help = true;
      return c;
    }
    if (name == "--jacobian") {
      detail::need(!has_inline, "--jacobian takes no value");
      detail::need(!jacobian_given, "--jacobian is given twice");
      jacobian_given = true;
      c.jacobian = true;
      continue;
    }
    raw* slot = nullptr;
    for (const auto& [option, target] : valued)
      if (name == option) slot = target;
    if (slot == nullptr) {
      if (name.starts_with("-"))
        throw usage_error("unknown option \"" + std::string(name) + "\" (attn-calc --help lists them)");
      throw usage_error("unexpected argument \"" + std::string(name) +
                        "\" (values follow an option, such as --q 0,0.5,2)");
    }
    detail::need(!slot->given, std::string(name) + " is given twice");
    slot->given = true;
    if (has_inline) {
      slot->value = inline_value;
    } else {
      detail::need(i + 1 < args.size(), std::string(name) + " needs a value");
      slot->value = args[++i];
    }
  }

  if (score.given) {
    const std::string_view s = trim(score.value);
    if (s == "dot") c.score = score_kind::dot;
    else if (s == "scaled_dot" || s == "scaled-dot") c.score = score_kind::scaled_dot;
    else if (s == "general") c.score = score_kind::general;
    else if (s == "additive") c.score = score_kind::additive;
    else
      throw usage_error("--score: unknown score \"" + std::string(s) +
                        "\" (dot, scaled_dot, general or additive)");
  }
  if (format.given) {
    const std::string_view f = trim(format.value);
    if (f == "text") c.format = output_format::text;
    else if (f == "md" || f == "markdown") c.format = output_format::md;
    else if (f == "latex" || f == "tex") c.format = output_format::latex;
    else if (f == "json") c.format = output_format::json;
    else if (f == "csv") c.format = output_format::csv;
    else if (f == "csv-long" || f == "csv_long") c.format = output_format::csv_long;
    else if (f == "svg") c.format = output_format::svg;
    else
      throw usage_error("--format: unknown format \"" + std::string(f) +
                        "\" (text, md, latex, json, csv, csv-long or svg)");
  }

  // Parameters a score does not use are refused: they are almost always a mistake.
  const bool general = c.score == score_kind::general, additive = c.score == score_kind::additive;
  detail::need(!W.given || general, "--W is only used by --score general");
  detail::need(!(W1.given || W2.given || v.given) || additive,
               std::string(W1.given ? "--W1" : W2.given ? "--W2" : "--v") +
                   " is only used by --score additive");

  if (additive && !q.given && !notes.given && !W1.given && !W2.given && !v.given) {
    use_unit_additive(c);  // the unit's additive score by hand
    c.example = unit_example::e5_additive;
  } else {
    if (q.given) c.queries = matrix_argument(q.value, "--q");
    if (notes.given) c.notes = matrix_argument(notes.value, "--notes");
    detail::need(q.given || !notes.given, "--notes needs --q (the queries that look at the notes)");
    if (!q.given && !notes.given) c.example = unit_example::e3_alignment_map;
    if (!notes.given) use_unit_notes(c);
    if (!q.given) use_unit_queries(c);
    if (W.given) c.W = matrix_argument(W.value, "--W");
    if (W1.given) c.W1 = matrix_argument(W1.value, "--W1");
    if (W2.given) c.W2 = matrix_argument(W2.value, "--W2");
    if (v.given) {
      const matrix vm = matrix_argument(v.value, "--v");
      detail::need(vm.rows == 1 || vm.cols == 1, "--v must be one row or one column of numbers, not " +
                                                     std::to_string(vm.rows) + "x" + std::to_string(vm.cols));
      c.v = vm.data;
    }
    detail::need(!general || W.given, "--score general needs --W (query length x note length)");
    detail::need(!additive || (W1.given && W2.given && v.given),
                 "--score additive needs --W1, --W2 and --v (or none of them, --q and --notes, for the "
                 "unit's example)");
  }
  if (q.given) c.query_labels = detail::numbered("q", c.queries.rows);
  if (notes.given || c.example == unit_example::e5_additive) c.note_labels = detail::numbered("h", c.notes.rows);
  if (c.example == unit_example::e5_additive) c.query_labels = {"q"};

  if (beta.given) c.beta = parse_number(beta.value, "--beta");
  if (decimals.given) c.decimals = parse_int(decimals.value, "--decimals", 0, 17);
  if (mask.given) {
    const matrix m = matrix_argument(mask.value, "--mask");
    detail::need(m.rows == 1 || m.cols == 1, "--mask must be one row of 0s and 1s");
    for (const double x : m.data) {
      detail::need(x == 0.0 || x == 1.0, "--mask: entries must be 1 (keep) or 0 (mask out)");
      c.mask.push_back(x == 1.0 ? 1 : 0);
    }
  }
  if (note_labels.given) c.note_labels = parse_labels(note_labels.value, "--note-labels");
  if (query_labels.given) c.query_labels = parse_labels(query_labels.value, "--query-labels");
  detail::check_sizes(c);
  return c;
}

/// parse_args for main's argc/argv (argv[0], the program name, is skipped).
[[nodiscard]] inline config parse_args(int argc, char** argv) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_args(args);
}

}  // namespace attn_calc
