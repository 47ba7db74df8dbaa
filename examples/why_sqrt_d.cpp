// W4. Why divide by √d (Unit 18, section 4).
// A dot product of two vectors of d numbers adds d terms, so it grows with d. Fed to softmax
// unscaled, big scores saturate it: one weight takes (nearly) everything, and the slope of
// softmax, which is what training learns from, all but vanishes. Dividing by √d keeps the scores
// of the size they would have with one number each.
//
// d = 16, q = (1, …, 1), keys (1, …, 1), (½, …, ½), (0, …, 0): raw scores (16, 8, 0) give
// weights ≈ (0.99966, 0.00034, 0.00000); divided by √16 = 4, scores (4, 2, 0) give
// ≈ (0.867, 0.117, 0.016). Then the statistical reason: for random q, k whose entries have
// variance 1, Var(q·k) = d, measured here over many draws for d = 1, 16, 256.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "attn/report/table.hpp"
#include "unit_check.hpp"
#include "worked_examples.hpp"

namespace {
// The largest |∂α_i/∂s_j| of softmax at scores s: how much a weight can move per unit of score.
double largest_slope(const attn::Vector<double, 3>& s) {
  const auto J = attn::softmax_jacobian(s);
  double top = 0;
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) top = std::max(top, std::abs(J(i, j)));
  return top;
}
}  // namespace

int main() {
  namespace report = attn::report;
  unit::checker check;

  constexpr std::size_t d = 16;
  attn::Vector<double, d> q;
  attn::Matrix<double, 3, d> keys;  // rows: all 1, all ½, all 0 (a fixed Matrix starts at 0)
  for (std::size_t i = 0; i < d; ++i) {
    q[i] = 1;
    keys(0, i) = 1;
    keys(1, i) = 0.5;
  }
  const auto raw = attn::attend(q, keys, attn::dot);
  const auto scaled = attn::attend(q, keys, attn::scaled_dot);  // 1/√d, d = 16

  std::printf("W4. Why divide by √d: d = 16, q = (1, …, 1), keys all 1, all ½, all 0\n\n");
  const char* unit_raw_scores[] = {"16", "8", "0"};
  const char* unit_raw[] = {"0.99966", "0.00034", "0.00000"};
  const char* unit_scaled_scores[] = {"4", "2", "0"};
  const char* unit_scaled[] = {"0.867", "0.117", "0.016"};
  report::table t;
  t.header = {"key", "q·k", "weight", "q·k/√16", "weight"};
  const char* names[] = {"(1, …, 1)", "(½, …, ½)", "(0, …, 0)"};
  for (std::size_t j = 0; j < 3; ++j)
    t.rows.push_back({names[j], check.print("raw score", raw.scores[j], unit_raw_scores[j], 0),
                      check.print("raw weight", raw.weights[j], unit_raw[j], 5),
                      check.print("scaled score", scaled.scores[j], unit_scaled_scores[j], 0),
                      check.print("scaled weight", scaled.weights[j], unit_scaled[j])});
  unit::show(t);

  const double raw_slope = largest_slope(raw.scores), scaled_slope = largest_slope(scaled.scores);
  std::printf("Unscaled, softmax has saturated: its largest slope |∂α_i/∂s_j| is %s, so the\n"
              "gradient all but vanishes. Scaled, it is %s: the weights can still learn.\n\n",
              check.print("largest slope, raw", raw_slope, worked::w4::raw_slope, 5).c_str(),
              check.print("largest slope, scaled", scaled_slope, worked::w4::scaled_slope).c_str());
  check.claim(scaled_slope > 300 * raw_slope,
              "scaling by 1/√d keeps the slope hundreds of times larger");

  // The statistical reason. q·k is a sum of d products q_i k_i, each of mean 0 and variance 1,
  // so Var(q·k) = d, and Var(q·k/√d) = 1. Measured as the mean of (q·k)² over N draws: for
  // Gaussian entries E(q·k)⁴ = 3d² + 6d, so that mean has standard error √((2d² + 6d)/N); the
  // example allows 5 of them (a fixed seed; another library's normal_distribution stays within).
  constexpr std::size_t draws = 20000;
  std::mt19937_64 rng(20260);
  std::normal_distribution<double> unit_normal(0.0, 1.0);
  report::table v;
  v.title = "Var(q·k) over 20000 draws of q, k with unit-variance entries";
  v.header = {"d", "Var(q·k)", "≈ d?", "Var(q·k/√d)", "allowed |Var/d − 1|"};
  for (const std::size_t dim : {std::size_t{1}, std::size_t{16}, std::size_t{256}}) {
    std::vector<double> a(dim), b(dim);
    double sum_sq = 0;
    for (std::size_t k = 0; k < draws; ++k) {
      for (std::size_t i = 0; i < dim; ++i) {
        a[i] = unit_normal(rng);
        b[i] = unit_normal(rng);
      }
      const double s = attn::dot(a, b);
      sum_sq += s * s;
    }
    const double var = sum_sq / draws, dd = static_cast<double>(dim);
    const double allowed = 5 * std::sqrt((2 * dd * dd + 6 * dd) / draws) / dd;
    const bool near = std::abs(var / dd - 1) <= allowed;
    check.claim(near, "Var(q.k) is d within 5 standard errors for d = " + std::to_string(dim));
    v.rows.push_back({std::to_string(dim), check.print("Var", var, "", 2), near ? "yes" : "NO",
                      check.print("scaled Var", var / dd), check.print("allowed", allowed)});
  }
  unit::show(v);
  std::printf(
      "The raw dot product's spread grows like √d; divided by √d, every d gives scores of\n"
      "variance 1, and softmax sees the same kind of numbers whatever the size of the head.\n");
  return check.finish();
}
