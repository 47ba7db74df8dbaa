// Attention of T queries over n = T keys, d_k = d_v = 64 per head (scaled_dot_product_attention,
// scale 1/√d_k), one head (h1) or eight (h8: Q, K, V and Y of T × 512, head i in columns
// [64i, 64i + 64), PyTorch's layout, each head a column view):
//   sdpa/…/attn           attn::scaled_dot_product_attention into Y alone: the map never stored,
//   sdpa_causal/…/attn    the same with causal (query t sees keys 0 … t),
//   sdpa_map/…/attn       the same asking for the map (the weights view, T × n),
//   sdpa_backward/…/attn  attn::scaled_dot_product_attention_backward from the saved Y and
//                         log-sum-exp (∂L/∂Q, ∂L/∂K, ∂L/∂V), beside `forward` (the forward above),
//   sdpa_backward_causal/…/attn  the backward of the causal forward, beside `unmasked`,
//   sdpa_bias/…, sdpa_backward_bias/…  ALiBi formed in the tiles, a T × n bias matrix, `without`,
// against, in the same binary:
//   naive   the loops one writes first, query by query (std::exp; h1 only),
//   eigen   Eigen 3.4 unfused: S = Q Kᵀ·scale (a matrix product), a row softmax, Y = A V,
//   blas    the unfused form on the system BLAS (cblas_sgemm/dgemm for Q Kᵀ, attn::softmax on
//           each row, sgemm for A V), with the T × n map in memory,
//   gemm    the GEMM bound: the two gemm calls of `blas` alone;
// backward: the unfused backward from the saved map P (dV = Pᵀ dY, dP = dY Vᵀ,
// dS = P ∘ (dP − rowsum(dY ∘ Y)), dQ = scale·dS K, dK = scale·dSᵀ Q: four gemms), and its four
// gemms alone. Causal: the unfused forms compute the whole map and softmax each row's prefix.
// sdpa_threads/f32/attn: eight heads at T = 1024, each head's call on two threads (the threads
// overload), against `one`, the same calls on one thread; sdpa_backward_threads/f32/attn and
// /one the same for the backward (all four wall time: the only benchmarks here that are not
// CPU time).
// BLAS only when CMake found OpenBLAS (ATTN_BENCH_HAVE_BLAS), run on one thread; the kernels it
// picked are in the output's context (openblas_core): docs/performance.md says how to run it.
#include <attn/sdpa.hpp>
#include <attn/sdpa_backward.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "common.hpp"
#include "eigen.hpp"

#ifdef ATTN_BENCH_HAVE_BLAS
#include <cblas.h>
extern "C" char* openblas_get_corename(void);
extern "C" char* openblas_get_config(void);
extern "C" void openblas_set_num_threads(int);
#endif

