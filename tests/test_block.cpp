// The transformer block (attn/block.hpp): post-LN and pre-LN, causal or not, h = 1 to 4, against
// the block written out here in long double (projections, each head's softmax, W_O, the
// feed-forward layer, LayerNorm, the residuals: nothing of attn's); every gradient (X and each of
// the seventeen parameters) against central differences; the intermediates in the cache; the
// forward/backward pair checked. Tolerance of the forward: the block's result passes through
// about 2·d + d_ff + n roundings per entry, each amplified by the norms' 1/σ (bounded here by
// 1/σ ≤ 10 for these inputs): 64·(2d + d_ff + n)·ε relative to the entries' magnitudes.
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "attn/gradcheck.hpp"
#include "attn_catch.hpp"
#include "reference_attention.hpp"

using ld = long double;

namespace {

template <class T>
std::vector<T> random_vector(std::size_t n, std::mt19937_64& rng, double sd = 1, double mean = 0) {
  std::normal_distribution<double> normal(mean, sd);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(normal(rng));
  return v;
}

// Every number of one block: X and the seventeen parameters, each a flat row-major array.
template <class T>
struct block_case {
  std::size_t tq = 3, d = 4, h = 2, dk = 2, dff = 5, n = 4;
  bool pre = false, causal = false, cross = false;
  attn::activation act = attn::activation::gelu;
  // X, the seventeen parameters; with cross-attention (a decoder's block) M and its ten more
  enum { X, WQ, WK, WV, WO, BQ, BK, BV, BO, W1, B1, W2, B2, G1, E1, G2, E2,
         MEM, CWQ, CWK, CWV, CWO, CBQ, CBK, CBV, CBO, GC, EC, COUNT };
  std::vector<T> a[COUNT];

