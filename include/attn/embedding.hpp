#pragma once
/// \file attn/embedding.hpp
/// Token embeddings (the unit's §10; NEXT_SECTIONS.md "Training"): row t of X is row y_t of the
/// table E (V × d), X_t = E[y_t], no √d scaling; the backward adds each row of ∂L/∂X to the
/// table's row of its token, ∂L/∂E[v] += Σ_{t : y_t = v} ∂L/∂X_t (a token seen twice gathers both
/// rows, in the order of the positions). Tokens are std::int64_t as PyTorch's indices; a token
/// outside [0, V) is a domain_error naming its position and value, before anything is written.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "attn/error.hpp"
#include "attn/matrix.hpp"
#include "attn/vector.hpp"

namespace attn {

namespace detail {

[[noreturn]] ATTN_NOINLINE inline void throw_bad_token(const char* where, std::size_t position, std::int64_t token,
                                                       std::size_t vocabulary) {
  raise<domain_error>(std::string(where) + ": token " + std::to_string(token) + " at position " +
                      std::to_string(position) + " is outside the vocabulary [0, " + std::to_string(vocabulary) +
                      ")");
}

/// Every token in [0, V), else domain_error naming the first one that is not.
inline void check_tokens(const char* where, std::span<const std::int64_t> tokens, std::size_t vocabulary) {
  for (std::size_t t = 0; t < tokens.size(); ++t)
    if (tokens[t] < 0 || static_cast<std::uint64_t>(tokens[t]) >= vocabulary)
      throw_bad_token(where, t, tokens[t], vocabulary);
}

}  // namespace detail

/// X_t = E[tokens[t]] for every t: X (tokens × d) from the table E (V × d). dimension_error for
/// X of another shape, domain_error for a token outside [0, V), overlap_error for X over E;
/// X untouched then.
template <matrix_like Em, mutable_matrix_like Xm>
  requires std::same_as<matrix_scalar_of<Em>, matrix_scalar_of<Xm>>
void embedding(const Em& E, std::span<const std::int64_t> tokens, Xm&& X) {
  using T = matrix_scalar_of<Xm>;
  const char* where = "attn::embedding";
  const auto ev = as_view(E);
  const MatrixView<const T> e = ev;
  const MatrixView<T> x = as_mutable_view(X);
  detail::check_shape(where, "X", x.rows(), x.cols(), tokens.size(), e.cols());
  detail::check_tokens(where, tokens, e.rows());
  if (detail::overlaps(detail::region_of(x), detail::region_of(e))) detail::throw_overlap(where, "X", "the table");
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const T* src = e.row(static_cast<std::size_t>(tokens[t])).data();
    T* dst = x.row(t).data();
    for (std::size_t i = 0; i < e.cols(); ++i) dst[i] = src[i];
  }
}

/// The backward of embedding: ∂L/∂E[tokens[t]] += ∂L/∂X_t for t = 0, 1, … in order, added to
/// what dE holds (a table's gradient accumulates; zero it first for a fresh one). Errors as
/// embedding (dE's shape is the table's: V × d, V its rows), dE untouched then.
template <matrix_like Gm, mutable_matrix_like Dm>
  requires std::same_as<matrix_scalar_of<Gm>, matrix_scalar_of<Dm>>
void embedding_backward(std::span<const std::int64_t> tokens, const Gm& dX, Dm&& dE) {
  using T = matrix_scalar_of<Dm>;
  const char* where = "attn::embedding_backward";
  const auto gv = as_view(dX);
  const MatrixView<const T> g = gv;
  const MatrixView<T> d = as_mutable_view(dE);
  detail::check_shape(where, "dL/dX", g.rows(), g.cols(), tokens.size(), d.cols());
  detail::check_tokens(where, tokens, d.rows());
  if (detail::overlaps(detail::region_of(d), detail::region_of(g))) detail::throw_overlap(where, "dL/dE", "dL/dX");
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const T* src = g.row(t).data();
    T* dst = d.row(static_cast<std::size_t>(tokens[t])).data();
    for (std::size_t i = 0; i < d.cols(); ++i) dst[i] += src[i];
  }
}

}  // namespace attn
