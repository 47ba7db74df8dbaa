#pragma once
/// \file attn/report/svg.hpp
/// A heatmap as one self-contained SVG file: a cell per number with its value written in it,
/// labels on both axes, a colour scale with a legend, no script, no external file, no random
/// ids, so the same numbers give the same bytes. Text uses the font stack
/// 'Noto Sans', 'Noto Sans Devanagari', 'DejaVu Sans', sans-serif (any installed font that has
/// the labels' script renders them).
///
///   auto r = attn::align(queries, notes, attn::dot);
///   std::ofstream("map.svg") << attn::report::alignment_map_svg(r.weights, {"मैं", "चाय"},
///                                                               {"I", "drink", "tea"});

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "attn/error.hpp"
#include "attn/matrix.hpp"
#include "attn/report/detail/utf8.hpp"
#include "attn/report/format.hpp"

namespace attn::report {

/// A heatmap's colours: light to dark blue for values of one sign (weights), or blue through
/// white to red for values either side of a middle (PE's −1..1), the middle of [lo, hi] white.
enum class colour_scale { sequential, diverging };

/// How a heatmap looks.
struct heatmap_options {
  std::string title;          ///< first line, bold (empty: none)
  std::string row_axis;       ///< what the rows are, written up the left side (empty: none)
  std::string col_axis;       ///< what the columns are, written above the column labels
  int decimals = 3;           ///< digits after the point of the values in the cells; < 0: no values
  double lo = 0.0;            ///< the value of the lightest colour (smaller values clamp to it)
  double hi = 1.0;            ///< the value of the darkest colour (larger values clamp to it)
  std::vector<bool> masked;   ///< empty, one per column (attend's mask) or R×C row-major: cells
                              ///< drawn hatched, named "masked" in the legend, no value
  int max_width = 760;        ///< px (a lesson column): a wider map gets smaller square cells, values
                              ///< that no longer fit left to the tooltips, column labels turned
                              ///< upright, every k-th label where they would crowd; 0: no limit
  std::string id = "attn";    ///< prefix of the ids inside the SVG, for pages that inline several
                              ///< (ASCII letters, digits, '_', '-', '.'; a letter or '_' first)
  colour_scale scale = colour_scale::sequential;  ///< the colours (diverging: blue, white, red)
  std::string legend_title;   ///< written above the legend's bar (empty: none)
  int min_cell = 0;           ///< px (heatmap_svg): a map whose cells max_width would make narrower
                              ///< is wrapped into bands of as many columns as fit at this width,
                              ///< one under another, each with its column labels; 0: never wrapped
};

namespace detail {

struct rgb {
  double r, g, b;
};

/// The colour scale: light to dark blue, lightness falling evenly, so that more weight always
/// reads as darker (also in grey scale print and for colour-blind readers).
inline constexpr std::array<rgb, 5> scale_stops{{
    {247, 250, 253}, {200, 220, 238}, {128, 176, 216}, {58, 118, 182}, {12, 52, 110}}};

/// The diverging scale: ColorBrewer's RdBu (5 classes, marked colour-blind safe), dark blue at
/// lo, near-white in the middle, dark red at hi; lightness falls evenly away from the middle,
/// so |value| reads as darkness in grey-scale print too.
inline constexpr std::array<rgb, 5> diverging_stops{{
    {33, 102, 172}, {146, 197, 222}, {247, 247, 247}, {244, 165, 130}, {178, 24, 43}}};

[[nodiscard]] inline const std::array<rgb, 5>& stops_of(colour_scale s) noexcept {
  return s == colour_scale::diverging ? diverging_stops : scale_stops;
}

/// The colour at t in [0, 1], interpolated between the stops the way an SVG gradient does.
[[nodiscard]] inline rgb scale_colour(double t, colour_scale scale = colour_scale::sequential) {
  const auto& stops = stops_of(scale);
  t = std::clamp(t, 0.0, 1.0);
  const double x = t * static_cast<double>(stops.size() - 1);
  const auto k = std::min(static_cast<std::size_t>(x), stops.size() - 2);
  const double f = x - static_cast<double>(k);
  const rgb& a = stops[k];
  const rgb& b = stops[k + 1];
  return {a.r + f * (b.r - a.r), a.g + f * (b.g - a.g), a.b + f * (b.b - a.b)};
}

[[nodiscard]] inline std::string hex_colour(const rgb& c) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s = "#";
  for (const double v : {c.r, c.g, c.b}) {
    const auto byte = static_cast<unsigned>(std::lround(std::clamp(v, 0.0, 255.0)));
    s += digits[byte >> 4];
    s += digits[byte & 0xFu];
  }
  return s;
}

/// Relative luminance (WCAG) of an sRGB colour.
[[nodiscard]] inline double luminance(const rgb& c) {
  auto lin = [](double v) {
    v /= 255.0;
    return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
}

/// White or black text, whichever has the higher WCAG contrast ratio on c: at least 4.58:1
/// on any background (the two ratios meet at luminance 0.179), so every value reads at AA.
[[nodiscard]] inline const char* text_colour_on(const rgb& c) {
  const double l = luminance(c);
  return (1.0 + 0.05) / (l + 0.05) > (l + 0.05) / 0.05 ? "#ffffff" : "#000000";
}

/// `s` as XML character data or an attribute value: the five markup characters as entities,
/// line breaks and other control characters as spaces, and what XML 1.0 cannot hold (bytes
/// that are not UTF-8, U+FFFE, U+FFFF) as U+FFFD, so any string gives well-formed XML.
[[nodiscard]] inline std::string xml_escape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const utf8_char c = decode_utf8(s, i);
    switch (c.valid ? c.code_point : 0xFFFD) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\t': out += '\t'; break;
      default:
        if (c.code_point < 0x20) out += ' ';
        else if (c.valid && xml_char(c.code_point)) out.append(s.substr(i, c.length));
        else out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
    }
    i += c.length;
  }
  return out;
}

