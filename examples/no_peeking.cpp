// W10. No peeking: the mask, and every guess at once (Unit 18, section 10).
// A model that writes text guesses the next word from the words before it. Trained on "I drink
// green tea", position 1 ("I") must guess "drink", position 2 "green", and so on. If position t
// could look at word t + 1 it would read the answer, so the causal mask lets it see words 1..t
// only: row 1 of the map is (1, 0, 0, 0), row t spreads over words 1..t. Then one forward pass
// gives all four guesses at once, and training takes the mean of their four losses.
//
// The tiny model (examples/worked_examples.hpp): each word its own direction among the 5 of the
// vocabulary (I, drink, green, tea, .), self-attention with Q = K = V = X under the causal mask,
// logits = Y W_vocab, where W_vocab gives 3 to the word that follows each word. The loss at t is
// the cross-entropy −log p(next word) = −log_softmax(logits_t)[next word], all four at once by
// attn::cross_entropy, which returns their mean.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "attn/report/table.hpp"
#include "unit_check.hpp"
#include "worked_examples.hpp"

namespace {

constexpr std::size_t V = worked::w10::vocabulary;
using sentence_matrix = attn::Matrix<double, 4, V>;

// Each word as its own direction: row t is one-hot at the word's index.
sentence_matrix one_hot(const std::size_t (&words)[4]) {
  sentence_matrix X;
  for (std::size_t t = 0; t < 4; ++t) X(t, words[t]) = 1;
  return X;
}

struct guesses {
  attn::Matrix<double, 4, 4> map;
  attn::Vector<double, 4> losses;
  double mean = 0;  // what training lowers
};

// The forward pass: causal self-attention, logits = Y W_vocab, the loss of each next word.
guesses forward(const sentence_matrix& X, bool causal) {
  attn::Matrix<double, V, V> I, W_vocab;
  for (std::size_t w = 0; w < V; ++w) I(w, w) = 1;
  for (std::size_t t = 0; t < 4; ++t)
    W_vocab(worked::w10::inputs[t], worked::w10::targets[t]) = worked::w10::follows;
  const auto r = attn::self_attention(X, I, I, I, attn::options{.causal = causal});
  guesses g{r.maps, {}};
  attn::Matrix<double, 4, V> logits;
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t w = 0; w < V; ++w)
      for (std::size_t i = 0; i < V; ++i) logits(t, w) += r.out(t, i) * W_vocab(i, w);
  // every position's loss at once (attn/cross_entropy.hpp): ℓ_t = −log softmax(logits_t)[next word]
  const std::int64_t targets[4] = {static_cast<std::int64_t>(worked::w10::targets[0]),
                                   static_cast<std::int64_t>(worked::w10::targets[1]),
                                   static_cast<std::int64_t>(worked::w10::targets[2]),
                                   static_cast<std::int64_t>(worked::w10::targets[3])};
  g.mean = attn::cross_entropy(logits, targets, g.losses);
  return g;
}

}  // namespace

int main() {
  namespace report = attn::report;
  using namespace worked;
  unit::checker check;
  std::vector<std::string> in, next;
  for (std::size_t t = 0; t < 4; ++t) {
    in.emplace_back(w10::words[w10::inputs[t]]);
    next.emplace_back(w10::words[w10::targets[t]]);
  }

  const guesses g = forward(one_hot(w10::inputs), true);
  std::printf("W10. No peeking: \"I drink green tea\", each position guessing the next word\n\n");
  unit::show(unit::matrix_table(check, "The causal map (row t sees words 1..t)", g.map, in, in,
                                w10::map, true));
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t j = t + 1; j < 4; ++j)
      check.claim(g.map(t, j) == 0, "no position sees a later word");

  report::table losses;
  losses.title = "One forward pass, four guesses: the loss −log p(next word) at every position";
  losses.header = {"position", "sees", "must guess", "loss"};
  std::string seen;
  for (std::size_t t = 0; t < 4; ++t) {
    seen += (t ? " " : "") + in[t];
    losses.rows.push_back({std::to_string(t + 1), seen, next[t],
                           check.print("loss at " + in[t], g.losses[t], w10::losses[t])});
  }
  const double mean = g.mean;
  losses.aligns = {report::align::right, report::align::left, report::align::left,
                   report::align::right};
  unit::show(losses);
  std::printf(
      "The mean, what training lowers: %s (a blind guess among 5 words costs ln 5 = %s).\n\n",
      check.print("mean loss", mean, w10::mean_loss).c_str(),
      check.print("ln 5", std::log(5.0), "1.609").c_str());

  // The mask at work: change the last word. Under the mask the first three positions cannot see
  // it, so their losses stay exactly as they were; without the mask every position reads it.
  const std::size_t changed[4] = {w10::inputs[0], w10::inputs[1], w10::inputs[2],
                                  0};  // "I drink green I"
  const guesses masked = forward(one_hot(changed), true), open = forward(one_hot(changed), false);
  const guesses open_before = forward(one_hot(w10::inputs), false);
  bool same = true, moved = true;
  for (std::size_t t = 0; t < 3; ++t) {
    same = same && masked.losses[t] == g.losses[t];
    moved = moved && open.losses[t] != open_before.losses[t];
  }
  check.claim(
      same,
      "with the mask, changing word 4 leaves the losses at positions 1-3 exactly as they were");
  check.claim(moved, "without the mask, changing word 4 moves the loss at every position");
  std::printf(
      "Change word 4 (\"tea\" → \"I\"): with the mask the losses at positions 1–3 stay exactly\n"
      "%s, %s, %s; without it, position 1 would see word 4 (its loss moves from %s to %s).\n",
      check.print("loss 1 after the change", masked.losses[0], w10::losses[0]).c_str(),
      check.print("loss 2 after the change", masked.losses[1], w10::losses[1]).c_str(),
      check.print("loss 3 after the change", masked.losses[2], w10::losses[2]).c_str(),
      check.print("loss 1 unmasked", open_before.losses[0], w10::open_loss_1[0]).c_str(),
      check.print("loss 1 unmasked, changed", open.losses[0], w10::open_loss_1[1]).c_str());
  return check.finish();
}
