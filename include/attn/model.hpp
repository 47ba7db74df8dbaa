#pragma once
/// \file attn/model.hpp
/// A tiny transformer, whole (the unit's §10–§11; NEXT_SECTIONS.md "Training"; docs/model.md):
///
///   X₀ = E[y] (+ P[t] learned, or + PE[t] sinusoidal; RoPE and ALiBi act inside attention),
///   X_{l+1} = block_l(X_l)          (l = 0 … N − 1; causal in a decoder),
///   H = LN_f(X_N) (a final norm, off unless asked) or X_N,
///   logits = H W_vocab, or tied: H Eᵀ (no output bias, no √d_model scaling of E).
///
/// The three families of §11 are configurations of this one model: an encoder (no mask), a
/// decoder (causal: the language model) and an encoder–decoder, whose encoder reads the source
/// tokens into M (through its own final norm when asked) and whose decoder's blocks add
/// cross-attention to M (attn/block.hpp). The parameters are views over memory the caller owns
/// (`bind_parameters` lays them all in one buffer, as llm.c's ParameterTensors); the gradients
/// are the same views over a second buffer of the same layout, so an optimizer steps over flat
/// spans. The backward gives every parameter's gradient from ∂L/∂logits.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "attn/activations.hpp"
#include "attn/block.hpp"
#include "attn/detail/fingerprint.hpp"
#include "attn/embedding.hpp"
#include "attn/error.hpp"
#include "attn/init.hpp"
#include "attn/linear.hpp"
#include "attn/matrix.hpp"
#include "attn/named_tensor.hpp"
#include "attn/norms.hpp"
#include "attn/positions.hpp"
#include "attn/sampling.hpp"

