#pragma once
/// \file attn/score.hpp
/// How well does note h match query q? The four scores of the unit and the `Score` concept
/// a user's own score satisfies. Each score gives s(q, h), all n scores at once, ∂s/∂h and
/// ∂s/∂q (docs/scores.md has the formulas and their derivation).
///
///   dot          s = q·h                       (d_q = d_h)
///   scaled_dot   s = q·h / √d                  (d_q = d_h = d; the transformer's score)
///   general{W}   s = qᵀ W h                    (W is d_q × d_h)
///   additive{W1, W2, v}  s = vᵀ tanh(W1 h + W2 q)  (W1 k×d_h, W2 k×d_q, v of length k)

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <array>
#include <concepts>
#include <cstddef>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "attn/detail/math.hpp"
#include "attn/detail/prefetch.hpp"
#include "attn/detail/reduce.hpp"
#include "attn/detail/rows.hpp"
#include "attn/detail/simd.hpp"
#include "attn/detail/tanh.hpp"
#include "attn/error.hpp"
#include "attn/extent.hpp"
#include "attn/matrix.hpp"
#include "attn/vector.hpp"

namespace attn {

/// What every score gives, for scalar T: `s.check(d_q, d_h)` throws dimension_error unless a
/// query of d_q numbers and notes of d_h numbers fit; `s(q, h)` is one note's score;
/// `s.gradient_note(q, h, out)` writes ∂s/∂h and `s.gradient_query(q, h, out)` ∂s/∂q. What a
/// score may give besides is a concept of its own below; attn asks for those, never for a type.
template <class S, class T>
concept Score = real<T> && requires(const S& s, std::span<const T> q, std::span<const T> h,
                                    std::span<T> out, std::size_t d) {
  s.check(d, d);
  { s(q, h) } -> std::convertible_to<T>;
  s.gradient_note(q, h, out);
  s.gradient_query(q, h, out);
};

/// A score that scores all n notes at once, `s.scores(q, notes, out)` (out_j = s(q, h_j); sizes
/// checked by the caller). attn uses it wherever it is present, else scores note by note.
template <class S, class T>
concept batched_score = Score<S, T> &&
    requires(const S& s, std::span<const T> q, MatrixView<const T> notes, std::span<T> out) {
  s.scores(q, notes, out);
};

/// A score whose backward is batched: `s.accumulate_gradients(q, keys, a, grad_q, grad_keys)`
/// adds Σ_j a_j ∂s_j/∂q to grad_q and a_j ∂s_j/∂k_j to row j of grad_keys (a_j = ∂L/∂s_j; a
/// note with a_j = 0 adds nothing). Else backward goes note by note through the gradients.
template <class S, class T>
concept batched_gradient_score = Score<S, T> &&
    requires(const S& s, std::span<const T> q, MatrixView<const T> keys, std::span<const T> a,
             std::span<T> grad_q, MatrixView<T> grad_keys) {
  s.accumulate_gradients(q, keys, a, grad_q, grad_keys);
};

/// A score linear in the note with a scale, s(q, h) = scale(d)·(q·h), d = |q| = |h|: it declares
/// `static constexpr bool dot_product = true` and `template <real T> T scale(std::size_t d)`
/// (static, or a member for a scale chosen at run time). attn then computes it as
/// scale(d)·Σ_i q_i h_i on its dot-product fast paths (one pass over the notes, the tiled
/// kernel, forward and backward) without calling its other members: `dot`, `scaled_dot`,
/// `dot_scaled_by{s}`, yours.
template <class S, class T>
concept dot_product_score = Score<S, T> && requires(const S& s, std::size_t d) {
  requires S::dot_product;
  { s.template scale<T>(d) } -> std::same_as<T>;
};

namespace detail {
/// score.check(where, d_q, d_h) when the score names the calling function in its messages (attn's
/// scores do: "attn::backward: query size is 3 but note size is 2"), else score.check(d_q, d_h);
/// then, for a score with a run-time factor (dot_scaled_by), score.check_scale<T>(where): the
/// factor must be finite as a T.
template <class T, class S>
constexpr void check_score(const char* where, const S& score, std::size_t d_q, std::size_t d_h) {
  if constexpr (requires { score.check(where, d_q, d_h); })
    score.check(where, d_q, d_h);
  else
    score.check(d_q, d_h);
  if constexpr (requires { score.template check_scale<T>(where); })
    score.template check_scale<T>(where);
}

/// Whether a score's run-time factor is finite as a T (true for scores without one): the paths
/// that skip check_score when all is plain (attend's fixed sizes) ask this first.
template <class T, class S>
[[nodiscard]] constexpr bool score_scale_fits(const S& score) noexcept {
  if constexpr (requires { score.template scale_fits<T>(); })
    return score.template scale_fits<T>();
  else
    return true;
}

/// Throws domain_error "<where>: the scale of <score> must be finite" (+ " as a float").
[[noreturn]] inline void throw_scale_not_finite(const char* where, const char* score, bool as_float) {
  raise<domain_error>(std::string(where) + ": the scale of " + score + " must be finite" +
                      (as_float ? " as a float" : ""));
}
}  // namespace detail

/// ∂L/∂θ of a score that has no parameters (dot, scaled_dot, a user's score without them).
struct no_parameters {};

/// A score with parameters θ: `s.zero_parameter_gradient()` returns ∂L/∂θ = 0 shaped like them,
/// a type that converts to the view backward adds into (general: {W}; additive: {W1, W2, v}).
template <class S>
concept parameterized_score = requires(const S& s) {
  s.zero_parameter_gradient();
};

namespace detail {
template <class S>
struct parameter_gradient_of {
  using type = no_parameters;
};
template <parameterized_score S>
struct parameter_gradient_of<S> {
  using type = std::remove_cvref_t<decltype(std::declval<const S&>().zero_parameter_gradient())>;
};
}  // namespace detail

/// The type of ∂L/∂θ for score S: what `S::zero_parameter_gradient()` returns, or no_parameters.
template <class S>
using parameter_gradient_t = typename detail::parameter_gradient_of<S>::type;

/// Returns ∂L/∂θ = 0 shaped like score's parameters (`no_parameters{}` when it has none).
template <class S>
[[nodiscard]] parameter_gradient_t<S> zero_parameter_gradient(const S& score) {
  if constexpr (parameterized_score<S>)
    return score.zero_parameter_gradient();
  else
    return no_parameters{};
}

/// A type backward can add ∂L/∂θ of score S to: S has `accumulate_gradients(q, keys, a, grad_q,
/// grad_keys, p)`, a batched `accumulate_parameter_gradient(q, keys, a, p)` or a per-note
/// `accumulate_parameter_gradient(q, h, a, p)` (p += a ∂s/∂θ) that accepts it.
template <class P, class S, class T>
concept parameter_gradient_for =
    real<T> && !std::same_as<std::remove_cvref_t<P>, no_parameters> &&
    (
        requires(const S& s, std::span<const T> q, MatrixView<const T> keys, std::span<const T> a,
                 std::span<T> gq, MatrixView<T> gk, std::remove_reference_t<P>& p) {
          s.accumulate_gradients(q, keys, a, gq, gk, p);
        } ||
        requires(const S& s, std::span<const T> q, MatrixView<const T> keys, std::span<const T> a,
                 std::remove_reference_t<P>& p) {
          s.accumulate_parameter_gradient(q, keys, a, p);
        } ||
        requires(const S& s, std::span<const T> q, std::span<const T> h, T a,
                 std::remove_reference_t<P>& p) { s.accumulate_parameter_gradient(q, h, a, p); });

namespace detail {
template <class S>
consteval bool same_size_score() {
  if constexpr (requires { S::same_size; })
    return S::same_size;
  else
    return false;
}
template <class S>
consteval std::size_t score_query_extent() {
  if constexpr (requires { S::query_extent; })
    return S::query_extent;
  else
    return dynamic;
}
template <class S>
consteval std::size_t score_note_extent() {
  if constexpr (requires { S::note_extent; })
    return S::note_extent;
  else
    return dynamic;
}

/// out_j = f·(q·h_j) for the rows of notes (f = 1 adds no product), the dot-product scores;
/// with `ahead` (null: none), the `lines` of as many rows of `ahead` are prefetched meanwhile.
template <real T>
constexpr void dot_product_scores(std::span<const T> q, MatrixView<const T> notes, T f,
                                  std::span<T> out, const T* ahead = nullptr,
                                  prefetch_lines lines = prefetch_lines::all) {
  if (ahead != nullptr && !std::is_constant_evaluated())
    dot_rows_prefetching(q.data(), notes.data(), notes.row_stride(), notes.rows(), q.size(),
                         out.data(), ahead, lines);
  else
    dot_rows(q.data(), notes.data(), notes.row_stride(), notes.rows(), q.size(), out.data());
  if (f != T(1)) scale(out.data(), notes.rows(), f);
}
}  // namespace detail

/// Fixed query and note lengths Q and H fit score S: equal for dot-like scores, and equal to
/// the extents of S's fixed parameter matrices. A mismatch fails to compile, naming
/// `compatible_extents`.
template <class S, std::size_t Q, std::size_t H>
concept score_fits_extents =
    (!detail::same_size_score<S>() || compatible_extents<Q, H>)&&compatible_extents<
        Q, detail::score_query_extent<S>()>&& compatible_extents<H, detail::score_note_extent<S>()>;

/// The members of a dot-product score s(q, h) = f·(q·h), f = Derived::scale<T>(d), for Derived
/// to inherit (dot and scaled_dot do; so may yours). Derived gives `scale` and `name` (the
/// function named in errors).
template <class Derived>
struct dot_product_family {
  /// q and h must have the same length.
  static constexpr bool same_size = true;
  /// attn's dot-product fast paths take this score (dot_product_score).
  static constexpr bool dot_product = true;

