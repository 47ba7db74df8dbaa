#pragma once
/// \file examples/attn_calc/lessons.hpp
/// attn-calc's lessons beyond the map (the unit's §8–§9): --pe (sinusoidal positions), --rope
/// (one pair turned by RoPE), --layer-norm and --rms-norm, --activations (ReLU, GELU exact and
/// tanh) and --block (one transformer block's intermediate values: W9's, or --self's with its
/// weights and --ffn-w1, --ffn-w2). Every number comes from the
/// library (attn/positions.hpp, norms.hpp, activations.hpp, block.hpp); what this file adds is
/// the lesson's arrangement: named tables, and with --steps the formulas with the numbers put
/// in. render.hpp writes a lesson in every format (render_lesson).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../worked_examples.hpp"
#include "attn/activations.hpp"
#include "attn/block.hpp"
#include "attn/cross_entropy.hpp"
#include "attn/heads.hpp"
#include "attn/matrix.hpp"
#include "attn/norms.hpp"
#include "attn/positions.hpp"
#include "attn/report/format.hpp"
#include "attn/report/table.hpp"
#include "parse.hpp"

namespace attn_calc {

/// One table of a lesson: its numbers with their row and column labels.
struct lesson_table {
  std::string id;                         ///< JSON's name, the LaTeX label's suffix, csv-long's first column
  attn::report::cell title;
  attn::report::cell corner;              ///< what the rows are ("p", "x", "word")
  std::vector<attn::report::cell> rows, cols;
  attn::Matrix<double> values;
  bool input = false;                     ///< an input: printed as given (shortest), not rounded
};

/// A paragraph (table < 0) or a table of a lesson, in the order printed.
struct lesson_piece {
  attn::report::cell text;
  int table = -1;
};

/// What a lesson prints: a heading, paragraphs and tables in order; the table CSV writes; the
/// options JSON lists; --rope's pair before and after (its SVG).
struct lesson_results {
  attn::report::cell heading;
  std::vector<lesson_piece> pieces;
  std::vector<lesson_table> tables;
  std::size_t main = 0;  ///< the table --format csv writes
  std::vector<std::pair<std::string, std::string>> texts;  ///< JSON options: names
  std::vector<std::pair<std::string, double>> numbers;     ///< JSON options: numbers
  double a = 0, b = 0, a_turned = 0, b_turned = 0, phi = 0;  ///< --rope
  std::size_t first = 0, second = 0;  ///< --rope: the pair's columns (from 0)

