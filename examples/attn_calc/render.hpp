#pragma once
/// \file examples/attn_calc/render.hpp
/// attn-calc's outputs, built from the report headers (attn/report/...):
///   text, md, latex  the same document: inputs, scores, the map (weights, with row sums),
///                    contexts, and with --jacobian every Jacobian and its check;
///   json             inputs, options, per query the numbers at full precision and as printed,
///                    the Jacobians when asked, and a `checks` block;
///   csv, csv-long    the map: wide (a row per query) or long (a row per cell);
///   svg              the map as a heatmap.
/// Every number printed is rounded from the unrounded result (row sums too).

#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
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

inline report::cell settings_paragraph(const config& c) {
  const report::cell f = score_formula(c);
  const std::string beta = report::shortest(c.beta);
  std::string text = "Score: " + f.text + ". Sharpness β = " + beta + ".";
  std::string latex = "Score: " + f.latex + ". Sharpness $\\beta = " + beta + "$.";
  if (!c.mask.empty()) {
    std::string names, lnames;
    for (std::size_t j = 0; j < c.mask.size(); ++j)
      if (c.mask[j] == 0) {
        names += (names.empty() ? "" : ", ") + c.note_labels[j];
        lnames += (lnames.empty() ? "" : ", ") +
                  report::latex_label(c.note_labels[j], index_fallback("h", j));
      }
    if (names.empty()) {
      text += " The mask keeps every note.";
      latex += " The mask keeps every note.";
    } else {
      text += " Masked out (weight 0): " + names + ".";
      latex += " Masked out (weight 0): " + lnames + ".";
    }
  }
  return {text, latex};
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
inline report::table map_table(const config& c, const results& r, const std::vector<report::cell>& queries,
                               const std::vector<report::cell>& notes_masked) {
  bool none_kept = !c.mask.empty();
  for (const char m : c.mask) none_kept = none_kept && m == 0;
  const std::string sums = none_kept ? "every note is masked out, so every weight is 0" : "each row sums to 1";
  report::cell title{"Weights α_tj: the alignment map (" + sums + ")",
                     "Weights $\\alpha_{tj}$: the alignment map (" + sums + ")"};
  if (c.title) title = report::cell(*c.title);
  auto map = report::matrix_table(r.weights, queries, notes_masked, c.decimals, {}, title);
  map.header.emplace_back("sum", "$\\sum_j$");
  for (std::size_t t = 0; t < c.queries.rows; ++t)
    map.rows[t].push_back(report::number_cell(r.row_sums[t], c.decimals));
  return labelled(std::move(map), c, "map");
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
  return labelled(std::move(t), c, "exp");
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

/// The document that text, md and latex spell (--map-only: the map's table alone).
[[nodiscard]] inline std::vector<block> document(const config& c, const results& r) {
  using report::cell;
  using report::matrix_table;
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
    case unit_example::none: {
      const std::string what = "attn-calc: " + std::to_string(T) + (T == 1 ? " query" : " queries") +
                               " looking at " + std::to_string(n) + (n == 1 ? " note" : " notes");
      doc.push_back(detail::heading({what, what}));
      break;
    }
  }
  doc.push_back(detail::paragraph(detail::settings_paragraph(c)));

  if (kv) {
    table(matrix_table(c.notes.view(), notes, detail::component_cells(d), -1, {},
                       {"Keys k_j (one row per note; the scores look at them)", "Keys $\\mathbf k_j$"}),
          "keys");
    table(matrix_table(c.values.view(), notes, detail::component_cells(dv), -1, {},
                       {"Values v_j (one row per note; the contexts blend them)", "Values $\\mathbf v_j$"}),
          "values");
  } else {
    table(matrix_table(c.notes.view(), notes, detail::component_cells(d), -1, {},
                       {"Notes h_j (one row per note)", "Notes $\\mathbf h_j$"}),
          "notes");
  }
  table(matrix_table(c.queries.view(), queries, detail::component_cells(c.queries.cols), -1, {},
                     {"Queries q_t (one row per query)", "Queries $\\mathbf q_t$"}),
        "queries");
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
/// document of one table (--map-only) is that table alone, after \attnlabel's definition when
/// a label needs it.
[[nodiscard]] inline std::string render_latex(const std::vector<block>& doc) {
  if (doc.size() == 1 && doc[0].type == block::kind::table) {
    const std::string t = report::to_latex(doc[0].table);
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

/// JSON: inputs, options, per-query results (full precision and as printed), Jacobians, checks.
[[nodiscard]] inline std::string render_json(const config& c, const results& r) {
  report::json_writer j;
  const int dp = c.decimals;
  j.begin_object();
  j.key("tool").string("attn-calc");
  j.key("example");
  switch (c.example) {
    case unit_example::e3_alignment_map: j.string("Unit 18, section 1: \"I drink tea\" → मैं चाय पीता हूँ (E1, E3)"); break;
    case unit_example::e5_additive: j.string("Unit 18, section 1: an additive score by hand (E5)"); break;
    case unit_example::none: j.null(); break;
  }
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
  j.key("options").begin_object();
  j.key("beta").number(c.beta);
  j.key("mask");
  if (c.mask.empty()) {
    j.null();
  } else {
    j.begin_array(true);
    for (const char m : c.mask) j.boolean(m != 0);
    j.end_array();
  }
  j.key("decimals").integer(dp);
  j.key("jacobian").boolean(c.jacobian);
  if (c.no_attention) j.key("no_attention").boolean(true);
  j.end_object();

  auto rounded_matrix = [&](const attn::Matrix<double>& m) {
    j.begin_array();
    for (std::size_t i = 0; i < m.rows(); ++i) j.rounded(m.row(i), dp);
    j.end_array();
  };
  j.key("results").begin_array();
  for (std::size_t t = 0; t < c.queries.rows; ++t) {
    j.begin_object();
    j.key("query").string(c.query_labels[t]);
    j.key("scores").numbers(r.scores.row(t));
    j.key("weights").numbers(r.weights.row(t));
    j.key("context").numbers(r.contexts.row(t));
    j.key("rounded").begin_object();
    j.key("scores").rounded(r.scores.row(t), dp);
    j.key("weights").rounded(r.weights.row(t), dp);
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
  // |Σ_j α_tj − 1| over the rows; a row whose every note is masked sums to 0 by design
  bool any_kept = c.mask.empty();
  for (const char m : c.mask) any_kept = any_kept || m != 0;
  double worst_sum = 0;
  for (const double sum : r.row_sums) worst_sum = std::max(worst_sum, std::abs(sum - (any_kept ? 1.0 : 0.0)));
  j.key("worst_abs_row_sum_error").number(worst_sum);
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
/// (`i,j,query,note,weight`, a row per cell, i and j counted from 1).
[[nodiscard]] inline std::string render_csv(const config& c, const results& r, bool long_form) {
  if (!long_form) {
    report::table t;
    t.header.emplace_back("query");
    for (const auto& l : c.note_labels) t.header.emplace_back(l);
    for (std::size_t q = 0; q < c.queries.rows; ++q) {
      std::vector<report::cell> row{report::cell(c.query_labels[q])};
      for (std::size_t n = 0; n < c.notes.rows; ++n) row.emplace_back(report::fixed(r.weights(q, n), c.decimals));
      t.rows.push_back(std::move(row));
    }
    return report::to_csv(t);
  }
  std::string out = "i,j,query,note,weight\n";
  for (std::size_t q = 0; q < c.queries.rows; ++q)
    for (std::size_t n = 0; n < c.notes.rows; ++n)
      out += std::to_string(q + 1) + "," + std::to_string(n + 1) + "," + report::csv_field(c.query_labels[q]) +
             "," + report::csv_field(c.note_labels[n]) + "," + report::fixed(r.weights(q, n), c.decimals) + "\n";
  return out;
}

/// The map as an SVG heatmap: attn::report::alignment_map_options, masked notes hatched, and
/// what --title, --row-axis, --col-axis, --no-values and --scale ask for.
[[nodiscard]] inline std::string render_svg(const config& c, const results& r) {
  report::heatmap_options opt = report::alignment_map_options(r.weights, c.values_shown ? c.decimals : -1);
  for (const char m : c.mask) opt.masked.push_back(m == 0);
  if (c.title) opt.title = *c.title;
  if (c.row_axis) opt.row_axis = *c.row_axis;
  if (c.col_axis) opt.col_axis = *c.col_axis;
  opt.lo = c.scale_lo;
  opt.hi = c.scale_hi;
  return report::heatmap_svg(r.weights, c.query_labels, c.note_labels, opt);
}

/// The output c.format asks for.
[[nodiscard]] inline std::string render(const config& c, const results& r) {
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
