// W7. Many heads: many questions at once (Unit 18, section 7).
// One head asks one kind of question. With h heads, W_Q, W_K and W_V are h blocks of columns
// side by side (PyTorch's layout: head i uses columns [i·d_k, (i+1)·d_k)); each head makes its
// own map and its own output, the outputs are put side by side (the concatenation) and one more
// matrix, W_O, mixes them back into one vector per word: Y = [Z_1 Z_2] W_O.
//
// Two heads on W3's sentence "I drink tea", d_k = d_v = 3, weights constructed by hand (no mask;
// examples/worked_examples.hpp): head 1 looks at the word before, head 2 at the word itself.
// Head 1's query for word t is 5·(word t − 1) and every key is the word itself, so its scores
// pick the word before; "I" has no word before, its query is 0, and it spreads evenly. Every
// value is the word itself, so each head's output row is its map's row; W_O averages the heads.

#include <cstdio>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "unit_check.hpp"
#include "worked_examples.hpp"

int main() {
  using namespace worked;
  unit::checker check;
  const std::vector<std::string> words = {"I", "drink", "tea"};

  const auto r = attn::self_attention<2>(i_drink_tea, w7::W_Q, w7::W_K, w7::W_V, w7::W_O);

  std::printf(
      "W7. Two heads on \"I drink tea\": one looks at the word before, one at the word itself\n\n");
  // r.maps holds head 1's map in rows 0–2 and head 2's in rows 3–5.
  const attn::MatrixView<const double> before = r.maps.view().subrows(0, 3),
                                       itself = r.maps.view().subrows(3, 3);
  unit::show(unit::matrix_table(check, "Head 1 (the word before)", before, words, words,
                                w7::before_map, true));
  unit::show(unit::matrix_table(check, "Head 2 (the word itself)", itself, words, words,
                                w7::itself_map, true));
  check.claim(before(1, 0) > 0.8 && before(2, 1) > 0.8, "head 1: drink looks at I, tea at drink");
  check.claim(itself(0, 0) > 0.8 && itself(1, 1) > 0.8 && itself(2, 2) > 0.8,
              "head 2: every word looks at itself");

  // The concatenation: head 1's output in columns 1–3, head 2's in 4–6 (here each is its map).
  const std::vector<std::string> six = {"h1: I", "h1: drink", "h1: tea",
                                        "h2: I", "h2: drink", "h2: tea"};
  std::vector<const char*> concat;
  for (std::size_t t = 0; t < 3; ++t) {
    for (std::size_t j = 0; j < 3; ++j) concat.push_back(w7::before_map[3 * t + j]);
    for (std::size_t j = 0; j < 3; ++j) concat.push_back(w7::itself_map[3 * t + j]);
  }
  unit::show(unit::matrix_table(check, "The concatenation [Z_1 Z_2] (3 × 6)", r.heads_out, words,
                                six, concat.data()));
  const auto y = unit::matrix_table(check, "Y = [Z_1 Z_2] W_O, W_O = [½I; ½I]: the heads averaged",
                                    r.out, words, words, w7::out);
  unit::show(y);
  std::printf(
      "After two heads, \"drink\" carries itself and the word before it, \"I\", in equal parts\n"
      "(%s, %s): one head alone could not have asked both questions.\n",
      check.print("Y(drink, I)", r.out(1, 0), w7::out[3]).c_str(),
      check.print("Y(drink, drink)", r.out(1, 1), w7::out[4]).c_str());
  return check.finish();
}
