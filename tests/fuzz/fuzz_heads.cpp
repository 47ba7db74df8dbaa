// libFuzzer target: attention with projections and heads (attn/heads.hpp, attn/heads_backward.hpp)
// in float, double and long double: multi_head_attention (self and cross, 1 to 3 sentences of up
// to 7 queries over up to 9 keys, 1 to 3 heads — or, from a byte read after all the others (the
// inputs that end before it keep their meaning), h heads over h_kv key/value heads (grouped-query
// attention, h/h_kv = 2/1, 3/1, 4/2, 4/1, 6/3, 6/2, 4/4, 2/2, or an h_kv that does not divide h)
// —, W_O and each bias there or not, a scale or 1/√d_k, any β, a key mask of n or B·n entries, a
// row mask, causal, every all-masked policy;
// into views with the maps or returning), on threads (0 to 4, 2^61, SIZE_MAX), its backward (any
// set of gradients, accumulating or not, on threads too), self_attention / cross_attention (every
// step returned) and jacobian_input. Clean inputs with NaN, ±inf or ±max in the rows of X and
// X_kv no output may see (the padding: keys no query of the sentence sees; the queries that see no
// key, in self-attention when both), or any numbers. Checks (docs/errors.md, "Fuzzing"):
// - exactly the documented exceptions, Y, the maps, the gradients and the Jacobian untouched on a
//   throw;
// - everything against the long double reference of fuzz_many.hpp (projections, each head of each
//   sentence over its key/value head, W_O, the biases; backward through them, a key/value head's
//   ∂L/∂K and ∂L/∂V the sums over its query heads; the Jacobian's formula), within bounds
//   carried through every step: a number of finite inputs is finite, whatever the padding holds;
//   a gradient no term reaches (a weight's row of padding, a bias of padding) exactly 0;
// - the threads overloads are the one-thread call bit for bit (Y, the maps, the cache, every
//   gradient), and so is the returning form.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "fuzz_many.hpp"

namespace {

using namespace attn_fuzz;

template <class T>
std::vector<E> as_e(const std::vector<T>& x) {
  std::vector<E> e(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) e[i] = E{static_cast<ld>(x[i]), 0};
  return e;
}

/// One call's sizes and inputs.
template <class T>
struct heads_input {
  bool wild = false, cross = false;
  std::size_t B = 1, tq = 1, n = 1, d_model = 1, d_kv = 1, h = 1, dk = 1, dv = 1, d_out = 1;
  std::size_t kv = 0;  ///< multi_head_parameters::kv_heads: 0 (h key/value heads) or h_kv
  /// h_kv, the key/value heads; query head i reads key/value head i / (h / h_kv).
  [[nodiscard]] std::size_t kvh() const { return kv == 0 ? h : kv; }
  [[nodiscard]] std::size_t kv_of(std::size_t i) const { return i / (h / kvh()); }
  bool has_wo = false;
  std::optional<double> scale;
  double beta = 1;
  attn::all_masked_policy policy{};
  std::vector<char> keys, rows;  // B·n or n entries; B·T × n
  bool causal = false;
  std::vector<T> X, Xkv, WQ, WK, WV, WO, bQ, bK, bV, bO, dY;
  [[nodiscard]] std::size_t dvh() const { return h * dv; }
  [[nodiscard]] std::size_t out_cols() const { return has_wo ? d_out : h * dv; }
  /// Sentence b's masks as the reference reads them.
  [[nodiscard]] unit_masks masks(std::size_t b) const {
    unit_masks m;
    if (!keys.empty()) m.keys = keys.data() + (keys.size() == n ? 0 : b * n);
    if (!rows.empty()) m.rows = rows.data() + b * tq * n;
    m.causal = causal;
    m.tq = tq;
    m.n = n;
    return m;
  }
};

/// The reference forward and backward of multi_head_attention.
template <class T>
struct heads_ref {
  const heads_input<T>& in;
  std::vector<E> Q, K, V, Z, Y;
  std::vector<attention_ref<T>> units;  // head i of sentence b at i·B + b
  bool must_throw = false, may_throw = false;
  ld scale_t = 1;

  explicit heads_ref(const heads_input<T>& input) : in(input) {}

  [[nodiscard]] const std::vector<T>& kv() const { return in.cross ? in.Xkv : in.X; }

  void forward() {
    const std::size_t B = in.B, tq = in.tq, n = in.n, h = in.h, hk = in.kvh(), dk = in.dk, dv = in.dv;
    Q = project<T>(in.X, B * tq, in.d_model, in.WQ, h * dk, in.bQ);
    K = project<T>(kv(), B * n, in.d_kv, in.WK, hk * dk, in.bK);
    V = project<T>(kv(), B * n, in.d_kv, in.WV, hk * dv, in.bV);
    scale_t = in.scale ? static_cast<ld>(static_cast<T>(*in.scale)) : static_cast<ld>(attn::scaled_dot_score::scale<T>(dk));
    Z.assign(B * tq * h * dv, E{});
    units.clear();
    for (std::size_t i = 0; i < h; ++i)
      for (std::size_t b = 0; b < B; ++b) {
        attention_ref<T> u;
        const std::size_t g = in.kv_of(i);  // the key/value head query head i reads
        u.tq = tq, u.n = n, u.dk = dk, u.dv = dv;
        u.Q.resize(tq * dk), u.K.resize(n * dk), u.V.resize(n * dv);
        for (std::size_t t = 0; t < tq; ++t)
          for (std::size_t c = 0; c < dk; ++c) u.Q[t * dk + c] = Q[(b * tq + t) * h * dk + i * dk + c];
        for (std::size_t j = 0; j < n; ++j) {
          for (std::size_t c = 0; c < dk; ++c) u.K[j * dk + c] = K[(b * n + j) * hk * dk + g * dk + c];
          for (std::size_t c = 0; c < dv; ++c) u.V[j * dv + c] = V[(b * n + j) * hk * dv + g * dv + c];
        }
        u.f = scale_t;
        u.beta = static_cast<ld>(beta_as<T>(in.beta));
        u.m = in.masks(b);
        u.policy = in.policy;
        u.forward();
        must_throw = must_throw || u.must_throw;
        may_throw = may_throw || u.may_throw;
        for (std::size_t t = 0; t < tq; ++t)
          for (std::size_t c = 0; c < dv; ++c) Z[(b * tq + t) * h * dv + i * dv + c] = u.Y[t * dv + c];
        units.push_back(std::move(u));
      }
    Y = project_out<T>(Z, B * tq, h * dv, in.WO, in.out_cols(), in.bO);
  }

