#pragma once
/// \file attn/jacobian.hpp
/// Derivatives of one look back, exact, for every score (dot, scaled_dot, general, additive and
/// any user type that satisfies `Score`), with sharpness β and masks. With s_j = score(q, k_j),
/// α = softmax(β·s, mask), c = Σ_j α_j v_j, g_j = ∂s_j/∂k_j and loss gradient g = ∂L/∂c:
///
///   ∂c/∂h_j = α_j (I + β (h_j − c) g_jᵀ)       notes that are both keys and values
///   ∂c/∂k_j = β α_j (v_j − c) g_jᵀ,  ∂c/∂v_j = α_j I      keys ≠ values
///   ∂c/∂q   = β Σ_j α_j (v_j − c) (∂s_j/∂q)ᵀ
///   backward: ∂L/∂s_j = β α_j ⟨g, v_j − c⟩,  ∂L/∂v_j = α_j g,  ∂L/∂k_j = (∂L/∂s_j) g_j,
///             ∂L/∂q = Σ_j (∂L/∂s_j) ∂s_j/∂q,  ∂L/∂θ = Σ_j (∂L/∂s_j) ∂s_j/∂θ
///
/// `jacobian_*` form the matrices; `backward` and `align_backward` give the vector-Jacobian
/// products in O(n·d + parameters) without forming any Jacobian. The proofs are in
/// docs/derivatives.md; the finite-difference checker is attn/gradcheck.hpp.
///
/// Rules: a masked note (weight 0) gets a zero Jacobian and zero gradients, whatever it holds
/// (inf and NaN included). On a row whose weights do not move with the scores — every note
/// masked or −inf (policies zeros and uniform), or some kept score +inf — the score terms are
/// zero: under `zeros` every derivative is 0; under `uniform` c is the mean of the values, so
/// ∂c/∂v_j = I/n and ∂L/∂v_j = g/n, and everything else is 0. A NaN row (a kept NaN score, or
/// the nan policy) gives NaN. Errors are those of `attend`, checked before anything is written.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <array>
#include <concepts>
#include <cstring>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attn/attention.hpp"
#include "attn/detail/reduce.hpp"
#include "attn/detail/rows.hpp"
#include "attn/detail/simd.hpp"
#include "attn/error.hpp"
#include "attn/extent.hpp"
#include "attn/matrix.hpp"
#include "attn/score.hpp"
#include "attn/softmax.hpp"
#include "attn/vector.hpp"

