// attend, align and backward from several threads at once, on shared read-only inputs (queries,
// notes, score parameters, one options object with its mask): every thread's results equal
// the single-threaded ones bit for bit. attn keeps no state between calls, so this holds by
// construction; the test is what ThreadSanitizer (preset tsan) watches. It is its own
// executable, attn_thread_tests, so that the tsan preset can build and run just this.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"
#include "doc_snippets.hpp"

namespace {

/// Everything one call writes, side by side.
template <class T>
struct outputs {
  std::vector<T> scores, weights, context, grad_scores, grad_query, grad_notes;  ///< attend's, then backward's
  /// Buffers for n notes of d numbers.
  outputs(std::size_t n, std::size_t d)
      : scores(n), weights(n), context(d), grad_scores(n), grad_query(d), grad_notes(n * d) {}

  /// Every buffer equal to o's, byte for byte.
  [[nodiscard]] bool same_bits(const outputs& o) const {
    const auto eq = [](const std::vector<T>& a, const std::vector<T>& b) {
      return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
    };
    return eq(scores, o.scores) && eq(weights, o.weights) && eq(context, o.context) &&
           eq(grad_scores, o.grad_scores) && eq(grad_query, o.grad_query) && eq(grad_notes, o.grad_notes);
  }
};

/// The shared, read-only inputs: notes of d numbers, queries, dL/dc, a mask, score parameters.
template <class T>
struct problem {
  std::size_t n, d;                                  ///< notes, and numbers per note
  attn::Matrix<T> notes, queries, grads, W, W1, W2;  ///< inputs, dL/dc per query, score parameters
  attn::Vector<T> v;                                 ///< additive's v
  std::unique_ptr<bool[]> keep;                      ///< the mask (every fifth note from the fourth out)
  attn::options opt;                                 ///< β = 1.5 and the mask, shared by every thread

  /// Random inputs from a seed.
  problem(std::size_t notes_count, std::size_t dim, std::size_t query_count, std::uint64_t seed)
      : n(notes_count), d(dim), notes(n, d), queries(query_count, d), grads(query_count, d), W(d, d), W1(5, d),
        W2(5, d), v(5), keep(std::make_unique<bool[]>(n)) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0, 1);
    for (auto* m : {&notes, &queries, &grads, &W, &W1, &W2})
      for (std::size_t i = 0; i < m->size(); ++i) m->data()[i] = static_cast<T>(normal(rng));
    for (T& x : v) x = static_cast<T>(normal(rng));
    for (std::size_t j = 0; j < n; ++j) keep[j] = j % 5 != 3;
    opt = {.beta = 1.5, .mask = std::span<const bool>(keep.get(), n)};
  }

  /// attend and backward of query t with score number k (dot, scaled_dot, general, additive).
  void run(std::size_t t, int k, outputs<T>& out) const {
    const std::span<const T> q = queries.row(t);
    const std::span<const T> g = grads.row(t);
    attn::MatrixView<T> gn(out.grad_notes.data(), n, d);
    const auto both = [&](const auto& score) {
      attn::attend(q, notes, score, out.scores, out.weights, out.context, opt);
      attn::backward(q, notes, score, g, {out.grad_scores, out.grad_query, gn}, opt);
    };
    switch (k) {
      case 0: both(attn::dot); break;
      case 1: both(attn::scaled_dot); break;
      case 2: both(attn::general<T>(W)); break;
      default: both(attn::additive<T>(W1, W2, v)); break;
    }
  }
};

/// Four threads repeat every case 20 times; each result must equal one thread's, bit for bit.
template <class T>
void require_same_results_from_threads(std::size_t n) {
  const problem<T> p(n, 16, 6, 99 + n);
  constexpr int scores = 4;
  const std::size_t cases = p.queries.rows() * scores;
  std::vector<outputs<T>> reference(cases, outputs<T>(p.n, p.d));
  for (std::size_t c = 0; c < cases; ++c) p.run(c / scores, static_cast<int>(c % scores), reference[c]);
  const auto map = attn::align(p.queries, p.notes, attn::dot, p.opt);

  constexpr int threads = 4, rounds = 20;
  std::atomic<int> mismatches{0}, map_mismatches{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      outputs<T> out(p.n, p.d);
      for (int r = 0; r < rounds; ++r) {
        for (std::size_t c0 = 0; c0 < cases; ++c0) {
          const std::size_t c = (c0 + static_cast<std::size_t>(i) * 5) % cases;  // threads start apart
          p.run(c / scores, static_cast<int>(c % scores), out);
          if (!out.same_bits(reference[c])) ++mismatches;
        }
        const auto m = attn::align(p.queries, p.notes, attn::dot, p.opt);
        if (std::memcmp(m.weights.data(), map.weights.data(), map.weights.size() * sizeof(T)) != 0 ||
            std::memcmp(m.contexts.data(), map.contexts.data(), map.contexts.size() * sizeof(T)) != 0)
          ++map_mismatches;
      }
    });
  }
  for (auto& th : pool) th.join();
  REQUIRE(mismatches.load() == 0);
  REQUIRE(map_mismatches.load() == 0);
}

}  // namespace