namespace {

constexpr std::size_t dim = 64;  // d_k = d_v, per head

/// Q, K, V (and dY) for T = n queries and keys, h heads of 64 columns each, rows of h·64.
template <class T>
struct problem {
  std::size_t tq, n, heads, width;
  const bench::buffer<T>& Q;
  const bench::buffer<T>& K;
  const bench::buffer<T>& V;
  const bench::buffer<T>& dY;
  problem(const benchmark::State& state, std::size_t h)
      : tq(static_cast<std::size_t>(state.range(0))),
        n(tq),
        heads(h),
        width(h * dim),
        Q(bench::data<T>(tq * width, 61)),
        K(bench::data<T>(n * width, 62)),
        V(bench::data<T>(n * width, 63)),
        dY(bench::data<T>(tq * width, 64)) {}
  [[nodiscard]] attn::MatrixView<const T> q(std::size_t i) const { return {Q.data() + i * dim, tq, dim, width}; }
  [[nodiscard]] attn::MatrixView<const T> k(std::size_t i) const { return {K.data() + i * dim, n, dim, width}; }
  [[nodiscard]] attn::MatrixView<const T> v(std::size_t i) const { return {V.data() + i * dim, n, dim, width}; }
  [[nodiscard]] attn::MatrixView<const T> dy(std::size_t i) const { return {dY.data() + i * dim, tq, dim, width}; }
  [[nodiscard]] T scale() const { return T(1) / std::sqrt(static_cast<T>(dim)); }
};

template <class T>
void finish(benchmark::State& state, const problem<T>& p) {
  // items: query-key pairs of every head; bytes: Q, K and V, read once
  bench::counters(state, static_cast<double>(p.tq * p.n * p.heads),
                  static_cast<double>((p.tq + 2 * p.n) * p.width * sizeof(T)));
}

/// A T × (h·64) matrix of the benchmark's own, and head i's view of it.
template <class T>
struct heads_matrix {
  bench::buffer<T> data;
  std::size_t rows, width;
  heads_matrix(std::size_t r, std::size_t w) : data(r * w), rows(r), width(w) {}
  [[nodiscard]] attn::MatrixView<T> head(std::size_t i) { return {data.data() + i * dim, rows, dim, width}; }
};

enum class variant { plain, causal, map, alibi, bias };

/// The bias of a variant: ALiBi's slope 1/16 (formed in the tiles), or a T × n matrix in `B`.
template <class T>
attn::logit_bias<T> bias_of(variant kind, const bench::buffer<T>& B, std::size_t tq, std::size_t n) {
  if (kind == variant::alibi) return {{}, T(0.0625)};
  if (kind == variant::bias) return {attn::MatrixView<const T>(B.data(), tq, n), T(0)};
  return {};
}

template <class T, variant Kind>
void sdpa_attn(benchmark::State& state, std::size_t h, std::size_t threads = 1) {
  const problem<T> p(state, h);
  heads_matrix<T> Y(p.tq, p.width);
  bench::buffer<T> A(Kind == variant::map ? p.tq * p.n : 0);
  const bench::buffer<T>& B = bench::data<T>(Kind == variant::bias ? p.tq * p.n : 0, 65);
  const attn::logit_bias<T> bias = bias_of(Kind, B, p.tq, p.n);
  const attn::options opt{.causal = Kind == variant::causal};
  for (auto _ : state) {
    bench::touch(p.K.data());
    for (std::size_t i = 0; i < h; ++i) {
      attn::attention_views<T> out{.out = Y.head(i)};
      if (Kind == variant::map) out.weights = attn::MatrixView<T>(A.data(), p.tq, p.n);
      if (Kind == variant::alibi || Kind == variant::bias)
        attn::scaled_dot_product_attention(p.q(i), p.k(i), p.v(i), attn::scaled_dot, out, opt, bias, threads);
      else if (threads == 1)
        attn::scaled_dot_product_attention(p.q(i), p.k(i), p.v(i), out, opt);
      else
        attn::scaled_dot_product_attention(p.q(i), p.k(i), p.v(i), attn::scaled_dot, out, opt, threads);
    }
    bench::touch(Y.data.data());
  }
  finish(state, p);
}

/// Y = softmax(Q Kᵀ·scale) V, query by query: the scores, the max, std::exp, the sum, the
/// weighted sum of the values (causal: keys 0 … t).
template <class T, variant Kind>
void sdpa_naive(benchmark::State& state) {
  const problem<T> p(state, 1);
  const std::size_t n = p.n;
  const T f = p.scale();
  bench::buffer<T> s(n), Y(p.tq * dim);
  for (auto _ : state) {
    bench::touch(p.K.data());
    for (std::size_t t = 0; t < p.tq; ++t) {
      const T* q = p.Q.data() + t * dim;
      const std::size_t lim = Kind == variant::causal ? t + 1 : n;
      for (std::size_t j = 0; j < lim; ++j) {
        T acc = 0;
        for (std::size_t i = 0; i < dim; ++i) acc += q[i] * p.K[j * dim + i];
        s[j] = acc * f;
      }
      T m = s[0];
      for (std::size_t j = 1; j < lim; ++j) m = s[j] > m ? s[j] : m;
      T sum = 0;
      for (std::size_t j = 0; j < lim; ++j) sum += s[j] = std::exp(s[j] - m);
      T* y = Y.data() + t * dim;
      for (std::size_t i = 0; i < dim; ++i) y[i] = 0;
      for (std::size_t j = 0; j < lim; ++j)
        for (std::size_t i = 0; i < dim; ++i) y[i] += s[j] / sum * p.V[j * dim + i];
    }
    bench::touch(Y.data());
  }
  finish(state, p);
}

/// softmax of each row of the T × n map in place (causal: of row t's first t + 1 entries, the
/// rest set to 0), by attn::softmax.
template <class T>
void softmax_rows(T* S, std::size_t tq, std::size_t n, bool causal) {
  for (std::size_t t = 0; t < tq; ++t) {
    const std::size_t lim = causal ? t + 1 : n;
    const std::span<T> row(S + t * n, lim);
    attn::softmax(row, row);
    std::fill(S + t * n + lim, S + (t + 1) * n, T(0));
  }
}

/// One backward row step of the unfused form: dS = P ∘ (dP − rowsum(dY ∘ Y)), in place of dP.
template <class T>
void softmax_backward_rows(const T* P, T* dP, const T* Y, const T* dY, std::size_t ld, std::size_t tq,
                           std::size_t n) {
  for (std::size_t t = 0; t < tq; ++t) {
    T D = 0;
    for (std::size_t i = 0; i < dim; ++i) D += dY[t * ld + i] * Y[t * ld + i];
    for (std::size_t j = 0; j < n; ++j) dP[t * n + j] = P[t * n + j] * (dP[t * n + j] - D);
  }
}

#ifdef ATTN_BENCH_HAVE_BLAS
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c, std::size_t ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), 0.0F, c, static_cast<int>(ldc));
}
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, std::size_t m, std::size_t n, std::size_t k, double alpha,
          const double* a, std::size_t lda, const double* b, std::size_t ldb, double* c, std::size_t ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), 0.0, c, static_cast<int>(ldc));
}

