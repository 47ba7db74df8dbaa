#pragma once
/// \file attn/split.hpp
/// Split attention (flash-decoding): cut a long list of notes into chunks, run one pass over
/// each chunk (on as many threads as you like), merge the partial results in any grouping,
/// and finish. With m = max_j β s_j over the kept notes of a chunk, a chunk's partial result is
///
///   max = m,   sum = Σ_j exp(β s_j − m),   context = Σ_j exp(β s_j − m) v_j   (undivided),
///
/// and two of them merge into the partial result of both chunks read in one pass:
///
///   m = max(m_a, m_b),  f_a = exp(m_a − m),  f_b = exp(m_b − m),
///   sum = f_a sum_a + f_b sum_b,   context = f_a context_a + f_b context_b.
///
/// `finish` divides: c = context / sum — attend's context, up to rounding, with the same rules
/// (docs/attention.md): a chunk with nothing kept (empty, all masked, every score −inf) has
/// max = −inf, sum = 0 and merges as nothing; a kept +inf score makes max = +inf, sum the
/// number of such notes and context the sum of their values (they share the weight); a kept
/// NaN score makes max NaN and the context NaN. A note whose weight is exactly 0 never
/// contributes, even if its value holds inf or NaN. When no note is kept anywhere, `finish`
/// applies `options::if_all_masked`; for `uniform` every chunk must have been read under the
/// uniform policy too (the partial result then also carries Σ_j v_j over all its notes).
///
/// Two limits of this form, where attend itself gives the number: m must be a number of T, so
/// a chunk whose max comes from a finite score whose β·s overflows T (|β| > 1, |s| beyond
/// max/|β|: the rising β·s to +inf, or every kept one to −inf) gets the NaN partial result
/// (max, sum and context NaN), and the finished context is NaN — loud, where softmax takes
/// such scores as in exact arithmetic (docs/softmax.md); and the undivided context, and Σ_j v_j
/// under `uniform`, are sums of up to n values, which overflow to ±inf where the values sum
/// past T's largest number. attend has neither limit.
///
///   auto a = attn::attend_partial(q, notes_0_to_k, attn::dot);      // thread 1
///   auto b = attn::attend_partial(q, notes_k_to_n, attn::dot);      // thread 2
///   auto c = attn::finish(attn::merge(a, b));                       // = attend(q, notes).context

#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <utility>

#include "attn/attention.hpp"
#include "attn/detail/kernels.hpp"
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
  Vector<T, D> context{};                       ///< Σ_j exp(β s_j − m) v_j, not divided by sum
  std::size_t notes = 0;                        ///< how many notes the chunk had, kept or not
  Vector<T, D> values_sum{};   ///< Σ_j v_j over all the chunk's notes, if values_summed
  bool values_summed = false;  ///< read under `uniform` (every merged chunk was)
};