namespace attn {

/// What `backward` gives for keys ≠ values (row j of a matrix belongs to note j).
template <real T, std::size_t DQ = dynamic, std::size_t N = dynamic, std::size_t DK = dynamic,
          std::size_t DV = dynamic, class P = no_parameters>
struct backward_result {
  Vector<T, N> scores;      ///< ∂L/∂s_j = β α_j ⟨g, v_j − c⟩
  Vector<T, DQ> query;      ///< ∂L/∂q = Σ_j (∂L/∂s_j) ∂s_j/∂q
  Matrix<T, N, DK> keys;    ///< ∂L/∂k_j = (∂L/∂s_j) ∂s_j/∂k_j
  Matrix<T, N, DV> values;  ///< ∂L/∂v_j = α_j g
  P parameters;             ///< ∂L/∂θ = Σ_j (∂L/∂s_j) ∂s_j/∂θ
};

/// What `backward` gives when the notes are both keys and values.
template <real T, std::size_t DQ = dynamic, std::size_t N = dynamic, std::size_t D = dynamic,
          class P = no_parameters>
struct notes_backward_result {
  Vector<T, N> scores;    ///< ∂L/∂s_j = β α_j ⟨g, h_j − c⟩
  Vector<T, DQ> query;    ///< ∂L/∂q = Σ_j (∂L/∂s_j) ∂s_j/∂q
  Matrix<T, N, D> notes;  ///< ∂L/∂h_j = α_j g + (∂L/∂s_j) ∂s_j/∂h_j
  P parameters;           ///< ∂L/∂θ = Σ_j (∂L/∂s_j) ∂s_j/∂θ
};

/// What `align_backward` gives for T queries over keys ≠ values (row t of `scores` and
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

/// What `align_backward` gives for T queries over notes that are both keys and values.
template <real T, std::size_t TQ = dynamic, std::size_t DQ = dynamic, std::size_t N = dynamic,
          std::size_t D = dynamic, class P = no_parameters>
struct align_notes_backward_result {
  Matrix<T, TQ, N> scores;    ///< ∂L/∂s_tj = β α_tj ⟨g_t, h_j − c_t⟩
  Matrix<T, TQ, DQ> queries;  ///< ∂L/∂q_t = Σ_j (∂L/∂s_tj) ∂s_tj/∂q_t
  Matrix<T, N, D> notes;      ///< ∂L/∂h_j = Σ_t [α_tj g_t + (∂L/∂s_tj) ∂s_tj/∂h_j]
  P parameters;               ///< ∂L/∂θ = Σ_t Σ_j (∂L/∂s_tj) ∂s_tj/∂θ
};

namespace detail::derivatives {

/// n numbers of scratch: inline when N is fixed (no allocation); for dynamic N inline up to 128
/// numbers, else on the heap.
template <class T, std::size_t N>
class scratch {
  static constexpr std::size_t inline_size = N == dynamic ? 128 : (N > 0 ? N : 1);
  std::array<T, inline_size> small_{};
  std::vector<T> big_;
  std::span<T> s_;

public:
  explicit scratch(std::size_t n) {
    if (N == dynamic && n > inline_size) {
      big_.assign(n, T(0));
      s_ = std::span<T>(big_);
    } else {
      s_ = std::span<T>(small_.data(), n);
    }
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  [[nodiscard]] std::span<T> span() const noexcept { return s_; }
  [[nodiscard]] T& operator[](std::size_t i) const noexcept { return s_[i]; }
};

/// Whether score_backward goes note by note for S (no batched accumulate_gradients for these
/// arguments): it then needs ∂s/∂h and ∂s/∂q of one note in scratch.
template <class S, class T, class P>
inline constexpr bool note_by_note =
    !((!std::same_as<P, no_parameters> &&
       requires(const S& s, std::span<const T> q, MatrixView<const T> k, std::span<const T> a,
                std::span<T> g, MatrixView<T> gk, P& p) { s.accumulate_gradients(q, k, a, g, gk, p); }) ||
      requires(const S& s, std::span<const T> q, MatrixView<const T> k, std::span<const T> a,
               std::span<T> g, MatrixView<T> gk) { s.accumulate_gradients(q, k, a, g, gk); });

/// The scratch of score_backward's note-by-note form, made by the entry points after their
/// checks and before they write anything, so that a std::bad_alloc (dynamic sizes above 128)
/// leaves every output untouched.
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

template <class T, std::size_t N>
[[nodiscard]] Vector<T, N> zero_vector(std::size_t n) {
  if constexpr (N == dynamic)
    return Vector<T>(n);
  else
    return Vector<T, N>{};
}

template <class T, std::size_t R, std::size_t C>
[[nodiscard]] Matrix<T, R, C> zero_matrix(std::size_t r, std::size_t c) {
  if constexpr (R == dynamic || C == dynamic)
    return Matrix<T, R, C>(r, c);
  else
    return Matrix<T, R, C>{};
}

template <class T>
void zero(MatrixView<T> m) noexcept {
  for (std::size_t i = 0; i < m.rows(); ++i) fill(m.row(i).data(), m.cols(), T(0));
}

inline void check_index(const char* where, std::size_t j, std::size_t n) {
  if (j >= n)
    throw dimension_error(std::string(where) + ": note index " + std::to_string(j) +
                          " is out of range for " + std::to_string(n) + " notes");
}

/// Throws dimension_error unless `what` is want_rows × want_cols (builds no string unless it throws).
inline void check_shape(const char* where, const char* what, std::size_t rows, std::size_t cols,
                        std::size_t want_rows, std::size_t want_cols) {
  if (rows != want_rows || cols != want_cols)
    throw dimension_error(std::string(where) + ": " + what + " is " + std::to_string(rows) + "x" +
                          std::to_string(cols) + " but should be " + std::to_string(want_rows) + "x" +
                          std::to_string(want_cols));
}

/// The forward pass into scratch: α (n) and c (d_v). Returns whether the scores move the
/// weights (softmax's `finite` row kind); sizes must be checked.
template <real T, class S>
bool forward_pass(const char* where, const S& score, std::span<const T> q, MatrixView<const T> keys,
             MatrixView<const T> values, std::span<T> alpha, std::span<T> c, const options& opt) {
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

/// ∂c/∂k_j (keys ≠ values) or ∂c/∂h_j (add_identity: notes are keys and values) into out.
template <real T, std::size_t N, std::size_t DK, std::size_t DV, class S>
void jacobian_key(const char* where, const S& score, std::span<const T> q, MatrixView<const T> keys,
                  MatrixView<const T> values, std::size_t j, MatrixView<T> out, bool add_identity,
                  const options& opt) {
  const std::size_t n = keys.rows(), dk = keys.cols(), dv = values.cols();
  check_attend<T>(where, q, keys, values, score, n, n, dv, opt);
  check_index(where, j, n);
  check_shape(where, "the Jacobian", out.rows(), out.cols(), dv, dk);
  scratch<T, N> alpha(n);
  scratch<T, DV> c(dv);
  const bool flows = forward_pass<T>(where, score, q, keys, values, alpha.span(), c.span(), opt);
  const T aj = alpha[j];
  zero(out);
  if (aj == T(0)) return;  // masked (or no weight): c does not depend on this note
  if (!(aj == aj)) {       // a NaN row
    for (std::size_t i = 0; i < dv; ++i) fill(out.row(i).data(), dk, aj);
    return;
  }
  if (add_identity)
    for (std::size_t i = 0; i < dv; ++i) out(i, i) = aj;
  if (!flows) return;  // the weights do not move with the scores
  scratch<T, DK> g(dk);
  score.gradient_note(q, std::span<const T>(keys.row(j)), g.span());
  scratch<T, DV> d(dv);
  value_minus_context<T>(j, alpha.span(), values, c.span(), d.span());
  const T beta = static_cast<T>(opt.beta);
  for (std::size_t a = 0; a < dv; ++a) axpy(beta * aj * d[a], g.span().data(), out.row(a).data(), dk);
}

/// ∂c/∂v_j = α_j I into out.
template <real T, std::size_t N, std::size_t DV, class S>
void jacobian_value(const char* where, const S& score, std::span<const T> q, MatrixView<const T> keys,
                    MatrixView<const T> values, std::size_t j, MatrixView<T> out, const options& opt) {
  const std::size_t n = keys.rows(), dv = values.cols();
  check_attend<T>(where, q, keys, values, score, n, n, dv, opt);
  check_index(where, j, n);
  check_shape(where, "the Jacobian", out.rows(), out.cols(), dv, dv);
  scratch<T, N> alpha(n);
  score_all(score, q, keys, alpha.span());
  softmax_row(where, alpha.span().data(), alpha.span().data(), n, n, opt);
  const T aj = alpha[j];
  zero(out);
  if (!(aj == aj)) {
    for (std::size_t i = 0; i < dv; ++i) fill(out.row(i).data(), dv, aj);
    return;
  }
  for (std::size_t i = 0; i < dv; ++i) out(i, i) = aj;
}

/// ∂c/∂q = β Σ_j α_j (v_j − c)(∂s_j/∂q)ᵀ into out (d_v × d_q).
template <real T, std::size_t N, std::size_t DQ, std::size_t DV, class S>
void jacobian_query(const char* where, const S& score, std::span<const T> q, MatrixView<const T> keys,
                    MatrixView<const T> values, MatrixView<T> out, const options& opt) {
  const std::size_t n = keys.rows(), dq = q.size(), dv = values.cols();
  check_attend<T>(where, q, keys, values, score, n, n, dv, opt);
  check_shape(where, "the Jacobian", out.rows(), out.cols(), dv, dq);
  scratch<T, N> alpha(n);
  scratch<T, DV> c(dv);
  const bool flows = forward_pass<T>(where, score, q, keys, values, alpha.span(), c.span(), opt);
  zero(out);
  if (!(alpha[0] == alpha[0])) {  // a NaN row is NaN throughout
    for (std::size_t i = 0; i < dv; ++i) fill(out.row(i).data(), dq, alpha[0]);
    return;
  }
  if (!flows) return;
  const T beta = static_cast<T>(opt.beta);
  scratch<T, DQ> gq(dq);
  scratch<T, DV> d(dv);
  for (std::size_t j = 0; j < n; ++j) {
    if (alpha[j] == T(0)) continue;
    score.gradient_query(q, std::span<const T>(keys.row(j)), gq.span());
    value_minus_context<T>(j, alpha.span(), values, c.span(), d.span());
    for (std::size_t a = 0; a < dv; ++a)
      axpy(beta * alpha[j] * d[a], gq.span().data(), out.row(a).data(), dq);
  }
}

/// grad_q += Σ_j a_j ∂s_j/∂q, grad_keys_j += a_j ∂s_j/∂k_j and (grads ≠ null) ∂L/∂θ +=
/// Σ_j a_j ∂s_j/∂θ, through the score's batched members when it has them, else note by note
/// through gradient_note / gradient_query. Notes with a_j = 0 are skipped.
template <real T, std::size_t DQ, std::size_t DK, class S, class P, class NS = no_note_scratch>
void score_backward(const S& s, std::span<const T> q, MatrixView<const T> keys, std::span<const T> a,
                    std::span<T> gq, MatrixView<T> gk, P* grads, NS* ns = nullptr) {
  constexpr bool with_parameters = !std::same_as<P, no_parameters>;
  if constexpr (with_parameters && requires { s.accumulate_gradients(q, keys, a, gq, gk, *grads); }) {
    s.accumulate_gradients(q, keys, a, gq, gk, *grads);
  } else {
    if constexpr (requires { s.accumulate_gradients(q, keys, a, gq, gk); }) {
      s.accumulate_gradients(q, keys, a, gq, gk);
    } else {
      // the entry point's scratch when it made one (NS = note_scratch), else one made here
      std::optional<note_scratch<T, DQ, DK>> local;
      note_scratch<T, DQ, DK>* sc = nullptr;
      if constexpr (std::same_as<NS, note_scratch<T, DQ, DK>>) sc = ns;
      if (sc == nullptr) sc = &local.emplace(keys.cols(), q.size());
      const std::span<T> gh = sc->note.span(), gqj = sc->query.span();
      for (std::size_t j = 0; j < keys.rows(); ++j) {
        if (a[j] == T(0)) continue;
        const std::span<const T> h = keys.row(j);
        s.gradient_note(q, h, gh);
        axpy(a[j], gh.data(), gk.row(j).data(), keys.cols());
        s.gradient_query(q, h, gqj);
        axpy(a[j], gqj.data(), gq.data(), q.size());
      }
    }
    if constexpr (with_parameters) {
      if constexpr (requires { s.accumulate_parameter_gradient(q, keys, a, *grads); }) {
        s.accumulate_parameter_gradient(q, keys, a, *grads);
      } else {
        for (std::size_t j = 0; j < keys.rows(); ++j)
          if (a[j] != T(0)) s.accumulate_parameter_gradient(q, std::span<const T>(keys.row(j)), a[j], *grads);
      }
    }
  }
}

/// One query's backward. gk and gv hold what to add to (they may be the same view when the
/// notes are keys and values); gs and gq are overwritten. Sizes must be checked.
template <real T, std::size_t DQ, std::size_t DK, class S, class P, class NS = no_note_scratch>
void backward_row(const char* where, const S& score, std::span<const T> q, MatrixView<const T> keys,
                  MatrixView<const T> values, std::span<const T> gc, std::span<T> gs,
                  std::span<T> gq, MatrixView<T> gk, MatrixView<T> gv, P* grads, const options& opt,
                  NS* ns = nullptr) {
  const std::size_t n = keys.rows(), dv = values.cols();
  const T beta = static_cast<T>(opt.beta);
  score_all(score, q, keys, gs);
  const bool flows = weights_move(softmax_row_kind(gs.data(), n, opt));
  softmax_row(where, gs.data(), gs.data(), n, n, opt);  // gs holds α until it is overwritten
  const auto u = [&](std::size_t k) { return dot(gc.data(), values.row(k).data(), dv); };
  T ubar = 0;  // ⟨g, c⟩ = Σ_k α_k ⟨g, v_k⟩
  for (std::size_t k = 0; k < n; ++k)
    if (gs[k] != T(0)) ubar += gs[k] * u(k);
  const std::size_t m = flows ? dominant_weight(gs.data(), n) : n;
  T um = 0;  // ⟨g, v_m − c⟩ = Σ_{k≠m} α_k (u_m − u_k) for the weight above 1/2
  if (m < n) {
    const T u_m = u(m);
    for (std::size_t k = 0; k < n; ++k)
      if (k != m && gs[k] != T(0)) um += gs[k] * (u_m - u(k));
  }
  for (std::size_t j = 0; j < n; ++j) {
    const T alpha = gs[j];
    if (alpha == T(0)) continue;  // masked: nothing flows, whatever the note holds
    axpy(alpha, gc.data(), gv.row(j).data(), dv);
    if (flows)
      gs[j] = beta * alpha * (j == m ? um : u(j) - ubar);
    else
      gs[j] = alpha == alpha ? T(0) : alpha;  // weights fixed: no gradient to the scores
  }
  fill(gq.data(), gq.size(), T(0));
  score_backward<T, DQ, DK>(score, q, keys, std::span<const T>(gs), gq, gk, grads, ns);
}

/// The part of backward_dot after the softmax, shared with backward_dot_weights: ū = ⟨g, c⟩ =
/// Σ_k α_k u_k, the dominant-weight form (for a weight above 1/2, u_m − ū = Σ_{k≠m} α_k
/// (u_m − u_k), which does not cancel), then per note a_j = β α_j (u_j − ū) into gs, the rows
/// of gk and gv (written, not added to), and ∂L/∂q = Σ_j a_j f k_j (f: scaled_dot's factor).
/// u_j is at u[j·us]; alpha_j and u_j are read before gs_j is written, so either may live in gs.
template <real T, class S>
void dot_backward_rows(const T* alpha, const T* u, std::size_t us, std::span<const T> q,
                       MatrixView<const T> keys, std::span<const T> gc, std::span<T> gs, std::span<T> gq,
                       MatrixView<T> gk, MatrixView<T> gv, bool notes_both, const options& opt) {
  const std::size_t n = keys.rows(), dk = keys.cols(), dv = gv.cols();
  constexpr std::size_t B = online_block;
  T ubar = 0;  // ⟨g, c⟩ = Σ_k α_k ⟨g, v_k⟩
  for (std::size_t k = 0; k < n; ++k)
    if (alpha[k] != T(0)) ubar += alpha[k] * u[k * us];
  const std::size_t m = dominant_weight(alpha, n);
  T um = 0;  // ⟨g, v_m − c⟩ = Σ_{k≠m} α_k (u_m − u_k) for the weight above 1/2
  if (m < n) {
    const T u_m = u[m * us];
    for (std::size_t k = 0; k < n; ++k)
      if (k != m && alpha[k] != T(0)) um += alpha[k] * (u_m - u[k * us]);
  }
  const T beta = static_cast<T>(opt.beta);
  const T f = S::template scale<T>(dk);
  const T* g = gc.data();
  fill(gq.data(), gq.size(), T(0));
  for (std::size_t j0 = 0; j0 < n; j0 += B) {
    const std::size_t nb = n - j0 < B ? n - j0 : B;
    for (std::size_t j = j0; j < j0 + nb; ++j) {
      const T a_j = alpha[j];
      const T a = a_j == T(0) ? T(0) : beta * a_j * (j == m ? um : u[j * us] - ubar);
      gs[j] = a;
      const T af = f == T(1) ? a : a * f;
      T* vj = gv.row(j).data();
      T* kj = gk.row(j).data();
      // the rows backward_row's zero(), axpy(α, g) and axpy(a f, q) leave
      if (a_j == T(0)) {
        fill(vj, dv, T(0));
        if (!notes_both) fill(kj, dk, T(0));
      } else if (notes_both) {
        if (a == T(0)) {
          for (std::size_t i = 0; i < dv; ++i) vj[i] = a_j * g[i];
        } else {
          for (std::size_t i = 0; i < dv; ++i) vj[i] = a_j * g[i] + af * q[i];
        }
      } else {
        for (std::size_t i = 0; i < dv; ++i) vj[i] = a_j * g[i];
        if (a == T(0)) {
          fill(kj, dk, T(0));
        } else {
          for (std::size_t i = 0; i < dk; ++i) kj[i] = af * q[i];
        }
      }
    }
    // ∂L/∂q += Σ_j a_j f k_j, grouped as the score's accumulate_gradients groups it
    accumulate_rows(gs.data() + j0, f, keys.row(j0).data(), keys.row_stride(), nb, dk, gq.data());
  }
}

/// backward for one query with dot or scaled_dot, writing gk and gv (not adding to them): two
/// passes over the notes where backward_row makes six. Pass 1 forms the scores and
/// u_j = ⟨g, v_j⟩ (kept in gv(j, 0) until pass 2 writes row j); pass 2 writes ∂L/∂s, the rows
/// of gk and gv, and adds into ∂L/∂q. ∂L/∂s and ∂L/∂q are formed exactly as backward_row
/// forms them (the same scores, weights, u_j, ⟨g, c⟩ and dominant-weight form, the same order
/// of every sum), so they agree to the bit with align_backward's rows; a row α_j g + a_j q of
/// notes that are keys and values is formed in one expression (it may round differently).
/// Returns false, for backward_row to redo the row, when the weights do not move with the
/// scores (or d_v = 0).
template <real T, class S>
bool backward_dot(const char* where, const S& score, std::span<const T> q, MatrixView<const T> keys,
                  MatrixView<const T> values, std::span<const T> gc, std::span<T> gs, std::span<T> gq,
                  MatrixView<T> gk, MatrixView<T> gv, bool notes_both, const options& opt) {
  const std::size_t n = keys.rows(), dk = keys.cols(), dv = values.cols();
  if (dv == 0) return false;
  constexpr std::size_t B = online_block;
  T ub[B];
  T* ust = gv.data();  // u_j at ust[j·us]
  const std::size_t us = gv.row_stride();
  for (std::size_t j0 = 0; j0 < n; j0 += B) {
    const std::size_t nb = n - j0 < B ? n - j0 : B;
    if (notes_both) {  // both products from one read of each note
      dot_rows2(q.data(), gc.data(), keys.row(j0).data(), keys.row_stride(), nb, dk, gs.data() + j0, ub);
      const T f = S::template scale<T>(dk);
      if (f != T(1)) scale(gs.data() + j0, nb, f);  // as the score's scores()
    } else {  // the block of keys is still in L1 for the second product
      score_all(score, q, row_block(keys, j0, nb), gs.subspan(j0, nb));
      dot_rows(gc.data(), values.row(j0).data(), values.row_stride(), nb, dv, ub);
    }
    for (std::size_t r = 0; r < nb; ++r) ust[(j0 + r) * us] = ub[r];
  }
  if (!weights_move(softmax_row_kind(gs.data(), n, opt))) return false;
  softmax_row(where, gs.data(), gs.data(), n, n, opt);  // gs holds α until pass 2 overwrites it
  dot_backward_rows<T, S>(gs.data(), ust, us, q, keys, gc, gs, gq, gk, gv, notes_both, opt);
  return true;
}

template <class S, class P>
void check_parameter_gradient(const S& score, P* grads) {
  if constexpr (!std::same_as<P, no_parameters>) {
    if constexpr (requires { score.check_gradient(*grads); }) score.check_gradient(*grads);
  }
}

/// backward for one query into caller buffers: checks every size, then writes.
template <real T, std::size_t DQ, std::size_t DK, class S, class P>
void backward(const char* where, const S& score, std::span<const T> q, MatrixView<const T> keys,
              MatrixView<const T> values, std::span<const T> gc, std::span<T> gs, std::span<T> gq,
              MatrixView<T> gk, MatrixView<T> gv, bool notes_both, P* grads, const options& opt) {
  const std::size_t n = keys.rows();
  check_attend<T>(where, q, keys, values, score, gs.size(), gs.size(), gc.size(), opt);
  check_equal(where, "size of dL/dq", gq.size(), "query size", q.size());
  check_shape(where, notes_both ? "dL/dnotes" : "dL/dkeys", gk.rows(), gk.cols(), n, keys.cols());
  if (!notes_both) check_shape(where, "dL/dvalues", gv.rows(), gv.cols(), n, values.cols());
  check_parameter_gradient(score, grads);
  note_scratch_for<S, T, P, DQ, DK> ns(keys.cols(), q.size());  // may throw bad_alloc: nothing written yet
  if constexpr (dot_product_score<S, T> && std::same_as<P, no_parameters>) {
    if (backward_dot<T>(where, score, q, keys, values, gc, gs, gq, gk, notes_both ? gk : gv, notes_both, opt))
      return;
  }
  zero(gk);
  if (!notes_both) zero(gv);
  backward_row<T, DQ, DK>(where, score, q, keys, values, gc, gs, gq, gk, notes_both ? gk : gv, grads, opt, &ns);
}

/// Whether backward_from_weights differentiates the given weights as a softmax's (they move
/// with the scores) or holds them fixed: fixed only when opt.mask keeps no note.
inline bool mask_keeps_a_note(const options& opt) noexcept {
  if (opt.mask.empty()) return true;
  for (const bool k : opt.mask)
    if (k) return true;
  return false;
}

/// backward_dot from the forward's weights α (not recomputed): pass 1 forms only
/// u_j = ⟨g, v_j⟩ (one product per note, into gs); ⟨g, c⟩, the dominant-weight form and
/// pass 2 are backward_dot's, read from α, so the numbers are backward_dot's to the bit when α
/// is the softmax backward_dot forms. Sizes must be checked, the weights must move and d_v > 0.
template <real T, class S>
void backward_dot_weights(std::span<const T> q, MatrixView<const T> keys, MatrixView<const T> values,
                          std::span<const T> alpha, std::span<const T> gc, std::span<T> gs, std::span<T> gq,
                          MatrixView<T> gk, MatrixView<T> gv, bool notes_both, const options& opt) {
  const T* w = alpha.data();
  T* u = gs.data();  // u_j until pass 2 overwrites it with ∂L/∂s_j
  dot_rows(gc.data(), values.data(), values.row_stride(), keys.rows(), values.cols(), u);
  dot_backward_rows<T, S>(w, u, 1, q, keys, gc, gs, gq, gk, gv, notes_both, opt);
}

/// backward_row from the forward's weights α, for any score: ∂L/∂s and the rows of gv as
/// backward_row forms them (u_j formed once per note), then score_backward. gk and gv hold
/// what to add to; gs and gq are overwritten. Sizes must be checked.
template <real T, std::size_t DQ, std::size_t DK, class S, class P, class NS = no_note_scratch>
void backward_row_weights(const S& score, std::span<const T> q, MatrixView<const T> keys,
                          MatrixView<const T> values, std::span<const T> alpha, std::span<const T> gc,
                          std::span<T> gs, std::span<T> gq, MatrixView<T> gk, MatrixView<T> gv, bool flows,
                          P* grads, const options& opt, NS* ns = nullptr) {
  const std::size_t n = keys.rows(), dv = values.cols();
  const T beta = static_cast<T>(opt.beta);
  const T* w = alpha.data();
  for (std::size_t k = 0; k < n; ++k) gs[k] = dot(gc.data(), values.row(k).data(), dv);  // u_k
  T ubar = 0;  // ⟨g, c⟩ = Σ_k α_k ⟨g, v_k⟩
  for (std::size_t k = 0; k < n; ++k)
    if (w[k] != T(0)) ubar += w[k] * gs[k];
  const std::size_t m = flows ? dominant_weight(w, n) : n;
  T um = 0;  // ⟨g, v_m − c⟩ = Σ_{k≠m} α_k (u_m − u_k) for the weight above 1/2
  if (m < n) {
    const T u_m = gs[m];
    for (std::size_t k = 0; k < n; ++k)
      if (k != m && w[k] != T(0)) um += w[k] * (u_m - gs[k]);
  }
  for (std::size_t j = 0; j < n; ++j) {
    const T a_j = w[j];
    if (a_j == T(0)) {  // masked: nothing flows, whatever the note holds
      gs[j] = T(0);
      continue;
    }
    axpy(a_j, gc.data(), gv.row(j).data(), dv);
    if (flows)
      gs[j] = beta * a_j * (j == m ? um : gs[j] - ubar);
    else
      gs[j] = a_j == a_j ? T(0) : a_j;  // weights fixed: no gradient to the scores
  }
  fill(gq.data(), gq.size(), T(0));
  score_backward<T, DQ, DK>(score, q, keys, std::span<const T>(gs), gq, gk, grads, ns);
}

/// backward_from_weights's size checks (and β's), before anything is written.
template <real T, class S, class P>
void check_from_weights(const char* where, const S& score, std::span<const T> q, MatrixView<const T> keys,
                        MatrixView<const T> values, std::span<const T> alpha, std::span<const T> gc,
                        std::span<T> gs, std::span<T> gq, MatrixView<T> gk, MatrixView<T> gv, bool notes_both,
                        P* grads, const options& opt) {
  const std::size_t n = keys.rows();
  score.check(q.size(), keys.cols());
  check_nonempty(where, "the notes matrix", n);
  check_equal(where, "rows of values", values.rows(), "rows of keys", n);
  check_equal(where, "size of the weights", alpha.size(), "number of notes", n);
  check_equal(where, "scores size", gs.size(), "number of notes", n);
  check_equal(where, "context size", gc.size(), "columns of values", values.cols());
  check_softmax_args<T>(where, n, n, opt);  // the mask's size and β
  check_equal(where, "size of dL/dq", gq.size(), "query size", q.size());
  check_shape(where, notes_both ? "dL/dnotes" : "dL/dkeys", gk.rows(), gk.cols(), n, keys.cols());
  if (!notes_both) check_shape(where, "dL/dvalues", gv.rows(), gv.cols(), n, values.cols());
  check_parameter_gradient(score, grads);
}

/// backward from the forward's weights, for one query into caller buffers; sizes must be
/// checked. The all-masked policy is not applied again: the weights carry it.
template <real T, std::size_t DQ, std::size_t DK, class S, class P>
void backward_from_weights_checked(const S& score, std::span<const T> q, MatrixView<const T> keys,
                                   MatrixView<const T> values, std::span<const T> alpha, std::span<const T> gc,
                                   std::span<T> gs, std::span<T> gq, MatrixView<T> gk, MatrixView<T> gv,
                                   bool notes_both, P* grads, const options& opt) {
  const bool flows = mask_keeps_a_note(opt);
  note_scratch_for<S, T, P, DQ, DK> ns(keys.cols(), q.size());  // may throw bad_alloc: nothing written yet
  if constexpr (dot_product_score<S, T> && std::same_as<P, no_parameters>) {
    if (flows && values.cols() != 0) {
      backward_dot_weights<T, S>(q, keys, values, alpha, gc, gs, gq, gk, notes_both ? gk : gv, notes_both, opt);
      return;
    }
  }
  zero(gk);
  if (!notes_both) zero(gv);
  backward_row_weights<T, DQ, DK>(score, q, keys, values, alpha, gc, gs, gq, gk, notes_both ? gk : gv, flows,
                                  grads, opt, &ns);
}

/// backward from the forward's weights, for one query into caller buffers: checks every size
/// (and β), then writes.
template <real T, std::size_t DQ, std::size_t DK, class S, class P>
void backward_from_weights(const char* where, const S& score, std::span<const T> q, MatrixView<const T> keys,
                           MatrixView<const T> values, std::span<const T> alpha, std::span<const T> gc,
                           std::span<T> gs, std::span<T> gq, MatrixView<T> gk, MatrixView<T> gv, bool notes_both,
                           P* grads, const options& opt) {
  check_from_weights<T>(where, score, q, keys, values, alpha, gc, gs, gq, gk, gv, notes_both, grads, opt);
  backward_from_weights_checked<T, DQ, DK>(score, q, keys, values, alpha, gc, gs, gq, gk, gv, notes_both, grads,
                                           opt);
}

/// For the eight rows r of a group: y += Σ_r af_r k_r (summed over r in order, then added to y)
/// and, when kg is null, row r of gn = al_r g + af_r q (notes that are keys and values), else
/// row r of kg = af_r q. Column by column, whole vectors of columns at a time (vector types, so
/// that the writes stay vectorized whatever the caller's size), each column vector of g and q
/// read once for the eight rows, then the tail.
template <class T>
void fused_group_rows(const T* al, const T* af, const T* k0, std::size_t ks, const T* g, const T* qd,
                      std::size_t d, T* y, T* gn, std::size_t gns, T* kg, std::size_t kgs) noexcept {
  std::size_t i = 0;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    constexpr std::size_t L = simd_lanes<T>;
    using VT = vec<T, L>;
    for (; i + L <= d; i += L) {
      VT acc = {};
      const VT qi = load<T, L>(qd + i);
      if (kg == nullptr) {
        // g_i and q_i read once for the eight rows (row by row they were read for each: with
        // AVX2's 16 registers, twice the loads of the forward's blend)
        const VT gi = load<T, L>(g + i);
        for (std::size_t r = 0; r < 8; ++r) {
          acc += af[r] * load<T, L>(k0 + r * ks + i);
          const VT x = al[r] * gi + af[r] * qi;
          std::memcpy(gn + r * gns + i, &x, sizeof x);
        }
      } else {
        for (std::size_t r = 0; r < 8; ++r) {
          acc += af[r] * load<T, L>(k0 + r * ks + i);
          const VT o = af[r] * qi;
          std::memcpy(kg + r * kgs + i, &o, sizeof o);
        }
      }
      const VT yi = load<T, L>(y + i) + acc;
      std::memcpy(y + i, &yi, sizeof yi);
    }
  }
#endif
  for (; i < d; ++i) {
    T acc = T(0);
    for (std::size_t r = 0; r < 8; ++r) {
      acc += af[r] * k0[r * ks + i];
      if (kg == nullptr)
        gn[r * gns + i] = al[r] * g[i] + af[r] * qd[i];
      else
        kg[r * kgs + i] = af[r] * qd[i];
    }
    y[i] += acc;
  }
}

/// The one-pass backward from the forward's weights α and context c (dot and scaled_dot):
/// with ū = ⟨g, c⟩ known before the pass, block by block (the block still in L1) it forms
/// u_j = ⟨g, v_j⟩ (into gs), a_j = β α_j (u_j − ū), writes ∂L/∂s_j = a_j and the rows α_j g,
/// a_j f q or α_j g + a_j f q, and adds Σ_j a_j f k_j into gq: each note read once, each
/// gradient row written once. Sizes must be checked, the weights must move, d_v > 0, no
/// weight above 1/2 (u_m − ū is formed directly here) and α, c, g finite; gs must not overlap α.
template <real T, class S>
void backward_dot_forward(std::span<const T> q, MatrixView<const T> keys, MatrixView<const T> values,
                          std::span<const T> alpha, std::span<const T> c, std::span<const T> gc,
                          std::span<T> gs, std::span<T> gq, MatrixView<T> gk, MatrixView<T> gv, bool notes_both,
                          const options& opt) {
  const std::size_t n = keys.rows(), dk = keys.cols(), dv = values.cols();
  constexpr std::size_t B = 8;  // rows per group: read by dot_rows, then again (from L1) below
  const T* w = alpha.data();
  const T* g = gc.data();
  const T* qd = q.data();
  const T ubar = dot(g, c.data(), dv);  // ⟨g, c⟩ = Σ_k α_k u_k up to rounding
  const T beta = static_cast<T>(opt.beta);
  const T f = S::template scale<T>(dk);
  T* __restrict y = gq.data();
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
      const T sj = a_j == T(0) ? T(0) : beta * a_j * (a[r] - ubar);
      a[r] = sj;
      al[r] = a_j;
      af[r] = f == T(1) ? sj : sj * f;
      plain = plain && a_j != T(0) && sj != T(0);
    }
    const T* __restrict k0 = keys.row(j0).data();
    T* __restrict v0 = gv.row(j0).data();
    T* __restrict kg0 = gk.row(j0).data();
    if (plain && notes_both) {  // one sweep over the columns: the rows' writes and ∂L/∂q
      fused_group_rows(al, af, k0, ks, g, qd, dk, y, v0, vs, static_cast<T*>(nullptr), 0);
      continue;
    }
    if (plain) {
      fused_group_rows(al, af, k0, ks, g, qd, dk, y, v0, vs, kg0, kgs);
      for (std::size_t r = 0; r < B; ++r)
        for (std::size_t i = 0; i < dv; ++i) v0[r * vs + i] = al[r] * g[i];
      continue;
    }
    for (std::size_t r = 0; r < nb; ++r) {  // the rows backward_dot_weights writes (+0 where it fills)
      T* vj = gv.row(j0 + r).data();
      T* kj = gk.row(j0 + r).data();
      if (al[r] == T(0)) {
        fill(vj, dv, T(0));
        if (!notes_both) fill(kj, dk, T(0));
      } else if (notes_both) {
        if (a[r] == T(0)) {
          for (std::size_t i = 0; i < dv; ++i) vj[i] = al[r] * g[i];
        } else {
          for (std::size_t i = 0; i < dv; ++i) vj[i] = al[r] * g[i] + af[r] * qd[i];
        }
      } else {
        for (std::size_t i = 0; i < dv; ++i) vj[i] = al[r] * g[i];
        if (a[r] == T(0)) {
          fill(kj, dk, T(0));
        } else {
          for (std::size_t i = 0; i < dk; ++i) kj[i] = af[r] * qd[i];
        }
      }
    }
    accumulate_rows(a, f, keys.row(j0).data(), ks, nb, dk, y);  // ∂L/∂q += Σ_j a_j f k_j
  }
}

/// Whether backward_from_forward may take the one pass: dot or scaled_dot without parameter
/// gradients, weights that move (the mask keeps a note), d_v > 0, no weight above 1/2, and
/// α, c, g and q finite. Anything else is backward_from_weights's.
template <real T>
bool one_pass_applies(std::span<const T> q, std::span<const T> alpha, std::span<const T> c,
                      std::span<const T> gc, const options& opt) noexcept {
  return !c.empty() && mask_keeps_a_note(opt) && dominant_weight(alpha.data(), alpha.size()) == alpha.size() &&
         all_finite(alpha.data(), alpha.size()) && all_finite(c.data(), c.size()) &&
         all_finite(gc.data(), gc.size()) && all_finite(q.data(), q.size());
}

/// backward from the forward's weights and context, for one query into caller buffers: checks
/// every size (and β), then writes, in one pass where one_pass_applies, else as
/// backward_from_weights (which does not read the context).
template <real T, std::size_t DQ, std::size_t DK, class S, class P>
void backward_from_forward(const char* where, const S& score, std::span<const T> q, MatrixView<const T> keys,
                           MatrixView<const T> values, std::span<const T> alpha, std::span<const T> c,
                           std::span<const T> gc, std::span<T> gs, std::span<T> gq, MatrixView<T> gk,
                           MatrixView<T> gv, bool notes_both, P* grads, const options& opt) {
  check_from_weights<T>(where, score, q, keys, values, alpha, gc, gs, gq, gk, gv, notes_both, grads, opt);
  check_equal(where, "size of the forward's context", c.size(), "columns of values", values.cols());
  if constexpr (dot_product_score<S, T> && std::same_as<P, no_parameters>) {
    if (one_pass_applies<T>(q, alpha, c, gc, opt)) {
      backward_dot_forward<T, S>(q, keys, values, alpha, c, gc, gs, gq, gk, notes_both ? gk : gv, notes_both, opt);
      return;
    }
  }
  backward_from_weights_checked<T, DQ, DK>(score, q, keys, values, alpha, gc, gs, gq, gk, gv, notes_both, grads,
                                           opt);
}

/// align_backward into caller buffers: checks every row, then writes.
template <real T, std::size_t DQ, std::size_t DK, class S, class P>
void align_backward(const char* where, const S& score, MatrixView<const T> qs, MatrixView<const T> keys,
                    MatrixView<const T> values, MatrixView<const T> gcs, MatrixView<T> gss,
                    MatrixView<T> gqs, MatrixView<T> gk, MatrixView<T> gv, bool notes_both, P* grads,
                    const options& opt) {
  const std::size_t tq = qs.rows(), n = keys.rows();
  check_nonempty(where, "the queries matrix", tq);
  check_shape(where, "dL/dcontexts", gcs.rows(), gcs.cols(), tq, values.cols());
  check_shape(where, "dL/dscores", gss.rows(), gss.cols(), tq, n);
  check_shape(where, "dL/dqueries", gqs.rows(), gqs.cols(), tq, qs.cols());
  check_shape(where, notes_both ? "dL/dnotes" : "dL/dkeys", gk.rows(), gk.cols(), n, keys.cols());
  if (!notes_both) check_shape(where, "dL/dvalues", gv.rows(), gv.cols(), n, values.cols());
  for (std::size_t t = 0; t < tq; ++t)
    check_attend<T>(where, qs.row(t), keys, values, score, n, n, values.cols(), opt);
  check_parameter_gradient(score, grads);
  note_scratch_for<S, T, P, DQ, DK> ns(keys.cols(), qs.cols());  // may throw bad_alloc: nothing written yet
  zero(gk);
  if (!notes_both) zero(gv);
  for (std::size_t t = 0; t < tq; ++t)
    backward_row<T, DQ, DK>(where, score, qs.row(t), keys, values, gcs.row(t), gss.row(t), gqs.row(t),
                            gk, notes_both ? gk : gv, grads, opt, &ns);
}

template <class In, class T, std::size_t N>
concept input_for = vector_like<In> && std::same_as<scalar_of<In>, T> && compatible_extents<extent_of<In>, N>;

template <class M, class T, std::size_t R, std::size_t C>
concept matrix_input_for = matrix_like<M> && std::same_as<matrix_scalar_of<M>, T> &&
                           compatible_extents<rows_of<M>, R> && compatible_extents<cols_of<M>, C>;

template <class M, class T, std::size_t R, std::size_t C>
concept matrix_output_for = mutable_matrix_like<M> && matrix_input_for<M, T, R, C>;

template <class S>
inline constexpr bool has_parameters = !std::same_as<parameter_gradient_t<S>, no_parameters>;

/// The backward_result of zeros that the value-returning backward functions fill: ∂L/∂s (n),
/// ∂L/∂q (d_q), ∂L/∂k (n × d_k), ∂L/∂v (n × d_v), ∂L/∂θ.
template <class T, std::size_t DQ, std::size_t N, std::size_t DK, std::size_t DV, class S>
[[nodiscard]] backward_result<T, DQ, N, DK, DV, parameter_gradient_t<S>> zero_backward_result(
    const S& score, std::size_t dq, std::size_t n, std::size_t dk, std::size_t dv) {
  return {zero_vector<T, N>(n), zero_vector<T, DQ>(dq), zero_matrix<T, N, DK>(n, dk), zero_matrix<T, N, DV>(n, dv),
          zero_parameter_gradient(score)};
}

/// The notes_backward_result of zeros: ∂L/∂s (n), ∂L/∂q (d_q), ∂L/∂h (n × d), ∂L/∂θ.
template <class T, std::size_t DQ, std::size_t N, std::size_t D, class S>
[[nodiscard]] notes_backward_result<T, DQ, N, D, parameter_gradient_t<S>> zero_notes_backward_result(
    const S& score, std::size_t dq, std::size_t n, std::size_t d) {
  return {zero_vector<T, N>(n), zero_vector<T, DQ>(dq), zero_matrix<T, N, D>(n, d), zero_parameter_gradient(score)};
}

}  // namespace detail::derivatives

