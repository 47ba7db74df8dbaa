// attn-calc's parser and computation (examples/attn_calc/), without starting a process: every
// kind of bad input is a usage_error naming the option; good input gives the unit's numbers.
// The process-level checks (exit code 2, one line on stderr) are tests/cli/bad_input.cmake.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numbers>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "../examples/attn_calc/calc.hpp"
#include "../examples/attn_calc/model_walk.hpp"
#include "../examples/attn_calc/parse.hpp"
#include "../examples/attn_calc/render.hpp"
#include "../examples/worked_examples.hpp"
#include "attn/report/format.hpp"
#include "attn_catch.hpp"
#include "doc_snippets.hpp"
#include "well_formed.hpp"

using attn_calc::parse_args;
using attn_calc::usage_error;

namespace {
std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

attn_calc::config parse(std::vector<std::string_view> args) { return parse_args(args); }

/// A file in the temporary directory holding `contents`, removed with the object.
struct temp_file {
  std::filesystem::path path;
  temp_file(const std::string& name, std::string_view contents)
      : path(std::filesystem::temp_directory_path() / ("attn_calc_test_" + name)) {
    std::ofstream(path, std::ios::binary).write(contents.data(), static_cast<std::streamsize>(contents.size()));
  }
  ~temp_file() { std::filesystem::remove(path); }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  [[nodiscard]] std::string arg() const { return "@" + path.string(); }
};

/// The message of the usage_error that parsing `args` throws ("" if none).
std::string refusal(std::vector<std::string_view> args) {
  try {
    (void)attn_calc::compute(parse_args(args));
  } catch (const usage_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("parse_number reads finite numbers in any locale and refuses the rest", "[attn-calc]") {
  CHECK(attn_calc::parse_number(" 0.5 ", "--q") == 0.5);
  CHECK(attn_calc::parse_number("+2", "--q") == 2);
  CHECK(attn_calc::parse_number("-1e-3", "--q") == -0.001);
  CHECK_THROWS_AS(attn_calc::parse_number("0,5", "--q"), usage_error);
  CHECK_THROWS_AS(attn_calc::parse_number("abc", "--q"), usage_error);
  CHECK_THROWS_AS(attn_calc::parse_number("1.5x", "--q"), usage_error);
  CHECK_THROWS_AS(attn_calc::parse_number("", "--q"), usage_error);
  CHECK_THROWS_AS(attn_calc::parse_number("+-1", "--q"), usage_error);
  CHECK_THROWS_AS(attn_calc::parse_number("++1", "--q"), usage_error);
  CHECK_THROWS_AS(attn_calc::parse_number("nan", "--q"), usage_error);
  CHECK_THROWS_AS(attn_calc::parse_number("-inf", "--q"), usage_error);
  CHECK_THROWS_AS(attn_calc::parse_number("1e999", "--q"), usage_error);
  CHECK_THROWS_AS(attn_calc::parse_number("0x10", "--q"), usage_error);
}

TEST_CASE("parse_matrix reads rows and checks their lengths", "[attn-calc]") {
  const auto m = attn_calc::parse_matrix("1,0,0; 0,1,0;0,0,1", "--notes");
  CHECK(m.rows == 3);
  CHECK(m.cols == 3);
  CHECK(m.data == std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  const auto f = attn_calc::parse_matrix("# header\r\n1,2\r\n\r\n3,4\r\n", "--q", true);
  CHECK(f.rows == 2);
  CHECK(f.data == std::vector<double>{1, 2, 3, 4});
  CHECK_THROWS_WITH(attn_calc::parse_matrix("1,0,0;0,1", "--notes"),
                    "--notes: row 2 has 2 numbers but row 1 has 3");
  CHECK_THROWS_WITH(attn_calc::parse_matrix("", "--notes"), "--notes: no numbers given");
  CHECK_THROWS_WITH(attn_calc::parse_matrix(" ; ", "--notes"), "--notes: no numbers given");
  CHECK_THROWS_WITH(attn_calc::parse_matrix("1,,2", "--q"), "--q: a number is missing (empty field)");
}

TEST_CASE("no arguments: the unit's example", "[attn-calc]") {
  const auto c = parse({});
  CHECK(c.example == attn_calc::unit_example::e3_alignment_map);
  CHECK(c.queries.rows == 4);
  CHECK(c.query_labels == std::vector<std::string>{"मैं", "चाय", "पीता", "हूँ"});
  CHECK(c.note_labels == std::vector<std::string>{"I", "drink", "tea"});
  const auto r = attn_calc::compute(c);
  // E1: चाय's row is the unit's (0.100, 0.164, 0.736)
  CHECK(attn::report::fixed(r.weights(1, 0), 3) == "0.100");
  CHECK(attn::report::fixed(r.weights(1, 1), 3) == "0.164");
  CHECK(attn::report::fixed(r.weights(1, 2), 3) == "0.736");
  for (const double s : r.row_sums) CHECK_THAT(s, Catch::Matchers::WithinAbs(1.0, 1e-15));
}

TEST_CASE("options that reproduce E2 and E5", "[attn-calc]") {
  const auto e2 = attn_calc::compute(parse({"--q", "0,1,4"}));
  CHECK(attn::report::fixed(e2.weights(0, 2), 3) == "0.936");
  const auto beta = attn_calc::compute(parse({"--q=0,0.5,2", "--beta=2"}));
  CHECK(attn::report::fixed(beta.weights(0, 0), 3) == "0.017");
  const auto c5 = parse({"--score", "additive"});
  CHECK(c5.example == attn_calc::unit_example::e5_additive);
  const auto e5 = attn_calc::compute(c5);
  CHECK(attn::report::fixed(e5.scores(0, 0), 3) == "0.443");
  CHECK(attn::report::fixed(e5.weights(0, 2), 3) == "0.490");
  const auto masked = attn_calc::compute(parse({"--q", "0,0.5,2", "--mask", "1,1,0"}));
  CHECK(masked.weights(0, 2) == 0.0);
  CHECK_THAT(masked.weights(0, 0) + masked.weights(0, 1), Catch::Matchers::WithinAbs(1.0, 1e-15));
}

TEST_CASE("attn-calc --beta-sweep: E2's shares at every β, as the softmax by hand gives them", "[attn-calc]") {
  const auto c = parse({"--beta-sweep", "0:4:0.25"});  // without --q: E2, चाय's q = (0, 0.5, 2)
  CHECK(c.example == attn_calc::unit_example::e2_beta_sweep);
  REQUIRE(c.beta_sweep.size() == 17);
  const auto r = attn_calc::compute(c);
  REQUIRE(r.sweep.rows() == 17);
  const long double s[] = {0, 0.5L, 2};
  for (std::size_t k = 0; k < 17; ++k) {
    const long double beta = 0.25L * static_cast<long double>(k);
    CHECK(c.beta_sweep[k] == static_cast<double>(beta));  // k/4 is exact in binary
    long double sum = 0;
    for (const long double x : s) sum += std::exp(beta * x);
    for (std::size_t j = 0; j < 3; ++j) {
      // the softmax in double: each e^(β s − max) within an ulp, a sum of three, a division:
      // a relative error of at most (n + 4)ε = 7ε; 8ε allows the scores' product
      const long double want = std::exp(beta * s[j]) / sum;
      CHECK(std::abs(static_cast<long double>(r.sweep(k, j)) - want) <= 8 * std::numeric_limits<double>::epsilon() * want);
    }
  }
  CHECK(r.sweep(0, 0) == 1.0 / 3);                                // β = 0: even shares
  CHECK(attn::report::fixed(r.sweep(8, 2), 6) == "0.936240");     // β = 2: the unit's 0.936
  // LO:HI:STEP ends at HI when STEP divides the range (to a millionth of a step), else before it
  CHECK(attn_calc::detail::parse_sweep("0:0.3:0.1") == std::vector<double>{0, 0.1, 0.2, 0.3});
  CHECK(attn_calc::detail::parse_sweep("0:1:0.3") == std::vector<double>{0, 0.3, 0.6, 0.8999999999999999});
  CHECK(attn_calc::detail::parse_sweep("0,1,2.5") == std::vector<double>{0, 1, 2.5});
  CHECK(refusal({"--beta-sweep", "0,2,1"}) == "--beta-sweep: the values must increase, and 1 follows 2");
  CHECK(refusal({"--beta-sweep", "2:0:1"}) == "--beta-sweep: LO must be below HI, and 2 is not below 0");
  CHECK(refusal({"--beta-sweep", "1"}) == "--beta-sweep needs at least two values of β");
  CHECK(refusal({"--beta-sweep", "0:1:1", "--self", "1,0;0,1"}).starts_with("--beta-sweep shows one query's shares"));
  CHECK(refusal({"--pe", "--beta-sweep", "0:1:1"}) == "--pe prints its own numbers, not a map: leave out --beta-sweep");
  // a masked note keeps exactly 0 at every β; the others share 1
  const auto m = parse({"--q", "1,0.5,0", "--mask", "1,0,1", "--beta-sweep", "0,1,8"});
  const auto rm = attn_calc::compute(m);
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK(rm.sweep(k, 1) == 0.0);
    CHECK_THAT(rm.sweep(k, 0) + rm.sweep(k, 2), Catch::Matchers::WithinAbs(1.0, 4 * std::numeric_limits<double>::epsilon()));
  }
  const std::string svg = attn_calc::render(parse({"--q", "1,0.5,0", "--mask", "1,0,1", "--beta-sweep", "0,1,8",
                                                   "--format", "svg"}), rm);
  CHECK(attn_test::xml_problem(svg) == "");
  CHECK(count(svg, "<polyline") == 2);  // I and tea; drink, masked, is named in the legend only
  CHECK(svg.find(">drink (masked)</text>") != std::string::npos);
  CHECK(svg.find(">β (how sure)</text>") != std::string::npos);
}

TEST_CASE("attn-calc with --jacobian: E7's Jacobian for tea, checked by finite differences", "[attn-calc]") {
  const auto r = attn_calc::compute(parse({"--q", "0,0.5,2", "--jacobian"}));
  REQUIRE(r.note_jacobians.size() == 1);
  const auto& J = r.note_jacobians[0][2];
  CHECK(attn::report::fixed(J(0, 0), 4) == "0.7361");
  CHECK(attn::report::fixed(J(0, 2), 4) == "-0.1467");
  CHECK(attn::report::fixed(J(2, 2), 4) == "1.1246");
  CHECK(r.fd_notes.max_abs_error < 1e-9);
  CHECK(r.fd_query.max_abs_error < 1e-9);
}

TEST_CASE("every kind of bad input is refused with a message that names it", "[attn-calc]") {
  CHECK(refusal({"--q", "0,abc,2"}) == "--q: \"abc\" is not a number");
  CHECK(refusal({"--q", "0,1"}).find("needs the same length") != std::string::npos);
  CHECK(refusal({"--score", "cosine"}) == "--score: unknown score \"cosine\" (dot, scaled_dot, general or additive)");
  CHECK(refusal({"--format", "pdf"}).starts_with("--format: unknown format \"pdf\""));
  CHECK(refusal({"--q", "1,0,0", "--notes="}) == "--notes: no numbers given");
  CHECK(refusal({"--q", "1,0,0", "--notes", "@/no/such/file.csv"}) ==
        "--notes: cannot read the file \"/no/such/file.csv\"");
  CHECK(refusal({"--q", "nan,0,0"}) == "--q: \"nan\" is not a finite number");
  CHECK(refusal({"--beta", "inf"}) == "--beta: \"inf\" is not a finite number");
  CHECK(refusal({"--q", "1e200,0,0", "--notes", "1e200,0,0"}).find("not finite") != std::string::npos);
  CHECK(refusal({"--score", "general", "--q", "1,2", "--W", "1,0,0", "--notes", "1,0,0"})
            .starts_with("--W is 1x3 but --score general needs (query length) x (note length) = 2x3"));
  CHECK(refusal({"--score", "additive", "--q", "1,2", "--notes", "1,0", "--W1", "1,0", "--W2", "1,0", "--v", "1,2"}) ==
        "--W1 has 1 row but --v has 2 numbers (both are the hidden size k)");
  CHECK(refusal({"--mask", "1,0"}) == "--mask has 2 entries but there are 3 notes");
  CHECK(refusal({"--mask", "1,0.5,0"}) ==
        "--mask: the entry in row 1, column 2 is 0.5; entries must be 1 (keep) or 0 (mask out)");
  CHECK(refusal({"--query-labels", "a,b"}) == "--query-labels gives 2 labels but there are 4 queries");
  CHECK(refusal({"--note-labels", "I,dr\nink,tea"}) == "--note-labels: label 2 is not printable UTF-8 text");
  CHECK(refusal({"--note-labels", "I,\xC3(,tea"}) == "--note-labels: label 2 is not printable UTF-8 text");
  CHECK(refusal({"--decimals", "18"}) == "--decimals: 18 is outside 0..17");
  CHECK(refusal({"--q"}) == "--q needs a value");
  CHECK(refusal({"--jacobian", "--jacobian"}) == "--jacobian is given twice");
  CHECK(refusal({"--jacobian=yes"}) == "--jacobian takes no value");
  CHECK(refusal({"-x"}).starts_with("unknown option \"-x\""));
  CHECK(refusal({"tea"}).starts_with("unexpected argument \"tea\""));
  CHECK(refusal({"--v", "1,1"}) == "--v is only used by --score additive");
  CHECK(refusal({"--notes", "1,0,0"}) == "--notes needs --q (the queries that look at the notes)");
  CHECK(parse({"--help"}).help);
  CHECK(parse({"--beta", "2", "--help"}).help);
}

TEST_CASE("every format renders the same numbers", "[attn-calc]") {
  auto c = parse({"--q", "0,0.5,2", "--query-labels", "चाय"});
  const auto r = attn_calc::compute(c);
  for (const auto f : {attn_calc::output_format::text, attn_calc::output_format::md, attn_calc::output_format::latex,
                       attn_calc::output_format::csv, attn_calc::output_format::svg}) {
    c.format = f;
    const std::string out = attn_calc::render(c, r);
    INFO(attn_calc::format_name(f));
    CHECK(out.find("0.736") != std::string::npos);
    CHECK(out.find("0.164") != std::string::npos);
    CHECK(out.find("-0.000") == std::string::npos);
  }
  c.format = attn_calc::output_format::json;
  const std::string json = attn_calc::render(c, r);
  CHECK(json.find("\"weights\": [\"0.100\", \"0.164\", \"0.736\"]") != std::string::npos);
  CHECK(json.find("\"query\": \"चाय\"") != std::string::npos);
  c.format = attn_calc::output_format::csv_long;
  CHECK(attn_calc::render(c, r) == "i,j,query,note,weight\n1,1,चाय,I,0.100\n1,2,चाय,drink,0.164\n1,3,चाय,tea,0.736\n");
}

TEST_CASE("@files are read as lines", "[attn-calc]") {
  using attn_calc::parse_matrix;
  const auto file = [](std::string_view text) { return parse_matrix(text, "--notes (f.csv)", true); };
  const auto refusal_of = [&](std::string_view text) {
    try {
      (void)file(text);
    } catch (const usage_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // a comment may hold ';' (it used to split the comment, and "one per line" was not a number)
  CHECK(file("# notes; one per line\n1,0\n0,1\n").data == std::vector<double>{1, 0, 0, 1});
  // a spreadsheet's decimal commas were read as other numbers, with exit code 0
  CHECK(refusal_of("0,5;1,5\n").starts_with("--notes (f.csv), line 1: a ';', which separates rows only on the "
                                            "command line: in a file each line is a row (a spreadsheet export "
                                            "with decimal commas"));
  CHECK(refusal_of("0,5 1,5\n").find("holds a space") != std::string::npos);
  // a byte-order mark, tabs and spaces, CRLF and CR line ends
  const auto m = file("\xEF\xBB\xBF# from a spreadsheet\r\n1\t2  3\r\n 4 5\t6\r7 8 9");
  CHECK(m.rows == 3);
  CHECK(m.data == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(file("1, 2 ,3").data == std::vector<double>{1, 2, 3});
  // a header row, and every message names the file's line
  CHECK(refusal_of("x,y,z\n1,0,0\n") ==
        "--notes (f.csv), line 1: \"x\" is not a number (a header row? start it with '#' to skip it)");
  CHECK(refusal_of("# h\n\n1,2\n3,abc\n") == "--notes (f.csv), line 4: \"abc\" is not a number");
  CHECK(refusal_of("# h\n1,2\n\n3\n") == "--notes (f.csv), line 4: row 2 has 1 number but row 1 (line 2) has 2");
  CHECK(refusal_of("1,2\n3,nan\n") == "--notes (f.csv), line 2: \"nan\" is not a finite number");
  CHECK(refusal_of("# only a comment\n") == "--notes (f.csv): no numbers given");
  // a NUL byte: the message used to stop at it
  const std::string nul("1,0\n2,\0x\n", 9);
  CHECK(refusal_of(nul) == "--notes (f.csv), line 2: a NUL byte (is this a text file?)");
  // inline, rows are separated by ';' and numbers may be separated by spaces too
  CHECK(parse_matrix("0 0.5 2; 1 1 1", "--q").data == std::vector<double>{0, 0.5, 2, 1, 1, 1});
  // and through the command line
  const temp_file notes("notes.csv", "# notes; one per line\n1\t0\t0\n0 1 0\n0,0,1\n");
  CHECK(parse({"--q", "0,0.5,2", "--notes", notes.arg()}).notes.data == std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  const temp_file commas("commas.csv", "0,5;1,5\n");
  CHECK(refusal({"--q", commas.arg()}).starts_with("--q (" + commas.path.string() + "), line 1: a ';'"));
}

TEST_CASE("labels come from a file too, one per line, commas and all", "[attn-calc]") {
  const temp_file words("words.txt", "\xEF\xBB\xBFI\r\ndrink, hot\n\n  tea  \n");
  const auto c = parse({"--note-labels", words.arg()});
  CHECK(c.note_labels == std::vector<std::string>{"I", "drink, hot", "tea"});
  const temp_file bad("bad.txt", "a\nb\x01\nc\n");
  CHECK(refusal({"--note-labels", bad.arg()}) ==
        "--note-labels (" + bad.path.string() + "), line 2: the label is not printable UTF-8 text");
  const temp_file empty("empty.txt", "\n\n");
  CHECK(refusal({"--note-labels", empty.arg()}) == "--note-labels (" + empty.path.string() + "): no labels given");
  // U+FFFE and U+FFFF cannot go into XML: not printable, as control characters are not
  CHECK(refusal({"--note-labels", "I,a\xEF\xBF\xBE,tea"}) == "--note-labels: label 2 is not printable UTF-8 text");
  CHECK(refusal({"--note-labels", "I,\xEF\xBF\xBF,tea"}) == "--note-labels: label 2 is not printable UTF-8 text");
}

TEST_CASE("every message is one line, whatever the input held", "[attn-calc]") {
  // a value with a line break, an escape sequence, a NUL-free but huge token
  CHECK(refusal({"--beta", "2\n3"}) == "--beta: \"2\\n3\" is not a number");
  CHECK(refusal({"--beta", "\x1b[2J\x1b[31mred"}) == "--beta: \"\\x1b[2J\\x1b[31mred\" is not a number");
  CHECK(refusal({"--format", "s\rvg"}) == "--format: unknown format \"s\\rvg\" (text, md, latex, json, csv, csv-long or svg)");
  CHECK(refusal({"--score", "\xC2\x9B" "31m"}).starts_with("--score: unknown score \"\\u{9b}31m\""));  // 8-bit CSI
  CHECK(refusal({"--score", "dot\xE2\x80\xAE"}).starts_with("--score: unknown score \"dot\\u{202e}\""));
  CHECK(refusal({"--score", "a\xFF"}).starts_with("--score: unknown score \"a\\xff\""));
  const std::string huge = std::string(100'000, '1') + "x";
  const std::string m = refusal({"--beta", huge});
  CHECK(m == "--beta: \"" + std::string(40, '1') + "\xE2\x80\xA6" + std::string(11, '1') + "x\" (100001 bytes) is not a number");
  // whatever builds a message, the exception holds no control character
  CHECK(std::string(usage_error(std::string("a\nb\0c", 5)).what()) == "a\\nb\\0c");
}

TEST_CASE("@file refuses special files and files beyond 64 MiB", "[attn-calc]") {
  if (std::filesystem::exists("/dev/zero"))  // it used to be read until memory ran out
    CHECK(refusal({"--q", "@/dev/zero"}) ==
          "--q: \"/dev/zero\" is not a regular file (a device, a pipe or a socket): give a file");
  const temp_file big("big.csv", "");
  std::filesystem::resize_file(big.path, attn_calc::max_file_bytes + 1);  // sparse: costs nothing
  CHECK(refusal({"--q", big.arg()}) == "--q: \"" + big.path.string() + "\" is 67108865 bytes; attn-calc reads files "
                                       "of up to 67108864 bytes (64 MiB)");
}

TEST_CASE("counts agree in number, and --mask takes a row or a column", "[attn-calc]") {
  CHECK(refusal({"--score", "additive", "--q", "1", "--notes", "1", "--W1", "1,1", "--W2", "1", "--v", "1"}) ==
        "--W1 has 2 columns but each note has 1 number");
  CHECK(refusal({"--score", "additive", "--q", "1,2", "--notes", "1", "--W1", "1", "--W2", "1", "--v", "1"}) ==
        "--W2 has 1 column but each query has 2 numbers");
  CHECK(refusal({"--q", "1;2", "--notes", "1", "--query-labels", "a"}) == "--query-labels gives 1 label but there are 2 queries");
  CHECK(refusal({"--q", "1", "--notes", "1", "--query-labels", "a,b"}) == "--query-labels gives 2 labels but there is 1 query");
  CHECK(parse({"--mask", "1;1;0"}).mask == parse({"--mask", "1,1,0"}).mask);
}

TEST_CASE("an option the format cannot show is refused, not ignored", "[attn-calc]") {
  // --jacobian with csv or svg used to be accepted and left out of the output
  CHECK(refusal({"--jacobian", "--format", "csv"}) == "--jacobian is not shown by --format csv: use text, md, latex or json");
  CHECK(refusal({"--jacobian", "--format", "csv-long"}) ==
        "--jacobian is not shown by --format csv-long: use text, md, latex or json");
  CHECK(refusal({"--jacobian", "--format", "svg"}) == "--jacobian is not shown by --format svg: use text, md, latex or json");
  CHECK(refusal({"--steps", "--format", "json"}) == "--steps is not shown by --format json: use text, md or latex");
  CHECK(refusal({"--no-attention", "--format", "svg"}) ==
        "--no-attention is not shown by --format svg: use text, md, latex or json");
  CHECK(refusal({"--map-only", "--format", "csv"}) == "--map-only is not shown by --format csv: use text, md or latex");
  CHECK(refusal({"--title", "T", "--format", "json"}) == "--title is not shown by --format json: use text, md, latex or svg");
  CHECK(refusal({"--no-values", "--format", "md"}) == "--no-values is not shown by --format md: use svg");
  CHECK(refusal({"--scale", "0,1", "--format", "latex"}) == "--scale is not shown by --format latex: use svg");
  CHECK(refusal({"--row-axis", "x", "--format", "text"}) == "--row-axis is not shown by --format text: use svg");
  CHECK(refusal({"--label", "x", "--format", "md"}) == "--label is not shown by --format md: use latex");
  CHECK(refusal({"--map-only", "--steps"}) == "--map-only prints the map alone: leave out --steps");
  CHECK(refusal({"--map-only", "--jacobian", "--format", "md"}) == "--map-only prints the map alone: leave out --jacobian");
  CHECK(refusal({"--steps", "--steps"}) == "--steps is given twice");
  CHECK(refusal({"--no-values=1", "--format", "svg"}) == "--no-values takes no value");
}

TEST_CASE("attn-calc --jacobian refuses inputs past 5e8 steps of work, and says why", "[attn-calc]") {
  // n = 1600 notes of d = 20 took 3.6 s: its checks by finite differences grow as T·n²·d²
  std::string notes, q;
  for (int j = 0; j < 1600; ++j) notes += (j ? ";" : "") + std::string("1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0");
  for (int i = 0; i < 20; ++i) q += (i ? ",0" : "1");
  CHECK(refusal({"--q", q, "--notes", notes, "--jacobian"}) ==
        "--jacobian: 1 query and 1600 notes of 40 numbers need about 4.1e+09 steps (T·n²·d²: every Jacobian is "
        "checked by finite differences); attn-calc stops at 5e8: give fewer queries or notes");
  CHECK(refusal({"--q", q, "--notes", notes}).empty());  // without --jacobian the map is quick
  // the lesson's sizes are far below: E6's 35×30 map with notes of 8 numbers
  std::string q35, h30;
  for (int i = 0; i < 35; ++i) q35 += (i ? ";" : "") + std::string("1,0,0,0,0,0,0,1");
  for (int j = 0; j < 30; ++j) h30 += (j ? ";" : "") + std::string("0,1,0,0,0,0,0,1");
  CHECK(attn_calc::jacobian_work(parse({"--q", q35, "--notes", h30, "--jacobian"})) < attn_calc::max_jacobian_work / 50);
}

TEST_CASE("attn-calc --keys and --values: the scores look at the keys, the contexts blend the values", "[attn-calc]") {
  const auto c = parse({"--q", "0,0.5", "--keys", "1,0;0,1;1,1", "--values", "1,0,0;0,1,0;0,0,1", "--jacobian",
                        "--no-attention"});
  CHECK(c.keys_and_values());
  const auto r = attn_calc::compute(c);
  const attn::Matrix<double> keys{{1, 0}, {0, 1}, {1, 1}}, values{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const std::vector<double> q{0, 0.5};
  const auto ref = attn::attend(q, keys, values, attn::dot);
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK(r.weights(0, j) == ref.weights[j]);
    CHECK(r.contexts(0, j) == ref.context[j]);
  }
  // ∂c/∂v_j = α_j I; every Jacobian checked against finite differences
  REQUIRE(r.value_jacobians.size() == 1);
  CHECK(r.value_jacobians[0][1](1, 1) == ref.weights[1]);
  CHECK(r.value_jacobians[0][1](0, 1) == 0);
  CHECK(r.note_jacobians[0][2].rows() == 3);
  CHECK(r.note_jacobians[0][2].cols() == 2);
  CHECK(r.fd_notes.max_abs_error < 1e-9);
  CHECK(r.fd_values.max_abs_error < 1e-9);
  CHECK(r.fd_query.max_abs_error < 1e-9);
  // the baseline without attention is the last value
  CHECK(r.no_attention(0, 2) == 1);
  CHECK(r.no_attention(0, 0) == 0);
  auto shown = c;
  const std::string text = attn_calc::render(shown, r);
  for (const char* part : {"Keys k_j", "Values v_j", "Scores s_tj = score(q_t, k_j)", "Contexts c_t = Σ_j α_tj v_j",
                           "dot, s_tj = q_t · k_j", "∂c/∂k_j for query q, note h1", "∂c/∂v_j for query q, note h3"})
    CHECK(text.find(part) != std::string::npos);
  shown.format = attn_calc::output_format::json;
  const std::string json = attn_calc::render(shown, r);
  for (const char* part : {"\"keys\": [", "\"values\": [", "\"dc_dk\": [", "\"dc_dv\": [", "\"no_attention\": {"})
    CHECK(json.find(part) != std::string::npos);
  CHECK(json.find("\"notes\": [") == std::string::npos);
  // what does not fit
  CHECK(refusal({"--q", "1", "--keys", "1;2"}) == "--keys needs --values (the scores look at the keys, the contexts blend the values)");
  CHECK(refusal({"--q", "1", "--values", "1;2"}) == "--values needs --keys (the scores look at the keys, the contexts blend the values)");
  CHECK(refusal({"--q", "1", "--notes", "1", "--keys", "1", "--values", "1"}) ==
        "give --notes (each note both key and value) or --keys and --values, not both");
  CHECK(refusal({"--keys", "1", "--values", "1"}) == "--keys needs --q (the queries that look at the notes)");
  CHECK(refusal({"--q", "1", "--keys", "1;2;3", "--values", "1;2"}) == "--values has 2 rows but --keys has 3 (one value per key)");
  CHECK(refusal({"--q", "1,2", "--keys", "1;2", "--values", "1;2"}).starts_with("--q has 2 numbers per query but each key has 1"));
}

TEST_CASE("attn-calc --no-attention: Unit 17's baseline, every word the same summary", "[attn-calc]") {
  auto c = parse({"--no-attention"});
  const auto r = attn_calc::compute(c);
  REQUIRE(r.no_attention.rows() == 4);
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t i = 0; i < 3; ++i) CHECK(r.no_attention(t, i) == (i == 2 ? 1.0 : 0.0));  // h_tea
  const std::string text = attn_calc::render(c, r);
  CHECK(text.find("Contexts without attention: c_t = the last note, tea\n"
                  "          1      2      3\n"
                  "----  -----  -----  -----\n"
                  "मैं     0.000  0.000  1.000\n") != std::string::npos);
  auto plain = parse({});
  CHECK(attn_calc::render(plain, attn_calc::compute(plain)).find("without attention") == std::string::npos);
}

TEST_CASE("attn-calc --steps shows the unit's hand steps: E1's e^s and their sum, E5's W1h + W2q and tanh", "[attn-calc]") {
  // E1: softmax (e^0, e^0.5, e^2) / (1 + 1.649 + 7.389)
  auto c1 = parse({"--q", "0,0.5,2", "--steps"});
  const auto r1 = attn_calc::compute(c1);
  CHECK_FALSE(r1.exp_shifted);
  CHECK(r1.exps(0, 0) == 1);
  CHECK_THAT(r1.exps(0, 2), Catch::Matchers::WithinRel(7.38905609893065, 1e-15));
  CHECK(attn::report::fixed(r1.exp_sums[0], 3) == "10.038");
  // the steps give the library's weights: two exps (1 and 1.5 ulp), two sums of n terms and two
  // quotients differ by at most (2n + 5)u = (n + 2.5)ε
  const double eps = std::numeric_limits<double>::epsilon();
  for (std::size_t j = 0; j < 3; ++j)
    CHECK_THAT(r1.exps(0, j) / r1.exp_sums[0], Catch::Matchers::WithinRel(r1.weights(0, j), 5.5 * eps));
  const std::string text = attn_calc::render(c1, r1);
  const auto steps_at = text.find("Softmax by hand: e^(s_tj) and their sum; α_tj = e^(s_tj) / sum\n"
                                  "       I  drink    tea     sum\n"
                                  "-  -----  -----  -----  ------\n"
                                  "q  1.000  1.649  7.389  10.038\n");
  CHECK(steps_at != std::string::npos);
  CHECK(steps_at > text.find("Scores s_tj"));  // after the scores, before the weights
  CHECK(steps_at < text.find("Weights α_tj"));
  // E5: W1 h + W2 q = (1.5, −0.5), (0.5, 0.5), (1.5, 0.5); tanh (0.905, −0.462), (0.462, 0.462), (0.905, 0.462)
  auto c5 = parse({"--score", "additive", "--steps"});
  const auto r5 = attn_calc::compute(c5);
  REQUIRE(r5.hidden.size() == 1);
  const auto& h = r5.hidden[0];
  CHECK(h(0, 0) == 1.5);
  CHECK(h(0, 1) == -0.5);
  CHECK(h(2, 1) == 0.5);
  CHECK(attn::report::fixed(h(0, 2), 3) == "0.905");
  CHECK(attn::report::fixed(h(0, 3), 3) == "-0.462");
  // v · tanh u is the library's score (v = (1, 1)): two tanh of 1 ulp each side, and a sum
  for (std::size_t j = 0; j < 3; ++j)
    CHECK_THAT(h(j, 2) + h(j, 3),
               Catch::Matchers::WithinAbs(r5.scores(0, j), 3 * eps * (std::abs(h(j, 2)) + std::abs(h(j, 3)))));
  const std::string t5 = attn_calc::render(c5, r5);
  const auto hidden_at = t5.find("Additive score by hand for query q: u = W1 h_j + W2 q and tanh u; s_j = v · tanh u\n"
                                 "       u1      u2  tanh u1  tanh u2\n"
                                 "--  -----  ------  -------  -------\n"
                                 "h1  1.500  -0.500    0.905   -0.462\n"
                                 "h2  0.500   0.500    0.462    0.462\n"
                                 "h3  1.500   0.500    0.905    0.462\n");
  CHECK(hidden_at != std::string::npos);
  CHECK(hidden_at < t5.find("Scores s_tj"));  // before the scores
  // β·s beyond e^±700: each row shifted by its largest β·s, and the title says so; masked notes are 0
  auto big = parse({"--q", "400,399,0", "--beta", "2", "--mask", "1,1,0", "--steps"});
  const auto rb = attn_calc::compute(big);
  CHECK(rb.exp_shifted);
  CHECK(rb.exps(0, 0) == 1);  // e^(2·(400 − 400))
  CHECK_THAT(rb.exps(0, 1), Catch::Matchers::WithinRel(std::exp(-2.0), 1e-15));
  CHECK(rb.exps(0, 2) == 0);  // masked
  CHECK_THAT(rb.exps(0, 1) / rb.exp_sums[0], Catch::Matchers::WithinRel(rb.weights(0, 1), 5.5 * eps));
  CHECK(attn_calc::render(big, rb).find("e^(β (s_tj − s_tp)), with p the note of the row's largest β s_tp") != std::string::npos);
}

TEST_CASE("attn-calc --map-only: one table, no heading, for Markdown, LaTeX and text", "[attn-calc]") {
  auto c = parse({"--q", "0,1,4", "--query-labels", "चाय", "--format", "md", "--map-only"});
  const auto r = attn_calc::compute(c);
  CHECK(attn_calc::render(c, r) ==
        "**Weights α_tj: the alignment map (each row sums to 1)**\n\n"
        "|     |     I | drink |   tea |   sum |\n"
        "| :-- | ----: | ----: | ----: | ----: |\n"
        "| चाय | 0.017 | 0.047 | 0.936 | 1.000 |\n");
  c.format = attn_calc::output_format::latex;
  const std::string tex = attn_calc::render(c, r);
  CHECK(tex.starts_with("\\providecommand{\\attnlabel}"));  // चाय needs it
  CHECK(count(tex, "\\begin{table}") == 1);
  CHECK(tex.find("\\label{attn:map}") != std::string::npos);
  CHECK(tex.find("attn-calc") == std::string::npos);
  auto ascii = parse({"--q", "0,1,4", "--format", "latex", "--map-only", "--label", "lesson3", "--title", "E2's map"});
  const std::string t2 = attn_calc::render(ascii, attn_calc::compute(ascii));
  CHECK(t2.starts_with("\\begin{table}[htbp]\n  \\centering\n  \\caption{E2's map}\n  \\label{lesson3:map}\n"));
  c.format = attn_calc::output_format::text;
  CHECK(attn_calc::render(c, r).starts_with("Weights α_tj: the alignment map (each row sums to 1)\n"));
  CHECK(refusal({"--label", "my label", "--format", "latex"}) == "--label: \"my label\" must be ASCII letters, digits and : . - _ /");
}

TEST_CASE("the SVG options reach the picture: title, axes, values, scale, masked notes", "[attn-calc]") {
  auto c = parse({"--format", "svg", "--title", "E3 <map>", "--row-axis", "Hindi", "--col-axis", "English",
                  "--no-values", "--scale", "0,0.5", "--mask", "1,1,0"});
  const std::string svg = attn_calc::render(c, attn_calc::compute(c));
  CHECK(attn_test::xml_problem(svg) == "");
  CHECK(svg.find(">E3 &lt;map&gt;</text>") != std::string::npos);
  CHECK(svg.find(">Hindi</text>") != std::string::npos);
  CHECK(svg.find(">English</text>") != std::string::npos);
  CHECK(svg.find(">0.818</text>") == std::string::npos);  // no values in the cells
  CHECK(svg.find(": 0.818</title>") != std::string::npos);  // but in the tooltips
  CHECK(svg.find(">0.125</text>") != std::string::npos);   // the legend's ticks: 0 to 0.5
  CHECK(svg.find(">0.5</text>") != std::string::npos);
  CHECK(count(svg, "fill=\"url(#attn-masked)\"") == 4 + 1);  // tea's column and the legend
  CHECK(svg.find("(masked)") == std::string::npos);          // the hatch says it, not the label
  // every note masked: the title does not say each row sums to 1
  auto none = parse({"--format", "svg", "--mask", "0,0,0"});
  const std::string empty = attn_calc::render(none, attn_calc::compute(none));
  CHECK(empty.find("each row sums to 1") == std::string::npos);
  CHECK(empty.find("nothing kept: every weight is 0") != std::string::npos);
  CHECK(refusal({"--format", "svg", "--scale", "1,0.5"}) == "--scale: LO must be below HI, and 1 is not below 0.5");
  CHECK(refusal({"--format", "svg", "--scale", "1"}) == "--scale needs two numbers, LO,HI (the colours' range), not 1x1");
  CHECK(refusal({"--format", "svg", "--title", "a\x01"}) == "--title: \"a\\x01\" is not printable UTF-8 text");
}

namespace {
/// The number after `name="` in an SVG element (0 if absent).
int attribute(const std::string& element, const std::string& name) {
  const auto at = element.find(" " + name + "=\"");
  return at == std::string::npos ? 0 : std::stoi(element.substr(at + name.size() + 3));
}
}  // namespace

TEST_CASE("a wide map (1 x 3000 keys) is wrapped into bands: cells of 12 px, labels that never overlap", "[attn-calc]") {
  // before: one row of 1-px cells, 3166 px wide (a lesson column shrank it to a quarter)
  std::string notes;
  for (int j = 0; j < 3000; ++j) notes += (j ? ";" : "") + std::to_string(j % 7) + "," + std::to_string(j % 5);
  const auto c = parse({"--q", "0.01,0.02", "--notes", notes, "--format", "svg"});
  const std::string svg = attn_calc::render(c, attn_calc::compute(c));
  CHECK(attn_test::xml_problem(svg) == "");
  CHECK(attribute(svg, "width") <= 760);
  // every cell at least attn_calc::detail::svg_min_cell wide and high
  std::size_t cells = 0;
  for (auto at = svg.find("<rect x="); at != std::string::npos; at = svg.find("<rect x=", at + 1)) {
    const std::string rect = svg.substr(at, svg.find('>', at) - at);
    if (rect.find("url(#attn-scale)") != std::string::npos) continue;  // the legend's bar
    ++cells;
    CHECK(attribute(rect, "width") >= attn_calc::detail::svg_min_cell);
    CHECK(attribute(rect, "height") >= attn_calc::detail::svg_min_cell);
  }
  CHECK(cells == 3000);
  // with 4 queries, every query's label in every band (12-px cells had left every other one out)
  const auto four = parse({"--q", "0.01,0.02;0.03,0;0,0.01;0.02,0.02", "--notes", notes, "--format", "svg"});
  const std::string rows = attn_calc::render(four, attn_calc::compute(four));
  const std::size_t row_bands = count(rows, ">q1</text>");  // a band of at most 50 columns: at least 60
  CHECK(row_bands >= 60);
  for (const char* q : {">q2</text>", ">q3</text>", ">q4</text>"}) CHECK(count(rows, q) == row_bands);
  // the column labels, upright, 12 px type: within a band (one y) their x differ by at least 13 px
  std::map<int, std::vector<int>> bands;  // y → the x of each label
  std::size_t labels = 0;
  for (auto at = svg.find("transform=\"rotate(-90 "); at != std::string::npos;
       at = svg.find("transform=\"rotate(-90 ", at + 1)) {
    const std::size_t start = svg.rfind("<text", at);
    const std::string text = svg.substr(start, at - start);
    if (text.find("font-style") != std::string::npos) continue;  // the rows' axis title
    bands[attribute(text, "y")].push_back(attribute(text, "x"));
    ++labels;
  }
  CHECK(bands.size() > 1);
  CHECK(labels >= 3000 / 2);  // thinned to every other label at most
  for (const auto& [y, xs] : bands)
    for (std::size_t k = 1; k < xs.size(); ++k) {
      INFO("band at y = " << y << ", label " << k);
      CHECK(xs[k] - xs[k - 1] >= 13);
    }
}

TEST_CASE("attn-calc --help gives every option an example, and docs/course-authors.md shows each", "[attn-calc]") {
  const std::string docs = attn_test::file_text(attn_test::document_path(__FILE__, "docs/course-authors.md"));
  REQUIRE_FALSE(docs.empty());
  std::istringstream help{std::string(attn_calc::help_text)};
  std::vector<std::string> options;
  std::vector<bool> examples;
  for (std::string line; std::getline(help, line);) {
    if (line.starts_with("  --")) {
      options.push_back(line.substr(2, line.find(' ', 2) - 2));
      examples.push_back(false);
    } else if (!options.empty() && line.find("e.g. ") != std::string::npos) {
      examples.back() = true;
    }
  }
  CHECK(options.size() == 60);
  for (std::size_t i = 0; i < options.size(); ++i) {
    const std::string& option = options[i];
    INFO(option);
    CHECK(examples[i]);
    CHECK(docs.find("`" + option + "`") != std::string::npos);
    if (option != "--help") CHECK_FALSE(refusal({option}).starts_with("unknown option"));  // the parser knows it
  }
}

// ---------------------------------------------------------------------------------------------
// --self, --heads, per-row masks, --dot-vs-scaled. The references are the formulas written out
// here in long double, with the conventions of ../shared/unit/NEXT_SECTIONS.md: row vectors,
// Q = X W_Q, head i on columns [i·d_k, (i+1)·d_k), masks true = may attend, causal with the
// offset n − T. Each tolerance is the rounding of the double computation, propagated (below).
// ---------------------------------------------------------------------------------------------

namespace {
using ld = long double;
constexpr ld eps = std::numeric_limits<double>::epsilon();

/// A value and a bound on the rounding error of the double computation of it.
struct bounded {
  ld value = 0, error = 0;
};
using grid = std::vector<std::vector<bounded>>;

grid exact(const attn_calc::matrix& m) {
  grid g(m.rows, std::vector<bounded>(m.cols));
  for (std::size_t i = 0; i < m.rows; ++i)
    for (std::size_t j = 0; j < m.cols; ++j) g[i][j] = {m.data[i * m.cols + j], 0};
  return g;
}

/// Rows [.., ..) × columns [c0, c0 + cols) of a·b: a sum of k products in double is off by at most
/// γ_k = kε/(1 − kε) < (k + 1)ε of Σ|a||b| (Higham, 3.1), plus the inputs' errors carried through.
grid product(const grid& a, const grid& b, std::size_t c0, std::size_t cols, bool b_transposed = false,
             std::size_t b0 = 0) {
  const std::size_t k = b_transposed ? cols : b.size();
  grid out(a.size(), std::vector<bounded>(b_transposed ? b.size() : cols));
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < out[i].size(); ++j) {
      ld sum = 0, magnitude = 0, carried = 0;
      for (std::size_t l = 0; l < k; ++l) {
        const bounded x = b_transposed ? a[i][c0 + l] : a[i][l];
        const bounded y = b_transposed ? b[j][b0 + l] : b[l][c0 + j];
        sum += x.value * y.value;
        magnitude += std::abs(x.value * y.value);
        carried += x.error * std::abs(y.value) + std::abs(x.value) * y.error;
      }
      out[i][j] = {sum, static_cast<ld>(k + 1) * eps * magnitude + carried};
    }
  return out;
}

/// A = softmax over each row of β·S·scale, entries that `allowed` forbids 0 (a row with none is
/// 0). |δα_j| ≤ α_j (|β|·(δs_j + max δs)·scale + (n + 6)ε): the exponent's error moves each
/// e^z by its own amount, the sum and the division add (n + 2)ε, exp itself a few ulps.
template <class Allowed>
grid softmax_rows(const grid& S, ld scale, ld beta, Allowed allowed) {
  grid A(S.size(), std::vector<bounded>(S[0].size()));
  for (std::size_t t = 0; t < S.size(); ++t) {
    ld top = -std::numeric_limits<ld>::infinity(), worst = 0;
    for (std::size_t j = 0; j < S[t].size(); ++j)
      if (allowed(t, j)) top = std::max(top, beta * scale * S[t][j].value), worst = std::max(worst, S[t][j].error);
    ld sum = 0;
    for (std::size_t j = 0; j < S[t].size(); ++j)
      if (allowed(t, j)) sum += std::exp(beta * scale * S[t][j].value - top);
    for (std::size_t j = 0; j < S[t].size(); ++j) {
      if (!allowed(t, j)) continue;
      const ld a = std::exp(beta * scale * S[t][j].value - top) / sum;
      A[t][j] = {a, a * (std::abs(beta) * scale * (S[t][j].error + worst) * 2 + static_cast<ld>(S[t].size() + 6) * eps)};
    }
  }
  return A;
}

void check_close(const attn::Matrix<double>& got, const grid& want, const std::string& what) {
  REQUIRE(got.rows() == want.size());
  REQUIRE(got.cols() == want[0].size());
  for (std::size_t i = 0; i < got.rows(); ++i)
    for (std::size_t j = 0; j < got.cols(); ++j) {
      INFO(what << "(" << i << ", " << j << ") = " << got(i, j) << ", formula " << static_cast<double>(want[i][j].value)
                << " ± " << static_cast<double>(want[i][j].error));
      CHECK(std::abs(static_cast<ld>(got(i, j)) - want[i][j].value) <= want[i][j].error + eps * std::abs(want[i][j].value));
    }
}

std::string rendered(attn_calc::config c, const attn_calc::results& r, attn_calc::output_format f) {
  c.format = f;
  return attn_calc::render(c, r);
}
}  // namespace

TEST_CASE("attn-calc --self --heads 2 --wo: Q, K, V, each head's scores and map, Z and Y as the formulas give them", "[attn-calc]") {
  // a sentence that is not one-hot, d_model = 3; two heads of d_k = 2 and d_v = 1, W_O 2×2
  const char* X = "1,0.5,0;0,1,-1;2,0,1;-0.5,1.5,0.25";
  const char* WQ = "1,0,0.5,-1;0,1,2,0;1,1,0,0.5";
  const char* WK = "0.5,1,0,1;1,0,1,1;-1,0.5,0.5,0";
  const char* WV = "1,-1;0.5,2;0,1";
  const char* WO = "1,0.5;-1,2";
  auto c = parse({"--self", X, "--words", "the,cat,sat,down", "--heads", "2", "--wq", WQ, "--wk", WK, "--wv", WV,
                  "--wo", WO, "--beta", "1.5"});
  CHECK(c.self_attention);
  CHECK(c.score == attn_calc::score_kind::scaled_dot);  // the default with --self: 1/√d_k
  const auto r = attn_calc::compute(c);
  const grid x = exact(c.queries);
  const grid Q = product(x, exact(attn_calc::parse_matrix(WQ, "")), 0, 4);
  const grid K = product(x, exact(attn_calc::parse_matrix(WK, "")), 0, 4);
  const grid V = product(x, exact(attn_calc::parse_matrix(WV, "")), 0, 2);
  check_close(r.Q, Q, "Q");
  check_close(r.K, K, "K");
  check_close(r.V, V, "V");
  REQUIRE(r.maps.size() == 2);
  grid Z(4, std::vector<bounded>(2));
  for (std::size_t i = 0; i < 2; ++i) {
    // head i: columns [2i, 2i + 2) of Q and K, column i of V
    const grid S = product(Q, K, 2 * i, 2, true, 2 * i);
    const ld scale = 1 / std::sqrt(ld{2});
    grid scaled = S;
    for (auto& row : scaled)
      for (auto& s : row) s = {s.value * scale, s.error * scale + 2 * eps * std::abs(s.value * scale)};
    CHECK(r.maps[i].name == "head " + std::to_string(i + 1));
    check_close(r.maps[i].scores, scaled, "S_" + std::to_string(i + 1));
    const grid A = softmax_rows(S, scale, 1.5, [](std::size_t, std::size_t) { return true; });
    check_close(r.maps[i].weights, A, "A_" + std::to_string(i + 1));
    grid Vi(4, std::vector<bounded>(1));
    for (std::size_t t = 0; t < 4; ++t) Vi[t][0] = V[t][i];
    const grid Zi = product(A, Vi, 0, 1);
    for (std::size_t t = 0; t < 4; ++t) Z[t][i] = Zi[t][0];
  }
  check_close(r.Z, Z, "Z");
  check_close(r.Y, product(Z, exact(attn_calc::parse_matrix(WO, "")), 0, 2), "Y");
  // the two heads see differently: their maps differ
  CHECK(std::abs(r.maps[0].weights(0, 0) - r.maps[1].weights(0, 0)) > 0.01);

  // every format shows it: tables per head, JSON, CSV with a column per map, one SVG grid
  const std::string text = rendered(c, r, attn_calc::output_format::text);
  for (const char* part : {"Queries Q = X W_Q", "Keys K = X W_K", "Values V = X W_V",
                           "Scores, head 1: S_1 = Q_1 K_1ᵀ / √d_k", "Weights, head 2: A_2 = softmax(β S_2)",
                           "The heads' outputs side by side, Z = [A_1 V_1 … A_h V_h]", "Output Y = Z W_O"})
    CHECK(text.find(part) != std::string::npos);
  CHECK(rendered(c, r, attn_calc::output_format::md)
            .find("2 heads: head i takes columns (i − 1)·2 + 1 … i·2 of Q and K (d_k = 2) and column i of V (d_v = 1).") !=
        std::string::npos);
  CHECK(count(text, "\nsat ") >= 8);  // a row of X, Q, K, V, two scores, two maps, Z, Y
  const std::string json = rendered(c, r, attn_calc::output_format::json);
  CHECK(attn_test::json_problem(json) == "");
  for (const char* part : {"\"mode\": \"self-attention\"", "\"heads\": 2", "\"d_k\": 2", "\"d_v\": 1",
                           "\"name\": \"head 2\"", "\"heads_out\": [", "\"out\": [", "\"identity\": []"})
    CHECK(json.find(part) != std::string::npos);
  const auto csv = attn_test::read_csv(rendered(c, r, attn_calc::output_format::csv));
  REQUIRE(csv.size() == 1 + 2 * 4);
  CHECK(csv[0] == std::vector<std::string>{"map", "query", "the", "cat", "sat", "down"});
  CHECK(csv[5][0] == "head 2");
  CHECK(csv[5][2] == attn::report::fixed(r.maps[1].weights(0, 0), 3));
  CHECK(attn_test::read_csv(rendered(c, r, attn_calc::output_format::csv_long)).size() == 1 + 2 * 16);
  const std::string svg = rendered(c, r, attn_calc::output_format::svg);
  CHECK(attn_test::xml_problem(svg) == "");
  CHECK(count(svg, "<linearGradient") == 1);  // one colour scale for both heads
  CHECK(count(svg, ">head 1</text>") == 1);
  CHECK(count(svg, ">head 2</text>") == 1);
  CHECK(count(svg, "<title>head 2: ") == 16);
  CHECK(svg.find("Self-attention maps of 2 heads (each row sums to 1)") != std::string::npos);
  // --map-only: the maps' tables alone
  auto only = c;
  only.map_only = true;
  const std::string maps = rendered(only, r, attn_calc::output_format::md);
  CHECK(count(maps, "**Weights") == 2);
  CHECK(maps.find("Queries") == std::string::npos);
}

/// `g` with a column of 1s appended, and `w` with the row `b` appended: g·w of these is g·w + b,
/// one more term of the product (product's bound then covers a bias added first or last).
std::pair<grid, grid> with_bias(grid g, grid w, const std::vector<double>& b) {
  for (auto& row : g) row.push_back({1, 0});
  std::vector<bounded> last;
  for (const double x : b) last.push_back({x, 0});
  w.push_back(last);
  return {g, w};
}

TEST_CASE("attn-calc --cross: queries from one matrix, keys and values from another, projections and biases",
          "[attn-calc]") {
  // X_q: 3 queries of d_q = 2; X_kv: 4 words of d_kv = 3; two heads of d_k = 2, d_v = 1; W_O 2×2
  const char* Xq = "1,0.5;-1,2;0.25,-0.5";
  const char* Xkv = "1,0,0.5;0,1,-1;2,0.5,1;-0.5,1.5,0";
  const char* WQ = "1,0,0.5,-1;0,1,2,0.5";
  const char* WK = "0.5,1,0,1;1,0,1,1;-1,0.5,0.5,0";
  const char* WV = "1,-1;0.5,2;0,1";
  const char* WO = "1,0.5;-1,2";
  const std::vector<double> bQ{0.5, -0.25, 0, 1}, bK{0, 0.5, -1, 0.25}, bV{1, -0.5}, bO{0.125, -2};
  auto c = parse({"--q", Xq, "--cross", Xkv, "--heads", "2", "--wq", WQ, "--wk", WK, "--wv", WV, "--wo", WO,
                  "--bq", "0.5,-0.25,0,1", "--bk", "0;0.5;-1;0.25", "--bv", "1,-0.5", "--bo", "0.125,-2",
                  "--query-labels", "मैं,चाय,पीता", "--note-labels", "I,drink,tea,now", "--beta", "1.5"});
  CHECK(c.cross);
  CHECK(c.score == attn_calc::score_kind::scaled_dot);
  CHECK(c.bK == bK);  // a column is read as well as a row
  const auto r = attn_calc::compute(c);
  const auto [xq, wq] = with_bias(exact(c.queries), exact(attn_calc::parse_matrix(WQ, "")), bQ);
  const auto [xk, wk] = with_bias(exact(c.notes), exact(attn_calc::parse_matrix(WK, "")), bK);
  const auto [xv, wv] = with_bias(exact(c.notes), exact(attn_calc::parse_matrix(WV, "")), bV);
  const grid Q = product(xq, wq, 0, 4), K = product(xk, wk, 0, 4), V = product(xv, wv, 0, 2);
  check_close(r.Q, Q, "Q");
  check_close(r.K, K, "K");
  check_close(r.V, V, "V");
  REQUIRE(r.maps.size() == 2);
  grid Z(3, std::vector<bounded>(2));
  for (std::size_t i = 0; i < 2; ++i) {
    const grid S = product(Q, K, 2 * i, 2, true, 2 * i);  // 3 × 4
    const ld scale = 1 / std::sqrt(ld{2});
    const grid A = softmax_rows(S, scale, 1.5, [](std::size_t, std::size_t) { return true; });
    REQUIRE(r.maps[i].weights.rows() == 3);
    REQUIRE(r.maps[i].weights.cols() == 4);
    check_close(r.maps[i].weights, A, "A_" + std::to_string(i + 1));
    grid Vi(4, std::vector<bounded>(1));
    for (std::size_t t = 0; t < 4; ++t) Vi[t][0] = V[t][i];
    const grid Zi = product(A, Vi, 0, 1);
    for (std::size_t t = 0; t < 3; ++t) Z[t][i] = Zi[t][0];
  }
  check_close(r.Z, Z, "Z");
  const auto [z, wo] = with_bias(Z, exact(attn_calc::parse_matrix(WO, "")), bO);
  check_close(r.Y, product(z, wo, 0, 2), "Y");
  // the formats say what it is
  const std::string text = rendered(c, r, attn_calc::output_format::text);
  for (const char* part : {"cross-attention, 3 queries reading 4 words, 2 heads", "Queries Q = X_q W_Q + b_Q",
                           "Keys K = X_kv W_K + b_K", "Values V = X_kv W_V + b_V", "Output Y = Z W_O + b_O",
                           "Sentence read X_kv (one word per row)", "Bias b_K"})
    CHECK(text.find(part) != std::string::npos);
  const std::string json = rendered(c, r, attn_calc::output_format::json);
  CHECK(attn_test::json_problem(json) == "");
  CHECK(json.find("\"mode\": \"cross-attention\"") != std::string::npos);
  CHECK(json.find("\"b_O\": [0.125, -2]") != std::string::npos);
  const std::string svg = rendered(c, r, attn_calc::output_format::svg);
  CHECK(attn_test::xml_problem(svg) == "");
  CHECK(svg.find("Cross-attention maps of 2 heads") != std::string::npos);
  CHECK(svg.find(">keys (words read)</text>") != std::string::npos);
  CHECK(rendered(c, r, attn_calc::output_format::latex).find("$K = X_{kv} W_K + b_K$") != std::string::npos);
  // E3's map is cross-attention of the Hindi states over I, drink, tea with no projections
  const auto e3 = attn_calc::compute(parse({}));
  const auto crossed = attn_calc::compute(parse({"--cross", "1,0,0;0,1,0;0,0,1", "--q", "2,0.5,0;0,0.5,2;0,2,0.5;1.5,1.5,0",
                                                 "--score", "dot"}));
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t j = 0; j < 3; ++j) CHECK(crossed.maps[0].weights(t, j) == e3.weights(t, j));
  // what it refuses
  CHECK(refusal({"--cross", Xkv}) == "--cross needs --q (the queries, one per row, that read the sentence)");
  CHECK(refusal({"--cross", Xkv, "--q", Xq, "--wq", WK}) ==
        "--wq has 3 rows but each query of --q has 2 numbers (Q = X_q W_Q, K = X_kv W_K, V = X_kv W_V)");
  CHECK(refusal({"--cross", Xkv, "--q", Xq, "--wq", WQ, "--wk", WK, "--bk", "1,2"}) ==
        "--bk has 2 numbers but W_K has 4 columns (a bias adds one number to each column)");
  CHECK(refusal({"--cross", Xkv, "--q", Xq}) ==
        "W_K (the identity: --wk not given) has 3 columns but W_Q (the identity: --wq not given) has 2 columns (the "
        "queries and the keys need the same size, h·d_k)");
  CHECK(refusal({"--cross", Xkv, "--self", Xkv}) == "--self and --cross are two kinds of attention: give one");
  CHECK(refusal({"--bq", "1"}) == "--bq needs --self (the sentence of self-attention) or --cross (cross-attention)");
  CHECK(refusal({"--self", Xkv, "--bo", "1,2,3"}) == "--bo needs --wo (b_O is added to Y = Z W_O)");
  CHECK(refusal({"--cross", Xkv, "--q", "1,0,0", "--words", "a,b,c,d"}).starts_with(
      "--cross takes the keys and values from its sentence: leave out --words"));
  CHECK(refusal({"--cross", Xkv, "--q", "1,0,0", "--note-labels", "a,b"}) ==
        "--note-labels gives 2 labels but there are 4 words");
}

TEST_CASE("attn-calc --self: identity projections, one head, --score dot, and W3's map", "[attn-calc]") {
  // W3 (the unit's "I drink tea" with 3×2 projections): drink looks hardest at tea
  auto c = parse({"--self", "1,0,0;0,1,0;0,0,1", "--words", "I,drink,tea", "--wq", "1,0;0,1;1,1", "--wk",
                  "2,0;1.5,1.5;0,2", "--wv", "1,0;1,1;0,1"});
  const auto r = attn_calc::compute(c);
  REQUIRE(r.maps.size() == 1);
  CHECK(r.maps[0].name.empty());
  CHECK(attn::report::fixed(r.maps[0].weights(1, 2), 3) == "0.514");  // drink → tea
  CHECK(attn::report::fixed(r.maps[0].scores(1, 1), 3) == "1.061");    // (0,1)·(1.5,1.5)/√2
  CHECK(rendered(c, r, attn_calc::output_format::text).find("Output Y = A V") != std::string::npos);
  // nothing given: W_Q = W_K = W_V = I, so Q = K = V = X; with --score dot S = X Xᵀ
  auto plain = parse({"--self", "1,2;3,4;0,1", "--score", "dot"});
  const auto p = attn_calc::compute(plain);
  CHECK(plain.query_labels == std::vector<std::string>{"x1", "x2", "x3"});
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 2; ++j) CHECK(p.V(i, j) == plain.queries.data[i * 2 + j]);
  CHECK(p.maps[0].scores(0, 1) == 1 * 3 + 2 * 4);  // exact: small integers
  const std::string text = rendered(plain, p, attn_calc::output_format::text);
  CHECK(text.find("(W_Q, W_K and W_V: the identity, not given)") != std::string::npos);
  CHECK(text.find("S = Q Kᵀ (dot: not divided by √d_k)") != std::string::npos);
  CHECK(text.find("\nW_Q\n") == std::string::npos);  // the identity is not printed as a table
  CHECK(rendered(plain, p, attn_calc::output_format::json).find("\"identity\": [\"W_Q\", \"W_K\", \"W_V\"]") !=
        std::string::npos);
}

TEST_CASE("attn-calc per-row masks: causal with the cache offset, a mask matrix, every mask must allow", "[attn-calc]") {
  // 2 new queries over 4 notes (decoding with 2 cached): query t sees notes 0 … t + 2 (from 0)
  const char* queries = "1,0,0,1;0,1,1,0";
  const char* notes = "1,0,0,0;0,1,0,0;0,0,1,0;0,0,0,1";
  auto c = parse({"--q", queries, "--notes", notes, "--mask", "causal"});
  CHECK(c.causal);
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t j = 0; j < 4; ++j) CHECK(c.allowed(t, j) == (j <= t + 4 - 2));
  const auto r = attn_calc::compute(c);
  const auto causal = [](std::size_t t, std::size_t j) { return j <= t + 2; };
  const grid S = product(exact(c.queries), exact(c.notes), 0, 4, true);
  check_close(r.weights, softmax_rows(S, 1, 1, causal), "α");
  CHECK(r.weights(0, 3) == 0.0);  // exactly 0, not merely small
  // every kind at once: a key mask, a matrix (one row per query) and causal; all must allow
  auto all = parse({"--q", queries, "--notes", notes, "--mask", "causal", "--mask", "1,1,0,1", "--mask", "0,1,1,1;1,1,1,1"});
  const auto every = [](std::size_t t, std::size_t j) { return j <= t + 2 && j != 2 && !(t == 0 && j == 0); };
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t j = 0; j < 4; ++j) CHECK(all.allowed(t, j) == every(t, j));
  const auto ra = attn_calc::compute(all);
  check_close(ra.weights, softmax_rows(S, 1, 1, every), "α");
  // the tables dash exactly the masked entries; the SVG hatches them; JSON says which
  const std::string text = rendered(all, ra, attn_calc::output_format::text);
  const auto map_at = text.find("Weights α_tj: the alignment map (each row sums to 1; — masked)");
  REQUIRE(map_at != std::string::npos);
  CHECK(count(text.substr(map_at, text.find("Contexts") - map_at), "—") == 1 + 3 + 1);  // title, q1, q2
  CHECK(rendered(all, ra, attn_calc::output_format::md)
            .find("Causal mask: query t sees notes 1 … t + 2 (1 … t + n − T, n = 4 notes, T = 2 queries).") !=
        std::string::npos);
  const std::string svg = rendered(all, ra, attn_calc::output_format::svg);
  CHECK(count(svg, "fill=\"url(#attn-masked)\"") == 4 + 1);  // the cells and the legend's swatch
  const std::string json = rendered(all, ra, attn_calc::output_format::json);
  CHECK(attn_test::json_problem(json) == "");
  CHECK(json.find("\"causal\": true") != std::string::npos);
  CHECK(json.find("\"row_mask\": [\n      [false, true, true, true],\n      [true, true, true, true]\n    ]") !=
        std::string::npos);
  // the Jacobians follow each query's own mask: nothing flows from a note it may not see
  auto jac = parse({"--q", queries, "--notes", notes, "--mask", "causal", "--jacobian"});
  const auto rj = attn_calc::compute(jac);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t k = 0; k < 4; ++k) CHECK(rj.note_jacobians[0][3](i, k) == 0.0);
  CHECK(rj.fd_notes.max_abs_error < 1e-9);
  CHECK(rj.fd_query.max_abs_error < 1e-9);
  // --steps: e^s of a masked note is dashed too
  auto steps = parse({"--q", queries, "--notes", notes, "--mask", "causal", "--steps"});
  const std::string st = rendered(steps, attn_calc::compute(steps), attn_calc::output_format::text);
  CHECK(st.find("q1  2.718  1.000  1.000      —  4.718") != std::string::npos);
  // a query that may see nothing: more queries than notes, so the first sees none (t + n − T < 0)
  auto none = parse({"--q", "1,0;0,1;1,1", "--notes", "1,0;0,1", "--mask", "causal", "--format", "json"});
  const auto rn = attn_calc::compute(none);
  CHECK(rn.row_sums[0] == 0.0);
  CHECK_THAT(rn.row_sums[2], Catch::Matchers::WithinAbs(1.0, 4 * std::numeric_limits<double>::epsilon()));  // two weights
  CHECK(rendered(none, rn, attn_calc::output_format::json).find("\"worst_abs_row_sum_error\": 0") != std::string::npos);
  CHECK(rendered(none, rn, attn_calc::output_format::text)
            .find("(each row sums to 1, or is 0 where nothing is kept; — masked)") != std::string::npos);
  // --self: causal is the lower triangle (T = n)
  auto self = parse({"--self", "1,0;0,1;1,1", "--mask", "causal"});
  const auto rs = attn_calc::compute(self);
  for (std::size_t t = 0; t < 3; ++t)
    for (std::size_t j = t + 1; j < 3; ++j) CHECK(rs.maps[0].weights(t, j) == 0.0);
  CHECK(rs.maps[0].weights(0, 0) == 1.0);
  // the one-row mask works as before, as a row or a column, and masks combine
  CHECK(parse({"--mask", "1;1;0"}).mask == std::vector<char>{1, 1, 0});
  CHECK(parse({"--mask", "1,1,0", "--mask", "0,1,1"}).mask == std::vector<char>{0, 1, 0});
  CHECK(parse({"--mask", "1,1,0"}).row_mask.empty());
}

TEST_CASE("attn-calc --dot-vs-scaled: W4, the softmax saturates without the √d", "[attn-calc]") {
  // d = 16, q = (1, …, 1), keys (1, …, 1), (½, …, ½), (0, …, 0): raw scores (16, 8, 0) give
  // weights ≈ (0.99966, 0.00034, 0.00000); divided by √16 = 4: (4, 2, 0), ≈ (0.867, 0.117, 0.016)
  std::string q, keys;
  for (int k = 0; k < 16; ++k) q += k ? ",1" : "1";
  for (const char* v : {"1", "0.5", "0"})
    for (int k = 0; k < 16; ++k) keys += std::string(k ? "," : keys.empty() ? "" : ";") + v;
  auto c = parse({"--q", q, "--notes", keys, "--dot-vs-scaled", "--decimals", "5"});
  const auto r = attn_calc::compute(c);
  REQUIRE(r.maps.size() == 2);
  CHECK(r.maps[0].name == "dot");
  CHECK(r.maps[1].name == "scaled_dot");
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK(r.maps[0].scores(0, j) == 16.0 - 8.0 * static_cast<double>(j));  // exact: sums of 1s and ½s
    CHECK(r.maps[1].scores(0, j) == 4.0 - 2.0 * static_cast<double>(j));
  }
  const grid S = product(exact(c.queries), exact(c.notes), 0, 16, true);
  check_close(r.maps[0].weights, softmax_rows(S, 1, 1, [](std::size_t, std::size_t) { return true; }), "dot");
  check_close(r.maps[1].weights, softmax_rows(S, 0.25, 1, [](std::size_t, std::size_t) { return true; }), "scaled");
  const std::string text = rendered(c, r, attn_calc::output_format::text);
  CHECK(text.find("q  0.99966  0.00034  0.00000  1.00000") != std::string::npos);
  CHECK(text.find("q  0.86681  0.11731  0.01588  1.00000") != std::string::npos);
  CHECK(text.find("with d = 16 (√16 = 4)") != std::string::npos);
  const std::string svg = rendered(c, r, attn_calc::output_format::svg);
  CHECK(attn_test::xml_problem(svg) == "");
  // human titles, not code names; the axes name the keys; 5 decimals (auto_decimals) show 0.00034
  CHECK(svg.find(">dot product: s = q · k</text>") != std::string::npos);
  CHECK(svg.find(">scaled by 1/√16: s = q · k / √16</text>") != std::string::npos);
  CHECK(svg.find("scaled_dot") == std::string::npos);
  CHECK(svg.find(">keys</text>") != std::string::npos);
  CHECK(svg.find(">0.00034</text>") != std::string::npos);
  CHECK(count(svg, "<linearGradient") == 1);
  const auto csv = attn_test::read_csv(rendered(c, r, attn_calc::output_format::csv));
  CHECK(csv[2] == std::vector<std::string>{"scaled_dot", "q", "0.86681", "0.11731", "0.01588"});
  const std::string json = rendered(c, r, attn_calc::output_format::json);
  CHECK(attn_test::json_problem(json) == "");
  CHECK(json.find("\"scale\": 0.25") != std::string::npos);
  // with --self and heads: the dot maps of every head, then the scaled ones, a 2 × h grid
  auto self = parse({"--self", "1,0,2,0;0,1,0,2", "--heads", "2", "--dot-vs-scaled", "--format", "svg"});
  const auto rs = attn_calc::compute(self);
  REQUIRE(rs.maps.size() == 4);
  CHECK(rs.maps[2].name == "scaled_dot, head 1");
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t j = 0; j < 2; ++j)  // scaled by 1/√2: within the rounding of one product and the scale
      CHECK_THAT(rs.maps[2].scores(t, j), Catch::Matchers::WithinAbs(rs.maps[0].scores(t, j) / std::sqrt(2.0),
                                                                     4 * std::numeric_limits<double>::epsilon() *
                                                                         std::abs(rs.maps[0].scores(t, j))));
  CHECK(rs.Y.rows() == 0);  // the comparison is of maps
  CHECK(count(attn_calc::render(self, rs), "<title>scaled by 1/√2, head 2: ") == 4);
  // --head-labels name the maps in titles; the LaTeX \labels keep the head's number (a label
  // "s(" in a \label made to_latex throw: found by fuzz_cli)
  auto named = parse({"--self", "1,0,2,0;0,1,0,2", "--heads", "2", "--head-labels", "back,s(", "--dot-vs-scaled",
                      "--format", "latex"});
  const std::string latex = attn_calc::render(named, attn_calc::compute(named));
  CHECK(latex.find("\\label{attn:map-scaled-dot-head2}") != std::string::npos);
  CHECK(latex.find("Weights, scaled by $1/\\sqrt{2}$, s(: ") != std::string::npos);
  // auto_decimals: two significant digits of the smallest weight ≥ 1e-5, 3 to 5 decimals
  CHECK(attn_calc::auto_decimals(r) == 5);  // W4's 0.000335
  CHECK(attn_calc::auto_decimals(rs) == 3);
}