  // the backward's sums
  std::vector<acc<T>> dX, dXkv, dWQ, dWK, dWV, dWO, dbQ, dbK, dbV, dbO;

  void backward() {
    const std::size_t B = in.B, tq = in.tq, n = in.n, h = in.h, hk = in.kvh(), dk = in.dk, dv = in.dv, dc = in.out_cols();
    const std::size_t rows = B * tq, kvr = B * n;
    const auto e = [](T x) { return E{static_cast<ld>(x), 0}; };
    // the output projection
    std::vector<E> dZ(rows * h * dv);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < h * dv; ++c) {
        if (!in.has_wo) {
          dZ[r * h * dv + c] = e(in.dY[r * dc + c]);
          continue;
        }
        acc<T> a;
        for (std::size_t o = 0; o < dc; ++o) a.add(e(in.dY[r * dc + o]), e(in.WO[c * dc + o]));
        dZ[r * h * dv + c] = a.get();
      }
    dWO.assign(in.has_wo ? h * dv * dc : 0, acc<T>{});
    for (std::size_t c = 0; c < (in.has_wo ? h * dv : 0); ++c)
      for (std::size_t o = 0; o < dc; ++o)
        for (std::size_t r = 0; r < rows; ++r) dWO[c * dc + o].add(Z[r * h * dv + c], e(in.dY[r * dc + o]));
    dbO.assign(dc, acc<T>{});
    for (std::size_t o = 0; o < dc; ++o)
      for (std::size_t r = 0; r < rows; ++r) dbO[o].add(e(in.dY[r * dc + o]));
    // every head of every sentence; a key/value head's ∂L/∂K, ∂L/∂V gather its query heads'
    std::vector<acc<T>> gQ(rows * h * dk), gK(kvr * hk * dk), gV(kvr * hk * dv);
    for (std::size_t i = 0; i < h; ++i)
      for (std::size_t b = 0; b < B; ++b) {
        attention_ref<T>& u = units[i * B + b];
        std::vector<E> dy(tq * dv);
        for (std::size_t t = 0; t < tq; ++t)
          for (std::size_t c = 0; c < dv; ++c) dy[t * dv + c] = dZ[(b * tq + t) * h * dv + i * dv + c];
        u.backward(dy);
        for (std::size_t t = 0; t < tq; ++t)
          for (std::size_t c = 0; c < dk; ++c) gQ[(b * tq + t) * h * dk + i * dk + c] = u.dQ[t * dk + c];
        const std::size_t g = in.kv_of(i);
        for (std::size_t j = 0; j < n; ++j) {
          for (std::size_t c = 0; c < dk; ++c) gK[(b * n + j) * hk * dk + g * dk + c].merge(u.dK[j * dk + c]);
          for (std::size_t c = 0; c < dv; ++c) gV[(b * n + j) * hk * dv + g * dv + c].merge(u.dV[j * dv + c]);
        }
      }
    // the input projections: ∂L/∂W = inᵀ dP (rows dP no term reaches left out: they are exactly
    // 0, whatever the row of the input holds), ∂L/∂b = Σ dP, ∂L/∂in = dP Wᵀ
    const auto weight = [&](const std::vector<T>& input, std::size_t nrows, std::size_t k, const std::vector<acc<T>>& dP,
                            std::size_t cols, std::vector<acc<T>>& dW, std::vector<acc<T>>& db) {
      dW.assign(k * cols, acc<T>{});
      db.assign(cols, acc<T>{});
      for (std::size_t r = 0; r < nrows; ++r)
        for (std::size_t c = 0; c < cols; ++c) {
          const acc<T>& p = dP[r * cols + c];
          if (p.terms == 0) continue;
          const E g = p.get();
          for (std::size_t m = 0; m < k; ++m) dW[m * cols + c].add(e(input[r * k + m]), g);
          db[c].add(g);
        }
    };
    weight(in.X, rows, in.d_model, gQ, h * dk, dWQ, dbQ);
    weight(kv(), kvr, in.d_kv, gK, hk * dk, dWK, dbK);
    weight(kv(), kvr, in.d_kv, gV, hk * dv, dWV, dbV);
    const auto input = [&](std::vector<acc<T>>& dIn, std::size_t r, std::size_t k, const std::vector<acc<T>>& dP,
                           const std::vector<T>& W, std::size_t cols) {
      for (std::size_t m = 0; m < k; ++m)
        for (std::size_t c = 0; c < cols; ++c) {
          const acc<T>& p = dP[r * cols + c];
          dIn[r * k + m].add(p.terms == 0 ? E{} : p.get(), e(W[m * cols + c]));
        }
    };
    dX.assign(rows * in.d_model, acc<T>{});
    dXkv.assign(in.cross ? kvr * in.d_kv : 0, acc<T>{});
    for (std::size_t r = 0; r < rows; ++r) input(dX, r, in.d_model, gQ, in.WQ, h * dk);
    std::vector<acc<T>>& dK_in = in.cross ? dXkv : dX;
    for (std::size_t r = 0; r < kvr; ++r) {
      input(dK_in, r, in.d_kv, gK, in.WK, hk * dk);
      input(dK_in, r, in.d_kv, gV, in.WV, hk * dv);
    }
  }
};

