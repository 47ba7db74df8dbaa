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

/// Label cells for queries or notes: the label, and for LaTeX the label with an
/// index fallback ($q_{1}$, $h_{2}$) for pdfLaTeX when it is not ASCII.
inline std::vector<report::cell> label_cells(const std::vector<std::string>& labels, std::string_view stem,
                                             const std::vector<char>& masked = {}) {
  std::vector<report::cell> out;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const bool m = !masked.empty() && masked[i] == 0;
    const std::string suffix = m ? " (masked)" : "";
    out.emplace_back(labels[i] + suffix,
                     report::latex_label(labels[i], "$" + index_label(stem, i) + "$") + suffix);
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
  switch (c.score) {
    case score_kind::scaled_dot: {
      const std::string d = std::to_string(c.notes.cols);
      return {"scaled_dot, s_tj = q_t · h_j / √d with d = " + d,
              "scaled\\_dot, $s_{tj} = \\mathbf q_t \\cdot \\mathbf h_j / \\sqrt d$ with $d = " + d + "$"};
    }
    case score_kind::general:
      return {"general, s_tj = q_tᵀ W h_j", "general, $s_{tj} = \\mathbf q_t^{\\mathsf T} W \\mathbf h_j$"};
    case score_kind::additive:
      return {"additive, s_tj = vᵀ tanh(W1 h_j + W2 q_t)",
              "additive, $s_{tj} = \\mathbf v^{\\mathsf T} \\tanh(W_1 \\mathbf h_j + W_2 \\mathbf q_t)$"};
    case score_kind::dot: break;
  }
  return {"dot, s_tj = q_t · h_j", "dot, $s_{tj} = \\mathbf q_t \\cdot \\mathbf h_j$"};
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
                  report::latex_label(c.note_labels[j], "$" + index_label("h", j) + "$");
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
  return report::latex_label(c.query_labels[t], "$" + index_label("q", t) + "$");
}
inline std::string nl(const config& c, std::size_t j) {  // a note's label for LaTeX
  return report::latex_label(c.note_labels[j], "$" + index_label("h", j) + "$");
}

}  // namespace detail

