#pragma once
/// \file attn/detail/random.hpp
/// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014;
/// Vigna's splitmix64.c): the state advances by γ = 0x9E3779B97F4A7C15 and each output is the
/// state through `splitmix64_mix`. Integer arithmetic modulo 2⁶⁴ only, so every compiler and
/// standard library gives the same bits (std::uniform_real_distribution does not: its algorithm
/// is the library's). attn/init.hpp's `random_bits` and
/// attn/sampling.hpp's `random_generator` are its callers.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstdint>

namespace attn::detail {

/// splitmix64's increment, ⌊2⁶⁴/φ⌋ made odd.
inline constexpr std::uint64_t splitmix64_gamma = 0x9E3779B97F4A7C15u;

/// splitmix64's output function (a bijection of the 64-bit words): z ← (z ⊕ z≫30)·0xBF58476D1CE4E5B9,
/// z ← (z ⊕ z≫27)·0x94D049BB133111EB, z ⊕ z≫31.
[[nodiscard]] constexpr std::uint64_t splitmix64_mix(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}

}  // namespace attn::detail
