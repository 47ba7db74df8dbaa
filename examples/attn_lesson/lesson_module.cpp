// examples/attn_lesson/lesson_module.cpp: attn as the lesson page runs it, compiled to
// WebAssembly (emcc) and inlined into the page by attn-lesson. Every number the page shows comes
// from one of these functions; the page's JavaScript only copies numbers into and out of the
// module's memory and draws them. Each function returns 0, or 1 with the library's message in
// lesson_error() (the library's own errors: a size that does not fit, a β that is not finite).
//
// Matrices are row-major doubles in the module's memory (the page allocates them with malloc).
// It also compiles natively (g++ / clang++): tests/lesson/test_lesson_module.cpp calls these
// functions and checks them against attn-calc's numbers, so the module is tested without a browser.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "attn/activations.hpp"
#include "attn/attention.hpp"
#include "attn/block.hpp"
#include "attn/cross_entropy.hpp"
#include "attn/model.hpp"
#include "attn/heads.hpp"
#include "attn/matrix.hpp"
#include "attn/positions.hpp"
#include "attn/report/format.hpp"
#include "attn/report/svg.hpp"
#include "attn/score.hpp"

#if defined(__EMSCRIPTEN__)
#include <emscripten/emscripten.h>
#define ATTN_LESSON_EXPORT extern "C" EMSCRIPTEN_KEEPALIVE
#else
#define ATTN_LESSON_EXPORT extern "C"
#endif

namespace {

std::string last_error;

using cview = attn::MatrixView<const double>;
using mview = attn::MatrixView<double>;

cview in(const double* p, std::size_t rows, std::size_t cols) { return cview(p, rows, cols); }
mview out(double* p, std::size_t rows, std::size_t cols) { return mview(p, rows, cols); }

/// Runs f, turning an exception into 1 and its message into lesson_error().
template <class F>
int guarded(F&& f) noexcept {
  try {
    f();
    last_error.clear();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "unknown error";
  }
  return 1;
}

attn::options options_of(double beta, int causal) {
  attn::options opt;
  opt.beta = beta;
  opt.causal = causal != 0;
  return opt;
}

/// Copies an alignment_result into the caller's buffers.
template <class R>
void copy_out(const R& r, double* scores, double* weights, double* contexts) {
  const std::size_t T = r.weights.rows(), n = r.weights.cols(), dv = r.contexts.cols();
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t j = 0; j < n; ++j) {
      if (scores != nullptr) scores[t * n + j] = r.scores(t, j);
      weights[t * n + j] = r.weights(t, j);
    }
    if (contexts != nullptr)
      for (std::size_t i = 0; i < dv; ++i) contexts[t * dv + i] = r.contexts(t, i);
  }
}

}  // namespace

/// The library's message for the last call that returned 1 (UTF-8, NUL-terminated).
ATTN_LESSON_EXPORT const char* lesson_error() { return last_error.c_str(); }

/// x with `decimals` digits after the point, as attn-calc prints it (attn::report::fixed: half
/// away from zero, never "-0.000"), into buf (NUL-terminated, at most cap bytes). Returns the
/// length, or −1 when it does not fit.
ATTN_LESSON_EXPORT int lesson_fixed(double x, int decimals, char* buf, int cap) {
  const std::string s = attn::report::fixed(x, decimals);
  if (cap <= 0 || s.size() + 1 > static_cast<std::size_t>(cap)) return -1;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return static_cast<int>(s.size());
}

/// The colour of weight w on the SVG heatmaps' scale (attn/report/svg.hpp: light to dark blue,
/// readable by colour-blind readers and in grey) and the text colour that reads on it, as
/// "#rrggbb #rrggbb" into buf (16 bytes).
ATTN_LESSON_EXPORT void lesson_colour(double w, char* buf) {
  namespace d = attn::report::detail;
  const d::rgb c = d::scale_colour(w);
  const std::string s = d::hex_colour(c) + " " + d::text_colour_on(c);
  std::memcpy(buf, s.c_str(), s.size() + 1);
}

