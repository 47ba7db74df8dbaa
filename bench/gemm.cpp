// The matrix product under every projection (detail/gemm.hpp) beside the products users would
// otherwise call, one thread, in one run (docs/performance.md, "The matrix product"):
//
//   gemm/<type>/<impl>/<M>x<K>x<N>/<form>   C = A·B (form NN), A·Bᵀ (NT) or Aᵀ·B (TN), C row-major
//
//   attn      attn::detail::gemm
//   openblas  cblas_sgemm / cblas_dgemm (ATTN_BENCH_HAVE_BLAS; its kernel is printed first: this
//             machine's environment may pin one, OPENBLAS_CORETYPE overrides it)
//   blis      bli_sgemm / bli_dgemm (ATTN_BENCH_HAVE_BLIS)
//   eigen     Eigen 3.4's product of row-major maps (ATTN_BENCH_HAVE_EIGEN)
//   naive     three loops, i–k–j (the compiler vectorizes the inner one)
//
// Counters: GFLOP/s (2·M·N·K per call). bench/ratios.py puts each implementation beside attn.

#include <attn/detail/gemm.hpp>
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "common.hpp"

#if ATTN_BENCH_HAVE_BLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);
#endif
#if ATTN_BENCH_HAVE_BLIS
#include <blis.h>
#endif
#if ATTN_BENCH_HAVE_EIGEN
#include "eigen.hpp"
#endif

namespace {

enum class form { nn, nt, tn };
const char* form_name(form f) { return f == form::nn ? "NN" : f == form::nt ? "NT" : "TN"; }

template <class T>
struct operands {
  std::size_t m, k, n;
  form f;
  const bench::buffer<T>& A;  // m × k, or k × m for TN
  const bench::buffer<T>& B;  // k × n, or n × k for NT
  bench::buffer<T> C;
  operands(std::size_t m_, std::size_t k_, std::size_t n_, form f_)
      : m(m_), k(k_), n(n_), f(f_), A(bench::data<T>(m * k, 81)), B(bench::data<T>(k * n, 82)), C(m * n) {}
  [[nodiscard]] bool ta() const { return f == form::tn; }
  [[nodiscard]] bool tb() const { return f == form::nt; }
};

template <class T>
void finish(benchmark::State& state, const operands<T>& o) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(o.m * o.n * o.k) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

template <class T>
void attn_gemm(benchmark::State& state, std::size_t m, std::size_t k, std::size_t n, form f) {
  operands<T> o(m, k, n, f);
  using G = attn::detail::gemm_matrix<const T>;
  const G a = o.ta() ? G{o.A.data(), 1, m} : G{o.A.data(), k, 1};
  const G b = o.tb() ? G{o.B.data(), 1, k} : G{o.B.data(), n, 1};
  for (auto _ : state) {
    attn::detail::gemm<T>(m, n, k, a, b, {o.C.data(), n, 1}, false);
    benchmark::DoNotOptimize(o.C.data());
    benchmark::ClobberMemory();
  }
  finish(state, o);
}

template <class T>
void naive_gemm(benchmark::State& state, std::size_t m, std::size_t k, std::size_t n, form f) {
  operands<T> o(m, k, n, f);
  for (auto _ : state) {
    for (std::size_t i = 0; i < m; ++i) {
      T* c = o.C.data() + i * n;
      for (std::size_t j = 0; j < n; ++j) c[j] = T(0);
      for (std::size_t p = 0; p < k; ++p) {
        const T a = o.ta() ? o.A[p * m + i] : o.A[i * k + p];
        if (o.tb())
          for (std::size_t j = 0; j < n; ++j) c[j] += a * o.B[j * k + p];
        else
          for (std::size_t j = 0; j < n; ++j) c[j] += a * o.B[p * n + j];
      }
    }
    benchmark::DoNotOptimize(o.C.data());
    benchmark::ClobberMemory();
  }
  finish(state, o);
}

#if ATTN_BENCH_HAVE_BLAS
template <class T>
void openblas_gemm(benchmark::State& state, std::size_t m, std::size_t k, std::size_t n, form f) {
  operands<T> o(m, k, n, f);
  const auto ta = o.ta() ? CblasTrans : CblasNoTrans, tb = o.tb() ? CblasTrans : CblasNoTrans;
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
  const int lda = o.ta() ? M : K, ldb = o.tb() ? K : N;
  for (auto _ : state) {
    if constexpr (sizeof(T) == 4)
      cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, o.A.data(), lda, o.B.data(), ldb, 0.0f, o.C.data(), N);
    else
      cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, o.A.data(), lda, o.B.data(), ldb, 0.0, o.C.data(), N);
    benchmark::DoNotOptimize(o.C.data());
    benchmark::ClobberMemory();
  }
  finish(state, o);
}
#endif

