#pragma once
/// \file examples/attn_calc/parse.hpp
/// attn-calc's command line, read into a `config` whose every size has been checked, or a
/// `usage_error` whose message names the option and the problem (main prints it on one line and
/// exits with code 2). Header-only so that tests can include it.
///
/// Numbers are read with std::from_chars: a '.' decimal point in every locale, exponents
/// allowed ("1e-3"), a leading '+' allowed, "nan" and "inf" refused. A matrix is written
/// inline, rows separated by ';' and numbers by ',' ("1,0,0;0,1,0"), or read from a file with
/// '@' ("@notes.csv"): one row per line, numbers separated by ',' or by spaces and tabs, blank
/// lines and lines starting with '#' skipped, a UTF-8 byte-order mark skipped; a ';' in a file
/// is refused (a spreadsheet's decimal commas, "0,5;1,5", would read as other numbers). Labels
/// are separated by ',' or read from a file, one per line. Every message is one line: what the
/// input held is shown escaped and, past 60 bytes, shortened.

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "attn/matrix.hpp"
#include "attn/report/detail/utf8.hpp"
#include "attn/softmax.hpp"  // causal_keys: which notes a query sees under causal
#include "attn/report/format.hpp"

namespace attn_calc {

namespace detail {

/// `s` on one line of a terminal, every byte visible: line breaks, tabs, NUL and the other
/// control characters, the escape sequences they start, C1 controls, bidirectional controls,
/// line and paragraph separators and bytes that are not UTF-8 are written as \n, \r, \t, \0,
/// \x1b, \u{202e}, \xff. Anything else is kept.
[[nodiscard]] inline std::string one_line(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = attn::report::detail::decode_utf8(s, i);
    const char32_t u = c.code_point;
    if (!c.valid || u < 0x20 || u == 0x7F) {
      switch (u) {
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case 0: out += "\\0"; break;
        default: out += "\\x", out += hex[(u >> 4) & 0xF], out += hex[u & 0xF];
      }
    } else if ((u >= 0x80 && u < 0xA0) || (u >= 0x202A && u <= 0x202E) || (u >= 0x2066 && u <= 0x2069) ||
               u == 0x2028 || u == 0x2029 || u == 0x200E || u == 0x200F) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\u{%x}", static_cast<unsigned>(u));
      out += buf;
    } else {
      out.append(s.substr(i, c.length));
    }
    i += c.length;
  }
  return out;
}

/// The length of the longest prefix of `s` of at most `n` bytes that does not cut a UTF-8
/// sequence (a byte that is not UTF-8 counts as one).
[[nodiscard]] inline std::size_t utf8_prefix(std::string_view s, std::size_t n) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t next = i + attn::report::detail::decode_utf8(s, i).length;
    if (next > n) break;
    i = next;
  }
  return i;
}

}  // namespace detail

/// Bad input: the message names the option and what is wrong with it, always on one line
/// (detail::one_line), whatever the input held.
class usage_error : public std::runtime_error {
public:
  explicit usage_error(const std::string& message) : std::runtime_error(detail::one_line(message)) {}
};

/// `s` shown in quotes for a message, on one line (detail::one_line); a value longer than 60 bytes
/// is shortened to its first 40 and last 12 and its length: "1111…1111" (1073741824 bytes).
[[nodiscard]] inline std::string shown(std::string_view s) {
  constexpr std::size_t most = 60, head = 40, tail = 12;
  if (s.size() <= most) return "\"" + detail::one_line(s) + "\"";
  const std::size_t h = detail::utf8_prefix(s, head);
  std::size_t t = s.size() - tail;
  while (t < s.size() && (static_cast<unsigned char>(s[t]) & 0xC0u) == 0x80u) ++t;  // a whole character
  return "\"" + detail::one_line(s.substr(0, h)) + "\xE2\x80\xA6" + detail::one_line(s.substr(t)) + "\" (" +
         std::to_string(s.size()) + " bytes)";
}

enum class score_kind { dot, scaled_dot, general, additive };
enum class output_format { text, md, latex, json, csv, csv_long, svg };
/// The lessons beyond the map (lessons.hpp): none (the map), --pe, --rope, --layer-norm or
/// --rms-norm, --activations, --block; --loss-curve (a training run's log, drawn); --no-peeking
/// (W10: the causal map and the loss at every position).
enum class lesson_kind { none, pe, rope, norm, activations, block, loss_curve, no_peeking };
/// Which of the unit's worked examples filled in the inputs the command line left out.
enum class unit_example { none, e3_alignment_map, e5_additive, e2_beta_sweep };

/// A matrix read from the command line or a file: row-major, rows × cols numbers.
struct matrix {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<double> data;
  std::string origin;                ///< what messages call it: "--mask", "--mask (mask.txt)"
  std::vector<std::size_t> lines;    ///< from a file: the line of each row (else empty)
  std::string semicolons;            ///< inline text of one number per row, rows split by ';' (else
                                     ///< empty): "0;0.5;2" where "0,0.5,2" was likely meant

  matrix() = default;
  matrix(std::size_t r, std::size_t c, std::vector<double> numbers) : rows(r), cols(c), data(std::move(numbers)) {}

  /// "--mask (mask.txt), line 3" for row r (from 0) of a file; the origin alone inline.
  [[nodiscard]] std::string where(std::size_t r) const {
    return lines.empty() ? origin : origin + ", line " + std::to_string(lines[r]);
  }
  /// For a message about this matrix's size: a hint when ';' split what ',' likely meant, or "".
  [[nodiscard]] std::string semicolon_hint() const;

  [[nodiscard]] attn::MatrixView<const double> view() const {
    return attn::MatrixView<const double>(data.data(), rows, cols);
  }
  [[nodiscard]] bool empty() const noexcept { return rows == 0; }
};

/// One run of a training log (--loss-curve): its name, its steps and, at each, the loss and the
/// log's other numeric columns (tokens_per_second, ...), as the file gives them.
struct loss_run {
  std::string name;                       ///< the file's stem, or its `run` column's value
  std::string file;                       ///< the name of the file it came from (no directory)
  std::vector<std::string> columns;       ///< "loss" first, then the log's other columns in order
  std::vector<double> steps;              ///< increasing
  std::vector<std::vector<double>> rows;  ///< rows[i][k]: column k at steps[i]
};

/// Everything attn-calc computes from, checked.
struct config {
  score_kind score = score_kind::dot;
  output_format format = output_format::text;
  matrix queries;                         ///< T × d_q, one query per row
  matrix notes;                           ///< n × d_h, one note per row (--keys: the keys, n × d_k)
  matrix values;                          ///< --values: n × d_v (empty: the notes are the values)
  matrix W;                               ///< general: d_q × d_h
  matrix W1;                              ///< additive: k × d_h
  matrix W2;                              ///< additive: k × d_q
  std::vector<double> v;                  ///< additive: k
  double beta = 1.0;                      ///< sharpness: scores are multiplied by beta
  std::vector<double> beta_sweep;         ///< --beta-sweep: the β values (empty: no sweep), one query's shares at each
  std::vector<char> mask;                 ///< empty, or one 0/1 per note (0 masks it out)
  std::vector<char> row_mask;             ///< empty, or T × n 0/1, row-major: row t for query t
  bool causal = false;                    ///< --mask causal: query t sees notes 1 … t + n − T (from 1)
  std::vector<std::string> query_labels;  ///< one per query
  std::vector<std::string> note_labels;   ///< one per note
  int decimals = 3;                       ///< digits after the point in printed numbers
  bool decimals_given = false;            ///< --decimals given (else --dot-vs-scaled chooses, see auto_decimals)
  bool jacobian = false;                  ///< also ∂c/∂h_j and ∂c/∂q, checked by finite differences
  bool steps = false;                     ///< also the hand steps: e^(βs) and their sum; additive's W1h + W2q, tanh
  bool no_attention = false;              ///< also Unit 17's baseline: every query gets the last note
  bool map_only = false;                  ///< text, md, latex: the map's table alone
  std::optional<std::string> title;       ///< the map's title (svg) or caption (its table)
  std::optional<std::string> row_axis;    ///< svg: the rows' title
  std::optional<std::string> col_axis;    ///< svg: the columns' title
  bool values_shown = true;               ///< svg: the values in the cells (--no-values: not)
  double scale_lo = 0.0, scale_hi = 1.0;  ///< svg: the colour scale's range
  std::string latex_label = "attn";       ///< latex: the tables' \\label prefix (attn:map, ...)
  bool help = false;                      ///< --help: print the help and nothing else
  /// --output FILE: the output goes to FILE, written atomically (main.cpp), not to stdout
  std::optional<std::string> output;
  /// --self: self-attention of the sentence X, which is both the queries and the notes (one
  /// word per row), labelled by --words; W_Q, W_K (d_model × h·d_k) and W_V (d_model × h·d_v)
  /// default to the identity (left empty here), W_O (h·d_v × d_out) to none.
  bool self_attention = false;
  /// --cross X_kv: cross-attention, the queries X_q from --q and the keys and values from the
  /// sentence X_kv (one word per row); self_attention is true too (the projections' mode), and
  /// W_Q defaults to the identity of d_q, W_K and W_V to that of d_kv.
  bool cross = false;
  matrix WQ, WK, WV, WO;
  /// --bq, --bk, --bv, --bo: the projections' biases (h·d_k, h·d_k, h·d_v, d_out), or empty
  std::vector<double> bQ, bK, bV, bO;
  std::size_t heads = 1;                  ///< --heads: h, PyTorch's layout
  std::vector<std::string> head_labels;   ///< --head-labels: one name per head (empty: head 1, head 2, ...)
  bool dot_vs_scaled = false;             ///< --dot-vs-scaled: the dot map and the scaled-dot map
  /// The lessons of the unit's §8–§9 (lessons.hpp); with one of them the map's inputs are unused.
  lesson_kind lesson = lesson_kind::none;
  std::size_t positions = 50;             ///< --pe: positions 0 … positions − 1 (W8: 50)
  std::size_t dim = 32;                   ///< --pe: d (W8: 32); --rope: d_k (default 8)
  bool split_layout = false;              ///< --layout: --pe concatenated, --rope half-split
  double rope_pair[2] = {1, 0};           ///< --rope: the pair (a, b)
  std::size_t position = 1;               ///< --rope: p
  std::size_t pair = 0;                   ///< --rope: i, from 0
  bool rms = false;                       ///< --rms-norm (else --layer-norm)
  matrix norm_input;                      ///< --layer-norm, --rms-norm: the rows x
  std::vector<double> gamma, ln_beta;     ///< --ln-gamma, --ln-beta: d each, or empty (1, 0)
  double eps = 1e-5;                      ///< --eps: the norms' ε (PyTorch's default)
  std::vector<double> activation_inputs;  ///< --activations: the x values
  bool pre_ln = false;                    ///< --block --pre-ln
  matrix ffn_w1, ffn_w2;                  ///< --block --self: the feed-forward layer's W_1, W_2
  std::vector<loss_run> loss_runs;        ///< --loss-curve: the runs of the logs, in order
  std::size_t vocabulary = 0;             ///< --vocabulary V: ln V drawn as chance's loss (0: not given)
  std::string ffn_activation = "gelu";    ///< --block --ffn-activation: relu, gelu or gelu-tanh
  /// Whether query t may attend to note j: the key mask, the row mask and causal all allow it.
  [[nodiscard]] bool allowed(std::size_t t, std::size_t j) const noexcept {
    const std::size_t T = queries.rows, n = notes.rows;
    return (mask.empty() || mask[j] != 0) && (row_mask.empty() || row_mask[t * n + j] != 0) &&
           (!causal || j < attn::detail::causal_keys(t, T, n));
  }
  /// Whether the queries have masks of their own (causal, a mask matrix), not one for all.
  [[nodiscard]] bool per_row_mask() const noexcept { return causal || !row_mask.empty(); }
  /// What the rows of the notes are called in messages: "word" (--self) or "note".
  [[nodiscard]] const char* note_noun() const noexcept { return self_attention ? "word" : "note"; }
  [[nodiscard]] bool keys_and_values() const noexcept { return !values.empty(); }
  /// The values the contexts blend: --values, or the notes.
  [[nodiscard]] const matrix& blended() const noexcept { return values.empty() ? notes : values; }
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
  if (ec == std::errc::result_out_of_range && ptr == digits.data() + digits.size())
    throw usage_error(std::string(what) + ": " + shown(t) + " is out of the range of a double");
  const bool two_signs = !digits.empty() && digits.size() < t.size() &&
                         (digits.front() == '+' || digits.front() == '-');
  if (ec != std::errc() || ptr != digits.data() + digits.size() || two_signs)
    throw usage_error(std::string(what) + ": " + shown(t) + " is not a number");
  if (!std::isfinite(x))
    throw usage_error(std::string(what) + ": " + shown(t) + " is not a finite number");
  return x;
}

