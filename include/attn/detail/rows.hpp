#pragma once
/// \file attn/detail/rows.hpp
/// Loops over rows of a matrix (row j at X + j·stride): y += a·x, x *= a, and the weighted
/// sums of rows that attention's context and backward's gradients are made of, eight rows at a
/// time with the columns in registers. Kernel layer: knows no public algorithm.
#include "attn/detail/config.hpp"

#include <cstddef>
#include <cstring>
#include <utility>

#include "attn/detail/prefetch.hpp"
#include "attn/detail/simd.hpp"

namespace attn::detail {

/// y += a·x.
template <class T>
constexpr void axpy(T a, const T* x, T* y, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

/// x is ±inf (not finite, not NaN).
template <class T>
[[nodiscard]] constexpr bool is_infinite(T x) noexcept {
  return x == x && !(x - x == T(0));
}

/// a·x, except that a zero factor times an infinite one is 0, not NaN: in a derivative an
/// infinity is an intermediate that overflowed (a huge dL/dc), and a zero factor contributes
/// nothing. A NaN factor still gives NaN.
template <class T>
[[nodiscard]] constexpr T product_or_zero(T a, T x) noexcept {
  const T p = a * x;
  return p == p || a != a || x != x ? p : T(0);
}

/// y += a·x for a derivative's coefficient a (product_or_zero's rule): a = 0 adds nothing, and
/// where a is ±inf a zero x_i adds nothing; a finite a (the usual case) is axpy.
template <class T>
constexpr void axpy_gradient(T a, const T* x, T* y, std::size_t n) noexcept {
  if (a == T(0)) return;
  if (!is_infinite(a)) {
    axpy(a, x, y, n);
    return;
  }
  for (std::size_t i = 0; i < n; ++i)
    if (x[i] != T(0)) y[i] += a * x[i];
}

/// x_i = value.
template <class T>
constexpr void fill(T* x, std::size_t n, T value) noexcept {
  for (std::size_t i = 0; i < n; ++i) x[i] = value;
}

/// Row i of the rows × cols numbers at x (row stride `stride`) set to value, for every row.
template <class T>
constexpr void fill_rows(T* x, std::size_t rows, std::size_t cols, std::size_t stride,
                         T value) noexcept {
  for (std::size_t i = 0; i < rows; ++i) fill(x + i * stride, cols, value);
}

/// y_i = x_i (the ranges do not overlap).
template <class T>
constexpr void copy_numbers(const T* x, T* y, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) y[i] = x[i];
}

/// x *= a.
template <class T>
constexpr void scale(T* x, std::size_t n, T a) noexcept {
  for (std::size_t i = 0; i < n; ++i) x[i] *= a;
}

/// One group of eight rows' contribution to column i of c: (w0 v0 + w2 v2 + w4 v4 + w6 v6) +
/// (w1 v1 + w3 v3 + w5 v5 + w7 v7), at element i of each row (E: T, or a vector of T loaded
/// from i on).
template <class E, class T, class Load>
[[gnu::always_inline]] inline constexpr E weighted_group(const T* w, const T* v, std::size_t stride,
                                                         Load load_at) noexcept {
  const E a = w[0] * load_at(v) + w[2] * load_at(v + 2 * stride) + w[4] * load_at(v + 4 * stride) +
              w[6] * load_at(v + 6 * stride);
  const E b = w[1] * load_at(v + stride) + w[3] * load_at(v + 3 * stride) +
              w[5] * load_at(v + 5 * stride) + w[7] * load_at(v + 7 * stride);
  return a + b;
}

/// Columns [i0, d) of add_weighted_rows, one at a time (its path past the whole vectors of
/// columns, and in constant evaluation): c_i += Σ_r w_r v_ri, eight rows at a time as
/// weighted_group adds them, then the rows past the last whole group in order.
template <class T>
ATTN_ALWAYS_INLINE constexpr void add_weighted_columns(const T* w, const T* V, std::size_t stride,
                                                       std::size_t rows, std::size_t i0,
                                                       std::size_t d, T* c) noexcept {
  const std::size_t groups = rows / 8 * 8;
  const auto at = [](const T* p) { return *p; };
  for (std::size_t i = i0; i < d; ++i) {
    T acc = c[i];
    std::size_t r = 0;
    for (; r < groups; r += 8) acc += weighted_group<T>(w + r, V + r * stride + i, stride, at);
    for (; r < rows; ++r) acc += w[r] * V[r * stride + i];
    c[i] = acc;
  }
}

#if ATTN_VECTOR_EXTENSIONS
/// add_weighted_rows for the first NV·L columns with all NV vectors of c in registers, eight
/// rows at a time (each weight broadcast once per group, not once per column vector): the same
/// sums as add_weighted_rows' scalar loop for the remaining columns, to the bit. With Prefetch,
/// the same columns of the same rows of `ahead` are prefetched into L2 as these are read, a hint
/// at each vector k that starts a line counted from V (V inside a line: that line is hinted
/// again, harmlessly).
template <std::size_t NV, bool Prefetch, class T>
[[gnu::always_inline]] inline void
add_weighted_rows_regs(const T* w, const T* V, std::size_t stride, std::size_t rows, T* c,
                       [[maybe_unused]] const T* ahead) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  using VT = vec<T, L>;
  const auto at = [](const T* p) { return load<T, L>(p); };
  VT acc[NV];
  for (std::size_t k = 0; k < NV; ++k) acc[k] = load<T, L>(c + k * L);
  const std::size_t groups = rows / 8 * 8;
  std::size_t r = 0;
  for (; r < groups; r += 8) {
    const T* v = V + r * stride;
    for (std::size_t k = 0; k < NV; ++k) {
      if constexpr (Prefetch) {
        if (prefetch_at<L * sizeof(T)>(k, prefetch_lines::all))
          for (std::size_t g = 0; g < 8; ++g) prefetch_l2(ahead + (r + g) * stride + k * L);
      }
      acc[k] += weighted_group<VT>(w + r, v + k * L, stride, at);
    }
  }
  for (; r < rows; ++r)
    for (std::size_t k = 0; k < NV; ++k) acc[k] += w[r] * load<T, L>(V + r * stride + k * L);
  std::memcpy(c, acc, sizeof acc);
}

