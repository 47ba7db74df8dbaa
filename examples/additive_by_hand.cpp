// E5. An additive score by hand (Unit 18, section 1): s = vᵀ tanh(W₁h + W₂q) with
// W₁ = W₂ = I, v = (1, 1), q = (0.5, −0.5) and the notes (1, 0), (0, 1), (1, 1).
// Every step the unit shows is computed and checked: W₁h + W₂q, tanh, the scores, the weights.

#include <cmath>
#include <cstdio>
#include <string>

#include "attn/attn.hpp"
#include "attn/report/table.hpp"
#include "unit_check.hpp"

int main() {
  namespace report = attn::report;
  unit::checker check;

  const attn::Matrix<double, 2, 2> W1{{1, 0}, {0, 1}};
  const attn::Matrix<double, 2, 2> W2{{1, 0}, {0, 1}};
  const attn::Vector<double, 2> v{1, 1};
  const attn::Vector<double, 2> q{0.5, -0.5};
  const attn::Matrix<double, 3, 2> notes{{1, 0}, {0, 1}, {1, 1}};
  const attn::additive score(W1, W2, v);

  const auto r = attn::attend(q, notes, score);

  // The unit's numbers, step by step.
  const char* unit_pre[3][2] = {{"1.500", "-0.500"}, {"0.500", "0.500"}, {"1.500", "0.500"}};
  const char* unit_tanh[3][2] = {{"0.905", "-0.462"}, {"0.462", "0.462"}, {"0.905", "0.462"}};
  const char* unit_scores[] = {"0.443", "0.924", "1.367"};
  const char* unit_weights[] = {"0.195", "0.315", "0.490"};

  std::printf("E5. An additive score by hand: s = vᵀ tanh(W₁h + W₂q)\n");
  std::printf("W₁ = W₂ = I, v = (1, 1), q = (0.5, -0.5). Both matrices are I, so W₁h + W₂q = h + q.\n\n");

  report::table t;
  t.header = {"note h", "W₁h + W₂q", "tanh", "score vᵀtanh", "weight α"};
  for (std::size_t j = 0; j < 3; ++j) {
    const std::span<const double> h = notes.row(j);
    const std::string name = "(" + report::shortest(h[0]) + ", " + report::shortest(h[1]) + ")";
    std::string pre = "(", th = "(";
    double by_hand = 0;
    for (std::size_t i = 0; i < 2; ++i) {
      const double p = score.pre_activation(i, q, h);  // W₁_i·h + W₂_i·q
      const double t_i = std::tanh(p);
      by_hand += v[i] * t_i;
      pre += (i ? ", " : "") + check.print("W1 h + W2 q of " + name, p, unit_pre[j][i]);
      th += (i ? ", " : "") + check.print("tanh of " + name, t_i, unit_tanh[j][i]);
    }
    check.claim(std::abs(by_hand - r.scores[j]) < 1e-12, "v·tanh by hand equals attn's score for " + name);
    t.rows.push_back({name, pre + ")", th + ")", check.print("score of " + name, r.scores[j], unit_scores[j]),
                      check.print("weight of " + name, r.weights[j], unit_weights[j])});
  }
  t.aligns = {report::align::left, report::align::left, report::align::left, report::align::right,
              report::align::right};
  std::printf("%s\n", report::to_text(t).c_str());
  std::printf("v = (1, 1) simply adds the two entries of tanh, and softmax turns the scores into\n"
              "the weights: the note (1, 1) scores highest and gets %s of the attention.\n",
              check.print("weight of (1, 1)", r.weights[2], "0.490").c_str());
  return check.finish();
}