// ---------------------------------------------------------------------------------------------
// Jacobians of the context
// ---------------------------------------------------------------------------------------------

/// Writes ∂c/∂h_j = α_j (I + β (h_j − c) g_jᵀ), g_j = ∂s_j/∂h_j, for notes that are both keys
/// and values, into the d×d `out`. A masked note gets 0; see the file comment for all-masked
/// and NaN rows. Throws dimension_error on sizes that disagree or j ≥ n. Fixed sizes allocate
/// nothing; dynamic ones may allocate O(n + d) scratch.
template <vector_like Q, matrix_like N, class S, class Out>
  requires detail::attend_inputs<Q, N, N, S> &&
           detail::derivatives::matrix_output_for<Out, scalar_of<Q>, cols_of<N>, cols_of<N>>
void jacobian_note(const Q& q, const N& notes, const S& score, std::size_t j, Out&& out,
                   const options& opt = {}) {
  using T = scalar_of<Q>;
  const auto nv = as_view(notes);
  detail::derivatives::jacobian_key<T, rows_of<N>, cols_of<N>, cols_of<N>>("attn::jacobian_note", score, as_span(q),
                                                            nv, nv, j, as_mutable_view(out), true, opt);
}

/// Returns ∂c/∂h_j = α_j (I + β (h_j − c) g_jᵀ) as a d×d Matrix (fixed d: no allocation).
template <vector_like Q, matrix_like N, class S>
  requires detail::attend_inputs<Q, N, N, S>
