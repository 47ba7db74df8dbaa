// Matrix and MatrixView: owned and borrowed row-major matrices, their shape checks and
// messages, and subrows.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"

using attn::dynamic;
using attn::Matrix;
using attn::MatrixView;

TEST_CASE("Matrix and MatrixView", "[types]") {
  constexpr Matrix<double, 2, 3> m{{1, 2, 3}, {4, 5, 6}};
  static_assert(m.rows() == 2 && m.cols() == 3 && m(1, 2) == 6);
  Matrix<double> d{{1, 2}, {3, 4}, {5, 6}};
  REQUIRE(d.rows() == 3);
  REQUIRE(d.cols() == 2);
  REQUIRE(d.row(2)[1] == 6);
  MatrixView<const double, 3, 2> fixed_view(d.data());
  REQUIRE(fixed_view(2, 0) == 5);
  MatrixView<const double> widened = fixed_view;  // fixed → dynamic, mutable → const
  REQUIRE(widened.rows() == 3);
  REQUIRE(Matrix<double>(widened) == d);
}

namespace {
/// The what() of the dimension_error f throws, or "no throw".
template <class F>
std::string what_thrown(F&& f) {
  try {
    f();
  } catch (const attn::dimension_error& e) {
    return std::string(e.what());
  }
  return std::string("no throw");
}
}  // namespace

TEST_CASE("Malformed views and shapes throw dimension_error naming the sizes", "[types][errors]") {
  std::vector<double> buf(12);
  auto has = [](const std::string& s, const char* part) {
    return s.find(part) != std::string::npos;
  };
  const std::string stride = what_thrown([&] { MatrixView<double>(buf.data(), 3, 4, 2); });
  CHECK(has(stride, "row stride 2 is smaller than the row length 4"));
  const std::string null = what_thrown([] { MatrixView<double>(nullptr, 3, 4); });
  CHECK(has(null, "null data for a 3x4 matrix"));
  const std::string rows = what_thrown([&] { MatrixView<double, 2, 4>(buf.data(), 3, 4); });
  CHECK(has(rows, "rows is 3 but fixed rows is 2"));
  const std::string ragged = what_thrown([] { Matrix<double>{{1, 2}, {3}}; });
  CHECK(has(ragged, "row length is 1 but first row length is 2"));
  const std::vector<double> a{1, 2, 3};
  const std::vector<double> b{1, 2, 3, 4};
  const std::string dot = what_thrown([&] { (void)attn::dot(a, b); });
  CHECK(dot == "attn::dot: query size is 3 but note size is 4");
  // An empty view with null data is fine: nothing will be read.
  REQUIRE_NOTHROW(MatrixView<double>(nullptr, 0, 4));
}

// subrows: a chunk of rows borrows the same numbers with the same stride, keeps a fixed column
// extent, may be empty at either end, and throws naming the rows when they fall outside.
static_assert(std::same_as<decltype(std::declval<const Matrix<float, 4, 3>&>().subrows(1, 2)),
                           MatrixView<const float, dynamic, 3>>);
static_assert(std::same_as<decltype(std::declval<MatrixView<double>&>().subrows(0, 1)),
                           MatrixView<double, dynamic, dynamic>>);
static_assert([] {
  const Matrix<double, 3, 2> m{{1, 2}, {3, 4}, {5, 6}};
  const auto tail = m.subrows(1, 2);
  return tail.rows() == 2 && tail(0, 0) == 3 && tail(1, 1) == 6;
}());

TEST_CASE("subrows: a chunk of rows borrows the same numbers", "[types]") {
  std::vector<float> buf(4 * 4 + 3);  // 5 rows of 3 numbers, 4 apart: the last row ends the buffer
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i);
  const MatrixView<float> all(buf.data(), 5, 3, 4);
  const auto mid = all.subrows(1, 3);
  REQUIRE(mid.rows() == 3);
  REQUIRE(mid.cols() == 3);
  REQUIRE(mid.row_stride() == 4);
  REQUIRE(mid.data() == buf.data() + 4);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) REQUIRE(&mid(i, j) == &all(i + 1, j));
  mid(0, 0) = -1;  // a view of mutable numbers writes through
  REQUIRE(buf[4] == -1);
  REQUIRE(all.subrows(0, 5).data() == all.data());
  // Empty chunks, at the start and at the end: no rows, the same columns.
  REQUIRE(all.subrows(0, 0).rows() == 0);
  REQUIRE(all.subrows(5, 0).rows() == 0);
  REQUIRE(all.subrows(5, 0).cols() == 3);
  // An owned matrix, dynamic and fixed.
  Matrix<double> m(4, 2, 1.5);
  m(3, 1) = 7;
  REQUIRE(m.subrows(3, 1)(0, 1) == 7);
  const Matrix<double, 2, 2> fixed{{1, 2}, {3, 4}};
  REQUIRE(fixed.subrows(1, 1)(0, 0) == 3);

  CHECK(what_thrown([&] { (void)all.subrows(3, 3); }) ==
        "attn::MatrixView::subrows: rows 3 to 6 (exclusive) are not within the 5 rows");
  CHECK(what_thrown([&] { (void)all.subrows(6, 0); }) ==
        "attn::MatrixView::subrows: rows 6 to 6 (exclusive) are not within the 5 rows");
  CHECK(
      what_thrown([&] { (void)all.subrows(1, std::numeric_limits<std::size_t>::max()); }) ==
      "attn::MatrixView::subrows: rows 1 to beyond SIZE_MAX (exclusive) are not within the 5 rows");
  CHECK(what_thrown([&] { (void)m.subrows(2, 3); }) ==
        "attn::MatrixView::subrows: rows 2 to 5 (exclusive) are not within the 4 rows");
}

