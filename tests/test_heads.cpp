// Attention with projections and heads (attn/heads.hpp), forward: against the formulas of
// NEXT_SECTIONS.md written out here in long double (Q = X W_Q + b_Q, …, head i on its columns,
// the concatenation, W_O, b_O), for h = 1, 2, 3, 4, 8, self and cross, with and without biases
// and W_O, key, row and causal masks, a batch of sentences, float, double and long double.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"
#include "random_data.hpp"

using attn::Matrix;

namespace {

using attn_test::random_matrix;
using attn_test::same_bits;

template <class T>
std::vector<T> random_vector(std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0, 1);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(normal(rng));
  return v;
}

// One configuration: the inputs, the parameters and their owners, the masks.
template <class T>
struct setup {
  std::size_t B, tq, n, dm, dkv, h, dk, dv, dout;
  bool self, biases, with_wo, causal, key_mask;
  Matrix<T> X, Xkv, WQ, WK, WV, WO;
  std::vector<T> bQ, bK, bV, bO;
  std::vector<char> keys;
  attn::multi_head_parameters<T> params() const {
    attn::multi_head_parameters<T> p{.W_Q = WQ.view(), .W_K = WK.view(), .W_V = WV.view(), .heads = h};
    if (with_wo) p.W_O = WO.view();
    if (biases) {
      p.b_Q = bQ;
      p.b_K = bK;
      p.b_V = bV;
      if (with_wo) p.b_O = bO;  // without W_O, Y is the concatenation itself
    }
    return p;
  }
  attn::options opts() const {
    attn::options o{.beta = 1.25, .causal = causal};
    if (key_mask) o.mask = keys;
    return o;
  }
  const Matrix<T>& kv() const { return self ? X : Xkv; }
};