  /// Returns f·Σ_i a_i b_i. Fixed sizes that differ do not compile; dynamic ones throw
  /// dimension_error.
  template <vector_like A, vector_like B>
    requires std::same_as<scalar_of<A>, scalar_of<B>> &&
        compatible_extents<extent_of<A>, extent_of<B>>
  [[nodiscard]] constexpr scalar_of<A> operator()(const A& a, const B& b) const {
    const auto x = as_span(a);
    const auto y = as_span(b);
    check(x.size(), y.size());
    const auto f = derived().template scale<scalar_of<A>>(x.size());
    const auto s = detail::sum_of_products(x.data(), y.data(), x.size());
    return f == 1 ? s : s * f;
  }
  /// Throws dimension_error unless d_q == d_h.
  constexpr void check(std::size_t d_q, std::size_t d_h) const { check(Derived::name, d_q, d_h); }
  /// As above, the message naming `where` (the function that was called).
  constexpr void check(const char* where, std::size_t d_q, std::size_t d_h) const {
    detail::check_equal(where, "query size", d_q, "note size", d_h);
  }
  /// out_j = f·(q·h_j) for every row h_j of notes (sizes checked by the caller).
  template <real T>
  constexpr void scores(std::span<const T> q, MatrixView<const T> notes, std::span<T> out) const
      noexcept(scale_is_noexcept<T>()) {
    detail::dot_product_scores(q, notes, derived().template scale<T>(q.size()), out);
  }
  /// ∂s/∂h = f q.
  template <real T>
  constexpr void gradient_note(std::span<const T> q, std::span<const T>, std::span<T> out) const
      noexcept(scale_is_noexcept<T>()) {
    scaled_copy(q, out);
  }
  /// ∂s/∂q = f h.
  template <real T>
  constexpr void gradient_query(std::span<const T>, std::span<const T> h, std::span<T> out) const
      noexcept(scale_is_noexcept<T>()) {
    scaled_copy(h, out);
  }
  /// Backward over all notes, given a_j = ∂L/∂s_j: grad_keys_j += (a_j f) q and
  /// grad_q += Σ_j (a_j f) h_j. Notes with a_j = 0 add nothing (even if they hold inf or NaN),
  /// nor do zero numbers times an a_j that overflowed to ±inf.
  /// Cost n·d; nothing allocated.
  template <real T>
  constexpr void accumulate_gradients(std::span<const T> q, MatrixView<const T> keys,
                                      std::span<const T> a, std::span<T> grad_q,
                                      MatrixView<T> grad_keys) const
      noexcept(scale_is_noexcept<T>()) {
    const T f = derived().template scale<T>(q.size());
    for (std::size_t j = 0; j < keys.rows(); ++j)
      if (a[j] != T(0))
        detail::axpy_gradient(f == T(1) ? a[j] : detail::product_or_zero(a[j], f), q.data(),
                              grad_keys.row(j).data(), q.size());
    if (detail::all_finite(a.data(), a.size()))
      detail::accumulate_rows(a.data(), f, keys.data(), keys.row_stride(), keys.rows(), q.size(),
                              grad_q.data());
    else  // an a_j that overflowed: zero numbers of its key add nothing
      detail::accumulate_rows_overflowed(a.data(), f, keys.data(), keys.row_stride(), keys.rows(),
                                         q.size(), grad_q.data());
  }

private:
  [[nodiscard]] constexpr const Derived& derived() const noexcept {
    return static_cast<const Derived&>(*this);
  }
  /// Whether Derived's scale<T> is noexcept (attn's are): then so are the members above.
  template <real T>
  static consteval bool scale_is_noexcept() {
    return noexcept(std::declval<const Derived&>().template scale<T>(std::size_t{}));
  }
  template <real T>
  constexpr void scaled_copy(std::span<const T> x, std::span<T> out) const {
    const T f = derived().template scale<T>(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = f == T(1) ? x[i] : x[i] * f;
  }
};

/// The dot product q·h: usable directly (`attn::dot(a, b)`) and as a score.
struct dot_score : dot_product_family<dot_score> {
  static constexpr const char* name = "attn::dot";
  /// The scale of q·h: 1.
  template <real T>
  [[nodiscard]] static constexpr T scale(std::size_t /*d*/) noexcept {
    return T(1);
  }
};
/// The dot score s = q·h (Luong, 2015), and the dot product of two vectors.
inline constexpr dot_score dot{};

/// The scaled dot product q·h/√d of the transformer (d = length of q and h).
struct scaled_dot_score : dot_product_family<scaled_dot_score> {
  static constexpr const char* name = "attn::scaled_dot";
  /// The scale 1/√d; 1 for d = 0, where every score is the empty sum 0 (1/√0 would make it
  /// 0·inf = NaN).
  template <real T>
  [[nodiscard]] static constexpr T scale(std::size_t d) noexcept {
    return d == 0 ? T(1) : T(1) / detail::sqrt(static_cast<T>(d));
  }
};
/// The transformer's score s = q·h/√d.
inline constexpr scaled_dot_score scaled_dot{};

/// The dot product with a scale chosen at run time, s = factor·(q·h) (PyTorch's `scale=`, which
/// replaces 1/√d): `attn::dot_scaled_by{0.125}`.
struct dot_scaled_by : dot_product_family<dot_scaled_by> {
  static constexpr const char* name = "attn::dot_scaled_by";
  double factor = 1.0;  ///< the scale, taken as a T
  constexpr explicit dot_scaled_by(double s) noexcept : factor(s) {}
  /// Throws domain_error "<where>: the scale of attn::dot_scaled_by must be finite" (+ " as a
  /// float") unless factor is finite as a T (on its bits: also under -ffast-math). Every call
  /// that takes a score checks it with the sizes (detail::check_score).
  template <real T>
  constexpr void check_scale(const char* where) const {
    if (!scale_fits<T>()) detail::throw_scale_not_finite(where, name, detail::narrower_than_double<T>);
  }
  /// Whether factor is finite as a T (what check_scale checks; the fixed-size path asks).
  template <real T>
  [[nodiscard]] constexpr bool scale_fits() const noexcept {
    return detail::finite_as<T>(factor);
  }
  /// The scale: factor, whatever d.
  template <real T>
  [[nodiscard]] constexpr T scale(std::size_t /*d*/) const noexcept {
    return static_cast<T>(factor);
  }
};

/// One of attn's three dot-product scores held as a value, the score of attention with
/// projections (multi_head_parameters::score): scaled_dot (1/√d, the default), dot (1) or
/// dot_scaled_by{s} (s), each converting to it implicitly (`p.score = attn::dot;`,
/// `p.score = attn::dot_scaled_by{0.125};`). Itself a dot-product score with the scale of the
/// one it holds; `visit(f)` calls f with that score itself, so its numbers are that score's.
struct dot_product_score_choice : dot_product_family<dot_product_score_choice> {
  static constexpr const char* name = "attn::dot_product_score_choice";
  /// Which score is held: scaled_dot, dot, dot_scaled_by.
  enum class kind : unsigned char { scaled, unscaled, by_factor };
  kind which = kind::scaled;  ///< scaled_dot unless another was given
  double factor = 0;          ///< dot_scaled_by's factor when which is by_factor, else 0