  void paragraph(attn::report::cell c) { pieces.push_back({std::move(c), -1}); }
  /// Adds `t` and returns its index.
  std::size_t table(lesson_table t) {
    tables.push_back(std::move(t));
    pieces.push_back({{}, static_cast<int>(tables.size() - 1)});
    return tables.size() - 1;
  }
};

namespace detail {

using attn::report::cell;
using attn::report::fixed;
using attn::report::shortest;

inline std::vector<cell> numbered_cells(std::size_t n, std::size_t from = 0) {
  std::vector<cell> out;
  for (std::size_t i = 0; i < n; ++i) out.emplace_back(std::to_string(i + from));
  return out;
}

/// A column of numbers (one per label) as a lesson table of one column "value".
inline lesson_table column_table(std::string id, cell title, cell corner, std::vector<cell> rows,
                                 const std::vector<double>& v, bool input = false) {
  attn::Matrix<double> m(v.size(), 1);
  for (std::size_t i = 0; i < v.size(); ++i) m(i, 0) = v[i];
  return {std::move(id), std::move(title), std::move(corner), std::move(rows), {cell("value")}, std::move(m), input};
}

inline attn::Matrix<double> as_matrix(const matrix& m) {
  attn::Matrix<double> out(m.rows, m.cols);
  for (std::size_t i = 0; i < m.rows; ++i)
    for (std::size_t j = 0; j < m.cols; ++j) out(i, j) = m.data[i * m.cols + j];
  return out;
}

template <class M>
attn::Matrix<double> copy_of(const M& m) {
  const auto v = attn::as_view(m);
  attn::Matrix<double> out(v.rows(), v.cols());
  for (std::size_t i = 0; i < v.rows(); ++i)
    for (std::size_t j = 0; j < v.cols(); ++j) out(i, j) = v(i, j);
  return out;
}

/// "−1.5" in LaTeX math: a minus sign, not a hyphen.
inline std::string math_number(const std::string& s) {
  return !s.empty() && s[0] == '-' ? "-" + s.substr(1) : s;
}

/// A sentence written both ways: `text` as is; `latex` escaped except where the caller gives it.
inline cell both(const std::string& text, const std::string& latex) { return {text, latex}; }

/// "(1, 2, 3)" from numbers written by `f`.
template <class F>
std::string listed(std::size_t n, F f) {
  std::string s = "(";
  for (std::size_t i = 0; i < n; ++i) s += (i ? ", " : "") + f(i);
  return s + ")";
}

// ---------------------------------------------------------------------------------------------
// --pe

inline lesson_results pe_lesson(const config& c) {
  lesson_results L;
  const std::size_t P = c.positions, d = c.dim, half = d / 2;
  const bool concat = c.split_layout;
  attn::sinusoid s;
  s.layout = concat ? attn::sinusoid_layout::concatenated : attn::sinusoid_layout::interleaved;
  const attn::Matrix<double> pe = attn::sinusoidal_encoding<double>(P, d, 0, s);
  const std::string layout = concat ? "concatenated" : "interleaved";
  const std::string size = std::to_string(P) + " positions × " + std::to_string(d) + " dimensions";
  L.heading = {"attn-calc: sinusoidal positions, " + size + " (" + layout + ")",
               "attn-calc: sinusoidal positions, " + std::to_string(P) + " positions $\\times$ " + std::to_string(d) +
                   " dimensions (" + layout + ")"};
  const std::string h = std::to_string(half);
  if (concat)
    L.paragraph({"PE[p, i] = sin(p·ω_i) and PE[p, " + h + " + i] = cos(p·ω_i): the " + h + " sines, then the " + h +
                     " cosines, with ω_i = 10000^(−2i/d), d = " + std::to_string(d) +
                     ". The same numbers as the interleaved layout: its column 2i is column i here, 2i + 1 is " + h +
                     " + i.",
                 "$PE_{p,i} = \\sin(p\\,\\omega_i)$ and $PE_{p," + h + "+i} = \\cos(p\\,\\omega_i)$: the " + h +
                     " sines, then the " + h + " cosines, with $\\omega_i = 10000^{-2i/d}$, $d = " +
                     std::to_string(d) + "$. The same numbers as the interleaved layout: its column $2i$ is column $i$ "
                     "here, $2i + 1$ is $" + h + " + i$."});
  else
    L.paragraph({"PE[p, 2i] = sin(p·ω_i) and PE[p, 2i + 1] = cos(p·ω_i), with ω_i = 10000^(−2i/d), d = " +
                     std::to_string(d) + " (the paper's layout): pair i turns by ω_i radians a position, fast on "
                     "the left (ω_0 = 1), slower to the right.",
                 "$PE_{p,2i} = \\sin(p\\,\\omega_i)$ and $PE_{p,2i+1} = \\cos(p\\,\\omega_i)$, with $\\omega_i = "
                 "10000^{-2i/d}$, $d = " + std::to_string(d) + "$ (the paper's layout): pair $i$ turns by $\\omega_i$ "
                 "radians a position, fast on the left ($\\omega_0 = 1$), slower to the right."});
  if (c.steps) {
    attn::Matrix<double> w(half, 2);
    std::vector<cell> pairs;
    for (std::size_t i = 0; i < half; ++i) {
      const auto omega = attn::detail::pair_frequency<long double>(10000.0, i, d);
      const auto cols = attn::detail::columns_of_pair(i, d, !concat);
      w(i, 0) = static_cast<double>(omega);
      w(i, 1) = static_cast<double>(2 * std::numbers::pi_v<long double> / omega);
      pairs.emplace_back(std::to_string(i) + " (columns " + std::to_string(cols.first) + ", " +
                         std::to_string(cols.second) + ")");
    }
    lesson_table t{"frequencies",
                   {"Frequencies by hand: ω_i = 10000^(−2i/d) and a period of 2π/ω_i positions; pair i's sine "
                    "and cosine go in the columns named",
                    "Frequencies by hand: $\\omega_i = 10000^{-2i/d}$ and a period of $2\\pi/\\omega_i$ positions; "
                    "pair $i$'s sine and cosine go in the columns named"},
                   {"pair i", "pair $i$"},
                   std::move(pairs),
                   {cell("ω_i", "$\\omega_i$"), cell("period", "$2\\pi/\\omega_i$")},
                   std::move(w)};
    L.table(std::move(t));
    if (P >= 2 && half >= 2) {  // one entry worked out: p = 1, pair 1
      const auto omega = attn::detail::pair_frequency<long double>(10000.0, 1, d);
      const auto cols = attn::detail::columns_of_pair(1, d, !concat);
      const int dp = c.decimals;
      const std::string o = fixed(static_cast<double>(omega), dp), two = "2/" + std::to_string(d);
      const std::string sn = fixed(pe(1, cols.first), dp), cs = fixed(pe(1, cols.second), dp);
      const std::string c1 = std::to_string(cols.first), c2 = std::to_string(cols.second);
      L.paragraph({"For p = 1 and pair i = 1: ω_1 = 10000^(−" + two + ") = " + o + ", PE[1, " + c1 + "] = sin(1 · " +
                       o + ") = " + sn + " and PE[1, " + c2 + "] = cos(1 · " + o + ") = " + cs + ".",
                   "For $p = 1$ and pair $i = 1$: $\\omega_1 = 10000^{-" + two + "} = " + o + "$, $PE_{1," + c1 +
                       "} = \\sin(1 \\cdot " + o + ") = " + math_number(sn) + "$ and $PE_{1," + c2 +
                       "} = \\cos(1 \\cdot " + o + ") = " + math_number(cs) + "$."});
    }
  }
  L.main = L.table({"pe",
                    {"PE (" + layout + "): a row per position p, a column per dimension",
                     "$PE$ (" + layout + "): a row per position $p$, a column per dimension"},
                    {"p", "$p$"},
                    numbered_cells(P),
                    numbered_cells(d),
                    pe});
  L.texts = {{"layout", layout}};
  L.numbers = {{"positions", static_cast<double>(P)}, {"d", static_cast<double>(d)}, {"base", 10000}};
  return L;
}

// ---------------------------------------------------------------------------------------------
// --rope

inline lesson_results rope_lesson(const config& c) {
  lesson_results L;
  const std::size_t d = c.dim, i = c.pair, p = c.position;
  const bool split = c.split_layout;
  const auto cols = attn::detail::columns_of_pair(i, d, !split);
  attn::Matrix<double> x(1, d, 0.0);
  x(0, cols.first) = c.rope_pair[0];
  x(0, cols.second) = c.rope_pair[1];
  attn::rotary form;
  form.form = split ? attn::rotary_form::half_split : attn::rotary_form::interleaved;
  attn::apply_rotary(x, 1, p, 1, form);  // the library turns row 0 by (p + 0)·θ_i
  // θ_i and φ as the library forms them (in long double), each then rounded once
  const long double theta = attn::detail::pair_frequency<long double>(form.base, i, d);
  const long double phi = static_cast<long double>(p) * theta;
  L.a = c.rope_pair[0];
  L.b = c.rope_pair[1];
  L.a_turned = x(0, cols.first);
  L.b_turned = x(0, cols.second);
  L.phi = static_cast<double>(phi);
  L.first = cols.first;
  L.second = cols.second;
  const double cs = static_cast<double>(std::cos(phi)), sn = static_cast<double>(std::sin(phi));
  const std::string form_name = split ? "half-split" : "interleaved";
  const std::string P = std::to_string(p), I = std::to_string(i), D = std::to_string(d);
  const std::string c1 = std::to_string(cols.first), c2 = std::to_string(cols.second);
  L.heading = {"attn-calc: RoPE turns pair i = " + I + " at position p = " + P,
               "attn-calc: RoPE turns pair $i = " + I + "$ at position $p = " + P + "$"};
  const std::string pair_text = split ? "(x_i, x_(i+d_k/2)), here columns " + c1 + " and " + c2
                                      : "(x_2i, x_2i+1), here columns " + c1 + " and " + c2;
  const std::string pair_latex = split ? "$(x_i, x_{i+d_k/2})$, here columns " + c1 + " and " + c2
                                       : "$(x_{2i}, x_{2i+1})$, here columns " + c1 + " and " + c2;
  L.paragraph({"Rotary positions (" + form_name + "): pair i of a head's d_k = " + D + " numbers is " + pair_text +
                   " (from 0). At position p it turns by φ = p·θ_i, θ_i = 10000^(−2i/d_k): (a, b) ↦ (a cos φ − b sin φ, "
                   "a sin φ + b cos φ).",
               "Rotary positions (" + form_name + "): pair $i$ of a head's $d_k = " + D + "$ numbers is " + pair_latex +
                   " (from 0). At position $p$ it turns by $\\varphi = p\\,\\theta_i$, $\\theta_i = 10000^{-2i/d_k}$: "
                   "$(a, b) \\mapsto (a\\cos\\varphi - b\\sin\\varphi,\\; a\\sin\\varphi + b\\cos\\varphi)$."});
  L.table(column_table("inputs", {"Inputs", "Inputs"}, {"", ""},
                       {cell("a"), cell("b"), cell("position p", "position $p$"), cell("pair i", "pair $i$"),
                        cell("d_k", "$d_k$"), cell("column of a"), cell("column of b")},
                       {L.a, L.b, static_cast<double>(p), static_cast<double>(i), static_cast<double>(d),
                        static_cast<double>(cols.first), static_cast<double>(cols.second)},
                       true));
  const double len = std::hypot(L.a, L.b), len_turned = std::hypot(L.a_turned, L.b_turned);
  if (c.steps) {
    const int dp = c.decimals;
    const std::string th = fixed(static_cast<double>(theta), dp), ph = fixed(L.phi, dp);
    const std::string C = fixed(cs, dp), S = fixed(sn, dp), A = shortest(L.a), B = shortest(L.b);
    const std::string deg = fixed(L.phi * 180 / std::numbers::pi, 2);
    const std::string A2 = fixed(L.a_turned, dp), B2 = fixed(L.b_turned, dp);
    const std::string e = "2·" + I + "/" + D;
    const auto paren = [](const std::string& s) { return !s.empty() && s[0] == '-' ? "(" + s + ")" : s; };
    L.paragraph({"By hand: θ_" + I + " = 10000^(−" + e + ") = " + th + "; φ = p·θ_" + I + " = " + P + " · " + th + " = " +
                     ph + " rad (" + deg + "°); cos φ = " + C + ", sin φ = " + S + ".",
                 "By hand: $\\theta_{" + I + "} = 10000^{-2 \\cdot " + I + "/" + D + "} = " + th +
                     "$; $\\varphi = p\\,\\theta_{" + I + "} = " + P + " \\cdot " + th + " = " + ph + "$ rad ($" + deg +
                     "^\\circ$); $\\cos\\varphi = " + math_number(C) + "$, $\\sin\\varphi = " + math_number(S) + "$."});
    L.paragraph({"a′ = a cos φ − b sin φ = " + A + " · " + paren(C) + " − " + paren(B) + " · " + paren(S) + " = " + A2 +
                     "; b′ = a sin φ + b cos φ = " + A + " · " + paren(S) + " + " + paren(B) + " · " + paren(C) + " = " +
                     B2 + ". A rotation keeps the length: |(a, b)| = " + fixed(len, dp) + ", |(a′, b′)| = " +
                     fixed(len_turned, dp) + ".",
                 "$a' = a\\cos\\varphi - b\\sin\\varphi = " + math_number(A) + " \\cdot " + math_number(paren(C)) +
                     " - " + math_number(paren(B)) + " \\cdot " + math_number(paren(S)) + " = " + math_number(A2) +
                     "$; $b' = a\\sin\\varphi + b\\cos\\varphi = " + math_number(A) + " \\cdot " +
                     math_number(paren(S)) + " + " + math_number(paren(B)) + " \\cdot " + math_number(paren(C)) +
                     " = " + math_number(B2) + "$. A rotation keeps the length: $|(a, b)| = " + fixed(len, dp) +
                     "$, $|(a', b')| = " + fixed(len_turned, dp) + "$."});
  }
  L.main = L.table(column_table(
      "rotation", {"The pair turned", "The pair turned"}, {"", ""},
      {cell("θ_i", "$\\theta_i$"), cell("φ = p·θ_i", "$\\varphi = p\\,\\theta_i$"), cell("cos φ", "$\\cos\\varphi$"),
       cell("sin φ", "$\\sin\\varphi$"), cell("a′", "$a'$"), cell("b′", "$b'$"), cell("|(a, b)|", "$|(a, b)|$"),
       cell("|(a′, b′)|", "$|(a', b')|$")},
      {static_cast<double>(theta), L.phi, cs, sn, L.a_turned, L.b_turned, len, len_turned}));
  L.texts = {{"form", form_name}};
  L.numbers = {{"a", L.a}, {"b", L.b}, {"position", static_cast<double>(p)}, {"pair", static_cast<double>(i)},
               {"d_k", static_cast<double>(d)}, {"base", form.base}};
  return L;
}

// ---------------------------------------------------------------------------------------------
// --layer-norm, --rms-norm

/// σ² of row t of X about μ (LayerNorm), or mean(x²) (RMSNorm, μ = 0): Σ (x − μ)² / n, as the
/// lesson writes it.
inline double spread(attn::MatrixView<const double> X, std::size_t t, double mu) {
  double q = 0;
  for (std::size_t i = 0; i < X.cols(); ++i) q += (X(t, i) - mu) * (X(t, i) - mu);
  return q / static_cast<double>(X.cols());
}

inline lesson_results norm_lesson(const config& c) {
  lesson_results L;
  const bool layer = !c.rms;
  const attn::Matrix<double> X = as_matrix(c.norm_input);
  const std::size_t rows = X.rows(), d = X.cols();
  attn::norm_parameters<double> np;
  np.gamma = c.gamma;
  np.beta = c.ln_beta;
  np.eps = c.eps;
  np.kind = layer ? attn::norm_kind::layer : attn::norm_kind::rms;
  const attn::norm_result<double> r = attn::norm(X, np);
  const std::string name = layer ? "LayerNorm" : "RMSNorm";
  L.heading = {"attn-calc: " + name + " by hand", "attn-calc: " + name + " by hand"};
  const std::string eps = shortest(c.eps);
  if (layer)
    L.paragraph({"LayerNorm(x) = γ ⊙ (x − μ)/√(σ² + ε) + β over each row: μ = mean(x), σ² = mean((x − μ)²) (biased, "
                 "as PyTorch), ε = " + eps + ".",
                 "$\\operatorname{LayerNorm}(\\mathbf x) = \\boldsymbol\\gamma \\odot (\\mathbf x - \\mu)/\\sqrt{\\sigma^2 "
                 "+ \\varepsilon} + \\boldsymbol\\beta$ over each row: $\\mu = \\operatorname{mean}(\\mathbf x)$, "
                 "$\\sigma^2 = \\operatorname{mean}((\\mathbf x - \\mu)^2)$ (biased, as PyTorch), $\\varepsilon = " +
                 eps + "$."});
  else
    L.paragraph({"RMSNorm(x) = γ ⊙ x/√(mean(x²) + ε) over each row (not centred, no β), ε = " + eps + ".",
                 "$\\operatorname{RMSNorm}(\\mathbf x) = \\boldsymbol\\gamma \\odot \\mathbf x / "
                 "\\sqrt{\\operatorname{mean}(\\mathbf x^2) + \\varepsilon}$ over each row (not centred, no "
                 "$\\boldsymbol\\beta$), $\\varepsilon = " + eps + "$."});
  const auto row_cells = numbered_cells(rows, 1);
  L.table({"x", {"Input x (one row per vector)", "Input $\\mathbf x$ (one row per vector)"}, {"row"}, row_cells,
           numbered_cells(d, 1), X, true});
  if (!c.gamma.empty()) L.table(column_table("gamma", {"γ", "$\\boldsymbol\\gamma$"}, {"i", "$i$"}, numbered_cells(d, 1), c.gamma, true));
  if (!c.ln_beta.empty()) L.table(column_table("beta", {"β", "$\\boldsymbol\\beta$"}, {"i", "$i$"}, numbered_cells(d, 1), c.ln_beta, true));
  attn::Matrix<double> stats(rows, layer ? 4 : 3), xhat(rows, d);
  for (std::size_t t = 0; t < rows; ++t) {
    const double mu = layer ? r.mean[t] : 0.0, var = spread(X, t, mu);
    if (var + c.eps == 0)
      throw usage_error(std::string(layer ? "--layer-norm" : "--rms-norm") + ": row " + std::to_string(t + 1) +
                        (layer ? " is constant" : " is all zeros") +
                        " and ε = 0, so it has no scale (0/0): give --eps above 0, or another row");
    std::size_t k = 0;
    if (layer) stats(t, k++) = mu;
    stats(t, k++) = var;
    stats(t, k++) = var + c.eps;
    stats(t, k) = r.rstd[t];
    for (std::size_t i = 0; i < d; ++i) xhat(t, i) = (X(t, i) - mu) * r.rstd[t];
  }
  std::vector<cell> stat_cols;
  if (layer) stat_cols = {cell("μ", "$\\mu$"), cell("σ²", "$\\sigma^2$"), cell("σ² + ε", "$\\sigma^2 + \\varepsilon$"),
                          cell("1/√(σ² + ε)", "$1/\\sqrt{\\sigma^2 + \\varepsilon}$")};
  else stat_cols = {cell("mean(x²)", "$\\operatorname{mean}(x^2)$"), cell("mean(x²) + ε", "$\\operatorname{mean}(x^2) + \\varepsilon$"),
                    cell("1/√(mean(x²) + ε)", "$1/\\sqrt{\\operatorname{mean}(x^2) + \\varepsilon}$")};
  L.table({"statistics",
           {layer ? "Each row's mean μ, variance σ² and scale 1/√(σ² + ε)" : "Each row's mean square and scale 1/√(mean(x²) + ε)",
            layer ? "Each row's mean $\\mu$, variance $\\sigma^2$ and scale $1/\\sqrt{\\sigma^2 + \\varepsilon}$"
                  : "Each row's mean square and scale $1/\\sqrt{\\operatorname{mean}(x^2) + \\varepsilon}$"},
           {"row"}, row_cells, stat_cols, stats});
  if (c.steps) {
    const int dp = c.decimals;
    for (std::size_t t = 0; t < rows; ++t) {
      const std::string T = rows == 1 ? "" : "Row " + std::to_string(t + 1) + ": ";
      const double mu = layer ? r.mean[t] : 0.0;
      const std::string n = std::to_string(d), M = fixed(mu, dp), V = fixed(stats(t, layer ? 1 : 0), dp);
      const std::string R = fixed(r.rstd[t], dp);
      std::string sum, lsum, sq, lsq;
      for (std::size_t i = 0; i < d; ++i) {
        const std::string x = shortest(X(t, i));
        sum += (i ? " + " : "") + (x[0] == '-' && i ? "(" + x + ")" : x);
        lsum += (i ? " + " : "") + (x[0] == '-' && i ? "(" + math_number(x) + ")" : math_number(x));
        if (layer) {
          sq += (i ? " + " : "") + std::string("(") + x + " − " + (M[0] == '-' ? "(" + M + ")" : M) + ")²";
          lsq += (i ? " + " : "") + std::string("(") + math_number(x) + " - " + (M[0] == '-' ? "(" + math_number(M) + ")" : M) + ")^2";
        } else {
          sq += (i ? " + " : "") + (x[0] == '-' ? "(" + x + ")" : x) + "²";
          lsq += (i ? " + " : "") + (x[0] == '-' ? "(" + math_number(x) + ")" : x) + "^2";
        }
      }
      const std::string xh = listed(d, [&](std::size_t i) { return fixed(xhat(t, i), dp); });
      const std::string y = listed(d, [&](std::size_t i) { return fixed(r.out(t, i), dp); });
      const std::string lxh = listed(d, [&](std::size_t i) { return math_number(fixed(xhat(t, i), dp)); });
      const std::string ly = listed(d, [&](std::size_t i) { return math_number(fixed(r.out(t, i), dp)); });
      const std::string affine = layer ? "γ ⊙ x̂ + β" : "γ ⊙ x̂", laffine = layer ? "\\boldsymbol\\gamma \\odot \\hat{\\mathbf x} + \\boldsymbol\\beta" : "\\boldsymbol\\gamma \\odot \\hat{\\mathbf x}";
      if (layer)
        L.paragraph({T + "μ = (" + sum + ") / " + n + " = " + M + "; σ² = (" + sq + ") / " + n + " = " + V +
                         "; 1/√(σ² + ε) = 1/√(" + V + " + " + eps + ") = " + R + "; x̂ = (x − μ)·" + R + " = " + xh +
                         "; y = " + affine + " = " + y + ".",
                     T + "$\\mu = (" + lsum + ") / " + n + " = " + math_number(M) + "$; $\\sigma^2 = (" + lsq + ") / " + n +
                         " = " + V + "$; $1/\\sqrt{\\sigma^2 + \\varepsilon} = 1/\\sqrt{" + V + " + " + eps + "} = " + R +
                         "$; $\\hat{\\mathbf x} = (\\mathbf x - \\mu) \\cdot " + R + " = " + lxh + "$; $\\mathbf y = " +
                         laffine + " = " + ly + "$."});
      else
        L.paragraph({T + "mean(x²) = (" + sq + ") / " + n + " = " + V + "; 1/√(mean(x²) + ε) = 1/√(" + V + " + " + eps +
                         ") = " + R + "; x̂ = x·" + R + " = " + xh + "; y = " + affine + " = " + y + ".",
                     T + "$\\operatorname{mean}(\\mathbf x^2) = (" + lsq + ") / " + n + " = " + V +
                         "$; $1/\\sqrt{\\operatorname{mean}(\\mathbf x^2) + \\varepsilon} = 1/\\sqrt{" + V + " + " + eps +
                         "} = " + R + "$; $\\hat{\\mathbf x} = \\mathbf x \\cdot " + R + " = " + lxh + "$; $\\mathbf y = " +
                         laffine + " = " + ly + "$."});
    }
    L.table({"xhat", {layer ? "x̂ = (x − μ)/√(σ² + ε)" : "x̂ = x/√(mean(x²) + ε)",
                      layer ? "$\\hat{\\mathbf x} = (\\mathbf x - \\mu)/\\sqrt{\\sigma^2 + \\varepsilon}$"
                            : "$\\hat{\\mathbf x} = \\mathbf x/\\sqrt{\\operatorname{mean}(\\mathbf x^2) + \\varepsilon}$"},
             {"row"}, row_cells, numbered_cells(d, 1), xhat});
  }
  L.main = L.table({"y", {"Output y = " + std::string(layer ? "γ ⊙ x̂ + β" : "γ ⊙ x̂") + " (γ = 1, β = 0 when not given)",
                          "Output $\\mathbf y = " + std::string(layer ? "\\boldsymbol\\gamma \\odot \\hat{\\mathbf x} + \\boldsymbol\\beta"
                                                                      : "\\boldsymbol\\gamma \\odot \\hat{\\mathbf x}") +
                              "$ ($\\boldsymbol\\gamma = 1$, $\\boldsymbol\\beta = 0$ when not given)"},
                    {"row"}, row_cells, numbered_cells(d, 1), r.out});
  L.texts = {{"norm", layer ? "layer" : "rms"}};
  L.numbers = {{"eps", c.eps}};
  return L;
}

// ---------------------------------------------------------------------------------------------
// --activations

/// Φ(x) = ½·erfc(−x/√2), the normal distribution's CDF (the form that keeps its digits for x ≪ 0).
inline double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

inline lesson_results activation_lesson(const config& c) {
  lesson_results L;
  using attn::activation;
  const std::vector<double>& xs = c.activation_inputs;
  L.heading = {"attn-calc: ReLU and GELU by hand", "attn-calc: ReLU and GELU by hand"};
  L.paragraph({"ReLU(x) = max(x, 0), ReLU′(x) = 1 for x > 0, else 0. GELU(x) = x·Φ(x), Φ(x) = ½·erfc(−x/√2) (the "
               "normal CDF, written with erfc so that it keeps its digits for x ≪ 0), GELU′(x) = Φ(x) + x·φ(x), φ(x) = "
               "e^(−x²/2)/√(2π). The tanh form: GELU_tanh(x) = ½x(1 + tanh u) = x·σ(2u), u = √(2/π)(x + 0.044715x³).",
               "$\\operatorname{ReLU}(x) = \\max(x, 0)$, $\\operatorname{ReLU}'(x) = 1$ for $x > 0$, else 0. "
               "$\\operatorname{GELU}(x) = x\\,\\Phi(x)$, $\\Phi(x) = \\tfrac12 \\operatorname{erfc}(-x/\\sqrt2)$ (the "
               "normal CDF, written with erfc so that it keeps its digits for $x \\ll 0$), $\\operatorname{GELU}'(x) = "
               "\\Phi(x) + x\\,\\varphi(x)$, $\\varphi(x) = e^{-x^2/2}/\\sqrt{2\\pi}$. The tanh form: "
               "$\\operatorname{GELU}_{\\tanh}(x) = \\tfrac12 x (1 + \\tanh u) = x\\,\\sigma(2u)$, $u = "
               "\\sqrt{2/\\pi}\\,(x + 0.044715 x^3)$."});
  attn::Matrix<double> m(xs.size(), 7);
  std::vector<cell> rows;
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const double x = xs[k];
    rows.emplace_back(shortest(x), "$" + math_number(shortest(x)) + "$");
    m(k, 0) = normal_cdf(x);
    m(k, 1) = attn::activate(activation::gelu, x);
    m(k, 2) = attn::activation_derivative(activation::gelu, x);
    m(k, 3) = attn::activate(activation::gelu_tanh, x);
    m(k, 4) = attn::activation_derivative(activation::gelu_tanh, x);
    m(k, 5) = attn::activate(activation::relu, x);
    m(k, 6) = attn::activation_derivative(activation::relu, x);
  }
  if (c.steps) {
    const int dp = c.decimals;
    for (std::size_t k = 0; k < xs.size(); ++k) {
      const double x = xs[k];
      const auto paren = [](const std::string& t) { return !t.empty() && t[0] == '-' ? "(" + t + ")" : t; };
      const std::string X = shortest(x), Xp = x < 0 ? "(" + X + ")" : X, lX = math_number(X), lXp = x < 0 ? "(" + lX + ")" : lX;
      const double pdf = std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi);
      const double u = std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x);
      const std::string Phi = fixed(m(k, 0), dp), ph = fixed(pdf, dp), U = fixed(u, dp), th = fixed(std::tanh(u), dp);
      const std::string g = fixed(m(k, 1), dp), dg = fixed(m(k, 2), dp), gt = fixed(m(k, 3), dp), dgt = fixed(m(k, 4), dp);
      const std::string re = fixed(m(k, 5), dp), dre = fixed(m(k, 6), dp);
      const std::string arg = fixed(-x / std::numbers::sqrt2, dp);
      // the slope of the tanh form: σ(2u) = (1 + tanh u)/2 and u′ = √(2/π)(1 + 3·0.044715x²)
      const double sg = 0.5 * (1 + std::tanh(u)), du = std::sqrt(2 / std::numbers::pi) * (1 + 3 * 0.044715 * x * x);
      const std::string S = fixed(sg, dp), S1 = fixed(1 - sg, dp), dU = fixed(du, dp);
      L.paragraph({"x = " + X + ": Φ(" + X + ") = ½·erfc(" + arg + ") = " + Phi + "; GELU(" + X + ") = " + Xp + " · " + Phi +
                       " = " + g + "; φ(" + X + ") = " + ph + ", GELU′(" + X + ") = " + Phi + " + " + Xp + " · " + ph + " = " + dg +
                       ". Tanh form: u = √(2/π)(" + X + " + 0.044715 · " + Xp + "³) = " + U + ", tanh u = " + th +
                       ", GELU_tanh(" + X + ") = ½ · " + Xp + " · (1 + " + paren(th) + ") = " + gt + "; σ(2u) = " + S +
                       ", u′ = √(2/π)(1 + 3 · 0.044715 · " + Xp + "²) = " + dU + ", GELU_tanh′(" + X +
                       ") = σ(2u) + 2x·u′·σ(2u)·(1 − σ(2u)) = " + S + " + 2 · " + Xp + " · " + dU + " · " + S + " · " + S1 +
                       " = " + dgt + ". ReLU(" + X + ") = " + re + ", ReLU′(" + X + ") = " + dre + ".",
                   "$x = " + lX + "$: $\\Phi(" + lX + ") = \\tfrac12 \\operatorname{erfc}(" + math_number(arg) + ") = " + Phi +
                       "$; $\\operatorname{GELU}(" + lX + ") = " + lXp + " \\cdot " + Phi + " = " + math_number(g) +
                       "$; $\\varphi(" + lX + ") = " + ph + "$, $\\operatorname{GELU}'(" + lX + ") = " + Phi + " + " + lXp +
                       " \\cdot " + ph + " = " + math_number(dg) + "$. Tanh form: $u = \\sqrt{2/\\pi}\\,(" + lX +
                       " + 0.044715 \\cdot " + lXp + "^3) = " + math_number(U) + "$, $\\tanh u = " + math_number(th) +
                       "$, $\\operatorname{GELU}_{\\tanh}(" + lX + ") = \\tfrac12 \\cdot " + lXp + " \\cdot (1 + " +
                       paren(th) + ") = " + math_number(gt) + "$; $\\sigma(2u) = " + S + "$, $u' = \\sqrt{2/\\pi}\\,(1 + 3 \\cdot "
                       "0.044715 \\cdot " + lXp + "^2) = " + dU + "$, $\\operatorname{GELU}_{\\tanh}'(" + lX +
                       ") = \\sigma(2u) + 2x\\,u'\\,\\sigma(2u)(1 - \\sigma(2u)) = " + S + " + 2 \\cdot " + lXp +
                       " \\cdot " + dU + " \\cdot " + S + " \\cdot " + S1 + " = " + math_number(dgt) + "$. $\\operatorname{ReLU}(" + lX + ") = " + re + "$, $\\operatorname{ReLU}'(" + lX +
                       ") = " + dre + "$."});
    }
  }
  L.main = L.table({"activations",
                    {"Values and slopes, one row per x", "Values and slopes, one row per $x$"},
                    {"x", "$x$"},
                    rows,
                    {cell("Φ(x)", "$\\Phi(x)$"), cell("GELU", "GELU"), cell("GELU′", "GELU$'$"),
                     cell("GELU_tanh", "GELU$_{\\tanh}$"), cell("GELU_tanh′", "GELU$_{\\tanh}'$"), cell("ReLU"),
                     cell("ReLU′", "ReLU$'$")},
                    m});
  L.numbers = {};
  return L;
}

