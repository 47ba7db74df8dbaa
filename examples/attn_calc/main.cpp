// attn-calc: the attention numbers of a lesson, computed and printed as text, Markdown, LaTeX,
// JSON, CSV or an SVG heatmap. With no arguments it prints the unit's "I drink tea" example.
// Exit status: 0 on success, 2 on bad input (one line on stderr says what), 1 if the output
// cannot be written.

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "attn/error.hpp"
#include "calc.hpp"
#include "parse.hpp"
#include "render.hpp"

namespace {

constexpr std::string_view help = R"(attn-calc: attention by hand, for lessons. Computes the scores, the weights (the
alignment map) and the context vectors of queries looking at notes, and prints them.
With no options it prints the unit's "I drink tea" example (E1, and E3's map).

Usage: attn-calc [options]

A matrix is rows separated by ';' and numbers separated by ',' (quote it for the shell),
or @file: a file with one row per line (blank lines and lines starting with # skipped).

Inputs
  --q Q               the queries (decoder states), one per row
                        e.g. --q 0,0.5,2    or several: --q "0,0.5,2;0,1,4"
  --notes H           the notes h_j, one per row (default: the unit's I, drink, tea)
                        e.g. --notes "1,0,0;0,1,0;0,0,1"    or --notes @notes.csv
  --score S           dot (default), scaled_dot (q.h/sqrt d), general (q^T W h) or
                      additive (v^T tanh(W1 h + W2 q))
                        e.g. --score scaled_dot
  --W W               general: the matrix W, query length x note length
                        e.g. --score general --q 1,2 --W "1,0,0;0,1,1"
  --W1 W1             additive: k x note length
                        e.g. --W1 "1,0;0,1"
  --W2 W2             additive: k x query length
                        e.g. --W2 "1,0;0,1"
  --v V               additive: k numbers (with none of --q --notes --W1 --W2 --v,
                      --score additive shows the unit's additive example)
                        e.g. --v 1,1
  --beta B            sharpness, "how sure": the scores are multiplied by B (default 1)
                        e.g. --beta 2
  --mask M            one 1 (keep) or 0 (mask out) per note; a masked note gets weight 0
                        e.g. --mask 1,1,0
  --note-labels L     names of the notes, separated by ','
                        e.g. --note-labels I,drink,tea
  --query-labels L    names of the queries, separated by ','
                        e.g. --query-labels "मैं,चाय,पीता,हूँ"

Output (on stdout)
  --format F          text (default), md, latex, json, csv (the map, a row per query),
                      csv-long (the map, a row per cell: i,j,query,note,weight) or svg
                      (the map as a heatmap)
                        e.g. --format md > lesson.md    --format svg > map.svg
  --decimals N        digits after the point, 0 to 17 (default 3); JSON also has every
                      number at full precision
                        e.g. --decimals 4
  --jacobian          also print dc/dh_j for every note and dc/dq, each checked against
                      central finite differences
                        e.g. --q 0,0.5,2 --jacobian
  --help              print this help
                        e.g. attn-calc --help

Exit status: 0 on success; 2 on bad input, with one line on stderr that says what.
)";

int write_all(const std::string& s) {
  if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size() || std::fflush(stdout) != 0) {
    std::fputs("attn-calc: cannot write the output\n", stderr);
    return 1;
  }
  return 0;
}

/// Prints "attn-calc: <message>" as one line on stderr (usage_error's messages already are;
/// the library's are made so too) and returns the exit code.
int fail(const char* message, int code = 2) {
  const std::string line = "attn-calc: " + attn_calc::detail::one_line(message) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const attn_calc::config c = attn_calc::parse_args(argc, argv);
    if (c.help) return write_all(std::string(help));
    const attn_calc::results r = attn_calc::compute(c);
    return write_all(attn_calc::render(c, r));
  } catch (const attn_calc::usage_error& e) {
    return fail(e.what());
  } catch (const attn::dimension_error& e) {  // a size the parser did not foresee
    return fail(e.what());
  } catch (const attn::domain_error& e) {
    return fail(e.what());
  } catch (const std::bad_alloc&) {
    return fail("out of memory (the inputs are too large)");
  } catch (const std::exception& e) {
    return fail((std::string("internal error: ") + e.what()).c_str(), 1);
  }
}