  constexpr dot_product_score_choice() noexcept = default;
  constexpr dot_product_score_choice(scaled_dot_score) noexcept {}  // NOLINT: implicit by design
  constexpr dot_product_score_choice(dot_score) noexcept : which(kind::unscaled) {}  // NOLINT
  constexpr dot_product_score_choice(dot_scaled_by s) noexcept  // NOLINT
      : which(kind::by_factor), factor(s.factor) {}

  /// Calls f(scaled_dot), f(dot) or f(dot_scaled_by{factor}): the score held.
  template <class F>
  constexpr decltype(auto) visit(F&& f) const {
    if (which == kind::unscaled) return std::forward<F>(f)(dot_score{});
    if (which == kind::by_factor) return std::forward<F>(f)(dot_scaled_by{factor});
    return std::forward<F>(f)(scaled_dot_score{});
  }
  /// The held score's scale: 1/√d (1 for d = 0), 1, or factor as a T.
  template <real T>
  [[nodiscard]] constexpr T scale(std::size_t d) const noexcept {
    return visit([d](const auto& s) { return s.template scale<T>(d); });
  }
  /// dot_scaled_by's check when it is held (its domain_error "<where>: the scale of
  /// attn::dot_scaled_by must be finite", on the bits); nothing for scaled_dot and dot.
  template <real T>
  constexpr void check_scale(const char* where) const {
    if (which == kind::by_factor) dot_scaled_by{factor}.check_scale<T>(where);
  }
  /// Whether the scale is finite as a T (what check_scale checks).
  template <real T>
  [[nodiscard]] constexpr bool scale_fits() const noexcept {
    return which != kind::by_factor || detail::finite_as<T>(factor);
  }
  /// The same score: the same kind and, for dot_scaled_by, the same factor.
  [[nodiscard]] friend constexpr bool operator==(const dot_product_score_choice& a,
                                                 const dot_product_score_choice& b) noexcept {
    return a.which == b.which && (a.which != kind::by_factor || a.factor == b.factor);
  }
};

namespace detail {
/// Work in column blocks of this many numbers so that the per-call buffers live on the stack.
inline constexpr std::size_t score_block = 128;
template <class T, std::size_t Fixed>
using block_buffer =
    std::array<T, (Fixed == dynamic || Fixed > score_block) ? score_block : (Fixed > 0 ? Fixed : 1)>;
}  // namespace detail

/// The general score s = qᵀ W h (Luong, 2015); W (d_q × d_h) is borrowed, not copied, so
/// it must outlive the score (a temporary Matrix is refused at compile time).
template <real T, std::size_t DQ = dynamic, std::size_t DH = dynamic>
class general {
  MatrixView<const T, DQ, DH> W_;

public:
  using value_type = T;
  /// The query length fixed by W's rows, or dynamic.
  static constexpr std::size_t query_extent = DQ;
  /// The note length fixed by W's columns, or dynamic.
  static constexpr std::size_t note_extent = DH;