/// True when `id` can prefix the ids of a heatmap: an XML name of ASCII letters, digits, '_',
/// '-' and '.', starting with a letter or '_' (so that url(#id-scale) finds it).
[[nodiscard]] inline bool valid_id(std::string_view id) noexcept {
  if (id.empty()) return false;
  for (std::size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool other = (c >= '0' && c <= '9') || c == '-' || c == '.';
    if (!letter && (i == 0 || !other)) return false;
  }
  return true;
}

/// A generous estimate of the width of `s` in pixels at `size` px, for layout only: Latin
/// letters about 0.62 em, other scripts about 0.8 em a column, wide characters 1 em.
[[nodiscard]] inline int text_width(std::string_view s, int size) {
  double em = 0;
  for (std::size_t i = 0; i < s.size();) {
    const utf8_char c = decode_utf8(s, i);
    const int cols = c.valid ? code_point_width(c.code_point) : 1;
    em += c.code_point < 0x80 ? 0.62 : cols == 2 ? 1.0 : cols == 1 ? 0.8 : 0.0;
    i += c.length;
  }
  return static_cast<int>(std::ceil(em * size));
}

[[nodiscard]] inline std::string num(int v) { return std::to_string(v); }

}  // namespace detail

namespace detail {

/// A legend tick's value: at most ten significant digits, so that lo + (hi − lo)·3/4 of a
/// scale to 0.3 reads 0.225 and not 0.22499999999999998.
[[nodiscard]] inline std::string tick_text(double x) {
  if (x == 0) return "0";
#if defined(__cpp_lib_to_chars)
  std::array<char, 64> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), x, std::chars_format::general, 10);
  return std::string(buf.data(), r.ptr);
#else  // no floating-point to_chars (format.hpp's printf_chars_string): the same text
  return printf_string("%.*g", 10, x);
#endif
}

/// The hatch that marks masked cells: grey lines on light grey, 6 px apart in the picture.
/// `scale_x`, `scale_y` undo the scaling of the group that uses it (1 when none).
[[nodiscard]] inline std::string hatch_pattern(const std::string& id, double scale_x, double scale_y) {
  std::string transform = "rotate(45)";
  if (scale_x != 1 || scale_y != 1)
    transform = "scale(" + shortest(scale_x) + " " + shortest(scale_y) + ") " + transform;
  return "    <pattern id=\"" + id + "\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"" + transform + "\">\n"
         "      <rect width=\"6\" height=\"6\" fill=\"#eeeeee\"/>\n"
         "      <line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#8a8a8a\" stroke-width=\"2\"/>\n"
         "    </pattern>\n";
}

/// How a heatmap's parts are sized and placed (px).
struct heatmap_layout {
  int label_size = 14;           ///< row and column labels
  int value_size = 13;           ///< the values in the cells; 0: values hidden
  int cell_w = 60, cell_h = 36;  ///< one cell
  int stroke = 2;                ///< the white line between cells
  bool upright_columns = false;  ///< column labels turned to read upwards
  int col_step = 1, row_step = 1;  ///< every col_step-th column label, every row_step-th row label
};

/// The margins and type sizes every heatmap uses (px).
inline constexpr int svg_pad = 16, svg_title_size = 16, svg_axis_size = 12, svg_bar_w = 14, svg_tick_len = 4;
/// Past this many cells a map is drawn as runs of colour, without tooltips.
inline constexpr std::size_t most_cells_with_tooltips = 4096;

[[nodiscard]] inline int widest(const std::vector<std::string>& texts, int size) {
  int w = 0;
  for (const auto& t : texts) w = std::max(w, text_width(t, size));
  return w;
}

/// The checks heatmap_svg and heatmap_grid_svg share: the labels fit R×C (not empty), `masked`
/// has 0, C or R·C entries, finite lo < hi, a valid id prefix.
inline void check_heatmap(const char* where, std::size_t rows, std::size_t cols,
                          const std::vector<std::string>& row_labels,
                          const std::vector<std::string>& col_labels, const heatmap_options& opt) {
  attn::detail::check_nonempty(where, "the matrix", rows * cols);
  attn::detail::check_equal(where, "row labels", row_labels.size(), "rows", rows);
  attn::detail::check_equal(where, "column labels", col_labels.size(), "columns", cols);
  if (!opt.masked.empty() && opt.masked.size() != cols)
    attn::detail::check_equal(where, "size of masked", opt.masked.size(), "number of cells", rows * cols);
  if (!(opt.lo < opt.hi) || !std::isfinite(opt.lo) || !std::isfinite(opt.hi))
    attn::detail::raise<domain_error>(std::string(where) +
                                      ": the colour scale needs finite lo < hi");
  if (!valid_id(opt.id))
    attn::detail::raise<domain_error>(std::string(where) +
                                      ": the id prefix must be ASCII letters, digits, '_', '-' "
                                      "and '.', starting with a letter or '_'");
}

