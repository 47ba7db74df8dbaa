#pragma once
/// \file attn/detail/overlap.hpp
/// Whether two buffers share memory: `region` (where a buffer's numbers lie) and `overlaps`.
/// The checks that refuse outputs overlapping inputs, and their messages, are attn/error.hpp's
/// (check_outputs_apart); which calls allow what is docs/errors.md's, "Buffers that overlap".
/// Kernel layer: pointers and counts.
#include "attn/detail/config.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <type_traits>

namespace attn::detail {

/// Where a buffer's numbers lie: `rows` rows of `cols` numbers from `data`, the rows `stride`
/// numbers apart (stride ≥ cols; a vector is one row). Empty when rows or cols is 0.
template <class T>
struct region {
  const T* data = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t stride = 0;

  [[nodiscard]] constexpr bool empty() const noexcept { return rows == 0 || cols == 0; }
};

/// The numbers of a span, as one row.
template <class T, std::size_t N>
[[nodiscard]] constexpr region<std::remove_const_t<T>> region_of(std::span<T, N> s) noexcept {
  return {s.data(), 1, s.size(), s.size()};
}

/// Whether some number of a is also one of b, by comparing element addresses for equality (all
/// that constant evaluation allows for pointers into different objects; its buffers are small).
template <class T>
[[nodiscard]] constexpr bool share_a_number(const region<T>& a, const region<T>& b) noexcept {
  const auto holds = [](const T* row, std::size_t cols, const T* p) {
    for (std::size_t k = 0; k < cols; ++k)
      if (row + k == p) return true;
    return false;
  };
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t k = 0; k < b.rows; ++k) {
      const T* ra = a.data + i * a.stride;
      const T* rb = b.data + k * b.stride;
      if (holds(ra, a.cols, rb) || holds(rb, b.cols, ra)) return true;
    }
  return false;
}

/// For regions whose spans of memory overlap: whether a row of a meets a row of b. With a common
/// stride s (a region of one row takes any stride ≥ its length) and b starting e = q·s + r
/// numbers after a (0 ≤ r < s), row i of a and row k of b meet only where k − i is −q (if
/// r < a.cols) or −q − 1 (if s − r < b.cols); otherwise the spans are taken as overlapping.
template <class T>
[[nodiscard]] bool rows_meet(const region<T>& a, const region<T>& b) noexcept {
  std::size_t s = a.stride;
  if (a.rows == 1 && b.rows == 1)
    s = a.cols > b.cols ? a.cols : b.cols;
  else if (a.rows == 1)
    s = b.stride;
  if ((a.rows != 1 && b.rows != 1 && a.stride != b.stride) || a.cols > s || b.cols > s) return true;
  const auto bytes = static_cast<std::ptrdiff_t>(reinterpret_cast<std::uintptr_t>(b.data) -
                                                 reinterpret_cast<std::uintptr_t>(a.data));
  if (bytes % static_cast<std::ptrdiff_t>(sizeof(T)) != 0) return true;  // numbers cut in two
  const std::ptrdiff_t e = bytes / static_cast<std::ptrdiff_t>(sizeof(T));
  const auto ss = static_cast<std::ptrdiff_t>(s);
  const std::ptrdiff_t q = e >= 0 ? e / ss : -((-e + ss - 1) / ss);  // floor(e / s)
  const std::ptrdiff_t r = e - q * ss;
  const auto rows_apart = [&](std::ptrdiff_t t) {  // t = k − i for some rows i of a, k of b
    return t >= -static_cast<std::ptrdiff_t>(a.rows - 1) &&
           t <= static_cast<std::ptrdiff_t>(b.rows - 1);
  };
  return (r < static_cast<std::ptrdiff_t>(a.cols) && rows_apart(-q)) ||
         (ss - r < static_cast<std::ptrdiff_t>(b.cols) && rows_apart(-q - 1));
}

/// Whether regions a and b share a number (of memory: regions of different types share one
/// when their bytes meet). At run time the spans of memory are compared (std::less: pointers
/// into different objects), and only where they overlap are the rows looked at.
template <class A, class B>
[[nodiscard]] constexpr bool overlaps(const region<A>& a, const region<B>& b) noexcept {
  if (a.empty() || b.empty()) return false;
  if (std::is_constant_evaluated()) {
    if constexpr (std::is_same_v<A, B>)
      return share_a_number(a, b);
    else
      return false;  // no pointer there can point into numbers of another type
  } else {
    const std::less<const void*> less;
    const void* a_end = a.data + (a.rows - 1) * a.stride + a.cols;
    const void* b_end = b.data + (b.rows - 1) * b.stride + b.cols;
    if (!less(a.data, b_end) || !less(b.data, a_end)) return false;
    if constexpr (std::is_same_v<A, B>)
      return rows_meet(a, b);
    else
      return true;
  }
}

/// A region's bytes as [begin, end) addresses, both null when it is empty (so that it meets
/// nothing). Run time only (its end is compared with other objects' addresses).
struct byte_span {
  const void* begin = nullptr;
  const void* end = nullptr;
};

template <class T>
[[nodiscard]] ATTN_ALWAYS_INLINE byte_span bytes_of(const region<T>& r) noexcept {
  if (r.empty()) return {};
  return {r.data, r.data + (r.rows - 1) * r.stride + r.cols};
}

/// 1 when two spans of memory meet, else 0: two compares and no branch (std::less: addresses of
/// different objects compare in its total order). An unsigned, so that callers combine many with
/// `|` and no branch either.
[[nodiscard]] ATTN_ALWAYS_INLINE unsigned spans_meet(byte_span a, byte_span b) noexcept {
  const std::less<const void*> less;
  return static_cast<unsigned>(less(a.begin, b.end)) & static_cast<unsigned>(less(b.begin, a.end));
}

/// Whether a and b are the same numbers exactly (what the in-place calls allow).
template <class T>
[[nodiscard]] constexpr bool same_numbers(const region<T>& a, const region<T>& b) noexcept {
  return a.data == b.data && a.rows == b.rows && a.cols == b.cols &&
         (a.rows <= 1 || a.stride == b.stride);
}

}  // namespace attn::detail
