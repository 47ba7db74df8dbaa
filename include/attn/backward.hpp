#pragma once
/// \file attn/backward.hpp
/// Backward through one look back (and through an alignment map): the vector-Jacobian products
/// in O(n·d + parameters), for every score, with β and masks. With s_j = score(q, k_j),
/// α = softmax(β·s, mask), c = Σ_j α_j v_j, g = ∂L/∂c and u_j = ⟨g, v_j⟩ = ∂L/∂α_j:
///
///   ∂L/∂s_j = β α_j (u_j − ⟨g, c⟩)   (softmax's backward step, attn/softmax.hpp)
///   ∂L/∂v_j = α_j g,   ∂L/∂k_j = (∂L/∂s_j) ∂s_j/∂k_j,   ∂L/∂q = Σ_j (∂L/∂s_j) ∂s_j/∂q,
///   ∂L/∂θ = Σ_j (∂L/∂s_j) ∂s_j/∂θ,   and for notes that are keys and values ∂L/∂h_j the sum.
///
/// Backward takes what the forward saved: nothing (the scores and softmax are recomputed), its
/// weights, or its weights and context (saved_forward, or the attention_result itself). It
/// writes into the caller's views (backward_views), each of which may be left out and each
/// overwritten or added to, or returns the gradients (backward_result). Rules
/// (docs/derivatives.md): a masked note gets exactly 0, whatever it holds; a row whose weights do
/// not move with the scores (all masked, a kept +inf) has zero score terms, and under `uniform`
/// ∂L/∂v_j = g/n; a NaN row gives NaN. Sizes are checked, and scratch made, before anything is
/// written.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "attn/attention.hpp"
#include "attn/detail/reduce.hpp"
#include "attn/detail/rows.hpp"
#include "attn/detail/scratch.hpp"
#include "attn/detail/simd.hpp"
#include "attn/error.hpp"
#include "attn/extent.hpp"
#include "attn/matrix.hpp"
#include "attn/score.hpp"
#include "attn/softmax.hpp"
#include "attn/vector.hpp"

