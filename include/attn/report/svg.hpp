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
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "attn/error.hpp"
#include "attn/matrix.hpp"
#include "attn/report/detail/utf8.hpp"
#include "attn/report/format.hpp"

namespace attn::report {

/// How a heatmap looks.
struct heatmap_options {
  std::string title;          ///< first line, bold (empty: none)
  std::string row_axis;       ///< what the rows are, written up the left side (empty: none)
  std::string col_axis;       ///< what the columns are, written above the column labels
  int decimals = 3;           ///< digits after the point of the values in the cells; < 0: no values
  double lo = 0.0;            ///< the value of the lightest colour (smaller values clamp to it)
  double hi = 1.0;            ///< the value of the darkest colour (larger values clamp to it)
  std::string id = "attn";    ///< prefix of the ids inside the SVG, for pages that inline several
                              ///< (ASCII letters, digits, '_', '-', '.'; a letter or '_' first)
};

namespace detail {

struct rgb {
  double r, g, b;
};

/// The colour scale: light to dark blue, lightness falling evenly, so that more weight always
/// reads as darker (also in grey scale print and for colour-blind readers).
inline constexpr std::array<rgb, 5> scale_stops{{
    {247, 250, 253}, {200, 220, 238}, {128, 176, 216}, {58, 118, 182}, {12, 52, 110}}};

/// The colour at t in [0, 1], interpolated between the stops the way an SVG gradient does.
[[nodiscard]] inline rgb scale_colour(double t) {
  t = std::clamp(t, 0.0, 1.0);
  const double x = t * static_cast<double>(scale_stops.size() - 1);
  const auto k = std::min(static_cast<std::size_t>(x), scale_stops.size() - 2);
  const double f = x - static_cast<double>(k);
  const rgb& a = scale_stops[k];
  const rgb& b = scale_stops[k + 1];
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

/// Returns an R×C heatmap of `values` as an SVG document: row i labelled row_labels[i] on
/// the left, column j labelled col_labels[j] on top, each cell coloured by its value on the
/// scale [lo, hi] and showing fixed(value, decimals); a legend on the right; a tooltip
/// (<title>) on every cell. NaN cells are grey. Throws dimension_error unless there are R row
/// labels and C column labels and the matrix is not empty; domain_error unless lo < hi.
template <matrix_like M>
[[nodiscard]] std::string heatmap_svg(const M& values, const std::vector<std::string>& row_labels,
                                      const std::vector<std::string>& col_labels,
                                      const heatmap_options& opt = {}) {
  const auto v = as_view(values);
  const char* where = "attn::report::heatmap_svg";
  attn::detail::check_nonempty(where, "the matrix", v.rows() * v.cols());
  attn::detail::check_equal(where, "row labels", row_labels.size(), "rows", v.rows());
  attn::detail::check_equal(where, "column labels", col_labels.size(), "columns", v.cols());
  if (!(opt.lo < opt.hi) || !std::isfinite(opt.lo) || !std::isfinite(opt.hi))
    throw domain_error(std::string(where) + ": the colour scale needs finite lo < hi");
  if (!detail::valid_id(opt.id))
    throw domain_error(std::string(where) + ": the id prefix must be ASCII letters, digits, '_', '-' "
                       "and '.', starting with a letter or '_'");
  using detail::num;
  using detail::text_width;
  using detail::xml_escape;

  constexpr int pad = 16, label_size = 14, value_size = 13, title_size = 16, axis_size = 12;
  constexpr int cell_h = 36, bar_w = 14, tick_len = 4;
  const int rows = static_cast<int>(v.rows()), cols = static_cast<int>(v.cols());

  std::vector<std::string> texts(v.rows() * v.cols());
  int widest_value = 0;
  for (std::size_t i = 0; i < v.rows(); ++i)
    for (std::size_t j = 0; j < v.cols(); ++j) {
      auto& t = texts[i * v.cols() + j];
      t = fixed(static_cast<double>(v(i, j)), opt.decimals < 0 ? 3 : opt.decimals);
      widest_value = std::max(widest_value, text_width(t, value_size));
    }
  int widest_col = 0, widest_row = 0;
  for (const auto& s : col_labels) widest_col = std::max(widest_col, text_width(s, label_size));
  for (const auto& s : row_labels) widest_row = std::max(widest_row, text_width(s, label_size));
  const int cell_w = std::max({60, widest_value + 20, widest_col + 14});

  const int row_axis_w = opt.row_axis.empty() ? 0 : 24;
  const int gx = pad + row_axis_w + widest_row + 12;
  int gy = pad;
  if (!opt.title.empty()) gy += title_size + 12;
  if (!opt.col_axis.empty()) gy += axis_size + 10;
  gy += label_size + 12;  // the column labels
  const int grid_w = cols * cell_w, grid_h = rows * cell_h;

  // legend: a vertical bar from lo (bottom) to hi (top) with five ticks
  const int bar_x = gx + grid_w + 28;
  const int bar_h = std::max(grid_h, 120);
  std::vector<std::string> ticks;
  int widest_tick = 0;
  for (int k = 0; k <= 4; ++k) {
    ticks.push_back(shortest(opt.lo + (opt.hi - opt.lo) * k / 4.0));
    widest_tick = std::max(widest_tick, text_width(ticks.back(), axis_size));
  }
  const int width = bar_x + bar_w + tick_len + 4 + widest_tick + pad;
  const int title_w = opt.title.empty() ? 0 : pad + text_width(opt.title, title_size) + pad;
  const int total_w = std::max(width, title_w);
  const int total_h = gy + std::max(grid_h, bar_h) + pad;

  const std::string id_title = opt.id + "-title", id_scale = opt.id + "-scale";
  std::string s;
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(total_w) + "\" height=\"" +
       num(total_h) + "\" viewBox=\"0 0 " + num(total_w) + " " + num(total_h) +
       "\" role=\"img\" aria-labelledby=\"" + xml_escape(id_title) +
       "\" font-family=\"'Noto Sans', 'Noto Sans Devanagari', 'DejaVu Sans', sans-serif\">\n";
  s += "  <title id=\"" + xml_escape(id_title) + "\">" +
       xml_escape(opt.title.empty() ? std::string("Heatmap") : opt.title) + "</title>\n";
  s += "  <defs>\n    <linearGradient id=\"" + xml_escape(id_scale) +
       "\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n";
  for (std::size_t k = 0; k < detail::scale_stops.size(); ++k)
    s += "      <stop offset=\"" +
         shortest(static_cast<double>(k) / static_cast<double>(detail::scale_stops.size() - 1)) +
         "\" stop-color=\"" + detail::hex_colour(detail::scale_stops[k]) + "\"/>\n";
  s += "    </linearGradient>\n  </defs>\n";
  s += "  <rect width=\"" + num(total_w) + "\" height=\"" + num(total_h) + "\" fill=\"#ffffff\"/>\n";

  int y = pad;
  if (!opt.title.empty()) {
    s += "  <text x=\"" + num(pad) + "\" y=\"" + num(y + title_size) + "\" font-size=\"" +
         num(title_size) + "\" font-weight=\"bold\" fill=\"#1b1b1b\">" + xml_escape(opt.title) +
         "</text>\n";
    y += title_size + 12;
  }
  if (!opt.col_axis.empty())
    s += "  <text x=\"" + num(gx + grid_w / 2) + "\" y=\"" + num(y + axis_size) + "\" font-size=\"" +
         num(axis_size) + "\" font-style=\"italic\" fill=\"#555555\" text-anchor=\"middle\">" +
         xml_escape(opt.col_axis) + "</text>\n";
  if (!opt.row_axis.empty()) {
    const int ax = pad + axis_size, ay = gy + grid_h / 2;
    s += "  <text x=\"" + num(ax) + "\" y=\"" + num(ay) + "\" font-size=\"" + num(axis_size) +
         "\" font-style=\"italic\" fill=\"#555555\" text-anchor=\"middle\" transform=\"rotate(-90 " +
         num(ax) + " " + num(ay) + ")\">" + xml_escape(opt.row_axis) + "</text>\n";
  }

  s += "  <g font-size=\"" + num(label_size) + "\" fill=\"#1b1b1b\">\n";
  for (int j = 0; j < cols; ++j)
    s += "    <text x=\"" + num(gx + j * cell_w + cell_w / 2) + "\" y=\"" + num(gy - 8) +
         "\" text-anchor=\"middle\">" + xml_escape(col_labels[static_cast<std::size_t>(j)]) + "</text>\n";
  for (int i = 0; i < rows; ++i)
    s += "    <text x=\"" + num(gx - 10) + "\" y=\"" + num(gy + i * cell_h + cell_h / 2) +
         "\" dy=\"0.35em\" text-anchor=\"end\">" + xml_escape(row_labels[static_cast<std::size_t>(i)]) +
         "</text>\n";
  s += "  </g>\n";

  s += "  <g font-size=\"" + num(value_size) + "\" text-anchor=\"middle\">\n";
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      const auto ui = static_cast<std::size_t>(i), uj = static_cast<std::size_t>(j);
      const double x = static_cast<double>(v(ui, uj));
      const bool missing = std::isnan(x);
      const detail::rgb c =
          missing ? detail::rgb{217, 217, 217} : detail::scale_colour((x - opt.lo) / (opt.hi - opt.lo));
      const std::string& text = texts[ui * v.cols() + uj];
      const int cx = gx + j * cell_w, cy = gy + i * cell_h;
      s += "    <g>\n      <title>" + xml_escape(row_labels[ui]) + " \xE2\x86\x92 " +
           xml_escape(col_labels[uj]) + ": " + text + "</title>\n";
      s += "      <rect x=\"" + num(cx) + "\" y=\"" + num(cy) + "\" width=\"" + num(cell_w) +
           "\" height=\"" + num(cell_h) + "\" fill=\"" + detail::hex_colour(c) +
           "\" stroke=\"#ffffff\" stroke-width=\"2\"/>\n";
      if (opt.decimals >= 0)
        s += "      <text x=\"" + num(cx + cell_w / 2) + "\" y=\"" + num(cy + cell_h / 2) +
             "\" dy=\"0.35em\" fill=\"" + detail::text_colour_on(c) + "\">" + text + "</text>\n";
      s += "    </g>\n";
    }
  s += "  </g>\n";

  s += "  <g font-size=\"" + num(axis_size) + "\" fill=\"#555555\">\n";
  s += "    <rect x=\"" + num(bar_x) + "\" y=\"" + num(gy) + "\" width=\"" + num(bar_w) +
       "\" height=\"" + num(bar_h) + "\" fill=\"url(#" + xml_escape(id_scale) +
       ")\" stroke=\"#999999\" stroke-width=\"1\"/>\n";
  for (int k = 0; k <= 4; ++k) {
    const int ty = gy + bar_h - (bar_h * k) / 4;
    s += "    <line x1=\"" + num(bar_x + bar_w) + "\" y1=\"" + num(ty) + "\" x2=\"" +
         num(bar_x + bar_w + tick_len) + "\" y2=\"" + num(ty) + "\" stroke=\"#999999\"/>\n";
    s += "    <text x=\"" + num(bar_x + bar_w + tick_len + 4) + "\" y=\"" + num(ty) +
         "\" dy=\"0.35em\">" + ticks[static_cast<std::size_t>(k)] + "</text>\n";
  }
  s += "  </g>\n</svg>\n";
  return s;
}

/// Returns the alignment map α (T×n, each row sums to 1) as a heatmap on the scale [0, 1]:
/// rows are the queries (the words written), columns the notes (the words read). attn-calc
/// and the alignment_map example both draw with this, so their files are identical.
template <matrix_like M>
[[nodiscard]] std::string alignment_map_svg(const M& weights, const std::vector<std::string>& query_labels,
                                            const std::vector<std::string>& note_labels, int decimals = 3) {
  heatmap_options opt;
  opt.title = "Alignment map \xCE\xB1 (each row sums to 1)";
  opt.row_axis = "queries (words written)";
  opt.col_axis = "notes (words read)";
  opt.decimals = decimals;
  return heatmap_svg(weights, query_labels, note_labels, opt);
}

}  // namespace attn::report