/// The alignment map of T queries (T × dq) over n keys (n × dk) and values (n × dv) with
/// attn::align: score 0 dot, 1 scaled_dot, 2 general (W: dq × dk), 3 additive (W1: k × dk,
/// W2: k × dq, v: k); sharpness β; causal when `causal`. Writes scores and weights (T × n) and
/// contexts (T × dv); scores or contexts may be null.
ATTN_LESSON_EXPORT int lesson_align(int score, int T, int n, int dq, int dk, int dv, const double* Q,
                                    const double* K, const double* V, const double* W, const double* W1,
                                    const double* W2, const double* v, int k, double beta, int causal,
                                    double* scores, double* weights, double* contexts) {
  return guarded([&] {
    const auto t = static_cast<std::size_t>(T), nn = static_cast<std::size_t>(n);
    const auto q = in(Q, t, static_cast<std::size_t>(dq));
    const auto keys = in(K, nn, static_cast<std::size_t>(dk));
    const auto values = in(V, nn, static_cast<std::size_t>(dv));
    const attn::options opt = options_of(beta, causal);
    const auto ku = static_cast<std::size_t>(k);
    switch (score) {
      case 1: copy_out(attn::align(q, keys, values, attn::scaled_dot, opt), scores, weights, contexts); break;
      case 2: {
        const attn::general<double> s(in(W, static_cast<std::size_t>(dq), static_cast<std::size_t>(dk)));
        copy_out(attn::align(q, keys, values, s, opt), scores, weights, contexts);
        break;
      }
      case 3: {
        const attn::additive<double> s(in(W1, ku, static_cast<std::size_t>(dk)),
                                       in(W2, ku, static_cast<std::size_t>(dq)), std::span<const double>(v, ku));
        copy_out(attn::align(q, keys, values, s, opt), scores, weights, contexts);
        break;
      }
      default: copy_out(attn::align(q, keys, values, attn::dot, opt), scores, weights, contexts);
    }
  });
}

/// The additive score's hand steps for query q (dq) and notes H (n × dk): pre (n × k) holds
/// W1 h_j + W2 q (the score's own pre_activation) and act (n × k) its tanh.
ATTN_LESSON_EXPORT int lesson_additive_steps(int n, int dq, int dk, int k, const double* q, const double* H,
                                             const double* W1, const double* W2, const double* v,
                                             double* pre, double* act) {
  return guarded([&] {
    const auto ku = static_cast<std::size_t>(k), nn = static_cast<std::size_t>(n);
    const attn::additive<double> s(in(W1, ku, static_cast<std::size_t>(dk)),
                                   in(W2, ku, static_cast<std::size_t>(dq)), std::span<const double>(v, ku));
    s.check("lesson_additive_steps", static_cast<std::size_t>(dq), static_cast<std::size_t>(dk));
    const std::span<const double> qs(q, static_cast<std::size_t>(dq));
    for (std::size_t j = 0; j < nn; ++j)
      for (std::size_t i = 0; i < ku; ++i) {
        const double x = s.pre_activation(i, qs, std::span<const double>(H + j * static_cast<std::size_t>(dk),
                                                                          static_cast<std::size_t>(dk)));
        pre[j * ku + i] = x;
        act[j * ku + i] = std::tanh(x);
      }
  });
}

/// Unit 17's baseline (attn::no_attention): every one of T rows of out (T × dv) is the last note.
ATTN_LESSON_EXPORT int lesson_no_attention(int T, int dq, int n, int dv, const double* Q, const double* V,
                                           double* outp) {
  return guarded([&] {
    const auto r = attn::no_attention(in(Q, static_cast<std::size_t>(T), static_cast<std::size_t>(dq)),
                                      in(V, static_cast<std::size_t>(n), static_cast<std::size_t>(dv)));
    std::memcpy(outp, r.data(), r.rows() * r.cols() * sizeof(double));
  });
}

/// Self-attention with projections and h heads (attn::multi_head_attention) of the sentence X
/// (T × d): W_Q, W_K (d × h·dk), W_V (d × h·dv), W_O (h·dv × dout, or null: Y is the
/// concatenation, dout = h·dv). scaled: 1/√dk (else dot). Writes every head's map (h·T × T,
/// head i in rows i·T …) and Y (T × dout).
ATTN_LESSON_EXPORT int lesson_self(int T, int d, int heads, int hdk, int hdv, int dout, const double* X,
                                   const double* WQ, const double* WK, const double* WV, const double* WO,
                                   int scaled, double beta, int causal, double* maps, double* Y) {
  return guarded([&] {
    const auto t = static_cast<std::size_t>(T), dd = static_cast<std::size_t>(d), h = static_cast<std::size_t>(heads);
    attn::multi_head_parameters<double> p;
    p.W_Q = in(WQ, dd, static_cast<std::size_t>(hdk));
    p.W_K = in(WK, dd, static_cast<std::size_t>(hdk));
    p.W_V = in(WV, dd, static_cast<std::size_t>(hdv));
    if (WO != nullptr) p.W_O = in(WO, static_cast<std::size_t>(hdv), static_cast<std::size_t>(dout));
    p.heads = h;
    p.score = scaled != 0 ? attn::dot_product_score_choice{attn::scaled_dot}
                          : attn::dot_product_score_choice{attn::dot};
    attn::multi_head_cache<double> cache;
    attn::multi_head_attention(in(X, t, dd), p,
                               attn::multi_head_views<double>{.out = out(Y, t, static_cast<std::size_t>(dout)),
                                                              .maps = out(maps, h * t, t)},
                               cache, options_of(beta, causal));
  });
}

