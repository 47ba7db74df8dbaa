#pragma once
/// \file attn/logit_bias.hpp
/// An additive bias on attention's logits, Z = β·S + B + A: B a T × n matrix of the caller's
/// (PyTorch's float attn_mask, added after the scale and β), A ALiBi's −m·(p_t − j) with p_t =
/// t + n − T the query's position (the queries are the last T of n positions, as with a cache),
/// computed where it is used (no T × n of it stored). The softmax then runs on Z, the masks
/// after it (a masked entry is −inf whatever the bias holds). The scores S stay those before β
/// and the bias. Non-finite entries follow softmax's rules on Z: −inf takes a key out (weight 0,
/// no gradient), +inf makes the row's weights stop moving (that key's share is the row's), NaN
/// makes the row NaN. Rounding (detail/bias.hpp): z = fl(fl(fl(β·s) + b) + fl(−m·(p_t − j))),
/// the same bits in the forward, its exact rows and the backward. The logits are formed in T (as
/// PyTorch forms them): a finite score whose β·s overflows T makes z ±inf, where softmax without a
/// bias takes it as in exact arithmetic (docs/softmax.md).
///
/// The backward gives ∂L/∂Z (attention_gradients::bias), which is ∂L/∂B for the matrix (and the
/// gradient of any additive bias at this point): P ⊙ (dP − D), masked entries 0.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <string>

#include "attn/detail/bias.hpp"
#include "attn/detail/reduce.hpp"
#include "attn/error.hpp"
#include "attn/matrix.hpp"
#include "attn/positions.hpp"

namespace attn {

/// A bias on the logits of T queries over n keys: a matrix, ALiBi's slope, both, or neither.
template <real T>
struct logit_bias {
  MatrixView<const T> matrix{};  ///< B (T × n), added to row t's logits; no rows: none
  T alibi_slope = T(0);          ///< m of −m·(p_t − j) (alibi_slopes gives a head's); 0: none
};

namespace detail {

[[noreturn]] ATTN_NOINLINE inline void throw_slope_not_finite(const char* where) {
  raise<domain_error>(std::string(where) + ": the ALiBi slope must be finite");
}

/// The bias as the kernels read it, checked: the matrix T × n (dimension_error naming "the
/// bias"), a finite slope (domain_error), and with a slope T ≤ n (the queries are the last
/// positions: dimension_error).
template <real T>
[[nodiscard]] constexpr tile_bias<T> tile_bias_of(const char* where, const logit_bias<T>& bias,
                                                  std::size_t tq, std::size_t n) {
  tile_bias<T> b;
  if (bias.matrix.rows() != 0) {
    check_shape(where, "the bias", bias.matrix.rows(), bias.matrix.cols(), tq, n);
    b.matrix = bias.matrix.data();
    b.stride = bias.matrix.row_stride();
  }
  if (bias.alibi_slope != T(0)) {
    if (!all_finite(&bias.alibi_slope, 1)) throw_slope_not_finite(where);
    if (tq > n) throw_more_queries_than_keys(where, tq, n);
    b.slope = bias.alibi_slope;
    b.offset = n - tq;
  }
  return b;
}

}  // namespace detail
}  // namespace attn
