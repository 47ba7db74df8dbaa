// W9. The transformer block (Unit 18, section 9).
// A block is attention plus a small two-layer network applied to each word on its own, each
// wrapped in a residual (add what came in) and a layer norm (rescale each word's numbers to mean
// 0 and variance 1). The paper puts the norm after each residual (post-LN); many later models put
// it before each sub-layer (pre-LN), which trains more easily when blocks are stacked deep.
//
// LayerNorm of (1, 2, 3, 4) with γ = 1, β = 0, ε = 0: mean 2.5, variance 1.25, output ≈ (−1.342,
// −0.447, 0.447, 1.342). GELU(1) = 0.841 (exact) and 0.841 (tanh form; they differ in the 4th
// decimal). Then one whole block, post-LN and pre-LN, on W3's sentence "I drink tea": its
// attention is W3's head, W_O and a feed-forward layer of 4 hidden units chosen here; each Y is
// checked against the block worked out by hand below, in long double.

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "attn/report/format.hpp"
#include "unit_check.hpp"
#include "worked_examples.hpp"

namespace {

using ld = long double;
using M = std::vector<std::vector<ld>>;

// The block by hand: products, softmax, LayerNorm (γ = 1, β = 0, ε = 1e-5), GELU
M product(const M& a, const M& b) {
  M c(a.size(), std::vector<ld>(b[0].size(), 0));
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t k = 0; k < b.size(); ++k)
      for (std::size_t j = 0; j < b[0].size(); ++j) c[i][j] += a[i][k] * b[k][j];
  return c;
}
M plus(M a, const M& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < a[i].size(); ++j) a[i][j] += b[i][j];
  return a;
}
M norm_rows(M a) {
  for (auto& row : a) {
    ld mu = 0, var = 0;
    for (const ld v : row) mu += v;
    mu /= static_cast<ld>(row.size());
    for (const ld v : row) var += (v - mu) * (v - mu);
    var /= static_cast<ld>(row.size());
    for (ld& v : row) v = (v - mu) / std::sqrt(var + 1e-5L);
  }
  return a;
}
M attention(const M& x, const M& wq, const M& wk, const M& wv, const M& wo) {
  const M q = product(x, wq), k = product(x, wk), v = product(x, wv);
  M z(x.size(), std::vector<ld>(v[0].size(), 0));
  for (std::size_t t = 0; t < x.size(); ++t) {
    std::vector<ld> e(x.size());
    ld sum = 0;
    for (std::size_t j = 0; j < x.size(); ++j) {
      ld s = 0;
      for (std::size_t c = 0; c < q[0].size(); ++c) s += q[t][c] * k[j][c];
      sum += e[j] = std::exp(s / std::sqrt(static_cast<ld>(q[0].size())));
    }
    for (std::size_t j = 0; j < x.size(); ++j)
      for (std::size_t c = 0; c < v[0].size(); ++c) z[t][c] += e[j] / sum * v[j][c];
  }
  return product(z, wo);
}
M ffn(const M& x, const M& w1, const M& w2) {
  M h = product(x, w1);
  for (auto& row : h)
    for (ld& v : row) v = v * 0.5L * std::erfc(-v / std::sqrt(2.0L));  // GELU
  return product(h, w2);
}
template <class Mat>
M rows_of(const Mat& m) {
  M r(m.rows(), std::vector<ld>(m.cols()));
  for (std::size_t i = 0; i < m.rows(); ++i)
    for (std::size_t j = 0; j < m.cols(); ++j) r[i][j] = m(i, j);
  return r;
}

}  // namespace

