// E3. The alignment map: "I drink tea" → "मैं चाय पीता हूँ" (Unit 18, section 1).
// One row per Hindi word written, one column per English word read; each row sums to 1.
// The unit gives only चाय's state (E1). This example chooses the other three:
//   मैं  (main, "I")    q = (2, 0.5, 0)    looks hardest at "I"
//   चाय  (chai, "tea")  q = (0, 0.5, 2)    the unit's state: looks at "tea"
//   पीता (peeta, "drink") q = (0, 2, 0.5)  looks back at "drink"
//   हूँ  (hoon, "am")   q = (1.5, 1.5, 0)  no single English partner: spreads over "I" and "drink"
// Hindi puts the verb at the end, so the bright cells bend off the diagonal. The map is
// printed as a table and written as an SVG heatmap (argv[1], default alignment_map.svg; the
// same file as `attn-calc --format svg` and docs/alignment_map.svg). Then the contrast: with no
// attention (Unit 17) every word gets the same summary, the last note, and there is no map.

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "attn/report/svg.hpp"
#include "attn/report/table.hpp"
#include "unit_check.hpp"

int main(int argc, char** argv) {
  namespace report = attn::report;
  unit::checker check;

  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Matrix<double, 4, 3> states{{2, 0.5, 0}, {0, 0.5, 2}, {0, 2, 0.5}, {1.5, 1.5, 0}};
  const std::vector<std::string> read = {"I", "drink", "tea"};
  const std::vector<std::string> written = {"मैं", "चाय", "पीता", "हूँ"};
  enum { I, drink, tea };
  enum { main_, chai, peeta, hoon };

  const auto r = attn::align(states, notes, attn::dot);

  std::printf("E3. The alignment map: \"I drink tea\" → मैं चाय पीता हूँ\n\n");
  const char* why[] = {"looks hardest at \"I\"", "the unit's state (E1): looks at \"tea\"",
                       "looks back at \"drink\"", "has no single English partner: spreads over \"I\" and \"drink\""};
  std::printf("The unit gives चाय's state; the other three are chosen here:\n");
  for (std::size_t w = 0; w < 4; ++w) {
    const std::string q = "(" + report::shortest(states(w, 0)) + ", " + report::shortest(states(w, 1)) + ", " +
                          report::shortest(states(w, 2)) + ")";
    std::printf("  %s q = %s  %s\n", report::pad_right(written[w], 4).c_str(), report::pad_right(q, 15).c_str(), why[w]);
  }
  std::printf("\n");

  report::table t;
  t.title = "Alignment map α (rows: words written; columns: words read)";
  t.header = {"", "I", "drink", "tea", "sum"};
  const char* unit_chai[] = {"0.100", "0.164", "0.736"};  // E1's row, the only one the unit gives
  for (std::size_t w = 0; w < 4; ++w) {
    std::vector<report::cell> row{written[w]};
    double sum = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      row.emplace_back(check.print(written[w] + " → " + read[j], r.weights(w, j), w == chai ? unit_chai[j] : ""));
      sum += r.weights(w, j);
    }
    row.emplace_back(check.print("row sum of " + written[w], sum, "1.000"));
    t.rows.push_back(std::move(row));
  }
  std::printf("%s\n", report::to_text(t).c_str());

  auto argmax = [&](std::size_t w) {
    std::size_t best = 0;
    for (std::size_t j = 1; j < 3; ++j)
      if (r.weights(w, j) > r.weights(w, best)) best = j;
    return best;
  };
  check.claim(argmax(main_) == I, "मैं looks hardest at I");
  check.claim(argmax(chai) == tea, "चाय looks hardest at tea");
  check.claim(argmax(peeta) == drink, "पीता looks back at drink");
  check.claim(r.weights(hoon, I) > 0.4 && r.weights(hoon, drink) > 0.4 && r.weights(hoon, tea) < 0.2,
              "हूँ spreads its attention over I and drink");
  // The bend: चाय's bright cell comes after पीता's although चाय is written first.
  check.claim(argmax(chai) > argmax(peeta), "the bright cells bend off the diagonal");
  std::printf("The bright cells bend: चाय looks at \"tea\", then पीता looks back at \"drink\",\n"
              "and हूँ spreads over \"I\" and \"drink\". Four words written, four context vectors:\n");
  for (std::size_t w = 0; w < 4; ++w)
    std::printf("  c(%s) = (%s, %s, %s)\n", written[w].c_str(), check.print("c", r.contexts(w, 0)).c_str(),
                check.print("c", r.contexts(w, 1)).c_str(), check.print("c", r.contexts(w, 2)).c_str());

  const std::string path = argc > 1 ? argv[1] : "alignment_map.svg";
  std::ofstream svg(path, std::ios::binary);
  svg << report::alignment_map_svg(r.weights, written, read);
  svg.close();
  check.claim(static_cast<bool>(svg), "the heatmap was written to " + path);
  std::printf("\nThe map as a picture: %s\n", path.c_str());

  // No attention (Unit 17): the decoder gets only the last note, the summary, for every word.
  const auto same = attn::no_attention(states, notes);
  std::printf("\nNo attention (Unit 17): every word gets the same summary, h(tea), and there is no map:\n");
  bool all_last = true;
  for (std::size_t w = 0; w < 4; ++w) {
    std::printf("  c(%s) = (%s, %s, %s)\n", written[w].c_str(), check.print("c", same(w, 0)).c_str(),
                check.print("c", same(w, 1)).c_str(), check.print("c", same(w, 2)).c_str());
    for (std::size_t i = 0; i < 3; ++i) all_last = all_last && same(w, i) == notes(2, i);
  }
  check.claim(all_last, "without attention every word gets the last note");
  return check.finish();
}
