// The transformer block (attn/block.hpp) and its pieces, one thread, in one run
// (docs/performance.md, "The block"):
//
//   block/<type>/attn/<T>x<d>x<dff>x<h>        transformer_block, post-LN, no mask
//   block/<type>/blas/…                        the same block composed by hand from OpenBLAS's
//                                              sgemm (Q, K, V, W_O, W₁, W₂) and attn's sdpa,
//                                              LayerNorm and GELU (ATTN_BENCH_HAVE_BLAS)
//   block/<type>/blas_daz/…                    the same with denormals-are-zero set: the BLAS
//                                              without the subnormal hidden values' assists
//   block_backward/<type>/attn/…               transformer_block_backward, every gradient
//   block_backward/<type>/forward/…            the forward again, beside it (the target is
//                                              backward ≤ 2.5 × attn's own forward)
//   layer_norm|gelu|rope/<type>/attn/<rows>x<d> the pieces, in place or into a buffer
//   layer_norm|gelu|rope/<type>/readonce/…      y = 1.5·x over the same memory: the floor
//
// All wall time (UseRealTime). bench/ratios.py puts each implementation beside attn.

#include <attn/block.hpp>
#include <attn/init.hpp>
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "common.hpp"

#if defined(__SSE__)
#include <xmmintrin.h>  // _mm_getcsr, _mm_setcsr (block_blas_daz)
#endif

#if ATTN_BENCH_HAVE_BLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);
#endif

namespace {

struct shape {
  std::size_t T, d, dff, h;
};

template <class T>
struct block_problem {
  shape s;
  attn::Matrix<T> X, WQ, WK, WV, WO, W1, W2, Y, dY;
  std::vector<T> g1, b1, g2, b2;
  attn::block_cache<T> cache;
  explicit block_problem(shape sh)
      : s(sh), X(sh.T, sh.d), WQ(sh.d, sh.d), WK(sh.d, sh.d), WV(sh.d, sh.d), WO(sh.d, sh.d), W1(sh.d, sh.dff),
        W2(sh.dff, sh.d), Y(sh.T, sh.d), dY(sh.T, sh.d), g1(sh.d, T(1)), b1(sh.d, T(0)), g2(sh.d, T(1)),
        b2(sh.d, T(0)) {
    std::uint64_t seed = 90;
    for (attn::Matrix<T>* m : {&X, &dY}) {
      const auto& v = bench::data<T>(m->size(), seed++, -0.5, 0.5);
      std::copy(v.begin(), v.end(), m->data());
    }
    // the weights as a model starts them: PyTorch's defaults (attn/init.hpp), so the FFN's
    // pre-activations have a standard deviation near 0.6 (U(±0.5) weights gave 6.5, 2 % of the
    // hidden layer below −13 and GELU's subnormal outputs: docs/performance.md, "The block")
    attn::initialize(attn::block_buffers<T>{.attention = {.W_Q = WQ.view(), .W_K = WK.view(), .W_V = WV.view(),
                                                          .W_O = WO.view()},
                                            .ffn = {.W_1 = W1.view(), .W_2 = W2.view()}},
                     2026);
  }
  [[nodiscard]] attn::block_parameters<T> params() const {
    attn::block_parameters<T> p;
    p.attention = {.W_Q = WQ.view(), .W_K = WK.view(), .W_V = WV.view(), .W_O = WO.view(), .heads = s.h};
    p.ffn = {.W_1 = W1.view(), .W_2 = W2.view(), .act = attn::activation::gelu};
    p.norm_1 = {.gamma = g1, .beta = b1};
    p.norm_2 = {.gamma = g2, .beta = b2};
    return p;
  }
};

std::string shape_name(const char* kernel, const char* type, const char* impl, shape s) {
  char name[128];  // (snprintf: GCC 12 at -O3 reports a false -Wrestrict in std::string's +)
  std::snprintf(name, sizeof name, "%s/%s/%s/%zux%zux%zux%zu", kernel, type, impl, s.T, s.d, s.dff, s.h);
  return name;
}

template <class T>
void block_forward(benchmark::State& state, shape s) {
  block_problem<T> p(s);
  const auto params = p.params();
  attn::transformer_block(p.X, params, p.Y, p.cache);
  for (auto _ : state) {
    attn::transformer_block(p.X, params, p.Y, p.cache);
    benchmark::DoNotOptimize(p.Y.data());
    benchmark::ClobberMemory();
  }
}

template <class T>
void block_backward(benchmark::State& state, shape s) {
  block_problem<T> p(s);
  const auto params = p.params();
  attn::Matrix<T> dX(s.T, s.d), dWQ(s.d, s.d), dWK(s.d, s.d), dWV(s.d, s.d), dWO(s.d, s.d), dW1(s.d, s.dff),
      dW2(s.dff, s.d);
  std::vector<T> dg1(s.d), db1(s.d), dg2(s.d), db2(s.d);
  const attn::block_gradients<T> g{.input = dX.view(), .W_Q = dWQ.view(), .W_K = dWK.view(), .W_V = dWV.view(),
                                   .W_O = dWO.view(), .W_1 = dW1.view(), .W_2 = dW2.view(), .gamma_1 = dg1,
                                   .beta_1 = db1, .gamma_2 = dg2, .beta_2 = db2};
  attn::transformer_block(p.X, params, p.Y, p.cache);
  attn::transformer_block_backward(p.X, params, p.cache, p.dY, g);
  for (auto _ : state) {
    attn::transformer_block_backward(p.X, params, p.cache, p.dY, g);
    benchmark::DoNotOptimize(dX.data());
    benchmark::ClobberMemory();
  }
}

#if ATTN_BENCH_HAVE_BLAS
// The same post-LN block from sgemm and attn's other pieces: what a user composing it by hand
// with the system BLAS would write.
void block_blas(benchmark::State& state, shape s) {
  block_problem<float> p(s);
  const std::size_t T = s.T, d = s.d, dff = s.dff, h = s.h, dk = d / h;
  attn::Matrix<float> Q(T, d), K(T, d), V(T, d), Z(T, d), H1(T, d), X1(T, d), Hid(T, dff), F(T, d), H2(T, d);
  const int iT = static_cast<int>(T), id = static_cast<int>(d), iff = static_cast<int>(dff);
  const auto mm = [](int m, int n, int k, const float* a, const float* b, float* c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
  };
  for (auto _ : state) {
    mm(iT, id, id, p.X.data(), p.WQ.data(), Q.data());
    mm(iT, id, id, p.X.data(), p.WK.data(), K.data());
    mm(iT, id, id, p.X.data(), p.WV.data(), V.data());
    for (std::size_t i = 0; i < h; ++i) {
      const attn::MatrixView<const float> q(Q.data() + i * dk, T, dk, d), k(K.data() + i * dk, T, dk, d),
          v(V.data() + i * dk, T, dk, d);
      attn::scaled_dot_product_attention(q, k, v, {.out = attn::MatrixView<float>(Z.data() + i * dk, T, dk, d)});
    }
    mm(iT, id, id, Z.data(), p.WO.data(), H1.data());
    for (std::size_t k = 0; k < H1.size(); ++k) H1.data()[k] += p.X.data()[k];
    attn::layer_norm(H1, X1, {.gamma = p.g1, .beta = p.b1});
    mm(iT, iff, id, X1.data(), p.W1.data(), Hid.data());
    attn::activate(attn::activation::gelu, Hid, Hid);
    mm(iT, id, iff, Hid.data(), p.W2.data(), F.data());
    for (std::size_t k = 0; k < F.size(); ++k) H2.data()[k] = X1.data()[k] + F.data()[k];
    attn::layer_norm(H2, p.Y, {.gamma = p.g2, .beta = p.b2});
    benchmark::DoNotOptimize(p.Y.data());
    benchmark::ClobberMemory();
  }
}
#if defined(__SSE__)
// block_blas with the FPU's denormals-are-zero and flush-to-zero modes set (MXCSR): the hidden
// layer's GELU values below 2^-126 (x < -13, about 2 % at this initialisation) otherwise cost
// OpenBLAS's sgemm a ~100-cycle assist per multiply; attn's product reads them as 0
// (detail/gemm.hpp, gemm_operand). The BLAS at its full speed, for the ratio.
void block_blas_daz(benchmark::State& state, shape s) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040U);  // DAZ (bit 6) | FTZ (bit 15)
  block_blas(state, s);
  _mm_setcsr(saved);
}
#endif
#endif