// ---------------------------------------------------------------------------------------------
// --block

inline lesson_results block_lesson(const config& c) {
  lesson_results L;
  const bool post = !c.pre_ln, own = c.self_attention;  // own: --self and its weights, else W9's
  // the inputs: W9's (X = "I drink tea", W3's head, W_O, W_1, W_2), or --self's with --ffn-w1, --ffn-w2
  const attn::Matrix<double> X = own ? as_matrix(c.queries) : copy_of(worked::i_drink_tea);
  const std::size_t T = X.rows(), d = X.cols();
  const auto given_or = [&](const matrix& m, const auto& w9) { return own ? as_matrix(m.empty() ? identity(d) : m) : copy_of(w9); };
  const attn::Matrix<double> WQ = given_or(c.WQ, worked::w3::W_Q), WK = given_or(c.WK, worked::w3::W_K),
                             WV = given_or(c.WV, worked::w3::W_V);
  const attn::Matrix<double> WO = own ? as_matrix(c.WO) : copy_of(worked::w9::W_O);
  const attn::Matrix<double> W1 = own ? as_matrix(c.ffn_w1) : copy_of(worked::w9::W_1);
  const attn::Matrix<double> W2 = own ? as_matrix(c.ffn_w2) : copy_of(worked::w9::W_2);
  const std::size_t h = own ? c.heads : 1, dk = WQ.cols() / h, dff = W1.cols();
  attn::block_parameters<double> p;
  p.attention = {.W_Q = WQ.view(), .W_K = WK.view(), .W_V = WV.view()};
  if (WO.rows() != 0) p.attention.W_O = WO.view();
  p.attention.heads = h;
  // --ffn-activation: GELU (W9's), ReLU or GELU's tanh form; its name in the titles
  const bool relu = c.ffn_activation == "relu", tanh_form = c.ffn_activation == "gelu-tanh";
  const std::string act = relu ? "ReLU" : tanh_form ? "GELU_tanh" : "GELU",
                    lact = relu ? "\\operatorname{ReLU}" : tanh_form ? "\\operatorname{GELU}_{\\tanh}" : "\\operatorname{GELU}";
  p.ffn = {.W_1 = W1.view(), .W_2 = W2.view(),
           .act = relu ? attn::activation::relu : tanh_form ? attn::activation::gelu_tanh : attn::activation::gelu};
  p.norm_1.eps = c.eps;
  p.norm_2.eps = c.eps;
  p.placement = post ? attn::norm_placement::post : attn::norm_placement::pre;
  attn::block_cache<double> cache;
  attn::Matrix<double> Y(T, d);
  attn::transformer_block(X, p, Y, cache);
  const std::string eps = shortest(c.eps), arrangement = post ? "post-LN" : "pre-LN";
  if (own)
    L.heading = {"attn-calc: one transformer block (" + arrangement + ") on " + std::to_string(T) +
                     (T == 1 ? " word" : " words"),
                 "attn-calc: one transformer block (" + arrangement + ") on " + std::to_string(T) + (T == 1 ? " word" : " words")};
  else
    L.heading = {"attn-calc: one transformer block (" + arrangement + ") on \"I drink tea\" (W9)",
                 "attn-calc: one transformer block (" + arrangement + ") on ``I drink tea'' (W9)"};
  const std::string K = std::to_string(dk), F = std::to_string(dff), D = std::to_string(d);
  const std::string heads_text = own ? (h == 1 ? "one head" : std::to_string(h) + " heads") + " (scaled dot, d_k = " + K + ")"
                                     : "W3's head (scaled dot, d_k = 2)";
  const std::string heads_latex = own ? (h == 1 ? "one head" : std::to_string(h) + " heads") + " (scaled dot, $d_k = " + K + "$)"
                                      : "W3's head (scaled dot, $d_k = 2$)";
  const std::string wo_text = WO.rows() != 0 ? " with W_O back to " + D + " numbers" : "";
  const std::string wo_latex = WO.rows() != 0 ? " with $W_O$ back to " + D + " numbers" : "";
  const std::string rest = "; FFN(x) = " + act + "(x W₁) W₂ with " + F + " hidden units; both norms LayerNorm with γ = 1, β = 0, ε = " +
                           eps + ". No dropout.";
  const std::string lrest = "; $\\operatorname{FFN}(x) = " + lact + "(x W_1) W_2$ with " + F +
                            " hidden units; both norms LayerNorm with $\\gamma = 1$, $\\beta = 0$, $\\varepsilon = " + eps +
                            "$. No dropout.";
  L.paragraph(post ? cell{"Post-LN (the paper, PyTorch's default): H₁ = X + MHA(X), X₁ = LN₁(H₁), H₂ = X₁ + FFN(X₁), Y = "
                          "LN₂(H₂). MHA is " + heads_text + wo_text + rest,
                          "Post-LN (the paper, PyTorch's default): $H_1 = X + \\operatorname{MHA}(X)$, $X_1 = "
                          "\\operatorname{LN}_1(H_1)$, $H_2 = X_1 + \\operatorname{FFN}(X_1)$, $Y = \\operatorname{LN}_2(H_2)$. "
                          "MHA is " + heads_latex + wo_latex + lrest}
                   : cell{"Pre-LN: A = LN₁(X), H₁ = X + MHA(A), B = LN₂(H₁), Y = H₁ + FFN(B). MHA is " + heads_text +
                              wo_text + rest,
                          "Pre-LN: $A = \\operatorname{LN}_1(X)$, $H_1 = X + \\operatorname{MHA}(A)$, $B = "
                          "\\operatorname{LN}_2(H_1)$, $Y = H_1 + \\operatorname{FFN}(B)$. MHA is " + heads_latex + wo_latex +
                              lrest});
  std::vector<cell> words;
  if (own)
    for (std::size_t t = 0; t < T; ++t)
      words.emplace_back(c.query_labels[t], attn::report::latex_label(c.query_labels[t], "$x_{" + std::to_string(t + 1) + "}$"));
  else
    words = {cell("I"), cell("drink"), cell("tea")};
  const auto add = [&](std::string id, cell title, const attn::Matrix<double>& m, bool input = false) {
    return L.table({std::move(id), std::move(title), {"word"}, words, numbered_cells(m.cols(), 1), m, input});
  };
  const auto weight = [&](std::string id, cell title, const attn::Matrix<double>& m) {
    L.table({std::move(id), std::move(title), {""}, numbered_cells(m.rows(), 1), numbered_cells(m.cols(), 1), m, true});
  };
  add("X", {"Sentence X (one word per row)", "Sentence $X$ (one word per row)"}, X, true);
  weight("W_Q", {"W_Q", "$W_Q$"}, WQ);
  weight("W_K", {"W_K", "$W_K$"}, WK);
  weight("W_V", {"W_V", "$W_V$"}, WV);
  if (WO.rows() != 0) weight("W_O", {"W_O", "$W_O$"}, WO);
  weight("W_1", {"W₁", "$W_1$"}, W1);
  weight("W_2", {"W₂", "$W_2$"}, W2);
  // each norm's input, for σ²: post LN₁(H₁), LN₂(H₂); pre LN₁(X), LN₂(H₁)
  const attn::Matrix<double>& in_1 = post ? cache.residual_1 : X;
  const attn::Matrix<double>& in_2 = post ? cache.residual_2 : cache.residual_1;
  attn::Matrix<double> stats(T, 6);
  for (std::size_t t = 0; t < T; ++t) {
    stats(t, 0) = cache.mean_1[t];
    stats(t, 1) = spread(in_1.view(), t, cache.mean_1[t]);
    stats(t, 2) = cache.rstd_1[t];
    stats(t, 3) = cache.mean_2[t];
    stats(t, 4) = spread(in_2.view(), t, cache.mean_2[t]);
    stats(t, 5) = cache.rstd_2[t];
  }
  const std::vector<cell> stat_cols{cell("μ₁", "$\\mu_1$"), cell("σ²₁", "$\\sigma_1^2$"),
                                    cell("1/√(σ²₁ + ε)", "$1/\\sqrt{\\sigma_1^2 + \\varepsilon}$"), cell("μ₂", "$\\mu_2$"),
                                    cell("σ²₂", "$\\sigma_2^2$"), cell("1/√(σ²₂ + ε)", "$1/\\sqrt{\\sigma_2^2 + \\varepsilon}$")};
  const lesson_table norm_stats{"norms",
                                {"Each norm's mean μ, variance σ² and scale 1/√(σ² + ε), per word",
                                 "Each norm's mean $\\mu$, variance $\\sigma^2$ and scale $1/\\sqrt{\\sigma^2 + \\varepsilon}$, per word"},
                                {"word"}, words, stat_cols, stats};
  // inside MHA: Q, K, V (the cache's), the map (the same attention asked for its weights), Z
  const auto attention_parts = [&](const std::string& in, const std::string& lin) {
    add("Q", {"Queries Q = " + in + " W_Q", "Queries $Q = " + lin + " W_Q$"}, cache.attention.queries);
    add("K", {"Keys K = " + in + " W_K", "Keys $K = " + lin + " W_K$"}, cache.attention.keys);
    add("V", {"Values V = " + in + " W_V", "Values $V = " + lin + " W_V$"}, cache.attention.values);
    attn::Matrix<double> map(h * T, T), out(T, d);
    attn::multi_head_cache<double> again;
    attn::multi_head_attention(post ? X : cache.normed_1, p.attention,
                               attn::multi_head_views<double>{.out = out.view(), .maps = map.view()}, again);
    std::vector<cell> map_rows;  // head i's map in rows [i·T, (i+1)·T)
    for (std::size_t i = 0; i < h; ++i)
      for (std::size_t t = 0; t < T; ++t)
        map_rows.push_back(h == 1 ? words[t]
                                  : cell("head " + std::to_string(i + 1) + ": " + words[t].text,
                                         "head " + std::to_string(i + 1) + ": " + (words[t].latex.empty() ? attn::report::latex_escape(words[t].text) : words[t].latex)));
    L.table({"map", {"Attention weights, the map: softmax(Q Kᵀ / √d_k) over each row (d_k = " + K + ")",
                     "Attention weights, the map: $\\operatorname{softmax}(Q K^{\\mathsf T} / \\sqrt{d_k})$ over each "
                     "row ($d_k = " + K + "$)"},
             {"word"}, map_rows, words, map});
    add("Z", {"The head's output Z = (the map) V", "The head's output $Z = (\\text{the map})\\,V$"}, cache.attention.heads_out);
  };
  if (post) {
    attention_parts("X", "X");
    add("attention", {"Attention output MHA(X)", "Attention output $\\operatorname{MHA}(X)$"}, cache.attention_out);
    add("H1", {"After the first residual: H₁ = X + MHA(X)", "After the first residual: $H_1 = X + \\operatorname{MHA}(X)$"},
        cache.residual_1);
    add("X1", {"After the first norm: X₁ = LN₁(H₁)", "After the first norm: $X_1 = \\operatorname{LN}_1(H_1)$"},
        cache.normed_1);
  } else {
    add("A", {"The first norm: A = LN₁(X)", "The first norm: $A = \\operatorname{LN}_1(X)$"}, cache.normed_1);
    attention_parts("A", "A");
    add("attention", {"Attention output MHA(A)", "Attention output $\\operatorname{MHA}(A)$"}, cache.attention_out);
    add("H1", {"After the first residual: H₁ = X + MHA(A)", "After the first residual: $H_1 = X + \\operatorname{MHA}(A)$"},
        cache.residual_1);
    add("B", {"The second norm: B = LN₂(H₁)", "The second norm: $B = \\operatorname{LN}_2(H_1)$"}, cache.residual_2);
  }
  const std::string in = post ? "X₁" : "B", lin = post ? "X_1" : "B";
  add("ffn_pre", {"FFN hidden layer before the activation: " + in + " W₁", "FFN hidden layer before the activation: $" + lin + " W_1$"},
      cache.ffn.pre);
  add("ffn_hidden", {"FFN hidden layer after the activation: " + act + "(" + in + " W₁)",
                     "FFN hidden layer after the activation: $" + lact + "(" + lin + " W_1)$"},
      cache.ffn.hidden);
  add("ffn_out", {"FFN output: " + act + "(" + in + " W₁) W₂", "FFN output: $" + lact + "(" + lin + " W_1) W_2$"}, cache.ffn_out);
  if (post)
    add("H2", {"After the second residual: H₂ = X₁ + FFN(X₁)", "After the second residual: $H_2 = X_1 + \\operatorname{FFN}(X_1)$"},
        cache.residual_2);
  L.table(norm_stats);
  L.main = add("Y", post ? cell{"Block output Y = LN₂(H₂)", "Block output $Y = \\operatorname{LN}_2(H_2)$"}
                         : cell{"Block output Y = H₁ + FFN(B)", "Block output $Y = H_1 + \\operatorname{FFN}(B)$"},
               Y);
  L.texts = {{"placement", post ? "post" : "pre"}, {"activation", c.ffn_activation}, {"inputs", own ? "--self" : "W9"}};
  L.numbers = {{"eps", c.eps}, {"heads", static_cast<double>(h)}, {"d_k", static_cast<double>(dk)},
               {"d_ff", static_cast<double>(dff)}};
  return L;
}

