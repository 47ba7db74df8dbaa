#pragma once
/// \file attn/jacobian.hpp
/// The Jacobian matrices of one look back's context, exact, for every score, with β and masks.
/// With s_j = score(q, k_j), α = softmax(β·s, mask), c = Σ_j α_j v_j and g_j = ∂s_j/∂k_j:
///
///   ∂c/∂h_j = α_j (I + β (h_j − c) g_jᵀ)                  notes that are keys and values
///   ∂c/∂k_j = β α_j (v_j − c) g_jᵀ,  ∂c/∂v_j = α_j I      keys ≠ values
///   ∂c/∂q   = β Σ_j α_j (v_j − c) (∂s_j/∂q)ᵀ
///
/// Backward (the vector-Jacobian products, no matrix formed) is attn/backward.hpp; the proofs
/// are in docs/derivatives.md. Rules: a masked note gets a zero Jacobian, whatever it holds; a
/// row whose weights do not move with the scores has zero score terms (under `uniform`,
/// ∂c/∂v_j = I/n); a NaN row gives NaN. Errors are attend's, checked before anything is written.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "attn/attention.hpp"
#include "attn/detail/rows.hpp"
#include "attn/detail/scratch.hpp"
#include "attn/error.hpp"
#include "attn/extent.hpp"
#include "attn/matrix.hpp"
#include "attn/score.hpp"
#include "attn/softmax.hpp"
#include "attn/vector.hpp"