TEST_CASE("attn-calc refuses what --self, --heads, the masks and --dot-vs-scaled cannot use", "[attn-calc]") {
  const char* X = "1,0,0;0,1,0;0,0,1";
  CHECK(refusal({"--mask", "1,0;0,1"}) ==
        "--mask is 2x2: give one row of 3 entries (every query the same), 4 rows of 3 (one per query) or causal");
  CHECK(refusal({"--self", X, "--mask", "1,1;1,1"}) ==
        "--mask is 2x2: give one row of 3 entries (every word the same), 3 rows of 3 (one per word) or causal");
  CHECK(refusal({"--self", X, "--mask", "1,1"}) == "--mask has 2 entries but there are 3 words");
  CHECK(refusal({"--mask", "causal", "--mask", " causal "}) == "--mask causal is given twice");
  CHECK(refusal({"--mask", "1,0,2;1,1,1;1,1,1;1,1,1"}) ==
        "--mask: the entry in row 1, column 3 is 2; entries must be 1 (keep) or 0 (mask out)");
  CHECK(refusal({"--mask"}) == "--mask needs a value");
  CHECK(refusal({"--self", X, "--q", "1,0,0"}) == "--self takes the queries, keys and values from the sentence: leave out --q");
  CHECK(refusal({"--self", X, "--note-labels", "a,b,c"}) ==
        "--self takes the queries, keys and values from the sentence: leave out --note-labels (--words names the words)");
  CHECK(refusal({"--self", X, "--jacobian"}) == "--jacobian is for --q and --notes, not --self");
  CHECK(refusal({"--self", X, "--steps"}) == "--steps is for --q and --notes, not --self");
  CHECK(refusal({"--self", X, "--score", "additive"}) == "--self scores with dot or scaled_dot (the default), not --score additive");
  CHECK(refusal({"--words", "1"}) == "--words needs --self (the sentence of self-attention)");
  for (const char* option : {"--wq", "--wk", "--wv", "--wo", "--heads", "--head-labels", "--bq", "--bk", "--bv", "--bo"})
    CHECK(refusal({option, "1"}) ==
          std::string(option) + " needs --self (the sentence of self-attention) or --cross (cross-attention)");
  CHECK(refusal({"--self", X, "--wq", "1,0;0,1"}) == "--wq has 2 rows but each word of --self has 3 numbers (Q = X W_Q, K = X W_K, V = X W_V)");
  CHECK(refusal({"--self", X, "--wk", "1,0;0,1;1,1"}) ==
        "--wk has 2 columns but W_Q (the identity: --wq not given) has 3 columns (the queries and the keys need the same size, h·d_k)");
  CHECK(refusal({"--self", X, "--heads", "2"}) == "--heads 2 does not divide the 3 columns of W_Q (each head takes columns / h of them)");
  CHECK(refusal({"--self", X, "--wq", "1,0;0,1;1,1", "--wk", "1,0;0,1;1,1", "--heads", "2"}) ==
        "--heads 2 does not divide the 3 columns of W_V (each head takes columns / h of them)");
  CHECK(refusal({"--self", X, "--wo", "1,0;0,1"}) ==
        "--wo has 2 rows but W_V (the identity: --wv not given) has 3 columns (Y = [Z_1 … Z_h] W_O)");
  CHECK(refusal({"--self", X, "--heads", "0"}) == "--heads: 0 is outside 1..1024");
  CHECK(refusal({"--self", X, "--words", "I,drink"}) == "--words gives 2 labels but there are 3 words");
  CHECK(refusal({"--self", "1e200,0;0,1", "--score", "dot"}).find("are not finite") != std::string::npos);
  CHECK(refusal({"--dot-vs-scaled", "--score", "scaled_dot"}) == "--dot-vs-scaled shows both dot and scaled_dot: leave out --score");
  CHECK(refusal({"--dot-vs-scaled", "--no-attention"}) == "--dot-vs-scaled shows the two maps: leave out --no-attention");
  CHECK(refusal({"--self", X, "--heads", "3"}).empty());  // d_k = 1: three heads of one column each
}