[[nodiscard]] Matrix<scalar_of<Q>, cols_of<N>, cols_of<N>> jacobian_note(const Q& q, const N& notes,
                                                                          const S& score, std::size_t j,
                                                                          const options& opt = {}) {
  using T = scalar_of<Q>;
  const auto nv = as_view(notes);
  auto out = detail::derivatives::zero_matrix<T, cols_of<N>, cols_of<N>>(nv.cols(), nv.cols());
  jacobian_note(q, notes, score, j, out.view(), opt);
  return out;
}

/// Writes ∂c/∂k_j = β α_j (v_j − c) g_jᵀ (d_v × d_k), g_j = ∂s_j/∂k_j, into `out`. Rules and
/// errors as for jacobian_note.
template <vector_like Q, matrix_like K, matrix_like V, class S, class Out>
  requires detail::attend_inputs<Q, K, V, S> &&
           detail::derivatives::matrix_output_for<Out, scalar_of<Q>, cols_of<V>, cols_of<K>>
void jacobian_key(const Q& q, const K& keys, const V& values, const S& score, std::size_t j, Out&& out,
                  const options& opt = {}) {
  using T = scalar_of<Q>;
  detail::derivatives::jacobian_key<T, common_extent<rows_of<K>, rows_of<V>>, cols_of<K>, cols_of<V>>(
      "attn::jacobian_key", score, as_span(q), as_view(keys), as_view(values), j, as_mutable_view(out),
      false, opt);
}

/// Returns ∂c/∂k_j = β α_j (v_j − c) g_jᵀ as a d_v × d_k Matrix (fixed sizes: no allocation).
template <vector_like Q, matrix_like K, matrix_like V, class S>
  requires detail::attend_inputs<Q, K, V, S>
[[nodiscard]] Matrix<scalar_of<Q>, cols_of<V>, cols_of<K>> jacobian_key(const Q& q, const K& keys,
                                                                         const V& values, const S& score,
                                                                         std::size_t j,
                                                                         const options& opt = {}) {
  using T = scalar_of<Q>;
  auto out = detail::derivatives::zero_matrix<T, cols_of<V>, cols_of<K>>(as_view(values).cols(), as_view(keys).cols());
  jacobian_key(q, keys, values, score, j, out.view(), opt);
  return out;
}