template <class T>
setup<T> make_setup(std::size_t B, std::size_t tq, std::size_t n, std::size_t h, bool self, bool biases,
                    bool with_wo, bool causal, bool key_mask, std::mt19937_64& rng) {
  setup<T> s{B, tq, self ? tq : n, 5, self ? std::size_t{5} : std::size_t{3}, h, 2, 3, 4, self, biases, with_wo, causal, key_mask,
             {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  s.X = random_matrix<T>(B * s.tq, s.dm, rng);
  s.Xkv = random_matrix<T>(B * s.n, s.dkv, rng);
  s.WQ = random_matrix<T>(s.dm, h * s.dk, rng, 0.5);
  s.WK = random_matrix<T>(s.dkv, h * s.dk, rng, 0.5);
  s.WV = random_matrix<T>(s.dkv, h * s.dv, rng);
  s.WO = random_matrix<T>(h * s.dv, s.dout, rng);
  s.bQ = random_vector<T>(h * s.dk, rng);
  s.bK = random_vector<T>(h * s.dk, rng);
  s.bV = random_vector<T>(h * s.dv, rng);
  s.bO = random_vector<T>(s.dout, rng);
  s.keys.assign(B * s.n, 1);  // one row per sentence: its last key masked in sentence 1
  if (B > 1) s.keys[2 * s.n - 1] = 0;
  else s.keys[0] = 0;
  return s;
}

// Y by the formulas, in long double.
template <class T>
std::vector<long double> reference_y(const setup<T>& s) {
  const Matrix<T>& Xkv = s.kv();
  const std::size_t dkv = Xkv.cols(), dout = s.with_wo ? s.dout : s.h * s.dv;
  const auto proj = [](const Matrix<T>& In, std::size_t r, const Matrix<T>& W, std::size_t c, const std::vector<T>* b) {
    long double acc = b != nullptr ? static_cast<long double>((*b)[c]) : 0;
    for (std::size_t a = 0; a < In.cols(); ++a) acc += static_cast<long double>(In(r, a)) * W(a, c);
    return acc;
  };
  std::vector<long double> Y(s.B * s.tq * dout, 0);
  for (std::size_t b = 0; b < s.B; ++b)
    for (std::size_t t = 0; t < s.tq; ++t) {
      std::vector<long double> z(s.h * s.dv, 0);
      for (std::size_t i = 0; i < s.h; ++i) {
        std::vector<long double> sc(s.n), w(s.n, 0);
        long double m = -std::numeric_limits<long double>::infinity();
        const auto allowed = [&](std::size_t j) {
          if (s.causal && j + s.tq > t + s.n) return false;
          if (s.key_mask && s.keys[b * s.n + j] == 0) return false;
          return true;
        };
        for (std::size_t j = 0; j < s.n; ++j) {
          long double acc = 0;
          for (std::size_t c = 0; c < s.dk; ++c)
            acc += proj(s.X, b * s.tq + t, s.WQ, i * s.dk + c, s.biases ? &s.bQ : nullptr) *
                   proj(Xkv, b * s.n + j, s.WK, i * s.dk + c, s.biases ? &s.bK : nullptr);
          sc[j] = 1.25L * acc / std::sqrt(static_cast<long double>(static_cast<T>(s.dk)));
          if (allowed(j)) m = std::max(m, sc[j]);
        }
        long double sum = 0;
        for (std::size_t j = 0; j < s.n; ++j)
          if (allowed(j)) sum += w[j] = std::exp(sc[j] - m);
        for (std::size_t j = 0; j < s.n; ++j)
          for (std::size_t c = 0; c < s.dv; ++c)
            if (w[j] != 0) z[i * s.dv + c] += w[j] / sum * proj(Xkv, b * s.n + j, s.WV, i * s.dv + c, s.biases ? &s.bV : nullptr);
      }
      for (std::size_t o = 0; o < dout; ++o) {
        long double y = s.biases && s.with_wo ? static_cast<long double>(s.bO[o]) : 0;
        if (s.with_wo) {
          for (std::size_t c = 0; c < s.h * s.dv; ++c) y += z[c] * s.WO(c, o);
        } else {
          y += z[o];
        }
        Y[(b * s.tq + t) * dout + o] = y;
      }
      (void)dkv;
    }
  return Y;
}

}  // namespace

TEMPLATE_TEST_CASE("multi_head_attention agrees with its formulas: heads, self and cross, masks, batches",
                   "[heads]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(404);
  // Each step (projections of 5 products, scores of 2, weights, sums of ≤ 7, W_O of ≤ 24) rounds
  // relatively; the inputs are O(1), so the error stays below 200 ε of the largest |Y|.
  const double eps = std::numeric_limits<T>::epsilon() * (std::is_same_v<T, long double> ? 2 : 1);
  for (const std::size_t h : {1u, 2u, 3u, 4u, 8u})
    for (int c = 0; c < 16; ++c) {
      const bool self = c & 1, biases = c & 2, with_wo = c & 4, masks = c & 8;
      const std::size_t B = masks ? 2 : 1;
      const auto s = make_setup<T>(B, 4, 6, h, self, biases, with_wo, masks, masks, rng);
      INFO("h = " << h << ", self " << self << ", biases " << biases << ", W_O " << with_wo << ", masks " << masks);
      Matrix<T> Y(B * s.tq, with_wo ? s.dout : h * s.dv, T(9));
      Matrix<T> maps(h * B * s.tq, s.n);
      attn::multi_head_cache<T> cache;
      if (self)
        attn::multi_head_attention(s.X, s.params(), {.out = Y.view(), .maps = maps.view()}, cache, s.opts(), B);
      else
        attn::multi_head_attention(s.X, s.Xkv, s.params(), {.out = Y.view(), .maps = maps.view()}, cache, s.opts(), B);
      const auto want = reference_y(s);
      long double top = 1;
      for (const long double y : want) top = std::max(top, std::abs(y));
      for (std::size_t k = 0; k < Y.size(); ++k)
        REQUIRE(std::abs(static_cast<long double>(Y.data()[k]) - want[k]) <= 200 * eps * top);
      // every map row sums to 1 (each row sees a key here)
      for (std::size_t r = 0; r < maps.rows(); ++r) {
        long double sum = 0;
        for (std::size_t j = 0; j < s.n; ++j) sum += maps(r, j);
        REQUIRE(std::abs(sum - 1) <= 16 * eps);
      }
    }
}

TEST_CASE("multi_head_attention: the returning form, the cache reused, the scale given", "[heads]") {
  std::mt19937_64 rng(5);
  auto s = make_setup<double>(1, 5, 5, 2, true, true, true, false, false, rng);
  const auto r = attn::multi_head_attention(s.X, s.params());
  Matrix<double> Y(5, s.dout);
  attn::multi_head_cache<double> cache;
  attn::multi_head_attention(s.X, s.params(), {.out = Y.view()}, cache);
  REQUIRE(Y == r.out);
  const double* q = cache.queries.data();
  attn::multi_head_attention(s.X, s.params(), {.out = Y.view()}, cache);
  REQUIRE(cache.queries.data() == q);  // the same shapes: the same storage
  // scale = 1/√d_k given explicitly gives the default's numbers
  auto p = s.params();
  p.score = attn::dot_scaled_by{1 / std::sqrt(2.0)};
  const auto r2 = attn::multi_head_attention(s.X, p);
  for (std::size_t k = 0; k < Y.size(); ++k) REQUIRE_THAT(r2.out.data()[k], Catch::Matchers::WithinAbs(r.out.data()[k], 1e-15));
  p.score = attn::dot_scaled_by{0};  // no scores: every head's weights uniform
  const auto r3 = attn::multi_head_attention(s.X, p);
  REQUIRE(r3.cache.heads_out(0, 0) == r3.cache.heads_out(4, 0));
}

namespace {

// Head i of sentence b by scaled_dot_product_attention itself, on its block of the cache's Q, K
// and V (key/value head i / (h / h_kv)): its map and its scores, in multi_head_views' layout
// (rows [(i·B + b)·T, (i·B + b + 1)·T)), and its output, in Z's columns [i·d_v, (i + 1)·d_v).
template <class T>
struct per_head {
  Matrix<T> maps, scores, Z;
};
template <class T, class S>
per_head<T> per_head_sdpa(const attn::multi_head_cache<T>& c, std::size_t h, std::size_t kvh, std::size_t B,
                          const S& score, const attn::options& opt) {
  const std::size_t tq = c.queries.rows() / B, n = c.keys.rows() / B, dk = c.queries.cols() / h,
                    dv = c.values.cols() / kvh;
  per_head<T> r{Matrix<T>(h * B * tq, n), Matrix<T>(h * B * tq, n), Matrix<T>(B * tq, h * dv)};
  const auto block = [](const Matrix<T>& m, std::size_t r0, std::size_t rows, std::size_t c0, std::size_t cols) {
    return attn::MatrixView<const T>(m.data() + r0 * m.cols() + c0, rows, cols, m.cols());
  };
  for (std::size_t i = 0; i < h; ++i)
    for (std::size_t b = 0; b < B; ++b) {
      const std::size_t g = i / (h / kvh), row = (i * B + b) * tq;
      attn::scaled_dot_product_attention(
          block(c.queries, b * tq, tq, i * dk, dk), block(c.keys, b * n, n, g * dk, dk),
          block(c.values, b * n, n, g * dv, dv), score,
          attn::attention_views<T>{.out = attn::MatrixView<T>(r.Z.data() + b * tq * r.Z.cols() + i * dv, tq, dv, r.Z.cols()),
                                   .weights = attn::MatrixView<T>(r.maps.data() + row * n, tq, n),
                                   .scores = attn::MatrixView<T>(r.scores.data() + row * n, tq, n)},
          opt);
    }
  return r;
}

}  // namespace

// One way to give the score: multi_head_parameters::score takes what scaled_dot_product_attention
// takes; the old std::optional<double> scale is gone.
static_assert(std::is_convertible_v<attn::scaled_dot_score, attn::dot_product_score_choice>);
static_assert(std::is_convertible_v<attn::dot_score, attn::dot_product_score_choice>);
static_assert(std::is_convertible_v<attn::dot_scaled_by, attn::dot_product_score_choice>);
static_assert(!std::is_convertible_v<double, attn::dot_product_score_choice>);  // a bare number is no score
template <class P>
constexpr bool has_scale_member = requires(P p) { p.scale; };
static_assert(!has_scale_member<attn::multi_head_parameters<double>>);
static_assert(attn::dot_product_score<attn::dot_product_score_choice, float>);
static_assert(attn::multi_head_parameters<double>{}.score == attn::scaled_dot);

TEMPLATE_TEST_CASE("multi_head_parameters::score: scaled_dot, dot or dot_scaled_by, each head sdpa's bits",
                   "[heads][score]", float, double) {
  using T = TestType;
  std::mt19937_64 rng(41);
  const std::size_t B = 2, tq = 5, dm = 4, h = 4, kvh = 2, dk = 3, dv = 2;
  const Matrix<T> X = random_matrix<T>(B * tq, dm, rng), WQ = random_matrix<T>(dm, h * dk, rng, 0.7),
                  WK = random_matrix<T>(dm, kvh * dk, rng, 0.7), WV = random_matrix<T>(dm, kvh * dv, rng);
  attn::multi_head_parameters<T> p{.W_Q = WQ, .W_K = WK, .W_V = WV, .heads = h, .kv_heads = kvh};
  const attn::options opt{.beta = 1.5, .causal = true};
  const auto each = [&](const auto& score, const char* name) {
    INFO(name);
    p.score = score;
    Matrix<T> Y(B * tq, h * dv), maps(h * B * tq, tq);
    attn::multi_head_cache<T> cache;
    attn::multi_head_attention(X, p, {.out = Y.view(), .maps = maps.view()}, cache, opt, B);
    const per_head<T> ref = per_head_sdpa<T>(cache, h, kvh, B, score, opt);
    REQUIRE(same_bits(maps, ref.maps));
    REQUIRE(same_bits(Y, ref.Z));  // (no W_O: Y is the concatenation)
    // the choice is itself a dot-product score: sdpa given it gives the held score's bits
    REQUIRE(same_bits(per_head_sdpa<T>(cache, h, kvh, B, attn::dot_product_score_choice(score), opt).maps, maps));
    return maps;
  };
  const Matrix<T> scaled = each(attn::scaled_dot, "scaled_dot");
  const Matrix<T> plain = each(attn::dot, "dot");
  const Matrix<T> by = each(attn::dot_scaled_by{0.3}, "dot_scaled_by{0.3}");
  REQUIRE(!same_bits(scaled, plain));  // three scores, three maps
  REQUIRE(!same_bits(plain, by));
  // the backward checks that it is given the forward's score: dot then scaled_dot is refused
  p.score = attn::dot;
  auto r = attn::multi_head_attention(X, p, opt, B);
  Matrix<T> dX(B * tq, dm, T(7));
  p.score = attn::scaled_dot;
  REQUIRE_THROWS_AS(attn::multi_head_attention_backward(X, p, r.cache, r.out, {.inputs = dX.view()}, opt, B),
                    attn::forward_mismatch_error);
  REQUIRE(dX(0, 0) == T(7));
  p.score = attn::dot;
  attn::multi_head_attention_backward(X, p, r.cache, r.out, {.inputs = dX.view()}, opt, B);
  REQUIRE(dX(0, 0) != T(7));
}

TEMPLATE_TEST_CASE("multi_head_attention gives every head's maps and scores, sdpa's bits: views, threads, returned",
                   "[heads][scores]", float, double) {
  using T = TestType;
  std::mt19937_64 rng(43);
  const std::size_t B = 2, dm = 4, dkv = 3, h = 4, kvh = 2, dk = 3, dv = 2;
  for (const bool self : {true, false}) {
    const std::size_t tq = 5, n = self ? tq : 7;
    INFO((self ? "self, causal" : "cross"));
    const Matrix<T> X = random_matrix<T>(B * tq, dm, rng), Xkv = random_matrix<T>(B * n, self ? dm : dkv, rng),
                    WQ = random_matrix<T>(dm, h * dk, rng, 0.7), WK = random_matrix<T>(Xkv.cols(), kvh * dk, rng, 0.7),
                    WV = random_matrix<T>(Xkv.cols(), kvh * dv, rng), WO = random_matrix<T>(h * dv, 3, rng);
    const attn::multi_head_parameters<T> p{.W_Q = WQ, .W_K = WK, .W_V = WV, .W_O = WO, .heads = h, .kv_heads = kvh};
    std::vector<char> keys(n, 1);
    keys[1] = 0;  // a masked key: its score is still written, as sdpa writes it (before the masks)
    attn::options opt{.beta = 0.8, .causal = self};
    opt.mask = keys;
    const Matrix<T>& kv = self ? X : Xkv;
    Matrix<T> Y(B * tq, 3), maps(h * B * tq, n), scores(h * B * tq, n);
    attn::multi_head_cache<T> cache;
    attn::multi_head_attention(X, kv, p, {.out = Y.view(), .maps = maps.view(), .scores = scores.view()}, cache, opt, B);
    const per_head<T> ref = per_head_sdpa<T>(cache, h, kvh, B, attn::scaled_dot, opt);
    REQUIRE(same_bits(maps, ref.maps));
    REQUIRE(same_bits(scores, ref.scores));
    REQUIRE(same_bits(cache.heads_out, ref.Z));
    REQUIRE(scores(0, 1) == scores(0, 1));  // the masked key's score: a number, not left as it was
    // the scores alone, on 3 threads: the same bits
    Matrix<T> Y3(B * tq, 3), scores3(h * B * tq, n, T(7));
    attn::multi_head_attention(X, kv, p, {.out = Y3.view(), .scores = scores3.view()}, cache, opt, B, 3);
    REQUIRE(same_bits(Y3, Y));
    REQUIRE(same_bits(scores3, scores));
    // returned: as asked, else empty
    const auto r = self ? attn::multi_head_attention(X, p, opt, {.maps = true, .scores = true}, B)
                        : attn::multi_head_attention(X, kv, p, opt, {.maps = true, .scores = true}, B);
    REQUIRE(same_bits(r.out, Y));
    REQUIRE(same_bits(r.maps, maps));
    REQUIRE(same_bits(r.scores, scores));
    const auto only = attn::multi_head_attention(X, kv, p, opt, {.scores = true}, B, 2);
    REQUIRE(only.maps.size() == 0);
    REQUIRE(same_bits(only.scores, scores));
    const auto plain = attn::multi_head_attention(X, kv, p, opt, B);  // the call of before: Y and the cache
    REQUIRE(same_bits(plain.out, Y));
    REQUIRE(plain.maps.size() == 0);
    REQUIRE(plain.scores.size() == 0);
  }
}

TEST_CASE("multi_head_attention: scores of the wrong shape or over another buffer are refused, naming them",
          "[heads][scores][errors]") {
  const Matrix<double> X{{1, 0}, {0, 1}, {1, 1}}, W{{1, 0.5}, {-0.5, 1}};
  const attn::multi_head_parameters<double> p{.W_Q = W, .W_K = W, .W_V = W, .heads = 2};
  attn::multi_head_cache<double> cache;
  Matrix<double> Y(3, 2, 7.0), maps(6, 3, 7.0), scores(6, 3, 7.0), bad(6, 2, 7.0);
  const auto untouched = [](const Matrix<double>& m) {
    return std::all_of(m.data(), m.data() + m.size(), [](double v) { return v == 7.0; });
  };
  REQUIRE_THROWS_WITH(attn::multi_head_attention(X, p, {.out = Y.view(), .maps = maps.view(), .scores = bad.view()}, cache),
                      "attn::multi_head_attention: the scores is 6x2 but should be 6x3");
  REQUIRE_THROWS_WITH(attn::multi_head_attention(X, p, {.out = Y.view(), .maps = maps.view(), .scores = maps.view()}, cache),
                      "attn::multi_head_attention: the scores overlaps the maps");
  Matrix<double> big(6, 3, 0.5);  // X in big's first 6 numbers, the scores all of big
  const Matrix<double> before = big;
  REQUIRE_THROWS_WITH(attn::multi_head_attention(attn::MatrixView<const double>(big.data(), 3, 2), p,
                                                 {.out = Y.view(), .scores = big.view()}, cache),
                      "attn::multi_head_attention: the scores overlaps X");
  REQUIRE_THROWS_WITH(attn::multi_head_attention(X, p, {.out = Y.view(), .scores = attn::MatrixView<double>(Y.data(), 1, 3)}, cache),
                      "attn::multi_head_attention: the scores is 1x3 but should be 6x3");
  REQUIRE(untouched(Y));
  REQUIRE(untouched(maps));
  REQUIRE(untouched(bad));
  REQUIRE(big == before);
  // returned: a bad shape throws before the maps and scores are sized from it
  const Matrix<double> W3(3, 2);
  REQUIRE_THROWS_WITH((void)attn::multi_head_attention(X, {.W_Q = W3, .W_K = W, .W_V = W}, {}, {.maps = true, .scores = true}),
                      "attn::multi_head_attention: rows of W_Q is 3 but columns of X is 2");
}

TEST_CASE("multi_head_attention: shapes that disagree name the buffer; nothing is written", "[heads][errors]") {
  std::mt19937_64 rng(6);
  auto s = make_setup<double>(1, 4, 6, 2, false, false, true, false, false, rng);
  Matrix<double> Y(4, s.dout, 7.0), Ybad(4, s.dout + 1, 7.0);
  attn::multi_head_cache<double> cache;
  const auto what = [](auto&& f) {
    try {
      f();
    } catch (const attn::dimension_error& e) {
      return std::string(e.what());
    }
    return std::string("no throw");
  };
  CHECK(what([&] { attn::multi_head_attention(s.X, s.Xkv, s.params(), {.out = Ybad.view()}, cache); }) ==
        "attn::multi_head_attention: Y is 4x5 but should be 4x4");
  auto p = s.params();
  p.heads = 4;  // 4 heads do not divide W_Q's 4 columns? they do (d_k = 1); W_V's 6 they do not
  CHECK(what([&] { attn::multi_head_attention(s.X, s.Xkv, p, {.out = Y.view()}, cache); }) ==
        "attn::multi_head_attention: 4 heads do not divide the 4 columns of W_Q and the 6 columns of W_V");
  CHECK(what([&] { attn::multi_head_attention(s.X, s.X, s.params(), {.out = Y.view()}, cache); }) ==
        "attn::multi_head_attention: rows of W_K is 3 but columns of X_kv is 5");
  CHECK(what([&] { attn::multi_head_attention(s.X, s.Xkv, s.params(), {.out = Y.view()}, cache, {}, 3); }) ==
        "attn::multi_head_attention: 4 rows of X and 6 of X_kv are not 3 sentences of equal length");
  REQUIRE(Y(0, 0) == 7.0);
  // Y over an input: overlap_error naming both, X_kv untouched
  const double xkv0 = s.Xkv(0, 0);
  REQUIRE_THROWS_WITH(attn::multi_head_attention(s.X, s.Xkv, s.params(),
                                                 {.out = attn::MatrixView<double>(s.Xkv.data(), 4, s.dout)}, cache),
                      "attn::multi_head_attention: Y overlaps X_kv");
  REQUIRE(s.Xkv(0, 0) == xkv0);
  // under throw_error, a head with nothing to attend to throws before Y is written
  const std::vector<char> none(6, 0);
  REQUIRE_THROWS_AS(attn::multi_head_attention(s.X, s.Xkv, s.params(), {.out = Y.view()}, cache,
                                               {.mask = none, .if_all_masked = attn::all_masked_policy::throw_error}),
                    attn::domain_error);
  REQUIRE(Y(3, 3) == 7.0);
}

// Fixed sizes that disagree do not compile (a requires that is false, as in test_vector.cpp).
template <class X, class W>
constexpr bool can_self_attend = requires(X x, W w) { attn::self_attention(x, w, w, w); };
template <class Q, class K, class V>
constexpr bool can_sdpa = requires(Q q, K k, V v) { attn::scaled_dot_product_attention(q, k, v); };
static_assert(can_self_attend<Matrix<double, 3, 3>, Matrix<double, 3, 2>>);
static_assert(!can_self_attend<Matrix<double, 3, 3>, Matrix<double, 2, 2>>);  // X's columns ≠ W's rows
static_assert(can_self_attend<Matrix<double>, Matrix<double, 2, 2>>);          // checked at run time
static_assert(can_sdpa<Matrix<double, 3, 4>, Matrix<double, 5, 4>, Matrix<double, 5, 2>>);
static_assert(!can_sdpa<Matrix<double, 3, 4>, Matrix<double, 5, 3>, Matrix<double, 5, 2>>);  // d_q ≠ d_k
static_assert(!can_sdpa<Matrix<double, 3, 4>, Matrix<double, 5, 4>, Matrix<double, 6, 2>>);  // keys ≠ values

TEST_CASE("cross_attention takes the scale as a score (E3's map is cross-attention with dot)", "[heads]") {
  // queries from the Hindi side, keys and values from English (W11): E3's scores with dot
  const Matrix<double, 2, 3> Hindi{{2, 0.5, 0}, {0, 0.5, 2}};
  const Matrix<double, 3, 3> English{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const Matrix<double, 3, 3> I{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const auto r = attn::cross_attention(Hindi, English, I, I, I, {}, attn::dot);
  const auto a = attn::align(Hindi, English, attn::dot);
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t j = 0; j < 3; ++j) REQUIRE_THAT(r.maps(t, j), Catch::Matchers::WithinAbs(a.weights(t, j), 1e-15));
  const auto scaled = attn::cross_attention(Hindi, English, I, I, I);  // 1/√3
  REQUIRE(scaled.maps(0, 0) < r.maps(0, 0));
}

// Fixed sizes in constant evaluation (issue 21: the small cases stay constexpr): W3's sentence
// with one head and W7's two heads, evaluated by the compiler and compared with the run-time
// call to the bit. W3's row "drink" by hand: q = (0, 1), keys (2, 0), (1.5, 1.5), (0, 2), so the
// scores over √2 are (0, 1.5/√2, √2) = (0, 1.0607, 1.4142) and the weights
// (1, 2.888, 4.113) / 8.001 = (0.125, 0.361, 0.514).
namespace constant_w3 {
constexpr Matrix<double, 3, 3> X{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
constexpr Matrix<double, 3, 2> W_Q{{1, 0}, {0, 1}, {1, 1}};
constexpr Matrix<double, 3, 2> W_K{{2, 0}, {1.5, 1.5}, {0, 2}};
constexpr Matrix<double, 3, 2> W_V{{1, 0}, {1, 1}, {0, 1}};
constexpr Matrix<double, 3, 6> W_Q2{{0, 0, 0, 5, 0, 0}, {5, 0, 0, 0, 5, 0}, {0, 5, 0, 0, 0, 5}};
constexpr Matrix<double, 3, 6> W_K2{{1, 0, 0, 1, 0, 0}, {0, 1, 0, 0, 1, 0}, {0, 0, 1, 0, 0, 1}};
constexpr Matrix<double, 6, 3> W_O2{{0.5, 0, 0}, {0, 0.5, 0}, {0, 0, 0.5}, {0.5, 0, 0}, {0, 0.5, 0}, {0, 0, 0.5}};
}  // namespace constant_w3

TEST_CASE("self_attention on fixed sizes runs in constant evaluation: W3 and W7", "[heads][constexpr]") {
  using namespace constant_w3;
  constexpr auto one = attn::self_attention(X, W_Q, W_K, W_V);
  static_assert(one.maps(1, 0) > 0.1245 && one.maps(1, 0) < 0.1255);
  static_assert(one.maps(1, 1) > 0.3605 && one.maps(1, 1) < 0.3615);
  static_assert(one.maps(1, 2) > 0.5135 && one.maps(1, 2) < 0.5145);
  constexpr auto two = attn::self_attention<2>(X, W_Q2, W_K2, W_K2, W_O2);
  // every row of both heads' maps sums to 1 within 4 ulp (three terms and a division)
  constexpr auto row_sum = [](const auto& maps, std::size_t r) { return maps(r, 0) + maps(r, 1) + maps(r, 2); };
  static_assert(row_sum(two.maps, 0) > 1 - 1e-15 && row_sum(two.maps, 0) < 1 + 1e-15);
  static_assert(row_sum(two.maps, 5) > 1 - 1e-15 && row_sum(two.maps, 5) < 1 + 1e-15);
  const auto one_now = attn::self_attention(X, W_Q, W_K, W_V);
  const auto two_now = attn::self_attention<2>(X, W_Q2, W_K2, W_K2, W_O2);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      CHECK(one.maps(i, j) == one_now.maps(i, j));
      CHECK(two.out(i, j) == two_now.out(i, j));
    }
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 3; ++j) CHECK(two.maps(i, j) == two_now.maps(i, j));
}

// Biases in the fixed forms: a fixed length other than the weight's columns does not compile,
// nor another scalar, nor b_O without W_O; a dynamic length is checked at run time.
template <class X, class W, class B>
constexpr bool can_self_attend_biased =
    requires(X x, W w, B b) { attn::self_attention(x, w, w, w, attn::projection_biases{b, b, b}); };
template <class X, class W, class B>
constexpr bool can_self_attend_with_b_O =
    requires(X x, W w, B b) { attn::self_attention(x, w, w, w, attn::projection_biases{b, b, b, b}); };
static_assert(can_self_attend_biased<Matrix<double, 3, 3>, Matrix<double, 3, 2>, attn::Vector<double, 2>>);
static_assert(!can_self_attend_biased<Matrix<double, 3, 3>, Matrix<double, 3, 2>, attn::Vector<double, 3>>);
static_assert(!can_self_attend_biased<Matrix<double, 3, 3>, Matrix<double, 3, 2>, attn::Vector<float, 2>>);
static_assert(can_self_attend_biased<Matrix<double, 3, 3>, Matrix<double, 3, 2>, std::vector<double>>);  // run time
static_assert(!can_self_attend_with_b_O<Matrix<double, 3, 3>, Matrix<double, 3, 2>, attn::Vector<double, 2>>);
template <class X, class W, class WO, class BO>
constexpr bool can_self_attend_2_biased = requires(X x, W w, WO wo, BO bo, attn::Vector<double, 4> b) {
  attn::self_attention<2>(x, w, w, w, wo, attn::projection_biases{b, b, b, bo});
};
static_assert(can_self_attend_2_biased<Matrix<double, 3, 3>, Matrix<double, 3, 4>, Matrix<double, 4, 3>, attn::Vector<double, 3>>);
static_assert(!can_self_attend_2_biased<Matrix<double, 3, 3>, Matrix<double, 3, 4>, Matrix<double, 4, 3>, attn::Vector<double, 4>>);

TEST_CASE("self_attention and cross_attention take biases: every step, multi_head_attention's bits", "[heads][biases]") {
  // W3's X and weights with biases; h = 2 heads of d_k = 2, d_v = 1 and W_O for the <2> forms
  const Matrix<double, 3, 3> X{{1, 0, 0}, {0, 1, 0}, {0.5, 0.5, 1}};
  const Matrix<double, 4, 2> X_kv{{1, 0}, {0, 1}, {1, 1}, {-0.5, 2}};
  const Matrix<double, 3, 2> W_Q{{1, 0}, {0, 1}, {1, 1}}, W_K{{2, 0}, {1.5, 1.5}, {0, 2}}, W_V{{1, 0}, {1, 1}, {0, 1}};
  const Matrix<double, 3, 4> W_Q2{{1, 0, 0.5, 0}, {0, 1, 0, 0.5}, {1, 1, -1, 0}}, W_K2{{2, 0, 0, 1}, {1.5, 1.5, 1, 0}, {0, 2, 0.5, 0.5}};
  const Matrix<double, 2, 4> W_Qc{{1, 0, 0.5, 0}, {0, 1, 0, 0.5}};  // cross: W_K, W_V read X_kv's 2 columns
  const Matrix<double, 2, 4> W_Kc{{2, 0, 0, 1}, {1.5, 1.5, 1, 0}};
  const Matrix<double, 2, 2> W_Vc{{1, 0}, {1, 1}};
  const Matrix<double, 3, 2> W_V2{{1, 0}, {1, 1}, {0, 1}};
  const Matrix<double, 2, 3> W_O{{1, 0.5, 0}, {0, 1, -1}};
  const attn::Vector<double, 2> b2{0.25, -0.5};
  const attn::Vector<double, 4> b4{0.5, -0.25, 1, 0.125};
  const attn::Vector<double, 3> bO{-1, 0.5, 2};
  const attn::options opt{.beta = 0.75};
  const auto same = [](const auto& a, const auto& b) {
    REQUIRE(a.rows() == b.rows());
    REQUIRE(a.cols() == b.cols());
    for (std::size_t i = 0; i < a.rows(); ++i)
      for (std::size_t j = 0; j < a.cols(); ++j) REQUIRE(a(i, j) == b(i, j));
  };
  // Q = X W_Q + b_Q by hand: row 2 is (0.5 + 1, 0.5 + 1) + (0.25, -0.5)
  const auto one = attn::self_attention(X, W_Q, W_K, W_V, attn::projection_biases{b2, b2, b2}, opt);
  REQUIRE(one.queries(2, 0) == 1.75);
  REQUIRE(one.queries(2, 1) == 1.0);
  REQUIRE(one.values(0, 0) == 1.25);  // V = X W_V + b_V: (1, 0) + (0.25, -0.5)
  const auto unbiased = attn::self_attention(X, W_Q, W_K, W_V, opt);
  REQUIRE(one.out(0, 0) != unbiased.out(0, 0));
  const auto check = [&](const auto& r, const auto& Xm, const auto& Xkvm, const attn::multi_head_parameters<double>& p) {
    Matrix<double> Y(Xm.rows(), r.out.cols()), maps(p.heads * Xm.rows(), Xkvm.rows());
    attn::multi_head_cache<double> cache;
    attn::multi_head_attention(Xm, Xkvm, p, {.out = Y.view(), .maps = maps.view()}, cache, opt);
    same(r.queries, cache.queries);
    same(r.keys, cache.keys);
    same(r.values, cache.values);
    same(r.heads_out, cache.heads_out);
    same(r.maps, maps);
    same(r.out, Y);
  };
  check(one, X, X, {.W_Q = W_Q, .W_K = W_K, .W_V = W_V, .b_Q = b2, .b_K = b2, .b_V = b2});
  const auto two = attn::self_attention<2>(X, W_Q2, W_K2, W_V2, W_O, attn::projection_biases{b4, b4, b2, bO}, opt);
  check(two, X, X, {.W_Q = W_Q2, .W_K = W_K2, .W_V = W_V2, .W_O = W_O, .b_Q = b4, .b_K = b4, .b_V = b2, .b_O = bO, .heads = 2});
  // no_bias leaves one out; a std::vector is checked at run time
  const std::vector<double> v2{0.25, -0.5};
  const Matrix<double, 3, 2> Xc{{1, 0}, {0, 1}, {0.5, 0.5}};
  const auto cross = attn::cross_attention(Xc, X_kv, W_Vc, W_Vc, W_Vc, attn::projection_biases{v2, attn::no_bias{}, b2},
                                           opt, attn::dot);
  check(cross, Xc, X_kv, {.W_Q = W_Vc, .W_K = W_Vc, .W_V = W_Vc, .b_Q = v2, .b_V = b2, .score = attn::dot});
  const auto cross2 = attn::cross_attention<2>(Xc, X_kv, W_Qc, W_Kc, W_Vc, W_O,
                                               attn::projection_biases{b4, b4, attn::no_bias{}, bO}, opt);
  check(cross2, Xc, X_kv, {.W_Q = W_Qc, .W_K = W_Kc, .W_V = W_Vc, .W_O = W_O, .b_Q = b4, .b_K = b4, .b_O = bO, .heads = 2});
  // dynamic lengths: dimension_error naming the bias and both sizes
  const std::vector<double> v3{1, 2, 3};
  REQUIRE_THROWS_WITH((void)attn::self_attention(X, W_Q, W_K, W_V, attn::projection_biases{v2, v3, v2}),
                      "attn::self_attention: size of b_K is 3 but columns of W_K is 2");
  REQUIRE_THROWS_WITH((void)attn::cross_attention<2>(Xc, X_kv, W_Qc, W_Kc, W_Vc, W_O,
                                                     attn::projection_biases{b4, b4, b2, v2}),
                      "attn::cross_attention: size of b_O is 2 but columns of Y is 3");
}

TEST_CASE("self_attention with biases runs in constant evaluation", "[heads][biases][constexpr]") {
  using namespace constant_w3;
  static constexpr attn::Vector<double, 2> b{0.25, -0.5};
  constexpr auto r = attn::self_attention(X, W_Q, W_K, W_V, attn::projection_biases{b, b, b});
  static_assert(r.queries(2, 0) == 1.25 && r.queries(2, 1) == 0.5);  // (1, 1) + (0.25, -0.5)
  const auto now = attn::self_attention(X, W_Q, W_K, W_V, attn::projection_biases{b, b, b});
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) CHECK(r.maps(i, j) == now.maps(i, j));
}

