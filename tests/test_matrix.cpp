// Matrix and MatrixView: owned and borrowed row-major matrices, their shape checks and
// messages, and subrows.
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
