#pragma once
/// \file attn/split.hpp
/// Split attention (flash-decoding): one pass over each chunk of the notes (on as many threads
/// as you like), partial results merged in any grouping, then finished. A chunk's partial result
/// is m = max_j β s_j (kept), sum = Σ_j exp(β s_j − m) and context = attend's context over the
/// chunk; two merge as m = max(m_a, m_b), w = exp(m_· − m) sum_·, context = Σ (w_·/Σw) context_·.
/// `finish` gives attend's context up to rounding, with attend's rules and two limits: the
/// formulas, the rules and the limits are in docs/attention.md.
///
///   auto a = attn::attend_partial(q, notes_0_to_k, attn::dot);      // thread 1
///   auto b = attn::attend_partial(q, notes_k_to_n, attn::dot);      // thread 2
///   auto c = attn::finish(attn::merge(a, b));                       // = attend(q, notes).context

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <utility>

#include "attn/attention.hpp"
#include "attn/detail/online.hpp"
#include "attn/detail/reduce.hpp"
#include "attn/detail/rows.hpp"
#include "attn/detail/softmax_row.hpp"
#include "attn/error.hpp"
#include "attn/extent.hpp"
#include "attn/matrix.hpp"
#include "attn/score.hpp"
#include "attn/softmax.hpp"
#include "attn/vector.hpp"