// ---------------------------------------------------------------------------------------------
// The lessons of §8–§9 (examples/attn_calc/lessons.hpp): --pe, --rope, --layer-norm, --rms-norm,
// --activations, --block. Each number is held to its formula written out here in long double
// (NEXT_SECTIONS.md's conventions), not to a run of attn; the goldens (tests/golden/lesson_*)
// hold the layout.
// ---------------------------------------------------------------------------------------------

namespace {
const attn_calc::lesson_table& lesson_table_named(const attn_calc::results& r, const std::string& id) {
  for (const auto& t : r.lesson.tables)
    if (t.id == id) return t;
  FAIL("no table " << id);
  return r.lesson.tables.front();
}

/// Every format of a lesson reads back: JSON and SVG well formed, csv-long a row per number of
/// every table (and a header), csv the main table's rows and a header.
void check_lesson_formats(attn_calc::config c, const attn_calc::results& r, bool svg) {
  CHECK(attn_test::json_problem(rendered(c, r, attn_calc::output_format::json)) == "");
  std::size_t numbers = 0;
  for (const auto& t : r.lesson.tables) numbers += t.values.rows() * t.values.cols();
  CHECK(attn_test::read_csv(rendered(c, r, attn_calc::output_format::csv_long)).size() == numbers + 1);
  CHECK(attn_test::read_csv(rendered(c, r, attn_calc::output_format::csv)).size() ==
        r.lesson.tables[r.lesson.main].values.rows() + 1);
  // SVG: --pe's heatmap, --rope's arrows; the others' main table (the parser refuses svg for
  // them, but a config built otherwise still renders well-formed XML)
  const std::string picture = rendered(c, r, attn_calc::output_format::svg);
  CHECK(attn_test::xml_problem(picture) == "");
  CHECK(picture.find(svg ? (c.lesson == attn_calc::lesson_kind::pe ? "PE value" : "before (a, b)") : "stop-color") !=
        std::string::npos);
  for (const auto f : {attn_calc::output_format::text, attn_calc::output_format::md})
    CHECK(rendered(c, r, f).find(r.lesson.tables[r.lesson.main].title.text.substr(0, 6)) != std::string::npos);
  CHECK(rendered(c, r, attn_calc::output_format::latex).find("\\label{attn:" + r.lesson.tables[r.lesson.main].id + "}") !=
        std::string::npos);
}

/// Text output with the paragraphs' line breaks undone (they break at spaces, at 88 columns).
std::string unwrapped(std::string s) {
  for (char& ch : s)
    if (ch == '\n') ch = ' ';
  return s;
}
}  // namespace