/// Returns the whole number `text` spells, which must lie in [lo, hi].
[[nodiscard]] inline int parse_int(std::string_view text, std::string_view what, int lo, int hi) {
  const std::string_view t = trim(text);
  int x = 0;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size())
    throw usage_error(std::string(what) + ": " + shown(t) + " is not a whole number");
  if (x < lo || x > hi)
    throw usage_error(std::string(what) + ": " + std::to_string(x) + " is outside " +
                      std::to_string(lo) + ".." + std::to_string(hi));
  return x;
}

namespace detail {

/// "1 note", "3 notes", "2 entries".
inline std::string count(std::size_t n, std::string_view one, std::string_view many = {}) {
  if (n == 1) return "1 " + std::string(one);
  return std::to_string(n) + " " + (many.empty() ? std::string(one) + "s" : std::string(many));
}

/// "there is 1 note", "there are 3 notes".
inline std::string there_are(std::size_t n, std::string_view one, std::string_view many = {}) {
  return (n == 1 ? "there is " : "there are ") + count(n, one, many);
}

inline bool is_blank(char c) noexcept { return c == ' ' || c == '\t'; }

/// The numbers of one row, separated by ',' (spaces around it allowed) or, in a row without a
/// comma, by spaces and tabs. `where` names the row in messages; `header_hint` adds one for a
/// file's first row that holds a word.
inline void read_row(std::string_view row, const std::string& where, bool header_hint, std::vector<double>& out) {
  const bool commas = row.find(',') != std::string_view::npos;
  while (true) {
    std::size_t end = 0;
    if (commas) {
      end = row.find(',');
    } else {
      while (end < row.size() && !is_blank(row[end])) ++end;
    }
    const std::string_view field = trim(row.substr(0, end == std::string_view::npos ? row.size() : end));
    if (commas && std::find_if(field.begin(), field.end(), is_blank) != field.end())
      throw usage_error(where + ": " + shown(field) +
                        " holds a space: separate a row's numbers by ',' or by spaces, not both (a decimal "
                        "comma, as in 0,5, is not read: write 0.5)");
    try {
      out.push_back(parse_number(field, where));
    } catch (const usage_error& e) {
      const char f = field.empty() ? ' ' : static_cast<char>(field.front() | 0x20);
      if (!header_hint || f < 'a' || f > 'z' || std::string_view(e.what()).ends_with("is not a finite number")) throw;
      throw usage_error(std::string(e.what()) + " (a header row? start it with '#' to skip it)");
    }
    if (end == std::string_view::npos || end >= row.size()) break;
    row = commas ? row.substr(end + 1) : trim(row.substr(end));
  }
}

/// Appends a row to `m`, checking its length against the first row's.
inline void add_row(matrix& m, const std::vector<double>& row, const std::string& where, const std::string& first) {
  if (m.rows > 0 && row.size() != m.cols)
    throw usage_error(where + ": row " + std::to_string(m.rows + 1) + " has " + count(row.size(), "number") +
                      " but row 1" + first + " has " + std::to_string(m.cols));
  m.cols = row.size();
  m.data.insert(m.data.end(), row.begin(), row.end());
  ++m.rows;
}

/// One line of a file: its number (from 1) and its text without the line end.
struct text_line {
  std::size_t number;
  std::string_view text;
};

/// The lines of a file: a UTF-8 byte-order mark skipped, lines ended by \n, \r\n or \r.
inline std::vector<text_line> lines_of(std::string_view contents) {
  if (contents.starts_with("\xEF\xBB\xBF")) contents.remove_prefix(3);
  std::vector<text_line> lines;
  std::size_t number = 1;
  while (!contents.empty()) {
    const std::size_t end = contents.find_first_of("\r\n");
    lines.push_back({number++, contents.substr(0, end)});
    if (end == std::string_view::npos) break;
    contents.remove_prefix(end + (contents.substr(end).starts_with("\r\n") ? 2 : 1));
  }
  return lines;
}

/// A UTF-8 byte-order mark (U+FEFF) inside a file, past its start (where lines_of skips one):
/// refused by name, as files joined with cat leave it; shown, it would be invisible.
inline void no_byte_order_mark(std::string_view line, const std::string& where) {
  if (line.find("\xEF\xBB\xBF") != std::string_view::npos)
    throw usage_error(where + ": a byte-order mark (U+FEFF) in the middle of the file, where it does not belong (two "
                              "files joined? remove it; one at the very start of a file is fine)");
}

}  // namespace detail

inline std::string matrix::semicolon_hint() const {
  if (semicolons.empty()) return "";
  std::string commas = semicolons;
  std::replace(commas.begin(), commas.end(), ';', ',');
  return " (" + origin + " " + shown(semicolons) + " is " + std::to_string(rows) +
         " rows of 1 number: ';' separates rows, ',' the numbers of a row; did you mean " + shown(commas) + "?)";
}

/// Returns the matrix `text` spells. Inline (`file` false): rows separated by ';' or line
/// breaks. A file's contents (`file` true): one row per line (lines starting with '#' skipped,
/// a ';' or a NUL byte refused, messages naming the line). Numbers are separated by ',' or,
/// in a row without a comma, by spaces and tabs; blank rows are skipped. Throws usage_error
/// for a bad number, rows of different lengths, or no numbers at all.
[[nodiscard]] inline matrix parse_matrix(std::string_view text, std::string_view what, bool file = false) {
  matrix m;
  m.origin = std::string(what);
  std::vector<double> row;
  if (!file) {
    const std::string_view whole = trim(text);
    while (true) {
      const auto end = text.find_first_of(";\r\n");
      const std::string_view line = trim(text.substr(0, end));
      if (!line.empty()) {
        row.clear();
        detail::read_row(line, std::string(what), false, row);
        detail::add_row(m, row, std::string(what), "");
      }
      if (end == std::string_view::npos) break;
      text.remove_prefix(end + 1);
    }
    if (m.cols == 1 && m.rows > 1 && whole.find(';') != std::string_view::npos) m.semicolons = std::string(whole);
  } else {
    std::size_t first_line = 0;
    for (const auto& [number, raw] : detail::lines_of(text)) {
      const std::string where = std::string(what) + ", line " + std::to_string(number);
      if (raw.find('\0') != std::string_view::npos) throw usage_error(where + ": a NUL byte (is this a text file?)");
      detail::no_byte_order_mark(raw, where);
      const std::string_view line = trim(raw);
      if (line.empty() || line.front() == '#') continue;
      if (line.find(';') != std::string_view::npos)
        throw usage_error(where + ": a ';', which separates rows only on the command line: in a file each line "
                                  "is a row (a spreadsheet export with decimal commas, such as 0,5;1,5, is not "
                                  "read: save it with '.' as the decimal point and ',' between numbers)");
      row.clear();
      detail::read_row(line, where, first_line == 0, row);
      if (first_line == 0) first_line = number;
      detail::add_row(m, row, where, " (line " + std::to_string(first_line) + ")");
      m.lines.push_back(number);
    }
  }
  if (m.rows == 0) throw usage_error(std::string(what) + ": no numbers given");
  return m;
}

/// The most bytes attn-calc reads from an @file (64 MiB): a 1000×1000 matrix at full precision
/// is about 25 MB.
inline constexpr std::size_t max_file_bytes = std::size_t{64} << 20;

/// Returns the contents of the regular file `path`. Throws usage_error naming `what` if it
/// cannot be read, is not a regular file (a directory, a device such as /dev/zero, a pipe, a
/// socket) or holds more than max_file_bytes.
[[nodiscard]] inline std::string read_file(const std::string& path, std::string_view what) {
  namespace fs = std::filesystem;
  const std::string where = std::string(what) + ": " + shown(path);
  const std::string too_big =
      " bytes; attn-calc reads files of up to " + std::to_string(max_file_bytes) + " bytes (64 MiB)";
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // follows links, opens nothing
  if (ec || !fs::exists(status)) throw usage_error(std::string(what) + ": cannot read the file " + shown(path));
  if (fs::is_directory(status)) throw usage_error(where + " is a directory, not a file");
  if (!fs::is_regular_file(status))
    throw usage_error(where + " is not a regular file (a device, a pipe or a socket): give a file");
  const std::uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > max_file_bytes) throw usage_error(where + " is " + std::to_string(size) + too_big);
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!in) throw usage_error(std::string(what) + ": cannot read the file " + shown(path));
  std::string contents;
  char buffer[1 << 16];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, in.get())) > 0) {
    contents.append(buffer, got);
    if (contents.size() > max_file_bytes) throw usage_error(where + " is more than " + std::to_string(max_file_bytes) + too_big);
  }
  if (std::ferror(in.get())) throw usage_error(std::string(what) + ": cannot read the file " + shown(path));
  return contents;
}

/// A matrix argument: "@path" reads the file, anything else is the matrix itself.
[[nodiscard]] inline matrix matrix_argument(std::string_view arg, std::string_view what) {
  if (!arg.empty() && arg.front() == '@') {
    const std::string path(arg.substr(1));
    if (path.empty()) throw usage_error(std::string(what) + ": '@' needs a file name");
    return parse_matrix(read_file(path, what), std::string(what) + " (" + detail::one_line(path) + ")", true);
  }
  return parse_matrix(arg, what);
}

