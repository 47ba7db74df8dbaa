#pragma once
/// \file attn/activations.hpp
/// The feed-forward layer's activations (the unit's §9; NEXT_SECTIONS.md; docs/block.md):
///
///   ReLU(x) = max(x, 0),                          ReLU′(x) = 1 for x > 0, else 0 (ReLU′(0) = 0);
///   GELU(x) = x·Φ(x), Φ(x) = ½·erfc(−x/√2),        GELU′(x) = Φ(x) + x·φ(x), φ(x) = e^(−x²/2)/√(2π);
///   GELU_tanh(x) = ½x(1 + tanh u) = x·σ(2u),      u = √(2/π)(x + 0.044715x³),
///                  GELU_tanh′(x) = σ(2u) + 2x·u′·σ(2u)σ(−2u),  u′ = √(2/π)(1 + 3·0.044715x²).
///
/// Written for every finite x: Φ by erfc (1 + erf(x/√2) cancels for x ≪ 0: GELU(−10) is
/// −7.6e−23, which 1 + erf gives as 0 or noise), σ by its stable halves (1/(1 + e^(−z)) for
/// z ≥ 0, e^z/(1 + e^z) below: 1 + tanh u cancels too), and σ(2u)σ(−2u) as e^(−|2u|)/(1 + e^(−|2u|))².
/// Beyond |x| = 10⁶ both GELUs are x (or −0 below) and their slopes 1 (or 0) in every type, and
/// they are returned so: no intermediate overflows for a finite x (x³, x², e^z), so the values stay
/// right when the caller's code is built with -ffast-math (which assumes no inf arises). NaN
/// gives NaN (without -ffast-math); GELU(±inf) is ±inf or −0, its slope 1 or 0.
/// For float and double (with GCC/Clang vector types) both GELUs run on detail/erfc.hpp's vector
/// kernels, the same formulas written to vectorize (and saturating from |x| = 15 or 39, 11 or 22
/// for the tanh form): GELU float within 8 ulp, its slope within 5 ulp of Φ + |x|φ, over every
/// float; the scalar functions and the matrix loops give the same bits. The code below is long
/// double's (and every type's without vector types).

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cmath>
#include <concepts>
#include <cstddef>
#include <limits>
#include <numbers>

#include "attn/detail/erfc.hpp"
#include "attn/detail/overlap.hpp"
#include "attn/detail/simd.hpp"
#include "attn/error.hpp"
#include "attn/matrix.hpp"
#include "attn/vector.hpp"