namespace attn {

/// The partial result of one pass over a chunk of notes (see the file comment); D is the
/// length of the values (d_v), fixed or dynamic.
template <real T, std::size_t D = dynamic>
struct partial_attention {
  T max = -std::numeric_limits<T>::infinity();  ///< m: max of β·s over kept notes
  T sum = 0;                                    ///< Σ_j exp(β s_j − m) over kept notes
  Vector<T, D> context{};  ///< Σ_j exp(β s_j − m) v_j / sum: the chunk's context (0 if none kept)
  std::size_t notes = 0;       ///< how many notes the chunk had, kept or not
  Vector<T, D> values_mean{};  ///< (1/notes) Σ_j v_j over all the chunk's notes, if has_values_mean
  bool has_values_mean = false;  ///< read under `uniform` (every merged chunk was)
};

namespace detail {

/// c = Σ_j (e_j · inv) v_j over the notes with e_j = exp(β s_j − m) (masked: 0) whose weight
/// e_j · inv is not 0, skipping the others entirely (inv = 1/Σ_j e_j): the weights normalized
/// first, as attend's two-pass path does, for a chunk whose one-pass sum Σ_j e_j v_j was not
/// finite (a value holding inf or NaN, or values whose sum overflows T).
template <real T, class S>
void normalized_partial_context(const S& score, std::span<const T> q, MatrixView<const T> keys,
                                MatrixView<const T> values, T beta, const mask_byte* mask, T m, T inv,
                                T* c) {
  const std::size_t dv = values.cols();
  fill(c, dv, T(0));
  for_each_score_block(score, q, keys, [&](std::size_t j0, std::size_t nb, const T* s) {
    T w[online_block];
    exp_shifted(s, w, nb, beta, m, mask == nullptr ? nullptr : mask + j0, inv);
    for (std::size_t r = 0; r < nb; ++r)
      if (w[r] != T(0)) axpy(w[r], values.row(j0 + r).data(), c, dv);
    return true;
  });
}

/// The NaN partial result: max, sum and the d_v numbers of c NaN.
template <real T>
void nan_partial(T& max, T& sum, T* c, std::size_t dv) noexcept {
  max = sum = std::numeric_limits<T>::quiet_NaN();
  for (std::size_t i = 0; i < dv; ++i) c[i] = std::numeric_limits<T>::quiet_NaN();
}

/// Calls visit(j) for each kept note j whose β·s_j is +inf from a score that is ±inf itself
/// (a finite s whose β·s overflowed has weight 0 beside these), in order; returns false, at
/// once, at a kept NaN β·s.
template <real T, class S, class F>
bool visit_infinite_scores(const S& score, std::span<const T> q, MatrixView<const T> keys, T beta,
                           const mask_byte* mask, F&& visit) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  return for_each_score_block(score, q, keys, [&](std::size_t j0, std::size_t nb, const T* s) {
    for (std::size_t r = 0; r < nb; ++r) {
      if (mask != nullptr && !mask[j0 + r]) continue;
      const T y = beta * s[r];
      if (!(y == y)) return false;
      if (y == inf && (s[r] == inf || s[r] == -inf)) visit(j0 + r);
    }
    return true;
  });
}

/// The partial result of a chunk in which some kept β·s is +inf or NaN: NaN for a kept NaN;
/// else the kept scores that are ±inf themselves with β·s = +inf share the weight, c the mean
/// of their values (each taken with weight 1/count, as softmax weighs them); if none is (only
/// finite scores whose β·s overflowed), the NaN partial result (the file comment).
template <real T, class S>
void special_partial(const S& score, std::span<const T> q, MatrixView<const T> keys,
                     MatrixView<const T> values, T beta, const mask_byte* mask, T& max, T& sum, T* c) {
  const std::size_t dv = values.cols();
  std::size_t count = 0;
  if (!visit_infinite_scores(score, q, keys, beta, mask, [&](std::size_t) { ++count; }) ||
      count == 0) {
    nan_partial(max, sum, c,
                dv);  // a kept NaN, or the max is a finite score's β·s beyond T's range
    return;
  }
  for (std::size_t i = 0; i < dv; ++i) c[i] = T(0);
  const T w = T(1) / static_cast<T>(count);
  visit_infinite_scores(score, q, keys, beta, mask,
                        [&](std::size_t j) { axpy(w, values.row(j).data(), c, dv); });
  max = std::numeric_limits<T>::infinity();
  sum = static_cast<T>(count);
}

/// Whether a kept finite score's β·s overflows T to −inf (for a chunk whose kept β·s are all
/// −inf: then its max is not a number of T). Only |β| > 1 can overflow a finite score.
template <real T, class S>
bool score_overflows_to_minus_inf(const S& score, std::span<const T> q, MatrixView<const T> keys,
                                  T beta, const mask_byte* mask) {
  if (!(beta > T(1) || beta < T(-1))) return false;
  return !for_each_score_block(score, q, keys, [&](std::size_t j0, std::size_t nb, const T* s) {
    for (std::size_t r = 0; r < nb; ++r)
      if ((mask == nullptr || mask[j0 + r]) && all_finite(s + r, 1) &&
          beta * s[r] == -std::numeric_limits<T>::infinity())
        return false;
    return true;
  });
}

/// One pass over a chunk into p. Sizes and β are checked first; then, for dynamic D,
/// p.context and (under `uniform`) p.values_mean are sized to d_v unless they already are, each
/// allocated before either is moved in: nothing allocates when they are sized, and p is left
/// untouched on a throw. The context is the one-pass sum divided as attend_online divides it,
/// so that it is attend's context to the bit wherever attend takes one pass.
template <real T, std::size_t D, class S, bool Committed = false>
void attend_partial_into(const char* where, std::span<const T> q, MatrixView<const T> keys,
                         MatrixView<const T> values, const S& score, partial_attention<T, D>& p,
                         const options& opt) {
  if constexpr (!Committed && scoring_may_throw<S, T>()) {
    // a score that may throw: into a result of our own, moved into p once it is whole
    partial_attention<T, D> own{};
    attend_partial_into<T, D, S, true>(where, q, keys, values, score, own, opt);
    p = std::move(own);
    return;
  }
  check_score<T>(where, score, q.size(), keys.cols());
  check_equal(where, "rows of values", values.rows(), "rows of keys", keys.rows());
  if constexpr (D != dynamic)
    check_equal(where, "context size", D, "columns of values", values.cols());
  if (!opt.mask.empty())
    check_equal(where, "mask size", opt.mask.size(), "number of notes", keys.rows());
  if (!opt.row_mask.empty()) throw_row_mask_one_row(where);
  check_beta<T>(where, opt);  // as attend: finite as a T
  check_buffers_apart<T>(
      where,
      {{"part.context", {p.context.data(), 1, p.context.size(), p.context.size()}},
       {"part.values_mean", {p.values_mean.data(), 1, p.values_mean.size(), p.values_mean.size()}}},
      {{"query", region_of(q)}, {"keys", region_of(keys)}, {"values", region_of(values)}}, opt);
  const std::size_t dv = values.cols();
  const bool uniform = opt.if_all_masked == all_masked_policy::uniform;
  if constexpr (D == dynamic) {
    const bool size_context = p.context.size() != dv;
    const bool size_mean = uniform && p.values_mean.size() != dv;
    Vector<T> context = size_context ? Vector<T>(dv) : Vector<T>();
    Vector<T> values_mean = size_mean ? Vector<T>(dv) : Vector<T>();
    if (size_context) p.context = std::move(context);
    if (size_mean) p.values_mean = std::move(values_mean);
  }
  constexpr T neg_inf = -std::numeric_limits<T>::infinity();
  const T beta = static_cast<T>(opt.beta);
  const mask_bytes mask_storage(opt.mask);
  const mask_byte* mask = mask_storage.data();
  T* c = p.context.data();
  online_state<T> st{.c = c, .dv = dv};
  fill(c, dv, T(0));
  T& m = st.m;
  sum_t<T>& l = st.l;
  if (keys.rows() != 0) {
    if (one_pass(score, q, keys, values, beta, mask, static_cast<T*>(nullptr), st,
                 static_cast<T*>(nullptr), static_cast<T*>(nullptr))) {
      if (m != neg_inf) {
        const T inv = online_reciprocal(st);  // as attend_online
        if (all_finite(c, dv)) {
          scale(c, dv, inv);
        } else {
          normalized_partial_context(score, q, keys, values, beta, mask, m, inv, c);
        }
      } else if (score_overflows_to_minus_inf(score, q, keys, beta, mask)) {
        T sum = 0;
        nan_partial(m, sum, c, dv);
        l = sum;
      }
    } else {
      T sum = 0;
      special_partial(score, q, keys, values, beta, mask, m, sum, c);
      l = sum;
    }
  }
  p.max = m;
  p.sum = static_cast<T>(l);
  p.notes = keys.rows();
  p.has_values_mean = uniform;
  if (uniform) {  // each value weighed 1/n, as softmax's uniform weights
    for (std::size_t i = 0; i < dv; ++i) p.values_mean[i] = T(0);
    const T w = keys.rows() == 0 ? T(0) : T(1) / static_cast<T>(keys.rows());
    for (std::size_t j = 0; j < keys.rows(); ++j)
      axpy(w, values.row(j).data(), p.values_mean.data(), dv);
  }
}

/// x = r_x x + r_y y, the two shares r_x + r_y = 1 (up to rounding): a share of 0 drops its
/// vector entirely (0·inf would be NaN), a share of 1 keeps it as it is. y_i is read before x_i
/// is written, so y may be x (a result merged with itself).
template <real T>
void convex_combine(T* x, T r_x, const T* y, T r_y, std::size_t d) noexcept {
  for (std::size_t i = 0; i < d; ++i) {
    const T yi = y[i];
    T xi = r_x == T(0) ? T(0) : r_x == T(1) ? x[i] : x[i] * r_x;
    if (r_y != T(0)) xi += r_y * yi;
    x[i] = xi;
  }
}

/// Throws dimension_error unless p's values_mean, read under `uniform`, has as many numbers as
/// its context: the fields are public, and a mean of another length would be read past its end.
template <real T, std::size_t D>
constexpr void check_values_mean(const char* where, const partial_attention<T, D>& p) {
  if (p.has_values_mean)
    check_equal(where, "size of the values' mean", p.values_mean.size(), "context size",
                p.context.size());
}

/// exp(from − to), taken as 1 when from == to (so −inf, +inf and equal maxima merge cleanly).
template <real T>
T merge_factor(T from, T to) {
  return from == to ? T(1) : attn::detail::exp(from - to);
}

}  // namespace detail

