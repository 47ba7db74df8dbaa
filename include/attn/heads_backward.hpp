#pragma once
/// \file attn/heads_backward.hpp
/// Backward through attention with projections and heads (attn/heads.hpp), closed-form, from
/// dY = ∂L/∂Y and the forward's cache:
///
///   ∂L/∂Z = dY W_Oᵀ,  ∂L/∂W_O = Zᵀ dY,  ∂L/∂b_O = Σ_t dY_t;
///   each head: ∂L/∂Q_i, ∂L/∂K_i, ∂L/∂V_i by the attention backward (attn/sdpa_backward.hpp);
///   ∂L/∂W_Q = Xᵀ ∂L/∂Q,  ∂L/∂b_Q = Σ_t ∂L/∂Q_t,  ∂L/∂X = ∂L/∂Q W_Qᵀ (and likewise K and V, into
///   ∂L/∂X_kv; for self-attention all three into ∂L/∂X).
///
/// Every gradient may be left out (a view with no entries), and each is overwritten or, with
/// `accumulate`, added to (training sums over a batch).

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cmath>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "attn/detail/products.hpp"
#include "attn/detail/threads.hpp"
#include "attn/heads.hpp"
#include "attn/sdpa_backward.hpp"

namespace attn {

/// Where the backward of multi_head_attention writes: views of the caller's memory shaped like
/// what they are the gradients of; each left out when empty, overwritten or (accumulate) added to.
/// A weight's gradient is written in its own view's layout (rows, or columns: give it the layout
/// of its W, PyTorch's out × in as `transposed(…)`, a column-major Eigen matrix).
template <real T>
struct multi_head_gradients {
  MatrixView<T> inputs{};     ///< ∂L/∂X (self-attention: through Q, K and V)
  MatrixView<T> kv_inputs{};  ///< ∂L/∂X_kv (cross-attention only)
  StridedMatrixView<T> W_Q{}, W_K{}, W_V{}, W_O{};  ///< ∂L/∂W
  std::span<T> b_Q{}, b_K{}, b_V{}, b_O{};   ///< ∂L/∂b
  bool accumulate = false;                   ///< add to what the views hold
  /// ∂L/∂bias (multi_head_parameters::bias), T × n (summed over heads and sentences) or h·B·T × n
  /// (each head's and sentence's ∂L/∂Z, as the maps); a bias need not be given (the gradient of
  /// one at zero).
  MatrixView<T> bias{};
};

namespace detail {

[[noreturn]] ATTN_NOINLINE inline void throw_jacobian_positions(const char* where) {
  raise<domain_error>(std::string(where) +
                      ": rotary positions are not in its formula (give the rotated Q and K to the one-head "
                      "Jacobians instead)");
}

template <real T>
void check_head_gradients(const char* where, const head_sizes& s, const multi_head_parameters<T>& p,
                          const multi_head_gradients<T>& g, bool self) {
  const auto shape = [&](const char* what, StridedMatrixView<T> m, StridedMatrixView<const T> like) {
    if (m.rows() == 0) return;
    check_shape(where, what, m.rows(), m.cols(), like.rows(), like.cols());
    check_layout(where, what, m, true);
  };
  if (g.inputs.rows() != 0)
    check_shape(where, "dL/dX", g.inputs.rows(), g.inputs.cols(), s.rows, s.d_model);
  if (g.kv_inputs.rows() != 0) {
    if (self)
      attn::detail::raise<dimension_error>(
          std::string(where) +
          ": dL/dX_kv is for cross-attention; self-attention's is all in dL/dX");
    check_shape(where, "dL/dX_kv", g.kv_inputs.rows(), g.kv_inputs.cols(), s.kv_rows, s.d_kv);
  }
  shape("dL/dW_Q", g.W_Q, p.W_Q);
  shape("dL/dW_K", g.W_K, p.W_K);
  shape("dL/dW_V", g.W_V, p.W_V);
  if (g.W_O.rows() != 0) {
    if (p.W_O.rows() == 0)
      attn::detail::raise<dimension_error>(std::string(where) + ": dL/dW_O given but no W_O");
    shape("dL/dW_O", g.W_O, p.W_O);
  }
  const auto size = [&](const char* what, std::span<T> b, std::size_t want) {
    if (!b.empty()) check_equal(where, what, b.size(), "its parameter's size", want);
  };
  size("size of dL/db_Q", g.b_Q, p.W_Q.cols());
  size("size of dL/db_K", g.b_K, p.W_K.cols());
  size("size of dL/db_V", g.b_V, p.W_V.cols());
  size("size of dL/db_O", g.b_O, s.d_out);
  if (g.bias.rows() != 0) check_bias_shape(where, "dL/dbias", g.bias.rows(), g.bias.cols(), s);
}

/// Rows [first, first + count) of a weight's gradient, in its layout.
template <class T>
[[nodiscard]] constexpr StridedMatrixView<T> weight_rows(StridedMatrixView<T> dW, std::size_t first,
                                                        std::size_t count) noexcept {
  return StridedMatrixView<T>(dW.data() + first * dW.row_stride(), count, dW.cols(),
                              dW.row_stride(), dW.col_stride());
}

/// projection_backward's products split into `pieces` pieces: piece k < pieces writes its rows
/// of ∂L/∂W (∂L/∂W's row i is column i of `in` against dP), piece pieces + k its rows of ∂L/∂in.
/// ∂L/∂b is the caller's (a sum over every row). Each number is computed as in one piece: the
/// caller says whether all of `in` is finite (`in_finite`), so that every piece takes the path
/// the whole would (gemm, or the row kernels that skip dP's zeros).
template <real T>
void projection_backward_piece(std::size_t k, std::size_t pieces, MatrixView<const T> in,
                               StridedMatrixView<const T> W, MatrixView<const T> dP,
                               StridedMatrixView<T> dW, MatrixView<T> d_in, bool accumulate,
                               bool accumulate_input, bool in_finite) {
  if (k < pieces) {
    if (dW.rows() == 0) return;
    const std::size_t c0 = dW.rows() * k / pieces, c1 = dW.rows() * (k + 1) / pieces;
    multiply_first_transposed(tile_of_const(block_of(in, 0, in.rows(), c0, c1 - c0)),
                              tile_of_const(dP), stored_of(weight_rows(dW, c0, c1 - c0)), accumulate,
                              in_finite);
  } else if (d_in.rows() != 0) {
    multiply_transposed(tile_of_const(piece_of_rows(dP, k - pieces, pieces)), stored_of(W),
                        tile_of(piece_of_rows(d_in, k - pieces, pieces)), accumulate_input);
  }
}

/// Unit g·B + b of the heads' backward: the query heads that read key/value head g, in order,
/// on sentence b, into the cache's ∂L/∂Q, ∂L/∂K and ∂L/∂V (added to: multi_head_backward_of
/// zeroes them; a key/value head's gradients sum over its query heads). Units write disjoint
/// gradients, so they may run on any thread.
template <real T, class S>
void heads_backward_unit(const char* where, std::size_t unit, MatrixView<const T> Z,
                         MatrixView<const T> dZ, multi_head_cache<T>& cache, const head_sizes& s,
                         const S& score, const options& opt, const multi_head_parameters<T>& p,
                         bool bias_gradient) {
  const std::size_t g = unit / s.batch, b = unit % s.batch;
  const MatrixView<const T> Q = cache.queries.view(), K = cache.keys.view(), V = cache.values.view();
  const MatrixView<T> dQ = cache.grad_queries.view(), dK = cache.grad_keys.view(),
                      dV = cache.grad_values.view();
  const options sentence = sentence_options(opt, s, b);
  for (std::size_t i = g * s.group; i < (g + 1) * s.group; ++i) {
    const saved_attention<T> saved{block_of(Z, b * s.tq, s.tq, i * s.dv, s.dv),
                                   std::span<const T>(cache.logsumexp.row(i * s.batch + b))};
    sdpa_backward_views<T>(where, block_of(Q, b * s.tq, s.tq, i * s.dk, s.dk),
                           block_of(K, b * s.n, s.n, g * s.dk, s.dk),
                           block_of(V, b * s.n, s.n, g * s.dv, s.dv), score, saved,
                           block_of(dZ, b * s.tq, s.tq, i * s.dv, s.dv),
                           attention_gradients<T>{
                               block_of(dQ, b * s.tq, s.tq, i * s.dk, s.dk),
                               block_of(dK, b * s.n, s.n, g * s.dk, s.dk),
                               block_of(dV, b * s.n, s.n, g * s.dv, s.dv), true, {},
                               bias_gradient
                                   ? block_of(cache.grad_bias.view(), (i * s.batch + b) * s.tq, s.tq, 0, s.n)
                                   : MatrixView<T>{}},
                           sentence, 1, head_bias(p, s, i, b));
  }
}

/// ∂L/∂bias from the heads' ∂L/∂Z in the cache (h·B·T × n): copied or added as it is, or (a
/// shared T × n) summed over the heads and sentences in order (i, then b), whatever the threads.
template <real T>
void bias_gradient_of(const multi_head_cache<T>& cache, const multi_head_gradients<T>& g,
                      const head_sizes& s) {
  if (g.bias.rows() == 0) return;
  const std::size_t per_head = g.bias.rows() == s.tq && s.heads * s.rows != s.tq ? 0 : 1;
  for (std::size_t r = 0; r < g.bias.rows(); ++r) {
    T* const out = g.bias.row(r).data();
    if (per_head != 0) {
      const T* const from = cache.grad_bias.row(r).data();
      if (g.accumulate)
        axpy(T(1), from, out, s.n);
      else
        copy_numbers(from, out, s.n);
      continue;
    }
    if (!g.accumulate) fill(out, s.n, T(0));
    for (std::size_t unit = 0; unit < s.heads * s.batch; ++unit)
      axpy(T(1), cache.grad_bias.row(unit * s.tq + r).data(), out, s.n);
  }
}

/// The backward's steps on one thread, sizes checked and the cache's gradients shaped: ∂L/∂Z
/// (into the cache), every head's attention backward (into the cache), then the caller's
/// gradients: ∂L/∂W_O, ∂L/∂b_O, the input projections. Whatever may throw or allocate (a row
/// that takes the exact path) comes before the first of the caller's numbers is written.
template <real T>
void multi_head_backward_steps(const char* where, MatrixView<const T> X, MatrixView<const T> X_kv,
                               bool self, const multi_head_parameters<T>& p,
                               multi_head_cache<T>& cache, MatrixView<const T> dY,
                               const multi_head_gradients<T>& g, const options& opt,
                               const head_sizes& s) {
  // ∂L/∂Z = dY W_Oᵀ, into the cache
  const MatrixView<const T> Z = cache.heads_out.view();
  MatrixView<const T> dZ = dY;
  if (p.W_O.rows() != 0) {
    multiply_transposed(tile_of_const(dY), stored_of(p.W_O), tile_of(cache.grad_heads_out.view()),
                        false);
    dZ = cache.grad_heads_out.view();
  }
  // every head's attention backward, into the cache's ∂L/∂Q, ∂L/∂K, ∂L/∂V
  const MatrixView<T> dQ = cache.grad_queries.view(), dK = cache.grad_keys.view(),
                      dV = cache.grad_values.view();
  with_head_score(p, [&](const auto& score) {
    for (std::size_t unit = 0; unit < s.kv_heads * s.batch; ++unit)
      heads_backward_unit<T>(where, unit, Z, dZ, cache, s, score, opt, p, g.bias.rows() != 0);
  });
  bias_gradient_of<T>(cache, g, s);
  rotate_heads<T>(where, p, s, dQ, dK, true);  // RoPE's backward: the inverse turn
  // the output projection's gradients
  if (p.W_O.rows() != 0 && g.W_O.rows() != 0)
    multiply_first_transposed(tile_of_const(Z), tile_of_const(dY), stored_of(g.W_O), g.accumulate);
  if (!g.b_O.empty()) sum_rows(tile_of_const(dY), g.b_O.data(), g.accumulate);
  // the input projections
  const MatrixView<T> d_kv = self ? g.inputs : g.kv_inputs;
  projection_backward<T>(X, p.W_Q, dQ, g.W_Q, g.b_Q, g.inputs, g.accumulate, g.accumulate);
  projection_backward<T>(X_kv, p.W_K, dK, g.W_K, g.b_K, d_kv, g.accumulate, g.accumulate || self);
  projection_backward<T>(X_kv, p.W_V, dV, g.W_V, g.b_V, d_kv, g.accumulate, true);
  (void)d_kv;
}

/// multi_head_backward_steps on `threads` threads: the output projection's products in pieces of
/// rows, every head of every sentence as one item (∂L/∂K and ∂L/∂V sum over all its query rows,
/// so a head is not cut), the input projections' products in pieces of rows; the bias sums on
/// the calling thread. Every number is the one-thread one.
template <real T>
void multi_head_backward_on_threads(const char* where, MatrixView<const T> X,
                                    MatrixView<const T> X_kv, bool self,
                                    const multi_head_parameters<T>& p, multi_head_cache<T>& cache,
                                    MatrixView<const T> dY, const multi_head_gradients<T>& g,
                                    const options& opt, const head_sizes& s, std::size_t threads) {
  const std::size_t pieces = 4 * threads;
  const MatrixView<const T> Z = cache.heads_out.view();
  MatrixView<const T> dZ = dY;
  if (p.W_O.rows() != 0) {
    const MatrixView<T> dZ_out = cache.grad_heads_out.view();
    const StridedMatrixView<T> dWO = g.W_O;
    const bool z_finite = dWO.rows() != 0 && tile_finite(tile_of_const(Z));  // (every piece: Z's path)
    split_over_threads(2 * pieces, threads, [&](std::size_t k) {
      if (k < pieces) {
        multiply_transposed(tile_of_const(piece_of_rows(dY, k, pieces)), stored_of(p.W_O),
                            tile_of(piece_of_rows(dZ_out, k, pieces)), false);
      } else if (dWO.rows() != 0) {
        const std::size_t c0 = dWO.rows() * (k - pieces) / pieces,
                          c1 = dWO.rows() * (k - pieces + 1) / pieces;
        multiply_first_transposed(tile_of_const(block_of(Z, 0, Z.rows(), c0, c1 - c0)),
                                  tile_of_const(dY), stored_of(weight_rows(dWO, c0, c1 - c0)),
                                  g.accumulate, z_finite);
      }
    });
    dZ = cache.grad_heads_out.view();
  }
  if (!g.b_O.empty()) sum_rows(tile_of_const(dY), g.b_O.data(), g.accumulate);
  const MatrixView<T> dQ = cache.grad_queries.view(), dK = cache.grad_keys.view(),
                      dV = cache.grad_values.view();
  with_head_score(p, [&](const auto& score) {
    split_over_threads(s.kv_heads * s.batch, threads, [&](std::size_t unit) {
      heads_backward_unit<T>(where, unit, Z, dZ, cache, s, score, opt, p, g.bias.rows() != 0);
    });
  });
  bias_gradient_of<T>(cache, g, s);
  rotate_heads<T>(where, p, s, dQ, dK, true);  // RoPE's backward: the inverse turn
  const MatrixView<const T> cdQ = dQ, cdK = dK, cdV = dV;
  const MatrixView<T> d_kv = self ? g.inputs : g.kv_inputs;
  const bool acc = g.accumulate;
  // items: ∂L/∂W_Q, ∂L/∂W_K, ∂L/∂W_V in pieces of rows, then ∂L/∂X (and ∂L/∂X_kv) in pieces of
  // rows, each row's sum of paths in the one-thread order (Q, then K, then V)
  const bool x_finite = tile_finite(tile_of_const(X)), xkv_finite = self ? x_finite : tile_finite(tile_of_const(X_kv));
  split_over_threads(4 * pieces + (self ? 0 : pieces), threads, [&](std::size_t k) {
    const std::size_t part = k % pieces;
    switch (k / pieces) {
      case 0: projection_backward_piece<T>(part, pieces, X, p.W_Q, cdQ, g.W_Q, {}, acc, acc, x_finite); break;
      case 1: projection_backward_piece<T>(part, pieces, X_kv, p.W_K, cdK, g.W_K, {}, acc, acc, xkv_finite); break;
      case 2: projection_backward_piece<T>(part, pieces, X_kv, p.W_V, cdV, g.W_V, {}, acc, acc, xkv_finite); break;
      case 3:
        projection_backward_piece<T>(pieces + part, pieces, X, p.W_Q, cdQ, {}, g.inputs, acc, acc, x_finite);
        if (self) {
          projection_backward_piece<T>(pieces + part, pieces, X, p.W_K, cdK, {}, d_kv, acc, true, x_finite);
          projection_backward_piece<T>(pieces + part, pieces, X, p.W_V, cdV, {}, d_kv, acc, true, x_finite);
        }
        break;
      default:
        projection_backward_piece<T>(pieces + part, pieces, X_kv, p.W_K, cdK, {}, d_kv, acc, acc, xkv_finite);
        projection_backward_piece<T>(pieces + part, pieces, X_kv, p.W_V, cdV, {}, d_kv, acc, true, xkv_finite);
    }
  });
  if (!g.b_Q.empty()) sum_rows(tile_of_const(cdQ), g.b_Q.data(), acc);
  if (!g.b_K.empty()) sum_rows(tile_of_const(cdK), g.b_K.data(), acc);
  if (!g.b_V.empty()) sum_rows(tile_of_const(cdV), g.b_V.data(), acc);
}

/// Refuses a cache that holds no forward, or a forward of another batch (dimension_error).
inline void check_forward_batch(const char* where, const multi_head_record& forward, std::size_t batch) {
  if (!forward.valid)
    attn::detail::raise<forward_mismatch_error>(
        std::string(where) + ": the cache holds no forward (run multi_head_attention with it first)");
  if (forward.batch != batch)
    attn::detail::raise<dimension_error>(std::string(where) + ": the batch is " + std::to_string(batch) +
                                         " sentences but the forward's was " +
                                         std::to_string(forward.batch));
}

/// Refuses a backward whose options, inputs or parameters are not those of the forward the cache
/// holds (forward_mismatch_error naming the first that differs).
template <real T>
void check_same_forward(const char* where, const multi_head_record& forward, MatrixView<const T> X,
                        MatrixView<const T> X_kv, const multi_head_parameters<T>& p,
                        const options& opt, std::size_t batch) {
  const multi_head_record now = record_of<T>(X, X_kv, p, opt, batch);
  const auto differs = [&](const std::string& what) {
    attn::detail::raise<forward_mismatch_error>(
        std::string(where) + ": " + what +
        " (the backward must be given its forward's inputs, parameters and options)");
  };
  const auto on_off = [](bool b) { return std::string(b ? "on" : "off"); };
  if (now.causal != forward.causal)
    differs("causal is " + on_off(now.causal) + " but the forward's was " + on_off(forward.causal));
  if (now.key_mask != forward.key_mask) differs("the key mask is not the forward's");
  if (now.row_mask != forward.row_mask) differs("the row mask is not the forward's");
  if (now.beta != forward.beta)
    differs("beta is " + std::to_string(now.beta) + " but the forward's was " + std::to_string(forward.beta));
  if (now.policy != forward.policy && now.policy != all_masked_policy::throw_error &&
      forward.policy != all_masked_policy::throw_error)  // (throw_error: no row is all masked)
    differs("the all-masked policy is not the forward's");
  if (now.score != forward.score)
    differs("the scale is not the forward's");
  if (now.rotary != forward.rotary || now.rotary_pairs != forward.rotary_pairs || now.rotary_base != forward.rotary_base)
    differs("the rotary positions are not the forward's");
  if (now.alibi != forward.alibi)
    differs("ALiBi is " + on_off(now.alibi) + " but the forward's was " + on_off(forward.alibi));
  if (now.bias != forward.bias) differs("the bias holds other numbers than the forward's");
  static constexpr const char* names[10] = {"X", "X_kv", "W_Q", "W_K", "W_V",
                                            "W_O", "b_Q", "b_K", "b_V", "b_O"};
  for (std::size_t i = 0; i < 10; ++i)
    if (now.inputs[i] != forward.inputs[i])
      differs(std::string(names[i]) + " holds other numbers than the forward's");
}

/// Throws dimension_error "<where>: the cache's <name> is RxC but should be R'xC' (…)" unless
/// the cache's matrix m has the shape the forward of these inputs gives it.
template <real T>
void check_cached(const char* where, const char* name, const Matrix<T>& m, std::size_t rows,
                  std::size_t cols) {
  if (m.rows() != rows || m.cols() != cols)
    attn::detail::raise<dimension_error>(
        std::string(where) + ": the cache's " + name + " is " + std::to_string(m.rows()) + "x" +
        std::to_string(m.cols()) + " but should be " + std::to_string(rows) + "x" +
        std::to_string(cols) + " (it does not hold a forward of these shapes: run "
        "multi_head_attention with it first)");
}

template <real T>
void multi_head_backward_of(const char* where, MatrixView<const T> X, MatrixView<const T> X_kv,
                            bool self, const multi_head_parameters<T>& p,
                            multi_head_cache<T>& cache, MatrixView<const T> dY,
                            const multi_head_gradients<T>& g, const options& opt,
                            std::size_t batch, std::size_t threads = 1) {
  threads = usable_threads(threads);  // (any count: at most the machine's)
  const head_sizes s = check_heads<T>(where, X, X_kv, p, batch, opt);
  check_shape(where, "dL/dY", dY.rows(), dY.cols(), s.rows, s.d_out);
  check_head_gradients<T>(where, s, p, g, self);
  check_forward_batch(where, cache.forward, batch);
  check_cached(where, "queries", cache.queries, s.rows, s.heads * s.dk);
  check_cached(where, "keys", cache.keys, s.kv_rows, s.kv_heads * s.dk);
  check_cached(where, "values", cache.values, s.kv_rows, s.kv_heads * s.dv);
  check_cached(where, "heads_out", cache.heads_out, s.rows, s.heads * s.dv);
  check_cached(where, "logsumexp", cache.logsumexp, s.heads * s.batch, s.tq);
  check_same_forward<T>(where, cache.forward, X, X_kv, p, opt, batch);
  named_regions<T, 17> inputs;
  add_head_inputs(inputs, X, X_kv, p);
  inputs.add("dL/dY", region_of(dY));
  add_forward_cache(inputs, cache);
  named_regions<T, 16> outputs;
  outputs.add("dL/dX", region_of(g.inputs));
  outputs.add("dL/dX_kv", region_of(g.kv_inputs));
  outputs.add("dL/dbias", region_of(g.bias));
  add_weights(outputs, g,
              {"dL/dW_Q", "dL/dW_K", "dL/dW_V", "dL/dW_O", "dL/db_Q", "dL/db_K", "dL/db_V", "dL/db_O"});
  for (Matrix<T>* m : {&cache.grad_queries, &cache.grad_keys, &cache.grad_values,
                       &cache.grad_heads_out, &cache.grad_bias})
    outputs.add("the cache", region_of(m->view()));
  check_buffers_apart<T>(where, outputs.span(), inputs.span(), opt);
  if (threads <= 1) reserve_head_products<T>(s);
  // under throw_error every head of every sentence is checked before anything is written (a
  // head's backward checks only its own, after ∂L/∂W_O and the heads before it were done); the
  // heads' backward then meets no row to throw for, and the zeros policy gives the same numbers
  // without checking again
  options heads_opt = borrowing(opt);
  if (opt.if_all_masked == all_masked_policy::throw_error) {
    with_head_score(p, [&](const auto& score) {
      for_each_head<T>(cache.queries.view(), cache.keys.view(), cache.values.view(), s,
                       [&](auto q, auto k, auto v, std::size_t, std::size_t b) {
                         check_many_queries<T>(where, q, k, v, score, sentence_options(opt, s, b));
                       });
    });
    heads_opt.if_all_masked = all_masked_policy::zeros;
  }
  ensure_shape(cache.grad_queries, s.rows, s.heads * s.dk);
  ensure_shape(cache.grad_keys, s.kv_rows, s.kv_heads * s.dk);
  ensure_shape(cache.grad_values, s.kv_rows, s.kv_heads * s.dv);
  ensure_shape(cache.grad_heads_out, s.rows, s.heads * s.dv);
  if (g.bias.rows() != 0) {  // each head's ∂L/∂Z, added to by its backward: from 0
    ensure_shape(cache.grad_bias, s.heads * s.rows, s.n);
    fill_rows(cache.grad_bias.data(), cache.grad_bias.rows(), s.n, s.n, T(0));
  }
  if (p.W_O.rows() == 0)  // ∂L/∂Z is dY itself: the cache's ∂L/∂Z is never left stale
    for (std::size_t t = 0; t < s.rows; ++t)
      copy_numbers(dY.row(t).data(), cache.grad_heads_out.row(t).data(), dY.cols());
  // the heads add their gradients (a key/value head's sum over its query heads): from 0
  for (Matrix<T>* m : {&cache.grad_queries, &cache.grad_keys, &cache.grad_values})
    fill_rows(m->data(), m->rows(), m->cols(), m->cols(), T(0));
  if (threads <= 1) {
    multi_head_backward_steps<T>(where, X, X_kv, self, p, cache, dY, g, heads_opt, s);
    return;
  }
  multi_head_backward_on_threads<T>(where, X, X_kv, self, p, cache, dY, g, heads_opt, s, threads);
}

}  // namespace detail

/// From dY = ∂L/∂Y of multi_head_attention(X, X_kv, params, …, cache, opt, batch), writes every
/// gradient `grads` asks for (see multi_head_gradients). The cache must hold that forward; it also
/// holds the backward's working storage (nothing is allocated once it has these shapes). Every
/// check — shapes, overlaps, under throw_error every head of every sentence — comes before
/// anything is written; on one thread so does every allocation (the heads' backward runs into
/// the cache, then ∂L/∂W_O, ∂L/∂b_O and the input projections' gradients are written), so a
/// throw leaves every gradient as it was. On `threads` threads each of the three steps
/// allocates its thread objects, and the first writes ∂L/∂W_O: a std::bad_alloc in a later
/// step (its thread objects, a head's exact rows) leaves ∂L/∂W_O written.
template <matrix_like Xm, matrix_like Xkv, matrix_like Gm>
  requires detail::input_matrix<Xkv, matrix_scalar_of<Xm>> && detail::input_matrix<Gm, matrix_scalar_of<Xm>>
void multi_head_attention_backward(const Xm& X, const Xkv& X_kv,
                                   const multi_head_parameters<matrix_scalar_of<Xm>>& params,
                                   multi_head_cache<matrix_scalar_of<Xm>>& cache, const Gm& dY,
                                   const multi_head_gradients<matrix_scalar_of<Xm>>& grads,
                                   const options& opt = {}, std::size_t batch = 1,
                                   std::size_t threads = 1) {
  using T = matrix_scalar_of<Xm>;
  detail::multi_head_backward_of<T>("attn::multi_head_attention_backward", as_view(X), as_view(X_kv),
                                    false, params, cache, as_view(dY), grads, opt, batch, threads);
}

/// The backward of self-attention with projections and heads (X_kv = X): ∂L/∂X sums the paths
/// through Q, K and V.
template <matrix_like Xm, matrix_like Gm>
  requires detail::input_matrix<Gm, matrix_scalar_of<Xm>>
void multi_head_attention_backward(const Xm& X,
                                   const multi_head_parameters<matrix_scalar_of<Xm>>& params,
                                   multi_head_cache<matrix_scalar_of<Xm>>& cache, const Gm& dY,
                                   const multi_head_gradients<matrix_scalar_of<Xm>>& grads,
                                   const options& opt = {}, std::size_t batch = 1,
                                   std::size_t threads = 1) {
  using T = matrix_scalar_of<Xm>;
  const auto x_held = as_view(X);  // (a strided X: its row-major copy, held here)
  const MatrixView<const T> x = x_held;
  detail::multi_head_backward_of<T>("attn::multi_head_attention_backward", x, x, true, params, cache,
                                    as_view(dY), grads, opt, batch, threads);
}

/// Writes ∂y_t/∂x_s (d_out × d_model) of self-attention with projections (the unit's W3), with
/// c = β·scale, W_Q,i, W_K,i, W_V,i head i's columns of W_Q, W_K, W_V and W_O,i its rows of W_O:
///
///   J_i = α_its W_V,iᵀ + c [δ_ts Σ_j α_itj (v_ij − z_it)(W_Q,i k_ij)ᵀ + α_its (v_is − z_it)(W_K,i q_it)ᵀ],
///   ∂y_t/∂x_s = Σ_i W_O,iᵀ J_i   (without W_O, the J_i one below the other).
///
/// A row whose weights do not move with the scores (all masked, a kept +inf) keeps only the first
/// term. Allocates (it runs the forward); errors as multi_head_attention's, and dimension_error
/// unless t and s are rows of X and out is d_out × d_model.
template <matrix_like Xm, class Out>
  requires mutable_matrix_like<Out> && std::same_as<matrix_scalar_of<Out>, matrix_scalar_of<Xm>>
void jacobian_input(const Xm& X, const multi_head_parameters<matrix_scalar_of<Xm>>& params,
                    std::size_t t, std::size_t s, Out&& out, const options& opt = {}) {
  using T = matrix_scalar_of<Xm>;
  const char* where = "attn::jacobian_input";
  const auto x_held = as_view(X);  // (a strided X: its row-major copy, held here)
  const MatrixView<const T> x = x_held;
  const detail::head_sizes hs = detail::check_heads<T>(where, x, x, params, 1, opt);
  if (params.positions) detail::throw_jacobian_positions(where);
  const MatrixView<T> J = as_mutable_view(out);
  detail::check_shape(where, "the Jacobian", J.rows(), J.cols(), hs.d_out, hs.d_model);
  detail::named_regions<T, 11> inputs;
  detail::add_head_inputs(inputs, x, x, params);
  const detail::named_region<T> outputs[1] = {{"the Jacobian", detail::region_of(J)}};
  detail::check_buffers_apart<T>(where, std::span<const detail::named_region<T>>(outputs),
                                 inputs.span(), opt);
  for (const std::size_t r : {t, s})
    if (r >= hs.rows)
      attn::detail::raise<dimension_error>(std::string(where) + ": row " + std::to_string(r) +
                                           " is out of range for the " + std::to_string(hs.rows) +
                                           " rows of X");
  multi_head_cache<T> cache;
  Matrix<T> y(hs.rows, hs.d_out), maps(hs.heads * hs.rows, hs.n);
  multi_head_attention(x, params, multi_head_views<T>{.out = y.view(), .maps = maps.view()}, cache, opt);
  T scale = 0;  // the scores' factor in T, as the forward forms it, and c = β·scale likewise
  detail::with_head_score(params, [&](const auto& score) { scale = score.template scale<T>(hs.dk); });
  const T c = static_cast<T>(opt.beta) * scale;
  Matrix<T> Ji(hs.dv, hs.d_model);
  std::vector<T> wq(hs.d_model), scores(hs.n);
  detail::fill_rows(J.data(), J.rows(), J.cols(), J.row_stride(), T(0));
  for (std::size_t i = 0; i < hs.heads; ++i) {
    const T* alpha = maps.row(i * hs.rows + t).data();
    const auto q_t = cache.queries.row(t).subspan(i * hs.dk, hs.dk);
    const auto z_t = cache.heads_out.row(t).subspan(i * hs.dv, hs.dv);
    const auto col = [&](StridedMatrixView<const T> W, std::size_t c0, std::size_t width) {
      return StridedMatrixView<const T>(W.data() + c0 * W.col_stride(), W.rows(), width,
                                        W.row_stride(), W.col_stride());
    };
    const std::size_t g = hs.kv_head_of(i);  // the key/value head query head i reads
    const StridedMatrixView<const T> WQi = col(params.W_Q, i * hs.dk, hs.dk),
                                     WKi = col(params.W_K, g * hs.dk, hs.dk),
                                     WVi = col(params.W_V, g * hs.dv, hs.dv);
    for (std::size_t j = 0; j < hs.n; ++j)
      scores[j] = scale *
                  detail::sum_of_products(q_t.data(), cache.keys.row(j).data() + g * hs.dk, hs.dk);
    // whether the weights move: a property of the logits β·s + bias (the bias is a constant)
    detail::biased_logits(detail::head_bias(params, hs, i, 0), t, 0, hs.n, static_cast<T>(opt.beta),
                          scores.data(), scores.data());
    detail::row_options ro(opt, hs.tq, hs.n);
    attn::options logits = detail::borrowing(ro(t));
    logits.beta = 1;
    const bool flows = detail::weights_move(detail::softmax_row_kind(scores.data(), hs.n, logits));
    for (std::size_t a = 0; a < hs.dv; ++a)  // α_its W_V,iᵀ
      for (std::size_t m = 0; m < hs.d_model; ++m) Ji(a, m) = alpha[s] * WVi(m, a);
    if (flows) {
      const auto add_outer = [&](T f, const T* v, const T* z, StridedMatrixView<const T> W, const T* u) {
        for (std::size_t m = 0; m < hs.d_model; ++m) {  // (W u)_m, W's row m where it lies
          if (W.col_stride() == 1) {
            wq[m] = detail::sum_of_products(W.data() + m * W.row_stride(), u, W.cols());
          } else {
            wq[m] = T(0);
            for (std::size_t k = 0; k < W.cols(); ++k) wq[m] += W(m, k) * u[k];
          }
        }
        for (std::size_t a = 0; a < hs.dv; ++a) detail::axpy(f * (v[a] - z[a]), wq.data(), Ji.row(a).data(), hs.d_model);
      };
      if (t == s)
        for (std::size_t j = 0; j < hs.n; ++j)
          if (alpha[j] != T(0))
            add_outer(c * alpha[j], cache.values.row(j).data() + g * hs.dv, z_t.data(), WQi,
                      cache.keys.row(j).data() + g * hs.dk);
      if (alpha[s] != T(0))
        add_outer(c * alpha[s], cache.values.row(s).data() + g * hs.dv, z_t.data(), WKi, q_t.data());
    }
    if (params.W_O.rows() != 0) {  // J += W_O,iᵀ J_i
      for (std::size_t o = 0; o < hs.d_out; ++o)
        for (std::size_t a = 0; a < hs.dv; ++a)
          detail::axpy(params.W_O(i * hs.dv + a, o), Ji.row(a).data(), J.row(o).data(), hs.d_model);
    } else {
      for (std::size_t a = 0; a < hs.dv; ++a)
        detail::copy_numbers(Ji.row(a).data(), J.row(i * hs.dv + a).data(), hs.d_model);
    }
  }
}

}  // namespace attn
