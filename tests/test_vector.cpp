// Vector, extents and borrowing: fixed sizes inline and checked at compile time, dynamic
// sizes at run time, every kind of contiguous memory borrowed as a span without a copy, and
// dynamic storage (attn::aligned_allocator) on a 64-byte line.
#include <algorithm>
#include <array>
#include <concepts>
#include <cstdint>
#include <iterator>
#include <limits>
#include <new>
#include <ranges>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"
#include "constant_options.hpp"

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

namespace {
/// A vector as Eigen 3.4 presents one (Eigen::VectorXf, a segment, a row of a matrix): data(),
/// size() and random-access iterators that do not say they are contiguous, whatever their step.
template <class It>
struct data_range {
  float* first;
  It b, e;
  [[nodiscard]] float* data() const { return first; }
  [[nodiscard]] It begin() const { return b; }
  [[nodiscard]] It end() const { return e; }
  [[nodiscard]] std::size_t size() const { return static_cast<std::size_t>(e - b); }
};
using back = std::reverse_iterator<float*>;
using forward = std::reverse_iterator<back>;  // forward, one number at a time
}  // namespace

TEST_CASE("A vector with data() but no contiguous iterators (Eigen's) is borrowed, its step checked",
          "[types][eigen]") {
  std::vector<float> v{1, 2, 3}, out(3);
  const data_range<forward> r{v.data(), forward(back(v.data())), forward(back(v.data() + 3))};
  static_assert(!std::ranges::contiguous_range<decltype(r)> && attn::vector_like<decltype(r)>);
  REQUIRE(attn::as_span(r).data() == v.data());
  REQUIRE(attn::dot(r, v) == 14.0f);
  const data_range<forward> w{out.data(), forward(back(out.data())), forward(back(out.data() + 3))};
  attn::softmax(r, w);
  const auto ref = attn::softmax(v);
  REQUIRE(std::equal(out.begin(), out.end(), ref.begin()));
  // the same type stepping backwards (a stride of −1): refused, not read as contiguous
  const data_range<back> reversed{v.data() + 2, back(v.data() + 3), back(v.data())};
  REQUIRE_THROWS_AS(attn::dot(reversed, v), attn::dimension_error);
}

namespace {
bool on_line(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % attn::storage_alignment == 0; }
#if ATTN_TEST_CONSTEXPR_VECTOR
// A constexpr std::vector through the allocator: in constant evaluation it is std::allocator.
constexpr double constexpr_aligned_sum() {
  std::vector<double, attn::aligned_allocator<double>> v(4, 0.5);
  v.push_back(1);
  double s = 0;
  for (double x : v) s += x;
  return s;
}
#endif
}  // namespace

TEST_CASE("Dynamic Vector and Matrix storage starts on a cache line", "[types]") {
  static_assert(attn::storage_alignment == 64);
#if ATTN_TEST_CONSTEXPR_VECTOR
  static_assert(constexpr_aligned_sum() == 3.0);
#endif
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