TEST_CASE("attn-calc --pe: W8's 50 × 32 sines and cosines, both layouts, and a diverging heatmap", "[attn-calc]") {
  for (const bool concat : {false, true}) {
    auto c = concat ? parse({"--pe", "--layout", "concatenated"}) : parse({"--pe"});
    const auto r = attn_calc::compute(c);
    const auto& pe = lesson_table_named(r, "pe").values;
    REQUIRE(pe.rows() == 50);
    REQUIRE(pe.cols() == 32);
    for (std::size_t p = 0; p < 50; ++p)
      for (std::size_t i = 0; i < 16; ++i) {
        const ld omega = std::pow(10000.0L, -static_cast<ld>(2 * i) / 32), angle = static_cast<ld>(p) * omega;
        const std::size_t s = concat ? i : 2 * i, k = concat ? 16 + i : 2 * i + 1;
        // one rounding to double (½ ulp ≤ 2⁻⁵⁴ for |x| ≤ 1) and the angle's rounding in long double
        // (≤ 49·2⁻⁶⁴ rad) moved through sin or cos (slope ≤ 1): below ε = 2⁻⁵²
        INFO("p = " << p << ", pair " << i);
        CHECK(std::abs(static_cast<ld>(pe(p, s)) - std::sin(angle)) <= eps);
        CHECK(std::abs(static_cast<ld>(pe(p, k)) - std::cos(angle)) <= eps);
      }
    const std::string csv = rendered(c, r, attn_calc::output_format::csv);
    CHECK(csv.starts_with("p,0,1,2,"));
    CHECK(csv.find("\n1,0.841,") != std::string::npos);  // sin 1
    const std::string svg = rendered(c, r, attn_calc::output_format::svg);
    CHECK(attn_test::xml_problem(svg) == "");
    CHECK(svg.find(">position p</text>") != std::string::npos);
    CHECK(svg.find(">PE value</text>") != std::string::npos);
    CHECK(svg.find(">-1</text>") != std::string::npos);  // the legend runs from −1 …
    CHECK(svg.find(">1</text>") != std::string::npos);   // … to 1
    CHECK(svg.find("stop-color=\"#f7f7f7\"") != std::string::npos);  // white in the middle
    // p = 0: every sine 0 (white), every cosine 1 (the darkest red)
    CHECK(count(svg, "<title>0 \xE2\x86\x92 ") == 32);
    CHECK(svg.find("<title>0 \xE2\x86\x92 " + std::string(concat ? "16" : "1") + ": 1.000</title>\n      <rect x=") !=
          std::string::npos);
    CHECK(count(svg, "fill=\"#b2182b\"") >= 16);
    CHECK(count(svg, "fill=\"#f7f7f7\"") >= 16);
  }
  // --steps: the frequencies, and one entry worked out
  auto c = parse({"--pe", "--positions", "8", "--dim", "6", "--steps"});
  const auto r = attn_calc::compute(c);
  const auto& w = lesson_table_named(r, "frequencies").values;
  REQUIRE(w.rows() == 3);
  for (std::size_t i = 0; i < 3; ++i)  // pow in long double, rounded once
    CHECK(std::abs(static_cast<ld>(w(i, 0)) - std::pow(10000.0L, -static_cast<ld>(2 * i) / 6)) <= eps * w(i, 0));
  const std::string text = unwrapped(rendered(c, r, attn_calc::output_format::text));
  CHECK(text.find("ω_1 = 10000^(−2/6) = 0.046, PE[1, 2] = sin(1 · 0.046) = 0.046") != std::string::npos);
  CHECK(text.find("1 (columns 2, 3)") != std::string::npos);
  check_lesson_formats(c, r, true);
  CHECK(refusal({"--pe", "--dim", "7"}) == "--dim: 7 is odd (sines and cosines come in pairs)");
  CHECK(refusal({"--pe", "--layout", "half-split"}) ==
        "--layout: \"half-split\" is not a layout of --pe (interleaved or concatenated)");
  CHECK(refusal({"--pe", "--positions", "1000", "--dim", "200"}) ==
        "--pe: 1000 positions x 200 dimensions are 200000 numbers; attn-calc prints at most 100000");
}

