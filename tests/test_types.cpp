// Vectors, matrices and views: storage, borrowing without copies, and size errors.
#include <array>
#include <concepts>
#include <cstdint>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"

using attn::dynamic;
using attn::Matrix;
using attn::MatrixView;
using attn::Vector;

// Fixed sizes live inline; dynamic ones hold a std::vector.
static_assert(sizeof(Vector<double, 3>) == 3 * sizeof(double));
static_assert(sizeof(Matrix<float, 2, 3>) <= 6 * sizeof(float) + 2 * sizeof(std::size_t));
static_assert(attn::extent_of<Vector<double, 3>> == 3);
static_assert(attn::extent_of<std::array<float, 5>> == 5);
static_assert(attn::extent_of<double[4]> == 4);
static_assert(attn::extent_of<std::span<const double, 2>> == 2);
static_assert(attn::extent_of<std::vector<double>> == dynamic);
static_assert(attn::extent_of<std::span<const double>> == dynamic);

// The rule that fixed sizes follow, and that a mismatch is not even a candidate.
static_assert(attn::compatible_extents<3, 3> && attn::compatible_extents<3, dynamic> &&
              attn::compatible_extents<dynamic, 4> && !attn::compatible_extents<3, 4>);
// Compile-time probes: a call that must not compile is a `requires` that is false.
template <class A, class B>
constexpr bool can_dot = requires(A a, B b) { attn::dot(a, b); };
template <class Q, class N, class S>
constexpr bool can_attend = requires(Q q, N n, S s) { attn::attend(q, n, s); };
template <class Q, class K, class V>
constexpr bool can_attend_kv = requires(Q q, K k, V v) { attn::attend(q, k, v, attn::dot); };
template <class X, class Y>
constexpr bool can_softmax_into = requires(X x, Y y) { attn::softmax(x, y); };

static_assert(can_dot<Vector<double, 3>, Vector<double, 3>>);
static_assert(!can_dot<Vector<double, 3>, Vector<double, 4>>);
static_assert(!can_dot<std::array<float, 2>, std::array<float, 5>>);
static_assert(can_dot<std::array<float, 2>, std::vector<float>>);  // checked at run time
static_assert(!can_dot<Vector<float, 3>, Vector<double, 3>>);       // no silent mixing of types
static_assert(can_attend<Vector<double, 3>, Matrix<double, 2, 3>, attn::dot_score>);
static_assert(!can_attend<Vector<double, 3>, Matrix<double, 2, 4>, attn::dot_score>);
static_assert(!can_attend<Vector<double, 3>, Matrix<double, 2, 4>, attn::scaled_dot_score>);
// general{W}: q must have W's rows and the notes W's columns (when both are fixed).
static_assert(can_attend<Vector<double, 2>, Matrix<double, 5, 3>, attn::general<double, 2, 3>>);
static_assert(!can_attend<Vector<double, 3>, Matrix<double, 5, 3>, attn::general<double, 2, 3>>);
static_assert(!can_attend<Vector<double, 2>, Matrix<double, 5, 4>, attn::general<double, 2, 3>>);
static_assert(!can_attend<Vector<double, 2>, Matrix<double, 5, 4>, attn::additive<double, 7, 3, 2>>);
// Keys and values must agree on the number of notes.
static_assert(can_attend_kv<Vector<double, 2>, Matrix<double, 5, 2>, Matrix<double, 5, 7>>);
static_assert(!can_attend_kv<Vector<double, 2>, Matrix<double, 5, 2>, Matrix<double, 4, 7>>);
// A temporary W would dangle: general refuses it.
static_assert(!std::is_constructible_v<attn::general<double>, Matrix<double>&&>);
static_assert(std::is_constructible_v<attn::additive<double>, const Matrix<double>&, const Matrix<double>&,
                                      const Vector<double>&>);
static_assert(!std::is_constructible_v<attn::additive<double>, const Matrix<double>&, const Matrix<double>&,
                                       Vector<double>&&>);
static_assert(!std::is_constructible_v<attn::additive<double>, Matrix<double>&&, const Matrix<double>&,
                                       const Vector<double>&>);
// Outputs must be writable and fit.
static_assert(can_softmax_into<const std::vector<double>&, std::vector<double>&>);
static_assert(!can_softmax_into<const std::vector<double>&, const std::vector<double>&>);
static_assert(!can_softmax_into<const std::array<double, 3>&, std::array<double, 4>&>);