namespace attn {

/// The three families of the unit's §11.
enum class model_family {
  encoder,          ///< every position sees every position (BERT's arrangement)
  decoder,          ///< causal: position t sees 0 … t (the language model, GPT's)
  encoder_decoder,  ///< an encoder over the source, a causal decoder with cross-attention to it
};

/// Where the model's positions come from (NEXT_SECTIONS.md, §8; attn/positions.hpp).
enum class position_encoding {
  learned,     ///< a table P (max_positions × d_model) added to X₀, trained
  sinusoidal,  ///< the paper's PE (interleaved) added to X₀, nothing trained
  rotary,      ///< RoPE (interleaved pairs) on every self-attention's queries and keys
  alibi,       ///< ALiBi's bias on every self-attention's logits
  none,        ///< no positions (attention is then blind to order)
};

/// A model's shape and arrangement.
struct model_config {
  model_family family = model_family::decoder;  ///< encoder, decoder (the default) or encoder–decoder
  std::size_t vocabulary = 0;     ///< V, the tokens 0 … V − 1
  std::size_t d_model = 0;        ///< the width of every row
  std::size_t layers = 1;         ///< N blocks (an encoder–decoder: N in each)
  std::size_t heads = 1;          ///< h, dividing d_model (d_k = d_v = d_model / h)
  std::size_t d_ff = 0;           ///< the feed-forward layer's width; 0: 4·d_model
  std::size_t max_positions = 0;  ///< the longest sequence (the learned table's rows)
  position_encoding positions = position_encoding::learned;  ///< NEXT_SECTIONS.md's default: learned
  activation act = activation::gelu;                 ///< the feed-forward layer's
  norm_placement placement = norm_placement::post;   ///< post-LN (the paper) or pre-LN (GPT-2)
  norm_kind norm = norm_kind::layer;                 ///< LayerNorm or RMSNorm, every norm
  double norm_eps = 1e-5;                            ///< every norm's ε
  bool final_norm = false;  ///< a norm after the last block (and after the encoder's)
  bool tied = false;        ///< logits = H Eᵀ (no W_vocab)
  bool biases = true;       ///< the projections' and the feed-forward layer's biases
};

/// The model's parameters as mutable views of the caller's memory (bind_parameters lays them in
/// one buffer; a gradient is the same struct over another). `encoder` holds an encoder's blocks
/// (the encoder family and an encoder–decoder's encoder), `decoder` a decoder's.
template <real T>
struct model_parameters {
  model_config config{};
  MatrixView<T> token_embedding{};              ///< E, V × d_model
  MatrixView<T> position_table{};               ///< P, max_positions × d_model (learned), or none
  std::vector<block_buffers<T>> encoder{};      ///< the encoder's blocks
  std::vector<block_buffers<T>> decoder{};      ///< the decoder's blocks (with cross-attention in
                                                ///< an encoder–decoder)
  std::span<T> encoder_norm_gamma{}, encoder_norm_beta{};  ///< an encoder–decoder's encoder's final norm
  std::span<T> final_norm_gamma{}, final_norm_beta{};      ///< the final norm (before the logits)
  MatrixView<T> output{};                       ///< W_vocab, d_model × V (untied), or none
};

/// What the model reads: the tokens of B sentences of T tokens each, stacked (B·T), and for an
/// encoder–decoder the source's, B sentences of S tokens (B·S).
struct model_input {
  std::span<const std::int64_t> tokens{};  ///< the decoder's (or the encoder's alone) tokens
  std::size_t batch = 1;                   ///< B
  std::span<const std::int64_t> source{};  ///< an encoder–decoder's source tokens
  /// Which tokens are real (true) and which are padding (false), B·T entries (each sentence its
  /// own), or none: a padded token is a key no query sees (PyTorch's key_padding_mask, with
  /// true meaning the opposite there). Its own row is still computed; leave it out of the loss
  /// with the ignore index. A row that sees no key follows options' all-masked policy (zeros).
  std::span<const bool> token_mask{};
  std::span<const bool> source_mask{};  ///< the same for the source (B·S entries), or none
};

/// What the forward keeps and the backward reads, sized by the forward and reused (calls of the
/// same shapes allocate nothing).
template <real T>
struct model_cache {
  Matrix<T> embedded;                 ///< X₀ (B·T × d_model)
  std::vector<Matrix<T>> outputs;     ///< X_{l+1}, each decoder (or encoder-only) block's output
  std::vector<block_cache<T>> blocks;  ///< their caches
  Matrix<T> hidden;                   ///< H = LN_f(X_N) (with a final norm)
  std::vector<T> mean, rstd;          ///< LN_f's statistics
  Matrix<T> source_embedded;          ///< an encoder–decoder's encoder: its X₀ (B·S × d_model)
  std::vector<Matrix<T>> source_outputs;     ///< its blocks' outputs
  std::vector<block_cache<T>> source_blocks;  ///< their caches
  Matrix<T> memory;                   ///< M: the encoder's final norm of its last output
  std::vector<T> memory_mean, memory_rstd;
  Matrix<T> grad_1, grad_2, grad_memory_1, grad_memory_2;  ///< the backward's working storage
  std::uint64_t forward[3] = {};      ///< fingerprints of the tokens, E and W_vocab; 0: none
};

namespace detail {

[[noreturn]] ATTN_NOINLINE inline void throw_bad_config(const char* where, const std::string& what) {
  raise<dimension_error>(std::string(where) + ": " + what);
}

[[noreturn]] ATTN_NOINLINE inline void throw_model_positions(const char* where, const char* what, std::size_t t,
                                                            std::size_t max) {
  raise<dimension_error>(std::string(where) + ": " + what + " has " + std::to_string(t) +
                         " positions per sentence, more than max_positions (" + std::to_string(max) + ")");
}

inline std::size_t ffn_width(const model_config& c) noexcept { return c.d_ff != 0 ? c.d_ff : 4 * c.d_model; }

inline bool has_encoder(const model_config& c) noexcept { return c.family != model_family::decoder; }
inline bool has_decoder(const model_config& c) noexcept { return c.family != model_family::encoder; }

inline void check_config(const char* where, const model_config& c) {
  check_nonempty(where, "the vocabulary", c.vocabulary);
  check_nonempty(where, "d_model", c.d_model);
  check_nonempty(where, "the layers", c.layers);
  check_nonempty(where, "the heads", c.heads);
  check_nonempty(where, "max_positions", c.max_positions);
  if (c.d_model % c.heads != 0)
    throw_bad_config(where, "d_model (" + std::to_string(c.d_model) + ") is not a multiple of the heads (" +
                                std::to_string(c.heads) + ")");
  if (c.positions == position_encoding::sinusoidal && c.d_model % 2 != 0)
    throw_bad_config(where, "sinusoidal positions need an even d_model, not " + std::to_string(c.d_model));
  if (c.positions == position_encoding::rotary && (c.d_model / c.heads) % 2 != 0)
    throw_bad_config(where, "rotary positions need an even d_k, not " + std::to_string(c.d_model / c.heads));
  if (!(c.norm_eps >= 0) || !std::isfinite(c.norm_eps)) throw_bad_config(where, "norm_eps must be finite and at least 0");
}

/// A tensor's name in parts, formed into a string only when asked ("decoder.0.attention.W_Q";
/// "token_embedding" has no stack): the checks of every call allocate nothing.
struct tensor_name {
  const char* stack = nullptr;  ///< "encoder", "decoder", or none
  std::size_t layer = 0;        ///< the block
  const char* part = nullptr;   ///< "attention", "ffn", "norm_1", …
  const char* leaf = "";        ///< "W_Q", "gamma", or the whole name of a model-level tensor
  [[nodiscard]] std::string str() const {
    if (stack == nullptr) return leaf;
    return std::string(stack) + "." + std::to_string(layer) + "." + part + "." + leaf;
  }
};

/// The model's tensors in their order in one buffer: its matrices first (the ones weight decay
/// acts on, as nanoGPT's groups), then its vectors (biases, the norms' γ and β). `f(name, rows,
/// cols, slot)` is called for each, slot a (const) MatrixView<T>&, StridedMatrixView<T>& or
/// span<T>& of p (a vector's rows are 1). P is model_parameters<T>, const or not; with a mutable
/// one, p.encoder and p.decoder are sized first (binding), a const one must have their sizes.
template <class P, class F>
void visit_model_tensors(P& p, F&& f) {
  const model_config& c = p.config;
  const std::size_t d = c.d_model, V = c.vocabulary, dff = ffn_width(c), one = 1;
  const bool layer_norm = c.norm == norm_kind::layer;
  if constexpr (!std::is_const_v<P>) {
    p.encoder.resize(has_encoder(c) ? c.layers : 0);
    p.decoder.resize(has_decoder(c) ? c.layers : 0);
  }
  const auto block = [&](bool matrices, const char* stack, std::size_t l, auto& b, bool cross) {
    const auto attention = [&](const char* a, auto& m) {
      if (matrices) {
        f(tensor_name{stack, l, a, "W_Q"}, d, d, m.W_Q);
        f(tensor_name{stack, l, a, "W_K"}, d, d, m.W_K);
        f(tensor_name{stack, l, a, "W_V"}, d, d, m.W_V);
        f(tensor_name{stack, l, a, "W_O"}, d, d, m.W_O);
      } else if (c.biases) {
        f(tensor_name{stack, l, a, "b_Q"}, one, d, m.b_Q);
        f(tensor_name{stack, l, a, "b_K"}, one, d, m.b_K);
        f(tensor_name{stack, l, a, "b_V"}, one, d, m.b_V);
        f(tensor_name{stack, l, a, "b_O"}, one, d, m.b_O);
      }
    };
    const auto norm_of = [&](const char* n, auto& gamma, auto& beta) {
      if (matrices) return;
      f(tensor_name{stack, l, n, "gamma"}, one, d, gamma);
      if (layer_norm) f(tensor_name{stack, l, n, "beta"}, one, d, beta);
    };
    attention("attention", b.attention);
    if (cross) attention("cross_attention", b.cross_attention);
    if (matrices) {
      f(tensor_name{stack, l, "ffn", "W_1"}, d, dff, b.ffn.W_1);
      f(tensor_name{stack, l, "ffn", "W_2"}, dff, d, b.ffn.W_2);
    } else if (c.biases) {
      f(tensor_name{stack, l, "ffn", "b_1"}, one, dff, b.ffn.b_1);
      f(tensor_name{stack, l, "ffn", "b_2"}, one, d, b.ffn.b_2);
    }
    norm_of("norm_1", b.gamma_1, b.beta_1);
    if (cross) norm_of("norm_cross", b.gamma_cross, b.beta_cross);
    norm_of("norm_2", b.gamma_2, b.beta_2);
  };
  const bool enc_dec = c.family == model_family::encoder_decoder;
  for (const bool matrices : {true, false}) {
    if (matrices) {
      f(tensor_name{.leaf = "token_embedding"}, V, d, p.token_embedding);
      if (c.positions == position_encoding::learned)
        f(tensor_name{.leaf = "position_table"}, c.max_positions, d, p.position_table);
    }
    for (std::size_t l = 0; l < p.encoder.size(); ++l) block(matrices, "encoder", l, p.encoder[l], false);
    for (std::size_t l = 0; l < p.decoder.size(); ++l) block(matrices, "decoder", l, p.decoder[l], enc_dec);
    if (matrices) {
      if (!c.tied) f(tensor_name{.leaf = "output"}, d, V, p.output);
    } else if (c.final_norm) {
      if (enc_dec) {
        f(tensor_name{.leaf = "encoder_norm.gamma"}, one, d, p.encoder_norm_gamma);
        if (layer_norm) f(tensor_name{.leaf = "encoder_norm.beta"}, one, d, p.encoder_norm_beta);
      }
      f(tensor_name{.leaf = "final_norm.gamma"}, one, d, p.final_norm_gamma);
      if (layer_norm) f(tensor_name{.leaf = "final_norm.beta"}, one, d, p.final_norm_beta);
    }
  }
}

[[noreturn]] ATTN_NOINLINE inline void throw_model_view(const char* where, const char* prefix, const tensor_name& n,
                                                       std::size_t rows, std::size_t cols, std::size_t want_rows,
                                                       std::size_t want_cols) {
  const std::string what = prefix + n.str();
  check_shape(where, what.c_str(), rows, cols, want_rows, want_cols);
  raise<dimension_error>(std::string(where) + ": " + what + " is a weight of neither layout (rows nor columns contiguous)");
}

/// Every view of p has its tensor's shape (weights in attn's layout or PyTorch's), else
/// dimension_error naming the tensor (with `prefix`, "dL/d" for a gradient) and both shapes.
/// Allocates nothing.
template <class T>
void check_model_views(const char* where, const model_parameters<T>& p, const char* prefix) {
  const model_config& c = p.config;
  const std::size_t n_enc = has_encoder(c) ? c.layers : 0, n_dec = has_decoder(c) ? c.layers : 0;
  if (p.encoder.size() != n_enc || p.decoder.size() != n_dec)
    throw_bad_config(where, std::string(prefix) + "the parameters hold " + std::to_string(p.encoder.size()) +
                                " encoder and " + std::to_string(p.decoder.size()) + " decoder blocks, the configuration " +
                                std::to_string(n_enc) + " and " + std::to_string(n_dec));
  visit_model_tensors(p, [&](const tensor_name& name, std::size_t rows, std::size_t cols, const auto& slot) {
    if constexpr (requires { slot.rows(); }) {
      bool good = slot.rows() == rows && slot.cols() == cols;
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(slot)>, StridedMatrixView<T>>)
        good = good && (rows_contiguous(slot) || columns_contiguous(slot));
      if (!good) throw_model_view(where, prefix, name, slot.rows(), slot.cols(), rows, cols);
    } else {
      if (slot.size() != cols) throw_model_view(where, prefix, name, 1, slot.size(), 1, cols);
    }
  });
}

/// A block's parameters (read-only) in the model's arrangement.
template <class T>
block_parameters<T> model_block(const model_config& c, const block_buffers<T>& b) {
  block_parameters<T> like;
  like.attention.heads = c.heads;
  if (c.positions == position_encoding::rotary) like.attention.positions = rotary{};
  like.attention.alibi = c.positions == position_encoding::alibi;
  like.ffn.act = c.act;
  for (norm_parameters<T>* n : {&like.norm_1, &like.norm_2, &like.norm_cross}) {
    n->eps = c.norm_eps;
    n->kind = c.norm;
  }
  like.placement = c.placement;
  like.cross_attention.heads = c.heads;  // (no positions in cross-attention)
  return parameters_of(b, like);
}

/// A block's gradients over the gradient views, every one added to (the model's backward starts
/// them at zero).
template <class T>
block_gradients<T> model_block_gradients(const block_buffers<T>& g, MatrixView<T> input, MatrixView<T> memory) {
  return {.input = input,
          .W_Q = g.attention.W_Q, .W_K = g.attention.W_K, .W_V = g.attention.W_V, .W_O = g.attention.W_O,
          .b_Q = g.attention.b_Q, .b_K = g.attention.b_K, .b_V = g.attention.b_V, .b_O = g.attention.b_O,
          .W_1 = g.ffn.W_1, .W_2 = g.ffn.W_2, .b_1 = g.ffn.b_1, .b_2 = g.ffn.b_2,
          .gamma_1 = g.gamma_1, .beta_1 = g.beta_1, .gamma_2 = g.gamma_2, .beta_2 = g.beta_2,
          .memory = memory,
          .cross_W_Q = g.cross_attention.W_Q, .cross_W_K = g.cross_attention.W_K,
          .cross_W_V = g.cross_attention.W_V, .cross_W_O = g.cross_attention.W_O,
          .cross_b_Q = g.cross_attention.b_Q, .cross_b_K = g.cross_attention.b_K,
          .cross_b_V = g.cross_attention.b_V, .cross_b_O = g.cross_attention.b_O,
          .gamma_cross = g.gamma_cross, .beta_cross = g.beta_cross,
          .accumulate = true};
}

/// The logits' weight as the linear layer reads it: W_vocab, or Eᵀ (tied).
template <class T>
StridedMatrixView<const T> logits_weight(const model_parameters<T>& p) noexcept {
  if (p.config.tied) return transposed(MatrixView<const T>(p.token_embedding));
  return StridedMatrixView<const T>(MatrixView<const T>(p.output));
}

template <class T>
norm_parameters<T> model_norm(const model_config& c, std::span<const T> gamma, std::span<const T> beta) {
  return {.gamma = gamma, .beta = beta, .eps = c.norm_eps, .kind = c.norm};
}

/// T (positions per sentence) of `tokens`, after checking they are B sentences within max_positions.
inline std::size_t model_sentence(const char* where, const char* what, std::span<const std::int64_t> tokens,
                                  std::size_t batch, const model_config& c) {
  check_nonempty(where, what, tokens.size());
  check_nonempty(where, "the batch", batch);
  if (tokens.size() % batch != 0)
    throw_bad_config(where, std::string(what) + " (" + std::to_string(tokens.size()) + ") are not " +
                                std::to_string(batch) + " sentences of equal length");
  const std::size_t t = tokens.size() / batch;
  if (t > c.max_positions) throw_model_positions(where, what, t, c.max_positions);
  check_tokens(where, tokens, c.vocabulary);
  return t;
}

/// A final norm (LN_f or the encoder's LN_e) of x into `out`, its statistics into mean and rstd
/// when given; returns out's view.
template <class T>
MatrixView<const T> final_norm_into(const model_config& c, MatrixView<const T> x, std::span<const T> gamma,
                                    std::span<const T> beta, Matrix<T>& out, std::vector<T>* mean = nullptr,
                                    std::vector<T>* rstd = nullptr) {
  ensure_shape(out, x.rows(), x.cols());
  norm_statistics<T> stats{};
  if (mean != nullptr && rstd != nullptr) {
    mean->resize(x.rows());
    rstd->resize(x.rows());
    stats = {*mean, *rstd};
  }
  norm(x, out, model_norm<T>(c, gamma, beta), stats);
  return out.view();
}

/// X₀ = E[tokens] + the positions added to X (learned or sinusoidal), row t of each sentence at
/// position offset + t.
template <class T>
void embed_with_positions(const model_parameters<T>& p, std::span<const std::int64_t> tokens, std::size_t batch,
                          Matrix<T>& X, std::size_t offset = 0) {
  const model_config& c = p.config;
  ensure_shape(X, tokens.size(), c.d_model);
  embedding(MatrixView<const T>(p.token_embedding), tokens, X);
  if (c.positions == position_encoding::learned)
    add_learned_positions(X, MatrixView<const T>(p.position_table), offset, batch);
  else if (c.positions == position_encoding::sinusoidal)
    add_sinusoidal_encoding(X, offset, batch);
}

/// A stack of blocks: outputs[l] = block_l(l == 0 ? in : outputs[l − 1]).
template <class T>
void run_blocks(const model_config& c, const std::vector<block_buffers<T>>& blocks, const Matrix<T>& in,
                MatrixView<const T> memory, std::vector<Matrix<T>>& outputs, std::vector<block_cache<T>>& caches,
                const options& opt, const options& memory_opt, std::size_t batch) {
  outputs.resize(blocks.size());
  caches.resize(blocks.size());
  for (std::size_t l = 0; l < blocks.size(); ++l) {
    const MatrixView<const T> x = l == 0 ? in.view() : outputs[l - 1].view();
    ensure_shape(outputs[l], x.rows(), x.cols());
    const block_parameters<T> bp = model_block(c, blocks[l]);
    if (memory.rows() != 0)
      transformer_block(x, memory, bp, outputs[l], caches[l], opt, memory_opt, batch);
    else
      transformer_block(x, bp, outputs[l], caches[l], opt, batch);
  }
}

/// The backward of run_blocks: dOut (the last output's gradient, in `g_out`) back to the input's,
/// left in the returned buffer (g_out or g_other); parameters' gradients and ∂L/∂M added to.
template <class T>
Matrix<T>* run_blocks_backward(const model_config& c, const std::vector<block_buffers<T>>& blocks,
                               const std::vector<block_buffers<T>>& grads, const Matrix<T>& in,
                               MatrixView<const T> memory, MatrixView<T> grad_memory,
                               std::vector<Matrix<T>>& outputs, std::vector<block_cache<T>>& caches,
                               Matrix<T>* g_out, Matrix<T>* g_other, const options& opt,
                               const options& memory_opt, std::size_t batch) {
  for (std::size_t l = blocks.size(); l-- > 0;) {
    const MatrixView<const T> x = l == 0 ? in.view() : outputs[l - 1].view();
    const block_parameters<T> bp = model_block(c, blocks[l]);
    zero_rows(g_other->view());
    const block_gradients<T> bg = model_block_gradients(grads[l], g_other->view(), grad_memory);
    if (memory.rows() != 0)
      transformer_block_backward(x, memory, bp, caches[l], g_out->view(), bg, opt, memory_opt, batch);
    else
      transformer_block_backward(x, bp, caches[l], g_out->view(), bg, opt, batch);
    std::swap(g_out, g_other);
  }
  return g_out;
}

/// An encoder–decoder's encoder: the source's embedding, the encoder's blocks, its final norm
/// when the model has one, into e; returns M (a view of e's storage).
template <class T>
MatrixView<const T> encode_source(const model_parameters<T>& p, std::span<const std::int64_t> source,
                                  std::span<const bool> source_mask, std::size_t batch, model_cache<T>& e) {
  const model_config& c = p.config;
  embed_with_positions(p, source, batch, e.source_embedded);
  run_blocks(c, p.encoder, e.source_embedded, {}, e.source_outputs, e.source_blocks, options{.mask = source_mask},
             options{}, batch);
  const MatrixView<const T> last = e.source_outputs.back().view();
  if (!c.final_norm) return last;
  return final_norm_into<T>(c, last, p.encoder_norm_gamma, p.encoder_norm_beta, e.memory, &e.memory_mean,
                            &e.memory_rstd);
}

/// Self-attention's options in the model (causal in a decoder, the tokens' padding) and
/// cross-attention's (the source's padding).
inline options self_options(const model_config& c, std::span<const bool> token_mask) {
  return {.mask = token_mask, .causal = c.family != model_family::encoder};
}

inline void check_masks(const char* where, const model_input& in) {
  if (!in.token_mask.empty())
    check_equal(where, "size of the token mask", in.token_mask.size(), "the number of tokens", in.tokens.size());
  if (!in.source_mask.empty())
    check_equal(where, "size of the source mask", in.source_mask.size(), "the number of source tokens", in.source.size());
}

template <class T>
std::uint64_t model_tokens_fingerprint(const model_input& in) noexcept {
  fingerprint_state s;
  s.add(in.batch);
  s.add(in.tokens.size());
  for (const std::int64_t t : in.tokens) s.add(static_cast<std::uint64_t>(t));
  s.add(in.source.size());
  for (const std::int64_t t : in.source) s.add(static_cast<std::uint64_t>(t));
  for (const std::span<const bool> m : {in.token_mask, in.source_mask}) {
    s.add(m.size());
    for (const bool b : m) s.add(b ? 1u : 0u);
  }
  return s.value() | 1u;
}

}  // namespace detail

