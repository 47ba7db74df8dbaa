// libFuzzer target: scaled_dot_product_attention and its backward (attn/sdpa.hpp,
// attn/sdpa_backward.hpp) in float, double and long double, T queries over n keys (up to 130 and
// 140, across the tiles' edges: MR rows, key blocks of 16, 64 or 128; now and then keys of 257
// numbers, which the tiled kernel leaves to the exact path), with dot, scaled_dot or
// dot_scaled_by, any β, a key mask, a row mask, causal (T ≠ n too), every all-masked policy;
// clean inputs with NaN, ±inf or ±max put where no output may see them (the keys no row sees, the
// queries and dY of rows that see no key), NaN in dY of one row, or any numbers. Checks
// (docs/errors.md, "Fuzzing"):
// - exactly the documented exceptions (sizes, β, throw_error), every output untouched on a throw;
// - the forward against the long double reference of fuzz_many.hpp: rows that see no key follow
//   the policy exactly, NaN rows are NaN, +inf rows share exactly, masked weights are exactly 0,
//   and Y, the weights, the scores and L lie within their bounds;
// - the threads overload (0, 1, 2, 3, 4 threads, 2^61 and SIZE_MAX) is the one-thread call bit
//   for bit; so are the returning forms;
// - the backward (from the saved Y and L, or recomputing them; accumulating or not; gradients
//   left out; dL/dS given or not): every gradient no term reaches (masked keys, whatever they
//   hold) exactly 0, the nan policy's NaN where documented, and every other within its bound of
//   the reference: a gradient of finite inputs is finite whatever the masked places hold; dL/dS
//   entry by entry (masked and unmoving rows exactly 0, NaN rows NaN, the rest within bounds);
//   its threads overload the one-thread call bit for bit (or the same exception, nothing written);
// - a bias on the logits: zeros are no bias, ALiBi in the tiles is alibi_bias's matrix, threads
//   are one thread, forward and backward, bit for bit; a wrong shape refused, nothing written.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "fuzz_many.hpp"

