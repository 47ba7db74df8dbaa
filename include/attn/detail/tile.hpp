#pragma once
/// \file attn/detail/tile.hpp
/// Attention of T queries over n keys in tiles (the flash schedule): the queries a block of rows
/// at a time, the keys a block at a time, each key block packed once per query block as Kᵀ, the
/// scores of MR queries × NR keys formed in registers, and each query row's online softmax
/// (online_step) carried across the key blocks with its context in the output row. Nothing of
/// size T × n is stored unless asked for. Kernel layer: masks come as bytes, no public type.

#include "attn/detail/config.hpp"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#include "attn/detail/bias.hpp"
#include "attn/detail/online.hpp"
#include "attn/detail/rows.hpp"
#include "attn/detail/simd.hpp"
#include "attn/detail/softmax_row.hpp"

namespace attn::detail {

/// Which keys query t may attend to, as the kernels read it: every mask given must allow.
struct tile_masks {
  const mask_byte* keys = nullptr;  ///< n entries for every row, or null
  const mask_byte* rows = nullptr;  ///< T × n, row t at rows + t·row_stride, or null
  std::size_t row_stride = 0;
  bool causal = false;  ///< query t sees keys 0 … t + n − T
  std::size_t tq = 0;   ///< T
  std::size_t n = 0;
  /// The keys row t may see under causal (all n without it): they are a prefix.
  [[nodiscard]] constexpr std::size_t limit(std::size_t t) const noexcept {
    if (!causal) return n;
    return t + n + 1 > tq ? (t + n + 1 - tq < n ? t + n + 1 - tq : n) : 0;
  }
  [[nodiscard]] constexpr bool any_entries() const noexcept {
    return keys != nullptr || rows != nullptr;
  }
};

/// A matrix as the kernels read it: rows × cols numbers, row i at data + i·stride.
template <class T>
struct tile_matrix {
  T* data = nullptr;
  std::size_t rows = 0, cols = 0, stride = 0;
  [[nodiscard]] constexpr T* row(std::size_t i) const noexcept { return data + i * stride; }
};

/// The tiles, per vector width: MR query rows at a time; the scores of MR × NR keys in
/// registers (NR whole vectors: MR·NR/L accumulators, 24 of AVX-512's 32 registers, 12 of 16
/// otherwise); the weighted sum of the values OV vectors of columns at a time for the same MR
/// rows (MR·OV accumulators); keys in blocks of NB, the online softmax's step.
template <class T>
struct tile_shape {
  static constexpr bool vectors = simd_type<T>;
  static constexpr std::size_t lanes = vectors ? simd_lanes<T> : 1;
  static constexpr std::size_t wide = simd_bytes == 64 ? 4 : 2;  // vectors per row of a tile
  static constexpr std::size_t MR = vectors ? 6 : 4;
  static constexpr std::size_t NR = vectors ? wide * lanes : 4;
  static constexpr std::size_t OV = vectors ? wide : 0;
  static constexpr std::size_t max_keys_per_block = vectors ? 512 / sizeof(T) : 16;
  /// Keys per block: 512 bytes of them (128 floats, 64 doubles; 16 without vectors), fewer for
  /// long keys so that Kᵀ stays within 32 KiB (but at least NR).
  [[nodiscard]] static constexpr std::size_t keys_per_block(std::size_t dk) noexcept {
    std::size_t nb = max_keys_per_block;
    while (nb > NR && nb * dk * sizeof(T) > (std::size_t{32} << 10)) nb -= NR;
    return nb;
  }
  /// Numbers of a packed block of keys up to 256 numbers long (keys_per_block's bound), or of
  /// MR rows (tiled_backward's Yᵀ).
  static constexpr std::size_t packed_columns = (MR + NR - 1) / NR * NR;
  static constexpr std::size_t packed_capacity =
      (std::size_t{32} << 10) / sizeof(T) > packed_columns * 256 ? (std::size_t{32} << 10) / sizeof(T)
                                                                 : packed_columns * 256;
  /// Query rows per block: the packed keys are reused by all of them.
  static constexpr std::size_t MB = MR * 16;
};

/// Kᵀ of keys [j0, j0 + nb) into kp (dk rows of NB numbers, column c for key j0 + c; columns
/// from nb to the next multiple of NR are 0): squares of one vector's lanes by shuffles
/// (transpose_square), the rest one number at a time.
template <class T>
void pack_keys(const tile_matrix<const T>& K, std::size_t j0, std::size_t nb, std::size_t NB,
               T* kp) noexcept {
  constexpr std::size_t NR = tile_shape<T>::NR;
  const std::size_t padded = (nb + NR - 1) / NR * NR, dk = K.cols;
  std::size_t whole_keys = 0, whole_cols = 0;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (tile_shape<T>::vectors) {
    constexpr std::size_t L = simd_lanes<T>;
    whole_keys = nb / L * L;
    whole_cols = dk / L * L;
    for (std::size_t c = 0; c < whole_keys; c += L)
      for (std::size_t i = 0; i < whole_cols; i += L)
        transpose_square<T, L>(K.row(j0 + c) + i, K.stride, kp + i * NB + c, NB);
  }
#endif
  for (std::size_t c = 0; c < nb; ++c) {
    const T* k = K.row(j0 + c);
    for (std::size_t i = c < whole_keys ? whole_cols : 0; i < dk; ++i) kp[i * NB + c] = k[i];
  }
  for (std::size_t i = 0; i < dk; ++i)
    for (std::size_t c = nb; c < padded; ++c) kp[i * NB + c] = T(0);
}

/// S[r][c] = f·Σ_i q_r[i] kp[i][c0 + c] for r < mr rows of Q from q (stride qs) and the NR packed
/// columns from c0: the products summed in order of i, one chain per entry (fused where the
/// build fuses). S has rows of `ss` numbers.
template <class T>
ATTN_ALWAYS_INLINE void score_micro_tile(const T* q, std::size_t qs, std::size_t mr,
                                         const T* kp, std::size_t NB, std::size_t c0,
                                         std::size_t dk, T f, T* S, std::size_t ss) noexcept {
  constexpr std::size_t MR = tile_shape<T>::MR, NR = tile_shape<T>::NR;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (simd_type<T>) {
    constexpr std::size_t L = tile_shape<T>::lanes, NV = NR / L;
    using VT = vec<T, L>;
    VT acc[MR][NV] = {};
    const T* q_rows[MR];
    for (std::size_t r = 0; r < MR; ++r) q_rows[r] = q + (r < mr ? r : 0) * qs;
    for (std::size_t i = 0; i < dk; ++i) {
      VT k[NV];
      ATTN_UNROLL
      for (std::size_t v = 0; v < NV; ++v) k[v] = load<T, L>(kp + i * NB + c0 + v * L);
      ATTN_UNROLL
      for (std::size_t r = 0; r < MR; ++r) {
        const T qi = q_rows[r][i];
        ATTN_UNROLL
        for (std::size_t v = 0; v < NV; ++v) acc[r][v] += qi * k[v];
      }
    }
    for (std::size_t r = 0; r < mr; ++r)
      for (std::size_t v = 0; v < NV; ++v) {
        const VT y = f == T(1) ? acc[r][v] : acc[r][v] * f;
        std::memcpy(S + r * ss + v * L, &y, sizeof y);
      }
    return;
  }
#endif
  for (std::size_t r = 0; r < mr; ++r)
    for (std::size_t c = 0; c < NR; ++c) {
      T acc = 0;
      for (std::size_t i = 0; i < dk; ++i) acc += q[r * qs + i] * kp[i * NB + c0 + c];
      S[r * ss + c] = f == T(1) ? acc : acc * f;
    }
  (void)MR;
}

/// The weights of a weighted_rows_tile: w_rj = data[r·row + j·col] for its mr rows (rows past
/// mr read row 0's, whose sums are dropped).
template <class T>
struct tile_weights {
  const T* data;
  std::size_t row, col;
  [[nodiscard]] constexpr const T* row_of(std::size_t r, std::size_t mr) const noexcept {
    return data + (r < mr ? r : 0) * row;
  }
};

#if ATTN_VECTOR_EXTENSIONS
/// weighted_rows_tile for W vectors of columns: the MR·W sums in registers, each of the n rows
/// of V loaded once for the MR rows of O.
template <std::size_t W, class T>
ATTN_ALWAYS_INLINE void weighted_rows_tile_vec(const tile_weights<T>& w, std::size_t mr,
                                               std::size_t n, const T* V, std::size_t vs, T* O,
                                               std::size_t os, const T* rescale) noexcept {
  constexpr std::size_t MR = tile_shape<T>::MR, L = simd_lanes<T>;
  using VT = vec<T, L>;
  VT acc[MR][W];
  const T* e[MR];
  ATTN_UNROLL
  for (std::size_t r = 0; r < MR; ++r) {
    e[r] = w.row_of(r, mr);
    ATTN_UNROLL
    for (std::size_t k = 0; k < W; ++k) {
      acc[r][k] = r < mr ? load<T, L>(O + r * os + k * L) : VT{};
      if (rescale != nullptr) acc[r][k] *= rescale[r < mr ? r : 0];
    }
  }
  for (std::size_t j = 0; j < n; ++j) {
    VT v[W];
    ATTN_UNROLL
    for (std::size_t k = 0; k < W; ++k) v[k] = load<T, L>(V + j * vs + k * L);
    ATTN_UNROLL
    for (std::size_t r = 0; r < MR; ++r) {
      const T x = e[r][j * w.col];
      ATTN_UNROLL
      for (std::size_t k = 0; k < W; ++k) acc[r][k] += x * v[k];
    }
  }
  for (std::size_t r = 0; r < mr; ++r) std::memcpy(O + r * os, acc[r], sizeof acc[r]);
}
#endif

/// O_r = O_r·rescale_r + Σ_{j < n} w_rj V_j for the mr ≤ MR rows O_r = O + r·os (d numbers
/// each) and the rows V_j = V + j·vs (rescale null: 1): for each column, the products added in
/// order of j, one chain each (fused where the build fuses), the rows' sums in registers.
template <class T>
void weighted_rows_tile(const tile_weights<T>& w, std::size_t mr, std::size_t n, const T* V,
                        std::size_t vs, std::size_t d, T* O, std::size_t os,
                        const T* rescale) noexcept {
  std::size_t c0 = 0;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (tile_shape<T>::vectors) {
    constexpr std::size_t L = simd_lanes<T>, OV = tile_shape<T>::OV;
    for (; c0 + OV * L <= d; c0 += OV * L)
      weighted_rows_tile_vec<OV>(w, mr, n, V + c0, vs, O + c0, os, rescale);
    for (; c0 + L <= d; c0 += L)
      weighted_rows_tile_vec<1>(w, mr, n, V + c0, vs, O + c0, os, rescale);
  }
#endif
  for (std::size_t r = 0; r < mr; ++r)
    for (std::size_t i = c0; i < d; ++i) {
      T acc = rescale != nullptr ? O[r * os + i] * rescale[r] : O[r * os + i];
      for (std::size_t j = 0; j < n; ++j) acc += w.row_of(r, mr)[j * w.col] * V[j * vs + i];
      O[r * os + i] = acc;
    }
}

/// What the tiled forward writes besides the output rows (null: not asked for).
template <class T>
struct tile_outputs {
  tile_matrix<T> out;       ///< Y: T × d_v
  tile_matrix<T> scores{};  ///< S: T × n
  tile_matrix<T> weights{}; ///< A: T × n
  T* logsumexp = nullptr;   ///< T: log Σ_j exp(β s_tj) over the keys row t may see
};

/// Y = softmax(β·f·QKᵀ + bias, masks)·V in tiles, rows [t_begin, t_end) of Q (T × dk), K (n × dk),
/// V (n × dv). For each block of MB query rows and each block of keys (Kᵀ packed once for the
/// block's rows), MR rows at a time: their scores (score_micro_tile), each row's online softmax
/// step (online_softmax_step; its exps in place of the scores), and the MR rows' contexts
/// rescaled and the block's weighted values added (weighted_rows_tile), the contexts in the
/// output rows. Each row's numbers are the same whatever rows it is cut with. Rows that the
/// online pass leaves (a kept +inf or NaN score, nothing kept, a context that is not finite)
/// are passed to leave(t) for the caller's exact path, their outputs left as they are.
/// Everything else of those rows is written. With a bias each block's scores become the logits
/// z = β·s + b (biased_logits, after out.scores took s) and the softmax runs at β = 1 on them:
/// L_t = log Σ_j exp(z_tj).
template <class T, class Leave>
void tiled_forward(const tile_matrix<const T>& Q, const tile_matrix<const T>& K,
                   const tile_matrix<const T>& V, T f, T beta, const tile_masks& masks,
                   const tile_bias<T>& bias, const tile_outputs<T>& o, std::size_t t_begin,
                   std::size_t t_end, Leave&& leave) {
  using shape = tile_shape<T>;
  constexpr std::size_t MR = shape::MR, NR = shape::NR, MB = shape::MB;
  constexpr std::size_t NBmax = shape::max_keys_per_block;
  constexpr T neg_inf = -std::numeric_limits<T>::infinity();
  const std::size_t n = K.rows, dk = K.cols, dv = V.cols;
  const std::size_t NB = shape::keys_per_block(dk);
  const bool biased = bias.any();
  const T beta_z = biased ? T(1) : beta;  // the softmax's β on what S holds: β·s, or z
  // per block of MB query rows: the packed keys, each row's state; per MR rows their scores
  alignas(64) T kp[shape::packed_capacity];  // Kᵀ of a block of keys (dk ≤ 256)
  alignas(64) T S[MR * NBmax];    // the scores of MR rows, then their exps
  T rescale[MR];
  mask_byte row_mask[NBmax];
  online_state<T> st[MB];
  bool ok[MB];
  // the map: each block's exps kept in it, at the max they were taken at (block_max), and scaled
  // at the end (online_weights); past max_blocks blocks, exp(β s_j − m)/l from the scores kept
  constexpr std::size_t max_blocks = 32;
  T block_max[MB][max_blocks];
  const bool keep_exps = o.weights.data != nullptr && (n + NB - 1) / NB <= max_blocks;
  const auto block_mask_of = [&](std::size_t t, std::size_t j0, std::size_t count) {
    if (!masks.any_entries()) return static_cast<const mask_byte*>(nullptr);
    for (std::size_t c = 0; c < count; ++c)
      row_mask[c] = (masks.keys == nullptr || masks.keys[j0 + c]) &&
                            (masks.rows == nullptr || masks.rows[t * masks.row_stride + j0 + c])
                        ? 1
                        : 0;
    return static_cast<const mask_byte*>(row_mask);
  };
  for (std::size_t t0 = t_begin; t0 < t_end; t0 += MB) {
    const std::size_t rows = t_end - t0 < MB ? t_end - t0 : MB;
    for (std::size_t r = 0; r < rows; ++r) {
      st[r] = online_state<T>{.c = o.out.row(t0 + r), .dv = dv};
      fill(st[r].c, dv, T(0));
      ok[r] = true;
    }
    // the keys any row of this block may see (all of them when the scores are asked for)
    const std::size_t key_end = o.scores.data != nullptr ? n : masks.limit(t0 + rows - 1);
    for (std::size_t j0 = 0; j0 < key_end; j0 += NB) {
      const std::size_t nb = key_end - j0 < NB ? key_end - j0 : NB;
      pack_keys(K, j0, nb, NB, kp);
      for (std::size_t i0 = 0; i0 < rows; i0 += MR) {
        const std::size_t mr = rows - i0 < MR ? rows - i0 : MR;
        // the block's keys these rows may see: causal stops at the last row's limit
        const std::size_t last = masks.limit(t0 + i0 + mr - 1);
        if (o.scores.data == nullptr && last <= j0) continue;
        const std::size_t keys = o.scores.data != nullptr || last - j0 >= nb ? nb : last - j0;
        for (std::size_t c0 = 0; c0 < keys; c0 += NR)
          score_micro_tile(Q.row(t0 + i0), Q.stride, mr, kp, NB, c0, dk, f, S + c0, NBmax);
        for (std::size_t r = 0; r < mr; ++r) {
          const std::size_t i = i0 + r, t = t0 + i;
          T* s = S + r * NBmax;
          rescale[r] = T(1);
          if (o.scores.data != nullptr) copy_numbers(s, o.scores.row(t) + j0, nb);
          if (biased) biased_logits(bias, t, j0, keys, beta, s, s);
          if (o.weights.data != nullptr && !keep_exps) copy_numbers(s, o.weights.row(t) + j0, nb);
          const std::size_t lim = masks.limit(t);
          if (!ok[i] || lim <= j0) {  // nothing of this block for row t
            fill(s, keys, T(0));
            continue;
          }
          const std::size_t seen = lim - j0 < keys ? lim - j0 : keys;  // the keys t may see
          const online_scale<T> step =
              online_softmax_step(st[i], s, seen, beta_z, block_mask_of(t, j0, seen), s);
          if (!step.ok) {
            ok[i] = false;
            fill(s, keys, T(0));
            continue;
          }
          fill(s + seen, keys - seen, T(0));  // the keys past t's causal limit
          rescale[r] = step.factor;
          if (keep_exps) {
            copy_numbers(s, o.weights.row(t) + j0, seen);
            block_max[i][j0 / NB] = st[i].m;
          }
        }
        // the weighted values: only the keys some row of these may see, whether or not the
        // scores of the rest were formed for out.scores (so that Y and L keep their bits when
        // the map is asked for: a hidden V_j holding NaN or inf would make 0·V_j a NaN)
        // Each row only the keys it may see itself: under causal the rows' limits rise by one
        // per row, and a V_j past a row's limit but within a later row's, holding NaN or inf,
        // would make its 0·V_j a NaN and send the row to the exact path, so that its numbers
        // would depend on the rows it is cut with. The keys every row sees in one pass, then
        // each further key for the rows that see it (the last rows), each sum still in order
        // of j: the same numbers as one pass, without the 0·V_j.
        const std::size_t weighed = last <= j0 ? 0 : (last - j0 < keys ? last - j0 : keys);
        if (weighed != 0) {
          const std::size_t first = masks.limit(t0 + i0);
          const std::size_t common = first <= j0 ? 0 : (first - j0 < weighed ? first - j0 : weighed);
          weighted_rows_tile(tile_weights<T>{S, NBmax, 1}, mr, common, V.row(j0), V.stride, dv,
                             o.out.row(t0 + i0), o.out.stride, rescale);
          std::size_t r0 = 0;
          for (std::size_t c = common; c < weighed; ++c) {
            while (masks.limit(t0 + i0 + r0) <= j0 + c) ++r0;  // the first row that sees key c
            weighted_rows_tile(tile_weights<T>{S + r0 * NBmax + c, NBmax, 1}, mr - r0, 1,
                               V.row(j0 + c), V.stride, dv, o.out.row(t0 + i0 + r0),
                               o.out.stride, static_cast<const T*>(nullptr));
          }
        }
      }
    }
    for (std::size_t i = 0; i < rows; ++i) {
      const std::size_t t = t0 + i;
      online_state<T>& s = st[i];
      if (!ok[i] || s.m == neg_inf || !(s.l == s.l)) {
        leave(t);
        continue;
      }
      const T inv = online_reciprocal(s);
      scale(s.c, dv, inv);
      if (!all_finite(s.c, dv)) {
        leave(t);
        continue;
      }
      if (o.logsumexp != nullptr)
        o.logsumexp[t] = s.m + static_cast<T>(std::log(static_cast<sum_t<T>>(s.l)));
      if (o.weights.data != nullptr) {
        T* w = o.weights.row(t);
        const std::size_t lim = masks.limit(t);
        if (keep_exps) {
          online_weights(s, block_max[i], lim, NB, w);
        } else {
          for (std::size_t j0 = 0; j0 < lim; j0 += NB) {
            const std::size_t nb = lim - j0 < NB ? lim - j0 : NB;
            exp_shifted(w + j0, w + j0, nb, beta_z, s.m, block_mask_of(t, j0, nb), inv);
          }
        }
        fill(w + lim, n - lim, T(0));
      }
    }
  }
  (void)dk;
}

/// Row t's mask entries for keys [j0, j0 + nb): 1 where every mask allows and j < limit (the
/// causal prefix), else 0. Returns null when every key of the block is allowed.
constexpr const mask_byte* block_mask(const tile_masks& masks, std::size_t t, std::size_t j0,
                                      std::size_t nb, mask_byte* out) noexcept {
  const std::size_t lim = masks.limit(t);
  const std::size_t seen = lim <= j0 ? 0 : (lim - j0 < nb ? lim - j0 : nb);
  if (!masks.any_entries() && seen == nb) return nullptr;
  for (std::size_t c = 0; c < nb; ++c)
    out[c] = c < seen && (masks.keys == nullptr || masks.keys[j0 + c]) &&
                     (masks.rows == nullptr || masks.rows[t * masks.row_stride + j0 + c])
                 ? 1
                 : 0;
  return out;
}

/// fn(begin, length) for each run of consecutive i < n with keep[i] (every i, one run, when
/// all_kept): the sums of the tiled backward skip what they must not touch, in their order.
template <class F>
ATTN_ALWAYS_INLINE void for_each_run(std::size_t n, bool all_kept, const bool* keep, F&& fn) {
  if (all_kept) {
    fn(std::size_t{0}, n);
    return;
  }
  for (std::size_t i = 0; i < n;) {
    while (i < n && !keep[i]) ++i;
    const std::size_t begin = i;
    while (i < n && keep[i]) ++i;
    if (i > begin) fn(begin, i - begin);
  }
}

/// The gradients the tiled backward adds to (each with rows, or null data: left out).
template <class T>
struct tile_gradients {
  tile_matrix<T> queries{};  ///< ∂L/∂Q (T × d_k), added to
  tile_matrix<T> keys{};     ///< ∂L/∂K (n × d_k), added to
  tile_matrix<T> values{};   ///< ∂L/∂V (n × d_v), added to
  tile_matrix<T> scores{};   ///< ∂L/∂S (T × n): dS before the scale f, written or added to
  bool accumulate = false;   ///< add dS and dZ to what scores and bias hold (else overwrite)
  tile_matrix<T> bias{};     ///< ∂L/∂Z (T × n): the gradient of a bias on the logits
};

/// ds[c] = f·dS_tj for c < nb from dp_c = dY_t·V_j (in ds) and D_t = dY_t·Y_t, dS_tj =
/// softmax_backward_entry(P_tj, dp_c − D_t, β); dS_tj also written to (Add: added to) gs[c]
/// when gs is not null, and dZ_tj = softmax_backward_entry(P_tj, dp_c − D_t, 1) = ∂L/∂Z_tj to
/// gz[c] when gz is not null. The same numbers either way: gs and gz only cost their stores.
template <class T, bool Add>
ATTN_ALWAYS_INLINE void score_gradients_of(const T* p, T* ds, std::size_t nb, T dy_y, T beta, T f,
                                           T* gs, T* gz) noexcept {
  if (gs == nullptr && gz == nullptr) {
    for (std::size_t c = 0; c < nb; ++c) ds[c] = f * softmax_backward_entry(p[c], ds[c] - dy_y, beta);
    return;
  }
  const auto put = [](T* out, T e) {
    if constexpr (Add)
      *out += e;
    else
      *out = e;
  };
  for (std::size_t c = 0; c < nb; ++c) {
    const T delta = ds[c] - dy_y;
    const T e = softmax_backward_entry(p[c], delta, beta);
    if (gs != nullptr) put(gs + c, e);
    if (gz != nullptr) put(gz + c, softmax_backward_entry(p[c], delta, T(1)));
    ds[c] = f * e;
  }
}

/// What one pass of tiled_backward works in: the packed blocks, the tiles of P and dS, and the
/// state of a block of rows (on the stack of whichever thread runs the pass: about 180 KiB).
template <class T>
struct backward_scratch {
  using shape = tile_shape<T>;
  static constexpr std::size_t MR = shape::MR, MB = shape::MB, NBmax = shape::max_keys_per_block;
  static constexpr std::size_t SB = MB * 16;  // rows per pass over the keys: Kᵀ and Vᵀ packed once
  static constexpr std::size_t ND = shape::packed_columns;  // columns of Yᵀ for MR rows
  alignas(64) T kp[shape::packed_capacity];  // Kᵀ of the block of keys
  alignas(64) T vp[shape::packed_capacity];  // Vᵀ of the block of keys
  alignas(64) T yp[ND * 256];                // Yᵀ of MR rows (d_v ≤ 256)
  alignas(64) T P[MB * NBmax];               // the block's scores, then P
  alignas(64) T dS[MB * NBmax];              // dY_t·V_j, then f·dS_tj
  alignas(64) T D[MR * ND];                  // dY_t·Y_t' for MR rows at a time
  mask_byte mbuf[NBmax];
  T dy_y[SB];             // dY_t·Y_t of the rows from the block's first
  bool live[SB];          // the row's gradients come from here (else leave(t))
  bool key_finite[NBmax]; // K_j of the block is finite
  bool keys_finite = true;
};

/// tiled_backward's pieces (see there): what a row, a block of keys and a block of rows over a
/// block of keys do, the same numbers whichever thread runs them.
template <class T>
struct tiled_backward_kernel {
  using shape = tile_shape<T>;
  using scratch = backward_scratch<T>;
  static constexpr std::size_t MR = shape::MR, NR = shape::NR, MB = shape::MB, SB = scratch::SB;
  const tile_matrix<const T>& Q;
  const tile_matrix<const T>& K;
  const tile_matrix<const T>& V;
  const tile_matrix<const T>& Y;
  const tile_matrix<const T>& dY;
  const T* lse;
  T f, beta;
  const tile_masks& masks;
  const tile_bias<T>& bias;
  const tile_gradients<T>& g;
  std::size_t NB;

