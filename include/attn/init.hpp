#pragma once
/// \file attn/init.hpp
/// A deterministic initialisation from a seed for the parameters of a linear layer, self-attention,
/// the feed-forward layer and the block, written into the caller's buffers (mutable views), with
/// PyTorch's default distributions (docs/block.md, "Initialisation from a seed"):
///
///   nn.Linear (W d_in × d_out, b):  W, b ~ U(−1/√d_in, 1/√d_in)  (kaiming_uniform_(a = √5));
///   nn.MultiheadAttention:          W_Q, W_K, W_V ~ U(−a, a), a = √(6/(d_in + 3·d_out)) when the
///                                   three have one shape (xavier_uniform_ on in_proj_weight,
///                                   3·d_out × d_in), else each √(6/(d_in + d_out)); b_Q, b_K,
///                                   b_V, b_O = 0; W_O as nn.Linear's weight;
///   nn.LayerNorm:                   γ = 1, β = 0.
///
/// The numbers come from `random_bits` (splitmix64, detail/random.hpp): the same seed gives the
/// same bits with every compiler and standard library, in every layout of the buffers (entry
/// (i, j) of a d_in × d_out weight is number i·d_out + j of its stream). They are not PyTorch's
/// numbers (PyTorch's generator is its own); the distributions are.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "attn/block.hpp"
#include "attn/detail/math.hpp"
#include "attn/detail/overlap.hpp"
#include "attn/detail/random.hpp"
#include "attn/error.hpp"
#include "attn/feed_forward.hpp"
#include "attn/heads.hpp"
#include "attn/linear.hpp"
#include "attn/matrix.hpp"
#include "attn/vector.hpp"

