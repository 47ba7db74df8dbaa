// The backward of attention with projections and heads (attn/heads_backward.hpp): every gradient
// (X, X_kv, W_Q, W_K, W_V, W_O and the four biases) against central finite differences of
// ⟨dY, Y⟩ (the public checker), for h = 1, 2, 3, 4, 8, self and cross, masks and a batch, in
// float, double and long double; accumulation, left-out gradients and messages.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <optional>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "attn/attn.hpp"
#include "attn/gradcheck.hpp"
#include "attn_catch.hpp"

using attn::Matrix;

namespace {

template <class T>
void fill_random(std::span<T> x, std::mt19937_64& rng, double scale = 1) {
  std::normal_distribution<double> normal(0, scale);
  for (auto& v : x) v = static_cast<T>(normal(rng));
}

// A weight W (in × out) held in v: row-major, or (columns) as PyTorch holds it, out × in.
template <class U>
attn::StridedMatrixView<U> weight_in(U* v, std::size_t in, std::size_t out, bool columns) {
  if (columns) return attn::transposed(attn::MatrixView<U>(v, out, in));
  return {v, in, out};
}

// Everything one case needs, as flat owned arrays so that the checker can move any of them.
template <class T>
struct case_data {
  std::size_t B, tq, n, dm, dkv, h, dk, dv, dout;
  bool self;
  std::vector<T> X, Xkv, WQ, WK, WV, WO, bQ, bK, bV, bO, dY;
  std::vector<char> keys;
  bool causal;
  std::size_t kvh = 0;  // key/value heads (grouped-query attention), 0: h
  std::optional<attn::rotary> positions{};  // RoPE between the projections and the scores

  std::size_t kv() const { return kvh != 0 ? kvh : h; }
  bool columns = false;  // the weights, and their gradients, in PyTorch's layout (out × in)

  template <class U>
  attn::StridedMatrixView<U> weight(U* v, std::size_t in, std::size_t out) const {
    return weight_in(v, in, out, columns);
  }
  attn::multi_head_parameters<T> params() const {
    return {.W_Q = weight(WQ.data(), dm, h * dk),
            .W_K = weight(WK.data(), dkv, kv() * dk),
            .W_V = weight(WV.data(), dkv, kv() * dv),
            .W_O = weight(WO.data(), h * dv, dout),
            .b_Q = bQ,
            .b_K = bK,
            .b_V = bV,
            .b_O = bO,
            .heads = h,
            .kv_heads = kvh,
            .positions = positions};
  }
  attn::options opts() const { return {.beta = 0.8, .mask = keys, .causal = causal}; }
  attn::MatrixView<const T> x() const { return {X.data(), B * tq, dm}; }
  attn::MatrixView<const T> xkv() const { return self ? x() : attn::MatrixView<const T>(Xkv.data(), B * n, dkv); }

  std::vector<T> forward() const {
    attn::multi_head_cache<T> cache;
    std::vector<T> y(B * tq * dout);
    attn::multi_head_attention(x(), xkv(), params(), {.out = {y.data(), B * tq, dout}}, cache, opts(), B);
    return y;
  }
};

template <class T>
case_data<T> make_case(std::size_t h, bool self, bool masked, std::mt19937_64& rng) {
  const std::size_t B = masked ? 2 : 1, tq = 3, n = self ? 3 : 4, dm = 4, dkv = self ? 4 : 3, dk = 2, dv = 2, dout = 3;
  case_data<T> c{B, tq, n, dm, dkv, h, dk, dv, dout, self, std::vector<T>(B * tq * dm), std::vector<T>(B * n * dkv),
                 std::vector<T>(dm * h * dk), std::vector<T>(dkv * h * dk), std::vector<T>(dkv * h * dv),
                 std::vector<T>(h * dv * dout), std::vector<T>(h * dk), std::vector<T>(h * dk), std::vector<T>(h * dv),
                 std::vector<T>(dout), std::vector<T>(B * tq * dout), std::vector<char>(masked ? B * n : 0, 1), masked};
  for (auto* v : {&c.X, &c.Xkv, &c.WV, &c.WO, &c.bQ, &c.bK, &c.bV, &c.bO, &c.dY}) fill_random<T>(*v, rng);
  for (auto* v : {&c.WQ, &c.WK}) fill_random<T>(*v, rng, 0.6);
  if (masked) c.keys[1] = 0;  // sentence 0's key 1
  return c;
}

template <class T>
void check_case(case_data<T>& c) {
  attn::multi_head_cache<T> cache;
  std::vector<T> y(c.B * c.tq * c.dout);
  attn::multi_head_attention(c.x(), c.xkv(), c.params(), {.out = {y.data(), c.B * c.tq, c.dout}}, cache, c.opts(), c.B);
  std::vector<T> dX(c.X.size()), dXkv(c.Xkv.size()), dWQ(c.WQ.size()), dWK(c.WK.size()), dWV(c.WV.size()),
      dWO(c.WO.size()), dbQ(c.bQ.size()), dbK(c.bK.size()), dbV(c.bV.size()), dbO(c.bO.size());
  attn::multi_head_gradients<T> g{.inputs = {dX.data(), c.B * c.tq, c.dm},
                                  .W_Q = c.weight(dWQ.data(), c.dm, c.h * c.dk),
                                  .W_K = c.weight(dWK.data(), c.dkv, c.kv() * c.dk),
                                  .W_V = c.weight(dWV.data(), c.dkv, c.kv() * c.dv),
                                  .W_O = c.weight(dWO.data(), c.h * c.dv, c.dout),
                                  .b_Q = dbQ,
                                  .b_K = dbK,
                                  .b_V = dbV,
                                  .b_O = dbO};
  const attn::MatrixView<const T> dY(c.dY.data(), c.B * c.tq, c.dout);
  if (c.self) {
    attn::multi_head_attention_backward(c.x(), c.params(), cache, dY, g, c.opts(), c.B);
  } else {
    g.kv_inputs = {dXkv.data(), c.B * c.n, c.dkv};
    attn::multi_head_attention_backward(c.x(), c.xkv(), c.params(), cache, dY, g, c.opts(), c.B);
  }
  const T tol = attn::gradcheck_tolerance<T>();
  const auto check = [&](std::vector<T>& param, const std::vector<T>& grad, const char* name) {
    const auto f = [&](std::span<const T> x) {
      const std::vector<T> keep = param;
      std::copy(x.begin(), x.end(), param.begin());
      std::vector<T> out = c.forward();
      param = keep;
      return out;
    };
    const auto report = attn::check_vjp(f, std::vector<T>(param), c.dY, grad, name);
    INFO(name << ": max relative error " << report.max_rel_error);
    CHECK(report.passed(tol));
  };
  check(c.X, dX, "X");
  if (!c.self) check(c.Xkv, dXkv, "X_kv");
  check(c.WQ, dWQ, "W_Q");
  check(c.WK, dWK, "W_K");
  check(c.WV, dWV, "W_V");
  check(c.WO, dWO, "W_O");
  check(c.bQ, dbQ, "b_Q");
  check(c.bK, dbK, "b_K");
  check(c.bV, dbV, "b_V");
  check(c.bO, dbO, "b_O");
}

}  // namespace

