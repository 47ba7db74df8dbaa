#pragma once
/// \file attn/gradcheck.hpp
/// The derivative checker: central finite differences, compared with any analytic Jacobian or
/// vector-Jacobian product (backward), for any function from a vector to a vector.
///
///   numeric column k:  (f(x + h_k e_k) − f(x − h_k e_k)) / (x_k⁺ − x_k⁻),  h_k = ε^{1/3} max(1,
///   |x_k|)
///
/// Errors are measured absolute and relative to max(|A|, |N|, floor); both scale as ε^{2/3},
/// so a tolerance stated for double carries to other types (gradcheck_tolerance). Why this step,
/// this floor and these tolerances: docs/derivatives.md, "7. The checker". This header
/// allocates (it copies x and forms numeric Jacobians); it is a test tool.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "attn/error.hpp"
#include "attn/matrix.hpp"
#include "attn/vector.hpp"

namespace attn {

/// Where a check found an error: the input's name (as the caller gave it), the output
/// component i and the input coordinate k of Jacobian entry (i, k). A vector-Jacobian check has
/// one output (i = 0).
struct gradcheck_location {
  std::string input;       ///< which input (the caller's label, e.g. "h_2", "q", "W")
  std::size_t output = 0;  ///< output component i
  std::size_t index = 0;   ///< input coordinate k
};

/// The result of a derivative check: the worst absolute and relative errors and where each
/// occurred. A NaN anywhere makes the error NaN, so `passed` fails.
template <real T>
struct gradcheck_report {
  T max_abs_error = 0;             ///< max |A_ik − N_ik|
  gradcheck_location worst_abs{};  ///< where max_abs_error occurred
  T max_rel_error = 0;             ///< max |A_ik − N_ik| / max(|A_ik|, |N_ik|, floor_k)
  gradcheck_location worst_rel{};  ///< where max_rel_error occurred
  std::size_t evaluations = 0;     ///< calls of f

  /// True when max_rel_error ≤ tolerance (false if it is NaN).
  [[nodiscard]] constexpr bool passed(T tolerance) const noexcept {
    return max_rel_error <= tolerance;
  }

  /// Takes in one entry's errors (NaN sticks).
  constexpr void record(T abs_error, T rel_error, std::string_view input, std::size_t output,
                        std::size_t index) {
    if (worse(abs_error, max_abs_error)) {
      max_abs_error = abs_error;
      worst_abs = {std::string(input), output, index};
    }
    if (worse(rel_error, max_rel_error)) {
      max_rel_error = rel_error;
      worst_rel = {std::string(input), output, index};
    }
  }

