// libFuzzer target: decoding with a key/value cache (attn/kv_cache.hpp) in float, double and long
// double. A kv_cache of 1 to 3 sequences of up to 10 rows, h heads over h_kv key/value heads
// (1/1, 2/1, 2/2, 3/1, 4/2, 4/1, 6/3, 3/3; kv_heads given or 0), d_k 1 to 3 (now and then 257),
// d_v 1 to 3, W_O and each bias there or not, a scale or 1/√d_k, any β, every all-masked
// policy, causal or not, gets up to 12 operations: steps of 1 to 3 new rows of every sequence
// (multi_head_attention_cached), prompts of 1 to 4 rows of one sequence (its overload for one b),
// drafts of NaN, ±inf or ±max rows then taken back (truncate), truncate, clear() and clear(b),
// steps that do not fit ("the cache is full"), and calls of a wrong shape (Y, no new rows, rows
// that are not the sequences', a sequence out of range, a key mask, a cache of other h_kv or of
// no storage, β not finite, truncate past the length, heads that h_kv does not divide). Now and
// then a second cache is driven alongside by cached_attention with the projections of attn's
// uncached forward.
// Checks (docs/errors.md, "Fuzzing"):
// - exactly the documented exceptions; on a throw Y (Z) untouched and every cache as it was (its
//   lengths, the keys and values it holds, bit for bit);
// - every step's rows against the long double reference of fuzz_many.hpp over the rows the
//   sequence holds (its projections, each head over key/value head i / (h / h_kv), causal with
//   the offset, W_O, the biases), within the bounds carried through every step; NaN rows NaN,
//   the rows whose kept scores are all −inf their policy exactly (cached_attention's Z); rows a
//   draft left past a sequence's length reach nothing (the reference never holds them);
// - the documented equalities: a step's rows equal those of the uncached multi_head_attention
//   over the whole sequence (causal, or not), row for row (equal numbers, or both NaN), and the
//   cache holds its keys and values; cached_attention's Z equals that forward's heads' outputs.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "fuzz_many.hpp"

namespace {

using namespace attn_fuzz;

/// One layer's weights and options.
template <class T>
struct layer {
  std::size_t d_model = 1, h = 1, kv = 0, hk = 1, dk = 1, dv = 1, d_out = 1;
  bool has_wo = false, causal = true;
  std::optional<double> scale;
  double beta = 1;
  attn::all_masked_policy policy{};
  std::vector<T> WQ, WK, WV, WO, bQ, bK, bV, bO;
  [[nodiscard]] std::size_t out_cols() const { return has_wo ? d_out : h * dv; }
  [[nodiscard]] std::size_t kv_of(std::size_t i) const { return i / (h / hk); }
  [[nodiscard]] attn::multi_head_parameters<T> params() const {
    using CMV = attn::MatrixView<const T>;
    attn::multi_head_parameters<T> p{.W_Q = CMV(WQ.data(), d_model, h * dk),
                                     .W_K = CMV(WK.data(), d_model, hk * dk),
                                     .W_V = CMV(WV.data(), d_model, hk * dv),
                                     .b_Q = bQ,
                                     .b_K = bK,
                                     .b_V = bV,
                                     .b_O = bO,
                                     .heads = h,
                                     .kv_heads = kv};
    if (scale) p.score = attn::dot_scaled_by{*scale};
    if (has_wo) p.W_O = CMV(WO.data(), h * dv, d_out);
    return p;
  }
  [[nodiscard]] attn::options opt() const { return {.beta = beta, .if_all_masked = policy, .causal = causal}; }
};

/// The reference of one step of one sequence: its t new rows, the last t of the n it holds after
/// the step (`rows`, n × d_model), each head over every row it holds (causal: new row r sees the
/// first n − t + r + 1).
template <class T>
struct step_ref {
  std::vector<E> Q, K, V, Z, Y;
  std::vector<attention_ref<T>> units;  // head i at i
  bool must_throw = false, may_throw = false;