  /// The kernel of these inputs, its keys in blocks for max(d_k, d_v).
  [[nodiscard]] static tiled_backward_kernel of(const tile_matrix<const T>& Q,
                                                const tile_matrix<const T>& K,
                                                const tile_matrix<const T>& V,
                                                const tile_matrix<const T>& Y,
                                                const tile_matrix<const T>& dY, const T* lse,
                                                T f, T beta, const tile_masks& masks,
                                                const tile_bias<T>& bias,
                                                const tile_gradients<T>& g) noexcept {
    return {Q, K, V, Y, dY, lse, f, beta, masks, bias, g,
            shape::keys_per_block(K.cols > V.cols ? K.cols : V.cols)};
  }

  /// Whether row t's gradients come from the tiles: L_t, Q_t and dY_t finite.
  [[nodiscard]] bool live(std::size_t t) const noexcept {
    return lse[t] - lse[t] == T(0) && all_finite(Q.row(t), K.cols) && all_finite(dY.row(t), V.cols);
  }

  /// dY_t·Y_t (in score_micro_tile's order) and live(t) of rows [s0, s0 + srows), srows ≤ SB,
  /// into b.dy_y and b.live from their first entry.
  void rows(std::size_t s0, std::size_t srows, scratch& b) const noexcept {
    constexpr std::size_t ND = scratch::ND;
    for (std::size_t i0 = 0; i0 < srows; i0 += MR) {
      const std::size_t mr = srows - i0 < MR ? srows - i0 : MR;
      pack_keys(Y, s0 + i0, mr, ND, b.yp);
      for (std::size_t c0 = 0; c0 < mr; c0 += NR)
        score_micro_tile(dY.row(s0 + i0), dY.stride, mr, b.yp, ND, c0, V.cols, T(1), b.D + c0, ND);
      for (std::size_t r = 0; r < mr; ++r) b.dy_y[i0 + r] = b.D[r * ND + r];
    }
    for (std::size_t i = 0; i < srows; ++i) b.live[i] = live(s0 + i);
  }

