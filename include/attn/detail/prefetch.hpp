#pragma once
/// \file attn/detail/prefetch.hpp
/// Prefetching: the hint itself (a line into L2), which lines of the rows ahead a kernel asks
/// for, and the policy of when the one-pass kernels prefetch at all. Kernel layer: knows no
/// public algorithm.

#include "attn/detail/config.hpp"

#include <cstddef>

namespace attn::detail {

/// Asks for the cache line holding p to be brought into L2 (prefetcht1 on x86): a hint, with
/// no effect on any result and no fault whatever p points to.
template <class T>
[[gnu::always_inline]] inline void prefetch_l2(const T* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 0, 2);
#else
  (void)p;
#endif
}

/// Bytes per cache line, the unit of prefetch_l2 (64 on every x86-64 and most AArch64 cores).
inline constexpr std::size_t cache_line = 64;

/// Which lines of the rows ahead a kernel prefetches: all of them, or every other one (lines
/// 0, 2, 4, … of each row, counted from its start).
enum class prefetch_lines : unsigned { all, every_other };

/// Whether a kernel prefetches at vector v of a row (vectors of W bytes): at the first vector
/// of each line that `lines` takes.
template <std::size_t W>
[[nodiscard]] constexpr bool prefetch_at(std::size_t v, prefetch_lines lines) noexcept {
  constexpr std::size_t per_line = cache_line / W > 0 ? cache_line / W : 1;
  return v % per_line == 0 && (lines == prefetch_lines::all || (v / per_line) % 2 == 0);
}

/// prefetch_l2 over every line of n rows of d numbers of T at `rows` (row stride `stride`).
template <class T>
inline void prefetch_rows_l2(const T* rows, std::size_t stride, std::size_t n,
                             std::size_t d) noexcept {
  if (d == 0) return;
  for (std::size_t j = 0; j < n; ++j) {
    const auto* row = reinterpret_cast<const unsigned char*>(rows + j * stride);
    for (std::size_t b = 0; b < d * sizeof(T); b += cache_line) prefetch_l2(row + b);
    prefetch_l2(row + d * sizeof(T) - 1);  // a row that does not start on a line ends on one more
  }
}

/// From this many bytes of notes on (keys and values), the one-pass kernels prefetch each block
/// while they work on the one before: smaller notes stay in some cache between calls, where the
/// prefetches only cost time; larger ones stream from memory, which would pause while a block's
/// exps and weighted sum run (docs/performance.md, "How each kernel gets there").
inline constexpr std::size_t online_prefetch_bytes = std::size_t{16} << 20;

}  // namespace attn::detail
