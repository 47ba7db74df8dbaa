#pragma once
/// \file attn/detail/online.hpp
/// The online (one-pass) softmax over a row of scores that come a block at a time, with the
/// weighted sum of the values read in the same pass (Milakov and Gimelshein, 2018):
///
///   m = max β s_j (kept),   l = Σ_j exp(β s_j − m),   c = Σ_j exp(β s_j − m) v_j,
///
/// m rising block by block, l and c rescaled by exp(m_old − m) when it does. The step over
/// one block is online_step; online_pass runs it over all blocks, asking its caller for each
/// block's scores; online_weights and the division by l finish. Kernel layer: the scores come
/// from a callable, so nothing here knows a score or a public algorithm.

#include "attn/detail/config.hpp"

#include <bit>
#include <cstddef>
#include <cstring>
#include <limits>

#include "attn/detail/prefetch.hpp"
#include "attn/detail/reduce.hpp"
#include "attn/detail/rows.hpp"
#include "attn/detail/simd.hpp"
#include "attn/detail/softmax_row.hpp"

namespace attn::detail {

/// Notes per block of the one-pass kernel: the block's scores go through exp as whole
/// vectors, and its rows are still in L1 when they are added into the context.
inline constexpr std::size_t online_block = 64;

/// Rows per block for notes of `numbers` numbers (keys and values together): 64, or fewer so
/// that a block stays within 32 KiB (and so in L1 while it is added up), a multiple of 8 and at
/// least 8.
template <class T>
constexpr std::size_t online_rows(std::size_t numbers) noexcept {
  const std::size_t fit =
      numbers == 0 ? online_block : (std::size_t{32} << 10) / (numbers * sizeof(T));
  const std::size_t rows = fit >= online_block ? online_block : fit / 8 * 8;
  return rows < 8 ? 8 : rows;
}

/// Where the one pass stands: m (−inf before a kept score), l and the d_v numbers of c (zeros
/// at the start). l is kept in sum_t<T>.
template <class T>
struct online_state {
  T m = -std::numeric_limits<T>::infinity();
  sum_t<T> l = 0;
  T* c = nullptr;
  std::size_t dv = 0;
};

/// What one block did to the pass: ok is false at a kept +inf or NaN score (the caller's row
/// then; the state is meaningless), kept_any false when the block kept no score (its exps are all
/// 0 and it adds nothing), and factor is what the context must be multiplied by before the
/// block's Σ e_j v_j is added to it: exp(m_old − m) where m rose from a finite m_old, else 1.
template <class T>
struct online_scale {
  bool ok = true;
  bool kept_any = true;
  T factor = T(1);
};

#if ATTN_VECTOR_EXTENSIONS
/// online_softmax_step's schedule for a block of NV·L numbers (L = simd_lanes<T>, NV a multiple
/// of 4) and no mask, in registers: the scores loaded once, β·s rounded as rounded_product
/// rounds it, the max taken by compares, the exps by exp_in_range, summed in sum_of's order from
/// the registers (acc[v % 4], then the tree) and stored. The same bits as the general schedule,
/// which it leaves the block to (returning false, the state and e untouched) when some β s − m
/// is out of exp_in_range's range, infinite or NaN (which exp_in_range flags on the bits, also
/// under -ffinite-math-only): a kept ±inf or NaN, a block with nothing finite, scores more than
/// 86.5 (708 for double) apart. Where it keeps the block, every β s_j − m is within that range,
/// as the general schedule then finds (exps_in_range) before taking the same exps, and a max of
/// ±0 taken by compares may differ from scaled_min_max_of's in its sign only, which no β s − m
/// shows.
template <std::size_t NV, class T>
[[gnu::always_inline]] inline bool online_softmax_in_registers(online_state<T>& st, const T* s,
                                                               T beta, T* e,
                                                               online_scale<T>& out) noexcept {
  static_assert(NV % 4 == 0, "sum_of's groups of four vectors");
  constexpr std::size_t L = simd_lanes<T>;
  using VT = vec<T, L>;
  using U = typename exp_consts<T>::uint;
  constexpr T inf = std::numeric_limits<T>::infinity();
  VT y[NV];
  ATTN_UNROLL
  for (std::size_t v = 0; v < NV; ++v) y[v] = load<T, L>(s + v * L);
  if (beta != T(1)) {
    ATTN_UNROLL
    for (std::size_t v = 0; v < NV; ++v) y[v] = rounded_product(beta, y[v]);
  }
  VT hi = y[0];
  ATTN_UNROLL
  for (std::size_t v = 1; v < NV; ++v) hi = y[v] > hi ? y[v] : hi;
  const T bm = max_lane<T, L>(hi);  // (a NaN lane may be passed over: its exp is then flagged)
  const T m = bm > st.m ? bm : st.m;
  vec<U, L> bad = {};  // top bit set where some β s − m is out of exp_in_range's range, inf, NaN
  ATTN_UNROLL
  for (std::size_t v = 0; v < NV; ++v) y[v] = exp_in_range<T, L>(y[v] - m, bad);
  if (any_top_bit<U, L>(bad)) return false;
  if (bm > st.m) {
    if (st.m != -inf) {
      const T f = attn::detail::exp(st.m - bm);
      st.l *= static_cast<sum_t<T>>(f);
      out.factor = f;
    }
    st.m = bm;
  }
  ATTN_UNROLL
  for (std::size_t v = 0; v < NV; ++v) std::memcpy(e + v * L, &y[v], sizeof(VT));
  // sum_of: acc[k] from vector k (0 + e is e), then every fourth vector, then the tree
  VT acc[4] = {y[0], y[1], y[2], y[3]};
  ATTN_UNROLL
  for (std::size_t v = 4; v < NV; ++v) acc[v % 4] += y[v];
  st.l += static_cast<sum_t<T>>(hsum<T, L>((acc[0] + acc[2]) + (acc[1] + acc[3])));
  return true;
}
#endif

/// The softmax half of one block of nb notes whose scores are s: raises m to the block's max of
/// β·s over kept notes (mask: null, or the block's nb entries), rescaling l if it rose, then adds
/// e_j = exp(β s_j − m) (into e, nb numbers; 0 where masked) to l. Returns what the context must
/// be multiplied by before Σ e_j v_j is added to it (online_scale). With Registers, blocks of 4
/// or 8 vectors without a mask go through registers (online_softmax_in_registers: the same bits).
template <bool Registers = true, class T>
ATTN_ALWAYS_INLINE constexpr online_scale<T> online_softmax_step(online_state<T>& st, const T* s,
                                                                 std::size_t nb, T beta,
                                                                 const mask_byte* mask, T* e) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  online_scale<T> out;
#if ATTN_VECTOR_EXTENSIONS
  if constexpr (Registers && simd_type<T>) {
    constexpr std::size_t L = simd_lanes<T>;
    if (mask == nullptr && !std::is_constant_evaluated()) {
      if (nb == 4 * L && online_softmax_in_registers<4>(st, s, beta, e, out)) return out;
      if (nb == 8 * L && online_softmax_in_registers<8>(st, s, beta, e, out)) return out;
    }
  }
#endif
  std::size_t kept = nb;
  T least = std::numeric_limits<T>::quiet_NaN();  // the block's least β·s, without a mask
  T bm;
  if (mask == nullptr) {
    const min_max<T> mm = scaled_min_max_of(s, nb, beta);
    bm = mm.max;
    least = mm.min;
  } else {
    bm = masked_scaled_max_of(s, nb, beta, mask, kept);
  }
  if (!(bm < inf)) return {false, false, T(1)};  // +inf, or a NaN that the max kept
  if (bm == -inf) {  // nothing kept in this block, or kept NaNs that order below −inf
    for (std::size_t r = 0; r < nb; ++r)  // (x86's inf − inf and 0·inf have the sign bit set)
      if ((mask == nullptr || mask[r]) && !(beta * s[r] == beta * s[r])) return {false, false, T(1)};
    fill(e, nb, T(0));
    return {true, false, T(1)};
  }
  if (bm > st.m) {
    if (st.m != -inf) {  // (the first block with a kept score: l and c are still 0)
      const T f = attn::detail::exp(st.m - bm);
      st.l *= static_cast<sum_t<T>>(f);
      out.factor = f;
    }
    st.m = bm;
  }
  st.l += static_cast<sum_t<T>>(
      exp_shifted_sum_of(s, e, nb, beta, st.m, mask, exps_in_range(least, st.m)));
  return out;
}