  block_case(std::size_t heads, bool pre_ln, bool causal_mask, std::mt19937_64& rng, bool with_cross = false)
      : h(heads), pre(pre_ln), causal(causal_mask), cross(with_cross) {
    const std::size_t hd = h * dk;
    const double s = 1 / std::sqrt(static_cast<double>(d));
    a[X] = random_vector<T>(tq * d, rng);
    a[WQ] = random_vector<T>(d * hd, rng, s);
    a[WK] = random_vector<T>(d * hd, rng, s);
    a[WV] = random_vector<T>(d * hd, rng, s);
    a[WO] = random_vector<T>(hd * d, rng, s);
    for (const int b : {BQ, BK, BV}) a[b] = random_vector<T>(hd, rng, 0.2);
    a[BO] = random_vector<T>(d, rng, 0.2);
    a[W1] = random_vector<T>(d * dff, rng, s);
    a[B1] = random_vector<T>(dff, rng, 0.2);
    a[W2] = random_vector<T>(dff * d, rng, 1 / std::sqrt(static_cast<double>(dff)));
    a[B2] = random_vector<T>(d, rng, 0.2);
    for (const int g : {G1, G2}) a[g] = random_vector<T>(d, rng, 0.2, 1);
    for (const int e : {E1, E2}) a[e] = random_vector<T>(d, rng, 0.2);
    if (cross) {
      a[MEM] = random_vector<T>(n * d, rng);
      for (const int w : {CWQ, CWK, CWV}) a[w] = random_vector<T>(d * hd, rng, s);
      a[CWO] = random_vector<T>(hd * d, rng, s);
      for (const int b : {CBQ, CBK, CBV}) a[b] = random_vector<T>(hd, rng, 0.2);
      a[CBO] = random_vector<T>(d, rng, 0.2);
      a[GC] = random_vector<T>(d, rng, 0.2, 1);
      a[EC] = random_vector<T>(d, rng, 0.2);
    }
  }
  attn::MatrixView<const T> memory() const { return {a[MEM].data(), cross ? n : 0, d}; }
  attn::block_parameters<T> params() const {
    const std::size_t hd = h * dk;
    attn::block_parameters<T> p;
    p.attention = {.W_Q = attn::MatrixView<const T>(a[WQ].data(), d, hd),
                   .W_K = attn::MatrixView<const T>(a[WK].data(), d, hd),
                   .W_V = attn::MatrixView<const T>(a[WV].data(), d, hd),
                   .W_O = attn::MatrixView<const T>(a[WO].data(), hd, d),
                   .b_Q = a[BQ],
                   .b_K = a[BK],
                   .b_V = a[BV],
                   .b_O = a[BO],
                   .heads = h};
    p.ffn = {.W_1 = attn::MatrixView<const T>(a[W1].data(), d, dff), .b_1 = a[B1],
             .W_2 = attn::MatrixView<const T>(a[W2].data(), dff, d), .b_2 = a[B2], .act = act};
    p.norm_1 = {.gamma = a[G1], .beta = a[E1]};
    p.norm_2 = {.gamma = a[G2], .beta = a[E2]};
    p.placement = pre ? attn::norm_placement::pre : attn::norm_placement::post;
    if (cross) {
      p.cross_attention = {.W_Q = attn::MatrixView<const T>(a[CWQ].data(), d, hd),
                           .W_K = attn::MatrixView<const T>(a[CWK].data(), d, hd),
                           .W_V = attn::MatrixView<const T>(a[CWV].data(), d, hd),
                           .W_O = attn::MatrixView<const T>(a[CWO].data(), hd, d),
                           .b_Q = a[CBQ], .b_K = a[CBK], .b_V = a[CBV], .b_O = a[CBO], .heads = h};
      p.norm_cross = {.gamma = a[GC], .beta = a[EC]};
    }
    return p;
  }
  attn::options opts() const { return {.causal = causal}; }
  std::vector<T> forward() const {
    attn::block_cache<T> cache;
    std::vector<T> y(tq * d);
    if (cross)
      attn::transformer_block(attn::MatrixView<const T>(a[X].data(), tq, d), memory(), params(),
                              attn::MatrixView<T>(y.data(), tq, d), cache, opts());
    else
      attn::transformer_block(attn::MatrixView<const T>(a[X].data(), tq, d), params(),
                              attn::MatrixView<T>(y.data(), tq, d), cache, opts());
    return y;
  }

  // ---- the reference, in long double ----
  using M = std::vector<ld>;  // row-major
  M lin(const M& in, std::size_t rows, std::size_t k, const std::vector<T>& W, std::size_t cols, const std::vector<T>& b) const {
    M out(rows * cols);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c) {
        ld s = b.empty() ? 0 : static_cast<ld>(b[c]);
        for (std::size_t m = 0; m < k; ++m) s += in[r * k + m] * static_cast<ld>(W[m * cols + c]);
        out[r * cols + c] = s;
      }
    return out;
  }
  M layer_norm(const M& in, const std::vector<T>& g, const std::vector<T>& b) const {
    M out(in.size());
    for (std::size_t r = 0; r < tq; ++r) {
      ld mu = 0, var = 0;
      for (std::size_t i = 0; i < d; ++i) mu += in[r * d + i];
      mu /= d;
      for (std::size_t i = 0; i < d; ++i) var += (in[r * d + i] - mu) * (in[r * d + i] - mu);
      var /= d;
      for (std::size_t i = 0; i < d; ++i)
        out[r * d + i] = g[i] * (in[r * d + i] - mu) / std::sqrt(var + static_cast<ld>(static_cast<T>(1e-5))) + b[i];
    }
    return out;
  }
  // self-attention (w = WQ) or cross-attention to kv (w = CWQ, kv_rows = n, no mask)
  M attention(const M& in, const M& kv, int w = WQ) const {
    const std::size_t hd = h * dk, nk = w == WQ ? tq : n;
    const bool masked = w == WQ && causal;
    const M Q = lin(in, tq, d, a[w], hd, a[w + 4]), K = lin(kv, nk, d, a[w + 1], hd, a[w + 5]),
            V = lin(kv, nk, d, a[w + 2], hd, a[w + 6]);
    M Z(tq * hd);
    for (std::size_t i = 0; i < h; ++i)
      reference::attention_head(Q.data(), K.data(), V.data(), Z.data(), hd, i * dk, tq, nk, dk, masked);
    return lin(Z, tq, hd, a[w + 3], d, a[w + 7]);
  }
  M ffn(const M& in) const {
    M H = lin(in, tq, d, a[W1], dff, a[B1]);
    for (ld& v : H) v = attn::activate(act, v);
    return lin(H, tq, dff, a[W2], d, a[B2]);
  }
  M reference() const {
    M x(a[X].begin(), a[X].end());
    const auto add = [](M u, const M& v) {
      for (std::size_t k = 0; k < u.size(); ++k) u[k] += v[k];
      return u;
    };
    const M mem(a[MEM].begin(), a[MEM].end());
    if (!pre) {
      M x1 = layer_norm(add(x, attention(x, x)), a[G1], a[E1]);
      if (cross) x1 = layer_norm(add(x1, attention(x1, mem, CWQ)), a[GC], a[EC]);
      return layer_norm(add(x1, ffn(x1)), a[G2], a[E2]);
    }
    const M n1 = layer_norm(x, a[G1], a[E1]);
    M h1 = add(x, attention(n1, n1));
    if (cross) h1 = add(h1, attention(layer_norm(h1, a[GC], a[EC]), mem, CWQ));
    return add(h1, ffn(layer_norm(h1, a[G2], a[E2])));
  }
};

}  // namespace