  /// Keeps the worse of each figure from `other` (to sum up checks of several inputs).
  constexpr gradcheck_report& merge(const gradcheck_report& other) {
    if (worse(other.max_abs_error, max_abs_error)) {
      max_abs_error = other.max_abs_error;
      worst_abs = other.worst_abs;
    }
    if (worse(other.max_rel_error, max_rel_error)) {
      max_rel_error = other.max_rel_error;
      worst_rel = other.worst_rel;
    }
    evaluations += other.evaluations;
    return *this;
  }

private:
  static constexpr bool worse(T e, T current) noexcept {
    if (current != current) return false;  // NaN already recorded
    return e != e || e > current;
  }
};

/// The central-difference step for coordinate value x: h = ε^{1/3} max(1, |x|) (see the file
/// comment for why).
template <real T>
[[nodiscard]] T gradcheck_step(T x) noexcept {
  return std::cbrt(std::numeric_limits<T>::epsilon()) * std::max(T(1), std::fabs(x));
}

/// The tolerance for check_jacobian and check_vjp in type T: 1e-7 in double and, since the
/// finite-difference error scales as ε^{2/3}, 1e-7·(ε_T/ε_double)^{2/3} elsewhere: about
/// 6.6e-2 for float and 6.2e-10 for x87 long double (ε = 2^-64). It allows a constant
/// |x|²|f'''|/(6|f'|) + (rounding growth) of up to 2.7e3 over ε^{2/3}.
template <real T>
[[nodiscard]] T gradcheck_tolerance() noexcept {
  const long double ratio = static_cast<long double>(std::numeric_limits<T>::epsilon()) /
                            static_cast<long double>(std::numeric_limits<double>::epsilon());
  return static_cast<T>(1e-7L * std::cbrt(ratio * ratio));
}

/// The tolerance for compare_vjp (two analytic results, rounding errors only, which scale as ε):
/// 1e-12 in double, 1e-12·ε_T/ε_double elsewhere (about 5.4e-4 for float, 4.9e-16 for x87
/// long double), i.e. about 4.5e3 ε_T relative to |J|ᵀ|g|.
template <real T>
[[nodiscard]] T vjp_tolerance() noexcept {
  const long double ratio = static_cast<long double>(std::numeric_limits<T>::epsilon()) /
                            static_cast<long double>(std::numeric_limits<double>::epsilon());
  return static_cast<T>(1e-12L * ratio);
}

namespace detail {

/// Calls f on x with x_k moved by ±h; returns the step taken (x_k⁺ − x_k⁻) and the values.
template <class T, class F>
auto gradcheck_central_pair(F& f, Vector<T>& x, std::size_t k) {
  const T x0 = x[k];
  const T h = gradcheck_step(x0);
  const T xp = x0 + h;
  const T xm = x0 - h;
  x[k] = xp;
  auto fp = Vector<T>(as_span(f(std::span<const T>(x.data(), x.size()))));
  x[k] = xm;
  auto fm = Vector<T>(as_span(f(std::span<const T>(x.data(), x.size()))));
  x[k] = x0;
  return std::tuple<T, Vector<T>, Vector<T>>{xp - xm, std::move(fp), std::move(fm)};
}

template <class T>
T gradcheck_inf_norm(std::span<const T> v) noexcept {
  T m = 0;
  for (const T& a : v) m = std::max(m, std::fabs(a));
  return m;
}

}  // namespace detail

/// Returns the m×n numeric Jacobian of f at x by central differences (column k from
/// f(x ± h_k e_k), h_k = gradcheck_step(x_k)); f takes a `std::span<const T>` of n numbers and
/// returns a vector_like of m numbers. Calls f 2n + 1 times.
template <vector_like X, class F>
[[nodiscard]] Matrix<scalar_of<X>> numeric_jacobian(F&& f, const X& x) {
  using T = scalar_of<X>;
  Vector<T> xw(as_span(x));
  const std::size_t n = xw.size();
  const std::size_t m = std::ranges::size(f(std::span<const T>(xw.data(), xw.size())));
  Matrix<T> J(m, n);
  for (std::size_t k = 0; k < n; ++k) {
    auto [step, fp, fm] = detail::gradcheck_central_pair<T>(f, xw, k);
    detail::check_equal("attn::numeric_jacobian", "size of f(x + h)", fp.size(), "size of f(x)", m);
    detail::check_equal("attn::numeric_jacobian", "size of f(x - h)", fm.size(), "size of f(x)", m);
    for (std::size_t i = 0; i < m; ++i) J(i, k) = (fp[i] - fm[i]) / step;
  }
  return J;
}

/// Compares an analytic Jacobian A (m×n, entry (i, k) = ∂f_i/∂x_k) with central differences of
/// f at x; `input` names x in the report. Relative errors are taken against
/// max(|A_ik|, |N_ik|, max|N|, ‖f(x)‖∞/max(1, |x_k|)). Throws dimension_error if A's shape is
/// not m×n.
template <vector_like X, class F, matrix_like J>
  requires std::same_as<scalar_of<X>, matrix_scalar_of<J>>
[[nodiscard]] gradcheck_report<scalar_of<X>> check_jacobian(F&& f, const X& x, const J& analytic,
                                                            std::string_view input = "x") {
  using T = scalar_of<X>;
  const auto xs = as_span(x);
  const auto A = as_view(analytic);
  const Vector<T> f0(as_span(f(std::span<const T>(xs))));
  const Matrix<T> N = numeric_jacobian(f, x);
  detail::check_equal("attn::check_jacobian", "rows of the analytic Jacobian", A.rows(),
                      "size of f(x)", f0.size());
  detail::check_equal("attn::check_jacobian", "columns of the analytic Jacobian", A.cols(),
                      "size of x", xs.size());
  T nmax = 0;
  for (std::size_t i = 0; i < N.rows(); ++i)
    nmax = std::max(nmax, detail::gradcheck_inf_norm<T>(N.row(i)));
  const T fnorm = detail::gradcheck_inf_norm<T>(f0);
  gradcheck_report<T> r;
  r.evaluations = 2 * xs.size() + 2;
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const T floor = std::max(nmax, fnorm / std::max(T(1), std::fabs(xs[k])));
    for (std::size_t i = 0; i < N.rows(); ++i) {
      const T e = std::fabs(A(i, k) - N(i, k));
      const T scale = std::max({std::fabs(A(i, k)), std::fabs(N(i, k)), floor});
      r.record(e, e == T(0) ? T(0) : e / scale, input, i, k);
    }
  }
  return r;
}