/// The number of parameters of a model of this configuration (the size of the buffer
/// bind_parameters lays them in). dimension_error for a configuration that cannot be (no
/// vocabulary, d_model not a multiple of the heads, an odd width for sinusoids or RoPE, …).
[[nodiscard]] inline std::size_t parameter_count(const model_config& c) {
  detail::check_config("attn::parameter_count", c);
  std::size_t n = 0;
  model_parameters<float> p{.config = c};
  detail::visit_model_tensors(p, [&](const detail::tensor_name&, std::size_t rows, std::size_t cols, auto&) {
    n += rows * cols;
  });
  return n;
}

/// Views of every parameter of a model of configuration c over `buffer` (parameter_count(c)
/// numbers, else dimension_error): its matrices first, then its vectors (the tensor order of
/// `model_tensor_names`), so the matrices (what weight decay acts on) are the first
/// `decayed_count(c)` numbers. The same call on a second buffer gives the gradients' views.
template <real T>
[[nodiscard]] model_parameters<T> bind_parameters(const model_config& c, std::span<T> buffer) {
  const char* where = "attn::bind_parameters";
  detail::check_config(where, c);
  detail::check_equal(where, "size of the buffer", buffer.size(), "the parameter count", parameter_count(c));
  model_parameters<T> p{.config = c};
  std::size_t at = 0;
  detail::visit_model_tensors(p, [&](const detail::tensor_name&, std::size_t rows, std::size_t cols, auto& slot) {
    using S = std::remove_cvref_t<decltype(slot)>;
    if constexpr (std::is_same_v<S, std::span<T>>)
      slot = buffer.subspan(at, cols);
    else
      slot = S(MatrixView<T>(buffer.data() + at, rows, cols));
    at += rows * cols;
  });
  return p;
}