// ---------------------------------------------------------------------------------------------
// --loss-curve: a training run's log (parse.hpp reads it; render.hpp draws it)

/// The lowest loss of a run and the row where it is (the first, on a tie).
inline std::size_t lowest_row(const loss_run& run) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < run.rows.size(); ++i)
    if (run.rows[i][0] < run.rows[best][0]) best = i;
  return best;
}

/// ln V, the loss of a uniform guess over V symbols: where a language model's training starts.
inline double chance_loss(std::size_t vocabulary) { return std::log(static_cast<double>(vocabulary)); }

inline lesson_results loss_curve_lesson(const config& c) {
  lesson_results L;
  const auto& runs = c.loss_runs;
  const std::string what = runs.size() == 1 ? "the loss curve of " + runs[0].name
                                            : "the loss curves of " + std::to_string(runs.size()) + " runs";
  L.heading = both("attn-calc: " + what, "attn-calc: " + attn::report::latex_escape(what));
  std::string text = "The loss is the mean cross-entropy, in nats, of the model's guesses at each step of training, "
                     "as the log gives it.";
  std::string latex = text;
  if (c.vocabulary != 0) {
    const std::string v = std::to_string(c.vocabulary), ln = fixed(chance_loss(c.vocabulary), c.decimals);
    text += " ln V = ln " + v + " = " + ln + " is the loss of a uniform guess over the " + v +
            " symbols, where training starts; a model that learns goes below it.";
    latex += " $\\ln V = \\ln " + v + " = " + ln + "$ is the loss of a uniform guess over the " + v +
             " symbols, where training starts; a model that learns goes below it.";
  }
  L.paragraph(both(text, latex));
  for (const loss_run& run : runs) {
    const std::size_t best = lowest_row(run), n = run.rows.size();
    const std::string from = shortest(run.rows.front()[0]), to = shortest(run.rows.back()[0]);
    const std::string s = run.name + ": " + std::to_string(n) + (n == 1 ? " row" : " rows") + ", steps " +
                          shortest(run.steps.front()) + " to " + shortest(run.steps.back()) + "; the loss goes from " +
                          from + " to " + to + ", lowest " + shortest(run.rows[best][0]) + " at step " +
                          shortest(run.steps[best]) + ".";
    L.paragraph(both(s, attn::report::latex_escape(s)));
    attn::Matrix<double> values(n, run.columns.size());
    std::vector<cell> rows, cols;
    for (std::size_t i = 0; i < n; ++i) {
      rows.emplace_back(shortest(run.steps[i]));
      for (std::size_t k = 0; k < run.columns.size(); ++k) values(i, k) = run.rows[i][k];
    }
    for (const auto& name : run.columns) cols.emplace_back(name);
    const std::string title = "The log of " + run.name + " (" + run.file + "): a row per step";
    L.table({runs.size() == 1 ? std::string("log") : "log-" + std::to_string(&run - runs.data() + 1),
             cell(title), cell("step"), std::move(rows), std::move(cols), std::move(values), true});
  }
  std::string files;
  for (std::size_t r = 0; r < runs.size(); ++r)  // a file's runs are side by side: each file once
    if (r == 0 || runs[r].file != runs[r - 1].file) files += (r ? ", " : "") + runs[r].file;
  L.texts = {{"files", files}};
  if (c.vocabulary != 0)
    L.numbers = {{"vocabulary", static_cast<double>(c.vocabulary)}, {"ln_vocabulary", chance_loss(c.vocabulary)}};
  return L;
}

