// Cross-entropy over T positions of V logits (docs/training.md): attn::cross_entropy (the loss
// alone) and attn::cross_entropy_backward (the loss and the written gradient), against a plain
// loop of std::exp as one writes it by hand (the max, Σ exp, the log; then each exp once more for
// the gradient), in the same run. Logits uniform in [-4, 4); (T, V) = (256, 64), (256, 512),
// (64, 50257: GPT-2's vocabulary). Items: logits per second.
#include <attn/cross_entropy.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common.hpp"

namespace {

template <class T>
T plain_cross_entropy(const T* z, const std::int64_t* y, T* g, std::size_t rows, std::size_t V) {
  double total = 0;
  const T c = T(1) / static_cast<T>(rows);
  for (std::size_t t = 0; t < rows; ++t) {
    const T* r = z + t * V;
    T* gr = g + t * V;
    T m = r[0];
    for (std::size_t j = 1; j < V; ++j) m = std::max(m, r[j]);
    T s = 0;
    for (std::size_t j = 0; j < V; ++j) s += std::exp(r[j] - m);
    total += static_cast<double>(std::log(s) + m - r[y[t]]);
    if (g != nullptr) {
      for (std::size_t j = 0; j < V; ++j) gr[j] = std::exp(r[j] - m) / s * c;
      gr[y[t]] -= c;
    }
  }
  return static_cast<T>(total / static_cast<double>(rows));
}

enum class which { attn_loss, attn_backward, plain_loss, plain_backward };

template <class T>
void run(benchmark::State& state, which w) {
  const auto rows = static_cast<std::size_t>(state.range(0));
  const auto V = static_cast<std::size_t>(state.range(1));
  const bench::buffer<T>& z = bench::data<T>(rows * V, 7, -4, 4);
  bench::buffer<T> g(rows * V);
  std::vector<std::int64_t> y(rows);
  for (std::size_t t = 0; t < rows; ++t) y[t] = static_cast<std::int64_t>((t * 7919) % V);
  const attn::MatrixView<const T> Z(z.data(), rows, V);
  const attn::MatrixView<T> G(g.data(), rows, V);
  for (auto _ : state) {
    T loss = 0;
    switch (w) {
    case which::attn_loss: loss = attn::cross_entropy(Z, y); break;
    case which::attn_backward: loss = attn::cross_entropy_backward(Z, y, G); break;
    case which::plain_loss: loss = plain_cross_entropy<T>(z.data(), y.data(), nullptr, rows, V); break;
    case which::plain_backward: loss = plain_cross_entropy<T>(z.data(), y.data(), g.data(), rows, V); break;
    }
    benchmark::DoNotOptimize(loss);
    bench::touch(g.data());
  }
  const double n = static_cast<double>(rows * V);
  bench::counters(state, n, (w == which::attn_loss || w == which::plain_loss ? 1 : 2) * n * sizeof(T));
}

void run_float(benchmark::State& state, which w) { run<float>(state, w); }
void run_double(benchmark::State& state, which w) { run<double>(state, w); }

void shapes(benchmark::internal::Benchmark* b) { bench::apply_pairs(b, {{256, 64}, {256, 512}, {64, 50257}}); }

}  // namespace

BENCHMARK_CAPTURE(run_float, attn_loss, which::attn_loss)->Apply(shapes);
BENCHMARK_CAPTURE(run_float, attn_loss_and_gradient, which::attn_backward)->Apply(shapes);
BENCHMARK_CAPTURE(run_float, plain_loss, which::plain_loss)->Apply(shapes);
BENCHMARK_CAPTURE(run_float, plain_loss_and_gradient, which::plain_backward)->Apply(shapes);
BENCHMARK_CAPTURE(run_double, attn_loss_and_gradient, which::attn_backward)->Apply(shapes);
BENCHMARK_CAPTURE(run_double, plain_loss_and_gradient, which::plain_backward)->Apply(shapes);