  /// Borrows W (d_q × d_h).
  constexpr explicit general(MatrixView<const T, DQ, DH> W) noexcept : W_(W) {}
  /// Borrows W (d_q × d_h).
  constexpr explicit general(const Matrix<T, DQ, DH>& W) noexcept : W_(W.view()) {}
  general(Matrix<T, DQ, DH>&&) = delete;  // would dangle: keep W alive and pass it by name

  /// The borrowed W.
  [[nodiscard]] constexpr MatrixView<const T, DQ, DH> W() const noexcept { return W_; }

  /// Throws dimension_error unless W is d_q × d_h.
  constexpr void check(std::size_t d_q, std::size_t d_h) const { check("attn::general", d_q, d_h); }
  /// As above, the message naming `where` (the function that was called).
  constexpr void check(const char* where, std::size_t d_q, std::size_t d_h) const {
    detail::check_equal(where, "query size", d_q, "rows of W", W_.rows());
    detail::check_equal(where, "note size", d_h, "columns of W", W_.cols());
  }
  /// Returns qᵀ W h = Σ_a q_a (W_a · h).
  template <vector_like Q, vector_like H>
    requires std::same_as<scalar_of<Q>, T> && std::same_as<scalar_of<H>, T>
  [[nodiscard]] constexpr T operator()(const Q& q, const H& h) const {
    const auto qs = as_span(q);
    const auto hs = as_span(h);
    check(qs.size(), hs.size());
    T s = 0;
    for (std::size_t a = 0; a < qs.size(); ++a)
      s += qs[a] * detail::sum_of_products(W_.row(a).data(), hs.data(), hs.size());
    return s;
  }
  /// out_j = (Wᵀq)·h_j for every note: Wᵀq is formed once per block of columns, so the cost
  /// is d_q·d_h + n·d_h and nothing is allocated.
  constexpr void scores(std::span<const T> q, MatrixView<const T> notes,
                        std::span<T> out) const noexcept {
    const std::size_t n = notes.rows(), dh = notes.cols();
    for (std::size_t j = 0; j < n; ++j) out[j] = T(0);
    detail::block_buffer<T, DH> u{};
    for (std::size_t c0 = 0; c0 < dh; c0 += u.size()) {
      const std::size_t w = dh - c0 < u.size() ? dh - c0 : u.size();
      for (std::size_t c = 0; c < w; ++c) u[c] = T(0);
      for (std::size_t a = 0; a < q.size(); ++a)
        detail::axpy(q[a], W_.row(a).data() + c0, u.data(), w);
      for (std::size_t j = 0; j < n; ++j)
        out[j] += detail::sum_of_products(u.data(), notes.row(j).data() + c0, w);
    }
  }
  /// ∂s/∂h = Wᵀ q.
  constexpr void gradient_note(std::span<const T> q, std::span<const T> h,
                               std::span<T> out) const noexcept {
    for (std::size_t c = 0; c < h.size(); ++c) out[c] = T(0);
    for (std::size_t a = 0; a < q.size(); ++a)
      detail::axpy(q[a], W_.row(a).data(), out.data(), h.size());
  }
  /// ∂s/∂q = W h.
  constexpr void gradient_query(std::span<const T> q, std::span<const T> h,
                                std::span<T> out) const noexcept {
    for (std::size_t a = 0; a < q.size(); ++a)
      out[a] = detail::sum_of_products(W_.row(a).data(), h.data(), h.size());
  }

