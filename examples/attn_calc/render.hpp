#pragma once
/// \file examples/attn_calc/render.hpp
/// attn-calc's outputs, built from the report headers (attn/report/...):
///   text, md, latex  the same document: inputs, scores, the map (weights, with row sums),
///                    contexts, and with --jacobian every Jacobian and its check;
///   json             inputs, options, per query the numbers at full precision and as printed,
///                    the Jacobians when asked, and a `checks` block;
///   csv, csv-long    the map: wide (a row per query) or long (a row per cell);
///   svg              the map as a heatmap.
/// --self and --dot-vs-scaled print every map: its scores and weights in the documents (--self
/// also X, Q, K, V, Z and Y), a map per entry of JSON's `maps` and a first column `map` in CSV,
/// and one SVG grid of the maps on one colour scale. A masked weight (every kind of --mask) is
/// one marker per format (detail::masked_text): — in text and Markdown, --- in LaTeX, an
/// empty CSV field, null among JSON's rounded weights, a hatched SVG cell.
/// Every number printed is rounded from the unrounded result (row sums too). A lesson
/// (lessons.hpp) is its heading, paragraphs and tables in text, md and latex; every table in
/// JSON; its main table in csv and every table a row per number in csv-long; --pe's heatmap on
/// the diverging scale and --rope's arrows in svg (render_lesson).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "attn/report.hpp"
#include "calc.hpp"
#include "parse.hpp"

namespace attn_calc {

namespace report = attn::report;

/// One piece of a text, Markdown or LaTeX document.
struct block {
  enum class kind { heading, paragraph, table };
  kind type = kind::paragraph;
  report::cell text;  ///< heading or paragraph (plain UTF-8 and LaTeX)
  report::table table;
};

namespace detail {

inline std::string num_text(double x) { return report::shortest(x); }

/// "(0, 0.5, 2)"
inline std::string tuple_text(std::span<const double> v) {
  std::string s = "(";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + report::shortest(v[i]);
  return s + ")";
}

inline std::string index_label(std::string_view stem, std::size_t i) {
  return std::string(stem) + "_{" + std::to_string(i + 1) + "}";
}

/// "$q_{2}$": the fallback pdfLaTeX shows for a label it cannot. Built by appending: "$" + a
/// std::string draws g++'s false -Wrestrict at -O3 (docs/errors.md).
inline std::string index_fallback(std::string_view stem, std::size_t i) {
  std::string s = "$";
  s += index_label(stem, i);
  s += '$';
  return s;
}

/// Label cells for queries or notes: the label, and for LaTeX the label with an
/// index fallback ($q_{1}$, $h_{2}$) for pdfLaTeX when it is not ASCII.
inline std::vector<report::cell> label_cells(const std::vector<std::string>& labels, std::string_view stem,
                                             const std::vector<char>& masked = {}) {
  std::vector<report::cell> out;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const bool m = !masked.empty() && masked[i] == 0;
    const std::string suffix = m ? " (masked)" : "";
    out.emplace_back(labels[i] + suffix,
                     report::latex_label(labels[i], index_fallback(stem, i)) + suffix);
  }
  return out;
}

inline std::vector<report::cell> component_cells(std::size_t n, std::string_view stem = {}) {
  std::vector<report::cell> out;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string k = std::to_string(i + 1);
    if (stem.empty())
      out.emplace_back(k);
    else
      out.emplace_back(std::string(stem) + k, "$" + std::string(stem) + "_{" + k + "}$");
  }
  return out;
}

inline report::table with_title(report::table t, report::cell title) {
  t.title = std::move(title);
  return t;
}

inline block heading(report::cell c) { return {block::kind::heading, std::move(c), {}}; }
inline block paragraph(report::cell c) { return {block::kind::paragraph, std::move(c), {}}; }
inline block table_block(report::table t) { return {block::kind::table, {}, std::move(t)}; }

/// "√16 = 4", "√2 ≈ 1.414" (text; LaTeX with \\sqrt{} and \\approx).
inline report::cell root_text(std::size_t d) {
  const double root = std::sqrt(static_cast<double>(d));
  const std::string n = std::to_string(d);
  if (root == std::floor(root)) {
    const std::string r = std::to_string(static_cast<std::size_t>(root));
    return {"√" + n + " = " + r, "\\sqrt{" + n + "} = " + r};
  }
  const std::string r = report::fixed(root, 3);
  return {"√" + n + " ≈ " + r, "\\sqrt{" + n + "} \\approx " + r};
}

/// "< 1e-10" as text and LaTeX: the smallest power of ten not below x (x = 0: "= 0").
inline report::cell bound(double x) {
  if (!std::isfinite(x)) return {"is not finite (the inputs are too large)", "is not finite"};
  if (x == 0) return {"= 0", "$= 0$"};
  const int e = static_cast<int>(std::ceil(std::log10(x)));
  const std::string p = std::to_string(e);
  return {"< 1e" + p, "$< 10^{" + p + "}$"};
}

inline report::cell score_formula(const config& c) {
  // the notes are h_j, or the keys k_j when the values are apart
  const std::string h = c.keys_and_values() ? "k" : "h";
  switch (c.score) {
    case score_kind::scaled_dot: {
      const std::string d = std::to_string(c.notes.cols);
      return {"scaled_dot, s_tj = q_t · " + h + "_j / √d with d = " + d,
              "scaled\\_dot, $s_{tj} = \\mathbf q_t \\cdot \\mathbf " + h + "_j / \\sqrt d$ with $d = " + d + "$"};
    }
    case score_kind::general:
      return {"general, s_tj = q_tᵀ W " + h + "_j", "general, $s_{tj} = \\mathbf q_t^{\\mathsf T} W \\mathbf " + h + "_j$"};
    case score_kind::additive:
      return {"additive, s_tj = vᵀ tanh(W1 " + h + "_j + W2 q_t)",
              "additive, $s_{tj} = \\mathbf v^{\\mathsf T} \\tanh(W_1 \\mathbf " + h + "_j + W_2 \\mathbf q_t)$"};
    case score_kind::dot: break;
  }
  return {"dot, s_tj = q_t · " + h + "_j", "dot, $s_{tj} = \\mathbf q_t \\cdot \\mathbf " + h + "_j$"};
}

/// The stem of a note's LaTeX fallback: x_j for --self's words, h_j for notes.
inline const char* note_stem(const config& c) { return c.self_attention ? "x" : "h"; }

/// Whether any mask is given (--mask: a row, a matrix or causal).
inline bool any_mask(const config& c) { return !c.mask.empty() || c.per_row_mask(); }

/// The marker of a masked cell (its weight is exactly 0, so that it reads apart from a weight
/// that rounds to 0): — in text and Markdown, --- (an em dash) in LaTeX, an empty field in CSV,
/// null among JSON's rounded numbers; SVG hatches the cell ("masked" in its tooltip and legend).
inline constexpr const char* masked_text = "—";
inline constexpr const char* masked_latex = "---";

/// What the masks do, as sentences (each with a leading space; none without a mask).
inline report::cell mask_sentences(const config& c) {
  std::string text, latex;
  const std::string note = c.note_noun(), query = c.self_attention ? "word" : "query";
  if (!c.mask.empty()) {
    std::string names, lnames;
    for (std::size_t j = 0; j < c.mask.size(); ++j)
      if (c.mask[j] == 0) {
        names += (names.empty() ? "" : ", ") + c.note_labels[j];
        lnames += (lnames.empty() ? "" : ", ") +
                  report::latex_label(c.note_labels[j], index_fallback(note_stem(c), j));
      }
    if (names.empty()) {
      text += " The mask keeps every " + note + ".";
      latex += " The mask keeps every " + note + ".";
    } else {
      text += " Masked out (weight 0): " + names + ".";
      latex += " Masked out (weight 0): " + lnames + ".";
    }
  }
  if (c.causal) {
    const std::size_t T = c.queries.rows, n = c.notes.rows;
    std::string last = "t", llast = "$1 \\dots t$";
    if (n != T) {  // decoding with a cache: the queries are the last T of n positions
      const std::string k = std::to_string(n > T ? n - T : T - n);
      const std::string sizes = ", n = " + std::to_string(n) + " " + note + "s, T = " + std::to_string(T) + " " +
                                (T == 1 ? query : c.self_attention ? "words" : "queries") + ")";
      last = "t " + std::string(n > T ? "+ " : "− ") + k + " (1 … t + n − T" + sizes;
      llast = "$1 \\dots t " + std::string(n > T ? "+ " : "- ") + k + "$ ($1 \\dots t + n - T$" + sizes;
    }
    text += " Causal mask: " + query + " t sees " + note + "s 1 … " + last + ".";
    latex += " Causal mask: " + query + " $t$ sees " + note + "s " + llast + ".";
  }
  if (!c.row_mask.empty()) {
    const std::string m = " A mask matrix gives each " + query + " its own " + note + "s (a 0 masks one).";
    text += m;
    latex += m;
  }
  if (any_mask(c)) {
    text += " A masked entry is shown as —.";
    latex += " A masked entry is shown as ---.";
  }
  return {text, latex};
}

inline report::cell settings_paragraph(const config& c) {
  const report::cell f = score_formula(c);
  const std::string beta = report::shortest(c.beta);
  const report::cell masks = mask_sentences(c);
  return {"Score: " + f.text + ". Sharpness β = " + beta + "." + masks.text,
          "Score: " + f.latex + ". Sharpness $\\beta = " + beta + "$." + masks.latex};
}

inline std::string ql(const config& c, std::size_t t) {  // a query's label for LaTeX
  return report::latex_label(c.query_labels[t], index_fallback("q", t));
}
inline std::string nl(const config& c, std::size_t j) {  // a note's label for LaTeX
  return report::latex_label(c.note_labels[j], index_fallback("h", j));
}

}  // namespace detail

namespace detail {

/// `t` with its LaTeX \label: the config's prefix, ':' and `name` (attn:map, attn:scores, ...).
inline report::table labelled(report::table t, const config& c, const std::string& name) {
  t.label = c.latex_label + ":" + name;
  return t;
}

/// The map: the weights with each row's sum, under --title or a title that says what the rows
/// sum to.
/// `t` (a row per query, a column per note after the label) with every entry a mask forbids
/// shown as — (masked_text; its weight is 0).
inline report::table dash_masked(report::table t, const config& c) {
  if (!any_mask(c)) return t;
  for (std::size_t q = 0; q < c.queries.rows; ++q)
    for (std::size_t j = 0; j < c.notes.rows; ++j)
      if (!c.allowed(q, j)) t.rows[q][j + 1] = report::cell(masked_text, masked_latex);
  return t;
}

/// A map's table: the weights with each row's sum; a masked weight shown as — (it is 0).
inline report::table weights_table(const config& c, const attn::Matrix<double>& weights,
                                   const std::vector<double>& row_sums, const std::vector<report::cell>& queries,
                                   const std::vector<report::cell>& notes_masked, report::cell title) {
  auto map = report::matrix_table(weights, queries, notes_masked, c.decimals, {}, std::move(title));
  map.header.emplace_back("sum", "$\\sum_j$");
  for (std::size_t t = 0; t < weights.rows(); ++t) map.rows[t].push_back(report::number_cell(row_sums[t], c.decimals));
  return dash_masked(std::move(map), c);
}

/// What a map's rows sum to, for its title: "each row sums to 1", and with masks of their own
/// per query "…; — masked".
inline report::cell sums_text(const config& c, const attn::Matrix<double>& weights) {
  if (!c.per_row_mask()) {
    bool none_kept = !c.mask.empty();
    for (const char m : c.mask) none_kept = none_kept && m == 0;
    const std::string s = none_kept ? "every " + std::string(c.note_noun()) + " is masked out, so every weight is 0"
                                    : "each row sums to 1";
    return {s, s};
  }
  const std::string sums = report::row_sums_text(weights);
  return {sums + "; — masked", sums + "; --- masked"};
}

/// The map: the weights with each row's sum, under --title or a title that says what the rows
/// sum to.
inline report::table map_table(const config& c, const results& r, const std::vector<report::cell>& queries,
                               const std::vector<report::cell>& notes_masked) {
  const report::cell sums = sums_text(c, r.weights);
  report::cell title{"Weights α_tj: the alignment map (" + sums.text + ")",
                     "Weights $\\alpha_{tj}$: the alignment map (" + sums.latex + ")"};
  if (c.title) title = report::cell(*c.title);
  return labelled(weights_table(c, r.weights, r.row_sums, queries, notes_masked, std::move(title)), c, "map");
}

/// --steps: e^(β s_tj) (or shifted, see results::exps) and their sum, one row per query.
inline report::table exp_table(const config& c, const results& r, const std::vector<report::cell>& queries,
                               const std::vector<report::cell>& notes_masked) {
  const bool beta = c.beta != 1;
  const std::string b = beta ? "β " : "", lb = beta ? "\\beta " : "";
  report::cell title{"Softmax by hand: e^(" + b + "s_tj) and their sum; α_tj = e^(" + b + "s_tj) / sum",
                     "Softmax by hand: $e^{" + lb + "s_{tj}}$ and their sum; $\\alpha_{tj} = e^{" + lb +
                         "s_{tj}} / \\text{sum}$"};
  if (r.exp_shifted)
    title = {"Softmax by hand: e^(β (s_tj − s_tp)), with p the note of the row's largest β s_tp (e^(β s_tj) "
             "itself would overflow or vanish in a double), and their sum; α_tj = e^(β (s_tj − s_tp)) / sum",
             "Softmax by hand: $e^{\\beta (s_{tj} - s_{tp})}$, with $p$ the note of the row's largest $\\beta "
             "s_{tp}$ ($e^{\\beta s_{tj}}$ itself would overflow or vanish in a double), and their sum; "
             "$\\alpha_{tj} = e^{\\beta (s_{tj} - s_{tp})} / \\text{sum}$"};
  auto t = report::matrix_table(r.exps, queries, notes_masked, c.decimals, {}, title);
  t.header.emplace_back("sum", "sum");
  for (std::size_t q = 0; q < c.queries.rows; ++q) t.rows[q].push_back(report::number_cell(r.exp_sums[q], c.decimals));
  return labelled(dash_masked(std::move(t), c), c, "exp");
}

/// --steps, additive: W1 h_j + W2 q_t and its tanh for query t, one row per note.
inline report::table hidden_table(const config& c, const results& r, std::size_t t,
                                  const std::vector<report::cell>& notes) {
  const std::size_t k = c.v.size();
  std::vector<report::cell> cols;
  for (std::size_t i = 1; i <= k; ++i)
    cols.emplace_back(std::string("u") + std::to_string(i), std::string("$u_{") + std::to_string(i) + "}$");
  for (std::size_t i = 1; i <= k; ++i)
    cols.emplace_back(std::string("tanh u") + std::to_string(i),
                      std::string("$\\tanh u_{") + std::to_string(i) + "}$");
  const std::string q = c.query_labels[t];
  return labelled(report::matrix_table(r.hidden[t], notes, cols, c.decimals, {},
                                       {"Additive score by hand for query " + q + ": u = W1 h_j + W2 q and tanh u; "
                                        "s_j = v · tanh u",
                                        "Additive score by hand for query " + ql(c, t) +
                                            ": $\\mathbf u = W_1 \\mathbf h_j + W_2 \\mathbf q$ and $\\tanh "
                                            "\\mathbf u$; $s_j = \\mathbf v \\cdot \\tanh \\mathbf u$"}),
                  c, "hidden-" + std::to_string(t + 1));
}

}  // namespace detail