  void run(const layer<T>& w, const std::vector<T>& rows, std::size_t n, std::size_t t) {
    const std::size_t dm = w.d_model, h = w.h, hk = w.hk, dk = w.dk, dv = w.dv;
    const std::vector<T> fresh(rows.end() - static_cast<std::ptrdiff_t>(t * dm), rows.end());
    Q = project<T>(fresh, t, dm, w.WQ, h * dk, w.bQ);
    K = project<T>(rows, n, dm, w.WK, hk * dk, w.bK);
    V = project<T>(rows, n, dm, w.WV, hk * dv, w.bV);
    const ld f = w.scale ? static_cast<ld>(static_cast<T>(*w.scale)) : static_cast<ld>(attn::scaled_dot_score::scale<T>(dk));
    Z.assign(t * h * dv, E{});
    units.clear();
    for (std::size_t i = 0; i < h; ++i) {
      const std::size_t g = w.kv_of(i);
      attention_ref<T> u;
      u.tq = t, u.n = n, u.dk = dk, u.dv = dv;
      u.Q.resize(t * dk), u.K.resize(n * dk), u.V.resize(n * dv);
      for (std::size_t r = 0; r < t; ++r)
        for (std::size_t c = 0; c < dk; ++c) u.Q[r * dk + c] = Q[r * h * dk + i * dk + c];
      for (std::size_t j = 0; j < n; ++j) {
        for (std::size_t c = 0; c < dk; ++c) u.K[j * dk + c] = K[j * hk * dk + g * dk + c];
        for (std::size_t c = 0; c < dv; ++c) u.V[j * dv + c] = V[j * hk * dv + g * dv + c];
      }
      u.f = f;
      u.beta = static_cast<ld>(beta_as<T>(w.beta));
      u.m.causal = w.causal;  // (unit_masks: T = t queries over n keys, the offset n − t)
      u.m.tq = t;
      u.m.n = n;
      u.policy = w.policy;
      u.forward();
      must_throw = must_throw || u.must_throw;
      may_throw = may_throw || u.may_throw;
      for (std::size_t r = 0; r < t; ++r)
        for (std::size_t c = 0; c < dv; ++c) Z[r * h * dv + i * dv + c] = u.Y[r * dv + c];
      units.push_back(std::move(u));
    }
    Y = project_out<T>(Z, t, h * dv, w.WO, w.out_cols(), w.bO);
  }
};

/// A row that is NaN exactly in head i: a kept NaN score, or no key under the nan policy.
template <class T>
bool nan_row(const attention_ref<T>& u, std::size_t r) {
  const row_is k = u.kind[r];
  return k == row_is::nan || ((k == row_is::masked_out || k == row_is::none) && u.policy == attn::all_masked_policy::nan);
}

/// Checks a step's Y (t × d_out, row stride ys) against the reference: within bounds, and NaN
/// where a head's row is NaN (with W_O every column sums it).
template <class T>
void check_y(const char* what, const layer<T>& w, const step_ref<T>& ref, const T* Y, std::size_t ys, std::size_t t) {
  const std::size_t dc = w.out_cols();
  for (std::size_t r = 0; r < t; ++r) {
    for (std::size_t o = 0; o < dc; ++o) expect_near<T>(what, r, o, Y[r * ys + o], ref.Y[r * dc + o]);
    for (std::size_t i = 0; i < w.h; ++i) {
      if (!nan_row(ref.units[i], r)) continue;
      for (std::size_t o = w.has_wo ? 0 : i * w.dv; o < (w.has_wo ? dc : (i + 1) * w.dv); ++o)
        ATTN_FUZZ_CHECK(std::isnan(Y[r * ys + o]), "%s: row %zu, head %zu is NaN, yet column %zu is %Lg", what, r, i, o,
                        static_cast<ld>(Y[r * ys + o]));
    }
  }
}

/// Checks the heads' outputs Z (t × h·d_v, row stride zs): the rules of NaN rows and rows that
/// see no key exactly, the rest within bounds.
template <class T>
void check_z(const char* what, const layer<T>& w, const step_ref<T>& ref, const T* Z, std::size_t zs, std::size_t t) {
  for (std::size_t i = 0; i < w.h; ++i) {
    const attention_ref<T>& u = ref.units[i];
    for (std::size_t r = 0; r < t; ++r) {
      const T* z = Z + r * zs + i * w.dv;
      const row_is k = u.kind[r];
      if (k == row_is::uncertain) continue;
      if (nan_row(u, r)) {
        for (std::size_t c = 0; c < w.dv; ++c) ATTN_FUZZ_CHECK(std::isnan(z[c]), "%s: head %zu, row %zu: Z is %Lg, not NaN", what, i, r, static_cast<ld>(z[c]));
        continue;
      }
      if ((k == row_is::masked_out || k == row_is::none) && w.policy != attn::all_masked_policy::uniform) {
        for (std::size_t c = 0; c < w.dv; ++c)
          ATTN_FUZZ_CHECK(z[c] == T(0), "%s: head %zu, row %zu sees no key: Z is %Lg, not 0", what, i, r, static_cast<ld>(z[c]));
        continue;
      }
      for (std::size_t c = 0; c < w.dv; ++c) expect_near<T>(what, r, i * w.dv + c, z[c], u.Y[r * w.dv + c]);
    }
  }
}

/// Equal numbers, or both NaN (the documented equality of two paths: a −0 may be +0).
template <class T>
bool equal_or_both_nan(T a, T b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

/// What a cache shows: its lengths, and the keys and values each sequence holds.
template <class T>
struct snapshot {
  std::vector<std::size_t> lengths;
  std::vector<T> numbers;
  explicit snapshot(const attn::kv_cache<T>& c) {
    for (std::size_t b = 0; b < c.batch(); ++b) {
      lengths.push_back(c.length(b));
      for (const auto m : {c.keys(b), c.values(b)})
        for (std::size_t i = 0; i < m.rows(); ++i)
          for (std::size_t j = 0; j < m.cols(); ++j) numbers.push_back(m(i, j));
    }
  }
  [[nodiscard]] bool same(const snapshot& o) const { return lengths == o.lengths && same_bits(numbers, o.numbers); }
};

template <class T>
void run(reader& r) {
  using MV = attn::MatrixView<T>;
  using CMV = attn::MatrixView<const T>;
  layer<T> w;
  const bool wild = r.byte() % 4 == 0;
  static constexpr std::size_t grouping[8][2] = {{1, 1}, {2, 1}, {2, 2}, {3, 1}, {4, 2}, {4, 1}, {6, 3}, {3, 3}};
  const std::uint8_t hb = r.byte();
  w.h = grouping[hb % 8][0];
  w.hk = grouping[hb % 8][1];
  w.kv = (hb & 8u) != 0 || w.hk != w.h ? w.hk : 0;  // h_kv = h given as h or as 0
  const std::uint8_t dk_byte = r.byte();  // now and then keys of 257: past the tiled kernel
  w.dk = dk_byte >= 0xFC ? 257 : 1 + dk_byte % 3u;
  if (w.dk == 257) w.h = w.hk = 1, w.kv = 0;
  w.dv = 1 + r.size_upto(2);
  w.d_model = 1 + r.size_upto(3);
  w.has_wo = r.flag();
  w.d_out = 1 + r.size_upto(2);
  const std::uint8_t biases = r.byte();
  if (r.flag()) {
    static constexpr double scales[6] = {0.5, 1, 0.125, 2, 0, -1};
    w.scale = scales[r.byte() % 6];
  }
  w.beta = r.beta();
  w.policy = r.policy();
  w.causal = r.byte() % 4 != 0;
  const std::size_t B = 1 + r.size_upto(2), cap = 1 + r.size_upto(9);
  const bool mirror = r.flag();  // cached_attention alongside
  const std::size_t ops = 1 + r.size_upto(11);
  const std::size_t h = w.h, hk = w.hk, dk = w.dk, dv = w.dv, dm = w.d_model, dc = w.out_cols();
  w.WQ.resize(dm * h * dk);
  w.WK.resize(dm * hk * dk);
  w.WV.resize(dm * hk * dv);
  w.WO.resize(w.has_wo ? h * dv * w.d_out : 0);
  w.bQ.resize(biases & 1u ? h * dk : 0);
  w.bK.resize(biases & 2u ? hk * dk : 0);
  w.bV.resize(biases & 4u ? hk * dv : 0);
  w.bO.resize(biases & 8u ? dc : 0);
  for (std::vector<T>* x : {&w.WQ, &w.WK, &w.WV, &w.WO, &w.bQ, &w.bK, &w.bV, &w.bO}) fill_numbers(r, *x, wild);
  const bool beta_bad = !beta_ok<T>(w.beta);
  const attn::multi_head_parameters<T> p = w.params();
  const attn::options opt = w.opt();
  if (verbose)
    std::fprintf(stderr, "%s; h %zu, h_kv %zu (kv_heads %zu), d_k %zu, d_v %zu, d_model %zu, W_O %d (d_out %zu), biases %u, "
                 "scale %g, beta %g, policy %d, causal %d, B %zu, capacity %zu, mirror %d, ops %zu, wild %d\n",
                 sizeof(T) == sizeof(float) ? "float" : sizeof(T) == sizeof(double) ? "double" : "long double", h, hk, w.kv,
                 dk, dv, dm, w.has_wo ? 1 : 0, w.d_out, biases, w.scale ? *w.scale : -99.0, w.beta,
                 static_cast<int>(w.policy), w.causal ? 1 : 0, B, cap, mirror ? 1 : 0, ops, wild ? 1 : 0);

  for (const auto& [name, x] : {std::pair{"W_Q", &w.WQ}, {"W_K", &w.WK}, {"W_V", &w.WV}, {"W_O", &w.WO}, {"b_Q", &w.bQ},
                                {"b_K", &w.bK}, {"b_V", &w.bV}, {"b_O", &w.bO}})
    dump<T>(name, *x);
  if ((biases & 0x80u) != 0) {  // a size of 0: refused by the constructor
    const std::size_t zero = biases % 5u;
    const int got = thrown_documented("attn::kv_cache", [&] {
      attn::kv_cache<T> bad(zero == 0 ? 0 : B, zero == 1 ? 0 : cap, zero == 2 ? 0 : hk, zero == 3 ? 0 : dk, zero == 4 ? 0 : dv);
    });
    ATTN_FUZZ_CHECK(got == 1, "attn::kv_cache with size %zu of 0 threw %d", zero, got);
  }

  attn::kv_cache<T> cache(B, cap, hk, dk, dv), shadow(B, cap, hk, dk, dv);  // shadow: cached_attention's
  std::vector<std::vector<T>> held(B);  // the rows each sequence holds (n × d_model)
  const auto length = [&](std::size_t b) { return held[b].size() / dm; };
  const auto check_lengths = [&](const char* when, bool shadow_too = true) {
    for (std::size_t b = 0; b < B; ++b) {
      ATTN_FUZZ_CHECK(cache.length(b) == length(b), "%s: sequence %zu holds %zu rows, not %zu", when, b, cache.length(b), length(b));
      ATTN_FUZZ_CHECK(!mirror || !shadow_too || shadow.length(b) == length(b), "%s: cached_attention's sequence %zu holds %zu rows, not %zu",
                      when, b, shadow.length(b), length(b));
    }
  };
  const auto truncate_all = [&](std::size_t b, std::size_t len) {
    cache.truncate(b, len);
    if (mirror) shadow.truncate(b, len);
    held[b].resize(len * dm);
  };

  for (std::size_t op = 0; op < ops; ++op) {
    const std::uint8_t o = r.byte();
    const unsigned kind = o % 8u;
    if (verbose) std::fprintf(stderr, "op %zu: kind %u (byte %u); lengths", op, kind, o);
    for (std::size_t b = 0; verbose && b < B; ++b) std::fprintf(stderr, " %zu", length(b));
    if (verbose) std::fprintf(stderr, "\n");

    if (kind == 4) {  // truncate: to a length it holds, or past it, or a sequence out of range (refused)
      const std::size_t b = r.byte() % (B + 1), len = r.byte() % ((b < B ? length(b) : 0) + 2);
      const snapshot<T> before(cache);
      const int got = thrown_documented("attn::kv_cache::truncate", [&] { cache.truncate(b, len); });
      ATTN_FUZZ_CHECK(got == (b == B || len > length(b) ? 1 : 0), "truncate(%zu, %zu) threw %d", b, len, got);
      if (b == B) {  // and every other call that names a sequence
        const int others[4] = {thrown_documented("attn::kv_cache::length", [&] { (void)cache.length(b); }),
                               thrown_documented("attn::kv_cache::keys", [&] { (void)cache.keys(b); }),
                               thrown_documented("attn::kv_cache::values", [&] { (void)cache.values(b); }),
                               thrown_documented("attn::kv_cache::clear", [&] { cache.clear(b); })};
        for (const int g : others) ATTN_FUZZ_CHECK(g == 1, "a kv_cache call for sequence %zu of %zu threw %d", b, B, g);
      }
      if (got != 0) {
        ATTN_FUZZ_CHECK(snapshot<T>(cache).same(before), "a refused truncate changed the cache");
      } else {
        if (mirror) shadow.truncate(b, len);
        held[b].resize(len * dm);
      }
      check_lengths("truncate");
      continue;
    }
    if (kind == 5) {  // clear() or clear(b)
      if ((o & 8u) != 0) {
        cache.clear();
        shadow.clear();
        for (auto& x : held) x.clear();
      } else {
        const std::size_t b = (o >> 4) % B;
        cache.clear(b);
        shadow.clear(b);
        held[b].clear();
      }
      check_lengths("clear");
      continue;
    }

    // a call: kind 0–2 a step of every sequence, 3 a prompt of one, 6 a draft (rows of garbage
    // then taken back), 7 a call of a wrong shape (`broken`)
    const bool draft = kind == 6, is_broken = kind == 7;
    const unsigned broken = is_broken ? (o >> 3) % 8u : 99u;
    const bool one = (kind == 3 || (draft && (o & 0x80u) != 0) || broken == 7) && !mirror;
    const std::size_t first = one ? (o >> 3) % B : 0, count = one ? 1 : B;
    const std::size_t t = kind == 3 ? 1 + (o >> 5) % 4u : 1 + (o >> 6) % 3u;
    std::vector<T> X(count * t * dm);
    if (draft)
      for (T& x : X) x = garbage<T>(r);
    else
      fill_numbers(r, X, wild);
    dump<T>("the new rows", X);
    bool full = false;
    for (std::size_t b = first; b < first + count; ++b) full = full || length(b) + t > cap;

    // the reference, and attn's uncached forward over each whole sequence (for the equalities
    // and cached_attention's inputs: its projections)
    std::vector<step_ref<T>> refs(count);
    std::vector<attn::multi_head_result<T>> whole(count);
    bool must_throw = false, may_throw = false, whole_ok = !beta_bad;
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t b = first + k;
      std::vector<T> rows = held[b];
      rows.insert(rows.end(), X.begin() + static_cast<std::ptrdiff_t>(k * t * dm), X.begin() + static_cast<std::ptrdiff_t>((k + 1) * t * dm));
      const std::size_t n = rows.size() / dm;
      refs[k].run(w, rows, n, t);
      must_throw = must_throw || refs[k].must_throw;
      may_throw = may_throw || refs[k].may_throw;
      if (!whole_ok) continue;
      attn::options wo = opt;  // (a row of another sequence may throw: the zeros policy there)
      if (wo.if_all_masked == attn::all_masked_policy::throw_error) wo.if_all_masked = attn::all_masked_policy::zeros;
      const int gw = thrown_documented("multi_head_attention", [&] { whole[k] = attn::multi_head_attention(CMV(rows.data(), n, dm), p, wo); });
      ATTN_FUZZ_CHECK(gw == 0, "the uncached multi_head_attention threw %d", gw);
    }
    const bool throw_policy = w.policy == attn::all_masked_policy::throw_error;

    // multi_head_attention_cached, for every sequence or one
    {
      // broken 2: rows that are not the sequences' (B > 1), or a sequence out of range
      const bool per_b = one || (broken == 2 && B == 1);
      const std::size_t xrows = broken == 1 ? 0 : broken == 2 && !per_b ? count * t + 1 : count * t;
      std::vector<T> Xx = X;
      Xx.resize(std::max<std::size_t>(xrows, 1) * dm, T(0));
      guarded<T> Y((count * t + (broken == 0 ? 1 : 0)) * (dc + (broken == 7 ? 1 : 0)));
      const MV Yv(Y.data.data(), count * t + (broken == 0 ? 1 : 0), dc + (broken == 7 ? 1 : 0));
      const std::vector<char> keymask(length(first) + t, 1);
      attn::options o2 = opt;
      if (broken == 3) o2.mask = attn::mask_view(keymask);
      if (broken == 5) o2.beta = std::numeric_limits<double>::quiet_NaN();
      // broken 4: a cache of other key/value heads, or (o's high bit) one of no storage
      const bool empty_cache = broken == 4 && (o & 0x80u) != 0;
      attn::kv_cache<T> other = empty_cache ? attn::kv_cache<T>() : attn::kv_cache<T>(B, cap, hk + 1, dk, dv);
      attn::kv_cache<T>& use = broken == 4 ? other : cache;
      const std::size_t b_call = broken == 2 ? B : first;
      const snapshot<T> before(cache), before_shadow(shadow);
      const int got = thrown_documented("multi_head_attention_cached", [&] {
        if (per_b) attn::multi_head_attention_cached(CMV(Xx.data(), xrows, dm), p, use, b_call, Yv, o2);
        else attn::multi_head_attention_cached(CMV(Xx.data(), xrows, dm), p, use, Yv, o2);
      });
      // the checks' order: the cache's storage, the new rows, the sequence, rows per sequence;
      // the parameters and β; Y; the cache's shapes and the mask; its room; then a row that sees
      // no key (throw_error)
      int expected = 0;
      if (empty_cache || broken == 1 || broken == 2) expected = 1;
      else if (beta_bad || broken == 5) expected = 2;
      else if (broken == 0 || broken == 7 || broken == 3 || broken == 4 || full) expected = 1;
      else if (throw_policy && must_throw) expected = 2;
      const bool either = expected == 0 && throw_policy && may_throw;
      if (verbose) std::fprintf(stderr, "  multi_head_attention_cached: %zu × %zu rows, broken %u, full %d: threw %d\n", count, t, broken, full ? 1 : 0, got);
      ATTN_FUZZ_CHECK(got == expected || (either && got == 2), "multi_head_attention_cached (broken %u, full %d) threw %d, expected %d",
                      broken, full ? 1 : 0, got, expected);
      ATTN_FUZZ_CHECK(empty_cache || other.length(0) == 0, "a refused call wrote to a cache of other key/value heads");
      if (got != 0) {
        ATTN_FUZZ_CHECK(Y.untouched(), "multi_head_attention_cached: a throw wrote to Y");
        ATTN_FUZZ_CHECK(snapshot<T>(cache).same(before), "multi_head_attention_cached: a throw changed the cache");
        continue;  // (the shadow is not called: both stay as they were)
      }
      for (std::size_t k = 0; k < count; ++k) {
        const std::size_t b = first + k, L = length(b);
        held[b].insert(held[b].end(), X.begin() + static_cast<std::ptrdiff_t>(k * t * dm), X.begin() + static_cast<std::ptrdiff_t>((k + 1) * t * dm));
        const T* y = Y.data.data() + k * t * dc;
        check_y<T>("multi_head_attention_cached: Y", w, refs[k], y, dc, t);
        // the equality with the whole sequence's forward, and the cache's keys and values its
        if (!whole_ok) continue;
        const attn::multi_head_result<T>& wr = whole[k];
        for (std::size_t i = 0; i < t; ++i)
          for (std::size_t c = 0; c < dc; ++c)
            ATTN_FUZZ_CHECK(equal_or_both_nan(y[i * dc + c], wr.out(L + i, c)),
                            "sequence %zu: a step's row %zu, column %zu is %.21Lg, the whole forward's %.21Lg", b, L + i, c,
                            static_cast<ld>(y[i * dc + c]), static_cast<ld>(wr.out(L + i, c)));
        const auto keys = cache.keys(b), values = cache.values(b);
        for (std::size_t j = 0; j < L + t; ++j) {
          ATTN_FUZZ_CHECK(same_bits(&keys(j, 0), &wr.cache.keys(j, 0), hk * dk), "sequence %zu: the cache's keys of row %zu are not the forward's", b, j);
          ATTN_FUZZ_CHECK(same_bits(&values(j, 0), &wr.cache.values(j, 0), hk * dv), "sequence %zu: the cache's values of row %zu are not the forward's", b, j);
        }
      }
      check_lengths("multi_head_attention_cached", false);
    }

    // cached_attention alongside, on the projections of the uncached forward
    if (mirror) {
      std::vector<T> Qn(B * t * h * dk, T(0)), Kn(B * t * hk * dk, T(0)), Vn(B * t * hk * dv, T(0));
      for (std::size_t b = 0; b < B && whole_ok; ++b) {
        const std::size_t L = length(b) - t;  // (the step is in held already)
        std::memcpy(&Qn[b * t * h * dk], &whole[b].cache.queries(L, 0), t * h * dk * sizeof(T));
        std::memcpy(&Kn[b * t * hk * dk], &whole[b].cache.keys(L, 0), t * hk * dk * sizeof(T));
        std::memcpy(&Vn[b * t * hk * dv], &whole[b].cache.values(L, 0), t * hk * dv * sizeof(T));
      }
      guarded<T> Z(B * t * h * dv);
      const std::size_t heads = broken == 6 ? h + 1 : h;  // (h + 1: h_kv divides it or not, the shapes are wrong)
      const snapshot<T> before(shadow);
      const int got = thrown_documented("cached_attention", [&] {
        const auto call = [&](const auto& score) {
          attn::cached_attention(CMV(Qn.data(), B * t, h * dk), CMV(Kn.data(), B * t, hk * dk), CMV(Vn.data(), B * t, hk * dv),
                                 shadow, MV(Z.data.data(), B * t, h * dv), heads, opt, score);
        };
        if (w.scale) call(attn::dot_scaled_by{*w.scale});
        else call(attn::scaled_dot);
      });
      if (verbose) std::fprintf(stderr, "  cached_attention: threw %d\n", got);
      // multi_head_attention_cached did not throw: β is finite, every sequence had room
      const int expected = broken == 6 ? 1 : 0;
      const bool either = expected == 0 && throw_policy && may_throw;
      ATTN_FUZZ_CHECK(got == expected || (either && got == 2), "cached_attention threw %d, expected %d", got, expected);
      if (got != 0) {
        ATTN_FUZZ_CHECK(Z.untouched() && snapshot<T>(shadow).same(before), "cached_attention: a throw wrote");
        if (broken == 6) {  // the step is taken back from the main cache, so that both agree
          for (std::size_t b = 0; b < B; ++b) truncate_all(b, length(b) - t);
          check_lengths("cached_attention refused");
          continue;
        }
        ATTN_FUZZ_CHECK(false, "cached_attention refused what multi_head_attention_cached took");
      }
      for (std::size_t b = 0; b < B; ++b) {
        const std::size_t L = length(b) - t;
        const T* z = Z.data.data() + b * t * h * dv;
        for (std::size_t i = 0; i < t; ++i)
          for (std::size_t c = 0; c < h * dv; ++c)
            ATTN_FUZZ_CHECK(equal_or_both_nan(z[i * h * dv + c], whole[b].cache.heads_out(L + i, c)),
                            "sequence %zu: cached_attention's row %zu, column %zu is %.21Lg, the forward's %.21Lg", b, L + i, c,
                            static_cast<ld>(z[i * h * dv + c]), static_cast<ld>(whole[b].cache.heads_out(L + i, c)));
        check_z<T>("cached_attention: Z", w, refs[b], z, h * dv, t);
        ATTN_FUZZ_CHECK(snapshot<T>(shadow).numbers.size() == snapshot<T>(cache).numbers.size() &&
                            same_bits(snapshot<T>(shadow).numbers, snapshot<T>(cache).numbers),
                        "cached_attention's cache does not hold multi_head_attention_cached's keys and values");
      }
      check_lengths("cached_attention");
    }
    if (draft)  // the draft taken back: its rows stay in the storage past the lengths
      for (std::size_t b = first; b < first + count; ++b) truncate_all(b, length(b) - t);
    check_lengths("a step");
  }
}

}  // namespace

ATTN_FUZZ_FLOAT_DOUBLE_LONG_DOUBLE(run)