/// add_weighted_rows' vector part: returns how many columns it did (whole vectors of them).
template <bool Prefetch, class T>
[[gnu::always_inline]] inline std::size_t
add_weighted_rows_vec(const T* w, const T* V, std::size_t stride, std::size_t rows, std::size_t d,
                      T* c, const T* ahead) noexcept {
  constexpr std::size_t L = simd_lanes<T>;
  const auto at = [&](std::size_t i) { return Prefetch ? ahead + i : nullptr; };
  std::size_t i = 0;
  // c in registers, up to 8 vectors of columns at a time, across all rows
  for (; i + 8 * L <= d; i += 8 * L)
    add_weighted_rows_regs<8, Prefetch>(w, V + i, stride, rows, c + i, at(i));
  // the last 1 to 7 vectors of columns, in registers as above: 4, 2 and 1 at a time (each
  // column's sum is its own, so the split changes no number; 3 bodies where one per count took 7)
  if (d - i >= 4 * L) {
    add_weighted_rows_regs<4, Prefetch>(w, V + i, stride, rows, c + i, at(i));
    i += 4 * L;
  }
  if (d - i >= 2 * L) {
    add_weighted_rows_regs<2, Prefetch>(w, V + i, stride, rows, c + i, at(i));
    i += 2 * L;
  }
  if (d - i >= L) {
    add_weighted_rows_regs<1, Prefetch>(w, V + i, stride, rows, c + i, at(i));
    i += L;
  }
  if constexpr (Prefetch) {
    const std::size_t groups = rows / 8 * 8;  // the rows past them were not prefetched above
    prefetch_rows_l2(ahead + groups * stride, stride, rows - groups, d);
  }
  return i;
}
#endif