/// The number of parameters in the matrices (the embeddings, the position table, every weight,
/// W_vocab): the first numbers of bind_parameters' buffer, the ones weight decay acts on.
[[nodiscard]] inline std::size_t decayed_count(const model_config& c) {
  detail::check_config("attn::decayed_count", c);
  std::size_t n = 0;
  model_parameters<float> p{.config = c};
  detail::visit_model_tensors(p, [&](const detail::tensor_name&, std::size_t rows, std::size_t cols, auto& slot) {
    if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(slot)>, std::span<float>>) n += rows * cols;
  });
  return n;
}

/// One tensor of the model: its name ("decoder.0.attention.W_Q", …), shape and place in the
/// buffer of bind_parameters.
struct model_tensor {
  std::string name;    ///< the name in a checkpoint
  std::size_t rows;    ///< 1 for a vector
  std::size_t cols;    ///< its width
  std::size_t offset;  ///< its first number in the buffer
  bool matrix;         ///< a matrix (decayed) or a vector
};

/// The model's tensors in the buffer's order (names for checkpoints, attn/safetensors.hpp).
[[nodiscard]] inline std::vector<model_tensor> model_tensors(const model_config& c) {
  detail::check_config("attn::model_tensors", c);
  std::vector<model_tensor> out;
  std::size_t at = 0;
  model_parameters<float> p{.config = c};
  detail::visit_model_tensors(p, [&](const detail::tensor_name& name, std::size_t rows, std::size_t cols, auto& slot) {
    const bool matrix = !std::is_same_v<std::remove_cvref_t<decltype(slot)>, std::span<float>>;
    out.push_back({name.str(), rows, cols, at, matrix});
    at += rows * cols;
  });
  return out;
}

