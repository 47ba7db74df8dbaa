#pragma once
/// \file attn/vector.hpp
/// `Vector<T, N>`: N numbers inline (fixed N) or on the heap (`N = dynamic`), and the
/// rules by which any contiguous range — std::vector, std::array, std::span, C arrays,
/// our own Vector — is borrowed as a `std::span` view without copying.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <array>
#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <ranges>
#include <span>
#include <type_traits>
#include <vector>

#include "attn/allocator.hpp"
#include "attn/error.hpp"
#include "attn/extent.hpp"

namespace attn {

/// The number types attn computes with: float, double and long double.
template <class T>
concept real = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, long double>;

namespace detail {
template <class R>
consteval std::size_t static_extent_of() {
  using U = std::remove_cvref_t<R>;
  if constexpr (requires { U::extent; })  // std::span<T, N>, attn::Vector<T, N>
    return U::extent;
  else if constexpr (std::is_bounded_array_v<U>)
    return std::extent_v<U>;
  else if constexpr (requires { std::tuple_size<U>::value; })  // std::array<T, N>
    return std::tuple_size<U>::value;
  else
    return dynamic;
}
}  // namespace detail

/// The size of a range known at compile time (`std::array`, C arrays, fixed spans and
/// Vectors), or `dynamic`.
template <class R>
inline constexpr std::size_t extent_of = detail::static_extent_of<R>();

namespace detail {
/// A random-access sized range with `data()`, a pointer to its numbers, whose iterators do not
/// say they are contiguous (Eigen's dense vectors: Eigen::VectorXf, a segment, a Map): a
/// vector_like too, its contiguity checked when it is borrowed (as_span).
template <class R>
concept data_range = std::ranges::random_access_range<R> && std::ranges::sized_range<R> &&
    requires(R& r) {
  requires std::is_pointer_v<decltype(r.data())>;
};

/// Throws dimension_error unless the numbers of r lie at data(), data() + 1, ... (an Eigen row of
/// a column-major matrix has data() but steps by its column length).
template <class R>
constexpr void check_contiguous(const R& r) {
  if (std::ranges::size(r) < 2) return;
  const auto* first = std::addressof(*std::ranges::begin(r));
  const auto* second = std::addressof(*(std::ranges::begin(r) + 1));
  if (first != std::ranges::data(r) || second != first + 1)
    raise<dimension_error>("attn: a vector whose numbers are not contiguous in memory (data()[1] "
                           "is not its second number): copy it into a contiguous vector");
}
}  // namespace detail

/// A contiguous, sized range of `real` numbers: what every attn algorithm takes as a vector
/// (and a random-access range with data(), such as Eigen::VectorXf, whose contiguity is checked
/// when it is borrowed).
template <class R>
concept vector_like =
    (std::ranges::contiguous_range<R> || detail::data_range<R>)&&std::ranges::sized_range<R>&& real<
        std::remove_cv_t<std::ranges::range_value_t<R>>>;

/// A `vector_like` range whose elements may be written.
template <class R>
concept mutable_vector_like =
    vector_like<R> && !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>;

/// The scalar type of a vector_like range (`float` for `const std::vector<float>&`).
template <vector_like R>
using scalar_of = std::remove_cv_t<std::ranges::range_value_t<R>>;

/// Borrows `r` as a read-only `std::span<const T, extent_of<R>>` (no copy). A range that is not
/// a std::ranges::contiguous_range (Eigen's) is checked first: dimension_error unless contiguous.
template <vector_like R>
[[nodiscard]] constexpr auto as_span(const R& r) noexcept(std::ranges::contiguous_range<R>) {
  if constexpr (!std::ranges::contiguous_range<R>) detail::check_contiguous(r);
  return std::span<const scalar_of<R>, extent_of<R>>(
      std::ranges::data(r), static_cast<std::size_t>(std::ranges::size(r)));
}

/// Borrows `r` as a writable `std::span<T, extent_of<R>>` (no copy); checked as by as_span.
template <mutable_vector_like R>
[[nodiscard]] constexpr auto as_mutable_span(R&& r) noexcept(std::ranges::contiguous_range<R>) {
  if constexpr (!std::ranges::contiguous_range<R>) detail::check_contiguous(r);
  return std::span<scalar_of<R>, extent_of<R>>(std::ranges::data(r),
                                               static_cast<std::size_t>(std::ranges::size(r)));
}

/// N numbers of type T: a `std::array` when N is fixed (no allocation, usable in constant
/// expressions), a `std::vector` aligned to `storage_alignment` (64 bytes) when
/// `N == dynamic`. Converts to `std::span<T, N>`.
template <class T, std::size_t N = dynamic>
class Vector {
  static_assert(real<T>, "attn::Vector holds float, double or long double");
  static_assert(N == dynamic || detail::fits_stack(N, sizeof(T)),
                "attn::Vector: a fixed size this large does not fit on the stack "
                "(ATTN_STACK_ALLOCATION_LIMIT, 128 KiB by default): use attn::dynamic");
  using storage_type =
      std::conditional_t<N == dynamic, std::vector<T, aligned_allocator<T>>, std::array<T, N>>;
  storage_type data_{};

public:
  using value_type = T;
  using size_type = std::size_t;
  using iterator = T*;
  using const_iterator = const T*;
  /// The size fixed at compile time, or `dynamic`.
  static constexpr std::size_t extent = N;

