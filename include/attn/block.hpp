#pragma once
/// \file attn/block.hpp
/// The transformer block (the unit's §9; NEXT_SECTIONS.md; docs/block.md), self-attention with h
/// heads (attn/heads.hpp), the feed-forward layer (attn/feed_forward.hpp) and two norms
/// (attn/norms.hpp) around residuals, in either arrangement:
///
///   post-LN (the paper, PyTorch's default):  H₁ = X + MHA(X),      X₁ = LN₁(H₁),
///                                            H₂ = X₁ + FFN(X₁),    Y = LN₂(H₂);
///   pre-LN:                                  A = LN₁(X),           H₁ = X + MHA(A),
///                                            B = LN₂(H₁),          Y = H₁ + FFN(B).
///
/// A decoder's block of an encoder–decoder (the unit's §11; PyTorch's TransformerDecoderLayer)
/// adds cross-attention to the encoder's output M between the two, with its own norm LN_c:
///
///   post-LN:  H₁ = X + MHA(X),  X₁ = LN₁(H₁),  H_c = X₁ + MHA_c(X₁, M),  X_c = LN_c(H_c),
///             H₂ = X_c + FFN(X_c),  Y = LN₂(H₂);
///   pre-LN:   H₁ = X + MHA(LN₁(X)),  H_c = H₁ + MHA_c(LN_c(H₁), M),  Y = H_c + FFN(LN₂(H_c)).
///
/// Dropout is left out (a block for inference, lessons and exact gradients; a training loop
/// that wants it applies it to the sub-layers' outputs). Masks, causal, β and a batch of B
/// sentences stacked as B·T rows are self-attention's (options, batch). The backward gives ∂L/∂X
/// and every parameter's gradient; the cache keeps every intermediate (reachable for lessons:
/// the attention output, H₁, the first norm's output, the FFN's hidden layer before and after
/// the activation, its output, each norm's μ and r) and allocates nothing after the first call
/// of the same shapes.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attn/detail/fingerprint.hpp"
#include "attn/error.hpp"
#include "attn/feed_forward.hpp"
#include "attn/heads.hpp"
#include "attn/heads_backward.hpp"
#include "attn/kv_cache.hpp"
#include "attn/linear.hpp"
#include "attn/matrix.hpp"
#include "attn/norms.hpp"
#include "attn/vector.hpp"