TEMPLATE_TEST_CASE("attend, align and backward from several threads on shared inputs equal one thread's results bit for bit",
                   "[threads]", float, double) {
  SECTION("7 notes (two passes)") { require_same_results_from_threads<TestType>(7); }
  SECTION("100 notes (attend's one-pass path for dot and scaled_dot)") { require_same_results_from_threads<TestType>(100); }
}

// docs/attention.md's example: one query's notes read in chunks on threads, merged, finished.
// The lines between the markers appear verbatim in docs/attention.md (checked below).
// docs/attention.md:begin
#include <attn/attn.hpp>
#include <span>
#include <thread>
#include <vector>

// The context of one query over the notes, read by `threads` (at least 1) threads, a chunk each.
std::vector<float> attend_on_threads(std::span<const float> q, attn::MatrixView<const float> notes,
                                     std::size_t threads) {
  attn::dot.check(q.size(), notes.cols());  // here: a throw on a thread would end the program
  std::vector<attn::partial_attention<float>> parts(threads);
  {
    std::vector<std::jthread> pool;
    for (std::size_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const std::size_t first = notes.rows() * t / threads;
        const std::size_t last = notes.rows() * (t + 1) / threads;
        parts[t] = attn::attend_partial(q, notes.subrows(first, last - first), attn::dot);
      });
  }  // every thread has joined
  for (std::size_t t = 1; t < threads; ++t) attn::merge_into(parts[0], parts[t]);
  std::vector<float> context(notes.cols());
  attn::finish(parts[0], context);
  return context;
}
// docs/attention.md:end

TEST_CASE("docs/attention.md: split attention on threads agrees with one pass",
          "[threads][split][docs]") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0, 1);
  for (const std::size_t n : {5u, 1000u}) {
    const std::size_t d = 64;
    attn::Matrix<float> notes(n, d);
    std::vector<float> q(d);
    for (std::size_t i = 0; i < notes.size(); ++i)
      notes.data()[i] = static_cast<float>(normal(rng));
    for (float& x : q) x = static_cast<float>(normal(rng) * 0.3);
    const auto one = attn::attend(q, notes, attn::dot);
    float scale = 1;
    for (std::size_t i = 0; i < notes.size(); ++i)
      scale = std::max(scale, std::abs(notes.data()[i]));
    // the bound of tests/test_split.cpp: both paths are within O(n)·ε of the exact context
    const float tol =
        static_cast<float>(4 * n + 16) * std::numeric_limits<float>::epsilon() * scale;
    for (const std::size_t threads : {1u, 3u, 8u}) {  // 8 threads over 5 notes: empty chunks
      const std::vector<float> c = attend_on_threads(q, notes, threads);
      INFO("n=" << n << " threads=" << threads);
      REQUIRE(c.size() == d);
      for (std::size_t i = 0; i < d; ++i) REQUIRE(std::abs(c[i] - one.context[i]) <= tol);
    }
  }
  const std::vector<float> wrong(3);
  REQUIRE_THROWS_AS(attend_on_threads(wrong, attn::Matrix<float>(4, 2), 2), attn::dimension_error);
  REQUIRE(attn_test::quoted_in(__FILE__, "docs/attention.md", "// docs/attention.md:begin\n",
                               "// docs/attention.md:end"));
}

namespace {

// The same bytes for float and double; for long double the same value and sign, NaN where NaN
// (its x87 format leaves bytes of padding that no computation sets).
template <class T>
bool same_numbers(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    return std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
  } else {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!(a[i] == b[i] && std::signbit(a[i]) == std::signbit(b[i])) && !(a[i] != a[i] && b[i] != b[i]))
        return false;
    return true;
  }
}

