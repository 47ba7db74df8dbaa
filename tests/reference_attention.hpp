#pragma once
// One head of softmax attention in long double, written from the formula (no code of attn's):
// the reference the block's and the model's tests build their heads on.
//
//   z_tj = q_t·k_j / √d_k − m·(t − j)  (m: ALiBi's slope, 0 for none),  j < t + 1 when causal,
//   Z_t = Σ_j softmax(z_t)_j v_j.
//
// Q, K, V and Z are row-major with `stride` numbers a row; the head's d_k numbers start at
// column `col` of each (head i: col = i·d_k).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace reference {

inline void attention_head(const long double* Q, const long double* K, const long double* V, long double* Z,
                           std::size_t stride, std::size_t col, std::size_t tq, std::size_t nk, std::size_t dk,
                           bool causal, long double slope = 0) {
  std::vector<long double> z(nk);
  for (std::size_t t = 0; t < tq; ++t) {
    const std::size_t seen = causal ? std::min(t + 1, nk) : nk;
    long double top = -1e4000L, sum = 0;
    for (std::size_t j = 0; j < seen; ++j) {
      long double s = 0;
      for (std::size_t c = 0; c < dk; ++c) s += Q[t * stride + col + c] * K[j * stride + col + c];
      z[j] = s / std::sqrt(static_cast<long double>(dk)) -
             slope * (static_cast<long double>(t) - static_cast<long double>(j));
      top = std::max(top, z[j]);
    }
    for (std::size_t j = 0; j < seen; ++j) sum += z[j] = std::exp(z[j] - top);
    for (std::size_t c = 0; c < dk; ++c) {
      long double o = 0;
      for (std::size_t j = 0; j < seen; ++j) o += z[j] / sum * V[j * stride + col + c];
      Z[t * stride + col + c] = o;
    }
  }
}

}  // namespace reference
