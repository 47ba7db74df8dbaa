#pragma once
/// \file attn/sdpa.hpp
/// Attention of T queries over n keys as matrices (PyTorch's scaled_dot_product_attention):
///
///   S = Q Kᵀ·scale (T × n),   A = softmax(β·S, masks) row by row,   Y = A V (T × d_v),
///
/// scale = 1/√d_k (scaled_dot), 1 (dot) or a factor of the caller's (dot_scaled_by{s}). The
/// masks are options': a key mask for every row, a T × n row mask, causal (query t sees keys
/// 0 … t + n − T). Computed in tiles that never store the T × n map unless it is asked for
/// (attention_views::weights, ::scores); the log-sum-exp per row is what the backward
/// (attn/sdpa_backward.hpp) recomputes the map from. Every row follows softmax's rules (masks,
/// ±inf, NaN, the all-masked policy), as align's rows do.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cmath>
#include <concepts>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "attn/attention.hpp"
#include "attn/detail/threads.hpp"
#include "attn/error.hpp"
#include "attn/extent.hpp"
#include "attn/logit_bias.hpp"
#include "attn/mask.hpp"
#include "attn/matrix.hpp"
#include "attn/score.hpp"
#include "attn/softmax.hpp"
#include "attn/vector.hpp"

namespace attn {

/// What the returning scaled_dot_product_attention gives: Y and the log-sum-exp per row.
template <real T, std::size_t TQ = dynamic, std::size_t DV = dynamic>
struct sdpa_result {
  Matrix<T, TQ, DV> out;      ///< Y = A V
  Vector<T, TQ> logsumexp;    ///< L_t, what the backward needs besides Y
};


namespace detail {
/// Fixed extents of Q, K and V that agree: Q's and K's columns as the score asks (equal for the
/// dot family), K's and V's rows. A mismatch fails to compile, naming compatible_extents.
template <class Qm, class Km, class Vm, class S>
concept matrices_fit = score_fits_extents<S, cols_of<Qm>, cols_of<Km>> &&
    compatible_extents<rows_of<Km>, rows_of<Vm>>;
}  // namespace detail

/// Y = softmax(β·Q Kᵀ·scale, masks) V into out.out, and the map's weights, its scores and each
/// row's log-sum-exp into those of `out` that have rows; `score` gives the scale (dot,
/// scaled_dot, dot_scaled_by{s}, or any score: others are computed row by row). Memory beyond
/// the inputs and outputs: O((MR + NB)·d) on the stack. A row that meets a kept ±inf or NaN
/// score or a non-finite context takes attend's exact path, its scratch on the stack for up to
/// 1024 keys (detail::left_row_inline_keys): nothing is allocated. With more keys the first
/// such row allocates (2n numbers unless the weights and the scores are both asked for; n bytes
/// with a row mask or causal), after the rows before it were written: a std::bad_alloc there
/// leaves those rows written, the row itself and the rest as they were. Every check comes
/// before anything is written (dimension_error naming the buffer).
template <matrix_like Qm, matrix_like Km, matrix_like Vm, class S>
  requires detail::matrix_of<Km, matrix_scalar_of<Qm>> && detail::matrix_of<Vm, matrix_scalar_of<Qm>> &&
      Score<S, matrix_scalar_of<Qm>> && detail::matrices_fit<Qm, Km, Vm, S>
constexpr void scaled_dot_product_attention(const Qm& Q, const Km& K, const Vm& V, const S& score,
                                            const attention_views<matrix_scalar_of<Qm>>& out,
                                            const options& opt = {}) {
  using T = matrix_scalar_of<Qm>;
  detail::many_queries_views<T>("attn::scaled_dot_product_attention", as_view(Q), as_view(K), as_view(V),
                                score, out, opt);
}

namespace detail {

/// many_queries_rows_into's rows on `threads` threads (0 or 1: at once): pieces of
/// rows_per_piece rows, the last first (piece_rows), split over the threads by
/// split_over_threads.
template <class T>
struct rows_on_threads {
  std::size_t threads = 1;
  template <class F>
  void operator()(std::size_t tq, F&& fn) const {
    const std::size_t used = usable_threads(threads);
    if (used <= 1) {
      fn(std::size_t{0}, tq);
      return;
    }
    const std::size_t piece = rows_per_piece<T>(tq, used);
    const std::size_t pieces = (tq + piece - 1) / piece;
    split_over_threads(pieces, used, [&](std::size_t k) {
      const row_range r = piece_rows(k, piece, pieces, tq);
      fn(r.begin, r.end);
    });
  }
};

}  // namespace detail

/// As above, the query rows split over `threads` threads (std::thread, the calling thread one of
/// them; 0 or 1: none started): pieces of rows, the costliest first (causal), each taken by the
/// next free thread. The numbers are the one-thread call's, bit for bit. Allocates the thread
/// objects (and, as above, what a row that takes the exact path needs); a thread that cannot be
/// started leaves its rows to the others.
template <matrix_like Qm, matrix_like Km, matrix_like Vm, class S>
  requires detail::matrix_of<Km, matrix_scalar_of<Qm>> && detail::matrix_of<Vm, matrix_scalar_of<Qm>> &&
      Score<S, matrix_scalar_of<Qm>> && detail::matrices_fit<Qm, Km, Vm, S>
void scaled_dot_product_attention(const Qm& Q, const Km& K, const Vm& V, const S& score,
                                  const attention_views<matrix_scalar_of<Qm>>& out,
                                  const options& opt, std::size_t threads) {
  using T = matrix_scalar_of<Qm>;
  detail::many_queries_views<T>("attn::scaled_dot_product_attention", as_view(Q), as_view(K), as_view(V),
                                score, out, opt, detail::rows_on_threads<T>{threads});
}

namespace detail {
/// The bias checked against T queries over n keys (logit_bias.hpp), and refused (overlap_error)
/// where its matrix meets an output.
template <real T>
[[nodiscard]] tile_bias<T> checked_bias(const char* where, const logit_bias<T>& bias,
                                        std::size_t tq, std::size_t n,
                                        std::initializer_list<named_region<T>> outputs,
                                        const options& opt) {
  const tile_bias<T> b = tile_bias_of(where, bias, tq, n);
  for (const named_region<T>& o : outputs)
    check_buffers_apart<T>(where, {o}, {{"the bias", region_of(bias.matrix)}}, opt);
  return b;
}
}  // namespace detail

/// As above with an additive bias on the logits (attn/logit_bias.hpp): Y = softmax(β·S + B + A,
/// masks) V, B the bias's T × n matrix, A ALiBi's −m·(p_t − j); L_t = log Σ_j exp(z_tj) over the
/// keys row t may see; out.scores still S. Inside the tiles, no T × n of A stored; on `threads`
/// threads as above (0 or 1: none started). Checks as above, and the bias's (its shape, a finite
/// slope, T ≤ n with a slope, its matrix apart from the outputs) before anything is written.
template <matrix_like Qm, matrix_like Km, matrix_like Vm, class S>
  requires detail::matrix_of<Km, matrix_scalar_of<Qm>> && detail::matrix_of<Vm, matrix_scalar_of<Qm>> &&
      Score<S, matrix_scalar_of<Qm>> && detail::matrices_fit<Qm, Km, Vm, S>
void scaled_dot_product_attention(const Qm& Q, const Km& K, const Vm& V, const S& score,
                                  const attention_views<matrix_scalar_of<Qm>>& out,
                                  const options& opt, const logit_bias<matrix_scalar_of<Qm>>& bias,
                                  std::size_t threads = 1) {
  using T = matrix_scalar_of<Qm>;
  const char* where = "attn::scaled_dot_product_attention";
  const auto qv = as_view(Q);
  const auto kv = as_view(K);
  const detail::tile_bias<T> b = detail::checked_bias<T>(
      where, bias, qv.rows(), kv.rows(),
      {{"the output", detail::region_of(out.out)},
       {"the weights", detail::region_of(out.weights)},
       {"the scores", detail::region_of(out.scores)},
       {"the log-sum-exp", detail::region_of(out.logsumexp)}},
      opt);
  detail::many_queries_views<T>(where, qv, kv, as_view(V), score, out, opt,
                                detail::rows_on_threads<T>{threads}, b);
}

/// As above with scale = 1/√d_k (scaled_dot).
template <matrix_like Qm, matrix_like Km, matrix_like Vm>
  requires detail::matrix_of<Km, matrix_scalar_of<Qm>> && detail::matrix_of<Vm, matrix_scalar_of<Qm>> &&
      detail::matrices_fit<Qm, Km, Vm, scaled_dot_score>
constexpr void scaled_dot_product_attention(const Qm& Q, const Km& K, const Vm& V,
                                            const attention_views<matrix_scalar_of<Qm>>& out,
                                            const options& opt = {}) {
  scaled_dot_product_attention(Q, K, V, scaled_dot, out, opt);
}

/// Returns Y = softmax(β·Q Kᵀ·scale, masks) V and the log-sum-exp of each row, `score` before
/// the options as in every other form (fixed sizes: inline, no allocation, usable in constant
/// expressions).
template <matrix_like Qm, matrix_like Km, matrix_like Vm, class S>
  requires detail::matrix_of<Km, matrix_scalar_of<Qm>> && detail::matrix_of<Vm, matrix_scalar_of<Qm>> &&
      Score<S, matrix_scalar_of<Qm>> && detail::matrices_fit<Qm, Km, Vm, S>
[[nodiscard]] constexpr auto scaled_dot_product_attention(const Qm& Q, const Km& K, const Vm& V,
                                                          const S& score, const options& opt = {}) {
  return scaled_dot_product_attention(Q, K, V, opt, score);
}

/// As above, the options first and the score last (scaled_dot unless given): the form attn
/// had first, kept for the code that calls it.
template <matrix_like Qm, matrix_like Km, matrix_like Vm, class S = scaled_dot_score>
  requires detail::matrix_of<Km, matrix_scalar_of<Qm>> && detail::matrix_of<Vm, matrix_scalar_of<Qm>> &&
      Score<S, matrix_scalar_of<Qm>> && detail::matrices_fit<Qm, Km, Vm, S>
[[nodiscard]] constexpr auto scaled_dot_product_attention(const Qm& Q, const Km& K, const Vm& V,
                                                          const options& opt = {},
                                                          const S& score = S{}) {
  using T = matrix_scalar_of<Qm>;
  constexpr std::size_t TQ = rows_of<Qm>, DV = cols_of<Vm>;
  const auto qv = as_view(Q);
  const auto vv = as_view(V);
  sdpa_result<T, TQ, DV> r{detail::zero_matrix<T, TQ, DV>(qv.rows(), vv.cols()),
                           detail::zero_vector<T, TQ>(qv.rows())};
  detail::many_queries_views<T>("attn::scaled_dot_product_attention", qv, as_view(K), vv, score,
                        attention_views<T>{.out = r.out.view(), .logsumexp = std::span<T>(r.logsumexp)},
                        opt);
  return r;
}

}  // namespace attn