TEMPLATE_TEST_CASE("grouped-query attention is multi-head attention with each key/value head repeated",
                   "[heads][gqa]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(31);
  std::normal_distribution<double> normal(0, 0.7);
  const auto random = [&](std::size_t r, std::size_t c) {
    attn::Matrix<T> m(r, c);
    for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(normal(rng));
    return m;
  };
  const std::size_t B = 2, tq = 9, d_model = 6, dk = 3, dv = 2, d_out = 5;
  for (const auto& [h, kvh] : {std::pair<std::size_t, std::size_t>{4, 2}, {4, 1}, {3, 1}, {6, 3}}) {
    INFO("h = " << h << ", h_kv = " << kvh);
    const std::size_t group = h / kvh;
    const attn::Matrix<T> X = random(B * tq, d_model), WQ = random(d_model, h * dk), WK = random(d_model, kvh * dk),
                          WV = random(d_model, kvh * dv), WO = random(h * dv, d_out), bK = random(1, kvh * dk),
                          bV = random(1, kvh * dv);
    // the same weights with key/value head g's columns repeated for its h / h_kv query heads
    attn::Matrix<T> WKr(d_model, h * dk), WVr(d_model, h * dv), bKr(1, h * dk), bVr(1, h * dv);
    for (std::size_t i = 0; i < h; ++i) {
      const std::size_t g = i / group;
      for (std::size_t r = 0; r < d_model; ++r) {
        for (std::size_t c = 0; c < dk; ++c) WKr(r, i * dk + c) = WK(r, g * dk + c);
        for (std::size_t c = 0; c < dv; ++c) WVr(r, i * dv + c) = WV(r, g * dv + c);
      }
      for (std::size_t c = 0; c < dk; ++c) bKr(0, i * dk + c) = bK(0, g * dk + c);
      for (std::size_t c = 0; c < dv; ++c) bVr(0, i * dv + c) = bV(0, g * dv + c);
    }
    const attn::multi_head_parameters<T> gqa{.W_Q = WQ, .W_K = WK, .W_V = WV, .W_O = WO,
                                             .b_K = bK.row(0), .b_V = bV.row(0), .heads = h, .kv_heads = kvh};
    const attn::multi_head_parameters<T> mha{.W_Q = WQ, .W_K = WKr, .W_V = WVr, .W_O = WO,
                                             .b_K = bKr.row(0), .b_V = bVr.row(0), .heads = h};
    const attn::options opt{.beta = 1.2, .causal = true};
    const auto a = attn::multi_head_attention(X, gqa, opt, B);
    const auto b = attn::multi_head_attention(X, mha, opt, B);
    REQUIRE(a.cache.keys.cols() == kvh * dk);  // the cache holds h_kv heads' keys and values only
    REQUIRE(a.cache.values.cols() == kvh * dv);
    for (std::size_t i = 0; i < a.out.size(); ++i) REQUIRE(a.out.data()[i] == b.out.data()[i]);
  }
  // h_kv must divide h
  const attn::Matrix<T> X(4, 6), W(6, 6), WK(6, 4);
  REQUIRE_THROWS_WITH(attn::multi_head_attention(X, {.W_Q = W, .W_K = WK, .W_V = WK, .heads = 3, .kv_heads = 2}),
                      "attn::multi_head_attention: 2 key/value heads do not divide the 3 heads");
  REQUIRE_THROWS_WITH(attn::multi_head_attention(X, {.W_Q = W, .W_K = W, .W_V = WK, .heads = 6, .kv_heads = 2}),
                      "attn::multi_head_attention: columns of W_K is 6 but key/value heads x a head's key size is 2");
}