/// Whether cell (i, j) of a map with `cols` columns is masked under opt.masked.
[[nodiscard]] inline bool masked_cell(const heatmap_options& opt, std::size_t cols, std::size_t i, std::size_t j) {
  return !opt.masked.empty() && opt.masked[opt.masked.size() == cols ? j : i * cols + j];
}

/// The texts of a map's cells ("masked", or the value written with opt.decimals, 3 when < 0),
/// and whether any cell is masked or NaN.
struct cell_texts {
  std::vector<std::string> texts;
  bool any_masked = false, any_nan = false;
};

template <class View>
void add_cell_texts(cell_texts& out, const View& v, const heatmap_options& opt) {
  for (std::size_t i = 0; i < v.rows(); ++i)
    for (std::size_t j = 0; j < v.cols(); ++j) {
      const double x = static_cast<double>(v(i, j));
      const bool m = masked_cell(opt, v.cols(), i, j);
      out.texts.push_back(m ? "masked" : fixed(x, opt.decimals < 0 ? 3 : opt.decimals));
      out.any_masked = out.any_masked || m;
      out.any_nan = out.any_nan || (!m && std::isnan(x));
    }
}

/// The legend: a bar from lo (bottom) to hi (top) with five ticks, then a swatch for masked
/// and for NaN cells when there are any.
struct legend {
  std::vector<std::string> ticks;
  std::vector<std::pair<std::string, std::string>> swatches;  ///< fill, name
  int width = 0;  ///< px, from the cells' right edge, its right margin included
  [[nodiscard]] int height(int bar_h) const {
    return bar_h + (swatches.empty() ? 0 : 16 + static_cast<int>(swatches.size()) * 22 - 8);
  }
};

[[nodiscard]] inline legend make_legend(const heatmap_options& opt, const cell_texts& cells) {
  legend g;
  for (int k = 0; k <= 4; ++k) g.ticks.push_back(tick_text(opt.lo + (opt.hi - opt.lo) * k / 4.0));
  if (cells.any_masked) g.swatches.emplace_back("url(#" + opt.id + "-masked)", "masked");
  if (cells.any_nan) g.swatches.emplace_back("#d9d9d9", "NaN");
  int text_w = widest(g.ticks, svg_axis_size);
  for (const auto& sw : g.swatches)
    text_w = std::max(text_w, text_width(sw.second, svg_axis_size) + 20 - svg_tick_len - 4);
  g.width = 28 + svg_bar_w + svg_tick_len + 4 + text_w + svg_pad;
  if (!opt.legend_title.empty()) g.width = std::max(g.width, 28 + text_width(opt.legend_title, svg_axis_size) + svg_pad);
  return g;
}

/// The cells' layout: wide enough for every value and column label; when `across` cells side
/// by side, the row labels and `fixed` px more (the legend, gaps) are wider than max_width,
/// smaller square cells that fit, 12-px labels, values only where they fit, column labels
/// turned upright and every k-th label where they would crowd.
[[nodiscard]] inline heatmap_layout fit_layout(const heatmap_options& opt, const std::vector<std::string>& texts,
                                               const std::vector<std::string>& row_labels,
                                               const std::vector<std::string>& col_labels, int across, int fixed) {
  const int row_axis_w = opt.row_axis.empty() ? 0 : 24;
  std::vector<std::string> values;  // the texts drawn in cells: a masked cell holds none
  std::copy_if(texts.begin(), texts.end(), std::back_inserter(values), [](const std::string& t) { return t != "masked"; });
  heatmap_layout L;
  L.cell_w = std::max({60, (opt.decimals < 0 ? 0 : widest(values, L.value_size)) + 20,
                       widest(col_labels, L.label_size) + 14});
  if (opt.decimals < 0) L.value_size = 0;
  if (opt.max_width > 0 &&
      svg_pad + row_axis_w + widest(row_labels, L.label_size) + 12 + across * L.cell_w + fixed > opt.max_width) {
    L.label_size = 12;
    const int room = opt.max_width - (svg_pad + row_axis_w + widest(row_labels, L.label_size) + 12) - fixed;
    L.cell_w = std::clamp(room / across, 1, L.cell_w);
    L.cell_h = std::min(L.cell_h, L.cell_w);
    L.stroke = L.cell_w >= 12 ? 2 : L.cell_w >= 6 ? 1 : 0;
    if (L.value_size > 0) {
      L.value_size = 0;  // the largest size at which every value fits its cell, if any
      for (const int size : {13, 11})
        if (L.value_size == 0 && widest(values, size) + 6 <= L.cell_w && size + 4 <= L.cell_h) L.value_size = size;
    }
    L.upright_columns = widest(col_labels, L.label_size) + 8 > L.cell_w;
    if (L.upright_columns) L.col_step = (L.label_size + 1 + L.cell_w) / L.cell_w;
    L.row_step = (L.label_size + 1 + L.cell_h) / L.cell_h;
  }
  return L;
}

/// The height of the column labels above the cells.
[[nodiscard]] inline int column_labels_height(const heatmap_layout& L, const std::vector<std::string>& col_labels) {
  return L.upright_columns ? widest(col_labels, L.label_size) + 10 : L.label_size + 12;
}

