#pragma once
/// \file bench/common.hpp
/// What every benchmark of attn shares: deterministic random inputs (built once per shape and
/// kept, so that Google Benchmark's repeated calls of a benchmark function do not pay for
/// them), the type names used in benchmark names, and the counters.
///
/// Benchmark names follow `kernel/type/impl/size...` (for example `softmax/f32/eigen/1024`),
/// which bench/ratios.py reads to put each implementation beside the others of its kernel,
/// type and size: `attn` is the library, `naive` a plain std::exp loop written here, `eigen`
/// Eigen 3.4 (only when ATTN_BENCH_HAVE_EIGEN is defined), `readonce` the memory floor.

#include <attn/allocator.hpp>
#include <benchmark/benchmark.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace bench {

/// "f32" / "f64", for benchmark names.
template <class T>
inline const char* type_name() {
  return sizeof(T) == 4 ? "f32" : "f64";
}

/// A fast deterministic generator (SplitMix64), so that inputs of 16M numbers are quick to make.
class rng {
  std::uint64_t s_;

public:
  explicit rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
  }
};

/// The benchmarks' buffers, inputs (from `data`) and outputs alike: 64-byte aligned, as attn's
/// own dynamic Vector and Matrix (and PyTorch's and Eigen's allocations) are. With malloc's
/// 16 bytes the start moves between processes and builds: rows at 64-byte strides then split
/// every (AVX-512) or every other (AVX2) vector load across two cache lines, the same kernel
/// takes up to 1.4x the time, attn's and Eigen's alike, and the ratios drifted with it.
template <class T>
using buffer = std::vector<T, attn::aligned_allocator<T>>;

/// n numbers uniform in [lo, hi), the same every time for the same arguments; built once and
/// kept for the life of the process.
template <class T>
const buffer<T>& data(std::size_t n, std::uint64_t seed, double lo = -1, double hi = 1) {
  static std::map<std::tuple<std::size_t, std::uint64_t, double, double>, buffer<T>> cache;
  const auto key = std::make_tuple(n, seed, lo, hi);
  auto it = cache.find(key);
  if (it == cache.end()) {
    buffer<T> v(n);
    rng g(seed);
    for (auto& x : v) x = static_cast<T>(g.uniform(lo, hi));
    it = cache.emplace(key, std::move(v)).first;
  }
  return it->second;
}

/// Sets items/s (`items` per iteration) and bytes/s (`bytes` per iteration).
inline void counters(benchmark::State& state, double items, double bytes) {
  state.SetItemsProcessed(static_cast<std::int64_t>(items * static_cast<double>(state.iterations())));
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes * static_cast<double>(state.iterations())));
}

/// Keeps the compiler from assuming anything about `p`'s memory across iterations: call on
/// the outputs after each iteration (and on inputs, so that nothing is hoisted out of the loop).
template <class T>
inline void touch(T* p) {
  benchmark::DoNotOptimize(p);
  benchmark::ClobberMemory();
}

/// Adds one benchmark run per (a, b) pair (Google Benchmark's Args).
inline void apply_pairs(benchmark::internal::Benchmark* b, const std::vector<std::array<long, 2>>& pairs) {
  for (const auto& p : pairs) b->Args({p[0], p[1]});
}

/// The naive forward every baseline of attend, align and backward starts from: for the n notes
/// h_j (rows of H, d numbers each, row-major), s_j = ⟨q, h_j⟩, w = softmax(s) with std::exp
/// (max, exps and their sum, divide), c = Σ_j w_j h_j. s and w hold n numbers, c d numbers.
template <class T>
void naive_attend(const T* H, const T* q, std::size_t n, std::size_t d, T* s, T* w, T* c) {
  for (std::size_t j = 0; j < n; ++j) {
    T acc = 0;
    for (std::size_t i = 0; i < d; ++i) acc += H[j * d + i] * q[i];
    s[j] = acc;
  }
  T m = s[0];
  for (std::size_t j = 1; j < n; ++j) m = s[j] > m ? s[j] : m;
  T sum = 0;
  for (std::size_t j = 0; j < n; ++j) sum += w[j] = std::exp(s[j] - m);
  for (std::size_t j = 0; j < n; ++j) w[j] /= sum;
  for (std::size_t i = 0; i < d; ++i) c[i] = 0;
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < d; ++i) c[i] += w[j] * H[j * d + i];
}

}  // namespace bench