// Outputs: a const MatrixView of non-const numbers writes, as a const std::span<T> does; a
// const Matrix and a view of const numbers do not.
template <class S, class W, class C>
constexpr bool can_align_into = requires(const Matrix<double>& q, S s, W w, C c) {
  attn::align(q, q, attn::dot, s, w, c);
};
static_assert(can_align_into<const MatrixView<double>&, const MatrixView<double>, const MatrixView<double>&&>);
static_assert(can_align_into<Matrix<double>&, MatrixView<double>&, MatrixView<double>>);
static_assert(!can_align_into<const Matrix<double>&, MatrixView<double>, MatrixView<double>>);
static_assert(!can_align_into<MatrixView<const double>, MatrixView<double>, MatrixView<double>>);
static_assert(!can_align_into<attn::StridedMatrixView<double>, MatrixView<double>, MatrixView<double>>);
static_assert(attn::mutable_matrix_like<const MatrixView<double>&>);
static_assert(!attn::mutable_matrix_like<const Matrix<double>&>);

TEST_CASE("A const MatrixView is an output, as a const std::span is", "[types]") {
  const Matrix<double> notes{{1, 0}, {0, 1}, {1, 1}};
  const Matrix<double> queries{{1, 2}, {0.5, -1}};
  Matrix<double> s(2, 3), w(2, 3), c(2, 2), j(2, 2);
  const MatrixView<double> sv = s.view(), wv = w.view(), cv = c.view(), jv = j.view();
  attn::align(queries, notes, attn::dot, sv, wv, cv);
  const auto ref = attn::align(queries, notes, attn::dot);
  CHECK(s == ref.scores);
  CHECK(w == ref.weights);
  CHECK(c == ref.contexts);
  attn::jacobian_note(std::vector<double>{1, 2}, notes, attn::dot, 0, jv);
  CHECK(j == attn::jacobian_note(std::vector<double>{1, 2}, notes, attn::dot, 0));
}