TEST_CASE("Vector: fixed sizes are inline and constexpr, dynamic sizes are run-time", "[types]") {
  constexpr Vector<double, 3> q{0, 0.5, 2};
  static_assert(q.size() == 3 && q[1] == 0.5);
  Vector<double> d{1, 2, 3, 4};
  REQUIRE(d.size() == 4);
  Vector<float> z(5);
  REQUIRE(z.size() == 5);
  for (float x : z) REQUIRE(x == 0.0f);
  const std::vector<double> src{1, 2, 3};
  Vector<double, 3> copy(src);
  REQUIRE(copy == Vector<double, 3>{1, 2, 3});
  // Our Vectors pass where std::span is expected, fixed or dynamic, const or not (and, built
  // with -Wconversion -Werror, without g++'s warning about two conversion paths).
  const auto size_of = [](std::span<const double> x) { return x.size(); };
  const auto fixed_size_of = [](std::span<const double, 3> x) { return x.size(); };
  const auto writable_size_of = [](std::span<double> x) { return x.size(); };
  REQUIRE(size_of(d) + size_of(copy) + fixed_size_of(copy) + writable_size_of(d) + writable_size_of(copy) == 17);
  const std::vector<double> wrong{1, 2};
  REQUIRE_THROWS_AS((Vector<double, 3>(wrong)), attn::dimension_error);
}

TEST_CASE("Callers' memory is borrowed, never copied", "[types]") {
  std::vector<float> v{1, 2, 3};
  std::array<float, 3> a{4, 5, 6};
  float raw[3] = {7, 8, 9};
  Vector<float, 3> ours{1, 1, 1};
  REQUIRE(attn::as_span(v).data() == v.data());
  REQUIRE(attn::as_span(a).data() == a.data());
  REQUIRE(attn::as_span(raw).data() == raw);
  REQUIRE(attn::as_span(ours).data() == ours.data());
  const std::span<const float> from_pointer(raw, 3);
  REQUIRE(attn::as_span(from_pointer).data() == raw);
  static_assert(decltype(attn::as_span(a))::extent == 3);
  static_assert(decltype(attn::as_span(v))::extent == dynamic);

  // The same computation from every kind of memory.
  REQUIRE(attn::dot(v, a) == 32.0f);
  REQUIRE(attn::dot(a, raw) == 4 * 7 + 5 * 8 + 6 * 9);
  REQUIRE(attn::dot(from_pointer, ours) == 24.0f);

  // A notes matrix borrowed from a larger row-major buffer with a row stride: 3 notes of 2
  // numbers each, stored 4 apart.
  std::vector<double> buffer{1, 0, -9, -9, 0, 1, -9, -9, 1, 1, -9, -9};
  MatrixView<const double> notes(buffer.data(), 3, 2, 4);
  REQUIRE(notes.row(2).data() == buffer.data() + 8);
  REQUIRE(notes(1, 1) == 1.0);
  const std::vector<double> q{0.5, -0.5};
  const auto r = attn::attend(q, notes, attn::dot);
  const attn::Matrix<double> packed{{1, 0}, {0, 1}, {1, 1}};
  const auto p = attn::attend(q, packed, attn::dot);
  for (std::size_t j = 0; j < 3; ++j) REQUIRE(r.weights[j] == p.weights[j]);
}

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
bool on_line(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % attn::storage_alignment == 0; }
// A constexpr std::vector through the allocator: in constant evaluation it is std::allocator.
constexpr double constexpr_aligned_sum() {
  std::vector<double, attn::aligned_allocator<double>> v(4, 0.5);
  v.push_back(1);
  double s = 0;
  for (double x : v) s += x;
  return s;
}
}  // namespace

TEST_CASE("Dynamic Vector and Matrix storage starts on a cache line", "[types]") {
  static_assert(attn::storage_alignment == 64);
  static_assert(constexpr_aligned_sum() == 3.0);
  // Every size and type, and after the moves and copies a container makes: the rows of a
  // 64-float-wide (or 8-double-wide) matrix then each start on a line.
  for (std::size_t n : {1u, 3u, 16u, 17u, 64u, 1000u}) {
    const Vector<float> vf(n);
    const Vector<double> vd(n, 1.0);
    const Matrix<float> mf(n, 64);
    const Matrix<double> md(n, 8, 2.0);
    REQUIRE(on_line(vf.data()));
    REQUIRE(on_line(vd.data()));
    REQUIRE(on_line(mf.data()));
    REQUIRE(on_line(md.data()));
    for (std::size_t i = 0; i < n; ++i) REQUIRE(on_line(mf.row(i).data()));
    const Matrix<double> copy = md;
    Matrix<double> moved = Matrix<double>(md);
    REQUIRE(on_line(copy.data()));
    REQUIRE(on_line(moved.data()));
    REQUIRE(copy == md);
  }
  const Matrix<double> listed{{1, 2, 3}, {4, 5, 6}};
  REQUIRE(on_line(listed.data()));
  const Vector<double> from_range(std::vector<double>{1, 2, 3});
  REQUIRE(on_line(from_range.data()));
  // For the caller's own buffers too, with any power-of-two alignment.
  std::vector<float, attn::aligned_allocator<float>> mine(100);
  REQUIRE(on_line(mine.data()));
  std::vector<double, attn::aligned_allocator<double, 256>> page(3);
  REQUIRE(reinterpret_cast<std::uintptr_t>(page.data()) % 256 == 0);
  // A size whose bytes overflow std::size_t is refused, not wrapped.
  attn::aligned_allocator<double> a;
  REQUIRE_THROWS_AS(a.allocate(std::numeric_limits<std::size_t>::max() / 4),
                    std::bad_array_new_length);
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
