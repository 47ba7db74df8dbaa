// One look back, s = Hq, α = softmax(s), c = Hᵀα, for one query over n notes of d numbers:
//   attn      attn::attend into caller buffers (dynamic sizes; fixed sizes for (3,3)),
//   naive     the loops one writes first, std::exp, two passes over the notes,
//   eigen     Eigen 3.4: s = H*q, a vectorized softmax, c = Hᵀα (two passes over H);
//             Matrix<T,3,3> for the fixed (3,3) case,
//   readonce  the memory floor: a loop that reads every note once and adds it up, nothing else.
//   unchecked attn::attend without its overlap check (the detail:: call attend makes after it),
//   exact     attn::attend with the exact overlap check of every pair (row by row, out of line)
//             instead of the inline check of spans: what the inline check saves
//             (docs/performance.md, "Overlap checks").
// Notes and query uniform in [-1, 1).
#include <attn/attention.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "common.hpp"
#include "eigen.hpp"

namespace {

const std::vector<std::array<long, 2>> shapes{{3, 3}, {64, 64}, {1024, 64}, {4096, 128}, {65536, 128}};

void apply_shapes(benchmark::internal::Benchmark* b) { bench::apply_pairs(b, shapes); }
void apply_large(benchmark::internal::Benchmark* b) {
  for (const auto& s : shapes)
    if (s[0] > 3) b->Args({s[0], s[1]});
}

/// The notes (n×d) and the query (d) of one shape.
template <class T>
struct problem {
  std::size_t n, d;
  const bench::buffer<T>& H;
  const bench::buffer<T>& q;
  explicit problem(const benchmark::State& state)
      : n(static_cast<std::size_t>(state.range(0))),
        d(static_cast<std::size_t>(state.range(1))),
        H(bench::data<T>(n * d, 11)),
        q(bench::data<T>(d, 12)) {}
};

template <class T>
void finish(benchmark::State& state, std::size_t n, std::size_t d) {
  // items: notes; bytes: the notes, read once
  bench::counters(state, static_cast<double>(n), static_cast<double>(n * d * sizeof(T)));
}

template <class T>
void attend_attn(benchmark::State& state) {
  const problem<T> p(state);
  const attn::MatrixView<const T> H(p.H.data(), p.n, p.d);
  bench::buffer<T> s(p.n), w(p.n), c(p.d);
  for (auto _ : state) {
    bench::touch(p.H.data());
    attn::attend(p.q, H, attn::dot, s, w, c);
    bench::touch(c.data());
  }
  finish<T>(state, p.n, p.d);
}

// attend's two steps after its sizes are known, with the overlap check given (attend's own
// inline one, the exact one, or none), for the cost of the check alone.
enum class overlap_check { none, exact };

template <class T, overlap_check check>
void attend_check(benchmark::State& state) {
  const problem<T> p(state);
  const attn::MatrixView<const T> H(p.H.data(), p.n, p.d);
  bench::buffer<T> s(p.n), w(p.n), c(p.d);
  const std::span<const T> q(p.q.data(), p.d);
  const std::span<T> ss(s.data(), p.n), ws(w.data(), p.n), cs(c.data(), p.d);
  const attn::options opt{};
  for (auto _ : state) {
    bench::touch(p.H.data());
    if constexpr (check == overlap_check::exact)
      attn::detail::check_attend_apart_exact<T>("attend", q, H, H, true, ss, ws, cs, opt);
    attn::detail::attend_views<T>("attend", q, H, H, attn::dot, ss, ws, cs, opt);
    bench::touch(c.data());
  }
  finish<T>(state, p.n, p.d);
}

template <class T>
void attend_naive(benchmark::State& state) {
  const problem<T> p(state);
  const std::size_t n = p.n, d = p.d;
  bench::buffer<T> s(n), w(n), c(d);
  for (auto _ : state) {
    bench::touch(p.H.data());
    bench::naive_attend(p.H.data(), p.q.data(), n, d, s.data(), w.data(), c.data());
    bench::touch(c.data());
  }
  finish<T>(state, n, d);
}

/// Reads every note once (Σ_j h_j, several independent sums so that only memory limits it).
template <class T>
void attend_readonce(benchmark::State& state) {
  const problem<T> p(state);
  const std::size_t total = p.n * p.d;
  constexpr std::size_t L = 64 / sizeof(T) * 4;
  std::array<T, L> acc{};
  for (auto _ : state) {
    bench::touch(p.H.data());
    const T* H = p.H.data();
    acc.fill(T(0));
    std::size_t i = 0;
    for (; i + L <= total; i += L)
      for (std::size_t k = 0; k < L; ++k) acc[k] += H[i + k];
    for (std::size_t k = 0; i + k < total; ++k) acc[k] += H[i + k];
    bench::touch(acc.data());
  }
  finish<T>(state, p.n, p.d);
}

#ifdef ATTN_BENCH_HAVE_EIGEN
template <class T>
void attend_eigen(benchmark::State& state) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  const problem<T> p(state);
  const auto n = static_cast<Eigen::Index>(p.n), d = static_cast<Eigen::Index>(p.d);
  const Eigen::Map<const Mat> H(p.H.data(), n, d);
  const Eigen::Map<const Vec> q(p.q.data(), d);
  Vec s(n), w(n), c(d);
  for (auto _ : state) {
    bench::touch(p.H.data());
    s.noalias() = H * q;
    w.array() = (s.array() - s.maxCoeff()).exp();
    w *= T(1) / w.sum();
    c.noalias() = H.transpose() * w;
    bench::touch(c.data());
  }
  finish<T>(state, p.n, p.d);
}
#endif

