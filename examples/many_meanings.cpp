// W5. The payoff: one word, many meanings (Unit 18, section 5).
// A word's vector in a table is the same in every sentence: "bank" cannot know whether it is the
// side of a river or a place for money. After self-attention it can: its new vector blends in the
// words around it. Here two directions, water and money, and 2-d vectors chosen by hand:
//   river = (2, 0), all water;  loan = (0, 2), all money;  bank = (1, 1), half of each.
// Q = K = V = X (no projections, scale 1/√2). In "river bank", bank blends in water; in "bank
// loan", money: the same input, two outputs. (No positions yet (§8): order does not matter here.)

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "unit_check.hpp"
#include "worked_examples.hpp"

int main() {
  using namespace worked;
  unit::checker check;
  const attn::Matrix<double, 2, 2> I{{1, 0}, {0, 1}};
  const std::vector<std::string> dims = {"water", "money"};

  std::printf("W5. One word, many meanings: \"bank\" = (1, 1) in two sentences\n\n");
  struct sentence {
    const char* name;
    const attn::Matrix<double, 2, 2>& X;
    std::vector<std::string> words;
    std::size_t bank;  // where "bank" stands
    const char* const* map;
    const char* const* out;
  };
  const sentence sentences[] = {
      {"river bank", w5::river_bank, {"river", "bank"}, 1, w5::river_bank_map, w5::river_bank_out},
      {"bank loan", w5::bank_loan, {"bank", "loan"}, 0, w5::bank_loan_map, w5::bank_loan_out}};
  attn::Vector<double, 2> bank_out[2];
  for (std::size_t k = 0; k < 2; ++k) {
    const sentence& s = sentences[k];
    const auto r = attn::self_attention(s.X, I, I, I);
    std::printf("\"%s\"\n", s.name);
    unit::show(unit::matrix_table(check, "its map", r.maps, s.words, s.words, s.map, true), "");
    unit::show(unit::matrix_table(check, "Y = A V", r.out, s.words, dims, s.out));
    bank_out[k] = {r.out(s.bank, 0), r.out(s.bank, 1)};
    check.claim(s.X(s.bank, 0) == 1 && s.X(s.bank, 1) == 1,
                "bank goes in as (1, 1) in both sentences");
  }

  std::printf(
      "The same word in, two words out:\n  bank in \"river bank\" → (%s, %s), leaning to water\n"
      "  bank in \"bank loan\"  → (%s, %s), leaning to money\n",
      check.print("bank out, river bank", bank_out[0][0], w5::river_bank_out[2]).c_str(),
      check.print("bank out, river bank", bank_out[0][1], w5::river_bank_out[3]).c_str(),
      check.print("bank out, bank loan", bank_out[1][0], w5::bank_loan_out[0]).c_str(),
      check.print("bank out, bank loan", bank_out[1][1], w5::bank_loan_out[1]).c_str());
  check.claim(bank_out[0][0] > bank_out[0][1], "by the river, bank leans to water");
  check.claim(bank_out[1][1] > bank_out[1][0], "beside a loan, bank leans to money");
  const double apart = std::hypot(bank_out[0][0] - bank_out[1][0], bank_out[0][1] - bank_out[1][1]);
  std::printf("They lie %s apart; the input \"bank\" was one and the same vector.\n",
              check.print("distance between the two banks", apart, w5::banks_apart).c_str());
  return check.finish();
}