/// One pass over a chunk of notes (keys and values, which may differ) for query q: returns
/// the chunk's partial result. The chunk may be empty; opt.mask, if given, has one entry per
/// note of the chunk. Reads each note once (any score). Sizes that disagree throw
/// dimension_error, a non-finite β domain_error.
template <vector_like Q, matrix_like K, matrix_like V, class S>
  requires detail::attend_inputs<Q, K, V, S>
[[nodiscard]] partial_attention<scalar_of<Q>, cols_of<V>> attend_partial(const Q& q, const K& keys,
                                                                         const V& values,
                                                                         const S& score,
                                                                         const options& opt = {}) {
  using T = scalar_of<Q>;
  partial_attention<T, cols_of<V>> p{};
  detail::attend_partial_into<T>("attn::attend_partial", as_span(q), as_view(keys), as_view(values),
                                 score, p, opt);
  return p;
}

/// One pass over a chunk of notes that are both keys and values.
template <vector_like Q, matrix_like N, class S>
  requires detail::attend_inputs<Q, N, N, S>
[[nodiscard]] partial_attention<scalar_of<Q>, cols_of<N>>
attend_partial(const Q& q, const N& notes, const S& score, const options& opt = {}) {
  return attend_partial(q, notes, notes, score, opt);
}

/// One pass over a chunk of notes (keys and values) into `part`, a partial result the caller
/// keeps (one per thread, say, reused chunk after chunk): as attend_partial's result, to the
/// bit. It allocates nothing when part.context already holds d_v numbers (and, under
/// `uniform`, part.values_mean too); otherwise it sizes them first. Sizes that disagree throw
/// dimension_error and a non-finite β domain_error, with `part` left untouched.
template <vector_like Q, matrix_like K, matrix_like V, class S, real T, std::size_t D>
  requires detail::attend_inputs<Q, K, V, S> && std::same_as<T, scalar_of<Q>> &&
      compatible_extents<D, cols_of<V>>
