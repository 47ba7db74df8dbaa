// E4. Three ways to score a note (Unit 18, section 1): dot (Luong), general (Luong) and
// additive (Bahdanau), plus the transformer's scaled dot. First all of them on the unit's
// "I drink tea" notes; then a decoder state of another length than the notes, which dot
// refuses and general and additive accept (their matrices bring both to one size).

#include <cmath>
#include <cstdio>
#include <string>

#include "attn/attn.hpp"
#include "attn/report/table.hpp"
#include "unit_check.hpp"

namespace report = attn::report;

namespace {
template <class Scores>
std::string triple(unit::checker& check, const char* what, const Scores& s, const char* const* expected = nullptr) {
  std::string out = "(";
  for (std::size_t j = 0; j < 3; ++j)
    out += (j ? ", " : "") + check.print(what, s[j], expected ? expected[j] : "");
  return out + ")";
}
}  // namespace

int main() {
  unit::checker check;

  report::table formulas;
  formulas.title = "The three classic scores";
  formulas.header = {"score", "formula", "extra weights", "in plain words"};
  formulas.rows = {{"dot (Luong, 2015)", "q·h", "none", "\"how much do we agree?\"; q and h of the same length"},
                   {"general (Luong, 2015)", "qᵀ W h", "one matrix W", "first re-express the note with W, then agree"},
                   {"additive (Bahdanau, 2015)", "vᵀ tanh(W₁h + W₂q)", "W₁, W₂, v", "a tiny one-layer network judges the match"},
                   {"scaled dot (the transformer)", "q·h / √d", "none", "dot, divided by √d (the unit's §4)"}};
  formulas.aligns = {report::align::left, report::align::left, report::align::left, report::align::left};
  std::printf("E4. Three ways to score a note\n\n%s\n", report::to_text(formulas).c_str());

  // 1. The unit's notes and चाय's state (E1), scored four ways.
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Vector<double, 3> q{0, 0.5, 2};
  const attn::Matrix<double, 3, 3> I3{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Vector<double, 3> ones3{1, 1, 1};
  const attn::general W_is_I(I3);
  const attn::additive add3(I3, I3, ones3);

  const auto dot = attn::attend(q, notes, attn::dot);
  const auto gen = attn::attend(q, notes, W_is_I);
  const auto scaled = attn::attend(q, notes, attn::scaled_dot);
  const auto add = attn::attend(q, notes, add3);
  const char* unit_scores[] = {"0.000", "0.500", "2.000"};
  const char* unit_weights[] = {"0.100", "0.164", "0.736"};

  report::table same;
  same.title = "On \"I drink tea\" with q = (0, 0.5, 2) (notes I, drink, tea)";
  same.header = {"score", "scores", "weights"};
  same.rows = {
      {"dot", triple(check, "dot score", dot.scores, unit_scores), triple(check, "dot weight", dot.weights, unit_weights)},
      {"general, W = I", triple(check, "general score", gen.scores, unit_scores),
       triple(check, "general weight", gen.weights, unit_weights)},
      {"scaled dot, d = 3", triple(check, "scaled score", scaled.scores), triple(check, "scaled weight", scaled.weights)},
      {"additive, W₁ = W₂ = I, v = 1", triple(check, "additive score", add.scores),
       triple(check, "additive weight", add.weights)}};
  same.aligns = {report::align::left, report::align::left, report::align::left};
  std::printf("%s\n", report::to_text(same).c_str());
  for (std::size_t j = 0; j < 3; ++j) {
    check.claim(gen.scores[j] == dot.scores[j], "general with W = I scores like dot");
    check.claim(std::abs(scaled.scores[j] - dot.scores[j] / std::sqrt(3.0)) < 1e-15, "scaled dot is dot / sqrt(3)");
  }
  std::printf("With W = I, general is dot. Scaled dot divides by √3 and so looks less sharply.\n"
              "Additive with W₁ = W₂ = I is no similarity: tanh saturates, so it prefers the note that\n"
              "fills q's unused directions (\"I\"). Its weights are learned; E5 shows one by hand.\n\n");

  // 2. The unit's additive score by hand (E5).
  const attn::Matrix<double, 2, 2> I2{{1, 0}, {0, 1}};
  const attn::Vector<double, 2> v{1, 1};
  const attn::Matrix<double, 3, 2> notes2{{1, 0}, {0, 1}, {1, 1}};
  const attn::Vector<double, 2> q2{0.5, -0.5};
  const auto e5 = attn::attend(q2, notes2, attn::additive(I2, I2, v));
  const char* unit_e5_scores[] = {"0.443", "0.924", "1.367"};
  const char* unit_e5_weights[] = {"0.195", "0.315", "0.490"};
  std::printf("Additive by hand (E5): W₁ = W₂ = I, v = (1, 1), q = (0.5, -0.5), notes (1, 0), (0, 1), (1, 1)\n");
  std::printf("  scores  %s\n", triple(check, "E5 score", e5.scores, unit_e5_scores).c_str());
  std::printf("  weights %s\n\n", triple(check, "E5 weight", e5.weights, unit_e5_weights).c_str());

  // 3. A decoder state of length 2 against notes of length 3.
  const attn::Vector<double> short_q{0.5, -0.5};
  const attn::Matrix<double> notes_dyn{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  std::printf("A state of length 2, q = (0.5, -0.5), against the notes of length 3:\n");
  bool refused = false;
  try {
    (void)attn::attend(short_q, notes_dyn, attn::dot);
  } catch (const attn::dimension_error& e) {
    refused = true;
    std::printf("  dot refuses: %s\n", e.what());
  }
  check.claim(refused, "dot refuses a query and notes of different lengths");
  const attn::Matrix<double> W{{1, 0, 1}, {0, 1, 1}};           // 2 × 3: query length × note length
  const attn::Matrix<double> W1{{1, 0, 0}, {0, 1, 0}};          // k × note length (k = 2)
  const attn::Matrix<double> W2{{1, 0}, {0, 1}};                // k × query length
  const attn::Vector<double> v2{1, 1};
  const auto g = attn::attend(short_q, notes_dyn, attn::general(W));
  const auto a = attn::attend(short_q, notes_dyn, attn::additive(W1, W2, v2));
  report::table other;
  other.header = {"score", "scores", "weights"};
  other.rows = {{"general, W = (1 0 1; 0 1 1)", triple(check, "s", g.scores), triple(check, "w", g.weights)},
                {"additive, W₁ = (1 0 0; 0 1 0), W₂ = I, v = (1, 1)", triple(check, "s", a.scores),
                 triple(check, "w", a.weights)}};
  other.aligns = {report::align::left, report::align::left, report::align::left};
  std::printf("%s", report::to_text(other).c_str());
  // q·(W h) by hand for general: W h_I = (1, 0), W h_drink = (0, 1), W h_tea = (1, 1)
  check.claim(g.scores[0] == 0.5 && g.scores[1] == -0.5 && g.scores[2] == 0.0, "general scores qᵀWh by hand");
  std::printf("General and additive cope with different lengths: their matrices bring both to one size.\n");
  return check.finish();
}