namespace detail {

/// The tables of the notes (or the keys and the values) and of the queries, as given.
inline void add_input_tables(const config& c, std::vector<block>& doc) {
  using report::matrix_table;
  const auto queries = label_cells(c.query_labels, "q");
  const auto notes = label_cells(c.note_labels, "h");
  auto table = [&](report::table t, const std::string& name) {
    doc.push_back(table_block(labelled(std::move(t), c, name)));
  };
  if (c.keys_and_values()) {
    table(matrix_table(c.notes.view(), notes, component_cells(c.notes.cols), -1, {},
                       {"Keys k_j (one row per note; the scores look at them)", "Keys $\\mathbf k_j$"}),
          "keys");
    table(matrix_table(c.values.view(), notes, component_cells(c.values.cols), -1, {},
                       {"Values v_j (one row per note; the contexts blend them)", "Values $\\mathbf v_j$"}),
          "values");
  } else {
    table(matrix_table(c.notes.view(), notes, component_cells(c.notes.cols), -1, {},
                       {"Notes h_j (one row per note)", "Notes $\\mathbf h_j$"}),
          "notes");
  }
  table(matrix_table(c.queries.view(), queries, component_cells(c.queries.cols), -1, {},
                     {"Queries q_t (one row per query)", "Queries $\\mathbf q_t$"}),
        "queries");
}

/// A map's name for a LaTeX label: "head 1" → "head1", "scaled_dot, head 2" → "scaled-dot-head2".
inline std::string slug(std::string_view name) {
  std::string out;
  for (const char ch : name) {
    if (ch == ' ') continue;
    out += ch == '_' || ch == ',' ? '-' : ch;
  }
  return out;
}

/// The subscript of head i's matrices: "_1" (and LaTeX "_{1}") with many heads, "" with one.
inline report::cell head_sub(const config& c, std::size_t i) {
  if (c.heads == 1) return {"", ""};
  return {"_" + std::to_string(i + 1), "_{" + std::to_string(i + 1) + "}"};
}

/// A map's name for people, in titles: --dot-vs-scaled's "dot" is "dot product" and its
/// "scaled_dot" "scaled by 1/√d" (with d's value); a head's name as it is. JSON and CSV keep
/// map_panel::name ("dot", "scaled_dot"), which programs match.
inline report::cell display_name(const config& c, const map_panel& p, std::size_t d) {
  if (!c.dot_vs_scaled) return {p.name, report::latex_escape(p.name)};
  const std::string code = p.scaled ? "scaled_dot" : "dot", rest = p.name.substr(code.size());
  if (!p.scaled) return {"dot product" + rest, "dot product" + report::latex_escape(rest)};
  const std::string k = std::to_string(d);
  return {"scaled by 1/√" + k + rest, "scaled by $1/\\sqrt{" + k + "}$" + report::latex_escape(rest)};
}

/// d of --dot-vs-scaled's 1/√d: a head's d_k with --self, else a key's numbers.
inline std::size_t scaled_d(const config& c, const results& r) {
  return c.self_attention ? r.Q.cols() / c.heads : c.notes.cols;
}

/// The scores' and the weights' tables of map p (head i of --self, or one of --dot-vs-scaled's).
inline void add_map_tables(const config& c, const map_panel& p, std::size_t i, std::vector<block>& doc,
                           bool scores_too, std::size_t d) {
  const char* stem = note_stem(c);
  const auto queries = label_cells(c.query_labels, c.self_attention ? "x" : "q");
  const auto notes_masked = label_cells(c.note_labels, stem, c.mask);
  const report::cell shown_name = display_name(c, p, d);
  const std::string name = shown_name.text.empty() ? "" : ", " + shown_name.text;
  const std::string lname = shown_name.text.empty() ? "" : ", " + shown_name.latex;
  // the \label names the map by its code name and head number, never by --head-labels' text
  // (which may hold what a \label cannot: "s(" threw from to_latex)
  std::string code = c.dot_vs_scaled ? (p.scaled ? "scaled_dot" : "dot") : "";
  if (c.heads > 1 || !c.head_labels.empty()) code += (code.empty() ? "head " : ", head ") + std::to_string(i + 1);
  const std::string id = code.empty() ? "" : "-" + slug(code);
  const report::cell sub = head_sub(c, i), sums = sums_text(c, p.weights);
  const std::string b = c.beta != 1 ? "β " : "", lb = c.beta != 1 ? "\\beta " : "";
  report::cell scores, weights;
  if (c.self_attention) {
    scores = {"Scores" + name + ": S" + sub.text + " = Q" + sub.text + " K" + sub.text + "ᵀ" + (p.scaled ? " / √d_k" : "") +
                  " (before β and the masks)",
              "Scores" + lname + ": $S" + sub.latex + " = Q" + sub.latex + " K" + sub.latex + "^{\\mathsf T}" +
                  (p.scaled ? " / \\sqrt{d_k}" : "") + "$ (before $\\beta$ and the masks)"};
    weights = {"Weights" + name + ": A" + sub.text + " = softmax(" + b + "S" + sub.text + "), the map (" + sums.text + ")",
               "Weights" + lname + ": $A" + sub.latex + " = \\operatorname{softmax}(" + lb + "S" + sub.latex +
                   ")$, the map (" + sums.latex + ")"};
  } else {
    const std::string h = c.keys_and_values() ? "k" : "h";
    scores = {"Scores" + name + ": s_tj = q_t · " + h + "_j" + (p.scaled ? " / √d" : ""),
              "Scores" + lname + ": $s_{tj} = \\mathbf q_t \\cdot \\mathbf " + h + "_j" +
                  (p.scaled ? " / \\sqrt d" : "") + "$"};
    weights = {"Weights" + name + ": α_tj, the map (" + sums.text + ")",
               "Weights" + lname + ": $\\alpha_{tj}$, the map (" + sums.latex + ")"};
  }
  if (c.title) weights = report::cell(*c.title + (shown_name.text.empty() ? "" : ": " + shown_name.text));
  if (scores_too)
    doc.push_back(table_block(labelled(report::matrix_table(p.scores, queries, notes_masked, c.decimals, {}, scores),
                                       c, "scores" + id)));
  doc.push_back(table_block(labelled(weights_table(c, p.weights, p.row_sums, queries, notes_masked, weights), c,
                                     "map" + id)));
}

/// "W_Q, W_K and W_V" of the projections not given (the identity), or "".
inline std::string identity_names(const config& c) {
  std::vector<std::string> names;
  for (const auto& [m, name] : {std::pair<const matrix&, const char*>{c.WQ, "W_Q"}, {c.WK, "W_K"}, {c.WV, "W_V"}})
    if (m.empty()) names.emplace_back(name);
  std::string out;
  for (std::size_t k = 0; k < names.size(); ++k) out += (k == 0 ? "" : k + 1 == names.size() ? " and " : ", ") + names[k];
  return out;
}

/// The biases in Q's, K's and V's formulas: " + b_Q|| + b_V" (fields split by '|'; empty
/// where there is none), text and LaTeX alike.
inline report::cell bias_terms(const config& c) {
  const std::string t = std::string(c.bQ.empty() ? "" : " + b_Q") + "|" + (c.bK.empty() ? "" : " + b_K") + "|" +
                        (c.bV.empty() ? "" : " + b_V");
  return {t, t};
}

/// Field k (from 0) of `s` split at '|'.
inline std::string field(const std::string& s, std::size_t k) {
  std::size_t from = 0;
  for (std::size_t i = 0; i < k; ++i) from = s.find('|', from) + 1;
  return s.substr(from, s.find('|', from) - from);
}

/// --self's heading and paragraph: the formulas with their sizes, β, the masks.
inline void add_self_intro(const config& c, const results& r, std::vector<block>& doc) {
  const std::size_t T = c.queries.rows, n = c.notes.rows, h = c.heads, dk = r.Q.cols() / h, dv = r.V.cols() / h;
  const std::string what = (c.cross ? "attn-calc: cross-attention, " + std::to_string(T) +
                                          (T == 1 ? " query" : " queries") + " reading " + std::to_string(n) +
                                          (n == 1 ? " word" : " words")
                                    : "attn-calc: self-attention of " + std::to_string(T) + (T == 1 ? " word" : " words")) +
                           (h == 1 ? "" : ", " + std::to_string(h) + " heads") +
                           (c.dot_vs_scaled ? ", dot against scaled_dot" : "");
  doc.push_back(heading({what, report::latex_escape(what)}));
  const std::string ids = identity_names(c);
  const std::string k = std::to_string(dk), v = std::to_string(dv);
  const report::cell b = bias_terms(c);
  std::string text = (c.cross ? "Each query reads the sentence: Q = X_q W_Q" + b.text.substr(0, b.text.find('|')) +
                                    ", K = X_kv W_K" + field(b.text, 1) + ", V = X_kv W_V" + field(b.text, 2)
                              : "Every word asks every word: Q = X W_Q" + b.text.substr(0, b.text.find('|')) +
                                    ", K = X W_K" + field(b.text, 1) + ", V = X W_V" + field(b.text, 2)) +
                     (ids.empty() ? "" : " (" + ids + ": the identity, not given)") + ".";
  std::string latex = (c.cross ? "Each query reads the sentence: $Q = X_q W_Q" + b.latex.substr(0, b.latex.find('|')) +
                                     "$, $K = X_{kv} W_K" + field(b.latex, 1) + "$, $V = X_{kv} W_V" + field(b.latex, 2) + "$"
                               : "Every word asks every word: $Q = X W_Q" + b.latex.substr(0, b.latex.find('|')) +
                                     "$, $K = X W_K" + field(b.latex, 1) + "$, $V = X W_V" + field(b.latex, 2) + "$") +
                      (ids.empty() ? "" : " ($" + ids + "$: the identity, not given)") + ".";
  if (h > 1) {  // "columns (i − 1)·2 + 1 … i·2", or "column i" for heads of one column
    const auto columns = [](const std::string& w) -> report::cell {
      if (w == "1") return {"column i", "column $i$"};
      return {"columns (i − 1)·" + w + " + 1 … i·" + w, "columns $(i - 1) \\cdot " + w + " + 1 \\dots i \\cdot " + w + "$"};
    };
    text += " " + std::to_string(h) + " heads: head i takes " + columns(k).text + " of Q and K (d_k = " + k + ") and " +
            columns(v).text + " of V (d_v = " + v + ").";
    latex += " " + std::to_string(h) + " heads: head $i$ takes " + columns(k).latex + " of $Q$ and $K$ ($d_k = " + k +
             "$) and " + columns(v).latex + " of $V$ ($d_v = " + v + "$).";
  }
  const report::cell root = root_text(dk);
  const std::string scale_text = "S = Q Kᵀ / √d_k with d_k = " + k + " (" + root.text + ")";
  const std::string scale_latex = "$S = Q K^{\\mathsf T} / \\sqrt{d_k}$ with $d_k = " + k + "$ ($" + root.latex + "$)";
  if (c.dot_vs_scaled) {
    text += " The maps with dot, S = Q Kᵀ, and with scaled_dot, " + scale_text + "; A = softmax(β S) over each row.";
    latex += " The maps with dot, $S = Q K^{\\mathsf T}$, and with scaled\\_dot, " + scale_latex +
             "; $A = \\operatorname{softmax}(\\beta S)$ over each row.";
  } else {
    const std::string bo = c.bO.empty() ? "" : " + b_O", lbo = c.bO.empty() ? "" : " + b_O";
    const std::string y = c.WO.empty() ? (h == 1 ? "Y = A V" : "Y = [A_1 V_1 … A_h V_h]") : "Y = [A_1 V_1 … A_h V_h] W_O" + bo;
    const std::string ly = c.WO.empty() ? (h == 1 ? "$Y = A V$" : "$Y = [A_1 V_1 \\dots A_h V_h]$")
                                        : "$Y = [A_1 V_1 \\dots A_h V_h] W_O" + lbo + "$";
    text += (c.score == score_kind::scaled_dot ? " " + scale_text : std::string(" S = Q Kᵀ (dot: not divided by √d_k)")) +
            ", A = softmax(β S) over each row, " + y + ".";
    latex += (c.score == score_kind::scaled_dot ? " " + scale_latex
                                                : std::string(" $S = Q K^{\\mathsf T}$ (dot: not divided by $\\sqrt{d_k}$)")) +
             ", $A = \\operatorname{softmax}(\\beta S)$ over each row, " + ly + ".";
  }
  const std::string beta = report::shortest(c.beta);
  const report::cell masks = mask_sentences(c);
  doc.push_back(paragraph({text + " Sharpness β = " + beta + "." + masks.text,
                           latex + " Sharpness $\\beta = " + beta + "$." + masks.latex}));
}

/// --self's document: X, the projections given, Q, K, V, every map's scores and weights, Z, Y.
inline void add_self_tables(const config& c, const results& r, std::vector<block>& doc) {
  using report::matrix_table;
  const auto words = label_cells(c.query_labels, c.cross ? "q" : "x");
  const auto read = label_cells(c.note_labels, "x");  // the rows of K and V (--self: the same words)
  auto table = [&](const auto& m, const std::vector<report::cell>& rows, report::cell title, const std::string& name,
                   int decimals) {
    doc.push_back(table_block(labelled(matrix_table(m, rows, component_cells(m.cols()), decimals, {}, std::move(title)),
                                       c, name)));
  };
  if (c.cross) {
    table(c.queries.view(), words, {"Queries X_q (one per row)", "Queries $X_q$ (one per row)"}, "Xq", -1);
    table(c.notes.view(), read, {"Sentence read X_kv (one word per row)", "Sentence read $X_{kv}$ (one word per row)"},
          "Xkv", -1);
  } else {
    table(c.queries.view(), words, {"Sentence X (one word per row)", "Sentence $X$ (one word per row)"}, "X", -1);
  }
  for (const auto& [m, name, option] : {std::tuple<const matrix&, const char*, const char*>{c.WQ, "W_Q", "WQ"},
                                        {c.WK, "W_K", "WK"}, {c.WV, "W_V", "WV"}, {c.WO, "W_O", "WO"}})
    if (!m.empty())
      table(m.view(), component_cells(m.rows), {name, std::string("$") + name + "$"}, option, -1);
  for (const auto& [b, name, option] : {std::tuple<const std::vector<double>&, const char*, const char*>{c.bQ, "b_Q", "bQ"},
                                        {c.bK, "b_K", "bK"}, {c.bV, "b_V", "bV"}, {c.bO, "b_O", "bO"}})
    if (!b.empty())
      table(attn::MatrixView<const double>(b.data(), 1, b.size()), {report::cell(name, std::string("$") + name + "$")},
            {std::string("Bias ") + name, std::string("Bias $") + name + "$"}, option, -1);
  const report::cell bt = bias_terms(c);
  const std::string xkv = c.cross ? "X_kv" : "X", lxkv = c.cross ? "X_{kv}" : "X";
  table(r.Q, words, {"Queries Q = " + std::string(c.cross ? "X_q" : "X") + " W_Q" + field(bt.text, 0),
                     "Queries $Q = " + std::string(c.cross ? "X_q" : "X") + " W_Q" + field(bt.latex, 0) + "$"}, "Q",
        c.decimals);
  table(r.K, read, {"Keys K = " + xkv + " W_K" + field(bt.text, 1), "Keys $K = " + lxkv + " W_K" + field(bt.latex, 1) + "$"},
        "K", c.decimals);
  table(r.V, read, {"Values V = " + xkv + " W_V" + field(bt.text, 2),
                    "Values $V = " + lxkv + " W_V" + field(bt.latex, 2) + "$"},
        "V", c.decimals);
  for (std::size_t p = 0; p < r.maps.size(); ++p) add_map_tables(c, r.maps[p], p % c.heads, doc, true, scaled_d(c, r));
  if (c.dot_vs_scaled) return;
  const bool concat = c.heads > 1 || !c.WO.empty();
  if (concat && !c.WO.empty())
    table(r.Z, words,
          {c.heads == 1 ? "The head's output Z = A V" : "The heads' outputs side by side, Z = [A_1 V_1 … A_h V_h]",
           c.heads == 1 ? "The head's output $Z = A V$" : "The heads' outputs side by side, $Z = [A_1 V_1 \\dots A_h V_h]$"},
          "Z", c.decimals);
  const std::string bo = c.bO.empty() ? "" : " + b_O";
  const report::cell y = !c.WO.empty() ? report::cell{"Output Y = Z W_O" + bo, "Output $Y = Z W_O" + bo + "$"}
                         : concat      ? report::cell{"Output Y = [A_1 V_1 … A_h V_h] (the heads' outputs side by side; no W_O)",
                                                      "Output $Y = [A_1 V_1 \\dots A_h V_h]$ (the heads' outputs side by side; no $W_O$)"}
                                       : report::cell{"Output Y = A V", "Output $Y = A V$"};
  table(r.Y, words, y, "Y", c.decimals);
}

/// --dot-vs-scaled without --self: the heading, the two scores and the inputs.
inline void add_dot_vs_scaled_intro(const config& c, std::vector<block>& doc) {
  const std::size_t T = c.queries.rows, n = c.notes.rows;
  const std::string what = "attn-calc: dot against scaled_dot, " + std::to_string(T) + (T == 1 ? " query" : " queries") +
                           " looking at " + std::to_string(n) + (n == 1 ? " note" : " notes");
  doc.push_back(heading({what, report::latex_escape(what)}));
  const std::string h = c.keys_and_values() ? "k" : "h", d = std::to_string(c.notes.cols);
  const report::cell root = root_text(c.notes.cols);
  const std::string beta = report::shortest(c.beta);
  const report::cell masks = mask_sentences(c);
  doc.push_back(paragraph(
      {"The same queries and " + std::string(c.keys_and_values() ? "keys" : "notes") + " scored twice: dot, s_tj = q_t · " +
           h + "_j, and scaled_dot, s_tj = q_t · " + h + "_j / √d with d = " + d + " (" + root.text + "). Sharpness β = " + beta + "." + masks.text,
       "The same queries and " + std::string(c.keys_and_values() ? "keys" : "notes") +
           " scored twice: dot, $s_{tj} = \\mathbf q_t \\cdot \\mathbf " + h + "_j$, and scaled\\_dot, $s_{tj} = "
           "\\mathbf q_t \\cdot \\mathbf " + h + "_j / \\sqrt d$ with $d = " + d + "$ ($" + root.latex + "$). Sharpness $\\beta = " + beta + "$." + masks.latex}));
  add_input_tables(c, doc);
}

}  // namespace detail

