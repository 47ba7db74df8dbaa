#pragma once
/// \file attn/norms.hpp
/// Layer norm and RMS norm over the rows of a matrix (the unit's §9; NEXT_SECTIONS.md; docs/block.md):
///
///   LayerNorm(x) = γ ⊙ (x − μ)·r + β,   μ = mean(x),  σ² = mean((x − μ)²) (biased),
///                                       r = 1/√(σ² + ε),  ε = 1e-5 unless given;
///   RMSNorm(x)   = γ ⊙ x·r,             r = 1/√(mean(x²) + ε).
///
/// γ left out is 1, β left out is 0. Their backward (x̂ = (x − μ)·r, resp. x·r, g = γ ⊙ dy):
///
///   LayerNorm:  ∂L/∂x = r·(g − mean(g) − x̂·mean(g ⊙ x̂)),   RMSNorm:  ∂L/∂x = r·(g − x̂·mean(g ⊙ x̂)),
///   ∂L/∂γ += Σ_rows dy ⊙ x̂,  ∂L/∂β += Σ_rows dy,
///
/// and the Jacobian of one row, ∂y_i/∂x_j = γ_i·r·(δ_ij − 1/n − x̂_i x̂_j/n) (RMSNorm: without the
/// 1/n). μ and σ² are taken by the corrected two-pass sums (μ₀ = Σx/n; c = Σ(x − μ₀),
/// q = Σ(x − μ₀)²; μ = μ₀ + c/n, σ² = (q − c²/n)/n), so a row of a large offset and a tiny spread
/// (1e4 and 1e-6 in double) keeps its spread: no E[x²] − μ² cancellation. A row whose σ² + ε is 0
/// (a constant row with ε = 0) has no scale: its output and gradients are NaN (0/0, as PyTorch's).

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cmath>
#include <concepts>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "attn/detail/math.hpp"
#include "attn/detail/overlap.hpp"
#include "attn/detail/simd.hpp"
#include "attn/error.hpp"
#include "attn/matrix.hpp"
#include "attn/vector.hpp"