/// One transformer block (attn::transformer_block) on X (T × d), stage by stage: self-attention
/// with h heads (W_Q, W_K: d × h·dk; W_V: d × h·dv; W_O: h·dv × d, or null when h·dv = d),
/// scaled dot; the feed-forward layer (W₁: d × dff, W₂: dff × d) with activation `act`
/// (0 ReLU, 1 GELU, 2 GELU's tanh form); both norms LayerNorm with γ = 1, β = 0 and ε = eps;
/// `pre` 0 post-LN, 1 pre-LN. Writes into `stages`, one after the other (T·(6d + 2·dff) + h·T·T
/// numbers): MHA(·), H₁, the first norm's output (post X₁ = LN₁(H₁); pre A = LN₁(X)), the hidden
/// layer before and after the activation (T × dff each), FFN(·), post H₂ = X₁ + FFN(X₁) or pre
/// B = LN₂(H₁), Y, then every head's map (h·T × T, head i in rows i·T …) as attn-calc --block
/// shows them.
ATTN_LESSON_EXPORT int lesson_block(int T, int d, int heads, int hdk, int hdv, int dff, const double* X,
                                    const double* WQ, const double* WK, const double* WV, const double* WO,
                                    const double* W1, const double* W2, double eps, int pre, int act,
                                    double* stages) {
  return guarded([&] {
    const auto t = static_cast<std::size_t>(T), dd = static_cast<std::size_t>(d), f = static_cast<std::size_t>(dff),
               h = static_cast<std::size_t>(heads);
    attn::block_parameters<double> p;
    p.attention.W_Q = in(WQ, dd, static_cast<std::size_t>(hdk));
    p.attention.W_K = in(WK, dd, static_cast<std::size_t>(hdk));
    p.attention.W_V = in(WV, dd, static_cast<std::size_t>(hdv));
    if (WO != nullptr) p.attention.W_O = in(WO, static_cast<std::size_t>(hdv), dd);
    p.attention.heads = h;
    p.ffn.W_1 = in(W1, dd, f);
    p.ffn.W_2 = in(W2, f, dd);
    p.ffn.act = act == 0 ? attn::activation::relu : act == 2 ? attn::activation::gelu_tanh : attn::activation::gelu;
    p.norm_1.eps = eps;
    p.norm_2.eps = eps;
    p.placement = pre != 0 ? attn::norm_placement::pre : attn::norm_placement::post;
    attn::block_cache<double> cache;
    attn::Matrix<double> Y(t, dd), map(h * t, t), again_out(t, dd);
    attn::transformer_block(in(X, t, dd), p, Y, cache);
    // the map: the same attention on the same input, asked for its weights (as attn-calc does)
    attn::multi_head_cache<double> again;
    attn::multi_head_attention(pre != 0 ? cache.normed_1.view() : in(X, t, dd), p.attention,
                               attn::multi_head_views<double>{.out = again_out.view(), .maps = map.view()}, again);
    double* o = stages;
    for (const attn::Matrix<double>* m : {&cache.attention_out, &cache.residual_1, &cache.normed_1, &cache.ffn.pre,
                                          &cache.ffn.hidden, &cache.ffn_out, &cache.residual_2, &Y, &map}) {
      std::memcpy(o, m->data(), m->rows() * m->cols() * sizeof(double));
      o += m->rows() * m->cols();
    }
  });
}