TEMPLATE_TEST_CASE("transformer_block: post-LN and pre-LN, causal or not, h = 1 to 4, against long double",
                   "[block]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(111);
  for (const bool cross : {false, true})
  for (const bool pre : {false, true})
    for (const bool causal : {false, true})
      for (std::size_t h = 1; h <= 4; ++h) {
        block_case<T> c(h, pre, causal, rng, cross);
        const std::vector<T> y = c.forward();
        const std::vector<ld> want = c.reference();
        INFO((pre ? "pre-LN" : "post-LN") << (causal ? ", causal" : "") << (cross ? ", cross-attention" : "")
                                          << ", h = " << h);
        ld top = 1;
        for (const ld v : want) top = std::max(top, std::abs(v));
        // (cross-attention: d + n roundings more on the way)
        const ld bound = 64 * static_cast<ld>(2 * c.d + c.dff + c.tq + (cross ? c.d + c.n : 0)) *
                         static_cast<ld>(std::numeric_limits<T>::epsilon()) * 10 * top;
        for (std::size_t k = 0; k < y.size(); ++k) CHECK(std::abs(static_cast<ld>(y[k]) - want[k]) <= bound);
      }
}

TEMPLATE_TEST_CASE("transformer_block_backward: X and every parameter against central differences",
                   "[block][derivatives]", double, long double) {
  using T = TestType;
  std::mt19937_64 rng(112);
  const char* names[] = {"X", "W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_1", "b_1",
                         "W_2", "b_2", "gamma_1", "beta_1", "gamma_2", "beta_2", "M", "cross W_Q", "cross W_K",
                         "cross W_V", "cross W_O", "cross b_Q", "cross b_K", "cross b_V", "cross b_O",
                         "gamma_cross", "beta_cross"};
  for (const bool cross : {false, true})
  for (const bool pre : {false, true})
    for (const bool causal : {false, true})
      for (std::size_t h = 1; h <= 4; ++h) {
        if (cross && h == 4) continue;  // (h = 1 to 3 with cross-attention: the suite's time)
        block_case<T> c(h, pre, causal, rng, cross);
        c.act = h % 2 == 0 ? attn::activation::gelu : attn::activation::gelu_tanh;
        using BC = block_case<T>;
        const std::vector<T> G = random_vector<T>(c.tq * c.d, rng);
        attn::block_cache<T> cache;
        std::vector<T> y(c.tq * c.d);
        const attn::block_parameters<T> p = c.params();
        const attn::MatrixView<const T> x(c.a[BC::X].data(), c.tq, c.d);
        if (cross)
          attn::transformer_block(x, c.memory(), p, attn::MatrixView<T>(y.data(), c.tq, c.d), cache, c.opts());
        else
          attn::transformer_block(x, p, attn::MatrixView<T>(y.data(), c.tq, c.d), cache, c.opts());
        std::vector<std::vector<T>> g(std::size_t{BC::COUNT});
        for (std::size_t k = 0; k < std::size_t{BC::COUNT}; ++k) g[k].assign(c.a[k].size(), T(0));
        const std::size_t hd = h * c.dk;
        const attn::block_gradients<T> grads_self{
            .input = {g[BC::X].data(), c.tq, c.d},
            .W_Q = attn::MatrixView<T>(g[BC::WQ].data(), c.d, hd),
            .W_K = attn::MatrixView<T>(g[BC::WK].data(), c.d, hd),
            .W_V = attn::MatrixView<T>(g[BC::WV].data(), c.d, hd),
            .W_O = attn::MatrixView<T>(g[BC::WO].data(), hd, c.d),
            .b_Q = g[BC::BQ], .b_K = g[BC::BK], .b_V = g[BC::BV], .b_O = g[BC::BO],
            .W_1 = attn::MatrixView<T>(g[BC::W1].data(), c.d, c.dff),
            .W_2 = attn::MatrixView<T>(g[BC::W2].data(), c.dff, c.d),
            .b_1 = g[BC::B1], .b_2 = g[BC::B2],
            .gamma_1 = g[BC::G1], .beta_1 = g[BC::E1], .gamma_2 = g[BC::G2], .beta_2 = g[BC::E2]};
        attn::block_gradients<T> grads = grads_self;
        if (cross) {
          grads.memory = {g[BC::MEM].data(), c.n, c.d};
          grads.cross_W_Q = attn::MatrixView<T>(g[BC::CWQ].data(), c.d, hd);
          grads.cross_W_K = attn::MatrixView<T>(g[BC::CWK].data(), c.d, hd);
          grads.cross_W_V = attn::MatrixView<T>(g[BC::CWV].data(), c.d, hd);
          grads.cross_W_O = attn::MatrixView<T>(g[BC::CWO].data(), hd, c.d);
          grads.cross_b_Q = g[BC::CBQ];
          grads.cross_b_K = g[BC::CBK];
          grads.cross_b_V = g[BC::CBV];
          grads.cross_b_O = g[BC::CBO];
          grads.gamma_cross = g[BC::GC];
          grads.beta_cross = g[BC::EC];
        }
        const auto backward = [&](const attn::block_gradients<T>& gr) {
          const attn::MatrixView<const T> dy(G.data(), c.tq, c.d);
          if (cross)
            attn::transformer_block_backward(x, c.memory(), p, cache, dy, gr, c.opts());
          else
            attn::transformer_block_backward(x, p, cache, dy, gr, c.opts());
        };
        backward(grads);
        const std::size_t count = cross ? std::size_t{BC::COUNT} : std::size_t{BC::MEM};
        for (std::size_t k = 0; k < count; ++k) {
          INFO((pre ? "pre-LN" : "post-LN") << (causal ? ", causal" : "") << (cross ? ", cross-attention" : "")
                                            << ", h = " << h << ": dL/d" << names[k]);
          const auto f = [&](std::span<const T> v) {
            BC moved = c;
            moved.a[k].assign(v.begin(), v.end());
            return moved.forward();
          };
          CHECK(attn::check_vjp(f, c.a[k], G, g[k]).passed(attn::gradcheck_tolerance<T>()));
        }
        // accumulate: every gradient once more, added
        std::vector<std::vector<T>> g2 = g;
        attn::block_gradients<T> twice = grads;
        twice.accumulate = true;
        backward(twice);
        for (std::size_t k = 0; k < count; ++k)
          for (std::size_t i = 0; i < g[k].size(); ++i)
            CHECK(std::abs(static_cast<ld>(g[k][i]) - 2 * static_cast<ld>(g2[k][i])) <=
                  1e-12L * (1 + std::abs(static_cast<ld>(g2[k][i]))));
      }
}