/// Writes ∂c/∂v_j = α_j I (d_v × d_v) into `out`. Under `uniform` on an all-masked row this is
/// I/n; a masked note gets 0. Errors as for jacobian_note.
template <vector_like Q, matrix_like K, matrix_like V, class S, class Out>
  requires detail::attend_inputs<Q, K, V, S> &&
           detail::derivatives::matrix_output_for<Out, scalar_of<Q>, cols_of<V>, cols_of<V>>
void jacobian_value(const Q& q, const K& keys, const V& values, const S& score, std::size_t j, Out&& out,
                    const options& opt = {}) {
  using T = scalar_of<Q>;
  detail::derivatives::jacobian_value<T, common_extent<rows_of<K>, rows_of<V>>, cols_of<V>>(
      "attn::jacobian_value", score, as_span(q), as_view(keys), as_view(values), j, as_mutable_view(out),
      opt);
}

/// Returns ∂c/∂v_j = α_j I as a d_v × d_v Matrix (fixed sizes: no allocation).
template <vector_like Q, matrix_like K, matrix_like V, class S>
  requires detail::attend_inputs<Q, K, V, S>
[[nodiscard]] Matrix<scalar_of<Q>, cols_of<V>, cols_of<V>> jacobian_value(const Q& q, const K& keys,
                                                                           const V& values, const S& score,
                                                                           std::size_t j,
                                                                           const options& opt = {}) {
  using T = scalar_of<Q>;
  const std::size_t dv = as_view(values).cols();
  auto out = detail::derivatives::zero_matrix<T, cols_of<V>, cols_of<V>>(dv, dv);
  jacobian_value(q, keys, values, score, j, out.view(), opt);
  return out;
}

/// Writes ∂c/∂q = β Σ_j α_j (v_j − c)(∂s_j/∂q)ᵀ (d_v × d_q) into `out`. Zero on a row whose
/// weights do not move with the scores; errors as for jacobian_note.
template <vector_like Q, matrix_like K, matrix_like V, class S, class Out>
  requires detail::attend_inputs<Q, K, V, S> &&
           detail::derivatives::matrix_output_for<Out, scalar_of<Q>, cols_of<V>, extent_of<Q>>
void jacobian_query(const Q& q, const K& keys, const V& values, const S& score, Out&& out,
                    const options& opt = {}) {
  using T = scalar_of<Q>;
  detail::derivatives::jacobian_query<T, common_extent<rows_of<K>, rows_of<V>>, extent_of<Q>, cols_of<V>>(
      "attn::jacobian_query", score, as_span(q), as_view(keys), as_view(values), as_mutable_view(out), opt);
}

/// Returns ∂c/∂q = β Σ_j α_j (v_j − c)(∂s_j/∂q)ᵀ as a d_v × d_q Matrix (fixed: no allocation).
template <vector_like Q, matrix_like K, matrix_like V, class S>
  requires detail::attend_inputs<Q, K, V, S>
[[nodiscard]] Matrix<scalar_of<Q>, cols_of<V>, extent_of<Q>> jacobian_query(const Q& q, const K& keys,
                                                                              const V& values, const S& score,
                                                                              const options& opt = {}) {
  using T = scalar_of<Q>;
  auto out = detail::derivatives::zero_matrix<T, cols_of<V>, extent_of<Q>>(as_view(values).cols(), as_span(q).size());
  jacobian_query(q, keys, values, score, out.view(), opt);
  return out;
}

/// Writes ∂c/∂q = β Σ_j α_j (h_j − c)(∂s_j/∂q)ᵀ (d × d_q) for notes that are keys and values.
template <vector_like Q, matrix_like N, class S, class Out>
  requires detail::attend_inputs<Q, N, N, S> &&
           detail::derivatives::matrix_output_for<Out, scalar_of<Q>, cols_of<N>, extent_of<Q>>
void jacobian_query(const Q& q, const N& notes, const S& score, Out&& out, const options& opt = {}) {
  jacobian_query(q, notes, notes, score, std::forward<Out>(out), opt);
}

/// Returns ∂c/∂q = β Σ_j α_j (h_j − c)(∂s_j/∂q)ᵀ for notes that are keys and values.
template <vector_like Q, matrix_like N, class S>
  requires detail::attend_inputs<Q, N, N, S>
[[nodiscard]] Matrix<scalar_of<Q>, cols_of<N>, extent_of<Q>> jacobian_query(const Q& q, const N& notes,
                                                                              const S& score,
                                                                              const options& opt = {}) {
  return jacobian_query(q, notes, notes, score, opt);
}

// ---------------------------------------------------------------------------------------------
// Backward: vector-Jacobian products, O(n·d + parameters), no Jacobian formed
// ---------------------------------------------------------------------------------------------

/// From g = ∂L/∂c (d_v numbers) for keys ≠ values, writes ∂L/∂s (n), ∂L/∂q (d_q), ∂L/∂k_j
/// (n × d_k) and ∂L/∂v_j = α_j g (n × d_v) into the caller's buffers; allocates nothing (a
/// user's score without `accumulate_gradients`, at dynamic sizes above 128, excepted). The
/// scores are recomputed (∂L/∂s's buffer holds them meanwhile). Masked notes get exactly 0.
/// Sizes are checked before anything is written (dimension_error).
template <vector_like Q, matrix_like K, matrix_like V, class S, vector_like G, class GS, class GQ, class GK,
          class GV>
  requires detail::attend_inputs<Q, K, V, S> && detail::derivatives::input_for<G, scalar_of<Q>, cols_of<V>> &&
           detail::output_for<GS, scalar_of<Q>, rows_of<K>> &&
           detail::output_for<GQ, scalar_of<Q>, extent_of<Q>> &&
           detail::derivatives::matrix_output_for<GK, scalar_of<Q>, rows_of<K>, cols_of<K>> &&
           detail::derivatives::matrix_output_for<GV, scalar_of<Q>, rows_of<V>, cols_of<V>>
void backward(const Q& q, const K& keys, const V& values, const S& score, const G& grad_context,
              GS&& grad_scores, GQ&& grad_query, GK&& grad_keys, GV&& grad_values, const options& opt = {}) {
  using T = scalar_of<Q>;
  detail::derivatives::backward<T, extent_of<Q>, cols_of<K>>(
      "attn::backward", score, as_span(q), as_view(keys), as_view(values), as_span(grad_context),
      as_mutable_span(grad_scores), as_mutable_span(grad_query), as_mutable_view(grad_keys),
      as_mutable_view(grad_values), false, static_cast<no_parameters*>(nullptr), opt);
}

/// As above, and also adds ∂L/∂θ = Σ_j (∂L/∂s_j) ∂s_j/∂θ to `grad_parameters` (e.g.
/// `general::gradient_view{dW}` or a `gradient` from zero_parameter_gradient): parameter
/// gradients accumulate, so a batch can sum into one buffer; every other output is overwritten.
template <vector_like Q, matrix_like K, matrix_like V, class S, vector_like G, class GS, class GQ, class GK,
          class GV, class P>
  requires detail::attend_inputs<Q, K, V, S> && detail::derivatives::input_for<G, scalar_of<Q>, cols_of<V>> &&
           detail::output_for<GS, scalar_of<Q>, rows_of<K>> &&
           detail::output_for<GQ, scalar_of<Q>, extent_of<Q>> &&
           detail::derivatives::matrix_output_for<GK, scalar_of<Q>, rows_of<K>, cols_of<K>> &&
           detail::derivatives::matrix_output_for<GV, scalar_of<Q>, rows_of<V>, cols_of<V>> &&
           parameter_gradient_for<P, S, scalar_of<Q>>
void backward(const Q& q, const K& keys, const V& values, const S& score, const G& grad_context,
              GS&& grad_scores, GQ&& grad_query, GK&& grad_keys, GV&& grad_values, P&& grad_parameters,
              const options& opt = {}) {
  using T = scalar_of<Q>;
  auto* p = &grad_parameters;
  detail::derivatives::backward<T, extent_of<Q>, cols_of<K>>(
      "attn::backward", score, as_span(q), as_view(keys), as_view(values), as_span(grad_context),
      as_mutable_span(grad_scores), as_mutable_span(grad_query), as_mutable_view(grad_keys),
      as_mutable_view(grad_values), false, p, opt);
}

/// From g = ∂L/∂c for notes that are keys and values, writes ∂L/∂s (n), ∂L/∂q (d_q) and
/// ∂L/∂h_j = α_j g + (∂L/∂s_j) ∂s_j/∂h_j (n × d) into the caller's buffers; allocates nothing
/// (as above). Masked notes get exactly 0.
template <vector_like Q, matrix_like N, class S, vector_like G, class GS, class GQ, class GN>
  requires detail::attend_inputs<Q, N, N, S> && detail::derivatives::input_for<G, scalar_of<Q>, cols_of<N>> &&
           detail::output_for<GS, scalar_of<Q>, rows_of<N>> &&
           detail::output_for<GQ, scalar_of<Q>, extent_of<Q>> &&
           detail::derivatives::matrix_output_for<GN, scalar_of<Q>, rows_of<N>, cols_of<N>>
void backward(const Q& q, const N& notes, const S& score, const G& grad_context, GS&& grad_scores,
              GQ&& grad_query, GN&& grad_notes, const options& opt = {}) {
  using T = scalar_of<Q>;
  const auto nv = as_view(notes);
  const MatrixView<T> gn = as_mutable_view(grad_notes);
  detail::derivatives::backward<T, extent_of<Q>, cols_of<N>>("attn::backward", score, as_span(q), nv, nv,
                                                as_span(grad_context), as_mutable_span(grad_scores),
                                                as_mutable_span(grad_query), gn, gn, true,
                                                static_cast<no_parameters*>(nullptr), opt);
}

/// As above, and also adds ∂L/∂θ to `grad_parameters` (accumulated; see the keys ≠ values form).
template <vector_like Q, matrix_like N, class S, vector_like G, class GS, class GQ, class GN, class P>
  requires detail::attend_inputs<Q, N, N, S> && detail::derivatives::input_for<G, scalar_of<Q>, cols_of<N>> &&
           detail::output_for<GS, scalar_of<Q>, rows_of<N>> &&
           detail::output_for<GQ, scalar_of<Q>, extent_of<Q>> &&
           detail::derivatives::matrix_output_for<GN, scalar_of<Q>, rows_of<N>, cols_of<N>> &&
           parameter_gradient_for<P, S, scalar_of<Q>>
void backward(const Q& q, const N& notes, const S& score, const G& grad_context, GS&& grad_scores,
              GQ&& grad_query, GN&& grad_notes, P&& grad_parameters, const options& opt = {}) {
  using T = scalar_of<Q>;
  const auto nv = as_view(notes);
  const MatrixView<T> gn = as_mutable_view(grad_notes);
  auto* p = &grad_parameters;
  detail::derivatives::backward<T, extent_of<Q>, cols_of<N>>("attn::backward", score, as_span(q), nv, nv,
                                                as_span(grad_context), as_mutable_span(grad_scores),
                                                as_mutable_span(grad_query), gn, gn, true, p, opt);
}

/// From g = ∂L/∂c for keys ≠ values, returns ∂L/∂s, ∂L/∂q, ∂L/∂k_j, ∂L/∂v_j and ∂L/∂θ
/// (`parameters`, of type parameter_gradient_t<S>). Fixed sizes: no allocation.
template <vector_like Q, matrix_like K, matrix_like V, class S, vector_like G>
  requires detail::attend_inputs<Q, K, V, S> && detail::derivatives::input_for<G, scalar_of<Q>, cols_of<V>>