/// The top of the first row of cells: below the title, the columns' axis title and the
/// column labels.
[[nodiscard]] inline int cells_top(const heatmap_options& opt, const heatmap_layout& L,
                                   const std::vector<std::string>& col_labels) {
  int gy = svg_pad;
  if (!opt.title.empty()) gy += svg_title_size + 12;
  if (!opt.col_axis.empty()) gy += svg_axis_size + 10;
  return gy + column_labels_height(L, col_labels);
}

/// <svg> of w × h px with its accessible title, the defs (the scale's gradient; the hatches
/// when cells are masked, scaled to a cell when cells are strokes) and a white background.
[[nodiscard]] inline std::string svg_head(const heatmap_options& opt, int w, int h, bool any_masked,
                                          bool stroked_cells, const heatmap_layout& L) {
  const std::string id_title = opt.id + "-title";
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(w) + "\" height=\"" + num(h) +
                  "\" viewBox=\"0 0 " + num(w) + " " + num(h) + "\" role=\"img\" aria-labelledby=\"" + id_title +
                  "\" font-family=\"'Noto Sans', 'Noto Sans Devanagari', 'DejaVu Sans', sans-serif\">\n";
  s += "  <title id=\"" + id_title + "\">" + xml_escape(opt.title.empty() ? std::string("Heatmap") : opt.title) +
       "</title>\n";
  s += "  <defs>\n    <linearGradient id=\"" + opt.id + "-scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n";
  const auto& stops = stops_of(opt.scale);
  for (std::size_t k = 0; k < stops.size(); ++k)
    s += "      <stop offset=\"" + shortest(static_cast<double>(k) / static_cast<double>(stops.size() - 1)) +
         "\" stop-color=\"" + hex_colour(stops[k]) + "\"/>\n";
  s += "    </linearGradient>\n";
  if (any_masked) s += hatch_pattern(opt.id + "-masked", 1, 1);
  if (any_masked && stroked_cells) s += hatch_pattern(opt.id + "-masked-cells", 1.0 / L.cell_w, 1.0 / L.cell_h);
  s += "  </defs>\n";
  s += "  <rect width=\"" + num(w) + "\" height=\"" + num(h) + "\" fill=\"#ffffff\"/>\n";
  return s;
}

/// The title (top left), the columns' axis title centred on `col_axis_x`, the rows' written
/// upwards at the left, centred on `row_axis_y`.
inline void draw_titles(std::string& s, const heatmap_options& opt, int col_axis_x, int row_axis_y) {
  int y = svg_pad;
  if (!opt.title.empty()) {
    s += "  <text x=\"" + num(svg_pad) + "\" y=\"" + num(y + svg_title_size) + "\" font-size=\"" +
         num(svg_title_size) + "\" font-weight=\"bold\" fill=\"#1b1b1b\">" + xml_escape(opt.title) + "</text>\n";
    y += svg_title_size + 12;
  }
  if (!opt.col_axis.empty())
    s += "  <text x=\"" + num(col_axis_x) + "\" y=\"" + num(y + svg_axis_size) + "\" font-size=\"" +
         num(svg_axis_size) + "\" font-style=\"italic\" fill=\"#555555\" text-anchor=\"middle\">" +
         xml_escape(opt.col_axis) + "</text>\n";
  if (!opt.row_axis.empty()) {
    const int ax = svg_pad + svg_axis_size;
    s += "  <text x=\"" + num(ax) + "\" y=\"" + num(row_axis_y) + "\" font-size=\"" + num(svg_axis_size) +
         "\" font-style=\"italic\" fill=\"#555555\" text-anchor=\"middle\" transform=\"rotate(-90 " + num(ax) +
         " " + num(row_axis_y) + ")\">" + xml_escape(opt.row_axis) + "</text>\n";
  }
}

/// The column labels above cells whose top left is (gx, gy), and the row labels to their left
/// unless `row_labels` is null.
inline void draw_labels(std::string& s, const heatmap_layout& L, const std::vector<std::string>* row_labels,
                        const std::vector<std::string>& col_labels, int gx, int gy) {
  s += "  <g font-size=\"" + num(L.label_size) + "\" fill=\"#1b1b1b\">\n";
  for (int j = 0; j < static_cast<int>(col_labels.size()); j += L.col_step) {
    const std::string label = xml_escape(col_labels[static_cast<std::size_t>(j)]);
    const int lx = gx + j * L.cell_w + L.cell_w / 2, ly = gy - 8;
    if (L.upright_columns)
      s += "    <text x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" dy=\"0.35em\" transform=\"rotate(-90 " + num(lx) +
           " " + num(ly) + ")\">" + label + "</text>\n";
    else
      s += "    <text x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" text-anchor=\"middle\">" + label + "</text>\n";
  }
  if (row_labels != nullptr)
    for (int i = 0; i < static_cast<int>(row_labels->size()); i += L.row_step)
      s += "    <text x=\"" + num(gx - 10) + "\" y=\"" + num(gy + i * L.cell_h + L.cell_h / 2) +
           "\" dy=\"0.35em\" text-anchor=\"end\">" + xml_escape((*row_labels)[static_cast<std::size_t>(i)]) +
           "</text>\n";
  s += "  </g>\n";
}