  /// Where backward adds ∂L/∂W: a writable d_q × d_h view.
  struct gradient_view {
    MatrixView<T, DQ, DH> W;  ///< ∂L/∂W = Σ_j a_j q h_jᵀ
  };
  /// An owned ∂L/∂W shaped like W (what the returning `backward` gives); converts to
  /// gradient_view.
  struct gradient {
    Matrix<T, DQ, DH> W;  ///< ∂L/∂W = Σ_j a_j q h_jᵀ
    /// Borrows the gradient for writing.
    [[nodiscard]] constexpr gradient_view view() noexcept { return {W.view()}; }
    /// Converts to gradient_view, so an owned gradient goes wherever a view is taken.
    constexpr operator gradient_view() noexcept { return view(); }  // NOLINT: implicit on purpose
  };
  /// Returns ∂L/∂W = 0, shaped like W (fixed shapes: no allocation).
  [[nodiscard]] gradient zero_parameter_gradient() const {
    gradient g{};
    if constexpr (DQ == dynamic || DH == dynamic) g.W = Matrix<T, DQ, DH>(W_.rows(), W_.cols());
    return g;
  }
  /// Throws dimension_error unless g.W is shaped like W.
  constexpr void check_gradient(const gradient_view& g) const {
    check_gradient("attn::general", g);
  }
  /// As above, the message naming `where` (the function that was called).
  constexpr void check_gradient(const char* where, const gradient_view& g) const {
    detail::check_equal(where, "rows of dL/dW", g.W.rows(), "rows of W", W_.rows());
    detail::check_equal(where, "columns of dL/dW", g.W.cols(), "columns of W", W_.cols());
  }
  /// Backward over all notes, given a_j = ∂L/∂s_j: grad_keys_j += a_j Wᵀq and grad_q += W r with
  /// r = Σ_j a_j h_j. Wᵀq and r are formed once per block of columns: cost n·d_h + d_q·d_h,
  /// nothing allocated. Notes with a_j = 0 add nothing.
  constexpr void accumulate_gradients(std::span<const T> q, MatrixView<const T> keys,
                                      std::span<const T> a, std::span<T> grad_q,
                                      MatrixView<T> grad_keys) const noexcept {
    accumulate_gradients_impl(q, keys, a, grad_q, grad_keys, nullptr);
  }
  /// As above, and also ∂L/∂W += q rᵀ (r = Σ_j a_j h_j) into `g`.
  constexpr void accumulate_gradients(std::span<const T> q, MatrixView<const T> keys,
                                      std::span<const T> a, std::span<T> grad_q,
                                      MatrixView<T> grad_keys, gradient_view g) const noexcept {
    accumulate_gradients_impl(q, keys, a, grad_q, grad_keys, &g.W);
  }

private:
  constexpr void accumulate_gradients_impl(std::span<const T> q, MatrixView<const T> keys,
                                           std::span<const T> a, std::span<T> grad_q,
                                           MatrixView<T> grad_keys,
                                           const MatrixView<T, DQ, DH>* gW) const noexcept {
    const std::size_t n = keys.rows(), dh = keys.cols();
    detail::block_buffer<T, DH> u{};  // (Wᵀq) on this block of columns
    detail::block_buffer<T, DH> r{};  // (Σ_j a_j h_j) on this block of columns
    for (std::size_t c0 = 0; c0 < dh; c0 += u.size()) {
      const std::size_t w = dh - c0 < u.size() ? dh - c0 : u.size();
      for (std::size_t c = 0; c < w; ++c) u[c] = r[c] = T(0);
      for (std::size_t i = 0; i < q.size(); ++i)
        detail::axpy(q[i], W_.row(i).data() + c0, u.data(), w);
      for (std::size_t j = 0; j < n; ++j) {
        if (a[j] == T(0)) continue;
        detail::axpy_gradient(a[j], u.data(), grad_keys.row(j).data() + c0, w);
        detail::axpy_gradient(a[j], keys.row(j).data() + c0, r.data(), w);
      }
      const bool r_finite = detail::all_finite(r.data(), w);  // else a zero W_ic adds nothing
      for (std::size_t i = 0; i < q.size(); ++i) {
        const T* Wi = W_.row(i).data() + c0;
        if (r_finite) {
          grad_q[i] += detail::sum_of_products(Wi, r.data(), w);
        } else {
          T s = 0;
          for (std::size_t c = 0; c < w; ++c) s += detail::product_or_zero(Wi[c], r[c]);
          grad_q[i] += s;
        }
        if (gW != nullptr) detail::axpy_gradient(q[i], r.data(), gW->row(i).data() + c0, w);
      }
    }
  }

public:
};
template <class T, std::size_t R, std::size_t C>
general(const Matrix<T, R, C>&) -> general<T, R, C>;
template <class T, std::size_t R, std::size_t C>
general(MatrixView<T, R, C>) -> general<std::remove_const_t<T>, R, C>;

namespace detail {
/// W1, W2 and v of an additive<T, K, DH, DQ>: matrices and a vector of T whose fixed extents fit.
template <class A, class B, class C, class T, std::size_t K, std::size_t DH, std::size_t DQ>
concept additive_parameters = matrix_like<A> && matrix_like<B> && vector_like<C> &&
    std::same_as<matrix_scalar_of<A>, T> && std::same_as<matrix_scalar_of<B>, T> &&
    std::same_as<scalar_of<C>, T> && compatible_extents<rows_of<A>, K> &&
    compatible_extents<cols_of<A>, DH> && compatible_extents<rows_of<B>, K> &&
    compatible_extents<cols_of<B>, DQ> && compatible_extents<extent_of<C>, K>;

/// An argument a score may keep a view of: an lvalue, or a view (MatrixView, std::span), whose
/// numbers outlive the expression.
template <class X>
concept borrowable = std::is_lvalue_reference_v<X> || std::ranges::borrowed_range<X> ||
    (matrix_like<X>&& matrix_traits<std::remove_cvref_t<X>>::is_view);
}  // namespace detail

/// The additive score s = vᵀ tanh(W1 h + W2 q) (Bahdanau, 2015): a one-layer network of k
/// hidden units judges the match. W1 (k × d_h), W2 (k × d_q) and v (k) are borrowed.
template <real T, std::size_t K = dynamic, std::size_t DH = dynamic, std::size_t DQ = dynamic>
class additive {
  MatrixView<const T, K, DH> W1_;
  MatrixView<const T, K, DQ> W2_;
  std::span<const T, K> v_;

public:
  using value_type = T;
  static constexpr std::size_t query_extent = DQ;
  static constexpr std::size_t note_extent = DH;

