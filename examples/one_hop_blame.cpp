// E7. The proof, in numbers: the blame reaches every note in one hop (Unit 18, section 1).
// With dot scores s_j = q·h_j, shares α_j and context c = Σ α_j h_j,
//   ∂c/∂h_j = α_j (I + (h_j − c) qᵀ).
// On E1's numbers the example prints ∂c/∂h_j for each note (attn::jacobian_note), rebuilds it
// from the unit's formula, and checks it against central finite differences
// (attn::check_jacobian). The note of "tea", with share 0.736, gets its blame at 0.736
// strength: the α_j I part of its Jacobian.

#include <cmath>
#include <cstdio>
#include <span>
#include <string>

#include "attn/attn.hpp"
#include "attn/gradcheck.hpp"
#include "attn/jacobian.hpp"
#include "attn/report/table.hpp"
#include "unit_check.hpp"

int main() {
  namespace report = attn::report;
  unit::checker check;

  const attn::Matrix<double> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Vector<double> q{0, 0.5, 2};
  const char* words[] = {"I", "drink", "tea"};
  const auto r = attn::attend(q, notes, attn::dot);

  std::printf("E7. The blame reaches every note in one hop: ∂c/∂h_j = α_j (I + (h_j − c) qᵀ)\n");
  std::printf("E1's numbers: q = (0, 0.5, 2), α = (%s, %s, %s), c = α.\n\n", check.print("α_I", r.weights[0], "0.100").c_str(),
              check.print("α_drink", r.weights[1], "0.164").c_str(), check.print("α_tea", r.weights[2], "0.736").c_str());

  // E7's reference: the Jacobian for "tea", rounded to 4 decimals (docs/WORKED_EXAMPLES).
  const char* tea_reference[3][3] = {{"0.7361", "-0.0367", "-0.1467"}, {"0.0000", "0.6757", "-0.2418"}, {"0.0000", "0.0971", "1.1246"}};

  for (std::size_t j = 0; j < 3; ++j) {
    const std::string w = words[j];
    const auto J = attn::jacobian_note(q, notes, attn::dot, j);

    // The unit's formula, by hand: α_j (I + (h_j − c) qᵀ).
    double formula_gap = 0;
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t k = 0; k < 3; ++k) {
        const double by_hand = r.weights[j] * ((i == k ? 1.0 : 0.0) + (notes(j, i) - r.context[i]) * q[k]);
        formula_gap = std::max(formula_gap, std::abs(by_hand - J(i, k)));
      }
    check.claim(formula_gap < 1e-14, "attn::jacobian_note equals the unit's formula for " + w);

    // Central finite differences of c as a function of h_j alone.
    attn::Matrix<double> moved(notes);
    auto context_of = [&](std::span<const double> h) {
      for (std::size_t k = 0; k < h.size(); ++k) moved(j, k) = h[k];
      return attn::attend(q, moved, attn::dot).context;
    };
    const auto fd = attn::check_jacobian(context_of, notes.row(j), J, "h_" + w);
    check.claim(fd.max_abs_error < 1e-9, "finite differences agree with ∂c/∂h_" + w + " to 1e-9");

    report::table t;
    t.title = "∂c/∂h_" + w + "  (α_" + w + " = " + check.print("α", r.weights[j]) + ")";
    t.header = {"", "∂/∂h₁", "∂/∂h₂", "∂/∂h₃"};
    for (std::size_t i = 0; i < 3; ++i) {
      std::vector<report::cell> row{"c" + std::to_string(i + 1)};
      for (std::size_t k = 0; k < 3; ++k)
        row.emplace_back(check.print("∂c/∂h_" + w, J(i, k), j == 2 ? tea_reference[i][k] : "", 4));
      t.rows.push_back(std::move(row));
    }
    std::printf("%s", report::to_text(t).c_str());
    // the smallest power of ten above the error: a figure that does not flicker with rounding
    const int decade = fd.max_abs_error > 0 ? static_cast<int>(std::ceil(std::log10(fd.max_abs_error))) : -16;
    std::printf("central finite differences agree: largest |analytic − numeric| < 1e%d\n\n", decade);
  }

  // The direct part of tea's Jacobian is α_tea I: the blame arrives at 0.736 strength.
  std::printf("The note of \"tea\" gets its blame directly, at its share's strength: the α_tea I part\n"
              "of its Jacobian is %s I. No chain of step-by-step slopes stands between c and any note.\n\n",
              check.print("α_tea", r.weights[2], "0.736").c_str());

  // Unit 17's relay, for contrast: the blame for word 1 of 30 passes 29 slope matrices. If each
  // keeps 0.8 of it (an illustrative slope), 0.8^29 of the blame arrives.
  const double kept = std::pow(0.8, 29);
  std::printf("Contrast, Unit 17's relay: blame for the first of 30 words passes through 29 slope\n"
              "matrices; if each keeps 0.8 of it, only %s arrives. Attention: one hop, at α_j.\n",
              check.print("0.8^29", kept, "", 4).c_str());
  check.claim(kept < 0.01, "the relay's long product fades");
  return check.finish();
}