// scaled_dot_product_attention's threads overload against one thread: every output (Y, the map's
// scores and weights, the log-sum-exp) the same bytes, for 2, 3 and 8 threads, with and without
// the map, every mask (key, row, causal), T around the pieces' sizes and rows that take the exact
// path (a kept +inf score, a NaN key) on whatever thread gets them.
template <class T>
void require_threads_give_one_threads_bits() {
  std::mt19937_64 rng(2107);
  std::normal_distribution<double> normal(0, 1);
  for (const std::size_t tq : {1u, 7u, 50u, 257u})
    for (const std::size_t n : {5u, 130u}) {
      const std::size_t d = 24, dv = 20;
      attn::Matrix<T> Q(tq, d), K(n, d), V(n, dv);
      for (auto* m : {&Q, &K, &V})
        for (std::size_t i = 0; i < m->size(); ++i) m->data()[i] = static_cast<T>(normal(rng));
      K(n / 2, 0) = std::numeric_limits<T>::infinity();  // a kept ±inf score in most rows
      if (tq > 3) Q(3, 1) = std::numeric_limits<T>::quiet_NaN();  // row 3: NaN scores
      std::vector<char> keys(n, 1), rows(tq * n, 1);
      for (std::size_t j = 0; j < n; j += 4) keys[j] = 0;
      for (std::size_t i = 0; i < rows.size(); i += 3) rows[i] = 0;
      for (int masks = 0; masks < 4; ++masks) {
        attn::options opt{.beta = 0.8};
        if (masks == 1) opt.mask = keys;
        if (masks == 2) opt.row_mask = attn::mask_matrix_view(rows, tq, n);
        if (masks >= 2) opt.causal = true;
        for (const bool map : {false, true}) {
          const auto run = [&](std::size_t threads) {
            std::vector<T> y(tq * dv, T(7)), s(tq * n, T(7)), a(tq * n, T(7)), l(tq, T(7));
            attn::attention_views<T> out{.out = attn::MatrixView<T>(y.data(), tq, dv), .logsumexp = l};
            if (map) {
              out.scores = attn::MatrixView<T>(s.data(), tq, n);
              out.weights = attn::MatrixView<T>(a.data(), tq, n);
            }
            attn::scaled_dot_product_attention(Q, K, V, attn::scaled_dot, out, opt, threads);
            y.insert(y.end(), s.begin(), s.end());
            y.insert(y.end(), a.begin(), a.end());
            y.insert(y.end(), l.begin(), l.end());
            return y;
          };
          const std::vector<T> one = run(1);
          // (any count is valid: SIZE_MAX and 2^61 once divided by zero as their pieces wrapped)
          for (const std::size_t threads : {std::size_t{2}, std::size_t{3}, std::size_t{8}, std::size_t{1} << 61,
                                            std::numeric_limits<std::size_t>::max()}) {
            const std::vector<T> many = run(threads);
            INFO("T = " << tq << ", n = " << n << ", masks " << masks << ", map " << map << ", threads " << threads);
            REQUIRE(same_numbers(many, one));
          }
        }
      }
    }
}

}  // namespace

TEMPLATE_TEST_CASE("scaled_dot_product_attention on threads gives one thread's results bit for bit",
                   "[threads][sdpa]", float, double, long double) {
  require_threads_give_one_threads_bits<TestType>();
}