/// True when `s` is well-formed UTF-8 without control characters (C0, DEL, C1) or
/// noncharacters (U+FFFE, U+FFFF, U+FDD0..U+FDEF and the last two of every plane): labels go
/// into tables, JSON, LaTeX and SVG, where a line break would break the layout and XML cannot
/// hold U+FFFE or U+FFFF.
[[nodiscard]] inline bool printable_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = attn::report::detail::decode_utf8(s, i);
    const char32_t u = c.code_point;
    if (!c.valid || u < 0x20 || (u >= 0x7F && u < 0xA0) || (u & 0xFFFE) == 0xFFFE || (u >= 0xFDD0 && u <= 0xFDEF))
      return false;
    i += c.length;
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

/// Returns the labels of a file's contents: one per line (spaces around it trimmed, commas
/// kept), blank lines skipped. `what` names the option and the file.
[[nodiscard]] inline std::vector<std::string> parse_label_lines(std::string_view contents, std::string_view what) {
  std::vector<std::string> labels;
  for (const auto& [number, raw] : detail::lines_of(contents)) {
    const std::string_view label = trim(raw);
    detail::no_byte_order_mark(raw, std::string(what) + ", line " + std::to_string(number));
    if (label.empty()) continue;
    if (!printable_utf8(label))
      throw usage_error(std::string(what) + ", line " + std::to_string(number) + ": the label is not printable UTF-8 text");
    labels.emplace_back(label);
  }
  if (labels.empty()) throw usage_error(std::string(what) + ": no labels given");
  return labels;
}

/// A labels argument: "@path" reads one label per line of the file, anything else is the
/// labels separated by ','.
[[nodiscard]] inline std::vector<std::string> labels_argument(std::string_view arg, std::string_view what) {
  if (!arg.empty() && arg.front() == '@') {
    const std::string path(arg.substr(1));
    if (path.empty()) throw usage_error(std::string(what) + ": '@' needs a file name");
    return parse_label_lines(read_file(path, what), std::string(what) + " (" + detail::one_line(path) + ")");
  }
  return parse_labels(arg, what);
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

/// For a count of labels that is wrong: a hint when a label holds ';' ("I;drink;tea"), or "".
inline std::string label_semicolons(const std::vector<std::string>& labels) {
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i].find(';') != std::string::npos)
      return " (label " + std::to_string(i + 1) + ", " + shown(labels[i]) +
             ", holds ';': labels are separated by ',')";
  return "";
}

/// Every size check, after all options are read.
inline void check_sizes(const config& c) {
  const std::size_t dq = c.queries.cols, dh = c.notes.cols, n = c.notes.rows;
  const std::string note = c.keys_and_values() ? "key" : "note";
  switch (c.cross ? score_kind::general : c.score) {  // --cross: check_projections checked Q against K
    case score_kind::dot:
    case score_kind::scaled_dot:
      need(dq == dh, "--q has " + count(dq, "number") + " per query but each " + note + " has " +
                         std::to_string(dh) + "; --score " + std::string(score_name(c.score)) +
                         " needs the same length (--score general or additive allow different ones)" +
                         c.queries.semicolon_hint() + c.notes.semicolon_hint());
      break;
    case score_kind::general:
      if (c.cross) break;
      need(c.W.rows == dq && c.W.cols == dh,
           "--W is " + std::to_string(c.W.rows) + "x" + std::to_string(c.W.cols) +
               " but --score general needs (query length) x (" + note + " length) = " + std::to_string(dq) +
               "x" + std::to_string(dh));
      break;
    case score_kind::additive: {
      const std::size_t k = c.v.size();
      need(c.W1.cols == dh, "--W1 has " + count(c.W1.cols, "column") + " but each " + note + " has " + count(dh, "number"));
      need(c.W2.cols == dq, "--W2 has " + count(c.W2.cols, "column") + " but each query has " + count(dq, "number"));
      need(c.W1.rows == k, "--W1 has " + count(c.W1.rows, "row") + " but --v has " +
                               count(k, "number") + " (both are the hidden size k)");
      need(c.W2.rows == k, "--W2 has " + count(c.W2.rows, "row") + " but --v has " +
                               count(k, "number") + " (both are the hidden size k)");
      break;
    }
  }
  if (c.keys_and_values())
    need(c.values.rows == n, "--values has " + count(c.values.rows, "row") + " but --keys has " +
                                 std::to_string(n) + " (one value per key)");
  if (!c.mask.empty())
    need(c.mask.size() == n, "--mask has " + count(c.mask.size(), "entry", "entries") +
                                 " but " + there_are(n, c.note_noun()));
  need(c.note_labels.size() == n, (c.self_attention && !c.cross ? "--words gives " : "--note-labels gives ") +
                                      count(c.note_labels.size(), "label") + " but " + there_are(n, c.note_noun()) +
                                      label_semicolons(c.note_labels));
  need(c.query_labels.size() == c.queries.rows,
       "--query-labels gives " + count(c.query_labels.size(), "label") + " but " +
           there_are(c.queries.rows, "query", "queries") + label_semicolons(c.query_labels));
}

/// "--wq has 4 columns" or, when the option is not given, "W_Q (the identity: --wq not given) has 3 columns".
inline std::string projection_columns(const matrix& m, std::string_view option, std::string_view name, std::size_t d) {
  if (m.empty()) return std::string(name) + " (the identity: " + std::string(option) + " not given) has " + count(d, "column");
  return std::string(option) + " has " + count(m.cols, "column");
}

/// --self's checks: W_Q, W_K and W_V have a row per number of a word, W_Q and W_K as many
/// columns, h divides the columns of W_Q and of W_V, and W_O has a row per column of W_V.
inline void check_projections(const config& c) {
  const std::size_t d = c.queries.cols, dkv = c.notes.cols;
  const std::string qs = c.cross ? "each query of --q" : "each word of --self";
  const std::string kvs = c.cross ? "each word of --cross" : "each word of --self";
  const std::string formula = c.cross ? " (Q = X_q W_Q, K = X_kv W_K, V = X_kv W_V)" : " (Q = X W_Q, K = X W_K, V = X W_V)";
  for (const auto& [m, option, rows, what] :
       {std::tuple<const matrix&, std::string_view, std::size_t, const std::string&>{c.WQ, "--wq", d, qs},
        {c.WK, "--wk", dkv, kvs}, {c.WV, "--wv", dkv, kvs}})
    need(m.empty() || m.rows == rows,
         std::string(option) + " has " + count(m.rows, "row") + " but " + what + " has " + count(rows, "number") + formula);
  const std::size_t dq = c.WQ.empty() ? d : c.WQ.cols, dk = c.WK.empty() ? dkv : c.WK.cols,
                    dv = c.WV.empty() ? dkv : c.WV.cols;
  need(dq == dk, projection_columns(c.WK, "--wk", "W_K", dkv) + " but " + projection_columns(c.WQ, "--wq", "W_Q", d) +
                     " (the queries and the keys need the same size, h·d_k)");
  for (const auto& [cols, name] : {std::pair<std::size_t, std::string_view>{dq, "W_Q"}, {dv, "W_V"}})
    need(cols % c.heads == 0, "--heads " + std::to_string(c.heads) + " does not divide the " + count(cols, "column") +
                                  " of " + std::string(name) + " (each head takes columns / h of them)");
  need(c.WO.empty() || c.WO.rows == dv, "--wo has " + count(c.WO.rows, "row") + " but " +
                                            (c.WV.empty() ? "W_V (the identity: --wv not given)" : "--wv") + " has " +
                                            count(dv, "column") + " (Y = [Z_1 … Z_h] W_O)");
  for (const auto& [b, option, cols, name] :
       {std::tuple<const std::vector<double>&, std::string_view, std::size_t, std::string_view>{c.bQ, "--bq", dq, "W_Q"},
        {c.bK, "--bk", dk, "W_K"}, {c.bV, "--bv", dv, "W_V"}, {c.bO, "--bo", c.WO.cols, "W_O"}})
    need(b.empty() || b.size() == cols, std::string(option) + " has " + count(b.size(), "number") + " but " +
                                            std::string(name) + " has " + count(cols, "column") +
                                            " (a bias adds one number to each column)");
}

/// An option's text and whether it was given (read_projections' arguments).
struct option_text {
  std::string_view value;
  bool given = false;
};

/// Reads --wq, --wk, --wv, --wo and the biases --bq, --bk, --bv, --bo (each one row or one
/// column of numbers) into c, then checks them (check_projections).
inline void read_projections(config& c, const option_text (&o)[8]) {
  const std::string_view names[] = {"--wq", "--wk", "--wv", "--wo", "--bq", "--bk", "--bv", "--bo"};
  matrix* weights[] = {&c.WQ, &c.WK, &c.WV, &c.WO};
  std::vector<double>* biases[] = {&c.bQ, &c.bK, &c.bV, &c.bO};
  for (std::size_t k = 0; k < 8; ++k) {
    if (!o[k].given) continue;
    if (k < 4) {
      *weights[k] = matrix_argument(o[k].value, names[k]);
    } else {
      const matrix m = matrix_argument(o[k].value, names[k]);
      need(m.rows == 1 || m.cols == 1, std::string(names[k]) + " must be one row or one column of numbers, not " +
                                           std::to_string(m.rows) + "x" + std::to_string(m.cols));
      *biases[k - 4] = m.data;
    }
  }
  check_projections(c);
}

/// Reads every --mask into c (the queries and notes already read): `causal`; one 0/1 per note,
/// as a row or a column (every query the same); or a matrix of T rows of n (a row per query).
/// Several combine: every one must allow a note.
inline void read_masks(config& c, const std::vector<std::string_view>& values) {
  const std::size_t T = c.queries.rows, n = c.notes.rows;
  const std::string query = c.self_attention ? "word" : "query";
  for (const std::string_view value : values) {
    if (trim(value) == "causal") {
      need(!c.causal, "--mask causal is given twice");
      c.causal = true;
      continue;
    }
    const matrix m = matrix_argument(value, "--mask");
    for (std::size_t k = 0; k < m.data.size(); ++k)
      need(m.data[k] == 0.0 || m.data[k] == 1.0,
           m.where(k / m.cols) + ": the entry in row " + std::to_string(k / m.cols + 1) + ", column " +
               std::to_string(k % m.cols + 1) + " is " + attn::report::shortest(m.data[k]) +
               "; entries must be 1 (keep) or 0 (mask out)");
    const bool one_row = m.rows == 1 || (m.cols == 1 && m.rows == n && n > 1);
    if (one_row || (m.cols == 1 && !(n == 1 && m.rows == T))) {
      need(m.data.size() == n, "--mask has " + count(m.data.size(), "entry", "entries") + " but " +
                                   there_are(n, c.note_noun()) + m.semicolon_hint());
      if (c.mask.empty()) c.mask.assign(n, 1);
      for (std::size_t j = 0; j < n; ++j) c.mask[j] = static_cast<char>(c.mask[j] != 0 && m.data[j] == 1.0);
      continue;
    }
    need(m.rows == T && m.cols == n,
         "--mask is " + std::to_string(m.rows) + "x" + std::to_string(m.cols) + ": give one row of " +
             count(n, "entry", "entries") + " (every " + query + " the same), " + count(T, "row") + " of " +
             std::to_string(n) + " (one per " + query + ") or causal");
    if (c.row_mask.empty()) c.row_mask.assign(T * n, 1);
    for (std::size_t k = 0; k < T * n; ++k) c.row_mask[k] = static_cast<char>(c.row_mask[k] != 0 && m.data[k] == 1.0);
  }
}

