// attn with Eigen's own types, without the library knowing Eigen (built only where Eigen 3 is
// found: tests/CMakeLists.txt). docs/types-and-views.md, "Eigen", shows these one-liners.
//   - an Eigen vector is a query, a context, weights: it has data() and random-access iterators
//     (Eigen 3.4's do not say they are contiguous, so attn checks their step when it borrows one);
//   - notes as the columns of a d × n matrix (Eigen's column-major default): a row-major view;
//   - notes as the rows of an n × d column-major matrix: attn::column_major;
//   - notes in a row-major Eigen matrix: a MatrixView with its outer stride;
//   - Eigen matrices, Maps and Blocks of either order passed as they are: X, notes and dL/dY
//     (a column-major one through a row-major copy), weights and their gradients where they
//     lie, row-major outputs (a column-major output does not compile: tests/compile_fail/).
#include <Eigen/Dense>

#include <attn/attn.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attn_catch.hpp"
#include "doc_snippets.hpp"

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

// ---------------------------------------------------------------------------------------------
// Eigen matrices as X, weights and outputs (issue 28): either storage order, never transposed
// ---------------------------------------------------------------------------------------------

using RowMajorXd = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
static_assert(attn::matrix_like<Eigen::MatrixXd> && attn::matrix_like<RowMajorXd>);
static_assert(attn::matrix_like<Eigen::Map<const Eigen::MatrixXf>> && attn::matrix_like<Eigen::Map<RowMajorXd>>);
static_assert(attn::matrix_like<decltype(std::declval<RowMajorXd&>().topRows(2))>);
static_assert(!attn::matrix_like<Eigen::VectorXd> && !attn::matrix_like<Eigen::RowVectorXd>);  // vectors
static_assert(attn::mutable_matrix_like<RowMajorXd&> && !attn::mutable_matrix_like<const RowMajorXd&>);
static_assert(attn::detail::is_strided<Eigen::MatrixXd> && !attn::detail::is_strided<RowMajorXd>);
// a column-major matrix as an output refuses at compile time (tests/compile_fail/eigen_column_major_output.cpp)

