// The four scores for all n notes at once (score.scores(q, notes, out)), n = 1024 notes of
// d = 64 numbers; general's W is 64×64, additive has k = 64 hidden units:
//   attn   the library's batched scores,
//   naive  one note at a time with plain loops (std::tanh for additive),
//   eigen  Eigen 3.4: H*q, H*(Wᵀq), and (H W1ᵀ + 1 (W2 q)ᵀ).tanh() v.
#include <attn/score.hpp>

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "common.hpp"
#include "eigen.hpp"

namespace {

constexpr std::size_t n_notes = 1024, dim = 64, hidden = 64;

template <class T>
struct problem {
  const bench::buffer<T>& H = bench::data<T>(n_notes * dim, 31);
  const bench::buffer<T>& q = bench::data<T>(dim, 32);
  const bench::buffer<T>& W = bench::data<T>(dim * dim, 33, -0.2, 0.2);
  const bench::buffer<T>& W1 = bench::data<T>(hidden * dim, 34, -0.2, 0.2);
  const bench::buffer<T>& W2 = bench::data<T>(hidden * dim, 35, -0.2, 0.2);
  const bench::buffer<T>& v = bench::data<T>(hidden, 36);
  [[nodiscard]] attn::MatrixView<const T> notes() const { return {H.data(), n_notes, dim}; }
};

template <class T>
void finish(benchmark::State& state) {
  bench::counters(state, static_cast<double>(n_notes), static_cast<double>(n_notes * dim * sizeof(T)));
}

enum class which { dot, scaled_dot, general, additive };

template <class T, which W>
void scores_attn(benchmark::State& state) {
  const problem<T> p;
  bench::buffer<T> out(n_notes);
  const std::span<const T> q(p.q);
  const attn::MatrixView<const T> Wm(p.W.data(), dim, dim), W1(p.W1.data(), hidden, dim),
      W2(p.W2.data(), hidden, dim);
  const attn::general<T> general(Wm);
  const attn::additive<T> additive(W1, W2, std::span<const T>(p.v));
  for (auto _ : state) {
    bench::touch(p.H.data());
    if constexpr (W == which::dot) attn::dot.scores(q, p.notes(), std::span<T>(out));
    if constexpr (W == which::scaled_dot) attn::scaled_dot.scores(q, p.notes(), std::span<T>(out));
    if constexpr (W == which::general) general.scores(q, p.notes(), std::span<T>(out));
    if constexpr (W == which::additive) additive.scores(q, p.notes(), std::span<T>(out));
    bench::touch(out.data());
  }
  finish<T>(state);
}

template <class T, which W>
void scores_naive(benchmark::State& state) {
  const problem<T> p;
  bench::buffer<T> out(n_notes);
  const T f = T(1) / std::sqrt(static_cast<T>(dim));
  for (auto _ : state) {
    bench::touch(p.H.data());
    for (std::size_t j = 0; j < n_notes; ++j) {
      const T* h = p.H.data() + j * dim;
      T s = 0;
      if constexpr (W == which::dot || W == which::scaled_dot) {
        for (std::size_t i = 0; i < dim; ++i) s += p.q[i] * h[i];
        if constexpr (W == which::scaled_dot) s *= f;
      } else if constexpr (W == which::general) {
        for (std::size_t a = 0; a < dim; ++a) {
          T wh = 0;
          for (std::size_t b = 0; b < dim; ++b) wh += p.W[a * dim + b] * h[b];
          s += p.q[a] * wh;
        }
      } else {
        for (std::size_t k = 0; k < hidden; ++k) {
          T pre = 0;
          for (std::size_t i = 0; i < dim; ++i)
            pre += p.W1[k * dim + i] * h[i] + p.W2[k * dim + i] * p.q[i];
          s += p.v[k] * std::tanh(pre);
        }
      }
      out[j] = s;
    }
    bench::touch(out.data());
  }
  finish<T>(state);
}

#ifdef ATTN_BENCH_HAVE_EIGEN
template <class T, which W>
void scores_eigen(benchmark::State& state) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  using RowVec = Eigen::Matrix<T, 1, Eigen::Dynamic>;
  const problem<T> p;
  const auto n = static_cast<Eigen::Index>(n_notes), d = static_cast<Eigen::Index>(dim),
             k = static_cast<Eigen::Index>(hidden);
  const Eigen::Map<const Mat> H(p.H.data(), n, d), Wm(p.W.data(), d, d), W1(p.W1.data(), k, d),
      W2(p.W2.data(), k, d);
  const Eigen::Map<const Vec> q(p.q.data(), d), v(p.v.data(), k);
  Vec out(n), u(d), pre_q(k);
  Mat pre(n, k);
  const T f = T(1) / std::sqrt(static_cast<T>(dim));
  for (auto _ : state) {
    bench::touch(p.H.data());
    if constexpr (W == which::dot) out.noalias() = H * q;
    if constexpr (W == which::scaled_dot) out.noalias() = (H * q) * f;
    if constexpr (W == which::general) {
      u.noalias() = Wm.transpose() * q;
      out.noalias() = H * u;
    }
    if constexpr (W == which::additive) {
      pre_q.noalias() = W2 * q;
      pre.noalias() = H * W1.transpose();
      pre.rowwise() += RowVec(pre_q.transpose());
      out.noalias() = pre.array().tanh().matrix() * v;
    }
    bench::touch(out.data());
  }
  finish<T>(state);
}
#endif

}  // namespace

#define ATTN_BENCH_SCORE(T, tname, W, wname)                                                   \
  BENCHMARK_TEMPLATE(scores_attn, T, which::W)->Name(#wname "/" tname "/attn/1024/64");       \
  BENCHMARK_TEMPLATE(scores_naive, T, which::W)->Name(#wname "/" tname "/naive/1024/64");
ATTN_BENCH_SCORE(float, "f32", dot, score_dot)
ATTN_BENCH_SCORE(float, "f32", scaled_dot, score_scaled_dot)
ATTN_BENCH_SCORE(float, "f32", general, score_general)
ATTN_BENCH_SCORE(float, "f32", additive, score_additive)
ATTN_BENCH_SCORE(double, "f64", dot, score_dot)
ATTN_BENCH_SCORE(double, "f64", scaled_dot, score_scaled_dot)
ATTN_BENCH_SCORE(double, "f64", general, score_general)
ATTN_BENCH_SCORE(double, "f64", additive, score_additive)
#ifdef ATTN_BENCH_HAVE_EIGEN
#define ATTN_BENCH_SCORE_EIGEN(T, tname, W, wname) \
  BENCHMARK_TEMPLATE(scores_eigen, T, which::W)->Name(#wname "/" tname "/eigen/1024/64");
ATTN_BENCH_SCORE_EIGEN(float, "f32", dot, score_dot)
ATTN_BENCH_SCORE_EIGEN(float, "f32", scaled_dot, score_scaled_dot)
ATTN_BENCH_SCORE_EIGEN(float, "f32", general, score_general)
ATTN_BENCH_SCORE_EIGEN(float, "f32", additive, score_additive)
ATTN_BENCH_SCORE_EIGEN(double, "f64", dot, score_dot)
ATTN_BENCH_SCORE_EIGEN(double, "f64", scaled_dot, score_scaled_dot)
ATTN_BENCH_SCORE_EIGEN(double, "f64", general, score_general)
ATTN_BENCH_SCORE_EIGEN(double, "f64", additive, score_additive)
#endif
