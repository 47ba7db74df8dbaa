// Decoding with a key/value cache (attn/kv_cache.hpp): one new row of one sequence over n cached
// rows, d_model = 512, h = 8 heads of d_k = d_v = 64 over h_kv = 8 or 2 key/value heads, causal:
//   decode_kv…/…/n/cached     multi_head_attention_cached of the new row (projections of one row,
//                             each head over n + 1 keys, W_O), the cache cut back to n after it,
//   decode_kv…/…/n/uncached   the same row as a whole forward computes it: multi_head_attention
//                             over the n + 1 rows, causal.
// The cached step costs O(d_model² + n·h·d_k) per row, the uncached one O(n·d_model² + n²·h·d_k):
// the ratio cached/uncached is what to read (and the cached step's growth with n, linear).
#include <attn/kv_cache.hpp>

#include <cstddef>
#include <string>

#include "common.hpp"

namespace {

constexpr std::size_t d_model = 512, heads = 8, head_dim = 64;

template <class T>
struct problem {
  std::size_t n, kv_heads;
  attn::Matrix<T> X, WQ, WK, WV, WO, Y;
  problem(std::size_t rows, std::size_t kvh)
      : n(rows), kv_heads(kvh), X(rows + 1, d_model), WQ(d_model, heads * head_dim),
        WK(d_model, kvh * head_dim), WV(d_model, kvh * head_dim), WO(heads * head_dim, d_model),
        Y(rows + 1, d_model) {
    std::uint64_t seed = 90;
    for (attn::Matrix<T>* m : {&X, &WQ, &WK, &WV, &WO}) {
      const auto& v = bench::data<T>(m->size(), seed++, -0.5, 0.5);
      std::copy(v.begin(), v.end(), m->data());
    }
  }
  [[nodiscard]] attn::multi_head_parameters<T> params() const {
    return {.W_Q = WQ.view(), .W_K = WK.view(), .W_V = WV.view(), .W_O = WO.view(), .heads = heads,
            .kv_heads = kv_heads};
  }
};

template <class T>
void cached(benchmark::State& state, std::size_t kvh) {
  problem<T> p(static_cast<std::size_t>(state.range(0)), kvh);
  attn::kv_cache<T> cache(1, p.n + 1, kvh, head_dim, head_dim);
  attn::multi_head_attention_cached(attn::MatrixView<const T>(p.X.data(), p.n, d_model), p.params(), cache, 0,
                                    attn::MatrixView<T>(p.Y.data(), p.n, d_model));  // the n rows before
  const attn::MatrixView<const T> x(p.X.row(p.n).data(), 1, d_model);
  const attn::MatrixView<T> y(p.Y.row(p.n).data(), 1, d_model);
  for (auto _ : state) {
    bench::touch(p.X.data());
    attn::multi_head_attention_cached(x, p.params(), cache, y);
    cache.truncate(0, p.n);
    bench::touch(p.Y.data());
  }
  bench::counters(state, static_cast<double>((p.n + 1) * heads), 0);
}

template <class T>
void uncached(benchmark::State& state, std::size_t kvh) {
  problem<T> p(static_cast<std::size_t>(state.range(0)), kvh);
  attn::multi_head_cache<T> mc;
  attn::multi_head_attention(p.X, p.params(), {.out = p.Y.view()}, mc, {.causal = true});
  for (auto _ : state) {
    bench::touch(p.X.data());
    attn::multi_head_attention(p.X, p.params(), {.out = p.Y.view()}, mc, {.causal = true});
    bench::touch(p.Y.data());
  }
  bench::counters(state, static_cast<double>((p.n + 1) * heads), 0);
}

template <class T>
void register_all() {
  const std::string ty = bench::type_name<T>();
  for (const std::size_t kvh : {std::size_t{8}, std::size_t{2}}) {
    const std::string name = "decode_kv" + std::to_string(kvh) + "/" + ty;
    for (const std::int64_t n : {128, 512, 2048}) {
      benchmark::RegisterBenchmark((name + "/" + std::to_string(n) + "/cached").c_str(),
                                   [kvh](benchmark::State& s) { cached<T>(s, kvh); })
          ->Arg(n)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark((name + "/" + std::to_string(n) + "/uncached").c_str(),
                                   [kvh](benchmark::State& s) { uncached<T>(s, kvh); })
          ->Arg(n)
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

// Registered before Google Benchmark's main (benchmark_main) runs them.
[[maybe_unused]] const bool registered = (register_all<float>(), true);

}  // namespace