/// The tiny model's forward (attn-calc --model's, examples/attn_calc/model_walk.hpp): a decoder of
/// one block, d_model 8, two heads, d_ff 32, pre-LN with a final LayerNorm, learned positions,
/// GELU, biases, over a vocabulary of V words, every parameter from attn::initialize(seed); the
/// T tokens (each in [0, V)) run through attn::model_forward. Writes into `stages`, one after
/// the other: E[y], P[t], X₀, A = LN₁(X₀) (T × 8 each), both heads' causal maps (2T × T),
/// MHA(A), H₁, B = LN₂(H₁) (T × 8), the hidden layer before and after GELU (T × 32 each),
/// FFN(B), X₁, H = LN_f(X₁) (T × 8), the logits and their softmax (T × V each), each
/// position's loss −log p(the next token) (T; 0 at the last, which has none) and their mean
/// (1): T·(10·8 + 2·32 + 2·T + 2·V + 1) + 1 numbers.
ATTN_LESSON_EXPORT int lesson_model(int T, int V, const double* token_ids, int seed, double* stages) {
  return guarded([&] {
    const auto t = static_cast<std::size_t>(T), v = static_cast<std::size_t>(V);
    const attn::model_config mc{.family = attn::model_family::decoder, .vocabulary = v, .d_model = 8, .layers = 1,
                                .heads = 2, .d_ff = 32, .max_positions = t,
                                .positions = attn::position_encoding::learned, .act = attn::activation::gelu,
                                .placement = attn::norm_placement::pre, .final_norm = true};
    std::vector<std::int64_t> tokens(t), targets(t);
    for (std::size_t i = 0; i < t; ++i) tokens[i] = static_cast<std::int64_t>(token_ids[i]);
    for (std::size_t i = 0; i < t; ++i) targets[i] = i + 1 < t ? tokens[i + 1] : -100;  // the last: no next token
    std::vector<double> buffer(attn::parameter_count(mc));
    const auto p = attn::bind_parameters<double>(mc, buffer);
    attn::initialize(p, static_cast<std::uint64_t>(static_cast<std::uint32_t>(seed)));
    attn::model_cache<double> cache;
    attn::Matrix<double> logits(t, v), probabilities(t, v), maps(2 * t, t), again_out(t, 8);
    attn::model_forward(p, attn::model_input{.tokens = tokens}, logits, cache);
    const auto bp = attn::detail::model_block(mc, p.decoder[0]);
    const auto& bc = cache.blocks[0];
    attn::multi_head_cache<double> again;
    attn::multi_head_attention(bc.normed_1, bp.attention,
                               attn::multi_head_views<double>{.out = again_out.view(), .maps = maps.view()}, again,
                               options_of(1, 1));
    for (std::size_t i = 0; i < t; ++i) attn::softmax(logits.row(i), probabilities.row(i));
    std::vector<double> losses(t);
    const double mean = attn::cross_entropy(logits, targets, losses);
    double* o = stages;
    for (std::size_t i = 0; i < t; ++i)
      for (std::size_t k = 0; k < 8; ++k) *o++ = p.token_embedding(static_cast<std::size_t>(tokens[i]), k);
    for (std::size_t i = 0; i < t; ++i)
      for (std::size_t k = 0; k < 8; ++k) *o++ = p.position_table(i, k);
    for (const attn::Matrix<double>* m : std::initializer_list<const attn::Matrix<double>*>{&cache.embedded, &bc.normed_1, &maps, &bc.attention_out, &bc.residual_1,
                                          &bc.residual_2, &bc.ffn.pre, &bc.ffn.hidden, &bc.ffn_out, &cache.outputs[0],
                                          &cache.hidden, &logits, &probabilities}) {
      std::memcpy(o, m->data(), m->rows() * m->cols() * sizeof(double));
      o += m->rows() * m->cols();
    }
    for (std::size_t i = 0; i < t; ++i) *o++ = losses[i];
    *o = mean;
  });
}

/// The sinusoidal encoding PE (P × d, d even; attn::sinusoidal_encoding) into pe.
ATTN_LESSON_EXPORT int lesson_sinusoidal(int P, int d, double* pe) {
  return guarded([&] {
    attn::sinusoidal_encoding(out(pe, static_cast<std::size_t>(P), static_cast<std::size_t>(d)));
  });
}

/// x (1 × d, d even) rotated by RoPE at position p (attn::apply_rotary, interleaved pairs), in place.
ATTN_LESSON_EXPORT int lesson_rope(int d, int p, double* x) {
  return guarded([&] {
    attn::apply_rotary(out(x, 1, static_cast<std::size_t>(d)), 1, static_cast<std::size_t>(p));
  });
}

/// W12's price of one head's map, T queries and keys, d numbers per row, in float (4 bytes), into
/// counts: [scores T·T, with the causal mask T(T+1)/2, the map in MiB 4·T·T/2^20, the tiled
/// form's Q, K, V and Y in MiB 4·4·T·d/2^20, its log-sum-exp L in KiB 4·T/2^10]
/// (examples/price_of_pairs.cpp's table).
ATTN_LESSON_EXPORT void lesson_price(int T, int d, double* counts) {
  const auto t = static_cast<double>(T), dd = static_cast<double>(d);
  constexpr double MiB = 1024.0 * 1024.0, KiB = 1024.0, bytes = 4;
  counts[0] = t * t;
  counts[1] = t * (t + 1) / 2;
  counts[2] = bytes * t * t / MiB;
  counts[3] = 4 * bytes * t * dd / MiB;
  counts[4] = bytes * t / KiB;
}