/// The model's tensors as named views of `buffer` (parameter_count(c) numbers laid out as
/// bind_parameters lays them; T const for a save): a matrix {rows, cols}, a vector {cols}, in the
/// buffer's order. What attn/safetensors.hpp saves and loads:
/// `save_safetensors(path, model_named_tensors<const float>(c, w))`,
/// `load_safetensors(path, model_named_tensors<float>(c, w))` (every tensor checked against the
/// file before any number is written).
template <class T>
  requires real<std::remove_const_t<T>>
[[nodiscard]] std::vector<named_tensor<T>> model_named_tensors(const model_config& c, std::span<T> buffer) {
  const char* where = "attn::model_named_tensors";
  detail::check_config(where, c);
  const std::vector<model_tensor> ts = model_tensors(c);
  detail::check_equal(where, "size of the buffer", buffer.size(), "the parameter count",
                      ts.empty() ? 0 : ts.back().offset + ts.back().rows * ts.back().cols);
  std::vector<named_tensor<T>> out;
  out.reserve(ts.size());
  for (const model_tensor& t : ts)
    out.push_back({t.name, t.matrix ? std::vector<std::size_t>{t.rows, t.cols} : std::vector<std::size_t>{t.cols},
                   buffer.subspan(t.offset, t.rows * t.cols)});
  return out;
}

/// Fills every parameter from `seed`: each block as PyTorch's defaults (attn/init.hpp; block l
/// of the encoder streams from 16 + 16·l, of the decoder from 16 + 16·(N + l)), the token
/// embedding and the position table U(−√3·0.02, √3·0.02) (GPT-2's N(0, 0.02)'s variance, uniform
/// so that the bits are the same everywhere; streams 0 and 1), W_vocab as nn.Linear's weight
/// (stream 2), the final norms γ = 1, β = 0. Errors as the views' checks, nothing written then.
template <real T>
void initialize(const model_parameters<T>& p, std::uint64_t seed) {
  const char* where = "attn::initialize";
  detail::check_config(where, p.config);
  detail::check_model_views(where, p, "");
  const double embedding_bound = std::sqrt(3.0) * 0.02;
  detail::fill_uniform_matrix(StridedMatrixView<T>(p.token_embedding), embedding_bound, seed, 0);
  if (p.position_table.rows() != 0)
    detail::fill_uniform_matrix(StridedMatrixView<T>(p.position_table), embedding_bound, seed, 1);
  if (p.output.rows() != 0)
    detail::fill_uniform_matrix(StridedMatrixView<T>(p.output), detail::linear_bound(p.config.d_model), seed, 2);
  for (std::size_t l = 0; l < p.encoder.size(); ++l) detail::fill_buffers(p.encoder[l], seed, 16 + 16 * l);
  for (std::size_t l = 0; l < p.decoder.size(); ++l)
    detail::fill_buffers(p.decoder[l], seed, 16 + 16 * (p.config.layers + l));
  for (std::span<T> g : {p.encoder_norm_gamma, p.final_norm_gamma}) detail::fill_constant(g, T(1));
  for (std::span<T> b : {p.encoder_norm_beta, p.final_norm_beta}) detail::fill_constant(b, T(0));
}

/// The forward: logits (B·T × V) of the model for `in`, every intermediate into the cache.
/// dimension_error for shapes that do not agree (the parameters' views, the logits, tokens that
/// are not B sentences or longer than max_positions, an encoder–decoder without a source or
/// another model with one), domain_error for a token outside [0, V); logits untouched then.
template <real T, mutable_matrix_like Lm>
  requires std::same_as<matrix_scalar_of<Lm>, T>