/// Checks Y (rows × cols, row stride `stride`), the heads' outputs Z (the cache's) and the maps
/// against the reference: the rules of rows that see no key, NaN rows and masked weights exactly,
/// the rest within bounds.
template <class T>
void check_forward(const char* what, const heads_ref<T>& ref, const T* Y, const T* Z, const T* maps) {
  const heads_input<T>& in = ref.in;
  const std::size_t B = in.B, tq = in.tq, n = in.n, h = in.h, dv = in.dv, dc = in.out_cols();
  for (std::size_t r = 0; r < B * tq; ++r)
    for (std::size_t o = 0; o < dc; ++o) expect_near<T>(what, r, o, Y[r * dc + o], ref.Y[r * dc + o]);
  for (std::size_t i = 0; i < h; ++i)
    for (std::size_t b = 0; b < B; ++b) {
      const attention_ref<T>& u = ref.units[i * B + b];
      for (std::size_t t = 0; t < tq; ++t) {
        const row_is k = u.kind[t];
        const T* z = Z == nullptr ? nullptr : Z + (b * tq + t) * h * dv + i * dv;
        const T* a = maps == nullptr ? nullptr : maps + ((i * B + b) * tq + t) * n;
        if (k == row_is::uncertain) continue;
        const bool nan = k == row_is::nan || ((k == row_is::masked_out || k == row_is::none) && in.policy == attn::all_masked_policy::nan);
        if (nan) {
          for (std::size_t c = 0; z && c < dv; ++c) ATTN_FUZZ_CHECK(std::isnan(z[c]), "%s: head %zu, sentence %zu, row %zu: Z is %Lg, not NaN", what, i, b, t, ld(z[c]));
          for (std::size_t j = 0; a && j < n; ++j) ATTN_FUZZ_CHECK(std::isnan(a[j]), "%s: head %zu, sentence %zu, row %zu: weight %zu is %Lg, not NaN", what, i, b, t, j, ld(a[j]));
          continue;
        }
        if (k == row_is::masked_out || k == row_is::none) {
          const bool uniform = in.policy == attn::all_masked_policy::uniform;
          for (std::size_t j = 0; a && j < n; ++j)
            ATTN_FUZZ_CHECK(a[j] == (uniform ? T(1) / static_cast<T>(n) : T(0)), "%s: head %zu, sentence %zu, row %zu sees no key: weight %zu is %Lg", what, i, b, t, j, ld(a[j]));
          for (std::size_t c = 0; z && c < dv; ++c) {
            if (uniform) expect_near<T>("Z (uniform: the mean of the values)", t, c, z[c], u.Y[t * dv + c]);
            else ATTN_FUZZ_CHECK(z[c] == T(0), "%s: head %zu, sentence %zu, row %zu sees no key: Z %zu is %Lg, not 0", what, i, b, t, c, ld(z[c]));
          }
          continue;
        }
        for (std::size_t j = 0; a && j < n; ++j) {
          if (!u.m.kept(t, j)) ATTN_FUZZ_CHECK(a[j] == T(0), "%s: head %zu, sentence %zu, row %zu: masked key %zu has weight %Lg", what, i, b, t, j, ld(a[j]));
          else expect_near<T>("weight", t, j, a[j], u.A[t * n + j]);
        }
        for (std::size_t c = 0; z && c < dv; ++c) expect_near<T>("Z", t, c, z[c], u.Y[t * dv + c]);
      }
    }
}

/// The gradients the backward writes, as guarded buffers; which are given.
template <class T>
struct grads {
  guarded<T> X, Xkv, WQ, WK, WV, WO, bQ, bK, bV, bO;
  grads(const heads_input<T>& in, unsigned which, int broken)
      : X(which & 1u ? in.B * in.tq * in.d_model : 0),
        Xkv(which & 2u ? in.B * in.n * in.d_kv : 0),
        WQ(which & 4u ? (in.d_model + (broken == 2 ? 1 : 0)) * in.h * in.dk : 0),
        WK(which & 8u ? in.d_kv * in.kvh() * in.dk : 0),
        WV(which & 16u ? in.d_kv * in.kvh() * in.dv : 0),
        WO(which & 32u ? in.h * in.dv * in.out_cols() : 0),
        bQ(which & 64u ? in.h * in.dk : 0),
        bK(which & 128u ? in.kvh() * in.dk : 0),
        bV(which & 256u ? in.kvh() * in.dv : 0),
        bO(which & 512u ? in.out_cols() : 0) {}
  std::vector<guarded<T>*> all() { return {&X, &Xkv, &WQ, &WK, &WV, &WO, &bQ, &bK, &bV, &bO}; }
};

