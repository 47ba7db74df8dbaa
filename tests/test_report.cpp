// The report headers: locale-independent numbers, display widths, tables in four spellings,
// JSON and the SVG heatmap.

#include <clocale>
#include <cstdint>
#include <locale>
#include <string>
#include <utility>
#include <vector>

#include "attn/attn.hpp"
#include "attn/report.hpp"
#include "attn_catch.hpp"
#include "well_formed.hpp"

namespace report = attn::report;

namespace {
/// A numpunct that writes a decimal comma, as a German or French locale would.
struct comma : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

/// stem1, stem2, …, stemN (appended: "q" + std::string draws g++'s false -Wrestrict at -O3)
std::vector<std::string> numbered(const std::string& stem, std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = 1; i <= n; ++i) {
    std::string label = stem;
    label += std::to_string(i);
    out.push_back(std::move(label));
  }
  return out;
}

/// The cells of a GitHub-flavoured Markdown table row: split at the '|' that no backslash escapes.
std::vector<std::string> markdown_cells(std::string_view line) {
  std::vector<std::string> cells{""};
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size()) {
      cells.back() += line.substr(i, 2);
      ++i;
    } else if (line[i] == '|') {
      cells.emplace_back();
    } else {
      cells.back() += line[i];
    }
  }
  return cells;
}

/// Labels that a careless writer turns into broken XML, JSON, CSV or LaTeX: markup, quotes,
/// control characters and escape sequences, bytes that are not UTF-8 (a lone continuation
/// byte, a truncated sequence, an overlong '/', an encoded surrogate, 0xFF), the
/// noncharacters U+FFFE and U+FFFF, and formula starts.
const std::vector<std::string> hostile_labels{
    "<tea & co>", "\"q'\"", "]]>", "a\nb\r", "\x01\x1b[31mred", "\x80", "\xC3\x28", "\xE0\xA4",
    "\xC0\xAF", "\xED\xA0\x80", "\xFF", "\xEF\xBF\xBE", "\xEF\xBF\xBF", "=1+1", "@SUM(A1)",
    "-2+3", "+x", "[x]", "50% & $5 #1 ~ ^ _ {} \\", "a|b", "<eos>", "--", "मैं"};
}  // namespace

TEST_CASE("fixed rounds half away from zero and never writes -0.000", "[report]") {
  CHECK(report::fixed(0.7361247243125939, 3) == "0.736");
  CHECK(report::fixed(0.09962364806231834, 3) == "0.100");
  CHECK(report::fixed(2.0, 3) == "2.000");
  CHECK(report::fixed(0.0625, 3) == "0.063");    // an exact tie rounds up, as taught in school
  CHECK(report::fixed(-0.0625, 3) == "-0.063");  // and away from zero below it
  CHECK(report::fixed(0.125, 2) == "0.13");
  CHECK(report::fixed(2.5, 0) == "3");
  CHECK(report::fixed(0.1, 1) == "0.1");
  CHECK(report::fixed(0.15, 1) == "0.1");  // 0.15 is 0.1499999999999999944... in binary: no tie
  CHECK(report::fixed(-0.0001, 3) == "0.000");
  CHECK(report::fixed(-0.0, 3) == "0.000");
  CHECK(report::fixed(-0.0004999, 3) == "0.000");
  CHECK(report::fixed(-0.0005, 3) == "-0.001");
  CHECK(report::fixed(1e300, 1).size() == 303);
  CHECK(report::fixed(0.5f, 2) == "0.50");
  CHECK(report::fixed(0.736L, 2) == "0.74");
  CHECK(report::fixed(std::numeric_limits<double>::quiet_NaN(), 3) == "nan");
  CHECK(report::fixed(-std::numeric_limits<double>::infinity(), 3) == "-inf");
  CHECK(report::fixed(1.5, -2) == "2");
}

TEST_CASE("fixed writes any number of decimals exactly, never NUL bytes", "[report]") {
  // 4500 decimals used to return the 4404 NUL bytes of a buffer too small for them
  const std::string one = report::fixed(1.0, 4500);
  CHECK(one.size() == 4502);
  CHECK(one.find('\0') == std::string::npos);
  CHECK(one == "1." + std::string(4500, '0'));
  // the largest double in fixed notation, with decimals: 309 digits, the point and 20 zeros
  const std::string big = report::fixed(-std::numeric_limits<double>::max(), 20);
  CHECK(big.size() == 1 + 309 + 1 + 20);
  CHECK(big.starts_with("-17976931348623157"));
  CHECK(big.ends_with("." + std::string(20, '0')));
  // the smallest subnormal has exactly 1074 decimals, the last a 5; more decimals add zeros
  const double tiny = std::numeric_limits<double>::denorm_min();
  const std::string exact = report::fixed(tiny, 1074);
  CHECK(exact.size() == 2 + 1074);
  CHECK(exact.starts_with("0.000"));
  CHECK(exact.ends_with("625"));
  CHECK(report::fixed(tiny, 1100) == exact + std::string(26, '0'));
  CHECK(report::fixed(tiny, 1073).ends_with("726563"));  // the tie at the 1074th rounds up
  CHECK(report::fixed(std::numeric_limits<float>::denorm_min(), 160).size() == 162);
  CHECK(report::fixed(0.5L, 20000) == "0.5" + std::string(19999, '0'));
  // ties round away from zero on their exact digits, carrying through nines
  CHECK(report::fixed(99.5, 0) == "100");
  CHECK(report::fixed(-0.5, 0) == "-1");
  CHECK(report::fixed(-9.75, 1) == "-9.8");
  CHECK(report::fixed(9.96875, 4) == "9.9688");
  CHECK(report::fixed(1 - 0x1p-16, 15) == "0.999984741210938");
}