namespace attn {

/// Where the norms go: after each residual (post-LN) or before each sub-layer (pre-LN).
enum class norm_placement { post, pre };

/// A block's parameters, borrowed: self-attention's (W_O mapping back to d_model), the
/// feed-forward layer's (W₂ mapping back to d_model), the two norms' (LayerNorm unless their
/// kind says RMSNorm) and the arrangement.
template <real T>
struct block_parameters {
  multi_head_parameters<T> attention{};  ///< W_Q, W_K, W_V, W_O, biases, heads, the score
  feed_forward_parameters<T> ffn{};      ///< W₁, b₁, W₂, b₂, the activation
  norm_parameters<T> norm_1{};           ///< the norm around attention
  norm_parameters<T> norm_2{};           ///< the norm around the feed-forward layer
  norm_placement placement = norm_placement::post;  ///< post-LN (PyTorch's default) or pre-LN
  /// Cross-attention to the encoder's output M (a decoder's block; PyTorch's multihead_attn):
  /// queries from the stream, keys and values from M; none while W_Q has no rows.
  multi_head_parameters<T> cross_attention{};
  norm_parameters<T> norm_cross{};  ///< the norm around cross-attention (PyTorch's decoder norm2)
};

/// What the forward keeps and the backward reads, sized by the forward and reused.
template <real T>
struct block_cache {
  multi_head_cache<T> attention;  ///< self-attention's own cache (its Q, K, V, maps' L, …)
  feed_forward_cache<T> ffn;      ///< H⁻ and H of the feed-forward layer
  Matrix<T> attention_out;        ///< MHA(·)
  Matrix<T> residual_1;           ///< H₁ = X + MHA(·)
  Matrix<T> normed_1;             ///< post: X₁ = LN₁(H₁); pre: A = LN₁(X)
  Matrix<T> ffn_out;              ///< FFN(·)
  Matrix<T> residual_2;           ///< post: H₂ = X₁ + FFN(X₁); pre: B = LN₂(H₁)
  std::vector<T> mean_1, rstd_1, mean_2, rstd_2;  ///< each norm's μ and r per row
  multi_head_cache<T> cross;      ///< cross-attention's cache (a decoder's block)
  Matrix<T> cross_out;            ///< MHA_c(·, M)
  Matrix<T> residual_cross;       ///< H_c = (X₁ or H₁) + MHA_c(·, M)
  Matrix<T> normed_cross;         ///< post: X_c = LN_c(H_c); pre: LN_c(H₁)
  std::vector<T> mean_c, rstd_c;  ///< LN_c's μ and r per row
  Matrix<T> grad_1, grad_2, grad_3;  ///< the backward's working storage
  std::uint64_t forward[2] = {};  ///< fingerprints of X and of the norms and arrangement; 0: none
};

/// Where transformer_block_backward writes: ∂L/∂X and every parameter's gradient (a view left
/// empty is not computed; weights' gradients in their own layout), each overwritten or, with
/// `accumulate`, added to.
template <real T>
struct block_gradients {
  MatrixView<T> input{};                               ///< ∂L/∂X
  StridedMatrixView<T> W_Q{}, W_K{}, W_V{}, W_O{};     ///< attention's weights
  std::span<T> b_Q{}, b_K{}, b_V{}, b_O{};             ///< attention's biases
  StridedMatrixView<T> W_1{}, W_2{};                   ///< the feed-forward layer's weights
  std::span<T> b_1{}, b_2{};                           ///< its biases
  std::span<T> gamma_1{}, beta_1{}, gamma_2{}, beta_2{};  ///< the norms'
  MatrixView<T> memory{};                              ///< ∂L/∂M (a decoder's block)
  StridedMatrixView<T> cross_W_Q{}, cross_W_K{}, cross_W_V{}, cross_W_O{};  ///< cross-attention's
  std::span<T> cross_b_Q{}, cross_b_K{}, cross_b_V{}, cross_b_O{};          ///< its biases
  std::span<T> gamma_cross{}, beta_cross{};            ///< its norm's
  bool accumulate = false;                             ///< add to what the views hold
};

namespace detail {

[[noreturn]] ATTN_NOINLINE inline void throw_memory_without_cross(const char* where, bool cross) {
  raise<dimension_error>(std::string(where) +
                         (cross ? ": the block has cross-attention but no memory M was given"
                                : ": a memory M (or its gradient) was given but the block has no cross-attention"));
}

[[noreturn]] ATTN_NOINLINE inline void throw_no_w_o(const char* where) {
  raise<dimension_error>(std::string(where) + ": dL/dW_O is asked for but there is no W_O");
}

template <class T>
[[nodiscard]] std::uint64_t block_norms_fingerprint(const block_parameters<T>& p) noexcept {
  fingerprint_state s;
  for (const norm_parameters<T>* n : {&p.norm_1, &p.norm_2, &p.norm_cross}) {
    s.add(fingerprint(n->gamma.data(), 1, n->gamma.size(), n->gamma.size()));
    s.add(fingerprint(n->beta.data(), 1, n->beta.size(), n->beta.size()));
    s.add(number_bits(n->eps));
    s.add(static_cast<std::uint64_t>(n->kind));
  }
  s.add(static_cast<std::uint64_t>(p.placement));
  s.add(p.cross_attention.W_Q.rows() != 0 ? 1u : 0u);
  return s.value();
}

/// The checks of a block before anything is written: self-attention's and the feed-forward
/// layer's shapes (both must map d_model back to d_model), the norms'; with cross-attention (or a
/// memory M: both or neither) its shapes against X and M.
template <real T>
void check_block(const char* where, MatrixView<const T> X, MatrixView<const T> memory,
                 const block_parameters<T>& p, const options& opt, const options& memory_opt,
                 std::size_t batch) {
  const std::size_t d = X.cols();
  check_nonempty(where, "the width of X", d);
  const auto maps_back = [&](const multi_head_parameters<T>& a) {
    if (a.W_O.rows() == 0)
      check_equal(where, "columns of the heads' concatenation", concat_columns(a), "columns of X", d);
    else
      check_equal(where, "columns of W_O", a.W_O.cols(), "columns of X", d);
  };
  (void)check_heads<T>(where, X, X, p.attention, batch, opt);
  maps_back(p.attention);
  check_feed_forward<T>(where, X, p.ffn);
  check_equal(where, "columns of W_2", p.ffn.W_2.cols(), "columns of X", d);
  check_norm(where, d, p.norm_1);
  check_norm(where, d, p.norm_2);
  const bool cross = p.cross_attention.W_Q.rows() != 0;
  if (cross != (memory.rows() != 0)) throw_memory_without_cross(where, cross);
  if (cross) {
    (void)check_heads<T>(where, X, memory, p.cross_attention, batch, memory_opt);
    maps_back(p.cross_attention);
    check_norm(where, d, p.norm_cross);
  }
}

template <class T>
void add_rows(MatrixView<const T> a, MatrixView<const T> b, MatrixView<T> out) noexcept {
  for (std::size_t t = 0; t < a.rows(); ++t)
    for (std::size_t i = 0; i < a.cols(); ++i) out(t, i) = a(t, i) + b(t, i);
}

template <class T>
void add_into_rows(MatrixView<T> to, MatrixView<const T> from) noexcept {
  for (std::size_t t = 0; t < to.rows(); ++t)
    for (std::size_t i = 0; i < to.cols(); ++i) to(t, i) += from(t, i);
}

template <class T>
void zero_rows(MatrixView<T> m) noexcept {
  for (std::size_t t = 0; t < m.rows(); ++t)
    for (std::size_t i = 0; i < m.cols(); ++i) m(t, i) = T(0);
}

/// The arrangement of either block, once: the sub-layers in their order around the residuals,
/// every intermediate into the cache; `self_attention(in, out)` writes MHA(in) (the tiles over
/// the whole sentence, or a decoding step over a kv_cache), `cross_attention(in, out)`
/// MHA_c(in, M) when `cross`. Shapes are checked by the callers.
template <real T, class Self, class Cross>
void block_compose(MatrixView<const T> x, bool cross, const block_parameters<T>& p, MatrixView<T> y,
                   block_cache<T>& cache, Self&& self_attention, Cross&& cross_attention, bool record = true) {
  const std::size_t rows = x.rows(), d = x.cols();
  for (Matrix<T>* m : {&cache.attention_out, &cache.residual_1, &cache.normed_1, &cache.ffn_out, &cache.residual_2})
    ensure_shape(*m, rows, d);
  for (std::vector<T>* v : {&cache.mean_1, &cache.rstd_1, &cache.mean_2, &cache.rstd_2}) v->resize(rows);
  if (cross) {
    for (Matrix<T>* m : {&cache.cross_out, &cache.residual_cross, &cache.normed_cross}) ensure_shape(*m, rows, d);
    for (std::vector<T>* v : {&cache.mean_c, &cache.rstd_c}) v->resize(rows);
  }
  const norm_statistics<T> stats_1{cache.mean_1, cache.rstd_1}, stats_2{cache.mean_2, cache.rstd_2},
      stats_c{cache.mean_c, cache.rstd_c};
  const bool post = p.placement == norm_placement::post;
  MatrixView<const T> stream = x;  // the residual stream entering each sub-layer
  // self-attention
  if (post) {
    self_attention(stream, cache.attention_out.view());
    add_rows<T>(stream, cache.attention_out.view(), cache.residual_1.view());
    norm(cache.residual_1, cache.normed_1, p.norm_1, stats_1);
    stream = cache.normed_1.view();
  } else {
    norm(stream, cache.normed_1, p.norm_1, stats_1);
    self_attention(cache.normed_1.view(), cache.attention_out.view());
    add_rows<T>(stream, cache.attention_out.view(), cache.residual_1.view());
    stream = cache.residual_1.view();
  }
  // cross-attention to M
  if (cross) {
    const MatrixView<const T> queries_from = post ? stream : cache.normed_cross.view();
    if (!post) norm(stream, cache.normed_cross, p.norm_cross, stats_c);
    cross_attention(queries_from, cache.cross_out.view());
    add_rows<T>(stream, cache.cross_out.view(), cache.residual_cross.view());
    if (post) {
      norm(cache.residual_cross, cache.normed_cross, p.norm_cross, stats_c);
      stream = cache.normed_cross.view();
    } else {
      stream = cache.residual_cross.view();
    }
  }
  // the feed-forward layer
  const char* ffn_where = "attn::feed_forward";
  if (post) {
    feed_forward_views<T>(ffn_where, stream, p.ffn, cache.ffn_out.view(), cache.ffn, record);
    add_rows<T>(stream, cache.ffn_out.view(), cache.residual_2.view());
    norm(cache.residual_2, y, p.norm_2, stats_2);
  } else {
    norm(stream, cache.residual_2, p.norm_2, stats_2);
    feed_forward_views<T>(ffn_where, cache.residual_2.view(), p.ffn, cache.ffn_out.view(), cache.ffn, record);
    add_rows<T>(stream, cache.ffn_out.view(), y);
  }
}

/// The forward of either block (memory without rows: no cross-attention).
template <real T>
void block_forward(const char* where, MatrixView<const T> x, MatrixView<const T> memory,
                   const block_parameters<T>& p, MatrixView<T> y, block_cache<T>& cache, const options& opt,
                   const options& memory_opt, std::size_t batch) {
  check_block<T>(where, x, memory, p, opt, memory_opt, batch);
  check_shape(where, "the output", y.rows(), y.cols(), x.rows(), x.cols());
  if (overlaps(region_of(y), region_of(x))) throw_overlap(where, "the output", "X");
  if (memory.rows() != 0 && overlaps(region_of(y), region_of(memory))) throw_overlap(where, "the output", "M");
  cache.forward[0] = 0;  // (until this forward is whole: a throw below leaves no forward to match)
  block_compose<T>(
      x, memory.rows() != 0, p, y, cache,
      [&](MatrixView<const T> in, MatrixView<T> out) {
        multi_head_attention(in, p.attention, multi_head_views<T>{.out = out}, cache.attention, opt, batch);
      },
      [&](MatrixView<const T> in, MatrixView<T> out) {
        multi_head_attention(in, memory, p.cross_attention, multi_head_views<T>{.out = out}, cache.cross,
                             memory_opt, batch);
      });
  cache.forward[0] = fingerprint(x.data(), x.rows(), x.cols(), x.row_stride()) | 1u;
  cache.forward[1] = block_norms_fingerprint(p);
}

/// A decoding step through either block: self-attention over the kv_cache (the new rows' keys
/// and values appended), the rest as the forward; the cache's intermediates are scratch (no
/// backward follows a step).
template <real T>
void block_step(const char* where, MatrixView<const T> x, MatrixView<const T> memory, const block_parameters<T>& p,
                kv_cache<T>& kv, MatrixView<T> y, block_cache<T>& scratch, const options& opt,
                const options& memory_opt) {
  check_nonempty(where, "the cache's batch", kv.batch());
  check_block<T>(where, x, memory, p, options{.beta = opt.beta}, memory_opt, kv.batch());
  check_shape(where, "the output", y.rows(), y.cols(), x.rows(), x.cols());
  if (overlaps(region_of(y), region_of(x))) throw_overlap(where, "the output", "X");
  if (memory.rows() != 0 && overlaps(region_of(y), region_of(memory))) throw_overlap(where, "the output", "M");
  {  // the cache against the heads, and its room: refused before anything is appended
    const multi_head_parameters<T>& a = p.attention;
    const std::size_t h = a.heads, h_kv = a.kv_heads != 0 ? a.kv_heads : a.heads;
    check_cache_room<T>(where, kv, {0, kv.batch()}, x.rows() / kv.batch(), h_kv, a.W_Q.cols() / h,
                        a.W_V.cols() / h_kv, opt);
  }
  scratch.forward[0] = 0;
  block_compose<T>(
      x, memory.rows() != 0, p, y, scratch,
      [&](MatrixView<const T> in, MatrixView<T> out) { multi_head_attention_cached(in, p.attention, kv, out, opt); },
      [&](MatrixView<const T> in, MatrixView<T> out) {
        multi_head_attention(in, memory, p.cross_attention, multi_head_views<T>{.out = out}, scratch.cross,
                             memory_opt, kv.batch());
      },
      false);
}

template <real T>
void block_backward(const char* where, MatrixView<const T> x, MatrixView<const T> memory,
                    const block_parameters<T>& p, block_cache<T>& cache, MatrixView<const T> dy,
                    const block_gradients<T>& g, const options& opt, const options& memory_opt,
                    std::size_t batch) {
  check_block<T>(where, x, memory, p, opt, memory_opt, batch);
  const std::size_t rows = x.rows(), d = x.cols();
  const bool cross = memory.rows() != 0;
  check_shape(where, "dL/dY", dy.rows(), dy.cols(), rows, d);
  if (g.input.rows() != 0) check_shape(where, "dL/dX", g.input.rows(), g.input.cols(), rows, d);
  const auto weight = [&](const char* what, StridedMatrixView<T> m, StridedMatrixView<const T> like) {
    if (m.rows() == 0) return;
    check_shape(where, what, m.rows(), m.cols(), like.rows(), like.cols());
    check_layout(where, what, m, true);
  };
  const auto vec = [&](const char* what, std::span<T> v, std::size_t n) {
    if (!v.empty()) check_equal(where, what, v.size(), "its parameter's size", n);
  };
  const multi_head_parameters<T>& a = p.attention;
  const multi_head_parameters<T>& c = p.cross_attention;
  weight("dL/dW_Q", g.W_Q, a.W_Q);
  weight("dL/dW_K", g.W_K, a.W_K);
  weight("dL/dW_V", g.W_V, a.W_V);
  weight("dL/dW_O", g.W_O, a.W_O);
  weight("dL/dW_1", g.W_1, p.ffn.W_1);
  weight("dL/dW_2", g.W_2, p.ffn.W_2);
  vec("size of dL/db_Q", g.b_Q, a.W_Q.cols());
  vec("size of dL/db_K", g.b_K, a.W_K.cols());
  vec("size of dL/db_V", g.b_V, a.W_V.cols());
  vec("size of dL/db_O", g.b_O, d);
  vec("size of dL/db_1", g.b_1, p.ffn.W_1.cols());
  vec("size of dL/db_2", g.b_2, d);
  for (std::span<T> s : {g.gamma_1, g.gamma_2, g.gamma_cross}) vec("size of dL/dgamma", s, d);
  for (std::span<T> s : {g.beta_1, g.beta_2, g.beta_cross}) vec("size of dL/dbeta", s, d);
  if (g.W_O.rows() != 0 && a.W_O.rows() == 0) throw_no_w_o(where);
  const bool cross_grads = g.memory.rows() != 0 || g.cross_W_Q.rows() != 0 || g.cross_W_K.rows() != 0 ||
                           g.cross_W_V.rows() != 0 || g.cross_W_O.rows() != 0 || !g.cross_b_Q.empty() ||
                           !g.cross_b_K.empty() || !g.cross_b_V.empty() || !g.cross_b_O.empty() ||
                           !g.gamma_cross.empty() || !g.beta_cross.empty();
  if (cross_grads && !cross) throw_memory_without_cross(where, false);
  if (cross) {
    if (g.memory.rows() != 0)
      check_shape(where, "dL/dM", g.memory.rows(), g.memory.cols(), memory.rows(), memory.cols());
    weight("dL/dW_Q of cross-attention", g.cross_W_Q, c.W_Q);
    weight("dL/dW_K of cross-attention", g.cross_W_K, c.W_K);
    weight("dL/dW_V of cross-attention", g.cross_W_V, c.W_V);
    weight("dL/dW_O of cross-attention", g.cross_W_O, c.W_O);
    vec("size of dL/db_Q of cross-attention", g.cross_b_Q, c.W_Q.cols());
    vec("size of dL/db_K of cross-attention", g.cross_b_K, c.W_K.cols());
    vec("size of dL/db_V of cross-attention", g.cross_b_V, c.W_V.cols());
    vec("size of dL/db_O of cross-attention", g.cross_b_O, d);
    if (g.cross_W_O.rows() != 0 && c.W_O.rows() == 0) throw_no_w_o(where);
  }
  // the forward this cache holds must be this one: X, the norms; attention's and the FFN's own
  // records (their inputs are the cache's own matrices)
  if (cache.forward[0] == 0 || cache.residual_1.rows() != rows || cache.residual_1.cols() != d)
    throw_no_forward(where, "transformer_block");
  const auto differs = [&](const char* what) { throw_not_the_forwards(where, what, "inputs, parameters and options"); };
  if ((fingerprint(x.data(), x.rows(), x.cols(), x.row_stride()) | 1u) != cache.forward[0]) differs("X");
  if (block_norms_fingerprint(p) != cache.forward[1]) differs("a norm's parameters or the arrangement");
  const bool post = p.placement == norm_placement::post;
  const MatrixView<const T> attention_in = post ? x : cache.normed_1.view();
  check_same_forward<T>(where, cache.attention.forward, attention_in, attention_in, a, opt, batch);
  const MatrixView<const T> cross_in = post ? cache.normed_1.view() : cache.normed_cross.view();
  if (cross) check_same_forward<T>(where, cache.cross.forward, cross_in, memory, c, memory_opt, batch);
  // the FFN's input, and the stream it adds to
  const MatrixView<const T> ffn_stream = post ? (cross ? cache.normed_cross.view() : cache.normed_1.view())
                                              : (cross ? cache.residual_cross.view() : cache.residual_1.view());
  const MatrixView<const T> ffn_in = post ? ffn_stream : cache.residual_2.view();
  {
    std::uint64_t now[6];
    feed_forward_record<T>(ffn_in, p.ffn, now);
    for (std::size_t i = 1; i < 6; ++i)
      if (now[i] != cache.ffn.forward[i]) differs("the feed-forward layer's parameters");
  }
  ensure_shape(cache.grad_1, rows, d);
  ensure_shape(cache.grad_2, rows, d);
  ensure_shape(cache.ffn.grad_hidden, rows, p.ffn.W_1.cols());
  ensure_shape(cache.attention.grad_queries, rows, a.W_Q.cols());
  ensure_shape(cache.attention.grad_keys, rows, a.W_K.cols());
  ensure_shape(cache.attention.grad_values, rows, a.W_V.cols());
  ensure_shape(cache.attention.grad_heads_out, rows, concat_columns(a));
  if (cross) {
    ensure_shape(cache.grad_3, rows, d);
    ensure_shape(cache.cross.grad_queries, rows, c.W_Q.cols());
    ensure_shape(cache.cross.grad_keys, memory.rows(), c.W_K.cols());
    ensure_shape(cache.cross.grad_values, memory.rows(), c.W_V.cols());
    ensure_shape(cache.cross.grad_heads_out, rows, concat_columns(c));
  }
  {
    const std::size_t dm = std::max({rows, memory.rows(), d, p.ffn.W_1.cols(), a.W_Q.cols(), a.W_V.cols(),
                                     c.W_Q.cols(), c.W_V.cols()});
    gemm_reserve<T>(dm, dm, dm);  // every product's panels before the first write
  }
  const MatrixView<T> g1 = cache.grad_1.view(), g2 = cache.grad_2.view(), g3 = cache.grad_3.view();
  const bool acc = g.accumulate;
  const feed_forward_gradients<T> ffn_g{.input = g1, .W_1 = g.W_1, .b_1 = g.b_1, .W_2 = g.W_2, .b_2 = g.b_2,
                                        .accumulate = acc};
  const auto attention_g = [&](MatrixView<T> input) {
    return multi_head_gradients<T>{.inputs = input, .W_Q = g.W_Q, .W_K = g.W_K, .W_V = g.W_V, .W_O = g.W_O,
                                   .b_Q = g.b_Q, .b_K = g.b_K, .b_V = g.b_V, .b_O = g.b_O, .accumulate = acc};
  };
  const auto cross_g = [&](MatrixView<T> input) {
    return multi_head_gradients<T>{.inputs = input, .kv_inputs = g.memory, .W_Q = g.cross_W_Q,
                                   .W_K = g.cross_W_K, .W_V = g.cross_W_V, .W_O = g.cross_W_O,
                                   .b_Q = g.cross_b_Q, .b_K = g.cross_b_K, .b_V = g.cross_b_V,
                                   .b_O = g.cross_b_O, .accumulate = acc};
  };
  const saved_norm<T> saved_1{cache.mean_1, cache.rstd_1}, saved_2{cache.mean_2, cache.rstd_2},
      saved_c{cache.mean_c, cache.rstd_c};
  // with accumulate, the sub-layers add their ∂L/∂(input) to the working storage: start it at 0
  if (post) {
    // Y = LN₂(H₂): ∂L/∂H₂ into g2
    if (acc) zero_rows(g2);
    norm_backward(cache.residual_2, p.norm_2, dy, norm_gradients<T>{g2, g.gamma_2, g.beta_2, acc}, saved_2);
    // H₂ = S + FFN(S): ∂L/∂S = ∂L/∂H₂ + FFN's, in g1
    if (acc) zero_rows(g1);
    feed_forward_backward(ffn_in, p.ffn, cache.ffn, g2, ffn_g);
    add_into_rows<T>(g1, g2);
    if (cross) {
      // X_c = LN_c(H_c): ∂L/∂H_c into g2; H_c = X₁ + MHA_c(X₁, M): ∂L/∂X₁ = ∂L/∂H_c + MHA_c's, in g1
      if (acc) zero_rows(g2);
      norm_backward(cache.residual_cross, p.norm_cross, g1,
                    norm_gradients<T>{g2, g.gamma_cross, g.beta_cross, acc}, saved_c);
      if (acc) zero_rows(g1);
      multi_head_attention_backward(cross_in, memory, c, cache.cross, g2, cross_g(g1), memory_opt, batch);
      add_into_rows<T>(g1, g2);
    }
    // X₁ = LN₁(H₁): ∂L/∂H₁ into g2
    if (acc) zero_rows(g2);
    norm_backward(cache.residual_1, p.norm_1, g1, norm_gradients<T>{g2, g.gamma_1, g.beta_1, acc}, saved_1);
    // H₁ = X + MHA(X): ∂L/∂X = ∂L/∂H₁ + MHA's
    multi_head_attention_backward(x, a, cache.attention, g2, attention_g(g.input), opt, batch);
    if (g.input.rows() != 0) add_into_rows<T>(g.input, g2);
  } else {
    // Y = S + FFN(B): ∂L/∂B into g1
    if (acc) zero_rows(g1);
    feed_forward_backward(ffn_in, p.ffn, cache.ffn, dy, ffn_g);
    // B = LN₂(S): ∂L/∂S = dY + LN₂'s, in g2
    if (acc) zero_rows(g2);
    norm_backward(ffn_stream, p.norm_2, g1, norm_gradients<T>{g2, g.gamma_2, g.beta_2, acc}, saved_2);
    add_into_rows<T>(g2, dy);
    if (cross) {
      // H_c = H₁ + MHA_c(LN_c(H₁), M): ∂L/∂H₁ = ∂L/∂H_c + LN_c's of MHA_c's, in g2
      if (acc) zero_rows(g1);
      multi_head_attention_backward(cross_in, memory, c, cache.cross, g2, cross_g(g1), memory_opt, batch);
      if (acc) zero_rows(g3);
      norm_backward(cache.residual_1, p.norm_cross, g1,
                    norm_gradients<T>{g3, g.gamma_cross, g.beta_cross, acc}, saved_c);
      add_into_rows<T>(g2, g3);
    }
    // H₁ = X + MHA(A): ∂L/∂A into g1
    if (acc) zero_rows(g1);
    multi_head_attention_backward(cache.normed_1, a, cache.attention, g2, attention_g(g1), opt, batch);
    // A = LN₁(X): ∂L/∂X = ∂L/∂H₁ + LN₁'s
    norm_backward(x, p.norm_1, g1, norm_gradients<T>{g.input, g.gamma_1, g.beta_1, acc}, saved_1);
    if (g.input.rows() != 0) add_into_rows<T>(g.input, g2);
  }
}

}  // namespace detail

/// Y = the block applied to X (B·T × d_model) into Y (X's shape); every intermediate into the
/// cache. Errors (dimension_error, domain_error, overlap_error) name the buffer and both sizes,
/// before anything is written.
template <matrix_like Xm, mutable_matrix_like Ym>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Ym>>
void transformer_block(const Xm& X, const block_parameters<matrix_scalar_of<Xm>>& p, Ym&& Y,
                       block_cache<matrix_scalar_of<Xm>>& cache, const options& opt = {},
                       std::size_t batch = 1) {
  using T = matrix_scalar_of<Xm>;
  const auto xv = as_view(X);
  detail::block_forward<T>("attn::transformer_block", xv, {}, p, as_mutable_view(Y), cache, opt, {}, batch);
}

/// A decoder's block of an encoder–decoder: the block with cross-attention to the encoder's
/// output M (B·n × d_model, sentence b in rows [b·n, (b + 1)·n)) between self-attention and the
/// feed-forward layer (p.cross_attention, p.norm_cross), `opt` self-attention's options (causal
/// in a decoder), `memory_opt` cross-attention's (a key mask of the source's padding).
template <matrix_like Xm, matrix_like Mm, mutable_matrix_like Ym>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Ym>> && detail::input_matrix<Mm, matrix_scalar_of<Xm>>
void transformer_block(const Xm& X, const Mm& M, const block_parameters<matrix_scalar_of<Xm>>& p, Ym&& Y,
                       block_cache<matrix_scalar_of<Xm>>& cache, const options& opt = {},
                       const options& memory_opt = {}, std::size_t batch = 1) {
  using T = matrix_scalar_of<Xm>;
  const auto xv = as_view(X);
  const auto mv = as_view(M);
  const char* where = "attn::transformer_block";
  if (MatrixView<const T>(mv).rows() == 0) detail::check_nonempty(where, "rows of M", 0);
  detail::block_forward<T>(where, xv, mv, p, as_mutable_view(Y), cache, opt, memory_opt, batch);
}

/// One decoding step through the block: X_new holds t new rows of every sequence of the
/// kv_cache (B·t rows), whose keys and values self-attention appends and whose queries attend
/// over every row the sequence then holds (causal, as multi_head_attention_cached); the rows of
/// Y equal the forward's over the whole sequences, row for row. `scratch` holds the step's
/// intermediates. Errors as transformer_block's, and "the cache is full" naming the sequence
/// when t rows do not fit; all before anything is appended or written.
template <matrix_like Xm, mutable_matrix_like Ym>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Ym>>
void transformer_block_cached(const Xm& X_new, const block_parameters<matrix_scalar_of<Xm>>& p,
                              kv_cache<matrix_scalar_of<Xm>>& kv, Ym&& Y, block_cache<matrix_scalar_of<Xm>>& scratch,
                              const options& opt = {.causal = true}) {
  using T = matrix_scalar_of<Xm>;
  const auto xv = as_view(X_new);
  detail::block_step<T>("attn::transformer_block_cached", xv, {}, p, kv, as_mutable_view(Y), scratch, opt, {});
}

/// A decoding step through a decoder's block of an encoder–decoder: as above, and cross-attention
/// to the encoder's output M (B·n rows, the cache's B sentences).
template <matrix_like Xm, matrix_like Mm, mutable_matrix_like Ym>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Ym>> && detail::input_matrix<Mm, matrix_scalar_of<Xm>>
void transformer_block_cached(const Xm& X_new, const Mm& M, const block_parameters<matrix_scalar_of<Xm>>& p,
                              kv_cache<matrix_scalar_of<Xm>>& kv, Ym&& Y, block_cache<matrix_scalar_of<Xm>>& scratch,
                              const options& opt = {.causal = true}, const options& memory_opt = {}) {
  using T = matrix_scalar_of<Xm>;
  const auto xv = as_view(X_new);
  const auto mv = as_view(M);
  const char* where = "attn::transformer_block_cached";
  if (MatrixView<const T>(mv).rows() == 0) detail::check_nonempty(where, "rows of M", 0);
  detail::block_step<T>(where, xv, mv, p, kv, as_mutable_view(Y), scratch, opt, memory_opt);
}

/// The backward of transformer_block from its cache: ∂L/∂X and every parameter's gradient that
/// `g` asks for. forward_mismatch_error when X, a parameter or an option is not the forward's;
/// dimension_error for dY or a gradient of another shape; all before anything is written.
template <matrix_like Xm, matrix_like Gm>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Gm>>
void transformer_block_backward(const Xm& X, const block_parameters<matrix_scalar_of<Xm>>& p,
                                block_cache<matrix_scalar_of<Xm>>& cache, const Gm& dY,
                                const block_gradients<matrix_scalar_of<Xm>>& g, const options& opt = {},
                                std::size_t batch = 1) {
  using T = matrix_scalar_of<Xm>;
  const auto xv = as_view(X);
  const auto gv = as_view(dY);
  detail::block_backward<T>("attn::transformer_block_backward", xv, {}, p, cache, gv, g, opt, {}, batch);
}

/// The backward of a decoder's block (with cross-attention to M): ∂L/∂X, ∂L/∂M (g.memory) and
/// every parameter's gradient `g` asks for, with the forward's M and options.
template <matrix_like Xm, matrix_like Mm, matrix_like Gm>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Gm>> && detail::input_matrix<Mm, matrix_scalar_of<Xm>>
void transformer_block_backward(const Xm& X, const Mm& M, const block_parameters<matrix_scalar_of<Xm>>& p,
                                block_cache<matrix_scalar_of<Xm>>& cache, const Gm& dY,
                                const block_gradients<matrix_scalar_of<Xm>>& g, const options& opt = {},
                                const options& memory_opt = {}, std::size_t batch = 1) {
  using T = matrix_scalar_of<Xm>;
  const auto xv = as_view(X);
  const auto mv = as_view(M);
  const auto gv = as_view(dY);
  const char* where = "attn::transformer_block_backward";
  if (MatrixView<const T>(mv).rows() == 0) detail::check_nonempty(where, "rows of M", 0);
  detail::block_backward<T>(where, xv, mv, p, cache, gv, g, opt, memory_opt, batch);
}

}  // namespace attn
