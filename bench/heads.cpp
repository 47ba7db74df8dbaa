// Self-attention with projections (attn::multi_head_attention), T = 1024 rows of d_model = 512,
// h = 1 or 8 heads of d_k = d_v = 64 (W_Q, W_K, W_V: 512 × 64h, W_O: 64h × 512), no mask:
//   heads_h…/…/one        the forward on one thread (the caller-buffer overload, cache reused),
//   heads_h…/…/attn       the same on two threads (the threads overload),
//   heads_backward_h…/…/attn     multi_head_attention_backward on one thread: ∂L/∂X and every
//                                ∂L/∂W from the cache of the forward (run once, outside the loop),
//   heads_backward_h…/…/forward  the forward on one thread, beside it,
//   heads_backward_threads_h…/…/attn  the backward on two threads, against `one`, on one.
// All wall time (UseRealTime: CPU time would add the second thread's), one process, so the
// ratios of one run are what to read (bench/ratios.py: heads 2 threads vs 1, backward vs forward).
#include <attn/heads.hpp>
#include <attn/heads_backward.hpp>

#include <cstddef>
#include <string>

#include "common.hpp"

namespace {

constexpr std::size_t d_model = 512, head_dim = 64;

/// X, the weights and dY for T rows and h heads, and the forward's cache (and Y) kept.
template <class T>
struct problem {
  std::size_t rows, heads, width;
  attn::Matrix<T> X, WQ, WK, WV, WO, Y, dY;
  attn::multi_head_cache<T> cache;
  problem(std::size_t t, std::size_t h)
      : rows(t), heads(h), width(h * head_dim), X(t, d_model), WQ(d_model, width), WK(d_model, width),
        WV(d_model, width), WO(width, d_model), Y(t, d_model), dY(t, d_model) {
    std::uint64_t seed = 70;
    for (attn::Matrix<T>* m : {&X, &WQ, &WK, &WV, &WO, &dY}) {
      const auto& v = bench::data<T>(m->size(), seed++, -0.5, 0.5);
      std::copy(v.begin(), v.end(), m->data());
    }
  }
  [[nodiscard]] attn::multi_head_parameters<T> params() const {
    return {.W_Q = WQ.view(), .W_K = WK.view(), .W_V = WV.view(), .W_O = WO.view(), .heads = heads};
  }
  void forward(std::size_t threads) {
    attn::multi_head_attention(X, params(), {.out = Y.view()}, cache, {}, 1, threads);
  }
};

/// Items: query-key pairs of every head; bytes: X and the four weights, read once.
template <class T>
void finish(benchmark::State& state, const problem<T>& p) {
  bench::counters(state, static_cast<double>(p.rows * p.rows * p.heads),
                  static_cast<double>((p.rows * d_model + 4 * d_model * p.width) * sizeof(T)));
}

template <class T>
void heads_forward(benchmark::State& state, std::size_t h, std::size_t threads) {
  problem<T> p(static_cast<std::size_t>(state.range(0)), h);
  p.forward(threads);  // (sizes the cache)
  for (auto _ : state) {
    bench::touch(p.X.data());
    p.forward(threads);
    bench::touch(p.Y.data());
  }
  finish(state, p);
}

template <class T>
void heads_backward(benchmark::State& state, std::size_t h, std::size_t threads = 1) {
  problem<T> p(static_cast<std::size_t>(state.range(0)), h);
  attn::Matrix<T> dX(p.rows, d_model), dWQ(d_model, p.width), dWK(d_model, p.width), dWV(d_model, p.width),
      dWO(p.width, d_model);
  const attn::multi_head_gradients<T> grads{.inputs = dX.view(), .W_Q = dWQ.view(), .W_K = dWK.view(),
                                            .W_V = dWV.view(), .W_O = dWO.view()};
  p.forward(1);
  attn::multi_head_attention_backward(p.X, p.params(), p.cache, p.dY, grads);  // (sizes the cache)
  for (auto _ : state) {
    bench::touch(p.X.data());
    attn::multi_head_attention_backward(p.X, p.params(), p.cache, p.dY, grads, {}, 1, threads);
    bench::touch(dX.data());
  }
  finish(state, p);
}

template <class T>
void register_all() {
  const std::string ty = bench::type_name<T>();
  const auto add = [](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(), fn)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
  };
  for (const std::size_t h : {std::size_t{1}, std::size_t{8}}) {
    const std::string hs = "_h" + std::to_string(h);
    add("heads" + hs + "/" + ty + "/attn", [h](benchmark::State& s) { heads_forward<T>(s, h, 2); });
    add("heads" + hs + "/" + ty + "/one", [h](benchmark::State& s) { heads_forward<T>(s, h, 1); });
    add("heads_backward" + hs + "/" + ty + "/attn", [h](benchmark::State& s) { heads_backward<T>(s, h); });
    add("heads_backward" + hs + "/" + ty + "/forward", [h](benchmark::State& s) { heads_forward<T>(s, h, 1); });
    add("heads_backward_threads" + hs + "/" + ty + "/attn", [h](benchmark::State& s) { heads_backward<T>(s, h, 2); });
    add("heads_backward_threads" + hs + "/" + ty + "/one", [h](benchmark::State& s) { heads_backward<T>(s, h, 1); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all<float>();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
