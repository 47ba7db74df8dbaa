// docs/self-attention.md, docs/heads.md and docs/tiled-attention.md: each example on those pages
// is the body of one test case here, verbatim.
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"
#include "doc_snippets.hpp"

namespace {

// Every ```cpp block of `page` is the body of a test case in this file; returns how many.
std::size_t blocks_found_here(const std::string& page) {
  const std::string text = attn_test::file_text(attn_test::document_path(__FILE__, page));
  const std::string self = attn_test::file_text(__FILE__);
  REQUIRE(!text.empty());
  std::size_t examples = 0;
  for (const std::string& block : attn_test::code_blocks(text, "cpp", "  ")) {
    ++examples;
    INFO(page << ":\n" << block);
    CHECK(self.find(block) != std::string::npos);
  }
  return examples;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// docs/self-attention.md
// ---------------------------------------------------------------------------------------------

TEST_CASE("docs/self-attention.md: every example is the body of a test case here", "[docs]") {
  REQUIRE(blocks_found_here("docs/self-attention.md") == 6);
}

TEST_CASE("docs/self-attention.md: self-attention by hand (W3)", "[docs]") {
  // Q = X W_Q, K = X W_K, V = X W_V; A = softmax(Q Kᵀ/√d_k); Y = A V (the unit's W3)
  const attn::Matrix<double, 3, 3> X{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};  // "I drink tea"
  const attn::Matrix<double, 3, 2> W_Q{{1, 0}, {0, 1}, {1, 1}};
  const attn::Matrix<double, 3, 2> W_K{{2, 0}, {1.5, 1.5}, {0, 2}};
  const attn::Matrix<double, 3, 2> W_V{{1, 0}, {1, 1}, {0, 1}};
  const auto r = attn::self_attention(X, W_Q, W_K, W_V);  // queries, keys, values, maps, out
  // "drink" asks q = (0, 1); its scores against the keys are (0, 1.5, 2)/√2
  const double e_drink = std::exp(1.5 / std::sqrt(2.0)), e_tea = std::exp(2 / std::sqrt(2.0));
  REQUIRE_THAT(r.maps(1, 2), Catch::Matchers::WithinRel(e_tea / (1 + e_drink + e_tea), 1e-14));
  REQUIRE_THAT(r.out(1, 1), Catch::Matchers::WithinRel((e_drink + e_tea) / (1 + e_drink + e_tea), 1e-14));
}

TEST_CASE("docs/self-attention.md: cross-attention is E3's map", "[docs]") {
  // cross-attention: queries from X (being written), keys and values from X_kv (read)
  const attn::Matrix<double> X{{2, 0.5, 0}, {0, 0.5, 2}, {0, 2, 0.5}, {1.5, 1.5, 0}};  // E3's states
  const attn::Matrix<double> X_kv{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};                   // "I drink tea"
  const attn::Matrix<double> I{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  attn::Matrix<double> Y(4, 3), A(4, 3);
  attn::multi_head_cache<double> cache;  // the projections, kept for the backward
  attn::multi_head_attention(X, X_kv, {.W_Q = I.view(), .W_K = I.view(), .W_V = I.view(), .score = attn::dot},
                             {.out = Y.view(), .maps = A.view()}, cache);
  const auto e3 = attn::align(X, X_kv, attn::dot);  // section 1's alignment map
  REQUIRE(A == e3.weights);
  REQUIRE_THAT(A(1, 2), Catch::Matchers::WithinAbs(0.736, 5e-4));  // चाय looks at "tea" (E1)
}

TEST_CASE("docs/self-attention.md: causal with a cache and a key mask", "[docs]") {
  // causal with a cache: 2 new queries over n = 4 keys; query t sees keys 0 … t + 2
  const attn::Matrix<double> Q{{1, 0}, {0, 1}};
  const attn::Matrix<double> K{{1, 0}, {0, 1}, {1, 1}, {-1, 0}};
  const attn::Matrix<double> V{{1}, {2}, {3}, {4}};
  const std::vector<char> keys{0, 1, 1, 1};  // a key-padding mask: key 0 is padding
  attn::Matrix<double> Y(2, 1), A(2, 4);
  attn::scaled_dot_product_attention(Q, K, V, {.out = Y.view(), .weights = A.view()},
                                     {.mask = keys, .causal = true});
  REQUIRE((A(0, 0) == 0.0 && A(0, 3) == 0.0));  // query 0: keys 1, 2 (0 is padding, 3 is later)
  REQUIRE((A(1, 0) == 0.0 && A(1, 3) > 0.0));    // query 1: keys 1, 2, 3
  REQUIRE_THAT(A(0, 1) + A(0, 2), Catch::Matchers::WithinAbs(1.0, 1e-15));
}

TEST_CASE("docs/self-attention.md: a row mask and a row with nothing allowed", "[docs]") {
  // a T × n row mask; row 1 allows nothing and follows the all-masked policy (zeros)
  const attn::Matrix<double> Q{{1, 0}, {0, 1}};
  const attn::Matrix<double> K{{1, 0}, {0, 1}, {1, 1}};
  const attn::Matrix<double> V{{1, 2}, {3, 4}, {5, 6}};
  const bool rows[2 * 3] = {true, false, true,     // query 0: keys 0 and 2
                            false, false, false};  // query 1: nothing
  attn::Matrix<double> Y(2, 2), A(2, 3);
  std::vector<double> L(2);
  attn::scaled_dot_product_attention(Q, K, V, {.out = Y.view(), .weights = A.view(), .logsumexp = L},
                                     {.row_mask = attn::mask_matrix_view(rows, 2, 3)});
  REQUIRE(A(0, 1) == 0.0);
  REQUIRE((Y(1, 0) == 0.0 && Y(1, 1) == 0.0 && A(1, 2) == 0.0));
  REQUIRE(L[1] == -std::numeric_limits<double>::infinity());
}

TEST_CASE("docs/self-attention.md: scaled_dot_product_attention, its scale and L", "[docs]") {
  // S = Q Kᵀ·scale, A = softmax(β S, masks), Y = A V; L_t = log Σ_j exp(β s_tj)
  const attn::Matrix<double, 1, 3> Q{{0, 0.5, 2}};                      // E1's query, one row
  const attn::Matrix<double, 3, 3> K{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};  // "I drink tea"
  const attn::Matrix<double, 3, 2> V{{1, 0}, {1, 1}, {0, 1}};           // W2's values
  const auto r = attn::scaled_dot_product_attention(Q, K, V, attn::dot);  // scale 1: E1's scores
  REQUIRE_THAT(r.out(0, 0), Catch::Matchers::WithinAbs(0.264, 5e-4));  // W2's context (0.264, 0.900)
  REQUIRE_THAT(r.out(0, 1), Catch::Matchers::WithinAbs(0.900, 5e-4));
  REQUIRE_THAT(r.logsumexp[0], Catch::Matchers::WithinRel(std::log(1 + std::exp(0.5) + std::exp(2.0)), 1e-14));
}

TEST_CASE("docs/self-attention.md: the backward, and one row's Jacobian", "[docs]") {
  // dV = Pᵀ dY, dS = β P ⊙ (dY Vᵀ − D), dQ = scale·dS K, dK = scale·dSᵀ Q
  const attn::Matrix<double> Q{{0, 0.5, 2}, {1, 0, 0}};
  const attn::Matrix<double> K{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Matrix<double> V{{1, 0}, {1, 1}, {0, 1}};
  const attn::Matrix<double> dY{{1, 0}, {0, 1}};  // ∂L/∂Y
  const attn::options opt{.causal = true};        // T = 2, n = 3: row 0 sees keys 0, 1
  attn::Matrix<double> Y(2, 2), A(2, 3);
  std::vector<double> L(2);
  attn::scaled_dot_product_attention(Q, K, V, attn::dot, {.out = Y.view(), .weights = A.view(), .logsumexp = L}, opt);
  const auto g = attn::scaled_dot_product_attention_backward(Q, K, V, attn::dot, {Y.view(), L}, dY, opt);
  // value 2 is seen by row 1 alone: ∂L/∂V_2 = A_12 dY_1
  REQUIRE_THAT(g.values(2, 1), Catch::Matchers::WithinRel(A(1, 2) * dY(1, 1), 1e-15));
  REQUIRE(g.values(2, 0) == 0.0);
  // row 1's part of ∂L/∂Q is its Jacobian's transpose times dY_1
  attn::Matrix<double> J(2, 3);
  attn::jacobian_query(Q, K, V, attn::dot, 1, J.view(), opt);  // ∂y_1/∂q_1
  for (std::size_t i = 0; i < 3; ++i)
    REQUIRE_THAT(g.queries(1, i), Catch::Matchers::WithinAbs(J(0, i) * dY(1, 0) + J(1, i) * dY(1, 1), 1e-15));
}

// ---------------------------------------------------------------------------------------------
// docs/heads.md
// ---------------------------------------------------------------------------------------------

TEST_CASE("docs/heads.md: every example is the body of a test case here", "[docs]") {
  REQUIRE(blocks_found_here("docs/heads.md") == 5);
}

TEST_CASE("docs/heads.md: two heads, every step (W7)", "[docs]") {
  // head i takes columns [3i, 3i + 3) of Q, K and V; Y = [Z_1 Z_2] W_O
  const attn::Matrix<double, 3, 3> X{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};  // "I drink tea"
  const attn::Matrix<double, 3, 6> W_Q{{0, 0, 0, 5, 0, 0}, {5, 0, 0, 0, 5, 0}, {0, 5, 0, 0, 0, 5}};
  const attn::Matrix<double, 3, 6> W_K{{1, 0, 0, 1, 0, 0}, {0, 1, 0, 0, 1, 0}, {0, 0, 1, 0, 0, 1}};
  const attn::Matrix<double, 6, 3> W_O{{0.5, 0, 0}, {0, 0.5, 0}, {0, 0, 0.5}, {0.5, 0, 0}, {0, 0.5, 0}, {0, 0, 0.5}};
  const auto r = attn::self_attention<2>(X, W_Q, W_K, W_K, W_O);  // the values are the words: W_V = W_K
  // head 1 (rows 0–2 of maps) looks at the word before, head 2 (rows 3–5) at the word itself
  const double e = std::exp(5 / std::sqrt(3.0)), sure = e / (e + 2);
  REQUIRE_THAT(r.maps(1, 0), Catch::Matchers::WithinRel(sure, 1e-14));      // head 1: drink → I
  REQUIRE_THAT(r.maps(3 + 1, 1), Catch::Matchers::WithinRel(sure, 1e-14));  // head 2: drink → drink
  REQUIRE_THAT(r.out(1, 0), Catch::Matchers::WithinRel((sure + 1 / (e + 2)) / 2, 1e-14));  // the mean
}

TEST_CASE("docs/heads.md: an nn.MultiheadAttention state, read without a copy", "[docs]") {
  // in_proj_weight (3E × E: W_q, W_k, W_v, each out × in), in_proj_bias (3E), out_proj.weight (E × E), out_proj.bias
  const std::size_t E = 4, h = 2;
  std::vector<float> in_proj_weight(3 * E * E), in_proj_bias(3 * E), out_proj_weight(E * E), out_proj_bias(E);
  for (std::size_t k = 0; k < in_proj_weight.size(); ++k) in_proj_weight[k] = 0.1f * static_cast<float>(k % 7) - 0.3f;
  for (std::size_t k = 0; k < out_proj_weight.size(); ++k) out_proj_weight[k] = 0.05f * static_cast<float>(k % 5);
  for (std::size_t k = 0; k < 3 * E; ++k) in_proj_bias[k] = 0.01f * static_cast<float>(k);
  for (std::size_t k = 0; k < E; ++k) out_proj_bias[k] = -0.1f;
  const attn::MatrixView<const float> in_proj(in_proj_weight.data(), 3 * E, E);  // PyTorch's rows
  const std::span<const float> in_bias(in_proj_bias);
  const attn::multi_head_parameters<float> p{
      .W_Q = attn::transposed(in_proj.subrows(0, E)),  // attn's W_Q = W_qᵀ, read where it lies
      .W_K = attn::transposed(in_proj.subrows(E, E)),
      .W_V = attn::transposed(in_proj.subrows(2 * E, E)),
      .W_O = attn::transposed(attn::MatrixView<const float>(out_proj_weight.data(), E, E)),
      .b_Q = in_bias.subspan(0, E),
      .b_K = in_bias.subspan(E, E),
      .b_V = in_bias.subspan(2 * E, E),
      .b_O = out_proj_bias,
      .heads = h};
  const attn::Matrix<float> X{{1, 0, 2, -1}, {1, 0, 2, -1}, {1, 0, 2, -1}};  // three equal words
  const auto r = attn::multi_head_attention(X, p);  // r.out is PyTorch's attn_output
  // equal words: every weight is 1/3, so y = (x W_vᵀ + b_v) W_outᵀ + b_out, PyTorch's formula
  for (std::size_t o = 0; o < E; ++o) {
    double y = out_proj_bias[o];
    for (std::size_t c = 0; c < E; ++c) {
      double v = in_proj_bias[2 * E + c];
      for (std::size_t a = 0; a < E; ++a) v += in_proj_weight[(2 * E + c) * E + a] * X(0, a);
      y += out_proj_weight[o * E + c] * v;
    }
    REQUIRE_THAT(r.out(1, o), Catch::Matchers::WithinAbs(y, 1e-5));  // float: 100 ε of |y| < 1
  }
}

TEST_CASE("docs/heads.md: a batch of two sentences with padding", "[docs]") {
  // B = 2 sentences of T = 3 words stacked in X; h = 2 heads of d_k = d_v = 1; no W_O: Y = Z
  const attn::Matrix<double> X{{1, 0}, {0, 1}, {1, 1}, {2, 0}, {0, 2}, {1, -1}};
  const attn::Matrix<double> I{{1, 0}, {0, 1}};
  const std::vector<char> keys{1, 1, 1, 1, 1, 0};  // B·n entries: sentence 1's last word is padding
  // Y, the cache and every head's map and scores (head i of sentence b: rows (i·B + b)·T …)
  const auto r = attn::multi_head_attention(X, {.W_Q = I.view(), .W_K = I.view(), .W_V = I.view(), .heads = 2},
                                            {.mask = keys}, {.maps = true, .scores = true}, 2);
  REQUIRE(r.maps((1 * 2 + 1) * 3 + 0, 2) == 0.0);  // head 1, sentence 1, word 0: the padding gets 0
  REQUIRE(r.scores((0 * 2 + 1) * 3 + 0, 2) == 2.0);  // head 0, sentence 1, word 0: q = 2, k = 1, before the mask
  // head 0, sentence 0, word 0: q = 1, keys (1, 0, 1), scale 1/√1: weights (e, 1, e)/(2e + 1)
  const double e = std::exp(1.0);
  REQUIRE_THAT(r.out(0, 0), Catch::Matchers::WithinRel(2 * e / (2 * e + 1), 1e-14));
}

TEST_CASE("docs/heads.md: decoding with a cache", "[docs][kv_cache]") {
  // one layer: d_model = 4, h = 2 heads of d_k = d_v = 2 over h_kv = 1 key/value head (multi-query)
  const attn::Matrix<float> W_Q(4, 4, 0.25f), W_K(4, 2, 0.5f), W_V(4, 2, 1.0f), W_O(4, 4, 0.125f);
  const attn::multi_head_parameters<float> params{.W_Q = W_Q, .W_K = W_K, .W_V = W_V, .W_O = W_O,
                                                  .heads = 2, .kv_heads = 1};
  attn::kv_cache<float> cache(/*batch*/ 2, /*capacity*/ 64, /*kv_heads*/ 1, /*d_k*/ 2, /*d_v*/ 2);
  const attn::Matrix<float> prompt0(7, 4, 0.5f), prompt1(12, 4, -0.5f);  // prompts of two lengths
  attn::Matrix<float> Y0(7, 4), Y1(12, 4);
  attn::multi_head_attention_cached(prompt0, params, cache, 0, Y0);  // sequence 0's prompt
  attn::multi_head_attention_cached(prompt1, params, cache, 1, Y1);  // sequence 1's
  attn::Matrix<float> x_new(2, 4, 1.0f), y_new(2, 4);                // one new row of each
  for (int step = 0; step < 20; ++step) attn::multi_head_attention_cached(x_new, params, cache, y_new);
  REQUIRE(cache.length(0) == 27);
  REQUIRE(cache.length(1) == 32);
}

TEST_CASE("docs/heads.md: the backward and jacobian_input", "[docs]") {
  // ∂L/∂W_O = Zᵀ dY; row s of ∂L/∂X = Σ_t (∂y_t/∂x_s)ᵀ dY_t
  const attn::Matrix<double> X{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Matrix<double> W_Q{{0.5, -1, 0, 2}, {1, 0, 1, 0}, {0, 1, -1, 1}};  // h = 2, d_k = 2
  const attn::Matrix<double> W_K{{1, 0, 0.5, 0}, {0, 1, 0, -1}, {1, 1, 1, 1}};
  const attn::Matrix<double> W_V{{1, 2, 0, -1}, {0, 1, 1, 0}, {-1, 0, 2, 1}};     // d_v = 2
  const attn::Matrix<double> W_O{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, -1, 0.5}};
  const attn::multi_head_parameters<double> p{
      .W_Q = W_Q.view(), .W_K = W_K.view(), .W_V = W_V.view(), .W_O = W_O.view(), .heads = 2};
  const attn::options opt{.causal = true};
  auto r = attn::multi_head_attention(X, p, opt);  // r.out (Y), r.cache
  const attn::Matrix<double> dY{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};  // ∂L/∂Y
  attn::Matrix<double> dX(3, 3), dW_O(4, 3);
  attn::multi_head_attention_backward(X, p, r.cache, dY, {.inputs = dX.view(), .W_O = dW_O.view()}, opt);
  REQUIRE_THAT(dW_O(1, 2), Catch::Matchers::WithinAbs(r.cache.heads_out(2, 1), 1e-15));  // (Zᵀ dY)_12 = Z_21
  attn::Matrix<double> J(3, 3);
  for (std::size_t s = 0; s < 3; ++s) {
    double row_s[3] = {0, 0, 0};
    for (std::size_t t = 0; t < 3; ++t) {
      attn::jacobian_input(X, p, t, s, J.view(), opt);  // ∂y_t/∂x_s
      for (std::size_t m = 0; m < 3; ++m) row_s[m] += J(t, m);  // (Jᵀ dY_t)_m, dY_t = e_t
    }
    for (std::size_t m = 0; m < 3; ++m) REQUIRE_THAT(dX(s, m), Catch::Matchers::WithinAbs(row_s[m], 1e-13));
  }
}

// ---------------------------------------------------------------------------------------------
// docs/tiled-attention.md
// ---------------------------------------------------------------------------------------------

TEST_CASE("docs/tiled-attention.md: every example is the body of a test case here", "[docs]") {
  REQUIRE(blocks_found_here("docs/tiled-attention.md") == 1);
}

TEST_CASE("docs/tiled-attention.md: Y and L only, the map from the same pass, the backward from L", "[docs]") {
  // the forward writes Y and L; asked for the map too, the same pass writes it and Y is unchanged
  std::mt19937_64 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  attn::Matrix<float> Q(200, 64), K(300, 64), V(300, 64);
  for (attn::Matrix<float>* m : {&Q, &K, &V})
    for (std::size_t i = 0; i < m->size(); ++i) m->data()[i] = normal(rng);
  const attn::options opt{.causal = true};  // T < n: query t sees keys 0 … t + 100
  attn::Matrix<float> Y(200, 64), Y_with_map(200, 64), A(200, 300);
  std::vector<float> L(200);
  attn::scaled_dot_product_attention(Q, K, V, {.out = Y.view(), .logsumexp = L}, opt);
  attn::scaled_dot_product_attention(Q, K, V, {.out = Y_with_map.view(), .weights = A.view()}, opt);
  REQUIRE(Y == Y_with_map);
  // the backward rebuilds the map from L; given nothing saved, it runs the forward first
  const attn::Matrix<float> dY(200, 64, 1.0f);
  const auto from_saved = attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {Y.view(), L}, dY, opt);
  const auto from_scratch = attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {}, dY, opt);
  REQUIRE(from_saved.keys == from_scratch.keys);
}
