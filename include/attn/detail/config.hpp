#pragma once
/// \file attn/detail/config.hpp
/// Every macro of attn, in one place: the language check, the vector-extension switch and the
/// inlining and unrolling hints the kernels use, and mask_byte, the one type every kernel shares.
/// Every header of attn includes this one first.

#if defined(_MSVC_LANG) ? _MSVC_LANG < 202002L : __cplusplus < 202002L
#error "attn needs C++20: compile with -std=c++20 (or /std:c++20)"
// a missing header is fatal, so the #error above is the only message (not thousands of lines)
#include "attn: stop here, C++20 is needed"
#endif

/// 1 where the kernels use GCC/Clang vector types (define ATTN_NO_VECTOR_EXTENSIONS to get the
/// plain loops, which add in the same order).
#if (defined(__GNUC__) || defined(__clang__)) && !defined(ATTN_NO_VECTOR_EXTENSIONS)
#define ATTN_VECTOR_EXTENSIONS 1
#else
#define ATTN_VECTOR_EXTENSIONS 0
#endif

/// 1 when attn reports errors by throwing (the default), 0 when the translation unit is compiled
/// without exceptions (-fno-exceptions): then every error prints its message to stderr and calls
/// std::abort() (attn/error.hpp, detail::raise). Define it yourself to override the detection.
#ifndef ATTN_EXCEPTIONS
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || (defined(_MSC_VER) && defined(_CPPUNWIND))
#define ATTN_EXCEPTIONS 1
#else
#define ATTN_EXCEPTIONS 0
#endif
#endif

/// ATTN_FLATTEN: inline every call in the function (the loops that call exp stay vectorized
/// whatever their caller's size). ATTN_ALWAYS_INLINE / ATTN_NOINLINE: as they say, for the
/// small-call paths and the cold ones (docs/performance.md, "How each kernel gets there").
#if defined(__GNUC__) || defined(__clang__)
#define ATTN_FLATTEN [[gnu::flatten]]
#define ATTN_ALWAYS_INLINE [[gnu::always_inline]] inline
#define ATTN_NOINLINE [[gnu::noinline]]
#else
#define ATTN_FLATTEN
#define ATTN_ALWAYS_INLINE inline
#define ATTN_NOINLINE
#endif

/// A loop of constant trip count unrolled whole (the vector kernels' blocks of V vectors).
#if defined(__clang__)
#define ATTN_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define ATTN_UNROLL _Pragma("GCC unroll 16")
#else
#define ATTN_UNROLL
#endif

/// The most bytes one fixed-size attn::Vector or attn::Matrix may hold: it lives where it is
/// declared, on the stack for a local, and so do attn's results of fixed size. Past it a
/// static_assert says to use attn::dynamic. 128 KiB (Eigen's EIGEN_STACK_ALLOCATION_LIMIT) unless
/// defined before attn is included.
#ifndef ATTN_STACK_ALLOCATION_LIMIT
#define ATTN_STACK_ALLOCATION_LIMIT 131072
#endif

#include <version>  // __cpp_lib_bit_cast
#if defined(__cpp_lib_bit_cast)
#include <bit>
#else
#include <type_traits>
#endif

namespace attn::detail {
#if defined(__cpp_lib_bit_cast)
using std::bit_cast;
#else
/// std::bit_cast where the standard library lacks it (the libc++ of Debian's emscripten 3.1.6,
/// which the lesson page is compiled with): the compiler's builtin, which std::bit_cast itself
/// is in libstdc++ and libc++, with the same constraints.
template <class To, class From>
  requires(sizeof(To) == sizeof(From) && std::is_trivially_copyable_v<To> &&
           std::is_trivially_copyable_v<From>)
[[nodiscard]] constexpr To bit_cast(const From& from) noexcept {
  return __builtin_bit_cast(To, from);
}
#endif

/// Whether n numbers of `bytes` bytes each fit ATTN_STACK_ALLOCATION_LIMIT (n counts: 2^20 does
/// not wrap when multiplied).
inline constexpr bool fits_stack(unsigned long long n, unsigned long long bytes) {
  return n <= static_cast<unsigned long long>(ATTN_STACK_ALLOCATION_LIMIT) / bytes;
}

/// A mask entry as the kernels read it: nonzero keeps (attn/mask.hpp makes these from bool,
/// char, signed char and unsigned char ranges).
using mask_byte = unsigned char;
}  // namespace attn::detail