  /// Fixed: N zeros. Dynamic: empty.
  constexpr Vector() = default;

  /// Dynamic only: `n` copies of `value`.
  constexpr explicit Vector(std::size_t n, T value = T(0)) requires(N == dynamic)
      : data_(n, value) {}

  /// Fixed only: exactly N values, `Vector<double, 3>{0, 0.5, 2}`; a wrong count does not compile.
  template <class... U>
    requires(N != dynamic && sizeof...(U) == N && (std::convertible_to<U, T> && ...))
  constexpr Vector(U... values) noexcept : data_{static_cast<T>(values)...} {}  // NOLINT

  /// Dynamic only: the listed values, `Vector<double>{0, 0.5, 2}`.
  constexpr Vector(std::initializer_list<T> values) requires(N == dynamic) : data_(values) {}

  /// Copies any vector_like range; a size that disagrees with a fixed N throws dimension_error.
  template <vector_like R>
    requires(!std::same_as<std::remove_cvref_t<R>, Vector> && compatible_extents<N, extent_of<R>>)
  constexpr explicit Vector(const R& r) {
    const auto n = static_cast<std::size_t>(std::ranges::size(r));
    if constexpr (N == dynamic) {
      data_.resize(n);
    } else {
      detail::check_equal("attn::Vector", "source size", n, "fixed size", N);
    }
    auto out = data_.begin();
    for (const auto& x : r) *out++ = static_cast<T>(x);
  }

  [[nodiscard]] constexpr std::size_t size() const noexcept {
    if constexpr (N == dynamic)
      return data_.size();
    else
      return N;
  }
  [[nodiscard]] constexpr bool empty() const noexcept { return size() == 0; }
  [[nodiscard]] constexpr T* data() noexcept { return data_.data(); }
  [[nodiscard]] constexpr const T* data() const noexcept { return data_.data(); }
  [[nodiscard]] constexpr T& operator[](std::size_t i) noexcept { return data_[i]; }
  [[nodiscard]] constexpr const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  [[nodiscard]] constexpr T* begin() noexcept { return data(); }
  [[nodiscard]] constexpr T* end() noexcept { return data() + size(); }
  [[nodiscard]] constexpr const T* begin() const noexcept { return data(); }
  [[nodiscard]] constexpr const T* end() const noexcept { return data() + size(); }

  /// Fixed N: borrows the numbers as a `std::span<T, N>`. (A dynamic Vector needs no
  /// operator: std::span's implicit range constructor takes it, and a second path would draw
  /// -Wconversion warnings.)
  constexpr operator std::span<T, N>() noexcept requires(N != dynamic) {
    return std::span<T, N>(data(), size());
  }
  /// Fixed N: borrows the numbers read-only.
  constexpr operator std::span<const T, N>() const noexcept requires(N != dynamic) {
    return std::span<const T, N>(data(), size());
  }

  /// Element-wise equality (sizes must match too).
  [[nodiscard]] friend constexpr bool operator==(const Vector& a, const Vector& b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!(a[i] == b[i])) return false;
    return true;
  }
};

namespace detail {
/// A zero Vector of n numbers (fixed N: inline, no allocation).
template <class T, std::size_t N>
[[nodiscard]] constexpr Vector<T, N> zero_vector(std::size_t n) {
  if constexpr (N == dynamic)
    return Vector<T>(n);
  else
    return Vector<T, N>{};
}
}  // namespace detail

}  // namespace attn