/// c += Σ_{r < rows} w_r v_r, where v_r = V + r·stride holds d numbers. Up to 8 vectors of
/// columns at a time (that part of c held in registers), eight rows at a time: each group of
/// eight is summed on its own, in two chains, and then added to c, so the only chain through
/// c is one add per group; the rows past the last whole group are added one by one. The same
/// sums in every path (vector, tail columns, constant evaluation), so cutting the rows at
/// multiples of 8 gives the same numbers to the bit. Rows of weight 0 are not skipped: 0·inf
/// is NaN, so callers that may meet non-finite values check the result.
template <class T>
constexpr void add_weighted_rows(const T* w, const T* V, std::size_t stride, std::size_t rows,
                                 std::size_t d, T* c) noexcept {
  std::size_t i = 0;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    if (!std::is_constant_evaluated())  // (V for `ahead`: read only with Prefetch)
      i = add_weighted_rows_vec<false>(w, V, stride, rows, d, c, V);
  }
#endif
  add_weighted_columns(w, V, stride, rows, i, d, c);
}

/// add_weighted_rows (the same sums), with the `rows` rows of `ahead` (the same stride, d
/// numbers each), which the caller reads next, prefetched into L2 as these are added: a hint,
/// for rows that stream from memory.
template <class T>
inline void add_weighted_rows_prefetching(const T* w, const T* V, std::size_t stride,
                                          std::size_t rows, std::size_t d, T* c,
                                          [[maybe_unused]] const T* ahead) noexcept {
  std::size_t i = 0;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) i = add_weighted_rows_vec<true>(w, V, stride, rows, d, c, ahead);
#endif
  add_weighted_columns(w, V, stride, rows, i, d, c);
}

/// w_r = a_r f for the eight rows of a group (a_r itself for f = 1); whether all eight count
/// (no a_r is 0), so that accumulate_rows adds them as one group.
template <class T>
constexpr bool group_weights(const T* a, T f, T* w) noexcept {
  bool all = true;
  for (std::size_t r = 0; r < 8; ++r) {
    w[r] = f == T(1) ? a[r] : a[r] * f;
    all = all && a[r] != T(0);
  }
  return all;
}

/// accumulate_rows for rows shorter than a vector, a column at a time: each column's sum stays
/// in a register instead of being stored and loaded again for every row, and gets the same
/// additions in the same order. From_zero: y = Σ (y's numbers are not read), the same numbers
/// as y zeroed first, since each column's first addition is then to +0 either way.
template <bool From_zero, class T>
constexpr void accumulate_columns(const T* a, T f, const T* X, std::size_t stride, std::size_t rows,
                                  std::size_t d, T* y) noexcept {
  const std::size_t whole = rows / 8 * 8;
  const auto at = [](const T* p) { return *p; };
  for (std::size_t i = 0; i < d; ++i) {
    T acc = From_zero ? T(0) : y[i];
    for (std::size_t j = 0; j < whole; j += 8) {
      T w[8];
      if (group_weights(a + j, f, w)) {
        acc += weighted_group<T>(w, X + j * stride + i, stride, at);  // add_weighted_columns'
      } else {
        for (std::size_t r = 0; r < 8; ++r)
          if (a[j + r] != T(0)) acc += w[r] * X[(j + r) * stride + i];  // axpy's
      }
    }
    for (std::size_t j = whole; j < rows; ++j)
      if (a[j] != T(0)) acc += (f == T(1) ? a[j] : a[j] * f) * X[j * stride + i];
    y[i] = acc;
  }
}

/// y += Σ_j (a_j f) x_j over the rows x_j = X + j·stride (d numbers each), where a row with
/// a_j = 0 adds nothing at all, even if it holds inf or NaN. Eight rows at a time (as
/// add_weighted_rows) when all eight count, else row by row; the grouping starts at row 0, so
/// callers that cut the rows into pieces at multiples of 8 get the same sums to the bit.
/// f = 1 uses a_j as it is. Rows shorter than a vector go a column at a time
/// (accumulate_columns: the same sums).
template <class T>
constexpr void accumulate_rows(const T* a, T f, const T* X, std::size_t stride, std::size_t rows,
                               std::size_t d, T* y) noexcept {
  if (d < simd_lanes<T>) {
    accumulate_columns<false>(a, f, X, stride, rows, d, y);
    return;
  }
  const std::size_t whole = rows / 8 * 8;
  for (std::size_t j = 0; j < whole; j += 8) {
    T w[8];
    if (group_weights(a + j, f, w)) {
      add_weighted_rows(w, X + j * stride, stride, 8, d, y);
    } else {
      for (std::size_t r = 0; r < 8; ++r)
        if (a[j + r] != T(0)) axpy(w[r], X + (j + r) * stride, y, d);
    }
  }
  for (std::size_t j = whole; j < rows; ++j)
    if (a[j] != T(0)) axpy(f == T(1) ? a[j] : a[j] * f, X + j * stride, y, d);
}