/// The document of --self and --dot-vs-scaled (--map-only: the maps' tables alone).
[[nodiscard]] inline std::vector<block> maps_document(const config& c, const results& r) {
  std::vector<block> doc;
  if (c.map_only) {
    for (std::size_t p = 0; p < r.maps.size(); ++p)
      detail::add_map_tables(c, r.maps[p], p % c.heads, doc, false, detail::scaled_d(c, r));
    return doc;
  }
  if (c.self_attention) {
    detail::add_self_intro(c, r, doc);
    detail::add_self_tables(c, r, doc);
  } else {
    detail::add_dot_vs_scaled_intro(c, doc);
    for (const auto& p : r.maps) detail::add_map_tables(c, p, 0, doc, true, detail::scaled_d(c, r));
  }
  return doc;
}

/// The document that text, md and latex spell (--map-only: the map's table alone).
[[nodiscard]] inline std::vector<block> document(const config& c, const results& r) {
  using report::cell;
  using report::matrix_table;
  if (!r.maps.empty()) return maps_document(c, r);
  std::vector<block> doc;
  const std::size_t T = c.queries.rows, n = c.notes.rows, d = c.notes.cols, dv = c.blended().cols;
  const bool kv = c.keys_and_values();
  const auto queries = detail::label_cells(c.query_labels, "q");
  const auto notes = detail::label_cells(c.note_labels, "h");
  const auto notes_masked = detail::label_cells(c.note_labels, "h", c.mask);
  if (c.map_only) return {detail::table_block(detail::map_table(c, r, queries, notes_masked))};
  auto table = [&](report::table t, const std::string& name) {
    doc.push_back(detail::table_block(detail::labelled(std::move(t), c, name)));
  };

  switch (c.example) {
    case unit_example::e3_alignment_map: {
      doc.push_back(detail::heading({"attn-calc: the unit's example, \"I drink tea\" → मैं चाय पीता हूँ",
                                     "attn-calc: the unit's example, ``I drink tea'' $\\to$ " + detail::ql(c, 0) +
                                         " " + detail::ql(c, 1) + " " + detail::ql(c, 2) + " " +
                                         detail::ql(c, 3)}));
      const std::string t = "Each note points at its own word: h_I = (1, 0, 0), h_drink = (0, 1, 0), "
                            "h_tea = (0, 0, 1). The state of चाय, q = (0, 0.5, 2), is the unit's (E1). "
                            "The unit gives no other states, so these are chosen: मैं looks hardest at "
                            "\"I\", पीता looks back at \"drink\", and हूँ, with no single English "
                            "partner, spreads over \"I\" and \"drink\".";
      const std::string l =
          "Each note points at its own word: $\\mathbf h_{\\text{I}} = (1, 0, 0)$, "
          "$\\mathbf h_{\\text{drink}} = (0, 1, 0)$, $\\mathbf h_{\\text{tea}} = (0, 0, 1)$. The state of " +
          detail::ql(c, 1) + ", $\\mathbf q = (0, 0.5, 2)$, is the unit's (E1). The unit gives no other "
          "states, so these are chosen: " + detail::ql(c, 0) + " looks hardest at ``I'', " + detail::ql(c, 2) +
          " looks back at ``drink'', and " + detail::ql(c, 3) +
          ", with no single English partner, spreads over ``I'' and ``drink''.";
      doc.push_back(detail::paragraph({t, l}));
      break;
    }
    case unit_example::e5_additive:
      doc.push_back(detail::heading({"attn-calc: the unit's additive score by hand",
                                     "attn-calc: the unit's additive score by hand"}));
      doc.push_back(detail::paragraph(
          {"W1 = W2 = I, v = (1, 1), q = (0.5, -0.5) and three notes (1, 0), (0, 1), (1, 1).",
           "$W_1 = W_2 = I$, $\\mathbf v = (1, 1)$, $\\mathbf q = (0.5, -0.5)$ and three notes "
           "$(1, 0)$, $(0, 1)$, $(1, 1)$."}));
      break;
    case unit_example::e2_beta_sweep:  // --beta-sweep has its document (sweep_document)
    case unit_example::none: {
      const std::string what = "attn-calc: " + std::to_string(T) + (T == 1 ? " query" : " queries") +
                               " looking at " + std::to_string(n) + (n == 1 ? " note" : " notes");
      doc.push_back(detail::heading({what, what}));
      break;
    }
  }
  doc.push_back(detail::paragraph(detail::settings_paragraph(c)));

  detail::add_input_tables(c, doc);
  if (c.score == score_kind::general)
    table(matrix_table(c.W.view(), detail::component_cells(c.W.rows), detail::component_cells(c.W.cols), -1, {},
                       {"W (query length × note length)", "$W$ (query length $\\times$ note length)"}),
          "W");
  if (c.score == score_kind::additive) {
    table(matrix_table(c.W1.view(), detail::component_cells(c.W1.rows), detail::component_cells(c.W1.cols), -1, {},
                       {"W1 (k × note length)", "$W_1$ ($k \\times$ note length)"}),
          "W1");
    table(matrix_table(c.W2.view(), detail::component_cells(c.W2.rows), detail::component_cells(c.W2.cols), -1, {},
                       {"W2 (k × query length)", "$W_2$ ($k \\times$ query length)"}),
          "W2");
    const attn::MatrixView<const double> v(c.v.data(), 1, c.v.size());
    table(matrix_table(v, {cell("v", "$\\mathbf v$")}, detail::component_cells(c.v.size()), -1, {},
                       {"v", "$\\mathbf v$"}),
          "v");
  }

  for (std::size_t t = 0; t < r.hidden.size(); ++t)
    doc.push_back(detail::table_block(detail::hidden_table(c, r, t, notes)));
  table(matrix_table(r.scores, queries, notes_masked, c.decimals, {},
                     {kv ? "Scores s_tj = score(q_t, k_j)" : "Scores s_tj = score(q_t, h_j)",
                      kv ? "Scores $s_{tj} = \\operatorname{score}(\\mathbf q_t, \\mathbf k_j)$"
                         : "Scores $s_{tj} = \\operatorname{score}(\\mathbf q_t, \\mathbf h_j)$"}),
        "scores");
  if (c.steps) doc.push_back(detail::table_block(detail::exp_table(c, r, queries, notes_masked)));
  doc.push_back(detail::table_block(detail::map_table(c, r, queries, notes_masked)));
  table(matrix_table(r.contexts, queries, detail::component_cells(dv), c.decimals, {},
                     {kv ? "Contexts c_t = Σ_j α_tj v_j" : "Contexts c_t = Σ_j α_tj h_j",
                      kv ? "Contexts $\\mathbf c_t = \\sum_j \\alpha_{tj} \\mathbf v_j$"
                         : "Contexts $\\mathbf c_t = \\sum_j \\alpha_{tj} \\mathbf h_j$"}),
        "contexts");
  if (c.no_attention) {
    const std::string last = c.note_labels.back(), what = kv ? "the last note's value" : "the last note";
    doc.push_back(detail::paragraph(
        {"Without attention (Unit 17), the decoder gets only " + what + ", the summary (" + last +
             "), for every word it writes: the same context for every query, and no map.",
         "Without attention (Unit 17), the decoder gets only " + what + ", the summary (" + detail::nl(c, n - 1) +
             "), for every word it writes: the same context for every query, and no map."}));
    table(matrix_table(r.no_attention, queries, detail::component_cells(dv), c.decimals, {},
                       {"Contexts without attention: c_t = the last note, " + last,
                        "Contexts without attention: $\\mathbf c_t$ = the last note, " + detail::nl(c, n - 1)}),
          "no-attention");
  }

  if (c.jacobian) {
    const cell bn = detail::bound(r.fd_notes.max_abs_error), bq = detail::bound(r.fd_query.max_abs_error);
    const std::string h = kv ? "k_j" : "h_j", lh = kv ? "k" : "h";
    std::string text = "Jacobians of the context, row i for c_i and column k for the k-th number of " + h +
                       (kv ? ", v_j" : "") + " or q, checked against central finite differences: worst "
                       "|analytic − finite difference| " + bn.text + " over every ∂c/∂" + h;
    std::string latex = "Jacobians of the context, row $i$ for $c_i$ and column $k$ for the $k$-th number of "
                        "$\\mathbf " + lh + "_j$" + (kv ? ", $\\mathbf v_j$" : "") +
                        " or $\\mathbf q$, checked against central finite differences: worst "
                        "$|\\text{analytic} - \\text{finite difference}|$ " + bn.latex +
                        " over every $\\partial\\mathbf c/\\partial\\mathbf " + lh + "_j$";
    if (kv) {
      const cell bv = detail::bound(r.fd_values.max_abs_error);
      text += ", " + bv.text + " over every ∂c/∂v_j";
      latex += ", " + bv.latex + " over every $\\partial\\mathbf c/\\partial\\mathbf v_j$";
    }
    text += " and " + bq.text + " over every ∂c/∂q.";
    latex += " and " + bq.latex + " over every $\\partial\\mathbf c/\\partial\\mathbf q$.";
    doc.push_back(detail::paragraph({text, latex}));
    for (std::size_t t = 0; t < T; ++t) {
      const std::string at = std::to_string(t + 1);
      for (std::size_t j = 0; j < n; ++j) {
        const std::string of = at + "-" + std::to_string(j + 1);
        table(matrix_table(r.note_jacobians[t][j], detail::component_cells(dv, "c"), detail::component_cells(d),
                           c.decimals, {},
                           {"∂c/∂" + h + " for query " + c.query_labels[t] + ", note " + c.note_labels[j],
                            "$\\partial\\mathbf c/\\partial\\mathbf " + lh + "_j$ for query " + detail::ql(c, t) +
                                ", note " + detail::nl(c, j)}),
              "dc-d" + lh + "-" + of);
        if (kv)
          table(matrix_table(r.value_jacobians[t][j], detail::component_cells(dv, "c"), detail::component_cells(dv),
                             c.decimals, {},
                             {"∂c/∂v_j for query " + c.query_labels[t] + ", note " + c.note_labels[j],
                              "$\\partial\\mathbf c/\\partial\\mathbf v_j$ for query " + detail::ql(c, t) +
                                  ", note " + detail::nl(c, j)}),
                "dc-dv-" + of);
      }
      table(matrix_table(r.query_jacobians[t], detail::component_cells(dv, "c"),
                         detail::component_cells(c.queries.cols), c.decimals, {},
                         {"∂c/∂q for query " + c.query_labels[t],
                          "$\\partial\\mathbf c/\\partial\\mathbf q$ for query " + detail::ql(c, t)}),
            "dc-dq-" + at);
    }
  }
  return doc;
}

