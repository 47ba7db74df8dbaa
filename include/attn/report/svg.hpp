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

namespace detail {

/// A legend tick's value: at most ten significant digits, so that lo + (hi − lo)·3/4 of a
/// scale to 0.3 reads 0.225 and not 0.22499999999999998.
[[nodiscard]] inline std::string tick_text(double x) {
  if (x == 0) return "0";
  std::array<char, 64> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), x, std::chars_format::general, 10);
  return std::string(buf.data(), r.ptr);
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

}  // namespace detail

/// Returns an R×C heatmap of `values` as an SVG document: cells coloured on [lo, hi] showing
/// fixed(value, decimals), row and column labels, a legend (naming NaN and masked cells when
/// present), a tooltip per cell up to 4096 cells; options as heatmap_options says. Any label
/// bytes give well-formed XML. Throws dimension_error unless the labels match R and C, the
/// matrix is not empty and `masked` has 0, C or R·C entries; domain_error unless finite
/// lo < hi and a valid id prefix.
template <matrix_like M>
[[nodiscard]] std::string heatmap_svg(const M& values, const std::vector<std::string>& row_labels,
                                      const std::vector<std::string>& col_labels,
                                      const heatmap_options& opt = {}) {
  const auto v = as_view(values);
  const char* where = "attn::report::heatmap_svg";
  attn::detail::check_nonempty(where, "the matrix", v.rows() * v.cols());
  attn::detail::check_equal(where, "row labels", row_labels.size(), "rows", v.rows());
  attn::detail::check_equal(where, "column labels", col_labels.size(), "columns", v.cols());
  if (!opt.masked.empty() && opt.masked.size() != v.cols())
    attn::detail::check_equal(where, "size of masked", opt.masked.size(), "number of cells",
                              v.rows() * v.cols());
  if (!(opt.lo < opt.hi) || !std::isfinite(opt.lo) || !std::isfinite(opt.hi))
    attn::detail::raise<domain_error>(std::string(where) +
                                      ": the colour scale needs finite lo < hi");
  if (!detail::valid_id(opt.id))
    attn::detail::raise<domain_error>(std::string(where) +
                                      ": the id prefix must be ASCII letters, digits, '_', '-' "
                                      "and '.', starting with a letter or '_'");
  using detail::num;
  using detail::text_width;
  using detail::xml_escape;

  constexpr int pad = 16, title_size = 16, axis_size = 12, bar_w = 14, tick_len = 4;
  constexpr std::size_t most_cells_with_tooltips = 4096;  // beyond: runs of colour, a few bytes a cell
  const int rows = static_cast<int>(v.rows()), cols = static_cast<int>(v.cols());
  const std::size_t C = v.cols();
  auto masked = [&](std::size_t i, std::size_t j) {
    return !opt.masked.empty() && opt.masked[opt.masked.size() == C ? j : i * C + j];
  };

  std::vector<std::string> texts(v.rows() * C);
  bool any_masked = false, any_nan = false;
  for (std::size_t i = 0; i < v.rows(); ++i)
    for (std::size_t j = 0; j < C; ++j) {
      const double x = static_cast<double>(v(i, j));
      texts[i * C + j] = masked(i, j) ? "masked" : fixed(x, opt.decimals < 0 ? 3 : opt.decimals);
      any_masked = any_masked || masked(i, j);
      any_nan = any_nan || (!masked(i, j) && std::isnan(x));
    }
  auto widest = [](const std::vector<std::string>& texts_, int size) {
    int w = 0;
    for (const auto& t : texts_) w = std::max(w, text_width(t, size));
    return w;
  };

  // the legend: a vertical bar from lo (bottom) to hi (top) with five ticks, then swatches
  std::vector<std::string> ticks;
  for (int k = 0; k <= 4; ++k) ticks.push_back(detail::tick_text(opt.lo + (opt.hi - opt.lo) * k / 4.0));
  std::vector<std::pair<std::string, std::string>> swatches;  // fill, name
  if (any_masked) swatches.emplace_back("url(#" + opt.id + "-masked)", "masked");
  if (any_nan) swatches.emplace_back("#d9d9d9", "NaN");
  int legend_text_w = widest(ticks, axis_size);
  for (const auto& sw : swatches)
    legend_text_w = std::max(legend_text_w, text_width(sw.second, axis_size) + 20 - tick_len - 4);
  const int legend_w = 28 + bar_w + tick_len + 4 + legend_text_w + pad;
  const int row_axis_w = opt.row_axis.empty() ? 0 : 24;

  // the natural layout: cells wide enough for every value and column label
  detail::heatmap_layout L;
  L.cell_w = std::max({60, (opt.decimals < 0 ? 0 : widest(texts, L.value_size)) + 20,
                       widest(col_labels, L.label_size) + 14});
  if (opt.decimals < 0) L.value_size = 0;
  if (opt.max_width > 0 &&
      pad + row_axis_w + widest(row_labels, L.label_size) + 12 + cols * L.cell_w + legend_w > opt.max_width) {
    // too wide for the column it goes in: smaller (square) cells, smaller labels
    L.label_size = 12;
    const int room = opt.max_width - (pad + row_axis_w + widest(row_labels, L.label_size) + 12) - legend_w;
    L.cell_w = std::clamp(room / cols, 1, L.cell_w);
    L.cell_h = std::min(L.cell_h, L.cell_w);
    L.stroke = L.cell_w >= 12 ? 2 : L.cell_w >= 6 ? 1 : 0;
    if (L.value_size > 0) {
      L.value_size = 0;  // the largest size at which every value fits its cell, if any
      for (const int size : {13, 11})
        if (L.value_size == 0 && widest(texts, size) + 6 <= L.cell_w && size + 4 <= L.cell_h) L.value_size = size;
    }
    L.upright_columns = widest(col_labels, L.label_size) + 8 > L.cell_w;
    if (L.upright_columns) L.col_step = (L.label_size + 1 + L.cell_w) / L.cell_w;
    L.row_step = (L.label_size + 1 + L.cell_h) / L.cell_h;
  }
  const bool tooltips = v.rows() * C <= most_cells_with_tooltips || L.value_size > 0;

  const int cell_w = L.cell_w, cell_h = L.cell_h;
  const int gx = pad + row_axis_w + widest(row_labels, L.label_size) + 12;
  int gy = pad;
  if (!opt.title.empty()) gy += title_size + 12;
  if (!opt.col_axis.empty()) gy += axis_size + 10;
  gy += L.upright_columns ? widest(col_labels, L.label_size) + 10 : L.label_size + 12;  // the column labels
  const int grid_w = cols * cell_w, grid_h = rows * cell_h;
  const int bar_x = gx + grid_w + 28;
  const int bar_h = std::max(grid_h, 120);
  const int swatch_y = gy + bar_h + 16;
  const int legend_h = bar_h + (swatches.empty() ? 0 : 16 + static_cast<int>(swatches.size()) * 22 - 8);
  const int width = gx + grid_w + legend_w;
  const int title_w = opt.title.empty() ? 0 : pad + text_width(opt.title, title_size) + pad;
  const int total_w = std::max(width, title_w);
  const int total_h = gy + std::max(grid_h, legend_h) + pad;

  const std::string id_title = opt.id + "-title", id_scale = opt.id + "-scale";
  std::string s;
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(total_w) + "\" height=\"" +
       num(total_h) + "\" viewBox=\"0 0 " + num(total_w) + " " + num(total_h) +
       "\" role=\"img\" aria-labelledby=\"" + id_title +
       "\" font-family=\"'Noto Sans', 'Noto Sans Devanagari', 'DejaVu Sans', sans-serif\">\n";
  s += "  <title id=\"" + id_title + "\">" +
       xml_escape(opt.title.empty() ? std::string("Heatmap") : opt.title) + "</title>\n";
  s += "  <defs>\n    <linearGradient id=\"" + id_scale + "\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n";
  for (std::size_t k = 0; k < detail::scale_stops.size(); ++k)
    s += "      <stop offset=\"" +
         shortest(static_cast<double>(k) / static_cast<double>(detail::scale_stops.size() - 1)) +
         "\" stop-color=\"" + detail::hex_colour(detail::scale_stops[k]) + "\"/>\n";
  s += "    </linearGradient>\n";
  if (any_masked) s += detail::hatch_pattern(opt.id + "-masked", 1, 1);
  if (any_masked && !tooltips) s += detail::hatch_pattern(opt.id + "-masked-cells", 1.0 / cell_w, 1.0 / cell_h);
  s += "  </defs>\n";
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

  s += "  <g font-size=\"" + num(L.label_size) + "\" fill=\"#1b1b1b\">\n";
  for (int j = 0; j < cols; j += L.col_step) {
    const std::string label = xml_escape(col_labels[static_cast<std::size_t>(j)]);
    const int lx = gx + j * cell_w + cell_w / 2, ly = gy - 8;
    if (L.upright_columns)
      s += "    <text x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" dy=\"0.35em\" transform=\"rotate(-90 " + num(lx) +
           " " + num(ly) + ")\">" + label + "</text>\n";
    else
      s += "    <text x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" text-anchor=\"middle\">" + label + "</text>\n";
  }
  for (int i = 0; i < rows; i += L.row_step)
    s += "    <text x=\"" + num(gx - 10) + "\" y=\"" + num(gy + i * cell_h + cell_h / 2) +
         "\" dy=\"0.35em\" text-anchor=\"end\">" + xml_escape(row_labels[static_cast<std::size_t>(i)]) +
         "</text>\n";
  s += "  </g>\n";

  auto colour_of = [&](double x) {
    return std::isnan(x) ? detail::rgb{217, 217, 217} : detail::scale_colour((x - opt.lo) / (opt.hi - opt.lo));
  };
  if (tooltips) {
    s += "  <g font-size=\"" + num(L.value_size > 0 ? L.value_size : 13) + "\" text-anchor=\"middle\">\n";
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        const auto ui = static_cast<std::size_t>(i), uj = static_cast<std::size_t>(j);
        const bool m = masked(ui, uj);
        const detail::rgb c = colour_of(static_cast<double>(v(ui, uj)));
        const std::string& text = texts[ui * C + uj];
        const int cx = gx + j * cell_w, cy = gy + i * cell_h;
        s += "    <g>\n      <title>" + xml_escape(row_labels[ui]) + " \xE2\x86\x92 " +
             xml_escape(col_labels[uj]) + ": " + text + "</title>\n";
        s += "      <rect x=\"" + num(cx) + "\" y=\"" + num(cy) + "\" width=\"" + num(cell_w) +
             "\" height=\"" + num(cell_h) + "\" fill=\"" +
             (m ? "url(#" + opt.id + "-masked)" : detail::hex_colour(c)) + "\"" +
             (L.stroke > 0 ? " stroke=\"#ffffff\" stroke-width=\"" + num(L.stroke) + "\"" : std::string()) + "/>\n";
        if (L.value_size > 0 && !m)
          s += "      <text x=\"" + num(cx + cell_w / 2) + "\" y=\"" + num(cy + cell_h / 2) +
               "\" dy=\"0.35em\" fill=\"" + detail::text_colour_on(c) + "\">" + text + "</text>\n";
        s += "    </g>\n";
      }
    s += "  </g>\n";
  } else {
    // Too many cells for a tooltip each: one path per colour (256 steps of the scale, NaN,
    // masked), each cell a stroke one cell high, and runs of one colour in a row one stroke.
    constexpr int steps = 256, nan_key = steps, masked_key = steps + 1;
    std::vector<std::string> paths(steps + 2);
    for (std::size_t i = 0; i < v.rows(); ++i) {
      std::size_t j = 0;
      while (j < C) {
        auto key_of = [&](std::size_t k) {
          const double x = static_cast<double>(v(i, k));
          if (masked(i, k)) return masked_key;
          if (std::isnan(x)) return nan_key;
          const double t = std::clamp((x - opt.lo) / (opt.hi - opt.lo), 0.0, 1.0);
          return std::min(steps - 1, static_cast<int>(t * steps));
        };
        const int key = key_of(j);
        std::size_t end = j + 1;
        while (end < C && key_of(end) == key) ++end;
        (paths[static_cast<std::size_t>(key)] += 'M') +=  // not "M" + …: GCC PR 105651
            std::to_string(j) + " " + std::to_string(i) + ".5h" + std::to_string(end - j);
        j = end;
      }
    }
    s += "  <g transform=\"translate(" + num(gx) + " " + num(gy) + ") scale(" + num(cell_w) + " " + num(cell_h) +
         ")\" fill=\"none\" stroke-width=\"1\" shape-rendering=\"crispEdges\">\n";
    for (int key = 0; key < steps + 2; ++key) {
      const std::string& d = paths[static_cast<std::size_t>(key)];
      if (d.empty()) continue;
      const std::string paint = key == masked_key ? "url(#" + opt.id + "-masked-cells)"
                                : key == nan_key  ? std::string("#d9d9d9")
                                                  : detail::hex_colour(detail::scale_colour((key + 0.5) / steps));
      s += "    <path stroke=\"" + paint + "\" d=\"" + d + "\"/>\n";
    }
    s += "  </g>\n";
  }

  s += "  <g font-size=\"" + num(axis_size) + "\" fill=\"#555555\">\n";
  s += "    <rect x=\"" + num(bar_x) + "\" y=\"" + num(gy) + "\" width=\"" + num(bar_w) +
       "\" height=\"" + num(bar_h) + "\" fill=\"url(#" + id_scale + ")\" stroke=\"#999999\" stroke-width=\"1\"/>\n";
  for (int k = 0; k <= 4; ++k) {
    const int ty = gy + bar_h - (bar_h * k) / 4;
    s += "    <line x1=\"" + num(bar_x + bar_w) + "\" y1=\"" + num(ty) + "\" x2=\"" +
         num(bar_x + bar_w + tick_len) + "\" y2=\"" + num(ty) + "\" stroke=\"#999999\"/>\n";
    s += "    <text x=\"" + num(bar_x + bar_w + tick_len + 4) + "\" y=\"" + num(ty) +
         "\" dy=\"0.35em\">" + ticks[static_cast<std::size_t>(k)] + "</text>\n";
  }
  for (std::size_t k = 0; k < swatches.size(); ++k) {
    const int sy = swatch_y + static_cast<int>(k) * 22;
    s += "    <rect x=\"" + num(bar_x) + "\" y=\"" + num(sy) + "\" width=\"" + num(bar_w) + "\" height=\"" +
         num(bar_w) + "\" fill=\"" + swatches[k].first + "\" stroke=\"#999999\" stroke-width=\"1\"/>\n";
    s += "    <text x=\"" + num(bar_x + bar_w + 6) + "\" y=\"" + num(sy + bar_w / 2) + "\" dy=\"0.35em\">" +
         swatches[k].second + "</text>\n";
  }
  s += "  </g>\n</svg>\n";
  return s;
}

/// The options alignment_map_svg draws with: the axes' titles, `decimals`, the scale [0, 1],
/// and a title that says what the rows of `weights` sum to: "each row sums to 1" only when
/// every row does (within (n + 4)ε); a row of zeros is one with nothing kept (every note
/// masked), and the title says so; NaN rows leave the claim out.
template <matrix_like M>
[[nodiscard]] heatmap_options alignment_map_options(const M& weights, int decimals = 3) {
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
  heatmap_options opt;
  opt.title = "Alignment map \xCE\xB1";
  if (ones == w.rows()) opt.title += " (each row sums to 1)";
  else if (zeros == w.rows()) opt.title += " (nothing kept: every weight is 0)";
  else if (ones + zeros == w.rows()) opt.title += " (each row sums to 1, or is 0 where nothing is kept)";
  opt.row_axis = "queries (words written)";
  opt.col_axis = "notes (words read)";
  opt.decimals = decimals;
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
