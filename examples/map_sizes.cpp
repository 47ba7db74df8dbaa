// E6. Pause & predict: sizes (Unit 18, section 1). A 30-word English sentence translated into
// 35 Hindi words, with attention: how many context vectors, and how many numbers in the map?
// The example builds such a map from generated notes and decoder states and checks its shape,
// that every row sums to 1, and that there is one context vector per word written.

#include <cmath>
#include <cstdio>
#include <string>

#include "attn/attn.hpp"
#include "attn/report/format.hpp"
#include "unit_check.hpp"

int main() {
  unit::checker check;
  constexpr std::size_t read = 30, written = 35, d = 8;

  // Notes and states made up but fixed: smooth, distinct and of moderate size.
  attn::Matrix<double> notes(read, d), states(written, d);
  for (std::size_t j = 0; j < read; ++j)
    for (std::size_t i = 0; i < d; ++i) notes(j, i) = std::sin(0.7 * static_cast<double>(j + 1) + 1.3 * static_cast<double>(i));
  for (std::size_t t = 0; t < written; ++t)
    for (std::size_t i = 0; i < d; ++i) states(t, i) = 2 * std::cos(0.45 * static_cast<double>(t + 1) * static_cast<double>(i + 1));

  const auto r = attn::align(states, notes, attn::dot);

  std::printf("E6. Sizes: a %zu-word English sentence into %zu Hindi words\n\n", read, written);
  const std::size_t contexts = r.contexts.rows();
  const std::size_t cells = r.weights.rows() * r.weights.cols();
  std::printf("Context vectors: %s (one per word written; the notes stay the same)\n",
              check.print("context vectors", static_cast<double>(contexts), "35", 0).c_str());
  std::printf("The alignment map: %s rows × %s columns = %s numbers\n",
              check.print("rows of the map", static_cast<double>(r.weights.rows()), "35", 0).c_str(),
              check.print("columns of the map", static_cast<double>(r.weights.cols()), "30", 0).c_str(),
              check.print("numbers in the map", static_cast<double>(cells), "1050", 0).c_str());

  double worst = 0;
  bool rows_sum_to_one = true;
  for (std::size_t t = 0; t < written; ++t) {
    double sum = 0;
    for (std::size_t j = 0; j < read; ++j) sum += r.weights(t, j);
    worst = std::max(worst, std::abs(sum - 1));
    rows_sum_to_one = rows_sum_to_one && check.print("row sum", sum, "1.000") == "1.000";
  }
  check.claim(worst < 1e-12, "every row sums to 1 within 1e-12");
  check.claim(r.contexts.cols() == d, "each context vector is as long as a note");
  std::printf("Every row sums to %s (largest |sum - 1| below 1e-12: %s)\n", rows_sum_to_one ? "1.000" : "something else",
              worst < 1e-12 ? "yes" : "no");
  std::printf("Each context vector has %zu numbers, like the notes.\n", r.contexts.cols());
  return check.finish();
}