[[nodiscard]] auto backward(const Q& q, const K& keys, const V& values, const S& score, const G& grad_context,
                            const options& opt = {}) {
  using T = scalar_of<Q>;
  constexpr std::size_t DQ = extent_of<Q>, N = common_extent<rows_of<K>, rows_of<V>>;
  const auto kv = as_view(keys);
  const auto vv = as_view(values);
  auto r = detail::derivatives::zero_backward_result<T, DQ, N, cols_of<K>, cols_of<V>>(
      score, as_span(q).size(), kv.rows(), kv.cols(), vv.cols());
  auto* p = detail::derivatives::has_parameters<S> ? &r.parameters : nullptr;
  detail::derivatives::backward<T, DQ, cols_of<K>>("attn::backward", score, as_span(q), kv, vv, as_span(grad_context),
                                      std::span<T>(r.scores), std::span<T>(r.query), r.keys.view(),
                                      r.values.view(), false, p, opt);
  return r;
}

/// From g = ∂L/∂c for notes that are keys and values, returns ∂L/∂s, ∂L/∂q,
/// ∂L/∂h_j = α_j g + (∂L/∂s_j) ∂s_j/∂h_j and ∂L/∂θ. Fixed sizes: no allocation.
template <vector_like Q, matrix_like N, class S, vector_like G>
  requires detail::attend_inputs<Q, N, N, S> && detail::derivatives::input_for<G, scalar_of<Q>, cols_of<N>>
[[nodiscard]] auto backward(const Q& q, const N& notes, const S& score, const G& grad_context,
                            const options& opt = {}) {
  using T = scalar_of<Q>;
  constexpr std::size_t DQ = extent_of<Q>, NN = rows_of<N>, D = cols_of<N>;
  const auto nv = as_view(notes);
  auto r = detail::derivatives::zero_notes_backward_result<T, DQ, NN, D>(score, as_span(q).size(), nv.rows(),
                                                                         nv.cols());
  auto* p = detail::derivatives::has_parameters<S> ? &r.parameters : nullptr;
  detail::derivatives::backward<T, DQ, D>("attn::backward", score, as_span(q), nv, nv, as_span(grad_context),
                             std::span<T>(r.scores), std::span<T>(r.query), r.notes.view(), r.notes.view(),
                             true, p, opt);
  return r;
}

/// backward from the forward's weights α (the n numbers attend wrote, attention_result::weights)
/// instead of recomputing the scores and the softmax, as autograd keeps softmax's output. With
/// u_j = ⟨g, v_j⟩ and ⟨g, c⟩ = Σ_k α_k u_k, for keys ≠ values it writes
///   ∂L/∂s_j = β α_j (u_j − ⟨g, c⟩),  ∂L/∂v_j = α_j g,  ∂L/∂k_j = (∂L/∂s_j) ∂s_j/∂k_j,
///   ∂L/∂q = Σ_j (∂L/∂s_j) ∂s_j/∂q
/// into the caller's buffers (n, d_q, n × d_k, n × d_v); allocates nothing (as backward). For
/// dot and scaled_dot it reads the notes twice (one product per note, then the writes) where
/// backward forms the scores too. When α is the softmax backward forms (attn::softmax of the
/// scores attend gives), every number is backward's to the bit.
///
/// The weights are taken as given, not checked to be a probability vector from this q; the
/// numbers are those of the formula above (with Σ α = 1 assumed where the weight above 1/2 is
/// formed as Σ_{k≠m} α_k (u_m − u_k)). A note of weight 0 gets exactly 0, whatever it holds
/// (so a masked note does, since attend gave it 0). The weights move with the scores unless
/// opt.mask keeps no note: then they are held fixed, as backward holds an all-masked row,
/// giving ∂L/∂v_j = α_j g and zero score terms (zeros → all 0, uniform → g/n, nan → NaN).
/// A row whose weights an infinite score fixed (a kept +inf score, every kept score −inf under
/// `uniform`) cannot be told from its weights and gets softmax's derivative at them, not
/// backward's zeros: use backward for such rows. Non-finite weights are not refused: a NaN
/// weight makes ⟨g, c⟩ NaN, so ∂L/∂q and the score terms of every note of weight ≠ 0 are NaN
/// (the all-NaN weights of attend's NaN row give backward's NaN row); ±inf weights give what
/// IEEE arithmetic gives. Only β and the mask's size are checked from `opt` (the
/// all-masked policy was the forward's). Sizes are checked before anything is written
/// (dimension_error); grad_scores must not overlap the weights.
template <vector_like Q, matrix_like K, matrix_like V, class S, vector_like W, vector_like G, class GS, class GQ,
          class GK, class GV>
  requires detail::attend_inputs<Q, K, V, S> && detail::derivatives::input_for<W, scalar_of<Q>, rows_of<K>> &&
           detail::derivatives::input_for<G, scalar_of<Q>, cols_of<V>> &&
           detail::output_for<GS, scalar_of<Q>, rows_of<K>> &&
           detail::output_for<GQ, scalar_of<Q>, extent_of<Q>> &&
           detail::derivatives::matrix_output_for<GK, scalar_of<Q>, rows_of<K>, cols_of<K>> &&
           detail::derivatives::matrix_output_for<GV, scalar_of<Q>, rows_of<V>, cols_of<V>>
void backward_from_weights(const Q& q, const K& keys, const V& values, const S& score, const W& weights,
                           const G& grad_context, GS&& grad_scores, GQ&& grad_query, GK&& grad_keys,
                           GV&& grad_values, const options& opt = {}) {
  using T = scalar_of<Q>;
  detail::derivatives::backward_from_weights<T, extent_of<Q>, cols_of<K>>(
      "attn::backward_from_weights", score, as_span(q), as_view(keys), as_view(values), as_span(weights),
      as_span(grad_context), as_mutable_span(grad_scores), as_mutable_span(grad_query),
      as_mutable_view(grad_keys), as_mutable_view(grad_values), false, static_cast<no_parameters*>(nullptr),
      opt);
}

/// As above, and also adds ∂L/∂θ = Σ_j (∂L/∂s_j) ∂s_j/∂θ to `grad_parameters` (accumulated,
/// as backward's).
template <vector_like Q, matrix_like K, matrix_like V, class S, vector_like W, vector_like G, class GS, class GQ,
          class GK, class GV, class P>
  requires detail::attend_inputs<Q, K, V, S> && detail::derivatives::input_for<W, scalar_of<Q>, rows_of<K>> &&
           detail::derivatives::input_for<G, scalar_of<Q>, cols_of<V>> &&
           detail::output_for<GS, scalar_of<Q>, rows_of<K>> &&
           detail::output_for<GQ, scalar_of<Q>, extent_of<Q>> &&
           detail::derivatives::matrix_output_for<GK, scalar_of<Q>, rows_of<K>, cols_of<K>> &&
           detail::derivatives::matrix_output_for<GV, scalar_of<Q>, rows_of<V>, cols_of<V>> &&
           parameter_gradient_for<P, S, scalar_of<Q>>
void backward_from_weights(const Q& q, const K& keys, const V& values, const S& score, const W& weights,
                           const G& grad_context, GS&& grad_scores, GQ&& grad_query, GK&& grad_keys,
                           GV&& grad_values, P&& grad_parameters, const options& opt = {}) {
  using T = scalar_of<Q>;
  auto* p = &grad_parameters;
  detail::derivatives::backward_from_weights<T, extent_of<Q>, cols_of<K>>(
      "attn::backward_from_weights", score, as_span(q), as_view(keys), as_view(values), as_span(weights),
      as_span(grad_context), as_mutable_span(grad_scores), as_mutable_span(grad_query),
      as_mutable_view(grad_keys), as_mutable_view(grad_values), false, p, opt);
}

/// backward_from_weights for notes that are keys and values: writes ∂L/∂s_j = β α_j (u_j − ⟨g, c⟩),
/// ∂L/∂q and ∂L/∂h_j = α_j g + (∂L/∂s_j) ∂s_j/∂h_j (n × d) into the caller's buffers;
/// allocates nothing. Rules as for the keys ≠ values form.
template <vector_like Q, matrix_like N, class S, vector_like W, vector_like G, class GS, class GQ, class GN>
  requires detail::attend_inputs<Q, N, N, S> && detail::derivatives::input_for<W, scalar_of<Q>, rows_of<N>> &&
           detail::derivatives::input_for<G, scalar_of<Q>, cols_of<N>> &&
           detail::output_for<GS, scalar_of<Q>, rows_of<N>> &&
           detail::output_for<GQ, scalar_of<Q>, extent_of<Q>> &&
           detail::derivatives::matrix_output_for<GN, scalar_of<Q>, rows_of<N>, cols_of<N>>
void backward_from_weights(const Q& q, const N& notes, const S& score, const W& weights, const G& grad_context,
                           GS&& grad_scores, GQ&& grad_query, GN&& grad_notes, const options& opt = {}) {
  using T = scalar_of<Q>;
  const auto nv = as_view(notes);
  const MatrixView<T> gn = as_mutable_view(grad_notes);
  detail::derivatives::backward_from_weights<T, extent_of<Q>, cols_of<N>>(
      "attn::backward_from_weights", score, as_span(q), nv, nv, as_span(weights), as_span(grad_context),
      as_mutable_span(grad_scores), as_mutable_span(grad_query), gn, gn, true,
      static_cast<no_parameters*>(nullptr), opt);
}

/// As above, and also adds ∂L/∂θ to `grad_parameters` (accumulated).
template <vector_like Q, matrix_like N, class S, vector_like W, vector_like G, class GS, class GQ, class GN,
          class P>
  requires detail::attend_inputs<Q, N, N, S> && detail::derivatives::input_for<W, scalar_of<Q>, rows_of<N>> &&
           detail::derivatives::input_for<G, scalar_of<Q>, cols_of<N>> &&
           detail::output_for<GS, scalar_of<Q>, rows_of<N>> &&
           detail::output_for<GQ, scalar_of<Q>, extent_of<Q>> &&
           detail::derivatives::matrix_output_for<GN, scalar_of<Q>, rows_of<N>, cols_of<N>> &&
           parameter_gradient_for<P, S, scalar_of<Q>>
void backward_from_weights(const Q& q, const N& notes, const S& score, const W& weights, const G& grad_context,
                           GS&& grad_scores, GQ&& grad_query, GN&& grad_notes, P&& grad_parameters,
                           const options& opt = {}) {
  using T = scalar_of<Q>;
  const auto nv = as_view(notes);
  const MatrixView<T> gn = as_mutable_view(grad_notes);
  auto* p = &grad_parameters;
  detail::derivatives::backward_from_weights<T, extent_of<Q>, cols_of<N>>(
      "attn::backward_from_weights", score, as_span(q), nv, nv, as_span(weights), as_span(grad_context),
      as_mutable_span(grad_scores), as_mutable_span(grad_query), gn, gn, true, p, opt);
}

/// backward_from_weights for keys ≠ values, returning ∂L/∂s, ∂L/∂q, ∂L/∂k_j, ∂L/∂v_j and ∂L/∂θ
/// (a backward_result). Fixed sizes: no allocation.
template <vector_like Q, matrix_like K, matrix_like V, class S, vector_like W, vector_like G>
  requires detail::attend_inputs<Q, K, V, S> && detail::derivatives::input_for<W, scalar_of<Q>, rows_of<K>> &&
           detail::derivatives::input_for<G, scalar_of<Q>, cols_of<V>>
[[nodiscard]] auto backward_from_weights(const Q& q, const K& keys, const V& values, const S& score,
                                         const W& weights, const G& grad_context, const options& opt = {}) {
  using T = scalar_of<Q>;
  constexpr std::size_t DQ = extent_of<Q>, N = common_extent<rows_of<K>, rows_of<V>>;
  const auto kv = as_view(keys);
  const auto vv = as_view(values);
  auto r = detail::derivatives::zero_backward_result<T, DQ, N, cols_of<K>, cols_of<V>>(
      score, as_span(q).size(), kv.rows(), kv.cols(), vv.cols());
  auto* p = detail::derivatives::has_parameters<S> ? &r.parameters : nullptr;
  detail::derivatives::backward_from_weights<T, DQ, cols_of<K>>(
      "attn::backward_from_weights", score, as_span(q), kv, vv, as_span(weights), as_span(grad_context),
      std::span<T>(r.scores), std::span<T>(r.query), r.keys.view(), r.values.view(), false, p, opt);
  return r;
}