/// The cells of `v` with their top left at (gx, gy): with `tooltips`, a group per cell (its
/// tooltip "<prefix>row → column: value", its colour or hatch, its value when L shows values);
/// without, one path per colour (256 steps of the scale, NaN, masked), each cell a stroke one
/// cell high and runs of one colour in a row one stroke.
template <class View>
void draw_cells(std::string& s, const View& v, const std::vector<std::string>& texts, const heatmap_layout& L,
                int gx, int gy, bool tooltips, const heatmap_options& opt, const std::vector<std::string>& row_labels,
                const std::vector<std::string>& col_labels, const std::string& tooltip_prefix) {
  const std::size_t C = v.cols();
  auto colour_of = [&](double x) {
    return std::isnan(x) ? rgb{217, 217, 217} : scale_colour((x - opt.lo) / (opt.hi - opt.lo), opt.scale);
  };
  if (tooltips) {
    s += "  <g font-size=\"" + num(L.value_size > 0 ? L.value_size : 13) + "\" text-anchor=\"middle\">\n";
    for (std::size_t i = 0; i < v.rows(); ++i)
      for (std::size_t j = 0; j < C; ++j) {
        const bool m = masked_cell(opt, C, i, j);
        const rgb c = colour_of(static_cast<double>(v(i, j)));
        const std::string& text = texts[i * C + j];
        const int cx = gx + static_cast<int>(j) * L.cell_w, cy = gy + static_cast<int>(i) * L.cell_h;
        s += "    <g>\n      <title>" + tooltip_prefix + xml_escape(row_labels[i]) + " \xE2\x86\x92 " +
             xml_escape(col_labels[j]) + ": " + text + "</title>\n";
        s += "      <rect x=\"" + num(cx) + "\" y=\"" + num(cy) + "\" width=\"" + num(L.cell_w) + "\" height=\"" +
             num(L.cell_h) + "\" fill=\"" + (m ? "url(#" + opt.id + "-masked)" : hex_colour(c)) + "\"" +
             (L.stroke > 0 ? " stroke=\"#ffffff\" stroke-width=\"" + num(L.stroke) + "\"" : std::string()) + "/>\n";
        if (L.value_size > 0 && !m)
          s += "      <text x=\"" + num(cx + L.cell_w / 2) + "\" y=\"" + num(cy + L.cell_h / 2) +
               "\" dy=\"0.35em\" fill=\"" + text_colour_on(c) + "\">" + text + "</text>\n";
        s += "    </g>\n";
      }
    s += "  </g>\n";
    return;
  }
  constexpr int steps = 256, nan_key = steps, masked_key = steps + 1;
  std::vector<std::string> paths(steps + 2);
  for (std::size_t i = 0; i < v.rows(); ++i) {
    std::size_t j = 0;
    while (j < C) {
      auto key_of = [&](std::size_t k) {
        const double x = static_cast<double>(v(i, k));
        if (masked_cell(opt, C, i, k)) return masked_key;
        if (std::isnan(x)) return nan_key;
        const double t = std::clamp((x - opt.lo) / (opt.hi - opt.lo), 0.0, 1.0);
        return std::min(steps - 1, static_cast<int>(t * steps));
      };
      const int key = key_of(j);
      std::size_t end = j + 1;
      while (end < C && key_of(end) == key) ++end;
      std::string& path = paths[static_cast<std::size_t>(key)];  // appended: "M" + … draws g++'s false -Wrestrict
      path += 'M';
      path += std::to_string(j);
      path += ' ';
      path += std::to_string(i);
      path += ".5h";
      path += std::to_string(end - j);
      j = end;
    }
  }
  s += "  <g transform=\"translate(" + num(gx) + " " + num(gy) + ") scale(" + num(L.cell_w) + " " + num(L.cell_h) +
       ")\" fill=\"none\" stroke-width=\"1\" shape-rendering=\"crispEdges\">\n";
  for (int key = 0; key < steps + 2; ++key) {
    const std::string& d = paths[static_cast<std::size_t>(key)];
    if (d.empty()) continue;
    const std::string paint = key == masked_key ? "url(#" + opt.id + "-masked-cells)"
                              : key == nan_key  ? std::string("#d9d9d9")
                                                : hex_colour(scale_colour((key + 0.5) / steps, opt.scale));
    s += "    <path stroke=\"" + paint + "\" d=\"" + d + "\"/>\n";
  }
  s += "  </g>\n";
}

/// The legend with its bar's top left at (bar_x, top), bar_h high.
inline void draw_legend(std::string& s, const legend& g, const heatmap_options& opt, int bar_x, int top, int bar_h) {
  s += "  <g font-size=\"" + num(svg_axis_size) + "\" fill=\"#555555\">\n";
  if (!opt.legend_title.empty())  // above the bar, in the column labels' band
    s += "    <text x=\"" + num(bar_x) + "\" y=\"" + num(top - 8) + "\" font-style=\"italic\">" +
         xml_escape(opt.legend_title) + "</text>\n";
  s += "    <rect x=\"" + num(bar_x) + "\" y=\"" + num(top) + "\" width=\"" + num(svg_bar_w) + "\" height=\"" +
       num(bar_h) + "\" fill=\"url(#" + opt.id + "-scale)\" stroke=\"#999999\" stroke-width=\"1\"/>\n";
  for (int k = 0; k <= 4; ++k) {
    const int ty = top + bar_h - (bar_h * k) / 4;
    s += "    <line x1=\"" + num(bar_x + svg_bar_w) + "\" y1=\"" + num(ty) + "\" x2=\"" +
         num(bar_x + svg_bar_w + svg_tick_len) + "\" y2=\"" + num(ty) + "\" stroke=\"#999999\"/>\n";
    s += "    <text x=\"" + num(bar_x + svg_bar_w + svg_tick_len + 4) + "\" y=\"" + num(ty) + "\" dy=\"0.35em\">" +
         g.ticks[static_cast<std::size_t>(k)] + "</text>\n";
  }
  const int swatch_y = top + bar_h + 16;
  for (std::size_t k = 0; k < g.swatches.size(); ++k) {
    const int sy = swatch_y + static_cast<int>(k) * 22;
    s += "    <rect x=\"" + num(bar_x) + "\" y=\"" + num(sy) + "\" width=\"" + num(svg_bar_w) + "\" height=\"" +
         num(svg_bar_w) + "\" fill=\"" + g.swatches[k].first + "\" stroke=\"#999999\" stroke-width=\"1\"/>\n";
    s += "    <text x=\"" + num(bar_x + svg_bar_w + 6) + "\" y=\"" + num(sy + svg_bar_w / 2) + "\" dy=\"0.35em\">" +
         g.swatches[k].second + "</text>\n";
  }
  s += "  </g>\n";
}

}  // namespace detail