namespace attn {

/// Number n of stream `stream` of `seed`: the stream starts at S = mix(seed + (stream + 1)·γ)
/// (splitmix64's output number stream + 1 from seed), and number n is mix(S + (n + 1)·γ) (its
/// output number n + 1 from S). Integer arithmetic modulo 2⁶⁴: the same bits everywhere.
[[nodiscard]] constexpr std::uint64_t random_bits(std::uint64_t seed, std::uint64_t stream,
                                                  std::uint64_t n) noexcept {
  const std::uint64_t start = detail::splitmix64_mix(seed + (stream + 1) * detail::splitmix64_gamma);
  return detail::splitmix64_mix(start + (n + 1) * detail::splitmix64_gamma);
}

/// x = bound·(2u − 1) rounded to T, u = ⌊random_bits(seed, stream, n) / 2¹¹⌋·2⁻⁵³ ∈ [0, 1): uniform
/// on [−bound, bound) in double (2u − 1 is exact, one rounding of the product), then rounded to T.
template <real T>
[[nodiscard]] constexpr T random_uniform(double bound, std::uint64_t seed, std::uint64_t stream,
                                         std::uint64_t n) noexcept {
  // 2u − 1 = m·2⁻⁵³ with the integer m = 2k − 2⁵³ (|m| ≤ 2⁵³: exact as a double), so the product has
  // one rounding in any order the compiler picks (-ffast-math may reassociate: 2⁻⁵³ is exact)
  const auto m = static_cast<std::int64_t>(random_bits(seed, stream, n) >> 11) * 2 - (std::int64_t{1} << 53);
  return static_cast<T>(bound * (static_cast<double>(m) * 0x1p-53));
}

/// A linear layer's parameters as mutable views of the caller's buffers (linear_parameters
/// borrows them read-only: `parameters_of`).
template <real T>
struct linear_buffers {
  StridedMatrixView<T> W{};  ///< d_in × d_out, either layout (attn/linear.hpp)
  std::span<T> b{};          ///< d_out, or none
};

/// Self-attention's parameters as mutable views (multi_head_parameters's weights and biases).
template <real T>
struct multi_head_buffers {
  StridedMatrixView<T> W_Q{}, W_K{}, W_V{}, W_O{};  ///< as multi_head_parameters's; W_O or none
  std::span<T> b_Q{}, b_K{}, b_V{}, b_O{};          ///< each its weight's columns, or none
};

/// The feed-forward layer's parameters as mutable views.
template <real T>
struct feed_forward_buffers {
  StridedMatrixView<T> W_1{};  ///< d_model × d_ff
  std::span<T> b_1{};          ///< d_ff, or none
  StridedMatrixView<T> W_2{};  ///< d_ff × d_out
  std::span<T> b_2{};          ///< d_out, or none
};

/// A block's parameters as mutable views: what `initialize` fills and `parameters_of` lends to
/// block_parameters (read-only, the same numbers).
template <real T>
struct block_buffers {
  multi_head_buffers<T> attention{};  ///< W_Q, W_K, W_V, W_O and their biases
  feed_forward_buffers<T> ffn{};      ///< W₁, b₁, W₂, b₂
  std::span<T> gamma_1{}, beta_1{};   ///< the norm around attention (d_model each, or none)
  std::span<T> gamma_2{}, beta_2{};   ///< the norm around the feed-forward layer
  multi_head_buffers<T> cross_attention{};  ///< a decoder's block: cross-attention's, or none
  std::span<T> gamma_cross{}, beta_cross{};  ///< the norm around cross-attention, or none
};

namespace detail {

[[noreturn]] ATTN_NOINLINE inline void throw_bad_bound(const char* where) {
  raise<domain_error>(std::string(where) + ": the bound must be finite and at least 0");
}

[[noreturn]] ATTN_NOINLINE inline void throw_bias_without_weight(const char* where, const char* b, const char* W) {
  raise<dimension_error>(std::string(where) + ": " + b + " is given but " + W +
                         " is empty (a bias's bound is 1/sqrt of its weight's rows)");
}

template <class T>
void fill_uniform_matrix(StridedMatrixView<T> W, double bound, std::uint64_t seed, std::uint64_t stream) noexcept {
  const std::size_t cols = W.cols();
  for (std::size_t i = 0; i < W.rows(); ++i)
    for (std::size_t j = 0; j < cols; ++j) W(i, j) = random_uniform<T>(bound, seed, stream, i * cols + j);
}

template <class T>
void fill_uniform_span(std::span<T> v, double bound, std::uint64_t seed, std::uint64_t stream) noexcept {
  for (std::size_t n = 0; n < v.size(); ++n) v[n] = random_uniform<T>(bound, seed, stream, n);
}

template <class T>
void fill_constant(std::span<T> v, T value) noexcept {
  for (T& x : v) x = value;
}

/// nn.Linear's bound for a weight of `fan_in` rows: kaiming_uniform_(a = √5) gives
/// gain·√3/√fan_in with gain = √(2/(1 + a²)) = 1/√3, that is 1/√fan_in; its bias the same.
[[nodiscard]] inline double linear_bound(std::size_t fan_in) noexcept {
  return 1 / std::sqrt(static_cast<double>(fan_in));
}

/// xavier_uniform_'s bound, gain 1: √(6/(fan_in + fan_out)).
[[nodiscard]] inline double xavier_bound(std::size_t fan_in, std::size_t fan_out) noexcept {
  return std::sqrt(6 / static_cast<double>(fan_in + fan_out));
}

// The checks of each initialisation, before anything is written: a bias of its weight's columns
// (and a weight to take its bound from), writable layouts; every buffer's region for the
// overlap check.
// (names: the weight, the bias, "size of <bias>", "columns of <weight>")
template <class T, std::size_t N>
void check_weight_and_bias(const char* where, const char* const (&name)[4], StridedMatrixView<T> W,
                           std::span<T> b, named_regions<T, N>& out) {
  check_layout(where, name[0], W, true);
  if (!b.empty()) {
    if (W.rows() == 0 || W.cols() == 0) throw_bias_without_weight(where, name[1], name[0]);
    check_equal(where, name[2], b.size(), name[3], W.cols());
  }
  out.add(name[0], region_of(W));
  out.add(name[1], region_of(b));
}

template <class T, std::size_t N>
void check_buffers(const char* where, const linear_buffers<T>& p, named_regions<T, N>& out) {
  check_weight_and_bias(where, {"W", "b", "size of b", "columns of W"}, p.W, p.b, out);
}

template <class T, std::size_t N>
void check_buffers(const char* where, const multi_head_buffers<T>& p, named_regions<T, N>& out) {
  check_weight_and_bias(where, {"W_Q", "b_Q", "size of b_Q", "columns of W_Q"}, p.W_Q, p.b_Q, out);
  check_weight_and_bias(where, {"W_K", "b_K", "size of b_K", "columns of W_K"}, p.W_K, p.b_K, out);
  check_weight_and_bias(where, {"W_V", "b_V", "size of b_V", "columns of W_V"}, p.W_V, p.b_V, out);
  // (b_O is 0 whatever W_O is: PyTorch sets out_proj.bias to 0)
  check_layout(where, "W_O", p.W_O, true);
  if (!p.b_O.empty() && p.W_O.rows() != 0) check_equal(where, "size of b_O", p.b_O.size(), "columns of W_O", p.W_O.cols());
  out.add("W_O", region_of(p.W_O));
  out.add("b_O", region_of(p.b_O));
}

template <class T, std::size_t N>
void check_buffers(const char* where, const feed_forward_buffers<T>& p, named_regions<T, N>& out) {
  check_weight_and_bias(where, {"W_1", "b_1", "size of b_1", "columns of W_1"}, p.W_1, p.b_1, out);
  check_weight_and_bias(where, {"W_2", "b_2", "size of b_2", "columns of W_2"}, p.W_2, p.b_2, out);
}

template <class T, std::size_t N>
void check_buffers(const char* where, const block_buffers<T>& p, named_regions<T, N>& out) {
  check_buffers(where, p.attention, out);
  check_buffers(where, p.ffn, out);
  out.add("gamma_1", region_of(p.gamma_1));
  out.add("beta_1", region_of(p.beta_1));
  out.add("gamma_2", region_of(p.gamma_2));
  out.add("beta_2", region_of(p.beta_2));
  check_buffers(where, p.cross_attention, out);
  out.add("gamma_cross", region_of(p.gamma_cross));
  out.add("beta_cross", region_of(p.beta_cross));
}

template <class T>
void fill_buffers(const linear_buffers<T>& p, std::uint64_t seed, std::uint64_t stream) noexcept {
  if (p.W.rows() == 0) return;
  const double bound = linear_bound(p.W.rows());
  fill_uniform_matrix(p.W, bound, seed, stream);
  fill_uniform_span(p.b, bound, seed, stream + 1);
}

template <class T>
void fill_buffers(const multi_head_buffers<T>& p, std::uint64_t seed, std::uint64_t stream) noexcept {
  const bool stacked = p.W_K.rows() == p.W_Q.rows() && p.W_K.cols() == p.W_Q.cols() &&
                       p.W_V.rows() == p.W_Q.rows() && p.W_V.cols() == p.W_Q.cols();
  const StridedMatrixView<T>* w[3] = {&p.W_Q, &p.W_K, &p.W_V};
  for (std::uint64_t k = 0; k < 3; ++k) {
    const StridedMatrixView<T>& W = *w[k];
    if (W.rows() == 0 || W.cols() == 0) continue;
    const double bound = stacked ? xavier_bound(W.rows(), 3 * W.cols()) : xavier_bound(W.rows(), W.cols());
    fill_uniform_matrix(W, bound, seed, stream + k);
  }
  for (std::span<T> b : {p.b_Q, p.b_K, p.b_V, p.b_O}) fill_constant(b, T(0));
  fill_buffers(linear_buffers<T>{p.W_O, {}}, seed, stream + 3);
}

template <class T>
void fill_buffers(const feed_forward_buffers<T>& p, std::uint64_t seed, std::uint64_t stream) noexcept {
  fill_buffers(linear_buffers<T>{p.W_1, p.b_1}, seed, stream);
  fill_buffers(linear_buffers<T>{p.W_2, p.b_2}, seed, stream + 2);
}

template <class T>
void fill_buffers(const block_buffers<T>& p, std::uint64_t seed, std::uint64_t stream) noexcept {
  fill_buffers(p.attention, seed, stream);
  fill_buffers(p.ffn, seed, stream + 4);
  fill_constant(p.gamma_1, T(1));
  fill_constant(p.gamma_2, T(1));
  fill_constant(p.beta_1, T(0));
  fill_constant(p.beta_2, T(0));
  fill_buffers(p.cross_attention, seed, stream + 8);
  fill_constant(p.gamma_cross, T(1));
  fill_constant(p.beta_cross, T(0));
}

}  // namespace detail

/// Fills v (a span, std::vector, Eigen vector, …) with U(−bound, bound): v[n] =
/// random_uniform<T>(bound, seed, stream, n). domain_error unless bound is finite and ≥ 0
/// (nothing written then).
template <mutable_vector_like V>
void fill_uniform(V&& v, double bound, std::uint64_t seed, std::uint64_t stream = 0) {
  if (!(bound >= 0) || !detail::finite_as<double>(bound)) detail::throw_bad_bound("attn::fill_uniform");
  const auto s = as_mutable_span(v);
  detail::fill_uniform_span(std::span<scalar_of<V>>(s.data(), s.size()), bound, seed, stream);
}

/// Fills W (any layout) with U(−bound, bound): W(i, j) = random_uniform<T>(bound, seed, stream,
/// i·cols + j), the same numbers in every layout. domain_error for a bound not finite or < 0,
/// dimension_error for rows that overlap; nothing written then.
template <real T>
void fill_uniform(StridedMatrixView<T> W, double bound, std::uint64_t seed, std::uint64_t stream = 0) {
  const char* where = "attn::fill_uniform";
  if (!(bound >= 0) || !detail::finite_as<double>(bound)) detail::throw_bad_bound(where);
  detail::check_layout(where, "W", W, true);
  detail::fill_uniform_matrix(W, bound, seed, stream);
}

/// As above, for a row-major view.
template <real T>
void fill_uniform(MatrixView<T> W, double bound, std::uint64_t seed, std::uint64_t stream = 0) {
  fill_uniform(StridedMatrixView<T>(W), bound, seed, stream);
}

/// Fills a linear layer's, self-attention's, the feed-forward layer's or a block's buffers with
/// PyTorch's default initialisation (the file comment) from `seed`, every random parameter a
/// stream of its own from `first_stream` on: linear W, b: +0, +1; self-attention W_Q, W_K, W_V,
/// W_O: +0 … +3; feed-forward W₁, b₁, W₂, b₂: +0 … +3; a block: attention's from +0, the
/// feed-forward layer's from +4, cross-attention's (a decoder's block) from +8. Empty views are left alone. dimension_error for a bias that is
/// not its weight's columns or has no weight, a weight whose rows overlap; overlap_error for two
/// buffers over the same numbers; nothing written then. Allocates nothing.
template <real T>
void initialize(const linear_buffers<T>& p, std::uint64_t seed, std::uint64_t first_stream = 0) {
  detail::named_regions<T, 2> out;
  detail::check_buffers("attn::initialize", p, out);
  detail::check_outputs_apart<T>("attn::initialize", out.span(), {});
  detail::fill_buffers(p, seed, first_stream);
}

/// As above, for self-attention's buffers.
template <real T>
void initialize(const multi_head_buffers<T>& p, std::uint64_t seed, std::uint64_t first_stream = 0) {
  detail::named_regions<T, 8> out;
  detail::check_buffers("attn::initialize", p, out);
  detail::check_outputs_apart<T>("attn::initialize", out.span(), {});
  detail::fill_buffers(p, seed, first_stream);
}

/// As above, for the feed-forward layer's buffers.
template <real T>
void initialize(const feed_forward_buffers<T>& p, std::uint64_t seed, std::uint64_t first_stream = 0) {
  detail::named_regions<T, 4> out;
  detail::check_buffers("attn::initialize", p, out);
  detail::check_outputs_apart<T>("attn::initialize", out.span(), {});
  detail::fill_buffers(p, seed, first_stream);
}

/// As above, for a block's buffers (γ = 1, β = 0).
template <real T>
void initialize(const block_buffers<T>& p, std::uint64_t seed, std::uint64_t first_stream = 0) {
  detail::named_regions<T, 26> out;
  detail::check_buffers("attn::initialize", p, out);
  detail::check_outputs_apart<T>("attn::initialize", out.span(), {});
  detail::fill_buffers(p, seed, first_stream);
}

/// The read-only parameters over a linear layer's buffers (the same numbers, no copy).
template <real T>
[[nodiscard]] linear_parameters<T> parameters_of(const linear_buffers<T>& b) noexcept {
  return {.W = b.W, .b = b.b};
}

/// Self-attention's parameters over its buffers; heads, kv_heads, score and positions from `like`.
template <real T>
[[nodiscard]] multi_head_parameters<T> parameters_of(const multi_head_buffers<T>& b,
                                                     multi_head_parameters<T> like = {}) {
  like.W_Q = b.W_Q;
  like.W_K = b.W_K;
  like.W_V = b.W_V;
  like.W_O = b.W_O;
  like.b_Q = b.b_Q;
  like.b_K = b.b_K;
  like.b_V = b.b_V;
  like.b_O = b.b_O;
  return like;
}

/// The feed-forward layer's parameters over its buffers; the activation from `like`.
template <real T>
[[nodiscard]] feed_forward_parameters<T> parameters_of(const feed_forward_buffers<T>& b,
                                                       feed_forward_parameters<T> like = {}) noexcept {
  like.W_1 = b.W_1;
  like.b_1 = b.b_1;
  like.W_2 = b.W_2;
  like.b_2 = b.b_2;
  return like;
}

/// A block's parameters over its buffers; heads, score, positions, the activation, the norms' ε
/// and kind and the placement from `like`.
template <real T>
[[nodiscard]] block_parameters<T> parameters_of(const block_buffers<T>& b, block_parameters<T> like = {}) {
  like.attention = parameters_of(b.attention, like.attention);
  like.ffn = parameters_of(b.ffn, like.ffn);
  like.norm_1.gamma = b.gamma_1;
  like.norm_1.beta = b.beta_1;
  like.norm_2.gamma = b.gamma_2;
  like.norm_2.beta = b.beta_2;
  if (b.cross_attention.W_Q.rows() != 0) {
    like.cross_attention = parameters_of(b.cross_attention, like.cross_attention);
    like.norm_cross.gamma = b.gamma_cross;
    like.norm_cross.beta = b.beta_cross;
  }
  return like;
}

}  // namespace attn