namespace attn {

/// What `backward` returns for keys ≠ values (row j of a matrix belongs to note j).
template <real T, std::size_t DQ = dynamic, std::size_t N = dynamic, std::size_t DK = dynamic,
          std::size_t DV = dynamic, class P = no_parameters>
struct backward_result {
  Vector<T, N> scores;      ///< ∂L/∂s_j = β α_j ⟨g, v_j − c⟩
  Vector<T, DQ> query;      ///< ∂L/∂q = Σ_j (∂L/∂s_j) ∂s_j/∂q
  Matrix<T, N, DK> keys;    ///< ∂L/∂k_j = (∂L/∂s_j) ∂s_j/∂k_j
  Matrix<T, N, DV> values;  ///< ∂L/∂v_j = α_j g
  P parameters;             ///< ∂L/∂θ = Σ_j (∂L/∂s_j) ∂s_j/∂θ
};

/// What `backward` returns when the notes are both keys and values.
template <real T, std::size_t DQ = dynamic, std::size_t N = dynamic, std::size_t D = dynamic,
          class P = no_parameters>
struct notes_backward_result {
  Vector<T, N> scores;    ///< ∂L/∂s_j = β α_j ⟨g, h_j − c⟩
  Vector<T, DQ> query;    ///< ∂L/∂q = Σ_j (∂L/∂s_j) ∂s_j/∂q
  Matrix<T, N, D> notes;  ///< ∂L/∂h_j = α_j g + (∂L/∂s_j) ∂s_j/∂h_j
  P parameters;           ///< ∂L/∂θ = Σ_j (∂L/∂s_j) ∂s_j/∂θ
};

/// What `align_backward` returns for T queries over keys ≠ values (row t of `scores` and
/// `queries` belongs to query t; the note gradients are summed over the queries).
template <real T, std::size_t TQ = dynamic, std::size_t DQ = dynamic, std::size_t N = dynamic,
          std::size_t DK = dynamic, std::size_t DV = dynamic, class P = no_parameters>
struct align_backward_result {
  Matrix<T, TQ, N> scores;    ///< ∂L/∂s_tj = β α_tj ⟨g_t, v_j − c_t⟩
  Matrix<T, TQ, DQ> queries;  ///< ∂L/∂q_t = Σ_j (∂L/∂s_tj) ∂s_tj/∂q_t
  Matrix<T, N, DK> keys;      ///< ∂L/∂k_j = Σ_t (∂L/∂s_tj) ∂s_tj/∂k_j
  Matrix<T, N, DV> values;    ///< ∂L/∂v_j = Σ_t α_tj g_t
  P parameters;               ///< ∂L/∂θ = Σ_t Σ_j (∂L/∂s_tj) ∂s_tj/∂θ
};

/// What `align_backward` returns for T queries over notes that are both keys and values.
template <real T, std::size_t TQ = dynamic, std::size_t DQ = dynamic, std::size_t N = dynamic,
          std::size_t D = dynamic, class P = no_parameters>
struct align_notes_backward_result {
  Matrix<T, TQ, N> scores;    ///< ∂L/∂s_tj = β α_tj ⟨g_t, h_j − c_t⟩
  Matrix<T, TQ, DQ> queries;  ///< ∂L/∂q_t = Σ_j (∂L/∂s_tj) ∂s_tj/∂q_t
  Matrix<T, N, D> notes;      ///< ∂L/∂h_j = Σ_t [α_tj g_t + (∂L/∂s_tj) ∂s_tj/∂h_j]
  P parameters;               ///< ∂L/∂θ = Σ_t Σ_j (∂L/∂s_tj) ∂s_tj/∂θ
};

/// Where `backward` writes for keys ≠ values: views of the caller's memory. A view with no
/// rows (the default) leaves that gradient out. ∂L/∂s is overwritten; ∂L/∂q, ∂L/∂k and ∂L/∂v
/// are overwritten, or added to with `accumulate`; ∂L/∂θ (a score's gradient_view) is added to.
template <real T, class P = no_parameters>
struct backward_views {
  std::span<T> scores{};    ///< ∂L/∂s (n)
  std::span<T> query{};     ///< ∂L/∂q (d_q)
  MatrixView<T> keys{};     ///< ∂L/∂k (n × d_k)
  MatrixView<T> values{};   ///< ∂L/∂v (n × d_v)
  P parameters{};           ///< ∂L/∂θ, added to (no_parameters: none)
  bool accumulate = false;  ///< add ∂L/∂q, ∂L/∂k and ∂L/∂v to what the views hold
};

/// Where `backward` writes when the notes are both keys and values (see backward_views).
template <real T, class P = no_parameters>
struct notes_backward_views {
  std::span<T> scores{};    ///< ∂L/∂s (n)
  std::span<T> query{};     ///< ∂L/∂q (d_q)
  MatrixView<T> notes{};    ///< ∂L/∂h (n × d)
  P parameters{};           ///< ∂L/∂θ, added to
  bool accumulate = false;  ///< add ∂L/∂q and ∂L/∂h to what the views hold
};

/// Where `align_backward` writes for T queries over keys ≠ values (see backward_views; row t of
/// scores and queries belongs to query t, the note gradients are summed over the queries).
template <real T, class P = no_parameters>
struct align_backward_views {
  MatrixView<T> scores{};   ///< ∂L/∂s (T × n)
  MatrixView<T> queries{};  ///< ∂L/∂q_t (T × d_q)
  MatrixView<T> keys{};     ///< ∂L/∂k (n × d_k)
  MatrixView<T> values{};   ///< ∂L/∂v (n × d_v)
  P parameters{};           ///< ∂L/∂θ, added to
  bool accumulate = false;  ///< add ∂L/∂q_t, ∂L/∂k and ∂L/∂v to what the views hold
};

/// Where `align_backward` writes for T queries over notes that are keys and values.
template <real T, class P = no_parameters>
struct align_notes_backward_views {
  MatrixView<T> scores{};   ///< ∂L/∂s (T × n)
  MatrixView<T> queries{};  ///< ∂L/∂q_t (T × d_q)
  MatrixView<T> notes{};    ///< ∂L/∂h (n × d)
  P parameters{};           ///< ∂L/∂θ, added to
  bool accumulate = false;  ///< add ∂L/∂q_t and ∂L/∂h to what the views hold
};

/// What the forward pass kept for backward, as autograd keeps softmax's output: its weights α,
/// and optionally its context c. They are taken as given (they should be one attend's): see
/// docs/derivatives.md for what backward then computes, and when the context buys one pass.
template <real T>
struct saved_forward {
  std::span<const T> weights{};  ///< α (n)
  std::span<const T> context{};  ///< c (d_v), or empty
};

namespace detail {

template <class F, class T>
struct is_saved_forward : std::false_type {};
template <class T>
struct is_saved_forward<saved_forward<T>, T> : std::true_type {};
template <class T, std::size_t N, std::size_t D>
struct is_saved_forward<attention_result<T, N, D>, T> : std::true_type {};

}  // namespace detail

/// What backward accepts as the forward's record for scalar T: a saved_forward<T>, or the
/// attention_result attend returned (its weights and context).
template <class F, class T>
concept forward_record = detail::is_saved_forward<std::remove_cvref_t<F>, T>::value;

namespace detail {

/// The forward's record as views.
template <real T, class F>
[[nodiscard]] constexpr saved_forward<T> saved_views(const F& f) noexcept {
  if constexpr (std::same_as<std::remove_cvref_t<F>, saved_forward<T>>)
    return f;
  else
    return {std::span<const T>(f.weights), std::span<const T>(f.context)};
}

/// The gradients as the backward steps take them: views (no rows: left out), keys and values the
/// same view when the notes are both (`notes`), ∂L/∂θ by pointer (null: none).
template <real T, class P>
struct gradient_sink {
  std::span<T> scores;
  std::span<T> query;
  MatrixView<T> keys;
  MatrixView<T> values;
  P* parameters;
  bool notes;
  bool accumulate;
};

/// Whether score_backward goes note by note for S (no batched accumulate_gradients for these
/// arguments): it then needs ∂s/∂h and ∂s/∂q of one note in scratch.
template <class S, class T, class P>
inline constexpr bool note_by_note =
    !((!std::same_as<P, no_parameters> &&
       requires(const S& s, std::span<const T> q, MatrixView<const T> k, std::span<const T> a,
                std::span<T> g, MatrixView<T> gk,
                P& p) { s.accumulate_gradients(q, k, a, g, gk, p); }) ||
      batched_gradient_score<S, T>);

/// Whether the members of S that backward calls for scalar T (and ∂L/∂θ of type P) may throw:
/// scoring_may_throw, and the members score_backward calls — accumulate_gradients (with P when
/// it takes one), else gradient_note and gradient_query, and accumulate_parameter_gradient —
/// unless declared noexcept. attn's scores cannot throw there.
template <class S, class T, class P>
consteval bool gradients_may_throw() {
  using Q = std::span<const T>;
  using K = MatrixView<const T>;
  if (scoring_may_throw<S, T>()) return true;
  if constexpr (!std::same_as<P, no_parameters> &&
                requires(const S& s, P& p) {
                  s.accumulate_gradients(std::declval<Q>(), std::declval<K>(), std::declval<Q>(),
                                         std::declval<std::span<T>>(), std::declval<MatrixView<T>>(),
                                         p);
                }) {
    return !noexcept(std::declval<const S&>().accumulate_gradients(
        std::declval<Q>(), std::declval<K>(), std::declval<Q>(), std::declval<std::span<T>>(),
        std::declval<MatrixView<T>>(), std::declval<P&>()));
  } else {
    bool may = false;
    if constexpr (batched_gradient_score<S, T>)
      may = !noexcept(std::declval<const S&>().accumulate_gradients(
          std::declval<Q>(), std::declval<K>(), std::declval<Q>(), std::declval<std::span<T>>(),
          std::declval<MatrixView<T>>()));
    else
      may = !noexcept(std::declval<const S&>().gradient_note(std::declval<Q>(), std::declval<Q>(),
                                                             std::declval<std::span<T>>())) ||
            !noexcept(std::declval<const S&>().gradient_query(std::declval<Q>(), std::declval<Q>(),
                                                              std::declval<std::span<T>>()));
    if constexpr (!std::same_as<P, no_parameters>) {
      if constexpr (requires(const S& s, P& p) {
                      s.accumulate_parameter_gradient(std::declval<Q>(), std::declval<K>(),
                                                      std::declval<Q>(), p);
                    })
        may = may || !noexcept(std::declval<const S&>().accumulate_parameter_gradient(
                         std::declval<Q>(), std::declval<K>(), std::declval<Q>(),
                         std::declval<P&>()));
      else
        may = may || !noexcept(std::declval<const S&>().accumulate_parameter_gradient(
                         std::declval<Q>(), std::declval<Q>(), T{}, std::declval<P&>()));
    }
    return may;
  }
}

/// The scratch of score_backward's note-by-note form (∂s/∂h and ∂s/∂q of one note), made
/// before anything is written.
template <class T, std::size_t DQ, std::size_t DK>
struct note_scratch {
  scratch<T, DK> note;
  scratch<T, DQ> query;
  note_scratch(std::size_t dk, std::size_t dq) : note(dk), query(dq) {}
};

/// What scores with batched gradients get instead: nothing.
struct no_note_scratch {
  no_note_scratch(std::size_t, std::size_t) noexcept {}
};

template <class S, class T, class P, std::size_t DQ, std::size_t DK>
using note_scratch_for =
    std::conditional_t<note_by_note<S, T, P>, note_scratch<T, DQ, DK>, no_note_scratch>;

/// The score's step of backward: grad_q += Σ_j a_j ∂s_j/∂q, grad_keys_j += a_j ∂s_j/∂k_j and
/// (grads ≠ null) ∂L/∂θ += Σ_j a_j ∂s_j/∂θ, through the score's batched members when it has them,
/// else note by note through gradient_note / gradient_query. Notes with a_j = 0 are skipped.
template <real T, std::size_t DQ, std::size_t DK, class S, class P, class NS>
void score_backward(const S& s, std::span<const T> q, MatrixView<const T> keys,
                    std::span<const T> a, std::span<T> gq, MatrixView<T> gk, P* grads, NS* ns) {
  constexpr bool with_parameters = !std::same_as<P, no_parameters>;
  if constexpr (with_parameters &&
                requires { s.accumulate_gradients(q, keys, a, gq, gk, *grads); }) {
    s.accumulate_gradients(q, keys, a, gq, gk, *grads);
  } else {
    if constexpr (batched_gradient_score<S, T>) {
      s.accumulate_gradients(q, keys, a, gq, gk);
    } else {
      static_assert(std::same_as<NS, note_scratch<T, DQ, DK>>);
      const std::span<T> gh = ns->note.span(), gqj = ns->query.span();
      for (std::size_t j = 0; j < keys.rows(); ++j) {
        if (a[j] == T(0)) continue;
        const std::span<const T> h = keys.row(j);
        s.gradient_note(q, h, gh);
        axpy_gradient(a[j], gh.data(), gk.row(j).data(), keys.cols());
        s.gradient_query(q, h, gqj);
        axpy_gradient(a[j], gqj.data(), gq.data(), q.size());
      }
    }
    if constexpr (with_parameters) {
      if constexpr (requires { s.accumulate_parameter_gradient(q, keys, a, *grads); }) {
        s.accumulate_parameter_gradient(q, keys, a, *grads);
      } else {
        for (std::size_t j = 0; j < keys.rows(); ++j)
          if (a[j] != T(0))
            s.accumulate_parameter_gradient(q, std::span<const T>(keys.row(j)), a[j], *grads);
      }
    }
  }
}

/// backward of one query for any score, from weights α that move with the scores or not
/// (flows): ∂L/∂v_j += α_j g (gv: may be left out), ∂L/∂s into gs (softmax_backward_row; gs may
/// hold α, or u), then score_backward into gq, gk and ∂L/∂θ. u(k) = ⟨g, v_k⟩. The caller zeroes
/// what is overwritten and gives every view score_backward writes.
template <real T, std::size_t DQ, std::size_t DK, class S, class P, class U, class NS>
void backward_any_score(const S& score, std::span<const T> q, MatrixView<const T> keys,
                        const T* alpha, U&& u, bool flows, std::span<const T> gc, std::span<T> gs,
                        std::span<T> gq, MatrixView<T> gk, MatrixView<T> gv, P* grads, T beta,
                        NS* ns) {
  const std::size_t n = keys.rows();
  if (gv.rows() != 0)
    for (std::size_t j = 0; j < n; ++j)  // masked (α_j = 0): nothing flows, whatever the note holds
      if (alpha[j] != T(0)) axpy(alpha[j], gc.data(), gv.row(j).data(), gv.cols());
  softmax_backward_row(alpha, u, n, beta, flows, gs.data());
  score_backward<T, DQ, DK>(score, q, keys, std::span<const T>(gs), gq, gk, grads, ns);
}

/// Row j's gradients for a dot-product score: ∂L/∂v_j = α_j g and ∂L/∂k_j = a_j f q (af = a_j f),
/// or for notes that are keys and values (vj == kj) their sum ∂L/∂h_j; written, or added to
/// (Accumulate). A note of weight 0 gets nothing (zeros when written); a_j = 0 adds no multiple
/// of q (0·inf would be NaN). vj or kj null: left out. With Overflowed (a block in which some
/// a_j f overflowed to ±inf), such an a_j f adds nothing at q's zeros either.
template <bool Accumulate, bool Notes, class T, bool Overflowed = false>
ATTN_ALWAYS_INLINE constexpr void dot_product_gradient_row(T alpha, T a, T af, const T* g,
                                                           const T* q, std::size_t dk,
                                                           std::size_t dv, T* vj, T* kj) noexcept {
  const auto put = [](T& y, T x) {
    if constexpr (Accumulate)
      y += x;
    else
      y = x;
  };
  const auto times_q = [af](T qi) {
    if constexpr (Overflowed)
      return product_or_zero(af, qi);
    else
      return af * qi;
  };
  if (alpha == T(0)) {
    if constexpr (!Accumulate) {
      if (vj != nullptr) fill(vj, dv, T(0));
      if (!Notes && kj != nullptr) fill(kj, dk, T(0));
    }
    return;
  }
  if constexpr (Notes) {
    if (vj == nullptr) return;
    if (a == T(0)) {
      for (std::size_t i = 0; i < dv; ++i) put(vj[i], alpha * g[i]);
    } else {
      for (std::size_t i = 0; i < dv; ++i) put(vj[i], alpha * g[i] + times_q(q[i]));
    }
  } else {
    if (vj != nullptr)
      for (std::size_t i = 0; i < dv; ++i) put(vj[i], alpha * g[i]);
    if (kj != nullptr) {
      if (a == T(0)) {
        if constexpr (!Accumulate) fill(kj, dk, T(0));
      } else {
        for (std::size_t i = 0; i < dk; ++i) put(kj[i], times_q(q[i]));
      }
    }
  }
}

/// The largest |u_j| = |⟨g, v_j⟩| for which no ∂L/∂s_j·f can overflow T: |β α_j (u_j − ū) f| ≤
/// 2 max|u|·|β|·|f|, with a factor 2 to spare for rounding. Beyond it (or for a u_j that is not
/// finite) backward takes its careful rows (dot_product_backward_rows_of with Careful).
template <real T>
[[nodiscard]] T u_limit(T beta, T f) noexcept {
  const T b = beta < T(0) ? -beta : beta, af = f < T(0) ? -f : f;
  return std::numeric_limits<T>::max() / T(4) / (b > T(1) ? b : T(1)) / (af > T(1) ? af : T(1));
}

template <bool Accumulate, bool Notes, real T, class S, bool Careful>
void dot_product_backward_rows_of(const T* alpha, const T* u, std::size_t us, std::span<const T> q,
                                  MatrixView<const T> keys, std::span<const T> gc, std::span<T> gs,
                                  std::span<T> gq, T* gk, std::size_t ks, T* gv, std::size_t vs,
                                  T beta, T f);

/// dot_product_backward_rows_of with Careful, out of line (rare; inlined, it crowded the common
/// path out of its caller).
template <bool Accumulate, bool Notes, real T, class S>
ATTN_NOINLINE void dot_product_backward_rows_careful(const T* alpha, const T* u, std::size_t us,
                                                     std::span<const T> q, MatrixView<const T> keys,
                                                     std::span<const T> gc, std::span<T> gs,
                                                     std::span<T> gq, T* gk, std::size_t ks, T* gv,
                                                     std::size_t vs, T beta, T f) {
  dot_product_backward_rows_of<Accumulate, Notes, T, S, true>(alpha, u, us, q, keys, gc, gs, gq, gk,
                                                              ks, gv, vs, beta, f);
}

/// The dot-product backward after the weights: ∂L/∂s_j by the softmax-backward step (from α and
/// u_j at u[j·us]) into gs, the rows of gk and gv (dot_product_gradient_row; null: left out)
/// and ∂L/∂q += Σ_j a_j f k_j (gq empty: left out), a block of notes at a time. α_j and u_j are
/// read before gs_j and row j are written, so α may live in gs and u in gv's first column.
/// Careful (some |u_j| beyond u_limit: an a_j f may overflow to ±inf): row by row, zero numbers
/// of q and of the keys adding nothing to such a row's sums (0·inf would be NaN).
template <bool Accumulate, bool Notes, real T, class S, bool Careful = false>
void dot_product_backward_rows_of(const T* alpha, const T* u, std::size_t us, std::span<const T> q,
                                  MatrixView<const T> keys, std::span<const T> gc, std::span<T> gs,
                                  std::span<T> gq, T* gk, std::size_t ks, T* gv, std::size_t vs,
                                  T beta, T f) {
  const std::size_t n = keys.rows(), dk = keys.cols(), dv = gc.size();
  const softmax_backward_terms<T> t = softmax_backward_terms_of(
      alpha, [&](std::size_t k) { return u[k * us]; }, n);
  if (!Accumulate) fill(gq.data(), gq.size(), T(0));
  for (std::size_t j0 = 0; j0 < n; j0 += online_block) {
    const std::size_t nb = n - j0 < online_block ? n - j0 : online_block;
    for (std::size_t j = j0; j < j0 + nb; ++j) {
      const T a_j = alpha[j];
      const T a = softmax_backward_entry(
          a_j, j == t.dominant ? t.dominant_minus_mean : u[j * us] - t.mean, beta);
      gs[j] = a;
      const T af = f == T(1) ? a : Careful ? product_or_zero(a, f) : a * f;
      dot_product_gradient_row<Accumulate, Notes, T, Careful>(
          a_j, a, af, gc.data(), q.data(), dk, dv, gv != nullptr ? gv + j * vs : nullptr,
          gk != nullptr ? gk + j * ks : nullptr);
    }
    // ∂L/∂q += Σ_j a_j f k_j, grouped as the score's accumulate_gradients groups it
    if (!gq.empty()) {
      if constexpr (Careful)
        accumulate_rows_overflowed(gs.data() + j0, f, keys.row(j0).data(), keys.row_stride(), nb,
                                   dk, gq.data());
      else
        accumulate_rows(gs.data() + j0, f, keys.row(j0).data(), keys.row_stride(), nb, dk,
                        gq.data());
    }
  }
}

/// dot_product_backward_rows_of for what `out` holds (f: the score's scale; careful: some u_j
/// beyond u_limit, or not finite).
template <bool Accumulate, real T, class S, class P>
void dot_product_backward_rows(const T* alpha, const T* u, std::size_t us, std::span<const T> q,
                               MatrixView<const T> keys, std::span<const T> gc,
                               const gradient_sink<T, P>& out, std::span<T> gs, T beta, T f,
                               bool careful) {
  T* const gv = out.values.rows() != 0 ? out.values.data() : nullptr;
  T* const gk = out.keys.rows() != 0 ? out.keys.data() : nullptr;
  const std::size_t vs = out.values.row_stride(), ks = out.keys.row_stride();
  if (careful) {
    if (out.notes)
      dot_product_backward_rows_careful<Accumulate, true, T, S>(alpha, u, us, q, keys, gc, gs,
                                                                out.query, gk, ks, gv, vs, beta, f);
    else
      dot_product_backward_rows_careful<Accumulate, false, T, S>(alpha, u, us, q, keys, gc, gs,
                                                                 out.query, gk, ks, gv, vs, beta, f);
  } else if (out.notes)
    dot_product_backward_rows_of<Accumulate, true, T, S>(alpha, u, us, q, keys, gc, gs, out.query,
                                                         gk, ks, gv, vs, beta, f);
  else
    dot_product_backward_rows_of<Accumulate, false, T, S>(alpha, u, us, q, keys, gc, gs, out.query,
                                                          gk, ks, gv, vs, beta, f);
}

/// backward of one query for a dot-product score, recomputing the weights, in two passes over
/// the notes: pass 1 forms the scores (into gs) and u_j = ⟨g, v_j⟩ (at ust[j·us]), pass 2 is
/// dot_product_backward_rows. The same scores, weights, sums and order as backward_any_score,
/// so ∂L/∂s and ∂L/∂q agree with it to the bit. False, having written only gs and the u, when
/// the weights do not move with the scores (backward_any_score then takes the row).
template <bool Accumulate, real T, class S, class P>
bool dot_product_backward(const char* where, const S& score, std::span<const T> q,
                          MatrixView<const T> keys, MatrixView<const T> values,
                          std::span<const T> gc, const gradient_sink<T, P>& out, std::span<T> gs,
                          T* ust, std::size_t us, const options& opt) {
  const std::size_t n = keys.rows(), dk = keys.cols(), dv = values.cols();
  const T f = score.template scale<T>(dk);
  const T beta = static_cast<T>(opt.beta);
  const T limit = u_limit(beta, f);
  bool within = true;  // every |u_j| within u_limit
  T ub[online_block];
  for (std::size_t j0 = 0; j0 < n; j0 += online_block) {
    const std::size_t nb = n - j0 < online_block ? n - j0 : online_block;
    if (out.notes) {  // both products from one read of each note
      dot_rows2(q.data(), gc.data(), keys.row(j0).data(), keys.row_stride(), nb, dk, gs.data() + j0,
                ub);
      if (f != T(1)) scale(gs.data() + j0, nb, f);  // as the score's scores()
    } else {  // the block of keys is still in L1 for the second product
      score_all(score, q, row_block(keys, j0, nb), gs.subspan(j0, nb));
      dot_rows(gc.data(), values.row(j0).data(), values.row_stride(), nb, dv, ub);
    }
    for (std::size_t r = 0; r < nb; ++r) ust[(j0 + r) * us] = ub[r];
    within = within && all_within(ub, nb, limit);
  }
  if (!weights_move(softmax_row_kind(gs.data(), n, opt))) return false;
  softmax_row(where, gs.data(), gs.data(), n, n, opt);  // gs holds α until pass 2 overwrites it
  dot_product_backward_rows<Accumulate, T, S>(gs.data(), ust, us, q, keys, gc, out, gs, beta, f,
                                              !within);
  return true;
}

/// Whether backward from saved weights differentiates them as a softmax's (they move with the
/// scores) or holds them fixed: fixed only when opt.mask keeps no note.
inline bool mask_keeps_a_note(const options& opt) noexcept {
  if (opt.mask.empty()) return true;
  for (std::size_t j = 0; j < opt.mask.size(); ++j)
    if (opt.mask[j]) return true;
  return false;
}

/// The one-pass backward from the forward's weights α and context c (dot-product scores):
/// with ū = ⟨g, c⟩ known before the pass, eight notes at a time (still in L1) it forms
/// u_j = ⟨g, v_j⟩, ∂L/∂s_j = β α_j (u_j − ū), the gradient rows and ∂L/∂q += Σ_j a_j f k_j:
/// each note read once, each gradient row written once. ∂L/∂q is summed in another order than
/// dot_product_backward_rows' (a bound, docs/derivatives.md). Only where one_pass_applies, with
/// every gradient given and overwritten.
template <real T, class S, class P>
void dot_product_backward_one_pass(std::span<const T> q, MatrixView<const T> keys,
                                   MatrixView<const T> values, std::span<const T> alpha,
                                   std::span<const T> c, std::span<const T> gc,
                                   const gradient_sink<T, P>& out, std::span<T> gs, T beta, T f) {
  const std::size_t n = keys.rows(), dk = keys.cols(), dv = values.cols();
  constexpr std::size_t B = 8;  // rows per group: read by dot_rows, then again (from L1) below
  const T* w = alpha.data();
  const T* g = gc.data();
  const T* qd = q.data();
  const T ubar = sum_of_products(g, c.data(), dv);  // ⟨g, c⟩ = Σ_k α_k u_k up to rounding
  const MatrixView<T> gk = out.keys, gv = out.values;
  T* __restrict y = out.query.data();
  fill(y, dk, T(0));
  const std::size_t ks = keys.row_stride(), vs = gv.row_stride(), kgs = gk.row_stride();
  for (std::size_t j0 = 0; j0 < n; j0 += B) {
    const std::size_t nb = n - j0 < B ? n - j0 : B;
    T* a = gs.data() + j0;
    dot_rows(g, values.row(j0).data(), values.row_stride(), nb, dv, a);  // u_j
    T al[B], af[B];
    bool plain = nb == B;  // every row of the group has α_j ≠ 0 and ∂L/∂s_j ≠ 0
    for (std::size_t r = 0; r < nb; ++r) {
      const T a_j = w[j0 + r];
      const T sj = softmax_backward_entry(a_j, a[r] - ubar, beta);
      a[r] = sj;
      al[r] = a_j;
      af[r] = f == T(1) ? sj : sj * f;
      plain = plain && a_j != T(0) && sj != T(0);
    }
    const T* __restrict k0 = keys.row(j0).data();
    T* __restrict v0 = gv.row(j0).data();
    T* __restrict kg0 = gk.row(j0).data();
    if (plain && out.notes) {  // one sweep over the columns: the rows' writes and ∂L/∂q
      combine_rows_group(al, af, k0, ks, g, qd, dk, y, v0, vs, static_cast<T*>(nullptr), 0);
      continue;
    }
    if (plain) {
      combine_rows_group(al, af, k0, ks, g, qd, dk, y, v0, vs, kg0, kgs);
      for (std::size_t r = 0; r < B; ++r)
        for (std::size_t i = 0; i < dv; ++i) v0[r * vs + i] = al[r] * g[i];
      continue;
    }
    for (std::size_t r = 0; r < nb; ++r) {  // (an a_j f that overflowed: the caller redoes the row)
      if (out.notes)
        dot_product_gradient_row<false, true>(al[r], a[r], af[r], g, qd, dk, dv,
                                              gv.row(j0 + r).data(), gk.row(j0 + r).data());
      else
        dot_product_gradient_row<false, false>(al[r], a[r], af[r], g, qd, dk, dv,
                                               gv.row(j0 + r).data(), gk.row(j0 + r).data());
    }
    accumulate_rows(a, f, keys.row(j0).data(), ks, nb, dk, y);  // ∂L/∂q += Σ_j a_j f k_j
  }
}

/// Whether the one pass may be taken: weights that move (the mask keeps a note), d_v > 0, no
/// weight above 1/2 (u_m − ū would cancel) and α, c, g and q finite.
template <real T>
bool one_pass_applies(std::span<const T> q, std::span<const T> alpha, std::span<const T> c,
                      std::span<const T> gc, const options& opt) noexcept {
  return !c.empty() && mask_keeps_a_note(opt) &&
         dominant_weight(alpha.data(), alpha.size()) == alpha.size() &&
         all_finite(alpha.data(), alpha.size()) && all_finite(c.data(), c.size()) &&
         all_finite(gc.data(), gc.size()) && all_finite(q.data(), q.size());
}

/// The shape of ∂L/∂θ: score.check_gradient(where, g) when the score names the calling function
/// in its messages (attn's do: "attn::backward: rows of dL/dW is 3 but rows of W is 2"), else
/// score.check_gradient(g).
template <class S, class P>
void check_parameter_gradient(const char* where, const S& score, P* grads) {
  if constexpr (!std::same_as<P, no_parameters>) {
    if constexpr (requires { score.check_gradient(where, *grads); })
      score.check_gradient(where, *grads);
    else if constexpr (requires { score.check_gradient(*grads); })
      score.check_gradient(*grads);
  }
}

/// The sizes of the gradients that are given (and of ∂L/∂θ).
template <real T, class S, class P>
void check_gradients(const char* where, const S& score, std::span<const T> q,
                     MatrixView<const T> keys, MatrixView<const T> values,
                     const gradient_sink<T, P>& out) {
  const std::size_t n = keys.rows();
  if (!out.query.empty())
    check_equal(where, "size of dL/dq", out.query.size(), "query size", q.size());
  if (out.keys.rows() != 0)
    check_shape(where, out.notes ? "dL/dnotes" : "dL/dkeys", out.keys.rows(), out.keys.cols(), n,
                keys.cols());
  if (!out.notes && out.values.rows() != 0)
    check_shape(where, "dL/dvalues", out.values.rows(), out.values.cols(), n, values.cols());
  check_parameter_gradient(where, score, out.parameters);
}

/// Refuses (overlap_error, naming both) gradients that overlap one another (∂L/∂keys and
/// ∂L/∂values are one buffer when the notes are both), an input, the mask or the score's
/// parameters; ∂L/∂θ is looked at for the scores that name their buffers (general, additive).
template <real T, class S, class P>
constexpr void check_gradients_apart(const char* where, const S& score, named_regions<T, 9> inputs,
                                     const named_region<T> (&gradients)[4], P* grads,
                                     const options& opt) {
  named_region<T> outputs[7] = {gradients[0], gradients[1], gradients[2], gradients[3]};
  std::size_t n_out = 4;
  if constexpr (!std::same_as<P, no_parameters>) {
    if constexpr (requires { gradient_regions(score, *grads); })
      for (const named_region<T>& r : gradient_regions(score, *grads)) outputs[n_out++] = r;
  }
  if constexpr (requires { parameter_regions(score); })
    for (const named_region<T>& r : parameter_regions(score)) inputs.add(r.name, r.numbers);
  check_buffers_apart<T>(where, std::span<const named_region<T>>(outputs, n_out), inputs.span(),
                         opt);
}

/// backward of one query into the caller's views: checks every size, makes every scratch, then
/// takes the path for what the forward saved (nothing: saved is null) and for the score.
/// `lent`: n numbers of the caller's for the dot path's u_j (sdpa's exact rows lend them, made
/// before anything was written), else scratch of its own (on the heap past 128 numbers).
template <real T, std::size_t N, std::size_t DQ, std::size_t DK, class S, class P,
          bool Committed = false>
void backward_views_of(const char* where, const S& score, std::span<const T> q,
                       MatrixView<const T> keys, MatrixView<const T> values,
                       const saved_forward<T>* saved, std::span<const T> gc,
                       const gradient_sink<T, P>& out, const options& opt,
                       std::span<T> lent = {}) {
  if constexpr (!Committed && gradients_may_throw<S, T, P>()) {
    // a score that may throw: each gradient into a copy of its own (what it holds included, for
    // accumulate), copied into the views when the call is done. ∂L/∂θ only the score's own
    // members write, into the caller's.
    std::vector<T> scores(out.scores.begin(), out.scores.end());
    std::vector<T> query(out.query.begin(), out.query.end());
    Matrix<T> gk = detached_copy(out.keys);
    Matrix<T> gv = out.notes ? Matrix<T>() : detached_copy(out.values);
    const gradient_sink<T, P> own{scores,         query,     gk.view(),     out.notes ? gk.view() : gv.view(),
                                  out.parameters, out.notes, out.accumulate};
    backward_views_of<T, N, DQ, DK, S, P, true>(where, score, q, keys, values, saved, gc, own, opt);
    copy_numbers(scores.data(), out.scores.data(), scores.size());
    copy_numbers(query.data(), out.query.data(), query.size());
    commit_to(gk, out.keys);
    commit_to(gv, out.values);
    return;
  }
  const std::size_t n = keys.rows(), dq = q.size(), dk = keys.cols(), dv = values.cols();
  const std::size_t gs_n = out.scores.empty() ? n : out.scores.size();
  if (saved == nullptr) {
    // the gradients' sizes before check_attend's β and all-masked checks: a dimension_error
    // comes before a domain_error, as in the forward
    check_equal(where, "size of dL/ds", gs_n, "number of notes", n);
    check_equal(where, "size of dL/dc", gc.size(), "columns of values", dv);
    check_attend<T>(where, q, keys, values, score, n, n, dv, opt);  // (n, n, d_v: the inputs')
  } else {
    check_score<T>(where, score, dq, dk);
    check_nonempty(where, "the notes matrix", n);
    check_equal(where, "rows of values", values.rows(), "rows of keys", n);
    check_equal(where, "weights size", saved->weights.size(), "number of notes", n);
    check_equal(where, "size of dL/ds", gs_n, "number of notes", n);
    check_equal(where, "size of dL/dc", gc.size(), "columns of values", dv);
    check_softmax_args<T>(where, n, n, opt, notes_row);  // the mask's size and β
  }
  check_gradients(where, score, q, keys, values, out);
  named_regions<T, 9> inputs;
  inputs.add("query", region_of(q));
  inputs.add(out.notes ? "notes" : "keys", region_of(keys));
  if (!out.notes) inputs.add("values", region_of(values));
  inputs.add("dL/dc", region_of(gc));
  if (saved != nullptr) {
    inputs.add("the forward's weights", region_of(saved->weights));
    inputs.add("the forward's context", region_of(saved->context));
  }
  check_gradients_apart<T>(where, score, inputs,
                           {{"dL/ds", region_of(out.scores)},
                            {"dL/dq", region_of(out.query)},
                            {out.notes ? "dL/dnotes" : "dL/dkeys", region_of(out.keys)},
                            {"dL/dvalues", out.notes ? region<T>{} : region_of(out.values)}},
                           out.parameters, opt);
  if (saved != nullptr && !saved->context.empty())
    check_equal(where, "size of the forward's context", saved->context.size(), "columns of values",
                dv);

  constexpr bool dot_path = dot_product_score<S, T> && std::same_as<P, no_parameters>;
  const T beta = static_cast<T>(opt.beta);
  const bool all_given =
      !out.query.empty() && out.keys.rows() != 0 && (out.notes || out.values.rows() != 0);
  // scratch, before anything is written (bad_alloc leaves every output untouched)
  scratch<T, N> gs_scratch(out.scores.empty() ? n : 0);
  const std::span<T> gs = out.scores.empty() ? gs_scratch.span() : out.scores;
  const bool u_in_values = !out.accumulate && out.values.rows() != 0 && dv != 0;  // u_j in gv(j, 0)
  const bool u_lent = lent.size() >= n;
  scratch<T, N> u_scratch(dot_path && saved == nullptr && !u_in_values && !u_lent ? n : 0);
  const bool any_path =
      !(dot_path && (saved == nullptr ? dv != 0 : mask_keeps_a_note(opt) && dv != 0));
  scratch<T, DQ> gq_scratch(out.query.empty() ? dq : 0);
  std::optional<Matrix<T>> gk_scratch;  // score_backward's ∂L/∂k (or ∂L/∂h) when it is left out
  if (out.keys.rows() == 0 && (any_path || saved == nullptr))
    gk_scratch.emplace(n, out.notes ? dv : dk);
  note_scratch_for<S, T, P, DQ, DK> ns(dk, dq);

  if constexpr (dot_path) {
    if (saved != nullptr) {
      if (!out.accumulate && all_given &&
          one_pass_applies<T>(q, saved->weights, saved->context, gc, opt)) {
        dot_product_backward_one_pass<T, S>(q, keys, values, saved->weights, saved->context, gc,
                                            out, gs, beta, score.template scale<T>(dk));
        // an ∂L/∂s_j that overflowed met q's and the keys' zeros in the pass's sums (0·inf):
        // the rows below overwrite every gradient again, by the rule that such zeros add nothing
        if (all_finite(gs.data(), n)) return;
      }
      if (mask_keeps_a_note(opt) && dv != 0) {  // u_j in gs, then ∂L/∂s_j over it
        dot_rows(gc.data(), values.data(), values.row_stride(), n, dv, gs.data());
        const T f = score.template scale<T>(dk);
        const bool careful = !all_within(gs.data(), n, u_limit(beta, f));
        if (out.accumulate)
          dot_product_backward_rows<true, T, S>(saved->weights.data(), gs.data(), 1, q, keys, gc,
                                                out, gs, beta, f, careful);
        else
          dot_product_backward_rows<false, T, S>(saved->weights.data(), gs.data(), 1, q, keys, gc,
                                                 out, gs, beta, f, careful);
        return;
      }
    } else if (dv != 0) {
      T* ust = u_in_values ? out.values.data() : u_lent ? lent.data() : u_scratch.data();
      const std::size_t us = u_in_values ? out.values.row_stride() : 1;
      if (out.accumulate ? dot_product_backward<true, T, S>(where, score, q, keys, values, gc, out,
                                                            gs, ust, us, opt)
                         : dot_product_backward<false, T, S>(where, score, q, keys, values, gc, out,
                                                             gs, ust, us, opt))
        return;
    }
  }
  // any score: ∂L/∂k and ∂L/∂v written by adding to zeros, unless they accumulate
  const MatrixView<T> gk = out.keys.rows() != 0 ? out.keys : gk_scratch->view();
  const MatrixView<T> gv = out.notes ? gk : out.values;
  const std::span<T> gq = out.query.empty() ? gq_scratch.span() : out.query;
  if (!out.accumulate || out.keys.rows() == 0)
    fill_rows(gk.data(), gk.rows(), gk.cols(), gk.row_stride(), T(0));
  if (!out.accumulate && !out.notes)
    fill_rows(gv.data(), gv.rows(), gv.cols(), gv.row_stride(), T(0));
  if (!out.accumulate || out.query.empty()) fill(gq.data(), gq.size(), T(0));
  const auto u = [&](std::size_t k) {
    return sum_of_products(gc.data(), values.row(k).data(), dv);
  };
  if (saved == nullptr) {
    score_all(score, q, keys, gs);
    const bool flows = weights_move(softmax_row_kind(gs.data(), n, opt));
    softmax_row(where, gs.data(), gs.data(), n, n, opt);  // gs holds α until it is overwritten
    backward_any_score<T, DQ, DK>(score, q, keys, gs.data(), u, flows, gc, gs, gq, gk, gv,
                                  out.parameters, beta, &ns);
  } else {
    for (std::size_t k = 0; k < n; ++k) gs[k] = u(k);  // u_k, formed once per note
    backward_any_score<T, DQ, DK>(
        score, q, keys, saved->weights.data(), [&](std::size_t k) { return gs[k]; },
        mask_keeps_a_note(opt), gc, gs, gq, gk, gv, out.parameters, beta, &ns);
  }
}

/// align_backward into the caller's views: checks every row, makes every scratch, then each
/// query's backward_any_score adds into the note gradients (zeroed first unless they accumulate).
template <real T, std::size_t N, std::size_t DQ, std::size_t DK, class S, class P,
          bool Committed = false>
void align_backward_views_of(const char* where, const S& score, MatrixView<const T> qs,
                             MatrixView<const T> keys, MatrixView<const T> values,
                             MatrixView<const T> gcs, MatrixView<T> gss, MatrixView<T> gqs,
                             MatrixView<T> gk, MatrixView<T> gv, bool notes, bool accumulate,
                             P* grads, const options& opt) {
  if constexpr (!Committed && gradients_may_throw<S, T, P>()) {
    // a score that may throw: as backward_views_of, every row into copies, committed at the end
    Matrix<T> s = detached_copy(gss), g = detached_copy(gqs), k = detached_copy(gk);
    Matrix<T> v = notes ? Matrix<T>() : detached_copy(gv);
    align_backward_views_of<T, N, DQ, DK, S, P, true>(where, score, qs, keys, values, gcs,
                                                      s.view(), g.view(), k.view(),
                                                      notes ? k.view() : v.view(), notes,
                                                      accumulate, grads, opt);
    commit_to(s, gss);
    commit_to(g, gqs);
    commit_to(k, gk);
    commit_to(v, gv);
    return;
  }
  const std::size_t tq = qs.rows(), n = keys.rows(), dk = keys.cols(), dv = values.cols();
  check_nonempty(where, "the queries matrix", tq);
  check_shape(where, "dL/dcontexts", gcs.rows(), gcs.cols(), tq, dv);
  if (gss.rows() != 0) check_shape(where, "dL/dscores", gss.rows(), gss.cols(), tq, n);
  if (gqs.rows() != 0) check_shape(where, "dL/dqueries", gqs.rows(), gqs.cols(), tq, qs.cols());
  if (gk.rows() != 0)
    check_shape(where, notes ? "dL/dnotes" : "dL/dkeys", gk.rows(), gk.cols(), n, dk);
  if (!notes && gv.rows() != 0) check_shape(where, "dL/dvalues", gv.rows(), gv.cols(), n, dv);
  check_masks(where, opt, tq, n);
  row_options row_opt(opt, tq, n);
  for (std::size_t t = 0; t < tq; ++t)
    check_attend<T>(where, qs.row(t), keys, values, score, n, n, dv, row_opt(t));
  check_parameter_gradient(where, score, grads);
  named_regions<T, 9> inputs;
  inputs.add("queries", region_of(qs));
  inputs.add(notes ? "notes" : "keys", region_of(keys));
  if (!notes) inputs.add("values", region_of(values));
  inputs.add("dL/dcontexts", region_of(gcs));
  check_gradients_apart<T>(where, score, inputs,
                           {{"dL/dscores", region_of(gss)},
                            {"dL/dqueries", region_of(gqs)},
                            {notes ? "dL/dnotes" : "dL/dkeys", region_of(gk)},
                            {"dL/dvalues", notes ? region<T>{} : region_of(gv)}},
                           grads, opt);
  scratch<T, N> gs_scratch(gss.rows() == 0 ? n : 0);
  scratch<T, DQ> gq_scratch(gqs.rows() == 0 ? qs.cols() : 0);
  std::optional<Matrix<T>> gk_scratch;
  if (gk.rows() == 0) gk_scratch.emplace(n, dk);
  note_scratch_for<S, T, P, DQ, DK> ns(dk, qs.cols());
  if (gk.rows() == 0) gk = gk_scratch->view();
  if (notes) gv = gk;
  if (!accumulate || gk_scratch) fill_rows(gk.data(), gk.rows(), gk.cols(), gk.row_stride(), T(0));
  if (!accumulate && !notes) fill_rows(gv.data(), gv.rows(), gv.cols(), gv.row_stride(), T(0));
  const T beta = static_cast<T>(opt.beta);
  for (std::size_t t = 0; t < tq; ++t) {
    const std::span<const T> q = qs.row(t), gc = gcs.row(t);
    const std::span<T> gs = gss.rows() != 0 ? gss.row(t) : gs_scratch.span();
    const std::span<T> gq = gqs.rows() != 0 ? gqs.row(t) : gq_scratch.span();
    if (!accumulate || gqs.rows() == 0) fill(gq.data(), gq.size(), T(0));
    const options& ro = row_opt(t);
    score_all(score, q, keys, gs);
    const bool flows = weights_move(softmax_row_kind(gs.data(), n, ro));
    softmax_row(where, gs.data(), gs.data(), n, n, ro);
    backward_any_score<T, DQ, DK>(
        score, q, keys, gs.data(),
        [&](std::size_t k) { return sum_of_products(gc.data(), values.row(k).data(), dv); }, flows,
        gc, gs, gq, gk, gv, grads, beta, &ns);
  }
}

template <class In, class T, std::size_t N>
concept input_for =
    vector_like<In> && std::same_as<scalar_of<In>, T> && compatible_extents<extent_of<In>, N>;

template <class M, class T, std::size_t R, std::size_t C>
concept matrix_input_for = matrix_like<M> && std::same_as<matrix_scalar_of<M>, T> &&
    compatible_extents<rows_of<M>, R> && compatible_extents<cols_of<M>, C>;

/// ∂L/∂θ of the views as backward takes it: a pointer, null for no_parameters.
template <class P>
[[nodiscard]] constexpr P* parameters_of(P& p) noexcept {
  if constexpr (std::same_as<P, no_parameters>)
    return nullptr;
  else
    return &p;
}

/// The views of a returned result r as backward writes them (keys and values the same view when
/// the notes are both), overwritten.
template <real T, class R>
[[nodiscard]] constexpr auto result_sink(R& r, MatrixView<T> keys, MatrixView<T> values,
                                         bool notes) noexcept {
  return gradient_sink<T, decltype(r.parameters)>{std::span<T>(r.scores),
                                                  std::span<T>(r.query),
                                                  keys,
                                                  values,
                                                  parameters_of(r.parameters),
                                                  notes,
                                                  false};
}

/// backward's returned result for keys ≠ values: sized, then filled through the views.
template <class Q, class K, class V, class S, class G>
[[nodiscard]] auto backward_result_of(const char* where, const Q& q, const K& keys, const V& values,
                                      const S& score, const saved_forward<scalar_of<Q>>* saved,
                                      const G& grad_context, const options& opt) {
  using T = scalar_of<Q>;
  constexpr std::size_t DQ = extent_of<Q>, N = common_extent<rows_of<K>, rows_of<V>>;
  const auto qs = as_span(q);
  const auto kv = as_view(keys);
  const auto vv = as_view(values);
  backward_result<T, DQ, N, cols_of<K>, cols_of<V>, parameter_gradient_t<S>> r{
      zero_vector<T, N>(kv.rows()), zero_vector<T, DQ>(qs.size()),
      zero_matrix<T, N, cols_of<K>>(kv.rows(), kv.cols()),
      zero_matrix<T, N, cols_of<V>>(kv.rows(), vv.cols()), zero_parameter_gradient(score)};
  // (a fresh result: a throw discards it, so no copies even for a score that may throw)
  backward_views_of<T, N, DQ, cols_of<K>, S, parameter_gradient_t<S>, true>(
      where, score, qs, kv, vv, saved, as_span(grad_context),
      result_sink<T>(r, r.keys.view(), r.values.view(), false), opt);
  return r;
}

/// backward's returned result for notes that are keys and values.
template <class Q, class M, class S, class G>
[[nodiscard]] auto notes_backward_result_of(const char* where, const Q& q, const M& notes,
                                            const S& score,
                                            const saved_forward<scalar_of<Q>>* saved,
                                            const G& grad_context, const options& opt) {
  using T = scalar_of<Q>;
  constexpr std::size_t DQ = extent_of<Q>, N = rows_of<M>, D = cols_of<M>;
  const auto qs = as_span(q);
  const auto nv = as_view(notes);
  notes_backward_result<T, DQ, N, D, parameter_gradient_t<S>> r{
      zero_vector<T, N>(nv.rows()), zero_vector<T, DQ>(qs.size()),
      zero_matrix<T, N, D>(nv.rows(), nv.cols()), zero_parameter_gradient(score)};
  backward_views_of<T, N, DQ, D, S, parameter_gradient_t<S>, true>(
      where, score, qs, nv, nv, saved, as_span(grad_context),
      result_sink<T>(r, r.notes.view(), r.notes.view(), true), opt);
  return r;
}

}  // namespace detail

/// From g = ∂L/∂c (d_v numbers), recomputing the scores and the softmax, writes the gradients
/// of attend(q, keys, values, score) into the views of `out` (see backward_views). Allocates
/// nothing when ∂L/∂s is given and the score's backward is batched (scratch otherwise: n
/// numbers, inline up to 128). Sizes are checked before anything is written (dimension_error).
template <vector_like Q, matrix_like K, matrix_like V, class S, vector_like G,
          class P = no_parameters>
  requires detail::attend_inputs<Q, K, V, S> && detail::input_for<G, scalar_of<Q>, cols_of<V>>
void backward(const Q& q, const K& keys, const V& values, const S& score, const G& grad_context,
              backward_views<scalar_of<Q>, P> out, const options& opt = {}) {
  using T = scalar_of<Q>;
  const detail::gradient_sink<T, P> sink{
      out.scores, out.query,     out.keys, out.values, detail::parameters_of(out.parameters),
      false,      out.accumulate};
  detail::backward_views_of<T, common_extent<rows_of<K>, rows_of<V>>, extent_of<Q>, cols_of<K>>(
      "attn::backward", score, as_span(q), as_view(keys), as_view(values), nullptr,
      as_span(grad_context), sink, opt);
}

/// backward from what the forward saved (its weights, and its context if given: a dot-product
/// score then takes one pass over the notes where no weight exceeds 1/2), into `out`. The
/// weights are taken as given (docs/derivatives.md); `opt` gives β and the mask (the all-masked
/// policy was the forward's). Otherwise as above.
template <vector_like Q, matrix_like K, matrix_like V, class S, class F, vector_like G,
          class P = no_parameters>
  requires detail::attend_inputs<Q, K, V, S> && forward_record<F, scalar_of<Q>> &&
      detail::input_for<G, scalar_of<Q>, cols_of<V>>
void backward(const Q& q, const K& keys, const V& values, const S& score, const F& saved,
              const G& grad_context, backward_views<scalar_of<Q>, P> out, const options& opt = {}) {
  using T = scalar_of<Q>;
  const saved_forward<T> s = detail::saved_views<T>(saved);
  const detail::gradient_sink<T, P> sink{
      out.scores, out.query,     out.keys, out.values, detail::parameters_of(out.parameters),
      false,      out.accumulate};
  detail::backward_views_of<T, common_extent<rows_of<K>, rows_of<V>>, extent_of<Q>, cols_of<K>>(
      "attn::backward", score, as_span(q), as_view(keys), as_view(values), &s,
      as_span(grad_context), sink, opt);
}

/// backward for notes that are keys and values, recomputing the forward, into `out`
/// (∂L/∂h_j = α_j g + (∂L/∂s_j) ∂s_j/∂h_j).
template <vector_like Q, matrix_like M, class S, vector_like G, class P = no_parameters>
  requires detail::attend_inputs<Q, M, M, S> && detail::input_for<G, scalar_of<Q>, cols_of<M>>
void backward(const Q& q, const M& notes, const S& score, const G& grad_context,
              notes_backward_views<scalar_of<Q>, P> out, const options& opt = {}) {
  using T = scalar_of<Q>;
  const auto nv = as_view(notes);
  const detail::gradient_sink<T, P> sink{
      out.scores, out.query,     out.notes, out.notes, detail::parameters_of(out.parameters),
      true,       out.accumulate};
  detail::backward_views_of<T, rows_of<M>, extent_of<Q>, cols_of<M>>(
      "attn::backward", score, as_span(q), nv, nv, nullptr, as_span(grad_context), sink, opt);
}

/// backward for notes that are keys and values, from what the forward saved, into `out`.
template <vector_like Q, matrix_like M, class S, class F, vector_like G, class P = no_parameters>
  requires detail::attend_inputs<Q, M, M, S> && forward_record<F, scalar_of<Q>> &&
      detail::input_for<G, scalar_of<Q>, cols_of<M>>
void backward(const Q& q, const M& notes, const S& score, const F& saved, const G& grad_context,
              notes_backward_views<scalar_of<Q>, P> out, const options& opt = {}) {
  using T = scalar_of<Q>;
  const saved_forward<T> s = detail::saved_views<T>(saved);
  const auto nv = as_view(notes);
  const detail::gradient_sink<T, P> sink{
      out.scores, out.query,     out.notes, out.notes, detail::parameters_of(out.parameters),
      true,       out.accumulate};
  detail::backward_views_of<T, rows_of<M>, extent_of<Q>, cols_of<M>>(
      "attn::backward", score, as_span(q), nv, nv, &s, as_span(grad_context), sink, opt);
}

/// From g = ∂L/∂c for keys ≠ values, recomputing the forward, returns ∂L/∂s, ∂L/∂q, ∂L/∂k_j,
/// ∂L/∂v_j and ∂L/∂θ (`parameters`, a parameter_gradient_t<S>). Fixed sizes: no allocation.
template <vector_like Q, matrix_like K, matrix_like V, class S, vector_like G>
  requires detail::attend_inputs<Q, K, V, S> && detail::input_for<G, scalar_of<Q>, cols_of<V>>
[[nodiscard]] auto backward(const Q& q, const K& keys, const V& values, const S& score,
                            const G& grad_context, const options& opt = {}) {
  return detail::backward_result_of("attn::backward", q, keys, values, score, nullptr, grad_context,
                                    opt);
}

/// As above, from what the forward saved (see the overload into views).
template <vector_like Q, matrix_like K, matrix_like V, class S, class F, vector_like G>
  requires detail::attend_inputs<Q, K, V, S> && forward_record<F, scalar_of<Q>> &&
      detail::input_for<G, scalar_of<Q>, cols_of<V>>
[[nodiscard]] auto backward(const Q& q, const K& keys, const V& values, const S& score,
                            const F& saved, const G& grad_context, const options& opt = {}) {
  const saved_forward<scalar_of<Q>> s = detail::saved_views<scalar_of<Q>>(saved);
  return detail::backward_result_of("attn::backward", q, keys, values, score, &s, grad_context,
                                    opt);
}

/// From g = ∂L/∂c for notes that are keys and values, recomputing the forward, returns ∂L/∂s,
/// ∂L/∂q, ∂L/∂h_j = α_j g + (∂L/∂s_j) ∂s_j/∂h_j and ∂L/∂θ. Fixed sizes: no allocation.
template <vector_like Q, matrix_like M, class S, vector_like G>
  requires detail::attend_inputs<Q, M, M, S> && detail::input_for<G, scalar_of<Q>, cols_of<M>>
[[nodiscard]] auto backward(const Q& q, const M& notes, const S& score, const G& grad_context,
                            const options& opt = {}) {
  return detail::notes_backward_result_of("attn::backward", q, notes, score, nullptr, grad_context,
                                          opt);
}

/// As above, from what the forward saved.
template <vector_like Q, matrix_like M, class S, class F, vector_like G>
  requires detail::attend_inputs<Q, M, M, S> && forward_record<F, scalar_of<Q>> &&
      detail::input_for<G, scalar_of<Q>, cols_of<M>>
[[nodiscard]] auto backward(const Q& q, const M& notes, const S& score, const F& saved,
                            const G& grad_context, const options& opt = {}) {
  const saved_forward<scalar_of<Q>> s = detail::saved_views<scalar_of<Q>>(saved);
  return detail::notes_backward_result_of("attn::backward", q, notes, score, &s, grad_context, opt);
}

/// From ∂L/∂c_t (T × d_v; row t for query t) over keys ≠ values, writes the gradients of
/// align(queries, keys, values, score) into the views of `out` (see align_backward_views).
/// Allocates nothing when ∂L/∂s, ∂L/∂q and ∂L/∂k are given and the score's backward is batched.
/// Every row's sizes are checked first.
template <matrix_like Qs, matrix_like K, matrix_like V, class S, matrix_like G,
          class P = no_parameters>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, K, V, S> &&
      detail::matrix_input_for<G, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<V>>
void align_backward(const Qs& queries, const K& keys, const V& values, const S& score,
                    const G& grad_contexts, align_backward_views<matrix_scalar_of<Qs>, P> out,
                    const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  detail::align_backward_views_of<T, common_extent<rows_of<K>, rows_of<V>>, cols_of<Qs>,
                                  cols_of<K>>(
      "attn::align_backward", score, as_view(queries), as_view(keys), as_view(values),
      as_view(grad_contexts), out.scores, out.queries, out.keys, out.values, false, out.accumulate,
      detail::parameters_of(out.parameters), opt);
}

/// align_backward over notes that are keys and values, into the views of `out`.
template <matrix_like Qs, matrix_like M, class S, matrix_like G, class P = no_parameters>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, M, M, S> &&
      detail::matrix_input_for<G, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<M>>
void align_backward(const Qs& queries, const M& notes, const S& score, const G& grad_contexts,
                    align_notes_backward_views<matrix_scalar_of<Qs>, P> out,
                    const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  const auto nv = as_view(notes);
  detail::align_backward_views_of<T, rows_of<M>, cols_of<Qs>, cols_of<M>>(
      "attn::align_backward", score, as_view(queries), nv, nv, as_view(grad_contexts), out.scores,
      out.queries, out.notes, out.notes, true, out.accumulate,
      detail::parameters_of(out.parameters), opt);
}

/// From ∂L/∂c_t (T × d_v) over keys ≠ values, returns ∂L/∂s (T × n), ∂L/∂q_t (T × d_q),
/// ∂L/∂k_j, ∂L/∂v_j (summed over the queries) and ∂L/∂θ. Fixed sizes: no allocation.
template <matrix_like Qs, matrix_like K, matrix_like V, class S, matrix_like G>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, K, V, S> &&
      detail::matrix_input_for<G, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<V>>
[[nodiscard]] auto align_backward(const Qs& queries, const K& keys, const V& values, const S& score,
                                  const G& grad_contexts, const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  constexpr std::size_t TQ = rows_of<Qs>, DQ = cols_of<Qs>,
                        N = common_extent<rows_of<K>, rows_of<V>>;
  const auto qv = as_view(queries);
  const auto kv = as_view(keys);
  const auto vv = as_view(values);
  align_backward_result<T, TQ, DQ, N, cols_of<K>, cols_of<V>, parameter_gradient_t<S>> r{
      detail::zero_matrix<T, TQ, N>(qv.rows(), kv.rows()),
      detail::zero_matrix<T, TQ, DQ>(qv.rows(), qv.cols()),
      detail::zero_matrix<T, N, cols_of<K>>(kv.rows(), kv.cols()),
      detail::zero_matrix<T, N, cols_of<V>>(kv.rows(), vv.cols()), zero_parameter_gradient(score)};
  detail::align_backward_views_of<T, N, DQ, cols_of<K>, S, parameter_gradient_t<S>, true>(
      "attn::align_backward", score, qv, kv, vv, as_view(grad_contexts), r.scores.view(),
      r.queries.view(), r.keys.view(), r.values.view(), false, false,
      detail::parameters_of(r.parameters), opt);
  return r;
}

/// From ∂L/∂c_t (T × d) over notes that are keys and values, returns ∂L/∂s (T × n),
/// ∂L/∂q_t (T × d_q), ∂L/∂h_j (summed over the queries) and ∂L/∂θ. Fixed sizes: no allocation.
template <matrix_like Qs, matrix_like M, class S, matrix_like G>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, M, M, S> &&
      detail::matrix_input_for<G, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<M>>
[[nodiscard]] auto align_backward(const Qs& queries, const M& notes, const S& score,
                                  const G& grad_contexts, const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  constexpr std::size_t TQ = rows_of<Qs>, DQ = cols_of<Qs>, N = rows_of<M>, D = cols_of<M>;
  const auto qv = as_view(queries);
  const auto nv = as_view(notes);
  align_notes_backward_result<T, TQ, DQ, N, D, parameter_gradient_t<S>> r{
      detail::zero_matrix<T, TQ, N>(qv.rows(), nv.rows()),
      detail::zero_matrix<T, TQ, DQ>(qv.rows(), qv.cols()),
      detail::zero_matrix<T, N, D>(nv.rows(), nv.cols()), zero_parameter_gradient(score)};
  detail::align_backward_views_of<T, N, DQ, D, S, parameter_gradient_t<S>, true>(
      "attn::align_backward", score, qv, nv, nv, as_view(grad_contexts), r.scores.view(),
      r.queries.view(), r.notes.view(), r.notes.view(), true, false,
      detail::parameters_of(r.parameters), opt);
  return r;
}

// Transitional names (0.1): backward from the forward's weights, or weights and context.

/// backward(q, keys, values, score, saved_forward{weights}, grad_context, opt).
template <vector_like Q, matrix_like K, matrix_like V, class S, vector_like W, vector_like G>
  requires detail::attend_inputs<Q, K, V, S> && detail::input_for<W, scalar_of<Q>, rows_of<K>>
[[nodiscard]] auto backward_from_weights(const Q& q, const K& keys, const V& values, const S& score,
                                         const W& weights, const G& grad_context,
                                         const options& opt = {}) {
  const saved_forward<scalar_of<Q>> s{as_span(weights), {}};
  return detail::backward_result_of("attn::backward_from_weights", q, keys, values, score, &s,
                                    grad_context, opt);
}

/// backward(q, notes, score, saved_forward{weights}, grad_context, opt).
template <vector_like Q, matrix_like M, class S, vector_like W, vector_like G>
  requires detail::attend_inputs<Q, M, M, S> && detail::input_for<W, scalar_of<Q>, rows_of<M>>
[[nodiscard]] auto backward_from_weights(const Q& q, const M& notes, const S& score,
                                         const W& weights, const G& grad_context,
                                         const options& opt = {}) {
  const saved_forward<scalar_of<Q>> s{as_span(weights), {}};
  return detail::notes_backward_result_of("attn::backward_from_weights", q, notes, score, &s,
                                          grad_context, opt);
}

/// backward(q, keys, values, score, saved_forward{weights, context}, grad_context, opt).
template <vector_like Q, matrix_like K, matrix_like V, class S, vector_like W, vector_like C,
          vector_like G>
  requires detail::attend_inputs<Q, K, V, S> && detail::input_for<W, scalar_of<Q>, rows_of<K>> &&
      detail::input_for<C, scalar_of<Q>, cols_of<V>>
[[nodiscard]] auto backward_from_forward(const Q& q, const K& keys, const V& values, const S& score,
                                         const W& weights, const C& context, const G& grad_context,
                                         const options& opt = {}) {
  const saved_forward<scalar_of<Q>> s{as_span(weights), as_span(context)};
  return detail::backward_result_of("attn::backward_from_forward", q, keys, values, score, &s,
                                    grad_context, opt);
}

/// backward(q, notes, score, saved_forward{weights, context}, grad_context, opt).
template <vector_like Q, matrix_like M, class S, vector_like W, vector_like C, vector_like G>
  requires detail::attend_inputs<Q, M, M, S> && detail::input_for<W, scalar_of<Q>, rows_of<M>> &&
      detail::input_for<C, scalar_of<Q>, cols_of<M>>
[[nodiscard]] auto backward_from_forward(const Q& q, const M& notes, const S& score,
                                         const W& weights, const C& context, const G& grad_context,
                                         const options& opt = {}) {
  const saved_forward<scalar_of<Q>> s{as_span(weights), as_span(context)};
  return detail::notes_backward_result_of("attn::backward_from_forward", q, notes, score, &s,
                                          grad_context, opt);
}

}  // namespace attn