// A case of grouped-query attention: h query heads over kvh key/value heads.
template <class T>
case_data<T> make_gqa_case(std::size_t h, std::size_t kvh, bool self, bool masked, std::mt19937_64& rng) {
  case_data<T> c = make_case<T>(h, self, masked, rng);
  c.kvh = kvh;
  c.WK.resize(c.dkv * kvh * c.dk);
  c.WV.resize(c.dkv * kvh * c.dv);
  c.bK.resize(kvh * c.dk);
  c.bV.resize(kvh * c.dv);
  for (auto* v : {&c.WV, &c.bK, &c.bV}) fill_random<T>(*v, rng);
  fill_random<T>(c.WK, rng, 0.6);
  return c;
}

TEMPLATE_TEST_CASE("multi_head_attention_backward agrees with finite differences for every parameter",
                   "[heads][derivatives]", float, double, long double) {
  std::mt19937_64 rng(909);
  for (const std::size_t h : {1u, 2u, 3u, 4u, 8u})
    for (int k = 0; k < 4; ++k) {
      INFO("h = " << h << ", self " << (k & 1) << ", masks and batch " << (k >> 1));
      auto c = make_case<TestType>(h, k & 1, k >> 1, rng);
      check_case(c);
    }
}

TEMPLATE_TEST_CASE("multi_head_attention with rotary positions: the heads of rotated Q and K, and every "
                   "gradient against finite differences", "[heads][derivatives][rope]", float, double, long double) {
  // The forward with positions = RoPE applied by hand to the projections, then each head's
  // attention (bit for bit: the same functions in the same order); the backward (the inverse turn
  // on ∂L/∂Q and ∂L/∂K) against central differences, both pair forms, self and cross, GQA, causal.
  using T = TestType;
  std::mt19937_64 rng(1212);
  for (const auto form : {attn::rotary_form::interleaved, attn::rotary_form::half_split})
    for (int k = 0; k < 4; ++k) {
      const bool self = (k & 1) != 0;
      INFO((form == attn::rotary_form::interleaved ? "interleaved" : "half-split") << ", self " << self << ", GQA "
                                                                                   << (k >> 1));
      auto c = k >> 1 ? make_gqa_case<T>(4, 2, self, true, rng) : make_case<T>(2, self, true, rng);
      c.positions = attn::rotary{.form = form, .base = 100};
      check_case(c);
      // the forward by hand: project, turn Q and K, attend each head, W_O
      attn::multi_head_cache<T> cache;
      std::vector<T> y(c.B * c.tq * c.dout);
      attn::multi_head_attention(c.x(), c.xkv(), c.params(), {.out = {y.data(), c.B * c.tq, c.dout}}, cache, c.opts(), c.B);
      auto plain = c;
      plain.positions.reset();
      attn::multi_head_cache<T> pc;
      std::vector<T> y2(y.size());
      attn::multi_head_attention(plain.x(), plain.xkv(), plain.params(), {.out = {y2.data(), c.B * c.tq, c.dout}}, pc,
                                 plain.opts(), c.B);
      attn::Matrix<T> Q = pc.queries, K = pc.keys;  // the plain forward's projections, turned here
      const std::size_t q_offset = c.n > c.tq ? c.n - c.tq : 0;
      attn::apply_rotary(Q, c.h, q_offset, c.B, *c.positions);
      attn::apply_rotary(K, c.kv(), 0, c.B, *c.positions);
      std::size_t differ = 0;
      for (std::size_t q = 0; q < Q.size(); ++q) differ += Q.data()[q] == cache.queries.data()[q] ? 0 : 1;
      for (std::size_t q = 0; q < K.size(); ++q) differ += K.data()[q] == cache.keys.data()[q] ? 0 : 1;
      CHECK(differ == 0);
    }
  // refused where it cannot be: an odd head size; jacobian_input (its formula has no rotation)
  auto odd = make_case<double>(1, true, false, rng);
  odd.positions = attn::rotary{};
  odd.dk = 3;
  odd.WQ.assign(odd.dm * 3, 0.1);
  odd.WK.assign(odd.dkv * 3, 0.1);
  odd.bQ.assign(3, 0.0);
  odd.bK.assign(3, 0.0);
  std::vector<double> y(odd.tq * odd.dout, 4.0);
  attn::multi_head_cache<double> cache;
  REQUIRE_THROWS_MATCHES(attn::multi_head_attention(odd.x(), odd.params(), {.out = {y.data(), odd.tq, odd.dout}}, cache),
                         attn::dimension_error,
                         Catch::Matchers::Message("attn::multi_head_attention: a head's query and key size, for rotary "
                                                  "positions, is 3 but must be even (sines and cosines come in pairs)"));
  for (const double v : y) CHECK(v == 4.0);
  auto even = make_case<double>(2, true, false, rng);
  even.positions = attn::rotary{};
  attn::Matrix<double> J(even.dout, even.dm);
  REQUIRE_THROWS_AS(attn::jacobian_input(even.x(), even.params(), 0, 1, J), attn::domain_error);
  // a backward with other positions than its forward's is refused
  auto fw = make_case<double>(2, true, false, rng);
  fw.positions = attn::rotary{};
  attn::multi_head_cache<double> fc;
  std::vector<double> fy(fw.tq * fw.dout);
  attn::multi_head_attention(fw.x(), fw.params(), {.out = {fy.data(), fw.tq, fw.dout}}, fc, fw.opts());
  auto other = fw;
  other.positions = attn::rotary{.form = attn::rotary_form::half_split};
  std::vector<double> dWQ(fw.WQ.size());
  REQUIRE_THROWS_AS(attn::multi_head_attention_backward(fw.x(), other.params(), fc,
                                                        attn::MatrixView<const double>(fw.dY.data(), fw.tq, fw.dout),
                                                        {.W_Q = {dWQ.data(), fw.dm, fw.h * fw.dk}}, fw.opts()),
                    attn::forward_mismatch_error);
}