enum class piece { layer_norm, gelu, rope, readonce };

template <class T>
void pieces(benchmark::State& state, piece what, std::size_t rows, std::size_t d) {
  attn::Matrix<T> X(rows, d), Y(rows, d);
  const auto& v = bench::data<T>(X.size(), 99, -2.0, 2.0);
  std::copy(v.begin(), v.end(), X.data());
  for (auto _ : state) {
    switch (what) {
      case piece::layer_norm: attn::layer_norm(X, Y); break;
      case piece::gelu: attn::activate(attn::activation::gelu, X, Y); break;
      case piece::rope: attn::apply_rotary(X, 8); break;  // in place: its own read and write
      case piece::readonce:
        for (std::size_t k = 0; k < X.size(); ++k) Y.data()[k] = T(1.5) * X.data()[k];
        break;
    }
    benchmark::DoNotOptimize(Y.data());
    benchmark::DoNotOptimize(X.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(2 * X.size() * sizeof(T)));
}

}  // namespace

int main(int argc, char** argv) {
#if ATTN_BENCH_HAVE_BLAS
  openblas_set_num_threads(1);
  std::printf("OpenBLAS kernel: %s\n", openblas_get_corename());
#endif
  for (const shape s : {shape{128, 64, 256, 4}, shape{1024, 512, 2048, 8}}) {
    benchmark::RegisterBenchmark(shape_name("block", "f32", "attn", s).c_str(), block_forward<float>, s)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
#if ATTN_BENCH_HAVE_BLAS
    benchmark::RegisterBenchmark(shape_name("block", "f32", "blas", s).c_str(), block_blas, s)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
#if defined(__SSE__)
    benchmark::RegisterBenchmark(shape_name("block", "f32", "blas_daz", s).c_str(), block_blas_daz, s)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
#endif
#endif
    benchmark::RegisterBenchmark(shape_name("block_backward", "f32", "attn", s).c_str(), block_backward<float>, s)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark(shape_name("block_backward", "f32", "forward", s).c_str(), block_forward<float>, s)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  const char* names[] = {"layer_norm", "gelu", "rope"};
  for (int k = 0; k < 3; ++k) {
    const piece what = static_cast<piece>(k);
    char attn_name[64], floor_name[64];
    std::snprintf(attn_name, sizeof attn_name, "%s/f32/attn/1024x512", names[k]);
    std::snprintf(floor_name, sizeof floor_name, "%s/f32/readonce/1024x512", names[k]);
    benchmark::RegisterBenchmark(attn_name, pieces<float>, what, 1024, 512)->UseRealTime();
    benchmark::RegisterBenchmark(floor_name, pieces<float>, piece::readonce, 1024, 512)->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
