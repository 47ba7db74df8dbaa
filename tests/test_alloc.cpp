// Fixed sizes never allocate, and the caller-buffer overloads allocate nothing at any size.
// This file replaces the global operator new to count allocations, so it is its own test
// executable.
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <span>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

#include "attn/attn.hpp"
#include "attn/init.hpp"
#include "attn/jacobian.hpp"
#include "attn_catch.hpp"
#include "user_scores.hpp"

namespace {
std::atomic<long> allocations{0};
std::atomic<long> deallocations{0};  // (of non-null pointers)
std::atomic<bool> refuse{false};  // while set, every allocation throws std::bad_alloc
std::atomic<long> countdown{0};   // k > 0: the k-th allocation from now throws std::bad_alloc

// Whether this allocation is to fail (refuse, or the countdown reaches it).
bool fail_this_one() { return refuse.load() || (countdown.load() > 0 && --countdown == 0); }
}

// The replacements below pair malloc with free; GCC sees `delete p` inlined into free(p) on a
// pointer from `new` and warns, although that is exactly what a replacement does.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t size) {
  ++allocations;
  if (fail_this_one()) throw std::bad_alloc();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void operator delete(void* p) noexcept {
  if (p != nullptr) ++deallocations;
  std::free(p);
}
void operator delete[](void* p) noexcept { ::operator delete(p); }
void operator delete(void* p, std::size_t) noexcept { ::operator delete(p); }
void operator delete[](void* p, std::size_t) noexcept { ::operator delete(p); }
// The aligned forms, which attn's dynamic Vector and Matrix allocate through (attn::aligned_allocator).
void* operator new(std::size_t size, std::align_val_t align) {
  ++allocations;
  if (fail_this_one()) throw std::bad_alloc();
  const auto a = static_cast<std::size_t>(align);
  if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a + (size == 0 ? a : 0))) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t align) { return ::operator new(size, align); }
