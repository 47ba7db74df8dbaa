#pragma once
/// \file attn/sdpa_backward.hpp
/// Backward through scaled_dot_product_attention (attn/sdpa.hpp): from dY = ∂L/∂Y and what the
/// forward saved (Y and each row's log-sum-exp L_t), the map recomputed tile by tile,
///
///   P_tj = exp(β s_tj − L_t),   dS_tj = β P_tj (dY_t·V_j − dY_t·Y_t) = ∂L/∂S_tj,
///   ∂L/∂V = Pᵀ dY,   ∂L/∂Q = scale·dS K,   ∂L/∂K = scale·dSᵀ Q,
///
/// 0 for every masked key, whatever it holds. Rows whose weights do not move with the scores (all
/// masked, a kept +inf) have no score terms; under `uniform` an all-masked row gives ∂L/∂V_j =
/// dY_t/n; a NaN row gives NaN — the rules of attn/backward.hpp, row by row.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "attn/backward.hpp"
#include "attn/detail/threads.hpp"
#include "attn/detail/tile.hpp"
#include "attn/logit_bias.hpp"
#include "attn/sdpa.hpp"

namespace attn {

/// What scaled_dot_product_attention saved for the backward: its output Y and log-sum-exp L.
/// Both empty: the backward runs the forward itself first (allocating Y and L).
template <real T>
struct saved_attention {
  MatrixView<const T> out{};       ///< Y (T × d_v)
  std::span<const T> logsumexp{};  ///< L (T)
};

/// Where the backward writes ∂L/∂Q, ∂L/∂K, ∂L/∂V and ∂L/∂S: views of the caller's memory, each
/// left out when it has no rows, overwritten or (accumulate) added to. S is the forward's
/// attention_views::scores, scale·Q Kᵀ before β and the masks: ∂L/∂S_tj = β P_tj (dY_t·V_j − D_t)
/// with D_t = dY_t·Y_t, the dS the key and query gradients are made of (before the scale).
/// A masked entry gets exactly 0; a row whose weights do not move (a kept +inf, no key kept
/// under zeros or uniform) 0; a NaN row, and a row with no key kept under nan, NaN.
template <real T>
struct attention_gradients {
  MatrixView<T> queries{};  ///< ∂L/∂Q (T × d_k)
  MatrixView<T> keys{};     ///< ∂L/∂K (n × d_k)
  MatrixView<T> values{};   ///< ∂L/∂V (n × d_v)
  bool accumulate = false;  ///< add to what the views hold
  MatrixView<T> scores{};   ///< ∂L/∂S (T × n); after accumulate, so that {dQ, dK, dV, accumulate} still reads
  /// ∂L/∂Z (T × n), Z = β·S + bias the logits (attn/logit_bias.hpp): the gradient of an additive
  /// bias, P_tj (dY_t·V_j − D_t), whether or not a bias was given; masked entries 0.
  MatrixView<T> bias{};
};

/// What the returning backward gives.
template <real T, std::size_t TQ = dynamic, std::size_t N = dynamic, std::size_t DK = dynamic,
          std::size_t DV = dynamic>
struct attention_gradients_result {
  Matrix<T, TQ, DK> queries;  ///< ∂L/∂Q
  Matrix<T, N, DK> keys;      ///< ∂L/∂K
  Matrix<T, N, DV> values;    ///< ∂L/∂V
};

namespace detail {

/// Row t's gradients by the rules of one query (attn::backward with row t's mask), added to
/// ∂L/∂K, ∂L/∂V and row t of ∂L/∂Q, allocating nothing: the caller's scratch (sdpa_row_scratch,
/// made before anything is written) holds ∂L/∂s and the u_j backward needs, and stands in for
/// ∂L/∂q_t and ∂L/∂K when they are left out (backward needs a place for them).
template <real T>
struct sdpa_row_scratch {
  std::vector<T> numbers;  ///< ∂L/∂s, then u_j (2n); ∂L/∂q_t when ∂L/∂Q is left out (d_k)
  Matrix<T> keys;          ///< ∂L/∂K when it is left out (n × d_k), added to and not read
};

template <real T, class S>
void sdpa_backward_exact_row(const char* where, std::size_t t, MatrixView<const T> Q,
                             MatrixView<const T> K, MatrixView<const T> V, const S& score,
                             MatrixView<const T> dY, const attention_gradients<T>& g,
                             const options& row, sdpa_row_scratch<T>& scratch) {
  const std::size_t n = K.rows(), dk = K.cols();
  T* const numbers = scratch.numbers.data();
  const std::span<T> dq(numbers + 2 * n, g.queries.rows() != 0 ? 0 : dk);
  fill(dq.data(), dq.size(), T(0));
  const gradient_sink<T, no_parameters> sink{
      std::span<T>(numbers, n),
      g.queries.rows() != 0 ? g.queries.row(t) : dq,
      g.keys.rows() != 0 ? g.keys : scratch.keys.view(),
      g.values,
      nullptr,
      false,
      true};
  backward_views_of<T, dynamic, dynamic, dynamic>(where, score, Q.row(t), K, V, nullptr, dY.row(t),
                                                  sink, row, std::span<T>(numbers + n, n));
}

/// sdpa_backward_exact_row for a row with a bias on its logits: the scores s (score_all), the
/// logits z = β·s + b (biased_logits), the weights α = softmax(z) by softmax's rules, then
/// ∂L/∂V_j += α_j dY_t, ∂L/∂s_j = β α_j (u_j − ū) and the score's gradients (backward_any_score:
/// ∂s/∂z = β), and ∂L/∂z_j = α_j (u_j − ū) into gz (n numbers, or null). The scratch as there,
/// with ∂L/∂s in its first n numbers.
template <real T, class S>
void sdpa_backward_biased_row(const char* where, std::size_t t, MatrixView<const T> Q,
                              MatrixView<const T> K, MatrixView<const T> V, const S& score,
                              MatrixView<const T> dY, const attention_gradients<T>& g,
                              const options& row, const tile_bias<T>& bias, T* gz,
                              sdpa_row_scratch<T>& scratch) {
  const std::size_t n = K.rows(), dk = K.cols(), dv = V.cols();
  T* const a = scratch.numbers.data();  // s, z, α, then ∂L/∂s
  const std::span<T> dq(a + 2 * n, g.queries.rows() != 0 ? 0 : dk);
  fill(dq.data(), dq.size(), T(0));
  score_all(score, Q.row(t), K, std::span<T>(a, n));
  const T beta = static_cast<T>(row.beta);
  biased_logits(bias, t, 0, n, beta, a, a);
  options logits = borrowing(row);
  logits.beta = 1;
  const bool flows = weights_move(softmax_row_kind(a, n, logits));
  softmax_row(where, a, a, n, n, logits);
  const T* const dy = dY.row(t).data();
  const auto u = [&](std::size_t j) { return sum_of_products(dy, V.row(j).data(), dv); };
  if (gz != nullptr) softmax_backward_row(a, u, n, T(1), flows, gz);
  note_scratch_for<S, T, no_parameters, dynamic, dynamic> ns(dk, Q.cols());
  backward_any_score<T, dynamic, dynamic>(
      score, Q.row(t), K, a, u, flows, dY.row(t), std::span<T>(a, n),
      g.queries.rows() != 0 ? g.queries.row(t) : dq, g.keys.rows() != 0 ? g.keys : scratch.keys.view(),
      g.values, static_cast<no_parameters*>(nullptr), beta, &ns);
}

/// The backward of a row whose masks allow no key (masked_out_row): nothing flows to Q and K
/// (nor to row t of ∂L/∂S: the weights do not move); under `uniform` every ∂L/∂V_j gains dY_t/n,
/// under `nan` every gradient given is NaN (row t of ∂L/∂S too).
template <real T>
void masked_out_row_backward(std::size_t t, MatrixView<const T> dY, const attention_gradients<T>& g,
                             all_masked_policy policy) {
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  if (policy == all_masked_policy::uniform && g.values.rows() != 0) {
    const T w = T(1) / static_cast<T>(g.values.rows());
    for (std::size_t j = 0; j < g.values.rows(); ++j)
      axpy(w, dY.row(t).data(), g.values.row(j).data(), g.values.cols());
  } else if (policy == all_masked_policy::nan) {
    if (g.queries.rows() != 0) fill(g.queries.row(t).data(), g.queries.cols(), nan);
    if (g.scores.rows() != 0) fill(g.scores.row(t).data(), g.scores.cols(), nan);
    if (g.bias.rows() != 0) fill(g.bias.row(t).data(), g.bias.cols(), nan);
    for (const MatrixView<T>& m : {g.keys, g.values})
      if (m.rows() != 0) fill_rows(m.data(), m.rows(), m.cols(), m.row_stride(), nan);
  }
}

/// What tiled_backward_on_threads needs besides the threads: dY_t·Y_t and whether the tiles
/// take row t, for every row (made by the caller before anything is written).
template <class T>
struct backward_rows_state {
  std::vector<T> dy_y;
  std::unique_ptr<bool[]> live;
  explicit backward_rows_state(std::size_t tq) : dy_y(tq), live(std::make_unique<bool[]>(tq)) {}
};

/// tiled_backward on `threads` threads (usable_threads: 1 runs tiled_backward itself), every
/// number the one-thread call's bit for bit: leave(t) for the rows the tiles leave first, in
/// order, on the calling thread (their exact path adds to every key's gradient and shares one
/// scratch), and dY_t·Y_t of every row into `state`; then pieces taken by split_over_threads,
/// each writing its own rows of the gradients — a block of NB keys, whose ∂L/∂K and ∂L/∂V rows
/// it sums over every block of MB rows in order (the one-thread order of those sums), or a
/// block of MB rows, whose ∂L/∂Q rows and ∂L/∂S entries it sums over every block of keys in
/// order (theirs). Both form P and dS of their tiles: the two score products twice, about 7/5
/// of the one-thread work when every gradient is asked for, none more when only the keys' or
/// only the rows' are.
template <class T, class Leave>
void tiled_backward_on_threads(const tiled_backward_kernel<T>& k, std::size_t tq, Leave&& leave,
                               std::size_t threads, backward_rows_state<T>* state) {
  const std::size_t used = usable_threads(threads);
  if (used <= 1 || tq == 0 || state == nullptr) {
    tiled_backward<T>(k, 0, tq, leave);
    return;
  }
  using kernel = tiled_backward_kernel<T>;
  constexpr std::size_t MB = kernel::MB, SB = kernel::SB;
  const tile_masks& masks = k.masks;
  const tile_gradients<T>& g = k.g;
  const std::size_t NB = k.NB;
  for (std::size_t t = 0; t < tq; ++t)
    if (!k.live(t)) leave(t);
  T* const dy_y = state->dy_y.data();
  bool* const live = state->live.get();
  {  // every row's dY_t·Y_t and live(t), once (score_micro_tile's numbers, as one thread's)
    backward_scratch<T> b;
    for (std::size_t s0 = 0; s0 < tq; s0 += SB) {
      const std::size_t srows = tq - s0 < SB ? tq - s0 : SB;
      k.rows(s0, srows, b);
      copy_numbers(b.dy_y, dy_y + s0, srows);
      for (std::size_t i = 0; i < srows; ++i) live[s0 + i] = b.live[i];
    }
  }
  const std::size_t key_end = masks.limit(tq - 1);  // (the last row sees the most keys)
  const bool keys_part = g.keys.data != nullptr || g.values.data != nullptr;
  const bool rows_part = g.queries.data != nullptr || g.scores.data != nullptr;
  const std::size_t key_blocks = keys_part ? (key_end + NB - 1) / NB : 0;
  const std::size_t row_blocks = rows_part ? (tq + MB - 1) / MB : 0;
  // the key blocks first (under causal the first are seen by the most rows), then the row
  // blocks, the last first (they see the most keys)
  split_over_threads(key_blocks + row_blocks, used, [&](std::size_t item) {
    backward_scratch<T> b;
    if (item < key_blocks) {
      const std::size_t j0 = item * NB;
      k.keys(j0, key_end - j0 < NB ? key_end - j0 : NB, b);
      for (std::size_t t0 = 0; t0 < tq; t0 += MB)
        k.block(t0, tq - t0 < MB ? tq - t0 : MB, dy_y + t0, live + t0, j0, b, false, true);
      return;
    }
    const std::size_t t0 = (row_blocks - 1 - (item - key_blocks)) * MB;
    const std::size_t rows = tq - t0 < MB ? tq - t0 : MB;
    const std::size_t last = masks.limit(t0 + rows - 1);
    for (std::size_t j0 = 0; j0 < last; j0 += NB) {
      k.keys(j0, last - j0 < NB ? last - j0 : NB, b);
      k.block(t0, rows, dy_y + t0, live + t0, j0, b, true, false);
    }
  });
}

template <real T, class S, bool Committed = false>
void sdpa_backward_views(const char* where, MatrixView<const T> Q, MatrixView<const T> K,
                         MatrixView<const T> V, const S& score, saved_attention<T> saved,
                         MatrixView<const T> dY, const attention_gradients<T>& g,
                         const options& opt, std::size_t threads = 1,
                         const tile_bias<T>& bias = {}) {
  if constexpr (!Committed && gradients_may_throw<S, T, no_parameters>()) {
    // a score that may throw: the gradients into copies of their own, committed at the end
    Matrix<T> gq = detached_copy(g.queries), gk = detached_copy(g.keys), gv = detached_copy(g.values);
    Matrix<T> gs = detached_copy(g.scores), gz = detached_copy(g.bias);
    sdpa_backward_views<T, S, true>(
        where, Q, K, V, score, saved, dY,
        attention_gradients<T>{gq.view(), gk.view(), gv.view(), g.accumulate, gs.view(), gz.view()},
        opt, threads, bias);
    commit_to(gq, g.queries);
    commit_to(gk, g.keys);
    commit_to(gv, g.values);
    commit_to(gs, g.scores);
    commit_to(gz, g.bias);
    return;
  }
  const std::size_t tq = Q.rows(), n = K.rows(), dk = K.cols(), dv = V.cols();
  check_many_queries<T>(where, Q, K, V, score, opt);
  check_shape(where, "dL/dY", dY.rows(), dY.cols(), tq, dv);
  if (g.queries.rows() != 0) check_shape(where, "dL/dQ", g.queries.rows(), g.queries.cols(), tq, dk);
  if (g.keys.rows() != 0) check_shape(where, "dL/dK", g.keys.rows(), g.keys.cols(), n, dk);
  if (g.values.rows() != 0) check_shape(where, "dL/dV", g.values.rows(), g.values.cols(), n, dv);
  if (g.scores.rows() != 0) check_shape(where, "dL/dS", g.scores.rows(), g.scores.cols(), tq, n);
  if (g.bias.rows() != 0) check_shape(where, "dL/dZ", g.bias.rows(), g.bias.cols(), tq, n);
  const bool recompute = saved.out.rows() == 0 && saved.logsumexp.empty();
  if (!recompute) {
    check_shape(where, "the saved output", saved.out.rows(), saved.out.cols(), tq, dv);
    check_equal(where, "size of the saved log-sum-exp", saved.logsumexp.size(), "number of queries",
                tq);
  }
  check_buffers_apart<T>(where,
                         {{"dL/dQ", region_of(g.queries)},
                          {"dL/dK", region_of(g.keys)},
                          {"dL/dV", region_of(g.values)},
                          {"dL/dS", region_of(g.scores)},
                          {"dL/dZ", region_of(g.bias)}},
                         {{"the queries", region_of(Q)},
                          {"the keys", region_of(K)},
                          {"the values", region_of(V)},
                          {"dL/dY", region_of(dY)},
                          {"the saved output", region_of(saved.out)},
                          {"the saved log-sum-exp", region_of(saved.logsumexp)}},
                         opt);
  Matrix<T> y_own;
  std::vector<T> lse_own;
  if (recompute) {  // the forward, into storage of our own
    y_own = Matrix<T>(tq, dv);
    lse_own.assign(tq, T(0));
    many_queries_views<T>(where, Q, K, V, score, attention_views<T>{.out = y_own.view(), .logsumexp = lse_own},
                          opt, rows_on_threads<T>{threads}, bias);
    saved = {y_own.view(), lse_own};
  }
  // the rows that take the exact path: every row, or those the tiled kernel leaves (L_t, Q_t or
  // dY_t not finite: tiled_backward's test) whose masks allow a key; their row options and scratch are
  // made here, before anything is written, so that an allocation that fails leaves every
  // gradient as it was (and a call with no such row allocates nothing)
  const bool tiled = dot_product_score<S, T> && dk <= 256 && dv <= 256;
  const tile_masks masks = tile_masks_of(opt, tq, n);
  bool exact_rows = !tiled;
  for (std::size_t t = 0; t < tq && !exact_rows; ++t)
    exact_rows = !(saved.logsumexp[t] - saved.logsumexp[t] == T(0) && all_finite(Q.row(t).data(), dk) &&
                   all_finite(dY.row(t).data(), dv)) &&
                 row_allows_a_key(masks, t);
  std::optional<row_options> row_opt;
  sdpa_row_scratch<T> scratch;
  const auto make_scratch = [&] {
    row_opt.emplace(opt, tq, n);
    scratch.numbers.assign(2 * n + dk + (g.bias.rows() != 0 ? n : 0), T(0));
    if (g.keys.rows() == 0) scratch.keys = Matrix<T>(n, dk);
  };
  if (exact_rows) make_scratch();
  // on threads, every row's dY_t·Y_t and live(t) in one place for the pieces (T numbers and T
  // bools), made here too
  std::optional<backward_rows_state<T>> rows_state;
  if (tiled && usable_threads(threads) > 1) rows_state.emplace(tq);
  // the key and value gradients are sums over the rows: start them at 0 unless they accumulate
  if (!g.accumulate) {
    if (g.keys.rows() != 0) fill_rows(g.keys.data(), n, dk, g.keys.row_stride(), T(0));
    if (g.values.rows() != 0) fill_rows(g.values.data(), n, dv, g.values.row_stride(), T(0));
    if (g.queries.rows() != 0) fill_rows(g.queries.data(), tq, dk, g.queries.row_stride(), T(0));
    if (g.scores.rows() != 0) fill_rows(g.scores.data(), tq, n, g.scores.row_stride(), T(0));
    if (g.bias.rows() != 0) fill_rows(g.bias.data(), tq, n, g.bias.row_stride(), T(0));
  }
  attention_gradients<T> exact = g;
  exact.accumulate = true;
  const auto by_row = [&](std::size_t t) {
    if (!row_opt) make_scratch();  // (only if -ffast-math folded the scan's test and not the kernel's)
    // the row's ∂L/∂z (when asked for) after the 2n + d_k numbers: the logits' path gives it
    T* const gz = g.bias.rows() != 0 ? scratch.numbers.data() + 2 * n + dk : nullptr;
    if (bias.any() || gz != nullptr)
      sdpa_backward_biased_row<T>(where, t, Q, K, V, score, dY, exact, (*row_opt)(t), bias, gz,
                                  scratch);
    else
      sdpa_backward_exact_row<T>(where, t, Q, K, V, score, dY, exact, (*row_opt)(t), scratch);
    // the row's ∂L/∂s and ∂L/∂z, all n of each (masked: 0), from the scratch
    const auto put = [&](const T* from, MatrixView<T> to) {
      T* const row = to.row(t).data();
      if (g.accumulate)
        axpy(T(1), from, row, n);
      else
        copy_numbers(from, row, n);
    };
    if (g.scores.rows() != 0) put(scratch.numbers.data(), g.scores);
    if (gz != nullptr) put(gz, g.bias);
  };
  if constexpr (dot_product_score<S, T>) {
    if (tiled) {
      const tile_gradients<T> tg{tile_of(g.queries), tile_of(g.keys), tile_of(g.values),
                                 tile_of(g.scores), g.accumulate, tile_of(g.bias)};
      const tile_matrix<const T> q = tile_of(Q), k = tile_of(K), v = tile_of(V), y = tile_of(saved.out),
                                 dy = tile_of(dY);
      const auto kernel = tiled_backward_kernel<T>::of(
          q, k, v, y, dy, saved.logsumexp.data(), score.template scale<T>(dk),
          static_cast<T>(opt.beta), masks, bias, tg);
      tiled_backward_on_threads<T>(kernel, tq,
                                   [&](std::size_t t) {
                                     if (row_allows_a_key(masks, t))
                                       by_row(t);
                                     else
                                       masked_out_row_backward<T>(t, dY, g, opt.if_all_masked);
                                   },
                                   threads, rows_state ? &*rows_state : nullptr);
      return;
    }
  }
  for (std::size_t t = 0; t < tq; ++t) by_row(t);
}

}  // namespace detail

/// From dY = ∂L/∂Y, writes the gradients of scaled_dot_product_attention(Q, K, V, score, …, opt)
/// into the views of `grads`, recomputing the map tile by tile from saved.out and
/// saved.logsumexp (or, both empty, from a forward run here). Every check comes before anything
/// is written, and so does every allocation: a std::bad_alloc leaves every gradient as it was.
/// Allocates nothing when the forward was saved, unless a row has a non-finite log-sum-exp and
/// its masks allow a key (it then takes attn::backward's exact path: 2n + d_k numbers, n × d_k
/// more when ∂L/∂K is left out, and the row options, made once, before the gradients are
/// zeroed); with d_k or d_v above 256, or a score outside the dot family, every row takes that
/// path, its scratch made likewise.
template <matrix_like Qm, matrix_like Km, matrix_like Vm, class S, matrix_like Gm>
  requires detail::matrix_of<Km, matrix_scalar_of<Qm>> && detail::matrix_of<Vm, matrix_scalar_of<Qm>> &&
      detail::matrix_of<Gm, matrix_scalar_of<Qm>> && Score<S, matrix_scalar_of<Qm>>
void scaled_dot_product_attention_backward(const Qm& Q, const Km& K, const Vm& V, const S& score,
                                           const saved_attention<matrix_scalar_of<Qm>>& saved,
                                           const Gm& dY,
                                           const attention_gradients<matrix_scalar_of<Qm>>& grads,
                                           const options& opt = {}) {
  using T = matrix_scalar_of<Qm>;
  detail::sdpa_backward_views<T>("attn::scaled_dot_product_attention_backward", as_view(Q),
                                 as_view(K), as_view(V), score, saved, as_view(dY), grads, opt);
}

/// As above, on `threads` threads (std::thread, the calling thread one of them; 0 or 1: none
/// started), the numbers the one-thread call's bit for bit for any count: the rows the tiles
/// leave first, on the calling thread, then blocks of keys (their ∂L/∂K and ∂L/∂V summed over
/// every row in order) and blocks of rows (their ∂L/∂Q and ∂L/∂S over every key in order) taken
/// by the next free thread; P and dS are formed once for each (about 7/5 of the one-thread work
/// when every gradient is asked for). Allocates, besides what the one-thread call allocates,
/// T numbers and T bools (each row's dY_t·Y_t, made before anything is written) and the
/// thread objects; each thread's tiles are on its stack (about 180 KiB). Scores outside the dot
/// family and d_k or d_v above 256 (every row one query's path) run on the calling thread.
template <matrix_like Qm, matrix_like Km, matrix_like Vm, class S, matrix_like Gm>
  requires detail::matrix_of<Km, matrix_scalar_of<Qm>> && detail::matrix_of<Vm, matrix_scalar_of<Qm>> &&
      detail::matrix_of<Gm, matrix_scalar_of<Qm>> && Score<S, matrix_scalar_of<Qm>>
void scaled_dot_product_attention_backward(const Qm& Q, const Km& K, const Vm& V, const S& score,
                                           const saved_attention<matrix_scalar_of<Qm>>& saved,
                                           const Gm& dY,
                                           const attention_gradients<matrix_scalar_of<Qm>>& grads,
                                           const options& opt, std::size_t threads) {
  using T = matrix_scalar_of<Qm>;
  detail::sdpa_backward_views<T>("attn::scaled_dot_product_attention_backward", as_view(Q),
                                 as_view(K), as_view(V), score, saved, as_view(dY), grads, opt,
                                 threads);
}

/// As above for scaled_dot_product_attention with a bias on the logits (attn/logit_bias.hpp):
/// P_tj = exp(z_tj − L_t), z = β·S + B + A, and grads.bias gets ∂L/∂Z = ∂L/∂B. The bias must be
/// the forward's (its L_t are of these logits); its checks as the forward's, and its matrix
/// apart from every gradient.
template <matrix_like Qm, matrix_like Km, matrix_like Vm, class S, matrix_like Gm>
  requires detail::matrix_of<Km, matrix_scalar_of<Qm>> && detail::matrix_of<Vm, matrix_scalar_of<Qm>> &&
      detail::matrix_of<Gm, matrix_scalar_of<Qm>> && Score<S, matrix_scalar_of<Qm>>
void scaled_dot_product_attention_backward(const Qm& Q, const Km& K, const Vm& V, const S& score,
                                           const saved_attention<matrix_scalar_of<Qm>>& saved,
                                           const Gm& dY,
                                           const attention_gradients<matrix_scalar_of<Qm>>& grads,
                                           const options& opt,
                                           const logit_bias<matrix_scalar_of<Qm>>& bias,
                                           std::size_t threads = 1) {
  using T = matrix_scalar_of<Qm>;
  const char* where = "attn::scaled_dot_product_attention_backward";
  const auto qv = as_view(Q);
  const auto kv = as_view(K);
  const detail::tile_bias<T> b = detail::checked_bias<T>(
      where, bias, qv.rows(), kv.rows(),
      {{"dL/dQ", detail::region_of(grads.queries)},
       {"dL/dK", detail::region_of(grads.keys)},
       {"dL/dV", detail::region_of(grads.values)},
       {"dL/dS", detail::region_of(grads.scores)},
       {"dL/dZ", detail::region_of(grads.bias)}},
      opt);
  detail::sdpa_backward_views<T>(where, qv, kv, as_view(V), score, saved, as_view(dY), grads, opt,
                                 threads, b);
}

/// Returns ∂L/∂Q, ∂L/∂K and ∂L/∂V of scaled_dot_product_attention(Q, K, V, score, …, opt).
template <matrix_like Qm, matrix_like Km, matrix_like Vm, class S, matrix_like Gm>
  requires detail::matrix_of<Km, matrix_scalar_of<Qm>> && detail::matrix_of<Vm, matrix_scalar_of<Qm>> &&
      detail::matrix_of<Gm, matrix_scalar_of<Qm>> && Score<S, matrix_scalar_of<Qm>>
[[nodiscard]] auto scaled_dot_product_attention_backward(
    const Qm& Q, const Km& K, const Vm& V, const S& score,
    const saved_attention<matrix_scalar_of<Qm>>& saved, const Gm& dY, const options& opt = {}) {
  using T = matrix_scalar_of<Qm>;
  constexpr std::size_t TQ = rows_of<Qm>, N = common_extent<rows_of<Km>, rows_of<Vm>>,
                        DK = cols_of<Qm>, DV = cols_of<Vm>;
  const auto qv = as_view(Q);
  const auto kv = as_view(K);
  const auto vv = as_view(V);
  attention_gradients_result<T, TQ, N, DK, DV> r{
      detail::zero_matrix<T, TQ, DK>(qv.rows(), qv.cols()),
      detail::zero_matrix<T, N, DK>(kv.rows(), kv.cols()),
      detail::zero_matrix<T, N, DV>(vv.rows(), vv.cols())};
  scaled_dot_product_attention_backward(
      qv, kv, vv, score, saved, dY,
      attention_gradients<T>{r.queries.view(), r.keys.view(), r.values.view()}, opt);
  return r;
}

}  // namespace attn
