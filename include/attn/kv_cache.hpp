#pragma once
/// \file attn/kv_cache.hpp
/// Decoding with a key/value cache: the keys and values of the positions already seen, kept per
/// sequence of a batch in storage allocated once, so that each new position costs one row of
/// projections and its attention over the n cached keys (O(n·d) per head), not a whole forward:
///
///   K_b[L_b … L_b + t) = X_new W_K + b_K,   V_b[…] = X_new W_V + b_V      (appended)
///   Z_i = softmax(β·Q_i K_gᵀ·scale, causal with the offset L_b) V_g        (g = i / (h / h_kv))
///   Y = [Z_1 … Z_h] W_O + b_O
///
/// for the t new rows of each sequence b, which held L_b rows before the call. The rows a call
/// returns equal those of multi_head_attention over the whole sequence (causal), row for row
/// (docs/heads.md, "Decoding with a cache").

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attn/attention.hpp"
#include "attn/error.hpp"
#include "attn/heads.hpp"
#include "attn/matrix.hpp"
#include "attn/softmax.hpp"

namespace attn {

template <real T>
class kv_cache;

namespace detail {
template <real T>
struct kv_access;

/// The cached calls' throws, out of line: their messages are built here (GCC 12 inlining a
/// std::string built from a literal at -O2 warns -Warray-bounds where none is out of bounds).
enum class kv_error { sequence, truncate, full, rows, mask, divide, bias };
[[noreturn]] ATTN_NOINLINE inline void throw_kv_error(kv_error kind, const char* where, std::size_t a,
                                                      std::size_t b = 0, std::size_t c = 0,
                                                      std::size_t d = 0) {
  const std::string w(where);
  const auto n = [](std::size_t x) { return std::to_string(x); };
  switch (kind) {
    case kv_error::sequence:
      raise<dimension_error>(w + ": sequence " + n(a) + " is out of range for " + n(b) + " sequences");
    case kv_error::truncate:
      raise<dimension_error>(w + ": sequence " + n(a) + " holds " + n(b) + " rows, not " + n(c));
    case kv_error::full:
      raise<dimension_error>(w + ": the cache is full: sequence " + n(a) + " holds " + n(b) + " of " +
                             n(c) + " rows, and " + n(d) + " more do not fit");
    case kv_error::rows:
      raise<dimension_error>(w + ": " + n(a) + " new rows are not " + n(b) +
                             " sequences' rows of equal number");
    case kv_error::mask:
      raise<dimension_error>(w + ": a cached call takes no key or row mask (the cache's lengths say "
                                 "which keys each sequence has; causal gives the offset)");
    case kv_error::bias:
      raise<dimension_error>(w + ": a cached call takes no bias matrix (its keys grow with each call; "
                                 "multi_head_parameters::alibi gives ALiBi with the cache's positions)");
    case kv_error::divide:
      break;
  }
  raise<dimension_error>(w + ": the cache's " + n(a) + " key/value heads do not divide the " + n(b) +
                         " heads");
}

/// dimension_error "<where>: sequence b is out of range for B sequences" unless b < B.
inline void check_sequence(const char* where, std::size_t b, std::size_t batch) {
  if (b >= batch) throw_kv_error(kv_error::sequence, where, b, batch);
}
}  // namespace detail

/// The keys and values of up to `capacity` positions of each of `batch` sequences, for h_kv
/// key/value heads of d_k and d_v numbers (row r of sequence b: keys(b).row(r), its head g in
/// columns [g·d_k, (g+1)·d_k)). Allocated once, by the constructor; the calls that fill it
/// allocate nothing more once their number of new rows has been seen (their scratch is kept).
template <real T>
class kv_cache {
public:
  kv_cache() = default;  ///< no storage: every cached call refuses it (its batch is empty)
  /// Storage for batch × capacity rows of h_kv·d_k keys and h_kv·d_v values, every sequence
  /// empty. dimension_error when a size is 0.
  kv_cache(std::size_t batch, std::size_t capacity, std::size_t kv_heads, std::size_t dk,
           std::size_t dv)
      : batch_(batch), capacity_(capacity), kv_heads_(kv_heads), dk_(dk), dv_(dv) {
    const char* where = "attn::kv_cache";
    detail::check_nonempty(where, "the batch", batch);
    detail::check_nonempty(where, "the capacity", capacity);
    detail::check_nonempty(where, "the key/value heads", kv_heads);
    detail::check_nonempty(where, "a head's key size", dk);
    detail::check_nonempty(where, "a head's value size", dv);
    keys_ = Matrix<T>(detail::checked_numbers(where, batch, capacity, detail::max_numbers<T>),
                      kv_heads * dk);
    values_ = Matrix<T>(batch * capacity, kv_heads * dv);
    lengths_.assign(batch, 0);
  }