TEST_CASE("multi_head_attention_backward: accumulate adds, left-out gradients stay out, the cache is checked",
          "[heads][derivatives][errors]") {
  std::mt19937_64 rng(10);
  auto c = make_case<double>(2, true, false, rng);
  attn::multi_head_cache<double> cache;
  std::vector<double> y(c.tq * c.dout);
  attn::multi_head_attention(c.x(), c.params(), {.out = {y.data(), c.tq, c.dout}}, cache, c.opts());
  const attn::MatrixView<const double> dY(c.dY.data(), c.tq, c.dout);
  std::vector<double> once(c.WQ.size()), twice(c.WQ.size(), 0.0), dX(c.X.size(), 5.0);
  attn::multi_head_attention_backward(c.x(), c.params(), cache, dY, {.W_Q = {once.data(), c.dm, c.h * c.dk}}, c.opts());
  for (int r = 0; r < 2; ++r)
    attn::multi_head_attention_backward(c.x(), c.params(), cache, dY,
                                        {.W_Q = {twice.data(), c.dm, c.h * c.dk}, .accumulate = true}, c.opts());
  for (std::size_t i = 0; i < once.size(); ++i) REQUIRE_THAT(twice[i], Catch::Matchers::WithinAbs(2 * once[i], 1e-13));
  REQUIRE(dX[0] == 5.0);  // not asked for: untouched
  attn::multi_head_cache<double> empty;
  REQUIRE_THROWS_WITH(attn::multi_head_attention_backward(c.x(), c.params(), empty, dY, {}, c.opts()),
                      "attn::multi_head_attention_backward: the cache holds no forward (run "
                      "multi_head_attention with it first)");
  std::vector<double> kv(c.X.size());
  REQUIRE_THROWS_AS(attn::multi_head_attention_backward(c.x(), c.params(), cache, dY,
                                                        {.kv_inputs = {kv.data(), c.tq, c.dm}}, c.opts()),
                    attn::dimension_error);
}