TEST_CASE("cross_attention<H> with W_O: every step, the numbers of multi_head_attention", "[heads]") {
  // 2 decoder words over 3 encoder notes, h = 2 heads of d_k = d_v = 1, W_O 2 × 2; fixed sizes
  const attn::Matrix<double, 2, 2> X{{1, 0}, {0.5, -1}};
  const attn::Matrix<double, 3, 3> X_kv{{1, 0, 0}, {0, 1, 0}, {0.5, 0.5, 1}};
  const attn::Matrix<double, 2, 2> W_Q{{1, 0.5}, {-0.5, 1}};
  const attn::Matrix<double, 3, 2> W_K{{1, 0}, {0, 1}, {1, 1}}, W_V{{0.5, 1}, {1, 0}, {0, 2}};
  const attn::Matrix<double, 2, 2> W_O{{1, 2}, {0, 1}};
  const auto r = attn::cross_attention<2>(X, X_kv, W_Q, W_K, W_V, W_O);
  static_assert(std::is_same_v<decltype(r.maps), attn::Matrix<double, 4, 3>>);  // head i's in rows [2i, 2i + 2)
  const auto m = attn::multi_head_attention(X, X_kv, {.W_Q = W_Q.view(), .W_K = W_K.view(), .W_V = W_V.view(),
                                                      .W_O = W_O.view(), .heads = 2});
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t i = 0; i < 2; ++i) REQUIRE(r.out(t, i) == m.out(t, i));
  // head 1 of word 0 by hand: q = 0.5, keys X_kv·(0, 1, 1) = (0, 1, 1.5), scale 1/√1
  REQUIRE_THAT(r.maps(2, 0), Catch::Matchers::WithinRel(1 / (1 + std::exp(0.5) + std::exp(0.75)), 1e-15));
}