/// One block of nb notes whose scores are s: online_softmax_step, then the context rescaled if m
/// rose and e_j v_j added to it (the values' rows at v, stride vs), unless the block kept nothing.
/// With `ahead` (the next block's value rows, null: none) they are prefetched as the block is
/// added up. Returns false at a kept +inf or NaN score, which it leaves to the caller (the state
/// is then meaningless). Notes of weight 0 are not skipped: a non-finite value anywhere can make
/// c non-finite (callers check). Registers: as online_softmax_step.
template <bool Registers = true, class T>
ATTN_ALWAYS_INLINE constexpr bool online_step(online_state<T>& st, const T* s, std::size_t nb,
                                              T beta, const mask_byte* mask, T* e, const T* v,
                                              std::size_t vs, const T* ahead) {
  const online_scale<T> r = online_softmax_step<Registers>(st, s, nb, beta, mask, e);
  if (!r.ok) return false;
  if (!r.kept_any) return true;
  if (r.factor != T(1)) scale(st.c, st.dv, r.factor);
  if (ahead != nullptr) {
    add_weighted_rows_prefetching(e, v, vs, nb, st.dv, st.c, ahead);
  } else {
    add_weighted_rows(e, v, vs, nb, st.dv, st.c);
  }
  return true;
}

/// online_step over all n notes, blocks of online_rows<T>(numbers) (numbers per note: keys
/// and values together). score_block(j0, nb, out, ahead, lines) writes the scores of notes
/// [j0, j0 + nb) into out, prefetching the `lines` of as many key rows from `ahead` on (null:
/// none). Past online_prefetch_bytes of notes, the next block is prefetched as one is worked
/// on: keys that are also the values every other line while scoring, and every line of the
/// values while adding them up (the add issues no misses of its own). Scores go to `scores`
/// and exps to `exps` when not null; the m each block's exps were taken at to block_max[b]
/// when not null. Returns false as online_step does, or when a kept NaN made l NaN.
template <class T, class ScoreBlock>
constexpr bool online_pass(ScoreBlock&& score_block, std::size_t n, std::size_t numbers,
                           bool shared, const T* v, std::size_t vs, T beta, const mask_byte* mask,
                           T* scores, online_state<T>& st, T* exps, T* block_max) {
  const std::size_t B = online_rows<T>(numbers);
  const bool prefetch = n * numbers * sizeof(T) >= online_prefetch_bytes;
  T sbuf[online_block];
  T ebuf[online_block];
  for (std::size_t j0 = 0; j0 < n; j0 += B) {
    const std::size_t nb = n - j0 < B ? n - j0 : B;
    T* s = scores != nullptr ? scores + j0 : sbuf;
    T* e = exps != nullptr ? exps + j0 : ebuf;
    const bool ahead = prefetch && n - j0 - nb >= nb;  // the next block is a whole one
    score_block(j0, nb, s, ahead, shared ? prefetch_lines::every_other : prefetch_lines::all);
    // (the register schedule measured slower in this loop than the general one, unlike for a
    // row of one block: docs/performance.md, "Issue 18's reshaping")
    if (!online_step<false>(st, s, nb, beta, mask != nullptr ? mask + j0 : nullptr, e,
                            v + j0 * vs, vs, ahead ? v + (j0 + nb) * vs : nullptr))
      return false;
    if (block_max != nullptr) block_max[j0 / B] = st.m;
  }
  return st.l == st.l;  // a kept NaN that the max left out made l NaN
}

/// 1/l rounded once to T: what the pass's context and weights are multiplied by.
template <class T>
[[nodiscard]] constexpr T online_reciprocal(const online_state<T>& st) noexcept {
  return static_cast<T>(sum_t<T>(1) / st.l);
}

/// The weights from the pass's exps, in place: block b's exps (taken at block_max[b]) times
/// exp(block_max[b] − m)/l, for the n notes in blocks of B.
template <class T>
constexpr void online_weights(const online_state<T>& st, const T* block_max, std::size_t n,
                              std::size_t B, T* weights) {
  const T inv = online_reciprocal(st);
  for (std::size_t j0 = 0, b = 0; j0 < n; j0 += B, ++b) {
    const std::size_t nb = n - j0 < B ? n - j0 : B;
    scale(weights + j0, nb,
          block_max[b] == st.m ? inv : attn::detail::exp(block_max[b] - st.m) * inv);
  }
}

}  // namespace attn::detail
