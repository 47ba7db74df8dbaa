// softmax over n = 3 … 1M scores: attn::softmax against a naive std::exp loop and Eigen 3.4,
// in the same run, and (n ≥ 64) against `floor`: attn's own vector exp with nothing around it,
// what softmax could take with the exp it has. Scores are uniform in [-10, 10); the output is
// a separate buffer.
#include <attn/detail/exp.hpp>
#include <attn/detail/simd.hpp>
#include <attn/softmax.hpp>

#include <cmath>
#include <cstddef>
#include <cstring>
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

/// The sizes from 64 on: whole groups of four vectors (64 bytes each at most), for `floor`.
void apply_sizes_from_64(benchmark::internal::Benchmark* b) {
  for (long n : sizes)
    if (n >= 64) b->Arg(n);
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

/// Times kernel(x, out), x the n scores and out n numbers, with the counters of `finish`.
template <class T, class Kernel>
void measure(benchmark::State& state, Kernel kernel) {
  const bench::buffer<T>* x = nullptr;
  bench::buffer<T> out;
  setup(state, x, out);
  for (auto _ : state) {
    bench::touch(x->data());
    kernel(*x, out);
    bench::touch(out.data());
  }
  finish<T>(state);
}

/// The library: stable (max-shifted) softmax, masks and policies included.
template <class T>
void softmax_attn(benchmark::State& state) {
  measure<T>(state, [](const bench::buffer<T>& x, bench::buffer<T>& out) { attn::softmax(x, out); });
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

#if ATTN_VECTOR_EXTENSIONS
/// The floor of softmax with attn's exp: the max over four vectors of partial maxima, then
/// exp_in_range (the exp kernel's arithmetic without its range test or special cases: these
/// scores are known to be in range) stored and summed over four vectors, then one scale. No
/// checks, masks, β, or order of summation kept. n must be a multiple of four vectors. What
/// softmax's own time is read against to tell its overhead from its exp's (docs/performance.md,
/// "Known gaps"); not a correct softmax for every input.
template <class T>
void floor_softmax(const T* x, T* out, std::size_t n) {
  using namespace attn::detail;
  constexpr std::size_t W = simd_lanes<T>;
  using V = vec<T, W>;
  using U = vec<typename exp_consts<T>::uint, W>;
  V m[4];
  for (std::size_t k = 0; k < 4; ++k) m[k] = load<T, W>(x + k * W);
  for (std::size_t i = 4 * W; i < n; i += 4 * W)
    for (std::size_t k = 0; k < 4; ++k) {
      const V v = load<T, W>(x + i + k * W);
      m[k] = v > m[k] ? v : m[k];
    }
  m[0] = m[0] > m[1] ? m[0] : m[1];
  m[2] = m[2] > m[3] ? m[2] : m[3];
  m[0] = m[0] > m[2] ? m[0] : m[2];
  T top = m[0][0];
  for (std::size_t k = 1; k < W; ++k) top = m[0][k] > top ? m[0][k] : top;
  U unused{};
  V sum[4] = {};
  for (std::size_t i = 0; i < n; i += 4 * W)
    for (std::size_t k = 0; k < 4; ++k) {
      const V e = exp_in_range<T, W, false>(load<T, W>(x + i + k * W) - top, unused);
      sum[k] += e;
      std::memcpy(out + i + k * W, &e, sizeof(V));
    }
  const V total = (sum[0] + sum[1]) + (sum[2] + sum[3]);
  T s = 0;
  for (std::size_t k = 0; k < W; ++k) s += total[k];
  const T inv = T(1) / s;
  for (std::size_t i = 0; i < n; ++i) out[i] *= inv;
}

template <class T>
void softmax_floor(benchmark::State& state) {
  measure<T>(state, [](const bench::buffer<T>& x, bench::buffer<T>& out) {
    floor_softmax(x.data(), out.data(), out.size());
  });
}
#endif

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
#if ATTN_VECTOR_EXTENSIONS
BENCHMARK_TEMPLATE(softmax_floor, float)->Name("softmax/f32/floor")->Apply(apply_sizes_from_64);
BENCHMARK_TEMPLATE(softmax_floor, double)->Name("softmax/f64/floor")->Apply(apply_sizes_from_64);
#endif
#ifdef ATTN_BENCH_HAVE_EIGEN
BENCHMARK_TEMPLATE(softmax_eigen, float)->Name("softmax/f32/eigen")->Apply(apply_sizes<float>);
BENCHMARK_TEMPLATE(softmax_eigen, double)->Name("softmax/f64/eigen")->Apply(apply_sizes<double>);
#endif