TEMPLATE_TEST_CASE("jacobian_input: dy_t/dx_s of self-attention against its backward and finite differences",
                   "[heads][derivatives]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(31);
  for (const std::size_t h : {1u, 2u, 3u})
    for (int k = 0; k < 8; ++k) {
      const bool causal = k & 1, with_wo = k & 2;
      auto c = make_case<T>(h, true, false, rng);
      c.columns = k & 4;  // the weights in PyTorch's layout (out × in), read where they lie
      attn::multi_head_parameters<T> p = c.params();
      if (!with_wo) {
        p.W_O = {};
        p.b_O = {};
      }
      const std::size_t dout = with_wo ? c.dout : h * c.dv;
      const attn::options opt{.beta = 0.8, .causal = causal};
      const auto forward_y = [&](std::span<const T> xs) {
        attn::multi_head_cache<T> cache;
        std::vector<T> y(c.tq * dout);
        attn::multi_head_attention(attn::MatrixView<const T>(xs.data(), c.tq, c.dm), p,
                                   {.out = {y.data(), c.tq, dout}}, cache, opt);
        return y;
      };
      for (std::size_t t = 0; t < c.tq; ++t)
        for (std::size_t s = 0; s < c.tq; ++s) {
          INFO("h = " << h << ", causal " << causal << ", W_O " << with_wo << ", columns " << c.columns << ", t = " << t
                      << ", s = " << s);
          Matrix<T> J(dout, c.dm);
          attn::jacobian_input(c.x(), p, t, s, J.view(), opt);
          // against the backward of a dY that is g in row t
          std::vector<T> dY(c.tq * dout, T(0)), dX(c.X.size());
          for (std::size_t o = 0; o < dout; ++o) dY[t * dout + o] = c.dY[o];
          attn::multi_head_cache<T> cache;
          std::vector<T> y(c.tq * dout);
          attn::multi_head_attention(c.x(), p, {.out = {y.data(), c.tq, dout}}, cache, opt);
          attn::multi_head_attention_backward(c.x(), p, cache, attn::MatrixView<const T>(dY.data(), c.tq, dout),
                                              {.inputs = {dX.data(), c.tq, c.dm}}, opt);
          // Norm-wise: the tiled backward forms ∂L/∂s_tj = β P_tj (dY_t·v_j − dY_t·y_t) without the
          // dominant weight's cancellation-free form, so an entry whose |J|ᵀ|g| is small may carry
          // the rounding of the larger terms: |Jᵀg − v| ≤ vjp_tolerance · max_k (|J|ᵀ|g|)_k.
          const std::span<const T> g(c.dY.data(), dout), v(dX.data() + s * c.dm, c.dm);
          long double worst = 0, top = 0;
          for (std::size_t m = 0; m < c.dm; ++m) {
            long double jtg = 0, scale = 0;
            for (std::size_t o = 0; o < dout; ++o) {
              jtg += static_cast<long double>(J(o, m)) * static_cast<long double>(g[o]);
              scale += std::abs(static_cast<long double>(J(o, m)) * static_cast<long double>(g[o]));
            }
            worst = std::max(worst, std::abs(jtg - static_cast<long double>(v[m])));
            top = std::max(top, scale);
          }
          INFO("|J^T g - v| = " << worst << " against max |J|^T|g| = " << top);
          CHECK(worst <= static_cast<long double>(attn::vjp_tolerance<T>()) * top);
          // against central differences of row t of Y in row s of X
          const auto f = [&](std::span<const T> xs_row) {
            std::vector<T> xs = c.X;
            std::copy(xs_row.begin(), xs_row.end(), xs.begin() + static_cast<std::ptrdiff_t>(s * c.dm));
            const std::vector<T> all = forward_y(xs);
            return std::vector<T>(all.begin() + static_cast<std::ptrdiff_t>(t * dout),
                                  all.begin() + static_cast<std::ptrdiff_t>((t + 1) * dout));
          };
          CHECK(attn::check_jacobian(f, std::span<const T>(c.X.data() + s * c.dm, c.dm), J, "x_s")
                    .passed(attn::gradcheck_tolerance<T>()));
        }
    }
}

namespace {

// Every gradient of case c under options opt, in one vector per parameter (X, X_kv, W_Q, W_K,
// W_V, W_O, b_Q, b_K, b_V, b_O).
template <class T>
std::vector<std::vector<T>> every_gradient(const case_data<T>& c, const attn::options& opt, std::size_t threads = 1) {
  attn::multi_head_cache<T> cache;
  std::vector<T> y(c.B * c.tq * c.dout);
  attn::multi_head_attention(c.x(), c.xkv(), c.params(), {.out = {y.data(), c.B * c.tq, c.dout}}, cache, opt, c.B);
  std::vector<std::vector<T>> d{std::vector<T>(c.X.size()),  std::vector<T>(c.Xkv.size()),
                                std::vector<T>(c.WQ.size()), std::vector<T>(c.WK.size()),
                                std::vector<T>(c.WV.size()), std::vector<T>(c.WO.size()),
                                std::vector<T>(c.bQ.size()), std::vector<T>(c.bK.size()),
                                std::vector<T>(c.bV.size()), std::vector<T>(c.bO.size())};
  attn::multi_head_gradients<T> g{.inputs = {d[0].data(), c.B * c.tq, c.dm},
                                  .W_Q = c.weight(d[2].data(), c.dm, c.h * c.dk),
                                  .W_K = c.weight(d[3].data(), c.dkv, c.kv() * c.dk),
                                  .W_V = c.weight(d[4].data(), c.dkv, c.kv() * c.dv),
                                  .W_O = c.weight(d[5].data(), c.h * c.dv, c.dout),
                                  .b_Q = d[6],
                                  .b_K = d[7],
                                  .b_V = d[8],
                                  .b_O = d[9]};
  const attn::MatrixView<const T> dY(c.dY.data(), c.B * c.tq, c.dout);
  if (c.self) {
    attn::multi_head_attention_backward(c.x(), c.params(), cache, dY, g, opt, c.B, threads);
  } else {
    g.kv_inputs = {d[1].data(), c.B * c.n, c.dkv};
    attn::multi_head_attention_backward(c.x(), c.xkv(), c.params(), cache, dY, g, opt, c.B, threads);
  }
  return d;
}

}  // namespace