namespace detail {

/// c = Σ_j e_j v_j over the notes with e_j = exp(β s_j − m) ≠ 0 (masked: 0), skipping the others
/// entirely: the exact, slow path for values that hold inf or NaN.
template <real T, class S>
void exact_partial_context(const S& score, std::span<const T> q, MatrixView<const T> keys,
                           MatrixView<const T> values, T beta, const bool* mask, T m, T* c) {
  constexpr std::size_t B = online_block;
  const std::size_t n = keys.rows(), dv = values.cols();
  for (std::size_t i = 0; i < dv; ++i) c[i] = T(0);
  T s[B];
  T e[B];
  for (std::size_t j0 = 0; j0 < n; j0 += B) {
    const std::size_t nb = n - j0 < B ? n - j0 : B;
    score_all(score, q, row_block(keys, j0, nb), std::span<T>(s, nb));
    exp_shifted(s, e, nb, beta, m, mask == nullptr ? nullptr : mask + j0);
    for (std::size_t r = 0; r < nb; ++r)
      if (e[r] != T(0)) axpy(e[r], values.row(j0 + r).data(), c, dv);
  }
}

/// The NaN partial result: max, sum and the d_v numbers of c NaN.
template <real T>
void nan_partial(T& max, T& sum, T* c, std::size_t dv) noexcept {
  max = sum = std::numeric_limits<T>::quiet_NaN();
  for (std::size_t i = 0; i < dv; ++i) c[i] = std::numeric_limits<T>::quiet_NaN();
}

/// The partial result of a chunk in which some kept β·s is +inf or NaN: NaN for a kept NaN;
/// else the kept scores that are ±inf themselves with β·s = +inf share the weight; if none is
/// (only finite scores whose β·s overflowed), the NaN partial result (the file comment).
template <real T, class S>
void special_partial(const S& score, std::span<const T> q, MatrixView<const T> keys,
                     MatrixView<const T> values, T beta, const bool* mask, T& max, T& sum, T* c) {
  constexpr std::size_t B = online_block;
  constexpr T inf = std::numeric_limits<T>::infinity();
  const std::size_t n = keys.rows(), dv = values.cols();
  for (std::size_t i = 0; i < dv; ++i) c[i] = T(0);
  T s[B];
  std::size_t count = 0;
  for (std::size_t j0 = 0; j0 < n; j0 += B) {
    const std::size_t nb = n - j0 < B ? n - j0 : B;
    score_all(score, q, row_block(keys, j0, nb), std::span<T>(s, nb));
    for (std::size_t r = 0; r < nb; ++r) {
      if (mask != nullptr && !mask[j0 + r]) continue;
      const T y = beta * s[r];
      if (!(y == y)) {  // a kept NaN: the whole row is NaN
        nan_partial(max, sum, c, dv);
        return;
      }
      if (y == inf && (s[r] == inf || s[r] == -inf)) {  // (a finite s overflowed: weight 0 beside these)
        ++count;
        axpy(T(1), values.row(j0 + r).data(), c, dv);
      }
    }
  }
  if (count == 0) {  // the max is a finite score's β·s beyond T's range
    nan_partial(max, sum, c, dv);
    return;
  }
  max = inf;
  sum = static_cast<T>(count);
}

/// Whether a kept finite score's β·s overflows T to −inf (for a chunk whose kept β·s are all
/// −inf: then its max is not a number of T). Only |β| > 1 can overflow a finite score.
template <real T, class S>
bool score_overflows_to_minus_inf(const S& score, std::span<const T> q, MatrixView<const T> keys, T beta,
                                   const bool* mask) {
  if (!(beta > T(1) || beta < T(-1))) return false;
  constexpr std::size_t B = online_block;
  const std::size_t n = keys.rows();
  T s[B];
  for (std::size_t j0 = 0; j0 < n; j0 += B) {
    const std::size_t nb = n - j0 < B ? n - j0 : B;
    score_all(score, q, row_block(keys, j0, nb), std::span<T>(s, nb));
    for (std::size_t r = 0; r < nb; ++r)
      if ((mask == nullptr || mask[j0 + r]) && all_finite(s + r, 1) &&
          beta * s[r] == -std::numeric_limits<T>::infinity())
        return true;
  }
  return false;
}

/// One pass over a chunk into p. Sizes and β are checked first; then, for dynamic D,
/// p.context and (under `uniform`) p.values_sum are sized to d_v unless they already are, each
/// allocated before either is moved in: nothing allocates when they are sized, and p is left
/// untouched on a throw.
template <real T, std::size_t D, class S>
void attend_partial(const char* where, std::span<const T> q, MatrixView<const T> keys,
                    MatrixView<const T> values, const S& score, partial_attention<T, D>& p,
                    const options& opt) {
  score.check(q.size(), keys.cols());
  check_equal(where, "rows of values", values.rows(), "rows of keys", keys.rows());
  if constexpr (D != dynamic)
    check_equal(where, "context size", D, "columns of values", values.cols());
  if (!opt.mask.empty()) check_equal(where, "mask size", opt.mask.size(), "number of notes", keys.rows());
  check_beta<T>(where, opt);  // as attend: finite as a T
  const std::size_t dv = values.cols();
  if constexpr (D == dynamic) {
    const bool size_context = p.context.size() != dv;
    const bool size_sum =
        opt.if_all_masked == all_masked_policy::uniform && p.values_sum.size() != dv;
    Vector<T> context = size_context ? Vector<T>(dv) : Vector<T>();
    Vector<T> values_sum = size_sum ? Vector<T>(dv) : Vector<T>();
    if (size_context) p.context = std::move(context);
    if (size_sum) p.values_sum = std::move(values_sum);
  }
  const T beta = static_cast<T>(opt.beta);
  const bool* mask = opt.mask.empty() ? nullptr : opt.mask.data();
  T* c = p.context.data();
  for (std::size_t i = 0; i < dv; ++i) c[i] = T(0);
  T m = -std::numeric_limits<T>::infinity();
  sum_t<T> l = 0;
  if (keys.rows() != 0) {
    if (online_pass(score, q, keys, values, beta, mask, static_cast<T*>(nullptr), c, m, l)) {
      if (m != -std::numeric_limits<T>::infinity() && !all_finite(c, dv)) {
        exact_partial_context(score, q, keys, values, beta, mask, m, c);
      } else if (m == -std::numeric_limits<T>::infinity() &&
                 score_overflows_to_minus_inf(score, q, keys, beta, mask)) {
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
  p.values_summed = opt.if_all_masked == all_masked_policy::uniform;
  if (p.values_summed) {
    for (std::size_t i = 0; i < dv; ++i) p.values_sum[i] = T(0);
    for (std::size_t j = 0; j < keys.rows(); ++j) axpy(T(1), values.row(j).data(), p.values_sum.data(), dv);
  }
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
                                                                         const V& values, const S& score,
                                                                         const options& opt = {}) {
  using T = scalar_of<Q>;
  partial_attention<T, cols_of<V>> p{};
  detail::attend_partial<T>("attn::attend_partial", as_span(q), as_view(keys), as_view(values),
                            score, p, opt);
  return p;
}

/// One pass over a chunk of notes that are both keys and values.
template <vector_like Q, matrix_like N, class S>
  requires detail::attend_inputs<Q, N, N, S>
[[nodiscard]] partial_attention<scalar_of<Q>, cols_of<N>> attend_partial(const Q& q, const N& notes,
                                                                         const S& score,
                                                                         const options& opt = {}) {
  return attend_partial(q, notes, notes, score, opt);
}

/// One pass over a chunk of notes (keys and values) into `part`, a partial result the caller
/// keeps (one per thread, say, reused chunk after chunk): as attend_partial's result, to the
/// bit. It allocates nothing when part.context already holds d_v numbers (and, under
/// `uniform`, part.values_sum too); otherwise it sizes them first. Sizes that disagree throw
/// dimension_error and a non-finite β domain_error, with `part` left untouched.
template <vector_like Q, matrix_like K, matrix_like V, class S, real T, std::size_t D>
  requires detail::attend_inputs<Q, K, V, S> && std::same_as<T, scalar_of<Q>> &&
      compatible_extents<D, cols_of<V>>
void attend_partial(const Q& q, const K& keys, const V& values, const S& score,
                    partial_attention<T, D>& part, const options& opt = {}) {
  detail::attend_partial<T>("attn::attend_partial", as_span(q), as_view(keys), as_view(values),
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

/// a ⊕= b: the partial result of a's notes and b's notes together. Sizes must agree
/// (dimension_error otherwise). Merging is commutative and associative up to rounding.
template <real T, std::size_t D>
void merge_into(partial_attention<T, D>& a, const partial_attention<T, D>& b) {
  detail::check_equal("attn::merge", "context size", b.context.size(), "context size", a.context.size());
  const T m = (a.max != a.max || b.max != b.max) ? std::numeric_limits<T>::quiet_NaN()
                                                 : (a.max > b.max ? a.max : b.max);
  const T fa = detail::merge_factor(a.max, m), fb = detail::merge_factor(b.max, m);
  const std::size_t d = a.context.size();
  // a weight that underflows to 0 drops its notes entirely (0·inf would be NaN)
  if (fa != T(1)) {
    if (fa == T(0)) {
      for (std::size_t i = 0; i < d; ++i) a.context[i] = T(0);
    } else {
      detail::scale(a.context.data(), d, fa);
    }
  }
  if (fb != T(0)) detail::axpy(fb, b.context.data(), a.context.data(), d);
  a.sum = (fa == T(0) ? T(0) : fa * a.sum) + (fb == T(0) ? T(0) : fb * b.sum);
  a.max = m;
  a.notes += b.notes;
  a.values_summed = a.values_summed && b.values_summed;
  if (a.values_summed) detail::axpy(T(1), b.values_sum.data(), a.values_sum.data(), d);
}

/// The partial result of a's notes and b's notes together (see merge_into).
template <real T, std::size_t D>
[[nodiscard]] partial_attention<T, D> merge(partial_attention<T, D> a, const partial_attention<T, D>& b) {
  merge_into(a, b);
  return a;
}

/// Writes the context c = context/sum of a (merged) partial result into `context` (d_v numbers).
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
  constexpr T neg_inf = -std::numeric_limits<T>::infinity();
  if (p.max == neg_inf) {
    switch (opt.if_all_masked) {
      case all_masked_policy::zeros:
        for (std::size_t i = 0; i < d; ++i) out[i] = T(0);
        return;
      case all_masked_policy::uniform: {
        if (!p.values_summed)
          throw domain_error("attn::finish: the uniform policy needs every chunk read under it");
        detail::check_nonempty(where, "the notes", p.notes);
        const T inv = T(1) / static_cast<T>(p.notes);
        for (std::size_t i = 0; i < d; ++i) out[i] = p.values_sum[i] * inv;
        return;
      }
      case all_masked_policy::nan:
        for (std::size_t i = 0; i < d; ++i) out[i] = std::numeric_limits<T>::quiet_NaN();
        return;
      case all_masked_policy::throw_error: detail::throw_all_masked(where);
    }
  }
  const T inv = T(1) / p.sum;  // NaN max: sum and context are NaN already
  for (std::size_t i = 0; i < d; ++i) out[i] = p.context[i] * inv;
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