TEST_CASE("shortest writes the shortest text that reads back exactly", "[report]") {
  CHECK(report::shortest(0.5) == "0.5");
  CHECK(report::shortest(0.1) == "0.1");
  CHECK(report::shortest(2.0) == "2");
  CHECK(report::shortest(-0.0) == "0");
  CHECK(report::shortest(1e-5) == "1e-05");
  CHECK(report::shortest(0.09962364806231834) == "0.09962364806231834");
  CHECK(report::shortest(std::numeric_limits<double>::infinity()) == "inf");
}

TEST_CASE("numbers ignore the global locale", "[report]") {
  const std::locale old = std::locale::global(std::locale(std::locale::classic(), new comma));
  const char* old_c = std::setlocale(LC_NUMERIC, nullptr);
  const std::string saved_c = old_c ? old_c : "C";
  std::setlocale(LC_NUMERIC, "de_DE.UTF-8");  // may not exist; the C++ locale above does
  const std::string f = report::fixed(1234.5678, 2);
  const std::string s = report::shortest(0.25);
  const std::string t = report::to_csv(report::matrix_table(attn::Matrix<double>{{0.5}}, {"q"}, {"h"}, 3));
  std::setlocale(LC_NUMERIC, saved_c.c_str());
  std::locale::global(old);
  CHECK(f == "1234.57");
  CHECK(s == "0.25");
  CHECK(t == ",h\nq,0.500\n");
}

TEST_CASE("display_width measures what a terminal shows", "[report]") {
  CHECK(report::display_width("tea") == 3);
  CHECK(report::display_width("मैं") == 1);   // म and two combining marks
  CHECK(report::display_width("चाय") == 3);
  CHECK(report::display_width("पीता") == 4);  // ी and ा are spacing vowel signs
  CHECK(report::display_width("हूँ") == 1);
  CHECK(report::display_width("日本") == 4);
  CHECK(report::display_width("é") == 1);     // e + combining acute
  CHECK(report::display_width("\xFF") == 1);   // not UTF-8: one column per byte
  CHECK(report::pad_right("मैं", 4) == "मैं   ");
  CHECK(report::pad_left("पीता", 5) == " पीता");
}

TEST_CASE("a table in text, Markdown, LaTeX and CSV", "[report]") {
  const attn::Matrix<double> m{{0.736, -0.0367}, {0, 1}};
  auto t = report::matrix_table(m, {"मैं", "tea"}, {"a|b", "x_1"}, 3, {}, {"Title"});

  CHECK(report::to_text(t) ==
        "Title\n"
        "       a|b     x_1\n"
        "---  -----  ------\n"
        "मैं    0.736  -0.037\n"
        "tea  0.000   1.000\n");
  CHECK(report::to_markdown(t) ==
        "**Title**\n\n"
        "|     |  a\\|b |    x_1 |\n"
        "| :-- | ----: | -----: |\n"
        "| मैं   | 0.736 | -0.037 |\n"
        "| tea | 0.000 |  1.000 |\n");
  CHECK(report::to_csv(t) == ",a|b,x_1\nमैं,0.736,-0.037\ntea,0.000,1.000\n");
  const std::string tex = report::to_latex(t);
  CHECK(tex.find("\\caption{Title}") != std::string::npos);
  CHECK(tex.find("\\begin{tabular}{lrr}") != std::string::npos);
  CHECK(tex.find("a\\textbar{}b & x\\_1 \\\\") != std::string::npos);
  CHECK(tex.find("\\attnlabel{मैं}{?} & 0.736 & $-$0.037 \\\\") != std::string::npos);
  CHECK(count(tex, "\\toprule") == 1);
  CHECK(count(tex, "\\bottomrule") == 1);

  t.rows[0].pop_back();
  CHECK_THROWS_AS(report::to_text(t), attn::dimension_error);
}