TEST_CASE("multi_head_attention: an output over the rows X_kv has past X (same pointer) is refused",
          "[heads][errors][overlap]") {
  // one buffer B of 4 rows: cross-attention with X its first 2 rows and X_kv all 4 (the same data
  // pointer, more rows); Y over B's last 2 rows lies over X_kv only. X_kv was left out of the
  // check when it started where X does, so Y was accepted and overwrote the keys it read.
  Matrix<double> B{{0.5, -1}, {1, 0.25}, {-0.5, 2}, {1.5, 1}};
  const Matrix<double> before = B;
  const Matrix<double> W{{1, 0.5}, {-0.25, 1}};
  const attn::multi_head_parameters<double> p{.W_Q = W.view(), .W_K = W.view(), .W_V = W.view()};
  const attn::MatrixView<const double> rows01(B.data(), 2, 2), rows0123(B.data(), 4, 2);
  attn::multi_head_cache<double> cache;
  const auto unchanged = [&] { return std::equal(B.data(), B.data() + 8, before.data()); };
  REQUIRE_THROWS_WITH(attn::multi_head_attention(rows01, rows0123, p,
                                                 {.out = attn::MatrixView<double>(B.data() + 4, 2, 2)}, cache),
                      "attn::multi_head_attention: Y overlaps X_kv");
  REQUIRE(unchanged());
  // the other order: X_kv the first row, X the first 2; Y over X's row past X_kv is X's
  REQUIRE_THROWS_WITH(attn::multi_head_attention(attn::MatrixView<const double>(B.data(), 2, 2),
                                                 attn::MatrixView<const double>(B.data(), 1, 2), p,
                                                 {.out = attn::MatrixView<double>(B.data() + 2, 2, 2)}, cache),
                      "attn::multi_head_attention: Y overlaps X");
  REQUIRE(unchanged());
  // the backward: ∂L/∂X_kv and ∂L/∂X over X_kv's rows past X
  Matrix<double> Y(2, 2);
  attn::multi_head_attention(rows01, rows0123, p, {.out = Y.view()}, cache);
  const Matrix<double> dY(2, 2, 1.0);
  REQUIRE_THROWS_WITH(attn::multi_head_attention_backward(
                          rows01, rows0123, p, cache, dY,
                          {.kv_inputs = attn::MatrixView<double>(B.data(), 4, 2)}),
                      "attn::multi_head_attention_backward: dL/dX_kv overlaps X");
  REQUIRE_THROWS_WITH(attn::multi_head_attention_backward(
                          rows01, rows0123, p, cache, dY, {.inputs = attn::MatrixView<double>(B.data() + 4, 2, 2)}),
                      "attn::multi_head_attention_backward: dL/dX overlaps X_kv");
  REQUIRE(unchanged());
  // X_kv in a buffer of its own, ∂L/∂X_kv over X_kv's rows past X: named after X_kv
  REQUIRE_THROWS_WITH(attn::multi_head_attention_backward(
                          rows01, rows0123, p, cache, dY, {.W_V = attn::MatrixView<double>(B.data() + 4, 2, 2)}),
                      "attn::multi_head_attention_backward: dL/dW_V overlaps X_kv");
  REQUIRE(unchanged());
}

