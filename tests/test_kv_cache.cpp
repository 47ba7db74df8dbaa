// Decoding with a key/value cache (attn/kv_cache.hpp): the rows of a cached step equal those of
// multi_head_attention over the whole sequence (causal), row for row, for prompts of different
// lengths, steps of one row and of several, grouped-query attention, biases and W_O, in float,
// double and long double; a full cache, masks and shapes that do not fit are refused before
// anything is written.
#include <cstddef>
#include <random>
#include <utility>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"
#include "random_data.hpp"

using attn::Matrix;

namespace {

// N(0, 0.6²) numbers: the cache's inputs and weights
template <class T>
Matrix<T> cache_matrix(std::size_t r, std::size_t c, std::mt19937_64& rng) {
  return attn_test::random_matrix<T>(r, c, rng, 0.6);
}

// The weights of one layer: h heads of d_k = 3, d_v = 2 over h_kv key/value heads.
template <class T>
struct layer {
  std::size_t d_model, h, kvh, dk = 3, dv = 2, d_out = 5;
  Matrix<T> WQ, WK, WV, WO, b;
  layer(std::size_t dm, std::size_t heads, std::size_t kv_heads, std::mt19937_64& rng)
      : d_model(dm), h(heads), kvh(kv_heads), WQ(cache_matrix<T>(dm, heads * 3, rng)),
        WK(cache_matrix<T>(dm, kv_heads * 3, rng)), WV(cache_matrix<T>(dm, kv_heads * 2, rng)),
        WO(cache_matrix<T>(heads * 2, 5, rng)), b(cache_matrix<T>(4, heads * 3 + 5, rng)) {}
  attn::multi_head_parameters<T> params() const {
    return {.W_Q = WQ, .W_K = WK, .W_V = WV, .W_O = WO,
            .b_Q = std::span<const T>(b.row(0).data(), h * dk),
            .b_K = std::span<const T>(b.row(1).data(), kvh * dk),
            .b_V = std::span<const T>(b.row(2).data(), kvh * dv),
            .b_O = std::span<const T>(b.row(3).data(), d_out),
            .heads = h,
            .kv_heads = kvh};
  }
};

// Rows [r0, r0 + count) of m as a view.
template <class T>
attn::MatrixView<const T> rows_of(const Matrix<T>& m, std::size_t r0, std::size_t count) {
  return attn::MatrixView<const T>(m.row(r0).data(), count, m.cols());
}

}  // namespace

TEMPLATE_TEST_CASE("multi_head_attention_cached: each step's rows are the whole sequence's, row for row",
                   "[kv_cache][heads]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(4242);
  for (const auto& [h, kvh] : {std::pair<std::size_t, std::size_t>{1, 1}, {4, 4}, {4, 2}, {4, 1}}) {
    const layer<T> w(6, h, kvh, rng);
    const auto p = w.params();
    // two sequences: prompts of 7 and 12 rows, then steps of 1, 1, 3 and 1 rows for both
    const std::size_t prompt[2] = {7, 12}, steps[] = {1, 1, 3, 1}, capacity = 20;
    std::size_t total[2] = {prompt[0], prompt[1]};
    for (const std::size_t t : steps) {
      total[0] += t;
      total[1] += t;
    }
    const Matrix<T> X[2] = {cache_matrix<T>(total[0], w.d_model, rng), cache_matrix<T>(total[1], w.d_model, rng)};
    attn::kv_cache<T> cache(2, capacity, kvh, w.dk, w.dv);
    Matrix<T> got[2] = {Matrix<T>(total[0], w.d_out), Matrix<T>(total[1], w.d_out)};
    for (std::size_t b = 0; b < 2; ++b) {
      Matrix<T> Y(prompt[b], w.d_out);
      attn::multi_head_attention_cached(rows_of(X[b], 0, prompt[b]), p, cache, b, Y.view());
      for (std::size_t i = 0; i < Y.size(); ++i) got[b].data()[i] = Y.data()[i];
      REQUIRE(cache.length(b) == prompt[b]);
    }
    std::size_t at[2] = {prompt[0], prompt[1]};
    for (const std::size_t t : steps) {  // both sequences at once: B·t rows
      Matrix<T> Xs(2 * t, w.d_model), Y(2 * t, w.d_out);
      for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t r = 0; r < t; ++r)
          for (std::size_t c = 0; c < w.d_model; ++c) Xs(b * t + r, c) = X[b](at[b] + r, c);
      attn::multi_head_attention_cached(Xs, p, cache, Y.view());
      for (std::size_t b = 0; b < 2; ++b) {
        for (std::size_t r = 0; r < t; ++r)
          for (std::size_t c = 0; c < w.d_out; ++c) got[b](at[b] + r, c) = Y(b * t + r, c);
        at[b] += t;
        REQUIRE(cache.length(b) == at[b]);
      }
    }
    for (std::size_t b = 0; b < 2; ++b) {
      const auto whole = attn::multi_head_attention(X[b], p, {.causal = true});
      INFO("h = " << h << ", h_kv = " << kvh << ", sequence " << b);
      // the same kernels over the same rows in the same order: equal numbers (a −0 may be +0)
      for (std::size_t i = 0; i < whole.out.size(); ++i) REQUIRE(got[b].data()[i] == whole.out.data()[i]);
      // and the cache holds the whole forward's keys and values
      for (std::size_t r = 0; r < total[b]; ++r)
        for (std::size_t c = 0; c < kvh * w.dk; ++c) REQUIRE(cache.keys(b)(r, c) == whole.cache.keys(r, c));
    }
  }
}