TEMPLATE_TEST_CASE("multi_head_attention_backward: padding that holds NaN or inf reaches no gradient",
                   "[heads][derivatives][mask][errors]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(2828);
  for (const T garbage : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                          -std::numeric_limits<T>::infinity()})
    for (const int layout : {0, 1, 2, 3}) {
      const bool self = layout & 1, columns = layout & 2;
      INFO((self ? "self" : "cross") << "-attention, garbage " << static_cast<double>(garbage)
                                     << (columns ? ", weights in PyTorch's layout" : ""));
      // two sentences; sentence 1's last 2 positions are padding: masked as keys and, in
      // self-attention, as query rows (a row mask of zeros), their dY 0
      auto clean = make_case<T>(2, self, true, rng);
      clean.columns = columns;
      std::fill(clean.keys.begin(), clean.keys.end(), char{1});
      for (std::size_t j = clean.n - 2; j < clean.n; ++j) clean.keys[clean.n + j] = 0;
      std::vector<char> rows(clean.B * clean.tq * clean.n, 1);
      attn::options opt{.beta = 0.8, .mask = clean.keys};
      std::vector<std::size_t> pad_x;  // the rows of X (self) or X_kv (cross) that are padding
      for (std::size_t j = clean.n - 2; j < clean.n; ++j) pad_x.push_back(clean.n + j);
      if (self) {
        for (const std::size_t t : pad_x) {
          std::fill_n(rows.begin() + static_cast<std::ptrdiff_t>(t * clean.n), clean.n, char{0});
          std::fill_n(clean.dY.begin() + static_cast<std::ptrdiff_t>(t * clean.dout), clean.dout, T(0));
        }
        opt.row_mask = attn::mask_matrix_view(rows, clean.B * clean.tq, clean.n);
      }
      std::vector<T>& padded_clean = self ? clean.X : clean.Xkv;
      const std::size_t width = self ? clean.dm : clean.dkv;
      for (const std::size_t t : pad_x) std::fill_n(padded_clean.begin() + static_cast<std::ptrdiff_t>(t * width), width, T(0));
      auto dirty = clean;
      std::vector<T>& padded_dirty = self ? dirty.X : dirty.Xkv;
      for (const std::size_t t : pad_x) std::fill_n(padded_dirty.begin() + static_cast<std::ptrdiff_t>(t * width), width, garbage);
      const auto want = every_gradient(clean, opt), got = every_gradient(dirty, opt);
      const char* names[] = {"X", "X_kv", "W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"};
      for (std::size_t k = 0; k < want.size(); ++k) {
        double top = 1, diff = 0;
        bool finite = true;
        for (std::size_t i = 0; i < want[k].size(); ++i) {
          top = std::max(top, std::abs(static_cast<double>(want[k][i])));
          finite = finite && std::isfinite(static_cast<double>(got[k][i]));
          diff = std::max(diff, std::abs(static_cast<double>(got[k][i]) - static_cast<double>(want[k][i])));
        }
        INFO("dL/d" << names[k] << ": max difference " << diff);
        CHECK(finite);
        CHECK(diff <= static_cast<double>(attn::vjp_tolerance<T>()) * top);
      }
    }
}

