// W2. Attention is a soft lookup: keys are not values (Unit 18, section 2).
// A dictionary finds the one key that matches and hands back its value. Attention scores every
// key against the query, turns the scores into shares and hands back a blend of all the values.
// Here the keys are E1's notes for "I", "drink" and "tea", and under them are stored the Hindi
// words' own vectors v(मैं) = (1, 0), v(पीता) = (1, 1), v(चाय) = (0, 1): where to look is decided
// by the keys, what comes back by the values. With E1's query q = (0, 0.5, 2) the weights are
// E1's (0.100, 0.164, 0.736) and the context is a blend of the values, (0.264, 0.900).

#include <cstdio>
#include <string>

#include "attn/attn.hpp"
#include "attn/report/table.hpp"
#include "unit_check.hpp"
#include "worked_examples.hpp"

int main() {
  namespace report = attn::report;
  unit::checker check;

  const attn::Matrix<double, 3, 3> keys{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};  // I, drink, tea
  const attn::Matrix<double, 3, 2> values{{1, 0}, {1, 1}, {0, 1}};  // मैं, पीता, चाय
  const attn::Vector<double, 3> q{0, 0.5, 2};
  const char* key_words[] = {"I", "drink", "tea"};
  const char* value_words[] = {"मैं (1, 0)", "पीता (1, 1)", "चाय (0, 1)"};

  const auto r = attn::attend(q, keys, values, attn::dot);

  std::printf("W2. A soft lookup: q = (0, 0.5, 2) asks the keys; the values answer\n\n");
  const char* unit_weights[] = {"0.100", "0.164", "0.736"};
  report::table t;
  t.header = {"key", "score q·k", "weight α", "value stored"};
  for (std::size_t j = 0; j < 3; ++j)
    t.rows.push_back(
        {key_words[j], check.print("score", r.scores[j]),
         check.print(std::string("weight of ") + key_words[j], r.weights[j], unit_weights[j]),
         value_words[j]});
  t.aligns = {report::align::left, report::align::right, report::align::right, report::align::left};
  unit::show(t);

  std::printf("context = %s·(1, 0) + %s·(1, 1) + %s·(0, 1) = (%s, %s)\n\n",
              check.print("weight of I", r.weights[0], "0.100").c_str(),
              check.print("weight of drink", r.weights[1], "0.164").c_str(),
              check.print("weight of tea", r.weights[2], "0.736").c_str(),
              check.print("context[1]", r.context[0], "0.264").c_str(),
              check.print("context[2]", r.context[1], "0.900").c_str());

  // The hard lookup, for contrast: the best key's value alone. A sharper look (E2's β = 2) moves
  // the soft answer towards it, but it stays a blend of all three.
  const auto sharp = attn::attend(q, keys, values, attn::dot, attn::options{.beta = 2});
  std::printf(
      "A dictionary would answer with the best key's value alone: \"tea\" → चाय = (0, 1).\n"
      "Attention answers with a blend; twice as sure (β = 2, E2) it is (%s, %s), nearer चाय.\n",
      check.print("beta = 2 context[1]", sharp.context[0], worked::w2::sharp_context[0]).c_str(),
      check.print("beta = 2 context[2]", sharp.context[1], worked::w2::sharp_context[1]).c_str());
  check.claim(sharp.context[0] < r.context[0] && sharp.context[1] > r.context[1],
              "a sharper look moves the blend towards the best key's value");
  check.claim(r.context[0] > 0 && r.context[0] < 1 && r.context[1] > 0 && r.context[1] < 1,
              "the context lies among the values, not on one of them");
  return check.finish();
}
