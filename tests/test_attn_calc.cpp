// attn-calc's parser and computation (examples/attn_calc/), without starting a process: every
// kind of bad input is a usage_error naming the option; good input gives the unit's numbers.
// The process-level checks (exit code 2, one line on stderr) are tests/cli/bad_input.cmake.

#include <filesystem>
#include <fstream>
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