void operator delete(void* p, std::align_val_t) noexcept { ::operator delete(p); }
void operator delete[](void* p, std::align_val_t) noexcept { ::operator delete(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { ::operator delete(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { ::operator delete(p); }

namespace {
// Runs f and returns how many allocations it made.
template <class F>
long count_allocations(F&& f) {
  const long before = allocations.load();
  f();
  return allocations.load() - before;
}

// Makes p's address visible to the outside, so that the compiler keeps the allocation it came
// from: clang at -O2 removes a new/delete pair whose memory nobody looks at ([expr.new]/10).
void escape(const void* p) { asm volatile("" : : "g"(p) : "memory"); }
}  // namespace

TEST_CASE("The counter sees allocations", "[alloc]") {
  REQUIRE(count_allocations([] { std::vector<double> v(3); escape(v.data()); }) == 1);
  REQUIRE(count_allocations([] { attn::Vector<double> v(3); escape(v.data()); }) == 1);  // aligned new
}

TEST_CASE("Fixed-size attend, softmax and align allocate nothing", "[alloc]") {
  const attn::Vector<float, 3> q{0, 0.5f, 2};
  const attn::Matrix<float, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Matrix<float, 4, 3> states{{2, 0, 0}, {0, 0.5f, 2}, {0, 2, 0}, {1, 1, 0}};
  const attn::Matrix<float, 2, 3> W{{1, 0, 1}, {0, 1, 0}};
  const attn::Matrix<float, 2, 3> W1{{1, 0, 1}, {0, 1, 0}};
  const attn::Matrix<float, 2, 3> W2{{0, 1, 0}, {1, 0, 1}};
  const attn::Vector<float, 2> v{1, -1};
  const std::array<bool, 3> mask{true, false, true};
  float sink = 0;
  const long n = count_allocations([&] {
    const auto r = attn::attend(q, notes, attn::dot);
    const auto s = attn::attend(q, notes, attn::scaled_dot, {.beta = 2, .mask = mask});
    const auto g = attn::attend(attn::Vector<float, 2>{1, 2}, notes, attn::general(W));
    const auto a = attn::attend(q, notes, attn::additive(W1, W2, v));
    const auto w = attn::softmax(q);
    const auto map = attn::align(states, notes, attn::dot);
    const auto none = attn::no_attention(states, notes);
    sink += r.context[2] + s.weights[0] + g.context[0] + a.context[1] + w[2] + map.weights(3, 1) + none(0, 0);
  });
  REQUIRE(n == 0);
  REQUIRE(sink > 0);
}

TEST_CASE("Caller buffers: dynamic attend and align allocate nothing", "[alloc]") {
  const std::size_t count = 300, d = 160;  // d and k above the score block size
  std::vector<double> notes(count * d), q(d), W(d * d), W1(200 * d), W2(200 * d), v(200);
  for (std::size_t i = 0; i < notes.size(); ++i) notes[i] = static_cast<double>(i % 7) * 0.01;
  for (std::size_t i = 0; i < d; ++i) q[i] = static_cast<double>(i % 5) * 0.1;
  for (std::size_t i = 0; i < W.size(); ++i) W[i] = static_cast<double>(i % 3) * 0.01;
  for (std::size_t i = 0; i < W1.size(); ++i) W1[i] = W2[i] = static_cast<double>(i % 11) * 0.001;
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1;
  std::vector<double> scores(count), weights(count), context(d);
  std::vector<double> map_s(2 * count), map_w(2 * count), map_c(2 * d);
  const attn::MatrixView<const double> H(notes.data(), count, d);
  const attn::MatrixView<const double> queries(notes.data(), 2, d);
  const attn::general g(attn::MatrixView<const double>(W.data(), d, d));
  const attn::additive a(attn::MatrixView<const double>(W1.data(), 200, d),
                         attn::MatrixView<const double>(W2.data(), 200, d), std::span<const double>(v));
  const long n = count_allocations([&] {
    attn::attend(q, H, attn::dot, scores, weights, context);
    attn::attend(q, H, H, attn::scaled_dot, scores, weights, context, {.beta = 0.5});
    attn::attend(q, H, g, scores, weights, context);
    attn::attend(q, H, a, scores, weights, context);
    attn::softmax_inplace(scores);
    attn::align(queries, H, attn::dot, attn::MatrixView<double>(map_s.data(), 2, count),
                attn::MatrixView<double>(map_w.data(), 2, count), attn::MatrixView<double>(map_c.data(), 2, d));
  });
  REQUIRE(n == 0);
  double sum = 0;
  for (double x : weights) sum += x;
  REQUIRE(std::abs(sum - 1) < 1e-12);
}

TEST_CASE("Split attention into kept partial results allocates nothing once they are sized",
          "[alloc][split]") {
  const std::size_t count = 300, d = 64;
  std::vector<float> notes(count * d), q(d), context(d);
  for (std::size_t i = 0; i < notes.size(); ++i) notes[i] = static_cast<float>(i % 7) * 0.01f;
  for (std::size_t i = 0; i < d; ++i) q[i] = static_cast<float>(i % 5) * 0.1f;
  const attn::MatrixView<const float> H(notes.data(), count, d);
  const attn::options uniform{.if_all_masked = attn::all_masked_policy::uniform};
  attn::partial_attention<float> a, b;
  attn::attend_partial(q, H.subrows(0, 100), attn::dot, a, uniform);  // sizes a and b
  attn::attend_partial(q, H.subrows(100, 200), attn::dot, b, uniform);
  const long n = count_allocations([&] {
    for (int round = 0; round < 3; ++round) {  // chunk after chunk into the same two results
      attn::attend_partial(q, H.subrows(0, 100), attn::dot, a, uniform);
      attn::attend_partial(q, H.subrows(100, 200), H.subrows(100, 200), attn::scaled_dot, b,
                           uniform);
      attn::merge_into(a, b);
      attn::finish(a, context);
      attn::attend_partial(q, H.subrows(0, 150), attn::dot, a);
    }
  });
  REQUIRE(n == 0);
  REQUIRE(a.notes == 150);
}

TEST_CASE("Fixed-size Jacobians and backward allocate nothing", "[alloc]") {
  const attn::Vector<double, 3> q{0, 0.5, 2};
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Matrix<double, 2, 3> states{{0, 0.5, 2}, {2, 0, 0}};
  const attn::Matrix<double, 3, 3> W{{1, 0, 1}, {0, 1, 0}, {0.5, 0, 1}};
  const attn::Vector<double, 3> g{1, -1, 0.5};
  const attn::Matrix<double, 2, 3> dC{{1, 0, 0}, {0, 1, 0}};
  double sink = 0;
  const long n = count_allocations([&] {
    const auto dh = attn::jacobian_note(q, notes, attn::dot, 2);
    const auto dq = attn::jacobian_query(q, notes, attn::general(W));
    const auto dk = attn::jacobian_key(q, notes, notes, attn::scaled_dot, 1);
    const auto b = attn::backward(q, notes, attn::general(W), g);
    const auto m = attn::align_backward(states, notes, attn::dot, dC);
    sink += dh(2, 2) + dq(0, 0) + dk(1, 1) + b.query[0] + b.parameters.W(0, 0) + m.queries(1, 1);
  });
  REQUIRE(n == 0);
  REQUIRE(sink != 0);
}

TEST_CASE("Caller buffers: dynamic backward allocates nothing", "[alloc]") {
  const std::size_t count = 50, d = 300, k = 200;  // above the block size of 128
  std::vector<double> notes(count * d), q(d), W1(k * d), W2(k * d), v(k), g(d);
  for (std::size_t i = 0; i < notes.size(); ++i) notes[i] = static_cast<double>(i % 7) * 0.01;
  for (std::size_t i = 0; i < d; ++i) q[i] = g[i] = static_cast<double>(i % 5) * 0.1;
  for (std::size_t i = 0; i < W1.size(); ++i) W1[i] = W2[i] = static_cast<double>(i % 11) * 0.001;
  for (std::size_t i = 0; i < k; ++i) v[i] = 1;
  const attn::MatrixView<const double> H(notes.data(), count, d);
  const attn::additive score(attn::MatrixView<const double>(W1.data(), k, d),
                             attn::MatrixView<const double>(W2.data(), k, d), std::span<const double>(v));
  std::vector<double> dscores(count), dq(d), dnotes(count * d), dW1(k * d), dW2(k * d), dv(k);
  const attn::additive<double>::gradient_view dtheta{attn::MatrixView<double>(dW1.data(), k, d),
                                                     attn::MatrixView<double>(dW2.data(), k, d), std::span<double>(dv)};
  std::vector<double> dvalues(count * d);
  const attn::MatrixView<double> DN(dnotes.data(), count, d), DV(dvalues.data(), count, d);
  using additive_views = attn::notes_backward_views<double, attn::additive<double>::gradient_view>;
  const long n = count_allocations([&] {
    attn::backward(q, H, attn::dot, g, {dscores, dq, DN});
    attn::backward(q, H, score, g, additive_views{dscores, dq, DN, dtheta});
  });
  REQUIRE(n == 0);
  REQUIRE(dv[0] != 0);
  // backward_from_weights, from the forward's weights: none either
  std::vector<double> scores(count), weights(count), context(d);
  attn::attend(q, H, attn::dot, scores, weights, context);
  const attn::saved_forward<double> saved_weights{weights}, saved_both{weights, context};
  const long nw = count_allocations([&] {
    attn::backward(q, H, attn::dot, saved_weights, g, {dscores, dq, DN});
    attn::backward(q, H, H, attn::scaled_dot, saved_weights, g, {dscores, dq, DN, DV});
    attn::backward(q, H, score, saved_weights, g, additive_views{dscores, dq, DN, dtheta});
  });
  REQUIRE(nw == 0);
  // backward_from_forward, from the forward's weights and context (one pass, and the fallback
  // for a score with parameters): none either
  const long nf = count_allocations([&] {
    attn::backward(q, H, attn::dot, saved_both, g, {dscores, dq, DN});
    attn::backward(q, H, H, attn::scaled_dot, saved_both, g, {dscores, dq, DN, DV});
    attn::backward(q, H, score, saved_both, g, additive_views{dscores, dq, DN, dtheta});
  });
  REQUIRE(nf == 0);
}

namespace {
// A user's score with no batched members: backward goes note by note and needs two vectors of
// scratch, on the heap above 128 numbers.
using plain_dot = test_scores::note_by_note_dot;
}  // namespace

TEST_CASE("backward whose scratch cannot be allocated leaves every gradient untouched", "[alloc][errors]") {
  const std::size_t count = 5, d = 200;  // d above the 128 numbers of inline scratch
  std::vector<double> notes(count * d), q(d), g(d);
  for (std::size_t i = 0; i < notes.size(); ++i) notes[i] = static_cast<double>(i % 7) * 0.01;
  for (std::size_t i = 0; i < d; ++i) q[i] = g[i] = static_cast<double>(i % 5) * 0.1;
  const attn::MatrixView<const double> H(notes.data(), count, d);
  std::vector<double> scores(count), weights(count), context(d);
  attn::attend(q, H, plain_dot{}, scores, weights, context);
  std::vector<double> ds(count, 7.0), dq(d, 7.0), dn(count * d, 7.0), dqs(2 * d, 7.0), dss(2 * count, 7.0);
  std::vector<double> qs(2 * d), gs(2 * d);
  for (std::size_t i = 0; i < 2 * d; ++i) qs[i] = gs[i] = static_cast<double>(i % 3) * 0.2;
  const auto untouched = [](const std::vector<double>& v) {
    for (double x : v)
      if (x != 7.0) return false;
    return true;
  };
  attn::MatrixView<double> DN(dn.data(), count, d);
  refuse = true;
  const attn::saved_forward<double> saved_weights{weights}, saved_both{weights, context};
  CHECK_THROWS_AS(attn::backward(q, H, plain_dot{}, g, {ds, dq, DN}), std::bad_alloc);
  CHECK_THROWS_AS(attn::backward(q, H, plain_dot{}, saved_weights, g, {ds, dq, DN}), std::bad_alloc);
  CHECK_THROWS_AS(attn::backward(q, H, plain_dot{}, saved_both, g, {ds, dq, DN}), std::bad_alloc);
  CHECK_THROWS_AS(attn::align_backward(attn::MatrixView<const double>(qs.data(), 2, d), H, plain_dot{},
                                       attn::MatrixView<const double>(gs.data(), 2, d),
                                       {attn::MatrixView<double>(dss.data(), 2, count),
                                        attn::MatrixView<double>(dqs.data(), 2, d), DN}),
                  std::bad_alloc);
  refuse = false;
  CHECK(untouched(ds));
  CHECK(untouched(dq));
  CHECK(untouched(dn));
  CHECK(untouched(dss));
  CHECK(untouched(dqs));
  // and with memory, the same calls work
  attn::backward(q, H, plain_dot{}, g, {ds, dq, DN});
  CHECK(dq[1] != 7.0);
}

TEST_CASE("Many queries: the tiled attention, its backward and the heads allocate nothing in caller buffers",
          "[alloc]") {
  const std::size_t T = 200, n = 150, d = 64, dv = 32;
  attn::Matrix<float> Q(T, d, 0.01f), K(n, d, 0.02f), V(n, dv, 0.5f), Y(T, dv), A(T, n), dY(T, dv, 1.0f);
  attn::Matrix<float> dQ(T, d), dK(n, d), dV(n, dv);
  std::vector<float> lse(T);
  for (std::size_t i = 0; i < Q.size(); ++i) Q.data()[i] = static_cast<float>(i % 7) * 0.01f;
  const std::vector<char> keys(n, 1);
  for (const attn::options& opt : {attn::options{}, attn::options{.mask = keys, .causal = true}}) {
    CHECK(count_allocations([&] {
            attn::scaled_dot_product_attention(Q, K, V, {.out = Y.view(), .logsumexp = lse}, opt);
          }) == 0);
    CHECK(count_allocations([&] {
            attn::scaled_dot_product_attention(Q, K, V, {.out = Y.view(), .weights = A.view()}, opt);
          }) == 0);
    CHECK(count_allocations([&] {
            attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {Y.view(), lse}, dY,
                                                        {dQ.view(), dK.view(), dV.view()}, opt);
          }) == 0);
  }
  // heads: once the cache has the shapes, nothing more
  const std::size_t dm = 16, h = 4;
  attn::Matrix<float> X(T, dm, 0.1f), WQ(dm, h * 8, 0.05f), WK(dm, h * 8, 0.04f), WV(dm, h * 8, 0.3f), WO(h * 8, dm, 0.2f);
  attn::Matrix<float> Yh(T, dm), dYh(T, dm, 1.0f), dX(T, dm), dWQ(dm, h * 8);
  const attn::multi_head_parameters<float> p{.W_Q = WQ.view(), .W_K = WK.view(), .W_V = WV.view(), .W_O = WO.view(), .heads = h};
  attn::multi_head_cache<float> cache;
  attn::multi_head_attention(X, p, {.out = Yh.view()}, cache, {.causal = true});
  attn::multi_head_attention_backward(X, p, cache, dYh, {.inputs = dX.view(), .W_Q = dWQ.view()}, {.causal = true});
  CHECK(count_allocations([&] { attn::multi_head_attention(X, p, {.out = Yh.view()}, cache, {.causal = true}); }) == 0);
  CHECK(count_allocations([&] {
          attn::multi_head_attention_backward(X, p, cache, dYh, {.inputs = dX.view(), .W_Q = dWQ.view()}, {.causal = true});
        }) == 0);
  // on threads: the thread objects (three splits, each a vector of one worker and its
  // std::thread's state) and, in a worker that runs a product whose panels pass 8 KiB, that
  // thread's two panels (detail/gemm.hpp: per thread, and a worker is a new thread each split;
  // which items a worker takes is the scheduler's, so 2 per split at most); none at all on one
  // thread
  CHECK(count_allocations([&] { attn::multi_head_attention(X, p, {.out = Yh.view()}, cache, {.causal = true}, 1, 1); }) == 0);
  const long on_two = count_allocations(
      [&] { attn::multi_head_attention(X, p, {.out = Yh.view()}, cache, {.causal = true}, 1, 2); });
  CHECK(on_two > 0);
  CHECK(on_two <= 3 * 2 + 3 * 2);
  CHECK(count_allocations([&] {
          attn::multi_head_attention_backward(X, p, cache, dYh, {.inputs = dX.view(), .W_Q = dWQ.view()}, {.causal = true}, 1, 1);
        }) == 0);
  const long backward_on_two = count_allocations([&] {
    attn::multi_head_attention_backward(X, p, cache, dYh, {.inputs = dX.view(), .W_Q = dWQ.view()}, {.causal = true}, 1, 2);
  });
  CHECK(backward_on_two > 0);
  CHECK(backward_on_two <= 3 * 2 + 3 * 2);
  // decoding with a cache: the constructor allocates; the steps of one row, once one was seen,
  // nothing (grouped-query attention, two sequences of different lengths)
  const attn::multi_head_parameters<float> gqa{.W_Q = WQ.view(), .W_K = attn::MatrixView<const float>(WK.data(), dm, 8),
                                               .W_V = attn::MatrixView<const float>(WV.data(), dm, 8),
                                               .W_O = WO.view(), .heads = h, .kv_heads = 1};
  attn::kv_cache<float> kv(2, 256, 1, 8, 8);
  attn::Matrix<float> x2(2, dm, 0.3f), y2(2, dm);
  attn::multi_head_attention_cached(X, gqa, kv, 0, Yh.view());  // sequence 0's prompt: T rows
  attn::multi_head_attention_cached(x2, gqa, kv, y2.view());     // one row of each
  CHECK(count_allocations([&] {
          for (int step = 0; step < 5; ++step) attn::multi_head_attention_cached(x2, gqa, kv, y2.view());
        }) == 0);
  CHECK(kv.length(0) == T + 6);
  CHECK(kv.length(1) == 6);
  // fixed sizes: the unit's small cases live inline
  const attn::Matrix<double, 3, 3> X3{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Matrix<double, 3, 2> W3{{1, 0}, {0, 2}, {1, 1}};
  const attn::Matrix<double, 2, 3> WO3{{1, 0, 0}, {0, 1, 1}};
  CHECK(count_allocations([&] {
          const auto r = attn::self_attention(X3, W3, W3, W3);
          const auto r2 = attn::self_attention<2>(X3, W3, W3, W3, WO3, {.causal = true});
          CHECK(r.out(0, 0) + r2.out(0, 0) > 0);
        }) == 0);
}

TEST_CASE("The block, the feed-forward layer and the norms allocate nothing once their caches have the shapes",
          "[alloc][block]") {
  const std::size_t T = 48, dm = 32, h = 4, dff = 64;
  attn::Matrix<float> X(T, dm, 0.1f), WQ(dm, dm, 0.05f), WK(dm, dm, 0.04f), WV(dm, dm, 0.03f), WO(dm, dm, 0.02f),
      W1(dm, dff, 0.01f), W2(dff, dm, 0.02f), Y(T, dm), dY(T, dm, 1.0f), dX(T, dm), dWQ(dm, dm), dW1(dm, dff);
  for (std::size_t i = 0; i < X.size(); ++i) X.data()[i] = static_cast<float>(i % 11) * 0.1f;
  std::vector<float> g1(dm, 1.0f), b1(dm, 0.0f), dg1(dm), db1(dm);
  attn::block_parameters<float> p;
  p.attention = {.W_Q = WQ.view(), .W_K = WK.view(), .W_V = WV.view(), .W_O = WO.view(), .heads = h,
                 .positions = attn::rotary{}};
  p.ffn = {.W_1 = W1.view(), .W_2 = W2.view(), .act = attn::activation::gelu};
  p.norm_1 = {.gamma = g1, .beta = b1};
  const attn::block_gradients<float> g{.input = dX.view(), .W_Q = dWQ.view(), .W_1 = dW1.view(), .gamma_1 = dg1,
                                       .beta_1 = db1};
  for (const auto placement : {attn::norm_placement::post, attn::norm_placement::pre}) {
    p.placement = placement;
    attn::block_cache<float> cache;
    attn::transformer_block(X, p, Y, cache, {.causal = true});  // (sizes the cache)
    attn::transformer_block_backward(X, p, cache, dY, g, {.causal = true});
    CHECK(count_allocations([&] { attn::transformer_block(X, p, Y, cache, {.causal = true}); }) == 0);
    CHECK(count_allocations([&] { attn::transformer_block_backward(X, p, cache, dY, g, {.causal = true}); }) == 0);
  }
  std::vector<float> mean(T), rstd(T);
  CHECK(count_allocations([&] { attn::layer_norm(X, Y, {}, {mean, rstd}); }) == 0);
  CHECK(count_allocations([&] { attn::activate(attn::activation::gelu_tanh, X, Y); }) == 0);
  CHECK(count_allocations([&] { attn::apply_rotary(Y, h); }) == 0);
}

TEST_CASE("The initialisation from a seed allocates nothing", "[alloc][init]") {
  const std::size_t dm = 32, dff = 64;
  attn::Matrix<float> WQ(dm, dm), WK(dm, dm), WV(dm, dm), WO(dm, dm), W1(dm, dff), W2(dff, dm);
  std::vector<float> bQ(dm), bK(dm), bV(dm), bO(dm), b1(dff), b2(dm), g1(dm), e1(dm), g2(dm), e2(dm);
  const attn::block_buffers<float> b{
      .attention = {.W_Q = WQ.view(), .W_K = WK.view(), .W_V = WV.view(), .W_O = attn::transposed(WO.view()),
                    .b_Q = bQ, .b_K = bK, .b_V = bV, .b_O = bO},
      .ffn = {.W_1 = W1.view(), .b_1 = b1, .W_2 = W2.view(), .b_2 = b2},
      .gamma_1 = g1, .beta_1 = e1, .gamma_2 = g2, .beta_2 = e2};
  CHECK(count_allocations([&] { attn::initialize(b, 42); }) == 0);
  CHECK(count_allocations([&] { attn::fill_uniform(std::span<float>(b1), 0.5, 1); }) == 0);
  CHECK(WQ(3, 4) != 0.0f);  // (written)
}

TEST_CASE("Cross-entropy, the optimizer steps and sampling allocate nothing", "[alloc][training]") {
  const std::size_t T = 4, V = 600;  // V above the accumulate path's chunk of 256
  attn::Matrix<float> Z(T, V), G(T, V);
  for (std::size_t i = 0; i < T * V; ++i) Z.data()[i] = static_cast<float>(i % 13) * 0.25f;
  const std::vector<std::int64_t> y = {1, -100, 599, 7};
  std::vector<float> losses(T), p(V, 0.5f), g(V, 0.25f), m(V), v(V), b(V);
  attn::adamw_state<float> as{m, v};
  attn::sgd_state<float> ss{b};
  attn::random_generator gen{1};
  float loss = 0;
  std::size_t token = 0;
  CHECK(count_allocations([&] {
          loss += attn::cross_entropy(Z, y, losses);
          loss += attn::cross_entropy_backward(Z, y, G);
          loss += attn::cross_entropy_backward(Z, y, G, {}, 1.0f, true);
          attn::adamw_step(p, g, as, {});
          attn::sgd_step(p, g, ss, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
          loss += attn::clip_grad_norm(g, 1.0);
          token += attn::greedy(Z.row(0));
          token += attn::sample(Z.row(0), gen, {.temperature = 0.8, .top_k = 40, .top_p = 0.9});
        }) == 0);
  CHECK(loss > 0);
  CHECK(token < 2 * V);
  CHECK(as.step == 1);
}

TEST_CASE("Jacobians into views whose k-th allocation fails leave the view untouched, for every k",
          "[alloc][errors]") {
  // n and d above the 128 numbers of inline scratch: every scratch is on the heap
  const std::size_t count = 200, d = 150;
  std::vector<double> notes(count * d), q(d);
  for (std::size_t i = 0; i < notes.size(); ++i) notes[i] = static_cast<double>(i % 7) * 0.01;
  for (std::size_t i = 0; i < d; ++i) q[i] = static_cast<double>(i % 5) * 0.1;
  const attn::MatrixView<const double> H(notes.data(), count, d);
  std::vector<double> out(d * d);
  const auto J = [&] { return attn::MatrixView<double>(out.data(), d, d); };
  const auto fill = [&] {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = 7.0 + static_cast<double>(i % 3);
  };
  const auto untouched = [&] {
    for (std::size_t i = 0; i < out.size(); ++i)
      if (out[i] != 7.0 + static_cast<double>(i % 3)) return false;
    return true;
  };
  const auto check_every_allocation = [&](const char* what, auto&& call) {
    INFO(what);
    fill();
    const long made = count_allocations(call);
    REQUIRE(made >= 1);
    REQUIRE(!untouched());
    for (long k = 1; k <= made; ++k) {
      INFO("allocation " << k << " of " << made << " fails");
      fill();
      bool threw = false;
      countdown = k;
      try {
        call();
      } catch (const std::bad_alloc&) {
        threw = true;
      }
      countdown = 0;
      CHECK(threw);
      CHECK(untouched());
    }
  };
  check_every_allocation("jacobian_note", [&] { attn::jacobian_note(q, H, attn::dot, 3, J()); });
  check_every_allocation("jacobian_key", [&] { attn::jacobian_key(q, H, H, attn::scaled_dot, 3, J()); });
  check_every_allocation("jacobian_value", [&] { attn::jacobian_value(q, H, H, attn::dot, 3, J()); });
  check_every_allocation("jacobian_query", [&] { attn::jacobian_query(q, H, attn::dot, J()); });
  check_every_allocation("jacobian_query, keys and values", [&] { attn::jacobian_query(q, H, H, attn::dot, J()); });
}

namespace {
// A user's score (the dot product, note by note) that throws at the `at`-th note it scores.
using score_that_throws = test_scores::throwing_score;
using gave_up = test_scores::score_failure;
}  // namespace

TEST_CASE("A user's score that throws: every allocation attn made is freed", "[alloc][errors]") {
  // the calls that commit at the end allocate their scratch; the exception must free it
  const std::size_t count = 300, d = 150;
  std::vector<double> notes(count * d), q(d), out(count * d), small(d * d), s(count), w(count), c(d);
  for (std::size_t i = 0; i < notes.size(); ++i) notes[i] = static_cast<double>(i % 7) * 0.01;
  for (std::size_t i = 0; i < d; ++i) q[i] = static_cast<double>(i % 5) * 0.1;
  const attn::MatrixView<const double> H(notes.data(), count, d);
  const auto live_after = [](auto&& call) {
    const long before = allocations.load() - deallocations.load();
    bool threw = false;
    try {
      call();
    } catch (const gave_up&) {
      threw = true;
    }
    const long live = allocations.load() - deallocations.load() - before;
    CHECK(threw);
    return live;
  };
  CHECK(live_after([&] { attn::attend(q, H, score_that_throws{.at = 200}, s, w, c); }) == 0);
  CHECK(live_after([&] { (void)attn::attend(q, H, score_that_throws{.at = 200}); }) == 0);
  CHECK(live_after([&] {
          attn::backward(q, H, score_that_throws{.at = 200}, q,
                         attn::notes_backward_views<double>{s, c, attn::MatrixView<double>(out.data(), count, d)});
        }) == 0);
  CHECK(live_after([&] { attn::jacobian_query(q, H, score_that_throws{.at = 200}, attn::MatrixView<double>(small.data(), d, d)); }) == 0);
  attn::partial_attention<double> p;
  CHECK(live_after([&] { attn::attend_partial(q, H, score_that_throws{.at = 200}, p); }) == 0);
  CHECK(live_after([&] {
          attn::align(attn::MatrixView<const double>(notes.data(), 2, d), H, score_that_throws{.at = 450},
                      attn::MatrixView<double>(out.data(), 2, count), attn::MatrixView<double>(out.data() + 2 * count, 2, count),
                      attn::MatrixView<double>(small.data(), 2, d));
        }) == 0);
}

TEST_CASE("Steady state: a std::vector<bool> key mask and the throw_error policy allocate nothing per call",
          "[alloc]") {
  // a mask given as std::vector<bool> is copied once into the options (it holds bits); the calls
  // copied the options per sentence and per row, each copy a copy of the bytes: 4 allocations
  // per multi-head forward and backward. Under throw_error, sdpa allocated once, its backward twice.
  const std::size_t T = 40, n = 40, d = 16, dv = 8;
  attn::Matrix<float> Q(T, d, 0.01f), K(n, d, 0.02f), V(n, dv, 0.5f), Y(T, dv), dY(T, dv, 1.0f);
  attn::Matrix<float> dQ(T, d), dK(n, d), dV(n, dv);
  std::vector<float> lse(T);
  for (std::size_t i = 0; i < Q.size(); ++i) Q.data()[i] = static_cast<float>(i % 7) * 0.01f;
  std::vector<bool> bits(n, true);
  bits[3] = bits[17] = false;
  const attn::options masked{.mask = bits}, masked_causal{.mask = bits, .causal = true},
      throwing{.if_all_masked = attn::all_masked_policy::throw_error},
      throwing_masked{.mask = bits, .if_all_masked = attn::all_masked_policy::throw_error, .causal = true};
  for (const attn::options* opt : {&masked, &masked_causal, &throwing, &throwing_masked}) {
    CHECK(count_allocations([&] {
            attn::scaled_dot_product_attention(Q, K, V, {.out = Y.view(), .logsumexp = lse}, *opt);
          }) == 0);
    CHECK(count_allocations([&] {
            attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {Y.view(), lse}, dY,
                                                        {dQ.view(), dK.view(), dV.view()}, *opt);
          }) == 0);
  }
  // heads, a batch of 2 sentences, a key mask for each (B·n entries) or for all (n)
  const std::size_t dm = 8, h = 2;
  attn::Matrix<float> X(2 * T, dm, 0.1f), WQ(dm, h * 4, 0.05f), WK(dm, h * 4, 0.04f), WV(dm, h * 4, 0.3f),
      WO(h * 4, dm, 0.2f);
  for (std::size_t i = 0; i < X.size(); ++i) X.data()[i] = static_cast<float>(i % 5) * 0.1f;
  attn::Matrix<float> Yh(2 * T, dm), dYh(2 * T, dm, 1.0f), dX(2 * T, dm), dWQ(dm, h * 4);
  const attn::multi_head_parameters<float> p{.W_Q = WQ.view(), .W_K = WK.view(), .W_V = WV.view(), .W_O = WO.view(), .heads = h};
  std::vector<bool> both(2 * n, true);
  both[0] = both[n + 5] = false;
  const attn::options per_sentence{.mask = both}, per_sentence_throwing{.mask = both, .if_all_masked = attn::all_masked_policy::throw_error};
  attn::multi_head_cache<float> cache;
  for (const attn::options* opt : {&masked, &masked_causal, &per_sentence, &per_sentence_throwing, &throwing_masked}) {
    attn::multi_head_attention(X, p, {.out = Yh.view()}, cache, *opt, 2);
    attn::multi_head_attention_backward(X, p, cache, dYh, {.inputs = dX.view(), .W_Q = dWQ.view()}, *opt, 2);
    CHECK(count_allocations([&] { attn::multi_head_attention(X, p, {.out = Yh.view()}, cache, *opt, 2); }) == 0);
    CHECK(count_allocations([&] {
            attn::multi_head_attention_backward(X, p, cache, dYh, {.inputs = dX.view(), .W_Q = dWQ.view()}, *opt, 2);
          }) == 0);
  }
}

namespace {
// Whether every float of m is `sentinel`'s bits.
bool all_bits(const attn::Matrix<float>& m, float sentinel) {
  for (std::size_t i = 0; i < m.size(); ++i)
    if (std::memcmp(m.data() + i, &sentinel, sizeof(float)) != 0) return false;
  return true;
}
}  // namespace

TEST_CASE("Rows the tiled kernels leave: no allocation after an output is written, forward and backward",
          "[alloc][errors]") {
  // One query row holding a NaN: its scores are NaN, so the tiled kernels leave it to attend's
  // exact path, after (forward) the rows before it were written or (backward) the gradients were
  // zeroed. That path allocated its scratch there: an allocation that failed left half-written
  // outputs. Now the forward's scratch is on the stack (up to 1024 keys: no allocation at all)
  // and the backward's is made before the first write (only when a row will be left: its L_t).
  // (n past the 128 numbers of backward's inline scratch: the exact row's u_j lent by the caller)
  const std::size_t T = 30, n = 200, d = 8, dv = 4;
  attn::Matrix<float> Q(T, d), K(n, d), V(n, dv), dY(T, dv, 1.0f);
  for (std::size_t i = 0; i < Q.size(); ++i) Q.data()[i] = static_cast<float>(i % 7) * 0.1f;
  for (std::size_t i = 0; i < K.size(); ++i) K.data()[i] = static_cast<float>(i % 5) * 0.1f;
  for (std::size_t i = 0; i < V.size(); ++i) V.data()[i] = static_cast<float>(i % 3) - 1.0f;
  Q(20, 3) = std::numeric_limits<float>::quiet_NaN();
  attn::Matrix<float> Y(T, dv), Yref(T, dv);
  std::vector<float> lse(T), lse_ref(T);
  attn::scaled_dot_product_attention(Q, K, V, {.out = Yref.view(), .logsumexp = lse_ref});
  REQUIRE(Yref(20, 0) != Yref(20, 0));  // the row is NaN, as one query's rules say
  REQUIRE(Yref(19, 0) == Yref(19, 0));
  refuse = true;  // every allocation fails: the forward needs none
  bool threw = false;
  try {
    attn::scaled_dot_product_attention(Q, K, V, {.out = Y.view(), .logsumexp = lse});
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  refuse = false;
  CHECK(!threw);
  CHECK(std::memcmp(Y.data(), Yref.data(), Y.size() * sizeof(float)) == 0);
  // the backward: the k-th allocation fails, for every k; the gradients keep every bit
  const float sentinel = 7.0f;
  attn::Matrix<float> dQ(T, d, sentinel), dK(n, d, sentinel), dV(n, dv, sentinel);
  const auto call = [&](bool with_dq, bool with_dk) {
    attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {Yref.view(), lse_ref}, dY,
                                                {with_dq ? dQ.view() : attn::MatrixView<float>{},
                                                 with_dk ? dK.view() : attn::MatrixView<float>{}, dV.view()});
  };
  // every allocation of call(with_dq, with_dk) fails in turn: each throws, every gradient keeps its bits
  const auto fails_untouched = [&](bool with_dq, bool with_dk) {
    const long made = count_allocations([&] { call(with_dq, with_dk); });
    REQUIRE(made >= 1);
    for (long k = 1; k <= made; ++k) {
      INFO("allocation " << k << " of " << made << " fails");
      for (attn::Matrix<float>* m : {&dQ, &dK, &dV}) std::fill(m->data(), m->data() + m->size(), sentinel);
      threw = false;
      countdown = k;
      try {
        call(with_dq, with_dk);
      } catch (const std::bad_alloc&) {
        threw = true;
      }
      countdown = 0;
      CHECK(threw);
      CHECK((all_bits(dQ, sentinel) && all_bits(dK, sentinel) && all_bits(dV, sentinel)));
    }
  };
  for (const auto& given : {std::pair{true, true}, std::pair{false, true}, std::pair{true, false}}) {
    INFO("dL/dQ " << (given.first ? "given" : "left out") << ", dL/dK " << (given.second ? "given" : "left out"));
    fails_untouched(given.first, given.second);
  }
  // a row whose L_t is finite but whose dY_t is not: the tiled backward leaves it too (its NaN
  // reaches only the keys it sees), and its scratch is made before the first write as well
  Q(20, 3) = 0.5f;
  attn::scaled_dot_product_attention(Q, K, V, {.out = Yref.view(), .logsumexp = lse_ref});
  dY(5, 1) = std::numeric_limits<float>::quiet_NaN();
  fails_untouched(true, true);
  dY(5, 1) = 1.0f;
  Q(20, 3) = std::numeric_limits<float>::quiet_NaN();
  attn::scaled_dot_product_attention(Q, K, V, {.out = Yref.view(), .logsumexp = lse_ref});
  // heads: a NaN in X makes a row of every head NaN; the forward needs no allocation once the
  // cache has its shapes, the backward's come before ∂L/∂W_O, ∂L/∂b_O and ∂L/∂X
  const std::size_t dm = 6, h = 2;
  attn::Matrix<float> X(T, dm), WQ(dm, h * 4, 0.05f), WK(dm, h * 4, 0.04f), WV(dm, h * 4, 0.3f), WO(h * 4, dm, 0.2f);
  for (std::size_t i = 0; i < X.size(); ++i) X.data()[i] = static_cast<float>(i % 5) * 0.1f;
  X(12, 2) = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> bO(dm, 0.5f);
  const attn::multi_head_parameters<float> p{.W_Q = WQ.view(), .W_K = WK.view(), .W_V = WV.view(), .W_O = WO.view(), .b_O = bO, .heads = h};
  attn::multi_head_cache<float> cache;
  attn::Matrix<float> Yh(T, dm), Yh_ref(T, dm), dYh(T, dm, 1.0f);
  attn::multi_head_attention(X, p, {.out = Yh_ref.view()}, cache);
  refuse = true;
  threw = false;
  try {
    attn::multi_head_attention(X, p, {.out = Yh.view()}, cache);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  refuse = false;
  CHECK(!threw);
  CHECK(std::memcmp(Yh.data(), Yh_ref.data(), Yh.size() * sizeof(float)) == 0);
  attn::Matrix<float> dX(T, dm, sentinel), dWO(h * 4, dm, sentinel), dbO_m(1, dm, sentinel);
  const auto backward = [&] {
    attn::multi_head_attention_backward(X, p, cache, dYh,
                                        {.inputs = dX.view(), .W_O = dWO.view(), .b_O = std::span<float>(dbO_m.data(), dm)});
  };
  backward();  // the cache's gradients get their shapes
  const long made = count_allocations(backward);
  REQUIRE(made >= 1);
  for (long k = 1; k <= made; ++k) {
    INFO("heads backward: allocation " << k << " of " << made << " fails");
    for (attn::Matrix<float>* m : {&dX, &dWO, &dbO_m}) std::fill(m->data(), m->data() + m->size(), sentinel);
    threw = false;
    countdown = k;
    try {
      backward();
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    countdown = 0;
    CHECK(threw);
    CHECK((all_bits(dX, sentinel) && all_bits(dWO, sentinel) && all_bits(dbO_m, sentinel)));
  }
}

TEST_CASE("The model: forward, backward and a decoding step allocate nothing once their caches have the shapes",
          "[alloc][model]") {
  for (const attn::model_family family : {attn::model_family::decoder, attn::model_family::encoder_decoder}) {
    const attn::model_config c{.family = family, .vocabulary = 13, .d_model = 16, .layers = 2, .heads = 2,
                               .max_positions = 8, .positions = attn::position_encoding::rotary,
                               .placement = attn::norm_placement::pre, .final_norm = true, .tied = true};
    std::vector<float> buffer(attn::parameter_count(c)), grads(buffer.size());
    const attn::model_parameters<float> p = attn::bind_parameters<float>(c, std::span<float>(buffer));
    const attn::model_parameters<float> g = attn::bind_parameters<float>(c, std::span<float>(grads));
    attn::initialize(p, 3);
    const std::vector<std::int64_t> tokens{1, 2, 3, 4, 5, 6, 7, 8}, source{9, 10, 11, 12, 0, 1};
    const bool enc_dec = family == attn::model_family::encoder_decoder;
    const attn::model_input in{.tokens = tokens, .batch = 2,
                               .source = enc_dec ? std::span<const std::int64_t>(source) : std::span<const std::int64_t>()};
    attn::model_cache<float> cache;
    attn::Matrix<float> logits(8, 13);
    attn::model_forward(p, in, logits, cache);  // (sizes the cache)
    attn::model_backward(p, in, cache, logits, g);
    CHECK(count_allocations([&] { attn::model_forward(p, in, logits, cache); }) == 0);
    CHECK(count_allocations([&] { attn::model_backward(p, in, cache, logits, g); }) == 0);
    // a whole training step: forward, the loss's gradient, backward, AdamW (state in our memory)
    std::vector<float> m(buffer.size()), v(buffer.size());
    attn::adamw_state<float> state{m, v};
    const std::vector<std::int64_t> targets{2, 3, 4, 5, 6, 7, 8, -100};
    const auto step = [&] {
      attn::model_forward(p, in, logits, cache);
      (void)attn::cross_entropy_backward(logits, targets, logits);
      attn::model_backward(p, in, cache, logits, g);
      attn::adamw_step(std::span<float>(buffer), std::span<const float>(grads), state, {});
    };
    step();
    CHECK(count_allocations(step) == 0);
    // decoding: one token a sequence a step, after a first step of the same shape
    attn::model_kv_cache<float> kv(c, 2, 8);
    if (enc_dec) attn::model_encode(p, source, kv);
    attn::Matrix<float> step_logits(2, 13);
    const std::vector<std::int64_t> next{3, 4};
    attn::model_step(p, next, kv, step_logits);
    CHECK(count_allocations([&] { attn::model_step(p, next, kv, step_logits); }) == 0);
  }
}
