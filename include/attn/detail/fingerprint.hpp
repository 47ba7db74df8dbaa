#pragma once
/// \file attn/detail/fingerprint.hpp
/// A 64-bit fingerprint of a buffer's numbers (or a mask's bytes): what a backward compares with
/// the forward it is given, to refuse inputs other than the forward's. Two buffers with the same
/// numbers, bit for bit, in the same shape have the same fingerprint wherever they lie; any other
/// pair differs but with probability about 2^-64. Kernel layer: raw pointers and counts.

#include "attn/detail/config.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace attn::detail {

/// Eight independent lanes of a multiply-xor hash (so that the multiplies overlap: a lane's step
/// is a chain of a multiply and two xors), folded with the count at the end.
struct fingerprint_state {
  static constexpr std::uint64_t prime = 0x100000001b3ULL;
  static constexpr std::size_t lanes = 8;
  std::uint64_t lane[lanes] = {0xcbf29ce484222325ULL, 0x9e3779b97f4a7c15ULL, 0xbf58476d1ce4e5b9ULL,
                               0x94d049bb133111ebULL, 0x2545f4914f6cdd1dULL, 0xd6e8feb86659fd93ULL,
                               0xa0761d6478bd642fULL, 0xe7037ed1a0b428dbULL};
  std::uint64_t count = 0;

  [[nodiscard]] static constexpr std::uint64_t mix(std::uint64_t h, std::uint64_t word) noexcept {
    h = (h ^ word) * prime;
    return h ^ (h >> 29);
  }
  constexpr void add(std::uint64_t word) noexcept {
    std::uint64_t& h = lane[count % lanes];
    h = mix(h, word);
    ++count;
  }
  /// add(w[0]), …, add(w[7]), with count a multiple of 8: each lane once, from registers.
  constexpr void add8(const std::uint64_t* w) noexcept {
    for (std::size_t k = 0; k < lanes; ++k) lane[k] = mix(lane[k], w[k]);
    count += lanes;
  }
  [[nodiscard]] constexpr std::uint64_t value() const noexcept {
    std::uint64_t h = count * 0xff51afd7ed558ccdULL;
    for (const std::uint64_t l : lane) {
      h = (h ^ l) * 0xc4ceb9fe1a85ec53ULL;
      h ^= h >> 33;
    }
    return h;
  }
};

/// The bits of one number as a word: float's and double's own bits; long double as the bits of
/// the double nearest it and of the rest (its padding bytes are not numbers).
template <class T>
[[nodiscard]] constexpr std::uint64_t number_bits(T x) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    return detail::bit_cast<std::uint32_t>(x);
  } else if constexpr (std::is_same_v<T, double>) {
    return detail::bit_cast<std::uint64_t>(x);
  } else {
    const double hi = static_cast<double>(x);
    const double lo = static_cast<double>(x - static_cast<T>(hi));
    return detail::bit_cast<std::uint64_t>(hi) ^ (detail::bit_cast<std::uint64_t>(lo) * 0x9e3779b97f4a7c15ULL);
  }
}

/// The fingerprint of rows × cols numbers, row i at data + i·stride (and of the shape). Floats go
/// two to a word; a row's words eight at a time through add8 while the count allows (1 ns a float
/// before, with four lanes and a word each: a fifth of a small block's forward, docs/performance.md).
template <class T>
[[nodiscard]] constexpr std::uint64_t fingerprint(const T* data, std::size_t rows, std::size_t cols,
                                                  std::size_t stride) noexcept {
  fingerprint_state s;
  s.add(rows);
  s.add(cols);
  constexpr std::size_t per_word = std::is_same_v<T, float> ? 2 : 1;
  const auto word_at = [](const T* p) -> std::uint64_t {
    if constexpr (per_word == 2) {
      return number_bits(p[0]) | (number_bits(p[1]) << 32);
    } else {
      return number_bits(p[0]);
    }
  };
  for (std::size_t i = 0; i < rows; ++i) {
    const T* row = data + i * stride;
    std::size_t j = 0;
    for (; j + per_word <= cols && s.count % fingerprint_state::lanes != 0; j += per_word) s.add(word_at(row + j));
    for (; j + 8 * per_word <= cols; j += 8 * per_word) {
      std::uint64_t w[8];
      for (std::size_t k = 0; k < 8; ++k) w[k] = word_at(row + j + k * per_word);
      s.add8(w);
    }
    for (; j + per_word <= cols; j += per_word) s.add(word_at(row + j));
    for (; j < cols; ++j) s.add(number_bits(row[j]));
  }
  return s.value();
}

/// The fingerprint of n bytes read as 0 or 1 (a mask's entries; null: no mask).
[[nodiscard]] constexpr std::uint64_t fingerprint_bytes(const unsigned char* data, std::size_t rows,
                                                        std::size_t cols, std::size_t stride) noexcept {
  fingerprint_state s;
  s.add(data == nullptr ? 0 : 1);
  s.add(rows);
  s.add(cols);
  if (data != nullptr)
    for (std::size_t i = 0; i < rows; ++i) {
      std::uint64_t word = 0;
      for (std::size_t j = 0; j < cols; ++j) {
        word = (word << 1) | (data[i * stride + j] != 0 ? 1u : 0u);
        if (j % 64 == 63) {
          s.add(word);
          word = 0;
        }
      }
      s.add(word);
    }
  return s.value();
}

}  // namespace attn::detail
