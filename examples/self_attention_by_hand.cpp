// W3. Self-attention by hand: every word asks every word (Unit 18, section 3).
// In section 1 a decoder asked the encoder's notes. In self-attention the words of one sentence
// ask each other: every word makes a query (what am I looking for?), a key (what do I offer?) and
// a value (what do I hand over?), each by one small matrix, Q = X W_Q, K = X W_K, V = X W_V. Then
// each word's query scores every key, S = Q Kᵀ/√d_k, softmax turns each row into shares, and each
// word's new vector is its row's blend of the values, Y = A V.
//
// X = "I drink tea" as (1,0,0), (0,1,0), (0,0,1), so Q, K and V are simply the rows of W_Q, W_K,
// W_V (examples/worked_examples.hpp): "drink" asks along the second direction, which "tea"
// answers most, so "drink" looks hardest at "tea". Three words, three rows, each summing to 1.

#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "attn/attn.hpp"
#include "unit_check.hpp"
#include "worked_examples.hpp"

int main() {
  using namespace worked;
  unit::checker check;
  const std::vector<std::string> words = {"I", "drink", "tea"};

  const auto r = attn::self_attention(i_drink_tea, w3::W_Q, w3::W_K, w3::W_V);  // one head, 1/√2

  std::printf("W3. Self-attention by hand: \"I drink tea\", d_k = d_v = 2\n\n");
  // With one-hot words, each projection just picks a row of its matrix: Q = W_Q, K = W_K, V = W_V.
  for (const auto& [name, m, w] :
       {std::tuple{"Q = X W_Q", r.queries, w3::W_Q}, std::tuple{"K = X W_K", r.keys, w3::W_K},
        std::tuple{"V = X W_V", r.values, w3::W_V}}) {
    unit::show(unit::matrix_table(check, name, m, words, {"1", "2"}));
    check.claim(m == w, std::string(name) + ": a one-hot word picks its row of the matrix");
  }

  // One row by hand: "drink"'s query against every key, S = q·k/√2, then e^s / Σ e^s.
  double scores[3], sum = 0;
  for (std::size_t j = 0; j < 3; ++j) {
    scores[j] = (r.queries(1, 0) * r.keys(j, 0) + r.queries(1, 1) * r.keys(j, 1)) / std::sqrt(2.0);
    sum += std::exp(scores[j]);
  }
  std::printf("\"drink\" asks q = (0, 1): its scores q·k/√2 are (%s, %s, %s)\n\n",
              check.print("score of drink for I", scores[0], w3::drink_scores[0]).c_str(),
              check.print("score of drink for drink", scores[1], w3::drink_scores[1]).c_str(),
              check.print("score of drink for tea", scores[2], w3::drink_scores[2]).c_str());
  for (std::size_t j = 0; j < 3; ++j)
    check.claim(std::abs(std::exp(scores[j]) / sum - r.maps(1, j)) < 1e-15,
                "e^s/Σe^s by hand is attn's map");

  const auto map =
      unit::matrix_table(check, "The 3×3 map A = softmax(Q Kᵀ/√2) (rows ask, columns answer)",
                         r.maps, words, words, w3::map, true);
  unit::show(map);
  const auto out = unit::matrix_table(check, "Y = A V: each word's new vector", r.out, words,
                                      {"1", "2"}, w3::out);
  unit::show(out);

  check.claim(r.maps(1, 2) > r.maps(1, 0) && r.maps(1, 2) > r.maps(1, 1),
              "drink looks hardest at tea");
  std::printf(
      "Every word asks every word: three rows, each summing to 1. \"drink\" gives %s of its\n"
      "attention to \"tea\", so its new vector leans towards tea's value (0, 1).\n",
      check.print("drink's share of tea", r.maps(1, 2), w3::map[5]).c_str());
  return check.finish();
}