namespace attn {
namespace detail {

template <class M, class T, std::size_t R, std::size_t C>
concept matrix_output_for = mutable_matrix_like<M> && std::same_as<matrix_scalar_of<M>, T> &&
    compatible_extents<rows_of<M>, R> && compatible_extents<cols_of<M>, C>;

/// The forward pass into scratch: α (n) and c (d_v). Returns whether the scores move the
/// weights (softmax's `finite` row kind); sizes must be checked.
template <real T, class S>
bool forward_pass(const char* where, const S& score, std::span<const T> q, MatrixView<const T> keys,
                  MatrixView<const T> values, std::span<T> alpha, std::span<T> c,
                  const options& opt) {
  const std::size_t n = keys.rows();
  score_all(score, q, keys, alpha);
  const bool flows = weights_move(softmax_row_kind(alpha.data(), n, opt));
  softmax_row(where, alpha.data(), alpha.data(), n, n, opt);
  blend<T>(alpha, values, c);
  return flows;
}

/// out = v_j − c. For the note with α_j > 1/2 it is formed as Σ_{k≠j} α_k (v_j − v_k) (equal,
/// since Σ_k α_k = 1), which stays accurate when α_j → 1 and v_j − c → 0.
template <real T>
void value_minus_context(std::size_t j, std::span<const T> alpha, MatrixView<const T> values,
                         std::span<const T> c, std::span<T> out) {
  const std::size_t d = values.cols();
  const T* vj = values.row(j).data();
  if (!(alpha[j] > T(0.5))) {
    for (std::size_t i = 0; i < d; ++i) out[i] = vj[i] - c[i];
    return;
  }
  fill(out.data(), d, T(0));
  for (std::size_t k = 0; k < values.rows(); ++k) {
    if (k == j || alpha[k] == T(0)) continue;
    const T* vk = values.row(k).data();
    for (std::size_t i = 0; i < d; ++i) out[i] += alpha[k] * (vj[i] - vk[i]);
  }
}

/// Refuses (overlap_error, naming both) a Jacobian buffer that overlaps the query, the keys, the
/// values (the notes, when they are both), the mask or the score's parameters.
template <real T, class S>
constexpr void check_jacobian_apart(const char* where, const S& score, std::span<const T> q,
                                    MatrixView<const T> keys, MatrixView<const T> values,
                                    bool notes, MatrixView<T> out, const options& opt) {
  named_region<T> inputs[6] = {{"query", region_of(q)},
                               {notes ? "notes" : "keys", region_of(keys)},
                               {notes ? "notes" : "values", region_of(values)}};
  std::size_t n_in = 3;
  if constexpr (requires { parameter_regions(score); })
    for (const named_region<T>& r : parameter_regions(score)) inputs[n_in++] = r;
  const named_region<T> outputs[1] = {{"the Jacobian", region_of(out)}};
  check_buffers_apart<T>(where, std::span<const named_region<T>>(outputs),
                         std::span<const named_region<T>>(inputs, n_in), opt);
}

/// Whether the members of S a Jacobian calls for scalar T may throw: its scoring, and
/// gradient_note (Note) or gradient_query (Query), unless declared noexcept.
template <class S, class T, bool Note, bool Query>
consteval bool jacobian_may_throw() {
  using Q = std::span<const T>;
  bool may = scoring_may_throw<S, T>();
  if constexpr (Note)
    may = may || !noexcept(std::declval<const S&>().gradient_note(
                     std::declval<Q>(), std::declval<Q>(), std::declval<std::span<T>>()));
  if constexpr (Query)
    may = may || !noexcept(std::declval<const S&>().gradient_query(
                     std::declval<Q>(), std::declval<Q>(), std::declval<std::span<T>>()));
  return may;
}

/// ∂c/∂k_j (keys ≠ values) or ∂c/∂h_j (add_identity: notes are keys and values) into out. For a
/// score that may throw (jacobian_may_throw), into a matrix of our own, copied into out at the end.
template <real T, std::size_t N, std::size_t DK, std::size_t DV, class S, bool Committed = false>
void jacobian_key_into(const char* where, const S& score, std::span<const T> q,
                       MatrixView<const T> keys, MatrixView<const T> values, std::size_t j,
                       MatrixView<T> out, bool add_identity, const options& opt) {
  if constexpr (!Committed && jacobian_may_throw<S, T, true, false>()) {
    // the overlap check on the caller's buffer: the calls below see only our own
    check_jacobian_apart<T>(where, score, q, keys, values, add_identity, out, opt);
    Matrix<T> own(out.rows(), out.cols());
    jacobian_key_into<T, N, DK, DV, S, true>(where, score, q, keys, values, j, own.view(),
                                            add_identity, opt);
    commit_to(own, out);
    return;
  }
  const std::size_t n = keys.rows(), dk = keys.cols(), dv = values.cols();
  check_attend<T>(where, q, keys, values, score, n, n, dv, opt);
  check_index(where, j, n);
  check_shape(where, "the Jacobian", out.rows(), out.cols(), dv, dk);
  check_jacobian_apart<T>(where, score, q, keys, values, add_identity, out, opt);
  // every scratch before anything is written (bad_alloc leaves out untouched)
  scratch<T, N> alpha(n);
  scratch<T, DV> c(dv);
  scratch<T, DK> g(dk);
  scratch<T, DV> d(dv);
  const bool flows = forward_pass<T>(where, score, q, keys, values, alpha.span(), c.span(), opt);
  const T aj = alpha[j];
  fill_rows(out.data(), out.rows(), out.cols(), out.row_stride(), T(0));
  if (aj == T(0)) return;  // masked (or no weight): c does not depend on this note
  if (!(aj == aj)) {       // a NaN row
    for (std::size_t i = 0; i < dv; ++i) fill(out.row(i).data(), dk, aj);
    return;
  }
  if (add_identity)
    for (std::size_t i = 0; i < dv; ++i) out(i, i) = aj;
  if (!flows) return;  // the weights do not move with the scores
  score.gradient_note(q, std::span<const T>(keys.row(j)), g.span());
  value_minus_context<T>(j, alpha.span(), values, c.span(), d.span());
  const T beta = static_cast<T>(opt.beta);
  for (std::size_t a = 0; a < dv; ++a)  // (a v_j − c that overflowed: g's zeros add nothing)
    axpy_gradient(product_or_zero(beta * aj, d[a]), g.span().data(), out.row(a).data(), dk);
}

/// ∂c/∂v_j = α_j I into out (a score that may throw: as jacobian_key_into).
template <real T, std::size_t N, std::size_t DV, class S, bool Committed = false>
void jacobian_value_into(const char* where, const S& score, std::span<const T> q,
                         MatrixView<const T> keys, MatrixView<const T> values, std::size_t j,
                         MatrixView<T> out, const options& opt) {
  if constexpr (!Committed && jacobian_may_throw<S, T, false, false>()) {
    // the overlap check on the caller's buffer: the calls below see only our own
    check_jacobian_apart<T>(where, score, q, keys, values, false, out, opt);
    Matrix<T> own(out.rows(), out.cols());
    jacobian_value_into<T, N, DV, S, true>(where, score, q, keys, values, j, own.view(), opt);
    commit_to(own, out);
    return;
  }
  const std::size_t n = keys.rows(), dv = values.cols();
  check_attend<T>(where, q, keys, values, score, n, n, dv, opt);
  check_index(where, j, n);
  check_shape(where, "the Jacobian", out.rows(), out.cols(), dv, dv);
  check_jacobian_apart<T>(where, score, q, keys, values, false, out, opt);
  scratch<T, N> alpha(n);
  score_all(score, q, keys, alpha.span());
  softmax_row(where, alpha.span().data(), alpha.span().data(), n, n, opt);
  const T aj = alpha[j];
  fill_rows(out.data(), out.rows(), out.cols(), out.row_stride(), T(0));
  if (!(aj == aj)) {
    for (std::size_t i = 0; i < dv; ++i) fill(out.row(i).data(), dv, aj);
    return;
  }
  for (std::size_t i = 0; i < dv; ++i) out(i, i) = aj;
}

/// ∂c/∂q = β Σ_j α_j (v_j − c)(∂s_j/∂q)ᵀ into out (d_v × d_q; a score that may throw: as
/// jacobian_key_into).
template <real T, std::size_t N, std::size_t DQ, std::size_t DV, class S, bool Committed = false>
void jacobian_query_into(const char* where, const S& score, std::span<const T> q,
                         MatrixView<const T> keys, MatrixView<const T> values, MatrixView<T> out,
                         const options& opt) {
  if constexpr (!Committed && jacobian_may_throw<S, T, false, true>()) {
    // the overlap check on the caller's buffer: the calls below see only our own
    check_jacobian_apart<T>(where, score, q, keys, values, keys.data() == values.data(), out, opt);
    Matrix<T> own(out.rows(), out.cols());
    jacobian_query_into<T, N, DQ, DV, S, true>(where, score, q, keys, values, own.view(), opt);
    commit_to(own, out);
    return;
  }
  const std::size_t n = keys.rows(), dq = q.size(), dv = values.cols();
  check_attend<T>(where, q, keys, values, score, n, n, dv, opt);
  check_shape(where, "the Jacobian", out.rows(), out.cols(), dv, dq);
  check_jacobian_apart<T>(where, score, q, keys, values, keys.data() == values.data(), out, opt);
  // every scratch before anything is written (bad_alloc leaves out untouched)
  scratch<T, N> alpha(n);
  scratch<T, DV> c(dv);
  scratch<T, DQ> gq(dq);
  scratch<T, DV> d(dv);
  const bool flows = forward_pass<T>(where, score, q, keys, values, alpha.span(), c.span(), opt);
  fill_rows(out.data(), out.rows(), out.cols(), out.row_stride(), T(0));
  if (!(alpha[0] == alpha[0])) {  // a NaN row is NaN throughout
    for (std::size_t i = 0; i < dv; ++i) fill(out.row(i).data(), dq, alpha[0]);
    return;
  }
  if (!flows) return;
  const T beta = static_cast<T>(opt.beta);
  for (std::size_t j = 0; j < n; ++j) {
    if (alpha[j] == T(0)) continue;
    score.gradient_query(q, std::span<const T>(keys.row(j)), gq.span());
    value_minus_context<T>(j, alpha.span(), values, c.span(), d.span());
    for (std::size_t a = 0; a < dv; ++a)
      axpy_gradient(product_or_zero(beta * alpha[j], d[a]), gq.span().data(), out.row(a).data(),
                    dq);
  }
}

}  // namespace detail

/// Writes ∂c/∂h_j = α_j (I + β (h_j − c) g_jᵀ), g_j = ∂s_j/∂h_j, for notes that are both keys
/// and values, into the d×d `out`. A masked note gets 0; see the file comment for all-masked
/// and NaN rows. Throws dimension_error on sizes that disagree or j ≥ n. Fixed sizes allocate
/// nothing; dynamic ones may allocate O(n + d) scratch.
template <vector_like Q, matrix_like N, class S, class Out>
  requires detail::attend_inputs<Q, N, N, S> &&
      detail::matrix_output_for<Out, scalar_of<Q>, cols_of<N>, cols_of<N>>
void jacobian_note(const Q& q, const N& notes, const S& score, std::size_t j, Out&& out,
                   const options& opt = {}) {
  using T = scalar_of<Q>;
  const auto nv = as_view(notes);
  detail::jacobian_key_into<T, rows_of<N>, cols_of<N>, cols_of<N>>(
      "attn::jacobian_note", score, as_span(q), nv, nv, j, as_mutable_view(out), true, opt);
}

/// Returns ∂c/∂h_j = α_j (I + β (h_j − c) g_jᵀ) as a d×d Matrix (fixed d: no allocation).
template <vector_like Q, matrix_like N, class S>
  requires detail::attend_inputs<Q, N, N, S>
[[nodiscard]] Matrix<scalar_of<Q>, cols_of<N>, cols_of<N>>
jacobian_note(const Q& q, const N& notes, const S& score, std::size_t j, const options& opt = {}) {
  using T = scalar_of<Q>;
  const auto nv = as_view(notes);
  auto out = detail::zero_matrix<T, cols_of<N>, cols_of<N>>(nv.cols(), nv.cols());
  jacobian_note(q, notes, score, j, out.view(), opt);
  return out;
}

/// Writes ∂c/∂k_j = β α_j (v_j − c) g_jᵀ (d_v × d_k), g_j = ∂s_j/∂k_j, into `out`. Rules and
/// errors as for jacobian_note.
template <vector_like Q, matrix_like K, matrix_like V, class S, class Out>
  requires detail::attend_inputs<Q, K, V, S> &&
      detail::matrix_output_for<Out, scalar_of<Q>, cols_of<V>, cols_of<K>>
void jacobian_key(const Q& q, const K& keys, const V& values, const S& score, std::size_t j,
                  Out&& out, const options& opt = {}) {
  using T = scalar_of<Q>;
  detail::jacobian_key_into<T, common_extent<rows_of<K>, rows_of<V>>, cols_of<K>, cols_of<V>>(
      "attn::jacobian_key", score, as_span(q), as_view(keys), as_view(values), j,
      as_mutable_view(out), false, opt);
}

/// Returns ∂c/∂k_j = β α_j (v_j − c) g_jᵀ as a d_v × d_k Matrix (fixed sizes: no allocation).
template <vector_like Q, matrix_like K, matrix_like V, class S>
  requires detail::attend_inputs<Q, K, V, S>
[[nodiscard]] Matrix<scalar_of<Q>, cols_of<V>, cols_of<K>>
jacobian_key(const Q& q, const K& keys, const V& values, const S& score, std::size_t j,
             const options& opt = {}) {
  using T = scalar_of<Q>;
  auto out =
      detail::zero_matrix<T, cols_of<V>, cols_of<K>>(as_view(values).cols(), as_view(keys).cols());
  jacobian_key(q, keys, values, score, j, out.view(), opt);
  return out;
}

/// Writes ∂c/∂v_j = α_j I (d_v × d_v) into `out`. Under `uniform` on an all-masked row this is
/// I/n; a masked note gets 0. Errors as for jacobian_note.
template <vector_like Q, matrix_like K, matrix_like V, class S, class Out>
  requires detail::attend_inputs<Q, K, V, S> &&
      detail::matrix_output_for<Out, scalar_of<Q>, cols_of<V>, cols_of<V>>
void jacobian_value(const Q& q, const K& keys, const V& values, const S& score, std::size_t j,
                    Out&& out, const options& opt = {}) {
  using T = scalar_of<Q>;
  detail::jacobian_value_into<T, common_extent<rows_of<K>, rows_of<V>>, cols_of<V>>(
      "attn::jacobian_value", score, as_span(q), as_view(keys), as_view(values), j,
      as_mutable_view(out), opt);
}

/// Returns ∂c/∂v_j = α_j I as a d_v × d_v Matrix (fixed sizes: no allocation).
template <vector_like Q, matrix_like K, matrix_like V, class S>
  requires detail::attend_inputs<Q, K, V, S>
[[nodiscard]] Matrix<scalar_of<Q>, cols_of<V>, cols_of<V>>
jacobian_value(const Q& q, const K& keys, const V& values, const S& score, std::size_t j,
               const options& opt = {}) {
  using T = scalar_of<Q>;
  const std::size_t dv = as_view(values).cols();
  auto out = detail::zero_matrix<T, cols_of<V>, cols_of<V>>(dv, dv);
  jacobian_value(q, keys, values, score, j, out.view(), opt);
  return out;
}

/// Writes ∂c/∂q = β Σ_j α_j (v_j − c)(∂s_j/∂q)ᵀ (d_v × d_q) into `out`. Zero on a row whose
/// weights do not move with the scores; errors as for jacobian_note.
template <vector_like Q, matrix_like K, matrix_like V, class S, class Out>
  requires detail::attend_inputs<Q, K, V, S> &&
      detail::matrix_output_for<Out, scalar_of<Q>, cols_of<V>, extent_of<Q>>
void jacobian_query(const Q& q, const K& keys, const V& values, const S& score, Out&& out,
                    const options& opt = {}) {
  using T = scalar_of<Q>;
  detail::jacobian_query_into<T, common_extent<rows_of<K>, rows_of<V>>, extent_of<Q>, cols_of<V>>(
      "attn::jacobian_query", score, as_span(q), as_view(keys), as_view(values),
      as_mutable_view(out), opt);
}

/// Returns ∂c/∂q = β Σ_j α_j (v_j − c)(∂s_j/∂q)ᵀ as a d_v × d_q Matrix (fixed: no allocation).
template <vector_like Q, matrix_like K, matrix_like V, class S>
  requires detail::attend_inputs<Q, K, V, S>
[[nodiscard]] Matrix<scalar_of<Q>, cols_of<V>, extent_of<Q>>
jacobian_query(const Q& q, const K& keys, const V& values, const S& score,
               const options& opt = {}) {
  using T = scalar_of<Q>;
  auto out =
      detail::zero_matrix<T, cols_of<V>, extent_of<Q>>(as_view(values).cols(), as_span(q).size());
  jacobian_query(q, keys, values, score, out.view(), opt);
  return out;
}

/// Writes ∂c/∂q = β Σ_j α_j (h_j − c)(∂s_j/∂q)ᵀ (d × d_q) for notes that are keys and values.
template <vector_like Q, matrix_like N, class S, class Out>
  requires detail::attend_inputs<Q, N, N, S> &&
      detail::matrix_output_for<Out, scalar_of<Q>, cols_of<N>, extent_of<Q>>
void jacobian_query(const Q& q, const N& notes, const S& score, Out&& out,
                    const options& opt = {}) {
  jacobian_query(q, notes, notes, score, std::forward<Out>(out), opt);
}

/// Returns ∂c/∂q = β Σ_j α_j (h_j − c)(∂s_j/∂q)ᵀ for notes that are keys and values.
template <vector_like Q, matrix_like N, class S>
  requires detail::attend_inputs<Q, N, N, S>
[[nodiscard]] Matrix<scalar_of<Q>, cols_of<N>, extent_of<Q>>
jacobian_query(const Q& q, const N& notes, const S& score, const options& opt = {}) {
  return jacobian_query(q, notes, notes, score, opt);
}

// ---------------------------------------------------------------------------------------------
// Row t of many queries (align, scaled_dot_product_attention): attend's Jacobians with row t's
// mask (opt.mask, row t of opt.row_mask, causal), y_t = Σ_j α_tj v_j.
// ---------------------------------------------------------------------------------------------

namespace detail {
/// Checks opt's masks against T queries over n keys and t < T; returns row t's options.
template <class Q, class K>
[[nodiscard]] const options& row_of(const char* where, row_options& rows, const Q& queries, const K& keys,
                                    std::size_t t, const options& opt) {
  check_masks(where, opt, as_view(queries).rows(), as_view(keys).rows());
  if (t >= as_view(queries).rows())
    attn::detail::raise<dimension_error>(std::string(where) + ": query index " + std::to_string(t) +
                                         " is out of range for " +
                                         std::to_string(as_view(queries).rows()) + " queries");
  return rows(t);
}
}  // namespace detail

/// Writes ∂y_t/∂q_t = β Σ_j α_tj (v_j − y_t)(∂s_tj/∂q_t)ᵀ (d_v × d_q) for query row t of
/// `queries` over keys and values, with row t's masks, into `out`. Errors as jacobian_query's,
/// and dimension_error unless t < T.
template <matrix_like Qs, matrix_like K, matrix_like V, class S, class Out>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, K, V, S> &&
      detail::matrix_output_for<Out, matrix_scalar_of<Qs>, cols_of<V>, cols_of<Qs>>
void jacobian_query(const Qs& queries, const K& keys, const V& values, const S& score,
                    std::size_t t, Out&& out, const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  const char* where = "attn::jacobian_query";
  detail::row_options rows(opt, as_view(queries).rows(), as_view(keys).rows());
  const options& row = detail::row_of(where, rows, queries, keys, t, opt);
  detail::jacobian_query_into<T, dynamic, dynamic, dynamic>(
      where, score, std::span<const T>(as_view(queries).row(t)), MatrixView<const T>(as_view(keys)),
      MatrixView<const T>(as_view(values)), MatrixView<T>(as_mutable_view(out)), row);
}

/// Writes ∂y_t/∂k_j = β α_tj (v_j − y_t)(∂s_tj/∂k_j)ᵀ (d_v × d_k) for query row t, with row t's
/// masks, into `out`.
template <matrix_like Qs, matrix_like K, matrix_like V, class S, class Out>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, K, V, S> &&
      detail::matrix_output_for<Out, matrix_scalar_of<Qs>, cols_of<V>, cols_of<K>>
void jacobian_key(const Qs& queries, const K& keys, const V& values, const S& score, std::size_t t,
                  std::size_t j, Out&& out, const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  const char* where = "attn::jacobian_key";
  detail::row_options rows(opt, as_view(queries).rows(), as_view(keys).rows());
  const options& row = detail::row_of(where, rows, queries, keys, t, opt);
  detail::jacobian_key_into<T, dynamic, dynamic, dynamic>(
      where, score, std::span<const T>(as_view(queries).row(t)), MatrixView<const T>(as_view(keys)),
      MatrixView<const T>(as_view(values)), j, MatrixView<T>(as_mutable_view(out)), false, row);
}

/// Writes ∂y_t/∂v_j = α_tj I (d_v × d_v) for query row t, with row t's masks, into `out`.
template <matrix_like Qs, matrix_like K, matrix_like V, class S, class Out>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, K, V, S> &&
      detail::matrix_output_for<Out, matrix_scalar_of<Qs>, cols_of<V>, cols_of<V>>
void jacobian_value(const Qs& queries, const K& keys, const V& values, const S& score,
                    std::size_t t, std::size_t j, Out&& out, const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  const char* where = "attn::jacobian_value";
  detail::row_options rows(opt, as_view(queries).rows(), as_view(keys).rows());
  const options& row = detail::row_of(where, rows, queries, keys, t, opt);
  detail::jacobian_value_into<T, dynamic, dynamic>(
      where, score, std::span<const T>(as_view(queries).row(t)), MatrixView<const T>(as_view(keys)),
      MatrixView<const T>(as_view(values)), j, MatrixView<T>(as_mutable_view(out)), row);
}

}  // namespace attn