void attend_partial(const Q& q, const K& keys, const V& values, const S& score,
                    partial_attention<T, D>& part, const options& opt = {}) {
  detail::attend_partial_into<T>("attn::attend_partial", as_span(q), as_view(keys), as_view(values),
                                 score, part, opt);
}

/// One pass over a chunk of notes that are both keys and values, into `part` (see above).
template <vector_like Q, matrix_like N, class S, real T, std::size_t D>
  requires detail::attend_inputs<Q, N, N, S> && std::same_as<T, scalar_of<Q>> &&
      compatible_extents<D, cols_of<N>>
void attend_partial(const Q& q, const N& notes, const S& score, partial_attention<T, D>& part,
                    const options& opt = {}) {
  attend_partial(q, notes, notes, score, part, opt);
}

/// a ⊕= b: the partial result of a's notes and b's notes together (the file comment: the
/// contexts weighed by w_a / sum and w_b / sum). Sizes must agree (dimension_error otherwise).
/// Merging is commutative and associative up to rounding.
template <real T, std::size_t D>
void merge_into(partial_attention<T, D>& a, const partial_attention<T, D>& b) {
  detail::check_equal("attn::merge_into", "size of b's context", b.context.size(),
                      "size of a's context", a.context.size());
  detail::check_values_mean("attn::merge_into", a);
  detail::check_values_mean("attn::merge_into", b);
  const std::size_t d = a.context.size();
  // b's numbers before a's change: b may be a itself (convex_combine reads y_i before x_i)
  const std::size_t b_notes = b.notes;
  const T b_max = b.max, b_sum = b.sum;
  a.has_values_mean = a.has_values_mean && b.has_values_mean;
  if (a.has_values_mean && b_notes != 0) {  // each mean weighed by its share of the notes
    const T total = static_cast<T>(a.notes + b_notes);
    detail::convex_combine(a.values_mean.data(), static_cast<T>(a.notes) / total,
                           b.values_mean.data(), static_cast<T>(b_notes) / total, d);
  }
  a.notes += b_notes;
  if (a.max != a.max || b_max != b_max) {
    detail::nan_partial(a.max, a.sum, a.context.data(), d);
    return;
  }
  const T m = a.max > b_max ? a.max : b_max;
  const T fa = detail::merge_factor(a.max, m), fb = detail::merge_factor(b_max, m);
  const T wa = fa == T(0) ? T(0) : fa * a.sum;  // (a chunk with nothing kept: sum 0, fa 0 or 1)
  const T wb = fb == T(0) ? T(0) : fb * b_sum;
  const T sum = wa + wb;
  if (sum != T(0))
    detail::convex_combine(a.context.data(), wa / sum, b.context.data(), wb / sum, d);
  a.sum = sum;  // (0 only when neither kept a note: a's context is then its zeros)
  a.max = m;
}