namespace detail {

/// Breaks `text` into lines of at most `width` display columns at spaces, never inside
/// parentheses (so "(0, 0.5, 2)" stays on one line).
inline std::string wrap(std::string_view text, std::size_t width) {
  std::string out, line;
  std::size_t line_w = 0;
  while (!text.empty()) {
    std::size_t end = 0;
    int depth = 0;
    while (end < text.size() && (text[end] != ' ' || depth > 0)) {
      depth += text[end] == '(' ? 1 : text[end] == ')' ? -1 : 0;
      ++end;
    }
    const std::string_view word = text.substr(0, end);
    text = end >= text.size() ? std::string_view{} : text.substr(end + 1);
    const std::size_t w = report::display_width(word);
    if (line_w > 0 && line_w + 1 + w > width) {
      out += line + "\n";
      line.clear();
      line_w = 0;
    }
    if (line_w > 0) {
      line += ' ';
      ++line_w;
    }
    line += word;
    line_w += w;
  }
  if (!line.empty()) out += line + "\n";
  return out;
}

}  // namespace detail

/// Aligned text for a terminal: paragraphs wrapped at 88 columns, Devanagari measured by display width.
[[nodiscard]] inline std::string render_text(const std::vector<block>& doc) {
  std::string out;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const block& b = doc[i];
    if (i > 0) out += '\n';
    switch (b.type) {
      case block::kind::heading:
        out += b.text.text + "\n" + std::string(report::display_width(b.text.text), '=') + "\n";
        break;
      case block::kind::paragraph: out += detail::wrap(b.text.text, 88); break;
      case block::kind::table: out += report::to_text(b.table); break;
    }
  }
  return out;
}

/// GitHub-flavoured Markdown: a heading, paragraphs and tables.
[[nodiscard]] inline std::string render_markdown(const std::vector<block>& doc) {
  std::string out;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const block& b = doc[i];
    if (i > 0) out += '\n';
    switch (b.type) {
      case block::kind::heading: out += "### " + report::detail::markdown_escape(b.text.text) + "\n"; break;
      case block::kind::paragraph: out += report::detail::markdown_escape(b.text.text) + "\n"; break;
      case block::kind::table: out += report::to_markdown(b.table); break;
    }
  }
  return out;
}

/// A LaTeX fragment (booktabs tables, amsmath): paste it into a document, or \input it. A
/// document of tables alone (--map-only) is those tables alone, after \attnlabel's definition
/// when a label needs it.
[[nodiscard]] inline std::string render_latex(const std::vector<block>& doc) {
  if (std::all_of(doc.begin(), doc.end(), [](const block& b) { return b.type == block::kind::table; })) {
    std::string t;
    for (const block& b : doc) t += (t.empty() ? "" : "\n") + report::to_latex(b.table);
    return (t.find("\\attnlabel") == std::string::npos ? "" : report::latex_label_macro()) + t;
  }
  std::string out =
      "% Written by attn-calc. Needs \\usepackage{booktabs} and \\usepackage{amsmath}.\n"
      "% Labels outside ASCII are written \\attnlabel{<label>}{<fallback>}. XeLaTeX and LuaLaTeX\n"
      "% typeset the label (load a font that has its script, e.g. with fontspec:\n"
      "% \\newfontfamily\\devanagari{Noto Sans Devanagari} and, before this fragment,\n"
      "% \\newcommand{\\attnlabel}[2]{{\\devanagari #1}}); pdfLaTeX, which has no Devanagari,\n"
      "% typesets the fallback ($q_{1}$, $h_{2}$, ...). ASCII labels (--query-labels) avoid both.\n";
  out += report::latex_label_macro();
  for (const block& b : doc) {
    out += '\n';
    const std::string& l = b.text.latex.empty() ? b.text.text : b.text.latex;
    switch (b.type) {
      case block::kind::heading: out += "\\paragraph{" + l + "}\n"; break;
      case block::kind::paragraph: out += l + "\n"; break;
      case block::kind::table: out += report::to_latex(b.table); break;
    }
  }
  return out;
}

namespace detail {

/// JSON's "tool" and "example".
inline void json_head(report::json_writer& j, const config& c) {
  j.key("tool").string("attn-calc");
  j.key("example");
  switch (c.example) {
    case unit_example::e3_alignment_map: j.string("Unit 18, section 1: \"I drink tea\" → मैं चाय पीता हूँ (E1, E3)"); break;
    case unit_example::e5_additive: j.string("Unit 18, section 1: an additive score by hand (E5)"); break;
    case unit_example::e2_beta_sweep: j.string("Unit 18, section 1: how sure, β (E2): चाय's shares as β moves"); break;
    case unit_example::none: j.null(); break;
  }
}

/// JSON's inputs of queries looking at notes (or keys and values).
inline void json_inputs(report::json_writer& j, const config& c) {
  j.key("inputs").begin_object();
  j.key("score").string(score_name(c.score));
  j.key("queries").matrix(c.queries.view());
  j.key("query_labels").strings(c.query_labels);
  if (c.keys_and_values()) {
    j.key("keys").matrix(c.notes.view());
    j.key("values").matrix(c.values.view());
  } else {
    j.key("notes").matrix(c.notes.view());
  }
  j.key("note_labels").strings(c.note_labels);
  if (c.score == score_kind::general) j.key("W").matrix(c.W.view());
  if (c.score == score_kind::additive) {
    j.key("W1").matrix(c.W1.view());
    j.key("W2").matrix(c.W2.view());
    j.key("v").numbers(c.v);
  }
  j.end_object();
}

/// The masks among JSON's options: "mask" (null, or whether each note is kept), and when given
/// "causal" and "row_mask" (whether query t may attend to note j).
inline void json_masks(report::json_writer& j, const config& c) {
  j.key("mask");
  if (c.mask.empty()) {
    j.null();
  } else {
    j.begin_array(true);
    for (const char m : c.mask) j.boolean(m != 0);
    j.end_array();
  }
  if (c.causal) j.key("causal").boolean(true);
  if (!c.row_mask.empty()) {
    j.key("row_mask").begin_array();
    for (std::size_t t = 0; t < c.queries.rows; ++t) {
      j.begin_array(true);
      for (std::size_t k = 0; k < c.notes.rows; ++k) j.boolean(c.row_mask[t * c.notes.rows + k] != 0);
      j.end_array();
    }
    j.end_array();
  }
}

inline void json_rounded_matrix(report::json_writer& j, const attn::Matrix<double>& m, int decimals) {
  j.begin_array();
  for (std::size_t i = 0; i < m.rows(); ++i) j.rounded(m.row(i), decimals);
  j.end_array();
}

/// Row t of a map's weights as printed, null where a mask forbids the note (masked_text).
inline void json_rounded_weights(report::json_writer& j, const config& c, const attn::Matrix<double>& w, std::size_t t) {
  j.begin_array(true);
  for (std::size_t k = 0; k < w.cols(); ++k) {
    if (c.allowed(t, k)) j.string(report::fixed(w(t, k), c.decimals));
    else j.null();
  }
  j.end_array();
}

/// A map's weights as printed, null where masked.
inline void json_rounded_weights(report::json_writer& j, const config& c, const attn::Matrix<double>& w) {
  j.begin_array();
  for (std::size_t t = 0; t < w.rows(); ++t) json_rounded_weights(j, c, w, t);
  j.end_array();
}

/// A weight of a CSV: as printed, or an empty field where masked (masked_text).
inline std::string csv_weight(const config& c, const attn::Matrix<double>& w, std::size_t t, std::size_t k) {
  return c.allowed(t, k) ? report::fixed(w(t, k), c.decimals) : std::string();
}

/// The worst |Σ_j α_tj − 1| over the rows of `weights`; a row with nothing allowed sums to 0 by design.
inline double worst_row_sum_error(const config& c, const std::vector<double>& row_sums) {
  double worst = 0;
  for (std::size_t t = 0; t < row_sums.size(); ++t) {
    bool any = false;
    for (std::size_t k = 0; k < c.notes.rows; ++k) any = any || c.allowed(t, k);
    worst = std::max(worst, std::abs(row_sums[t] - (any ? 1.0 : 0.0)));
  }
  return worst;
}

}  // namespace detail

