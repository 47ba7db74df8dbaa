#pragma once
/// \file attn/detail/kernels.hpp
/// The inner loops every algorithm is built from, written so that GCC and Clang vectorize
/// them without -ffast-math: reductions keep `lanes` independent partial results (which is
/// also what makes them more accurate than one running sum), maps are branch-free.

#include <cstddef>
#include <limits>

#include "attn/detail/exp.hpp"

namespace attn::detail {

/// Independent partial results per reduction: 16 floats or 8 doubles fill one AVX-512
/// register, two AVX2 registers.
template <class T>
inline constexpr std::size_t lanes = 64 / sizeof(T) > 16 ? 16 : 64 / sizeof(T);

/// Σ_i a_i b_i.
template <class T>
[[nodiscard]] constexpr T dot(const T* a, const T* b, std::size_t n) noexcept {
  constexpr std::size_t L = lanes<T>;
  if (n < L) {
    T s = 0;
    for (std::size_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
  }
  T acc[L] = {};
  std::size_t i = 0;
  for (; i + L <= n; i += L)
    for (std::size_t k = 0; k < L; ++k) acc[k] += a[i + k] * b[i + k];
  for (std::size_t k = 0; i + k < n; ++k) acc[k] += a[i + k] * b[i + k];
  T s = 0;
  for (std::size_t k = 0; k < L; ++k) s += acc[k];
  return s;
}

/// y += a·x.
template <class T>
constexpr void axpy(T a, const T* x, T* y, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

/// x *= a.
template <class T>
constexpr void scale(T* x, std::size_t n, T a) noexcept {
  for (std::size_t i = 0; i < n; ++i) x[i] *= a;
}

/// max_i x_i, NaNs skipped; −inf for n == 0.
template <class T>
[[nodiscard]] constexpr T max_of(const T* x, std::size_t n) noexcept {
  constexpr std::size_t L = lanes<T>;
  constexpr T lowest = -std::numeric_limits<T>::infinity();
  T acc[L];
  for (std::size_t k = 0; k < L; ++k) acc[k] = lowest;
  std::size_t i = 0;
  for (; i + L <= n; i += L)
    for (std::size_t k = 0; k < L; ++k) acc[k] = x[i + k] > acc[k] ? x[i + k] : acc[k];
  for (std::size_t k = 0; i + k < n; ++k) acc[k] = x[i + k] > acc[k] ? x[i + k] : acc[k];
  T m = lowest;
  for (std::size_t k = 0; k < L; ++k) m = acc[k] > m ? acc[k] : m;
  return m;
}

/// max_i β·x_i, NaNs skipped.
template <class T>
[[nodiscard]] constexpr T scaled_max_of(const T* x, std::size_t n, T beta) noexcept {
  constexpr std::size_t L = lanes<T>;
  constexpr T lowest = -std::numeric_limits<T>::infinity();
  T acc[L];
  for (std::size_t k = 0; k < L; ++k) acc[k] = lowest;
  std::size_t i = 0;
  for (; i + L <= n; i += L)
    for (std::size_t k = 0; k < L; ++k) {
      const T y = beta * x[i + k];
      acc[k] = y > acc[k] ? y : acc[k];
    }
  for (std::size_t k = 0; i + k < n; ++k) {
    const T y = beta * x[i + k];
    acc[k] = y > acc[k] ? y : acc[k];
  }
  T m = lowest;
  for (std::size_t k = 0; k < L; ++k) m = acc[k] > m ? acc[k] : m;
  return m;
}

/// out_i = exp(β x_i − m); returns Σ_i out_i. `out` may alias `x`.
template <class T>
constexpr T exp_shifted_sum(const T* x, T* out, std::size_t n, T beta, T m) noexcept {
  constexpr std::size_t L = lanes<T>;
  T acc[L] = {};
  std::size_t i = 0;
  for (; i + L <= n; i += L)
    for (std::size_t k = 0; k < L; ++k) {
      const T e = attn::detail::exp(beta * x[i + k] - m);
      out[i + k] = e;
      acc[k] += e;
    }
  for (std::size_t k = 0; i + k < n; ++k) {
    const T e = attn::detail::exp(beta * x[i + k] - m);
    out[i + k] = e;
    acc[k] += e;
  }
  T s = 0;
  for (std::size_t k = 0; k < L; ++k) s += acc[k];
  return s;
}

/// out_i = mask_i ? exp(β x_i − m) : 0; returns Σ_i out_i. `out` may alias `x`.
template <class T>
constexpr T masked_exp_shifted_sum(const T* x, T* out, std::size_t n, T beta, T m,
                                   const bool* mask) noexcept {
  T s = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const T e = mask[i] ? attn::detail::exp(beta * x[i] - m) : T(0);
    out[i] = e;
    s += e;
  }
  return s;
}

}  // namespace attn::detail
