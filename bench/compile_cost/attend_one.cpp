// Compile-cost probe (bench/compile_cost.sh): a translation unit holding one dynamic
// attn::attend call, float, scaled_dot, writing scores, weights and context into caller
// buffers. Not built by CMake; attend_eigen.cpp is the same attention written with Eigen.
#include <span>
#include <vector>

#include "attn/attention.hpp"

void run(std::span<const float> q, attn::MatrixView<const float> keys,
         attn::MatrixView<const float> values, std::span<float> out) {
  std::vector<float> scores(keys.rows()), weights(keys.rows());
  attn::attend(q, keys, values, attn::scaled_dot, std::span<float>(scores),
               std::span<float>(weights), out);
}