TEMPLATE_TEST_CASE("multi_head_attention: a scale that is not finite as a T is refused, forward and backward",
                   "[heads][errors]", float, double, long double) {
  using T = TestType;
  const Matrix<T> X(3, 2, T(0.5)), W(2, 2, T(0.25));
  attn::multi_head_parameters<T> p{.W_Q = W.view(), .W_K = W.view(), .W_V = W.view()};
  attn::multi_head_cache<T> cache;
  Matrix<T> Y(3, 2, T(7));
  attn::multi_head_attention(X, p, {.out = Y.view()}, cache);  // a cache of these shapes
  Matrix<T> dX(3, 2, T(7));
  const Matrix<T> dY(3, 2, T(1));
  const std::string as_float = std::is_same_v<T, float> ? " as a float" : "";
  std::vector<double> bad{std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity()};
  if (std::is_same_v<T, float>) bad.push_back(1e39);  // finite as a double, inf as a float
  for (const double scale : bad) {
    INFO("scale " << scale);
    p.score = attn::dot_scaled_by{scale};
    std::fill(Y.data(), Y.data() + Y.size(), T(7));
    REQUIRE_THROWS_WITH(attn::multi_head_attention(X, p, {.out = Y.view()}, cache),
                        "attn::multi_head_attention: the scale of attn::dot_scaled_by must be finite" + as_float);
    REQUIRE_THROWS_WITH(attn::multi_head_attention_backward(X, p, cache, dY, {.inputs = dX.view()}),
                        "attn::multi_head_attention_backward: the scale of attn::dot_scaled_by must be finite" +
                            as_float);
    REQUIRE(Y(2, 1) == T(7));
    REQUIRE(dX(2, 1) == T(7));
  }
  // beyond float's range, a double and a long double take it: the rows are the rules' (finite)
  if (!std::is_same_v<T, float>) {
    p.score = attn::dot_scaled_by{1e39};
    attn::multi_head_attention(X, p, {.out = Y.view()}, cache);
    REQUIRE(Y(2, 1) == Y(2, 1));
  }
}