/// backward_from_weights for notes that are keys and values, returning ∂L/∂s, ∂L/∂q, ∂L/∂h_j
/// and ∂L/∂θ (a notes_backward_result). Fixed sizes: no allocation.
template <vector_like Q, matrix_like N, class S, vector_like W, vector_like G>
  requires detail::attend_inputs<Q, N, N, S> && detail::derivatives::input_for<W, scalar_of<Q>, rows_of<N>> &&
           detail::derivatives::input_for<G, scalar_of<Q>, cols_of<N>>
[[nodiscard]] auto backward_from_weights(const Q& q, const N& notes, const S& score, const W& weights,
                                         const G& grad_context, const options& opt = {}) {
  using T = scalar_of<Q>;
  constexpr std::size_t DQ = extent_of<Q>, NN = rows_of<N>, D = cols_of<N>;
  const auto nv = as_view(notes);
  auto r = detail::derivatives::zero_notes_backward_result<T, DQ, NN, D>(score, as_span(q).size(), nv.rows(),
                                                                         nv.cols());
  auto* p = detail::derivatives::has_parameters<S> ? &r.parameters : nullptr;
  detail::derivatives::backward_from_weights<T, DQ, D>(
      "attn::backward_from_weights", score, as_span(q), nv, nv, as_span(weights), as_span(grad_context),
      std::span<T>(r.scores), std::span<T>(r.query), r.notes.view(), r.notes.view(), true, p, opt);
  return r;
}

/// backward from the forward's whole result: its weights α (attention_result::weights) and its
/// context c (attention_result::context), for keys ≠ values. With ū = ⟨g, c⟩, which equals
/// Σ_k α_k u_k (u_k = ⟨g, v_k⟩) up to rounding, every term is known before the notes are read:
///   ∂L/∂s_j = β α_j (u_j − ū),  ∂L/∂v_j = α_j g,  ∂L/∂k_j = (∂L/∂s_j) ∂s_j/∂k_j,
///   ∂L/∂q = Σ_j (∂L/∂s_j) ∂s_j/∂q,
/// so for dot and scaled_dot ONE pass suffices, block by block: u_j, ∂L/∂s_j, the gradient rows
/// and ∂L/∂q += (∂L/∂s_j) f k_j while the block is in L1 (each note read once, each gradient
/// row written once; backward_from_weights needs a pass for the u_k first).
///
/// Why only when no weight exceeds 1/2: for the note m with α_m → 1, u_m − ū cancels
/// (u_m − ū = Σ_{k≠m} α_k (u_m − u_k) is small while u_m and ū are not), and the accurate form
/// Σ_{k≠m} α_k (u_m − u_k), which backward and backward_from_weights use, needs every u_k before
/// the pass. Below 1/2 the direct form is accurate: |u_j − ū| carries an absolute error of
/// rounding × (|u_j| + Σ_k α_k |u_k|), and β α_j times that is the error backward's own form has.
/// So the weights are read first (O(n)); with a weight above 1/2 — or anything that path treats
/// apart: a mask that keeps no note, d_v = 0, a non-finite weight, context, g or q, a score other
/// than dot and scaled_dot, parameter gradients — this is backward_from_weights(…, weights, g, …)
/// to the bit (the context is then not read). In the one-pass case the numbers differ from
/// backward_from_weights's (and, given backward's softmax, from backward's) by rounding only:
/// ∂L/∂s_j by at most ρ β α_j (U + ⟨|g|, |v_j|⟩), U = Σ_k α_k ⟨|g|, |v_k|⟩, where ρ is a small
/// multiple of (n + d_v)·ε (docs/derivatives.md, "From the forward's weights and context").
///
/// A separate name, not a context argument added to backward_from_weights: the context is one
/// more vector beside the weights and g, and a distinct name keeps the overloads apart and says
/// what the call needs. Overloads and rules otherwise as backward_from_weights's: caller buffers
/// (n, d_q, n × d_k, n × d_v; no allocation; sizes checked before anything is written,
/// dimension_error; grad_scores must not overlap the weights) or returned results; the weights
/// and context are taken as given (they should be one attend's).
template <vector_like Q, matrix_like K, matrix_like V, class S, vector_like W, vector_like C, vector_like G,
          class GS, class GQ, class GK, class GV>
  requires detail::attend_inputs<Q, K, V, S> && detail::derivatives::input_for<W, scalar_of<Q>, rows_of<K>> &&
           detail::derivatives::input_for<C, scalar_of<Q>, cols_of<V>> &&
           detail::derivatives::input_for<G, scalar_of<Q>, cols_of<V>> &&
           detail::output_for<GS, scalar_of<Q>, rows_of<K>> &&
           detail::output_for<GQ, scalar_of<Q>, extent_of<Q>> &&
           detail::derivatives::matrix_output_for<GK, scalar_of<Q>, rows_of<K>, cols_of<K>> &&
           detail::derivatives::matrix_output_for<GV, scalar_of<Q>, rows_of<V>, cols_of<V>>
void backward_from_forward(const Q& q, const K& keys, const V& values, const S& score, const W& weights,
                           const C& context, const G& grad_context, GS&& grad_scores, GQ&& grad_query,
                           GK&& grad_keys, GV&& grad_values, const options& opt = {}) {
  using T = scalar_of<Q>;
  detail::derivatives::backward_from_forward<T, extent_of<Q>, cols_of<K>>(
      "attn::backward_from_forward", score, as_span(q), as_view(keys), as_view(values), as_span(weights),
      as_span(context), as_span(grad_context), as_mutable_span(grad_scores), as_mutable_span(grad_query),
      as_mutable_view(grad_keys), as_mutable_view(grad_values), false, static_cast<no_parameters*>(nullptr),
      opt);
}

/// As above, and also adds ∂L/∂θ to `grad_parameters` (accumulated; a score with parameters
/// always takes backward_from_weights's path).
template <vector_like Q, matrix_like K, matrix_like V, class S, vector_like W, vector_like C, vector_like G,
          class GS, class GQ, class GK, class GV, class P>
  requires detail::attend_inputs<Q, K, V, S> && detail::derivatives::input_for<W, scalar_of<Q>, rows_of<K>> &&
           detail::derivatives::input_for<C, scalar_of<Q>, cols_of<V>> &&
           detail::derivatives::input_for<G, scalar_of<Q>, cols_of<V>> &&
           detail::output_for<GS, scalar_of<Q>, rows_of<K>> &&
           detail::output_for<GQ, scalar_of<Q>, extent_of<Q>> &&
           detail::derivatives::matrix_output_for<GK, scalar_of<Q>, rows_of<K>, cols_of<K>> &&
           detail::derivatives::matrix_output_for<GV, scalar_of<Q>, rows_of<V>, cols_of<V>> &&
           parameter_gradient_for<P, S, scalar_of<Q>>
void backward_from_forward(const Q& q, const K& keys, const V& values, const S& score, const W& weights,
                           const C& context, const G& grad_context, GS&& grad_scores, GQ&& grad_query,
                           GK&& grad_keys, GV&& grad_values, P&& grad_parameters, const options& opt = {}) {
  using T = scalar_of<Q>;
  auto* p = &grad_parameters;
  detail::derivatives::backward_from_forward<T, extent_of<Q>, cols_of<K>>(
      "attn::backward_from_forward", score, as_span(q), as_view(keys), as_view(values), as_span(weights),
      as_span(context), as_span(grad_context), as_mutable_span(grad_scores), as_mutable_span(grad_query),
      as_mutable_view(grad_keys), as_mutable_view(grad_values), false, p, opt);
}

/// backward_from_forward for notes that are keys and values: writes ∂L/∂s_j = β α_j (u_j − ⟨g, c⟩),
/// ∂L/∂q and ∂L/∂h_j = α_j g + (∂L/∂s_j) ∂s_j/∂h_j (n × d) into the caller's buffers in one
/// pass over the notes (see the keys ≠ values form for when, and why not otherwise).
template <vector_like Q, matrix_like N, class S, vector_like W, vector_like C, vector_like G, class GS, class GQ,
          class GN>
  requires detail::attend_inputs<Q, N, N, S> && detail::derivatives::input_for<W, scalar_of<Q>, rows_of<N>> &&
           detail::derivatives::input_for<C, scalar_of<Q>, cols_of<N>> &&
           detail::derivatives::input_for<G, scalar_of<Q>, cols_of<N>> &&
           detail::output_for<GS, scalar_of<Q>, rows_of<N>> &&
           detail::output_for<GQ, scalar_of<Q>, extent_of<Q>> &&
           detail::derivatives::matrix_output_for<GN, scalar_of<Q>, rows_of<N>, cols_of<N>>
void backward_from_forward(const Q& q, const N& notes, const S& score, const W& weights, const C& context,
                           const G& grad_context, GS&& grad_scores, GQ&& grad_query, GN&& grad_notes,
                           const options& opt = {}) {
  using T = scalar_of<Q>;
  const auto nv = as_view(notes);
  const MatrixView<T> gn = as_mutable_view(grad_notes);
  detail::derivatives::backward_from_forward<T, extent_of<Q>, cols_of<N>>(
      "attn::backward_from_forward", score, as_span(q), nv, nv, as_span(weights), as_span(context),
      as_span(grad_context), as_mutable_span(grad_scores), as_mutable_span(grad_query), gn, gn, true,
      static_cast<no_parameters*>(nullptr), opt);
}

/// As above, and also adds ∂L/∂θ to `grad_parameters` (accumulated).
template <vector_like Q, matrix_like N, class S, vector_like W, vector_like C, vector_like G, class GS, class GQ,
          class GN, class P>
  requires detail::attend_inputs<Q, N, N, S> && detail::derivatives::input_for<W, scalar_of<Q>, rows_of<N>> &&
           detail::derivatives::input_for<C, scalar_of<Q>, cols_of<N>> &&
           detail::derivatives::input_for<G, scalar_of<Q>, cols_of<N>> &&
           detail::output_for<GS, scalar_of<Q>, rows_of<N>> &&
           detail::output_for<GQ, scalar_of<Q>, extent_of<Q>> &&
           detail::derivatives::matrix_output_for<GN, scalar_of<Q>, rows_of<N>, cols_of<N>> &&
           parameter_gradient_for<P, S, scalar_of<Q>>
void backward_from_forward(const Q& q, const N& notes, const S& score, const W& weights, const C& context,
                           const G& grad_context, GS&& grad_scores, GQ&& grad_query, GN&& grad_notes,
                           P&& grad_parameters, const options& opt = {}) {
  using T = scalar_of<Q>;
  const auto nv = as_view(notes);
  const MatrixView<T> gn = as_mutable_view(grad_notes);
  auto* p = &grad_parameters;
  detail::derivatives::backward_from_forward<T, extent_of<Q>, cols_of<N>>(
      "attn::backward_from_forward", score, as_span(q), nv, nv, as_span(weights), as_span(context),
      as_span(grad_context), as_mutable_span(grad_scores), as_mutable_span(grad_query), gn, gn, true, p, opt);
}

/// backward_from_forward for keys ≠ values, returning ∂L/∂s, ∂L/∂q, ∂L/∂k_j, ∂L/∂v_j and ∂L/∂θ
/// (a backward_result). Fixed sizes: no allocation.
template <vector_like Q, matrix_like K, matrix_like V, class S, vector_like W, vector_like C, vector_like G>
  requires detail::attend_inputs<Q, K, V, S> && detail::derivatives::input_for<W, scalar_of<Q>, rows_of<K>> &&
           detail::derivatives::input_for<C, scalar_of<Q>, cols_of<V>> &&
           detail::derivatives::input_for<G, scalar_of<Q>, cols_of<V>>
