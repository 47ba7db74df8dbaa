#pragma once
/// \file attn/error.hpp
/// The exceptions attn throws, the size checks that throw them, and `detail::raise`, the one
/// place that throws (or, built without exceptions, prints the message and aborts).

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <span>
#include <stdexcept>
#include <string>

#include "attn/detail/overlap.hpp"

namespace attn {

/// Thrown when run-time sizes disagree (or a size is zero where one is needed);
/// `what()` names the function, both sizes and what they describe.
class dimension_error : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

/// Thrown when a value is outside the domain a function accepts (for example a non-finite
/// sharpness β, or a row whose every note is masked under the `throw_error` policy).
class domain_error : public std::domain_error {
public:
  using std::domain_error::domain_error;
};

/// Thrown when an output buffer overlaps an input, or another output, of the same call in a way
/// the call does not allow (docs/errors.md, "Buffers that overlap"); `what()` names the function
/// and both buffers: "attn::attend: context overlaps query".
class overlap_error : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

/// Thrown when a backward is given inputs, parameters or options other than those of the
/// forward whose cache it reads (docs/errors.md); `what()` names the function and what differs:
/// "attn::multi_head_attention_backward: W_Q holds other numbers than the forward's".
class forward_mismatch_error : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

/// Thrown when a file attn reads is not what its format says, or does not fit the buffers it is
/// read into, or when a file cannot be read or written (attn/safetensors.hpp); `what()` names
/// the function, the file and what is wrong: "attn::load_safetensors: model.safetensors: tensor
/// \"wte\" is 65x8 in the file but 64x8 in the buffer".
class file_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

namespace detail {

/// Prints `message` and a newline to stderr and aborts: every error of a build without
/// exceptions (ATTN_EXCEPTIONS 0).
[[noreturn]] inline void abort_with(const char* message) noexcept {
  std::fputs(message, stderr);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  std::abort();
}

/// Throws E(message); built without exceptions, abort_with(message) instead. Every error attn
/// reports goes through here.
template <class E>
[[noreturn]] void raise(const std::string& message) {
#if ATTN_EXCEPTIONS
  throw E(message);
#else
  abort_with(message.c_str());
#endif
}

/// Throws std::bad_array_new_length (built without exceptions: aborts saying so).
[[noreturn]] inline void raise_bad_array_new_length() {
#if ATTN_EXCEPTIONS
  throw std::bad_array_new_length();
#else
  abort_with("attn::aligned_allocator: the size in bytes is more than std::size_t counts");
#endif
}

[[noreturn]] inline void throw_dimension_error(const char* where, const char* what_a, std::size_t a,
                                               const char* what_b, std::size_t b) {
  raise<dimension_error>(std::string(where) + ": " + what_a + " is " + std::to_string(a) + " but " +
                         what_b + " is " + std::to_string(b));
}

/// Throws `dimension_error` naming both sizes unless `a == b`.
constexpr void check_equal(const char* where, const char* what_a, std::size_t a, const char* what_b,
                           std::size_t b) {
  if (a != b) throw_dimension_error(where, what_a, a, what_b, b);
}

/// Throws `dimension_error` "<where>: <what> is empty" (check_nonempty's throw, out of line).
[[noreturn]] inline void throw_empty(const char* where, const char* what) {
  raise<dimension_error>(std::string(where) + ": " + what + " is empty");
}

/// Throws `dimension_error` when `n` is zero. (The message is built out of line, in
/// throw_empty, so that the check itself inlines to a compare: built here, it made the check a
/// call that saved four registers whether it threw or not.)
constexpr void check_nonempty(const char* where, const char* what, std::size_t n) {
  if (n == 0) throw_empty(where, what);
}

/// Throws `dimension_error` "<where>: <what> is RxC but should be R'xC'" (check_shape's throw).
[[noreturn]] inline void throw_shape_error(const char* where, const char* what, std::size_t rows,
                                           std::size_t cols, std::size_t want_rows,
                                           std::size_t want_cols) {
  raise<dimension_error>(std::string(where) + ": " + what + " is " + std::to_string(rows) + "x" +
                         std::to_string(cols) + " but should be " + std::to_string(want_rows) +
                         "x" + std::to_string(want_cols));
}

/// Throws dimension_error unless `what` is want_rows × want_cols.
constexpr void check_shape(const char* where, const char* what, std::size_t rows, std::size_t cols,
                           std::size_t want_rows, std::size_t want_cols) {
  if (rows != want_rows || cols != want_cols)
    throw_shape_error(where, what, rows, cols, want_rows, want_cols);
}

/// Throws `dimension_error` "<where>: note index j is out of range for n notes" unless j < n.
[[noreturn]] inline void throw_index_error(const char* where, std::size_t j, std::size_t n) {
  raise<dimension_error>(std::string(where) + ": note index " + std::to_string(j) +
                         " is out of range for " + std::to_string(n) + " notes");
}

/// Throws dimension_error unless j < n (a note's index).
constexpr void check_index(const char* where, std::size_t j, std::size_t n) {
  if (j >= n) throw_index_error(where, j, n);
}

/// Throws overlap_error "<where>: <a> overlaps <b>" (the check's throw, out of line).
[[noreturn]] inline void throw_overlap(const char* where, const char* a, const char* b) {
  raise<overlap_error>(std::string(where) + ": " + a + " overlaps " + b);
}

/// A buffer of a call, its name as the messages give it and where its numbers lie.
template <class T>
struct named_region {
  const char* name;
  region<T> numbers;
};

/// The named buffers of a call, up to Capacity of them.
template <class T, std::size_t Capacity>
struct named_regions {
  named_region<T> at[Capacity]{};
  std::size_t count = 0;

  constexpr void add(const char* name, region<T> numbers) noexcept {
    at[count++] = {name, numbers};
  }
  [[nodiscard]] constexpr std::span<const named_region<T>> span() const noexcept {
    return {at, count};
  }
};

/// Throws overlap_error for the first output that overlaps an earlier output or an input,
/// naming both.
template <class T>
constexpr void check_outputs_apart(const char* where, std::span<const named_region<T>> outputs,
                                   std::span<const named_region<T>> inputs) {
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    const region<T>& out = outputs[o].numbers;
    for (std::size_t p = 0; p < o; ++p)
      if (overlaps(out, outputs[p].numbers)) throw_overlap(where, outputs[o].name, outputs[p].name);
    for (const named_region<T>& in : inputs)
      if (overlaps(out, in.numbers)) throw_overlap(where, outputs[o].name, in.name);
  }
}

}  // namespace detail
}  // namespace attn