void model_forward(const model_parameters<T>& p, const model_input& in, Lm&& logits, model_cache<T>& cache) {
  const char* where = "attn::model_forward";
  const model_config& c = p.config;
  const MatrixView<T> out = as_mutable_view(logits);
  detail::check_config(where, c);
  detail::check_model_views(where, p, "");
  const bool enc_dec = c.family == model_family::encoder_decoder;
  (void)detail::model_sentence(where, "the tokens", in.tokens, in.batch, c);
  if (enc_dec)
    (void)detail::model_sentence(where, "the source tokens", in.source, in.batch, c);
  else if (!in.source.empty())
    detail::throw_bad_config(where, "source tokens are for an encoder-decoder");
  detail::check_shape(where, "the logits", out.rows(), out.cols(), in.tokens.size(), c.vocabulary);
  detail::check_masks(where, in);
  cache.forward[0] = 0;
  const options self = detail::self_options(c, in.token_mask);
  MatrixView<const T> memory{};
  if (enc_dec) memory = detail::encode_source(p, in.source, in.source_mask, in.batch, cache);
  detail::embed_with_positions(p, in.tokens, in.batch, cache.embedded);
  detail::run_blocks(c, c.family == model_family::encoder ? p.encoder : p.decoder, cache.embedded, memory,
                     cache.outputs, cache.blocks, self, options{.mask = in.source_mask}, in.batch);
  MatrixView<const T> H = cache.outputs.back().view();
  if (c.final_norm)
    H = detail::final_norm_into<T>(c, H, p.final_norm_gamma, p.final_norm_beta, cache.hidden, &cache.mean, &cache.rstd);
  linear(H, linear_parameters<T>{.W = detail::logits_weight(p)}, out);
  const MatrixView<const T> E = p.token_embedding;
  cache.forward[0] = detail::model_tokens_fingerprint<T>(in);
  cache.forward[1] = detail::fingerprint(E.data(), E.rows(), E.cols(), E.row_stride());
  cache.forward[2] = p.output.rows() == 0 ? 0
                                          : detail::fingerprint(p.output.data(), p.output.rows(), p.output.cols(),
                                                                p.output.row_stride());
}

/// The backward of model_forward from its cache: every parameter's gradient from ∂L/∂logits
/// (dLogits, B·T × V) into `grads` (bind_parameters over a gradient buffer, or views of the same
/// shapes), overwritten, or added to with `accumulate` (gradient accumulation over micro-batches).
/// forward_mismatch_error when the tokens, a parameter or the arrangement are not the forward's;
/// dimension_error for shapes that do not agree; the gradients untouched then.
template <real T, matrix_like Gm>
  requires std::same_as<matrix_scalar_of<Gm>, T>
void model_backward(const model_parameters<T>& p, const model_input& in, model_cache<T>& cache, const Gm& dLogits,
                    const model_parameters<T>& grads, bool accumulate = false) {
  const char* where = "attn::model_backward";
  const model_config& c = p.config;
  const auto gv = as_view(dLogits);
  const MatrixView<const T> dl = gv;
  detail::check_config(where, c);
  detail::check_model_views(where, p, "");
  if (grads.config.family != c.family || grads.config.tied != c.tied || grads.config.positions != c.positions)
    detail::throw_bad_config(where, "the gradients' configuration is not the parameters'");
  detail::check_model_views(where, grads, "dL/d");
  detail::check_shape(where, "dL/dlogits", dl.rows(), dl.cols(), in.tokens.size(), c.vocabulary);
  if (cache.forward[0] == 0) detail::throw_no_forward(where, "model_forward");
  if (detail::model_tokens_fingerprint<T>(in) != cache.forward[0])
    detail::throw_not_the_forwards(where, "the tokens", "tokens");
  {
    const MatrixView<const T> E = p.token_embedding;
    const std::uint64_t out = p.output.rows() == 0 ? 0
                                                   : detail::fingerprint(p.output.data(), p.output.rows(),
                                                                         p.output.cols(), p.output.row_stride());
    if (detail::fingerprint(E.data(), E.rows(), E.cols(), E.row_stride()) != cache.forward[1] || out != cache.forward[2])
      detail::throw_not_the_forwards(where, "the embedding or W_vocab", "parameters");
  }
  const bool enc_dec = c.family == model_family::encoder_decoder;
  const std::size_t rows = in.tokens.size(), d = c.d_model;
  if (!accumulate) {
    detail::visit_model_tensors(grads, [](const detail::tensor_name&, std::size_t, std::size_t, const auto& slot) {
      if constexpr (requires { slot.rows(); }) {
        for (std::size_t i = 0; i < slot.rows(); ++i)
          for (std::size_t j = 0; j < slot.cols(); ++j) slot(i, j) = T(0);
      } else {
        for (T& v : slot) v = T(0);
      }
    });
  }
  detail::ensure_shape(cache.grad_1, rows, d);
  detail::ensure_shape(cache.grad_2, rows, d);
  const options self = detail::self_options(c, in.token_mask);
  // logits = H W: ∂L/∂H into grad_1, ∂L/∂W added (W_vocab, or Eᵀ tied: into dE's transpose)
  const MatrixView<const T> H = c.final_norm ? cache.hidden.view() : cache.outputs.back().view();
  const StridedMatrixView<T> dW = c.tied ? transposed(grads.token_embedding) : StridedMatrixView<T>(grads.output);
  detail::zero_rows(cache.grad_1.view());
  linear_backward(H, linear_parameters<T>{.W = detail::logits_weight(p)}, dl,
                  linear_gradients<T>{.input = cache.grad_1.view(), .W = dW, .accumulate = true});
  Matrix<T>* g_out = &cache.grad_1;
  Matrix<T>* g_other = &cache.grad_2;
  // H = LN_f(X_N)
  if (c.final_norm) {
    detail::zero_rows(g_other->view());
    norm_backward(cache.outputs.back(), detail::model_norm<T>(c, p.final_norm_gamma, p.final_norm_beta), *g_out,
                  norm_gradients<T>{g_other->view(), grads.final_norm_gamma, grads.final_norm_beta, true},
                  saved_norm<T>{cache.mean, cache.rstd});
    std::swap(g_out, g_other);
  }
  // the blocks, from the last; ∂L/∂M gathered over the decoder's blocks
  MatrixView<const T> memory{};
  if (enc_dec) {
    memory = c.final_norm ? cache.memory.view() : cache.source_outputs.back().view();
    detail::ensure_shape(cache.grad_memory_1, memory.rows(), d);
    detail::ensure_shape(cache.grad_memory_2, memory.rows(), d);
    detail::zero_rows(cache.grad_memory_1.view());
  }
  const bool encoder_only = c.family == model_family::encoder;
  const Matrix<T>* dX0 = detail::run_blocks_backward(
      c, encoder_only ? p.encoder : p.decoder, encoder_only ? grads.encoder : grads.decoder, cache.embedded, memory,
      enc_dec ? cache.grad_memory_1.view() : MatrixView<T>{}, cache.outputs, cache.blocks, g_out, g_other, self,
      options{.mask = in.source_mask}, in.batch);
  // X₀ = E[y] + P
  embedding_backward(in.tokens, *dX0, grads.token_embedding);
  if (c.positions == position_encoding::learned) learned_positions_backward(*dX0, grads.position_table, 0, in.batch);
  if (!enc_dec) return;
  // the encoder: M = LN_e(its last output), its blocks, its embedding
  g_out = &cache.grad_memory_1;
  g_other = &cache.grad_memory_2;
  if (c.final_norm) {
    detail::zero_rows(g_other->view());
    norm_backward(cache.source_outputs.back(), detail::model_norm<T>(c, p.encoder_norm_gamma, p.encoder_norm_beta),
                  *g_out, norm_gradients<T>{g_other->view(), grads.encoder_norm_gamma, grads.encoder_norm_beta, true},
                  saved_norm<T>{cache.memory_mean, cache.memory_rstd});
    std::swap(g_out, g_other);
  }
  const Matrix<T>* dS0 = detail::run_blocks_backward(c, p.encoder, grads.encoder, cache.source_embedded,
                                                     MatrixView<const T>{}, MatrixView<T>{}, cache.source_outputs,
                                                     cache.source_blocks, g_out, g_other,
                                                     options{.mask = in.source_mask}, options{}, in.batch);
  embedding_backward(in.source, *dS0, grads.token_embedding);
  if (c.positions == position_encoding::learned) learned_positions_backward(*dS0, grads.position_table, 0, in.batch);
}