TEMPLATE_TEST_CASE("multi_head_attention_backward: padding reaches no column of a head that masks it, "
                   "though another head is NaN", "[heads][derivatives][mask][errors]", float, double, long double) {
  // Cross-attention, two heads, sentence 1's last 2 keys padding (masked) and NaN in X_kv. Head
  // 0 is NaN everywhere (NaN in W_Q's first column: every score of head 0 NaN, so every derivative
  // of head 0 NaN, the padding keys' too: one query's rule). ∂L/∂W_K = X_kvᵀ dK and ∂L/∂W_V: head
  // 1's columns of dK and dV are exactly 0 on the padding rows, so head 1's columns of ∂L/∂W_K,
  // ∂L/∂W_V, ∂L/∂b_K and ∂L/∂b_V are finite and those of the run whose padding holds 0, up to the
  // order of head 1's sums (the tiled kernel splits its runs of keys at a non-finite key: as the
  // test above, vjp_tolerance relative to the largest). The rule was a row of dP that is all 0:
  // head 0's NaN made the row not all 0, and the NaN padding reached head 1's columns.
  using T = TestType;
  std::mt19937_64 rng(2929);
  for (const int columns : {0, 1}) {
    INFO((columns ? "weights in PyTorch's layout" : "weights as rows"));
    auto clean = make_case<T>(2, false, true, rng);
    clean.columns = columns != 0;
    std::fill(clean.keys.begin(), clean.keys.end(), char{1});
    for (std::size_t j = clean.n - 2; j < clean.n; ++j) clean.keys[clean.n + j] = 0;
    for (std::size_t m = 0; m < clean.dm; ++m)  // W_Q (m, 0), in its layout
      clean.WQ[columns != 0 ? m : m * clean.h * clean.dk] = std::numeric_limits<T>::quiet_NaN();
    const attn::options opt{.beta = 0.8, .mask = clean.keys};
    auto dirty = clean;
    for (std::size_t j = clean.n - 2; j < clean.n; ++j)
      for (std::size_t i = 0; i < clean.dkv; ++i) {
        clean.Xkv[(clean.n + j) * clean.dkv + i] = T(0);
        dirty.Xkv[(clean.n + j) * clean.dkv + i] = std::numeric_limits<T>::quiet_NaN();
      }
    const auto want = every_gradient(clean, opt), got = every_gradient(dirty, opt);
    // on threads: the same numbers (each piece of ∂L/∂W_K takes the path all of X_kv takes: the
    // row kernels, for the NaN padding; with NaN in one column only, a piece of finite columns
    // took gemm, and its numbers differed from one thread's in the last bits)
    auto one_column = clean;
    for (std::size_t j = clean.n - 2; j < clean.n; ++j)
      one_column.Xkv[(clean.n + j) * clean.dkv] = std::numeric_limits<T>::quiet_NaN();
    const auto got1 = every_gradient(one_column, opt), on_threads = every_gradient(one_column, opt, 3);
    for (std::size_t k = 0; k < got1.size(); ++k) {
      std::size_t differ = 0;
      for (std::size_t i = 0; i < got1[k].size(); ++i) {
        const T a = got1[k][i], b = on_threads[k][i];
        differ += (a == b || (a != a && b != b)) ? 0 : 1;
      }
      INFO("gradient " << k << " on 3 threads");
      CHECK(differ == 0);
    }
    // (the gradients' own layout: row-major d_kv × h·d, or its transpose)
    const auto at = [&](const std::vector<T>& w, std::size_t m, std::size_t col, std::size_t cols) {
      return static_cast<double>(columns != 0 ? w[col * clean.dkv + m] : w[m * cols + col]);
    };
    const double tol = static_cast<double>(attn::vjp_tolerance<T>());
    for (const auto& [k, d, name] : {std::tuple<std::size_t, std::size_t, const char*>{3, clean.dk, "K"},
                                     std::tuple<std::size_t, std::size_t, const char*>{4, clean.dv, "V"}}) {
      const std::size_t cols = clean.h * d;
      double top = 1;
      for (std::size_t m = 0; m < clean.dkv; ++m)
        for (std::size_t col = d; col < cols; ++col) top = std::max(top, std::abs(at(want[k], m, col, cols)));
      for (std::size_t m = 0; m < clean.dkv; ++m)
        for (std::size_t col = 0; col < cols; ++col) {
          INFO("dL/dW_" << name << " (" << m << ", " << col << ")");
          if (col < d) {
            CHECK(std::isnan(at(got[k], m, col, cols)));  // head 0: NaN, as its rows
            continue;
          }
          CHECK(std::isfinite(at(got[k], m, col, cols)));
          CHECK(std::abs(at(got[k], m, col, cols) - at(want[k], m, col, cols)) <= tol * top);
        }
      for (std::size_t col = d; col < cols; ++col) {
        INFO("dL/db_" << name << " " << col);
        const double g = static_cast<double>(got[k + 4][col]), w = static_cast<double>(want[k + 4][col]);
        CHECK(std::isfinite(g));
        CHECK(std::abs(g - w) <= tol * std::max(1.0, std::abs(w)));
      }
    }
  }
}

TEST_CASE("multi_head_attention_backward: a forward it does not match is refused, naming what differs",
          "[heads][derivatives][errors]") {
  std::mt19937_64 rng(7);
  auto c = make_case<double>(2, true, true, rng);  // two sentences, a key mask
  const attn::options opt = c.opts();
  attn::multi_head_cache<double> cache;
  std::vector<double> y(c.B * c.tq * c.dout);
  attn::multi_head_attention(c.x(), c.params(), {.out = {y.data(), c.B * c.tq, c.dout}}, cache, opt, c.B);
  const attn::MatrixView<const double> dY(c.dY.data(), c.B * c.tq, c.dout);
  std::vector<double> dWQ(c.WQ.size(), 3.0);
  const attn::multi_head_gradients<double> g{.W_Q = {dWQ.data(), c.dm, c.h * c.dk}};
  const std::string where = "attn::multi_head_attention_backward: ";
  const std::string why = " (the backward must be given its forward's inputs, parameters and options)";
  const auto refused = [&](const std::string& what, auto&& call) {
    INFO(what);
    REQUIRE_THROWS_MATCHES(call(), attn::forward_mismatch_error, Catch::Matchers::Message(where + what + why));
    REQUIRE(std::all_of(dWQ.begin(), dWQ.end(), [](double v) { return v == 3.0; }));
  };
  // the options: causal or the key mask forgotten, another beta, policy or scale
  attn::options other = opt;
  other.causal = false;
  refused("causal is off but the forward's was on",
          [&] { attn::multi_head_attention_backward(c.x(), c.params(), cache, dY, g, other, c.B); });
  other = opt;
  other.mask = {};
  refused("the key mask is not the forward's",
          [&] { attn::multi_head_attention_backward(c.x(), c.params(), cache, dY, g, other, c.B); });
  std::vector<char> keys = c.keys;  // the same entries in another buffer: accepted
  other.mask = keys;
  attn::multi_head_attention_backward(c.x(), c.params(), cache, dY,
                                      {.W_Q = {std::vector<double>(c.WQ.size()).data(), c.dm, c.h * c.dk}}, other, c.B);
  keys[0] = 0;
  refused("the key mask is not the forward's",
          [&] { attn::multi_head_attention_backward(c.x(), c.params(), cache, dY, g, other, c.B); });
  other = opt;
  other.beta = 2;
  refused("beta is 2.000000 but the forward's was 0.800000",
          [&] { attn::multi_head_attention_backward(c.x(), c.params(), cache, dY, g, other, c.B); });
  other = opt;
  other.if_all_masked = attn::all_masked_policy::uniform;
  refused("the all-masked policy is not the forward's",
          [&] { attn::multi_head_attention_backward(c.x(), c.params(), cache, dY, g, other, c.B); });
  auto scaled = c.params();
  scaled.score = attn::dot_scaled_by{0.5};
  refused("the scale is not the forward's",
          [&] { attn::multi_head_attention_backward(c.x(), scaled, cache, dY, g, opt, c.B); });
  // another X of the same shape; a weight changed in place between the forward and the backward
  std::vector<double> X2 = c.X;
  X2[3] += 0.25;
  refused("X holds other numbers than the forward's", [&] {
    attn::multi_head_attention_backward(attn::MatrixView<const double>(X2.data(), c.B * c.tq, c.dm), c.params(),
                                        cache, dY, g, opt, c.B);
  });
  c.WQ[1] *= 2;
  refused("W_Q holds other numbers than the forward's",
          [&] { attn::multi_head_attention_backward(c.x(), c.params(), cache, dY, g, opt, c.B); });
  c.WQ[1] /= 2;
  // W_Q's own buffer given as its columns: the same numbers but the transposed matrix (W_Q is 4 × 4)
  auto columns = c.params();
  columns.W_Q = attn::transposed(attn::MatrixView<const double>(c.WQ.data(), c.dm, c.h * c.dk));
  refused("W_Q holds other numbers than the forward's",
          [&] { attn::multi_head_attention_backward(c.x(), columns, cache, dY, g, opt, c.B); });
  // another batch: a dimension_error naming both
  REQUIRE_THROWS_MATCHES(attn::multi_head_attention_backward(c.x(), c.params(), cache, dY, g, attn::options{}, 1),
                         attn::dimension_error,
                         Catch::Matchers::Message(where + "the batch is 1 sentences but the forward's was 2"));
  // and the forward's own arguments still pass
  attn::multi_head_attention_backward(c.x(), c.params(), cache, dY, g, opt, c.B);
  REQUIRE(dWQ[0] != 3.0);
}