TEMPLATE_TEST_CASE("multi_head_attention_cached with rotary positions: each step's rows are the whole "
                   "sequence's", "[kv_cache][heads][rope]", float, double) {
  // RoPE turns a new row at its place in its sequence (the cache's length, then one more per row),
  // the whole causal forward turns row t at t: the same angles, the same numbers
  using T = TestType;
  std::mt19937_64 rng(4343);
  const std::size_t dm = 6, h = 2, kvh = 1, dk = 4, dv = 2, d_out = 3;
  const Matrix<T> WQ = cache_matrix<T>(dm, h * dk, rng), WK = cache_matrix<T>(dm, kvh * dk, rng),
                  WV = cache_matrix<T>(dm, kvh * dv, rng), WO = cache_matrix<T>(h * dv, d_out, rng);
  for (const auto form : {attn::rotary_form::interleaved, attn::rotary_form::half_split}) {
    const attn::multi_head_parameters<T> p{.W_Q = WQ, .W_K = WK, .W_V = WV, .W_O = WO, .heads = h, .kv_heads = kvh,
                                           .positions = attn::rotary{.form = form}};
    const std::size_t total = 9;
    const Matrix<T> X = cache_matrix<T>(total, dm, rng);
    attn::kv_cache<T> cache(1, 16, kvh, dk, dv);
    Matrix<T> got(total, d_out);
    for (const auto& [r0, count] : {std::pair<std::size_t, std::size_t>{0, 4}, {4, 1}, {5, 3}, {8, 1}}) {
      Matrix<T> Y(count, d_out);
      attn::multi_head_attention_cached(rows_of(X, r0, count), p, cache, Y.view());
      for (std::size_t r = 0; r < count; ++r)
        for (std::size_t c = 0; c < d_out; ++c) got(r0 + r, c) = Y(r, c);
    }
    const auto whole = attn::multi_head_attention(X, p, {.causal = true});
    for (std::size_t i = 0; i < whole.out.size(); ++i) CHECK(got.data()[i] == whole.out.data()[i]);
    // and without the positions the numbers differ (the positions did something)
    attn::multi_head_parameters<T> plain = p;
    plain.positions.reset();
    const auto unturned = attn::multi_head_attention(X, plain, {.causal = true});
    std::size_t same = 0;
    for (std::size_t i = d_out; i < whole.out.size(); ++i) same += whole.out.data()[i] == unturned.out.data()[i] ? 1 : 0;
    CHECK(same < whole.out.size() / 2);
  }
}