/// What decoding keeps between steps: a kv_cache per decoder block (B sequences of up to
/// `capacity` positions), each step's scratch, and an encoder–decoder's encoded source M. Sized
/// once by the constructor; the steps allocate nothing once a step of the same shape has run.
template <real T>
class model_kv_cache {
public:
  model_kv_cache() = default;  ///< no storage: model_step refuses it
  /// Storage for `batch` sequences of up to `capacity` positions (≤ max_positions) of a model of
  /// configuration c. dimension_error for a size of 0, a capacity past max_positions, an encoder
  /// (it does not decode).
  model_kv_cache(const model_config& c, std::size_t batch, std::size_t capacity) : config_(c) {
    const char* where = "attn::model_kv_cache";
    detail::check_config(where, c);
    if (c.family == model_family::encoder) detail::throw_bad_config(where, "an encoder does not decode (no causal mask)");
    detail::check_nonempty(where, "the batch", batch);
    detail::check_nonempty(where, "the capacity", capacity);
    if (capacity > c.max_positions)
      detail::throw_bad_config(where, "a capacity of " + std::to_string(capacity) + " positions is past max_positions (" +
                                          std::to_string(c.max_positions) + ")");
    const std::size_t dk = c.d_model / c.heads;
    layers.reserve(c.layers);
    for (std::size_t l = 0; l < c.layers; ++l) layers.emplace_back(batch, capacity, c.heads, dk, dk);
    scratch.resize(c.layers);
    outputs.resize(c.layers);
  }
  [[nodiscard]] std::size_t batch() const noexcept { return layers.empty() ? 0 : layers[0].batch(); }  ///< B
  [[nodiscard]] std::size_t capacity() const noexcept { return layers.empty() ? 0 : layers[0].capacity(); }
  /// The positions every sequence holds (they advance together).
  [[nodiscard]] std::size_t length() const noexcept { return layers.empty() ? 0 : layers[0].length(0); }
  /// Forgets every position (and the encoded source); the storage is kept.
  void clear() noexcept {
    for (kv_cache<T>& k : layers) k.clear();
    memory_rows = 0;
  }
  [[nodiscard]] const model_config& config() const noexcept { return config_; }  ///< the model's

  std::vector<kv_cache<T>> layers;     ///< each decoder block's keys and values
  std::vector<block_cache<T>> scratch;  ///< each block's step intermediates
  std::vector<Matrix<T>> outputs;      ///< each block's output rows of the step
  Matrix<T> embedded, hidden;          ///< the step's X₀ and LN_f's output
  Matrix<T> logits;                    ///< model_generate's logits (scratch)
  std::vector<std::int64_t> next_tokens;  ///< model_generate's tokens of a step (scratch)
  std::vector<T> mean, rstd;           ///< LN_f's statistics (scratch)
  model_cache<T> encoder;              ///< an encoder–decoder: the encoder's forward, M in it
  std::vector<unsigned char> source_mask;  ///< the source's padding mask (model_encode's), or none
  std::size_t memory_rows = 0;         ///< 0 until model_encode
  /// M, the encoded source (B·S × d_model): the encoder's last output, or its final norm's.
  [[nodiscard]] MatrixView<const T> memory() const noexcept {
    if (memory_rows == 0) return {};
    return config_.final_norm ? encoder.memory.view() : encoder.source_outputs.back().view();
  }

private:
  model_config config_{};
};

namespace detail {

[[noreturn]] ATTN_NOINLINE inline void throw_not_encoded(const char* where) {
  raise<dimension_error>(std::string(where) + ": an encoder-decoder decodes after model_encode (no source encoded)");
}

template <class T>
void check_decoding(const char* where, const model_parameters<T>& p, const model_kv_cache<T>& cache) {
  const model_config &c = p.config, &k = cache.config();
  check_config(where, c);
  check_model_views(where, p, "");
  check_nonempty(where, "the cache's batch", cache.batch());
  if (k.family != c.family || k.d_model != c.d_model || k.layers != c.layers || k.heads != c.heads)
    throw_bad_config(where, "the cache was made for another model");
}

}  // namespace detail