/// The unfused forward on BLAS, head by head through one T × n map (Softmax: false for the GEMM
/// bound, the two gemm calls alone).
template <class T, variant Kind, bool Softmax>
void sdpa_blas(benchmark::State& state, std::size_t h) {
  const problem<T> p(state, h);
  bench::buffer<T> S(p.tq * p.n), Y(p.tq * p.width);
  for (auto _ : state) {
    bench::touch(p.K.data());
    for (std::size_t i = 0; i < h; ++i) {
      gemm(CblasNoTrans, CblasTrans, p.tq, p.n, dim, p.scale(), p.Q.data() + i * dim, p.width,
           p.K.data() + i * dim, p.width, S.data(), p.n);
      if (Softmax) softmax_rows(S.data(), p.tq, p.n, Kind == variant::causal);
      gemm(CblasNoTrans, CblasNoTrans, p.tq, dim, p.n, T(1), S.data(), p.n, p.V.data() + i * dim, p.width,
           Y.data() + i * dim, p.width);
    }
    bench::touch(Y.data());
  }
  finish(state, p);
}

/// The unfused backward on BLAS from the saved map of each head (formed once, outside the loop),
/// Y and dY (Softmax: false for its four gemms alone).
template <class T, bool Softmax>
void sdpa_backward_blas(benchmark::State& state, std::size_t h) {
  const problem<T> p(state, h);
  std::vector<bench::buffer<T>> P(h, bench::buffer<T>(p.tq * p.n));
  bench::buffer<T> Y(p.tq * p.width), dP(p.tq * p.n), dQ(p.tq * p.width), dK(p.n * p.width),
      dV(p.n * p.width);
  for (std::size_t i = 0; i < h; ++i) {
    gemm(CblasNoTrans, CblasTrans, p.tq, p.n, dim, p.scale(), p.Q.data() + i * dim, p.width, p.K.data() + i * dim,
         p.width, P[i].data(), p.n);
    softmax_rows(P[i].data(), p.tq, p.n, false);
    gemm(CblasNoTrans, CblasNoTrans, p.tq, dim, p.n, T(1), P[i].data(), p.n, p.V.data() + i * dim, p.width,
         Y.data() + i * dim, p.width);
  }
  for (auto _ : state) {
    bench::touch(p.K.data());
    for (std::size_t i = 0; i < h; ++i) {
      const std::size_t c = i * dim;
      gemm(CblasTrans, CblasNoTrans, p.n, dim, p.tq, T(1), P[i].data(), p.n, p.dY.data() + c, p.width,
           dV.data() + c, p.width);
      gemm(CblasNoTrans, CblasTrans, p.tq, p.n, dim, T(1), p.dY.data() + c, p.width, p.V.data() + c, p.width,
           dP.data(), p.n);
      if (Softmax) softmax_backward_rows(P[i].data(), dP.data(), Y.data() + c, p.dY.data() + c, p.width, p.tq, p.n);
      gemm(CblasNoTrans, CblasNoTrans, p.tq, dim, p.n, p.scale(), dP.data(), p.n, p.K.data() + c, p.width,
           dQ.data() + c, p.width);
      gemm(CblasTrans, CblasNoTrans, p.n, dim, p.tq, p.scale(), dP.data(), p.n, p.Q.data() + c, p.width,
           dK.data() + c, p.width);
    }
    bench::touch(dK.data());
  }
  finish(state, p);
}
#endif