namespace {

// scaled_dot_product_attention_backward's threads overload against one thread: every gradient
// (dQ, dK, dV, dL/dS) the same bytes for 0, 2, 3, 4, 2^61 and SIZE_MAX threads, with T and n
// across the tiles' edges (MR, the row blocks of MB, the passes of SB = 16·MB rows in float, the
// key blocks), every mask, rows the tiles leave (a NaN query, a NaN log-sum-exp, a key holding
// +inf) whose exact path adds to every key's gradient, a key mask over keys holding NaN,
// accumulate over what the views held, gradients left out, and no saved forward.
template <class T>
void require_backward_threads_give_one_threads_bits() {
  std::mt19937_64 rng(2108);
  std::normal_distribution<double> normal(0, 1);
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  // (long double, without vectors: blocks of 16 keys and SB = 1024 rows, sizes to match)
  constexpr bool vectors = sizeof(T) <= 8;
  for (const std::size_t tq : {std::size_t{1}, std::size_t{7}, std::size_t{100}, std::size_t{vectors ? 1600 : 1100}})
    for (const std::size_t n : {std::size_t{5}, std::size_t{vectors ? 130 : 20}}) {
      const std::size_t d = 24, dv = 20;
      attn::Matrix<T> Q(tq, d), K(n, d), V(n, dv), dY(tq, dv);
      for (auto* m : {&Q, &K, &V, &dY})
        for (std::size_t i = 0; i < m->size(); ++i) m->data()[i] = static_cast<T>(normal(rng));
      if (tq > 3) Q(3, 1) = nan;  // row 3: NaN scores, one query's path
      std::vector<char> keys(n, 1), rows(tq * n, 1);
      for (std::size_t j = 0; j < n; j += 4) keys[j] = 0;
      for (std::size_t i = 0; i < rows.size(); i += 3) rows[i] = 0;
      for (int masks = 0; masks < 4; ++masks) {
        attn::options opt{.beta = 0.8};
        attn::Matrix<T> Km = K, Vm = V;
        if (masks == 1) {  // padding keys holding NaN
          opt.mask = keys;
          for (std::size_t i = 0; i < d; ++i) Km(0, i) = nan;
          for (std::size_t i = 0; i < dv; ++i) Vm(0, i) = nan;
        }
        if (masks == 3) Km(n / 2, 0) = std::numeric_limits<T>::infinity();  // kept ±inf scores
        if (masks == 2) opt.row_mask = attn::mask_matrix_view(rows, tq, n);
        if (masks >= 2) opt.causal = true;
        attn::Matrix<T> Y(tq, dv);
        std::vector<T> L(tq);
        attn::scaled_dot_product_attention(Q, Km, Vm, attn::scaled_dot, {.out = Y.view(), .logsumexp = L}, opt);
        if (tq > 5) L[5] = nan;  // row 5: left by the tiles
        for (const int given : {15, 1, 6, 8, 10})  // bits: dQ, dK, dV, dL/dS
          for (const bool accumulate : {false, true})
            for (const bool saved : {true, false}) {
              if (!saved && (given != 15 || accumulate)) continue;
              const auto run = [&](std::size_t threads) {
                std::vector<T> gq(tq * d, T(7)), gk(n * d, T(7)), gv(n * dv, T(7)), gs(tq * n, T(7));
                attn::attention_gradients<T> g{.accumulate = accumulate};
                if (given & 1) g.queries = attn::MatrixView<T>(gq.data(), tq, d);
                if (given & 2) g.keys = attn::MatrixView<T>(gk.data(), n, d);
                if (given & 4) g.values = attn::MatrixView<T>(gv.data(), n, dv);
                if (given & 8) g.scores = attn::MatrixView<T>(gs.data(), tq, n);
                const attn::saved_attention<T> sv =
                    saved ? attn::saved_attention<T>{Y.view(), L} : attn::saved_attention<T>{};
                if (threads == 1)
                  attn::scaled_dot_product_attention_backward(Q, Km, Vm, attn::scaled_dot, sv, dY, g, opt);
                else
                  attn::scaled_dot_product_attention_backward(Q, Km, Vm, attn::scaled_dot, sv, dY, g, opt, threads);
                gq.insert(gq.end(), gk.begin(), gk.end());
                gq.insert(gq.end(), gv.begin(), gv.end());
                gq.insert(gq.end(), gs.begin(), gs.end());
                return gq;
              };
              const std::vector<T> one = run(1);
              for (const std::size_t threads : {std::size_t{0}, std::size_t{2}, std::size_t{3}, std::size_t{4},
                                                std::size_t{1} << 61, std::numeric_limits<std::size_t>::max()}) {
                INFO("T = " << tq << ", n = " << n << ", masks " << masks << ", given " << given << ", accumulate "
                            << accumulate << ", saved " << saved << ", threads " << threads);
                REQUIRE(same_numbers(run(threads), one));
              }
            }
      }
    }
}

}  // namespace

TEMPLATE_TEST_CASE("scaled_dot_product_attention_backward on threads gives one thread's results bit for bit",
                   "[threads][sdpa][derivatives]", float, double, long double) {
  require_backward_threads_give_one_threads_bits<TestType>();
}