namespace attn {

/// Which norm: LayerNorm (centred, γ and β) or RMSNorm (not centred, γ only).
enum class norm_kind { layer, rms };

/// A norm's parameters, borrowed: γ and β of d numbers each, or empty (γ = 1, β = 0), and ε.
/// RMSNorm has no β (a β given is refused).
template <real T>
struct norm_parameters {
  std::span<const T> gamma{};  ///< γ (d), or none: 1
  std::span<const T> beta{};   ///< β (d), or none: 0 (LayerNorm only)
  double eps = 1e-5;           ///< ε ≥ 0 and finite as a T, else domain_error
  norm_kind kind = norm_kind::layer;  ///< LayerNorm or RMSNorm
};

/// Per-row statistics a forward writes when asked and its backward reads: μ (LayerNorm; RMSNorm
/// leaves it alone) and r = 1/√(σ² + ε). Empty spans: not asked for / recompute.
template <real T>
struct norm_statistics {
  std::span<T> mean{};  ///< μ per row (rows)
  std::span<T> rstd{};  ///< r per row (rows)
};

/// The statistics a backward reads (a forward's norm_statistics, read-only). Empty: recompute.
template <real T>
struct saved_norm {
  std::span<const T> mean{};  ///< μ per row (LayerNorm)
  std::span<const T> rstd{};  ///< r per row
};

/// Where a norm's backward writes: ∂L/∂X (rows × d), ∂L/∂γ, ∂L/∂β (d each); a view left empty
/// is not computed. ∂L/∂X is overwritten unless `accumulate`; ∂L/∂γ and ∂L/∂β, sums over the
/// rows, are added to what they hold when `accumulate`, else overwritten.
template <real T>
struct norm_gradients {
  MatrixView<T> input{};   ///< ∂L/∂X
  std::span<T> gamma{};    ///< ∂L/∂γ
  std::span<T> beta{};     ///< ∂L/∂β
  bool accumulate = false; ///< add to what the gradients hold
};

namespace detail {

[[noreturn]] ATTN_NOINLINE inline void throw_bad_eps(const char* where) {
  raise<domain_error>(std::string(where) + ": eps must be finite and at least 0");
}

[[noreturn]] ATTN_NOINLINE inline void throw_rms_beta(const char* where) {
  raise<dimension_error>(std::string(where) + ": RMSNorm has no beta: leave it (and its gradient) empty");
}

/// μ and r of one row by the corrected two-pass sums (the file comment); layer: centred.
template <class T>
struct row_stats {
  T mean, rstd;
};

template <class T>
[[nodiscard]] inline row_stats<T> norm_row_stats(const T* x, std::size_t n, T eps, bool layer) noexcept {
  const T count = static_cast<T>(n);
  if (!layer) {
    const T q = sum_of_products(x, x, n);
    return {T(0), T(1) / std::sqrt(q / count + eps)};
  }
  const T m0 = sum_of(x, n) / count;
  // Σ(x − μ₀) and Σ(x − μ₀)², 256 deviations at a time on the stack (the sums' order is fixed)
  constexpr std::size_t chunk = 256;
  T d[chunk];
  T c = 0, q = 0;
  for (std::size_t i0 = 0; i0 < n; i0 += chunk) {
    const std::size_t len = n - i0 < chunk ? n - i0 : chunk;
    for (std::size_t i = 0; i < len; ++i) d[i] = x[i0 + i] - m0;
    c += sum_of(d, len);
    q += sum_of_products(d, d, len);
  }
  T var = (q - c * c / count) / count;
  if (var < T(0)) var = T(0);  // (q ≥ c²/n in exact arithmetic)
  const T var_eps = var + eps;
  // σ² + ε = 0: no scale, the row is NaN (0/0), whatever rounding left in x − μ
  const T rstd = var_eps > T(0) ? T(1) / std::sqrt(var_eps) : std::numeric_limits<T>::quiet_NaN();
  return {m0 + c / count, rstd};
}

template <class T>
void check_norm(const char* where, std::size_t d, const norm_parameters<T>& p) {
  if (!p.gamma.empty()) check_equal(where, "size of gamma", p.gamma.size(), "columns of X", d);
  if (p.kind == norm_kind::rms && !p.beta.empty()) throw_rms_beta(where);
  if (!p.beta.empty()) check_equal(where, "size of beta", p.beta.size(), "columns of X", d);
  if (!finite_as<T>(p.eps) || p.eps < 0) throw_bad_eps(where);  // on the bits: also under -ffast-math
}

template <class T>
void norm_forward_views(const char* where, MatrixView<const T> X, MatrixView<T> Y,
                        const norm_parameters<T>& p, const norm_statistics<T>& stats) {
  const std::size_t rows = X.rows(), d = X.cols();
  check_nonempty(where, "the width of X", d);
  check_shape(where, "the output", Y.rows(), Y.cols(), rows, d);
  check_norm(where, d, p);
  const bool layer = p.kind == norm_kind::layer;
  if (!stats.mean.empty() && layer) check_equal(where, "size of the means", stats.mean.size(), "rows of X", rows);
  if (!stats.rstd.empty()) check_equal(where, "size of the rstds", stats.rstd.size(), "rows of X", rows);
  const region<T> xr = region_of(X), yr = region_of(Y);
  if (!same_numbers(xr, yr) && overlaps(xr, yr)) throw_overlap(where, "the output", "X");
  for (const auto& [span, name] : {std::pair<std::span<T>, const char*>{stats.mean, "the means"},
                                   std::pair<std::span<T>, const char*>{stats.rstd, "the rstds"}}) {
    const region<T> s = region_of(span);
    if (overlaps(s, xr) || overlaps(s, yr) || overlaps(s, region_of(p.gamma)) || overlaps(s, region_of(p.beta)))
      throw_overlap(where, name, "X, the output or a parameter");
  }
  if (overlaps(yr, region_of(p.gamma)) || overlaps(yr, region_of(p.beta)))
    throw_overlap(where, "the output", "a parameter");
  const T eps = static_cast<T>(p.eps);
  for (std::size_t t = 0; t < rows; ++t) {
    const T* x = X.row(t).data();
    T* y = Y.row(t).data();
    const row_stats<T> s = norm_row_stats(x, d, eps, layer);
    if (!stats.mean.empty() && layer) stats.mean[t] = s.mean;
    if (!stats.rstd.empty()) stats.rstd[t] = s.rstd;
    for (std::size_t i = 0; i < d; ++i) {
      const T xhat = (x[i] - s.mean) * s.rstd;
      const T g = p.gamma.empty() ? xhat : p.gamma[i] * xhat;
      y[i] = p.beta.empty() ? g : g + p.beta[i];
    }
  }
}

}  // namespace detail

/// Y = LayerNorm(X) or RMSNorm(X), row by row (the file comment), into Y (X's shape; Y may be X
/// itself); the statistics (μ, r per row) into `stats` when given. dimension_error naming the
/// buffer and both sizes (γ, β, Y, the statistics; X of no columns; β with RMSNorm),
/// domain_error for ε negative or not finite as a T, overlap_error; nothing written then.
template <matrix_like Xm, mutable_matrix_like Ym>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Ym>>
void norm(const Xm& X, Ym&& Y, const norm_parameters<matrix_scalar_of<Xm>>& p,
          const norm_statistics<matrix_scalar_of<Xm>>& stats = {}) {
  using T = matrix_scalar_of<Xm>;
  const auto xv = as_view(X);
  detail::norm_forward_views<T>(p.kind == norm_kind::layer ? "attn::layer_norm" : "attn::rms_norm", xv,
                                as_mutable_view(Y), p, stats);
}

/// LayerNorm(X) into Y: `norm` with kind = layer.
template <matrix_like Xm, mutable_matrix_like Ym>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Ym>>
void layer_norm(const Xm& X, Ym&& Y, norm_parameters<matrix_scalar_of<Xm>> p = {},
                const norm_statistics<matrix_scalar_of<Xm>>& stats = {}) {
  p.kind = norm_kind::layer;
  norm(X, Y, p, stats);
}

/// RMSNorm(X) into Y: `norm` with kind = rms.
template <matrix_like Xm, mutable_matrix_like Ym>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Ym>>
void rms_norm(const Xm& X, Ym&& Y, norm_parameters<matrix_scalar_of<Xm>> p = {},
              const norm_statistics<matrix_scalar_of<Xm>>& stats = {}) {
  p.kind = norm_kind::rms;
  norm(X, Y, p, stats);
}

/// What the returning norm gives: Y and each row's μ (LayerNorm; RMSNorm: 0) and r.
template <real T>
struct norm_result {
  Matrix<T> out;         ///< Y
  std::vector<T> mean;   ///< μ per row
  std::vector<T> rstd;   ///< r = 1/√(σ² + ε) per row
};

/// Returns `norm(X, ·, p)`'s Y and statistics.
template <matrix_like Xm>
[[nodiscard]] norm_result<matrix_scalar_of<Xm>> norm(const Xm& X, const norm_parameters<matrix_scalar_of<Xm>>& p) {
  using T = matrix_scalar_of<Xm>;
  const auto xv = as_view(X);
  norm_result<T> r{Matrix<T>(xv.rows(), xv.cols()), std::vector<T>(xv.rows(), T(0)), std::vector<T>(xv.rows())};
  norm(X, r.out, p, norm_statistics<T>{r.mean, r.rstd});
  return r;
}

/// The backward of `norm` (the file comment's formulas), from the forward's statistics or, when
/// `stats` is empty, recomputing them from X. dimension_error / domain_error / overlap_error as
/// the forward, and for dY or a gradient of another shape; nothing written then.
template <matrix_like Xm, matrix_like Gm>
  requires std::same_as<matrix_scalar_of<Xm>, matrix_scalar_of<Gm>>
void norm_backward(const Xm& X, const norm_parameters<matrix_scalar_of<Xm>>& p, const Gm& dY,
                   const norm_gradients<matrix_scalar_of<Xm>>& g,
                   const saved_norm<matrix_scalar_of<Xm>>& stats = {}) {
  using T = matrix_scalar_of<Xm>;
  const char* where = p.kind == norm_kind::layer ? "attn::layer_norm_backward" : "attn::rms_norm_backward";
  const auto xv = as_view(X);
  const auto gv = as_view(dY);
  const MatrixView<const T> x = xv, dy = gv;
  const std::size_t rows = x.rows(), d = x.cols();
  detail::check_nonempty(where, "the width of X", d);
  detail::check_norm(where, d, p);
  detail::check_shape(where, "dL/dY", dy.rows(), dy.cols(), rows, d);
  if (g.input.rows() != 0) detail::check_shape(where, "dL/dX", g.input.rows(), g.input.cols(), rows, d);
  if (!g.gamma.empty()) detail::check_equal(where, "size of dL/dgamma", g.gamma.size(), "columns of X", d);
  if (!g.beta.empty()) {
    if (p.kind == norm_kind::rms) detail::throw_rms_beta(where);
    detail::check_equal(where, "size of dL/dbeta", g.beta.size(), "columns of X", d);
  }
  const bool layer = p.kind == norm_kind::layer;
  const bool saved = !stats.rstd.empty();
  if (saved) {
    detail::check_equal(where, "size of the rstds", stats.rstd.size(), "rows of X", rows);
    if (layer) detail::check_equal(where, "size of the means", stats.mean.size(), "rows of X", rows);
  }
  {
    using detail::overlaps;
    using detail::region_of;
    const detail::region<T> outs[3] = {region_of(g.input), region_of(g.gamma), region_of(g.beta)};
    const char* names[3] = {"dL/dX", "dL/dgamma", "dL/dbeta"};
    const detail::region<T> ins[6] = {region_of(x), region_of(dy), region_of(p.gamma), region_of(p.beta),
                                      region_of(stats.mean), region_of(stats.rstd)};
    for (std::size_t o = 0; o < 3; ++o) {
      for (std::size_t o2 = 0; o2 < o; ++o2)
        if (overlaps(outs[o], outs[o2])) detail::throw_overlap(where, names[o], names[o2]);
      for (const auto& in : ins)
        if (overlaps(outs[o], in)) detail::throw_overlap(where, names[o], "an input");
    }
  }
  const T eps = static_cast<T>(p.eps);
  if (!g.accumulate) {
    for (const std::span<T> s : {g.gamma, g.beta})
      for (T& v : s) v = T(0);
  }
  const T count = static_cast<T>(d);
  for (std::size_t t = 0; t < rows; ++t) {
    const T* xr = x.row(t).data();
    const T* gy = dy.row(t).data();
    detail::row_stats<T> s{};
    if (saved)
      s = {layer ? stats.mean[t] : T(0), stats.rstd[t]};
    else
      s = detail::norm_row_stats(xr, d, eps, layer);
    // mean(g) and mean(g ⊙ x̂), g = γ ⊙ dy
    T sum_g = 0, sum_gx = 0;
    for (std::size_t i = 0; i < d; ++i) {
      const T xhat = (xr[i] - s.mean) * s.rstd;
      const T gi = p.gamma.empty() ? gy[i] : p.gamma[i] * gy[i];
      sum_g += gi;
      sum_gx += gi * xhat;
      if (!g.gamma.empty()) g.gamma[i] += gy[i] * xhat;
      if (!g.beta.empty()) g.beta[i] += gy[i];
    }
    if (g.input.rows() == 0) continue;
    const T mg = layer ? sum_g / count : T(0), mgx = sum_gx / count;
    T* dx = g.input.row(t).data();
    for (std::size_t i = 0; i < d; ++i) {
      const T xhat = (xr[i] - s.mean) * s.rstd;
      const T gi = p.gamma.empty() ? gy[i] : p.gamma[i] * gy[i];
      const T v = s.rstd * (gi - mg - xhat * mgx);
      dx[i] = g.accumulate ? dx[i] + v : v;
    }
  }
}

/// The Jacobian of one row, J(i, j) = ∂y_i/∂x_j = γ_i·r·(δ_ij − 1/n − x̂_i x̂_j/n) (RMSNorm:
/// without 1/n), returned n × n. Errors as the forward.
template <vector_like V>
[[nodiscard]] Matrix<scalar_of<V>> norm_jacobian(const V& x, const norm_parameters<scalar_of<V>>& p) {
  using T = scalar_of<V>;
  const char* where = p.kind == norm_kind::layer ? "attn::layer_norm_jacobian" : "attn::rms_norm_jacobian";
  const auto xs = as_span(x);
  const std::size_t n = xs.size();
  detail::check_nonempty(where, "the row", n);
  detail::check_norm(where, n, p);
  const bool layer = p.kind == norm_kind::layer;
  const detail::row_stats<T> s = detail::norm_row_stats(xs.data(), n, static_cast<T>(p.eps), layer);
  const T count = static_cast<T>(n);
  Matrix<T> J(n, n);
  for (std::size_t i = 0; i < n; ++i) {
    const T xi = (xs[i] - s.mean) * s.rstd;
    const T gi = p.gamma.empty() ? T(1) : p.gamma[i];
    for (std::size_t j = 0; j < n; ++j) {
      const T xj = (xs[j] - s.mean) * s.rstd;
      const T delta = (i == j ? T(1) : T(0)) - (layer ? T(1) / count : T(0)) - xi * xj / count;
      J(i, j) = gi * s.rstd * delta;
    }
  }
  return J;
}

}  // namespace attn
