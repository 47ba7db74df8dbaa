// Must NOT compile: a column-major Eigen matrix (Eigen's default) as an output. Its rows are not
// contiguous, so attn cannot write them without a copy, and writing its memory as rows would
// store the transpose; the static_assert says to use a row-major matrix (the CTest test
// compile_fail_eigen_column_major_output, built only where Eigen 3 is found). The control, with
// an Eigen::RowMajor output, compiles.

#include <Eigen/Dense>

#include <attn/attn.hpp>

int main() {
  const Eigen::MatrixXd X = Eigen::MatrixXd::Identity(2, 2);  // an input: either order is read
#if defined(ATTN_COMPILE_FAIL)
  Eigen::MatrixXd Y(2, 2);
#else
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> Y(2, 2);
#endif
  attn::multi_head_cache<double> cache;
  attn::multi_head_attention(X, {.W_Q = X, .W_K = X, .W_V = X}, {.out = Y}, cache);
  return Y(0, 0) > 0 ? 0 : 1;
}
