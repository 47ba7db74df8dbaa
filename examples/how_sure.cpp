// E2. "How sure": doubling the decoder's state, and the sharpness β (Unit 18, section 1).
// Pause & predict: make चाय's state twice as long, q = (0, 1, 4). The share of "tea" climbs
// from 0.736 to 0.936. Multiplying the scores by a sharpness β does the same: β = 2 on
// E1's q gives exactly the doubled state's weights. Then β sweeps from 0 (no preference) up.

#include <cmath>
#include <cstdio>
#include <string>

#include "attn/attn.hpp"
#include "attn/report/table.hpp"
#include "unit_check.hpp"

int main() {
  namespace report = attn::report;
  unit::checker check;

  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Vector<double, 3> q{0, 0.5, 2};    // E1: the state before writing चाय
  const attn::Vector<double, 3> q2{0, 1, 4};     // twice as long
  const char* words[] = {"I", "drink", "tea"};

  const auto e1 = attn::attend(q, notes, attn::dot);
  const auto doubled = attn::attend(q2, notes, attn::dot);
  const auto sharp = attn::attend(q, notes, attn::dot, attn::options{.beta = 2.0});

  std::printf("E2. How sure: q = (0, 0.5, 2) against twice that, q = (0, 1, 4)\n\n");
  const char* unit_e1[] = {"0.100", "0.164", "0.736"};
  const char* unit_doubled[] = {"0.017", "0.047", "0.936"};
  report::table t;
  t.header = {"note", "q = (0, 0.5, 2)", "q = (0, 1, 4)", "β = 2 on (0, 0.5, 2)"};
  for (std::size_t j = 0; j < 3; ++j) {
    const std::string w = words[j];
    t.rows.push_back({w, check.print("E1 weight of " + w, e1.weights[j], unit_e1[j]),
                      check.print("doubled-state weight of " + w, doubled.weights[j], unit_doubled[j]),
                      check.print("beta = 2 weight of " + w, sharp.weights[j], unit_doubled[j])});
    check.claim(std::abs(sharp.weights[j] - doubled.weights[j]) < 1e-15,
                "beta = 2 gives the doubled state's weight for " + w);
  }
  std::printf("%s\n", report::to_text(t).c_str());
  std::printf("The share of \"tea\" climbs from %s to %s. Doubling q doubles every score, and so\n"
              "does β = 2: β is the \"how sure\" slider (temperature is 1/β).\n\n",
              check.print("E1 share of tea", e1.weights[2], "0.736").c_str(),
              check.print("doubled share of tea", doubled.weights[2], "0.936").c_str());

  // The slider: the share of "tea" as β sweeps from 0 to 3.
  report::table sweep;
  sweep.title = "The share of \"tea\" as the sharpness β grows (q = (0, 0.5, 2))";
  sweep.header = {"β", "I", "drink", "tea", ""};
  double previous = -1;
  bool climbs = true;
  for (int k = 0; k <= 12; ++k) {
    const double beta = 0.25 * k;
    const auto r = attn::attend(q, notes, attn::dot, attn::options{.beta = beta});
    const std::string expected_tea = beta == 1.0 ? "0.736" : beta == 2.0 ? "0.936" : "";
    std::string bar(static_cast<std::size_t>(std::lround(r.weights[2] * 40)), '#');
    sweep.rows.push_back({attn::report::fixed(beta, 2), check.print("I", r.weights[0]),
                          check.print("drink", r.weights[1]),
                          check.print("share of tea at beta = " + attn::report::fixed(beta, 2), r.weights[2],
                                      expected_tea),
                          bar});
    climbs = climbs && r.weights[2] > previous;
    previous = r.weights[2];
    if (k == 0)  // β = 0: no preference at all, every note gets 1/3
      for (std::size_t j = 0; j < 3; ++j)
        check.claim(std::abs(r.weights[j] - 1.0 / 3.0) < 1e-15, "beta = 0 spreads the attention evenly");
  }
  sweep.aligns = {report::align::right, report::align::right, report::align::right, report::align::right,
                  report::align::left};
  std::printf("%s", report::to_text(sweep).c_str());
  check.claim(climbs, "the share of tea climbs as beta grows");
  return check.finish();
}