// ---------------------------------------------------------------------------------------------
// Weights in PyTorch's layout (out × in), read where they lie
// ---------------------------------------------------------------------------------------------

namespace {

// torch.nn.MultiheadAttention(E, h, batch_first=True)'s forward by its own formulas, in long
// double, on its state as PyTorch holds it (row-major; every weight out × in): q = x W_qᵀ + b_q
// with W_q rows [0, E) of in_proj_weight (W_k the next E, W_v the last), per head
// softmax(q_i k_iᵀ/√d) v_i, y = z out_proj.weightᵀ + out_proj.bias; causal within each sentence.
template <class T>
std::vector<long double> torch_forward(const std::vector<T>& x, std::size_t B, std::size_t tq, std::size_t E,
                                       std::size_t h, const std::vector<T>& in_w, const std::vector<T>& in_b,
                                       const std::vector<T>& out_w, const std::vector<T>& out_b, bool causal) {
  const std::size_t rows = B * tq, d = E / h;
  std::vector<long double> qkv(rows * 3 * E);  // row t: q, k, v
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t o = 0; o < 3 * E; ++o) {
      long double acc = in_b[o];
      for (std::size_t a = 0; a < E; ++a) acc += static_cast<long double>(in_w[o * E + a]) * x[t * E + a];
      qkv[t * 3 * E + o] = acc;
    }
  std::vector<long double> y(rows * E);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < tq; ++t) {
      std::vector<long double> z(E, 0);
      for (std::size_t i = 0; i < h; ++i) {
        const std::size_t seen = causal ? t + 1 : tq;
        std::vector<long double> w(seen);
        long double top = -std::numeric_limits<long double>::infinity(), sum = 0;
        for (std::size_t j = 0; j < seen; ++j) {
          long double s = 0;
          for (std::size_t c = 0; c < d; ++c)
            s += qkv[(b * tq + t) * 3 * E + i * d + c] * qkv[(b * tq + j) * 3 * E + E + i * d + c];
          w[j] = s / std::sqrt(static_cast<long double>(d));
          top = std::max(top, w[j]);
        }
        for (auto& v : w) sum += v = std::exp(v - top);
        for (std::size_t j = 0; j < seen; ++j)
          for (std::size_t c = 0; c < d; ++c) z[i * d + c] += w[j] / sum * qkv[(b * tq + j) * 3 * E + 2 * E + i * d + c];
      }
      for (std::size_t o = 0; o < E; ++o) {
        long double acc = out_b[o];
        for (std::size_t c = 0; c < E; ++c) acc += static_cast<long double>(out_w[o * E + c]) * z[c];
        y[(b * tq + t) * E + o] = acc;
      }
    }
  return y;
}

}  // namespace

