// E1. Dot-product attention by hand: "I drink tea" → चाय (Unit 18, section 1).
// The decoder has written मैं and is about to write चाय ("tea"). It scores every note with the
// dot product, turns the scores into shares with softmax, and blends the notes into the
// context. Every number printed is computed here and checked against the unit's (3 decimals).

#include <cmath>
#include <cstdio>
#include <string>

#include "attn/attn.hpp"
#include "attn/report/table.hpp"
#include "unit_check.hpp"

int main() {
  namespace report = attn::report;
  unit::checker check;

  // Each note points at its own word; q is the decoder's state before writing चाय.
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Vector<double, 3> q{0, 0.5, 2};
  const char* words[] = {"I", "drink", "tea"};

  const auto r = attn::attend(q, notes, attn::dot);

  std::printf("E1. Dot-product attention by hand: \"I drink tea\" → चाय\n\n");
  std::printf("Notes: h(I) = (1, 0, 0), h(drink) = (0, 1, 0), h(tea) = (0, 0, 1)\n");
  std::printf("The decoder has written मैं and is about to write चाय; its state is q = (0, 0.5, 2).\n\n");

  // The unit's numbers: scores (0, 0.5, 2); e^score 1, 1.649, 7.389; weights and context.
  const char* unit_scores[] = {"0.000", "0.500", "2.000"};
  const char* unit_exp[] = {"1.000", "1.649", "7.389"};
  const char* unit_weights[] = {"0.100", "0.164", "0.736"};

  report::table t;
  t.title = "score s = q·h, then softmax: α = e^s / Σ e^s";
  t.header = {"note", "score q·h", "e^score", "weight α"};
  double sum_exp = 0;
  for (std::size_t j = 0; j < 3; ++j) sum_exp += std::exp(r.scores[j]);
  for (std::size_t j = 0; j < 3; ++j) {
    const std::string w = words[j];
    const double e = std::exp(r.scores[j]);
    t.rows.push_back({w, check.print("score of " + w, r.scores[j], unit_scores[j]),
                      check.print("e^score of " + w, e, unit_exp[j]),
                      check.print("weight of " + w, r.weights[j], unit_weights[j])});
    // softmax by hand and attn::attend agree
    check.claim(std::abs(e / sum_exp - r.weights[j]) < 1e-12, "e^s/Σe^s equals attn's weight for " + w);
  }
  double sum_w = 0;
  for (std::size_t j = 0; j < 3; ++j) sum_w += r.weights[j];
  t.rows.push_back({"sum", "", check.print("1 + 1.649 + 7.389", sum_exp), check.print("sum of the weights", sum_w, "1.000")});
  std::printf("%s\n", report::to_text(t).c_str());

  std::printf("context c = %s h(I) + %s h(drink) + %s h(tea) = (%s, %s, %s)\n",
              check.print("weight of I", r.weights[0], "0.100").c_str(),
              check.print("weight of drink", r.weights[1], "0.164").c_str(),
              check.print("weight of tea", r.weights[2], "0.736").c_str(),
              check.print("c[1]", r.context[0], "0.100").c_str(), check.print("c[2]", r.context[1], "0.164").c_str(),
              check.print("c[3]", r.context[2], "0.736").c_str());
  std::printf("\nAlmost three quarters of the attention (%s) goes to the note of \"tea\": the machine is\n"
              "about to write \"chai\", and it is looking at \"tea\". Nobody told it to; the scores did.\n",
              check.print("share of tea", r.weights[2], "0.736").c_str());
  check.claim(r.weights[2] > 0.7 && r.weights[2] < 0.75, "almost three quarters goes to tea");
  return check.finish();
}