/// JSON of --self and --dot-vs-scaled: inputs, options, every map's scores and weights (full
/// precision and as printed), --self's Q, K, V, Z and Y, and a `checks` block.
[[nodiscard]] inline std::string render_maps_json(const config& c, const results& r) {
  report::json_writer j;
  const int dp = c.decimals;
  j.begin_object();
  detail::json_head(j, c);
  j.key("mode").string(c.cross ? "cross-attention" : c.self_attention ? "self-attention" : "dot-vs-scaled");
  const std::size_t h = c.heads, d = c.queries.cols;
  if (c.self_attention) {
    const matrix I = detail::identity(d), I_kv = detail::identity(c.notes.cols);
    j.key("inputs").begin_object();
    if (c.cross) {
      j.key("queries").matrix(c.queries.view());
      j.key("query_labels").strings(c.query_labels);
    }
    j.key("sentence").matrix(c.notes.view());
    j.key("words").strings(c.note_labels);
    std::vector<std::string> identities;
    for (const auto& [m, name, id] : {std::tuple<const matrix&, const char*, const matrix&>{c.WQ, "W_Q", I},
                                      {c.WK, "W_K", I_kv}, {c.WV, "W_V", I_kv}}) {
      j.key(name).matrix(m.empty() ? id.view() : m.view());
      if (m.empty()) identities.emplace_back(name);
    }
    j.key("W_O");
    if (c.WO.empty()) j.null();
    else j.matrix(c.WO.view());
    j.key("identity").strings(identities);
    for (const auto& [b, name] : {std::pair<const std::vector<double>&, const char*>{c.bQ, "b_Q"}, {c.bK, "b_K"},
                                  {c.bV, "b_V"}, {c.bO, "b_O"}})
      if (!b.empty()) j.key(name).numbers(b);
    j.end_object();
  } else {
    detail::json_inputs(j, c);
  }
  j.key("options").begin_object();
  if (c.self_attention) {
    if (!c.dot_vs_scaled) j.key("score").string(score_name(c.score));
    j.key("heads").integer(static_cast<long long>(h));
    j.key("d_k").integer(static_cast<long long>(r.Q.cols() / h));
    j.key("d_v").integer(static_cast<long long>(r.V.cols() / h));
  }
  if (c.dot_vs_scaled) j.key("dot_vs_scaled").boolean(true);
  j.key("beta").number(c.beta);
  detail::json_masks(j, c);
  j.key("decimals").integer(dp);
  j.end_object();

  j.key("results").begin_object();
  const std::pair<const char*, const attn::Matrix<double>*> steps[] = {
      {"Q", &r.Q}, {"K", &r.K}, {"V", &r.V}, {"heads_out", &r.Z}, {"out", &r.Y}};
  for (const auto& [name, m] : steps)
    if (m->rows() != 0) j.key(name).matrix(*m);
  const double d_scaled = static_cast<double>(c.self_attention ? r.Q.cols() / h : c.notes.cols);
  j.key("maps").begin_array();
  for (const auto& p : r.maps) {
    j.begin_object();
    j.key("name").string(p.name);
    j.key("score").string(p.scaled ? "scaled_dot" : "dot");
    j.key("scale").number(p.scaled ? 1 / std::sqrt(d_scaled) : 1.0);
    j.key("scores").matrix(p.scores);
    j.key("weights").matrix(p.weights);
    j.key("row_sums").numbers(p.row_sums);
    j.key("rounded").begin_object();
    j.key("scores");
    detail::json_rounded_matrix(j, p.scores, dp);
    j.key("weights");
    detail::json_rounded_weights(j, c, p.weights);
    j.end_object();
    j.end_object();
  }
  j.end_array();
  if (c.self_attention) {
    j.key("rounded").begin_object();
    for (const auto& [name, m] : steps)
      if (m->rows() != 0) {
        j.key(name);
        detail::json_rounded_matrix(j, *m, dp);
      }
    j.end_object();
  }
  j.end_object();

  double worst = 0;
  for (const auto& p : r.maps) worst = std::max(worst, detail::worst_row_sum_error(c, p.row_sums));
  j.key("checks").begin_object();
  j.key("worst_abs_row_sum_error").number(worst);
  j.end_object();
  j.end_object();
  return j.str();
}

/// JSON: inputs, options, per-query results (full precision and as printed), Jacobians, checks.
[[nodiscard]] inline std::string render_json(const config& c, const results& r) {
  if (!r.maps.empty()) return render_maps_json(c, r);
  report::json_writer j;
  const int dp = c.decimals;
  j.begin_object();
  detail::json_head(j, c);
  detail::json_inputs(j, c);
  j.key("options").begin_object();
  j.key("beta").number(c.beta);
  detail::json_masks(j, c);
  j.key("decimals").integer(dp);
  j.key("jacobian").boolean(c.jacobian);
  if (c.no_attention) j.key("no_attention").boolean(true);
  j.end_object();

  auto rounded_matrix = [&](const attn::Matrix<double>& m) { detail::json_rounded_matrix(j, m, dp); };
  j.key("results").begin_array();
  for (std::size_t t = 0; t < c.queries.rows; ++t) {
    j.begin_object();
    j.key("query").string(c.query_labels[t]);
    j.key("scores").numbers(r.scores.row(t));
    j.key("weights").numbers(r.weights.row(t));
    j.key("context").numbers(r.contexts.row(t));
    j.key("rounded").begin_object();
    j.key("scores").rounded(r.scores.row(t), dp);
    j.key("weights");
    detail::json_rounded_weights(j, c, r.weights, t);
    j.key("context").rounded(r.contexts.row(t), dp);
    j.end_object();
    if (c.no_attention) {
      j.key("no_attention").begin_object();
      j.key("context").numbers(r.no_attention.row(t));
      j.key("rounded").rounded(r.no_attention.row(t), dp);
      j.end_object();
    }
    if (c.jacobian) {
      j.key("jacobians").begin_object();
      auto per_note = [&](const char* key, const std::vector<attn::Matrix<double>>& ms) {
        j.key(key).begin_array();
        for (std::size_t n = 0; n < c.notes.rows; ++n) {
          j.begin_object();
          j.key("note").string(c.note_labels[n]);
          j.key("matrix").matrix(ms[n]);
          j.key("rounded");
          rounded_matrix(ms[n]);
          j.end_object();
        }
        j.end_array();
      };
      per_note(c.keys_and_values() ? "dc_dk" : "dc_dh", r.note_jacobians[t]);
      if (c.keys_and_values()) per_note("dc_dv", r.value_jacobians[t]);
      j.key("dc_dq").begin_object();
      j.key("matrix").matrix(r.query_jacobians[t]);
      j.key("rounded");
      rounded_matrix(r.query_jacobians[t]);
      j.end_object();
      j.end_object();
    }
    j.end_object();
  }
  j.end_array();

  j.key("checks").begin_object();
  j.key("row_sums").numbers(r.row_sums);
  j.key("worst_abs_row_sum_error").number(detail::worst_row_sum_error(c, r.row_sums));
  if (c.jacobian) {
    j.key("jacobian_check").string("central finite differences, step cbrt(eps) * max(1, |x|) (attn::check_jacobian)");
    j.key(c.keys_and_values() ? "dc_dk" : "dc_dh").begin_object();
    j.key("worst_abs_error").number(r.fd_notes.max_abs_error);
    j.key("worst_rel_error").number(r.fd_notes.max_rel_error);
    j.end_object();
    if (c.keys_and_values()) {
      j.key("dc_dv").begin_object();
      j.key("worst_abs_error").number(r.fd_values.max_abs_error);
      j.key("worst_rel_error").number(r.fd_values.max_rel_error);
      j.end_object();
    }
    j.key("dc_dq").begin_object();
    j.key("worst_abs_error").number(r.fd_query.max_abs_error);
    j.key("worst_rel_error").number(r.fd_query.max_rel_error);
    j.end_object();
  }
  j.end_object();
  j.end_object();
  return j.str();
}

/// CSV of the map: wide (header `query,<note labels>`, a row per query) or long
/// (`i,j,query,note,weight`, a row per cell, i and j counted from 1); a masked weight is an
/// empty field.
[[nodiscard]] inline std::string render_csv(const config& c, const results& r, bool long_form) {
  if (!r.maps.empty()) {
    // --self, --dot-vs-scaled: with several maps a first column names the map
    const bool named = r.maps.size() > 1;
    const std::string key = c.self_attention ? "key" : "note", map = named ? "map," : "";
    std::string out = long_form ? map + "i,j,query," + key + ",weight\n" : map + "query";
    if (!long_form) {
      for (const auto& l : c.note_labels) out += "," + report::csv_field(l);
      out += "\n";
    }
    for (const auto& p : r.maps)
      for (std::size_t q = 0; q < c.queries.rows; ++q) {
        const std::string first = (named ? report::csv_field(p.name) + "," : "");
        if (!long_form) out += first + report::csv_field(c.query_labels[q]);
        for (std::size_t n = 0; n < c.notes.rows; ++n) {
          const std::string w = detail::csv_weight(c, p.weights, q, n);
          if (long_form)
            out += first + std::to_string(q + 1) + "," + std::to_string(n + 1) + "," + report::csv_field(c.query_labels[q]) +
                   "," + report::csv_field(c.note_labels[n]) + "," + w + "\n";
          else
            out += "," + w;
        }
        if (!long_form) out += "\n";
      }
    return out;
  }
  if (!long_form) {
    report::table t;
    t.header.emplace_back("query");
    for (const auto& l : c.note_labels) t.header.emplace_back(l);
    for (std::size_t q = 0; q < c.queries.rows; ++q) {
      std::vector<report::cell> row{report::cell(c.query_labels[q])};
      for (std::size_t n = 0; n < c.notes.rows; ++n) row.emplace_back(detail::csv_weight(c, r.weights, q, n));
      t.rows.push_back(std::move(row));
    }
    return report::to_csv(t);
  }
  std::string out = "i,j,query,note,weight\n";
  for (std::size_t q = 0; q < c.queries.rows; ++q)
    for (std::size_t n = 0; n < c.notes.rows; ++n)
      out += std::to_string(q + 1) + "," + std::to_string(n + 1) + "," + report::csv_field(c.query_labels[q]) +
             "," + report::csv_field(c.note_labels[n]) + "," + detail::csv_weight(c, r.weights, q, n) + "\n";
  return out;
}

namespace detail {

/// The cells an SVG hatches: with masks of their own per query, every cell a mask forbids
/// (row-major); else one entry per note of the key mask.
inline std::vector<bool> svg_masked(const config& c) {
  std::vector<bool> masked;
  if (!c.per_row_mask()) {
    for (const char m : c.mask) masked.push_back(m == 0);
    return masked;
  }
  for (std::size_t t = 0; t < c.queries.rows; ++t)
    for (std::size_t j = 0; j < c.notes.rows; ++j) masked.push_back(!c.allowed(t, j));
  return masked;
}

/// The narrowest cell of a map's SVG (px): a wider map (E6's 35×30 is 19 px a cell; 1 × 3000
/// keys would be 1 px) is wrapped into bands of columns instead (heatmap_options::min_cell).
inline constexpr int svg_min_cell = 12;

/// What --title, --row-axis, --col-axis and --scale ask of an SVG.
inline void svg_options(const config& c, report::heatmap_options& opt) {
  opt.masked = svg_masked(c);
  if (c.title) opt.title = *c.title;
  if (c.row_axis) opt.row_axis = *c.row_axis;
  if (c.col_axis) opt.col_axis = *c.col_axis;
  opt.lo = c.scale_lo;
  opt.hi = c.scale_hi;
}

}  // namespace detail