namespace attn {

/// Which activation: ReLU, GELU with erf (exact, PyTorch's default) or GELU's tanh form
/// (PyTorch's approximate="tanh", GPT-2's).
enum class activation { relu, gelu, gelu_tanh };

namespace detail {

/// Beyond this |x| both GELUs are x or −0 in every type (1 − Φ(10⁶) is e^(−5·10¹¹)).
template <class T>
inline constexpr T gelu_saturation = T(1e6);

/// σ(z) and σ(z)σ(−z), stable for every finite z.
template <class T>
struct sigmoid_pair {
  T s, ss;
};
template <class T>
[[nodiscard]] inline sigmoid_pair<T> stable_sigmoid(T z) noexcept {
  const T e = std::exp(-std::fabs(z));  // in (0, 1]: never overflows
  const T big = T(1) / (T(1) + e), small = e / (T(1) + e);
  return {z >= T(0) ? big : small, big * small};
}

/// u·(1/√(2/π)) pieces: √(2/π) and 0.044715 in T.
template <class T>
inline constexpr T sqrt_2_over_pi = std::numbers::sqrt2_v<T> * std::numbers::inv_sqrtpi_v<T>;
template <class T>
inline constexpr T gelu_cubic = T(0.044715L);

}  // namespace detail

/// act(x) for one number (the file comment's formulas).
template <real T>
[[nodiscard]] inline T activate(activation a, T x) noexcept {
  switch (a) {
    case activation::relu:
      return x < T(0) ? T(0) : x;  // NaN passes through
    case activation::gelu: {
#if ATTN_VECTOR_EXTENSIONS
      if constexpr (detail::simd_type<T>) return detail::gelu_erf<T, false>(x);  // detail/erfc.hpp
#endif
      if (x > detail::gelu_saturation<T>) return x;
      if (x < -detail::gelu_saturation<T>) return -T(0);
      const T phi = T(0.5) * std::erfc(-x * std::numbers::sqrt2_v<T> / T(2));
      return x * phi;
    }
    case activation::gelu_tanh: {
#if ATTN_VECTOR_EXTENSIONS
      if constexpr (detail::simd_type<T>) return detail::gelu_tanh<T, false>(x);  // detail/erfc.hpp
#endif
      if (x > detail::gelu_saturation<T>) return x;
      if (x < -detail::gelu_saturation<T>) return -T(0);
      const T u = detail::sqrt_2_over_pi<T> * (x + detail::gelu_cubic<T> * x * x * x);
      return x * detail::stable_sigmoid(T(2) * u).s;
    }
  }
  return x;
}

/// act′(x) for one number (the file comment's formulas; ReLU′(0) = 0).
template <real T>
[[nodiscard]] inline T activation_derivative(activation a, T x) noexcept {
  switch (a) {
    case activation::relu:
      return x > T(0) ? T(1) : x <= T(0) ? T(0) : x;  // NaN: NaN
    case activation::gelu: {
#if ATTN_VECTOR_EXTENSIONS
      if constexpr (detail::simd_type<T>) return detail::gelu_erf<T, true>(x);  // detail/erfc.hpp
#endif
      if (x > detail::gelu_saturation<T>) return T(1);
      if (x < -detail::gelu_saturation<T>) return T(0);
      const T cdf = T(0.5) * std::erfc(-x * std::numbers::sqrt2_v<T> / T(2));
      const T pdf = std::exp(-x * x / T(2)) * std::numbers::inv_sqrtpi_v<T> / std::numbers::sqrt2_v<T>;
      return cdf + x * pdf;
    }
    case activation::gelu_tanh: {
#if ATTN_VECTOR_EXTENSIONS
      if constexpr (detail::simd_type<T>) return detail::gelu_tanh<T, true>(x);  // detail/erfc.hpp
#endif
      if (x > detail::gelu_saturation<T>) return T(1);
      if (x < -detail::gelu_saturation<T>) return T(0);
      const T x2 = x * x;
      const T u = detail::sqrt_2_over_pi<T> * (x + detail::gelu_cubic<T> * x2 * x);
      const T du = detail::sqrt_2_over_pi<T> * (T(1) + T(3) * detail::gelu_cubic<T> * x2);
      const detail::sigmoid_pair<T> sg = detail::stable_sigmoid(T(2) * u);
      return sg.ss == T(0) ? sg.s : sg.s + T(2) * x * du * sg.ss;
    }
  }
  return x;
}

/// Y = act(X) entry by entry, into Y of X's shape (Y may be X itself). dimension_error naming
/// both shapes, overlap_error for a partial overlap; nothing written then.
template <matrix_like Xm, mutable_matrix_like Ym>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Ym>>
void activate(activation a, const Xm& X, Ym&& Y) {
  using T = matrix_scalar_of<Xm>;
  const char* where = "attn::activate";
  const auto xv = as_view(X);
  const MatrixView<const T> x = xv;
  const MatrixView<T> y = as_mutable_view(Y);
  detail::check_shape(where, "the output", y.rows(), y.cols(), x.rows(), x.cols());
  const auto xr = detail::region_of(x), yr = detail::region_of(y);
  if (!detail::same_numbers(xr, yr) && detail::overlaps(xr, yr))
    detail::throw_overlap(where, "the output", "the input");
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (detail::simd_type<T>) {
    if (a != activation::relu) {  // whole vectors: the same numbers as activate(a, x) on each
      for (std::size_t t = 0; t < x.rows(); ++t) {
        if (a == activation::gelu)
          detail::gelu_erf_array<T, false>(x.row(t).data(), nullptr, y.row(t).data(), x.cols());
        else
          detail::gelu_erf_array<T, false, false, true>(x.row(t).data(), nullptr, y.row(t).data(), x.cols());
      }
      return;
    }
  }
#endif
  for (std::size_t t = 0; t < x.rows(); ++t) {
    const T* xi = x.row(t).data();
    T* yi = y.row(t).data();
    for (std::size_t i = 0; i < x.cols(); ++i) yi[i] = activate(a, xi[i]);
  }
}

/// ∂L/∂X = dY ⊙ act′(X) (overwritten, or added to what dX holds when `accumulate`); X the
/// activation's input. dX may be dY itself. dimension_error naming the buffer and both shapes,
/// overlap_error (dX over X, or partly over dY); nothing written then.
template <matrix_like Xm, matrix_like Gm, mutable_matrix_like Dm>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Gm>> &&
      std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Dm>>
void activation_backward(activation a, const Xm& X, const Gm& dY, Dm&& dX, bool accumulate = false) {
  using T = matrix_scalar_of<Xm>;
  const char* where = "attn::activation_backward";
  const auto xv = as_view(X);
  const auto gv = as_view(dY);
  const MatrixView<const T> x = xv, g = gv;
  const MatrixView<T> d = as_mutable_view(dX);
  detail::check_shape(where, "dL/dY", g.rows(), g.cols(), x.rows(), x.cols());
  detail::check_shape(where, "dL/dX", d.rows(), d.cols(), x.rows(), x.cols());
  const auto xr = detail::region_of(x), gr = detail::region_of(g), dr = detail::region_of(d);
  if (detail::overlaps(dr, xr)) detail::throw_overlap(where, "dL/dX", "the input");
  if (!detail::same_numbers(dr, gr) && detail::overlaps(dr, gr))
    detail::throw_overlap(where, "dL/dX", "dL/dY");
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (detail::simd_type<T>) {
    if (a != activation::relu) {  // whole vectors: dY·activation_derivative(a, x) on each, to the bit
      const bool tanh_form = a == activation::gelu_tanh;
      for (std::size_t t = 0; t < x.rows(); ++t) {
        const T* xi = x.row(t).data();
        const T* gi = g.row(t).data();
        T* di = d.row(t).data();
        const std::size_t n = x.cols();
        if (accumulate && tanh_form)
          detail::gelu_erf_array<T, true, true, true>(xi, gi, di, n);
        else if (accumulate)
          detail::gelu_erf_array<T, true, true>(xi, gi, di, n);
        else if (tanh_form)
          detail::gelu_erf_array<T, true, false, true>(xi, gi, di, n);
        else
          detail::gelu_erf_array<T, true>(xi, gi, di, n);
      }
      return;
    }
  }
#endif
  for (std::size_t t = 0; t < x.rows(); ++t) {
    const T* xi = x.row(t).data();
    const T* gi = g.row(t).data();
    T* di = d.row(t).data();
    for (std::size_t i = 0; i < x.cols(); ++i) {
      const T v = gi[i] * activation_derivative(a, xi[i]);
      di[i] = accumulate ? di[i] + v : v;
    }
  }
}

}  // namespace attn
