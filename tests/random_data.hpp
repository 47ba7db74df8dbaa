#pragma once
// Random inputs for the tests, and bit-for-bit comparison: one home for what the attention,
// heads, cache and bias suites each wrote for themselves.
#include <algorithm>
#include <cstddef>
#include <random>

#include "attn/matrix.hpp"

namespace attn_test {

/// A rows × cols matrix of N(0, scale²) numbers (drawn in double, rounded to T).
template <class T>
attn::Matrix<T> random_matrix(std::size_t r, std::size_t c, std::mt19937_64& rng, double scale = 1) {
  std::normal_distribution<double> normal(0, scale);
  attn::Matrix<T> m(r, c);
  for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(normal(rng));
  return m;
}

/// The same shape and the same numbers, NaN matching NaN (−0 equals 0 here, as ==).
template <class T>
bool same_bits(const attn::Matrix<T>& a, const attn::Matrix<T>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::equal(a.data(), a.data() + a.size(), b.data(), [](T x, T y) { return x == y || (x != x && y != y); });
}

}  // namespace attn_test