TEST_CASE("multi_head_attention_cached: a full cache, masks and shapes that disagree are refused, nothing written",
          "[kv_cache][errors]") {
  std::mt19937_64 rng(5);
  const layer<double> w(6, 4, 2, rng);
  const auto p = w.params();
  attn::kv_cache<double> cache(2, 4, 2, 3, 2);
  const Matrix<double> X3 = cache_matrix<double>(6, 6, rng);
  Matrix<double> Y(6, 5, 7.0);
  attn::multi_head_attention_cached(X3, p, cache, Y.view());  // 3 rows each: 1 row left
  const Matrix<double> keys_before(cache.keys(1));
  Matrix<double> Y2(4, 5, 7.0);
  REQUIRE_THROWS_WITH(attn::multi_head_attention_cached(rows_of(X3, 0, 4), p, cache, Y2.view()),
                      "attn::multi_head_attention_cached: the cache is full: sequence 0 holds 3 of 4 rows, and 2 "
                      "more do not fit");
  const std::vector<char> keys(4, 1);
  REQUIRE_THROWS_WITH(attn::multi_head_attention_cached(rows_of(X3, 0, 2), p, cache, attn::MatrixView<double>(Y2.data(), 2, 5),
                                                        {.mask = keys, .causal = true}),
                      "attn::multi_head_attention_cached: a cached call takes no key or row mask (the cache's "
                      "lengths say which keys each sequence has; causal gives the offset)");
  attn::kv_cache<double> other(2, 4, 4, 3, 2);
  REQUIRE_THROWS_WITH(attn::multi_head_attention_cached(rows_of(X3, 0, 2), p, other, attn::MatrixView<double>(Y2.data(), 2, 5)),
                      "attn::multi_head_attention_cached: the cache's key/value heads is 4 but key/value heads is 2");
  REQUIRE_THROWS_WITH(attn::multi_head_attention_cached(rows_of(X3, 0, 1), p, cache, 2, attn::MatrixView<double>(Y2.data(), 1, 5)),
                      "attn::multi_head_attention_cached: sequence 2 is out of range for 2 sequences");
  for (std::size_t i = 0; i < Y2.size(); ++i) REQUIRE(Y2.data()[i] == 7.0);
  REQUIRE(cache.length(0) == 3);
  REQUIRE(cache.length(1) == 3);
  const Matrix<double> keys_after(cache.keys(1));
  for (std::size_t i = 0; i < keys_after.size(); ++i) REQUIRE(keys_after.data()[i] == keys_before.data()[i]);
  // one more row each fits; then clear(b) empties a sequence for a new one
  attn::multi_head_attention_cached(rows_of(X3, 0, 2), p, cache, attn::MatrixView<double>(Y2.data(), 2, 5));
  REQUIRE(cache.length(0) == 4);
  cache.truncate(0, 3);  // steps taken back: the next rows go to rows 3 and 2 again
  cache.truncate(1, 2);
  REQUIRE(cache.length(1) == 2);
  REQUIRE_THROWS_WITH(cache.truncate(1, 3), "attn::kv_cache::truncate: sequence 1 holds 2 rows, not 3");
  attn::multi_head_attention_cached(rows_of(X3, 0, 2), p, cache, attn::MatrixView<double>(Y2.data(), 2, 5));
  REQUIRE(cache.length(1) == 3);
  cache.clear(0);
  REQUIRE(cache.length(0) == 0);
  REQUIRE(cache.length(1) == 3);
  REQUIRE_THROWS_WITH(attn::kv_cache<float>(2, 0, 1, 1, 1), "attn::kv_cache: the capacity is empty");
}

TEMPLATE_TEST_CASE("cached_attention: already projected rows over the cache are the whole sequence's heads",
                   "[kv_cache][heads]", float, double) {
  using T = TestType;
  std::mt19937_64 rng(77);
  const layer<T> w(6, 4, 2, rng);
  const auto p = w.params();
  const std::size_t L = 11, prompt = 6;
  const Matrix<T> X = cache_matrix<T>(L, w.d_model, rng);
  const auto whole = attn::multi_head_attention(X, p, {.causal = true});  // its cache: Q, K, V, Z
  attn::kv_cache<T> cache(1, 16, 2, w.dk, w.dv);
  Matrix<T> Z(L, w.h * w.dv);
  const auto part = [](const Matrix<T>& m, std::size_t r0, std::size_t n) { return rows_of(m, r0, n); };
  attn::cached_attention(part(whole.cache.queries, 0, prompt), part(whole.cache.keys, 0, prompt),
                         part(whole.cache.values, 0, prompt), cache, attn::MatrixView<T>(Z.data(), prompt, Z.cols()), 4);
  for (std::size_t r = prompt; r < L; ++r)
    attn::cached_attention(part(whole.cache.queries, r, 1), part(whole.cache.keys, r, 1),
                           part(whole.cache.values, r, 1), cache, attn::MatrixView<T>(Z.row(r).data(), 1, Z.cols()), 4);
  REQUIRE(cache.length(0) == L);
  for (std::size_t i = 0; i < Z.size(); ++i) REQUIRE(Z.data()[i] == whole.cache.heads_out.data()[i]);
  REQUIRE_THROWS_WITH(attn::cached_attention(part(whole.cache.queries, 0, 1), part(whole.cache.keys, 0, 1),
                                             part(whole.cache.values, 0, 1), cache,
                                             attn::MatrixView<T>(Z.data(), 1, Z.cols()), 3),
                      "attn::cached_attention: the cache's 2 key/value heads do not divide the 3 heads");
}