// ---------------------------------------------------------------------------------------------
// --no-peeking: W10

/// W10 (examples/no_peeking.cpp, worked::w10): "I drink green tea", each word one-hot among the 5
/// of the vocabulary, self-attention with Q = K = V = X under the causal mask
/// (attn::self_attention), logits = Y W_vocab with W_vocab(w, the word after w) = 3, and the loss
/// ℓ_t = −log softmax(logits_t)[next word] at every position and their mean (attn::cross_entropy).
inline lesson_results no_peeking_lesson(const config&) {
  namespace w10 = worked::w10;
  constexpr std::size_t T = 4, V = w10::vocabulary;
  lesson_results L;
  attn::Matrix<double> X(T, V), I(V, V), W_vocab(V, V), logits(T, V);
  for (std::size_t w = 0; w < V; ++w) I(w, w) = 1;
  for (std::size_t t = 0; t < T; ++t) {
    X(t, w10::inputs[t]) = 1;
    W_vocab(w10::inputs[t], w10::targets[t]) = w10::follows;
  }
  const auto r = attn::self_attention(X, I, I, I, attn::options{.causal = true});
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t w = 0; w < V; ++w)
      for (std::size_t i = 0; i < V; ++i) logits(t, w) += r.out(t, i) * W_vocab(i, w);
  std::int64_t targets[T];
  for (std::size_t t = 0; t < T; ++t) targets[t] = static_cast<std::int64_t>(w10::targets[t]);
  std::vector<double> losses(T);
  const double mean = attn::cross_entropy(logits, targets, losses);

  std::vector<cell> words, vocabulary, positions;
  for (std::size_t w = 0; w < V; ++w) vocabulary.emplace_back(w10::words[w]);
  for (std::size_t t = 0; t < T; ++t) {
    words.emplace_back(w10::words[w10::inputs[t]]);
    positions.emplace_back(std::to_string(t + 1) + ": " + w10::words[w10::inputs[t]] + " \u2192 " +
                               w10::words[w10::targets[t]],
                           std::to_string(t + 1) + ": " + w10::words[w10::inputs[t]] + " $\\to$ " +
                               w10::words[w10::targets[t]]);
  }
  L.heading = both("attn-calc: no peeking (W10): \"I drink green tea\", every next word at once",
                   "attn-calc: no peeking (W10): ``I drink green tea'', every next word at once");
  L.paragraph(both(
      "Each word is its own direction among the 5 of the vocabulary (I, drink, green, tea, .); self-attention with "
      "Q = K = V = X and the scaled dot (1/√5) under the causal mask: position t sees words 1..t only, so it cannot "
      "read the word it must guess.",
      "Each word is its own direction among the 5 of the vocabulary (I, drink, green, tea, .); self-attention with "
      "$Q = K = V = X$ and the scaled dot ($1/\\sqrt{5}$) under the causal mask: position $t$ sees words $1..t$ "
      "only, so it cannot read the word it must guess."));
  L.table({"map", cell("The causal map A (row t sees words 1..t)", "The causal map $A$ (row $t$ sees words $1..t$)"),
                    cell("word"), words, words, copy_of(r.maps), false});
  L.paragraph(both("The logits: logits = Y W_vocab, where W_vocab gives 3 to the word that follows each word of the "
                   "sentence.",
                   "The logits: $\\mathrm{logits} = Y W_{\\mathrm{vocab}}$, where $W_{\\mathrm{vocab}}$ gives 3 to the "
                   "word that follows each word of the sentence."));
  L.table({"logits", cell("The logits, a row per position, a column per word of the vocabulary"), cell("position"),
           words, vocabulary, std::move(logits), false});
  attn::Matrix<double> guess(T, 2);
  for (std::size_t t = 0; t < T; ++t) {
    guess(t, 0) = std::exp(-losses[t]);
    guess(t, 1) = losses[t];
  }
  L.paragraph(both("One forward pass gives every guess at once: the loss at position t is −log p(next word) = "
                   "−log softmax(logits_t)[next word] (attn::cross_entropy).",
                   "One forward pass gives every guess at once: the loss at position $t$ is "
                   "$\\ell_t = -\\log p(\\text{next word}) = -\\log \\operatorname{softmax}(\\mathrm{logits}_t)"
                   "[\\text{next word}]$."));
  L.main = L.table({"losses", cell("The loss at every position: p(next word) and −log p", "The loss at every position: "
                                                                                   "$p(\\text{next word})$ and $-\\log p$"),
           cell("position: word → must guess", "position: word $\\to$ must guess"), positions,
           {cell("p(next word)", "$p(\\text{next word})$"), cell("loss")}, std::move(guess), false});
  attn::Matrix<double> mean_table(1, 1);
  mean_table(0, 0) = mean;
  L.table({"mean", cell("The mean loss, what training lowers"), cell(""), {cell("mean")}, {cell("loss")},
           std::move(mean_table), false});
  const std::string ln5 = fixed(std::log(5.0), 3);
  L.paragraph(both("A blind guess among the 5 words costs ln 5 = " + ln5 + " at every position; the later positions, "
                   "which see more words, spread their attention and pay more.",
                   "A blind guess among the 5 words costs $\\ln 5 = " + ln5 + "$ at every position; the later "
                   "positions, which see more words, spread their attention and pay more."));
  return L;
}

}  // namespace detail

/// The lesson c asks for (c.lesson is not none). Throws usage_error when a number is not finite
/// (a constant row normed with ε = 0, inputs too large for a double), as the map does.
[[nodiscard]] inline lesson_results compute_lesson(const config& c) {
  lesson_results L;
  switch (c.lesson) {
    case lesson_kind::pe: L = detail::pe_lesson(c); break;
    case lesson_kind::rope: L = detail::rope_lesson(c); break;
    case lesson_kind::norm: L = detail::norm_lesson(c); break;
    case lesson_kind::activations: L = detail::activation_lesson(c); break;
    case lesson_kind::block: L = detail::block_lesson(c); break;
    case lesson_kind::loss_curve: L = detail::loss_curve_lesson(c); break;
    case lesson_kind::no_peeking: L = detail::no_peeking_lesson(c); break;
    case lesson_kind::none: break;
  }
  for (const auto& t : L.tables)
    for (std::size_t i = 0; i < t.values.rows(); ++i)
      for (std::size_t k = 0; k < t.values.cols(); ++k)
        if (!std::isfinite(t.values(i, k)))
          throw usage_error("the numbers of this lesson are not finite (the inputs are too large for a double)");
  return L;
}

}  // namespace attn_calc