#if ATTN_BENCH_HAVE_BLIS
template <class T>
void blis_gemm(benchmark::State& state, std::size_t m, std::size_t k, std::size_t n, form f) {
  operands<T> o(m, k, n, f);
  T one = 1, zero = 0;
  // BLIS takes any strides: A (m × k) as (rs, cs), B (k × n) likewise, C row-major
  const inc_t rsa = o.ta() ? 1 : static_cast<inc_t>(k), csa = o.ta() ? static_cast<inc_t>(m) : 1;
  const inc_t rsb = o.tb() ? 1 : static_cast<inc_t>(n), csb = o.tb() ? static_cast<inc_t>(k) : 1;
  for (auto _ : state) {
    if constexpr (sizeof(T) == 4)
      bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, static_cast<dim_t>(m), static_cast<dim_t>(n),
                static_cast<dim_t>(k), &one, const_cast<T*>(o.A.data()), rsa, csa, const_cast<T*>(o.B.data()), rsb,
                csb, &zero, o.C.data(), static_cast<inc_t>(n), 1);
    else
      bli_dgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, static_cast<dim_t>(m), static_cast<dim_t>(n),
                static_cast<dim_t>(k), &one, const_cast<T*>(o.A.data()), rsa, csa, const_cast<T*>(o.B.data()), rsb,
                csb, &zero, o.C.data(), static_cast<inc_t>(n), 1);
    benchmark::DoNotOptimize(o.C.data());
    benchmark::ClobberMemory();
  }
  finish(state, o);
}
#endif

#if ATTN_BENCH_HAVE_EIGEN
template <class T>
void eigen_gemm(benchmark::State& state, std::size_t m, std::size_t k, std::size_t n, form f) {
  operands<T> o(m, k, n, f);
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Map = Eigen::Map<const Mat>;
  Eigen::Map<Mat> C(o.C.data(), static_cast<Eigen::Index>(m), static_cast<Eigen::Index>(n));
  const auto M = static_cast<Eigen::Index>(m), N = static_cast<Eigen::Index>(n), K = static_cast<Eigen::Index>(k);
  for (auto _ : state) {
    if (f == form::nn)
      C.noalias() = Map(o.A.data(), M, K) * Map(o.B.data(), K, N);
    else if (f == form::nt)
      C.noalias() = Map(o.A.data(), M, K) * Map(o.B.data(), N, K).transpose();
    else
      C.noalias() = Map(o.A.data(), K, M).transpose() * Map(o.B.data(), K, N);
    benchmark::DoNotOptimize(o.C.data());
    benchmark::ClobberMemory();
  }
  finish(state, o);
}
#endif

template <class T>
std::string bench_name(const char* impl, std::size_t m, std::size_t k, std::size_t n, form f) {
  char name[128];  // (snprintf: GCC 12 at -O3 reports a false -Wrestrict in std::string's +)
  std::snprintf(name, sizeof name, "gemm/%s/%s/%zux%zux%zu/%s", bench::type_name<T>(), impl, m, k, n, form_name(f));
  return name;
}

template <class T>
void register_shape(std::size_t m, std::size_t k, std::size_t n, form f, bool naive) {
  benchmark::RegisterBenchmark(bench_name<T>("attn", m, k, n, f).c_str(), attn_gemm<T>, m, k, n, f)->UseRealTime();
#if ATTN_BENCH_HAVE_BLAS
  benchmark::RegisterBenchmark(bench_name<T>("openblas", m, k, n, f).c_str(), openblas_gemm<T>, m, k, n, f)->UseRealTime();
#endif
#if ATTN_BENCH_HAVE_BLIS
  benchmark::RegisterBenchmark(bench_name<T>("blis", m, k, n, f).c_str(), blis_gemm<T>, m, k, n, f)->UseRealTime();
#endif
#if ATTN_BENCH_HAVE_EIGEN
  benchmark::RegisterBenchmark(bench_name<T>("eigen", m, k, n, f).c_str(), eigen_gemm<T>, m, k, n, f)->UseRealTime();
#endif
  if (naive)
    benchmark::RegisterBenchmark(bench_name<T>("naive", m, k, n, f).c_str(), naive_gemm<T>, m, k, n, f)->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
#if ATTN_BENCH_HAVE_BLAS
  openblas_set_num_threads(1);  // one thread, whatever OPENBLAS_NUM_THREADS says
  std::printf("OpenBLAS kernel: %s\n", openblas_get_corename());
#endif
#if ATTN_BENCH_HAVE_BLIS
  bli_thread_set_num_threads(1);
  std::printf("BLIS: %s\n", bli_arch_string(bli_arch_query_id()));
#endif
  std::printf("attn: micro-tile %zu x %zu (float), %zu x %zu (double)\n", attn::detail::gemm_blocking<float>::MR,
              attn::detail::gemm_blocking<float>::NR, attn::detail::gemm_blocking<double>::MR,
              attn::detail::gemm_blocking<double>::NR);
  // the shapes: the projections' and the feed-forward layer's forward (NN), the
  // backward's ∂L/∂X = dY Wᵀ (NT) and ∂L/∂W = Xᵀ dY (TN), and a small one
  for (const form f : {form::nn, form::nt, form::tn}) {
    register_shape<float>(1024, 512, 512, f, f == form::nn);
    register_shape<float>(1024, 512, 2048, f, false);
    register_shape<float>(1024, 2048, 512, f, false);
    register_shape<float>(128, 64, 256, f, f == form::nn);
  }
  register_shape<double>(1024, 512, 512, form::nn, false);
  register_shape<double>(1024, 512, 2048, form::nn, false);
  register_shape<double>(1024, 2048, 512, form::nn, false);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