/// An encoder–decoder's source, encoded once for decoding: M = the encoder's output (through its
/// final norm when the model has one) for `source` (B·S tokens, B the cache's batch; padding
/// marked false in `source_mask`, B·S entries, or none), kept in the cache with the mask, which
/// every step's cross-attention then applies; the cache's positions are forgotten (a new
/// sentence). Errors as model_forward's.
template <real T>
void model_encode(const model_parameters<T>& p, std::span<const std::int64_t> source, model_kv_cache<T>& cache,
                  std::span<const bool> source_mask = {}) {
  const char* where = "attn::model_encode";
  detail::check_decoding(where, p, cache);
  const model_config& c = p.config;
  if (c.family != model_family::encoder_decoder) detail::throw_bad_config(where, "only an encoder-decoder encodes");
  const std::size_t B = cache.batch();
  (void)detail::model_sentence(where, "the source tokens", source, B, c);
  if (!source_mask.empty())
    detail::check_equal(where, "size of the source mask", source_mask.size(), "the number of source tokens", source.size());
  cache.memory_rows = 0;  // (until the source is whole)
  cache.source_mask.assign(source_mask.begin(), source_mask.end());
  const MatrixView<const T> M = detail::encode_source(p, source, source_mask, B, cache.encoder);
  for (kv_cache<T>& k : cache.layers) k.clear();
  cache.memory_rows = M.rows();
}

/// One decoding step: `tokens` holds t new tokens of each of the cache's B sequences (B·t,
/// sequence b's in [b·t, (b + 1)·t)), at positions L … L + t − 1 after the L the cache holds;
/// their logits (B·t × V) equal model_forward's rows for the whole sequences, row for row, at a
/// cost of O((L + t)·d_model) per block and new row for attention (not a whole forward).
/// dimension_error for shapes that do not agree and "the cache is full" when t more positions
/// do not fit, domain_error for a token outside [0, V): nothing appended or written then.
template <real T, mutable_matrix_like Lm>
  requires std::same_as<matrix_scalar_of<Lm>, T>
void model_step(const model_parameters<T>& p, std::span<const std::int64_t> tokens, model_kv_cache<T>& cache,
                Lm&& logits) {
  const char* where = "attn::model_step";
  detail::check_decoding(where, p, cache);
  const model_config& c = p.config;
  const MatrixView<T> out = as_mutable_view(logits);
  const std::size_t B = cache.batch(), L = cache.length();
  detail::check_nonempty(where, "the tokens", tokens.size());
  if (tokens.size() % B != 0)
    detail::throw_bad_config(where, "the tokens (" + std::to_string(tokens.size()) + ") are not " + std::to_string(B) +
                                        " sequences' new tokens of equal number");
  const std::size_t t = tokens.size() / B;
  detail::check_tokens(where, tokens, c.vocabulary);
  detail::check_shape(where, "the logits", out.rows(), out.cols(), tokens.size(), c.vocabulary);
  if (L + t > cache.capacity())
    detail::throw_kv_error(detail::kv_error::full, where, 0, L, cache.capacity(), t);
  const bool enc_dec = c.family == model_family::encoder_decoder;
  if (enc_dec && cache.memory_rows == 0) detail::throw_not_encoded(where);
  const MatrixView<const T> memory = enc_dec ? cache.memory() : MatrixView<const T>{};
  // X₀ at positions L … L + t − 1
  detail::embed_with_positions(p, tokens, B, cache.embedded, L);
  for (std::size_t l = 0; l < c.layers; ++l) {
    const MatrixView<const T> x = l == 0 ? cache.embedded.view() : cache.outputs[l - 1].view();
    detail::ensure_shape(cache.outputs[l], x.rows(), x.cols());
    const block_parameters<T> bp = detail::model_block(c, p.decoder[l]);
    if (enc_dec)
      transformer_block_cached(x, memory, bp, cache.layers[l], cache.outputs[l], cache.scratch[l], {.causal = true},
                               options{.mask = std::span<const unsigned char>(cache.source_mask)});
    else
      transformer_block_cached(x, bp, cache.layers[l], cache.outputs[l], cache.scratch[l]);
  }
  MatrixView<const T> H = cache.outputs.back().view();
  if (c.final_norm) H = detail::final_norm_into<T>(c, H, p.final_norm_gamma, p.final_norm_beta, cache.hidden);
  linear(H, linear_parameters<T>{.W = detail::logits_weight(p)}, out);
}

/// Writes `count` new tokens of each of the cache's B sequences after `prompt` (B·t tokens, t ≥ 1,
/// sequence b's in [b·t, (b + 1)·t)) into `out` (B·count, sequence b's in [b·count,
/// (b + 1)·count)): the prompt in one step, then one token a step, each drawn from its row of
/// logits by `sample` with `opt` (temperature 0: greedy) and `gen`, and fed back through the
/// cache. The cache must hold t + count − 1 more positions (the last token drawn is not fed):
/// dimension_error ("the cache is full") otherwise, and errors as model_step's and sample's, all
/// before anything is written when they concern the shapes. Allocates only the cache's scratch
/// on a first call of a shape.
template <real T>
void model_generate(const model_parameters<T>& p, std::span<const std::int64_t> prompt, model_kv_cache<T>& cache,
                    std::span<std::int64_t> out, random_generator& gen, const sampling_options& opt = {}) {
  const char* where = "attn::model_generate";
  detail::check_decoding(where, p, cache);
  const std::size_t B = cache.batch(), V = p.config.vocabulary;
  detail::check_nonempty(where, "the prompt", prompt.size());
  if (prompt.size() % B != 0 || out.size() % B != 0)
    detail::throw_bad_config(where, "the prompt (" + std::to_string(prompt.size()) + ") and the output (" +
                                        std::to_string(out.size()) + ") are not " + std::to_string(B) +
                                        " sequences' tokens of equal number");
  const std::size_t t = prompt.size() / B, count = out.size() / B;
  if (count == 0) return;
  if (cache.length() + t + count - 1 > cache.capacity())
    detail::throw_kv_error(detail::kv_error::full, where, 0, cache.length(), cache.capacity(), t + count - 1);
  detail::ensure_shape(cache.logits, B * t, V);
  model_step(p, prompt, cache, cache.logits);
  const auto draw = [&](std::size_t b, std::size_t row, std::size_t i) {
    out[b * count + i] = static_cast<std::int64_t>(sample(cache.logits.row(row), gen, opt));
  };
  for (std::size_t b = 0; b < B; ++b) draw(b, b * t + t - 1, 0);
  for (std::size_t i = 1; i < count; ++i) {
    detail::ensure_shape(cache.logits, B, V);
    // the tokens just drawn, one a sequence: out's column i − 1 (strided by count): gathered
    // into the embedding's order through the cache's own scratch
    cache.next_tokens.resize(B);
    for (std::size_t b = 0; b < B; ++b) cache.next_tokens[b] = out[b * count + i - 1];
    model_step(p, std::span<const std::int64_t>(cache.next_tokens.data(), B), cache, cache.logits);
    for (std::size_t b = 0; b < B; ++b) draw(b, b, i);
  }
}

}  // namespace attn