namespace {

using namespace attn_fuzz;

/// Calls f(score) with the score the input picked: scaled_dot, dot or dot_scaled_by{factor}.
template <class F>
void with_score(int kind, double factor, F&& f) {
  if (kind == 0) f(attn::scaled_dot);
  else if (kind == 1) f(attn::dot);
  else f(attn::dot_scaled_by{factor});
}

template <class T>
void run(reader& r) {
  using MV = attn::MatrixView<T>;
  using CMV = attn::MatrixView<const T>;
  // first what the rules turn on (so that short inputs reach them): the numbers, garbage, threads
  const bool wild = r.byte() % 4 == 0;
  const std::uint8_t garbage_bits = r.byte();  // where garbage goes: 1 keys, 2 rows, 4 dY
  const std::uint8_t threads_byte = r.byte();
  const bool causal = r.flag();
  const attn::all_masked_policy policy = r.policy();
  const bool big = r.byte() >= 0xF0;
  std::size_t tq = 1 + r.size_upto(big ? 129 : 13), n = 1 + r.size_upto(big ? 139 : 20);
  const std::uint8_t dk_byte = r.byte();  // now and then keys of 257 numbers: past the tiled kernel
  const std::size_t dk = dk_byte >= 0xFC ? 257 : dk_byte % (big ? 21u : 9u), dv = r.size_upto(big ? 20 : 8);
  // the cost: about T·n·(d_k + d_v) per pass, long double's reference the dearest
  const std::size_t budget = std::is_same_v<T, long double> ? 2000 : 6000;
  while (tq * n * (dk + dv + 2) > budget) (tq > n ? tq : n) = (tq > n ? tq : n) * 3 / 4;
  const std::uint8_t bb = r.byte();
  const int broken = bb < 0xF0 ? 0 : 1 + bb % 8;  // 1–6: the inputs, 7–8: an output
  const std::uint8_t gb = r.byte();
  const int bwd_broken = gb < 0xF0 ? 0 : 1 + gb % 6;
  const int score_kind = r.byte() % 3;
  static constexpr double factors[8] = {0.125, 0.5, 2, 1e-3, 0, -1, 3, 1e20};
  const double factor = factors[r.byte() % 8];
  const double beta = r.beta();
  std::vector<char> keys = r.mask(n);
  std::vector<char> rows;
  if (r.flag()) {
    rows.resize(tq * n);
    for (std::size_t i = 0; i < rows.size(); i += 8) {
      const std::uint8_t b = r.byte();
      for (std::size_t k = i; k < std::min(i + 8, rows.size()); ++k) rows[k] = (b >> (k - i)) & 1u ? 0 : 1;
    }
  }
  const std::uint8_t outs = r.byte();  // which outputs: weights, scores, L
  const bool want_weights = (outs & 1u) != 0, want_scores = (outs & 2u) != 0, want_lse = (outs & 4u) == 0;
  std::size_t threads = thread_count(threads_byte);
  const std::uint8_t bw = r.byte();  // the backward: accumulate, gradients left out, recompute
  const bool accumulate = (bw & 1u) != 0, no_dq = (bw & 2u) != 0, no_dk = (bw & 4u) != 0,
             no_dv = (bw & 8u) != 0, recompute = (bw & 16u) != 0 || !want_lse;
  // dL/dS: from an early byte too (the threads' unused bit), so that short inputs reach it
  const bool want_ds = (bw & 32u) != 0 || (threads_byte & 8u) != 0;
  const std::size_t nan_row = r.size_upto(255) % tq;

  std::vector<T> Q(tq * dk), K(n * dk), V(n * dv), dY(tq * dv), init(64);
  fill_numbers(r, Q, wild);
  fill_numbers(r, K, wild);
  fill_numbers(r, V, wild);
  fill_numbers(r, dY, wild);
  fill_numbers(r, init, false);  // what accumulating gradients hold before

  unit_masks m{keys.empty() ? nullptr : keys.data(), rows.empty() ? nullptr : rows.data(), causal, tq, n};
  bool garbage_in = false;
  if ((garbage_bits & 1u) != 0)  // the keys no row sees
    for (std::size_t j = 0; j < n; ++j)
      if (!m.seen(j)) {
        for (std::size_t i = 0; i < dk; ++i) K[j * dk + i] = garbage<T>(r);
        for (std::size_t i = 0; i < dv; ++i) V[j * dv + i] = garbage<T>(r);
        garbage_in = garbage_in || dk + dv > 0;
      }
  if ((garbage_bits & 2u) != 0)  // the queries and dY of rows that see no key
    for (std::size_t t = 0; t < tq; ++t)
      if (!m.any(t)) {
        for (std::size_t i = 0; i < dk; ++i) Q[t * dk + i] = garbage<T>(r);
        for (std::size_t i = 0; i < dv; ++i) dY[t * dv + i] = garbage<T>(r);
        garbage_in = garbage_in || dk + dv > 0;
      }
  if ((garbage_bits & 4u) != 0 && dv > 0) {  // NaN in dY of one row
    dY[nan_row * dv + r.size_upto(255) % dv] = std::numeric_limits<T>::quiet_NaN();
    garbage_in = true;
  }

  if (verbose) {
    std::fprintf(stderr, "%s; ", sizeof(T) == sizeof(float) ? "float" : sizeof(T) == sizeof(double) ? "double" : "long double");
    std::fprintf(stderr, "T %zu, n %zu, d_k %zu, d_v %zu, broken %d/%d, score %d (%g), beta %g, policy %d, causal %d, "
                 "key mask %zu, row mask %zu, outputs %u, threads %zu, backward %u, garbage %u\n",
                 tq, n, dk, dv, broken, bwd_broken, score_kind, factor, beta, static_cast<int>(policy), causal ? 1 : 0,
                 keys.size(), rows.size(), outs, threads, bw, garbage_bits);
    dump<T>("Q", Q);
    dump<T>("K", K);
    dump<T>("V", V);
    dump<T>("dY", dY);
    std::fprintf(stderr, "key mask:");
    for (const char c : keys) std::fprintf(stderr, " %d", c);
    std::fprintf(stderr, "\n");
  }

  // the inputs as attn gets them, now and then of a wrong size (broken 1–6)
  const std::size_t tq_in = broken == 1 ? 0 : tq, n_in = broken == 2 ? 0 : n;
  std::vector<T> Qx = Q, Vx = V;
  if (broken == 3) Vx.resize((n + 1) * dv, T(1));
  if (broken == 4) Qx.resize(tq * (dk + 1), T(1));
  std::vector<char> keys_x = keys, rows_x = rows;
  if (broken == 5) keys_x.resize(n + 1, 1);
  if (broken == 6) rows_x.resize((tq + 1) * n, 1);
  const CMV Qv(Qx.data(), tq_in, broken == 4 ? dk + 1 : dk), Kv(K.data(), n_in, dk),
      Vv(Vx.data(), broken == 3 ? n + 1 : n_in, dv);
  attn::options opt{.beta = beta, .if_all_masked = policy, .causal = causal};
  if (!keys_x.empty()) opt.mask = attn::mask_view(keys_x);
  if (!rows_x.empty()) opt.row_mask = attn::mask_matrix_view(rows_x.data(), broken == 6 ? tq + 1 : tq, n);

  // the reference
  attention_ref<T> ref;
  const bool inputs_ok = broken == 0 || broken > 6;
  if (inputs_ok) {
    ref.tq = tq, ref.n = n, ref.dk = dk, ref.dv = dv;
    const auto as_e = [](const std::vector<T>& x) {
      std::vector<E> e(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) e[i] = E{static_cast<ld>(x[i]), 0};
      return e;
    };
    ref.Q = as_e(Q), ref.K = as_e(K), ref.V = as_e(V);
    T f = T(1);
    with_score(score_kind, factor, [&](const auto& s) { f = s.template scale<T>(dk); });
    ref.f = static_cast<ld>(f);
    ref.beta = static_cast<ld>(beta_as<T>(beta));
    ref.m = m;
    ref.policy = policy;
    ref.forward();
  }

  // the forward into views
  // broken 7: Y of the wrong shape; 8: the weights, else L, else Y
  const bool bad_a = broken == 8 && want_weights, bad_l = broken == 8 && !want_weights && want_lse;
  const bool bad_y = broken == 7 || (broken == 8 && !bad_a && !bad_l);
  const bool out_broken = bad_y || bad_a || bad_l;
  const std::size_t dv_out = bad_y ? dv + 1 : dv;
  guarded<T> Y(tq * dv_out), A(want_weights ? tq * (n + (bad_a ? 1 : 0)) : 0), S(want_scores ? tq * n : 0),
      L(want_lse ? tq + (bad_l ? 1 : 0) : 0);
  const auto views = [&](guarded<T>& y, guarded<T>& a, guarded<T>& s, guarded<T>& l) {
    attn::attention_views<T> v{.out = MV(y.data.data(), tq, dv_out)};
    if (want_weights) v.weights = MV(a.data.data(), tq, n + (bad_a ? 1 : 0));
    if (want_scores) v.scores = MV(s.data.data(), tq, n);
    if (want_lse) v.logsumexp = std::span<T>(l.data);
    return v;
  };
  const int got = thrown_documented("scaled_dot_product_attention", [&] {
    with_score(score_kind, factor, [&](const auto& s) {
      attn::scaled_dot_product_attention(Qv, Kv, Vv, s, views(Y, A, S, L), opt);
    });
  });
  int expected = 0;
  bool either = false;  // throw_error and a row whose kind T's overflow decides
  if (!inputs_ok) expected = 1;
  else if (!beta_ok<T>(beta)) expected = 2;
  else if (policy == attn::all_masked_policy::throw_error && ref.must_throw) expected = 2;
  else if (out_broken) expected = 1;
  if (inputs_ok && beta_ok<T>(beta) && policy == attn::all_masked_policy::throw_error && !ref.must_throw && ref.may_throw)
    either = true;
  ATTN_FUZZ_CHECK(got == expected || (either && got == 2), "scaled_dot_product_attention threw %d, expected %d", got,
                  expected);
  if (got != 0)
    ATTN_FUZZ_CHECK(Y.untouched() && A.untouched() && S.untouched() && L.untouched(),
                    "scaled_dot_product_attention: a throw wrote to an output");

  // the threads overload: the same exception, or the same bits
  {
    guarded<T> Y2(Y.data.size()), A2(A.data.size()), S2(S.data.size()), L2(L.data.size());
    const int got2 = thrown_documented("scaled_dot_product_attention on threads", [&] {
      with_score(score_kind, factor, [&](const auto& s) {
        attn::scaled_dot_product_attention(Qv, Kv, Vv, s, views(Y2, A2, S2, L2), opt, threads);
      });
    });
    ATTN_FUZZ_CHECK(got2 == got, "scaled_dot_product_attention on %zu threads threw %d, one thread %d", threads, got2, got);
    if (got2 != 0)
      ATTN_FUZZ_CHECK(Y2.untouched() && A2.untouched() && S2.untouched() && L2.untouched(),
                      "scaled_dot_product_attention on threads: a throw wrote to an output");
    else
      ATTN_FUZZ_CHECK(same_bits(Y2.data, Y.data) && same_bits(A2.data, A.data) && same_bits(S2.data, S.data) &&
                          same_bits(L2.data, L.data),
                      "scaled_dot_product_attention on %zu threads is not the one-thread call bit for bit", threads);
  }
  if (!inputs_ok) {
    // the backward refuses the same inputs, writing nothing
    guarded<T> gq(tq * dk), gk(n * dk), gv(n * dv);
    const int gotb = thrown_documented("scaled_dot_product_attention_backward", [&] {
      with_score(score_kind, factor, [&](const auto& s) {
        attn::scaled_dot_product_attention_backward(
            Qv, Kv, Vv, s, attn::saved_attention<T>{}, CMV(dY.data(), tq, dv),
            attn::attention_gradients<T>{MV(gq.data.data(), tq, dk), MV(gk.data.data(), n, dk), MV(gv.data.data(), n, dv)},
            opt);
      });
    });
    ATTN_FUZZ_CHECK(gotb == 1, "scaled_dot_product_attention_backward threw %d on inputs of the wrong size", gotb);
    ATTN_FUZZ_CHECK(gq.untouched() && gk.untouched() && gv.untouched(), "backward: a throw wrote to a gradient");
    return;
  }

  // the forward's rules and bounds, row by row (rows with skip[t] set left out)
  const auto check_rows = [&](const guarded<T>& Yg, const guarded<T>& Ag, const guarded<T>& Sg,
                              const guarded<T>& Lg, const std::vector<char>* skip) {
    for (std::size_t t = 0; t < tq; ++t) {
      if (skip != nullptr && (*skip)[t] != 0) continue;
      const row_is k = ref.kind[t];
      const T* y = Yg.data.data() + t * dv;
      const T* a = want_weights ? Ag.data.data() + t * n : nullptr;
      const T l = want_lse ? Lg.data[t] : T(0);
      if (want_scores)
        for (std::size_t j = 0; j < n; ++j) expect_near<T>("score", t, j, Sg.data[t * n + j], ref.S[t * n + j]);
      if (k == row_is::uncertain) continue;
      if (k == row_is::masked_out || k == row_is::none || k == row_is::nan) {
        const bool nan = k == row_is::nan || policy == attn::all_masked_policy::nan;
        if (nan) {
          for (std::size_t i = 0; i < dv; ++i) ATTN_FUZZ_CHECK(std::isnan(y[i]), "row %zu (kind %d): Y is %Lg, not NaN", t, int(k), ld(y[i]));
          for (std::size_t j = 0; a && j < n; ++j) ATTN_FUZZ_CHECK(std::isnan(a[j]), "row %zu: weight %zu is %Lg, not NaN", t, j, ld(a[j]));
          if (want_lse) ATTN_FUZZ_CHECK(std::isnan(l), "row %zu: L is %Lg, not NaN", t, ld(l));
          continue;
        }
        const bool uniform = policy == attn::all_masked_policy::uniform;
        for (std::size_t j = 0; a && j < n; ++j)
          ATTN_FUZZ_CHECK(a[j] == (uniform ? T(1) / static_cast<T>(n) : T(0)), "row %zu sees no key: weight %zu is %Lg", t,
                          j, ld(a[j]));
        if (want_lse) ATTN_FUZZ_CHECK(l == -std::numeric_limits<T>::infinity(), "row %zu sees no key: L is %Lg", t, ld(l));
        for (std::size_t i = 0; i < dv; ++i) {
          if (uniform)
            expect_near<T>("Y (uniform: the mean of the values)", t, i, y[i], ref.Y[t * dv + i]);
          else
            ATTN_FUZZ_CHECK(y[i] == T(0), "row %zu sees no key: Y %zu is %Lg, not 0", t, i, ld(y[i]));
        }
        continue;
      }
      for (std::size_t j = 0; a && j < n; ++j) {
        if (!m.kept(t, j)) {
          ATTN_FUZZ_CHECK(a[j] == T(0), "row %zu: masked key %zu has weight %Lg", t, j, ld(a[j]));
          continue;
        }
        if (k == row_is::pos_inf) {  // fl(1/count) for each +inf, exactly 0 for the others
          const ld w = ref.A[t * n + j].v;
          const T want = w == 0 ? T(0) : T(1) / static_cast<T>(std::llround(1 / w));
          ATTN_FUZZ_CHECK(a[j] == want, "row %zu (+inf): weight %zu is %Lg, not %Lg", t, j, ld(a[j]), ld(want));
        } else
          expect_near<T>("weight", t, j, a[j], ref.A[t * n + j]);
      }
      if (want_lse) {
        if (k == row_is::pos_inf)
          ATTN_FUZZ_CHECK(l == std::numeric_limits<T>::infinity(), "row %zu (+inf): L is %Lg", t, ld(l));
        else
          expect_near<T>("L", t, 0, l, ref.L[t]);
      }
      for (std::size_t i = 0; i < dv; ++i) expect_near<T>("Y", t, i, y[i], ref.Y[t * dv + i]);
    }
  };

  if (got == 0) {
    // the returning forms: the same bits
    if (!out_broken) {
      with_score(score_kind, factor, [&](const auto& s) {
        const auto res = attn::scaled_dot_product_attention(Qv, Kv, Vv, opt, s);
        for (std::size_t t = 0; t < tq; ++t) {
          for (std::size_t i = 0; i < dv; ++i)
            ATTN_FUZZ_CHECK(same_number(res.out(t, i), Y.data[t * dv + i]),
                            "the returning form's Y (%zu, %zu) is %.21Lg, the views' %.21Lg (with the weights %d, the scores %d: "
                            "Y does not change by a bit, docs/tiled-attention.md)", t, i,
                            static_cast<ld>(res.out(t, i)), static_cast<ld>(Y.data[t * dv + i]), want_weights ? 1 : 0,
                            want_scores ? 1 : 0);
          if (want_lse)
            ATTN_FUZZ_CHECK(same_number(res.logsumexp[t], L.data[t]),
                            "the returning form's L %zu is %.21Lg, the views' %.21Lg (with the weights %d, the "
                            "scores %d)", t, static_cast<ld>(res.logsumexp[t]), static_cast<ld>(L.data[t]),
                            want_weights ? 1 : 0, want_scores ? 1 : 0);
        }
      });
      if (score_kind == 0) {
        guarded<T> Y3(Y.data.size()), A3(A.data.size()), S3(S.data.size()), L3(L.data.size());
        attn::scaled_dot_product_attention(Qv, Kv, Vv, views(Y3, A3, S3, L3), opt);
        ATTN_FUZZ_CHECK(same_bits(Y3.data, Y.data) && same_bits(A3.data, A.data) && same_bits(S3.data, S.data) &&
                            same_bits(L3.data, L.data),
                        "scaled_dot_product_attention without a score is not scaled_dot's call");
      }
    }

    check_rows(Y, A, S, L, nullptr);
  }

  // a bias on the logits (attn/logit_bias.hpp), by its documented equalities: zeros are no bias,
  // ALiBi inside the tiles is alibi_bias's matrix, threads are one thread (bit for bit, numbers
  // equal or both NaN), forward and backward (recomputing the forward); a bias of the wrong shape
  // and ALiBi with more queries than keys are refused, nothing written
  if (got == 0 && !out_broken) {
    const std::uint8_t bias_byte = r.byte();
    static constexpr double slopes[4] = {0.0625, 0.5, 3, 1e-3};
    const T slope = static_cast<T>(slopes[bias_byte % 4]);
    const auto forward_with = [&](const attn::logit_bias<T>& b, std::size_t th, guarded<T>& y, guarded<T>& a,
                                  guarded<T>& s, guarded<T>& l) {
      return thrown_documented("scaled_dot_product_attention with a bias", [&] {
        with_score(score_kind, factor, [&](const auto& sc) {
          attn::scaled_dot_product_attention(Qv, Kv, Vv, sc, views(y, a, s, l), opt, b, th);
        });
      });
    };
    const auto fresh = [](const guarded<T>& like) { return guarded<T>(like.data.size()); };
    const auto same_forward = [&](guarded<T>& y, guarded<T>& a, guarded<T>& s, guarded<T>& l, guarded<T>& y2,
                                  guarded<T>& a2, guarded<T>& s2, guarded<T>& l2) {
      return same_bits(y.data, y2.data) && same_bits(a.data, a2.data) && same_bits(s.data, s2.data) &&
             same_bits(l.data, l2.data);
    };
    // (1) a bias of zeros: the rules and bounds of no bias, row by row, and its bits in the rows
    // the tiles keep (every kept score and value finite: the exact rows of a bias take softmax's
    // two passes on z, attend's may take its one pass). Rows where a kept finite score's β·s
    // overflows T are left out: without a bias softmax takes such a score as in exact arithmetic
    // (docs/softmax.md), with one the logit fl(β·s) + b is ±inf (docs/positions.md)
    const std::vector<T> zeros(tq * n, T(0));
    {
      guarded<T> y = fresh(Y), a = fresh(A), s = fresh(S), l = fresh(L);
      const int g = forward_with({CMV(zeros.data(), tq, n), T(0)}, 1, y, a, s, l);
      ATTN_FUZZ_CHECK(g == 0, "a bias of zeros threw %d where no bias did not", g);
      const ld top = static_cast<ld>(std::numeric_limits<T>::max()) / 2;  // (s's own error is far below)
      std::vector<char> overflows(tq, 0);
      for (std::size_t t = 0; t < tq; ++t) {
        // the tiles keep a row whose kept scores are finite, whose context is finite, and whose
        // values up to its causal limit are finite (a masked one is weighed by 0 there)
        bool plain = dk <= 256 && ref.kind[t] == row_is::finite && !ref.values_off[t];
        const std::size_t limit = causal ? t + n - tq + 1 : n;
        for (std::size_t j = 0; j < n; ++j) {
          for (std::size_t i = 0; j < limit && i < dv; ++i) plain = plain && std::isfinite(V[j * dv + i]);
          if (!m.kept(t, j)) continue;
          const ld sv = ref.S[t * n + j].v;
          if (std::isfinite(sv) && !(std::abs(ref.beta * sv) < top)) overflows[t] = 1;
        }
        for (std::size_t i = 0; i < dv; ++i)
          plain = plain && std::abs(ref.Y[t * dv + i].v) < top / 2;  // (a context that stays finite)
        if (overflows[t] != 0 || !plain) continue;
        const auto row_same = [&](const guarded<T>& x, const guarded<T>& z, std::size_t width) {
          return x.data.empty() || same_bits(x.data.data() + t * width, z.data.data() + t * width, width);
        };
        ATTN_FUZZ_CHECK(row_same(y, Y, dv) && row_same(a, A, n) && row_same(s, S, n) &&
                            (l.data.empty() || same_number(l.data[t], L.data[t])),
                        "a bias of zeros is not no bias bit for bit in row %zu", t);
      }
      check_rows(y, a, s, l, &overflows);
    }
    // (2) ALiBi inside the tiles against its matrix, and on threads
    guarded<T> y1 = fresh(Y), a1 = fresh(A), s1 = fresh(S), l1 = fresh(L);
    const int g1 = forward_with({CMV{}, slope}, 1, y1, a1, s1, l1);
    ATTN_FUZZ_CHECK(g1 == (tq > n ? 1 : 0), "ALiBi with %zu queries over %zu keys threw %d", tq, n, g1);
    if (g1 != 0) {
      ATTN_FUZZ_CHECK(y1.untouched() && a1.untouched() && s1.untouched() && l1.untouched(),
                      "ALiBi refused: an output was written");
    } else {
      std::vector<T> alibi(tq * n);
      attn::alibi_bias(MV(alibi.data(), tq, n), slope);
      guarded<T> y2 = fresh(Y), a2 = fresh(A), s2 = fresh(S), l2 = fresh(L);
      ATTN_FUZZ_CHECK(forward_with({CMV(alibi.data(), tq, n), T(0)}, 1, y2, a2, s2, l2) == 0, "ALiBi's matrix threw");
      ATTN_FUZZ_CHECK(same_forward(y1, a1, s1, l1, y2, a2, s2, l2), "ALiBi in the tiles is not its matrix bit for bit");
      guarded<T> y3 = fresh(Y), a3 = fresh(A), s3 = fresh(S), l3 = fresh(L);
      ATTN_FUZZ_CHECK(forward_with({CMV{}, slope}, threads, y3, a3, s3, l3) == 0, "ALiBi on threads threw");
      ATTN_FUZZ_CHECK(same_forward(y1, a1, s1, l1, y3, a3, s3, l3), "ALiBi on %zu threads is not one thread's bits",
                      threads);
      // the backward: ALiBi = its matrix = on threads, every gradient and dL/dZ
      const auto backward_with = [&](const attn::logit_bias<T>& b, std::size_t th, std::vector<guarded<T>>& g) {
        return thrown_documented("scaled_dot_product_attention_backward with a bias", [&] {
          const attn::attention_gradients<T> v{MV(g[0].data.data(), tq, dk), MV(g[1].data.data(), n, dk),
                                               MV(g[2].data.data(), n, dv), false, MV(g[3].data.data(), tq, n),
                                               MV(g[4].data.data(), tq, n)};
          with_score(score_kind, factor, [&](const auto& sc) {
            attn::scaled_dot_product_attention_backward(Qv, Kv, Vv, sc, attn::saved_attention<T>{},
                                                        CMV(dY.data(), tq, dv), v, opt, b, th);
          });
        });
      };
      const auto gradients = [&] {
        return std::vector<guarded<T>>{guarded<T>(tq * dk), guarded<T>(n * dk), guarded<T>(n * dv),
                                       guarded<T>(tq * n), guarded<T>(tq * n)};
      };
      std::vector<guarded<T>> b1 = gradients(), b2 = gradients(), b3 = gradients();
      const int gb1 = backward_with({CMV{}, slope}, 1, b1);
      ATTN_FUZZ_CHECK(gb1 == 0, "the backward with ALiBi threw %d", gb1);
      ATTN_FUZZ_CHECK(backward_with({CMV(alibi.data(), tq, n), T(0)}, 1, b2) == 0, "the backward of ALiBi's matrix threw");
      ATTN_FUZZ_CHECK(backward_with({CMV{}, slope}, threads, b3) == 0, "the backward with ALiBi on threads threw");
      for (std::size_t i = 0; i < 5; ++i) {
        ATTN_FUZZ_CHECK(same_bits(b1[i].data, b2[i].data), "backward: gradient %zu of ALiBi is not its matrix's", i);
        ATTN_FUZZ_CHECK(same_bits(b1[i].data, b3[i].data), "backward: gradient %zu of ALiBi on %zu threads", i, threads);
      }
    }
    // (3) a bias of the wrong shape: refused, nothing written
    {
      const std::vector<T> wrong((tq + 1) * n, T(0));
      guarded<T> y = fresh(Y), a = fresh(A), s = fresh(S), l = fresh(L);
      const int g = forward_with({CMV(wrong.data(), tq + 1, n), T(0)}, 1, y, a, s, l);
      ATTN_FUZZ_CHECK(g == 1, "a bias of %zu rows for %zu queries threw %d", tq + 1, tq, g);
      ATTN_FUZZ_CHECK(y.untouched() && a.untouched() && s.untouched() && l.untouched(),
                      "a refused bias: an output was written");
    }
  }

  // the backward
  std::vector<T> dYx = dY;
  if (bwd_broken == 1) dYx.resize(tq * (dv + 1), T(0));
  const CMV dYv(dYx.data(), tq, bwd_broken == 1 ? dv + 1 : dv);
  const std::size_t dkq = bwd_broken == 2 ? dk + 1 : dk, nk = bwd_broken == 3 ? n + 1 : n,
                    dvv = bwd_broken == 4 ? dv + 1 : dv;
  // (dL/dS: T × n, given when the input says so)
  const auto make_gradients = [&] {
    std::vector<guarded<T>> g{guarded<T>(no_dq ? 0 : tq * dkq), guarded<T>(no_dk ? 0 : nk * dk),
                              guarded<T>(no_dv ? 0 : n * dvv), guarded<T>(want_ds ? tq * n : 0)};
    if (accumulate) {  // what the gradients hold before: numbers to add to
      for (guarded<T>& x : g) {
        for (std::size_t i = 0; i < x.data.size(); ++i) x.data[i] = init[(i * 7) % init.size()];
        if (!x.data.empty()) std::memcpy(x.bytes.data(), x.data.data(), x.bytes.size());
      }
    }
    return g;
  };
  std::vector<guarded<T>> grads = make_gradients();
  guarded<T>&gq = grads[0], &gk = grads[1], &gv = grads[2], &gs = grads[3];
  const std::vector<T> held_q = gq.data, held_k = gk.data, held_v = gv.data, held_s = gs.data;
  // the saved forward: Y and L as the forward wrote them (sentinels where it threw), or nothing
  std::vector<T> Ls = L.data;
  if (bwd_broken == 6) Ls.resize(tq + 1, T(0));
  attn::saved_attention<T> saved{};
  if (!recompute && !out_broken) {
    saved.out = CMV(Y.data.data(), bwd_broken == 5 ? tq - 1 : tq, dv);
    saved.logsumexp = std::span<const T>(Ls);
  }
  const bool saved_broken = (bwd_broken == 5 || bwd_broken == 6) && !recompute && !out_broken;
  const auto backward = [&](std::vector<guarded<T>>& g, std::size_t th) {
    return thrown_documented("scaled_dot_product_attention_backward", [&] {
      const attn::attention_gradients<T> views{
          no_dq ? MV{} : MV(g[0].data.data(), tq, dkq), no_dk ? MV{} : MV(g[1].data.data(), nk, dk),
          no_dv ? MV{} : MV(g[2].data.data(), n, dvv), accumulate, want_ds ? MV(g[3].data.data(), tq, n) : MV{}};
      with_score(score_kind, factor, [&](const auto& s) {
        if (th == 1)
          attn::scaled_dot_product_attention_backward(Qv, Kv, Vv, s, saved, dYv, views, opt);
        else
          attn::scaled_dot_product_attention_backward(Qv, Kv, Vv, s, saved, dYv, views, opt, th);
      });
    });
  };
  const int gotb = backward(grads, 1);
  {  // the threads overload: the same exception, or the same bits
    std::vector<guarded<T>> g2 = make_gradients();
    const int got2 = backward(g2, threads);
    ATTN_FUZZ_CHECK(got2 == gotb, "scaled_dot_product_attention_backward on %zu threads threw %d, one thread %d",
                    threads, got2, gotb);
    for (std::size_t i = 0; i < 4; ++i)
      ATTN_FUZZ_CHECK(got2 != 0 ? g2[i].untouched()
                                : same_bits(g2[i].data.data(), grads[i].data.data(), grads[i].data.size()),
                      "scaled_dot_product_attention_backward on %zu threads: gradient %zu %s", threads, i,
                      got2 != 0 ? "written by a throw" : "is not the one-thread call's bit for bit");
  }
  const bool grads_broken = bwd_broken == 1 || (bwd_broken == 2 && !no_dq) || (bwd_broken == 3 && !no_dk) ||
                            (bwd_broken == 4 && !no_dv) || saved_broken;
  const int fwd_rule = got == 1 && out_broken ? 0 : got;  // the forward's β and throw_error
  const int expected_b = fwd_rule != 0 ? fwd_rule : grads_broken ? 1 : 0;
  ATTN_FUZZ_CHECK(gotb == expected_b, "scaled_dot_product_attention_backward threw %d, expected %d (the forward %d)", gotb,
                  expected_b, got);
  if (gotb != 0) {
    ATTN_FUZZ_CHECK(gq.untouched() && gk.untouched() && gv.untouched() && gs.untouched(),
                    "backward: a throw wrote to a gradient");
    return;
  }
  (void)garbage_in;
  std::vector<E> dYe(dY.size());
  for (std::size_t i = 0; i < dY.size(); ++i) dYe[i] = E{static_cast<ld>(dY[i]), 0};
  ref.backward(dYe);
  if (!no_dq)
    for (std::size_t t = 0; t < tq; ++t)
      for (std::size_t i = 0; i < dk; ++i) {
        const T g = gq.data[t * dk + i];
        if (ref.nan_query[t]) {
          ATTN_FUZZ_CHECK(std::isnan(g), "dL/dQ (%zu, %zu) is %Lg: row %zu is NaN (or the nan policy's)", t, i, ld(g), t);
          continue;
        }
        expect_gradient<T>("dL/dQ", t, i, g, ref.dQ[t * dk + i], accumulate, held_q[t * dk + i]);
      }
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t i = 0; !no_dk && i < dk; ++i) {
      const T g = gk.data[j * dk + i];
      if (ref.nan_everywhere) {
        ATTN_FUZZ_CHECK(std::isnan(g), "dL/dK (%zu, %zu) is %Lg: a row sees no key under the nan policy", j, i, ld(g));
        continue;
      }
      expect_gradient<T>("dL/dK", j, i, g, ref.dK[j * dk + i], accumulate, held_k[j * dk + i]);
    }
    for (std::size_t i = 0; !no_dv && i < dv; ++i) {
      const T g = gv.data[j * dv + i];
      if (ref.nan_everywhere) {
        ATTN_FUZZ_CHECK(std::isnan(g), "dL/dV (%zu, %zu) is %Lg: a row sees no key under the nan policy", j, i, ld(g));
        continue;
      }
      expect_gradient<T>("dL/dV", j, i, g, ref.dV[j * dv + i], accumulate, held_v[j * dv + i]);
    }
  }
  // dL/dS entry by entry, by the reference's rules (a masked entry exactly 0, or what it held)
  using rule = typename attention_ref<T>::ds_rule;
  for (std::size_t t = 0; want_ds && t < tq; ++t)
    for (std::size_t j = 0; j < n; ++j) {
      const T g = gs.data[t * n + j], held = accumulate ? held_s[t * n + j] : T(0);
      switch (ref.dS_rule[t * n + j]) {
        case rule::zero:
          ATTN_FUZZ_CHECK(g == held, "dL/dS (%zu, %zu) is %Lg: nothing moves it (masked, or the row's weights "
                          "do not move), so %Lg", t, j, ld(g), ld(held));
          break;
        case rule::nan:
          ATTN_FUZZ_CHECK(std::isnan(g), "dL/dS (%zu, %zu) is %Lg, not NaN (row kind %d, policy %d)", t, j, ld(g),
                          int(ref.kind[t]), int(policy));
          break;
        case rule::bound: {
          acc<T> a;
          a.add(ref.dS[t * n + j]);
          if (accumulate) a.add(E{static_cast<ld>(held), 0});
          expect_near<T>("dL/dS", t, j, g, a.get());
          break;
        }
        case rule::unchecked:
          break;
      }
    }
  // the returning backward: the bits of the views' (overwriting, every gradient given)
  if (!accumulate && !no_dq && !no_dk && !no_dv && bwd_broken == 0) {
    with_score(score_kind, factor, [&](const auto& s) {
      const auto res = attn::scaled_dot_product_attention_backward(Qv, Kv, Vv, s, saved, dYv, opt);
      const auto same = [](const auto& mat, const guarded<T>& g) {
        return same_bits(mat.data(), g.data.data(), g.data.size());
      };
      ATTN_FUZZ_CHECK(same(res.queries, gq) && same(res.keys, gk) && same(res.values, gv),
                      "the returning backward differs from the backward into views");
    });
  }
}

}  // namespace

ATTN_FUZZ_FLOAT_DOUBLE_LONG_DOUBLE(run)
