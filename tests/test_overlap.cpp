// attn/detail/overlap.hpp: whether two buffers share a number, as the calls that write into
// caller buffers check it (attn/error.hpp's check_outputs_apart); and the calls that allow an output to be their input, which must then give
// the numbers they give into another buffer. The refusals (overlap_error naming both buffers)
// are docs/errors.md's and live in test_errors.cpp ("errors: an output that overlaps …").

#include <attn/attn.hpp>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "attn_catch.hpp"

using attn::Matrix;
using attn::MatrixView;
namespace ad = attn::detail;

TEST_CASE("overlaps: regions a common stride apart overlap exactly when they share a number", "[overlap]") {
  // Random regions in one buffer, compared with share_a_number (every element address): where
  // the strides agree, or either region is one row, overlaps answers exactly; otherwise it may
  // only say yes more often (their spans of memory overlap).
  std::vector<double> buffer(400);
  std::mt19937 rng(19);
  const auto pick = [&](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  std::size_t exact = 0, met = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const std::size_t stride = pick(1, 12);
    const auto make = [&](std::size_t s) {
      const std::size_t cols = pick(1, s);
      const std::size_t rows = pick(1, 6);
      const std::size_t offset = pick(0, 100);
      return ad::region<double>{buffer.data() + offset, rows, cols, s};
    };
    const bool same_stride = trial % 3 != 0;
    const ad::region<double> a = make(stride);
    const ad::region<double> b = make(same_stride ? stride : pick(1, 12));
    const bool truth = ad::share_a_number(a, b);
    const bool answer = ad::overlaps(a, b);
    INFO("a: +" << (a.data - buffer.data()) << " " << a.rows << "x" << a.cols << " /" << a.stride << "; b: +"
                << (b.data - buffer.data()) << " " << b.rows << "x" << b.cols << " /" << b.stride);
    REQUIRE(answer == ad::overlaps(b, a));
    if (same_stride || a.rows == 1 || b.rows == 1) {
      REQUIRE(answer == truth);
      ++exact;
      met += truth ? 1u : 0u;
    } else {
      REQUIRE((answer || !truth));
    }
  }
  CHECK(met > exact / 10);  // both answers were exercised
  CHECK(met < exact - exact / 10);
  // empty regions overlap nothing, whatever their pointer; other buffers never
  const ad::region<double> empty{buffer.data() + 5, 0, 3, 3};
  CHECK(!ad::overlaps(empty, ad::region<double>{buffer.data(), 1, 20, 20}));
  std::vector<double> other(20);
  CHECK(!ad::overlaps(ad::region<double>{other.data(), 1, 20, 20}, ad::region<double>{buffer.data(), 1, 400, 400}));
  // bytes of another type: by their spans of memory
  const auto* bytes = reinterpret_cast<const unsigned char*>(buffer.data() + 3);
  CHECK(ad::overlaps(ad::region<double>{buffer.data(), 1, 4, 4}, ad::region<unsigned char>{bytes, 1, 1, 1}));
  CHECK(!ad::overlaps(ad::region<double>{buffer.data(), 1, 3, 3}, ad::region<unsigned char>{bytes, 1, 1, 1}));
}

TEST_CASE("overlaps: in constant evaluation, element by element", "[overlap]") {
  STATIC_REQUIRE([] {
    double b[12]{};
    const ad::region<double> rows_a{b, 3, 2, 4}, rows_b{b + 2, 3, 2, 4}, shifted{b + 1, 2, 2, 4};
    return !ad::overlaps(rows_a, rows_b) && ad::overlaps(rows_a, shifted) && ad::overlaps(rows_b, shifted);
  }());
  // attend into buffers in a constant expression: checked there too
  STATIC_REQUIRE([] {
    const attn::Vector<double, 2> q{1, 0};
    const Matrix<double, 2, 2> h{{1, 0}, {0, 1}};
    double s[2]{}, w[2]{}, c[2]{};
    attn::attend(q, h, attn::dot, s, w, c);
    return w[0] > w[1];
  }());
}

TEMPLATE_TEST_CASE("In place: softmax, log_softmax and softmax_vjp into their input give the same bits", "[overlap]",
                   float, double) {
  using T = TestType;
  for (const std::size_t n : {3u, 17u, 200u}) {
    std::vector<T> x(n), g(n);
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = static_cast<T>(std::sin(0.7 * static_cast<double>(i)) * 4);
      g[i] = static_cast<T>(std::cos(0.3 * static_cast<double>(i)));
    }
    const std::vector<bool> keep = [&] {
      std::vector<bool> k(n, true);
      k[1] = false;
      return k;
    }();
    for (const attn::options& opt : {attn::options{}, attn::options{.beta = 1.5, .mask = keep}}) {
      std::vector<T> out(n), in_place = x;
      attn::softmax(x, out, opt);
      attn::softmax(in_place, in_place, opt);
      REQUIRE(std::memcmp(out.data(), in_place.data(), n * sizeof(T)) == 0);
      in_place = x;
      attn::log_softmax(x, out, opt);
      attn::log_softmax(in_place, in_place, opt);
      REQUIRE(std::memcmp(out.data(), in_place.data(), n * sizeof(T)) == 0);
      in_place = x;
      attn::softmax_vjp(x, g, out, opt);
      attn::softmax_vjp(in_place, g, in_place, opt);
      REQUIRE(std::memcmp(out.data(), in_place.data(), n * sizeof(T)) == 0);
    }
  }
}

TEST_CASE("Outputs whose rows interleave in one buffer are apart: align into one T x 2n matrix", "[overlap]") {
  const Matrix<double> notes{{1, 0}, {0, 1}, {1, 1}};
  const Matrix<double> queries{{1, 2}, {0.5, -1}};
  std::vector<double> both(2 * 6);  // row t: query t's 3 scores, then its 3 weights
  Matrix<double> contexts(2, 2);
  attn::align(queries, notes, attn::dot, MatrixView<double>(both.data(), 2, 3, 6),
              MatrixView<double>(both.data() + 3, 2, 3, 6), contexts.view());
  const auto ref = attn::align(queries, notes, attn::dot);
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t j = 0; j < 3; ++j) {
      CHECK(both[t * 6 + j] == ref.scores(t, j));
      CHECK(both[t * 6 + 3 + j] == ref.weights(t, j));
    }
  CHECK(contexts == ref.contexts);
}