TEMPLATE_TEST_CASE("grouped-query attention: the backward agrees with finite differences for every parameter",
                   "[heads][derivatives][gqa]", float, double, long double) {
  std::mt19937_64 rng(2929);
  for (const auto& [h, kvh] : {std::pair<std::size_t, std::size_t>{2, 1}, {4, 2}, {4, 1}, {3, 1}, {6, 3}})
    for (int k = 0; k < 4; ++k) {
      INFO("h = " << h << ", h_kv = " << kvh << ", self " << (k & 1) << ", masks and batch " << (k >> 1));
      auto c = make_gqa_case<TestType>(h, kvh, k & 1, k >> 1, rng);
      check_case(c);
    }
}

// ---------------------------------------------------------------------------------------------
// Weights, and their gradients, in PyTorch's layout (out × in): read and written where they lie
// ---------------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("multi_head_attention_backward: weights and gradients in PyTorch's layout agree with "
                   "finite differences", "[heads][derivatives][layouts]", float, double, long double) {
  std::mt19937_64 rng(2929);
  for (const std::size_t h : {1u, 2u, 4u})
    for (int k = 0; k < 4; ++k) {
      INFO("h = " << h << ", self " << (k & 1) << ", masks and batch " << (k >> 1));
      auto c = make_case<TestType>(h, k & 1, k >> 1, rng);
      c.columns = true;  // W_Q … W_O read as attn::transposed(out × in), ∂L/∂W written so
      check_case(c);
    }
}

TEST_CASE("multi_head_attention_backward: the cache's dL/dZ is written without W_O too", "[heads][derivatives]") {
  std::mt19937_64 rng(12);
  auto c = make_case<double>(2, true, false, rng);
  auto p = c.params();
  p.W_O = {};
  p.b_O = {};
  const std::size_t cols = c.h * c.dv;
  attn::multi_head_cache<double> cache;
  std::vector<double> y(c.tq * cols), dy(c.tq * cols), dWQ(c.WQ.size());
  fill_random<double>(dy, rng);
  attn::multi_head_attention(c.x(), p, {.out = {y.data(), c.tq, cols}}, cache, c.opts());
  cache.grad_heads_out = attn::Matrix<double>(c.tq, cols, 9.0);  // what an earlier call left
  attn::multi_head_attention_backward(c.x(), p, cache, attn::MatrixView<const double>(dy.data(), c.tq, cols),
                                      {.W_Q = {dWQ.data(), c.dm, c.h * c.dk}}, c.opts());
  for (std::size_t t = 0; t < c.tq; ++t)
    for (std::size_t i = 0; i < cols; ++i) REQUIRE(cache.grad_heads_out(t, i) == dy[t * cols + i]);
}