/// One map of a grid (heatmap_grid_svg): its numbers, borrowed, and its title.
struct heatmap_panel {
  MatrixView<const double> values{};
  std::string title;
};

namespace detail {

/// A map of any element type and its title (heatmap_svg's one map).
template <class View>
struct titled_map {
  View values;
  std::string title;
};


/// The picture's width and height: the maps' grid (right edge `grid_right`, from `first_top`,
/// `grid_h` tall) and the legend beside it (a bar at least as tall as a map of `map_h`, and 120
/// px), or the title when it is wider, with the padding.
struct picture_extent {
  int width, height;
};
/// The legend's bar: as tall as a map, and at least 120 px.
[[nodiscard]] constexpr int legend_bar_height(int map_h) noexcept { return map_h > 120 ? map_h : 120; }
[[nodiscard]] inline picture_extent picture_size(const heatmap_options& opt, const legend& key, int grid_right,
                                                 int first_top, int grid_h, int map_h) {
  const int title_w = opt.title.empty() ? 0 : svg_pad + text_width(opt.title, svg_title_size) + svg_pad;
  return {std::max(grid_right + key.width, title_w),
          first_top + std::max(grid_h, key.height(legend_bar_height(map_h))) + svg_pad};
}
/// The maps of `panels` (each with .values and .title), `columns` to a row (0: as many as fit
/// opt.max_width, in rows of equal counts), on one scale with one legend: what heatmap_svg (one
/// map, no title) and heatmap_grid_svg draw. `where` names the function in errors.
template <class Panel>
[[nodiscard]] std::string heatmaps_svg(const char* where, const std::vector<Panel>& panels,
                                       const std::vector<std::string>& row_labels,
                                       const std::vector<std::string>& col_labels, const heatmap_options& opt,
                                       std::size_t columns) {
  attn::detail::check_nonempty(where, "the list of maps", panels.size());
  for (const auto& p : panels) check_heatmap(where, p.values.rows(), p.values.cols(), row_labels, col_labels, opt);
  cell_texts cells;
  for (const auto& p : panels) add_cell_texts(cells, p.values, opt);
  const legend key = make_legend(opt, cells);
  const std::size_t R = row_labels.size(), C = col_labels.size(), per_map = R * C;
  const int rows = static_cast<int>(R), cols = static_cast<int>(C), gap = 24;
  std::vector<std::string> titles;
  for (const auto& p : panels) titles.push_back(p.title);
  const int title_row_h = widest(titles, 14) == 0 ? 0 : 14 + 10;

  // as many maps to a row as fit at the natural cell size (at least one), then rows of equal counts
  const int row_axis_w = opt.row_axis.empty() ? 0 : 24;
  std::size_t across = columns == 0 ? panels.size() : std::min(columns, panels.size());
  if (columns == 0) {
    heatmap_options unlimited = opt;
    unlimited.max_width = 0;
    const heatmap_layout natural = fit_layout(unlimited, cells.texts, row_labels, col_labels, cols, 0);
    const int fixed = svg_pad + row_axis_w + widest(row_labels, natural.label_size) + 12 + key.width;
    while (across > 1 && opt.max_width > 0 &&
           fixed + static_cast<int>(across) * (cols * natural.cell_w + gap) - gap > opt.max_width)
      --across;
    const std::size_t grid_rows = (panels.size() + across - 1) / across;
    across = (panels.size() + grid_rows - 1) / grid_rows;
  }
  const int k = static_cast<int>(across);
  const heatmap_layout L = fit_layout(opt, cells.texts, row_labels, col_labels, k * cols, key.width + (k - 1) * gap);
  const bool tooltips = per_map <= most_cells_with_tooltips || L.value_size > 0;

  const int gx = svg_pad + row_axis_w + widest(row_labels, L.label_size) + 12;
  const int map_w = cols * L.cell_w, map_h = rows * L.cell_h;
  // a row of maps: the maps' titles, the column labels, the cells, a gap
  const int head_h = title_row_h + column_labels_height(L, col_labels);
  const int first_top = cells_top(opt, L, col_labels) + title_row_h;
  const int grid_rows = static_cast<int>((panels.size() + across - 1) / across);
  const int row_h = head_h + map_h + gap;
  const int grid_w = k * map_w + (k - 1) * gap, grid_h = grid_rows * row_h - gap - head_h;
  const auto [total_w, total_h] = picture_size(opt, key, gx + grid_w, first_top, grid_h, map_h);

  std::string s = svg_head(opt, total_w, total_h, cells.any_masked, !tooltips, L);
  draw_titles(s, opt, gx + grid_w / 2, first_top + grid_h / 2);
  for (std::size_t p = 0; p < panels.size(); ++p) {
    const int x = gx + static_cast<int>(p % across) * (map_w + gap);
    const int y = first_top + static_cast<int>(p / across) * row_h;
    if (title_row_h > 0)
      s += "  <text x=\"" + num(x) + "\" y=\"" + num(y - head_h + 14) +
           "\" font-size=\"14\" font-weight=\"bold\" fill=\"#1b1b1b\">" + xml_escape(panels[p].title) + "</text>\n";
    draw_labels(s, L, p % across == 0 ? &row_labels : nullptr, col_labels, x, y);
    const std::vector<std::string> texts(cells.texts.begin() + static_cast<std::ptrdiff_t>(p * per_map),
                                         cells.texts.begin() + static_cast<std::ptrdiff_t>((p + 1) * per_map));
    draw_cells(s, panels[p].values, texts, L, x, y, tooltips, opt, row_labels, col_labels,
               panels[p].title.empty() ? std::string() : xml_escape(panels[p].title) + ": ");
  }
  draw_legend(s, key, opt, gx + grid_w + 28, first_top, legend_bar_height(map_h));
  return s + "</svg>\n";
}

}  // namespace detail