  [[nodiscard]] std::size_t batch() const noexcept { return batch_; }          ///< B
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }    ///< rows per sequence
  [[nodiscard]] std::size_t kv_heads() const noexcept { return kv_heads_; }    ///< h_kv
  [[nodiscard]] std::size_t key_size() const noexcept { return dk_; }          ///< d_k per head
  [[nodiscard]] std::size_t value_size() const noexcept { return dv_; }        ///< d_v per head
  /// The rows sequence b holds.
  [[nodiscard]] std::size_t length(std::size_t b) const {
    detail::check_sequence("attn::kv_cache::length", b, batch_);
    return lengths_[b];
  }
  /// Sequence b's keys so far: length(b) × h_kv·d_k.
  [[nodiscard]] MatrixView<const T> keys(std::size_t b) const {
    detail::check_sequence("attn::kv_cache::keys", b, batch_);
    return detail::block_of(keys_.view(), b * capacity_, lengths_[b], 0, keys_.cols());
  }
  /// Sequence b's values so far: length(b) × h_kv·d_v.
  [[nodiscard]] MatrixView<const T> values(std::size_t b) const {
    detail::check_sequence("attn::kv_cache::values", b, batch_);
    return detail::block_of(values_.view(), b * capacity_, lengths_[b], 0, values_.cols());
  }
  /// Keeps the first `length` rows of sequence b and forgets the rest (a rejected draft, a beam
  /// cut back); dimension_error when b is not a sequence or it holds fewer rows.
  void truncate(std::size_t b, std::size_t length) {
    detail::check_sequence("attn::kv_cache::truncate", b, batch_);
    if (length > lengths_[b])
      detail::throw_kv_error(detail::kv_error::truncate, "attn::kv_cache::truncate", b, lengths_[b],
                             length);
    lengths_[b] = length;
  }
  /// Empties every sequence (the storage is kept).
  void clear() noexcept { lengths_.assign(lengths_.size(), 0); }
  /// Empties sequence b (a finished sequence whose slot a new one takes).
  void clear(std::size_t b) {
    detail::check_sequence("attn::kv_cache::clear", b, batch_);
    lengths_[b] = 0;
  }

private:
  template <real U>
  friend struct detail::kv_access;
  std::size_t batch_ = 0, capacity_ = 0, kv_heads_ = 0, dk_ = 0, dv_ = 0;
  Matrix<T> keys_, values_;         ///< B·capacity × h_kv·d_k, × h_kv·d_v
  std::vector<std::size_t> lengths_;  ///< rows held, per sequence
  Matrix<T> queries_, heads_out_;   ///< the calls' scratch: Q and Z of the new rows
};