TEST_CASE("attn-calc --rope: one pair turned by p·θ_i, in either form, by hand", "[attn-calc]") {
  const ld a = 1, b = 0.5, theta = std::pow(10000.0L, -2.0L / 8), phi = 3 * theta;
  attn_calc::results turned[2];
  for (const bool split : {false, true}) {
    auto c = split ? parse({"--rope", "1,0.5", "--position", "3", "--pair", "1", "--dim", "8", "--layout", "half-split", "--steps"})
                   : parse({"--rope", "1,0.5", "--position", "3", "--pair", "1", "--dim", "8", "--steps"});
    const auto r = attn_calc::compute(c);
    CHECK(r.lesson.first == (split ? 1u : 2u));
    CHECK(r.lesson.second == (split ? 5u : 3u));
    const auto& v = lesson_table_named(r, "rotation").values;
    REQUIRE(v.rows() == 8);
    // θ and φ formed in long double and rounded once; cos and sin likewise: ½ ulp each
    CHECK(std::abs(static_cast<ld>(v(0, 0)) - theta) <= eps * theta);
    CHECK(std::abs(static_cast<ld>(v(1, 0)) - phi) <= eps * phi);
    CHECK(std::abs(static_cast<ld>(v(2, 0)) - std::cos(phi)) <= eps);
    CHECK(std::abs(static_cast<ld>(v(3, 0)) - std::sin(phi)) <= eps);
    // a′ = a cos φ − b sin φ in double from cos and sin rounded: two products and a sum, ≤ 3ε·(|a| + |b|)
    CHECK(std::abs(static_cast<ld>(r.lesson.a_turned) - (a * std::cos(phi) - b * std::sin(phi))) <= 3 * eps * (a + b));
    CHECK(std::abs(static_cast<ld>(r.lesson.b_turned) - (a * std::sin(phi) + b * std::cos(phi))) <= 3 * eps * (a + b));
    const std::string text = unwrapped(rendered(c, r, attn_calc::output_format::text));
    CHECK(text.find("θ_1 = 10000^(−2·1/8) = 0.100; φ = p·θ_1 = 3 · 0.100 = 0.300 rad") != std::string::npos);
    CHECK(text.find("a′ = a cos φ − b sin φ = 1 · 0.955 − 0.5 · 0.296 = 0.808") != std::string::npos);
    const std::string svg = rendered(c, r, attn_calc::output_format::svg);
    CHECK(svg.find(">before (a, b) = (1, 0.5)</text>") != std::string::npos);
    CHECK(svg.find(">after (a\u2032, b\u2032) = (0.808, 0.773)</text>") != std::string::npos);
    check_lesson_formats(c, r, true);
    turned[split ? 1 : 0] = r;
  }
  // the two forms are one permutation apart: the same pair turns the same way (W8)
  CHECK(turned[0].lesson.a_turned == turned[1].lesson.a_turned);
  CHECK(turned[0].lesson.b_turned == turned[1].lesson.b_turned);
  CHECK(refusal({"--rope", "1,0", "--pair", "4"}) == "--pair: 4 is not a pair of d_k = 8 numbers (pairs 0 to 3)");
  CHECK(refusal({"--rope", "1,0,2"}) == "--rope needs a pair of numbers, a,b, not 3 numbers");
  CHECK(refusal({"--rope", "1,0", "--layout", "concatenated"}) ==
        "--layout: \"concatenated\" is not a form of --rope (interleaved or half-split)");
}

