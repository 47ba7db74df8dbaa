// exp throughput: attn::detail::exp_array (and attn::detail::exp in a plain loop: `scalar`),
// against
//   naive  — std::exp in a loop (no -ffast-math: one libm call per element),
//   glibc  — glibc's vector expf/exp (libmvec), the very functions a -ffast-math std::exp loop
//            calls (_ZGVeN16v_expf with AVX-512, _ZGVdN8v_expf with AVX2), called here
//            directly so that this file needs no -ffast-math,
//   eigen  — Eigen's vectorized Array::exp.
// Inputs are uniform in [-20, 20): the range softmax feeds exp (x − max ≤ 0) and more.
#include <attn/detail/exp.hpp>  // exp, exp_array

#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "common.hpp"
#include "eigen.hpp"

namespace {

const std::vector<long> sizes{1024, 65536};

template <class T>
void apply_sizes(benchmark::internal::Benchmark* b) {
  for (long n : sizes) b->Arg(n);
}

template <class T>
void finish(benchmark::State& state) {
  const auto n = static_cast<double>(state.range(0));
  bench::counters(state, n, 2 * n * sizeof(T));
}

/// The library's exp over an array (what softmax and attention run): exp_array.
template <class T>
void exp_attn(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const bench::buffer<T>& x = bench::data<T>(n, 7, -20, 20);
  bench::buffer<T> y(n);
  for (auto _ : state) {
    bench::touch(x.data());
    attn::detail::exp_array(x.data(), y.data(), n);
    bench::touch(y.data());
  }
  finish<T>(state);
}

/// attn::detail::exp called per element in a plain loop (the same numbers, bit for bit): what
/// the compiler makes of the scalar function with all its special cases.
template <class T>
void exp_scalar(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const bench::buffer<T>& x = bench::data<T>(n, 7, -20, 20);
  bench::buffer<T> y(n);
  for (auto _ : state) {
    bench::touch(x.data());
    for (std::size_t i = 0; i < n; ++i) y[i] = attn::detail::exp(x[i]);
    bench::touch(y.data());
  }
  finish<T>(state);
}

template <class T>
void exp_naive(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const bench::buffer<T>& x = bench::data<T>(n, 7, -20, 20);
  bench::buffer<T> y(n);
  for (auto _ : state) {
    bench::touch(x.data());
    for (std::size_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
    bench::touch(y.data());
  }
  finish<T>(state);
}

// glibc's libmvec, by its vector-ABI names (x86-64 glibc ≥ 2.22; libm.so pulls libmvec in).
#if defined(__GLIBC__) && defined(__x86_64__) && (defined(__AVX512F__) || defined(__AVX2__))
#define ATTN_BENCH_HAVE_LIBMVEC 1
#if defined(__AVX512F__)
constexpr std::size_t mvec_bytes = 64;
typedef float mvec_f __attribute__((vector_size(64)));
typedef double mvec_d __attribute__((vector_size(64)));
extern "C" mvec_f _ZGVeN16v_expf(mvec_f);
extern "C" mvec_d _ZGVeN8v_exp(mvec_d);
inline mvec_f mvec_exp(mvec_f v) { return _ZGVeN16v_expf(v); }
inline mvec_d mvec_exp(mvec_d v) { return _ZGVeN8v_exp(v); }
#else
constexpr std::size_t mvec_bytes = 32;
typedef float mvec_f __attribute__((vector_size(32)));
typedef double mvec_d __attribute__((vector_size(32)));
extern "C" mvec_f _ZGVdN8v_expf(mvec_f);
extern "C" mvec_d _ZGVdN4v_exp(mvec_d);
inline mvec_f mvec_exp(mvec_f v) { return _ZGVdN8v_expf(v); }
inline mvec_d mvec_exp(mvec_d v) { return _ZGVdN4v_exp(v); }
#endif

/// The loop GCC emits for `y[i] = std::exp(x[i])` under -ffast-math: whole vectors through
/// libmvec (the sizes here are multiples of the vector length, so there is no tail).
template <class T>
void exp_glibc(benchmark::State& state) {
  using V = std::conditional_t<sizeof(T) == 4, mvec_f, mvec_d>;
  constexpr std::size_t L = mvec_bytes / sizeof(T);
  const auto n = static_cast<std::size_t>(state.range(0));
  const bench::buffer<T>& x = bench::data<T>(n, 7, -20, 20);
  bench::buffer<T> y(n);
  for (auto _ : state) {
    bench::touch(x.data());
    for (std::size_t i = 0; i + L <= n; i += L) {
      V v;
      std::memcpy(&v, x.data() + i, sizeof v);
      v = mvec_exp(v);
      std::memcpy(y.data() + i, &v, sizeof v);
    }
    bench::touch(y.data());
  }
  finish<T>(state);
}
#endif

#ifdef ATTN_BENCH_HAVE_EIGEN
template <class T>
void exp_eigen(benchmark::State& state) {
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  const auto n = static_cast<std::size_t>(state.range(0));
  const bench::buffer<T>& x = bench::data<T>(n, 7, -20, 20);
  bench::buffer<T> y(n);
  for (auto _ : state) {
    bench::touch(x.data());
    Eigen::Map<Array>(y.data(), static_cast<Eigen::Index>(n)) =
        Eigen::Map<const Array>(x.data(), static_cast<Eigen::Index>(n)).exp();
    bench::touch(y.data());
  }
  finish<T>(state);
}
#endif

}  // namespace

BENCHMARK_TEMPLATE(exp_attn, float)->Name("exp/f32/attn")->Apply(apply_sizes<float>);
BENCHMARK_TEMPLATE(exp_scalar, float)->Name("exp/f32/scalar")->Apply(apply_sizes<float>);
BENCHMARK_TEMPLATE(exp_naive, float)->Name("exp/f32/naive")->Apply(apply_sizes<float>);
BENCHMARK_TEMPLATE(exp_attn, double)->Name("exp/f64/attn")->Apply(apply_sizes<double>);
BENCHMARK_TEMPLATE(exp_scalar, double)->Name("exp/f64/scalar")->Apply(apply_sizes<double>);
BENCHMARK_TEMPLATE(exp_naive, double)->Name("exp/f64/naive")->Apply(apply_sizes<double>);
#ifdef ATTN_BENCH_HAVE_LIBMVEC
BENCHMARK_TEMPLATE(exp_glibc, float)->Name("exp/f32/glibc")->Apply(apply_sizes<float>);
BENCHMARK_TEMPLATE(exp_glibc, double)->Name("exp/f64/glibc")->Apply(apply_sizes<double>);
#endif
#ifdef ATTN_BENCH_HAVE_EIGEN
BENCHMARK_TEMPLATE(exp_eigen, float)->Name("exp/f32/eigen")->Apply(apply_sizes<float>);
BENCHMARK_TEMPLATE(exp_eigen, double)->Name("exp/f64/eigen")->Apply(apply_sizes<double>);
#endif