template <class T>
void run(reader& r) {
  using MV = attn::MatrixView<T>;
  using CMV = attn::MatrixView<const T>;
  heads_input<T> in;
  // first what the rules turn on (so that short inputs reach them): the numbers, garbage, threads
  in.wild = r.byte() % 4 == 0;
  const std::uint8_t garbage_bits = r.byte();  // 1 the padding and empty rows, 2 dY, 0x80 J's shape
  std::size_t threads = thread_count(r.byte());
  in.causal = r.flag();
  in.policy = r.policy();
  in.cross = r.flag();
  in.B = 1 + r.size_upto(2);
  in.tq = 1 + r.size_upto(6);
  in.n = in.cross ? 1 + r.size_upto(8) : in.tq;
  in.d_model = 1 + r.size_upto(4);
  in.d_kv = in.cross ? 1 + r.size_upto(4) : in.d_model;
  in.h = 1 + r.size_upto(2);
  const std::uint8_t dk_byte = r.byte();  // now and then heads of 257: past the tiled kernel
  in.dk = dk_byte >= 0xFC ? 257 : 1 + dk_byte % 3u;
  if (in.dk == 257) {  // (one small head)
    in.h = 1;
    in.tq = std::min<std::size_t>(in.tq, 3);
    in.n = in.cross ? std::min<std::size_t>(in.n, 4) : in.tq;
  }
  in.dv = r.size_upto(3);
  in.has_wo = r.flag() && in.dv != 0;  // (a W_O of no rows is no W_O)
  in.d_out = 1 + r.size_upto(3);
  const std::uint8_t biases = r.byte();
  if (r.flag()) {
    static constexpr double scales[6] = {0.5, 1, 0.125, 2, 0, -1};
    in.scale = scales[r.byte() % 6];
  }
  in.beta = r.beta();
  const std::uint8_t mk = r.byte();
  const std::size_t B = in.B, tq = in.tq, n = in.n, dk = in.dk, dv = in.dv;
  if (mk % 3 != 0) in.keys = r.mask(mk % 3 == 1 ? n : B * n);
  if (in.keys.empty() && mk % 3 != 0) in.keys.assign(mk % 3 == 1 ? n : B * n, 1);
  if (r.flag()) {
    in.rows.resize(B * tq * n);
    for (std::size_t i = 0; i < in.rows.size(); i += 8) {
      const std::uint8_t b = r.byte();
      for (std::size_t k = i; k < std::min(i + 8, in.rows.size()); ++k) in.rows[k] = (b >> (k - i)) & 1u ? 0 : 1;
    }
  }
  const bool want_maps = r.flag();
  const std::uint8_t bb = r.byte();
  int broken = bb < 0xF0 ? 0 : 1 + bb % 8;
  const std::uint8_t gb = r.byte();
  const int bwd_broken = gb < 0xF0 ? 0 : 1 + gb % 5;
  // which gradients: bit 0 dX, 1 dX_kv, 2–5 dW_Q … dW_O, 6–9 db_Q … db_O (no bytes: all but dX_kv)
  unsigned which = (r.byte() | (static_cast<unsigned>(r.byte()) << 8)) ^ 0x3FDu;
  const bool accumulate = r.flag();
  const std::size_t jt = r.size_upto(255), js = r.size_upto(255);
  const bool fixed_call = r.flag();
  // dL/dX_kv in self-attention and dL/dW_O without W_O are refused: asked for only when broken
  // says so (3 and 4; 1 dY of the wrong shape, 2 dL/dW_Q, 5 a cache that holds no forward)
  if (!in.cross && bwd_broken != 3) which &= ~2u;
  if (!in.has_wo && bwd_broken != 4) which &= ~32u;

  in.X.resize(B * tq * in.d_model);
  in.Xkv.resize(in.cross ? B * n * in.d_kv : 0);
  // what the heads shape: the weights, the biases and dY (h heads over h_kv key/value heads)
  const std::array<std::vector<T>*, 9> of_heads = {&in.WQ, &in.WK, &in.WV, &in.WO, &in.bQ, &in.bK, &in.bV, &in.bO, &in.dY};
  const auto shape_heads = [&] {
    const std::size_t hq = in.h, hk = in.kvh();
    in.WQ.resize(in.d_model * hq * dk);
    in.WK.resize(in.d_kv * hk * dk);
    in.WV.resize(in.d_kv * hk * dv);
    in.WO.resize(in.has_wo ? hq * dv * in.d_out : 0);
    in.bQ.resize(biases & 1u ? hq * dk : 0);
    in.bK.resize(biases & 2u ? hk * dk : 0);
    in.bV.resize(biases & 4u ? hk * dv : 0);
    in.bO.resize(biases & 8u ? in.out_cols() : 0);
    in.dY.resize(B * tq * in.out_cols());
  };
  shape_heads();
  fill_numbers(r, in.X, in.wild);
  fill_numbers(r, in.Xkv, in.wild);
  for (std::vector<T>* x : of_heads) fill_numbers(r, *x, in.wild);
  std::vector<T> init(64);
  fill_numbers(r, init, false);

  // garbage where no output may see it: the padding of X_kv (keys no query of the sentence
  // sees), the rows of X that see no key (self-attention: and that no query sees as a key)
  bool garbage_in = false;
  for (std::size_t b = 0; b < B && (garbage_bits & 1u) != 0; ++b) {
    const unit_masks m = in.masks(b);
    for (std::size_t j = 0; j < n; ++j) {
      const bool key_unseen = !m.seen(j);
      if (in.cross && key_unseen) {
        for (std::size_t c = 0; c < in.d_kv; ++c) in.Xkv[(b * n + j) * in.d_kv + c] = garbage<T>(r);
        garbage_in = true;
      }
      if (!in.cross && key_unseen && !m.any(j)) {
        for (std::size_t c = 0; c < in.d_model; ++c) in.X[(b * tq + j) * in.d_model + c] = garbage<T>(r);
        garbage_in = true;
      }
    }
    for (std::size_t t = 0; t < tq && in.cross; ++t)
      if (!m.any(t)) {
        for (std::size_t c = 0; c < in.d_model; ++c) in.X[(b * tq + t) * in.d_model + c] = garbage<T>(r);
        garbage_in = true;
      }
  }
  // grouped-query attention: a byte after all of the above (0 in the inputs that end before it,
  // as every seed written before it did: h_kv = h, those inputs keep their meaning). Else h and
  // h_kv from the table, and the weights, the biases and dY drawn again for them; now and then
  // (broken 9) an h_kv that does not divide h
  const std::uint8_t gq = r.byte();
  if (gq != 0 && in.dk != 257) {
    static constexpr std::size_t grouping[8][2] = {{2, 1}, {3, 1}, {4, 2}, {4, 1}, {6, 3}, {6, 2}, {4, 4}, {2, 2}};
    in.h = grouping[gq % 8][0];
    in.kv = grouping[gq % 8][1];
    if ((gq & 0x70u) == 0x70u && broken == 0) broken = 9;
    shape_heads();
    for (std::vector<T>* x : of_heads) fill_numbers(r, *x, in.wild);
  }
  const std::size_t h = in.h, hk = in.kvh();
  if ((garbage_bits & 2u) != 0 && !in.dY.empty()) {  // NaN in dY of one row
    in.dY[(jt * 7 + js) % in.dY.size()] = std::numeric_limits<T>::quiet_NaN();
    garbage_in = true;
  }
  if (verbose) {
    std::fprintf(stderr, "%s; ", sizeof(T) == sizeof(float) ? "float" : sizeof(T) == sizeof(double) ? "double" : "long double");
    std::fprintf(stderr, "%s, B %zu, T %zu, n %zu, d_model %zu, d_kv %zu, h %zu, d_k %zu, d_v %zu, W_O %d (d_out %zu), "
                 "biases %u, scale %g, beta %g, policy %d, key mask %zu, row mask %zu, causal %d, threads %zu, maps %d, "
                 "broken %d/%d, gradients %u, accumulate %d, garbage %u, t %zu, s %zu, h_kv %zu (kv_heads %zu)\n",
                 in.cross ? "cross" : "self", B, tq, n, in.d_model, in.d_kv, h, dk, dv, in.has_wo ? 1 : 0, in.d_out, biases,
                 in.scale ? *in.scale : -99.0, in.beta, static_cast<int>(in.policy), in.keys.size(), in.rows.size(),
                 in.causal ? 1 : 0, threads, want_maps ? 1 : 0, broken, bwd_broken, which, accumulate ? 1 : 0,
                 garbage_bits, jt, js, hk, in.kv);
    dump<T>("X", in.X);
    dump<T>("X_kv", in.Xkv);
    dump<T>("W_Q", in.WQ);
    dump<T>("W_K", in.WK);
    dump<T>("W_V", in.WV);
    dump<T>("W_O", in.WO);
    dump<T>("dY", in.dY);
  }

  // what attn gets, now and then of a wrong size: 1 b_Q, 3 the key mask, 4 the batch, 5 the scale
  // (domain_error), 6 the row mask, 8 W_K's rows, 9 h_kv; 2 Y and 7 the maps (outputs)
  std::vector<T> bQx = in.bQ, WKx = in.WK;
  if (broken == 1) bQx.assign(h * dk + 1, T(0));
  if (broken == 8) WKx.resize((in.d_kv + 1) * hk * dk, T(0));
  std::vector<char> keys_x = in.keys, rows_x = in.rows;
  if (broken == 3) keys_x.assign(B * n + 1, 1);
  if (broken == 6) rows_x.assign((B * tq + 1) * n, 1);
  std::size_t batch = B, heads = h;
  if (broken == 4) {
    if (B == 1) heads = 0;  // no heads
    else batch = B + 1;     // X of B·T rows is not B + 1 sentences… unless it is: then no heads
    if (B > 1 && (B * tq) % batch == 0 && (B * n) % batch == 0) heads = 0;
  }
  attn::multi_head_parameters<T> p{.W_Q = CMV(in.WQ.data(), in.d_model, h * dk),
                                   .W_K = CMV(WKx.data(), broken == 8 ? in.d_kv + 1 : in.d_kv, hk * dk),
                                   .W_V = CMV(in.WV.data(), in.d_kv, hk * dv),
                                   .b_Q = bQx,
                                   .b_K = in.bK,
                                   .b_V = in.bV,
                                   .b_O = in.bO,
                                   .heads = heads,
                                   .score = attn::dot_scaled_by{broken == 5 ? std::numeric_limits<double>::quiet_NaN() : in.scale.value_or(0)}};
  if (broken != 5 && !in.scale) p.score = attn::scaled_dot;
  if (in.has_wo) p.W_O = CMV(in.WO.data(), h * dv, in.d_out);
  p.kv_heads = broken == 9 ? h + 1 : in.kv;  // (h + 1 divides no h)
  attn::options opt{.beta = in.beta, .if_all_masked = in.policy, .causal = in.causal};
  if (!keys_x.empty()) opt.mask = attn::mask_view(keys_x);
  if (!rows_x.empty()) opt.row_mask = attn::mask_matrix_view(rows_x.data(), broken == 6 ? B * tq + 1 : B * tq, n);
  const CMV X(in.X.data(), B * tq, in.d_model), Xkv(in.cross ? in.Xkv.data() : in.X.data(), B * n, in.d_kv);
  const std::size_t dc = in.out_cols(), rows = B * tq;

  const bool inputs_ok = broken == 0 || broken == 2 || broken == 7;
  const bool dim_broken = broken == 1 || broken == 3 || broken == 4 || broken == 6 || broken == 8 || broken == 9;
  heads_ref<T> ref(in);
  if (inputs_ok) ref.forward();

  // multi_head_attention into views
  guarded<T> Y((rows + (broken == 2 ? 1 : 0)) * dc), maps(want_maps ? (h * rows + (broken == 7 ? 1 : 0)) * n : 0);
  const auto views = [&](guarded<T>& y, guarded<T>& a) {
    attn::multi_head_views<T> v{.out = MV(y.data.data(), rows + (broken == 2 ? 1 : 0), dc)};
    if (want_maps) v.maps = MV(a.data.data(), h * rows + (broken == 7 ? 1 : 0), n);
    return v;
  };
  const auto call = [&](guarded<T>& y, guarded<T>& a, attn::multi_head_cache<T>& cache, std::size_t th) {
    return thrown_documented("multi_head_attention", [&] {
      if (in.cross)
        attn::multi_head_attention(X, Xkv, p, views(y, a), cache, opt, batch, th);
      else
        attn::multi_head_attention(X, p, views(y, a), cache, opt, batch, th);
    });
  };
  attn::multi_head_cache<T> cache;
  const int got = call(Y, maps, cache, 1);
  const bool out_broken = broken == 2 || (broken == 7 && want_maps);
  int expected = 0;
  if (dim_broken) expected = 1;
  else if (!beta_ok<T>(in.beta) || broken == 5) expected = 2;
  else if (out_broken) expected = 1;
  else if (in.policy == attn::all_masked_policy::throw_error && ref.must_throw) expected = 2;
  const bool either = expected == 0 && in.policy == attn::all_masked_policy::throw_error && ref.may_throw;
  ATTN_FUZZ_CHECK(got == expected || (either && got == 2), "multi_head_attention threw %d, expected %d", got, expected);
  if (got != 0) ATTN_FUZZ_CHECK(Y.untouched() && maps.untouched(), "multi_head_attention: a throw wrote to Y or the maps");

  // on threads: the same exception or the same bits (Y, the maps, the cache)
  {
    guarded<T> Y2(Y.data.size()), maps2(maps.data.size());
    attn::multi_head_cache<T> cache2;
    const int got2 = call(Y2, maps2, cache2, threads);
    ATTN_FUZZ_CHECK(got2 == got, "multi_head_attention on %zu threads threw %d, one thread %d", threads, got2, got);
    if (got2 != 0) {
      ATTN_FUZZ_CHECK(Y2.untouched() && maps2.untouched(), "multi_head_attention on threads: a throw wrote");
    } else {
      const auto same = [](const attn::Matrix<T>& a, const attn::Matrix<T>& b) {
        return a.rows() == b.rows() && a.cols() == b.cols() && same_bits(a.data(), b.data(), a.rows() * a.cols());
      };
      ATTN_FUZZ_CHECK(same_bits(Y2.data, Y.data) && same_bits(maps2.data, maps.data) && same(cache2.queries, cache.queries) &&
                          same(cache2.keys, cache.keys) && same(cache2.values, cache.values) &&
                          same(cache2.heads_out, cache.heads_out) && same(cache2.logsumexp, cache.logsumexp),
                      "multi_head_attention on %zu threads is not the one-thread call bit for bit", threads);
    }
  }
  if (got != 0) return;
  // the returning form
  {
    attn::multi_head_result<T> res;
    const int got3 = thrown_documented("the returning multi_head_attention", [&] {
      res = in.cross ? attn::multi_head_attention(X, Xkv, p, opt, batch, threads)
                     : attn::multi_head_attention(X, p, opt, batch, threads);
    });
    ATTN_FUZZ_CHECK(got3 == 0 && same_bits(res.out.data(), Y.data.data(), rows * dc),
                    "the returning multi_head_attention on %zu threads differs (threw %d)", threads, got3);
  }
  check_forward<T>("multi_head_attention: Y", ref, Y.data.data(), cache.heads_out.data(),
                   want_maps ? maps.data.data() : nullptr);

  // self_attention / cross_attention: every step (one sentence, no biases)
  const bool fixed_shapes = (in.cross ? h == 1 && !in.has_wo : h == 1 || in.has_wo) && hk == h && h <= 3;
  if (fixed_call && B == 1 && in.bQ.empty() && in.bK.empty() && in.bV.empty() && in.bO.empty() && fixed_shapes) {
    const auto mat = [](const std::vector<T>& x, std::size_t r0, std::size_t c0) {
      attn::Matrix<T> m(r0, c0);
      for (std::size_t i = 0; i < r0 * c0; ++i) m.data()[i] = x[i];
      return m;
    };
    const attn::Matrix<T> Xm = mat(in.X, tq, in.d_model), WQm = mat(in.WQ, in.d_model, h * dk),
                          WKm = mat(in.WK, in.d_kv, h * dk), WVm = mat(in.WV, in.d_kv, h * dv);
    const auto check_steps = [&](const auto& res) {
      for (std::size_t t = 0; t < tq; ++t)
        for (std::size_t c = 0; c < h * dk; ++c) expect_near<T>("self/cross_attention: Q", t, c, res.queries(t, c), ref.Q[t * h * dk + c]);
      for (std::size_t j = 0; j < n; ++j) {
        for (std::size_t c = 0; c < h * dk; ++c) expect_near<T>("self/cross_attention: K", j, c, res.keys(j, c), ref.K[j * h * dk + c]);
        for (std::size_t c = 0; c < h * dv; ++c) expect_near<T>("self/cross_attention: V", j, c, res.values(j, c), ref.V[j * h * dv + c]);
      }
      check_forward<T>("self/cross_attention: Y", ref, res.out.data(), res.heads_out.data(), res.maps.data());
    };
    const auto with = [&](auto&& f) {
      if (in.scale) f(attn::dot_scaled_by{*in.scale});
      else f(attn::scaled_dot);
    };
    with([&](const auto& score) {
      if (in.cross) {
        const attn::Matrix<T> Xkvm = mat(in.Xkv, n, in.d_kv);
        check_steps(attn::cross_attention(Xm, Xkvm, WQm, WKm, WVm, opt, score));
      } else if (!in.has_wo) {
        check_steps(attn::self_attention(Xm, WQm, WKm, WVm, opt, score));
      } else {
        const attn::Matrix<T> WOm = mat(in.WO, h * dv, in.d_out);
        if (h == 1) check_steps(attn::self_attention<1>(Xm, WQm, WKm, WVm, WOm, opt, score));
        else if (h == 2) check_steps(attn::self_attention<2>(Xm, WQm, WKm, WVm, WOm, opt, score));
        else check_steps(attn::self_attention<3>(Xm, WQm, WKm, WVm, WOm, opt, score));
      }
    });
  }

  // the backward
  grads<T> g(in, which, bwd_broken);
  const bool give_xkv = (which & 2u) != 0;
  for (guarded<T>* b : g.all()) {  // accumulating: numbers to add to
    if (!accumulate) continue;
    for (std::size_t i = 0; i < b->data.size(); ++i) b->data[i] = init[i % init.size()];
    if (!b->data.empty()) std::memcpy(b->bytes.data(), b->data.data(), b->bytes.size());
  }
  std::vector<std::vector<T>> held;
  for (guarded<T>* b : g.all()) held.push_back(b->data);
  std::vector<T> dYx = in.dY;
  if (bwd_broken == 1) dYx.resize((rows + 1) * dc, T(0));
  const CMV dYv(dYx.data(), rows + (bwd_broken == 1 ? 1 : 0), dc);
  attn::multi_head_cache<T> fresh;  // bwd_broken 5: a cache that holds no forward
  const auto gradient_views = [&](grads<T>& gg) {
    attn::multi_head_gradients<T> v{.accumulate = accumulate};
    if (!gg.X.data.empty()) v.inputs = MV(gg.X.data.data(), rows, in.d_model);
    if (!gg.Xkv.data.empty()) v.kv_inputs = MV(gg.Xkv.data.data(), B * n, in.d_kv);
    if (!gg.WQ.data.empty()) v.W_Q = MV(gg.WQ.data.data(), in.d_model + (bwd_broken == 2 ? 1 : 0), h * dk);
    if (!gg.WK.data.empty()) v.W_K = MV(gg.WK.data.data(), in.d_kv, hk * dk);
    if (!gg.WV.data.empty()) v.W_V = MV(gg.WV.data.data(), in.d_kv, hk * dv);
    if (!gg.WO.data.empty()) v.W_O = MV(gg.WO.data.data(), h * dv, dc);
    v.b_Q = gg.bQ.data, v.b_K = gg.bK.data, v.b_V = gg.bV.data, v.b_O = gg.bO.data;
    return v;
  };
  const auto backward = [&](grads<T>& gg, attn::multi_head_cache<T>& c, std::size_t th) {
    return thrown_documented("multi_head_attention_backward", [&] {
      attn::multi_head_cache<T>& use = bwd_broken == 5 ? fresh : c;
      if (in.cross)
        attn::multi_head_attention_backward(X, Xkv, p, use, dYv, gradient_views(gg), opt, batch, th);
      else
        attn::multi_head_attention_backward(X, p, use, dYv, gradient_views(gg), opt, batch, th);
    });
  };
  const int gotb = backward(g, cache, 1);
  const bool wo_without = !g.WO.data.empty() && !in.has_wo;  // dL/dW_O given, no W_O
  // (the gradients' shapes are checked first: dimension_error; then a cache that holds no
  // forward: forward_mismatch_error)
  const int expected_b = bwd_broken == 1 || (bwd_broken == 2 && !g.WQ.data.empty()) || (give_xkv && !in.cross) ||
                                 wo_without
                             ? 1
                             : bwd_broken == 5 ? 3 : 0;
  ATTN_FUZZ_CHECK(gotb == expected_b, "multi_head_attention_backward threw %d, expected %d", gotb, expected_b);
  {
    grads<T> g2(in, which, bwd_broken);
    for (std::size_t k = 0; k < g2.all().size(); ++k) {
      guarded<T>* b = g2.all()[k];
      if (!accumulate) continue;
      b->data = held[k];
      if (!b->data.empty()) std::memcpy(b->bytes.data(), b->data.data(), b->bytes.size());
    }
    attn::multi_head_cache<T> c2 = cache;
    const int gotb2 = backward(g2, c2, threads);
    ATTN_FUZZ_CHECK(gotb2 == gotb, "multi_head_attention_backward on %zu threads threw %d, one thread %d", threads, gotb2, gotb);
    for (std::size_t k = 0; k < g.all().size(); ++k)
      ATTN_FUZZ_CHECK(gotb != 0 ? g2.all()[k]->untouched() : same_bits(g2.all()[k]->data, g.all()[k]->data),
                      "multi_head_attention_backward on %zu threads: gradient %zu is not the one-thread call's", threads, k);
  }
  if (gotb != 0) {
    for (guarded<T>* b : g.all()) ATTN_FUZZ_CHECK(b->untouched(), "multi_head_attention_backward: a throw wrote to a gradient");
  } else {
    {
      (void)garbage_in;
      ref.backward();
      const auto check = [&](const char* what, const guarded<T>& got_g, const std::vector<acc<T>>& want, std::size_t cols,
                             const std::vector<T>& before) {
        for (std::size_t i = 0; i < got_g.data.size(); ++i)
          expect_gradient<T>(what, i / cols, i % cols, got_g.data[i], want[i], accumulate, before[i]);
      };
      check("dL/dX", g.X, ref.dX, in.d_model, held[0]);
      if (in.cross) check("dL/dX_kv", g.Xkv, ref.dXkv, in.d_kv, held[1]);
      check("dL/dW_Q", g.WQ, ref.dWQ, h * dk, held[2]);
      check("dL/dW_K", g.WK, ref.dWK, hk * dk, held[3]);
      check("dL/dW_V", g.WV, ref.dWV, std::max<std::size_t>(hk * dv, 1), held[4]);
      if (in.has_wo) check("dL/dW_O", g.WO, ref.dWO, dc, held[5]);
      check("dL/db_Q", g.bQ, ref.dbQ, h * dk, held[6]);
      check("dL/db_K", g.bK, ref.dbK, hk * dk, held[7]);
      check("dL/db_V", g.bV, ref.dbV, std::max<std::size_t>(hk * dv, 1), held[8]);
      check("dL/db_O", g.bO, ref.dbO, dc, held[9]);
    }
  }

  // jacobian_input (self-attention, one sentence)
  if (in.cross || B != 1 || !beta_ok<T>(in.beta)) return;
  const std::size_t t = jt % (tq + 1), s = js % (tq + 1);  // tq: out of range
  const bool wrong_shape = (garbage_bits & 0x80u) != 0;
  guarded<T> J((dc + (wrong_shape ? 1 : 0)) * in.d_model);
  const int gotj = thrown_documented("jacobian_input", [&] {
    attn::jacobian_input(X, p, t, s, MV(J.data.data(), dc + (wrong_shape ? 1 : 0), in.d_model), opt);
  });
  const int expected_j = wrong_shape || t >= tq || s >= tq ? 1 : 0;
  ATTN_FUZZ_CHECK(gotj == expected_j || (either && gotj == 2 && expected_j == 0), "jacobian_input threw %d, expected %d",
                  gotj, expected_j);
  if (gotj != 0) {
    ATTN_FUZZ_CHECK(J.untouched(), "jacobian_input: a throw wrote to the Jacobian");
    return;
  }
  // J = Σ_i W_O,iᵀ J_i, J_i = α_s W_V,iᵀ + c [δ_ts Σ_j α_j (v_j − z_t)(W_Q,i k_j)ᵀ + α_s (v_s − z_t)(W_K,i q_t)ᵀ]
  const auto e = [](T x) { return E{static_cast<ld>(x), 0}; };
  const ld cv = static_cast<ld>(beta_as<T>(in.beta)) * ref.scale_t;
  const E cE{cv, 3 * prec<T>::eps * std::abs(cv)};
  std::vector<acc<T>> Jref(dc * in.d_model);
  for (std::size_t i = 0; i < h; ++i) {
    const attention_ref<T>& u = ref.units[i];
    const std::size_t gi = in.kv_of(i);  // its key/value head
    if (u.kind[t] == row_is::uncertain || u.kind[t] == row_is::nan) return;
    const bool flows = u.kind[t] == row_is::finite;
    std::vector<E> Ji(dv * in.d_model);
    for (std::size_t a = 0; a < dv; ++a)
      for (std::size_t m = 0; m < in.d_model; ++m) {
        acc<T> x;
        x.add(u.A[t * n + s], e(in.WV[m * hk * dv + gi * dv + a]));
        // (W u)_m: W's head w_head of w_heads, u the head u_head of u_heads of vec_of's row
        const auto outer = [&](std::size_t j, const std::vector<T>& W, std::size_t w_heads, std::size_t w_head,
                               const std::vector<E>& vec_of, std::size_t u_heads, std::size_t u_head, std::size_t row) {
          acc<T> w;
          for (std::size_t c = 0; c < dk; ++c)
            w.add(e(W[m * w_heads * dk + w_head * dk + c]), vec_of[row * u_heads * dk + u_head * dk + c]);
          const E f = mul<T>(cE, mul<T>(u.A[t * n + j], sub<T>(u.V[j * dv + a], u.Y[t * dv + a])));
          x.add(f, w.get());
        };
        if (flows) {
          if (t == s)
            for (std::size_t j = 0; j < n; ++j)
              if (u.m.kept(t, j)) outer(j, in.WQ, h, i, ref.K, hk, gi, j);
          if (u.m.kept(t, s)) outer(s, in.WK, hk, gi, ref.Q, h, i, t);
        }
        Ji[a * in.d_model + m] = x.get();
      }
    for (std::size_t m = 0; m < in.d_model; ++m) {
      if (in.has_wo) {
        for (std::size_t o = 0; o < dc; ++o)
          for (std::size_t a = 0; a < dv; ++a) Jref[o * in.d_model + m].add(e(in.WO[(i * dv + a) * dc + o]), Ji[a * in.d_model + m]);
      } else {
        for (std::size_t a = 0; a < dv; ++a) Jref[(i * dv + a) * in.d_model + m].add(Ji[a * in.d_model + m]);
      }
    }
  }
  for (std::size_t o = 0; o < dc; ++o)
    for (std::size_t m = 0; m < in.d_model; ++m) {
      const acc<T>& x = Jref[o * in.d_model + m];
      expect_near<T>("jacobian_input", o, m, J.data[o * in.d_model + m], x.terms == 0 ? E{0, 0} : x.get());
    }
}

}  // namespace

ATTN_FUZZ_FLOAT_DOUBLE_LONG_DOUBLE(run)