  /// Kᵀ and Vᵀ of keys [j0, j0 + nbk) into b.kp and b.vp, and which of them are finite.
  void keys(std::size_t j0, std::size_t nbk, scratch& b) const noexcept {
    pack_keys(K, j0, nbk, NB, b.kp);
    pack_keys(V, j0, nbk, NB, b.vp);
    b.keys_finite = true;
    for (std::size_t c = 0; c < nbk; ++c) {
      b.key_finite[c] = all_finite(K.row(j0 + c), K.cols);
      b.keys_finite = b.keys_finite && b.key_finite[c];
    }
  }

  /// Rows [t0, t0 + rows) (rows ≤ MB, their dY_t·Y_t and live(t) from dy_y and live_rows) over
  /// the keys packed from j0: P and dS, then (rows_part) ∂L/∂Q's rows and ∂L/∂S's entries,
  /// (keys_part) the keys' ∂L/∂V and ∂L/∂K rows.
  void block(std::size_t t0, std::size_t rows, const T* dy_y, const bool* live_rows,
             std::size_t j0, scratch& b, bool rows_part, bool keys_part) const {
    const std::size_t dk = K.cols, dv = V.cols;
    const std::size_t last = masks.limit(t0 + rows - 1);  // causal: the keys the rows see
    if (last <= j0) return;
    const std::size_t nb = last - j0 < NB ? last - j0 : NB;
    bool rows_live = true;
    for (std::size_t i = 0; i < rows; ++i) rows_live = rows_live && live_rows[i];
    const bool biased = bias.any();
    for (std::size_t i0 = 0; i0 < rows; i0 += MR) {
      const std::size_t mr = rows - i0 < MR ? rows - i0 : MR;
      T* p0 = b.P + i0 * NB;
      T* ds0 = b.dS + i0 * NB;
      // the keys these MR rows see (causal: up to the last one's limit); past them P = dS = 0
      // below (the exps' mask, and softmax_backward_entry of a weight 0), whatever the tiles
      // left there
      const std::size_t lim_r = masks.limit(t0 + i0 + mr - 1);
      const std::size_t nb_r = lim_r <= j0 ? 0 : (lim_r - j0 < nb ? lim_r - j0 : nb);
      for (std::size_t c0 = 0; c0 < nb_r; c0 += NR) {
        score_micro_tile(Q.row(t0 + i0), Q.stride, mr, b.kp, NB, c0, dk, f, p0 + c0, NB);
        score_micro_tile(dY.row(t0 + i0), dY.stride, mr, b.vp, NB, c0, dv, T(1), ds0 + c0, NB);
      }
      bool any = false;
      for (std::size_t r = 0; r < mr; ++r) {
        const std::size_t i = i0 + r, t = t0 + i;
        T* p = b.P + i * NB;
        T* ds = b.dS + i * NB;
        const std::size_t lim = masks.limit(t);
        if (!live_rows[i] || lim <= j0) {
          fill(p, nb, T(0));
          fill(ds, nb, T(0));
          continue;
        }
        any = true;
        const std::size_t seen = lim - j0 < nb ? lim - j0 : nb;  // causal: a prefix of the block
        if (biased) biased_logits(bias, t, j0, seen, beta, p, p);  // z, at β = 1 below
        const T beta_p = biased ? T(1) : beta;
        if (masks.any_entries()) {
          exp_shifted(p, p, nb, beta_p, lse[t], block_mask(masks, t, j0, nb, b.mbuf));  // 0: masked
        } else {  // causal alone: the prefix's exps a vector at a time (the same numbers), then 0s
          exp_shifted(p, p, seen, beta_p, lse[t]);
          fill(p + seen, nb - seen, T(0));
        }
        T* const gs = rows_part && g.scores.data != nullptr ? g.scores.row(t) + j0 : nullptr;
        T* const gz = rows_part && g.bias.data != nullptr ? g.bias.row(t) + j0 : nullptr;
        if (g.accumulate)
          score_gradients_of<T, true>(p, ds, nb, dy_y[i], beta, f, gs, gz);
        else
          score_gradients_of<T, false>(p, ds, nb, dy_y[i], beta, f, gs, gz);
      }
      if (rows_part && any && g.queries.data != nullptr)  // Σ_j f·dS_tj K_j over the finite K_j
        for_each_run(nb_r, b.keys_finite, b.key_finite, [&](std::size_t c, std::size_t len) {
          weighted_rows_tile(tile_weights<T>{ds0 + c, NB, 1}, mr, len, K.row(j0 + c), K.stride, dk,
                             g.queries.row(t0 + i0), g.queries.stride, static_cast<const T*>(nullptr));
        });
    }
    if (!keys_part) return;
    std::size_t first = 0;  // the first of the rows that sees key j0 + c (causal: the rows before
                            // it have P = dS = 0 for these keys, and add nothing)
    for (std::size_t c = 0; c < nb; c += MR) {  // the block's keys MR at a time, over the rows
      const std::size_t mr = nb - c < MR ? nb - c : MR;
      while (first < rows && masks.limit(t0 + first) <= j0 + c) ++first;
      for_each_run(rows - first, rows_live, live_rows + first, [&](std::size_t a0, std::size_t len) {
        const std::size_t a = first + a0;
        if (g.values.data != nullptr)
          weighted_rows_tile(tile_weights<T>{b.P + a * NB + c, 1, NB}, mr, len, dY.row(t0 + a),
                             dY.stride, dv, g.values.row(j0 + c), g.values.stride,
                             static_cast<const T*>(nullptr));
        if (g.keys.data != nullptr)
          weighted_rows_tile(tile_weights<T>{b.dS + a * NB + c, 1, NB}, mr, len, Q.row(t0 + a),
                             Q.stride, dk, g.keys.row(j0 + c), g.keys.stride,
                             static_cast<const T*>(nullptr));
      });
    }
  }
};

/// Backward of tiled_forward for rows [t_begin, t_end) (the kernel k holds the inputs), from the
/// forward's output Y and log-sum-exp L (the map recomputed block by block: P_tj =
/// exp(β s_tj − L_t), or exp(z_tj − L_t) with a bias), adding
///   ∂L/∂V_j += Σ_t P_tj dY_t,   ∂L/∂Q_t += f Σ_j dS_tj K_j,   ∂L/∂K_j += f Σ_t dS_tj Q_t,
/// dS_tj = β P_tj (dY_t·V_j − dY_t·Y_t) (softmax_backward_entry), and writing dS_tj (before f)
/// into g.scores and ∂L/∂Z_tj = P_tj (dY_t·V_j − dY_t·Y_t) into g.bias when they are given. First every row the tiles leave is passed to leave(t), in
/// order: rows whose L_t is not finite (nothing kept, a kept ±inf or NaN), and rows whose Q_t or
/// dY_t is not finite; they get nothing here. Then, for each block of SB query rows and each
/// block of keys (Kᵀ and Vᵀ packed once for the block's rows), MB rows at a time, MR rows at a
/// time: their scores and dY_t·V_j (score_micro_tile), P and f·dS, and ∂L/∂Q's rows
/// (weighted_rows_tile); then the block's ∂L/∂V and ∂L/∂K rows, MR keys at a time over the MB
/// rows (weighted_rows_tile again). dY_t·Y_t is formed by score_micro_tile too, so that a row
/// whose one kept key has weight 1 (Y_t = V_j) gets dS = 0 exactly. A masked key's K_j and V_j,
/// and the Q_t and dY_t of a row left, reach no gradient whatever they hold: their factors are 0
/// (P_tj = dS_tj = 0), and a key whose K_j is not finite (it has dS_tj = 0 in every row kept: a
/// kept score of it would be ±inf or NaN) and a row left are skipped in the sums instead of
/// adding 0·inf = NaN.
///
/// Each sum runs in one order: ∂L/∂Q_t and ∂L/∂S_t over the keys in order, ∂L/∂K_j and ∂L/∂V_j
/// over the rows in order (the left rows' terms, which leave adds, first), so that
/// tiled_backward_on_threads (attn/sdpa_backward.hpp) can cut the work and keep every sum's order.
template <class T, class Leave>
void tiled_backward(const tiled_backward_kernel<T>& k, std::size_t t_begin, std::size_t t_end,
                    Leave&& leave) {
  using kernel = tiled_backward_kernel<T>;
  constexpr std::size_t MB = kernel::MB, SB = kernel::SB;
  const tile_masks& masks = k.masks;
  const std::size_t NB = k.NB;
  for (std::size_t t = t_begin; t < t_end; ++t)
    if (!k.live(t)) leave(t);
  if (t_end <= t_begin) return;
  backward_scratch<T> b;
  for (std::size_t s0 = t_begin; s0 < t_end; s0 += SB) {
    const std::size_t srows = t_end - s0 < SB ? t_end - s0 : SB;
    k.rows(s0, srows, b);
    const std::size_t key_end = masks.limit(s0 + srows - 1);
    for (std::size_t j0 = 0; j0 < key_end; j0 += NB) {
      k.keys(j0, key_end - j0 < NB ? key_end - j0 : NB, b);
      for (std::size_t b0 = 0; b0 < srows; b0 += MB)  // a block of MB rows over these keys
        k.block(s0 + b0, srows - b0 < MB ? srows - b0 : MB, b.dy_y + b0, b.live + b0, j0, b, true,
                true);
    }
  }
}

}  // namespace attn::detail