  /// Borrows W1 (k × d_h), W2 (k × d_q) and v (k): each a Matrix or MatrixView, v any vector of
  /// T (Vector, std::vector, std::array, std::span…); they must outlive the score. Throws
  /// dimension_error unless W1, W2 and v agree on k.
  template <class A, class B, class C>
    requires detail::additive_parameters<A, B, C, T, K, DH, DQ> && detail::borrowable<A> &&
        detail::borrowable<B> && detail::borrowable<C>
  constexpr additive(A&& W1, B&& W2, C&& v)
      : W1_(parameter<DH>(W1, nullptr, 0)), W2_(parameter<DQ>(W2, "rows of W2", W1_.rows())),
        v_(hidden_weights(v, W1_.rows())) {}
  /// Refused: a temporary Matrix, Vector or std::vector would dangle (keep the parameters alive
  /// and pass them by name; views may be temporaries).
  template <class A, class B, class C>
    requires detail::additive_parameters<A, B, C, T, K, DH, DQ> &&
        (!detail::borrowable<A> || !detail::borrowable<B> ||
         !detail::borrowable<C>)additive(A&&, B&&, C&&) = delete;

  private:
    template <std::size_t C, class M>
    static constexpr MatrixView<const T, K, C> parameter(const M& m, const char* rows_name,
                                                         std::size_t k) {
      const auto w = as_view(m);
      if (rows_name != nullptr)
        detail::check_equal("attn::additive", rows_name, w.rows(), "rows of W1", k);
      return MatrixView<const T, K, C>(w.data(), w.rows(), w.cols(), w.row_stride());
    }
    template <class V>
    static constexpr std::span<const T, K> hidden_weights(const V& v, std::size_t k) {
      const auto s = as_span(v);
      detail::check_equal("attn::additive", "size of v", s.size(), "rows of W1", k);
      return std::span<const T, K>(s.data(), s.size());
    }

  public:
    [[nodiscard]] constexpr MatrixView<const T, K, DH> W1() const noexcept { return W1_; }
    [[nodiscard]] constexpr MatrixView<const T, K, DQ> W2() const noexcept { return W2_; }
    [[nodiscard]] constexpr std::span<const T, K> v() const noexcept { return v_; }
    /// The number of hidden units k.
    [[nodiscard]] constexpr std::size_t hidden() const noexcept { return v_.size(); }

    /// Throws dimension_error unless W1 has d_h columns and W2 has d_q columns.
    constexpr void check(std::size_t d_q, std::size_t d_h) const {
      check("attn::additive", d_q, d_h);
    }
    /// As above, the message naming `where` (the function that was called).
    constexpr void check(const char* where, std::size_t d_q, std::size_t d_h) const {
      detail::check_equal(where, "note size", d_h, "columns of W1", W1_.cols());
      detail::check_equal(where, "query size", d_q, "columns of W2", W2_.cols());
    }
    /// Returns Σ_i v_i tanh(W1_i·h + W2_i·q).
    template <vector_like Q, vector_like H>
      requires std::same_as<scalar_of<Q>, T> && std::same_as<scalar_of<H>, T>
    [[nodiscard]] constexpr T operator()(const Q& q, const H& h) const {
      const auto qs = as_span(q);
      const auto hs = as_span(h);
      check(qs.size(), hs.size());
      T s = 0;  // scores() on h alone: the batched scores' numbers, to the bit
      scores(qs, MatrixView<const T>(hs.data(), 1, hs.size()), std::span<T>(&s, 1));
      return s;
    }
    /// W1_i·h + W2_i·q, the input of hidden unit i.
    [[nodiscard]] constexpr T pre_activation(std::size_t i, std::span<const T> q,
                                             std::span<const T> h) const {
      return detail::sum_of_products(W1_.row(i).data(), h.data(), h.size()) +
             detail::sum_of_products(W2_.row(i).data(), q.data(), q.size());
    }
    /// out_j = Σ_i v_i tanh(W1_i·h_j + p_i) with p = W2 q formed once per block of hidden
    /// units: cost k·d_q + n·k·d_h, nothing allocated. Per note and block, W1 h_j is formed
    /// eight rows of W1 at a time (`dot_rows`) and the tanh as whole vectors (`tanh_array`);
    /// the same numbers as s(q, h_j), to the bit.
    constexpr void scores(std::span<const T> q, MatrixView<const T> notes, std::span<T> out) const noexcept {
      const std::size_t n = notes.rows(), k = hidden();
      for (std::size_t j = 0; j < n; ++j) out[j] = T(0);
      detail::block_buffer<T, K> p{};
      detail::block_buffer<T, K> t{};
      for (std::size_t i0 = 0; i0 < k; i0 += t.size()) {
        const std::size_t w = k - i0 < t.size() ? k - i0 : t.size();
        W2_products(i0, w, q.data(), p.data());
        for (std::size_t j = 0; j < n; ++j)
          out[j] += hidden_block(i0, w, notes.row(j).data(), p.data(), t.data());
      }
    }
    /// ∂s/∂h = W1ᵀ (v ⊙ (1 − tanh²(W1 h + W2 q))).
    constexpr void gradient_note(std::span<const T> q, std::span<const T> h,
                                 std::span<T> out) const noexcept {
      for (std::size_t c = 0; c < h.size(); ++c) out[c] = T(0);
      for (std::size_t i = 0; i < hidden(); ++i) {
        const T t = detail::tanh(pre_activation(i, q, h));
        detail::axpy(v_[i] * (T(1) - t * t), W1_.row(i).data(), out.data(), h.size());
      }
    }
    /// ∂s/∂q = W2ᵀ (v ⊙ (1 − tanh²(W1 h + W2 q))).
    constexpr void gradient_query(std::span<const T> q, std::span<const T> h,
                                  std::span<T> out) const noexcept {
      for (std::size_t c = 0; c < q.size(); ++c) out[c] = T(0);
      for (std::size_t i = 0; i < hidden(); ++i) {
        const T t = detail::tanh(pre_activation(i, q, h));
        detail::axpy(v_[i] * (T(1) - t * t), W2_.row(i).data(), out.data(), q.size());
      }
    }