/// Compares an analytic vector-Jacobian product v = Jᵀg = ∂⟨g, f(x)⟩/∂x (what backward gives)
/// with central differences of the scalar ⟨g, f(x)⟩ (2n calls of f, no Jacobian formed).
/// Relative errors are taken against max(|v_k|, |N_k|, max|N|, (|g|ᵀ|f(x)|)/max(1, |x_k|)).
template <vector_like X, vector_like G, vector_like V, class F>
  requires std::same_as<scalar_of<X>, scalar_of<G>> && std::same_as<scalar_of<X>, scalar_of<V>>
[[nodiscard]] gradcheck_report<scalar_of<X>>
check_vjp(F&& f, const X& x, const G& g, const V& analytic, std::string_view input = "x") {
  using T = scalar_of<X>;
  const auto xs = as_span(x);
  const auto gs = as_span(g);
  const auto vs = as_span(analytic);
  const char* where = "attn::check_vjp";
  detail::check_equal(where, "size of the analytic product", vs.size(), "size of x", xs.size());
  const Vector<T> f0(as_span(f(std::span<const T>(xs))));
  detail::check_equal(where, "size of g", gs.size(), "size of f(x)", f0.size());
  T gf = 0;  // |g|ᵀ|f(x)|: the scale of ⟨g, f⟩'s rounding
  for (std::size_t i = 0; i < gs.size(); ++i) gf += std::fabs(gs[i]) * std::fabs(f0[i]);
  const auto phi = [&](const Vector<T>& y) {
    T s = 0;
    for (std::size_t i = 0; i < gs.size(); ++i) s += gs[i] * y[i];
    return s;
  };
  Vector<T> xw(xs);
  Vector<T> numeric(xs.size());
  for (std::size_t k = 0; k < xs.size(); ++k) {
    auto [step, fp, fm] = detail::gradcheck_central_pair<T>(f, xw, k);
    detail::check_equal(where, "size of f(x + h)", fp.size(), "size of f(x)", f0.size());
    detail::check_equal(where, "size of f(x - h)", fm.size(), "size of f(x)", f0.size());
    numeric[k] = (phi(fp) - phi(fm)) / step;
  }
  const T nmax = detail::gradcheck_inf_norm<T>(as_span(numeric));
  gradcheck_report<T> r;
  r.evaluations = 2 * xs.size() + 1;
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const T floor = std::max(nmax, gf / std::max(T(1), std::fabs(xs[k])));
    const T e = std::fabs(vs[k] - numeric[k]);
    const T scale = std::max({std::fabs(vs[k]), std::fabs(numeric[k]), floor});
    r.record(e, e == T(0) ? T(0) : e / scale, input, 0, k);
  }
  return r;
}

/// Compares two analytic results: Jᵀg, from a Jacobian J (m×n), with a vector-Jacobian product
/// v (n numbers, from backward). Entry k's relative error is |(Jᵀg)_k − v_k| / (|J|ᵀ|g|)_k, the
/// scale of Jᵀg's rounding error (Higham's bound for a dot product); where that scale is 0 the
/// entries must agree exactly. Throws dimension_error on shapes that disagree.
template <matrix_like J, vector_like G, vector_like V>
  requires std::same_as<matrix_scalar_of<J>, scalar_of<G>> &&
      std::same_as<scalar_of<G>, scalar_of<V>>
[[nodiscard]] gradcheck_report<scalar_of<G>>
compare_vjp(const J& jacobian, const G& g, const V& vjp, std::string_view input = "x") {
  using T = scalar_of<G>;
  const auto A = as_view(jacobian);
  const auto gs = as_span(g);
  const auto vs = as_span(vjp);
  detail::check_equal("attn::compare_vjp", "rows of J", A.rows(), "size of g", gs.size());
  detail::check_equal("attn::compare_vjp", "columns of J", A.cols(), "size of the product",
                      vs.size());
  gradcheck_report<T> r;
  for (std::size_t k = 0; k < A.cols(); ++k) {
    T jtg = 0, scale = 0;
    for (std::size_t i = 0; i < A.rows(); ++i) {
      jtg += A(i, k) * gs[i];
      scale += std::fabs(A(i, k)) * std::fabs(gs[i]);
    }
    const T e = std::fabs(jtg - vs[k]);
    const T rel =
        e == T(0) ? T(0) : (scale > T(0) ? e / scale : std::numeric_limits<T>::infinity());
    r.record(e, rel, input, 0, k);
  }
  return r;
}

}  // namespace attn