/// The document that text, md and latex spell.
[[nodiscard]] inline std::vector<block> document(const config& c, const results& r) {
  using report::cell;
  using report::matrix_table;
  std::vector<block> doc;
  const std::size_t T = c.queries.rows, n = c.notes.rows, d = c.notes.cols;
  const auto queries = detail::label_cells(c.query_labels, "q");
  const auto notes = detail::label_cells(c.note_labels, "h");
  const auto notes_masked = detail::label_cells(c.note_labels, "h", c.mask);

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

  doc.push_back(detail::table_block(matrix_table(c.notes.view(), notes, detail::component_cells(d), -1, {},
                                                 {"Notes h_j (one row per note)", "Notes $\\mathbf h_j$"})));
  doc.push_back(detail::table_block(
      matrix_table(c.queries.view(), queries, detail::component_cells(c.queries.cols), -1, {},
                   {"Queries q_t (one row per query)", "Queries $\\mathbf q_t$"})));
  if (c.score == score_kind::general)
    doc.push_back(detail::table_block(matrix_table(
        c.W.view(), detail::component_cells(c.W.rows), detail::component_cells(c.W.cols), -1, {},
        {"W (query length × note length)", "$W$ (query length $\\times$ note length)"})));
  if (c.score == score_kind::additive) {
    doc.push_back(detail::table_block(matrix_table(c.W1.view(), detail::component_cells(c.W1.rows),
                                                   detail::component_cells(c.W1.cols), -1, {},
                                                   {"W1 (k × note length)", "$W_1$ ($k \\times$ note length)"})));
    doc.push_back(detail::table_block(matrix_table(c.W2.view(), detail::component_cells(c.W2.rows),
                                                   detail::component_cells(c.W2.cols), -1, {},
                                                   {"W2 (k × query length)", "$W_2$ ($k \\times$ query length)"})));
    const attn::MatrixView<const double> v(c.v.data(), 1, c.v.size());
    doc.push_back(detail::table_block(
        matrix_table(v, {cell("v", "$\\mathbf v$")}, detail::component_cells(c.v.size()), -1, {}, {"v", "$\\mathbf v$"})));
  }

  doc.push_back(detail::table_block(matrix_table(r.scores, queries, notes_masked, c.decimals, {},
                                                 {"Scores s_tj = score(q_t, h_j)",
                                                  "Scores $s_{tj} = \\operatorname{score}(\\mathbf q_t, \\mathbf h_j)$"})));
  bool none_kept = !c.mask.empty();
  for (const char m : c.mask) none_kept = none_kept && m == 0;
  const std::string sums = none_kept ? "every note is masked out, so every weight is 0" : "each row sums to 1";
  auto map = matrix_table(r.weights, queries, notes_masked, c.decimals, {},
                          {"Weights α_tj: the alignment map (" + sums + ")",
                           "Weights $\\alpha_{tj}$: the alignment map (" + sums + ")"});
  map.header.emplace_back("sum", "$\\sum_j$");
  for (std::size_t t = 0; t < T; ++t) map.rows[t].push_back(report::number_cell(r.row_sums[t], c.decimals));
  doc.push_back(detail::table_block(std::move(map)));
  doc.push_back(detail::table_block(matrix_table(
      r.contexts, queries, detail::component_cells(d), c.decimals, {},
      {"Contexts c_t = Σ_j α_tj h_j", "Contexts $\\mathbf c_t = \\sum_j \\alpha_{tj} \\mathbf h_j$"})));

  if (c.jacobian) {
    const cell bn = detail::bound(r.fd_notes.max_abs_error), bq = detail::bound(r.fd_query.max_abs_error);
    doc.push_back(detail::paragraph(
        {"Jacobians of the context, row i for c_i and column k for the k-th number of h_j or q, checked "
         "against central finite differences: worst |analytic − finite difference| " + bn.text +
             " over every ∂c/∂h_j and " + bq.text + " over every ∂c/∂q.",
         "Jacobians of the context, row $i$ for $c_i$ and column $k$ for the $k$-th number of "
         "$\\mathbf h_j$ or $\\mathbf q$, checked against central finite differences: worst "
         "$|\\text{analytic} - \\text{finite difference}|$ " + bn.latex +
             " over every $\\partial\\mathbf c/\\partial\\mathbf h_j$ and " + bq.latex +
             " over every $\\partial\\mathbf c/\\partial\\mathbf q$."}));
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t j = 0; j < n; ++j)
        doc.push_back(detail::table_block(matrix_table(
            r.note_jacobians[t][j], detail::component_cells(d, "c"), detail::component_cells(d), c.decimals, {},
            {"∂c/∂h_j for query " + c.query_labels[t] + ", note " + c.note_labels[j],
             "$\\partial\\mathbf c/\\partial\\mathbf h_j$ for query " + detail::ql(c, t) + ", note " +
                 detail::nl(c, j)})));
      doc.push_back(detail::table_block(matrix_table(
          r.query_jacobians[t], detail::component_cells(d, "c"), detail::component_cells(c.queries.cols),
          c.decimals, {},
          {"∂c/∂q for query " + c.query_labels[t],
           "$\\partial\\mathbf c/\\partial\\mathbf q$ for query " + detail::ql(c, t)})));
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

/// A LaTeX fragment (booktabs tables, amsmath): paste it into a document, or \input it.
[[nodiscard]] inline std::string render_latex(const std::vector<block>& doc) {
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
  j.key("notes").matrix(c.notes.view());
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
    if (c.jacobian) {
      j.key("jacobians").begin_object();
      j.key("dc_dh").begin_array();
      for (std::size_t n = 0; n < c.notes.rows; ++n) {
        j.begin_object();
        j.key("note").string(c.note_labels[n]);
        j.key("matrix").matrix(r.note_jacobians[t][n]);
        j.key("rounded");
        rounded_matrix(r.note_jacobians[t][n]);
        j.end_object();
      }
      j.end_array();
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
    j.key("dc_dh").begin_object();
    j.key("worst_abs_error").number(r.fd_notes.max_abs_error);
    j.key("worst_rel_error").number(r.fd_notes.max_rel_error);
    j.end_object();
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

/// The map as an SVG heatmap (attn::report::alignment_map_svg).
[[nodiscard]] inline std::string render_svg(const config& c, const results& r) {
  std::vector<std::string> notes;
  for (std::size_t j = 0; j < c.note_labels.size(); ++j)
    notes.push_back(c.note_labels[j] + (!c.mask.empty() && c.mask[j] == 0 ? " (masked)" : ""));
  return report::alignment_map_svg(r.weights, c.query_labels, notes, c.decimals);
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