    /// Where backward adds ∂L/∂W1, ∂L/∂W2 and ∂L/∂v: writable views shaped like W1, W2 and v.
    struct gradient_view {
      MatrixView<T, K, DH> W1;  ///< ∂L/∂W1 = Σ_j δ_j h_jᵀ,  δ_j = a_j v ⊙ (1 − t_j²)
      MatrixView<T, K, DQ> W2;  ///< ∂L/∂W2 = (Σ_j δ_j) qᵀ
      std::span<T, K> v;        ///< ∂L/∂v  = Σ_j a_j t_j,   t_j = tanh(W1 h_j + W2 q)
    };
    /// Owned ∂L/∂W1, ∂L/∂W2 and ∂L/∂v (what the returning `backward` gives); converts to
    /// gradient_view.
    struct gradient {
      Matrix<T, K, DH> W1;  ///< ∂L/∂W1
      Matrix<T, K, DQ> W2;  ///< ∂L/∂W2
      Vector<T, K> v;       ///< ∂L/∂v
      /// Borrows the gradients for writing.
      [[nodiscard]] constexpr gradient_view view() noexcept {
        return {W1.view(), W2.view(), std::span<T, K>(v)};
      }
      /// Converts to gradient_view, so an owned gradient goes wherever a view is taken.
      constexpr operator gradient_view() noexcept { return view(); }  // NOLINT: implicit on purpose
    };
    /// Returns zero gradients shaped like W1, W2 and v (fixed shapes: no allocation).
    [[nodiscard]] constexpr gradient zero_parameter_gradient() const {
      gradient g{};
      if constexpr (K == dynamic || DH == dynamic) g.W1 = Matrix<T, K, DH>(W1_.rows(), W1_.cols());
      if constexpr (K == dynamic || DQ == dynamic) g.W2 = Matrix<T, K, DQ>(W2_.rows(), W2_.cols());
      if constexpr (K == dynamic) g.v = Vector<T, K>(v_.size());
      return g;
    }
    /// Throws dimension_error unless the views are shaped like W1, W2 and v.
    constexpr void check_gradient(const gradient_view& g) const {
      check_gradient("attn::additive", g);
    }
    /// As above, the message naming `where` (the function that was called).
    constexpr void check_gradient(const char* where, const gradient_view& g) const {
      detail::check_equal(where, "rows of dL/dW1", g.W1.rows(), "rows of W1", W1_.rows());
      detail::check_equal(where, "columns of dL/dW1", g.W1.cols(), "columns of W1", W1_.cols());
      detail::check_equal(where, "rows of dL/dW2", g.W2.rows(), "rows of W2", W2_.rows());
      detail::check_equal(where, "columns of dL/dW2", g.W2.cols(), "columns of W2", W2_.cols());
      detail::check_equal(where, "size of dL/dv", g.v.size(), "size of v", v_.size());
    }
    /// Backward over all notes, given a_j = ∂L/∂s_j: with t_j = tanh(W1 h_j + W2 q) and
    /// δ_j = a_j v ⊙ (1 − t_j²), grad_keys_j += W1ᵀ δ_j and grad_q += W2ᵀ Σ_j δ_j. W2 q is formed
    /// once per block of hidden units: cost n·k·d_h + k·d_q (the forward's), nothing allocated.
    /// Notes with a_j = 0 add nothing.
    constexpr void accumulate_gradients(std::span<const T> q, MatrixView<const T> keys,
                                        std::span<const T> a, std::span<T> grad_q,
                                        MatrixView<T> grad_keys) const noexcept {
      accumulate_gradients_impl(q, keys, a, grad_q, grad_keys, nullptr);
    }
    /// As above, and also ∂L/∂W1 += Σ_j δ_j h_jᵀ, ∂L/∂W2 += (Σ_j δ_j) qᵀ, ∂L/∂v += Σ_j a_j t_j.
    constexpr void accumulate_gradients(std::span<const T> q, MatrixView<const T> keys,
                                        std::span<const T> a, std::span<T> grad_q,
                                        MatrixView<T> grad_keys, gradient_view g) const noexcept {
      accumulate_gradients_impl(q, keys, a, grad_q, grad_keys, &g);
    }

  private:
    /// p_i = W2_{i0+i}·q for the 1 <= w hidden units of one block (sum_of_products' order: the
    /// numbers pre_activation adds).
    constexpr void W2_products(std::size_t i0, std::size_t w, const T* q, T* p) const noexcept {
      detail::dot_rows(q, W2_.row(i0).data(), W2_.row_stride(), w, W2_.cols(), p);
    }
    /// t_i = tanh(W1_{i0+i}·h + p_i) for the w hidden units of one block (the tanh of
    /// pre_activation's numbers, to the bit): W1 h eight rows at a time, the tanh as vectors.
    constexpr void hidden_tanh(std::size_t i0, std::size_t w, const T* h, const T* p,
                               T* t) const noexcept {
      detail::dot_rows(h, W1_.row(i0).data(), W1_.row_stride(), w, W1_.cols(), t);
      for (std::size_t i = 0; i < w; ++i) t[i] += p[i];
      detail::tanh_array(t, t, w);
    }
    /// hidden_tanh, then Σ_i v_{i0+i} t_i as `dot` adds it: the block's share of the score.
    constexpr T hidden_block(std::size_t i0, std::size_t w, const T* h, const T* p,
                             T* t) const noexcept {
      hidden_tanh(i0, w, h, p, t);
      return detail::sum_of_products(v_.data() + i0, t, w);
    }

