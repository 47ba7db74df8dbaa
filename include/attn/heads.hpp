#pragma once
/// \file attn/heads.hpp
/// Self- and cross-attention with projections, one head or h of them (row vectors, PyTorch's
/// head layout; docs/self-attention.md):
///
///   Q = X W_Q + b_Q,   K = X_kv W_K + b_K,   V = X_kv W_V + b_V,
///   Z_i = softmax(β·Q_i K_iᵀ·scale, masks) V_i     (head i: columns [i·d_k, (i+1)·d_k) of Q and
///                                                    K, [i·d_v, (i+1)·d_v) of V),
///   Y = [Z_1 … Z_h] W_O + b_O                       (the concatenation itself without W_O),
///
/// X_kv = X for self-attention, the encoder's output for cross-attention; scale = 1/√d_k unless
/// another score is given (multi_head_parameters::score: dot, dot_scaled_by{s}). d_k and d_v are per-head sizes, so h need not divide d_model. A batch of B sentences is
/// B·T rows of X (and B·n of X_kv), each sentence attending within itself. The backward is
/// attn/heads_backward.hpp.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "attn/attention.hpp"
#include "attn/detail/bias.hpp"
#include "attn/detail/fingerprint.hpp"
#include "attn/detail/products.hpp"
#include "attn/detail/threads.hpp"
#include "attn/error.hpp"
#include "attn/extent.hpp"
#include "attn/linear.hpp"
#include "attn/mask.hpp"
#include "attn/matrix.hpp"
#include "attn/positions.hpp"
#include "attn/score.hpp"
#include "attn/softmax.hpp"
#include "attn/vector.hpp"

