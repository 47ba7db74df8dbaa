// softmax over n = 3 … 1M scores: attn::softmax against a naive std::exp loop and Eigen 3.4,
// in the same run. Scores are uniform in [-10, 10); the output is a separate buffer.
#include <attn/softmax.hpp>

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "common.hpp"
#include "eigen.hpp"

namespace {

const std::vector<long> sizes{3, 16, 64, 1024, 65536, 1 << 20};

template <class T>
void apply_sizes(benchmark::internal::Benchmark* b) {
  for (long n : sizes) b->Arg(n);
}

template <class T>
void setup(benchmark::State& state, const bench::buffer<T>*& x, bench::buffer<T>& out) {
  const auto n = static_cast<std::size_t>(state.range(0));
  x = &bench::data<T>(n, 1, -10, 10);
  out.assign(n, T(0));
}

template <class T>
void finish(benchmark::State& state) {
  const auto n = static_cast<double>(state.range(0));
  bench::counters(state, n, 2 * n * sizeof(T));  // read the scores, write the weights
}

/// The library: stable (max-shifted) softmax, masks and policies included.
template <class T>
void softmax_attn(benchmark::State& state) {
  const bench::buffer<T>* x = nullptr;
  bench::buffer<T> out;
  setup(state, x, out);
  for (auto _ : state) {
    bench::touch(x->data());
    attn::softmax(*x, out);
    bench::touch(out.data());
  }
  finish<T>(state);
}

/// What one writes first: max, then std::exp and sum, then divide.
template <class T>
void softmax_naive(benchmark::State& state) {
  const bench::buffer<T>* x = nullptr;
  bench::buffer<T> out;
  setup(state, x, out);
  const std::size_t n = out.size();
  for (auto _ : state) {
    bench::touch(x->data());
    const T* in = x->data();
    T m = in[0];
    for (std::size_t i = 1; i < n; ++i) m = in[i] > m ? in[i] : m;
    T sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += out[i] = std::exp(in[i] - m);
    for (std::size_t i = 0; i < n; ++i) out[i] /= sum;
    bench::touch(out.data());
  }
  finish<T>(state);
}

#ifdef ATTN_BENCH_HAVE_EIGEN
/// Eigen: maxCoeff, a vectorized exp of the shifted array, a sum and a scale.
template <class T>
void softmax_eigen(benchmark::State& state) {
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  const bench::buffer<T>* x = nullptr;
  bench::buffer<T> out;
  setup(state, x, out);
  const auto n = static_cast<Eigen::Index>(out.size());
  for (auto _ : state) {
    bench::touch(x->data());
    const Eigen::Map<const Array> in(x->data(), n);
    Eigen::Map<Array> o(out.data(), n);
    o = (in - in.maxCoeff()).exp();
    o *= T(1) / o.sum();
    bench::touch(out.data());
  }
  finish<T>(state);
}
#endif

}  // namespace

BENCHMARK_TEMPLATE(softmax_attn, float)->Name("softmax/f32/attn")->Apply(apply_sizes<float>);
BENCHMARK_TEMPLATE(softmax_naive, float)->Name("softmax/f32/naive")->Apply(apply_sizes<float>);
BENCHMARK_TEMPLATE(softmax_attn, double)->Name("softmax/f64/attn")->Apply(apply_sizes<double>);
BENCHMARK_TEMPLATE(softmax_naive, double)->Name("softmax/f64/naive")->Apply(apply_sizes<double>);
#ifdef ATTN_BENCH_HAVE_EIGEN
BENCHMARK_TEMPLATE(softmax_eigen, float)->Name("softmax/f32/eigen")->Apply(apply_sizes<float>);
BENCHMARK_TEMPLATE(softmax_eigen, double)->Name("softmax/f64/eigen")->Apply(apply_sizes<double>);
#endif