    constexpr void accumulate_gradients_impl(std::span<const T> q, MatrixView<const T> keys,
                                             std::span<const T> a, std::span<T> grad_q,
                                             MatrixView<T> grad_keys,
                                             const gradient_view* g) const {
      const std::size_t n = keys.rows(), dh = keys.cols(), k = hidden();
      detail::block_buffer<T, K> p{};   // W2 q on this block of hidden units
      detail::block_buffer<T, K> e{};   // Σ_j δ_j on this block
      detail::block_buffer<T, K> tb{};  // t_j on this block
      for (std::size_t i0 = 0; i0 < k; i0 += p.size()) {
        const std::size_t w = k - i0 < p.size() ? k - i0 : p.size();
        W2_products(i0, w, q.data(), p.data());
        for (std::size_t i = 0; i < w; ++i) e[i] = T(0);
        for (std::size_t j = 0; j < n; ++j) {
          if (a[j] == T(0)) continue;
          const T* h = keys.row(j).data();
          hidden_tanh(i0, w, h, p.data(), tb.data());
          for (std::size_t i = 0; i < w; ++i) {
            const T t = tb[i];
            // a zero v_i or 1 − t² (a saturated unit) times an a_j that overflowed adds nothing
            const T delta =
                detail::product_or_zero(detail::product_or_zero(a[j], v_[i0 + i]), T(1) - t * t);
            detail::axpy_gradient(delta, W1_.row(i0 + i).data(), grad_keys.row(j).data(), dh);
            e[i] += delta;
            if (g != nullptr) {
              detail::axpy_gradient(delta, h, g->W1.row(i0 + i).data(), dh);
              g->v[i0 + i] += detail::product_or_zero(a[j], t);
            }
          }
        }
        for (std::size_t i = 0; i < w; ++i) {
          detail::axpy_gradient(e[i], W2_.row(i0 + i).data(), grad_q.data(), q.size());
          if (g != nullptr)
            detail::axpy_gradient(e[i], q.data(), g->W2.row(i0 + i).data(), q.size());
        }
      }
    }

  public:
};
template <matrix_like A, matrix_like B, vector_like C>
additive(A&&, B&&, C&&)
    -> additive<matrix_scalar_of<A>,
                common_extent<rows_of<A>, common_extent<rows_of<B>, extent_of<C>>>, cols_of<A>,
                cols_of<B>>;

namespace detail {
/// The parameters of attn's parameterized scores, named, for the overlap checks of the calls
/// that write gradients or Jacobians (a score without an overload here has none attn knows of).
template <real T, std::size_t DQ, std::size_t DH>
[[nodiscard]] constexpr std::array<named_region<T>, 1>
parameter_regions(const general<T, DQ, DH>& s) noexcept {
  return {{{"W", region_of(s.W())}}};
}
template <real T, std::size_t K, std::size_t DH, std::size_t DQ>
[[nodiscard]] constexpr std::array<named_region<T>, 3>
parameter_regions(const additive<T, K, DH, DQ>& s) noexcept {
  return {{{"W1", region_of(s.W1())}, {"W2", region_of(s.W2())}, {"v", region_of(s.v())}}};
}
/// The buffers of their parameter gradients (∂L/∂θ), named likewise.
template <real T, std::size_t DQ, std::size_t DH>
[[nodiscard]] constexpr std::array<named_region<T>, 1>
gradient_regions(const general<T, DQ, DH>&,
                 const typename general<T, DQ, DH>::gradient_view& g) noexcept {
  return {{{"dL/dW", region_of(g.W)}}};
}
template <real T, std::size_t K, std::size_t DH, std::size_t DQ>
[[nodiscard]] constexpr std::array<named_region<T>, 3>
gradient_regions(const additive<T, K, DH, DQ>&,
                 const typename additive<T, K, DH, DQ>::gradient_view& g) noexcept {
  return {{{"dL/dW1", region_of(g.W1)}, {"dL/dW2", region_of(g.W2)}, {"dL/dv", region_of(g.v)}}};
}
}  // namespace detail

namespace detail {
/// Whether the members of S that attn calls to score notes for scalar T may throw: a
/// dot_product_score's scale, else the batched scores, else operator() — unless declared
/// noexcept. attn's four scores cannot throw once the checks have passed; for a score that may,
/// the functions that write into the caller's buffers compute into scratch and copy at the end
/// (docs/errors.md, "A user's score that throws").
template <class S, class T>
consteval bool scoring_may_throw() {
  if constexpr (dot_product_score<S, T>)
    return !noexcept(std::declval<const S&>().template scale<T>(std::size_t{}));
  else if constexpr (batched_score<S, T>)
    return !noexcept(std::declval<const S&>().scores(std::declval<std::span<const T>>(),
                                                     std::declval<MatrixView<const T>>(),
                                                     std::declval<std::span<T>>()));
  else
    return !noexcept(static_cast<T>(std::declval<const S&>()(
        std::declval<std::span<const T>>(), std::declval<std::span<const T>>())));
}
}  // namespace detail

/// Writes score(q, h_j) for every row h_j of `notes` into out: scale(d)·(q·h_j) for a
/// dot_product_score, else through the batched `scores` when it has one, else note by note.
/// Sizes must already be checked.
template <real T, Score<T> S>
constexpr void score_all(const S& score, std::span<const T> q, MatrixView<const T> notes,
                         std::span<T> out) {
  if constexpr (dot_product_score<S, T>) {
    detail::dot_product_scores(q, notes, score.template scale<T>(q.size()), out);
  } else if constexpr (batched_score<S, T>) {
    score.scores(q, notes, out);
  } else {
    for (std::size_t j = 0; j < notes.rows(); ++j)
      out[j] = static_cast<T>(score(q, std::span<const T>(notes.row(j))));
  }
}

}  // namespace attn
