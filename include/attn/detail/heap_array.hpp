#pragma once
/// \file attn/detail/heap_array.hpp
/// An owned array on the heap that constant evaluation may use. Kernel layer.

#include "attn/detail/config.hpp"

#include <cstddef>
#include <utility>

namespace attn::detail {

/// n value-initialized Ts on the heap, owned (empty and null by default). new[] and delete[]
/// rather than a std::vector, so that masks and scratch stay usable in constant expressions where
/// std::vector is not (libstdc++'s debug mode, -D_GLIBCXX_DEBUG, makes none of it constexpr).
template <class T>
class heap_array {
  T* p_ = nullptr;
  std::size_t n_ = 0;

public:
  constexpr heap_array() noexcept = default;
  constexpr explicit heap_array(std::size_t n) : p_(n == 0 ? nullptr : new T[n]{}), n_(n) {}
  constexpr heap_array(const heap_array& o) : heap_array(o.n_) {
    for (std::size_t j = 0; j < n_; ++j) p_[j] = o.p_[j];
  }
  constexpr heap_array(heap_array&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  constexpr heap_array& operator=(heap_array o) noexcept {  // by value: copy, then swap
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  constexpr ~heap_array() { delete[] p_; }

  [[nodiscard]] constexpr T* data() const noexcept { return p_; }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return n_; }
  [[nodiscard]] constexpr bool empty() const noexcept { return n_ == 0; }
  [[nodiscard]] constexpr T& operator[](std::size_t j) const noexcept { return p_[j]; }
};

}  // namespace attn::detail