/// The maps of --self and --dot-vs-scaled as SVG: one map alone as heatmap_svg draws it, several
/// as one grid on one colour scale (heatmap_grid_svg): --dot-vs-scaled's two side by side (with
/// many heads, the dot maps above the scaled ones), the heads' maps in rows that fit 760 px.
[[nodiscard]] inline std::string render_maps_svg(const config& c, const results& r) {
  const std::size_t T = c.queries.rows, n = c.notes.rows;
  attn::Matrix<double> all(r.maps.size() * T, n);  // every map stacked: what do their rows sum to?
  for (std::size_t p = 0; p < r.maps.size(); ++p)
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t j = 0; j < n; ++j) all(p * T + t, j) = r.maps[p].weights(t, j);
  const std::string sums = report::row_sums_text(all);
  report::heatmap_options opt;
  opt.decimals = c.values_shown ? c.decimals : -1;
  opt.legend_title = "weight \u03b1";  // as alignment_map_options
  if (c.cross) {
    opt.row_axis = "queries (words written)";
    opt.col_axis = "keys (words read)";
  } else if (c.self_attention) {
    opt.row_axis = "queries (words)";
    opt.col_axis = "keys (words)";
  } else {  // --dot-vs-scaled: W4's lesson is the queries' dot products with the keys
    opt.row_axis = "queries";
    opt.col_axis = "keys";
  }
  const std::size_t d = detail::scaled_d(c, r);
  if (c.dot_vs_scaled)
    opt.title = "Dot against scaled dot: the same scores divided by " + detail::root_text(d).text;
  else if (c.heads > 1)
    opt.title = std::string(c.cross ? "Cross" : "Self") + "-attention maps of " + std::to_string(c.heads) + " heads";
  else
    opt.title = std::string(c.cross ? "Cross" : "Self") + "-attention map A";
  if (!sums.empty()) opt.title += " (" + sums + ")";
  detail::svg_options(c, opt);
  if (r.maps.size() == 1) {
    opt.min_cell = detail::svg_min_cell;
    return report::heatmap_svg(r.maps[0].weights, c.query_labels, c.note_labels, opt);
  }
  std::vector<report::heatmap_panel> panels;
  const std::string product = c.self_attention ? "S = Q Kᵀ" : "s = q · k";
  for (const auto& p : r.maps) {
    std::string title = detail::display_name(c, p, d).text;
    if (c.dot_vs_scaled && c.heads == 1) title += ": " + product + (p.scaled ? " / √" + std::to_string(d) : "");
    panels.push_back({p.weights.view(), title});
  }
  return report::heatmap_grid_svg(panels, c.query_labels, c.note_labels, opt,
                                  c.dot_vs_scaled ? (c.heads > 1 ? c.heads : 2) : 0);
}

/// The map as an SVG heatmap: attn::report::alignment_map_options, masked notes hatched, and
/// what --title, --row-axis, --col-axis, --no-values and --scale ask for.
[[nodiscard]] inline std::string render_svg(const config& c, const results& r) {
  if (!r.maps.empty()) return render_maps_svg(c, r);
  report::heatmap_options opt = report::alignment_map_options(r.weights, c.values_shown ? c.decimals : -1);
  detail::svg_options(c, opt);
  opt.min_cell = detail::svg_min_cell;
  return report::heatmap_svg(r.weights, c.query_labels, c.note_labels, opt);
}

// ---------------------------------------------------------------------------------------------
// The lessons (lessons.hpp): the same tables in every format.

namespace detail {

inline std::vector<std::string> texts_of(const std::vector<report::cell>& cells) {
  std::vector<std::string> out;
  for (const auto& c : cells) out.push_back(c.text);
  return out;
}

/// A lesson's table for text, Markdown and LaTeX: inputs as given, results to --decimals.
inline report::table lesson_report_table(const config& c, const lesson_table& t) {
  auto out = report::matrix_table(t.values, t.rows, t.cols, t.input ? -1 : c.decimals, t.corner, t.title);
  return labelled(std::move(out), c, t.id);
}

}  // namespace detail

/// The document of a lesson: its heading (--title's when given), paragraphs and tables in order.
[[nodiscard]] inline std::vector<block> lesson_document(const config& c, const lesson_results& L) {
  std::vector<block> doc;
  doc.push_back(detail::heading(c.title ? report::cell(*c.title) : L.heading));
  for (const auto& piece : L.pieces)
    doc.push_back(piece.table < 0
                      ? detail::paragraph(piece.text)
                      : detail::table_block(detail::lesson_report_table(c, L.tables[static_cast<std::size_t>(piece.table)])));
  return doc;
}

namespace detail {

/// A lesson's tables as a JSON array (every --model and lesson JSON): each table's name, title,
/// whether it is an input, its row and column labels, its values and (not an input) the values
/// rounded to `decimals`.
inline void json_lesson_tables(report::json_writer& j, const lesson_results& L, int decimals) {
  j.begin_array();
  for (const auto& t : L.tables) {
    j.begin_object();
    j.key("name").string(t.id);
    j.key("title").string(t.title.text);
    j.key("input").boolean(t.input);
    j.key("rows").strings(texts_of(t.rows));
    j.key("columns").strings(texts_of(t.cols));
    j.key("values").matrix(t.values);
    if (!t.input) {
      j.key("rounded");
      json_rounded_matrix(j, t.values, decimals);
    }
    j.end_object();
  }
  j.end_array();
}

}  // namespace detail

/// A lesson as JSON: "mode", its options, and every table (its rows' and columns' labels, the
/// numbers at full precision, and a result's numbers as printed).
[[nodiscard]] inline std::string render_lesson_json(const config& c, const lesson_results& L) {
  static constexpr const char* modes[] = {"map", "pe", "rope", "norm", "activations", "block", "loss-curve", "no-peeking"};
  report::json_writer j;
  j.begin_object();
  j.key("tool").string("attn-calc");
  j.key("mode").string(c.lesson == lesson_kind::norm ? (c.rms ? "rms-norm" : "layer-norm")
                                                     : modes[static_cast<std::size_t>(c.lesson)]);
  j.key("options").begin_object();
  for (const auto& [k, v] : L.texts) j.key(k).string(v);
  for (const auto& [k, v] : L.numbers) j.key(k).number(v);
  j.key("decimals").integer(c.decimals);
  j.end_object();
  j.key("tables");
  detail::json_lesson_tables(j, L, c.decimals);
  j.end_object();
  return j.str();
}

/// A lesson as CSV: the main table, a row per row (csv); or every table, a row per number
/// (csv-long: table,i,j,row,column,value; i and j from 1).
[[nodiscard]] inline std::string render_loss_curve_csv(const config& c);  // below, beside the chart
[[nodiscard]] inline std::string render_loss_curve_svg(const config& c);

[[nodiscard]] inline std::string render_lesson_csv(const config& c, const lesson_results& L, bool long_form) {
  if (c.lesson == lesson_kind::loss_curve && !long_form) return render_loss_curve_csv(c);
  const auto number = [&](const lesson_table& t, std::size_t i, std::size_t k) {
    return t.input ? report::shortest(t.values(i, k)) : report::fixed(t.values(i, k), c.decimals);
  };
  if (!long_form) {
    const lesson_table& t = L.tables[L.main];
    report::table out;
    out.header.emplace_back(t.corner.text.empty() ? std::string("row") : t.corner.text);
    for (const auto& col : t.cols) out.header.emplace_back(col.text);
    for (std::size_t i = 0; i < t.values.rows(); ++i) {
      std::vector<report::cell> row{report::cell(t.rows[i].text)};
      for (std::size_t k = 0; k < t.values.cols(); ++k) row.emplace_back(number(t, i, k));
      out.rows.push_back(std::move(row));
    }
    return report::to_csv(out);
  }
  std::string out = "table,i,j,row,column,value\n";
  for (const auto& t : L.tables)
    for (std::size_t i = 0; i < t.values.rows(); ++i)
      for (std::size_t k = 0; k < t.values.cols(); ++k)
        out += report::csv_field(t.id) + "," + std::to_string(i + 1) + "," + std::to_string(k + 1) + "," +
               report::csv_field(t.rows[i].text) + "," + report::csv_field(t.cols[k].text) + "," + number(t, i, k) + "\n";
  return out;
}

namespace detail {

/// --rope's SVG: the pair before (blue) and after (red) as arrows from the origin, on a circle
/// of their length, the angle φ between them marked (φ modulo a turn), a key, a title.
inline std::string rope_svg(const config& c, const lesson_results& L) {
  using report::shortest;
  const auto num = [](double x) { return report::fixed(x, 1); };
  const int W = 420, H = 460, cx = 210, cy = 250, R = 140;
  const double len = std::hypot(L.a, L.b), unit = len > 0 ? R / len : R;
  const auto X = [&](double a) { return cx + a * unit; };
  const auto Y = [&](double b) { return cy - b * unit; };
  const std::string title = c.title ? *c.title
                                    : "RoPE: pair " + std::to_string(c.pair) + " at position " + std::to_string(c.position) +
                                          " turns by \u03c6 = " + report::fixed(L.phi, c.decimals) + " rad";
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(W) + "\" height=\"" +
                  std::to_string(H) + "\" viewBox=\"0 0 " + std::to_string(W) + " " + std::to_string(H) +
                  "\" role=\"img\" aria-labelledby=\"rope-title\" font-family=\"'Noto Sans', 'DejaVu Sans', sans-serif\">\n";
  s += "  <title id=\"rope-title\">" + report::detail::xml_escape(title) + "</title>\n  <defs>\n";
  for (const auto& [id, colour] : {std::pair<const char*, const char*>{"rope-before", "#2166ac"}, {"rope-after", "#b2182b"}})
    s += std::string("    <marker id=\"") + id + "\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"8\" "
         "markerHeight=\"8\" orient=\"auto-start-reverse\"><path d=\"M0 0L10 5L0 10z\" fill=\"" + colour + "\"/></marker>\n";
  s += "  </defs>\n  <rect width=\"" + std::to_string(W) + "\" height=\"" + std::to_string(H) + "\" fill=\"#ffffff\"/>\n";
  s += "  <text x=\"16\" y=\"32\" font-size=\"16\" font-weight=\"bold\" fill=\"#1b1b1b\">" +
       report::detail::xml_escape(title) + "</text>\n";
  // axes and the circle of the pair's length
  s += "  <g stroke=\"#bbbbbb\" stroke-width=\"1\" fill=\"none\">\n";
  s += "    <line x1=\"" + std::to_string(cx - R - 20) + "\" y1=\"" + std::to_string(cy) + "\" x2=\"" +
       std::to_string(cx + R + 20) + "\" y2=\"" + std::to_string(cy) + "\"/>\n";
  s += "    <line x1=\"" + std::to_string(cx) + "\" y1=\"" + std::to_string(cy - R - 20) + "\" x2=\"" + std::to_string(cx) +
       "\" y2=\"" + std::to_string(cy + R + 20) + "\"/>\n";
  s += "    <circle cx=\"" + std::to_string(cx) + "\" cy=\"" + std::to_string(cy) + "\" r=\"" + std::to_string(R) +
       "\" stroke-dasharray=\"4 4\"/>\n  </g>\n";
  s += "  <g font-size=\"12\" font-style=\"italic\" fill=\"#555555\">\n";
  s += "    <text x=\"" + std::to_string(cx + R + 8) + "\" y=\"" + std::to_string(cy - 6) + "\" text-anchor=\"end\">x_" +
       std::to_string(L.first) + "</text>\n";
  s += "    <text x=\"" + std::to_string(cx + 6) + "\" y=\"" + std::to_string(cy - R - 8) + "\">x_" +
       std::to_string(L.second) + "</text>\n  </g>\n";
  if (len > 0) {
    // the angle turned, modulo a full turn, as an arc of a third of the radius, counter-clockwise
    const double turn = 2 * std::numbers::pi, from = std::atan2(L.b, L.a);
    const double phi = std::fmod(std::fmod(L.phi, turn) + turn, turn);
    const double r = R / 3.0, to = from + phi;
    s += "  <path d=\"M" + num(cx + r * std::cos(from)) + " " + num(cy - r * std::sin(from)) + "A" + num(r) + " " + num(r) +
         " 0 " + (phi > std::numbers::pi ? "1" : "0") + " 0 " + num(cx + r * std::cos(to)) + " " + num(cy - r * std::sin(to)) +
         "\" fill=\"none\" stroke=\"#555555\" stroke-width=\"1.5\"/>\n";
    const double mid = from + phi / 2;
    s += "  <text x=\"" + num(cx + (r + 14) * std::cos(mid)) + "\" y=\"" + num(cy - (r + 14) * std::sin(mid)) +
         "\" dy=\"0.35em\" font-size=\"13\" text-anchor=\"middle\" fill=\"#555555\">\u03c6</text>\n";
    for (const auto& [id, colour, a, b] :
         {std::tuple<const char*, const char*, double, double>{"rope-before", "#2166ac", L.a, L.b},
          {"rope-after", "#b2182b", L.a_turned, L.b_turned}})
      s += std::string("  <line x1=\"") + std::to_string(cx) + "\" y1=\"" + std::to_string(cy) + "\" x2=\"" + num(X(a)) +
           "\" y2=\"" + num(Y(b)) + "\" stroke=\"" + colour + "\" stroke-width=\"3\" marker-end=\"url(#" + id + ")\"/>\n";
  }
  // the key: before and after with their numbers
  const int ky = H - 44;
  const std::string before = "before (a, b) = (" + shortest(L.a) + ", " + shortest(L.b) + ")";
  const std::string after = "after (a\u2032, b\u2032) = (" + report::fixed(L.a_turned, c.decimals) + ", " +
                            report::fixed(L.b_turned, c.decimals) + ")";
  s += "  <g font-size=\"13\" fill=\"#1b1b1b\">\n";
  s += "    <rect x=\"16\" y=\"" + std::to_string(ky) + "\" width=\"14\" height=\"4\" fill=\"#2166ac\"/>\n";
  s += "    <text x=\"38\" y=\"" + std::to_string(ky + 2) + "\" dy=\"0.35em\">" + report::detail::xml_escape(before) +
       "</text>\n";
  s += "    <rect x=\"16\" y=\"" + std::to_string(ky + 20) + "\" width=\"14\" height=\"4\" fill=\"#b2182b\"/>\n";
  s += "    <text x=\"38\" y=\"" + std::to_string(ky + 22) + "\" dy=\"0.35em\">" + report::detail::xml_escape(after) +
       "</text>\n  </g>\n";
  return s + "</svg>\n";
}

}  // namespace detail

