// The alignment map of T queries over n notes of d = 64 numbers (dot score), T×n = 35×30 and
// 512×512:
//   attn   attn::align into caller buffers (one look back per query),
//   naive  the loops one writes first (std::exp), query by query,
//   eigen  Eigen 3.4: S = Q Hᵀ (a matrix product), a row-wise softmax, C = A H.
#include <attn/attention.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <vector>

#include "common.hpp"
#include "eigen.hpp"

namespace {

constexpr std::size_t dim = 64;
const std::vector<std::array<long, 2>> shapes{{35, 30}, {512, 512}};

void apply_shapes(benchmark::internal::Benchmark* b) { bench::apply_pairs(b, shapes); }

template <class T>
struct problem {
  std::size_t t, n;
  const bench::buffer<T>& Q;
  const bench::buffer<T>& H;
  explicit problem(const benchmark::State& state)
      : t(static_cast<std::size_t>(state.range(0))),
        n(static_cast<std::size_t>(state.range(1))),
        Q(bench::data<T>(t * dim, 41)),
        H(bench::data<T>(n * dim, 42)) {}
};

template <class T>
void finish(benchmark::State& state, std::size_t t, std::size_t n) {
  // items: query-note pairs; bytes: queries and notes, read once
  bench::counters(state, static_cast<double>(t * n), static_cast<double>((t + n) * dim * sizeof(T)));
}

template <class T>
void align_attn(benchmark::State& state) {
  const problem<T> p(state);
  const attn::MatrixView<const T> Q(p.Q.data(), p.t, dim), H(p.H.data(), p.n, dim);
  attn::Matrix<T> S(p.t, p.n), A(p.t, p.n), C(p.t, dim);
  for (auto _ : state) {
    bench::touch(p.H.data());
    attn::align(Q, H, attn::dot, S.view(), A.view(), C.view());
    bench::touch(C.data());
  }
  finish<T>(state, p.t, p.n);
}

template <class T>
void align_naive(benchmark::State& state) {
  const problem<T> p(state);
  const std::size_t t = p.t, n = p.n;
  bench::buffer<T> S(t * n), A(t * n), C(t * dim);
  for (auto _ : state) {
    bench::touch(p.H.data());
    for (std::size_t r = 0; r < t; ++r) {
      bench::naive_attend(p.H.data(), p.Q.data() + r * dim, n, dim, S.data() + r * n, A.data() + r * n,
                          C.data() + r * dim);
    }
    bench::touch(C.data());
  }
  finish<T>(state, t, n);
}

#ifdef ATTN_BENCH_HAVE_EIGEN
template <class T>
void align_eigen(benchmark::State& state) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const problem<T> p(state);
  const auto t = static_cast<Eigen::Index>(p.t), n = static_cast<Eigen::Index>(p.n),
             d = static_cast<Eigen::Index>(dim);
  const Eigen::Map<const Mat> Q(p.Q.data(), t, d), H(p.H.data(), n, d);
  Mat S(t, n), A(t, n), C(t, d);
  for (auto _ : state) {
    bench::touch(p.H.data());
    S.noalias() = Q * H.transpose();
    A = (S.colwise() - S.rowwise().maxCoeff()).array().exp().matrix();
    A.array().colwise() /= A.rowwise().sum().array();
    C.noalias() = A * H;
    bench::touch(C.data());
  }
  finish<T>(state, p.t, p.n);
}
#endif

}  // namespace

BENCHMARK_TEMPLATE(align_attn, float)->Name("align/f32/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(align_naive, float)->Name("align/f32/naive")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(align_attn, double)->Name("align/f64/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(align_naive, double)->Name("align/f64/naive")->Apply(apply_shapes);
#ifdef ATTN_BENCH_HAVE_EIGEN
BENCHMARK_TEMPLATE(align_eigen, float)->Name("align/f32/eigen")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(align_eigen, double)->Name("align/f64/eigen")->Apply(apply_shapes);
#endif
