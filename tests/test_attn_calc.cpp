// attn-calc's parser and computation (examples/attn_calc/), without starting a process: every
// kind of bad input is a usage_error naming the option; good input gives the unit's numbers.
// The process-level checks (exit code 2, one line on stderr) are tests/cli/bad_input.cmake.

#include <string>
#include <string_view>
#include <vector>

#include "../examples/attn_calc/calc.hpp"
#include "../examples/attn_calc/parse.hpp"
#include "../examples/attn_calc/render.hpp"
#include "attn/report/format.hpp"
#include "attn_catch.hpp"

using attn_calc::parse_args;
using attn_calc::usage_error;

namespace {
attn_calc::config parse(std::vector<std::string_view> args) { return parse_args(args); }

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
  CHECK(refusal({"--mask", "1,0.5,0"}) == "--mask: entries must be 1 (keep) or 0 (mask out)");
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