// Other layouts: notes stored column-major (Eigen's and BLAS's default) or as the transpose of a
// row-major matrix are viewed without the caller copying them; attn reads them through one
// row-major copy, so every call gives the row-major numbers to the bit.
TEST_CASE("Column-major and transposed notes give the row-major numbers to the bit", "[types][layout]") {
  for (const std::size_t n : {3u, 40u, 300u}) {  // the small path, the one pass, several blocks
    const std::size_t d = 5, ld = n + 3;          // a leading dimension with padding
    std::vector<double> row_major(n * d), column_major(ld * d, std::nan("")), q(d), g(d);
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < d; ++i) {
        row_major[j * d + i] = std::sin(0.37 * static_cast<double>(j * d + i) + 1);
        column_major[j + i * ld] = row_major[j * d + i];  // note j is row j of an n×d column-major
      }
    for (std::size_t i = 0; i < d; ++i) {
      q[i] = 0.5 * std::cos(static_cast<double>(i));
      g[i] = 0.25 * static_cast<double>(i) - 0.5;
    }
    const MatrixView<const double> H(row_major.data(), n, d);
    const auto C = attn::column_major(static_cast<const double*>(column_major.data()), n, d, ld);
    // the transpose of a row-major d × ld matrix whose columns are the notes: the same numbers
    const auto T = attn::transposed(MatrixView<const double>(column_major.data(), d, n, ld));
    INFO("n = " << n);
    CHECK((C.rows() == n && C.cols() == d && C(2, 3) == H(2, 3) && T(2, 3) == H(2, 3)));
    const auto ref = attn::attend(q, H, attn::dot, {.beta = 1.5});
    for (const auto& r : {attn::attend(q, C, attn::dot, {.beta = 1.5}), attn::attend(q, T, attn::dot, {.beta = 1.5})}) {
      CHECK(r.scores == ref.scores);
      CHECK(r.weights == ref.weights);
      CHECK(r.context == ref.context);
    }
    // keys and values each strided: each copied, as keys and values in two buffers
    const Matrix<double> values_copy(H);
    CHECK(attn::attend(q, C, C, attn::dot).context == attn::attend(q, H, values_copy, attn::dot).context);
    std::vector<double> s(n), w(n), c(d);
    attn::attend(q, C, attn::scaled_dot, s, w, c);
    const auto sref = attn::attend(q, H, attn::scaled_dot);
    CHECK((std::equal(s.begin(), s.end(), sref.scores.begin()) && std::equal(c.begin(), c.end(), sref.context.begin())));
    const Matrix<double> Wg(d, d, 0.125);
    const attn::general<double> gen(Wg);
    CHECK(attn::attend(q, C, gen).context == attn::attend(q, H, gen).context);
    // many queries, stored column-major too
    Matrix<double> Q(2, d);
    std::vector<double> Qc(2 * d);
    for (std::size_t t = 0; t < 2; ++t)
      for (std::size_t i = 0; i < d; ++i) Qc[t + 2 * i] = Q(t, i) = 0.3 * static_cast<double>(t + i) - 0.4;
    const auto QC = attn::column_major(static_cast<const double*>(Qc.data()), 2, d);
    const auto map = attn::align(QC, C, attn::dot);
    const auto map_ref = attn::align(Q, H, attn::dot);
    CHECK(map.weights == map_ref.weights);
    CHECK(map.contexts == map_ref.contexts);
    // backward, Jacobians, split attention
    const auto b = attn::backward(q, C, attn::dot, g);
    const auto b_ref = attn::backward(q, H, attn::dot, g);
    CHECK(b.notes == b_ref.notes);
    CHECK(b.query == b_ref.query);
    CHECK(attn::jacobian_note(q, C, attn::dot, 1) == attn::jacobian_note(q, H, attn::dot, 1));
    CHECK(attn::jacobian_query(q, C, attn::dot) == attn::jacobian_query(q, H, attn::dot));
    CHECK(attn::finish(attn::attend_partial(q, C, attn::dot)) == attn::finish(attn::attend_partial(q, H, attn::dot)));
  }
}

TEST_CASE("Strided views: shapes are checked, and they are inputs only", "[types][layout][errors]") {
  std::vector<double> buf(12);
  CHECK(what_thrown([&] { (void)attn::column_major(buf.data(), 4, 3, 2); }) ==
        "attn::column_major: leading dimension 2 is smaller than the column length 4");
  CHECK(what_thrown([] { attn::StridedMatrixView<double>(nullptr, 3, 4, 1, 3); }) ==
        "attn::StridedMatrixView: null data for a 3x4 matrix");
  CHECK(what_thrown([&] { attn::StridedMatrixView<double, 2, 4>(buf.data(), 3, 4, 1, 3); }) ==
        "attn::StridedMatrixView: rows is 3 but fixed rows is 2");
  // fixed extents: the row-major copy is inline, and constant evaluation reads it too
  STATIC_REQUIRE([] {
    const double h[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};  // the identity, column-major or not
    const attn::Vector<double, 3> q{0, 0.5, 2};
    const auto r = attn::attend(q, attn::column_major<3, 3>(h, 3, 3), attn::dot);
    return r.weights[2] > r.weights[1] && r.weights[1] > r.weights[0];
  }());
}

TEST_CASE("subcols: a block of columns (a head) of a view, checked", "[matrix]") {
  attn::Matrix<double> m(3, 6);
  for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<double>(i);
  const auto head1 = m.subcols(2, 2);  // head 1 of d = 2
  REQUIRE(head1.rows() == 3);
  REQUIRE(head1.cols() == 2);
  REQUIRE(head1.row_stride() == 6);
  REQUIRE(head1(2, 1) == m(2, 3));
  const attn::Matrix<double>& cm = m;
  REQUIRE(cm.subcols(4, 2)(1, 0) == m(1, 4));
  REQUIRE(m.view().subcols(6, 0).cols() == 0);
  REQUIRE_THROWS_WITH(m.subcols(5, 2), "attn::MatrixView::subcols: columns 5 to 7 (exclusive) are not within the 6 columns");
  REQUIRE_THROWS_WITH(m.subcols(1, static_cast<std::size_t>(-1)),
                      "attn::MatrixView::subcols: columns 1 to beyond SIZE_MAX (exclusive) are not within the 6 columns");
}