// ---- (3, 3) with sizes fixed at compile time -------------------------------------------------

template <class T>
void fixed_attn(benchmark::State& state) {
  attn::Matrix<T, 3, 3> H;
  attn::Vector<T, 3> q;
  const auto& h = bench::data<T>(9, 11);
  const auto& qq = bench::data<T>(3, 12);
  for (std::size_t i = 0; i < 9; ++i) H.data()[i] = h[i];
  for (std::size_t i = 0; i < 3; ++i) q[i] = qq[i];
  for (auto _ : state) {
    benchmark::DoNotOptimize(H);
    benchmark::DoNotOptimize(q);
    auto r = attn::attend(q, H, attn::dot);
    benchmark::DoNotOptimize(r);
  }
  finish<T>(state, 3, 3);
}

template <class T>
void fixed_naive(benchmark::State& state) {
  std::array<T, 9> H{};
  std::array<T, 3> q{}, s{}, w{}, c{};
  const auto& h = bench::data<T>(9, 11);
  const auto& qq = bench::data<T>(3, 12);
  for (std::size_t i = 0; i < 9; ++i) H[i] = h[i];
  for (std::size_t i = 0; i < 3; ++i) q[i] = qq[i];
  for (auto _ : state) {
    benchmark::DoNotOptimize(H);
    benchmark::DoNotOptimize(q);
    for (std::size_t j = 0; j < 3; ++j) s[j] = H[3 * j] * q[0] + H[3 * j + 1] * q[1] + H[3 * j + 2] * q[2];
    const T m = std::max(s[0], std::max(s[1], s[2]));
    T sum = 0;
    for (std::size_t j = 0; j < 3; ++j) sum += w[j] = std::exp(s[j] - m);
    for (std::size_t j = 0; j < 3; ++j) w[j] /= sum;
    for (std::size_t i = 0; i < 3; ++i) c[i] = w[0] * H[i] + w[1] * H[3 + i] + w[2] * H[6 + i];
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(w);
    benchmark::DoNotOptimize(c);
  }
  finish<T>(state, 3, 3);
}

#ifdef ATTN_BENCH_HAVE_EIGEN
template <class T>
void fixed_eigen(benchmark::State& state) {
  Eigen::Matrix<T, 3, 3, Eigen::RowMajor> H;
  Eigen::Matrix<T, 3, 1> q, s, w, c;
  const auto& h = bench::data<T>(9, 11);
  const auto& qq = bench::data<T>(3, 12);
  for (Eigen::Index i = 0; i < 9; ++i) H.data()[i] = h[static_cast<std::size_t>(i)];
  for (Eigen::Index i = 0; i < 3; ++i) q[i] = qq[static_cast<std::size_t>(i)];
  for (auto _ : state) {
    benchmark::DoNotOptimize(H);
    benchmark::DoNotOptimize(q);
    s.noalias() = H * q;
    w.array() = (s.array() - s.maxCoeff()).exp();
    w /= w.sum();
    c.noalias() = H.transpose() * w;
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(w);
    benchmark::DoNotOptimize(c);
  }
  finish<T>(state, 3, 3);
}
#endif

}  // namespace

// Dynamic sizes (argument pairs n, d).
BENCHMARK_TEMPLATE(attend_attn, float)->Name("attend/f32/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(attend_naive, float)->Name("attend/f32/naive")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(attend_check, float, overlap_check::none)->Name("attend/f32/unchecked")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(attend_check, float, overlap_check::exact)->Name("attend/f32/exact")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(attend_readonce, float)->Name("attend/f32/readonce")->Apply(apply_large);
BENCHMARK_TEMPLATE(attend_attn, double)->Name("attend/f64/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(attend_naive, double)->Name("attend/f64/naive")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(attend_readonce, double)->Name("attend/f64/readonce")->Apply(apply_large);
#ifdef ATTN_BENCH_HAVE_EIGEN
BENCHMARK_TEMPLATE(attend_eigen, float)->Name("attend/f32/eigen")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(attend_eigen, double)->Name("attend/f64/eigen")->Apply(apply_shapes);
#endif

// Fixed (3, 3): the kernel name says so, the size reads "fixed".
BENCHMARK_TEMPLATE(fixed_attn, float)->Name("attend_fixed/f32/attn/3/3");
BENCHMARK_TEMPLATE(fixed_naive, float)->Name("attend_fixed/f32/naive/3/3");
BENCHMARK_TEMPLATE(fixed_attn, double)->Name("attend_fixed/f64/attn/3/3");
BENCHMARK_TEMPLATE(fixed_naive, double)->Name("attend_fixed/f64/naive/3/3");
#ifdef ATTN_BENCH_HAVE_EIGEN
BENCHMARK_TEMPLATE(fixed_eigen, float)->Name("attend_fixed/f32/eigen/3/3");
BENCHMARK_TEMPLATE(fixed_eigen, double)->Name("attend_fixed/f64/eigen/3/3");
#endif