#ifdef ATTN_BENCH_HAVE_EIGEN
template <class T>
using eigen_matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using eigen_head = Eigen::Map<const eigen_matrix<T>, 0, Eigen::OuterStride<>>;

/// softmax of each row of S in place (causal: of row t's first t + 1 entries, the rest set to 0;
/// row by row: the rows are contiguous, so Eigen vectorizes
/// each step).
template <class T>
void eigen_softmax_rows(eigen_matrix<T>& S, bool causal) {
  for (Eigen::Index t = 0; t < S.rows(); ++t) {
    const Eigen::Index lim = causal ? t + 1 : S.cols();
    auto row = S.row(t).head(lim).array();
    row = (row - row.maxCoeff()).exp();
    row /= row.sum();
    S.row(t).tail(S.cols() - lim).setZero();
  }
}

/// The unfused forward with Eigen, head by head: S = Q Kᵀ·scale, softmax of each row (causal:
/// of its prefix), Y = A V.
template <class T, variant Kind>
void sdpa_eigen(benchmark::State& state, std::size_t h) {
  const problem<T> p(state, h);
  const auto tq = static_cast<Eigen::Index>(p.tq), n = static_cast<Eigen::Index>(p.n),
             d = static_cast<Eigen::Index>(dim);
  const Eigen::OuterStride<> stride(static_cast<Eigen::Index>(p.width));
  eigen_matrix<T> S(tq, n), Y(tq, static_cast<Eigen::Index>(p.width));
  for (auto _ : state) {
    bench::touch(p.K.data());
    for (std::size_t i = 0; i < h; ++i) {
      const eigen_head<T> Q(p.Q.data() + i * dim, tq, d, stride), K(p.K.data() + i * dim, n, d, stride),
          V(p.V.data() + i * dim, n, d, stride);
      S.noalias() = p.scale() * Q * K.transpose();  // (the scale as gemm's alpha)
      eigen_softmax_rows(S, Kind == variant::causal);
      Y.middleCols(static_cast<Eigen::Index>(i * dim), d).noalias() = S * V;
    }
    bench::touch(Y.data());
  }
  finish(state, p);
}

/// The unfused backward with Eigen from the saved map of each head, Y and dY.
template <class T>
void sdpa_backward_eigen(benchmark::State& state, std::size_t h) {
  const problem<T> p(state, h);
  const auto tq = static_cast<Eigen::Index>(p.tq), n = static_cast<Eigen::Index>(p.n),
             d = static_cast<Eigen::Index>(dim), w = static_cast<Eigen::Index>(p.width);
  const Eigen::OuterStride<> stride(w);
  std::vector<eigen_matrix<T>> P(h);
  eigen_matrix<T> Y(tq, w), dP(tq, n), dQ(tq, w), dK(n, w), dV(n, w);
  for (std::size_t i = 0; i < h; ++i) {
    const eigen_head<T> Q(p.Q.data() + i * dim, tq, d, stride), K(p.K.data() + i * dim, n, d, stride),
        V(p.V.data() + i * dim, n, d, stride);
    P[i].noalias() = p.scale() * Q * K.transpose();
    eigen_softmax_rows(P[i], false);
    Y.middleCols(static_cast<Eigen::Index>(i * dim), d).noalias() = P[i] * V;
  }
  for (auto _ : state) {
    bench::touch(p.K.data());
    for (std::size_t i = 0; i < h; ++i) {
      const auto c = static_cast<Eigen::Index>(i * dim);
      const eigen_head<T> Q(p.Q.data() + i * dim, tq, d, stride), K(p.K.data() + i * dim, n, d, stride),
          V(p.V.data() + i * dim, n, d, stride), dY(p.dY.data() + i * dim, tq, d, stride);
      dV.middleCols(c, d).noalias() = P[i].transpose() * dY;
      dP.noalias() = dY * V.transpose();
      const auto D = (dY.array() * Y.middleCols(c, d).array()).rowwise().sum().eval();
      dP = (P[i].array() * (dP.array().colwise() - D)).matrix();
      dQ.middleCols(c, d).noalias() = p.scale() * dP * K;
      dK.middleCols(c, d).noalias() = p.scale() * dP.transpose() * Q;
    }
    bench::touch(dK.data());
  }
  finish(state, p);
}
#endif

