// The initialisation from a seed (attn/init.hpp): the generator's bits against splitmix64's
// published first output and against values computed independently (Python's integers, modulo
// 2⁶⁴), at compile time and at run time; the same seed gives the same bits, in every layout;
// another seed or stream other numbers; each parameter within PyTorch's bound for its shape and
// filling it (the largest |x| of n uniform numbers is below (1 − δ)·a with probability (1 − δ)ⁿ);
// the mean and variance of 2¹⁶ numbers within 5 standard deviations of U(−a, a)'s (a/√3 and
// a²/3; the variance's estimator has standard deviation a²·√(4/45)/√n), and each of 16 equal
// bins within 6 standard deviations of n/16 (a correct generator fails such a check with
// probability below 6·10⁻⁷, all 108 of them together below 10⁻⁵; the seeds are fixed, so the
// outcome is too); the errors; the block made from them runs.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "attn/attn.hpp"
#include "attn/init.hpp"
#include "attn_catch.hpp"
#include "doc_snippets.hpp"

namespace {

// splitmix64's first output from state 0 (Vigna's splitmix64.c; the outputs this generator's
// streams are made of), and random_bits at a few arguments computed independently in Python
// (unbounded integers masked to 64 bits, transcribing the formulas of random_bits' comment).
static_assert(attn::detail::splitmix64_mix(attn::detail::splitmix64_gamma) == 0xE220A8397B1DCDAFu);
static_assert(attn::random_bits(0, 0, 0) == 12035550249420947055u);
static_assert(attn::random_bits(1, 0, 0) == 6791897765849424158u);
static_assert(attn::random_bits(42, 3, 7) == 8984740033306438383u);
static_assert(attn::random_bits(~std::uint64_t{0}, 5, 1000) == 8757252467327529228u);
// 0.125·(2u − 1) for that number: Python's float (double) and its float32 rounding
static_assert(attn::random_uniform<double>(0.125, 42, 3, 7) == -0.0032340667083959607);
static_assert(attn::random_uniform<float>(0.125, 42, 3, 7) == -0.00323406676761806f);

template <class T>
struct moments {
  double mean = 0, var = 0, top = 0, bottom = 0;
};

template <class T>
moments<T> moments_of(std::span<const T> v) {
  moments<T> m;
  for (const T x : v) m.mean += static_cast<double>(x);
  m.mean /= static_cast<double>(v.size());
  for (const T x : v) m.var += static_cast<double>(x) * static_cast<double>(x);
  m.var /= static_cast<double>(v.size());  // E[x²]: U(−a, a)'s variance a²/3
  m.top = static_cast<double>(*std::max_element(v.begin(), v.end()));
  m.bottom = static_cast<double>(*std::min_element(v.begin(), v.end()));
  return m;
}

// |x| ≤ a rounded to T for every x, and the largest |x| above (1 − δ)·a.
template <class T>
void check_fills(std::span<const T> v, double a, double delta) {
  REQUIRE(!v.empty());
  const T bound = static_cast<T>(a);
  double largest = 0;
  for (const T x : v) {
    REQUIRE(std::abs(x) <= bound);
    largest = std::max(largest, std::abs(static_cast<double>(x)));
  }
  CHECK(largest >= (1 - delta) * a);
}

template <class T>
std::span<const T> numbers(const std::vector<T>& v) {
  return {v.data(), v.size()};
}

}  // namespace

TEMPLATE_TEST_CASE("fill_uniform: the same seed gives the same bits, another seed or stream others",
                   "[init]", float, double, long double) {
  using T = TestType;
  const std::size_t n = 1000;
  std::vector<T> a(n), b(n), c(n), d(n);
  attn::fill_uniform(std::span<T>(a), 0.5, 7);
  attn::fill_uniform(b, 0.5, 7);  // (any vector_like)
  attn::fill_uniform(std::span<T>(c), 0.5, 8);
  attn::fill_uniform(std::span<T>(d), 0.5, 7, 1);
  REQUIRE(a == b);
  std::size_t same_seed = 0, same_stream = 0;
  for (std::size_t k = 0; k < n; ++k) {
    same_seed += a[k] == c[k];
    same_stream += a[k] == d[k];
    REQUIRE(a[k] == attn::random_uniform<T>(0.5, 7, 0, k));
  }
  // two independent uniform numbers rounded to float coincide with probability about 2⁻²⁴
  CHECK(same_seed == 0);
  CHECK(same_stream == 0);
}