TEST_CASE("escaping for LaTeX, Markdown and CSV", "[report]") {
  CHECK(report::latex_escape("50% & $x_1^2$ #{~}\\") ==
        "50\\% \\& \\$x\\_1\\textasciicircum{}2\\$ \\#\\{\\textasciitilde{}\\}\\textbackslash{}");
  CHECK(report::latex_label("tea", "$h_{3}$") == "tea");
  CHECK(report::latex_label("चाय_1", "$q_{2}$") == "\\attnlabel{चाय\\_1}{$q_{2}$}");
  CHECK(report::csv_field("a,b") == "\"a,b\"");
  CHECK(report::csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(report::csv_field(" x") == "\" x\"");
  CHECK(report::csv_field("चाय") == "चाय");
  CHECK(report::detail::markdown_escape("h_j *b* _x_ `c`") == "h_j \\*b\\* \\_x\\_ \\`c\\`");
}

TEST_CASE("json_writer writes deterministic, valid JSON", "[report]") {
  report::json_writer j;
  j.begin_object();
  j.key("label").string("चाय \"tea\"\n\x01");
  j.key("weights").numbers(attn::Vector<double>{0.1, 0.5, 2});
  j.key("bad").number(std::numeric_limits<double>::quiet_NaN());
  j.key("map").matrix(attn::Matrix<double>{{1, 0}, {0, 1}});
  j.key("empty").begin_array().end_array();
  j.key("rounded").rounded(attn::Vector<double>{-0.0001, 0.0625}, 3);
  j.end_object();
  REQUIRE(j.complete());
  CHECK(j.str() ==
        "{\n"
        "  \"label\": \"चाय \\\"tea\\\"\\n\\u0001\",\n"
        "  \"weights\": [0.1, 0.5, 2],\n"
        "  \"bad\": null,\n"
        "  \"map\": [\n"
        "    [1, 0],\n"
        "    [0, 1]\n"
        "  ],\n"
        "  \"empty\": [],\n"
        "  \"rounded\": [\"0.000\", \"0.063\"]\n"
        "}\n");
  CHECK(report::json_quote("\xC3\x28") == "\"\xEF\xBF\xBD(\"");  // invalid UTF-8 → U+FFFD
  report::json_writer bad;
  bad.begin_object();
  CHECK_THROWS_AS(bad.string("no key"), std::logic_error);
}

TEST_CASE("the SVG heatmap is self-contained and deterministic", "[report]") {
  const attn::Matrix<double, 4, 3> states{{2, 0.5, 0}, {0, 0.5, 2}, {0, 2, 0.5}, {1.5, 1.5, 0}};
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const auto r = attn::align(states, notes, attn::dot);
  const std::vector<std::string> rows{"मैं", "चाय", "पीता", "हूँ"}, cols{"I", "drink", "<tea & co>"};
  const std::string a = report::alignment_map_svg(r.weights, rows, cols);
  const std::string b = report::alignment_map_svg(r.weights, rows, cols);
  CHECK(a == b);
  CHECK(a.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK(a.ends_with("</svg>\n"));
  CHECK(a.find("<script") == std::string::npos);
  CHECK(a.find("href") == std::string::npos);  // nothing external
  CHECK(a.find("&lt;tea &amp; co&gt;") != std::string::npos);
  CHECK(a.find(">चाय</text>") != std::string::npos);
  CHECK(a.find(">0.736</text>") != std::string::npos);
  CHECK(count(a, "<rect ") == 12 + 2);  // the cells, the background and the legend bar
  CHECK(count(a, "<g") == count(a, "</g>"));
  CHECK(count(a, "<text") == count(a, "</text>"));
  CHECK_THROWS_AS(report::heatmap_svg(r.weights, {"x"}, cols), attn::dimension_error);
  report::heatmap_options flat;
  flat.lo = flat.hi = 1;
  CHECK_THROWS_AS(report::heatmap_svg(r.weights, rows, cols, flat), attn::domain_error);
}

TEST_CASE("the heatmap's colours darken with the value and keep text readable", "[report]") {
  double previous = 2;
  for (int k = 0; k <= 20; ++k) {
    const auto c = report::detail::scale_colour(k / 20.0);
    const double l = report::detail::luminance(c);
    CHECK(l < previous);
    previous = l;
    // white or black text, whichever contrasts more, always reaches WCAG's 4.5:1
    const bool white = std::string(report::detail::text_colour_on(c)) == "#ffffff";
    const double ratio = white ? 1.05 / (l + 0.05) : (l + 0.05) / 0.05;
    CHECK(ratio >= 4.5);
  }
}

TEST_CASE("the diverging scale: blue below the middle, white at it, red above, darker away from it", "[report]") {
  using report::colour_scale;
  // lightness falls evenly away from the middle on both sides, so |value| reads as darkness
  double previous_up = 2, previous_down = 2;
  for (int k = 0; k <= 10; ++k) {  // from the middle (t = 0.5) out to each end
    const double up = report::detail::luminance(report::detail::scale_colour(0.5 + k / 20.0, colour_scale::diverging));
    const double down = report::detail::luminance(report::detail::scale_colour(0.5 - k / 20.0, colour_scale::diverging));
    CHECK(up < previous_up);
    CHECK(down < previous_down);
    previous_up = up;
    previous_down = down;
    for (const double t : {0.5 + k / 20.0, 0.5 - k / 20.0}) {
      const auto c = report::detail::scale_colour(t, colour_scale::diverging);
      const double l = report::detail::luminance(c);
      const bool white = std::string(report::detail::text_colour_on(c)) == "#ffffff";
      CHECK((white ? 1.05 / (l + 0.05) : (l + 0.05) / 0.05) >= 4.5);
    }
  }
  const auto blue = report::detail::scale_colour(0, colour_scale::diverging);
  const auto red = report::detail::scale_colour(1, colour_scale::diverging);
  CHECK(blue.b > blue.r);
  CHECK(red.r > red.b);
  // a heatmap on it: the gradient's stops, a cell at lo, the middle and hi, and the legend's title
  const attn::Matrix<double> m{{-1, 0, 1}};
  report::heatmap_options opt;
  opt.scale = colour_scale::diverging;
  opt.lo = -1;
  opt.legend_title = "PE value";
  const std::string svg = report::heatmap_svg(m, {"p"}, {"a", "b", "c"}, opt);
  CHECK(attn_test::xml_problem(svg) == "");
  for (const char* colour : {"#2166ac", "#f7f7f7", "#b2182b"}) {
    CHECK(svg.find(std::string("stop-color=\"") + colour + "\"") != std::string::npos);
    CHECK(svg.find(std::string("fill=\"") + colour + "\"") != std::string::npos);
  }
  CHECK(svg.find(">PE value</text>") != std::string::npos);
  // the default stays the sequential scale, without a legend title
  const std::string plain = report::heatmap_svg(m, {"p"}, {"a", "b", "c"});
  CHECK(plain.find("#2166ac") == std::string::npos);
  CHECK(plain.find("font-style=\"italic\">") == std::string::npos);
}

TEST_CASE("the well-formedness checkers find what they are for", "[report]") {
  CHECK(attn_test::xml_problem("<a b=\"1\"><c/>x &amp; &#x1F600;</a>\n").empty());
  CHECK_FALSE(attn_test::xml_problem("<a><b></a>").empty());
  CHECK_FALSE(attn_test::xml_problem("<a>\xEF\xBF\xBE</a>").empty());   // U+FFFE
  CHECK_FALSE(attn_test::xml_problem("<a>\xC3\x28</a>").empty());       // not UTF-8
  CHECK_FALSE(attn_test::xml_problem("<a>\x1b</a>").empty());            // a control character
  CHECK_FALSE(attn_test::xml_problem("<a x=\"1\" x=\"2\"/>").empty());
  CHECK_FALSE(attn_test::xml_problem("<a>&nbsp;</a>").empty());
  CHECK(attn_test::json_problem("{\"a\": [1, -0.5e-3, \"\\u00e9\", null]}\n").empty());
  CHECK_FALSE(attn_test::json_problem("{\"a\": \"\x01\"}").empty());
  CHECK_FALSE(attn_test::json_problem("[1, 2,]").empty());
  CHECK_FALSE(attn_test::json_problem("[01]").empty());
  CHECK(attn_test::read_csv("a,\"b,\"\"c\"\"\"\n,d\n") ==
        std::vector<std::vector<std::string>>{{"a", "b,\"c\""}, {"", "d"}});
  CHECK_THROWS(attn_test::read_csv("a\"b\n"));
}

TEST_CASE("heatmap_svg gives well-formed XML for every label it accepts", "[report]") {
  // labels that are not UTF-8, or hold U+FFFE/U+FFFF, used to go into the XML as they were
  const std::size_t n = hostile_labels.size();
  attn::Matrix<double> m(2, n, 0.25);
  m(0, 0) = std::numeric_limits<double>::quiet_NaN();
  report::heatmap_options opt;
  for (const std::string& label : hostile_labels) {
    INFO(label);
    opt.title = opt.row_axis = opt.col_axis = label;
    const std::string svg = report::heatmap_svg(m, {label, label}, hostile_labels, opt);
    CHECK(attn_test::xml_problem(svg) == "");
  }
  // each character XML cannot hold becomes U+FFFD; the markup characters become entities
  CHECK(report::detail::xml_escape("a\xEF\xBF\xBE" "b\xFF<") == "a\xEF\xBF\xBD" "b\xEF\xBF\xBD&lt;");
  CHECK(report::detail::xml_escape("\xF0\x9F\x98\x80\t") == "\xF0\x9F\x98\x80\t");
  // an id that could not be referenced (url(#…)) or would break an attribute is refused
  for (const char* bad : {"", "1x", "a b", "a\"b", "x#y", "m\xC3\xA4p"}) {
    opt.id = bad;
    CHECK_THROWS_AS(report::heatmap_svg(m, {"a", "b"}, hostile_labels, opt), attn::domain_error);
  }
  opt.id = "map_2.a-b";
  CHECK(report::heatmap_svg(m, {"a", "b"}, hostile_labels, opt).find("id=\"map_2.a-b-scale\"") != std::string::npos);
}

TEST_CASE("json_writer gives valid JSON for every string it accepts", "[report]") {
  report::json_writer j;
  j.begin_object();
  for (const std::string& label : hostile_labels) j.key(label).string(label);
  j.key("numbers").numbers(std::vector<double>{std::numeric_limits<double>::infinity(), -0.0, 1e-320, 1.7976931348623157e308});
  j.end_object();
  CHECK(attn_test::json_problem(j.str()) == "");
}

TEST_CASE("Markdown, CSV and LaTeX stay well-formed, and print every label as typed", "[report]") {
  // Markdown: ~ (strikethrough, pandoc's subscript), & (entities), $ (math), ^ (superscript)
  CHECK(report::detail::markdown_escape("~~x~~ &amp; $x$ 2^3^") == "\\~\\~x\\~\\~ \\&amp; \\$x\\$ 2\\^3\\^");
  const std::size_t n = hostile_labels.size();
  const attn::Matrix<double> m(n, n, -0.5);
  const std::vector<report::cell> labels = report::to_cells(hostile_labels);
  const report::table t = report::matrix_table(m, labels, labels, 3, {}, {"T"});
  const std::string md = report::to_markdown(t);
  std::size_t at = md.find("\n|");
  std::size_t rows = 0;
  while (at != std::string::npos) {
    const std::size_t end = md.find('\n', at + 1);
    CHECK(markdown_cells(std::string_view(md).substr(at + 1, end - at - 1)).size() == n + 3);
    ++rows;
    at = md.find("\n|", end);
  }
  CHECK(rows == n + 2);  // the header, the rule, the rows
  CHECK(md.find("\xFF") == std::string::npos);  // bytes that are not UTF-8 became U+FFFD

  // CSV: read back as the same cells, with a ' before each formula start (OWASP), none before
  // a plain number
  const auto records = attn_test::read_csv(report::to_csv(t));
  REQUIRE(records.size() == n + 1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& label = hostile_labels[i];
    INFO(label);
    const std::string expected = report::detail::valid_utf8(label);
    const bool formula = std::string_view("=+-@").find(label.front()) != std::string_view::npos;
    CHECK(records[0][i + 1] == (formula ? "'" : "") + expected);
    CHECK(records[i + 1][0] == (formula ? "'" : "") + expected);
    CHECK(records[i + 1][1] == "-0.500");
  }
  CHECK(report::csv_field("-1e-5") == "-1e-5");
  CHECK(report::csv_field("-inf") == "'-inf");
  CHECK(report::csv_field("=HYPERLINK(\"x\")") == "\"'=HYPERLINK(\"\"x\"\")\"");
  CHECK(report::csv_field("\tx") == "'\tx");

  // LaTeX: < > | " print as typed under pdfLaTeX's OT1 fonts (not as ¡ ¿ — ”), a cell that
  // starts with [ is not the optional argument of \\, ligatures are broken
  CHECK(report::latex_escape("<eos>") == "\\textless{}eos\\textgreater{}");
  CHECK(report::latex_escape("a|b \"q\"") == "a\\textbar{}b \\texttt{\\char34}q\\texttt{\\char34}");
  CHECK(report::latex_escape("[x]") == "{[}x{]}");
  CHECK(report::latex_escape("a--b ,,c'' ``d !`e") == "a-{}-b ,{},c'{}' `{}`d !{}`e");
  CHECK(report::latex_label("[चाय]", "$q_{1}$") == "\\attnlabel{{[}चाय{]}}{$q_{1}$}");
  CHECK(report::latex_label("a\xFF", "?") == "\\attnlabel{a\xEF\xBF\xBD}{?}");
  report::table labelled = t;
  labelled.label = "tab:attn-map";
  const std::string tex = report::to_latex(labelled);
  CHECK(tex.find("  \\caption{T}\n  \\label{tab:attn-map}\n") != std::string::npos);
  CHECK(report::to_latex(t).find("\\label") == std::string::npos);
  for (const std::string& row : {std::string("\n    {[}x{]} & "), std::string("\n    \\textless{}eos\\textgreater{} & ")})
    CHECK(tex.find(row) != std::string::npos);
  for (const char* bad : {"a b", "x}", "m\\n", "é"}) {
    labelled.label = bad;
    CHECK_THROWS_AS(report::to_latex(labelled), attn::domain_error);
  }
}

namespace {
/// The values of every attribute `name`="…" in an SVG, as integers.
std::vector<int> int_attributes(const std::string& svg, const std::string& name) {
  std::vector<int> out;
  const std::string key = " " + name + "=\"";
  for (auto at = svg.find(key); at != std::string::npos; at = svg.find(key, at + 1))
    out.push_back(std::stoi(svg.substr(at + key.size())));
  return out;
}
}  // namespace

TEST_CASE("heatmap_svg draws masked cells hatched and names them in the legend", "[report]") {
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Matrix<double, 4, 3> states{{2, 0.5, 0}, {0, 0.5, 2}, {0, 2, 0.5}, {1.5, 1.5, 0}};
  const bool keep[] = {true, true, false};
  const auto r = attn::align(states, notes, attn::dot, {.mask = std::span<const bool>(keep, 3)});
  const std::vector<std::string> rows{"a", "b", "c", "d"}, cols{"I", "drink", "tea"};
  report::heatmap_options opt;
  opt.masked = {false, false, true};  // one per column: attend's mask
  const std::string svg = report::heatmap_svg(r.weights, rows, cols, opt);
  CHECK(attn_test::xml_problem(svg) == "");
  CHECK(count(svg, "<pattern id=\"attn-masked\"") == 1);
  CHECK(count(svg, "fill=\"url(#attn-masked)\"") == 4 + 1);  // the column's four cells, the swatch
  CHECK(count(svg, ": masked</title>") == 4);
  CHECK(count(svg, ">masked</text>") == 1);                 // the legend names it
  CHECK(count(svg, ">0.000</text>") == 0);                  // a masked cell is not drawn as a 0
  // a masked cell holds no text, so it does not widen the cells ("masked" made them 69 px, not 61)
  const auto cell_width = [](const std::string& s) { return int_attributes(s.substr(s.find("<rect x=")), "width").front(); };
  CHECK(cell_width(svg) == cell_width(report::heatmap_svg(r.weights, rows, cols)));
  // one entry per cell
  opt.masked = std::vector<bool>(12, false);
  opt.masked[5] = true;
  CHECK(count(report::heatmap_svg(r.weights, rows, cols, opt), "fill=\"url(#attn-masked)\"") == 1 + 1);
  opt.masked = {true, false};
  CHECK_THROWS_AS(report::heatmap_svg(r.weights, rows, cols, opt), attn::dimension_error);
  // NaN cells are grey and named too; without either the legend is the scale alone
  attn::Matrix<double> nan_map(r.weights.view());
  nan_map(0, 0) = std::numeric_limits<double>::quiet_NaN();
  opt.masked.clear();
  CHECK(count(report::heatmap_svg(nan_map, rows, cols, opt), ">NaN</text>") == 1);
  const std::string plain = report::heatmap_svg(r.weights, rows, cols, opt);
  CHECK(plain.find("pattern") == std::string::npos);
  CHECK(plain.find(">NaN</text>") == std::string::npos);
}

TEST_CASE("heatmap_svg with min_cell wraps a wide map into bands, masks and tooltips kept", "[report]") {
  // 2 × 40 in 300 px: cells of 12 px leave room for 13 columns a band, so 4 bands (13, 13, 13, 1)
  attn::Matrix<double> w(2, 40);
  std::vector<std::string> rows{"a", "b"}, cols;
  for (std::size_t j = 0; j < 40; ++j) {
    w(0, j) = static_cast<double>(j) / 40;
    w(1, j) = 1 - w(0, j);
    cols.push_back("k" + std::to_string(j + 1));
  }
  report::heatmap_options opt;
  opt.max_width = 300;
  const std::string unwrapped = report::heatmap_svg(w, rows, cols, opt);
  opt.min_cell = 12;
  opt.masked = std::vector<bool>(40, false);
  opt.masked[39] = true;  // one per column: the last band's one column
  const std::string svg = report::heatmap_svg(w, rows, cols, opt);
  CHECK(attn_test::xml_problem(svg) == "");
  CHECK(int_attributes(unwrapped.substr(unwrapped.find("<rect x=")), "width").front() < 12);
  CHECK(int_attributes(svg, "width").front() <= 300);
  CHECK(count(svg, "<title>") == 80);                            // a tooltip per cell
  CHECK(count(svg, "<title>b \xE2\x86\x92 k40: masked</title>") == 1);
  CHECK(count(svg, "fill=\"url(#attn-masked)\"") == 2 + 1);     // k40's two cells, the swatch
  CHECK(count(svg, ">a</text>") == 4);                           // every row's label in every band
  CHECK(count(svg, ">b</text>") == 4);
  CHECK(count(svg, "url(#attn-scale)") == 1);                    // one legend
  // one entry per cell: b's k14 (the second band's first column) masked
  opt.masked = std::vector<bool>(80, false);
  opt.masked[40 + 13] = true;
  CHECK(count(report::heatmap_svg(w, rows, cols, opt), "<title>b \xE2\x86\x92 k14: masked</title>") == 1);
  // a map that fits is drawn exactly as without min_cell
  opt.masked.clear();
  opt.max_width = 0;
  CHECK(report::heatmap_svg(w, rows, cols, opt) == [&] {
    report::heatmap_options plain = opt;
    plain.min_cell = 0;
    return report::heatmap_svg(w, rows, cols, plain);
  }());
}

TEST_CASE("the alignment map's title says what its rows sum to", "[report]") {
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Matrix<double, 2, 3> states{{2, 0.5, 0}, {0, 0.5, 2}};
  const std::vector<std::string> rows{"a", "b"}, cols{"I", "drink", "tea"};
  const auto title = [&](const attn::Matrix<double>& w) {
    const std::string svg = report::alignment_map_svg(w, rows, cols);
    const auto at = svg.find("<title id=\"attn-title\">") + 23;
    return svg.substr(at, svg.find("</title>", at) - at);
  };
  const attn::Matrix<double> kept(attn::align(states, notes, attn::dot).weights.view());
  CHECK(title(kept) == "Alignment map \xCE\xB1 (each row sums to 1)");
  // every note masked: rows of zeros under a title that said each row sums to 1
  const bool none[] = {false, false, false};
  const attn::Matrix<double> nothing(
      attn::align(states, notes, attn::dot, {.mask = std::span<const bool>(none, 3)}).weights.view());
  CHECK(title(nothing) == "Alignment map \xCE\xB1 (nothing kept: every weight is 0)");
  attn::Matrix<double> mixed(kept);
  for (std::size_t j = 0; j < 3; ++j) mixed(1, j) = 0;
  CHECK(title(mixed) == "Alignment map \xCE\xB1 (each row sums to 1, or is 0 where nothing is kept)");
  mixed(1, 0) = std::numeric_limits<double>::quiet_NaN();
  CHECK(title(mixed) == "Alignment map \xCE\xB1");
  // float weights are held to float's rounding
  const attn::Matrix<float, 2, 3> fstates{{2, 0.5f, 0}, {0, 0.5f, 2}};
  const attn::Matrix<float, 3, 3> fnotes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  CHECK(report::alignment_map_options(attn::align(fstates, fnotes, attn::dot).weights).title ==
        "Alignment map \xCE\xB1 (each row sums to 1)");
}

TEST_CASE("a 35x30 map fits a 760-pixel lesson column and stays legible", "[report]") {
  // E6's map: 35 words written, 30 read. Its cells used to be 60 px wide: a 1,900-px picture
  // that a lesson column shrinks to 40 %, its 13-px values to 5 px.
  attn::Matrix<double> w(35, 30);
  const std::vector<std::string> rows = numbered("q", 35), cols = numbered("h", 30);
  for (std::size_t i = 0; i < 35; ++i)
    for (std::size_t j = 0; j < 30; ++j) w(i, j) = (i % 30 == j ? 0.71 : 0.01);
  const std::string svg = report::alignment_map_svg(w, rows, cols);
  CHECK(attn_test::xml_problem(svg) == "");
  const int width = int_attributes(svg, "width").front();
  CHECK(width <= 760);
  CHECK(width >= 600);  // and uses the column
  for (const int size : int_attributes(svg, "font-size")) CHECK(size >= 12);
  for (const auto& label : rows) CHECK(count(svg, ">" + label + "</text>") == 1);
  for (const auto& label : cols) CHECK(count(svg, ">" + label + "</text>") == 1);
  CHECK(count(svg, "rotate(-90") == 30 + 1);      // the column labels read upwards, as the row axis
  CHECK(count(svg, ">0.710</text>") == 0);        // 19-px cells: the values are in the tooltips
  CHECK(count(svg, ": 0.710</title>") == 35);
  // cells are square and at least a label high
  const auto rect = svg.find("<rect x=", svg.find("<g>"));
  const int cell = int_attributes(svg.substr(rect), "width").front();
  CHECK(cell >= 14);
  CHECK(int_attributes(svg.substr(rect), "height").front() == cell);
  // max_width = 0: no limit, the values in 60-px cells as before
  auto opt = report::alignment_map_options(w);
  opt.max_width = 0;
  const std::string wide = report::heatmap_svg(w, rows, cols, opt);
  CHECK(int_attributes(wide, "width").front() > 1800);
  CHECK(count(wide, ">0.710</text>") == 35);
}

TEST_CASE("a 512x512 map is a few megabytes, not 61", "[report]") {
  // Every cell was a group with a tooltip and a value: 61 MB. Past 4096 cells, a cell is a
  // stroke in one path per colour (and a run of one colour one stroke). Uniform random values
  // are the worst case: no runs.
  attn::Matrix<double> w(512, 512);
  std::uint64_t state = 88172645463325252u;
  for (std::size_t i = 0; i < w.size(); ++i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
    w.data()[i] = static_cast<double>(state >> 11) * 0x1p-53;
  }
  const std::vector<std::string> labels = numbered("w", 512);
  auto opt = report::alignment_map_options(w);
  opt.masked = std::vector<bool>(512, false);
  opt.masked[7] = true;
  const std::string svg = report::heatmap_svg(w, labels, labels, opt);
  CHECK(svg.size() < 4'000'000);
  CHECK(attn_test::xml_problem(svg) == "");
  CHECK(int_attributes(svg, "width").front() <= 760);
  CHECK(svg.find("<title>") == std::string::npos);        // no tooltips
  CHECK(count(svg, "<path stroke=") <= 256 + 2);           // one path per colour at most
  CHECK(count(svg, "url(#attn-masked-cells)") == 1);      // the masked column, hatched
  CHECK(count(svg, ">masked</text>") == 1);
  // a map of attention (mostly near 0) is far smaller
  attn::Matrix<double> peaked(512, 512, 0.0);
  for (std::size_t i = 0; i < 512; ++i) peaked(i, (i * 7) % 512) = 1;
  CHECK(report::alignment_map_svg(peaked, labels, labels).size() < 100'000);
}

namespace {
/// The value of attribute `name` of the element whose start tag ends just before `marker`
/// (">head 1</text>": the <text> that holds it), or with a tooltip `marker` ("<title>…") of
/// the cell's <rect> after it.
int attribute_near(const std::string& svg, const std::string& marker, const std::string& name) {
  const auto at = svg.find(marker);
  REQUIRE(at != std::string::npos);
  const auto start = marker.starts_with("<title>") ? svg.find("<rect", at) : svg.rfind('<', at);
  const auto found = int_attributes(svg.substr(start, svg.find('>', start + 1) - start), name);
  REQUIRE_FALSE(found.empty());
  return found.front();
}

/// The fill of the cell whose tooltip is `tooltip`.
std::string fill_of(const std::string& svg, const std::string& tooltip) {
  const auto at = svg.find("<title>" + tooltip + "</title>");
  REQUIRE(at != std::string::npos);
  const auto fill = svg.find("fill=\"", at) + 6;
  return svg.substr(fill, svg.find('"', fill) - fill);
}
}  // namespace

TEST_CASE("heatmap_grid_svg: the maps of many heads on one colour scale, one legend, shared labels", "[report]") {
  // two heads' 3×3 maps; head 2 holds 0.5 where head 1 holds 0.25 in cell (0, 0), and a value
  // beyond the scale's top
  attn::Matrix<double> h1{{0.25, 0.5, 0.25}, {0.1, 0.8, 0.1}, {0.5, 0.5, 0}};
  attn::Matrix<double> h2{{0.5, 0.25, 0.25}, {1, 0, 0}, {0, 0.5, 0.5}};
  const std::vector<std::string> rows{"r1", "r2", "r3"}, cols{"c1", "c2", "c3"};
  const std::vector<report::heatmap_panel> panels{{h1.view(), "head 1"}, {h2.view(), "head <2>"}};
  report::heatmap_options opt;
  opt.title = "Two heads";
  opt.hi = 0.8;
  const std::string svg = report::heatmap_grid_svg(panels, rows, cols, opt);
  CHECK(attn_test::xml_problem(svg) == "");
  CHECK(svg == report::heatmap_grid_svg(panels, rows, cols, opt));  // the same bytes every time
  CHECK(count(svg, "<linearGradient") == 1);                 // one scale
  CHECK(count(svg, "fill=\"url(#attn-scale)\"") == 1);       // one legend bar
  CHECK(count(svg, ">0.8</text>") == 1);                     // the top tick: hi
  CHECK(count(svg, ">head 1</text>") == 1);                  // each map under its title
  CHECK(count(svg, ">head &lt;2&gt;</text>") == 1);
  for (const auto& c : cols) CHECK(count(svg, ">" + c + "</text>") == 2);  // above each map
  for (const auto& r : rows) CHECK(count(svg, ">" + r + "</text>") == 1);  // left of the row of maps
  CHECK(count(svg, "<title>head 1: ") == 9);
  CHECK(count(svg, "<title>head &lt;2&gt;: ") == 9);
  // one scale: equal values, equal colours across maps; 1 beyond hi = 0.8 takes the darkest
  CHECK(fill_of(svg, "head 1: r1 → c2: 0.500") == fill_of(svg, "head &lt;2&gt;: r1 → c1: 0.500"));
  CHECK(fill_of(svg, "head 1: r2 → c2: 0.800") == fill_of(svg, "head &lt;2&gt;: r2 → c1: 1.000"));
  CHECK(fill_of(svg, "head 1: r1 → c1: 0.250") != fill_of(svg, "head 1: r1 → c2: 0.500"));
  // side by side: the second map starts right of the first, on the same line
  const int x1 = attribute_near(svg, "<title>head 1: r1 → c1", "x");
  const int x2 = attribute_near(svg, "<title>head &lt;2&gt;: r1 → c1", "x");
  CHECK(x2 >= x1 + 3 * 60);
  CHECK(attribute_near(svg, "<title>head 1: r1 → c1", "y") == attribute_near(svg, "<title>head &lt;2&gt;: r1 → c1", "y"));
  // one column of maps: stacked, the row labels beside each map
  const std::string stacked = report::heatmap_grid_svg(panels, rows, cols, opt, 1);
  CHECK(attribute_near(stacked, "<title>head 1: r1 → c1", "x") == attribute_near(stacked, "<title>head &lt;2&gt;: r1 → c1", "x"));
  CHECK(attribute_near(stacked, "<title>head &lt;2&gt;: r1 → c1", "y") > attribute_near(stacked, "<title>head 1: r3 → c1", "y"));
  for (const auto& r : rows) CHECK(count(stacked, ">" + r + "</text>") == 2);
  CHECK(int_attributes(stacked, "width").front() < int_attributes(svg, "width").front());

  // masked cells (a causal mask) are hatched in every map, and the legend names them once
  opt.masked = {false, true, true, false, false, true, false, false, false};
  const std::string causal = report::heatmap_grid_svg(panels, rows, cols, opt);
  CHECK(count(causal, "fill=\"url(#attn-masked)\"") == 2 * 3 + 1);
  CHECK(count(causal, ": masked</title>") == 6);
  CHECK(count(causal, ">masked</text>") == 1);
  CHECK(count(causal, "<pattern id=\"attn-masked\"") == 1);

  // what does not fit is refused, naming the function
  CHECK_THROWS_WITH(report::heatmap_grid_svg({}, rows, cols), "attn::report::heatmap_grid_svg: the list of maps is empty");
  const attn::Matrix<double> small(2, 3, 0.5);
  CHECK_THROWS_AS(report::heatmap_grid_svg({{h1.view(), "a"}, {small.view(), "b"}}, rows, cols), attn::dimension_error);
  report::heatmap_options flat;
  flat.lo = flat.hi = 1;
  CHECK_THROWS_AS(report::heatmap_grid_svg(panels, rows, cols, flat), attn::domain_error);
  opt.masked = {true, false};
  CHECK_THROWS_AS(report::heatmap_grid_svg(panels, rows, cols, opt), attn::dimension_error);
}

TEST_CASE("heatmap_grid_svg fits a lesson column: maps wrap into rows, large maps shrink", "[report]") {
  // 8 heads of a 4-word sentence: too wide in one row of 760 px, so rows of equal counts
  std::vector<attn::Matrix<double>> maps(8, attn::Matrix<double>(4, 4, 0.25));
  std::vector<report::heatmap_panel> panels;
  for (std::size_t i = 0; i < maps.size(); ++i) panels.push_back({maps[i].view(), "head " + std::to_string(i + 1)});
  const std::vector<std::string> words{"the", "cat", "sat", "down"};
  const std::string svg = report::heatmap_grid_svg(panels, words, words);
  CHECK(attn_test::xml_problem(svg) == "");
  CHECK(int_attributes(svg, "width").front() <= 760);
  std::vector<int> title_ys;
  for (int i = 1; i <= 8; ++i) title_ys.push_back(attribute_near(svg, ">head " + std::to_string(i) + "</text>", "y"));
  CHECK(title_ys[0] == title_ys[1]);  // two maps to a row: four rows
  CHECK(title_ys[1] < title_ys[2]);
  CHECK(title_ys[2] == title_ys[3]);
  CHECK(title_ys[5] < title_ys[6]);
  CHECK(count(svg, ">0.250</text>") == 8 * 16);  // the values still fit their cells
  // without a limit: one row of eight
  report::heatmap_options wide;
  wide.max_width = 0;
  const std::string one_row = report::heatmap_grid_svg(panels, words, words, wide);
  CHECK(attribute_near(one_row, ">head 1</text>", "y") == attribute_near(one_row, ">head 8</text>", "y"));
  // two maps of 40×40 side by side: smaller cells, both in the column, values in the tooltips
  attn::Matrix<double> big(40, 40, 0.025);
  const std::vector<std::string> labels = numbered("w", 40);
  const std::string two = report::heatmap_grid_svg({{big.view(), "dot"}, {big.view(), "scaled"}}, labels, labels, {}, 2);
  CHECK(attn_test::xml_problem(two) == "");
  CHECK(int_attributes(two, "width").front() <= 760);
  CHECK(count(two, ">0.025</text>") == 0);
  CHECK(count(two, ": 0.025</title>") == 2 * 1600);
  for (const int size : int_attributes(two, "font-size")) CHECK(size >= 12);
}