TEST_CASE("attn-calc --layer-norm and --rms-norm: W9's (1, 2, 3, 4) by hand, γ and β", "[attn-calc]") {
  auto c = parse({"--layer-norm", "1,2,3,4;10000,10000.5,10001,9999", "--ln-gamma", "1,1,2,2", "--ln-beta",
                  "0,0,1,-1", "--eps", "0", "--steps"});
  const auto r = attn_calc::compute(c);
  const ld x[2][4] = {{1, 2, 3, 4}, {10000, 10000.5L, 10001, 9999}}, g[4] = {1, 1, 2, 2}, be[4] = {0, 0, 1, -1};
  const auto& stats = lesson_table_named(r, "statistics").values;
  const auto& y = lesson_table_named(r, "y").values;
  for (std::size_t t = 0; t < 2; ++t) {
    ld mu = 0, var = 0;
    for (const ld v : x[t]) mu += v / 4;
    for (const ld v : x[t]) var += (v - mu) * (v - mu) / 4;
    const ld rs = 1 / std::sqrt(var);
    // μ: a sum of 4 in double, ≤ 5ε·Σ|x|/4; σ² from differences exact here (Sterbenz) to 6ε; r one more root
    CHECK(std::abs(static_cast<ld>(stats(t, 0)) - mu) <= 5 * eps * mu);
    CHECK(std::abs(static_cast<ld>(stats(t, 1)) - var) <= 6 * eps * var);
    CHECK(std::abs(static_cast<ld>(stats(t, 3)) - rs) <= 6 * eps * rs);
    for (std::size_t i = 0; i < 4; ++i) {  // x̂ to (|x − μ|·δμ + 4ε), times γ, plus β
      const ld want = g[i] * (x[t][i] - mu) * rs + be[i];
      CHECK(std::abs(static_cast<ld>(y(t, i)) - want) <= 8 * eps * (g[i] * (std::abs(x[t][i]) + mu) * rs + std::abs(be[i])));
    }
  }
  const std::string text = unwrapped(rendered(c, r, attn_calc::output_format::text));
  CHECK(text.find("Row 1: μ = (1 + 2 + 3 + 4) / 4 = 2.500; σ² = ((1 − 2.500)² + (2 − 2.500)² + (3 − 2.500)² + (4 − "
                  "2.500)²) / 4 = 1.250") != std::string::npos);
  check_lesson_formats(c, r, false);
  // W9 itself: γ = 1, β = 0, ε = 0 gives (−1.342, −0.447, 0.447, 1.342)
  auto w9 = parse({"--layer-norm", "1,2,3,4", "--eps", "0", "--format", "csv"});
  CHECK(attn_calc::render(w9, attn_calc::compute(w9)) == "row,1,2,3,4\n1,-1.342,-0.447,0.447,1.342\n");
  // RMSNorm: r = 1/√(mean(x²) + ε), mean(x²) = 7.5
  auto rms = parse({"--rms-norm", "1,2,3,4", "--steps"});
  const auto rr = attn_calc::compute(rms);
  const ld rr_want = 1 / std::sqrt(7.5L + 1e-5L);
  CHECK(std::abs(static_cast<ld>(lesson_table_named(rr, "statistics").values(0, 2)) - rr_want) <= 6 * eps * rr_want);
  for (std::size_t i = 0; i < 4; ++i)
    CHECK(std::abs(static_cast<ld>(lesson_table_named(rr, "y").values(0, i)) - (i + 1) * rr_want) <= 8 * eps * (i + 1) * rr_want);
  CHECK(unwrapped(rendered(rms, rr, attn_calc::output_format::text)).find("mean(x²) = (1² + 2² + 3² + 4²) / 4 = 7.500") != std::string::npos);
  CHECK(refusal({"--rms-norm", "1,2", "--ln-beta", "0,0"}) == "--ln-beta is for --layer-norm (RMSNorm has no β)");
  CHECK(refusal({"--layer-norm", "1,2", "--ln-gamma", "1,2,3"}) == "--ln-gamma has 3 numbers but each row has 2 (one per column)");
  CHECK(refusal({"--layer-norm", "1,2", "--eps", "-1"}) == "--eps: -1 is below 0 (ε is added to a variance)");
  CHECK(refusal({"--layer-norm", "1,2;3,3", "--eps", "0"}) ==
        "--layer-norm: row 2 is constant and ε = 0, so it has no scale (0/0): give --eps above 0, or another row");
  CHECK(refusal({"--layer-norm", "1e300,-1e300"}) == "the numbers of this lesson are not finite (the inputs are too large for a double)");
}

TEST_CASE("attn-calc --activations: GELU (erfc and tanh) and ReLU with their slopes, by hand", "[attn-calc]") {
  auto c = parse({"--activations", "-10,-1,0,0.5,1,3", "--steps", "--decimals", "4"});
  const auto r = attn_calc::compute(c);
  const auto& m = lesson_table_named(r, "activations").values;
  const ld xs[] = {-10, -1, 0, 0.5, 1, 3};
  const ld pi = std::numbers::pi_v<ld>;
  for (std::size_t k = 0; k < 6; ++k) {
    const ld x = xs[k], Phi = std::erfc(-x / std::sqrt(2.0L)) / 2, pdf = std::exp(-x * x / 2) / std::sqrt(2 * pi);
    const ld u = std::sqrt(2 / pi) * (x + 0.044715L * x * x * x), du = std::sqrt(2 / pi) * (1 + 3 * 0.044715L * x * x);
    const ld s = 1 / (1 + std::exp(-2 * u)), ss = s * (1 - s);
    INFO("x = " << static_cast<double>(x));
    // erfc and exp within 2 ulps (glibc), a product and a sum more: 4ε of each term's size; and
    // the argument z = −x/√2 (or x²/2) rounds to 2ε relative, which erfc(z) (relative condition
    // 2z², d ln erfc/dz ≈ −2z) and e^(−x²/2) (condition x²/2) carry as 2x²ε: (4 + 2x²)ε
    const ld rel = (4 + 2 * x * x) * eps;
    CHECK(std::abs(static_cast<ld>(m(k, 0)) - Phi) <= rel * Phi);
    CHECK(std::abs(static_cast<ld>(m(k, 1)) - x * Phi) <= rel * std::abs(x * Phi));
    CHECK(std::abs(static_cast<ld>(m(k, 2)) - (Phi + x * pdf)) <= rel * (Phi + std::abs(x * pdf)));
    // tanh form: u to 3ε relative, moved into σ(2u) as 2|u|·σ(−2u)·3ε, and exp and the division 3ε more
    const ld ds = 6 * eps * (1 + std::abs(u));
    CHECK(std::abs(static_cast<ld>(m(k, 3)) - x * s) <= ds * std::abs(x * s) + eps * eps);
    CHECK(std::abs(static_cast<ld>(m(k, 4)) - (s + 2 * x * du * ss)) <= ds * (s + std::abs(2 * x * du * ss)) * 2 + eps * eps);
    CHECK(m(k, 5) == (x > 0 ? static_cast<double>(x) : 0.0));
    CHECK(m(k, 6) == (x > 0 ? 1.0 : 0.0));
  }
  CHECK(m(0, 1) < 0);  // GELU(−10) = −7.6e−23: erfc keeps it, 1 + erf would give 0
  const std::string text = unwrapped(rendered(c, r, attn_calc::output_format::text));
  // W9: GELU(1) = 0.841 both ways, apart in the 4th decimal
  CHECK(text.find("GELU(1) = 1 · 0.8413 = 0.8413") != std::string::npos);
  CHECK(text.find("GELU_tanh(1) = ½ · 1 · (1 + 0.6824) = 0.8412") != std::string::npos);
  CHECK(text.find("GELU_tanh′(1) = σ(2u) + 2x·u′·σ(2u)·(1 − σ(2u)) = 0.8412 + 2 · 1 · 0.9049 · 0.8412 · 0.1588 = 1.0830") !=
        std::string::npos);
  CHECK(text.find("Φ(-1) = ½·erfc(0.7071) = 0.1587; GELU(-1) = (-1) · 0.1587 = -0.1587") != std::string::npos);
  check_lesson_formats(c, r, false);
}

namespace {
/// A block in long double, written out (no attn): one head (scaled dot), W_O, W₁, W₂, GELU (or
/// ReLU, GELU's tanh form: `activation` 0, 2),
/// LayerNorm with γ = 1, β = 0, ε = 1e-5 (W9's: X = "I drink tea", W3's head); every
/// intermediate by name.
struct block_by_hand {
  using M = std::vector<std::vector<ld>>;
  std::map<std::string, M> at;
  M stats;  // per word: μ₁, σ²₁, r₁, μ₂, σ²₂, r₂
  static M of(const auto& m) {
    M out(m.rows(), std::vector<ld>(m.cols()));
    for (std::size_t i = 0; i < m.rows(); ++i)
      for (std::size_t j = 0; j < m.cols(); ++j) out[i][j] = m(i, j);
    return out;
  }
  static M times(const M& a, const M& b) {
    M c(a.size(), std::vector<ld>(b[0].size(), 0));
    for (std::size_t i = 0; i < a.size(); ++i)
      for (std::size_t k = 0; k < b.size(); ++k)
        for (std::size_t j = 0; j < b[0].size(); ++j) c[i][j] += a[i][k] * b[k][j];
    return c;
  }
  static M plus(M a, const M& b) {
    for (std::size_t i = 0; i < a.size(); ++i)
      for (std::size_t j = 0; j < a[i].size(); ++j) a[i][j] += b[i][j];
    return a;
  }
  M norm(const M& a, std::size_t which) {
    M out = a;
    for (std::size_t t = 0; t < a.size(); ++t) {
      ld mu = 0, var = 0;
      for (const ld v : a[t]) mu += v / static_cast<ld>(a[t].size());
      for (const ld v : a[t]) var += (v - mu) * (v - mu) / static_cast<ld>(a[t].size());
      const ld r = 1 / std::sqrt(var + 1e-5L);
      for (ld& v : out[t]) v = (v - mu) * r;
      stats[t][3 * which] = mu, stats[t][3 * which + 1] = var, stats[t][3 * which + 2] = r;
    }
    return out;
  }
  M wq, wk, wv, wo, w1, w2;
  int activation = 1;
  M attention(const M& x) {  // one head, scaled dot
    const M q = times(x, wq), k = times(x, wk), v = times(x, wv);
    const std::size_t T = x.size(), dk = q[0].size();
    M z(T, std::vector<ld>(v[0].size(), 0)), a(T, std::vector<ld>(T, 0));
    for (std::size_t t = 0; t < T; ++t) {
      std::vector<ld> e(T);
      ld sum = 0;
      for (std::size_t j = 0; j < T; ++j) {
        ld dot = 0;
        for (std::size_t i = 0; i < dk; ++i) dot += q[t][i] * k[j][i];
        sum += e[j] = std::exp(dot / std::sqrt(static_cast<ld>(dk)));
      }
      for (std::size_t j = 0; j < T; ++j) {
        a[t][j] = e[j] / sum;
        for (std::size_t i = 0; i < v[0].size(); ++i) z[t][i] += e[j] / sum * v[j][i];
      }
    }
    at["Q"] = q, at["K"] = k, at["V"] = v, at["map"] = a, at["Z"] = z;
    return times(z, wo);
  }
  void ffn(const M& in) {
    at["ffn_pre"] = times(in, w1);
    at["ffn_hidden"] = at["ffn_pre"];
    const ld pi = 3.141592653589793238462643383279502884L;
    for (auto& row : at["ffn_hidden"])
      for (ld& v : row)
        v = activation == 0 ? std::max(v, 0.0L)
            : activation == 2 ? v * (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715L * v * v * v))) / 2
                              : v * std::erfc(-v / std::sqrt(2.0L)) / 2;
    at["ffn_out"] = times(at["ffn_hidden"], w2);
  }
  /// The block on X with the weights given (W9's when X is left empty).
  block_by_hand(bool post, M x, M q = {}, M k = {}, M v = {}, M o = {}, M f1 = {}, M f2 = {}, int act = 1)
      : wq(std::move(q)), wk(std::move(k)), wv(std::move(v)), wo(std::move(o)), w1(std::move(f1)), w2(std::move(f2)),
        activation(act) {
    if (x.empty()) {
      x = of(worked::i_drink_tea);
      wq = of(worked::w3::W_Q), wk = of(worked::w3::W_K), wv = of(worked::w3::W_V);
      wo = of(worked::w9::W_O), w1 = of(worked::w9::W_1), w2 = of(worked::w9::W_2);
    }
    stats.assign(x.size(), std::vector<ld>(6));
    if (post) {
      at["attention"] = attention(x);
      at["H1"] = plus(x, at["attention"]);
      at["X1"] = norm(at["H1"], 0);
      ffn(at["X1"]);
      at["H2"] = plus(at["X1"], at["ffn_out"]);
      at["Y"] = norm(at["H2"], 1);
    } else {
      at["A"] = norm(x, 0);
      at["attention"] = attention(at["A"]);
      at["H1"] = plus(x, at["attention"]);
      at["B"] = norm(at["H1"], 1);
      ffn(at["B"]);
      at["Y"] = plus(at["H1"], at["ffn_out"]);
    }
  }
  /// The largest |number| of any intermediate: the size the tolerances scale with.
  [[nodiscard]] ld largest() const {
    ld m = 0;
    for (const auto& [name, values] : at)
      for (const auto& row : values)
        for (const ld v : row) m = std::max(m, std::abs(v));
    return m;
  }
};

/// Every intermediate of `want` is the lesson's table of that name, within `tolerance`; and the norms' table.
void check_block(const attn_calc::results& r, const block_by_hand& want, ld tolerance) {
  std::size_t seen = 0;
  for (const auto& [name, m] : want.at) {
    INFO(name);
    const auto& got = lesson_table_named(r, name).values;
    REQUIRE(got.rows() == m.size());
    REQUIRE(got.cols() == m[0].size());
    for (std::size_t t = 0; t < m.size(); ++t)
      for (std::size_t i = 0; i < m[t].size(); ++i) CHECK(std::abs(static_cast<ld>(got(t, i)) - m[t][i]) <= tolerance);
    ++seen;
  }
  CHECK(seen == 13u);  // Q, K, V, the map, Z, MHA, H₁, the first norm, H⁻, H, FFN, H₂ or B, Y
  const auto& stats = lesson_table_named(r, "norms").values;
  for (std::size_t t = 0; t < want.stats.size(); ++t)
    for (std::size_t k = 0; k < 6; ++k) CHECK(std::abs(static_cast<ld>(stats(t, k)) - want.stats[t][k]) <= tolerance);
}
}  // namespace