TEST_CASE("fill_uniform: a weight in attn's layout and in PyTorch's gets the same numbers", "[init]") {
  const std::size_t rows = 7, cols = 5;  // d_in × d_out
  std::vector<float> attn_layout(rows * cols), torch_layout(rows * cols), padded(rows * 8, -9.f);
  attn::fill_uniform(attn::StridedMatrixView<float>(attn_layout.data(), rows, cols), 1.0, 3);
  attn::fill_uniform(attn::transposed(attn::MatrixView<float>(torch_layout.data(), cols, rows)), 1.0, 3);
  attn::fill_uniform(attn::MatrixView<float>(padded.data(), rows, cols, 8), 1.0, 3);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      REQUIRE(attn_layout[i * cols + j] == torch_layout[j * rows + i]);
      REQUIRE(attn_layout[i * cols + j] == padded[i * 8 + j]);
      REQUIRE(attn_layout[i * cols + j] == attn::random_uniform<float>(1.0, 3, 0, i * cols + j));
    }
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = cols; j < 8; ++j) REQUIRE(padded[i * 8 + j] == -9.f);  // the padding untouched
}

TEMPLATE_TEST_CASE("fill_uniform: 2^16 numbers have U(-a, a)'s range, mean, variance and histogram",
                   "[init]", float, double) {
  using T = TestType;
  const std::size_t n = std::size_t{1} << 16;
  for (const double a : {1.0, 0.0625, 3.0}) {
    std::vector<T> v(n);
    attn::fill_uniform(std::span<T>(v), a, 2024, 5);
    check_fills(numbers(v), a, 1e-3);  // P(max < (1 − 10⁻³)a) = (1 − 10⁻³)^65536 < 10⁻²⁸
    const moments<T> m = moments_of(numbers(v));
    const double sn = std::sqrt(static_cast<double>(n));
    INFO("a = " << a << ", mean " << m.mean << ", E[x^2] " << m.var);
    CHECK(std::abs(m.mean) <= 5 * a / std::sqrt(3.0) / sn);
    CHECK(std::abs(m.var - a * a / 3) <= 5 * a * a * std::sqrt(4.0 / 45) / sn);
    CHECK(m.bottom >= -a);
    std::vector<std::size_t> bins(16);
    for (const T x : v) {
      const auto k = static_cast<std::size_t>((static_cast<double>(x) + a) / (2 * a) * 16);
      ++bins[std::min<std::size_t>(k, 15)];
    }
    // binomial(n, 1/16): mean 4096, standard deviation √(n·(1/16)·(15/16)) ≈ 62
    const double expected = static_cast<double>(n) / 16, sd = std::sqrt(expected * 15 / 16);
    for (const std::size_t c : bins) CHECK(std::abs(static_cast<double>(c) - expected) <= 6 * sd);
  }
}