TEMPLATE_TEST_CASE("multi_head_attention reads an nn.MultiheadAttention state where it lies (weights out x in)",
                   "[heads][layouts]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(1207);
  const std::size_t E = 8, h = 2, B = 2, tq = 5;
  std::vector<T> in_w = random_vector<T>(3 * E * E, rng), in_b = random_vector<T>(3 * E, rng),
                 out_w = random_vector<T>(E * E, rng), out_b = random_vector<T>(E, rng),
                 x = random_vector<T>(B * tq * E, rng);
  for (auto* w : {&in_w, &out_w})
    for (auto& v : *w) v /= static_cast<T>(2);
  const attn::MatrixView<const T> in_proj(in_w.data(), 3 * E, E), out_proj(out_w.data(), E, E);
  const std::span<const T> bias(in_b);
  const attn::multi_head_parameters<T> p{.W_Q = attn::transposed(in_proj.subrows(0, E)),
                                         .W_K = attn::transposed(in_proj.subrows(E, E)),
                                         .W_V = attn::transposed(in_proj.subrows(2 * E, E)),
                                         .W_O = attn::transposed(out_proj),
                                         .b_Q = bias.subspan(0, E),
                                         .b_K = bias.subspan(E, E),
                                         .b_V = bias.subspan(2 * E, E),
                                         .b_O = out_b,
                                         .heads = h};
  // the same memory seen as attn's W (in × out) column-major: the same layout, the same bits
  attn::multi_head_parameters<T> q = p;
  q.W_Q = attn::column_major(in_w.data(), E, E);
  q.W_K = attn::column_major(in_w.data() + E * E, E, E);
  q.W_V = attn::column_major(in_w.data() + 2 * E * E, E, E);
  q.W_O = attn::column_major(out_w.data(), E, E);
  // and the transposes copied into attn's own row-major layout
  Matrix<T> WQ(E, E), WK(E, E), WV(E, E), WO(E, E);
  for (std::size_t i = 0; i < E; ++i)
    for (std::size_t o = 0; o < E; ++o) {
      WQ(i, o) = in_w[o * E + i];
      WK(i, o) = in_w[(E + o) * E + i];
      WV(i, o) = in_w[(2 * E + o) * E + i];
      WO(i, o) = out_w[o * E + i];
    }
  attn::multi_head_parameters<T> copied = p;
  copied.W_Q = WQ.view();
  copied.W_K = WK.view();
  copied.W_V = WV.view();
  copied.W_O = WO.view();
  // The forward test's bound: the same sums of at most 8 O(1) terms per step (here in another
  // order, dot_rows against add_weighted_rows), each rounding relatively: 200 ε of max |Y|.
  const double eps = std::numeric_limits<T>::epsilon() * (std::is_same_v<T, long double> ? 2 : 1);
  const attn::MatrixView<const T> X(x.data(), B * tq, E);
  for (const bool causal : {false, true}) {
    INFO("causal " << causal);
    const auto want = torch_forward(x, B, tq, E, h, in_w, in_b, out_w, out_b, causal);
    long double top = 1;
    for (const long double y : want) top = std::max(top, std::abs(y));
    const attn::options opt{.causal = causal};
    const auto r = attn::multi_head_attention(X, p, opt, B);
    const auto by_columns = attn::multi_head_attention(X, q, opt, B);
    const auto by_copy = attn::multi_head_attention(X, copied, opt, B);
    const auto on_threads = attn::multi_head_attention(X, p, opt, B, 2);
    REQUIRE(on_threads.out == r.out);  // one thread's bits
    for (std::size_t k = 0; k < want.size(); ++k) {
      REQUIRE(std::abs(static_cast<long double>(r.out.data()[k]) - want[k]) <= 200 * eps * top);
      REQUIRE(std::abs(static_cast<long double>(by_copy.out.data()[k]) - want[k]) <= 200 * eps * top);
      REQUIRE(by_columns.out.data()[k] == r.out.data()[k]);
    }
  }
}

TEST_CASE("multi_head_attention: a weight neither of whose layouts is contiguous is refused, naming it",
          "[heads][layouts][errors]") {
  const Matrix<double> X{{1, 0}, {0, 1}};
  std::vector<double> w(16, 0.5);
  attn::Matrix<double> Y(2, 2, 7.0);
  attn::multi_head_cache<double> cache;
  const attn::multi_head_parameters<double> p{.W_Q = attn::StridedMatrixView<const double>(w.data(), 2, 2, 2, 3),
                                              .W_K = attn::MatrixView<const double>(w.data(), 2, 2),
                                              .W_V = attn::MatrixView<const double>(w.data(), 2, 2)};
  REQUIRE_THROWS_MATCHES(attn::multi_head_attention(X, p, {.out = Y.view()}, cache), attn::dimension_error,
                         Catch::Matchers::Message(
                             "attn::multi_head_attention: W_Q (2x2) has row stride 2 and column stride 3: "
                             "neither its rows nor its columns lie one number apart (row-major, or "
                             "column-major as PyTorch's out x in weight viewed by attn::transposed)"));
  REQUIRE(Y(0, 0) == 7.0);
}

TEMPLATE_TEST_CASE("self_attention reads weights in every layout where they lie", "[heads][layouts]", float, double) {
  // attn's W (in × out) row-major; PyTorch's (out × in) row-major: transposed(view); PyTorch's
  // column-major: transposed(column_major(…)), the memory of attn's row-major W (the same bits)
  using T = TestType;
  std::mt19937_64 rng(55);
  const std::size_t tq = 4, E = 6;
  const Matrix<T> X = random_matrix<T>(tq, E, rng), WQ = random_matrix<T>(E, E, rng, 0.5),
                  WK = random_matrix<T>(E, E, rng, 0.5), WV = random_matrix<T>(E, E, rng);
  const auto torch = [&](const Matrix<T>& W) {  // W's transpose, row-major: PyTorch's out × in
    Matrix<T> t(W.cols(), W.rows());
    for (std::size_t i = 0; i < W.rows(); ++i)
      for (std::size_t o = 0; o < W.cols(); ++o) t(o, i) = W(i, o);
    return t;
  };
  const Matrix<T> tQ = torch(WQ), tK = torch(WK), tV = torch(WV);
  const auto rows = attn::self_attention(X, WQ, WK, WV);
  const auto by_rows_of_torch = attn::self_attention(X, attn::transposed(tQ.view()), attn::transposed(tK.view()),
                                                     attn::transposed(tV.view()));
  const auto col_major_torch = [](const Matrix<T>& W) {  // attn's W's memory read as a column-major out × in
    return attn::transposed(attn::column_major(W.data(), W.cols(), W.rows()));
  };
  const auto by_columns_of_torch = attn::self_attention(X, col_major_torch(WQ), col_major_torch(WK), col_major_torch(WV));
  // the forward test's bound: the same sums of ≤ 6 terms in another order
  long double top = 1;
  for (std::size_t k = 0; k < rows.out.size(); ++k) top = std::max(top, std::abs(static_cast<long double>(rows.out.data()[k])));
  for (std::size_t k = 0; k < rows.out.size(); ++k) {
    REQUIRE(by_columns_of_torch.out.data()[k] == rows.out.data()[k]);
    REQUIRE(std::abs(static_cast<long double>(by_rows_of_torch.out.data()[k]) - rows.out.data()[k]) <=
            200 * static_cast<long double>(std::numeric_limits<T>::epsilon()) * top);
  }
}