namespace detail {

/// What the cached calls reach inside a kv_cache.
template <real T>
struct kv_access {
  static Matrix<T>& keys(kv_cache<T>& c) noexcept { return c.keys_; }
  static Matrix<T>& values(kv_cache<T>& c) noexcept { return c.values_; }
  static std::vector<std::size_t>& lengths(kv_cache<T>& c) noexcept { return c.lengths_; }
  static Matrix<T>& queries(kv_cache<T>& c) noexcept { return c.queries_; }
  static Matrix<T>& heads_out(kv_cache<T>& c) noexcept { return c.heads_out_; }
};

/// The sequences a cached call reads and writes: all of them (first = 0, count = B), or one.
struct kv_sequences {
  std::size_t first, count;
};

/// Checks a cached call before anything is written: the cache's shapes against h_kv, d_k, d_v,
/// the options (no key or row mask: the lengths say which keys a sequence has), and that t new
/// rows fit every sequence.
template <real T>
void check_cache_room(const char* where, const kv_cache<T>& cache, kv_sequences seq, std::size_t t,
                  std::size_t kv_heads, std::size_t dk, std::size_t dv, const options& opt) {
  check_equal(where, "the cache's key/value heads", cache.kv_heads(), "key/value heads", kv_heads);
  check_equal(where, "the cache's key size", cache.key_size(), "a head's key size", dk);
  check_equal(where, "the cache's value size", cache.value_size(), "a head's value size", dv);
  if (!opt.mask.empty() || !opt.row_mask.empty())
    throw_kv_error(kv_error::mask, where, 0);
  check_beta<T>(where, opt);
  for (std::size_t b = seq.first; b < seq.first + seq.count; ++b)
    if (cache.length(b) + t > cache.capacity())
      throw_kv_error(kv_error::full, where, b, cache.length(b), cache.capacity(), t);
}

/// The heads of the new rows: query head i of sequence b (rows [k·t, (k+1)·t) of Q and Z, k its
/// place among the sequences) over the first L_b + t rows of key/value head g, into Z, with
/// ALiBi's slope of head i when `alibi` (the new rows at positions L_b … L_b + t − 1). Every
/// check has been made and the new rows' keys and values appended.
template <real T, class S>
void cached_heads(const char* where, kv_cache<T>& cache, kv_sequences seq, std::size_t t,
                  MatrixView<const T> Q, std::size_t heads, const S& score, MatrixView<T> Z,
                  const options& opt, bool alibi = false) {
  const std::size_t kvh = cache.kv_heads(), group = heads / kvh, dk = cache.key_size(),
                    dv = cache.value_size(), cap = cache.capacity();
  const MatrixView<const T> K = kv_access<T>::keys(cache).view(), V = kv_access<T>::values(cache).view();
  const std::vector<std::size_t>& lengths = kv_access<T>::lengths(cache);
  for (std::size_t k = 0; k < seq.count; ++k) {
    const std::size_t b = seq.first + k, n = lengths[b] + t;
    for (std::size_t i = 0; i < heads; ++i) {
      const std::size_t g = i / group;
      tile_bias<T> bias;
      if (alibi) {
        bias.slope = alibi_slope<T>(i, heads);
        bias.offset = lengths[b];
      }
      many_queries_rows<T>(where, block_of(Q, k * t, t, i * dk, dk), block_of(K, b * cap, n, g * dk, dk),
                           block_of(V, b * cap, n, g * dv, dv), score,
                           attention_views<T>{.out = block_of(Z, k * t, t, i * dv, dv)}, opt,
                           rows_at_once{}, bias);
    }
  }
}

/// multi_head_attention_cached on views (see there).
template <real T>
void cached_views_of(const char* where, MatrixView<const T> X, const multi_head_parameters<T>& p,
                     kv_cache<T>& cache, kv_sequences seq, MatrixView<T> Y, const options& opt) {
  check_nonempty(where, "the cache (its batch)", cache.batch());
  check_nonempty(where, "the new rows", X.rows());
  check_sequence(where, seq.first + seq.count - 1, cache.batch());
  if (X.rows() % seq.count != 0)
    throw_kv_error(kv_error::rows, where, X.rows(), seq.count);
  const std::size_t t = X.rows() / seq.count;
  if (p.bias.rows() != 0) throw_kv_error(kv_error::bias, where, 0);
  const head_sizes s = check_heads<T>(where, X, X, p, seq.count, options{.beta = opt.beta});
  check_shape(where, "Y", Y.rows(), Y.cols(), X.rows(), s.d_out);
  check_cache_room<T>(where, cache, seq, t, s.kv_heads, s.dk, s.dv, opt);
  named_regions<T, 11> inputs;
  add_head_inputs(inputs, X, X, p);
  named_regions<T, 5> outputs;
  outputs.add("Y", region_of(Y));
  outputs.add("the cache", region_of(kv_access<T>::keys(cache).view()));
  outputs.add("the cache", region_of(kv_access<T>::values(cache).view()));
  check_buffers_apart<T>(where, outputs.span(), inputs.span(), opt);
  Matrix<T>& Q = kv_access<T>::queries(cache);
  Matrix<T>& Z = kv_access<T>::heads_out(cache);
  ensure_shape(Q, X.rows(), s.heads * s.dk);
  ensure_shape(Z, X.rows(), s.heads * s.dv);
  reserve_head_products<T>(s);
  // nothing can fail from here: append the new rows' keys and values, then attend
  std::vector<std::size_t>& lengths = kv_access<T>::lengths(cache);
  const std::size_t cap = cache.capacity();
  project_into<T>(X, p.W_Q, p.b_Q, Q.view());
  for (std::size_t k = 0; k < seq.count; ++k) {
    const std::size_t b = seq.first + k;
    const MatrixView<const T> x = block_of(X, k * t, t, 0, X.cols());
    const MatrixView<T> keys = block_of(kv_access<T>::keys(cache).view(), b * cap + lengths[b], t, 0, s.kv_heads * s.dk);
    project_into<T>(x, p.W_K, p.b_K, keys);
    project_into<T>(x, p.W_V, p.b_V, block_of(kv_access<T>::values(cache).view(), b * cap + lengths[b], t, 0, s.kv_heads * s.dv));
    if (p.positions) {  // the new rows sit at positions length … length + t − 1 of their sequence
      rotate_pairs<T>(where, block_of(Q.view(), k * t, t, 0, Q.cols()), s.heads, lengths[b], 1, *p.positions, false);
      rotate_pairs<T>(where, keys, s.kv_heads, lengths[b], 1, *p.positions, false);
    }
  }
  with_head_score(p, [&](const auto& score) {
    cached_heads<T>(where, cache, seq, t, Q.view(), s.heads, score, Z.view(), opt, p.alibi);
  });
  for (std::size_t k = 0; k < seq.count; ++k) lengths[seq.first + k] += t;
  output_projection<T>(Z.view(), p, Y);
}

/// cached_attention on views (see there).
template <real T, class S>
void cached_attention_of(const char* where, MatrixView<const T> Q, MatrixView<const T> K,
                         MatrixView<const T> V, kv_cache<T>& cache, MatrixView<T> Z,
                         std::size_t heads, const S& score, const options& opt) {
  const std::size_t B = cache.batch();
  check_nonempty(where, "the cache (its batch)", B);
  check_nonempty(where, "the number of heads", heads);
  check_nonempty(where, "the new rows", Q.rows());
  if (Q.rows() % B != 0)
    throw_kv_error(kv_error::rows, where, Q.rows(), B);
  const std::size_t t = Q.rows() / B, kvh = cache.kv_heads(), dk = cache.key_size(),
                    dv = cache.value_size();
  if (heads % kvh != 0)
    throw_kv_error(kv_error::divide, where, kvh, heads);
  check_shape(where, "the new queries", Q.rows(), Q.cols(), B * t, heads * dk);
  check_shape(where, "the new keys", K.rows(), K.cols(), B * t, kvh * dk);
  check_shape(where, "the new values", V.rows(), V.cols(), B * t, kvh * dv);
  check_shape(where, "the heads' outputs", Z.rows(), Z.cols(), B * t, heads * dv);
  check_score<T>(where, score, dk, dk);
  check_cache_room<T>(where, cache, {0, B}, t, kvh, dk, dv, opt);
  named_regions<T, 3> outputs;
  outputs.add("the heads' outputs", region_of(Z));
  outputs.add("the cache", region_of(kv_access<T>::keys(cache).view()));
  outputs.add("the cache", region_of(kv_access<T>::values(cache).view()));
  named_regions<T, 3> inputs;
  inputs.add("the new queries", region_of(Q));
  inputs.add("the new keys", region_of(K));
  inputs.add("the new values", region_of(V));
  check_buffers_apart<T>(where, outputs.span(), inputs.span(), opt);
  std::vector<std::size_t>& lengths = kv_access<T>::lengths(cache);
  const std::size_t cap = cache.capacity();
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t r = 0; r < t; ++r) {
      copy_numbers(K.row(b * t + r).data(), kv_access<T>::keys(cache).row(b * cap + lengths[b] + r).data(), kvh * dk);
      copy_numbers(V.row(b * t + r).data(), kv_access<T>::values(cache).row(b * cap + lengths[b] + r).data(), kvh * dv);
    }
  cached_heads<T>(where, cache, {0, B}, t, Q, heads, score, Z, opt);
  for (std::size_t b = 0; b < B; ++b) lengths[b] += t;
}

}  // namespace detail