namespace detail {

/// Columns [first, first + count) of a map: one band of a wrapped heatmap.
template <class View>
struct column_band {
  const View* v;
  std::size_t first, count;
  [[nodiscard]] std::size_t rows() const { return v->rows(); }
  [[nodiscard]] std::size_t cols() const { return count; }
  [[nodiscard]] auto operator()(std::size_t i, std::size_t j) const { return (*v)(i, first + j); }
};

/// heatmap_svg of a map too wide for opt.max_width at opt.min_cell px a cell: the columns in
/// bands of m (as many as fit at min_cell), one band under another, each with its own column
/// labels (thinned as fit_layout thins them, so they never overlap) and every row's label (the
/// cells as tall as a label needs); one title, one legend beside the first band.
template <class View>
[[nodiscard]] std::string wrapped_heatmap_svg(const View& v, const std::vector<std::string>& row_labels,
                                              const std::vector<std::string>& col_labels, const heatmap_options& opt) {
  cell_texts cells;
  add_cell_texts(cells, v, opt);
  const legend key = make_legend(opt, cells);
  const std::size_t R = v.rows(), C = v.cols();
  const int row_axis_w = opt.row_axis.empty() ? 0 : 24, gap = 24;
  const int room = opt.max_width - (svg_pad + row_axis_w + widest(row_labels, 12) + 12) - key.width;
  const std::size_t m = std::clamp<std::size_t>(static_cast<std::size_t>(std::max(room, 1) / opt.min_cell), 1, C);
  heatmap_layout L = fit_layout(opt, cells.texts, row_labels, col_labels, static_cast<int>(m), key.width);
  L.cell_h = std::max(L.cell_h, L.label_size + 2);  // rows tall enough for every row's label
  L.row_step = 1;
  const std::size_t bands = (C + m - 1) / m;
  const bool tooltips = R * C <= most_cells_with_tooltips || L.value_size > 0;
  const int gx = svg_pad + row_axis_w + widest(row_labels, L.label_size) + 12;
  const int head_h = column_labels_height(L, col_labels), map_h = static_cast<int>(R) * L.cell_h;
  const int first_top = cells_top(opt, L, col_labels), band_h = head_h + map_h + gap;
  const int grid_w = static_cast<int>(m) * L.cell_w, grid_h = static_cast<int>(bands) * band_h - gap - head_h;
  const auto [total_w, total_h] = picture_size(opt, key, gx + grid_w, first_top, grid_h, map_h);
  std::string s = svg_head(opt, total_w, total_h, cells.any_masked, !tooltips, L);
  draw_titles(s, opt, gx + grid_w / 2, first_top + grid_h / 2);
  for (std::size_t b = 0; b < bands; ++b) {
    const std::size_t first = b * m, count = std::min(m, C - first);
    const int y = first_top + static_cast<int>(b) * band_h;
    const std::vector<std::string> labels(col_labels.begin() + static_cast<std::ptrdiff_t>(first),
                                          col_labels.begin() + static_cast<std::ptrdiff_t>(first + count));
    draw_labels(s, L, &row_labels, labels, gx, y);
    heatmap_options band = opt;  // the band's masked cells, as one per column or R × count
    if (!opt.masked.empty()) {
      band.masked.clear();
      const bool per_column = opt.masked.size() == C;
      for (std::size_t i = 0; i < (per_column ? 1 : R); ++i)
        for (std::size_t j = first; j < first + count; ++j) band.masked.push_back(opt.masked[per_column ? j : i * C + j]);
    }
    std::vector<std::string> texts;
    for (std::size_t i = 0; i < R; ++i)
      for (std::size_t j = first; j < first + count; ++j) texts.push_back(cells.texts[i * C + j]);
    draw_cells(s, column_band<View>{&v, first, count}, texts, L, gx, y, tooltips, band, row_labels, labels, "");
  }
  draw_legend(s, key, opt, gx + grid_w + 28, first_top, legend_bar_height(map_h));
  return s + "</svg>\n";
}

}  // namespace detail

