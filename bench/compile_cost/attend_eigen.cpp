// Compile-cost probe (bench/compile_cost.sh): attend_one.cpp's attention written with Eigen:
// scores = K q / sqrt(d), a stable softmax (the max subtracted), context = Vᵀ w. Row-major
// keys and values with a row stride, as attn::MatrixView has, passed as pointers so that
// this unit includes no attn header.
#include <cmath>
#include <cstddef>
#include <span>

#include <Eigen/Core>

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Notes = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;

void run(std::span<const float> q, const float* keys, const float* values, std::size_t n,
         std::size_t row_stride, std::span<float> out) {
  const auto d = static_cast<Eigen::Index>(q.size());
  const auto dv = static_cast<Eigen::Index>(out.size());
  const auto rows = static_cast<Eigen::Index>(n);
  const Eigen::OuterStride<> stride(static_cast<Eigen::Index>(row_stride));
  Notes k(keys, rows, d, stride);
  Notes v(values, rows, dv, stride);
  Eigen::Map<const Eigen::VectorXf> qv(q.data(), d);
  Eigen::VectorXf scores = (k * qv) / std::sqrt(static_cast<float>(d));
  Eigen::VectorXf weights = (scores.array() - scores.maxCoeff()).exp().matrix();
  weights /= weights.sum();
  Eigen::Map<Eigen::VectorXf>(out.data(), dv) = v.transpose() * weights;
}