/// Attention of already projected rows over a cache: Q_new (B·t × h·d_k), K_new (B·t × h_kv·d_k)
/// and V_new (B·t × h_kv·d_v) hold t new rows of every sequence; K_new and V_new are appended to
/// the cache and each query head i attends over key/value head i / (h / h_kv) of every row its
/// sequence then holds (causal with the offset when opt.causal), into Z (B·t × h·d_v, the heads
/// side by side); `score` gives the scale (scaled_dot: 1/√d_k, dot, dot_scaled_by{s}). Checks and
/// costs as multi_head_attention_cached's; nothing is allocated.
template <matrix_like Qm, matrix_like Km, matrix_like Vm, matrix_like Zm, class S = scaled_dot_score>
  requires detail::input_matrix<Km, matrix_scalar_of<Qm>> && detail::input_matrix<Vm, matrix_scalar_of<Qm>> &&
      mutable_matrix_like<Zm> && std::same_as<matrix_scalar_of<Zm>, matrix_scalar_of<Qm>> &&
      dot_product_score<S, matrix_scalar_of<Qm>>
void cached_attention(const Qm& Q_new, const Km& K_new, const Vm& V_new,
                      kv_cache<matrix_scalar_of<Qm>>& cache, Zm&& Z, std::size_t heads,
                      const options& opt = {.causal = true}, const S& score = S{}) {
  using T = matrix_scalar_of<Qm>;
  const auto q = as_view(Q_new);
  const auto k = as_view(K_new);
  const auto v = as_view(V_new);
  detail::cached_attention_of<T>("attn::cached_attention", q, k, v, cache, as_mutable_view(Z), heads,
                                 score, opt);
}