/// attn's backward from the saved Y and log-sum-exp of each head (formed once, outside the loop);
/// with a bias (Kind alibi or bias), ∂L/∂Z too for the matrix.
template <class T, variant Kind = variant::plain>
void sdpa_backward_attn(benchmark::State& state, std::size_t h, std::size_t threads = 1) {
  const problem<T> p(state, h);
  heads_matrix<T> Y(p.tq, p.width), dQ(p.tq, p.width), dK(p.n, p.width), dV(p.n, p.width);
  const bench::buffer<T>& B = bench::data<T>(Kind == variant::bias ? p.tq * p.n : 0, 65);
  bench::buffer<T> dB(Kind == variant::bias ? p.tq * p.n : 0);
  const attn::logit_bias<T> bias = bias_of(Kind, B, p.tq, p.n);
  std::vector<std::vector<T>> L(h, std::vector<T>(p.tq));
  const attn::options opt{.causal = Kind == variant::causal};
  for (std::size_t i = 0; i < h; ++i)
    attn::scaled_dot_product_attention(p.q(i), p.k(i), p.v(i), attn::scaled_dot,
                                       {.out = Y.head(i), .logsumexp = L[i]}, opt, bias);
  for (auto _ : state) {
    bench::touch(p.K.data());
    for (std::size_t i = 0; i < h; ++i) {
      const attn::MatrixView<const T> y = Y.head(i);
      const attn::saved_attention<T> saved{y, L[i]};
      attn::attention_gradients<T> g{dQ.head(i), dK.head(i), dV.head(i)};
      if (Kind == variant::bias) g.bias = attn::MatrixView<T>(dB.data(), p.tq, p.n);
      if (Kind == variant::alibi || Kind == variant::bias || Kind == variant::causal)
        attn::scaled_dot_product_attention_backward(p.q(i), p.k(i), p.v(i), attn::scaled_dot, saved, p.dy(i), g,
                                                    opt, bias, threads);
      else if (threads == 1)
        attn::scaled_dot_product_attention_backward(p.q(i), p.k(i), p.v(i), attn::scaled_dot, saved, p.dy(i), g);
      else
        attn::scaled_dot_product_attention_backward(p.q(i), p.k(i), p.v(i), attn::scaled_dot, saved, p.dy(i), g,
                                                    {}, threads);
    }
    bench::touch(dK.data.data());
  }
  finish(state, p);
}

const std::vector<long> sizes{256, 1024, 4096};

void apply_sizes(benchmark::internal::Benchmark* b) {
  for (long t : sizes) b->Arg(t);
  b->Unit(benchmark::kMicrosecond);
}