namespace attn {

/// The parameters of (multi-head) attention with projections, borrowed from the caller. A bias
/// or W_O with no entries is left out. A weight is read where it lies, without a copy, in either
/// layout: its rows (a MatrixView, a row-major Eigen matrix) or its columns (PyTorch's out × in
/// weight as `transposed(…)`, a column-major Eigen matrix); any other strides are refused
/// (dimension_error).
template <real T>
struct multi_head_parameters {
  StridedMatrixView<const T> W_Q{};  ///< d_model × h·d_k
  StridedMatrixView<const T> W_K{};  ///< d_kv × h·d_k (d_kv: the columns of X_kv)
  StridedMatrixView<const T> W_V{};  ///< d_kv × h·d_v
  StridedMatrixView<const T> W_O{};  ///< h·d_v × d_out, or none (Y is then the concatenation)
  std::span<const T> b_Q{};      ///< h·d_k, or none
  std::span<const T> b_K{};      ///< h·d_k, or none
  std::span<const T> b_V{};      ///< h·d_v, or none
  std::span<const T> b_O{};      ///< d_out, or none
  std::size_t heads = 1;         ///< h ≥ 1, dividing the columns of W_Q
  /// h_kv, the key and value heads (grouped-query attention; 1: multi-query), dividing h; 0: h.
  /// Query head i reads key/value head i / (h / h_kv); W_K and W_V have h_kv·d_k and h_kv·d_v
  /// columns, W_O h·d_v rows.
  std::size_t kv_heads = 0;
  /// The score, as scaled_dot_product_attention takes it: scaled_dot (1/√d_k, the default),
  /// dot (1) or dot_scaled_by{s} (PyTorch's scale=; s finite as a T, 1e39 is not for float,
  /// else domain_error "<where>: the scale of attn::dot_scaled_by must be finite").
  dot_product_score_choice score{};
  /// RoPE on each head's queries and keys between the projections and the scores (attn/positions.hpp;
  /// d_k even): query row t of a sentence at position t + n − T (T = n: t), key row j at j. None:
  /// no positions here (add them to X, or give ALiBi as a bias).
  std::optional<rotary> positions{};
  /// ALiBi (attn/logit_bias.hpp): head i's logits gain −m_i·(p_t − j), m_i = alibi_slopes(h)[i],
  /// query row t of a sentence at p_t = t + n − T (T ≤ n), key j at j; formed inside the tiles,
  /// nothing stored. With rotary positions or a bias too, each applies.
  bool alibi = false;
  /// An additive bias on the heads' logits (PyTorch's float attn_mask, after the scale and β):
  /// T × n, the same for every head and sentence, or h·B·T × n, head i of sentence b in rows
  /// [(i·B + b)·T, (i·B + b + 1)·T) as the maps; none without rows. Its gradient:
  /// multi_head_gradients::bias.
  MatrixView<const T> bias{};
};

/// What a forward of multi_head_attention was given, as its backward checks it: the batch, the
/// options and a 64-bit fingerprint (detail/fingerprint.hpp) of the numbers of X, X_kv, every
/// parameter and every mask. Numbers changed in place between the forward and the backward
/// change a fingerprint too: they are refused like another buffer.
struct multi_head_record {
  bool valid = false;    ///< a forward has filled it
  std::size_t batch = 0;  ///< B, the sentences
  double beta = 1;        ///< options::beta
  bool causal = false;    ///< options::causal
  all_masked_policy policy = all_masked_policy::zeros;  ///< options::if_all_masked
  dot_product_score_choice score{};  ///< multi_head_parameters::score
  bool rotary = false;                ///< multi_head_parameters::positions given
  rotary_form rotary_pairs = rotary_form::interleaved;  ///< its form
  double rotary_base = 0;             ///< its base
  bool alibi = false;                 ///< multi_head_parameters::alibi
  std::uint64_t bias = 0;             ///< fingerprint of multi_head_parameters::bias
  std::uint64_t key_mask = 0, row_mask = 0;  ///< fingerprints of the masks' entries (and shapes)
  std::uint64_t inputs[10] = {};  ///< X, X_kv, W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O
};

/// What the forward keeps (and the backward reads), sized by the forward and reused: calls with
/// the same shapes allocate nothing. Q, K, V and Z are the projections and the heads' outputs
/// side by side (head i in its columns); logsumexp row (i·B + b) holds head i's L of sentence b.
template <real T>
struct multi_head_cache {
  multi_head_record forward;  ///< what the forward was given (the backward checks it)
  Matrix<T> queries;    ///< Q = X W_Q + b_Q (B·T × h·d_k)
  Matrix<T> keys;       ///< K = X_kv W_K + b_K (B·n × h_kv·d_k)
  Matrix<T> values;     ///< V = X_kv W_V + b_V (B·n × h_kv·d_v)
  Matrix<T> heads_out;  ///< Z = [Z_1 … Z_h] (B·T × h·d_v)
  Matrix<T> logsumexp;  ///< h·B × T
  /// The backward's: ∂L/∂Q, ∂L/∂K, ∂L/∂V (shaped as Q, K, V) and ∂L/∂Z (dY itself without W_O),
  /// each written by every backward.
  Matrix<T> grad_queries, grad_keys, grad_values, grad_heads_out;
  /// Each head's ∂L/∂(logits) (h·B·T × n, as the maps): only when ∂L/∂bias is asked for.
  Matrix<T> grad_bias;
};

/// Where multi_head_attention writes: Y, and (each when it has rows) every head's map and its
/// scores, head i's of sentence b in rows [(i·B + b)·T, (i·B + b + 1)·T).
template <real T>
struct multi_head_views {
  MatrixView<T> out{};     ///< Y (B·T × d_out)
  MatrixView<T> maps{};    ///< the heads' weights A_i (h·B·T × n), when given
  /// The heads' scores S_i = Q_i K_iᵀ·scale (h·B·T × n, as maps), before β and the masks: what
  /// scaled_dot_product_attention writes into attention_views::scores; when given.
  MatrixView<T> scores{};
};

namespace detail {

/// The sizes of one call, read off the inputs and the parameters.
struct head_sizes {
  std::size_t rows, kv_rows, batch, tq, n, d_model, d_kv, heads, dk, dv, d_out;
  std::size_t kv_heads = 1, group = 1;  ///< h_kv, and h / h_kv query heads per key/value head
  /// The key/value head that query head i reads.
  [[nodiscard]] constexpr std::size_t kv_head_of(std::size_t i) const noexcept { return i / group; }
};

template <class T>
[[nodiscard]] constexpr tile_matrix<const T> tile_of_const(MatrixView<const T> m) noexcept {
  return {m.data(), m.rows(), m.cols(), m.row_stride()};
}

/// Columns [c0, c0 + cols) of rows [r0, r0 + rows) of m, as a view.
template <class T>
[[nodiscard]] constexpr MatrixView<T> block_of(MatrixView<T> m, std::size_t r0, std::size_t rows,
                                               std::size_t c0, std::size_t cols) noexcept {
  return MatrixView<T>(m.data() + r0 * m.row_stride() + c0, rows, cols, m.row_stride());
}

/// Grows this thread's product panels (detail/gemm.hpp) for every projection of a call of these
/// sizes, forward or backward, before anything is written.
template <real T>
void reserve_head_products(const head_sizes& s) {
  const std::size_t d = std::max({s.rows, s.kv_rows, s.d_model, s.d_kv, s.heads * s.dk, s.heads * s.dv,
                                  s.d_out});
  gemm_reserve<T>(d, d, d);
}

/// Refuses (dimension_error) a bias, or its gradient, that is neither T × n (shared) nor
/// h·B·T × n (per head and sentence).
inline void check_bias_shape(const char* where, const char* what, std::size_t rows, std::size_t cols,
                             const head_sizes& s) {
  if ((rows == s.tq || rows == s.heads * s.rows) && cols == s.n) return;
  attn::detail::raise<dimension_error>(
      std::string(where) + ": " + what + " is " + std::to_string(rows) + "x" + std::to_string(cols) +
      " but should be " + std::to_string(s.tq) + "x" + std::to_string(s.n) + " (shared) or " +
      std::to_string(s.heads * s.rows) + "x" + std::to_string(s.n) + " (per head and sentence)");
}

/// Checks every shape of one call (dimension_error naming the buffer), β and the scale (finite
/// as a T: domain_error), before anything is written; returns the sizes.
template <real T>
constexpr head_sizes check_heads(const char* where, MatrixView<const T> X, MatrixView<const T> X_kv,
                       const multi_head_parameters<T>& p, std::size_t batch, const options& opt) {
  if (p.heads == 0)
    attn::detail::raise<dimension_error>(std::string(where) + ": heads must be at least 1 (it is 0)");
  check_nonempty(where, "the batch", batch);
  check_nonempty(where, "the inputs", X.rows());
  check_nonempty(where, "the keys' inputs", X_kv.rows());
  head_sizes s{};
  s.rows = X.rows();
  s.kv_rows = X_kv.rows();
  s.batch = batch;
  if (s.rows % batch != 0 || s.kv_rows % batch != 0)
    attn::detail::raise<dimension_error>(std::string(where) + ": " + std::to_string(s.rows) +
                                         " rows of X and " + std::to_string(s.kv_rows) +
                                         " of X_kv are not " + std::to_string(batch) +
                                         " sentences of equal length");
  s.tq = s.rows / batch;
  s.n = s.kv_rows / batch;
  s.d_model = X.cols();
  s.d_kv = X_kv.cols();
  s.heads = p.heads;
  s.kv_heads = p.kv_heads != 0 ? p.kv_heads : p.heads;
  if (s.heads % s.kv_heads != 0)
    attn::detail::raise<dimension_error>(std::string(where) + ": " + std::to_string(s.kv_heads) +
                                         " key/value heads do not divide the " +
                                         std::to_string(s.heads) + " heads");
  s.group = s.heads / s.kv_heads;
  check_layout(where, "W_Q", p.W_Q);
  check_layout(where, "W_K", p.W_K);
  check_layout(where, "W_V", p.W_V);
  check_layout(where, "W_O", p.W_O);
  check_equal(where, "rows of W_Q", p.W_Q.rows(), "columns of X", s.d_model);
  check_equal(where, "rows of W_K", p.W_K.rows(), "columns of X_kv", s.d_kv);
  check_equal(where, "rows of W_V", p.W_V.rows(), "columns of X_kv", s.d_kv);
  if (s.group == 1) {
    check_equal(where, "columns of W_K", p.W_K.cols(), "columns of W_Q", p.W_Q.cols());
    if (p.W_Q.cols() % p.heads != 0 || p.W_V.cols() % p.heads != 0)
      attn::detail::raise<dimension_error>(std::string(where) + ": " + std::to_string(p.heads) +
                                           " heads do not divide the " +
                                           std::to_string(p.W_Q.cols()) + " columns of W_Q and the " +
                                           std::to_string(p.W_V.cols()) + " columns of W_V");
  } else {
    if (p.W_Q.cols() % p.heads != 0 || p.W_V.cols() % s.kv_heads != 0)
      attn::detail::raise<dimension_error>(
          std::string(where) + ": " + std::to_string(p.heads) + " heads do not divide the " +
          std::to_string(p.W_Q.cols()) + " columns of W_Q, or " + std::to_string(s.kv_heads) +
          " key/value heads the " + std::to_string(p.W_V.cols()) + " columns of W_V");
    check_equal(where, "columns of W_K", p.W_K.cols(), "key/value heads x a head's key size",
                s.kv_heads * (p.W_Q.cols() / p.heads));
  }
  s.dk = p.W_Q.cols() / p.heads;
  s.dv = p.W_V.cols() / s.kv_heads;
  check_nonempty(where, "a head's query and key size (columns of W_Q / heads)", s.dk);
  if (!p.b_Q.empty()) check_equal(where, "size of b_Q", p.b_Q.size(), "columns of W_Q", p.W_Q.cols());
  if (!p.b_K.empty()) check_equal(where, "size of b_K", p.b_K.size(), "columns of W_K", p.W_K.cols());
  if (!p.b_V.empty()) check_equal(where, "size of b_V", p.b_V.size(), "columns of W_V", p.W_V.cols());
  if (p.W_O.rows() != 0) {
    if (s.group == 1)
      check_equal(where, "rows of W_O", p.W_O.rows(), "columns of W_V", p.W_V.cols());
    else
      check_equal(where, "rows of W_O", p.W_O.rows(), "heads x a head's value size", s.heads * s.dv);
    s.d_out = p.W_O.cols();
  } else {
    s.d_out = s.heads * s.dv;
  }
  if (!p.b_O.empty()) check_equal(where, "size of b_O", p.b_O.size(), "columns of Y", s.d_out);
  if (!opt.mask.empty() && opt.mask.size() != s.n)
    check_equal(where, "mask size", opt.mask.size(), "number of keys of the batch", s.n * batch);
  if (!opt.row_mask.empty()) {
    check_equal(where, "rows of the row mask", opt.row_mask.rows(), "rows of X", s.rows);
    check_equal(where, "columns of the row mask", opt.row_mask.cols(), "keys per sentence", s.n);
  }
  check_beta<T>(where, opt);
  p.score.template check_scale<T>(where);  // on the bits: also under -ffast-math
  if (p.positions) {
    if (s.dk % 2 != 0) throw_odd_width(where, "a head's query and key size, for rotary positions,", s.dk);
    check_base(where, p.positions->base);
  }
  if (p.alibi && s.tq > s.n) throw_more_queries_than_keys(where, s.tq, s.n);
  if (p.bias.rows() != 0) check_bias_shape(where, "the bias", p.bias.rows(), p.bias.cols(), s);
  return s;
}

/// Head i of sentence b's bias as the kernels read it: its rows of multi_head_parameters::bias
/// (all of it when shared) and its ALiBi slope.
template <real T>
[[nodiscard]] constexpr tile_bias<T> head_bias(const multi_head_parameters<T>& p, const head_sizes& s,
                                     std::size_t i, std::size_t b) {
  tile_bias<T> t;
  if (p.bias.rows() != 0) {
    t.matrix = p.bias.rows() == s.tq ? p.bias.data() : p.bias.row((i * s.batch + b) * s.tq).data();
    t.stride = p.bias.row_stride();
  }
  if (p.alibi) {
    t.slope = alibi_slope<T>(i, s.heads);
    t.offset = s.n - s.tq;
  }
  return t;
}

/// RoPE on the projected queries (h heads, query row t of a sentence at t + n − T) and keys (h_kv
/// heads, key row j at j), or its inverse on their gradients; nothing without positions.
template <real T>
void rotate_heads(const char* where, const multi_head_parameters<T>& p, const head_sizes& s, MatrixView<T> Q,
                  MatrixView<T> K, bool inverse) {
  if (!p.positions) return;
  rotate_pairs<T>(where, Q, s.heads, s.n > s.tq ? s.n - s.tq : 0, s.batch, *p.positions, inverse);
  rotate_pairs<T>(where, K, s.kv_heads, 0, s.batch, *p.positions, inverse);
}

/// The columns of the heads' outputs side by side, h·d_v (h·d_v = W_V's columns · h / h_kv);
/// W_V's columns when the heads do not divide (check_heads then says why).
template <real T>
[[nodiscard]] constexpr std::size_t concat_columns(const multi_head_parameters<T>& p) noexcept {
  const std::size_t kv = p.kv_heads != 0 ? p.kv_heads : p.heads;
  if (kv == 0 || p.heads % kv != 0) return p.W_V.cols();
  return p.W_V.cols() / kv * p.heads;
}

/// Sentence b's options: opt's, with its part of a per-sentence key mask and of the row mask
/// (borrowed from opt, never copied: no allocation).
constexpr options sentence_options(const options& opt, const head_sizes& s, std::size_t b) {
  options o = borrowing(opt);
  if (!opt.mask.empty() && opt.mask.size() != s.n) o.mask = opt.mask.subview(b * s.n, s.n);
  if (!opt.row_mask.empty()) o.row_mask = opt.row_mask.subrows(b * s.tq, s.tq);
  return o;
}

/// The projections: Q = X W_Q + b_Q, K = X_kv W_K + b_K, V = X_kv W_V + b_V.
template <real T>
constexpr void project(MatrixView<const T> X, MatrixView<const T> X_kv, const multi_head_parameters<T>& p,
                       MatrixView<T> Q, MatrixView<T> K, MatrixView<T> V) {
  project_into<T>(X, p.W_Q, p.b_Q, Q);
  project_into<T>(X_kv, p.W_K, p.b_K, K);
  project_into<T>(X_kv, p.W_V, p.b_V, V);
}

/// Rows [rows·k/pieces, rows·(k+1)/pieces) of m: piece k of `pieces` nearly equal ones.
template <class T>
[[nodiscard]] constexpr MatrixView<T> piece_of_rows(MatrixView<T> m, std::size_t k,
                                                    std::size_t pieces) noexcept {
  const std::size_t r0 = m.rows() * k / pieces, r1 = m.rows() * (k + 1) / pieces;
  return block_of(m, r0, r1 - r0, 0, m.cols());
}

/// project on `threads` threads: X's rows (into Q) and X_kv's (into K and V) in pieces.
template <real T>
void project_on_threads(MatrixView<const T> X, MatrixView<const T> X_kv,
                        const multi_head_parameters<T>& p, MatrixView<T> Q, MatrixView<T> K,
                        MatrixView<T> V, std::size_t threads) {
  const std::size_t pieces = 4 * threads;  // of X's rows, then as many of X_kv's
  split_over_threads(2 * pieces, threads, [&](std::size_t k) {
    const std::size_t part = k % pieces;
    if (k < pieces) {
      project_into<T>(piece_of_rows(X, part, pieces), p.W_Q, p.b_Q, piece_of_rows(Q, part, pieces));
    } else {
      project_into<T>(piece_of_rows(X_kv, part, pieces), p.W_K, p.b_K, piece_of_rows(K, part, pieces));
      project_into<T>(piece_of_rows(X_kv, part, pieces), p.W_V, p.b_V, piece_of_rows(V, part, pieces));
    }
  });
}

/// Y = Z W_O + b_O (or Y = Z, + b_O).
template <real T>
constexpr void output_projection(MatrixView<const T> Z, const multi_head_parameters<T>& p,
                                 MatrixView<T> Y) {
  if (!p.b_O.empty()) add_to_rows(p.b_O.data(), tile_of(Y), false);
  if (p.W_O.rows() != 0) {
    multiply(tile_of_const(Z), stored_of(p.W_O), tile_of(Y), !p.b_O.empty());
  } else {
    for (std::size_t t = 0; t < Y.rows(); ++t)
      for (std::size_t i = 0; i < Y.cols(); ++i)
        Y(t, i) = (p.b_O.empty() ? T(0) : Y(t, i)) + Z(t, i);
  }
}

/// output_projection on `threads` threads, Y's rows in pieces.
template <real T>
void output_projection_on_threads(MatrixView<const T> Z, const multi_head_parameters<T>& p,
                                  MatrixView<T> Y, std::size_t threads) {
  const std::size_t pieces = 4 * threads;
  split_over_threads(pieces, threads, [&](std::size_t k) {
    output_projection<T>(piece_of_rows(Z, k, pieces), p, piece_of_rows(Y, k, pieces));
  });
}

/// Calls f(q, k, v, i, b) with head i of sentence b's queries, keys and values (those of its
/// key/value head).
template <real T, class F>
constexpr void for_each_head(MatrixView<const T> Q, MatrixView<const T> K, MatrixView<const T> V,
                             const head_sizes& s, F&& f) {
  for (std::size_t i = 0; i < s.heads; ++i)
    for (std::size_t b = 0; b < s.batch; ++b)
      f(block_of(Q, b * s.tq, s.tq, i * s.dk, s.dk),
        block_of(K, b * s.n, s.n, s.kv_head_of(i) * s.dk, s.dk),
        block_of(V, b * s.n, s.n, s.kv_head_of(i) * s.dv, s.dv), i, b);
}

/// Every head of every sentence: Z_i = attention(Q_i, K_i, V_i) of its rows, into Z's columns,
/// its log-sum-exp into row i·B + b of lse, its map and scores (maps, scores with rows) into
/// their rows of maps and scores.
/// Under throw_error every head is checked before any is computed.
template <real T, class S>
constexpr void attend_heads(const char* where, MatrixView<const T> Q, MatrixView<const T> K,
                            MatrixView<const T> V, MatrixView<T> Z, MatrixView<T> lse,
                            MatrixView<T> maps, MatrixView<T> scores, const head_sizes& s,
                            const S& score, const options& opt, const multi_head_parameters<T>& p) {
  if (opt.if_all_masked == all_masked_policy::throw_error)
    for_each_head<T>(Q, K, V, s, [&](auto q, auto k, auto v, std::size_t, std::size_t b) {
      check_many_queries<T>(where, q, k, v, score, sentence_options(opt, s, b));
    });
  for_each_head<T>(Q, K, V, s, [&](auto q, auto k, auto v, std::size_t i, std::size_t b) {
    const std::size_t row = i * s.batch + b;
    attention_views<T> out{.out = block_of(Z, b * s.tq, s.tq, i * s.dv, s.dv),
                           .logsumexp = lse.row(row)};
    if (maps.rows() != 0) out.weights = block_of(maps, row * s.tq, s.tq, 0, s.n);
    if (scores.rows() != 0) out.scores = block_of(scores, row * s.tq, s.tq, 0, s.n);
    many_queries_rows<T>(where, q, k, v, score, out, sentence_options(opt, s, b), rows_at_once{},
                         head_bias(p, s, i, b));
  });
}

/// attend_heads on `threads` threads: every head of every sentence cut into pieces of query rows
/// (rows_per_piece), the last rows first (piece_rows), each taken by the next free thread;
/// every row's numbers are the one-thread ones (query_rows).
template <real T, class S>
void attend_heads_on_threads(const char* where, MatrixView<const T> Q, MatrixView<const T> K,
                             MatrixView<const T> V, MatrixView<T> Z, MatrixView<T> lse,
                             MatrixView<T> maps, MatrixView<T> scores, const head_sizes& s,
                             const S& score, const options& opt, const multi_head_parameters<T>& p,
                             std::size_t threads) {
  if (opt.if_all_masked == all_masked_policy::throw_error)
    for_each_head<T>(Q, K, V, s, [&](auto q, auto k, auto v, std::size_t, std::size_t b) {
      check_many_queries<T>(where, q, k, v, score, sentence_options(opt, s, b));
    });
  const std::size_t units = s.heads * s.batch;  // unit i·B + b: head i of sentence b
  const std::size_t piece = rows_per_piece<T>(s.tq, (threads + units - 1) / units);
  const std::size_t pieces = (s.tq + piece - 1) / piece;
  split_over_threads(units * pieces, threads, [&](std::size_t item) {
    const std::size_t unit = item % units, i = unit / s.batch, b = unit % s.batch;
    const row_range r = piece_rows(item / units, piece, pieces, s.tq);
    attention_views<T> out{.out = block_of(Z, b * s.tq, s.tq, i * s.dv, s.dv),
                           .logsumexp = lse.row(unit)};
    if (maps.rows() != 0) out.weights = block_of(maps, unit * s.tq, s.tq, 0, s.n);
    if (scores.rows() != 0) out.scores = block_of(scores, unit * s.tq, s.tq, 0, s.n);
    query_rows<T>(where, block_of(Q, b * s.tq, s.tq, i * s.dk, s.dk),
                  block_of(K, b * s.n, s.n, s.kv_head_of(i) * s.dk, s.dk),
                  block_of(V, b * s.n, s.n, s.kv_head_of(i) * s.dv, s.dv), score, out,
                  sentence_options(opt, s, b), r.begin, r.end, head_bias(p, s, i, b));
  });
}

/// Calls f with the score of these parameters (scaled_dot, dot or dot_scaled_by{s}) itself.
template <real T, class F>
constexpr void with_head_score(const multi_head_parameters<T>& p, F&& f) {
  p.score.visit(std::forward<F>(f));
}

/// The four weights and four biases of P (multi_head_parameters, or the gradients' views of
/// them), each under its name: names[0..7] for W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O.
template <real T, std::size_t Capacity, class P>
constexpr void add_weights(named_regions<T, Capacity>& list, const P& p,
                           const std::array<const char*, 8>& names) {
  list.add(names[0], region_of(p.W_Q));
  list.add(names[1], region_of(p.W_K));
  list.add(names[2], region_of(p.W_V));
  list.add(names[3], region_of(p.W_O));
  list.add(names[4], region_of(p.b_Q));
  list.add(names[5], region_of(p.b_K));
  list.add(names[6], region_of(p.b_V));
  list.add(names[7], region_of(p.b_O));
}

/// The inputs of attention with projections, named: X, X_kv and every parameter given. X_kv is
/// listed even when it starts where X does (self-attention: the same numbers, so an output over
/// it is named after X, listed first): a cross-attention X_kv that holds X and more rows, or
/// lies inside X, would otherwise let an output over the rows of one that the other lacks pass.
template <real T, std::size_t Capacity>
constexpr void add_head_inputs(named_regions<T, Capacity>& in, MatrixView<const T> X,
                               MatrixView<const T> X_kv, const multi_head_parameters<T>& p) {
  in.add("X", region_of(X));
  in.add("X_kv", region_of(X_kv));
  add_weights(in, p, {"W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"});
  in.add("the bias", region_of(p.bias));
}

/// The cache's matrices the forward writes, named.
template <real T, std::size_t Capacity>
constexpr void add_forward_cache(named_regions<T, Capacity>& list, multi_head_cache<T>& cache) {
  for (Matrix<T>* m :
       {&cache.queries, &cache.keys, &cache.values, &cache.heads_out, &cache.logsumexp})
    list.add("the cache", region_of(m->view()));
}

/// The record of a call: its batch, options and the fingerprints of its inputs and masks.
template <real T>
multi_head_record record_of(MatrixView<const T> X, MatrixView<const T> X_kv,
                            const multi_head_parameters<T>& p, const options& opt, std::size_t batch) {
  multi_head_record r;
  r.valid = true;
  r.batch = batch;
  r.beta = opt.beta;
  r.causal = opt.causal;
  r.policy = opt.if_all_masked;
  r.score = p.score;
  r.rotary = p.positions.has_value();
  if (p.positions) {
    r.rotary_pairs = p.positions->form;
    r.rotary_base = p.positions->base;
  }
  r.alibi = p.alibi;
  r.bias = fingerprint(p.bias.data(), p.bias.rows(), p.bias.cols(), p.bias.row_stride());
  r.key_mask = fingerprint_bytes(opt.mask.bytes(), 1, opt.mask.size(), opt.mask.size());
  r.row_mask = opt.row_mask.empty() ? fingerprint_bytes(nullptr, 0, 0, 0)
                                    : fingerprint_bytes(opt.row_mask.row_bytes(0), opt.row_mask.rows(),
                                                        opt.row_mask.cols(), opt.row_mask.row_stride());
  const auto of = [](StridedMatrixView<const T> m) { return weight_fingerprint(m); };
  const auto of_span = [](std::span<const T> b) { return fingerprint(b.data(), 1, b.size(), b.size()); };
  const std::uint64_t values[10] = {of(X),  of(X_kv), of(p.W_Q), of(p.W_K), of(p.W_V),
                                    of(p.W_O), of_span(p.b_Q), of_span(p.b_K), of_span(p.b_V),
                                    of_span(p.b_O)};
  for (std::size_t i = 0; i < 10; ++i) r.inputs[i] = values[i];
  return r;
}

/// multi_head_attention on views: checks (every one, before anything is written), sizes the
/// cache, projects, attends head by head, projects the output; each step split over `threads`
/// threads when there are more than one.
template <real T>
void multi_head_views_of(const char* where, MatrixView<const T> X, MatrixView<const T> X_kv,
                         const multi_head_parameters<T>& p, const multi_head_views<T>& out,
                         multi_head_cache<T>& cache, const options& opt, std::size_t batch,
                         std::size_t threads = 1) {
  threads = usable_threads(threads);  // (any count: at most the machine's)
  const head_sizes s = check_heads<T>(where, X, X_kv, p, batch, opt);
  check_shape(where, "Y", out.out.rows(), out.out.cols(), s.rows, s.d_out);
  if (out.maps.rows() != 0)
    check_shape(where, "the maps", out.maps.rows(), out.maps.cols(), s.heads * s.rows, s.n);
  if (out.scores.rows() != 0)
    check_shape(where, "the scores", out.scores.rows(), out.scores.cols(), s.heads * s.rows, s.n);
  named_regions<T, 11> inputs;
  add_head_inputs(inputs, X, X_kv, p);
  named_regions<T, 8> outputs;
  outputs.add("Y", region_of(out.out));
  outputs.add("the maps", region_of(out.maps));
  outputs.add("the scores", region_of(out.scores));
  add_forward_cache(outputs, cache);
  check_buffers_apart<T>(where, outputs.span(), inputs.span(), opt);
  ensure_shape(cache.queries, s.rows, s.heads * s.dk);
  ensure_shape(cache.keys, s.kv_rows, s.kv_heads * s.dk);
  ensure_shape(cache.values, s.kv_rows, s.kv_heads * s.dv);
  ensure_shape(cache.heads_out, s.rows, s.heads * s.dv);
  ensure_shape(cache.logsumexp, s.heads * s.batch, s.tq);
  if (threads <= 1) reserve_head_products<T>(s);
  cache.forward = record_of<T>(X, X_kv, p, opt, batch);
  if (threads <= 1) {
    project<T>(X, X_kv, p, cache.queries.view(), cache.keys.view(), cache.values.view());
    rotate_heads<T>(where, p, s, cache.queries.view(), cache.keys.view(), false);
    with_head_score(p, [&](const auto& score) {
      attend_heads<T>(where, cache.queries.view(), cache.keys.view(), cache.values.view(),
                      cache.heads_out.view(), cache.logsumexp.view(), out.maps, out.scores, s,
                      score, opt, p);
    });
    output_projection<T>(cache.heads_out.view(), p, out.out);
    return;
  }
  project_on_threads<T>(X, X_kv, p, cache.queries.view(), cache.keys.view(), cache.values.view(),
                        threads);
  rotate_heads<T>(where, p, s, cache.queries.view(), cache.keys.view(), false);
  with_head_score(p, [&](const auto& score) {
    attend_heads_on_threads<T>(where, cache.queries.view(), cache.keys.view(), cache.values.view(),
                               cache.heads_out.view(), cache.logsumexp.view(), out.maps, out.scores,
                               s, score, opt, p, threads);
  });
  output_projection_on_threads<T>(cache.heads_out.view(), p, out.out, threads);
}

template <class M, class T>
concept input_matrix = matrix_like<M> && std::same_as<matrix_scalar_of<M>, T>;

/// Fixed extents of attention with projections that agree: X's columns are W_Q's rows, X_kv's
/// W_K's and W_V's, W_Q and W_K have the same columns. A mismatch fails to compile, naming
/// compatible_extents.
template <class Xm, class Xkv, class WQ, class WK, class WV>
concept projections_fit =
    compatible_extents<cols_of<Xm>, rows_of<WQ>> && compatible_extents<cols_of<Xkv>, rows_of<WK>> &&
    compatible_extents<cols_of<Xkv>, rows_of<WV>> && compatible_extents<cols_of<WQ>, cols_of<WK>>;

}  // namespace detail

/// Cross-attention with projections and h heads of the rows of X (queries) over those of X_kv
/// (keys and values), into out.out (and every head's map into out.maps when it has rows); the
/// projections and heads' outputs are kept in `cache` for the backward. With batch = B, X holds
/// B sentences of T rows and X_kv B of n; opt.mask has n entries (every sentence) or B·n (one
/// row per sentence), opt.row_mask B·T × n. Every shape is checked before anything is written
/// (dimension_error naming the buffer), and under throw_error every head before any output;
/// nothing is allocated once the cache has these shapes (the cache is scratch on a throw), nor
/// for a row the tiled kernel leaves (a kept ±inf or NaN score) with up to 1024 keys per
/// sentence; with more, that row allocates as scaled_dot_product_attention's does, and a
/// std::bad_alloc there leaves the maps of the heads before it written (Y is written last).
/// On `threads` threads (std::thread, the calling thread one of them; 0 or 1: none started): the
/// projections' rows in pieces, then every head of every sentence in pieces of query rows (the
/// costliest first under causal), each taken by the next free thread, then Y's rows; the numbers
/// are the one-thread call's, bit for bit; the thread objects are allocated (each step its own:
/// a std::bad_alloc for Y's leaves the maps written), and a thread that cannot be started leaves
/// its share to the others.
template <matrix_like Xm, matrix_like Xkv>
  requires detail::input_matrix<Xkv, matrix_scalar_of<Xm>>
void multi_head_attention(const Xm& X, const Xkv& X_kv,
                          const multi_head_parameters<matrix_scalar_of<Xm>>& params,
                          const multi_head_views<matrix_scalar_of<Xm>>& out,
                          multi_head_cache<matrix_scalar_of<Xm>>& cache, const options& opt = {},
                          std::size_t batch = 1, std::size_t threads = 1) {
  using T = matrix_scalar_of<Xm>;
  detail::multi_head_views_of<T>("attn::multi_head_attention", as_view(X), as_view(X_kv), params,
                                 out, cache, opt, batch, threads);
}

/// Self-attention with projections and h heads: X_kv = X.
template <matrix_like Xm>
void multi_head_attention(const Xm& X, const multi_head_parameters<matrix_scalar_of<Xm>>& params,
                          const multi_head_views<matrix_scalar_of<Xm>>& out,
                          multi_head_cache<matrix_scalar_of<Xm>>& cache, const options& opt = {},
                          std::size_t batch = 1, std::size_t threads = 1) {
  using T = matrix_scalar_of<Xm>;
  const auto x_held = as_view(X);  // (a strided X: its row-major copy, held here)
  const MatrixView<const T> x = x_held;
  detail::multi_head_views_of<T>("attn::multi_head_attention", x, x, params, out, cache, opt,
                                 batch, threads);
}

/// Which of every head's map and scores the returning multi_head_attention gives besides Y and
/// the cache (`{.maps = true, .scores = true}`); neither unless asked.
struct multi_head_outputs {
  bool maps = false;    ///< multi_head_result::maps
  bool scores = false;  ///< multi_head_result::scores
};

/// What the returning multi_head_attention gives: Y and what the backward needs, and the maps and
/// scores when asked (multi_head_outputs; else empty, 0 × 0).
template <real T>
struct multi_head_result {
  Matrix<T> out;              ///< Y
  multi_head_cache<T> cache;  ///< the projections, the heads' outputs, their log-sum-exp
  Matrix<T> maps{};           ///< every head's A_i (h·B·T × n, laid out as multi_head_views::maps)
  Matrix<T> scores{};         ///< every head's S_i = Q_i K_iᵀ·scale (as multi_head_views::scores)
};

namespace detail {

/// The returning multi_head_attention: sizes Y (and, when asked, the maps and scores after the
/// checks), then multi_head_views_of into them.
template <real T>
multi_head_result<T> multi_head_returning(MatrixView<const T> X, MatrixView<const T> X_kv,
                                          const multi_head_parameters<T>& params, const options& opt,
                                          const multi_head_outputs& want, std::size_t batch,
                                          std::size_t threads) {
  const char* where = "attn::multi_head_attention";
  const std::size_t d_out = params.W_O.rows() != 0 ? params.W_O.cols() : concat_columns(params);
  multi_head_result<T> r{Matrix<T>(X.rows(), d_out), {}, {}, {}};
  if (want.maps || want.scores) {  // (the sizes of the checked call: nothing sized from bad ones)
    const head_sizes s = check_heads<T>(where, X, X_kv, params, batch, opt);
    if (want.maps) r.maps = Matrix<T>(s.heads * s.rows, s.n);
    if (want.scores) r.scores = Matrix<T>(s.heads * s.rows, s.n);
  }
  multi_head_views_of<T>(where, X, X_kv, params,
                         multi_head_views<T>{.out = r.out.view(), .maps = r.maps.view(),
                                             .scores = r.scores.view()},
                         r.cache, opt, batch, threads);
  return r;
}

}  // namespace detail

/// Cross-attention with projections and h heads; returns Y and the cache (`threads`: as the
/// form into views).
template <matrix_like Xm, matrix_like Xkv>
  requires detail::input_matrix<Xkv, matrix_scalar_of<Xm>>
[[nodiscard]] multi_head_result<matrix_scalar_of<Xm>> multi_head_attention(
    const Xm& X, const Xkv& X_kv, const multi_head_parameters<matrix_scalar_of<Xm>>& params,
    const options& opt = {}, std::size_t batch = 1, std::size_t threads = 1) {
  using T = matrix_scalar_of<Xm>;
  const auto x_held = as_view(X);  // (a strided X: its row-major copy, held here)
  const auto xkv_held = as_view(X_kv);
  return detail::multi_head_returning<T>(x_held, xkv_held, params, opt, {}, batch, threads);
}

/// As above, and every head's map and scores in the result as `want` asks:
/// `multi_head_attention(X, X_kv, params, opt, {.maps = true, .scores = true}, batch)`.
template <matrix_like Xm, matrix_like Xkv>
  requires detail::input_matrix<Xkv, matrix_scalar_of<Xm>>
[[nodiscard]] multi_head_result<matrix_scalar_of<Xm>> multi_head_attention(
    const Xm& X, const Xkv& X_kv, const multi_head_parameters<matrix_scalar_of<Xm>>& params,
    const options& opt, const multi_head_outputs& want, std::size_t batch = 1,
    std::size_t threads = 1) {
  using T = matrix_scalar_of<Xm>;
  const auto x_held = as_view(X);
  const auto xkv_held = as_view(X_kv);
  return detail::multi_head_returning<T>(x_held, xkv_held, params, opt, want, batch, threads);
}

/// Self-attention with projections and h heads; returns Y and the cache.
template <matrix_like Xm>
[[nodiscard]] multi_head_result<matrix_scalar_of<Xm>> multi_head_attention(
    const Xm& X, const multi_head_parameters<matrix_scalar_of<Xm>>& params, const options& opt = {},
    std::size_t batch = 1, std::size_t threads = 1) {
  using T = matrix_scalar_of<Xm>;
  const auto x_held = as_view(X);
  return detail::multi_head_returning<T>(x_held, x_held, params, opt, {}, batch, threads);
}

/// Self-attention with projections and h heads; returns Y, the cache and, as `want` asks, every
/// head's map and scores: `multi_head_attention(X, params, opt, {.maps = true}, batch)`.
template <matrix_like Xm>
[[nodiscard]] multi_head_result<matrix_scalar_of<Xm>> multi_head_attention(
    const Xm& X, const multi_head_parameters<matrix_scalar_of<Xm>>& params, const options& opt,
    const multi_head_outputs& want, std::size_t batch = 1, std::size_t threads = 1) {
  using T = matrix_scalar_of<Xm>;
  const auto x_held = as_view(X);
  return detail::multi_head_returning<T>(x_held, x_held, params, opt, want, batch, threads);
}

/// Every step of attention with projections, for lessons and for fixed sizes: the projections
/// (with the biases when given: projection_biases), each head's map (head i's in rows
/// [i·T, (i+1)·T)), the heads' outputs side by side and Y.
template <real T, std::size_t TQ, std::size_t N, std::size_t DQK, std::size_t DVH,
          std::size_t DOUT, std::size_t H>
struct projected_attention {
  Matrix<T, TQ, DQK> queries;  ///< Q = X W_Q (+ b_Q)
  Matrix<T, N, DQK> keys;      ///< K = X_kv W_K (+ b_K)
  Matrix<T, N, DVH> values;    ///< V = X_kv W_V (+ b_V)
  Matrix<T, product_extent<H, TQ>, N> maps;  ///< A_i = softmax(β·Q_i K_iᵀ/√d_k, masks)
  Matrix<T, TQ, DVH> heads_out;  ///< Z = [A_1 V_1 … A_h V_h]
  Matrix<T, TQ, DOUT> out;       ///< Y = Z W_O (+ b_O), or Z itself without W_O
};

/// A bias left out (projection_biases::b_O unless given).
struct no_bias {};

/// The biases of self_attention's and cross_attention's fixed forms: b_Q, b_K, b_V and, with
/// W_O only, b_O, each a vector_like of the weights' scalar (Vector, std::array, std::vector,
/// std::span: held by value, so a span holds no copy) or no_bias; written
/// `attn::projection_biases{b_Q, b_K, b_V}` or `{b_Q, b_K, b_V, b_O}`. Q = X W_Q + b_Q, K =
/// X_kv W_K + b_K, V = X_kv W_V + b_V, Y = Z W_O + b_O. Fixed lengths other than the weights'
/// columns do not compile; dynamic ones throw dimension_error ("<where>: size of b_Q is 3 but
/// columns of W_Q is 4"); a bias with no entries is left out, as in multi_head_parameters.
template <class BQ, class BK, class BV, class BO = no_bias>
struct projection_biases {
  BQ b_Q;    ///< h·d_k
  BK b_K;    ///< h·d_k
  BV b_V;    ///< h·d_v
  BO b_O{};  ///< d_out (with W_O only)
};
template <class BQ, class BK, class BV>
projection_biases(BQ, BK, BV) -> projection_biases<BQ, BK, BV>;
template <class BQ, class BK, class BV, class BO>
projection_biases(BQ, BK, BV, BO) -> projection_biases<BQ, BK, BV, BO>;

namespace detail {

template <class B>
inline constexpr bool is_projection_biases = false;
template <class BQ, class BK, class BV, class BO>
inline constexpr bool is_projection_biases<projection_biases<BQ, BK, BV, BO>> = true;

/// A bias of scalars T whose fixed length (if any) is N, or no_bias. A mismatch fails to
/// compile, naming compatible_extents.
template <class B, class T, std::size_t N>
concept bias_fits = std::same_as<B, no_bias> ||
    (vector_like<B> && std::same_as<scalar_of<B>, T> && compatible_extents<extent_of<B>, N>);

/// projection_biases whose b_Q, b_K, b_V fit W_Q, W_K, W_V's columns (fixed lengths).
template <class Bs, class T, class WQ, class WK, class WV>
concept input_biases_fit = is_projection_biases<Bs> && bias_fits<decltype(Bs::b_Q), T, cols_of<WQ>> &&
    bias_fits<decltype(Bs::b_K), T, cols_of<WK>> && bias_fits<decltype(Bs::b_V), T, cols_of<WV>>;

/// A bias as the projections read it: its numbers, or none.
template <class T, class B>
[[nodiscard]] constexpr std::span<const T> bias_span(const B& b) {
  if constexpr (std::same_as<B, no_bias>)
    return {};
  else
    return std::span<const T>(as_span(b));
}

/// The biases of projected_attention_of, borrowed (none unless given).
template <class T>
struct bias_spans {
  std::span<const T> q{}, k{}, v{}, o{};
};

template <class T, class Bs>
[[nodiscard]] constexpr bias_spans<T> spans_of(const Bs& b) {
  return {bias_span<T>(b.b_Q), bias_span<T>(b.b_K), bias_span<T>(b.b_V), bias_span<T>(b.b_O)};
}

/// projected_attention for H heads (fixed sizes: inline, no allocation, constexpr): the steps of
/// multi_head_views_of on the result's own matrices, with the biases b (checked at run time as
/// multi_head_attention checks them).
template <std::size_t H, class Xm, class Xkv, class WQ, class WK, class WV, class WO, class S>
constexpr auto projected_attention_of(const char* where, const Xm& X, const Xkv& X_kv,
                                      const WQ& W_Q, const WK& W_K, const WV& W_V, const WO* W_O,
                                      const options& opt, const S& score,
                                      const bias_spans<matrix_scalar_of<Xm>>& b = {}) {
  using T = matrix_scalar_of<Xm>;
  constexpr std::size_t TQ = rows_of<Xm>, N = rows_of<Xkv>, DQK = cols_of<WQ>, DVH = cols_of<WV>;
  constexpr std::size_t DOUT = [] {
    if constexpr (std::is_same_v<WO, void>)
      return DVH;
    else
      return cols_of<WO>;
  }();
  // (the weights where they lie, in either layout)
  multi_head_parameters<T> p{
      .W_Q = strided_of(W_Q), .W_K = strided_of(W_K), .W_V = strided_of(W_V),
      .b_Q = b.q, .b_K = b.k, .b_V = b.v, .b_O = b.o, .heads = H};
  if constexpr (!std::is_same_v<WO, void>) p.W_O = strided_of(*W_O);
  const auto x_held = as_view(X);
  const auto xkv_held = as_view(X_kv);
  const MatrixView<const T> x = x_held, xkv = xkv_held;
  const head_sizes s = check_heads<T>(where, x, xkv, p, 1, opt);
  projected_attention<T, TQ, N, DQK, DVH, DOUT, H> r{
      zero_matrix<T, TQ, DQK>(s.rows, s.heads * s.dk), zero_matrix<T, N, DQK>(s.n, s.heads * s.dk),
      zero_matrix<T, N, DVH>(s.n, s.heads * s.dv), zero_matrix<T, product_extent<H, TQ>, N>(H * s.rows, s.n),
      zero_matrix<T, TQ, DVH>(s.rows, s.heads * s.dv), zero_matrix<T, TQ, DOUT>(s.rows, s.d_out)};
  Matrix<T, H, TQ> lse = zero_matrix<T, H, TQ>(H, s.tq);
  project<T>(x, xkv, p, r.queries.view(), r.keys.view(), r.values.view());
  attend_heads<T>(where, r.queries.view(), r.keys.view(), r.values.view(), r.heads_out.view(),
                  lse.view(), r.maps.view(), MatrixView<T>{}, s, score, opt, p);
  output_projection<T>(r.heads_out.view(), p, r.out.view());
  return r;
}

}  // namespace detail

/// One head of self-attention, every step returned (the unit's W3): Q = X W_Q, K = X W_K,
/// V = X W_V, A = softmax(β·Q Kᵀ·scale, masks), Y = A V; `score` gives the scale (scaled_dot:
/// 1/√d_k; dot; dot_scaled_by{s}). Fixed sizes that disagree do not compile; fixed sizes allocate
/// nothing and are usable in constant expressions.
template <matrix_like Xm, matrix_like WQ, matrix_like WK, matrix_like WV, class S = scaled_dot_score>
  requires detail::input_matrix<WQ, matrix_scalar_of<Xm>> && detail::input_matrix<WK, matrix_scalar_of<Xm>> &&
      detail::input_matrix<WV, matrix_scalar_of<Xm>> && detail::projections_fit<Xm, Xm, WQ, WK, WV> &&
      dot_product_score<S, matrix_scalar_of<Xm>>
[[nodiscard]] constexpr auto self_attention(const Xm& X, const WQ& W_Q, const WK& W_K, const WV& W_V,
                                            const options& opt = {}, const S& score = S{}) {
  return detail::projected_attention_of<1, Xm, Xm, WQ, WK, WV, void>(
      "attn::self_attention", X, X, W_Q, W_K, W_V, static_cast<const void*>(nullptr), opt, score);
}

/// H heads of self-attention and the output projection, every step returned (the unit's W7):
/// head i on columns [i·d_k, (i+1)·d_k) of Q and K and [i·d_v, (i+1)·d_v) of V, Y = Z W_O.
template <std::size_t H, matrix_like Xm, matrix_like WQ, matrix_like WK, matrix_like WV, matrix_like WO,
          class S = scaled_dot_score>
  requires(H >= 1) && detail::input_matrix<WQ, matrix_scalar_of<Xm>> &&
      detail::input_matrix<WK, matrix_scalar_of<Xm>> && detail::input_matrix<WV, matrix_scalar_of<Xm>> &&
      detail::input_matrix<WO, matrix_scalar_of<Xm>> && detail::projections_fit<Xm, Xm, WQ, WK, WV> &&
      compatible_extents<cols_of<WV>, rows_of<WO>> && dot_product_score<S, matrix_scalar_of<Xm>>
[[nodiscard]] constexpr auto self_attention(const Xm& X, const WQ& W_Q, const WK& W_K, const WV& W_V,
                                            const WO& W_O, const options& opt = {},
                                            const S& score = S{}) {
  return detail::projected_attention_of<H, Xm, Xm, WQ, WK, WV, WO>("attn::self_attention", X, X, W_Q,
                                                                  W_K, W_V, &W_O, opt, score);
}

/// One head of cross-attention, every step returned (the unit's W11): queries from X, keys and
/// values from X_kv; `score` gives the scale as for self_attention.
template <matrix_like Xm, matrix_like Xkv, matrix_like WQ, matrix_like WK, matrix_like WV,
          class S = scaled_dot_score>
  requires detail::input_matrix<Xkv, matrix_scalar_of<Xm>> && detail::input_matrix<WQ, matrix_scalar_of<Xm>> &&
      detail::input_matrix<WK, matrix_scalar_of<Xm>> && detail::input_matrix<WV, matrix_scalar_of<Xm>> &&
      detail::projections_fit<Xm, Xkv, WQ, WK, WV> && dot_product_score<S, matrix_scalar_of<Xm>>
[[nodiscard]] constexpr auto cross_attention(const Xm& X, const Xkv& X_kv, const WQ& W_Q, const WK& W_K,
                                             const WV& W_V, const options& opt = {},
                                             const S& score = S{}) {
  return detail::projected_attention_of<1, Xm, Xkv, WQ, WK, WV, void>(
      "attn::cross_attention", X, X_kv, W_Q, W_K, W_V, static_cast<const void*>(nullptr), opt, score);
}

/// H heads of cross-attention and the output projection, every step returned (the unit's W11
/// with heads): queries from X, keys and values from X_kv, head i on columns [i·d_k, (i+1)·d_k)
/// of Q and K and [i·d_v, (i+1)·d_v) of V, Y = Z W_O. Fixed sizes that disagree do not compile;
/// fixed sizes allocate nothing and are usable in constant expressions.
template <std::size_t H, matrix_like Xm, matrix_like Xkv, matrix_like WQ, matrix_like WK, matrix_like WV,
          matrix_like WO, class S = scaled_dot_score>
  requires(H >= 1) && detail::input_matrix<Xkv, matrix_scalar_of<Xm>> &&
      detail::input_matrix<WQ, matrix_scalar_of<Xm>> && detail::input_matrix<WK, matrix_scalar_of<Xm>> &&
      detail::input_matrix<WV, matrix_scalar_of<Xm>> && detail::input_matrix<WO, matrix_scalar_of<Xm>> &&
      detail::projections_fit<Xm, Xkv, WQ, WK, WV> && compatible_extents<cols_of<WV>, rows_of<WO>> &&
      dot_product_score<S, matrix_scalar_of<Xm>>
[[nodiscard]] constexpr auto cross_attention(const Xm& X, const Xkv& X_kv, const WQ& W_Q, const WK& W_K,
                                             const WV& W_V, const WO& W_O, const options& opt = {},
                                             const S& score = S{}) {
  return detail::projected_attention_of<H, Xm, Xkv, WQ, WK, WV, WO>("attn::cross_attention", X, X_kv, W_Q,
                                                                   W_K, W_V, &W_O, opt, score);
}

/// self_attention with biases (the one-head form; b_O must be no_bias): Q = X W_Q + b_Q,
/// K = X W_K + b_K, V = X W_V + b_V, every step returned as without them:
/// `self_attention(X, W_Q, W_K, W_V, attn::projection_biases{b_Q, b_K, b_V}, opt)`. A fixed bias
/// length other than its weight's columns does not compile; a dynamic one throws
/// dimension_error naming the bias and both sizes. The numbers are multi_head_attention's with
/// these biases, bit for bit (the same kernels).
template <matrix_like Xm, matrix_like WQ, matrix_like WK, matrix_like WV, class Bs, class S = scaled_dot_score>
  requires detail::input_matrix<WQ, matrix_scalar_of<Xm>> && detail::input_matrix<WK, matrix_scalar_of<Xm>> &&
      detail::input_matrix<WV, matrix_scalar_of<Xm>> && detail::projections_fit<Xm, Xm, WQ, WK, WV> &&
      detail::input_biases_fit<Bs, matrix_scalar_of<Xm>, WQ, WK, WV> &&
      std::same_as<decltype(Bs::b_O), no_bias> && dot_product_score<S, matrix_scalar_of<Xm>>
[[nodiscard]] constexpr auto self_attention(const Xm& X, const WQ& W_Q, const WK& W_K, const WV& W_V,
                                            const Bs& biases, const options& opt = {},
                                            const S& score = S{}) {
  return detail::projected_attention_of<1, Xm, Xm, WQ, WK, WV, void>(
      "attn::self_attention", X, X, W_Q, W_K, W_V, static_cast<const void*>(nullptr), opt, score,
      detail::spans_of<matrix_scalar_of<Xm>>(biases));
}

/// self_attention<H> with W_O and biases: Y = [Z_1 … Z_h] W_O + b_O, the projections with
/// b_Q, b_K, b_V (`attn::projection_biases{b_Q, b_K, b_V, b_O}`; checks as above).
template <std::size_t H, matrix_like Xm, matrix_like WQ, matrix_like WK, matrix_like WV, matrix_like WO,
          class Bs, class S = scaled_dot_score>
  requires(H >= 1) && detail::input_matrix<WQ, matrix_scalar_of<Xm>> &&
      detail::input_matrix<WK, matrix_scalar_of<Xm>> && detail::input_matrix<WV, matrix_scalar_of<Xm>> &&
      detail::input_matrix<WO, matrix_scalar_of<Xm>> && detail::projections_fit<Xm, Xm, WQ, WK, WV> &&
      compatible_extents<cols_of<WV>, rows_of<WO>> &&
      detail::input_biases_fit<Bs, matrix_scalar_of<Xm>, WQ, WK, WV> &&
      detail::bias_fits<decltype(Bs::b_O), matrix_scalar_of<Xm>, cols_of<WO>> &&
      dot_product_score<S, matrix_scalar_of<Xm>>
[[nodiscard]] constexpr auto self_attention(const Xm& X, const WQ& W_Q, const WK& W_K, const WV& W_V,
                                            const WO& W_O, const Bs& biases, const options& opt = {},
                                            const S& score = S{}) {
  return detail::projected_attention_of<H, Xm, Xm, WQ, WK, WV, WO>(
      "attn::self_attention", X, X, W_Q, W_K, W_V, &W_O, opt, score,
      detail::spans_of<matrix_scalar_of<Xm>>(biases));
}

/// cross_attention with biases (one head; b_O must be no_bias): Q = X W_Q + b_Q,
/// K = X_kv W_K + b_K, V = X_kv W_V + b_V; checks as self_attention's with biases.
template <matrix_like Xm, matrix_like Xkv, matrix_like WQ, matrix_like WK, matrix_like WV, class Bs,
          class S = scaled_dot_score>
  requires detail::input_matrix<Xkv, matrix_scalar_of<Xm>> && detail::input_matrix<WQ, matrix_scalar_of<Xm>> &&
      detail::input_matrix<WK, matrix_scalar_of<Xm>> && detail::input_matrix<WV, matrix_scalar_of<Xm>> &&
      detail::projections_fit<Xm, Xkv, WQ, WK, WV> &&
      detail::input_biases_fit<Bs, matrix_scalar_of<Xm>, WQ, WK, WV> &&
      std::same_as<decltype(Bs::b_O), no_bias> && dot_product_score<S, matrix_scalar_of<Xm>>
[[nodiscard]] constexpr auto cross_attention(const Xm& X, const Xkv& X_kv, const WQ& W_Q, const WK& W_K,
                                             const WV& W_V, const Bs& biases, const options& opt = {},
                                             const S& score = S{}) {
  return detail::projected_attention_of<1, Xm, Xkv, WQ, WK, WV, void>(
      "attn::cross_attention", X, X_kv, W_Q, W_K, W_V, static_cast<const void*>(nullptr), opt, score,
      detail::spans_of<matrix_scalar_of<Xm>>(biases));
}

/// cross_attention<H> with W_O and biases (`attn::projection_biases{b_Q, b_K, b_V, b_O}`).
template <std::size_t H, matrix_like Xm, matrix_like Xkv, matrix_like WQ, matrix_like WK, matrix_like WV,
          matrix_like WO, class Bs, class S = scaled_dot_score>
  requires(H >= 1) && detail::input_matrix<Xkv, matrix_scalar_of<Xm>> &&
      detail::input_matrix<WQ, matrix_scalar_of<Xm>> && detail::input_matrix<WK, matrix_scalar_of<Xm>> &&
      detail::input_matrix<WV, matrix_scalar_of<Xm>> && detail::input_matrix<WO, matrix_scalar_of<Xm>> &&
      detail::projections_fit<Xm, Xkv, WQ, WK, WV> && compatible_extents<cols_of<WV>, rows_of<WO>> &&
      detail::input_biases_fit<Bs, matrix_scalar_of<Xm>, WQ, WK, WV> &&
      detail::bias_fits<decltype(Bs::b_O), matrix_scalar_of<Xm>, cols_of<WO>> &&
      dot_product_score<S, matrix_scalar_of<Xm>>
[[nodiscard]] constexpr auto cross_attention(const Xm& X, const Xkv& X_kv, const WQ& W_Q, const WK& W_K,
                                             const WV& W_V, const WO& W_O, const Bs& biases,
                                             const options& opt = {}, const S& score = S{}) {
  return detail::projected_attention_of<H, Xm, Xkv, WQ, WK, WV, WO>(
      "attn::cross_attention", X, X_kv, W_Q, W_K, W_V, &W_O, opt, score,
      detail::spans_of<matrix_scalar_of<Xm>>(biases));
}

}  // namespace attn
