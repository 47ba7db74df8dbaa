#pragma once
/// \file attn/allocator.hpp
/// Where attn's dynamic Vector and Matrix keep their numbers: std::allocator's memory, aligned
/// to a cache line. Also for your own buffers: `std::vector<float,
/// attn::aligned_allocator<float>>`.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>

#include "attn/error.hpp"

namespace attn {

/// Bytes the storage of a dynamic Vector or Matrix is aligned to: one cache line (and one
/// AVX-512 register). Rows of a multiple of 64 bytes (16 floats, 8 doubles) then each start on
/// a line, and no vector load of attn's kernels straddles two lines (malloc guarantees 16:
/// docs/performance.md, "Alignment", measures the difference).
inline constexpr std::size_t storage_alignment = 64;

/// std::allocator with memory aligned to Align bytes (a power of two, at least alignof(T)),
/// through the aligned `operator new`. In constant evaluation it is std::allocator (addresses
/// have no alignment there), so a constexpr std::vector with it still works.
template <class T, std::size_t Align = storage_alignment>
struct aligned_allocator {
  static_assert(Align >= alignof(T) && (Align & (Align - 1)) == 0,
                "attn::aligned_allocator: Align must be a power of two, at least alignof(T)");
  using value_type = T;
  /// (Needed because of the non-type parameter Align: allocator_traits cannot rebind it.)
  template <class U>
  struct rebind {
    using other = aligned_allocator<U, Align>;
  };

  constexpr aligned_allocator() noexcept = default;
  /// From the allocator of another type (what containers do when they rebind).
  template <class U>
  constexpr aligned_allocator(const aligned_allocator<U, Align>& /*other*/) noexcept {
  }  // NOLINT: as std::allocator

  /// Memory for n T's, aligned to Align; throws std::bad_array_new_length when n·sizeof(T)
  /// overflows, std::bad_alloc when there is none.
  [[nodiscard]] constexpr T* allocate(std::size_t n) {
    if (std::is_constant_evaluated()) return std::allocator<T>{}.allocate(n);
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T))
      detail::raise_bad_array_new_length();
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{Align}));
  }
  /// Frees what allocate(n) returned.
  constexpr void deallocate(T* p, std::size_t n) noexcept {
    if (std::is_constant_evaluated()) {
      std::allocator<T>{}.deallocate(p, n);
      return;
    }
    // (not the sized form: clang declares it only under -fsized-deallocation)
    ::operator delete (p, std::align_val_t{Align});
  }

  /// Any two allocate and free the same way.
  template <class U>
  [[nodiscard]] friend constexpr bool
  operator==(const aligned_allocator& /*a*/, const aligned_allocator<U, Align>& /*b*/) noexcept {
    return true;
  }
};

}  // namespace attn