TEST_CASE("transformer_block: the intermediates are the pieces' own, and the pair is checked", "[block][errors]") {
  std::mt19937_64 rng(113);
  block_case<double> c(2, false, true, rng);
  using BC = block_case<double>;
  const attn::block_parameters<double> p = c.params();
  attn::block_cache<double> cache;
  attn::Matrix<double> Y(c.tq, c.d);
  const attn::MatrixView<const double> x(c.a[BC::X].data(), c.tq, c.d);
  attn::transformer_block(x, p, Y, cache, c.opts());
  // post-LN: H₁ = X + MHA(X), X₁ = LN₁(H₁), the FFN's hidden layer, H₂ = X₁ + FFN(X₁)
  attn::multi_head_cache<double> mc;
  attn::Matrix<double> att(c.tq, c.d), x1(c.tq, c.d);
  attn::multi_head_attention(x, p.attention, {.out = att.view()}, mc, c.opts());
  for (std::size_t k = 0; k < att.size(); ++k) {
    CHECK(cache.attention_out.data()[k] == att.data()[k]);
    CHECK(cache.residual_1.data()[k] == c.a[BC::X][k] + att.data()[k]);
  }
  attn::layer_norm(cache.residual_1, x1, p.norm_1);
  for (std::size_t k = 0; k < x1.size(); ++k) CHECK(cache.normed_1.data()[k] == x1.data()[k]);
  CHECK(cache.ffn.hidden.rows() == c.tq);
  CHECK(cache.ffn.hidden.cols() == c.dff);
  // the backward refuses another X, other options, another norm
  std::vector<double> dX(c.tq * c.d, 5.0);
  const attn::Matrix<double> G(c.tq, c.d, 1.0);
  const attn::block_gradients<double> g{.input = {dX.data(), c.tq, c.d}};
  std::vector<double> other = c.a[BC::X];
  other[0] += 1;
  REQUIRE_THROWS_AS(attn::transformer_block_backward(attn::MatrixView<const double>(other.data(), c.tq, c.d), p, cache,
                                                     G, g, c.opts()),
                    attn::forward_mismatch_error);
  REQUIRE_THROWS_AS(attn::transformer_block_backward(x, p, cache, G, g, attn::options{}), attn::forward_mismatch_error);
  attn::block_parameters<double> q = p;
  q.placement = attn::norm_placement::pre;
  REQUIRE_THROWS_AS(attn::transformer_block_backward(x, q, cache, G, g, c.opts()), attn::forward_mismatch_error);
  attn::Matrix<double> bad(c.tq, c.d + 1);
  REQUIRE_THROWS_MATCHES(attn::transformer_block_backward(x, p, cache, bad, g, c.opts()), attn::dimension_error,
                         Catch::Matchers::Message("attn::transformer_block_backward: dL/dY is 3x5 but should be 3x4"));
  for (const double v : dX) CHECK(v == 5.0);
  attn::block_cache<double> empty;
  REQUIRE_THROWS_AS(attn::transformer_block_backward(x, p, empty, G, g, c.opts()), attn::forward_mismatch_error);
  // W_2 must map back to d_model
  std::vector<double> w2(c.dff * 3, 0.1);
  attn::block_parameters<double> r = p;
  r.ffn.W_2 = attn::MatrixView<const double>(w2.data(), c.dff, 3);
  r.ffn.b_2 = {};
  REQUIRE_THROWS_MATCHES(attn::transformer_block(x, r, Y, cache, c.opts()), attn::dimension_error,
                         Catch::Matchers::Message("attn::transformer_block: columns of W_2 is 3 but columns of X is 4"));
}