/// A lesson as SVG: --pe's table as a heatmap on a diverging scale (−1 blue, 0 white, 1 red,
/// by default; --scale), its axes and legend titled; --rope's pair before and after.
[[nodiscard]] inline std::string render_lesson_svg(const config& c, const lesson_results& L) {
  if (c.lesson == lesson_kind::rope) return detail::rope_svg(c, L);
  if (c.lesson == lesson_kind::loss_curve) return render_loss_curve_svg(c);
  const lesson_table& t = L.tables[L.main];
  if (c.lesson != lesson_kind::pe) {  // the parser refuses svg for the other lessons; their main table, plainly
    report::heatmap_options plain;
    plain.title = t.title.text;
    plain.decimals = c.decimals;
    plain.lo = -1;
    plain.scale = report::colour_scale::diverging;
    return report::heatmap_svg(t.values, detail::texts_of(t.rows), detail::texts_of(t.cols), plain);
  }
  report::heatmap_options opt;
  opt.scale = report::colour_scale::diverging;
  opt.legend_title = "PE value";
  opt.title = "Sinusoidal positions PE: " + std::to_string(c.positions) + " positions \u00d7 " + std::to_string(c.dim) +
              " dimensions (" + (c.split_layout ? "concatenated" : "interleaved") + ")";
  opt.row_axis = "position p";
  opt.col_axis = c.split_layout ? "dimension (the sines, then the cosines; slower to the right in each half)"
                                : "dimension (sin, cos pairs; slower to the right)";
  opt.decimals = c.values_shown ? c.decimals : -1;
  opt.id = "pe";
  detail::svg_options(c, opt);
  return report::heatmap_svg(t.values, detail::texts_of(t.rows), detail::texts_of(t.cols), opt);
}

/// A lesson in the format c asks for.
[[nodiscard]] inline std::string render_lesson(const config& c, const lesson_results& L) {
  switch (c.format) {
    case output_format::md: return render_markdown(lesson_document(c, L));
    case output_format::latex: return render_latex(lesson_document(c, L));
    case output_format::json: return render_lesson_json(c, L);
    case output_format::csv: return render_lesson_csv(c, L, false);
    case output_format::csv_long: return render_lesson_csv(c, L, true);
    case output_format::svg: return render_lesson_svg(c, L);
    case output_format::text: break;
  }
  return render_text(lesson_document(c, L));
}

// ---------------------------------------------------------------------------------------------
// --beta-sweep: one query's share of each note as β moves (E2), as a table and a chart.

namespace detail {

/// The β values as row labels: "0", "0.25", … (shortest).
inline std::vector<report::cell> beta_cells(const config& c) {
  std::vector<report::cell> out;
  for (const double b : c.beta_sweep) out.emplace_back(report::shortest(b));
  return out;
}

/// What a sweep's weights are: "α_j at each β", with the query's label.
inline report::cell sweep_title(const config& c) {
  if (c.title) return report::cell(*c.title);
  const std::string q = c.query_labels[0];
  return {"Shares α_j of query " + q + " as β moves (a row per β; each row sums to 1)",
          "Shares $\\alpha_j$ of query " + ql(c, 0) + " as $\\beta$ moves (a row per $\\beta$; each row sums to 1)"};
}

}  // namespace detail

/// --beta-sweep's document: the heading, what the sweep shows, the inputs, the scores and the
/// shares at every β (a row per β, a column per note, each row's sum; — where masked).
[[nodiscard]] inline std::vector<block> sweep_document(const config& c, const results& r) {
  std::vector<block> doc;
  const std::string lo = report::shortest(c.beta_sweep.front()), hi = report::shortest(c.beta_sweep.back());
  const std::string what = "attn-calc: the shares of " + c.query_labels[0] + " as β moves from " + lo + " to " + hi;
  doc.push_back(detail::heading({what, "attn-calc: the shares of " + detail::ql(c, 0) + " as $\\beta$ moves from " + lo +
                                           " to " + hi}));
  const report::cell f = detail::score_formula(c), masks = detail::mask_sentences(c);
  std::string text = "Score: " + f.text + ". At every β the weights are softmax(β s_j): at β = 0 every kept " +
                     std::string(c.note_noun()) + " gets the same share, and as β grows the share of the highest score "
                     "climbs towards 1.";
  std::string latex = "Score: " + f.latex + ". At every $\\beta$ the weights are $\\operatorname{softmax}(\\beta s_j)$: "
                      "at $\\beta = 0$ every kept " + std::string(c.note_noun()) +
                      " gets the same share, and as $\\beta$ grows the share of the highest score climbs towards 1.";
  if (c.example == unit_example::e2_beta_sweep) {
    text += " The unit's E2: चाय's state q = (0, 0.5, 2) over I, drink, tea; at β = 2 tea's share is 0.936.";
    latex += " The unit's E2: " + detail::ql(c, 0) + "'s state $\\mathbf q = (0, 0.5, 2)$ over I, drink, tea; at "
             "$\\beta = 2$ tea's share is 0.936.";
  }
  doc.push_back(detail::paragraph({text + masks.text, latex + masks.latex}));
  detail::add_input_tables(c, doc);
  const auto queries = detail::label_cells(c.query_labels, "q");
  const auto notes_masked = detail::label_cells(c.note_labels, "h", c.mask);
  doc.push_back(detail::table_block(detail::labelled(
      report::matrix_table(r.scores, queries, notes_masked, c.decimals, {},
                           {"Scores s_j = score(q, h_j)", "Scores $s_j = \\operatorname{score}(\\mathbf q, \\mathbf h_j)$"}),
      c, "scores")));
  auto t = report::matrix_table(r.sweep, detail::beta_cells(c), notes_masked, c.decimals, report::cell("β", "$\\beta$"),
                                detail::sweep_title(c));
  t.header.emplace_back("sum", "$\\sum_j$");
  for (std::size_t k = 0; k < r.sweep.rows(); ++k) {
    double sum = 0;
    for (std::size_t j = 0; j < r.sweep.cols(); ++j) sum += r.sweep(k, j);
    t.rows[k].push_back(report::number_cell(sum, c.decimals));
    for (std::size_t j = 0; j < r.sweep.cols(); ++j)
      if (!c.allowed(0, j)) t.rows[k][j + 1] = report::cell(detail::masked_text, detail::masked_latex);
  }
  doc.push_back(detail::table_block(detail::labelled(std::move(t), c, "sweep")));
  return doc;
}

/// --beta-sweep as JSON: inputs, options, and the query's weights at every β (full precision,
/// and as printed with null where masked).
[[nodiscard]] inline std::string render_sweep_json(const config& c, const results& r) {
  report::json_writer j;
  j.begin_object();
  detail::json_head(j, c);
  j.key("mode").string("beta-sweep");
  detail::json_inputs(j, c);
  j.key("options").begin_object();
  detail::json_masks(j, c);
  j.key("decimals").integer(c.decimals);
  j.end_object();
  j.key("results").begin_object();
  j.key("query").string(c.query_labels[0]);
  j.key("scores").numbers(r.scores.row(0));
  j.key("betas").numbers(c.beta_sweep);
  j.key("weights").matrix(r.sweep);
  j.key("rounded").begin_object();
  j.key("weights").begin_array();
  for (std::size_t k = 0; k < r.sweep.rows(); ++k) {
    j.begin_array(true);
    for (std::size_t n = 0; n < r.sweep.cols(); ++n) {
      if (c.allowed(0, n)) j.string(report::fixed(r.sweep(k, n), c.decimals));
      else j.null();
    }
    j.end_array();
  }
  j.end_array();
  j.end_object();
  j.end_object();
  j.end_object();
  return j.str();
}

/// --beta-sweep as CSV: wide (beta,<notes>, a row per β) or long (i,j,beta,note,weight).
[[nodiscard]] inline std::string render_sweep_csv(const config& c, const results& r, bool long_form) {
  std::string out = long_form ? "i,j,beta,note,weight\n" : "beta";
  if (!long_form) {
    for (const auto& l : c.note_labels) out += "," + report::csv_field(l);
    out += "\n";
  }
  for (std::size_t k = 0; k < r.sweep.rows(); ++k) {
    const std::string b = report::shortest(c.beta_sweep[k]);
    if (!long_form) out += b;
    for (std::size_t n = 0; n < r.sweep.cols(); ++n) {
      const std::string w = c.allowed(0, n) ? report::fixed(r.sweep(k, n), c.decimals) : std::string();
      if (long_form)
        out += std::to_string(k + 1) + "," + std::to_string(n + 1) + "," + b + "," + report::csv_field(c.note_labels[n]) +
               "," + w + "\n";
      else
        out += "," + w;
    }
    if (!long_form) out += "\n";
  }
  return out;
}

namespace detail {

/// The lines of --beta-sweep's chart: Okabe and Ito's colour-blind-safe colours (yellow left
/// out: too light on white), and a dash pattern each, so lines differ in grey print too.
inline constexpr const char* sweep_colours[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9",
                                                "#000000"};
inline constexpr const char* sweep_dashes[] = {"", "8 4", "2 3", "8 3 2 3", "12 4", "4 4"};

}  // namespace detail

