#pragma once
/// \file attn/attention.hpp
/// One look back, and many: for a query q and notes h_1..h_n (or keys k_j and values v_j),
///   s_j = score(q, k_j),   α = softmax(β·s, mask),   c = Σ_j α_j v_j.
/// `attend` does it for one query, `align` for T queries (the T×n alignment map), and
/// `no_attention` is Unit 17's baseline without a map (every query gets the last note).

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <concepts>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "attn/detail/bias.hpp"
#include "attn/detail/heap_array.hpp"
#include "attn/detail/math.hpp"
#include "attn/detail/online.hpp"
#include "attn/detail/prefetch.hpp"
#include "attn/detail/reduce.hpp"
#include "attn/detail/rows.hpp"
#include "attn/detail/simd.hpp"
#include "attn/detail/softmax_row.hpp"
#include "attn/detail/tile.hpp"
#include "attn/error.hpp"
#include "attn/extent.hpp"
#include "attn/matrix.hpp"
#include "attn/score.hpp"
#include "attn/softmax.hpp"
#include "attn/vector.hpp"

namespace attn {

/// What one look back gives: the n scores s, the n weights α and the context c (d_v numbers).
template <real T, std::size_t N = dynamic, std::size_t D = dynamic>
struct attention_result {
  Vector<T, N> scores;   ///< s_j = score(q, k_j)
  Vector<T, N> weights;  ///< α = softmax(β·s, mask)
  Vector<T, D> context;  ///< c = Σ_j α_j v_j
};

/// The alignment map of T queries over n notes: row t holds query t's scores, weights and
/// context (each row of `weights` sums to 1).
template <real T, std::size_t Q = dynamic, std::size_t N = dynamic, std::size_t D = dynamic>
struct alignment_result {
  Matrix<T, Q, N> scores;    ///< s_tj
  Matrix<T, Q, N> weights;   ///< α_tj: the alignment map
  Matrix<T, Q, D> contexts;  ///< c_t = Σ_j α_tj v_j
};

namespace detail {

/// Rows [j0, j0 + nb) of m, as a view (unchecked: the callers' blocks lie within m).
template <real T>
constexpr MatrixView<const T> row_block(MatrixView<const T> m, std::size_t j0, std::size_t nb) {
  return MatrixView<const T>(m.data() + j0 * m.row_stride(), nb, m.cols(), m.row_stride());
}

/// Scores the notes a block of B at a time (score_all, as attend forms them) and calls
/// visit(j0, nb, s) with each block's scores; stops, returning false, when visit does.
template <std::size_t B = online_block, real T, class S, class F>
constexpr bool for_each_score_block(const S& score, std::span<const T> q, MatrixView<const T> keys,
                                    F&& visit) {
  T s[B];
  for (std::size_t j0 = 0; j0 < keys.rows(); j0 += B) {
    const std::size_t nb = keys.rows() - j0 < B ? keys.rows() - j0 : B;
    score_all(score, q, row_block(keys, j0, nb), std::span<T>(s, nb));
    if (!visit(j0, nb, static_cast<const T*>(s))) return false;
  }
  return true;
}

/// Under the throw_error policy: throws unless some kept note's β·s is not −inf (or is −inf
/// only because the product overflowed: s finite). The scores are formed as attend forms them
/// (general's batched scores may differ from one note's in whether they overflow).
template <real T, class S>
constexpr void check_something_kept(const char* where, std::span<const T> q,
                                    MatrixView<const T> keys, const S& score, const options& opt) {
  const T beta = static_cast<T>(opt.beta);
  const bool none =
      for_each_score_block(score, q, keys, [&](std::size_t j0, std::size_t nb, const T* s) {
        for (std::size_t r = 0; r < nb; ++r) {
          if (!opt.mask.empty() && !opt.mask[j0 + r]) continue;
          // kept unless β·s is −inf because s is ±inf (on the bits: it must hold under fast-math)
          const bool infinite = is_minus_infinity(s[r]) || is_minus_infinity(-s[r]);
          if (!is_minus_infinity(beta * s[r]) || !infinite) return false;
        }
        return true;
      });
  if (none) throw_all_masked(where);
}

/// Checks every size (and the all-masked throw policy) before anything is written, so a
/// throw leaves every output as it was.
template <real T, class S>
constexpr void check_attend(const char* where, std::span<const T> q, MatrixView<const T> keys,
                            MatrixView<const T> values, const S& score, std::size_t scores_n,
                            std::size_t weights_n, std::size_t context_n, const options& opt) {
  check_score<T>(where, score, q.size(), keys.cols());
  check_nonempty(where, "the notes matrix", keys.rows());
  check_equal(where, "rows of values", values.rows(), "rows of keys", keys.rows());
  check_equal(where, "scores size", scores_n, "number of notes", keys.rows());
  check_equal(where, "context size", context_n, "columns of values", values.cols());
  check_softmax_args<T>(where, keys.rows(), weights_n, opt, notes_row);
  if (opt.if_all_masked == all_masked_policy::throw_error)
    check_something_kept(where, q, keys, score, opt);
}

/// check_attend_apart's exact check, where spans of memory met: the rows, and both names.
template <real T>
ATTN_NOINLINE constexpr void
check_attend_apart_exact(const char* where, std::span<const T> q, MatrixView<const T> keys,
                         MatrixView<const T> values, bool notes, std::span<T> scores,
                         std::span<T> weights, std::span<T> context, const options& opt) {
  check_buffers_apart<T>(where,
                         {{"scores", region_of(scores)},
                          {"weights", region_of(weights)},
                          {"context", region_of(context)}},
                         {{"query", region_of(q)},
                          {notes ? "notes" : "keys", region_of(keys)},
                          {notes ? "notes" : "values", region_of(values)}},
                         opt);
}

/// Refuses (overlap_error, naming both) scores, weights or context that overlap one another,
/// the query, the keys, the values (the notes, when they are both) or the mask. Inline, the
/// common answer (no span of memory meets another: branch-free compares beside the call's own
/// work), and out of line the rest: in a call this small, an out-of-line check of every pair
/// doubled the time (docs/performance.md, "Overlap checks").
template <real T>
ATTN_ALWAYS_INLINE constexpr void
check_attend_apart(const char* where, std::span<const T> q, MatrixView<const T> keys,
                   MatrixView<const T> values, bool notes, std::span<T> scores,
                   std::span<T> weights, std::span<T> context, const options& opt) {
  if (!std::is_constant_evaluated()) {
    // [data, data + extent): a span is its numbers; an empty one is [p, p), which at most sends
    // the call to the exact check (which then finds nothing)
    const auto of_span = [](const auto& x) { return byte_span{x.data(), x.data() + x.size()}; };
    const auto of_view = [](MatrixView<const T> m) {
      return byte_span{m.data(),
                       m.data() + (m.rows() == 0 ? 0 : (m.rows() - 1) * m.row_stride() + m.cols())};
    };
    const byte_span s = of_span(scores), w = of_span(weights), c = of_span(context);
    const auto meets = [&](byte_span i) {
      return spans_meet(s, i) | spans_meet(w, i) | spans_meet(c, i);
    };
    unsigned meet = spans_meet(w, s) | spans_meet(c, s) | spans_meet(c, w) | meets(of_span(q)) |
                meets(of_view(keys));
    if (!notes) meet |= meets(of_view(values));  // (the notes are keys and values)
    if (!opt.mask.empty()) meet |= meets(bytes_of(region_of(opt.mask)));
    if (!opt.row_mask.empty()) meet = 1;  // (attend refuses it: the exact check first)
    if (!meet) return;
  }
  check_attend_apart_exact<T>(where, q, keys, values, notes, scores, weights, context, opt);
}

/// c = Σ_j α_j v_j; a note of weight exactly 0 (masked, or too far below the max to count)
/// contributes nothing, even if its value holds inf or NaN.
template <real T>
constexpr void blend(std::span<const T> weights, MatrixView<const T> values, std::span<T> context) {
  weighted_sum_rows(weights.data(), values.data(), values.row_stride(), values.rows(),
                    values.cols(), context.data());
}

/// A copy of m in storage of its own (no rows: an empty Matrix), for a call that computes into
/// scratch and commits at the end.
template <real T>
[[nodiscard]] Matrix<T> detached_copy(MatrixView<T> m) {
  return m.rows() == 0 ? Matrix<T>() : Matrix<T>(m);
}

/// Copies from's numbers into to, row by row (to's stride; from has to's shape or no rows).
template <real T>
void commit_to(const Matrix<T>& from, MatrixView<T> to) noexcept {
  for (std::size_t i = 0; i < from.rows(); ++i) copy_numbers(from.row(i).data(), to.row(i).data(), to.cols());
}

/// The scores of one block of the one-pass kernel (score_all's numbers); for a dot-product
/// score the `lines` of the key rows from `ahead` on (null: none) are prefetched meanwhile.
template <real T, class S>
constexpr void block_scores(const S& score, std::span<const T> q, MatrixView<const T> keys,
                            [[maybe_unused]] const T* ahead, [[maybe_unused]] prefetch_lines lines,
                            T* out) {
  if constexpr (dot_product_score<S, T>)
    dot_product_scores(q, keys, score.template scale<T>(q.size()), std::span<T>(out, keys.rows()),
                       ahead, lines);
  else
    score_all(score, q, keys, std::span<T>(out, keys.rows()));
}

/// The one pass over all notes (online_pass), scoring them a block at a time.
template <real T, class S>
constexpr bool one_pass(const S& score, std::span<const T> q, MatrixView<const T> keys,
                        MatrixView<const T> values, T beta, const mask_byte* mask, T* scores,
                        online_state<T>& st, T* exps, T* block_max) {
  const bool shared = values.data() == keys.data();
  const std::size_t numbers = keys.cols() + (shared ? 0 : values.cols());
  const auto next_block = [&](std::size_t j0, std::size_t nb, T* out, bool ahead,
                              prefetch_lines lines) {
    block_scores(score, q, row_block(keys, j0, nb), ahead ? keys.row(j0 + nb).data() : nullptr,
                 lines, out);
  };
  return online_pass(next_block, keys.rows(), numbers, shared, values.data(), values.row_stride(),
                     beta, mask, scores, st, exps, block_max);
}

/// attend in one pass over the notes; false when it leaves the row to the two-pass path:
/// nothing kept, a kept score +inf or NaN, or a context that is not finite (a value holding
/// inf or NaN, whose note may have weight 0 and must then not count). The weights are the
/// pass's exps rescaled per block (up to 64 blocks; past that exp(β s_j − m)/l from the scores):
/// l is summed in blocks, so they may differ from the two-pass weights in the last bits.
template <real T, class S>
ATTN_NOINLINE constexpr bool attend_online(std::span<const T> q, MatrixView<const T> keys,
                                           MatrixView<const T> values, const S& score,
                                           std::span<T> scores, std::span<T> weights,
                                           std::span<T> context, const options& opt) {
  constexpr std::size_t max_blocks = 64;
  const std::size_t n = keys.rows(), dv = values.cols();
  const std::size_t numbers = keys.cols() + (values.data() != keys.data() ? dv : 0);  // per note
  const std::size_t B = online_rows<T>(numbers);
  const T beta = static_cast<T>(opt.beta);
  const mask_bytes mask_storage(opt.mask);
  const mask_byte* mask = mask_storage.data();
  online_state<T> st{.c = context.data(), .dv = dv};
  fill(st.c, dv, T(0));
  const std::size_t blocks = (n + B - 1) / B;
  T block_max[max_blocks];
  const bool keep_exps = blocks <= max_blocks;
  if (n <= B && mask == nullptr && n * numbers * sizeof(T) < online_prefetch_bytes) {
    // one block: the step alone, without the pass's bookkeeping (docs/performance.md)
    block_scores(score, q, keys, static_cast<const T*>(nullptr), prefetch_lines::all,
                 scores.data());
    if (!online_step(st, scores.data(), n, beta, static_cast<const mask_byte*>(nullptr), weights.data(),
                     values.data(), values.row_stride(), static_cast<const T*>(nullptr)) ||
        !(st.l == st.l))
      return false;
    block_max[0] = st.m;
  } else if (!one_pass(score, q, keys, values, beta, mask, scores.data(), st,
                       keep_exps ? weights.data() : nullptr, keep_exps ? block_max : nullptr)) {
    return false;
  }
  if (st.m == -std::numeric_limits<T>::infinity()) return false;  // nothing kept: the policy
  if (keep_exps)
    online_weights(st, block_max, n, B, weights.data());
  else
    exp_shifted(scores.data(), weights.data(), n, beta, st.m, mask, online_reciprocal(st));
  scale(st.c, dv, online_reciprocal(st));
  return all_finite(st.c, dv);
}

/// From this many notes on, attend reads the notes once (online softmax) instead of twice.
inline constexpr std::size_t online_min_notes = 32;

/// The whole look back on dynamic views, into caller buffers: one pass over the notes for a
/// dot-product score when there are enough of them, else scores, softmax, blend. Inlined into
/// the public overloads (called, its views were read back from the stack on a small call's
/// critical path).
template <real T, class S>
ATTN_ALWAYS_INLINE constexpr void
attend_views(const char* where, std::span<const T> q, MatrixView<const T> keys,
             MatrixView<const T> values, const S& score, std::span<T> scores, std::span<T> weights,
             std::span<T> context, const options& opt) {
  check_attend(where, q, keys, values, score, scores.size(), weights.size(), context.size(), opt);
  if constexpr (dot_product_score<S, T>) {
    if (!std::is_constant_evaluated() && keys.rows() >= online_min_notes &&
        attend_online(q, keys, values, score, scores, weights, context, opt))
      return;
  }
  score_all(score, q, keys, scores);
  softmax_row(where, scores.data(), weights.data(), scores.size(), weights.size(), opt);
  blend<T>(weights, values, context);
}

/// attend_views, called rather than inlined: for the fixed-size path, which falls back to it
/// only to check and throw (inlined, the whole dynamic path would be copied into every caller).
template <real T, class S>
ATTN_NOINLINE void attend_called(const char* where, std::span<const T> q, MatrixView<const T> keys,
                                 MatrixView<const T> values, const S& score, std::span<T> scores,
                                 std::span<T> weights, std::span<T> context, const options& opt) {
  attend_views<T>(where, q, keys, values, score, scores, weights, context, opt);
}

/// attend_views for a score whose scoring may throw (scoring_may_throw): the checks, then the
/// whole look back into scratch (the one allocation), copied into the caller's buffers at the
/// end, so that an exception from the score leaves them untouched.
template <real T, class S>
void attend_committed(const char* where, std::span<const T> q, MatrixView<const T> keys,
                      MatrixView<const T> values, const S& score, std::span<T> scores,
                      std::span<T> weights, std::span<T> context, const options& opt) {
  check_attend(where, q, keys, values, score, scores.size(), weights.size(), context.size(), opt);
  const std::size_t n = keys.rows(), dv = values.cols();
  std::vector<T> scratch(2 * n + dv, T(0));
  const std::span<T> s(scratch.data(), n), w(scratch.data() + n, n), c(scratch.data() + 2 * n, dv);
  attend_views<T>(where, q, keys, values, score, s, w, c, opt);
  copy_numbers(s.data(), scores.data(), n);
  copy_numbers(w.data(), weights.data(), n);
  copy_numbers(c.data(), context.data(), dv);
}

/// Largest number of notes the small fixed-size path of attend takes: below online_min_notes,
/// so that the dynamic path it agrees with (to the bit) is the two-pass one.
inline constexpr std::size_t small_notes = online_min_notes - 1;

/// attend for N notes of DK key and DV value numbers, all fixed at compile time and N small:
/// the same kernels as the general path (dot, the max, exp, the sums, accumulate_rows),
/// called with constant sizes so that the compiler unrolls them and little is left but
/// arithmetic. The numbers are those of the general path to the bit (in builds that fuse no
/// multiply-adds; with FMA contraction each path fuses on its own, to rounding); rows that are
/// not plainly finite (a kept NaN or +inf, nothing kept) and the throw_error policy take the
/// general path.
template <std::size_t N, std::size_t DK, std::size_t DV, real T, class S>
ATTN_ALWAYS_INLINE void attend_small(const char* where, std::span<const T> q,
                                     MatrixView<const T> keys, MatrixView<const T> values,
                                     const S& score, T* s, T* w, T* c, const options& opt) {
  if (opt.if_all_masked == all_masked_policy::throw_error || keys.rows() != N ||
      keys.cols() != DK || values.rows() != N || values.cols() != DV || q.size() != DK ||
      (!opt.mask.empty() && opt.mask.size() != N) || !opt.row_mask.empty() ||
      !beta_fits<T>(opt.beta) || !score_scale_fits<T>(score)) {
    // the general path checks everything and throws what there is to throw
    attend_called<T>(where, q, keys, values, score, std::span<T>(s, N), std::span<T>(w, N),
                     std::span<T>(c, DV), opt);
    return;
  }
  if constexpr (dot_product_score<S, T>) {
    T sr[N];  // the scores in registers (read back from s, they would wait on its stores)
    for (std::size_t j = 0; j < N;
         ++j)  // sum_of_products' numbers (short keys: without its add to 0)
      sr[j] = DK < simd_lanes<T> ? dot_in_order(q.data(), keys.row(j).data(), DK)
                                 : sum_of_products(q.data(), keys.row(j).data(), DK);
    const T f = score.template scale<T>(DK);
    if (f != T(1))
      for (std::size_t j = 0; j < N; ++j) sr[j] *= f;
    for (std::size_t j = 0; j < N; ++j) s[j] = sr[j];
    T wr[N];  // the weights in registers, likewise
    if (opt.mask.empty() && softmax_small_in_range<N>(sr, static_cast<T>(opt.beta), wr)) {
      // Every weight is nonzero, so accumulate_rows would add every row: add_weighted_rows'
      // sums, inline for values shorter than a vector.
      for (std::size_t j = 0; j < N; ++j) w[j] = wr[j];
      for (std::size_t i = 0; i < DV; ++i) c[i] = T(0);
      if constexpr (DV < simd_lanes<T>) {
        add_weighted_columns(wr, values.data(), values.row_stride(), N, 0, DV, c);
      } else {
        add_weighted_rows(wr, values.data(), values.row_stride(), N, DV, c);
      }
      return;
    }
  } else {
    check_score<T>(where, score, q.size(), keys.cols());
    score_all(score, q, keys, std::span<T>(s, N));
  }
  const T beta = static_cast<T>(opt.beta);
  const mask_bytes mask_storage(opt.mask);
  const mask_byte* mask = mask_storage.data();
  std::size_t kept = N;
  const T m =
      mask == nullptr ? scaled_max_of(s, N, beta) : masked_scaled_max_of(s, N, beta, mask, kept);
  if (!(kept != 0 && m > -std::numeric_limits<T>::infinity() &&
        m < std::numeric_limits<T>::infinity())) {
    // the rare rows by the general rules (softmax_rows: the short-row attempt cannot succeed)
    softmax_rows(where, s, w, N, N, opt);
  } else {
    softmax_finite_row<N>(s, w, N, beta, m, mask, false);
  }
  // blend's sums, zeroed here rather than by weighted_sum_rows (docs/performance.md, "Small calls")
  for (std::size_t i = 0; i < DV; ++i) c[i] = T(0);
  accumulate_rows(w, T(1), values.data(), values.row_stride(), N, DV, c);
}

/// attend's result for N notes of DK and DV numbers (fixed, N small): attend_small into a
/// result built here, with one return, inlined into the caller as Eigen's fixed sizes are
/// (docs/performance.md, "Small calls": why here and not in attend). In constant evaluation,
/// the general path.
template <std::size_t N, std::size_t DK, std::size_t DV, real T, class S>
ATTN_ALWAYS_INLINE constexpr attention_result<T, N, DV>
attend_small_result(std::span<const T> q, MatrixView<const T, N, DK> keys,
                    MatrixView<const T, N, DV> values, const S& score, const options& opt) {
  attention_result<T, N, DV> r{};
  if (std::is_constant_evaluated()) {
    attend_views<T>("attn::attend", q, keys, values, score, std::span<T>(r.scores),
                    std::span<T>(r.weights), std::span<T>(r.context), opt);
  } else {
    attend_small<N, DK, DV, T>("attn::attend", q, keys, values, score, r.scores.data(),
                               r.weights.data(), r.context.data(), opt);
  }
  return r;
}

/// attend's returned result for sizes the small fixed path does not take: sized (dynamic
/// extents allocate), then filled by attend_views.
template <real T, std::size_t N, std::size_t DV, class S>
constexpr attention_result<T, N, DV> attend_result(std::span<const T> q, MatrixView<const T> keys,
                                                   MatrixView<const T> values, const S& score,
                                                   const options& opt) {
  attention_result<T, N, DV> r{};
  if constexpr (N == dynamic) {
    r.scores = Vector<T>(keys.rows());
    r.weights = Vector<T>(keys.rows());
  }
  if constexpr (DV == dynamic) r.context = Vector<T>(values.cols());
  attend_views<T>("attn::attend", q, keys, values, score, std::span<T>(r.scores),
                  std::span<T>(r.weights), std::span<T>(r.context), opt);
  return r;
}

template <class Q, class K, class V, class S>
concept attend_inputs = vector_like<Q> && matrix_like<K> && matrix_like<V> &&
    Score<S, scalar_of<Q>> && std::same_as<matrix_scalar_of<K>, scalar_of<Q>> &&
    std::same_as<matrix_scalar_of<V>, scalar_of<Q>> &&
    score_fits_extents<S, extent_of<Q>, cols_of<K>> && compatible_extents<rows_of<K>, rows_of<V>>;

template <class Out, class T, std::size_t N>
concept output_for = mutable_vector_like<Out> && std::same_as<scalar_of<Out>, T> &&
    compatible_extents<extent_of<Out>, N>;

}  // namespace detail

/// Where attention over many queries writes (scaled_dot_product_attention): Y, and each of the
/// others when it has rows.
template <real T>
struct attention_views {
  MatrixView<T> out{};       ///< Y = A V (T × d_v)
  MatrixView<T> weights{};   ///< A (T × n): the map, stored only when given
  MatrixView<T> scores{};    ///< S = Q Kᵀ·scale (T × n), before β and the masks
  std::span<T> logsumexp{};  ///< L_t = log Σ_j exp(β s_tj) over the keys query t may see (T)
};

namespace detail {

template <class M, class T>
concept matrix_of = matrix_like<M> && std::same_as<matrix_scalar_of<M>, T>;

/// The checks of T queries over n keys and values, before anything is written: sizes, masks, β
/// and (policy throw_error) that every row keeps a key.
template <real T, class S>
constexpr void check_many_queries(const char* where, MatrixView<const T> Q, MatrixView<const T> K,
                                  MatrixView<const T> V, const S& score, const options& opt) {
  const std::size_t tq = Q.rows(), n = K.rows();
  check_nonempty(where, "the queries matrix", tq);
  check_score<T>(where, score, Q.cols(), K.cols());
  check_nonempty(where, "the keys matrix", n);
  check_equal(where, "rows of values", V.rows(), "rows of keys", n);
  check_masks(where, opt, tq, n);
  check_beta<T>(where, opt);
  if (opt.if_all_masked == all_masked_policy::throw_error) {
    row_options row_opt(opt, tq, n);
    for (std::size_t t = 0; t < tq; ++t) check_something_kept(where, Q.row(t), K, score, row_opt(t));
  }
}

/// The shapes of the outputs given: Y T × d_v, the map's weights and scores T × n, L of T.
template <real T>
constexpr void check_attention_outputs(const char* where, const attention_views<T>& out,
                                       std::size_t tq, std::size_t n, std::size_t dv) {
  check_shape(where, "the output", out.out.rows(), out.out.cols(), tq, dv);
  if (out.weights.rows() != 0)
    check_shape(where, "the weights", out.weights.rows(), out.weights.cols(), tq, n);
  if (out.scores.rows() != 0)
    check_shape(where, "the scores", out.scores.rows(), out.scores.cols(), tq, n);
  if (!out.logsumexp.empty())
    check_equal(where, "size of the log-sum-exp", out.logsumexp.size(), "number of queries", tq);
}

/// Whether exact_row needs scratch: for the scores or the weights when they are not asked for.
template <class T>
[[nodiscard]] constexpr bool exact_row_needs_scratch(const attention_views<T>& out) noexcept {
  return out.scores.rows() == 0 || out.weights.rows() == 0;
}

/// Row t by the exact rules of one query (attend's paths with row t's mask): its output, weights,
/// scores and log-sum-exp. `scratch` (2n numbers, when exact_row_needs_scratch; else unread)
/// holds the scores and weights not asked for. Allocates nothing. With a bias: the scores s
/// (score_all), the logits z = β·s + b (biased_logits, in the weights' place), L = log Σ exp z,
/// the weights softmax(z) at β = 1 by softmax's rules (masks, ±inf, NaN, the all-masked policy)
/// and the context by blend's (a weight of 0 takes nothing of its value).
template <real T, class S>
constexpr void exact_row(const char* where, std::size_t t, MatrixView<const T> Q, MatrixView<const T> K,
                    MatrixView<const T> V, const S& score, const attention_views<T>& out,
                    const options& row, T* scratch, const tile_bias<T>& bias = {}) {
  const std::size_t n = K.rows();
  const std::span<T> s = out.scores.rows() != 0 ? out.scores.row(t) : std::span<T>(scratch, n);
  const std::span<T> w = out.weights.rows() != 0 ? out.weights.row(t) : std::span<T>(scratch + n, n);
  if (!bias.any()) {
    attend_views<T>(where, Q.row(t), K, V, score, s, w, out.out.row(t), row);
    if (!out.logsumexp.empty()) out.logsumexp[t] = logsumexp(std::span<const T>(s), row);
    return;
  }
  score_all(score, Q.row(t), K, s);
  biased_logits(bias, t, 0, n, static_cast<T>(row.beta), s.data(), w.data());
  options logits = borrowing(row);
  logits.beta = 1;
  if (!out.logsumexp.empty()) out.logsumexp[t] = logsumexp(std::span<const T>(w), logits);
  softmax_row(where, w.data(), w.data(), n, n, logits);
  blend<T>(w, V, out.out.row(t));
}

/// Whether row t of the kernel's masks allows any key (the masks only: scores may still be −inf).
inline bool row_allows_a_key(const tile_masks& m, std::size_t t) noexcept {
  const std::size_t lim = m.limit(t);
  for (std::size_t j = 0; j < lim; ++j)
    if ((m.keys == nullptr || m.keys[j]) && (m.rows == nullptr || m.rows[t * m.row_stride + j]))
      return true;
  return false;
}

/// Row t when its masks allow no key: the all-masked policy (zeros, uniform: weights 1/n and the
/// mean of the values, nan), with its scores when they are asked for; no scratch. Under
/// throw_error the checks have already thrown.
template <real T, class S>
void masked_out_row(std::size_t t, MatrixView<const T> Q, MatrixView<const T> K,
                    MatrixView<const T> V, const S& score, const attention_views<T>& out,
                    all_masked_policy policy) {
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  const std::size_t n = K.rows(), dv = V.cols();
  if (out.scores.rows() != 0) score_all(score, Q.row(t), K, out.scores.row(t));
  const T w = policy == all_masked_policy::uniform ? T(1) / static_cast<T>(n)
              : policy == all_masked_policy::nan   ? nan
                                                   : T(0);
  if (out.weights.rows() != 0) fill(out.weights.row(t).data(), n, w);
  if (!out.logsumexp.empty())
    out.logsumexp[t] = policy == all_masked_policy::nan ? nan : -std::numeric_limits<T>::infinity();
  T* y = out.out.row(t).data();
  fill(y, dv, policy == all_masked_policy::uniform ? T(0) : w);
  if (policy == all_masked_policy::uniform) {  // the mean of the values, 64 rows at a time
    T ws[64];
    fill(ws, 64, w);
    for (std::size_t j0 = 0; j0 < n; j0 += 64)
      accumulate_rows(ws, T(1), V.row(j0).data(), V.row_stride(), n - j0 < 64 ? n - j0 : 64, dv, y);
  }
}

/// Rows [t_begin, t_end) (every row unless given) by exact_row (constant evaluation, and scores
/// that are not the dot family). The row options and the scratch are made before the first row
/// is written, so that an allocation that fails leaves every row as it was.
template <real T, class S>
constexpr void rows_one_by_one(const char* where, MatrixView<const T> Q, MatrixView<const T> K,
                            MatrixView<const T> V, const S& score, const attention_views<T>& out,
                            const options& opt, std::size_t t_begin = 0,
                            std::size_t t_end = static_cast<std::size_t>(-1),
                            const tile_bias<T>& bias = {}) {
  row_options row_opt(opt, Q.rows(), K.rows());
  const heap_array<T> scratch(exact_row_needs_scratch(out) ? 2 * K.rows() : 0);
  for (std::size_t t = t_begin; t < (t_end < Q.rows() ? t_end : Q.rows()); ++t)
    exact_row<T>(where, t, Q, K, V, score, out, row_opt(t), scratch.data(), bias);
}

/// The most keys whose row the tiled kernel leaves is taken on the stack (its scratch and its
/// combined mask, row_mask_buffer's inline entries): with more, the first such row allocates.
inline constexpr std::size_t left_row_inline_keys = row_mask_buffer::inline_entries;

/// A row the tiled kernel leaves (tiled_rows), by exact_row: its scratch on this function's
/// stack for at most left_row_inline_keys keys, so that a row met after other rows were
/// written allocates nothing (an allocation that failed there would leave those rows written);
/// with more keys in `heap`, allocated at the first such row. Out of line: its stack is taken
/// only when a row is left.
template <real T, class S>
ATTN_NOINLINE void left_row(const char* where, std::size_t t, MatrixView<const T> Q,
                            MatrixView<const T> K, MatrixView<const T> V, const S& score,
                            const attention_views<T>& out, const options& row, heap_array<T>& heap,
                            const tile_bias<T>& bias) {
  const std::size_t n = K.rows();
  if (!exact_row_needs_scratch(out)) {
    exact_row<T>(where, t, Q, K, V, score, out, row, nullptr, bias);
  } else if (n <= left_row_inline_keys) {
    T scratch[2 * left_row_inline_keys];
    exact_row<T>(where, t, Q, K, V, score, out, row, scratch, bias);
  } else {
    if (heap.size() < 2 * n) heap = heap_array<T>(2 * n);
    exact_row<T>(where, t, Q, K, V, score, out, row, heap.data(), bias);
  }
}

template <class T>
[[nodiscard]] constexpr tile_matrix<const T> tile_of(MatrixView<const T> m) noexcept {
  return {m.data(), m.rows(), m.cols(), m.row_stride()};
}
template <class T>
[[nodiscard]] constexpr tile_matrix<T> tile_of(MatrixView<T> m) noexcept {
  return {m.data(), m.rows(), m.cols(), m.row_stride()};
}

/// The masks of opt as the tiled kernel reads them (run time only: bytes).
[[nodiscard]] inline tile_masks tile_masks_of(const options& opt, std::size_t tq, std::size_t n) {
  tile_masks m;
  m.keys = opt.mask.bytes();
  if (!opt.row_mask.empty()) {
    m.rows = opt.row_mask.row_bytes(0);
    m.row_stride = opt.row_mask.row_stride();
  }
  m.causal = opt.causal;
  m.tq = tq;
  m.n = n;
  return m;
}

/// Query rows per piece of work when `threads` threads share T rows: about T / (8·threads),
/// whole micro-tiles of rows, so that pieces of unequal cost (causal) even out.
template <class T>
[[nodiscard]] constexpr std::size_t rows_per_piece(std::size_t tq, std::size_t threads) noexcept {
  constexpr std::size_t MR = tile_shape<T>::MR;
  const std::size_t pieces = 8 * threads, rows = (tq + pieces - 1) / pieces;
  return (rows + MR - 1) / MR * MR;
}

/// Query rows [begin, end) of a range of T rows.
struct row_range {
  std::size_t begin, end;
};

/// Piece k of `pieces` pieces of `piece` rows (rows_per_piece) over tq rows, the last rows first
/// (under a causal mask they cost most): [(pieces − 1 − k)·piece, min(that + piece, tq)).
[[nodiscard]] constexpr row_range piece_rows(std::size_t k, std::size_t piece,
                                             std::size_t pieces, std::size_t tq) noexcept {
  const std::size_t t0 = (pieces - 1 - k) * piece;
  return {t0, t0 + piece < tq ? t0 + piece : tq};
}

/// Rows [t_begin, t_end) of T queries over n keys by the tiled kernel (a dot-product score at
/// run time, keys up to 256 numbers long: tiled_runs), the rows it leaves taken exactly;
/// sizes checked. Each row's numbers do not depend on the range it is computed in.
template <real T, class S>
void tiled_rows(const char* where, MatrixView<const T> Q, MatrixView<const T> K,
                MatrixView<const T> V, const S& score, const attention_views<T>& out,
                const options& opt, std::size_t t_begin, std::size_t t_end,
                const tile_bias<T>& bias = {}) {
  const std::size_t tq = Q.rows(), n = K.rows();
  const tile_outputs<T> o{tile_of(out.out), tile_of(out.scores), tile_of(out.weights),
                          out.logsumexp.empty() ? nullptr : out.logsumexp.data()};
  const tile_masks masks = tile_masks_of(opt, tq, n);
  // made only if a row is left, on the stack for at most left_row_inline_keys keys
  std::optional<row_options> row_opt;
  heap_array<T> scratch;
  tiled_forward<T>(tile_of(Q), tile_of(K), tile_of(V), score.template scale<T>(K.cols()),
                   static_cast<T>(opt.beta), masks, bias, o, t_begin, t_end, [&](std::size_t t) {
                     if (!row_allows_a_key(masks, t)) {
                       masked_out_row<T>(t, Q, K, V, score, out, opt.if_all_masked);
                       return;
                     }
                     if (!row_opt) row_opt.emplace(opt, tq, n);
                     left_row<T>(where, t, Q, K, V, score, out, (*row_opt)(t), scratch, bias);
                   });
}

/// Whether rows of these queries and keys take the tiled kernel (tiled_rows).
template <real T, class S>
[[nodiscard]] constexpr bool tiled_runs(MatrixView<const T> K) noexcept {
  if constexpr (dot_product_score<S, T>)
    return !std::is_constant_evaluated() && K.cols() <= 256;
  else
    return false;
}

/// Rows [t_begin, t_end) of T queries over n keys, sizes checked: tiled_rows when the tiled
/// kernel runs, else row by row (rows_one_by_one). A row's numbers are the same in any range.
template <real T, class S>
void query_rows(const char* where, MatrixView<const T> Q, MatrixView<const T> K,
                MatrixView<const T> V, const S& score, const attention_views<T>& out,
                const options& opt, std::size_t t_begin, std::size_t t_end,
                const tile_bias<T>& bias = {}) {
  if constexpr (dot_product_score<S, T>) {
    if (tiled_runs<T, S>(K)) {
      tiled_rows<T>(where, Q, K, V, score, out, opt, t_begin, t_end, bias);
      return;
    }
  }
  rows_one_by_one<T>(where, Q, K, V, score, out, opt, t_begin, t_end, bias);
}

/// How many_queries_rows_into runs the tiled kernel over query rows [0, tq): rows(tq, fn) calls
/// fn(t_begin, t_end) over ranges that cover them once. Here one range; sdpa.hpp's
/// rows_on_threads cuts them into pieces on threads (the threads stay out of this header).
struct rows_at_once {
  template <class F>
  constexpr void operator()(std::size_t tq, F&& fn) const {
    fn(std::size_t{0}, tq);
  }
};

/// The rows of T queries over n keys, sizes checked: the tiled kernel (dot-product scores, keys
/// up to 256 numbers long, at run time) over the ranges `rows` gives, with the rows it leaves
/// taken exactly, or every row exactly (attend's paths with the row's mask). Every row's
/// numbers are the same in any range, on any thread.
template <real T, class S, class Rows = rows_at_once>
constexpr void many_queries_rows_into(const char* where, MatrixView<const T> Q,
                                      MatrixView<const T> K, MatrixView<const T> V, const S& score,
                                      const attention_views<T>& out, const options& opt,
                                      const Rows& rows = {}, const tile_bias<T>& bias = {}) {
  if constexpr (dot_product_score<S, T>) {
    if (tiled_runs<T, S>(K)) {
      rows(Q.rows(), [&](std::size_t t0, std::size_t t1) {
        tiled_rows<T>(where, Q, K, V, score, out, opt, t0, t1, bias);
      });
      return;
    }
  }
  rows_one_by_one<T>(where, Q, K, V, score, out, opt, 0, static_cast<std::size_t>(-1), bias);
}

/// many_queries_rows_into; for a score whose scoring may throw, into scratch copies of the
/// outputs given, copied into them when every row is done (an exception from the score on any
/// row leaves every output untouched).
template <real T, class S, class Rows = rows_at_once>
constexpr void many_queries_rows(const char* where, MatrixView<const T> Q, MatrixView<const T> K,
                                 MatrixView<const T> V, const S& score,
                                 const attention_views<T>& out, const options& opt,
                                 const Rows& rows = {}, const tile_bias<T>& bias = {}) {
  if constexpr (scoring_may_throw<S, T>()) {
    Matrix<T> y = detached_copy(out.out), w = detached_copy(out.weights),
              s = detached_copy(out.scores);
    std::vector<T> lse(out.logsumexp.size(), T(0));
    many_queries_rows_into<T>(where, Q, K, V, score,
                              attention_views<T>{y.view(), w.view(), s.view(), lse}, opt,
                              rows, bias);
    commit_to(y, out.out);
    commit_to(w, out.weights);
    commit_to(s, out.scores);
    copy_numbers(lse.data(), out.logsumexp.data(), lse.size());
  } else {
    many_queries_rows_into<T>(where, Q, K, V, score, out, opt, rows, bias);
  }
}

/// T queries over n keys on views (scaled_dot_product_attention): every check, then the rows
/// (many_queries_rows, over the ranges `rows` gives).
template <real T, class S, class Rows = rows_at_once>
constexpr void many_queries_views(const char* where, MatrixView<const T> Q, MatrixView<const T> K,
                                  MatrixView<const T> V, const S& score,
                                  const attention_views<T>& out, const options& opt,
                                  const Rows& rows = {}, const tile_bias<T>& bias = {}) {
  check_many_queries<T>(where, Q, K, V, score, opt);
  check_attention_outputs<T>(where, out, Q.rows(), K.rows(), V.cols());
  check_buffers_apart<T>(
      where,
      {{"the output", region_of(out.out)},
       {"the weights", region_of(out.weights)},
       {"the scores", region_of(out.scores)},
       {"the log-sum-exp", region_of(out.logsumexp)}},
      {{"the queries", region_of(Q)}, {"the keys", region_of(K)}, {"the values", region_of(V)}},
      opt);
  many_queries_rows<T>(where, Q, K, V, score, out, opt, rows, bias);
}

/// align into views: every check (overlaps, sizes, masks, the all-masked throw policy of every
/// row) before any row is written, then the rows (many_queries_rows).
template <real T, class S>
constexpr void align_views(MatrixView<const T> qv, MatrixView<const T> kv, MatrixView<const T> vv,
                           bool notes, const S& score, MatrixView<T> sv, MatrixView<T> wv,
                           MatrixView<T> cv, const options& opt) {
  const char* where = "attn::align";
  check_buffers_apart<T>(
      where, {{"scores", region_of(sv)}, {"weights", region_of(wv)}, {"contexts", region_of(cv)}},
      {{"queries", region_of(qv)},
       {notes ? "notes" : "keys", region_of(kv)},
       {notes ? "notes" : "values", region_of(vv)}},
      opt);
  check_nonempty(where, "the queries matrix", qv.rows());
  check_equal(where, "rows of scores", sv.rows(), "number of queries", qv.rows());
  check_equal(where, "rows of weights", wv.rows(), "number of queries", qv.rows());
  check_equal(where, "rows of contexts", cv.rows(), "number of queries", qv.rows());
  check_equal(where, "columns of scores", sv.cols(), "number of notes", kv.rows());
  check_equal(where, "columns of weights", wv.cols(), "number of notes", kv.rows());
  check_equal(where, "columns of contexts", cv.cols(), "columns of values", vv.cols());
  check_masks(where, opt, qv.rows(), kv.rows());
  row_options row_opt(opt, qv.rows(), kv.rows());
  for (std::size_t t = 0; t < qv.rows(); ++t)  // every row's checks before any row is written
    check_attend<T>(where, qv.row(t), kv, vv, score, kv.rows(), kv.rows(), vv.cols(), row_opt(t));
  many_queries_rows<T>(where, qv, kv, vv, score,
                       attention_views<T>{.out = cv, .weights = wv, .scores = sv}, opt);
}

}  // namespace detail

/// Attention over keys and values that differ (a soft lookup): s_j = score(q, k_j),
/// α = softmax(β·s, mask), c = Σ_j α_j v_j, written into the caller's buffers (n, n and d_v
/// numbers); allocates nothing (a score that may throw: one scratch, committed at the end). Sizes
/// that disagree do not compile when fixed and throw dimension_error when dynamic, and an
/// exception from the score propagates: every output is then left untouched.
template <vector_like Q, matrix_like K, matrix_like V, class S, class SOut, class WOut, class COut>
  requires detail::attend_inputs<Q, K, V, S> &&
      detail::output_for<SOut, scalar_of<Q>, rows_of<K>> &&
      detail::output_for<WOut, scalar_of<Q>, rows_of<K>> &&
      detail::output_for<COut, scalar_of<Q>, cols_of<V>>
constexpr void attend(const Q& q, const K& keys, const V& values, const S& score, SOut&& scores,
                      WOut&& weights, COut&& context, const options& opt = {}) {
  using T = scalar_of<Q>;
  const auto s = as_mutable_span(scores);
  const auto w = as_mutable_span(weights);
  const auto c = as_mutable_span(context);
  const auto kv = as_view(keys);
  const auto vv = as_view(values);
  detail::check_attend_apart<T>("attn::attend", as_span(q), kv, vv, false, s, w, c, opt);
  if constexpr (detail::scoring_may_throw<S, T>())
    detail::attend_committed<T>("attn::attend", as_span(q), kv, vv, score, s, w, c, opt);
  else
    detail::attend_views<T>("attn::attend", as_span(q), kv, vv, score, s, w, c, opt);
}

/// Attention where the notes are both keys and values, into the caller's buffers.
template <vector_like Q, matrix_like N, class S, class SOut, class WOut, class COut>
  requires detail::attend_inputs<Q, N, N, S> &&
      detail::output_for<SOut, scalar_of<Q>, rows_of<N>> &&
      detail::output_for<WOut, scalar_of<Q>, rows_of<N>> &&
      detail::output_for<COut, scalar_of<Q>, cols_of<N>>
constexpr void attend(const Q& q, const N& notes, const S& score, SOut&& scores, WOut&& weights,
                      COut&& context, const options& opt = {}) {
  using T = scalar_of<Q>;
  const auto s = as_mutable_span(scores);
  const auto w = as_mutable_span(weights);
  const auto c = as_mutable_span(context);
  const auto nv = as_view(notes);  // (one row-major copy of a strided view, for keys and values)
  detail::check_attend_apart<T>("attn::attend", as_span(q), nv, nv, true, s, w, c, opt);
  if constexpr (detail::scoring_may_throw<S, T>())
    detail::attend_committed<T>("attn::attend", as_span(q), nv, nv, score, s, w, c, opt);
  else
    detail::attend_views<T>("attn::attend", as_span(q), nv, nv, score, s, w, c, opt);
}

/// Attention over keys and values that differ; returns scores, weights and context.
/// Fixed sizes give a result that lives inline (no allocation, usable in constexpr), computed
/// inline in the caller as Eigen's fixed sizes are.
template <vector_like Q, matrix_like K, matrix_like V, class S>
  requires detail::attend_inputs<Q, K, V, S>
[[nodiscard]] ATTN_ALWAYS_INLINE constexpr auto attend(const Q& q, const K& keys, const V& values,
                                                       const S& score, const options& opt = {}) {
  using T = scalar_of<Q>;
  constexpr std::size_t N = common_extent<rows_of<K>, rows_of<V>>;
  if constexpr (N != dynamic && N != 0 && N <= detail::small_notes && cols_of<K> != dynamic &&
                cols_of<V> != dynamic)
    return detail::attend_small_result<N, cols_of<K>, cols_of<V>, T>(as_span(q), as_view(keys),
                                                                     as_view(values), score, opt);
  else
    return detail::attend_result<T, N, cols_of<V>>(as_span(q), as_view(keys), as_view(values),
                                                   score, opt);
}

/// Attention where the notes are both keys and values: s_j = score(q, h_j),
/// α = softmax(β·s, mask), c = Σ_j α_j h_j. Returns scores, weights and context.
template <vector_like Q, matrix_like N, class S>
  requires detail::attend_inputs<Q, N, N, S>
[[nodiscard]] ATTN_ALWAYS_INLINE constexpr auto attend(const Q& q, const N& notes, const S& score,
                                                       const options& opt = {}) {
  if constexpr (detail::is_strided<N>) {
    const auto nv = as_view(notes);  // one row-major copy, for keys and values
    return attend(q, nv.view(), nv.view(), score, opt);
  } else {
    return attend(q, notes, notes, score, opt);
  }
}

/// The alignment map of T queries (rows of `queries`) over keys and values, written into
/// the caller's T×n scores and weights and T×d_v contexts. opt.mask applies to every row,
/// opt.row_mask row t to query t, and opt.causal lets query t see keys 0 … t + n − T. All sizes
/// are checked before anything is written. Dot-product scores take the tiled kernel
/// (attn/sdpa.hpp), others attend's paths row by row. Allocates nothing unless a row mask or
/// causal meets more than 1024 notes, or a row holds a kept ±inf or NaN score.
template <matrix_like Qs, matrix_like K, matrix_like V, class S, class SOut, class WOut, class COut>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, K, V, S> &&
      mutable_matrix_like<SOut> && mutable_matrix_like<WOut> && mutable_matrix_like<COut>
constexpr void align(const Qs& queries, const K& keys, const V& values, const S& score,
                     SOut&& scores, WOut&& weights, COut&& contexts, const options& opt = {}) {
  detail::align_views<matrix_scalar_of<Qs>>(
      as_view(queries), as_view(keys), as_view(values), false, score, as_mutable_view(scores),
      as_mutable_view(weights), as_mutable_view(contexts), opt);
}

/// The alignment map of T queries over notes that are both keys and values, written into the
/// caller's buffers; allocates nothing.
template <matrix_like Qs, matrix_like N, class S, class SOut, class WOut, class COut>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, N, N, S> &&
      mutable_matrix_like<SOut> && mutable_matrix_like<WOut> && mutable_matrix_like<COut>
constexpr void align(const Qs& queries, const N& notes, const S& score, SOut&& scores,
                     WOut&& weights, COut&& contexts, const options& opt = {}) {
  const auto nv = as_view(notes);  // (one row-major copy of a strided view, for keys and values)
  detail::align_views<matrix_scalar_of<Qs>>(as_view(queries), nv, nv, true, score,
                                            as_mutable_view(scores), as_mutable_view(weights),
                                            as_mutable_view(contexts), opt);
}

/// The alignment map of T queries over keys and values: returns the T×n scores and weights
/// and the T contexts.
template <matrix_like Qs, matrix_like K, matrix_like V, class S>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, K, V, S>
[[nodiscard]] constexpr auto align(const Qs& queries, const K& keys, const V& values,
                                   const S& score, const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  constexpr std::size_t TQ = rows_of<Qs>, N = common_extent<rows_of<K>, rows_of<V>>, D = cols_of<V>;
  const auto qv = as_view(queries);
  const auto kv = as_view(keys);
  const auto vv = as_view(values);
  alignment_result<T, TQ, N, D> r{};
  if constexpr (TQ == dynamic || N == dynamic) {
    r.scores = Matrix<T, TQ, N>(qv.rows(), kv.rows());
    r.weights = Matrix<T, TQ, N>(qv.rows(), kv.rows());
  }
  if constexpr (TQ == dynamic || D == dynamic) r.contexts = Matrix<T, TQ, D>(qv.rows(), vv.cols());
  detail::align_views<T>(qv, kv, vv, false, score, r.scores.view(), r.weights.view(),
                         r.contexts.view(), opt);
  return r;
}

/// The alignment map of T queries over notes that are both keys and values.
template <matrix_like Qs, matrix_like N, class S>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, N, N, S>
[[nodiscard]] constexpr auto align(const Qs& queries, const N& notes, const S& score,
                                   const options& opt = {}) {
  if constexpr (detail::is_strided<N>) {
    const auto nv = as_view(notes);  // one row-major copy, for keys and values
    return align(queries, nv.view(), nv.view(), score, opt);
  } else {
    return align(queries, notes, notes, score, opt);
  }
}

/// Unit 17's translator without attention: every one of the T queries gets the same
/// summary, the last note, and there is no map. Throws dimension_error if there are no notes.
template <matrix_like Qs, matrix_like N>
  requires std::same_as<matrix_scalar_of<Qs>, matrix_scalar_of<N>>
[[nodiscard]] auto no_attention(const Qs& queries, const N& notes) {
  using T = matrix_scalar_of<Qs>;
  const auto qv = as_view(queries);
  const auto nv = as_view(notes);
  detail::check_nonempty("attn::no_attention", "the notes matrix", nv.rows());
  Matrix<T, rows_of<Qs>, cols_of<N>> out;
  if constexpr (rows_of<Qs> == dynamic || cols_of<N> == dynamic)
    out = Matrix<T, rows_of<Qs>, cols_of<N>>(qv.rows(), nv.cols());
  const auto last = nv.row(nv.rows() - 1);
  for (std::size_t t = 0; t < qv.rows(); ++t)
    for (std::size_t i = 0; i < nv.cols(); ++i) out(t, i) = last[i];
  return out;
}

}  // namespace attn
