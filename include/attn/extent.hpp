#pragma once
/// \file attn/extent.hpp
/// The size sentinel `attn::dynamic` and the compile-time rules that two sizes must follow.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <span>

namespace attn {

/// Marks a size chosen at run time (the same value as `std::dynamic_extent`, so that
/// `std::span<T, N>` is the natural view of `Vector<T, N>`).
inline constexpr std::size_t dynamic = std::dynamic_extent;

/// Two extents agree when they are equal or when either is chosen at run time.
/// A fixed mismatch fails this concept, and the compiler's message names it.
template <std::size_t N, std::size_t M>
concept compatible_extents = N == dynamic || M == dynamic || N == M;

/// The extent that two compatible extents share: the fixed one when either is fixed.
template <std::size_t N, std::size_t M>
  requires compatible_extents<N, M>
inline constexpr std::size_t common_extent = N == dynamic ? M : N;

/// `N * M` when both are fixed, else `dynamic`.
template <std::size_t N, std::size_t M>
inline constexpr std::size_t product_extent = (N == dynamic || M == dynamic) ? dynamic : N* M;

}  // namespace attn
