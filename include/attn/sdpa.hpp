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
#include "attn/detail/tile.hpp"
#include "attn/error.hpp"
#include "attn/extent.hpp"
#include "attn/mask.hpp"
#include "attn/matrix.hpp"
#include "attn/score.hpp"
#include "attn/softmax.hpp"
#include "attn/vector.hpp"

namespace attn {

/// Where scaled_dot_product_attention writes: Y, and each of the others when it has rows.
template <real T>
struct attention_views {
  MatrixView<T> out{};       ///< Y = A V (T × d_v)
  MatrixView<T> weights{};   ///< A (T × n): the map, stored only when given
  MatrixView<T> scores{};    ///< S = Q Kᵀ·scale (T × n), before β and the masks
  std::span<T> logsumexp{};  ///< L_t = log Σ_j exp(β s_tj) over the keys query t may see (T)
};

/// What the returning scaled_dot_product_attention gives: Y and the log-sum-exp per row.
template <real T, std::size_t TQ = dynamic, std::size_t DV = dynamic>
struct sdpa_result {
  Matrix<T, TQ, DV> out;      ///< Y = A V
  Vector<T, TQ> logsumexp;    ///< L_t, what the backward needs besides Y
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
  check_score(where, score, Q.cols(), K.cols());
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

/// Row t by the exact rules of one query (attend's paths with row t's mask): its output, weights,
/// scores and log-sum-exp. Scratch for the scores and weights not asked for.
template <real T, class S>
constexpr void sdpa_exact_row(const char* where, std::size_t t, MatrixView<const T> Q, MatrixView<const T> K,
                    MatrixView<const T> V, const S& score, const attention_views<T>& out,
                    const options& row, std::vector<T>& scratch) {
  const std::size_t n = K.rows();
  if (scratch.size() < 2 * n) scratch = std::vector<T>(2 * n, T(0));  // (not resize: clang 14)
  const std::span<T> s = out.scores.rows() != 0 ? out.scores.row(t) : std::span<T>(scratch.data(), n);
  const std::span<T> w =
      out.weights.rows() != 0 ? out.weights.row(t) : std::span<T>(scratch.data() + n, n);
  attend_views<T>(where, Q.row(t), K, V, score, s, w, out.out.row(t), row);
  if (!out.logsumexp.empty()) out.logsumexp[t] = logsumexp(std::span<const T>(s), row);
}

/// Every row by sdpa_exact_row (constant evaluation, and scores that are not the dot family).
template <real T, class S>
constexpr void sdpa_by_rows(const char* where, MatrixView<const T> Q, MatrixView<const T> K,
                            MatrixView<const T> V, const S& score, const attention_views<T>& out,
                            const options& opt) {
  row_options row_opt(opt, Q.rows(), K.rows());
  std::vector<T> scratch;
  for (std::size_t t = 0; t < Q.rows(); ++t)
    sdpa_exact_row<T>(where, t, Q, K, V, score, out, row_opt(t), scratch);
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

/// scaled_dot_product_attention on views: checks, then the tiled kernel (dot-product scores,
/// keys up to 256 numbers long, at run time) with the rows it leaves taken exactly, or every row
/// exactly.
template <real T, class S>
constexpr void sdpa_views(const char* where, MatrixView<const T> Q, MatrixView<const T> K,
                          MatrixView<const T> V, const S& score, const attention_views<T>& out,
                          const options& opt) {
  check_many_queries<T>(where, Q, K, V, score, opt);
  check_attention_outputs<T>(where, out, Q.rows(), K.rows(), V.cols());
  if constexpr (dot_product_score<S, T>) {
    if (!std::is_constant_evaluated() && K.cols() <= 256) {
      row_options row_opt(opt, Q.rows(), K.rows());
      std::vector<T> scratch;
      tile_outputs<T> o{tile_of(out.out), tile_of(out.scores), tile_of(out.weights),
                        out.logsumexp.empty() ? nullptr : out.logsumexp.data()};
      tiled_forward<T>(tile_of(Q), tile_of(K), tile_of(V), score.template scale<T>(K.cols()),
                       static_cast<T>(opt.beta), tile_masks_of(opt, Q.rows(), K.rows()), o, 0,
                       Q.rows(), [&](std::size_t t) {
                         sdpa_exact_row<T>(where, t, Q, K, V, score, out, row_opt(t), scratch);
                       });
      return;
    }
  }
  sdpa_by_rows<T>(where, Q, K, V, score, out, opt);
}

}  // namespace detail

/// Y = softmax(β·Q Kᵀ·scale, masks) V into out.out, and the map's weights, its scores and each
/// row's log-sum-exp into those of `out` that have rows; `score` gives the scale (dot,
/// scaled_dot, dot_scaled_by{s}, or any score: others are computed row by row). Memory beyond
/// the inputs and outputs: O((MR + NB)·d) on the stack; nothing is allocated unless a row meets
/// a kept ±inf or NaN score or a non-finite value (it then takes attend's exact path). Sizes
/// are checked before anything is written (dimension_error naming the buffer).
template <matrix_like Qm, matrix_like Km, matrix_like Vm, class S>
  requires detail::matrix_of<Km, matrix_scalar_of<Qm>> && detail::matrix_of<Vm, matrix_scalar_of<Qm>> &&
      Score<S, matrix_scalar_of<Qm>>
constexpr void scaled_dot_product_attention(const Qm& Q, const Km& K, const Vm& V, const S& score,
                                            const attention_views<matrix_scalar_of<Qm>>& out,
                                            const options& opt = {}) {
  using T = matrix_scalar_of<Qm>;
  detail::sdpa_views<T>("attn::scaled_dot_product_attention", as_view(Q), as_view(K), as_view(V),
                        score, out, opt);
}

/// As above with scale = 1/√d_k (scaled_dot).
template <matrix_like Qm, matrix_like Km, matrix_like Vm>
  requires detail::matrix_of<Km, matrix_scalar_of<Qm>> && detail::matrix_of<Vm, matrix_scalar_of<Qm>>
constexpr void scaled_dot_product_attention(const Qm& Q, const Km& K, const Vm& V,
                                            const attention_views<matrix_scalar_of<Qm>>& out,
                                            const options& opt = {}) {
  scaled_dot_product_attention(Q, K, V, scaled_dot, out, opt);
}

/// Returns Y = softmax(β·Q Kᵀ·scale, masks) V and the log-sum-exp of each row (fixed sizes:
/// inline, no allocation, usable in constant expressions).
template <matrix_like Qm, matrix_like Km, matrix_like Vm, class S = scaled_dot_score>
  requires detail::matrix_of<Km, matrix_scalar_of<Qm>> && detail::matrix_of<Vm, matrix_scalar_of<Qm>> &&
      Score<S, matrix_scalar_of<Qm>>
[[nodiscard]] constexpr auto scaled_dot_product_attention(const Qm& Q, const Km& K, const Vm& V,
                                                          const options& opt = {},
                                                          const S& score = S{}) {
  using T = matrix_scalar_of<Qm>;
  constexpr std::size_t TQ = rows_of<Qm>, DV = cols_of<Vm>;
  const auto qv = as_view(Q);
  const auto vv = as_view(V);
  sdpa_result<T, TQ, DV> r{detail::zero_matrix<T, TQ, DV>(qv.rows(), vv.cols()),
                           detail::zero_vector<T, TQ>(qv.rows())};
  detail::sdpa_views<T>("attn::scaled_dot_product_attention", qv, as_view(K), vv, score,
                        attention_views<T>{.out = r.out.view(), .logsumexp = std::span<T>(r.logsumexp)},
                        opt);
  return r;
}

}  // namespace attn