/// The partial result of a's notes and b's notes together (see merge_into).
template <real T, std::size_t D>
[[nodiscard]] partial_attention<T, D> merge(partial_attention<T, D> a,
                                            const partial_attention<T, D>& b) {
  detail::check_equal("attn::merge", "size of b's context", b.context.size(), "size of a's context",
                      a.context.size());
  merge_into(a, b);
  return a;
}

/// Writes the context of a (merged) partial result into `context` (d_v numbers): p.context.
/// When nothing was kept: zeros (policy zeros), the mean of all values (uniform; every chunk
/// must have been read under uniform, else domain_error), NaN (nan), or domain_error
/// (throw_error). Outputs are untouched on a throw.
template <real T, std::size_t D, mutable_vector_like COut>
  requires std::same_as<scalar_of<COut>, T> && compatible_extents<extent_of<COut>, D>
void finish(const partial_attention<T, D>& p, COut&& context, const options& opt = {}) {
  const auto out = as_mutable_span(context);
  const char* where = "attn::finish";
  const std::size_t d = p.context.size();
  detail::check_equal(where, "context size", out.size(), "size of the partial context", d);
  detail::check_values_mean(where, p);
  const T* from = p.context.data();  // (a NaN max: the context is NaN already)
  if (p.max == -std::numeric_limits<T>::infinity()) {
    switch (opt.if_all_masked) {
    case all_masked_policy::zeros:
      for (std::size_t i = 0; i < d; ++i) out[i] = T(0);
      return;
    case all_masked_policy::uniform:
      if (!p.has_values_mean)
        detail::raise<domain_error>(
            "attn::finish: the uniform policy needs every chunk read under it");
      detail::check_nonempty(where, "the notes", p.notes);
      from = p.values_mean.data();
      break;
    case all_masked_policy::nan:
      for (std::size_t i = 0; i < d; ++i) out[i] = std::numeric_limits<T>::quiet_NaN();
      return;
    case all_masked_policy::throw_error:
      detail::throw_all_masked(where);
    }
  }
  for (std::size_t i = 0; i < d; ++i) out[i] = from[i];
}

/// Returns the context of a (merged) partial result; see finish(p, context, opt).
template <real T, std::size_t D>
[[nodiscard]] Vector<T, D> finish(const partial_attention<T, D>& p, const options& opt = {}) {
  Vector<T, D> c{};
  if constexpr (D == dynamic) c = Vector<T>(p.context.size());
  finish(p, c, opt);
  return c;
}

}  // namespace attn
