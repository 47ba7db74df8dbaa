#pragma once
/// \file attn/detail/bias.hpp
/// The additive bias on the logits, as the kernels read it: Z = β·S + B + A, B a T × n matrix of
/// the caller's (PyTorch's float attn_mask) and A ALiBi's −m·(p_t − j), p_t = t + offset the
/// query's position (offset = n − T: with a cache the queries are the last positions). The one
/// home of both formulas and of their rounding:
///
///   a_tj = −fl(m·(p_t − j))               (p_t − j exact as a T up to 2^24 for float),
///   z_tj = fl(fl(fl(β·s_tj) + b_tj) + a_tj),   β·s rounded on its own (rounded_product),
///
/// so that the forward's tiles, its exact rows, the backward's tiles and its exact rows form the
/// same z bit for bit whatever the build fuses. Kernel layer: no public type.

#include "attn/detail/config.hpp"

#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>

#include "attn/detail/simd.hpp"

namespace attn::detail {

/// ALiBi's term of query position p and key j for slope m: −m·(p − j), the distance exact (an
/// integer, signed: without a causal mask later keys have p − j < 0 and a positive term).
template <class T>
[[nodiscard]] constexpr T alibi_term(T slope, std::size_t p, std::size_t j) noexcept {
  const T distance = p >= j ? static_cast<T>(p - j) : -static_cast<T>(j - p);
  return -rounded_product(slope, distance);  // (rounded on its own: never fused into z's sum)
}

/// A bias on the logits as the kernels read it (both parts may be given; neither: none).
template <class T>
struct tile_bias {
  const T* matrix = nullptr;  ///< b: T × n, row t at matrix + t·stride, or null
  std::size_t stride = 0;
  T slope = 0;                ///< ALiBi's m (0: no ALiBi)
  std::size_t offset = 0;     ///< p_t = t + offset
  [[nodiscard]] constexpr bool any() const noexcept { return matrix != nullptr || slope != T(0); }
};

/// z_c = fl(fl(fl(β·s_c) + b_t,j0+c) + a_t,j0+c) for c < nb, the logits of row t's keys
/// [j0, j0 + nb) from their scores s (z may be s). Whole vectors at a time where the build has
/// them (the same operations lane by lane: the same bits), the distance p − j formed as
/// fl(p) − fl(j), exact while p and j stay below 2^digits (2^24 for float); the rest one at a
/// time.
template <class T>
ATTN_ALWAYS_INLINE constexpr void biased_logits(const tile_bias<T>& bias, std::size_t t,
                                                std::size_t j0, std::size_t nb, T beta,
                                                const T* s, T* z) noexcept {
  const T* b = bias.matrix != nullptr ? bias.matrix + t * bias.stride + j0 : nullptr;
  const std::size_t p = t + bias.offset;
  std::size_t c = 0;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    constexpr std::size_t L = simd_lanes<T>;
    using VT = vec<T, L>;
    // (unsigned long long: 2^53 does not fit a 32-bit size_t, as on wasm32)
    constexpr unsigned long long exact = 1ULL << std::numeric_limits<T>::digits;
    if (!std::is_constant_evaluated() && (bias.slope == T(0) || (p < exact && j0 + nb <= exact))) {
      VT lane{};  // 0, 1, …, L − 1
      for (std::size_t k = 0; k < L; ++k) lane[k] = static_cast<T>(k);
      const VT position = VT{} + static_cast<T>(p);
      for (; c + L <= nb; c += L) {
        VT x = rounded_product(beta, load<T, L>(s + c));
        if (b != nullptr) x += load<T, L>(b + c);
        if (bias.slope != T(0)) {  // p − j exact: both integers below 2^digits
          const VT distance = position - (lane + static_cast<T>(j0 + c));
          x += -rounded_product(bias.slope, distance);
        }
        std::memcpy(z + c, &x, sizeof x);
      }
    }
  }
#endif
  for (; c < nb; ++c) {
    T x = rounded_product(beta, s[c]);
    if (b != nullptr) x += b[c];
    if (bias.slope != T(0)) x += alibi_term(bias.slope, p, j0 + c);
    z[c] = x;
  }
}

}  // namespace attn::detail