int main() {
  using namespace worked;
  unit::checker check;

  // 1. LayerNorm by hand
  std::printf("W9. The transformer block\n\nLayerNorm of (1, 2, 3, 4), gamma 1, beta 0, eps 0\n\n");
  const attn::Matrix<double> row{{1, 2, 3, 4}};
  attn::Matrix<double> normed(1, 4);
  std::vector<double> mean(1), rstd(1);
  attn::layer_norm(row, normed, {.eps = 0}, {mean, rstd});
  std::printf("mean %s, variance %s\n\n", check.print("mean", mean[0], "2.500").c_str(),
              check.print("variance", 1 / (rstd[0] * rstd[0]), "1.250").c_str());
  const char* unit_ln[] = {"-1.342", "-0.447", "0.447", "1.342"};
  unit::show(unit::matrix_table(check, "LayerNorm", normed, {"output"}, {"1", "2", "3", "4"}, unit_ln));

  // 2. GELU(1), both forms
  const double exact = attn::activate(attn::activation::gelu, 1.0);
  const double tanh_form = attn::activate(attn::activation::gelu_tanh, 1.0);
  std::printf("GELU(1) = %s (exact, x·Φ(x)), %s (tanh form); to 4 decimals %s and %s\n\n",
              check.print("GELU(1)", exact, "0.841").c_str(), check.print("GELU tanh(1)", tanh_form, "0.841").c_str(),
              attn::report::fixed(exact, 4).c_str(), attn::report::fixed(tanh_form, 4).c_str());
  check.claim(attn::report::fixed(exact, 4) != attn::report::fixed(tanh_form, 4), "the two forms differ in the 4th decimal");

  // 3. One block on "I drink tea": W3's head, W_O back to 3 numbers, 4 hidden units of GELU
  const auto& W_O = w9::W_O;
  const auto& W_1 = w9::W_1;
  const auto& W_2 = w9::W_2;
  const std::vector<std::string> words = {"I", "drink", "tea"};
  for (const auto placement : {attn::norm_placement::post, attn::norm_placement::pre}) {
    const bool post = placement == attn::norm_placement::post;
    attn::block_parameters<double> p;
    p.attention = {.W_Q = attn::as_view(w3::W_Q), .W_K = attn::as_view(w3::W_K),
                   .W_V = attn::as_view(w3::W_V), .W_O = attn::as_view(W_O)};
    p.ffn = {.W_1 = attn::as_view(W_1), .W_2 = attn::as_view(W_2),
             .act = attn::activation::gelu};
    p.placement = placement;
    attn::block_cache<double> cache;
    attn::Matrix<double> Y(3, 3);
    attn::transformer_block(i_drink_tea, p, Y, cache);
    std::printf("%s on \"I drink tea\"\n\n", post ? "Post-LN: Y = LN(X1 + FFN(X1)), X1 = LN(X + MHA(X))"
                                              : "Pre-LN: Y = H1 + FFN(LN(H1)), H1 = X + MHA(LN(X))");
    unit::show(unit::matrix_table(check, "attention output", cache.attention_out, words, {"1", "2", "3"}));
    unit::show(unit::matrix_table(check, "Y", Y, words, {"1", "2", "3"}));
    // by hand
    const M x = rows_of(i_drink_tea), wq = rows_of(w3::W_Q), wk = rows_of(w3::W_K), wv = rows_of(w3::W_V),
            wo = rows_of(W_O), w1 = rows_of(W_1), w2 = rows_of(W_2);
    M want;
    if (post) {
      const M x1 = norm_rows(plus(x, attention(x, wq, wk, wv, wo)));
      want = norm_rows(plus(x1, ffn(x1, w1, w2)));
    } else {
      const M h1 = plus(x, attention(norm_rows(x), wq, wk, wv, wo));
      want = plus(h1, ffn(norm_rows(h1), w1, w2));
    }
    ld worst = 0;
    for (std::size_t t = 0; t < 3; ++t)
      for (std::size_t i = 0; i < 3; ++i) worst = std::max(worst, std::abs(static_cast<ld>(Y(t, i)) - want[t][i]));
    check.claim(worst < 1e-12L, std::string(post ? "post-LN" : "pre-LN") + ": Y is the block worked out by hand");
    if (post) {  // each row of a post-LN block's output has mean 0 and variance 1 (γ = 1, β = 0)
      bool normal = true;
      for (std::size_t t = 0; t < 3; ++t) {
        double m = 0, v = 0;
        for (std::size_t i = 0; i < 3; ++i) m += Y(t, i) / 3;
        for (std::size_t i = 0; i < 3; ++i) v += (Y(t, i) - m) * (Y(t, i) - m) / 3;
        normal = normal && std::abs(m) < 1e-12 && std::abs(v - 1) < 1e-4;  // (ε = 1e-5 takes a little)
      }
      check.claim(normal, "post-LN: each word's output has mean 0 and variance 1");
    }
  }
  return check.finish();
}