TEST_CASE("eigen: matrices of either order as X, weights and outputs give the row-major numbers", "[eigen][layouts]") {
  const Eigen::Index T = 6, E = 8, B = 2;
  Eigen::MatrixXd X = Eigen::MatrixXd::Zero(T, E), WQ(E, E), WK(E, E), WV(E, E), WO(E, E);  // column-major
  for (Eigen::Index i = 0; i < T; ++i)
    for (Eigen::Index j = 0; j < E; ++j) X(i, j) = std::sin(0.7 * static_cast<double>(i * E + j));
  for (auto* W : {&WQ, &WK, &WV, &WO})
    for (Eigen::Index i = 0; i < E; ++i)
      for (Eigen::Index j = 0; j < E; ++j)
        (*W)(i, j) = 0.5 * std::cos(0.3 * static_cast<double>(i * E + j) + static_cast<double>(W - &WQ));
  // the reference: attn's own row-major matrices holding the same numbers
  const auto copy = [](const Eigen::MatrixXd& m) {
    attn::Matrix<double> r(static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols()));
    for (std::size_t i = 0; i < r.rows(); ++i)
      for (std::size_t j = 0; j < r.cols(); ++j) r(i, j) = m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j));
    return r;
  };
  const attn::Matrix<double> x = copy(X), wq = copy(WQ), wk = copy(WK), wv = copy(WV), wo = copy(WO);
  const attn::options opt{.causal = true};
  const auto want = attn::multi_head_attention(
      x, {.W_Q = wq.view(), .W_K = wk.view(), .W_V = wv.view(), .W_O = wo.view(), .heads = 2}, opt, B);

  // row-major Eigen everywhere: the same memory as attn's, the same bits
  const RowMajorXd Xr = X, WQr = WQ, WKr = WK, WVr = WV, WOr = WO;
  RowMajorXd Y(T, E);
  attn::multi_head_cache<double> cache;
  attn::multi_head_attention(Xr, {.W_Q = WQr, .W_K = WKr, .W_V = WVr, .W_O = WOr, .heads = 2}, {.out = Y}, cache, opt, B);
  for (Eigen::Index i = 0; i < T; ++i)
    for (Eigen::Index o = 0; o < E; ++o) REQUIRE(Y(i, o) == want.out(static_cast<std::size_t>(i), static_cast<std::size_t>(o)));

  // column-major Eigen (the default): X through one row-major copy, every weight read as its
  // columns (PyTorch's layout): the numbers of attn::column_major on the same memory, bit for
  // bit, and within the forward's 200 ε of max |Y| of the row-major ones (other sums' order)
  const attn::multi_head_parameters<double> cols{.W_Q = WQ, .W_K = WK, .W_V = WV, .W_O = WO, .heads = 2};
  const auto cm = [](const Eigen::MatrixXd& m) {
    return attn::column_major(m.data(), static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols()));
  };
  attn::multi_head_cache<double> cache_c;
  RowMajorXd Yc(T, E);
  attn::multi_head_attention(X, cols, {.out = Yc}, cache_c, opt, B);
  const auto by_view = attn::multi_head_attention(
      x, {.W_Q = cm(WQ), .W_K = cm(WK), .W_V = cm(WV), .W_O = cm(WO), .heads = 2}, opt, B);
  double top = 1;
  for (std::size_t k = 0; k < want.out.size(); ++k) top = std::max(top, std::abs(want.out.data()[k]));
  for (Eigen::Index i = 0; i < T; ++i)
    for (Eigen::Index o = 0; o < E; ++o) {
      const auto r = static_cast<std::size_t>(i), c = static_cast<std::size_t>(o);
      REQUIRE(Yc(i, o) == by_view.out(r, c));
      REQUIRE(std::abs(Yc(i, o) - want.out(r, c)) <= 200 * std::numeric_limits<double>::epsilon() * top);
    }

  // PyTorch's out × in weight held row-major: its Eigen transpose() is attn's W, read where it lies
  const RowMajorXd torch_WO = WO.transpose();
  attn::multi_head_parameters<double> from_torch = cols;
  from_torch.W_O = torch_WO.transpose();
  RowMajorXd Yt(T, E);
  attn::multi_head_attention(X, from_torch, {.out = Yt}, cache_c, opt, B);
  REQUIRE(Yt == Yc);

  // gradients: dX into a row-major Eigen matrix, dW_Q into a column-major one (its W's layout)
  // and into a Map of row-major memory; dY a column-major Eigen matrix
  Eigen::MatrixXd dY(T, E);
  for (Eigen::Index i = 0; i < T; ++i)
    for (Eigen::Index o = 0; o < E; ++o) dY(i, o) = std::cos(static_cast<double>(i + 2 * o));
  const attn::Matrix<double> dy = copy(dY);
  attn::Matrix<double> dX_want(static_cast<std::size_t>(T), static_cast<std::size_t>(E)),
      dWQ_want(static_cast<std::size_t>(E), static_cast<std::size_t>(E));
  attn::multi_head_attention_backward(x, cols, cache_c, dy, {.inputs = dX_want.view(), .W_Q = dWQ_want.view()}, opt, B);
  RowMajorXd dX(T, E);
  Eigen::MatrixXd dWQ(E, E);
  std::vector<double> dWQ_rows(static_cast<std::size_t>(E * E));
  attn::multi_head_attention_backward(X, cols, cache_c, dY, {.inputs = dX, .W_Q = dWQ}, opt, B);
  attn::multi_head_attention_backward(X, cols, cache_c, dY, {.W_Q = Eigen::Map<RowMajorXd>(dWQ_rows.data(), E, E)}, opt, B);
  for (Eigen::Index i = 0; i < E; ++i)
    for (Eigen::Index o = 0; o < E; ++o) {
      const auto r = static_cast<std::size_t>(i), c = static_cast<std::size_t>(o);
      REQUIRE(dWQ(i, o) == dWQ_want(r, c));
      REQUIRE(dWQ_rows[r * static_cast<std::size_t>(E) + c] == dWQ_want(r, c));
    }
  for (Eigen::Index t = 0; t < T; ++t)
    for (Eigen::Index i = 0; i < E; ++i)
      REQUIRE(dX(t, i) == dX_want(static_cast<std::size_t>(t), static_cast<std::size_t>(i)));

  // notes of either order passed to attend as they are: the same matrix, the row-major bits
  const Eigen::VectorXd q = X.row(1).transpose();
  const auto a = attn::attend(q, X, attn::dot), b = attn::attend(q, Xr, attn::dot);
  const auto c = attn::attend(q, x, attn::dot);
  REQUIRE(a.weights == c.weights);
  REQUIRE(b.context == c.context);
}

TEST_CASE("eigen: docs/types-and-views.md's matrices, verbatim", "[eigen][docs]") {
  REQUIRE(attn_test::quoted_in(__FILE__, "docs/types-and-views.md", "  // types-and-views:begin\n",
                               "  // types-and-views:end"));
  // types-and-views:begin
using RowMajorXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
const Eigen::MatrixXf X = Eigen::MatrixXf::Random(5, 8);  // column-major: one row-major copy
const Eigen::MatrixXf W_Q = Eigen::MatrixXf::Random(8, 8), W_K = Eigen::MatrixXf::Random(8, 8),
                      W_V = Eigen::MatrixXf::Random(8, 8);  // d_in × d_out: read as they lie
const RowMajorXf out_proj = RowMajorXf::Random(8, 8);       // PyTorch's out × in, row-major
const attn::multi_head_parameters<float> p{
    .W_Q = W_Q, .W_K = W_K, .W_V = W_V, .W_O = out_proj.transpose(), .heads = 2};
RowMajorXf Y(5, 8);  // an output: row-major (an Eigen::MatrixXf here does not compile)
attn::multi_head_cache<float> cache;
attn::multi_head_attention(X, p, {.out = Y}, cache);
const Eigen::MatrixXf dY = Eigen::MatrixXf::Ones(5, 8);
Eigen::MatrixXf dW_Q(8, 8);  // a gradient in its W's layout, column-major
RowMajorXf dX(5, 8);
attn::multi_head_attention_backward(X, p, cache, dY, {.inputs = dX, .W_Q = dW_Q});
  // types-and-views:end
  REQUIRE(std::isfinite(Y(4, 7)));
  REQUIRE(std::isfinite(dW_Q(7, 7)));
}