namespace detail {

/// A line of a line_chart: its legend label, its points (none: the label alone in the legend, no
/// line, as --beta-sweep's masked note), and its tooltip after the label.
struct chart_line {
  std::string label;
  std::vector<double> x, y;
  std::string tip;
};

/// A line chart (--beta-sweep, --loss-curve): the plot 480 × 300 px, gridlines and labels at the
/// given ticks, a line per chart_line in sweep_colours and sweep_dashes (the n-th drawn line
/// takes the n-th of each), a marker at every point while a line has at most 41, a grey dashed
/// horizontal line per reference (ln V), a legend, a title. One home for the charts' look.
struct line_chart {
  std::string title, id, x_label, y_label;
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  std::vector<double> x_ticks, y_ticks;
  std::vector<chart_line> lines;
  std::vector<std::pair<double, std::string>> references;  ///< (y, legend label)
};

[[nodiscard]] inline std::string line_chart_svg(const line_chart& ch) {
  using report::detail::num;
  using report::detail::xml_escape;
  const auto fx = [](double x) { return report::fixed(x, 1); };
  const std::size_t entries = ch.lines.size() + ch.references.size();
  int legend_w = 0;
  for (const auto& l : ch.lines) legend_w = std::max(legend_w, report::detail::text_width(l.label, 13));
  for (const auto& r : ch.references) legend_w = std::max(legend_w, report::detail::text_width(r.second, 13));
  const int left = 72, top = 64, plot_w = 480, plot_h = 300, right = left + plot_w, bottom = top + plot_h;
  const int W = std::max(right + 32 + 36 + legend_w + 16, 16 + report::detail::text_width(ch.title, 16) + 16);
  const int H = std::max(bottom + 64, top + 22 * static_cast<int>(entries) + 16);
  const auto X = [&](double x) { return left + (x - ch.x_lo) / (ch.x_hi - ch.x_lo) * plot_w; };
  const auto Y = [&](double y) { return bottom - (y - ch.y_lo) / (ch.y_hi - ch.y_lo) * plot_h; };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(W) + "\" height=\"" + num(H) +
                  "\" viewBox=\"0 0 " + num(W) + " " + num(H) + "\" role=\"img\" aria-labelledby=\"" + ch.id +
                  "-title\" font-family=\"'Noto Sans', 'Noto Sans Devanagari', 'DejaVu Sans', sans-serif\">\n";
  s += "  <title id=\"" + ch.id + "-title\">" + xml_escape(ch.title) + "</title>\n";
  s += "  <rect width=\"" + num(W) + "\" height=\"" + num(H) + "\" fill=\"#ffffff\"/>\n";
  s += "  <text x=\"16\" y=\"32\" font-size=\"16\" font-weight=\"bold\" fill=\"#1b1b1b\">" + xml_escape(ch.title) + "</text>\n";
  // gridlines and their labels up the side; ticks and their labels across the bottom
  s += "  <g font-size=\"12\" fill=\"#555555\" stroke=\"none\">\n";
  for (std::size_t k = 0; k < std::max(ch.x_ticks.size(), ch.y_ticks.size()); ++k) {
    if (k < ch.y_ticks.size()) {
      const double y = ch.y_ticks[k];
      s += "    <line x1=\"" + num(left) + "\" y1=\"" + fx(Y(y)) + "\" x2=\"" + num(right) + "\" y2=\"" + fx(Y(y)) +
           "\" stroke=\"#e5e5e5\"/>\n";
      s += "    <text x=\"" + num(left - 8) + "\" y=\"" + fx(Y(y)) + "\" dy=\"0.35em\" text-anchor=\"end\">" +
           report::detail::tick_text(y) + "</text>\n";
    }
    if (k < ch.x_ticks.size()) {
      const double x = ch.x_ticks[k];
      s += "    <line x1=\"" + fx(X(x)) + "\" y1=\"" + num(bottom) + "\" x2=\"" + fx(X(x)) + "\" y2=\"" +
           num(bottom + 4) + "\" stroke=\"#999999\"/>\n";
      s += "    <text x=\"" + fx(X(x)) + "\" y=\"" + num(bottom + 18) + "\" text-anchor=\"middle\">" +
           report::detail::tick_text(x) + "</text>\n";
    }
  }
  s += "    <rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(plot_w) + "\" height=\"" + num(plot_h) +
       "\" fill=\"none\" stroke=\"#999999\"/>\n";
  s += "    <text x=\"" + num(left + plot_w / 2) + "\" y=\"" + num(bottom + 42) +
       "\" text-anchor=\"middle\" font-style=\"italic\">" + xml_escape(ch.x_label) + "</text>\n";
  const int ay = top + plot_h / 2;
  s += "    <text x=\"24\" y=\"" + num(ay) + "\" text-anchor=\"middle\" font-style=\"italic\" transform=\"rotate(-90 24 " +
       num(ay) + ")\">" + xml_escape(ch.y_label) + "</text>\n  </g>\n";
  const std::string reference_dash = "6 4";
  for (const auto& [y, label] : ch.references) {
    s += "  <g>\n    <title>" + xml_escape(label) + "</title>\n";
    s += "    <line x1=\"" + num(left) + "\" y1=\"" + fx(Y(y)) + "\" x2=\"" + num(right) + "\" y2=\"" + fx(Y(y)) +
         "\" stroke=\"#555555\" stroke-width=\"1.5\" stroke-dasharray=\"" + reference_dash + "\"/>\n  </g>\n";
  }
  // a line per chart_line that has points, with its values in a tooltip
  std::size_t drawn = 0;
  for (const auto& l : ch.lines) {
    if (l.x.empty()) continue;
    const std::string colour = sweep_colours[drawn % std::size(sweep_colours)];
    const std::string dash = sweep_dashes[drawn % std::size(sweep_dashes)];
    ++drawn;
    std::string points;
    for (std::size_t k = 0; k < l.x.size(); ++k) points += (k ? " " : "") + fx(X(l.x[k])) + "," + fx(Y(l.y[k]));
    s += "  <g>\n    <title>" + xml_escape(l.label + l.tip) + "</title>\n";
    s += "    <polyline points=\"" + points + "\" fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"2.5\"" +
         (dash.empty() ? std::string() : " stroke-dasharray=\"" + dash + "\"") + "/>\n";
    if (l.x.size() <= 41)
      for (std::size_t k = 0; k < l.x.size(); ++k)
        s += "    <circle cx=\"" + fx(X(l.x[k])) + "\" cy=\"" + fx(Y(l.y[k])) + "\" r=\"2.5\" fill=\"" + colour + "\"/>\n";
    s += "  </g>\n";
  }
  // the legend: a sample of each line and its label (a line without points: the label alone),
  // then the references
  s += "  <g font-size=\"13\" fill=\"#1b1b1b\">\n";
  std::size_t shown_lines = 0;
  const auto sample = [&](int ly, const std::string& colour, const std::string& dash, const char* width) {
    s += "    <line x1=\"" + num(right + 32) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(right + 60) + "\" y2=\"" + num(ly) +
         "\" stroke=\"" + colour + "\" stroke-width=\"" + width + "\"" +
         (dash.empty() ? std::string() : " stroke-dasharray=\"" + dash + "\"") + "/>\n";
  };
  for (std::size_t j = 0; j < entries; ++j) {
    const int ly = top + 8 + 22 * static_cast<int>(j);
    const bool line = j < ch.lines.size();
    if (line && !ch.lines[j].x.empty()) {
      sample(ly, sweep_colours[shown_lines % std::size(sweep_colours)], sweep_dashes[shown_lines % std::size(sweep_dashes)],
             "2.5");
      ++shown_lines;
    } else if (!line) {
      sample(ly, "#555555", reference_dash, "1.5");
    }
    const std::string& label = line ? ch.lines[j].label : ch.references[j - ch.lines.size()].second;
    s += "    <text x=\"" + num(right + 68) + "\" y=\"" + num(ly) + "\" dy=\"0.35em\">" + xml_escape(label) + "</text>\n";
  }
  s += "  </g>\n";
  return s + "</svg>\n";
}

/// Ticks at round numbers (1, 2, 2.5 or 5 times a power of ten apart, about five of them) over
/// [lo, hi], which `lo` and `hi` are widened to reach.
inline std::vector<double> round_ticks(double& lo, double& hi) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / 5, power = std::pow(10.0, std::floor(std::log10(raw))), f = raw / power;
  const double step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * power;
  const double first = std::floor(lo / step), last = std::ceil(hi / step);
  lo = first * step;
  hi = last * step;
  std::vector<double> ticks;
  for (double k = first; k <= last; ++k) ticks.push_back(k * step);
  return ticks;
}

}  // namespace detail

/// --beta-sweep as an SVG line chart: β across (labelled "β (how sure)"), the share from 0 to 1
/// up, a line per note (a masked note, always 0, is left out and named in the legend), a
/// marker at every β while there are at most 41, gridlines, a legend of the notes, a title.
[[nodiscard]] inline std::string render_sweep_svg(const config& c, const results& r) {
  detail::line_chart ch;
  ch.title = c.title ? *c.title : "How sure: the shares of " + c.query_labels[0] + " as \u03b2 moves";
  ch.id = "sweep";
  ch.x_label = "\u03b2 (how sure)";
  ch.y_label = "share of each " + std::string(c.note_noun()) + " (weight \u03b1)";
  ch.x_lo = c.beta_sweep.front();
  ch.x_hi = c.beta_sweep.back();
  for (int k = 0; k <= 4; ++k) {  // the share at 0, 0.25, … 1; β at five evenly spaced values
    ch.y_ticks.push_back(k / 4.0);
    ch.x_ticks.push_back(ch.x_lo + (ch.x_hi - ch.x_lo) * k / 4.0);
  }
  const std::size_t K = c.beta_sweep.size();
  for (std::size_t j = 0; j < c.notes.rows; ++j) {
    detail::chart_line l;
    l.label = c.note_labels[j];
    if (!c.allowed(0, j)) {
      l.label += " (masked)";
    } else {
      l.x = c.beta_sweep;
      for (std::size_t k = 0; k < K; ++k) l.y.push_back(r.sweep(k, j));
      l.tip = ": " + report::fixed(r.sweep(0, j), c.decimals) + " at \u03b2 = " + report::shortest(c.beta_sweep[0]) +
              " … " + report::fixed(r.sweep(K - 1, j), c.decimals) + " at \u03b2 = " + report::shortest(c.beta_sweep[K - 1]);
    }
    ch.lines.push_back(std::move(l));
  }
  return detail::line_chart_svg(ch);
}

/// --loss-curve as an SVG line chart: the step across, the loss in nats up (from 0, or below it
/// when a loss is negative), ticks at round numbers, a line per run, ln V dashed with
/// --vocabulary, a legend of the runs.
[[nodiscard]] inline std::string render_loss_curve_svg(const config& c) {
  detail::line_chart ch;
  const auto& runs = c.loss_runs;
  ch.title = c.title ? *c.title
                     : runs.size() == 1 ? "Training: the loss of " + runs[0].name + " at each step"
                                        : "Training: the loss of " + std::to_string(runs.size()) + " runs at each step";
  ch.id = "loss";
  ch.x_label = "step";
  ch.y_label = "loss (nats)";
  double x_lo = runs[0].steps.front(), x_hi = x_lo, y_lo = 0, y_hi = 0;
  for (const loss_run& run : runs) {
    detail::chart_line l;
    l.label = run.name;
    l.x = run.steps;
    for (const auto& row : run.rows) l.y.push_back(row[0]);
    x_lo = std::min(x_lo, run.steps.front());
    x_hi = std::max(x_hi, run.steps.back());
    for (const double y : l.y) {
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
    l.tip = ": " + report::shortest(l.y.front()) + " at step " + report::shortest(l.x.front()) + " … " +
            report::shortest(l.y.back()) + " at step " + report::shortest(l.x.back());
    ch.lines.push_back(std::move(l));
  }
  if (c.vocabulary != 0) {
    const double ln_v = detail::chance_loss(c.vocabulary);
    y_hi = std::max(y_hi, ln_v);
    ch.references.emplace_back(ln_v, "ln " + std::to_string(c.vocabulary) + " = " + report::fixed(ln_v, c.decimals) +
                                         " (chance)");
  }
  ch.x_ticks = detail::round_ticks(x_lo, x_hi);
  ch.y_ticks = detail::round_ticks(y_lo, y_hi);
  ch.x_lo = x_lo;
  ch.x_hi = x_hi;
  ch.y_lo = y_lo;
  ch.y_hi = y_hi;
  return detail::line_chart_svg(ch);
}

/// --loss-curve as CSV: every run's rows, `step,loss,...` (`run,step,loss,...` for several
/// runs), the columns of all runs (empty where a run's log has no such column), as given.
[[nodiscard]] inline std::string render_loss_curve_csv(const config& c) {
  const auto& runs = c.loss_runs;
  std::vector<std::string> columns;
  for (const loss_run& run : runs)
    for (const auto& name : run.columns)
      if (std::find(columns.begin(), columns.end(), name) == columns.end()) columns.push_back(name);
  std::string out = runs.size() > 1 ? "run,step" : "step";
  // appended piece by piece: GCC 12 at -O3 warns falsely (-Wrestrict) on "," + a temporary here
  for (const auto& name : columns) {
    out += ',';
    out += report::csv_field(name);
  }
  out += '\n';
  for (const loss_run& run : runs)
    for (std::size_t i = 0; i < run.rows.size(); ++i) {
      if (runs.size() > 1) {
        out += report::csv_field(run.name);
        out += ',';
      }
      out += report::shortest(run.steps[i]);
      for (const auto& name : columns) {
        out += ',';
        const auto at = std::find(run.columns.begin(), run.columns.end(), name);
        if (at != run.columns.end()) out += report::shortest(run.rows[i][static_cast<std::size_t>(at - run.columns.begin())]);
      }
      out += '\n';
    }
  return out;
}

/// --dot-vs-scaled's decimals when --decimals is not given: enough that the smallest weight of
/// at least 1e-5 shows two significant digits, 1 − ⌊log10 w⌋, between 3 and 5 (W4's dot map
/// has 0.000335: 5 decimals, 0.00034; a weight below 1e-5 prints as 0.00000).
[[nodiscard]] inline int auto_decimals(const results& r) {
  double smallest = 1;
  for (const auto& p : r.maps)
    for (std::size_t t = 0; t < p.weights.rows(); ++t)
      for (std::size_t j = 0; j < p.weights.cols(); ++j)
        if (p.weights(t, j) >= 1e-5) smallest = std::min(smallest, p.weights(t, j));
  return std::clamp(1 - static_cast<int>(std::floor(std::log10(smallest))), 3, 5);
}

/// The output c.format asks for.
[[nodiscard]] inline std::string render(const config& c, const results& r) {
  if (c.lesson != lesson_kind::none) return render_lesson(c, r.lesson);
  if (!c.beta_sweep.empty()) {
    switch (c.format) {
      case output_format::md: return render_markdown(sweep_document(c, r));
      case output_format::latex: return render_latex(sweep_document(c, r));
      case output_format::json: return render_sweep_json(c, r);
      case output_format::csv: return render_sweep_csv(c, r, false);
      case output_format::csv_long: return render_sweep_csv(c, r, true);
      case output_format::svg: return render_sweep_svg(c, r);
      case output_format::text: break;
    }
    return render_text(sweep_document(c, r));
  }
  if (c.dot_vs_scaled && !c.decimals_given) {
    config chosen = c;
    chosen.decimals = auto_decimals(r);
    chosen.decimals_given = true;
    return render(chosen, r);
  }
  switch (c.format) {
    case output_format::md: return render_markdown(document(c, r));
    case output_format::latex: return render_latex(document(c, r));
    case output_format::json: return render_json(c, r);
    case output_format::csv: return render_csv(c, r, false);
    case output_format::csv_long: return render_csv(c, r, true);
    case output_format::svg: return render_svg(c, r);
    case output_format::text: break;
  }
  return render_text(document(c, r));
}

}  // namespace attn_calc