TEST_CASE("attn-calc --block: W9's intermediate values, post-LN and pre-LN, against the block by hand", "[attn-calc]") {
  for (const bool post : {true, false}) {
    INFO((post ? "post-LN" : "pre-LN"));
    auto c = post ? parse({"--block"}) : parse({"--block", "--pre-ln"});
    const auto r = attn_calc::compute(c);
    const block_by_hand want(post, {});
    // Each stage (a product of ≤ 4 terms, a softmax of 3, a residual, a norm of 3) adds a few ε
    // of its values' size (≤ 3.3 here); each norm scales what comes in by r ≤ 2.2 (the norms'
    // table). Ten stages of ≤ 10ε, twice magnified by 2.2: below 500ε of the values' size.
    check_block(r, want, 500 * eps * want.largest());
    check_lesson_formats(c, r, false);
  }
  // the post-LN block's printed numbers (W9 by hand: transformer_block.cpp holds them to 1e-12)
  auto c = parse({"--block", "--format", "csv"});
  CHECK(attn_calc::render(c, attn_calc::compute(c)) ==
        "word,1,2,3\nI,1.390,-0.921,-0.468\ndrink,-0.817,1.408,-0.591\ntea,-0.707,-0.707,1.414\n");
}

TEST_CASE("attn-calc --block --ffn-activation: ReLU and GELU's tanh form, against the block by hand", "[attn-calc]") {
  for (const bool post : {true, false})
    for (const auto& [name, act, title] : {std::tuple{"relu", 0, "ReLU(X₁ W₁)"}, std::tuple{"gelu-tanh", 2, "GELU_tanh(X₁ W₁)"}}) {
      INFO((post ? "post-LN " : "pre-LN ") << name);
      auto c = post ? parse({"--block", "--ffn-activation", name}) : parse({"--block", "--pre-ln", "--ffn-activation", name});
      const auto r = attn_calc::compute(c);
      const block_by_hand want(post, {}, {}, {}, {}, {}, {}, {}, act);
      check_block(r, want, 500 * eps * want.largest());  // as GELU's block above: the same stages
      CHECK(r.lesson.texts.at(1).second == name);
      if (post) CHECK(lesson_table_named(r, "ffn_hidden").title.text.ends_with(title));
      check_lesson_formats(c, r, false);
    }
  // W9's hidden layer has negative entries, where ReLU gives 0 and GELU does not: the choice shows
  const auto relu = attn_calc::compute(parse({"--block", "--ffn-activation", "relu"}));
  const auto gelu = attn_calc::compute(parse({"--block"}));
  CHECK(lesson_table_named(relu, "Y").values(0, 0) != lesson_table_named(gelu, "Y").values(0, 0));
  CHECK(refusal({"--block", "--ffn-activation", "tanh"}) ==
        "--ffn-activation: \"tanh\" is not an activation (relu, gelu or gelu-tanh)");
  CHECK(refusal({"--pe", "--ffn-activation", "relu"}) == "--ffn-activation is for --block");
}

TEST_CASE("attn-calc --block --self: a block of your own, checked the same way, and what it refuses", "[attn-calc]") {
  // 4 words of 2 numbers that are not one-hot, one head, W_O, 3 hidden units
  const block_by_hand::M x{{1, 0.5}, {-0.5, 1}, {0.25, -1}, {2, 0}}, q{{1, 0.5}, {0, 1}}, k{{0.5, 0}, {1, 1}},
      v{{1, -1}, {0.5, 0.5}}, o{{1, 0}, {0.5, 1}}, f1{{1, -1, 0.5}, {0, 1, 2}}, f2{{1, 0}, {0, 1}, {0.5, -0.5}};
  for (const bool post : {true, false}) {
    INFO((post ? "post-LN" : "pre-LN"));
    std::vector<std::string_view> args{"--block", "--self", "1,0.5;-0.5,1;0.25,-1;2,0", "--words", "w1,w2,w3,w4",
                                       "--wq", "1,0.5;0,1", "--wk", "0.5,0;1,1", "--wv", "1,-1;0.5,0.5", "--wo", "1,0;0.5,1",
                                       "--ffn-w1", "1,-1,0.5;0,1,2", "--ffn-w2", "1,0;0,1;0.5,-0.5", "--eps", "1e-5"};
    if (!post) args.push_back("--pre-ln");
    auto c = parse(args);
    const auto r = attn_calc::compute(c);
    const block_by_hand want(post, x, q, k, v, o, f1, f2);
    check_block(r, want, 500 * eps * want.largest());  // the same stages as W9's (4 words: a softmax of 4)
    check_lesson_formats(c, r, false);
    CHECK(rendered(c, r, attn_calc::output_format::text).starts_with(
        std::string("attn-calc: one transformer block (") + (post ? "post" : "pre") + "-LN) on 4 words"));
  }
  // two heads: the map's rows are each head's, the heads' outputs side by side
  auto two = parse({"--block", "--self", "1,0;0,1;1,1", "--heads", "2", "--ffn-w1", "1,-1,0.5;0,1,1", "--ffn-w2",
                    "1,0;0,1;0.5,0.5"});
  const auto r2 = attn_calc::compute(two);
  const auto& map = lesson_table_named(r2, "map");
  REQUIRE(map.values.rows() == 6);
  CHECK(map.rows[3].text == "head 2: x1");
  for (std::size_t t = 0; t < 6; ++t) {
    double sum = 0;
    for (std::size_t j = 0; j < 3; ++j) sum += map.values(t, j);
    CHECK(std::abs(sum - 1) <= 4 * std::numeric_limits<double>::epsilon());  // 3 weights, each within ε of its share
  }
  CHECK(refusal({"--block", "--self", "1,0", "--ffn-w1", "1,0"}) ==
        "--block --self needs --ffn-w1 and --ffn-w2 (the feed-forward layer's W_1 and W_2)");
  CHECK(refusal({"--block", "--ffn-w1", "1"}) == "--ffn-w1 and --ffn-w2 need --block --self (W9's block has its own)");
  CHECK(refusal({"--block", "--self", "1,0,0", "--wv", "1;1;1", "--ffn-w1", "1,0", "--ffn-w2", "1,0"}) ==
        "the heads' outputs side by side have 1 column (no --wo) but each word has 3 numbers: the block adds attention's "
        "output back to X");
  CHECK(refusal({"--block", "--self", "1,0", "--ffn-w1", "1;0", "--ffn-w2", "1,0,0"}) ==
        "--ffn-w2 has 3 columns but each word has 2 numbers: the block adds the feed-forward output back");
  CHECK(refusal({"--block", "--self", "1,0", "--ffn-w1", "1,2,3", "--ffn-w2", "1,0"}) ==
        "--ffn-w1 has 1 row but each word has 2 numbers (the hidden layer is X W_1)");
  CHECK(refusal({"--block", "--self", "1,0", "--ffn-w1", "1;0", "--ffn-w2", "1,0;0,1"}) ==
        "--ffn-w2 has 2 rows but --ffn-w1 has 1 column (one per hidden unit)");
  CHECK(refusal({"--block", "--self", "1,0", "--words", "a,b", "--ffn-w1", "1;0", "--ffn-w2", "1,0"}) ==
        "--words gives 2 labels but there is 1 word");
  CHECK(refusal({"--pe", "--self", "1,0"}) == "--pe prints its own numbers, not a map: leave out --self");
}

TEST_CASE("attn-calc lessons refuse the map's options, each other, and what they cannot show", "[attn-calc]") {
  CHECK(refusal({"--pe", "--q", "1,0,0"}) == "--pe prints its own numbers, not a map: leave out --q");
  CHECK(refusal({"--block", "--beta", "2"}) == "--block prints its own numbers, not a map: leave out --beta");
  CHECK(refusal({"--pe", "--block"}) == "--pe and --block are two lessons: give one at a time");
  CHECK(refusal({"--block", "--format", "svg"}) ==
        "--format svg draws --pe, --rope and --loss-curve; --block prints tables: use text, md, latex, json, csv or csv-long");
  CHECK(refusal({"--block", "--steps"}) == "--block prints every intermediate value already: leave out --steps");
  CHECK(refusal({"--positions", "5"}) == "--positions is for --pe");
  CHECK(refusal({"--rope", "1,0", "--positions", "5"}) == "--positions is for --pe");
  CHECK(refusal({"--pe", "--eps", "0"}) == "--eps is for --layer-norm, --rms-norm or --block");
  CHECK(refusal({"--rope", "1,0", "--format", "svg", "--scale", "0,1"}) == "--scale is for the heatmap of --pe, not --rope");
  CHECK(refusal({"--pe", "--steps", "--format", "json"}) == "--steps is not shown by --format json: use text, md or latex");
  // --title names the lesson's heading and its SVG
  auto c = parse({"--pe", "--positions", "3", "--dim", "2", "--title", "Where is each word?"});
  CHECK(attn_calc::render(c, attn_calc::compute(c)).starts_with("Where is each word?\n==="));
}

// ---------------------------------------------------------------------------------------------
// --loss-curve: a training log read, refused where it is wrong, and drawn

TEST_CASE("attn-calc --loss-curve reads a log: header, comments, a byte-order mark, runs", "[attn-calc][loss-curve]") {
  // a BOM at the start is skipped, '#' and blank lines too, CRLF line ends, spaces around fields
  const temp_file log("log.csv", "\xEF\xBB\xBF# from char_lm --log\r\nstep, loss ,tokens_per_second\r\n\r\n1,4.25,100\r\n"
                                 "2, 3.5 ,200\r\n4,3.125,300\r\n");
  const std::string path = log.path.string();
  const auto c = parse({"--loss-curve", path, "--vocabulary", "76"});
  CHECK(c.lesson == attn_calc::lesson_kind::loss_curve);
  CHECK(c.vocabulary == 76);
  REQUIRE(c.loss_runs.size() == 1);
  const auto& run = c.loss_runs[0];
  CHECK(run.name == "attn_calc_test_log");
  CHECK(run.file == "attn_calc_test_log.csv");
  CHECK(run.columns == std::vector<std::string>{"loss", "tokens_per_second"});
  CHECK(run.steps == std::vector<double>{1, 2, 4});
  CHECK(run.rows == std::vector<std::vector<double>>{{4.25, 100}, {3.5, 200}, {3.125, 300}});
  // a run column: a line per run, in the order they first appear; two files: "stem: run"
  const temp_file runs("runs.csv", "run,step,loss\na,0,2\nb,0,3\na,1,1\nb,5,2\n");
  const auto two = parse({"--loss-curve", runs.path.string()});
  REQUIRE(two.loss_runs.size() == 2);
  CHECK(two.loss_runs[0].name == "a");
  CHECK(two.loss_runs[1].steps == std::vector<double>{0, 5});
  const auto both = parse({"--loss-curve", path, "--loss-curve", runs.path.string()});
  REQUIRE(both.loss_runs.size() == 3);
  CHECK(both.loss_runs[2].name == "attn_calc_test_runs: b");
}

TEST_CASE("attn-calc --loss-curve refuses a bad log at its line and column", "[attn-calc][loss-curve]") {
  const auto refused = [](std::string_view contents) {
    const temp_file f("bad_log.csv", contents);
    const std::string path = f.path.string();
    const std::string message = refusal({"--loss-curve", path});
    const std::string where = "--loss-curve (" + path + ")";
    return message.starts_with(where) ? message.substr(where.size()) : "(elsewhere) " + message;
  };
  CHECK(refused("step,loss\n0,1\n1,x\n") == ", line 3, column loss: \"x\" is not a number");
  CHECK(refused("step,loss,tokens_per_second\n0,1,5\n1,0.5,\n") ==
        ", line 3, column tokens_per_second: a number is missing (empty field)");
  CHECK(refused("step,lost\n0,1\n") ==
        ", line 1: the header \"step,lost\" has no column \"loss\" (a log's header: step,loss[,more columns])");
  CHECK(refused("0,1.6\n1,1.5\n") ==
        ", line 1: the header \"0,1.6\" has no column \"step\" (the first line must be a header: step,loss)");
  CHECK(refused("step,loss\n0,1\n\xEF\xBB\xBF" "1,0.5\n") ==
        ", line 3: a byte-order mark (U+FEFF) in the middle of the file, where it does not belong (two files joined? "
        "remove it; one at the very start of a file is fine)");
  CHECK(refused("step,loss\n0,1,2\n") == ", line 2: 3 fields, but the header (line 1) has 2 columns");
  CHECK(refused("step,loss\n5,1\n3,0.5\n") == ", line 3: step 3 does not follow step 5 (the steps of a run must increase)");
  CHECK(refused("step;loss\n") ==
        ", line 1: a ';': a log's fields are separated by ',' (step,loss), with '.' as the decimal point");
  CHECK(refused("step,loss,loss\n") == ", line 1: the header names the column \"loss\" twice");
  CHECK(refused("# nothing yet\n") == ": no header (a log starts with a line such as step,loss)");
  CHECK(refused("step,loss\n") == ": no rows after the header (line 1)");
  CHECK(refused(std::string("step,loss\n0,1\0\n", 15)) == ", line 2: a NUL byte (is this a text file?)");
  CHECK(refusal({"--vocabulary", "5"}) == "--vocabulary is for --loss-curve");
  std::string thirteen = "run,step,loss\n";
  for (int r = 0; r < 13; ++r) thirteen += std::to_string(r) + ",0,1\n";
  CHECK(refused(thirteen) == ", line 14: a run more than 12 (a chart's legend tells at most 12 apart)");
  std::string many = "step,loss\n";
  for (int k = 0; k < 50001; ++k) many += std::to_string(k) + ",1\n";  // 2 numbers a row: the 50001st passes 100000
  CHECK(refused(many) == ": more than 100000 numbers; attn-calc reads logs of at most that (thin the log: a row every 10 "
                         "steps draws the same curve)");
  const temp_file ok("ok_log.csv", "step,loss\n0,1\n");
  CHECK(refusal({"--loss-curve", ok.path.string(), "--vocabulary", "1"}) == "--vocabulary: 1 is outside 2..1073741824");
  CHECK(refusal({"--loss-curve", ok.path.string(), "--steps"}) ==
        "--loss-curve prints a log, which has no steps by hand: leave out --steps");
}