TEST_CASE("fill_uniform: a bound that is not finite or below 0 is refused, nothing written", "[init][errors]") {
  std::vector<double> v(4, 7.0);
  for (const double bad : {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    REQUIRE_THROWS_MATCHES(attn::fill_uniform(std::span<double>(v), bad, 1), attn::domain_error,
                           Catch::Matchers::Message("attn::fill_uniform: the bound must be finite and at least 0"));
    REQUIRE_THROWS_AS(attn::fill_uniform(attn::StridedMatrixView<double>(v.data(), 2, 2), bad, 1), attn::domain_error);
  }
  REQUIRE(v == std::vector<double>(4, 7.0));
  attn::fill_uniform(std::span<double>(v), 0.0, 1);  // a = 0: all zeros (±0)
  for (const double x : v) REQUIRE(x == 0.0);
}

namespace {

// A block's numbers, each parameter its own vector; weights in attn's layout, or PyTorch's.
template <class T>
struct block_storage {
  std::size_t d, dff, hd, kv;
  bool torch;
  std::vector<T> WQ, WK, WV, WO, bQ, bK, bV, bO, W1, b1, W2, b2, g1, e1, g2, e2;
  block_storage(std::size_t d_model, std::size_t d_ff, std::size_t kv_columns, bool torch_layout)
      : d(d_model), dff(d_ff), hd(d_model), kv(kv_columns), torch(torch_layout), WQ(d * hd, -7), WK(d * kv, -7),
        WV(d * kv, -7), WO(hd * d, -7), bQ(hd, -7), bK(kv, -7), bV(kv, -7), bO(d, -7), W1(d * dff, -7), b1(dff, -7),
        W2(dff * d, -7), b2(d, -7), g1(d, -7), e1(d, -7), g2(d, -7), e2(d, -7) {}
  attn::StridedMatrixView<T> w(std::vector<T>& v, std::size_t in, std::size_t out) {
    return torch ? attn::transposed(attn::MatrixView<T>(v.data(), out, in))
                 : attn::StridedMatrixView<T>(v.data(), in, out);
  }
  attn::block_buffers<T> buffers() {
    return {.attention = {.W_Q = w(WQ, d, hd), .W_K = w(WK, d, kv), .W_V = w(WV, d, kv), .W_O = w(WO, hd, d),
                          .b_Q = bQ, .b_K = bK, .b_V = bV, .b_O = bO},
            .ffn = {.W_1 = w(W1, d, dff), .b_1 = b1, .W_2 = w(W2, dff, d), .b_2 = b2},
            .gamma_1 = g1, .beta_1 = e1, .gamma_2 = g2, .beta_2 = e2};
  }
};

}  // namespace

TEMPLATE_TEST_CASE("initialize: a block gets PyTorch's default distributions, each parameter its bound",
                   "[init][block]", float, double) {
  using T = TestType;
  const std::size_t d = 64, dff = 256;
  for (const bool torch : {false, true}) {
    INFO((torch ? "PyTorch's layout" : "attn's layout"));
    block_storage<T> s(d, dff, d, torch);
    attn::initialize(s.buffers(), 11);
    // in_proj_weight (3d × d) by xavier_uniform_: √(6/(d + 3d)); 4096 numbers each
    const double in_proj = std::sqrt(6.0 / (4.0 * d));
    for (const auto* W : {&s.WQ, &s.WK, &s.WV}) check_fills(numbers(*W), in_proj, 0.01);  // 0.99^4096 < 10⁻¹⁷
    check_fills(numbers(s.WO), 1 / std::sqrt(double(d)), 0.01);                            // nn.Linear(d, d)
    check_fills(numbers(s.W1), 1 / std::sqrt(double(d)), 0.01);
    check_fills(numbers(s.b1), 1 / std::sqrt(double(d)), 0.1);  // 256 numbers: 0.9^256 < 10⁻¹¹
    check_fills(numbers(s.W2), 1 / std::sqrt(double(dff)), 0.01);
    check_fills(numbers(s.b2), 1 / std::sqrt(double(dff)), 0.25);  // 64 numbers: 0.75^64 < 10⁻⁷
    for (const auto* z : {&s.bQ, &s.bK, &s.bV, &s.bO, &s.e1, &s.e2})
      for (const T x : *z) REQUIRE(x == T(0));
    for (const auto* g : {&s.g1, &s.g2})
      for (const T x : *g) REQUIRE(x == T(1));
    // the streams: W_Q, W_K, W_V, W_O 0…3, W₁, b₁, W₂, b₂ 4…7; entry (i, j) number i·cols + j
    REQUIRE(s.WK[torch ? 2 * d + 1 : 1 * d + 2] == attn::random_uniform<T>(in_proj, 11, 1, 1 * d + 2));
    REQUIRE(s.b2[3] == attn::random_uniform<T>(1 / std::sqrt(double(dff)), 11, 7, 3));
    // the same seed, the same numbers whatever the layout
    block_storage<T> again(d, dff, d, !torch);
    attn::initialize(again.buffers(), 11);
    for (std::size_t i = 0; i < d; ++i)
      for (std::size_t j = 0; j < dff; ++j) REQUIRE(s.w(s.W1, d, dff)(i, j) == again.w(again.W1, d, dff)(i, j));
  }
}

TEST_CASE("initialize: W_K and W_V of other shapes than W_Q (grouped-query) are each xavier_uniform_", "[init]") {
  block_storage<double> s(32, 64, 8, false);  // W_K, W_V 32 × 8: PyTorch's k_proj_weight rule
  attn::initialize(s.buffers().attention, 5);
  check_fills(numbers(s.WQ), std::sqrt(6.0 / (32 + 32)), 0.01);
  check_fills(numbers(s.WK), std::sqrt(6.0 / (32 + 8)), 0.05);  // 256 numbers: 0.95^256 < 10⁻⁵
  check_fills(numbers(s.WV), std::sqrt(6.0 / (32 + 8)), 0.05);
}

TEST_CASE("initialize: a linear layer and a feed-forward layer as nn.Linear, from their first stream", "[init]") {
  std::vector<double> W(10 * 3), b(3), W1(10 * 3), b1(3), W2(3 * 4), b2(4);
  attn::initialize(attn::linear_buffers<double>{attn::MatrixView<double>(W.data(), 10, 3), b}, 9, 4);
  attn::initialize(attn::feed_forward_buffers<double>{attn::MatrixView<double>(W1.data(), 10, 3), b1,
                                                      attn::MatrixView<double>(W2.data(), 3, 4), b2},
                   9, 4);
  REQUIRE(W == W1);  // the feed-forward layer's W₁, b₁ are a linear layer's from the same stream
  REQUIRE(b == b1);
  for (std::size_t k = 0; k < W.size(); ++k) REQUIRE(W[k] == attn::random_uniform<double>(1 / std::sqrt(10.0), 9, 4, k));
  for (std::size_t k = 0; k < b.size(); ++k) REQUIRE(b[k] == attn::random_uniform<double>(1 / std::sqrt(10.0), 9, 5, k));
  for (std::size_t k = 0; k < b2.size(); ++k) REQUIRE(b2[k] == attn::random_uniform<double>(1 / std::sqrt(3.0), 9, 7, k));
}

TEST_CASE("initialize: a bias of another size, a bias without its weight and buffers that overlap are refused, "
          "nothing written",
          "[init][errors]") {
  block_storage<float> s(4, 6, 4, false);
  attn::block_buffers<float> b = s.buffers();
  b.ffn.b_1 = std::span<float>(s.b1).first(5);
  REQUIRE_THROWS_MATCHES(attn::initialize(b, 1), attn::dimension_error,
                         Catch::Matchers::Message("attn::initialize: size of b_1 is 5 but columns of W_1 is 6"));
  b = s.buffers();
  b.attention.W_K = {};
  REQUIRE_THROWS_MATCHES(attn::initialize(b, 1), attn::dimension_error,
                         Catch::Matchers::Message("attn::initialize: b_K is given but W_K is empty (a bias's "
                                                  "bound is 1/sqrt of its weight's rows)"));
  b = s.buffers();
  b.gamma_2 = s.e1;  // β₁'s numbers twice
  REQUIRE_THROWS_MATCHES(attn::initialize(b, 1), attn::overlap_error,
                         Catch::Matchers::Message("attn::initialize: gamma_2 overlaps beta_1"));
  b = s.buffers();
  b.ffn.W_2 = attn::StridedMatrixView<float>(s.W2.data(), 6, 4, 2, 1);  // rows 2 apart, 4 wide
  REQUIRE_THROWS_AS(attn::initialize(b, 1), attn::dimension_error);
  for (const auto* v : {&s.WQ, &s.WK, &s.WV, &s.WO, &s.bQ, &s.b1, &s.W2, &s.g1, &s.e1, &s.g2})
    for (const float x : *v) REQUIRE(x == -7.f);
}

TEST_CASE("initialize then parameters_of: a block to run, its views over the same numbers", "[init][block]") {
  const std::size_t d = 8, dff = 16, rows = 5;
  block_storage<double> s(d, dff, d, true);  // PyTorch's layout
  attn::initialize(s.buffers(), 3);
  const attn::block_parameters<double> p =
      attn::parameters_of(s.buffers(), {.attention = {.heads = 2}, .ffn = {.act = attn::activation::gelu},
                                        .placement = attn::norm_placement::pre});
  REQUIRE(p.attention.W_Q.data() == s.WQ.data());
  REQUIRE(p.attention.W_Q.col_stride() == d);  // read where it lies, no copy
  REQUIRE(p.attention.heads == 2);
  REQUIRE(p.ffn.act == attn::activation::gelu);
  REQUIRE(p.norm_2.gamma.data() == s.g2.data());
  REQUIRE(p.placement == attn::norm_placement::pre);
  std::vector<double> x(rows * d), y(rows * d);
  attn::fill_uniform(std::span<double>(x), 1.0, 99);
  attn::block_cache<double> cache;
  attn::transformer_block(attn::MatrixView<const double>(x.data(), rows, d), p, attn::MatrixView<double>(y.data(), rows, d),
                          cache);
  for (const double v : y) REQUIRE(std::isfinite(v));
  REQUIRE(y != x);
}

TEST_CASE("initialize: docs/block.md's example, quoted there", "[init][docs]") {
  const std::size_t d = 16, d_ff = 64;
  // docs/block.md:init:begin
  std::vector<float> WQ(d * d), WK(d * d), WV(d * d), WO(d * d), bQ(d), bK(d), bV(d), bO(d), W1(d * d_ff), b1(d_ff),
      W2(d_ff * d), b2(d), g1(d), be1(d), g2(d), be2(d);  // your buffers
  const auto view = [](std::vector<float>& w, std::size_t rows, std::size_t cols) {
    return attn::StridedMatrixView<float>(w.data(), rows, cols);  // or PyTorch's layout: attn::transposed
  };
  const attn::block_buffers<float> buffers{
      .attention = {.W_Q = view(WQ, d, d), .W_K = view(WK, d, d), .W_V = view(WV, d, d), .W_O = view(WO, d, d),
                    .b_Q = bQ, .b_K = bK, .b_V = bV, .b_O = bO},
      .ffn = {.W_1 = view(W1, d, d_ff), .b_1 = b1, .W_2 = view(W2, d_ff, d), .b_2 = b2},
      .gamma_1 = g1, .beta_1 = be1, .gamma_2 = g2, .beta_2 = be2};
  attn::initialize(buffers, 42);  // seed 42: the same bits with every compiler
  const attn::block_parameters<float> p = attn::parameters_of(buffers, {.attention = {.heads = 4}});
  // docs/block.md:init:end
  REQUIRE(attn_test::quoted_in(__FILE__, "docs/block.md", "// docs/block.md:init:begin\n", "  // docs/block.md:init:end"));
  REQUIRE(p.attention.heads == 4);
  REQUIRE(p.ffn.W_2.data() == W2.data());
  REQUIRE(WQ[5] == attn::random_uniform<float>(std::sqrt(6.0 / (4 * 16)), 42, 0, 5));
  REQUIRE(g2[3] == 1.0f);
}
