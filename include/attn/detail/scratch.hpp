#pragma once
/// \file attn/detail/scratch.hpp
/// Scratch numbers for the derivatives: inline when the size is fixed at compile time, inline
/// up to a small count when it is not, on the heap beyond. Kernel layer.

#include "attn/detail/config.hpp"

#include <array>
#include <cstddef>
#include <span>
#include <vector>

namespace attn::detail {

/// n numbers of scratch: inline when N is fixed (no allocation); for dynamic N (N =
/// std::dynamic_extent), and a fixed N past ATTN_STACK_ALLOCATION_LIMIT (a view's extent), inline
/// up to 128 numbers, else on the heap (which may throw bad_alloc: callers make their scratch
/// before they write anything).
template <class T, std::size_t N>
class scratch {
  static constexpr bool on_stack = N != std::dynamic_extent && fits_stack(N, sizeof(T));
  static constexpr std::size_t inline_size = !on_stack ? 128 : (N > 0 ? N : 1);
  std::array<T, inline_size> small_;  // not zeroed: every caller writes before it reads
  std::vector<T> big_;
  std::span<T> s_;

public:
  explicit scratch(std::size_t n) {
    if (!on_stack && n > inline_size) {
      big_.assign(n, T(0));
      s_ = std::span<T>(big_);
    } else {
      s_ = std::span<T>(small_.data(), n);
    }
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  [[nodiscard]] std::span<T> span() const noexcept { return s_; }
  [[nodiscard]] T* data() const noexcept { return s_.data(); }
  [[nodiscard]] T& operator[](std::size_t i) const noexcept { return s_[i]; }
};

}  // namespace attn::detail
