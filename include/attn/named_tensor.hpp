#pragma once
/// \file attn/named_tensor.hpp
/// A named view of the caller's numbers with a shape: what a model lists its parameters as, and
/// what attn/safetensors.hpp saves and loads. Light (<span>, <string>, <vector>): attn/attn.hpp
/// includes it, so that a model can hand out its list without <filesystem> and <fstream>.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace attn {

/// One tensor — a model's parameter, a file's tensor: its name, its shape (row-major; {} is a
/// scalar, one number) and the caller's numbers, product(shape) of them. T is float or double,
/// const where it is only read (a save).
template <class T>
struct named_tensor {
  using value_type = T;  ///< float or double, const for a save
  std::string name;
  std::vector<std::size_t> shape;
  std::span<T> data;
};

namespace detail {
template <class>
inline constexpr bool is_named_tensor = false;
template <class T>
inline constexpr bool is_named_tensor<named_tensor<T>> = true;
}  // namespace detail

/// A contiguous range of named tensors of float or double (const or not): a std::vector, a
/// std::array, a std::span of `named_tensor<T>`.
template <class R>
concept named_tensor_list =
    std::ranges::contiguous_range<const R> && std::ranges::sized_range<const R> &&
    detail::is_named_tensor<std::ranges::range_value_t<const R>> &&
    (std::is_same_v<std::remove_const_t<typename std::ranges::range_value_t<const R>::value_type>, float> ||
     std::is_same_v<std::remove_const_t<typename std::ranges::range_value_t<const R>::value_type>, double>);

}  // namespace attn
