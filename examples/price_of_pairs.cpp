// W12. The price: every pair of words (Unit 18, section 12).
// Every query scores every key, so one head's map has T·n numbers, in every layer. At T = 1024
// that is 1,048,576 scores, 4 MiB in float, per head; at 4096, 64 MiB, past a laptop's cache.
// The tiled ("flash") form never stores the map: it walks the keys a block at a time, keeping
// for each query only a running max, a running sum and its output row (the online softmax), so
// beyond Q, K, V and Y it keeps T numbers, each row's log-sum-exp, which is all the backward
// needs to rebuild the map tile by tile. The work stays T·n·d; the memory falls from T·n to T·d.
//
// The example prints the counts and the memory both ways, then computes one head at T = n = 1024,
// d = 64 in float both ways, the textbook form with the whole map in memory and attn's tiled
// kernel, and checks that the outputs agree within the rounding bound below.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "attn/report/table.hpp"
#include "unit_check.hpp"
#include "worked_examples.hpp"

namespace {

// 1048576 → "1,048,576".
std::string grouped(std::size_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

constexpr double MiB = 1024.0 * 1024.0;

}  // namespace

int main() {
  namespace report = attn::report;
  using namespace worked;
  unit::checker check;

  std::printf("W12. The price of every pair: one head, T = n, float (4 bytes), d = 64\n\n");
  report::table price;
  price.header = {"T",
                  "scores T·n",
                  "the map",
                  "causal: T(T+1)/2",
                  "tiled keeps: Q, K, V, Y",
                  "and L (T numbers)"};
  for (std::size_t k = 0; k < 3; ++k) {
    const std::size_t T = w12::lengths[k];
    const std::size_t scores = T * T, causal = T * (T + 1) / 2;
    const double map_mib = static_cast<double>(scores * sizeof(float)) / MiB;
    const double qkvy_mib = static_cast<double>(4 * T * w12::d * sizeof(float)) / MiB;
    const double lse_kib = static_cast<double>(T * sizeof(float)) / 1024.0;
    check.print("scores at T = " + std::to_string(T), static_cast<double>(scores), w12::scores[k],
                0);
    check.print("causal scores", static_cast<double>(causal), w12::causal_scores[k], 0);
    price.rows.push_back({std::to_string(T), grouped(scores),
                          check.print("map MiB", map_mib, w12::map_mib[k], 2) + " MiB",
                          grouped(causal),
                          check.print("Q K V Y MiB", qkvy_mib, w12::qkvy_mib[k], 2) + " MiB",
                          check.print("L KiB", lse_kib, w12::logsumexp_kib[k], 0) + " KiB"});
    if (T == 1024) {  // the unit's figures
      check.print("scores at T = 1024 (the unit)", static_cast<double>(scores), "1048576", 0);
      check.print("MiB of the map at T = 1024 (the unit)", map_mib, "4", 0);
    }
  }
  unit::show(price);
  std::printf(
      "The stored map grows with T·n, per head and per layer; the tiled form keeps T·d numbers\n"
      "(the inputs and outputs it needs anyway) and T more. The causal mask halves the pairs,\n"
      "and the tiled kernel skips the key blocks above the diagonal.\n\n");

  // One head both ways at T = n = 1024, d = 64, float: random Q, K, V with unit-variance entries.
  constexpr std::size_t T = 1024, d = w12::d;
  std::mt19937_64 rng(1212);
  std::normal_distribution<float> unit_normal(0.0f, 1.0f);
  attn::Matrix<float> Q(T, d), K(T, d), V(T, d);
  for (attn::Matrix<float>* m : {&Q, &K, &V})
    for (std::size_t i = 0; i < m->size(); ++i) m->data()[i] = unit_normal(rng);

  // The textbook form: S = Q Kᵀ/√d stored whole, A = softmax of each row (stored), Y = A V.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  attn::Matrix<float> A(T, T), Y_stored(T, d);
  double M = 0, Smax = 0;  // for the bound: max scale·Σ|q_i k_i| and max |s|
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t j = 0; j < T; ++j) {
      A(t, j) = scale * attn::dot(Q.row(t), K.row(j));
      double magnitude = 0;
      for (std::size_t i = 0; i < d; ++i)
        magnitude += std::abs(static_cast<double>(Q(t, i)) * K(j, i));
      M = std::max(M, scale * magnitude);
      Smax = std::max(Smax, std::abs(static_cast<double>(A(t, j))));
    }
    attn::softmax_inplace(A.row(t));
    for (std::size_t j = 0; j < T; ++j)
      for (std::size_t i = 0; i < d; ++i) Y_stored(t, i) += A(t, j) * V(j, i);
  }
  // The tiled form: only Y and each row's log-sum-exp are written.
  attn::Matrix<float> Y_tiled(T, d);
  std::vector<float> L(T);
  attn::scaled_dot_product_attention(Q, K, V, {.out = Y_tiled.view(), .logsumexp = L});

  // The bound. Each path forms each score within γ_{d+2}·M of the exact one (d products and the
  // scale, summed in any order), which moves every weight by a factor within e^{±2γM}; its
  // softmax adds at most ε(4.1·Smax + (n + 9)/2) on the log scale, the one pass another
  // ε((r + 2)·Smax + 2r + 4) for r ≤ n − 1 rescales (docs/errors.md); the weighted sum of n
  // values adds (n + 2)ε relative to Σ α_j |v_j|. Two paths: twice that, times max |v|.
  const double eps = std::numeric_limits<float>::epsilon(), u = eps / 2, n = static_cast<double>(T);
  const double gamma = (d + 2) * u / (1 - (d + 2) * u), r = n - 1;
  const double rho =
      2 * gamma * M + eps * (4.1 * Smax + (n + 9) / 2) + eps * ((r + 2) * Smax + 2 * r + 4);
  double vmax = 0, worst = 0;
  for (std::size_t i = 0; i < V.size(); ++i)
    vmax = std::max(vmax, std::abs(static_cast<double>(V.data()[i])));
  for (std::size_t i = 0; i < Y_tiled.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(Y_tiled.data()[i]) - Y_stored.data()[i]));
  const double bound = 2 * (std::expm1(rho) + (n + 2) * eps) * vmax;

  const double stored_mib = static_cast<double>(A.size() * sizeof(float)) / MiB;
  const double tiled_kib =
      static_cast<double>((Y_tiled.size() + L.size()) * sizeof(float)) / 1024.0;
  std::printf("One head at T = n = 1024, d = 64, float, computed both ways:\n"
              "  stored map:  the %s MiB map in memory, then Y = A V\n"
              "  tiled:       writes only Y and L, %s KiB; the map is never formed\n"
              "  largest |Y_tiled − Y_stored| = %.1e, within the rounding bound %.1e\n",
              check.print("stored map MiB", stored_mib, "4", 0).c_str(),
              check.print("tiled output KiB", tiled_kib, w12::tiled_output_kib, 0).c_str(), worst,
              bound);
  check.claim(worst <= bound,
              "the tiled output equals the stored-map output within the rounding bound");

  // Asking the kernel for the map as well changes nothing in Y: the same pass writes both.
  attn::Matrix<float> Y_with_map(T, d), A_kernel(T, T);
  attn::scaled_dot_product_attention(Q, K, V,
                                     {.out = Y_with_map.view(), .weights = A_kernel.view()});
  check.claim(Y_with_map == Y_tiled, "asking for the map leaves Y as it was, bit for bit");
  return check.finish();
}