TEST_CASE("attn-calc --loss-curve draws the runs at round ticks, ln V dashed, well-formed", "[attn-calc][loss-curve]") {
  // round_ticks: about five steps of 1, 2, 2.5 or 5 times a power of ten, the range widened to them
  double lo = 0, hi = 4.331;
  CHECK(attn_calc::detail::round_ticks(lo, hi) == std::vector<double>{0, 1, 2, 3, 4, 5});
  CHECK((lo == 0 && hi == 5));
  lo = 1, hi = 200;
  CHECK(attn_calc::detail::round_ticks(lo, hi) == std::vector<double>{0, 50, 100, 150, 200});
  lo = 0, hi = 1.67;
  CHECK(attn_calc::detail::round_ticks(lo, hi) == std::vector<double>{0, 0.5, 1, 1.5, 2});

  const temp_file log("curve.csv", "run,step,loss\nfast,0,1.67\nfast,10,0.5\nslow,0,1.67\nslow,10,1.25\nslow,20,0.75\n");
  auto c = parse({"--loss-curve", log.path.string(), "--vocabulary", "5", "--format", "svg"});
  const std::string svg = attn_calc::render(c, attn_calc::compute(c));
  CHECK(attn_test::xml_problem(svg) == "");
  CHECK(count(svg, "<polyline ") == 2);  // a line per run
  // the plot spans y 64..364 px for the loss 0..2 (ticks of 0.5) and x 72..552 for steps 0..20
  // (ticks of 5): ln 5 = 1.6094 sits at 364 − 1.6094/2·300 = 122.6, step 10 at 72 + 240 = 312
  CHECK(svg.find("<line x1=\"72\" y1=\"122.6\" x2=\"552\" y2=\"122.6\" stroke=\"#555555\" stroke-width=\"1.5\" "
                 "stroke-dasharray=\"6 4\"/>") != std::string::npos);
  CHECK(svg.find("points=\"72.0,113.5 312.0,289.0\"") != std::string::npos);  // fast: 1.67 → 113.5, 0.5 → 289
  CHECK(svg.find(">ln 5 = 1.609 (chance)</text>") != std::string::npos);
  CHECK(svg.find(">loss (nats)</text>") != std::string::npos);
  CHECK(svg.find(">step</text>") != std::string::npos);
  // the same colour-blind-safe colours and dashes as --beta-sweep, in order: one home
  CHECK(svg.find("stroke=\"#0072b2\" stroke-width=\"2.5\"/>") != std::string::npos);
  CHECK(svg.find("stroke=\"#d55e00\" stroke-width=\"2.5\" stroke-dasharray=\"8 4\"/>") != std::string::npos);
  // the table formats hold every number as the log gave it
  c.format = attn_calc::output_format::csv;
  CHECK(attn_calc::render(c, attn_calc::compute(c)) ==
        "run,step,loss\nfast,0,1.67\nfast,10,0.5\nslow,0,1.67\nslow,10,1.25\nslow,20,0.75\n");
  c.format = attn_calc::output_format::json;
  const std::string json = attn_calc::render(c, attn_calc::compute(c));
  CHECK(attn_test::json_problem(json) == "");
  CHECK(json.find("\"ln_vocabulary\": 1.6094379124341003") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// --no-peeking: W10's causal map, logits and per-position losses, held to their formulas written
// out in long double (NEXT_SECTIONS.md W10), and to the unit's printed numbers.

TEST_CASE("attn-calc --no-peeking: W10's map and the loss at every position, against long double",
          "[attn-calc][lesson][no-peeking]") {
  namespace w10 = worked::w10;
  const auto c = parse({"--no-peeking"});
  REQUIRE(c.lesson == attn_calc::lesson_kind::no_peeking);
  const auto r = attn_calc::compute(c);
  const auto& map = lesson_table_named(r, "map");
  const auto& logits = lesson_table_named(r, "logits");
  const auto& losses = lesson_table_named(r, "losses");
  const auto& mean = lesson_table_named(r, "mean");
  REQUIRE(map.values.rows() == 4);
  REQUIRE(map.values.cols() == 4);
  REQUIRE(logits.values.cols() == w10::vocabulary);
  // The derivation. X one-hot (word t is direction t), Q = K = V = X: the score of t on j is
  // x_t·x_j/√5 = [t = j]/√5, so under the causal mask row t is softmax over j ≤ t of those, and
  // Y_t = Σ_j α_tj x_j holds α_tj in column j. logits_t = Y_t W_vocab with W_vocab(j, j+1) = 3:
  // logits_t[j+1] = 3 α_tj. ℓ_t = log Σ_w e^{logits_t[w]} − logits_t[t+1], p = e^{−ℓ_t}.
  // Tolerance: each double is a softmax (an exp, a sum of ≤ 4, a division), a product by 3, and
  // a log-sum-exp of 5 terms whose condition is ≤ 1 (its inputs are ≥ 0 and its value ≥ 1):
  // each step rounds by ≤ ½ ulp, ≤ 30 roundings of numbers ≤ 3 and an error passed on at most
  // ×3, so 256 ulps of 1 (5.7e-14) bounds every number with room.
  const double tol = 256 * std::numeric_limits<double>::epsilon();
  long double mean_want = 0;
  for (std::size_t t = 0; t < 4; ++t) {
    long double alpha[4] = {}, sum = 0;
    const long double diag = std::exp(1.0L / std::sqrt(5.0L));
    for (std::size_t j = 0; j <= t; ++j) sum += j == t ? diag : 1.0L;
    for (std::size_t j = 0; j <= t; ++j) alpha[j] = (j == t ? diag : 1.0L) / sum;
    long double z[5] = {}, lse = 0;
    for (std::size_t j = 0; j < 4; ++j) z[j + 1] = 3 * alpha[j];
    for (const long double zw : z) lse += std::exp(zw);
    lse = std::log(lse);
    const long double loss = lse - z[t + 1];
    mean_want += loss / 4;
    for (std::size_t j = 0; j < 4; ++j) {
      INFO("map row " << t << " column " << j);
      CHECK(std::abs(map.values(t, j) - static_cast<double>(alpha[j])) <= tol);
    }
    for (std::size_t w = 0; w < 5; ++w) {
      INFO("logits row " << t << " word " << w);
      CHECK(std::abs(logits.values(t, w) - static_cast<double>(z[w])) <= tol);
    }
    INFO("position " << t + 1);
    CHECK(std::abs(losses.values(t, 1) - static_cast<double>(loss)) <= tol);
    CHECK(std::abs(losses.values(t, 0) - static_cast<double>(std::exp(-loss))) <= tol);
    CHECK(attn::report::fixed(losses.values(t, 1), 3) == w10::losses[t]);  // the unit's printed numbers
  }
  CHECK(std::abs(mean.values(0, 0) - static_cast<double>(mean_want)) <= tol);
  CHECK(attn::report::fixed(mean.values(0, 0), 3) == w10::mean_loss);
  for (std::size_t k = 0; k < 16; ++k)
    CHECK(attn::report::fixed(map.values(k / 4, k % 4), 3) == w10::map[k]);
  // every format reads back; svg is refused (a table lesson)
  check_lesson_formats(c, r, false);
  CHECK(refusal({"--no-peeking", "--format", "svg"}) ==
        "--format svg draws --pe, --rope and --loss-curve; --no-peeking prints tables: use text, md, latex, json, csv or "
        "csv-long");
  CHECK(refusal({"--no-peeking", "--q", "1"}) == "--no-peeking prints its own numbers, not a map: leave out --q");
  CHECK(refusal({"--no-peeking", "--steps"}) ==
        "--no-peeking prints every intermediate value already (the map, the logits, p and each loss): leave out --steps");
}

// ---------------------------------------------------------------------------------------------
// --model (examples/attn_calc/model_walk.hpp): the tiny model's forward, every stage held to the
// model written out here in long double from docs/model.md's data flow, over the parameters
// attn::initialize gives (the inputs: test_model.cpp holds the initialisation itself).

namespace {
using LM = std::vector<std::vector<ld>>;
LM ld_times(const LM& a, const auto& W, std::size_t rows, std::size_t cols, std::span<const double> bias = {}) {
  LM c(a.size(), std::vector<ld>(cols, 0));
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      for (std::size_t k = 0; k < rows; ++k) c[i][j] += a[i][k] * static_cast<ld>(W(k, j));
      if (!bias.empty()) c[i][j] += bias[j];
    }
  return c;
}
LM ld_plus(LM a, const LM& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < a[i].size(); ++j) a[i][j] += b[i][j];
  return a;
}
LM ld_norm(const LM& a, std::span<const double> gamma, std::span<const double> beta) {
  LM out = a;
  for (std::size_t t = 0; t < a.size(); ++t) {
    const ld n = static_cast<ld>(a[t].size());
    ld mu = 0, var = 0;
    for (const ld v : a[t]) mu += v / n;
    for (const ld v : a[t]) var += (v - mu) * (v - mu) / n;
    for (std::size_t i = 0; i < a[t].size(); ++i)
      out[t][i] = (a[t][i] - mu) / std::sqrt(var + 1e-5L) * (gamma.empty() ? 1 : gamma[i]) + (beta.empty() ? 0 : beta[i]);
  }
  return out;
}
std::span<const double> cs(std::span<double> s) { return s; }
}  // namespace

TEST_CASE("attn-calc --model: every stage of the tiny model's forward against it written out in long double", "[attn-calc]") {
  for (const auto& [words, seed] : {std::pair{std::string("I,drink,green,tea,."), std::string("0")},
                                    std::pair{std::string("the,cat,sat,on,the,mat"), std::string("7")}}) {
    INFO(words << ", seed " << seed);
    const auto o = attn_calc::model_walk::parse({"--model", "--steps", "--words", words, "--seed", seed});
    const auto L = attn_calc::model_walk::walk(o);
    const auto table = [&](const std::string& id) -> const attn::Matrix<double>& {
      for (const auto& t : L.tables)
        if (t.id == id) return t.values;
      FAIL("no table " << id);
      return L.tables.front().values;
    };
    // the same model and parameters
    std::vector<std::string> vocab;
    std::vector<std::size_t> y;
    for (const auto& w : o.words) {
      std::size_t v = 0;
      while (v < vocab.size() && vocab[v] != w) ++v;
      if (v == vocab.size()) vocab.push_back(w);
      y.push_back(v);
    }
    const std::size_t T = y.size(), V = vocab.size(), d = 8, dk = 4;
    const auto mc = attn_calc::model_walk::model_of(V, T);
    std::vector<double> buffer(attn::parameter_count(mc));
    const auto p = attn::bind_parameters<double>(mc, buffer);
    attn::initialize(p, o.seed);
    const auto& b = p.decoder[0];
    std::map<std::string, LM> want;
    LM x0(T, std::vector<ld>(d));
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t i = 0; i < d; ++i) x0[t][i] = static_cast<ld>(p.token_embedding(y[t], i)) + p.position_table(t, i);
    want["X0"] = x0;
    want["A"] = ld_norm(x0, cs(b.gamma_1), cs(b.beta_1));
    const LM q = ld_times(want["A"], b.attention.W_Q, d, d, cs(b.attention.b_Q)),
             k = ld_times(want["A"], b.attention.W_K, d, d, cs(b.attention.b_K)),
             v = ld_times(want["A"], b.attention.W_V, d, d, cs(b.attention.b_V));
    LM z(T, std::vector<ld>(d, 0)), maps(2 * T, std::vector<ld>(T, 0));
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t t = 0; t < T; ++t) {
        std::vector<ld> e(t + 1);  // causal: the words 0 … t
        ld sum = 0;
        for (std::size_t j = 0; j <= t; ++j) {
          ld dot = 0;
          for (std::size_t i = 0; i < dk; ++i) dot += q[t][h * dk + i] * k[j][h * dk + i];
          sum += e[j] = std::exp(dot / 2);  // √d_k = 2
        }
        for (std::size_t j = 0; j <= t; ++j) {
          maps[h * T + t][j] = e[j] / sum;
          for (std::size_t i = 0; i < dk; ++i) z[t][h * dk + i] += e[j] / sum * v[j][h * dk + i];
        }
      }
    want["map"] = maps;
    want["attention"] = ld_times(z, b.attention.W_O, d, d, cs(b.attention.b_O));
    want["H1"] = ld_plus(x0, want["attention"]);
    want["B"] = ld_norm(want["H1"], cs(b.gamma_2), cs(b.beta_2));
    want["ffn_pre"] = ld_times(want["B"], b.ffn.W_1, d, 32, cs(b.ffn.b_1));
    want["ffn_hidden"] = want["ffn_pre"];
    for (auto& row : want["ffn_hidden"])
      for (ld& x : row) x = x * std::erfc(-x / std::sqrt(2.0L)) / 2;
    want["ffn_out"] = ld_times(want["ffn_hidden"], b.ffn.W_2, 32, d, cs(b.ffn.b_2));
    want["X1"] = ld_plus(want["H1"], want["ffn_out"]);
    want["H"] = ld_norm(want["X1"], cs(p.final_norm_gamma), cs(p.final_norm_beta));
    want["logits"] = ld_times(want["H"], p.output, d, V);  // no output bias
    LM prob = want["logits"], losses(T - 1, std::vector<ld>(2)), mean(1, std::vector<ld>(1, 0));
    for (auto& row : prob) {
      ld m = row[0], sum = 0;
      for (const ld x : row) m = std::max(m, x);
      for (ld& x : row) sum += x = std::exp(x - m);
      for (ld& x : row) x /= sum;
    }
    want["probabilities"] = prob;
    for (std::size_t t = 0; t + 1 < T; ++t) {
      losses[t] = {prob[t][y[t + 1]], -std::log(prob[t][y[t + 1]])};
      mean[0][0] += losses[t][1] / static_cast<ld>(T - 1);
    }
    want["losses"] = losses;
    want["mean_loss"] = mean;
    // Tolerance: about fifteen stages, each a product of ≤ 32 terms, a softmax of ≤ 6, a residual or a
    // norm, adds ≤ 40ε of its values' size; a norm turns an error of its input into one relative
    // to the input's spread (X₀'s entries and spread are both ~0.02: the size is kept), and exp in
    // the softmaxes is well conditioned at these logits (|z| < 3). 2000ε of the largest value (≤ 4).
    ld largest = 0;
    for (const auto& [name, m] : want)
      for (const auto& row : m)
        for (const ld x : row) largest = std::max(largest, std::abs(x));
    REQUIRE(largest < 10);
    std::size_t seen = 0;
    for (const auto& [name, m] : want) {
      INFO(name);
      const auto& got = table(name);
      REQUIRE(got.rows() == m.size());
      REQUIRE(got.cols() == m[0].size());
      for (std::size_t t = 0; t < m.size(); ++t)
        for (std::size_t i = 0; i < m[t].size(); ++i) CHECK(std::abs(static_cast<ld>(got(t, i)) - m[t][i]) <= 2000 * eps * largest);
      ++seen;
    }
    CHECK(seen == 15u);
    // E[y] and P[t] are the parameters' rows, as given; the tokens the vocabulary's places
    for (std::size_t t = 0; t < T; ++t) {
      CHECK(table("tokens")(t, 0) == static_cast<double>(y[t]));
      for (std::size_t i = 0; i < d; ++i) {
        CHECK(table("E")(t, i) == p.token_embedding(y[t], i));
        CHECK(table("P")(t, i) == p.position_table(t, i));
      }
    }
    // the losses of an untrained model: near log V (each loss within a factor 2 of it)
    for (std::size_t t = 0; t + 1 < T; ++t) CHECK(std::abs(static_cast<ld>(table("losses")(t, 1)) - std::log(static_cast<ld>(V))) < std::log(static_cast<ld>(V)));
  }
}

TEST_CASE("attn-calc --model: its formats, its options and what it refuses", "[attn-calc]") {
  using attn_calc::model_walk::run;
  const auto o = attn_calc::model_walk::parse({"--model"});
  CHECK(o.words == std::vector<std::string>{"I", "drink", "green", "tea", "."});
  CHECK(o.seed == 0u);
  const auto summary = attn_calc::model_walk::walk(o);
  CHECK(summary.tables.size() == 5u);  // tokens, map, probabilities, losses, mean_loss (no --steps)
  CHECK(run({"--model", "--format", "csv"}).starts_with("word,p(next),loss\nI → drink,"));
  CHECK(attn_test::json_problem(run({"--model", "--steps", "--format", "json"})) == "");
  // csv-long: a row per number of every table, and a header (5 words: 5 + 10·5 + 25 + 4·2 + 1 numbers)
  CHECK(attn_test::read_csv(run({"--model", "--format", "csv-long"})).size() == 5 + 50 + 25 + 8 + 1 + 1u);
  CHECK(run({"--model", "--steps", "--format", "latex"}).find("\\label{attn:losses}") != std::string::npos);
  const std::string svg = run({"--model", "--format", "svg"});
  CHECK(attn_test::xml_problem(svg) == "");
  CHECK(svg.find("head 2") != std::string::npos);
  CHECK(svg.find("masked") != std::string::npos);  // the future, hatched
  CHECK(run({"--model", "--seed", "1"}) != run({"--model", "--seed", "2"}));
  const auto refused = [](std::vector<std::string_view> args) {
    try {
      (void)attn_calc::model_walk::run(args);
    } catch (const usage_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refused({"--model", "--beta", "2"}) ==
        "--beta is not an option of --model (it takes --words, --seed, --steps, --format, --decimals)");
  CHECK(refused({"--model", "--seed", "-1"}) == "--seed: \"-1\" is not a whole number in 0..4294967295");
  CHECK(refused({"--model", "--seed", "4294967296"}) == "--seed: \"4294967296\" is not a whole number in 0..4294967295");
  CHECK(refused({"--model", "--words", "alone"}) == "--model --words: a sentence of at least 2 words (a next word to predict)");
  CHECK(refused({"--model", "--format", "html"}) == "--format: \"html\" is not a format (text, md, latex, json, csv, csv-long, svg)");
  CHECK(refused({"--model", "--seed", "1", "--seed", "2"}) == "--seed is given twice");
  // every option of its help has an example, and docs/course-authors.md shows each
  const std::string docs = attn_test::file_text(attn_test::document_path(__FILE__, "docs/course-authors.md"));
  std::istringstream help{std::string(attn_calc::model_walk::help_text)};
  std::size_t options = 0;
  bool example = true;
  for (std::string line; std::getline(help, line);) {
    if (line.starts_with("  --")) {
      CHECK(example);
      example = false;
      ++options;
      const std::string option = line.substr(2, line.find(' ', 2) - 2);
      INFO(option);
      CHECK(docs.find("`" + option + "`") != std::string::npos);
    } else if (line.find("e.g. ") != std::string::npos) {
      example = true;
    }
  }
  CHECK(example);
  CHECK(options == 4u);
}