/// accumulate_rows for a derivative's coefficients of which some a_j f overflowed to ±inf: row by
/// row through axpy_gradient, so that such a row adds nothing at its zero numbers (0·inf would be
/// NaN). Callers take it only when they saw such a coefficient (accumulate_rows' groups would
/// cost a check per group on the common path).
template <class T>
constexpr void accumulate_rows_overflowed(const T* a, T f, const T* X, std::size_t stride,
                                          std::size_t rows,
                                std::size_t d, T* y) noexcept {
  for (std::size_t j = 0; j < rows; ++j)
    if (a[j] != T(0)) axpy_gradient(f == T(1) ? a[j] : product_or_zero(a[j], f), X + j * stride, y, d);
}

/// y = Σ_j a_j x_j by accumulate_rows' rules into a y of zeros (the same numbers; short rows
/// without zeroing y first).
template <class T>
constexpr void weighted_sum_rows(const T* a, const T* X, std::size_t stride, std::size_t rows,
                                 std::size_t d, T* y) noexcept {
  if (d < simd_lanes<T>) {
    accumulate_columns<true>(a, T(1), X, stride, rows, d, y);
    return;
  }
  for (std::size_t i = 0; i < d; ++i) y[i] = T(0);
  accumulate_rows(a, T(1), X, stride, rows, d, y);
}

/// For the eight rows r of a group: y += Σ_r af_r k_r (summed over r in order, then added to
/// y) and, when kg is null, row r of gn = al_r g + af_r q, else row r of kg = af_r q. Column by
/// column, whole vectors of columns at a time (vector types, so that the writes stay vectorized
/// whatever the caller's size), each column vector of g and q read once for the eight rows.
template <class T>
void combine_rows_group(const T* al, const T* af, const T* k0, std::size_t ks, const T* g,
                        const T* qd, std::size_t d, T* y, T* gn, std::size_t gns, T* kg,
                        std::size_t kgs) noexcept {
  std::size_t i = 0;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    constexpr std::size_t L = simd_lanes<T>;
    using VT = vec<T, L>;
    for (; i + L <= d; i += L) {
      VT acc = {};
      const VT qi = load<T, L>(qd + i);
      if (kg == nullptr) {
        // g_i and q_i read once for the eight rows (row by row, each would be read per row)
        const VT gi = load<T, L>(g + i);
        for (std::size_t r = 0; r < 8; ++r) {
          acc += af[r] * load<T, L>(k0 + r * ks + i);
          const VT x = al[r] * gi + af[r] * qi;
          std::memcpy(gn + r * gns + i, &x, sizeof x);
        }
      } else {
        for (std::size_t r = 0; r < 8; ++r) {
          acc += af[r] * load<T, L>(k0 + r * ks + i);
          const VT o = af[r] * qi;
          std::memcpy(kg + r * kgs + i, &o, sizeof o);
        }
      }
      const VT yi = load<T, L>(y + i) + acc;
      std::memcpy(y + i, &yi, sizeof yi);
    }
  }
#endif
  for (; i < d; ++i) {
    T acc = T(0);
    for (std::size_t r = 0; r < 8; ++r) {
      acc += af[r] * k0[r * ks + i];
      if (kg == nullptr)
        gn[r * gns + i] = al[r] * g[i] + af[r] * qd[i];
      else
        kg[r * kgs + i] = af[r] * qd[i];
    }
    y[i] += acc;
  }
}

}  // namespace attn::detail