/// Self-attention with projections over a cache, for decoding: X_new holds t new rows of every
/// sequence of the cache (B·t rows, sequence b's in rows [b·t, (b+1)·t)); their keys and values
/// (X_new W_K + b_K, X_new W_V + b_V) are appended to each sequence's, and their queries attend
/// over every row the sequence holds then (causal when opt.causal: new row r of sequence b sees
/// its first L_b + r + 1 rows), h heads over the cache's h_kv (params.kv_heads), into Y (B·t ×
/// d_out). The rows equal multi_head_attention's over the whole sequences (causal), row for row.
/// Checked before anything is written, the cache's lengths included: dimension_error naming
/// the buffer, and "the cache is full" naming the sequence when t rows do not fit; no key or
/// row mask (the lengths say which keys a sequence has). Costs O((L_b + t)·d) per head and new
/// row; allocates nothing once the cache has seen this t.
template <matrix_like Xm, matrix_like Ym>
  requires mutable_matrix_like<Ym> &&
      std::same_as<matrix_scalar_of<Ym>, matrix_scalar_of<Xm>>
void multi_head_attention_cached(const Xm& X_new, const multi_head_parameters<matrix_scalar_of<Xm>>& params,
                                 kv_cache<matrix_scalar_of<Xm>>& cache, Ym&& Y,
                                 const options& opt = {.causal = true}) {
  using T = matrix_scalar_of<Xm>;
  const auto x_held = as_view(X_new);  // (a strided X: its row-major copy, held here)
  detail::cached_views_of<T>("attn::multi_head_attention_cached", x_held, params, cache,
                             {0, cache.batch()}, as_mutable_view(Y), opt);
}

/// As above for sequence b of the cache alone (its prompt, say, when the sequences' prompts
/// differ in length): X_new holds its t new rows, Y their outputs.
template <matrix_like Xm, matrix_like Ym>
  requires mutable_matrix_like<Ym> &&
      std::same_as<matrix_scalar_of<Ym>, matrix_scalar_of<Xm>>
void multi_head_attention_cached(const Xm& X_new, const multi_head_parameters<matrix_scalar_of<Xm>>& params,
                                 kv_cache<matrix_scalar_of<Xm>>& cache, std::size_t b, Ym&& Y,
                                 const options& opt = {.causal = true}) {
  using T = matrix_scalar_of<Xm>;
  const auto x_held = as_view(X_new);
  detail::cached_views_of<T>("attn::multi_head_attention_cached", x_held, params, cache, {b, 1},
                             as_mutable_view(Y), opt);
}

}  // namespace attn