/// The d × d identity: a projection not given.
inline matrix identity(std::size_t d) {
  matrix m{d, d, std::vector<double>(d * d, 0.0)};
  for (std::size_t i = 0; i < d; ++i) m.data[i * d + i] = 1;
  return m;
}

inline std::vector<std::string> numbered(std::string_view stem, std::size_t n) {
  if (n == 1 && stem == "q") return {"q"};
  std::vector<std::string> out;
  for (std::size_t i = 1; i <= n; ++i) out.push_back(std::string(stem) + std::to_string(i));
  return out;
}

/// The formats an option's output appears in, as a bit set of output_format.
constexpr unsigned formats(std::initializer_list<output_format> fs) {
  unsigned bits = 0;
  for (const auto f : fs) bits |= 1u << static_cast<unsigned>(f);
  return bits;
}

/// "text, md, latex or json"
inline std::string format_list(unsigned bits) {
  std::vector<std::string> names;
  for (unsigned f = 0; f <= static_cast<unsigned>(output_format::svg); ++f)
    if (bits & (1u << f)) names.emplace_back(format_name(static_cast<output_format>(f)));
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

}  // namespace detail

namespace detail {

/// An option's text and whether it was given.
struct given_text {
  std::string_view value;
  bool given = false;
};

/// The numbers of an option that is one row or one column (--ln-gamma, --activations).
inline std::vector<double> numbers_argument(std::string_view text, std::string_view option) {
  const matrix m = matrix_argument(text, option);
  need(m.rows == 1 || m.cols == 1, std::string(option) + " must be one row or one column of numbers, not " +
                                       std::to_string(m.rows) + "x" + std::to_string(m.cols));
  return m.data;
}

/// --beta-sweep's values: LO:HI:STEP (LO, LO + STEP, … up to HI, each LO + k·STEP, HI itself
/// when STEP divides the range within a millionth of a step), or the values separated by ','.
/// At most 1001 values, in increasing order.
inline std::vector<double> parse_sweep(std::string_view text) {
  std::vector<double> out;
  const std::string_view t = trim(text);
  if (t.find(':') != std::string_view::npos) {
    const std::size_t a = t.find(':'), b = t.find(':', a + 1);
    need(b != std::string_view::npos && t.find(':', b + 1) == std::string_view::npos,
         "--beta-sweep: " + shown(t) + " is not LO:HI:STEP (e.g. 0:4:0.25) or values separated by ','");
    const double lo = parse_number(t.substr(0, a), "--beta-sweep (LO)");
    const double hi = parse_number(t.substr(a + 1, b - a - 1), "--beta-sweep (HI)");
    const double step = parse_number(t.substr(b + 1), "--beta-sweep (STEP)");
    need(step > 0, "--beta-sweep: the STEP " + attn::report::shortest(step) + " is not above 0");
    need(lo < hi, "--beta-sweep: LO must be below HI, and " + attn::report::shortest(lo) + " is not below " +
                      attn::report::shortest(hi));
    const double steps = std::floor((hi - lo) / step + 1e-6);
    need(steps <= 1000, "--beta-sweep: " + shown(t) + " is more than 1001 values of β");
    for (std::size_t k = 0; k <= static_cast<std::size_t>(steps); ++k)
      out.push_back(std::min(hi, lo + static_cast<double>(k) * step));
  } else {
    out = numbers_argument(t, "--beta-sweep");
    need(out.size() <= 1001, "--beta-sweep: more than 1001 values of β");
    for (std::size_t k = 1; k < out.size(); ++k)
      need(out[k - 1] < out[k], "--beta-sweep: the values must increase, and " + attn::report::shortest(out[k]) +
                                    " follows " + attn::report::shortest(out[k - 1]));
  }
  need(out.size() >= 2, "--beta-sweep needs at least two values of β");
  return out;
}

/// The most numbers a lesson prints (--pe's positions × d, a norm's rows): W8's PE is 1600; a
/// lesson's table of 100000 numbers is already past reading.
inline constexpr std::size_t most_lesson_numbers = 100000;

/// The most runs --loss-curve draws: the chart's 7 colours × 6 dashes tell 42 apart, but a
/// legend of more than 12 is past reading.
inline constexpr std::size_t most_loss_runs = 12;

/// Reads a training log (--loss-curve): CSV, a header naming the columns (`step` and `loss`
/// needed, `run` optional, any other column a number), then a row per step; '#' lines and blank
/// lines skipped, a byte-order mark at the start skipped and refused anywhere else. Rows go to
/// the run named by their `run` field (`stem: run` when `several` files are read) or to `stem`;
/// the steps of a run must increase. Every message names the file and the line, and the column
/// of a bad number.
inline void read_loss_log(std::string_view contents, const std::string& what, const std::string& stem,
                          const std::string& file, bool several, std::vector<loss_run>& runs) {
  std::vector<std::string> header;
  std::size_t header_line = 0, step_col = 0, loss_col = 0, run_col = 0;
  bool has_run = false;
  std::vector<std::size_t> others;  // the columns beyond step, loss and run, in order
  const std::size_t first_run = runs.size();
  const auto split = [](std::string_view line) {
    std::vector<std::string_view> fields;
    while (true) {
      const auto comma = line.find(',');
      fields.push_back(trim(line.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      line.remove_prefix(comma + 1);
    }
    return fields;
  };
  for (const auto& [number, raw] : lines_of(contents)) {
    const std::string where = what + ", line " + std::to_string(number);
    need(raw.find('\0') == std::string_view::npos, where + ": a NUL byte (is this a text file?)");
    no_byte_order_mark(raw, where);
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') continue;
    need(line.find(';') == std::string_view::npos,
         where + ": a ';': a log's fields are separated by ',' (step,loss), with '.' as the decimal point");
    const std::vector<std::string_view> fields = split(line);
    if (header_line == 0) {
      header_line = number;
      for (std::size_t k = 0; k < fields.size(); ++k) {
        const std::string_view name = fields[k];
        need(!name.empty(), where + ": column " + std::to_string(k + 1) + " of the header has no name");
        need(printable_utf8(name), where + ": column " + std::to_string(k + 1) + "'s name is not printable UTF-8 text");
        for (const auto& before : header)
          need(before != name, where + ": the header names the column " + shown(name) + " twice");
        header.emplace_back(name);
        if (name == "step") step_col = k + 1;
        else if (name == "loss") loss_col = k + 1;
        else if (name == "run") { run_col = k; has_run = true; }
        else others.push_back(k);
      }
      const bool numeric = !fields[0].empty() && (std::isdigit(static_cast<unsigned char>(fields[0].front())) != 0 ||
                                                  fields[0].front() == '-' || fields[0].front() == '.');
      need(step_col != 0 && loss_col != 0,
           where + ": the header " + shown(line) + " has no column " + (step_col == 0 ? "\"step\"" : "\"loss\"") +
               (numeric ? " (the first line must be a header: step,loss)" : " (a log's header: step,loss[,more columns])"));
      --step_col;
      --loss_col;
      continue;
    }
    need(fields.size() == header.size(), where + ": " + count(fields.size(), "field") + ", but the header (line " +
                                             std::to_string(header_line) + ") has " + count(header.size(), "column"));
    std::string name = stem;
    if (has_run) {
      need(!fields[run_col].empty(), where + ": the run is empty");
      need(printable_utf8(fields[run_col]), where + ": the run's name is not printable UTF-8 text");
      name = several ? stem + ": " + std::string(fields[run_col]) : std::string(fields[run_col]);
    }
    std::size_t r = first_run;
    while (r < runs.size() && runs[r].name != name) ++r;
    if (r == runs.size()) {
      need(runs.size() < most_loss_runs, where + ": a run more than " + std::to_string(most_loss_runs) +
                                             " (a chart's legend tells at most " + std::to_string(most_loss_runs) + " apart)");
      loss_run fresh;
      fresh.name = name;
      fresh.file = file;
      fresh.columns.emplace_back("loss");
      for (const std::size_t k : others) fresh.columns.push_back(header[k]);
      runs.push_back(std::move(fresh));
    }
    loss_run& run = runs[r];
    const auto at = [&](std::size_t k) { return parse_number(fields[k], where + ", column " + header[k]); };
    const double step = at(step_col);
    if (!run.steps.empty() && !(step > run.steps.back()))
      throw usage_error(where + ": step " + attn::report::shortest(step) + " does not follow step " +
                        attn::report::shortest(run.steps.back()) + " (the steps of a run must increase)");
    std::vector<double> row{at(loss_col)};
    for (const std::size_t k : others) row.push_back(at(k));
    run.steps.push_back(step);
    run.rows.push_back(std::move(row));
    std::size_t total = 0;
    for (const auto& each : runs) total += each.rows.size() * (each.columns.size() + 1);
    need(total <= most_lesson_numbers, what + ": more than " + std::to_string(most_lesson_numbers) +
                                           " numbers; attn-calc reads logs of at most that (thin the log: a row every "
                                           "10 steps draws the same curve)");
  }
  need(header_line != 0, what + ": no header (a log starts with a line such as step,loss)");
  need(runs.size() > first_run, what + ": no rows after the header (line " + std::to_string(header_line) + ")");
}

/// Reads the options of c.lesson (its kind already set, its options checked to be its own).
inline void read_lesson(config& c, given_text positions, given_text dim, given_text layout, given_text rope,
                        given_text position, given_text pair, given_text norm, given_text gamma, given_text beta,
                        given_text eps, given_text activations, given_text ffn_w1, given_text ffn_w2) {
  const auto whole = [](given_text t, std::string_view option, int lo, int hi) {
    return static_cast<std::size_t>(parse_int(t.value, option, lo, hi));
  };
  if (layout.given) {
    const std::string_view l = trim(layout.value);
    const bool pe = c.lesson == lesson_kind::pe;
    if (l == "interleaved") c.split_layout = false;
    else if (pe && l == "concatenated") c.split_layout = true;
    else if (!pe && (l == "half-split" || l == "half_split")) c.split_layout = true;
    else
      throw usage_error("--layout: " + shown(l) + (pe ? " is not a layout of --pe (interleaved or concatenated)"
                                                     : " is not a form of --rope (interleaved or half-split)"));
  }
  if (eps.given) {
    c.eps = parse_number(eps.value, "--eps");
    need(c.eps >= 0, "--eps: " + attn::report::shortest(c.eps) + " is below 0 (ε is added to a variance)");
  }
  switch (c.lesson) {
    case lesson_kind::pe: {
      if (positions.given) c.positions = whole(positions, "--positions", 1, 100000);
      if (dim.given) c.dim = whole(dim, "--dim", 2, 100000);
      need(c.dim % 2 == 0, "--dim: " + std::to_string(c.dim) + " is odd (sines and cosines come in pairs)");
      need(c.positions * c.dim <= most_lesson_numbers,
           "--pe: " + std::to_string(c.positions) + " positions x " + std::to_string(c.dim) + " dimensions are " +
               std::to_string(c.positions * c.dim) + " numbers; attn-calc prints at most 100000");
      break;
    }
    case lesson_kind::rope: {
      const matrix m = matrix_argument(rope.value, "--rope");
      need(m.data.size() == 2, "--rope needs a pair of numbers, a,b, not " + count(m.data.size(), "number"));
      c.rope_pair[0] = m.data[0];
      c.rope_pair[1] = m.data[1];
      c.dim = dim.given ? whole(dim, "--dim", 2, 100000) : 8;
      need(c.dim % 2 == 0, "--dim: " + std::to_string(c.dim) + " is odd (RoPE turns pairs of numbers)");
      if (position.given) c.position = whole(position, "--position", 0, 1000000000);
      if (pair.given) c.pair = whole(pair, "--pair", 0, 100000);
      need(c.pair < c.dim / 2, "--pair: " + std::to_string(c.pair) + " is not a pair of d_k = " + std::to_string(c.dim) +
                                   " numbers (pairs 0 to " + std::to_string(c.dim / 2 - 1) + ")");
      break;
    }
    case lesson_kind::norm: {
      const std::string which = c.rms ? "--rms-norm" : "--layer-norm";
      c.norm_input = matrix_argument(norm.value, which);
      need(c.norm_input.data.size() <= most_lesson_numbers, which + ": attn-calc prints at most 100000 numbers");
      const std::size_t d = c.norm_input.cols;
      for (const auto& [text, option, target] :
           {std::tuple<given_text, std::string_view, std::vector<double>&>{gamma, "--ln-gamma", c.gamma},
            {beta, "--ln-beta", c.ln_beta}}) {
        if (!text.given) continue;
        target = numbers_argument(text.value, option);
        need(target.size() == d, std::string(option) + " has " + count(target.size(), "number") + " but each row has " +
                                     std::to_string(d) + " (one per column)");
      }
      break;
    }
    case lesson_kind::activations:
      c.activation_inputs = numbers_argument(activations.value, "--activations");
      need(c.activation_inputs.size() <= 10000, "--activations: attn-calc takes at most 10000 values");
      break;
    case lesson_kind::block: {
      if (!c.self_attention) break;  // W9's block
      need(c.query_labels.size() == c.queries.rows, "--words gives " + count(c.query_labels.size(), "label") + " but " +
                                                        there_are(c.queries.rows, "word"));
      // --self's sentence and projections are read and checked (check_projections); the block
      // needs the attention to map back to d_model, and W_1 (d_model × d_ff), W_2 (d_ff × d_model)
      const std::size_t d = c.queries.cols, dv = c.WV.empty() ? d : c.WV.cols;
      need(c.WO.empty() ? dv == d : c.WO.cols == d,
           (c.WO.empty() ? std::string("the heads' outputs side by side have ") + count(dv, "column") + " (no --wo)"
                         : "--wo has " + count(c.WO.cols, "column")) +
               " but each word has " + count(d, "number") + ": the block adds attention's output back to X");
      c.ffn_w1 = matrix_argument(ffn_w1.value, "--ffn-w1");
      c.ffn_w2 = matrix_argument(ffn_w2.value, "--ffn-w2");
      need(c.ffn_w1.rows == d, "--ffn-w1 has " + count(c.ffn_w1.rows, "row") + " but each word has " + count(d, "number") +
                                   " (the hidden layer is X W_1)");
      need(c.ffn_w2.rows == c.ffn_w1.cols, "--ffn-w2 has " + count(c.ffn_w2.rows, "row") + " but --ffn-w1 has " +
                                               count(c.ffn_w1.cols, "column") + " (one per hidden unit)");
      need(c.ffn_w2.cols == d, "--ffn-w2 has " + count(c.ffn_w2.cols, "column") + " but each word has " +
                                   count(d, "number") + ": the block adds the feed-forward output back");
      const std::size_t numbers = c.queries.rows * std::max({d, c.ffn_w1.cols, c.queries.rows * c.heads});
      need(numbers <= most_lesson_numbers, "--block: a table of " + std::to_string(numbers) +
                                               " numbers; attn-calc prints at most 100000");
      break;
    }
    case lesson_kind::loss_curve:  // read by parse_args: its files, then --vocabulary
    case lesson_kind::no_peeking:  // W10's numbers, no options
    case lesson_kind::none: break;
  }
}

}  // namespace detail

/// The work of --jacobian, in multiply-adds: every Jacobian is checked by central finite
/// differences, 2·d attends of n notes for each of n notes, so it grows as T·n²·d² (d: the
/// numbers of a note, keys and values together).
[[nodiscard]] inline double jacobian_work(const config& c) {
  const double T = static_cast<double>(c.queries.rows), n = static_cast<double>(c.notes.rows);
  const double d = static_cast<double>(c.notes.cols + c.blended().cols), dq = static_cast<double>(c.queries.cols);
  return T * n * d * (n * d + dq);
}

/// The most work --jacobian takes on (jacobian_work); docs/performance.md gives its time.
inline constexpr double max_jacobian_work = 5e8;

/// Reads attn-calc's arguments (without the program name) into a checked config. Options take
/// their value as the next argument or after '=' ("--beta 2", "--beta=2"). Throws usage_error
/// for an unknown option, a missing or bad value, an option given twice, an option that the
/// format does not show, or sizes that do not fit.
[[nodiscard]] inline config parse_args(const std::vector<std::string_view>& args) {
  config c;
  struct raw {
    std::string_view value;
    bool given = false;
  };
  raw score, format, q, notes, keys, values, W, W1, W2, v, beta, note_labels, query_labels, decimals, title,
      row_axis, col_axis, scale, label, self, words, wq, wk, wv, wo, heads, positions, dim, layout, rope, position,
      pair, layer_norm, rms_norm, ln_gamma, ln_beta, eps, activations, ffn_w1, ffn_w2, output, head_labels, beta_sweep,
      cross, bq, bk, bv, bo, vocabulary, ffn_activation;
  std::vector<std::string_view> masks;
  std::vector<std::string_view> loss_curves;  // --loss-curve may be given several times: a run (or more) each  // --mask may be given several times: all must allow
  const std::pair<std::string_view, raw*> valued[] = {
      {"--score", &score},       {"--format", &format},           {"--q", &q},
      {"--notes", &notes},       {"--keys", &keys},               {"--values", &values},
      {"--W", &W},               {"--W1", &W1},                   {"--W2", &W2},
      {"--v", &v},               {"--beta", &beta},
      {"--note-labels", &note_labels}, {"--query-labels", &query_labels}, {"--decimals", &decimals},
      {"--title", &title},       {"--row-axis", &row_axis},       {"--col-axis", &col_axis},
      {"--scale", &scale},       {"--label", &label},             {"--self", &self},
      {"--words", &words},       {"--wq", &wq},                   {"--wk", &wk},
      {"--wv", &wv},             {"--wo", &wo},                   {"--heads", &heads},
      {"--positions", &positions}, {"--dim", &dim},               {"--layout", &layout},
      {"--rope", &rope},         {"--position", &position},       {"--pair", &pair},
      {"--layer-norm", &layer_norm}, {"--rms-norm", &rms_norm},   {"--ln-gamma", &ln_gamma},
      {"--ln-beta", &ln_beta},   {"--eps", &eps},                 {"--activations", &activations},
      {"--ffn-w1", &ffn_w1},     {"--ffn-w2", &ffn_w2},           {"--output", &output},
      {"--head-labels", &head_labels}, {"--beta-sweep", &beta_sweep}, {"--cross", &cross},
      {"--bq", &bq},             {"--bk", &bk},                   {"--bv", &bv},
      {"--bo", &bo},             {"--vocabulary", &vocabulary},   {"--ffn-activation", &ffn_activation}};
  bool jacobian = false, steps = false, no_attention = false, map_only = false, no_values = false,
       dot_vs_scaled = false, pe = false, block = false, pre_ln = false, no_peeking = false;
  const std::pair<std::string_view, bool*> flags[] = {{"--jacobian", &jacobian},     {"--steps", &steps},
                                                      {"--no-attention", &no_attention}, {"--map-only", &map_only},
                                                      {"--no-values", &no_values},   {"--dot-vs-scaled", &dot_vs_scaled},
                                                      {"--pe", &pe},                 {"--block", &block},
                                                      {"--pre-ln", &pre_ln},         {"--no-peeking", &no_peeking}};

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
    bool* flag = nullptr;
    for (const auto& [option, target] : flags)
      if (name == option) flag = target;
    if (flag != nullptr) {
      detail::need(!has_inline, std::string(name) + " takes no value");
      detail::need(!*flag, std::string(name) + " is given twice");
      *flag = true;
      continue;
    }
    if (name == "--mask") {
      detail::need(has_inline || i + 1 < args.size(), "--mask needs a value");
      masks.push_back(has_inline ? inline_value : args[++i]);
      continue;
    }
    if (name == "--loss-curve") {
      detail::need(has_inline || i + 1 < args.size(), "--loss-curve needs a file name");
      loss_curves.push_back(has_inline ? inline_value : args[++i]);
      continue;
    }
    raw* slot = nullptr;
    for (const auto& [option, target] : valued)
      if (name == option) slot = target;
    if (slot == nullptr) {
      if (name.starts_with("-"))
        throw usage_error("unknown option " + shown(name) + " (attn-calc --help lists them)");
      throw usage_error("unexpected argument " + shown(name) + " (values follow an option, such as --q 0,0.5,2)");
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

  if (output.given) {
    detail::need(!output.value.empty(), "--output needs a file name");
    detail::need(output.value.find('\0') == std::string_view::npos, "--output: the file name holds a NUL byte");
    c.output = std::string(output.value);
  }
  if (score.given) {
    const std::string_view s = trim(score.value);
    if (s == "dot") c.score = score_kind::dot;
    else if (s == "scaled_dot" || s == "scaled-dot") c.score = score_kind::scaled_dot;
    else if (s == "general") c.score = score_kind::general;
    else if (s == "additive") c.score = score_kind::additive;
    else
      throw usage_error("--score: unknown score " + shown(s) + " (dot, scaled_dot, general or additive)");
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
      throw usage_error("--format: unknown format " + shown(f) + " (text, md, latex, json, csv, csv-long or svg)");
  }

  // An option whose output the format does not show is refused, not ignored.
  using F = output_format;
  constexpr unsigned documents = detail::formats({F::text, F::md, F::latex});
  const std::tuple<std::string_view, bool, unsigned> shown_in[] = {
      {"--jacobian", jacobian, documents | detail::formats({F::json})},
      {"--steps", steps, documents},
      {"--no-attention", no_attention, documents | detail::formats({F::json})},
      {"--map-only", map_only, documents},
      {"--title", title.given, documents | detail::formats({F::svg})},
      {"--row-axis", row_axis.given, detail::formats({F::svg})},
      {"--col-axis", col_axis.given, detail::formats({F::svg})},
      {"--no-values", no_values, detail::formats({F::svg})},
      {"--scale", scale.given, detail::formats({F::svg})},
      {"--label", label.given, detail::formats({F::latex})}};
  for (const auto& [option, given, bits] : shown_in)
    detail::need(!given || (bits & (1u << static_cast<unsigned>(c.format))),
                 std::string(option) + " is not shown by --format " + std::string(format_name(c.format)) +
                     ": use " + detail::format_list(bits));
  for (const auto& [option, given] : {std::pair<std::string_view, bool>{"--jacobian", jacobian},
                                      {"--steps", steps}, {"--no-attention", no_attention}})
    detail::need(!map_only || !given, "--map-only prints the map alone: leave out " + std::string(option));

  // The lessons of §8–§9 (lessons.hpp): one at a time, with their own options and none of the map's
  using L = lesson_kind;
  const std::tuple<std::string_view, bool, L> lessons[] = {
      {"--pe", pe, L::pe}, {"--rope", rope.given, L::rope}, {"--layer-norm", layer_norm.given, L::norm},
      {"--rms-norm", rms_norm.given, L::norm}, {"--activations", activations.given, L::activations},
      {"--block", block, L::block}, {"--loss-curve", !loss_curves.empty(), L::loss_curve},
      {"--no-peeking", no_peeking, L::no_peeking}};
  std::string_view lesson_option;
  for (const auto& [option, given, kind] : lessons) {
    if (!given) continue;
    detail::need(lesson_option.empty(), std::string(lesson_option) + " and " + std::string(option) +
                                            " are two lessons: give one at a time");
    lesson_option = option;
    c.lesson = kind;
  }
  {
    // an option of a lesson, and the lessons that take it (" or " between them)
    const std::tuple<std::string_view, bool, std::string_view> lesson_options[] = {
        {"--positions", positions.given, "--pe"},
        {"--dim", dim.given, "--pe or --rope"},
        {"--layout", layout.given, "--pe or --rope"},
        {"--position", position.given, "--rope"},
        {"--pair", pair.given, "--rope"},
        {"--ln-gamma", ln_gamma.given, "--layer-norm or --rms-norm"},
        {"--ln-beta", ln_beta.given, "--layer-norm"},
        {"--eps", eps.given, "--layer-norm, --rms-norm or --block"},
        {"--pre-ln", pre_ln, "--block"},
        {"--ffn-w1", ffn_w1.given, "--block"},
        {"--ffn-w2", ffn_w2.given, "--block"},
        {"--vocabulary", vocabulary.given, "--loss-curve"},
        {"--ffn-activation", ffn_activation.given, "--block"}};
    for (const auto& [option, given, takers] : lesson_options) {
      if (!given) continue;
      bool ok = false;
      for (std::string_view rest = takers; !rest.empty();) {  // the names in `takers`
        const std::size_t end = std::min(rest.find(','), rest.find(' '));
        ok = ok || (rest.substr(0, end) == lesson_option && !lesson_option.empty());
        rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
      }
      detail::need(ok, std::string(option) + " is for " + std::string(takers) +
                           (option == "--ln-beta" && lesson_option == "--rms-norm" ? " (RMSNorm has no β)" : ""));
    }
  }
  if (c.lesson != L::none) {
    const std::string lo(lesson_option);
    const std::pair<std::string_view, bool> map_options[] = {
        {"--q", q.given}, {"--notes", notes.given}, {"--keys", keys.given}, {"--values", values.given},
        {"--score", score.given}, {"--W", W.given}, {"--W1", W1.given}, {"--W2", W2.given}, {"--v", v.given},
        {"--beta", beta.given}, {"--beta-sweep", beta_sweep.given}, {"--mask", !masks.empty()},
        {"--cross", cross.given}, {"--bq", bq.given}, {"--bk", bk.given}, {"--bv", bv.given}, {"--bo", bo.given},
        {"--note-labels", note_labels.given},
        {"--query-labels", query_labels.given}, {"--jacobian", jacobian}, {"--no-attention", no_attention}, {"--map-only", map_only},
        {"--dot-vs-scaled", dot_vs_scaled}};
    for (const auto& [option, given] : map_options)
      detail::need(!given, lo + " prints its own numbers, not a map: leave out " + std::string(option));
    // --block takes its sentence and attention from --self and its projections (W9's when not given)
    const std::pair<std::string_view, bool> block_options[] = {
        {"--self", self.given}, {"--words", words.given}, {"--wq", wq.given}, {"--wk", wk.given},
        {"--wv", wv.given}, {"--wo", wo.given}, {"--heads", heads.given}, {"--head-labels", head_labels.given}};
    for (const auto& [option, given] : block_options)
      detail::need(!given || c.lesson == L::block, lo + " prints its own numbers, not a map: leave out " + std::string(option));
    detail::need(self.given == ffn_w1.given && self.given == ffn_w2.given,
                 self.given ? "--block --self needs --ffn-w1 and --ffn-w2 (the feed-forward layer's W_1 and W_2)"
                            : "--ffn-w1 and --ffn-w2 need --block --self (W9's block has its own)");
    const bool draws = c.lesson == L::pe || c.lesson == L::rope || c.lesson == L::loss_curve;
    detail::need(c.format != output_format::svg || draws,
                 "--format svg draws --pe, --rope and --loss-curve; " + lo + " prints tables: use text, md, latex, json, csv or csv-long");
    for (const auto& [option, given] : {std::pair<std::string_view, bool>{"--row-axis", row_axis.given},
                                        {"--col-axis", col_axis.given}, {"--no-values", no_values},
                                        {"--scale", scale.given}})
      detail::need(!given || c.lesson == L::pe, std::string(option) + " is for the heatmap of --pe, not " + lo);
    detail::need(!steps || c.lesson != L::block, "--block prints every intermediate value already: leave out --steps");
    detail::need(!steps || c.lesson != L::loss_curve, "--loss-curve prints a log, which has no steps by hand: leave out --steps");
    detail::need(!steps || c.lesson != L::no_peeking,
                 "--no-peeking prints every intermediate value already (the map, the logits, p and each loss): leave out "
                 "--steps");
  }

  // --self and --cross compute the queries, keys and values themselves; their options mean
  // nothing without them
  detail::need(self.given || cross.given || !words.given, "--words needs --self (the sentence of self-attention)");
  detail::need(!self.given || !cross.given, "--self and --cross are two kinds of attention: give one");
  const std::pair<std::string_view, const raw&> projected_only[] = {
      {"--wq", wq}, {"--wk", wk}, {"--wv", wv}, {"--wo", wo}, {"--heads", heads}, {"--head-labels", head_labels},
      {"--bq", bq}, {"--bk", bk}, {"--bv", bv}, {"--bo", bo}};
  for (const auto& [option, given] : projected_only)
    detail::need(self.given || cross.given || !given.given,
                 std::string(option) + " needs --self (the sentence of self-attention) or --cross (cross-attention)");
  detail::need(!bo.given || wo.given, "--bo needs --wo (b_O is added to Y = Z W_O)");
  if (cross.given) {
    const std::pair<std::string_view, bool> not_with_cross[] = {
        {"--notes", notes.given}, {"--keys", keys.given}, {"--values", values.given}, {"--words", words.given},
        {"--jacobian", jacobian}, {"--steps", steps}, {"--no-attention", no_attention}};
    for (const auto& [option, given] : not_with_cross)
      detail::need(!given, "--cross takes the keys and values from its sentence: leave out " + std::string(option) +
                               (option == "--words" ? " (--query-labels and --note-labels name the words)" : ""));
    detail::need(q.given, "--cross needs --q (the queries, one per row, that read the sentence)");
    detail::need(c.score == score_kind::dot || c.score == score_kind::scaled_dot,
                 "--cross scores with dot or scaled_dot (the default), not --score " + std::string(score_name(c.score)));
    if (!score.given) c.score = score_kind::scaled_dot;
  }
  if (self.given) {
    const std::pair<std::string_view, bool> not_with_self[] = {
        {"--q", q.given}, {"--notes", notes.given}, {"--keys", keys.given}, {"--values", values.given},
        {"--query-labels", query_labels.given}, {"--note-labels", note_labels.given}};
    for (const auto& [option, given] : not_with_self)
      detail::need(!given, "--self takes the queries, keys and values from the sentence: leave out " + std::string(option) +
                               (option.ends_with("labels") ? " (--words names the words)" : ""));
    for (const auto& [option, given] : {std::pair<std::string_view, bool>{"--jacobian", jacobian},
                                        {"--steps", steps}, {"--no-attention", no_attention}})
      detail::need(!given, std::string(option) + " is for --q and --notes, not --self");
    detail::need(c.score == score_kind::dot || c.score == score_kind::scaled_dot,
                 "--self scores with dot or scaled_dot (the default), not --score " + std::string(score_name(c.score)));
    if (!score.given) c.score = score_kind::scaled_dot;  // 1/√d_k, as every transformer
  }
  if (dot_vs_scaled) {
    detail::need(!score.given, "--dot-vs-scaled shows both dot and scaled_dot: leave out --score");
    for (const auto& [option, given] : {std::pair<std::string_view, bool>{"--jacobian", jacobian},
                                        {"--steps", steps}, {"--no-attention", no_attention}})
      detail::need(!given, "--dot-vs-scaled shows the two maps: leave out " + std::string(option));
  }

  if (beta_sweep.given) {
    c.beta_sweep = detail::parse_sweep(beta_sweep.value);
    const std::pair<std::string_view, bool> not_with_sweep[] = {
        {"--beta", beta.given}, {"--self", self.given}, {"--dot-vs-scaled", dot_vs_scaled}, {"--jacobian", jacobian},
        {"--steps", steps}, {"--no-attention", no_attention}, {"--map-only", map_only}, {"--row-axis", row_axis.given},
        {"--col-axis", col_axis.given}, {"--no-values", no_values}, {"--scale", scale.given}};
    for (const auto& [option, given] : not_with_sweep)
      detail::need(!given, "--beta-sweep shows one query's shares at every β: leave out " + std::string(option));
  }

  // Parameters a score does not use are refused: they are almost always a mistake.
  const bool general = c.score == score_kind::general, additive = c.score == score_kind::additive;
  detail::need(!W.given || general, "--W is only used by --score general");
  detail::need(!(W1.given || W2.given || v.given) || additive,
               std::string(W1.given ? "--W1" : W2.given ? "--W2" : "--v") +
                   " is only used by --score additive");
  detail::need(!notes.given || (!keys.given && !values.given),
               "give --notes (each note both key and value) or --keys and --values, not both");
  detail::need(keys.given == values.given, keys.given ? "--keys needs --values (the scores look at the keys, the "
                                                        "contexts blend the values)"
                                                      : "--values needs --keys (the scores look at the keys, the "
                                                        "contexts blend the values)");
  const bool own_notes = notes.given || keys.given;
  // --self's and --cross's heads, their labels and the projections with their biases
  const auto heads_and_projections = [&] {
    if (heads.given) c.heads = static_cast<std::size_t>(parse_int(heads.value, "--heads", 1, 1024));
    if (head_labels.given) {
      c.head_labels = labels_argument(head_labels.value, "--head-labels");
      detail::need(c.head_labels.size() == c.heads,
                   "--head-labels gives " + detail::count(c.head_labels.size(), "label") + " but " +
                       detail::there_are(c.heads, "head") + (heads.given ? "" : " (--heads not given)"));
    }
    detail::read_projections(c, {{wq.value, wq.given}, {wk.value, wk.given}, {wv.value, wv.given},
                                 {wo.value, wo.given}, {bq.value, bq.given}, {bk.value, bk.given},
                                 {bv.value, bv.given}, {bo.value, bo.given}});
  };

  if (self.given) {
    c.self_attention = true;
    c.queries = matrix_argument(self.value, "--self");
    c.notes = c.queries;  // every word asks every word
    c.query_labels = detail::numbered("x", c.queries.rows);
    if (words.given) c.query_labels = labels_argument(words.value, "--words");
    c.note_labels = c.query_labels;
    heads_and_projections();
  } else if (cross.given) {
    c.self_attention = c.cross = true;
    c.queries = matrix_argument(q.value, "--q");
    c.notes = matrix_argument(cross.value, "--cross");
    c.note_labels = detail::numbered("x", c.notes.rows);
    heads_and_projections();
  } else if (additive && !q.given && !own_notes && !W1.given && !W2.given && !v.given) {
    use_unit_additive(c);  // the unit's additive score by hand
    c.example = unit_example::e5_additive;
  } else {
    if (q.given) c.queries = matrix_argument(q.value, "--q");
    if (notes.given) c.notes = matrix_argument(notes.value, "--notes");
    if (keys.given) {
      c.notes = matrix_argument(keys.value, "--keys");
      c.values = matrix_argument(values.value, "--values");
    }
    detail::need(q.given || !own_notes, std::string(notes.given ? "--notes" : "--keys") +
                                            " needs --q (the queries that look at the notes)");
    if (!q.given && !own_notes) c.example = unit_example::e3_alignment_map;
    if (!own_notes) use_unit_notes(c);
    if (!q.given) use_unit_queries(c);
    if (!q.given && !own_notes && beta_sweep.given) {  // E2: चाय's state, q = (0, 0.5, 2), as β moves
      c.queries = matrix{1, 3, {0, 0.5, 2}};
      c.query_labels = {"चाय"};
      c.example = unit_example::e2_beta_sweep;
    }
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
  if (q.given && !self.given) c.query_labels = detail::numbered("q", c.queries.rows);
  if (own_notes || c.example == unit_example::e5_additive) c.note_labels = detail::numbered("h", c.notes.rows);
  if (c.example == unit_example::e5_additive) c.query_labels = {"q"};

  if (beta.given) c.beta = parse_number(beta.value, "--beta");
  if (decimals.given) c.decimals = parse_int(decimals.value, "--decimals", 0, 17);
  c.decimals_given = decimals.given;
  detail::read_masks(c, masks);
  if (note_labels.given) c.note_labels = labels_argument(note_labels.value, "--note-labels");
  if (query_labels.given) c.query_labels = labels_argument(query_labels.value, "--query-labels");
  for (const auto& [option, text, target] :
       {std::tuple<std::string_view, const raw&, std::optional<std::string>&>{"--title", title, c.title},
        {"--row-axis", row_axis, c.row_axis},
        {"--col-axis", col_axis, c.col_axis}}) {
    if (!text.given) continue;
    const std::string_view t = trim(text.value);
    detail::need(printable_utf8(t), std::string(option) + ": " + shown(t) + " is not printable UTF-8 text");
    target = std::string(t);
  }
  if (scale.given) {
    const matrix m = parse_matrix(scale.value, "--scale");
    detail::need(m.rows == 1 && m.cols == 2, "--scale needs two numbers, LO,HI (the colours' range), not " +
                                                 std::to_string(m.rows) + "x" + std::to_string(m.cols));
    detail::need(m.data[0] < m.data[1], "--scale: LO must be below HI, and " + attn::report::shortest(m.data[0]) +
                                            " is not below " + attn::report::shortest(m.data[1]));
    c.scale_lo = m.data[0];
    c.scale_hi = m.data[1];
  }
  if (label.given) {
    c.latex_label = std::string(trim(label.value));
    const bool ok = !c.latex_label.empty() &&
                    std::all_of(c.latex_label.begin(), c.latex_label.end(), [](char ch) {
                      return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                             ch == ':' || ch == '.' || ch == '-' || ch == '_' || ch == '/';
                    });
    detail::need(ok, "--label: " + shown(label.value) + " must be ASCII letters, digits and : . - _ /");
  }
  c.jacobian = jacobian;
  c.steps = steps;
  c.no_attention = no_attention;
  c.map_only = map_only;
  c.dot_vs_scaled = dot_vs_scaled;
  c.values_shown = !no_values;
  if (c.lesson != lesson_kind::none) {
    c.pre_ln = pre_ln;
    if (ffn_activation.given) {
      const std::string_view a = trim(ffn_activation.value);
      detail::need(a == "relu" || a == "gelu" || a == "gelu-tanh",
                   "--ffn-activation: " + shown(a) + " is not an activation (relu, gelu or gelu-tanh)");
      c.ffn_activation = std::string(a);
    }
    c.rms = rms_norm.given;
    detail::read_lesson(c, {positions.value, positions.given}, {dim.value, dim.given}, {layout.value, layout.given},
                        {rope.value, rope.given}, {position.value, position.given}, {pair.value, pair.given},
                        {layer_norm.given ? layer_norm.value : rms_norm.value, layer_norm.given || rms_norm.given},
                        {ln_gamma.value, ln_gamma.given}, {ln_beta.value, ln_beta.given}, {eps.value, eps.given},
                        {activations.value, activations.given}, {ffn_w1.value, ffn_w1.given},
                        {ffn_w2.value, ffn_w2.given});
    if (c.lesson == lesson_kind::pe && !scale.given) c.scale_lo = -1;  // PE's sines and cosines: −1 … 1
    if (c.lesson == lesson_kind::loss_curve) {
      for (const std::string_view file : loss_curves) {
        detail::need(!file.empty() && file.find('\0') == std::string_view::npos, "--loss-curve needs a file name");
        const std::string path(file.front() == '@' ? file.substr(1) : file);  // @run.csv as the matrices' files
        std::string stem = std::filesystem::path(path).stem().string();
        if (stem.empty() || !printable_utf8(stem)) stem = "run " + std::to_string(c.loss_runs.size() + 1);
        detail::read_loss_log(read_file(path, "--loss-curve"), "--loss-curve (" + detail::one_line(path) + ")", stem,
                              detail::one_line(std::filesystem::path(path).filename().string()), loss_curves.size() > 1,
                              c.loss_runs);
      }
      if (vocabulary.given) c.vocabulary = static_cast<std::size_t>(parse_int(vocabulary.value, "--vocabulary", 2, 1 << 30));
    }
    return c;
  }
  detail::check_sizes(c);
  if (!c.beta_sweep.empty()) {
    detail::need(c.queries.rows == 1, "--beta-sweep follows one query's shares: give --q one row, not " +
                                          std::to_string(c.queries.rows) + " (e.g. --q 0,0.5,2, E2's चाय)");
    detail::need(c.format != output_format::svg || c.notes.rows <= 30,
                 "--beta-sweep draws a line per note, and " + std::to_string(c.notes.rows) +
                     " are more than a chart can tell apart (at most 30): use csv or json");
  }
  if (c.jacobian) {
    const double work = jacobian_work(c);
    char amount[32];
    std::snprintf(amount, sizeof amount, "%.1e", work);
    detail::need(work <= max_jacobian_work,
                 "--jacobian: " + detail::count(c.queries.rows, "query", "queries") + " and " +
                     detail::count(c.notes.rows, "note") + " of " + std::to_string(c.notes.cols + c.blended().cols) +
                     " numbers need about " + amount +
                     " steps (T·n²·d²: every Jacobian is checked by finite differences); attn-calc stops at 5e8: give "
                     "fewer queries or notes");
  }
  return c;
}

/// What attn-calc --help prints: every option, each with an example.
inline constexpr std::string_view help_text = R"(attn-calc: attention by hand, for lessons. Computes the scores, the weights (the
alignment map) and the context vectors of queries looking at notes, and prints them.
With no options it prints the unit's "I drink tea" example (E1, and E3's map).

Usage: attn-calc [options]

A matrix is rows separated by ';' and numbers separated by ',' (quote it for the shell),
or @file: a file with one row per line, numbers separated by ',' or by spaces and tabs
(lines starting with # and blank lines skipped; a ';' in a file is refused).
A file may be at most 64 MiB and must be a regular file.

Inputs
  --q Q               the queries (decoder states), one per row
                        e.g. --q 0,0.5,2    or several: --q "0,0.5,2;0,1,4"
  --notes H           the notes h_j, one per row (default: the unit's I, drink, tea)
                        e.g. --notes "1,0,0;0,1,0;0,0,1"    or --notes @notes.csv
  --keys K            instead of --notes: the keys k_j the scores look at, one per row
                        e.g. --q 0,1 --keys "1,0;0,1;1,1" --values "1,0,0;0,1,0;0,0,1"
  --values V          with --keys: the values v_j the contexts blend, one per row
                        e.g. --values @values.csv
  --score S           dot (default), scaled_dot (q.h/sqrt d), general (q^T W h) or
                      additive (v^T tanh(W1 h + W2 q))
                        e.g. --score scaled_dot
  --W W               general: the matrix W, query length x note length
                        e.g. --score general --q 1,2 --W "1,0,0;0,1,1"
  --W1 W1             additive: k x note length
                        e.g. --W1 "1,0;0,1"
  --W2 W2             additive: k x query length
                        e.g. --W2 "1,0;0,1"
  --v V               additive: k numbers (with none of --q --notes --W1 --W2 --v,
                      --score additive shows the unit's additive example)
                        e.g. --v 1,1
  --beta B            sharpness, "how sure": the scores are multiplied by B (default 1)
                        e.g. --beta 2
  --beta-sweep S      one query's share of each note as beta moves: LO:HI:STEP or values
                      separated by ','; a table (text, md, latex), json, csv, csv-long, and
                      in svg a chart, a line per note (without --q: E2, the query of चाय)
                        e.g. --beta-sweep 0:4:0.25 --format svg    --q 0,1 --beta-sweep 0,1,2,4
  --mask M            one 1 (keep) or 0 (mask out) per note, as a row or a column; a
                      masked note gets weight 0. Or a matrix, one row per query (a 0
                      masks that note for that query), or causal: query t sees notes
                      1..t + n - T (n notes, T queries). Give --mask several times to
                      combine them: every one must allow a note
                        e.g. --mask 1,1,0    --mask causal    --mask "1,0,0;1,1,0"
                             --mask causal --mask @padding.txt
  --note-labels L     names of the notes, separated by ',', or @file: one per line
                        e.g. --note-labels I,drink,tea    or --note-labels @words.txt
  --query-labels L    names of the queries, separated by ',', or @file: one per line
                        e.g. --query-labels "मैं,चाय,पीता,हूँ"

Self-attention (every word asks every word: Q = X W_Q, K = X W_K, V = X W_V)
  --self X            the sentence X, one word per row: self-attention with projections
                      prints X, Q, K, V, the scores, the map(s) and Y; the score is
                      scaled_dot (S = Q K^T / sqrt d_k) unless --score dot
                        e.g. --self "1,0,0;0,1,0;0,0,1" --words I,drink,tea
  --words L           with --self: names of the words, for the rows and the columns,
                      separated by ',', or @file: one per line (default x1, x2, ...)
                        e.g. --words I,drink,tea    --words @words.txt
  --wq W              with --self or --cross: W_Q, d_model x h*d_k (default: the
                      identity)
                        e.g. --wq @wq.csv    --wq "1,0;0,1;1,1"
  --wk W              with --self or --cross: W_K, d_kv x h*d_k (default: the identity)
                      (d_kv: the numbers of a word of --cross; with --self, d_model)
                        e.g. --wk @wk.csv
  --wv W              with --self or --cross: W_V, d_kv x h*d_v (default: the identity)
                        e.g. --wv @wv.csv
  --wo W              with --self or --cross: W_O, h*d_v x d_out; Y = [Z_1 ... Z_h] W_O
                      (default: none, Y is the heads' outputs side by side)
                        e.g. --heads 2 --wo @wo.csv
  --heads H           with --self or --cross: H heads; head i takes columns (i-1)*d_k+1..i*d_k of
                      Q and K and (i-1)*d_v+1..i*d_v of V (PyTorch's layout); svg draws
                      the heads' maps as one grid on one colour scale (default 1)
                        e.g. --self @x.csv --wq @wq.csv --wk @wk.csv --wv @wv.csv --heads 2
  --head-labels L     with --self or --cross: names of the heads' maps, one per head,
                      separated by ',', or @file: one per line (default head 1, head 2, ...)
                        e.g. --heads 2 --head-labels "previous word,same word"
  --bq B, --bk B, --bv B, --bo B
                      with --self or --cross: the biases of the projections, one row or
                      column each: Q = X W_Q + b_Q (h*d_k numbers), K = X W_K + b_K (h*d_k),
                      V = X W_V + b_V (h*d_v), Y = Z W_O + b_O (d_out; needs --wo)
                        e.g. --bq 0.5,0 --bk 0,0 --bv @bv.csv
  --cross X           cross-attention: the queries from --q (X_q, one per row), the keys
                      and values from the sentence X (X_kv, one word per row): Q = X_q W_Q,
                      K = X W_K, V = X W_V; takes --wq, --wk, --wv, --wo, the biases,
                      --heads, --head-labels, --mask; --query-labels and --note-labels
                      name the rows and the words (default q1, ... and x1, ...)
                        e.g. --q @hindi.csv --cross @english.csv --wq @wq.csv --wk @wk.csv
                             --wv @wv.csv --note-labels I,drink,tea
  --dot-vs-scaled     the dot map and the scaled-dot map (divided by sqrt d) of the same
                      input, side by side: both tables, and an svg of the two maps; unless
                      --decimals is given, enough decimals that the smallest weight of at
                      least 1e-5 shows two significant digits (3 to 5)
                        e.g. --q 1,1,1,1 --notes "1,1,1,1;0.5,0.5,0.5,0.5;0,0,0,0" --dot-vs-scaled

Output (on stdout, or in a file with --output)
  --output FILE       write the output to FILE instead of stdout, atomically: a temporary
                      file beside FILE is renamed over it once complete, so a failed run
                      leaves an existing FILE as it was
                        e.g. --format svg --output map.svg
  --format F          text (default), md, latex, json, csv (the map, a row per query),
                      csv-long (the map, a row per cell: i,j,query,note,weight) or svg
                      (the map as a heatmap)
                        e.g. --format md > lesson.md    --format svg > map.svg
  --decimals N        digits after the point, 0 to 17 (default 3); JSON also has every
                      number at full precision
                        e.g. --decimals 4
  --steps             text, md, latex: also the hand steps: e^(beta s) and their sum
                      before the weights (E1), W1 h + W2 q and its tanh before the
                      scores (additive, E5); with a lesson below, its steps by hand
                        e.g. --q 0,0.5,2 --steps    --score additive --steps
  --no-attention      text, md, latex, json: also Unit 17's baseline without attention:
                      every query gets the last note, and there is no map
                        e.g. attn-calc --no-attention
  --map-only          text, md, latex: the map's table alone, no heading or paragraphs
                        e.g. --format latex --map-only > map.tex
  --jacobian          text, md, latex, json: also dc/dh_j for every note and dc/dq, each
                      checked against central finite differences (refused past 5e8 steps:
                      they grow as queries x notes^2 x length^2)
                        e.g. --q 0,0.5,2 --jacobian
  --title T           the map's title: the SVG's, or the caption of the map's table
                      (with a lesson below: its heading, or its SVG's title)
                        e.g. --format svg --title "E3: I drink tea"
  --row-axis T        svg: the title of the rows (default: queries (words written))
                        e.g. --format svg --row-axis Hindi
  --col-axis T        svg: the title of the columns (default: notes (words read))
                        e.g. --format svg --col-axis English
  --no-values         svg: colours only, the values in each cell's tooltip
                        e.g. --format svg --no-values
  --scale LO,HI       svg: the range of the colour scale (default 0,1)
                        e.g. --format svg --scale 0,0.5
  --label L           latex: the prefix of the tables' \label (default attn: attn:map, ...)
                        e.g. --format latex --label lesson3

Lessons of positions and the block (each alone, with none of the map's inputs; text, md,
latex, json, csv (the main table) and csv-long (every table, a row per number); svg for
--pe and --rope)
  --pe                sinusoidal positions PE (W8): a table of positions x dimensions; svg
                      draws it as a heatmap on a diverging scale, -1 blue to 1 red
                        e.g. --pe --format svg > pe.svg    --pe --positions 8 --dim 6 --steps
  --positions N       with --pe: positions 0..N-1 (default 50)
                        e.g. --pe --positions 100
  --dim D             with --pe: the width d (default 32); with --rope: d_k (default 8);
                      even
                        e.g. --pe --dim 16    --rope 1,0 --dim 64
  --layout L          with --pe: interleaved (default; the paper's sin, cos pairs) or
                      concatenated (the d/2 sines, then the d/2 cosines); with --rope:
                      interleaved (pairs (2i, 2i+1)) or half-split (pairs (i, i+d_k/2))
                        e.g. --pe --layout concatenated    --rope 1,0 --layout half-split
  --rope A,B          RoPE turns the pair (a, b): theta_i, phi = p theta_i, cos, sin and
                      the turned pair; svg draws the pair before and after as arrows
                        e.g. --rope 1,0 --position 3 --pair 1 --steps
  --position P        with --rope: the position p (default 1)
                        e.g. --rope 1,0 --position 10
  --pair I            with --rope: the pair i, 0..d_k/2-1 (default 0)
                        e.g. --rope 1,0 --pair 2 --dim 8
  --layer-norm X      LayerNorm of each row of X: mean, variance, 1/sqrt(var + eps),
                      x-hat and y (--steps: the sums with the numbers)
                        e.g. --layer-norm 1,2,3,4 --eps 0 --steps
  --rms-norm X        RMSNorm of each row of X: mean(x^2), its scale, x-hat and y
                        e.g. --rms-norm "1,2,3,4;-1,0,1,2" --steps
  --ln-gamma G        with --layer-norm or --rms-norm: gamma, one per column (default 1)
                        e.g. --layer-norm 1,2,3,4 --ln-gamma 1,1,2,2
  --ln-beta B         with --layer-norm: beta, one per column (default 0)
                        e.g. --layer-norm 1,2,3,4 --ln-beta 0,0,1,1
  --eps E             with --layer-norm, --rms-norm or --block: the norms' epsilon
                      (default 1e-5, PyTorch's)
                        e.g. --eps 0
  --activations X     ReLU, GELU (exact, x Phi(x) with erfc) and GELU's tanh form, with
                      their slopes, at each x (--steps: each worked out)
                        e.g. --activations -2,-1,0,1,2 --steps
  --block             one transformer block on "I drink tea" (W9: W3's head, W_O, 4
                      GELU units): every intermediate value, each norm's mean and variance;
                      or on --self X with --wq, --wk, --wv, --wo, --heads as --self takes
                      them and --ffn-w1, --ffn-w2
                        e.g. --block    --block --format json
  --no-peeking        W10, no peeking: "I drink green tea", each word one-hot among 5,
                      causal self-attention (Q = K = V = X), logits = Y W_vocab; the causal
                      map, the logits, p(next word) and the loss -log p at every position,
                      and their mean (what training lowers), from one forward pass
                        e.g. --no-peeking    --no-peeking --format json
  --pre-ln            with --block: pre-LN (default post-LN, the paper's)
                        e.g. --block --pre-ln --format md
  --ffn-w1 W          with --block --self: the feed-forward layer's W_1, d_model x d_ff
                        e.g. --block --self @x.csv --wo @wo.csv --ffn-w1 @w1.csv --ffn-w2 @w2.csv
  --ffn-w2 W          with --block --self: its W_2, d_ff x d_model
                        e.g. --ffn-w2 @w2.csv
  --ffn-activation A  with --block: the feed-forward layer's activation, relu, gelu
                      (default; exact, x Phi(x)) or gelu-tanh (GELU's tanh form)
                        e.g. --block --ffn-activation relu --format json

A training run's loss curve (alone, with none of the map's inputs)
  --loss-curve FILE   a training log, CSV with a header: step,loss and any more columns
                      (tokens_per_second, ...), a row per step; a run column, or
                      --loss-curve given again for another file, gives a line per run.
                      svg: the curve (step across, loss in nats up); the other formats:
                      the log as a table per run (csv: run,step,loss,...)
                        e.g. --loss-curve run.csv --format svg > curve.svg
                             --loss-curve a.csv --loss-curve b.csv --format svg
                             (char_lm --log run.csv and tiny_transformer --log run.csv
                             write such logs)
  --vocabulary V      with --loss-curve: ln V, the loss of a uniform guess over V
                      symbols (where training starts), as a dashed line and a sentence
                        e.g. --loss-curve run.csv --vocabulary 76 --format svg

  --help              print this help
                        e.g. attn-calc --help

Exit status: 0 on success; 2 on bad input, with one line on stderr that says what; 1 if
the output cannot be written.
)";

/// parse_args for main's argc/argv (argv[0], the program name, is skipped).
[[nodiscard]] inline config parse_args(int argc, char** argv) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_args(args);
}

}  // namespace attn_calc