[[nodiscard]] auto backward_from_forward(const Q& q, const K& keys, const V& values, const S& score,
                                         const W& weights, const C& context, const G& grad_context,
                                         const options& opt = {}) {
  using T = scalar_of<Q>;
  constexpr std::size_t DQ = extent_of<Q>, N = common_extent<rows_of<K>, rows_of<V>>;
  const auto kv = as_view(keys);
  const auto vv = as_view(values);
  auto r = detail::derivatives::zero_backward_result<T, DQ, N, cols_of<K>, cols_of<V>>(
      score, as_span(q).size(), kv.rows(), kv.cols(), vv.cols());
  auto* p = detail::derivatives::has_parameters<S> ? &r.parameters : nullptr;
  detail::derivatives::backward_from_forward<T, DQ, cols_of<K>>(
      "attn::backward_from_forward", score, as_span(q), kv, vv, as_span(weights), as_span(context),
      as_span(grad_context), std::span<T>(r.scores), std::span<T>(r.query), r.keys.view(), r.values.view(), false,
      p, opt);
  return r;
}

/// backward_from_forward for notes that are keys and values, returning ∂L/∂s, ∂L/∂q, ∂L/∂h_j
/// and ∂L/∂θ (a notes_backward_result). Fixed sizes: no allocation.
template <vector_like Q, matrix_like N, class S, vector_like W, vector_like C, vector_like G>
  requires detail::attend_inputs<Q, N, N, S> && detail::derivatives::input_for<W, scalar_of<Q>, rows_of<N>> &&
           detail::derivatives::input_for<C, scalar_of<Q>, cols_of<N>> &&
           detail::derivatives::input_for<G, scalar_of<Q>, cols_of<N>>
[[nodiscard]] auto backward_from_forward(const Q& q, const N& notes, const S& score, const W& weights,
                                         const C& context, const G& grad_context, const options& opt = {}) {
  using T = scalar_of<Q>;
  constexpr std::size_t DQ = extent_of<Q>, NN = rows_of<N>, D = cols_of<N>;
  const auto nv = as_view(notes);
  auto r = detail::derivatives::zero_notes_backward_result<T, DQ, NN, D>(score, as_span(q).size(), nv.rows(),
                                                                         nv.cols());
  auto* p = detail::derivatives::has_parameters<S> ? &r.parameters : nullptr;
  detail::derivatives::backward_from_forward<T, DQ, D>(
      "attn::backward_from_forward", score, as_span(q), nv, nv, as_span(weights), as_span(context),
      as_span(grad_context), std::span<T>(r.scores), std::span<T>(r.query), r.notes.view(), r.notes.view(), true,
      p, opt);
  return r;
}

/// From ∂L/∂c_t (T × d_v; row t for query t) over keys ≠ values, writes ∂L/∂s (T × n),
/// ∂L/∂q_t (T × d_q), ∂L/∂k_j and ∂L/∂v_j (summed over the queries) into the caller's
/// buffers; allocates nothing (as for backward). Every row's sizes are checked first.
template <matrix_like Qs, matrix_like K, matrix_like V, class S, matrix_like G, class GS, class GQ, class GK,
          class GV>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, K, V, S> &&
           detail::derivatives::matrix_input_for<G, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<V>> &&
           detail::derivatives::matrix_output_for<GS, matrix_scalar_of<Qs>, rows_of<Qs>, rows_of<K>> &&
           detail::derivatives::matrix_output_for<GQ, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<Qs>> &&
           detail::derivatives::matrix_output_for<GK, matrix_scalar_of<Qs>, rows_of<K>, cols_of<K>> &&
           detail::derivatives::matrix_output_for<GV, matrix_scalar_of<Qs>, rows_of<V>, cols_of<V>>
void align_backward(const Qs& queries, const K& keys, const V& values, const S& score,
                    const G& grad_contexts, GS&& grad_scores, GQ&& grad_queries, GK&& grad_keys,
                    GV&& grad_values, const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  detail::derivatives::align_backward<T, cols_of<Qs>, cols_of<K>>(
      "attn::align_backward", score, as_view(queries), as_view(keys), as_view(values),
      as_view(grad_contexts), as_mutable_view(grad_scores), as_mutable_view(grad_queries),
      as_mutable_view(grad_keys), as_mutable_view(grad_values), false, static_cast<no_parameters*>(nullptr),
      opt);
}

/// As above, and also adds ∂L/∂θ (summed over the queries) to `grad_parameters`.
template <matrix_like Qs, matrix_like K, matrix_like V, class S, matrix_like G, class GS, class GQ, class GK,
          class GV, class P>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, K, V, S> &&
           detail::derivatives::matrix_input_for<G, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<V>> &&
           detail::derivatives::matrix_output_for<GS, matrix_scalar_of<Qs>, rows_of<Qs>, rows_of<K>> &&
           detail::derivatives::matrix_output_for<GQ, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<Qs>> &&
           detail::derivatives::matrix_output_for<GK, matrix_scalar_of<Qs>, rows_of<K>, cols_of<K>> &&
           detail::derivatives::matrix_output_for<GV, matrix_scalar_of<Qs>, rows_of<V>, cols_of<V>> &&
           parameter_gradient_for<P, S, matrix_scalar_of<Qs>>
void align_backward(const Qs& queries, const K& keys, const V& values, const S& score,
                    const G& grad_contexts, GS&& grad_scores, GQ&& grad_queries, GK&& grad_keys,
                    GV&& grad_values, P&& grad_parameters, const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  auto* p = &grad_parameters;
  detail::derivatives::align_backward<T, cols_of<Qs>, cols_of<K>>(
      "attn::align_backward", score, as_view(queries), as_view(keys), as_view(values),
      as_view(grad_contexts), as_mutable_view(grad_scores), as_mutable_view(grad_queries),
      as_mutable_view(grad_keys), as_mutable_view(grad_values), false, p, opt);
}

/// From ∂L/∂c_t (T × d) over notes that are keys and values, writes ∂L/∂s (T × n), ∂L/∂q_t
/// (T × d_q) and ∂L/∂h_j (n × d, summed over the queries); allocates nothing (as for backward).
template <matrix_like Qs, matrix_like N, class S, matrix_like G, class GS, class GQ, class GN>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, N, N, S> &&
           detail::derivatives::matrix_input_for<G, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<N>> &&
           detail::derivatives::matrix_output_for<GS, matrix_scalar_of<Qs>, rows_of<Qs>, rows_of<N>> &&
           detail::derivatives::matrix_output_for<GQ, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<Qs>> &&
           detail::derivatives::matrix_output_for<GN, matrix_scalar_of<Qs>, rows_of<N>, cols_of<N>>
void align_backward(const Qs& queries, const N& notes, const S& score, const G& grad_contexts,
                    GS&& grad_scores, GQ&& grad_queries, GN&& grad_notes, const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  const auto nv = as_view(notes);
  const MatrixView<T> gn = as_mutable_view(grad_notes);
  detail::derivatives::align_backward<T, cols_of<Qs>, cols_of<N>>(
      "attn::align_backward", score, as_view(queries), nv, nv, as_view(grad_contexts),
      as_mutable_view(grad_scores), as_mutable_view(grad_queries), gn, gn, true,
      static_cast<no_parameters*>(nullptr), opt);
}

/// As above, and also adds ∂L/∂θ (summed over the queries) to `grad_parameters`.
template <matrix_like Qs, matrix_like N, class S, matrix_like G, class GS, class GQ, class GN, class P>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, N, N, S> &&
           detail::derivatives::matrix_input_for<G, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<N>> &&
           detail::derivatives::matrix_output_for<GS, matrix_scalar_of<Qs>, rows_of<Qs>, rows_of<N>> &&
           detail::derivatives::matrix_output_for<GQ, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<Qs>> &&
           detail::derivatives::matrix_output_for<GN, matrix_scalar_of<Qs>, rows_of<N>, cols_of<N>> &&
           parameter_gradient_for<P, S, matrix_scalar_of<Qs>>
void align_backward(const Qs& queries, const N& notes, const S& score, const G& grad_contexts,
                    GS&& grad_scores, GQ&& grad_queries, GN&& grad_notes, P&& grad_parameters,
                    const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  const auto nv = as_view(notes);
  const MatrixView<T> gn = as_mutable_view(grad_notes);
  auto* p = &grad_parameters;
  detail::derivatives::align_backward<T, cols_of<Qs>, cols_of<N>>(
      "attn::align_backward", score, as_view(queries), nv, nv, as_view(grad_contexts),
      as_mutable_view(grad_scores), as_mutable_view(grad_queries), gn, gn, true, p, opt);
}

/// From ∂L/∂c_t (T × d_v) over keys ≠ values, returns ∂L/∂s (T × n), ∂L/∂q_t (T × d_q),
/// ∂L/∂k_j, ∂L/∂v_j (summed over the queries) and ∂L/∂θ. Fixed sizes: no allocation.
template <matrix_like Qs, matrix_like K, matrix_like V, class S, matrix_like G>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, K, V, S> &&
           detail::derivatives::matrix_input_for<G, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<V>>
[[nodiscard]] auto align_backward(const Qs& queries, const K& keys, const V& values, const S& score,
                                  const G& grad_contexts, const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  constexpr std::size_t TQ = rows_of<Qs>, DQ = cols_of<Qs>, N = common_extent<rows_of<K>, rows_of<V>>;
  const auto qv = as_view(queries);
  const auto kv = as_view(keys);
  const auto vv = as_view(values);
  align_backward_result<T, TQ, DQ, N, cols_of<K>, cols_of<V>, parameter_gradient_t<S>> r{
      detail::derivatives::zero_matrix<T, TQ, N>(qv.rows(), kv.rows()), detail::derivatives::zero_matrix<T, TQ, DQ>(qv.rows(), qv.cols()),
      detail::derivatives::zero_matrix<T, N, cols_of<K>>(kv.rows(), kv.cols()),
      detail::derivatives::zero_matrix<T, N, cols_of<V>>(kv.rows(), vv.cols()), zero_parameter_gradient(score)};
  auto* p = detail::derivatives::has_parameters<S> ? &r.parameters : nullptr;
  detail::derivatives::align_backward<T, DQ, cols_of<K>>("attn::align_backward", score, qv, kv, vv, as_view(grad_contexts),
                                            r.scores.view(), r.queries.view(), r.keys.view(), r.values.view(),
                                            false, p, opt);
  return r;
}

/// From ∂L/∂c_t (T × d) over notes that are keys and values, returns ∂L/∂s (T × n),
/// ∂L/∂q_t (T × d_q), ∂L/∂h_j (summed over the queries) and ∂L/∂θ. Fixed sizes: no allocation.
template <matrix_like Qs, matrix_like N, class S, matrix_like G>
  requires detail::attend_inputs<std::span<const matrix_scalar_of<Qs>, cols_of<Qs>>, N, N, S> &&
           detail::derivatives::matrix_input_for<G, matrix_scalar_of<Qs>, rows_of<Qs>, cols_of<N>>
[[nodiscard]] auto align_backward(const Qs& queries, const N& notes, const S& score, const G& grad_contexts,
                                  const options& opt = {}) {
  using T = matrix_scalar_of<Qs>;
  constexpr std::size_t TQ = rows_of<Qs>, DQ = cols_of<Qs>, NN = rows_of<N>, D = cols_of<N>;
  const auto qv = as_view(queries);
  const auto nv = as_view(notes);
  align_notes_backward_result<T, TQ, DQ, NN, D, parameter_gradient_t<S>> r{
      detail::derivatives::zero_matrix<T, TQ, NN>(qv.rows(), nv.rows()), detail::derivatives::zero_matrix<T, TQ, DQ>(qv.rows(), qv.cols()),
      detail::derivatives::zero_matrix<T, NN, D>(nv.rows(), nv.cols()), zero_parameter_gradient(score)};
  auto* p = detail::derivatives::has_parameters<S> ? &r.parameters : nullptr;
  detail::derivatives::align_backward<T, DQ, D>("attn::align_backward", score, qv, nv, nv, as_view(grad_contexts),
                                   r.scores.view(), r.queries.view(), r.notes.view(), r.notes.view(), true, p,
                                   opt);
  return r;
}

}  // namespace attn
