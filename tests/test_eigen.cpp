// attn with Eigen's own types, without the library knowing Eigen (built only where Eigen 3 is
// found: tests/CMakeLists.txt). docs/types-and-views.md, "Eigen", shows these one-liners.
//   - an Eigen vector is a query, a context, weights: it has data() and random-access iterators
//     (Eigen 3.4's do not say they are contiguous, so attn checks their step when it borrows one);
//   - notes as the columns of a d × n matrix (Eigen's column-major default): a row-major view;
//   - notes as the rows of an n × d column-major matrix: attn::column_major;
//   - notes in a row-major Eigen matrix: a MatrixView with its outer stride.
#include <Eigen/Dense>

#include <attn/attn.hpp>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "attn_catch.hpp"

static_assert(attn::vector_like<Eigen::VectorXf> && attn::vector_like<const Eigen::VectorXd&>);
static_assert(attn::vector_like<Eigen::Vector3d> && attn::mutable_vector_like<Eigen::VectorXf&>);
static_assert(!std::ranges::contiguous_range<Eigen::VectorXf>);  // why attn checks the step

TEST_CASE("eigen: vectors and every layout of notes, without a copy by the caller", "[eigen]") {
  const std::size_t n = 50, d = 6;
  Eigen::MatrixXf by_column(d, n);  // note j is column j (column-major: the notes row-major)
  Eigen::MatrixXf by_row(n, d);     // note j is row j of a column-major matrix
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> row_major(n, d);
  std::vector<float> plain(n * d);
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < d; ++i) {
      const float x = static_cast<float>(std::sin(0.3 * static_cast<double>(j * d + i)));
      const auto r = static_cast<Eigen::Index>(j), c = static_cast<Eigen::Index>(i);
      by_column(c, r) = by_row(r, c) = row_major(r, c) = plain[j * d + i] = x;
    }
  Eigen::VectorXf q(static_cast<Eigen::Index>(d));
  for (Eigen::Index i = 0; i < q.size(); ++i) q(i) = 0.25f * static_cast<float>(i) - 0.5f;
  const std::vector<float> q_plain(q.data(), q.data() + q.size());
  const attn::MatrixView<const float> ref_notes(plain.data(), n, d);
  const auto ref = attn::attend(q_plain, ref_notes, attn::dot, {.beta = 2});

  const auto a = attn::attend(q, attn::MatrixView<const float>(by_column.data(), n, d, static_cast<std::size_t>(by_column.outerStride())),
                              attn::dot, {.beta = 2});
  const auto b = attn::attend(q, attn::column_major(by_row.data(), n, d, static_cast<std::size_t>(by_row.outerStride())),
                              attn::dot, {.beta = 2});
  const auto c = attn::attend(q, attn::MatrixView<const float>(row_major.data(), n, d, static_cast<std::size_t>(row_major.outerStride())),
                              attn::dot, {.beta = 2});
  for (const auto* r : {&a, &b, &c}) {
    CHECK(r->weights == ref.weights);
    CHECK(r->context == ref.context);
  }
  // Eigen vectors as outputs
  Eigen::VectorXf scores(static_cast<Eigen::Index>(n)), weights(static_cast<Eigen::Index>(n)),
      context(static_cast<Eigen::Index>(d));
  attn::attend(q, ref_notes, attn::dot, scores, weights, context, {.beta = 2});
  CHECK(std::memcmp(context.data(), ref.context.data(), d * sizeof(float)) == 0);
  // a row of a column-major matrix steps by its column length: refused, not read as contiguous
  const auto refusal = [](auto&& f) {
    try {
      f();
    } catch (const attn::dimension_error& e) {
      return std::string(e.what());
    }
    return std::string("no throw");
  };
  CHECK(refusal([&] { (void)attn::attend(by_row.row(3), ref_notes, attn::dot); }).find("not contiguous") !=
        std::string::npos);
  CHECK(refusal([&] { (void)attn::dot(by_row.row(3), by_row.row(4)); }).find("not contiguous") != std::string::npos);
  // a segment, and a column of a column-major matrix, are contiguous
  CHECK(attn::dot(q.head(3), by_column.col(0).head(3)) ==
        q(0) * by_column(0, 0) + q(1) * by_column(1, 0) + q(2) * by_column(2, 0));
}