/// Returns an R×C heatmap of `values` as an SVG document (with opt.min_cell, wrapped into bands
/// of columns where max_width would make the cells narrower): cells coloured on [lo, hi] showing
/// fixed(value, decimals), row and column labels, a legend (naming NaN and masked cells when
/// present), a tooltip per cell up to 4096 cells; options as heatmap_options says. Any label
/// bytes give well-formed XML. Throws dimension_error unless the labels match R and C, the
/// matrix is not empty and `masked` has 0, C or R·C entries; domain_error unless finite
/// lo < hi and a valid id prefix.
template <matrix_like M>
[[nodiscard]] std::string heatmap_svg(const M& values, const std::vector<std::string>& row_labels,
                                      const std::vector<std::string>& col_labels,
                                      const heatmap_options& opt = {}) {
  using view = decltype(as_view(values));
  const std::vector<detail::titled_map<view>> one{{as_view(values), ""}};
  if (opt.min_cell > 0 && opt.max_width > 0) {  // wrapped when max_width would make the cells narrower
    detail::check_heatmap("attn::report::heatmap_svg", one[0].values.rows(), one[0].values.cols(), row_labels,
                          col_labels, opt);
    detail::cell_texts cells;
    detail::add_cell_texts(cells, one[0].values, opt);
    const int width = detail::make_legend(opt, cells).width;
    const detail::heatmap_layout L = detail::fit_layout(opt, cells.texts, row_labels, col_labels,
                                                        static_cast<int>(col_labels.size()), width);
    if (L.cell_w < opt.min_cell && col_labels.size() > 1)
      return detail::wrapped_heatmap_svg(one[0].values, row_labels, col_labels, opt);
  }
  return detail::heatmaps_svg("attn::report::heatmap_svg", one, row_labels, col_labels, opt, 1);
}

/// Returns several R×C heatmaps as one SVG document (the maps of many heads; a map beside
/// another): `columns` maps to a row (0: as many as fit opt.max_width), each under its title,
/// on ONE colour scale [lo, hi] with one legend, the column labels above every map, the row
/// labels left of each row of maps, opt.masked's cells masked in every map; the rest as
/// heatmap_svg (tooltips "title: row → column: value"). Throws as heatmap_svg for each map,
/// and dimension_error when there are no maps or they differ in shape.
[[nodiscard]] inline std::string heatmap_grid_svg(const std::vector<heatmap_panel>& panels,
                                                  const std::vector<std::string>& row_labels,
                                                  const std::vector<std::string>& col_labels,
                                                  const heatmap_options& opt = {}, std::size_t columns = 0) {
  return detail::heatmaps_svg("attn::report::heatmap_grid_svg", panels, row_labels, col_labels, opt, columns);
}

/// What the rows of `weights` sum to, for a title: "each row sums to 1" only when every row
/// does (within (n + 4)ε); "nothing kept: every weight is 0" when every row is zeros (every
/// note masked); "each row sums to 1, or is 0 where nothing is kept" for a mix; "" otherwise
/// (NaN rows).
template <matrix_like M>
[[nodiscard]] std::string row_sums_text(const M& weights) {
  const auto w = as_view(weights);
  using T = std::remove_cv_t<typename decltype(w)::value_type>;
  const double tolerance = static_cast<double>(w.cols() + 4) * static_cast<double>(std::numeric_limits<T>::epsilon());
  std::size_t ones = 0, zeros = 0;
  for (std::size_t i = 0; i < w.rows(); ++i) {
    double sum = 0;
    bool all_zero = true;
    for (std::size_t j = 0; j < w.cols(); ++j) {
      sum += static_cast<double>(w(i, j));
      all_zero = all_zero && w(i, j) == T(0);
    }
    if (all_zero) ++zeros;
    else if (std::abs(sum - 1) <= tolerance) ++ones;
  }
  if (ones == w.rows()) return "each row sums to 1";
  if (zeros == w.rows()) return "nothing kept: every weight is 0";
  if (ones + zeros == w.rows()) return "each row sums to 1, or is 0 where nothing is kept";
  return "";
}

/// The options alignment_map_svg draws with: the axes' titles, `decimals`, the scale [0, 1]
/// with its legend titled "weight α", and a title that says what the rows of `weights` sum to
/// (row_sums_text).
template <matrix_like M>
[[nodiscard]] heatmap_options alignment_map_options(const M& weights, int decimals = 3) {
  heatmap_options opt;
  opt.title = "Alignment map \xCE\xB1";
  if (const std::string sums = row_sums_text(weights); !sums.empty()) opt.title += " (" + sums + ")";
  opt.row_axis = "queries (words written)";
  opt.col_axis = "notes (words read)";
  opt.decimals = decimals;
  opt.legend_title = "weight \xCE\xB1";
  return opt;
}

/// Returns the alignment map α (T×n) as a heatmap on the scale [0, 1] with
/// alignment_map_options: rows are the queries (the words written), columns the notes (the
/// words read). attn-calc and the alignment_map example both draw with this, so their files
/// are identical.
template <matrix_like M>
[[nodiscard]] std::string alignment_map_svg(const M& weights, const std::vector<std::string>& query_labels,
                                            const std::vector<std::string>& note_labels, int decimals = 3) {
  return heatmap_svg(weights, query_labels, note_labels, alignment_map_options(weights, decimals));
}

}  // namespace attn::report