TEST_CASE("multi_head_attention_backward under throw_error: a sentence of padding throws before any gradient is written",
          "[heads][derivatives][errors]") {
  // two sentences of 3 words, the second all padding (its key mask all 0). The forward runs
  // under zeros; the backward under throw_error wrote ∂L/∂W_O and ∂L/∂b_O, then threw at the
  // second sentence's head. Every head is checked first now.
  const attn::Matrix<double> X{{1, 0}, {0, 1}, {1, 1}, {0.5, -1}, {2, 0}, {-1, 1}};
  const attn::Matrix<double> W{{1, 0.5, -0.5, 0.25}, {0.25, 1, 1, -1}}, WO{{1, 0}, {0, 1}, {1, 1}, {0.5, 2}};
  const std::vector<double> bO{0.1, -0.2};
  const attn::multi_head_parameters<double> p{.W_Q = W.view(), .W_K = W.view(), .W_V = W.view(), .W_O = WO.view(),
                                              .b_O = bO, .heads = 2};
  const std::vector<char> padding{1, 1, 0, 0, 0, 0};
  attn::multi_head_cache<double> cache;
  attn::Matrix<double> Y(6, 2);
  attn::multi_head_attention(X, p, {.out = Y.view()}, cache, {.mask = padding}, 2);
  const attn::Matrix<double> dY(6, 2, 1.0);
  attn::Matrix<double> dX(6, 2, 7.0), dWQ(2, 4, 7.0), dWO(4, 2, 7.0);
  std::vector<double> dbO(2, 7.0);
  const attn::multi_head_gradients<double> g{.inputs = dX.view(), .W_Q = dWQ.view(), .W_O = dWO.view(), .b_O = dbO};
  REQUIRE_THROWS_AS(attn::multi_head_attention_backward(X, p, cache, dY, g,
                                                        {.mask = padding, .if_all_masked = attn::all_masked_policy::throw_error}, 2),
                    attn::domain_error);
  const auto sevens = [](const double* q, std::size_t count) {
    return std::all_of(q, q + count, [](double x) { return x == 7.0; });
  };
  CHECK(sevens(dX.data(), 12));
  CHECK(sevens(dWQ.data(), 8));
  CHECK(sevens(dWO.data(), 8));
  CHECK(sevens(dbO.data(), 2));
  // on threads too
  REQUIRE_THROWS_AS(attn::multi_head_attention_backward(X, p, cache, dY, g,
                                                        {.mask = padding, .if_all_masked = attn::all_masked_policy::throw_error}, 2, 2),
                    attn::domain_error);
  CHECK((sevens(dX.data(), 12) && sevens(dWO.data(), 8) && sevens(dbO.data(), 2)));
  // a mask that leaves every sentence a key: throw_error gives the zeros policy's numbers
  const std::vector<char> some{1, 1, 0, 0, 1, 0};
  attn::multi_head_attention(X, p, {.out = Y.view()}, cache, {.mask = some}, 2);
  attn::Matrix<double> dX0(6, 2), dX1(6, 2);
  attn::multi_head_attention_backward(X, p, cache, dY, {.inputs = dX0.view()}, {.mask = some}, 2);
  attn::multi_head_attention_backward(X, p, cache, dY, {.inputs = dX1.view()},
                                      {.mask = some, .if_all_masked = attn::all_masked_policy::throw_error}, 2);
  CHECK(std::equal(dX0.data(), dX0.data() + 12, dX1.data()));
}

TEST_CASE("multi_head_attention_backward: a gradient in PyTorch's layout is the row-major one "
          "transposed, bit for bit, on one thread and on two", "[heads][derivatives][layouts]") {
  // ∂L/∂W = Xᵀ dP depends on X and dP alone: one forward, its gradients asked for in both layouts
  std::mt19937_64 rng(31);
  for (const bool self : {false, true}) {
    const auto c = make_case<double>(2, self, true, rng);
    attn::multi_head_cache<double> cache;
    std::vector<double> y(c.B * c.tq * c.dout);
    attn::multi_head_attention(c.x(), c.xkv(), c.params(), {.out = {y.data(), c.B * c.tq, c.dout}}, cache,
                               c.opts(), c.B);
    const attn::MatrixView<const double> dY(c.dY.data(), c.B * c.tq, c.dout);
    const std::size_t ins[4] = {c.dm, c.dkv, c.dkv, c.h * c.dv}, outs[4] = {c.h * c.dk, c.h * c.dk, c.h * c.dv, c.dout};
    const auto gradients = [&](bool columns, bool accumulate, std::size_t threads) {
      std::vector<std::vector<double>> d;
      for (std::size_t k = 0; k < 4; ++k) d.emplace_back(ins[k] * outs[k], 0.5);  // accumulate adds to 0.5
      const attn::multi_head_gradients<double> g{.W_Q = weight_in(d[0].data(), ins[0], outs[0], columns),
                                                 .W_K = weight_in(d[1].data(), ins[1], outs[1], columns),
                                                 .W_V = weight_in(d[2].data(), ins[2], outs[2], columns),
                                                 .W_O = weight_in(d[3].data(), ins[3], outs[3], columns),
                                                 .accumulate = accumulate};
      if (self)
        attn::multi_head_attention_backward(c.x(), c.params(), cache, dY, g, c.opts(), c.B, threads);
      else
        attn::multi_head_attention_backward(c.x(), c.xkv(), c.params(), cache, dY, g, c.opts(), c.B, threads);
      return d;
    };
    for (const bool accumulate : {false, true}) {
      const auto rows = gradients(false, accumulate, 1);
      for (const std::size_t threads : {1u, 2u}) {
        INFO((self ? "self" : "cross") << "-attention, accumulate " << accumulate << ", threads " << threads);
        const auto cols = gradients(true, accumulate, threads);
        for (std::size_t k = 0; k < 4; ++k)
          for (std::size_t i = 0; i < ins[k]; ++i)
            for (std::size_t o = 0; o < outs[k]; ++o) REQUIRE(cols[k][o * ins[k] + i] == rows[k][i * outs[k] + o]);
      }
    }
  }
}