TEST_CASE("split_over_threads: every item once; an item's exception reaches the caller after the join",
          "[threads]") {
  for (const std::size_t threads : {0u, 1u, 2u, 5u}) {
    std::vector<std::atomic<int>> runs(37);
    attn::detail::split_over_threads(runs.size(), threads, [&](std::size_t k) { ++runs[k]; });
    for (const auto& r : runs) REQUIRE(r.load() == 1);
    // item 11 throws: the call rethrows it (no std::terminate from a thread), the items not yet
    // taken are left, and none runs twice
    std::vector<std::atomic<int>> runs2(200);
    REQUIRE_THROWS_AS(attn::detail::split_over_threads(runs2.size(), threads,
                                                        [&](std::size_t k) {
                                                          ++runs2[k];
                                                          if (k == 11) throw std::runtime_error("item 11");
                                                        }),
                      std::runtime_error);
    for (const auto& r : runs2) REQUIRE(r.load() <= 1);
    REQUIRE(runs2[11].load() == 1);
  }
}

namespace {

// multi_head_attention's and its backward's threads overloads against one thread: Y, every
// head's map, the cache and every gradient (overwritten, or added to) the same bytes, for 2, 3 and 8 threads; self-
// and cross-attention (T ≠ n), h = 1, 2, 8, batches of 1 and 3, with and without the maps, biases
// and W_O; no mask, a key mask per sentence, a row mask with causal, causal alone; and a head
// of 260 numbers (past the tiled kernel's 256: every row exact) once.
template <class T>
void require_heads_on_threads_give_one_threads_bits() {
  std::mt19937_64 rng(2121);
  std::normal_distribution<double> normal(0, 1);
  const auto random = [&](std::size_t r, std::size_t c) {
    attn::Matrix<T> m(r, c);
    for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(normal(rng) * 0.5);
    return m;
  };
  struct shape {
    std::size_t tq, n, heads, dk, dv, batch;
    bool cross;
    std::size_t kv_heads = 0;  // grouped-query attention when below heads
  };
  for (const shape sh : {shape{1, 1, 1, 4, 3, 1, false}, shape{7, 7, 2, 4, 3, 3, false},
                         shape{50, 50, 8, 4, 3, 1, false}, shape{33, 70, 8, 5, 2, 3, true},
                         shape{130, 130, 1, 6, 6, 1, false}, shape{9, 12, 2, 4, 3, 3, true},
                         shape{20, 20, 1, 260, 3, 1, false}, shape{40, 40, 8, 4, 3, 2, false, 2},
                         shape{17, 30, 4, 3, 5, 1, true, 1}}) {
    const std::size_t d_model = 12, d_kv = 10, d_out = 7, B = sh.batch;
    const std::size_t dkv = sh.cross ? d_kv : d_model;
    const std::size_t kvh = sh.kv_heads != 0 ? sh.kv_heads : sh.heads;
    const attn::Matrix<T> X = random(B * sh.tq, d_model), X_kv = random(B * sh.n, dkv);
    const attn::Matrix<T> WQ = random(d_model, sh.heads * sh.dk), WK = random(dkv, kvh * sh.dk),
                          WV = random(dkv, kvh * sh.dv), WO = random(sh.heads * sh.dv, d_out),
                          biases = random(4, sh.heads * std::max(sh.dk, sh.dv) + d_out);
    const attn::Matrix<T> dY = random(B * sh.tq, std::max(d_out, sh.heads * sh.dv));
    std::vector<char> keys(B * sh.n, 1), rows(B * sh.tq * sh.n, 1);
    for (std::size_t j = 0; j < keys.size(); j += 3) keys[j] = 0;
    for (std::size_t i = 1; i < rows.size(); i += 4) rows[i] = 0;
    for (const bool projected : {false, true}) {
      attn::multi_head_parameters<T> p{.W_Q = WQ, .W_K = WK, .W_V = WV, .heads = sh.heads, .kv_heads = sh.kv_heads};
      if (projected) {
        p.W_O = WO;
        p.b_Q = std::span<const T>(biases.row(0).data(), sh.heads * sh.dk);
        p.b_K = std::span<const T>(biases.row(1).data(), kvh * sh.dk);
        p.b_V = std::span<const T>(biases.row(2).data(), kvh * sh.dv);
        p.b_O = std::span<const T>(biases.row(3).data(), d_out);
      }
      const std::size_t cols = projected ? d_out : sh.heads * sh.dv;
      for (int masks = 0; masks < 4; ++masks) {
        attn::options opt{.beta = 0.9};
        if (masks == 1) opt.mask = keys;
        if (masks == 2) opt.row_mask = attn::mask_matrix_view(rows, B * sh.tq, sh.n);
        if (masks >= 2) opt.causal = true;
        for (const bool map : {false, true}) {
          const auto run = [&](std::size_t threads) {
            attn::Matrix<T> Y(B * sh.tq, cols), maps(map ? sh.heads * B * sh.tq : 0, sh.n);
            attn::multi_head_cache<T> cache;
            const attn::multi_head_views<T> out{.out = Y.view(), .maps = maps.view()};
            if (sh.cross)
              attn::multi_head_attention(X, X_kv, p, out, cache, opt, B, threads);
            else
              attn::multi_head_attention(X, p, out, cache, opt, B, threads);
            // the backward on as many threads, every gradient asked for (added to what the
            // buffers hold every other mask)
            const T start = masks % 2 == 1 ? T(0.25) : T(0);
            attn::Matrix<T> dX(B * sh.tq, d_model, start), dXkv(sh.cross ? B * sh.n : 0, dkv, start),
                dWQ(WQ.rows(), WQ.cols(), start), dWK(WK.rows(), WK.cols(), start),
                dWV(WV.rows(), WV.cols(), start), dWO(projected ? WO.rows() : 0, WO.cols(), start),
                db(4, biases.cols(), start);
            attn::multi_head_gradients<T> g{.inputs = dX.view(), .kv_inputs = dXkv.view(), .W_Q = dWQ.view(),
                                            .W_K = dWK.view(), .W_V = dWV.view(), .W_O = dWO.view(),
                                            .accumulate = masks % 2 == 1};
            if (projected) {
              g.b_Q = std::span<T>(db.row(0).data(), sh.heads * sh.dk);
              g.b_K = std::span<T>(db.row(1).data(), kvh * sh.dk);
              g.b_V = std::span<T>(db.row(2).data(), kvh * sh.dv);
              g.b_O = std::span<T>(db.row(3).data(), d_out);
            }
            const attn::MatrixView<const T> dYv(dY.data(), B * sh.tq, cols, dY.cols());
            if (sh.cross)
              attn::multi_head_attention_backward(X, X_kv, p, cache, dYv, g, opt, B, threads);
            else
              attn::multi_head_attention_backward(X, p, cache, dYv, g, opt, B, threads);
            std::vector<T> all;
            for (const attn::Matrix<T>* m : {&Y, &maps, &cache.queries, &cache.keys, &cache.values,
                                             &cache.heads_out, &cache.logsumexp, &dX, &dXkv, &dWQ,
                                             &dWK, &dWV, &dWO, &db, &cache.grad_queries,
                                             &cache.grad_keys, &cache.grad_values})
              all.insert(all.end(), m->data(), m->data() + m->size());
            return all;
          };
          const std::vector<T> one = run(1);
          // (any count is valid: 2^62 once returned with Y unwritten, SIZE_MAX threw length_error)
          for (const std::size_t threads : {std::size_t{0}, std::size_t{2}, std::size_t{3}, std::size_t{8},
                                            std::size_t{1} << 62, std::numeric_limits<std::size_t>::max()}) {
            INFO("T = " << sh.tq << ", n = " << sh.n << ", h = " << sh.heads << ", h_kv = " << kvh << ", d_k = " << sh.dk
                        << ", B = " << B << ", cross " << sh.cross << ", projected " << projected
                        << ", masks " << masks << ", map " << map << ", threads " << threads);
            REQUIRE(same_numbers(run(threads), one));
          }
        }
      }
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("multi_head_attention and its backward on threads give one thread's results bit for bit",
                   "[threads][heads]", float, double) {
  require_heads_on_threads_give_one_threads_bits<TestType>();
}

TEST_CASE("multi_head_attention on threads: a bad shape throws before any thread starts",
          "[threads][heads]") {
  attn::Matrix<float> X(8, 6), WQ(6, 8), WK(6, 8), WV(6, 8), Y(8, 8, 5.0F);
  attn::multi_head_cache<float> cache;
  const attn::multi_head_parameters<float> p{.W_Q = WQ, .W_K = WK, .W_V = WV, .heads = 3};
  REQUIRE_THROWS_AS(attn::multi_head_attention(X, p, {.out = Y.view()}, cache, {}, 1, 2),
                    attn::dimension_error);
  for (std::size_t i = 0; i < Y.size(); ++i) REQUIRE(Y.data()[i] == 5.0F);
}