template <class T>
void register_all() {
  const std::string ty = bench::type_name<T>();
  const auto add = [&](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(), fn)->Apply(apply_sizes);
  };
  for (const std::size_t h : {std::size_t{1}, std::size_t{8}}) {
    const std::string hs = h == 1 ? "" : "_h8";
    add("sdpa" + hs + "/" + ty + "/attn", [h](benchmark::State& s) { sdpa_attn<T, variant::plain>(s, h); });
    add("sdpa_causal" + hs + "/" + ty + "/attn", [h](benchmark::State& s) { sdpa_attn<T, variant::causal>(s, h); });
    add("sdpa_backward" + hs + "/" + ty + "/attn", [h](benchmark::State& s) { sdpa_backward_attn<T>(s, h); });
    add("sdpa_backward" + hs + "/" + ty + "/forward", [h](benchmark::State& s) { sdpa_attn<T, variant::plain>(s, h); });
#ifdef ATTN_BENCH_HAVE_BLAS
    add("sdpa" + hs + "/" + ty + "/blas", [h](benchmark::State& s) { sdpa_blas<T, variant::plain, true>(s, h); });
    add("sdpa" + hs + "/" + ty + "/gemm", [h](benchmark::State& s) { sdpa_blas<T, variant::plain, false>(s, h); });
    add("sdpa_causal" + hs + "/" + ty + "/blas", [h](benchmark::State& s) { sdpa_blas<T, variant::causal, true>(s, h); });
    add("sdpa_backward" + hs + "/" + ty + "/blas", [h](benchmark::State& s) { sdpa_backward_blas<T, true>(s, h); });
    add("sdpa_backward" + hs + "/" + ty + "/gemm", [h](benchmark::State& s) { sdpa_backward_blas<T, false>(s, h); });
#endif
#ifdef ATTN_BENCH_HAVE_EIGEN
    add("sdpa" + hs + "/" + ty + "/eigen", [h](benchmark::State& s) { sdpa_eigen<T, variant::plain>(s, h); });
    add("sdpa_causal" + hs + "/" + ty + "/eigen", [h](benchmark::State& s) { sdpa_eigen<T, variant::causal>(s, h); });
    add("sdpa_backward" + hs + "/" + ty + "/eigen", [h](benchmark::State& s) { sdpa_backward_eigen<T>(s, h); });
#endif
  }
  add("sdpa_map/" + ty + "/attn", [](benchmark::State& s) { sdpa_attn<T, variant::map>(s, 1); });
  add("sdpa_map/" + ty + "/without", [](benchmark::State& s) { sdpa_attn<T, variant::plain>(s, 1); });
  // a bias on the logits: ALiBi formed in the tiles, a T × n matrix read, against none
  add("sdpa_bias/" + ty + "/alibi", [](benchmark::State& s) { sdpa_attn<T, variant::alibi>(s, 1); });
  add("sdpa_bias/" + ty + "/matrix", [](benchmark::State& s) { sdpa_attn<T, variant::bias>(s, 1); });
  add("sdpa_bias/" + ty + "/without", [](benchmark::State& s) { sdpa_attn<T, variant::plain>(s, 1); });
  add("sdpa_backward_bias/" + ty + "/alibi", [](benchmark::State& s) { sdpa_backward_attn<T, variant::alibi>(s, 1); });
  add("sdpa_backward_bias/" + ty + "/matrix", [](benchmark::State& s) { sdpa_backward_attn<T, variant::bias>(s, 1); });
  add("sdpa_backward_bias/" + ty + "/without", [](benchmark::State& s) { sdpa_backward_attn<T>(s, 1); });
  add("sdpa/" + ty + "/naive", sdpa_naive<T, variant::plain>);
  add("sdpa_causal/" + ty + "/naive", sdpa_naive<T, variant::causal>);
  add("sdpa_causal/" + ty + "/unmasked", [](benchmark::State& s) { sdpa_attn<T, variant::plain>(s, 1); });
  add("sdpa_backward_causal/" + ty + "/attn", [](benchmark::State& s) { sdpa_backward_attn<T, variant::causal>(s, 1); });
  add("sdpa_backward_causal/" + ty + "/unmasked", [](benchmark::State& s) { sdpa_backward_attn<T>(s, 1); });
  // eight heads at T = 1024, two threads against one: wall time (CPU time would add the threads')
  const auto threaded = [&](const std::string& name, std::size_t threads) {
    benchmark::RegisterBenchmark(name.c_str(), [threads](benchmark::State& s) {
      sdpa_attn<T, variant::plain>(s, 8, threads);
    })->Arg(1024)->Unit(benchmark::kMicrosecond)->UseRealTime();
  };
  const auto threaded_backward = [&](const std::string& name, std::size_t threads) {
    benchmark::RegisterBenchmark(name.c_str(), [threads](benchmark::State& s) {
      sdpa_backward_attn<T>(s, 8, threads);
    })->Arg(1024)->Unit(benchmark::kMicrosecond)->UseRealTime();
  };
  if (std::is_same_v<T, float>) {
    threaded("sdpa_threads/" + ty + "/attn", 2);
    threaded("sdpa_threads/" + ty + "/one", 1);
    threaded_backward("sdpa_backward_threads/" + ty + "/attn", 2);
    threaded_backward("sdpa_backward_threads/" + ty + "/one", 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
#ifdef ATTN_BENCH_HAVE_BLAS
  openblas_set_num_threads(1);  // the suite is one thread, whatever OPENBLAS_NUM_THREADS says
  // which kernels OpenBLAS picked for this CPU (OPENBLAS_CORETYPE, if set, overrides it)
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
#endif
  register_all<float>();
  register_all<double>();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
