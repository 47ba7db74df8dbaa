// Derivatives of one look back (dot score, notes are keys and values), from g = ∂L/∂c:
//   backward:        attn::backward (∂L/∂s, ∂L/∂q, ∂L/∂H) against
//                    forward — attn::attend on the same notes, the pass backward is measured by,
//                    naive   — the loops one writes first (std::exp),
//                    eigen   — Eigen 3.4 matrix-vector products and outer products,
//                    attn_weights — attn::backward given attend's weights (saved_forward);
//   backward_w:      attn::backward from attend's weights against forward (attend);
//   backward_1p:     attn::backward given attend's weights and context (one pass)
//                    against forward (attend);
//   jacobian_query:  attn::jacobian_query (∂c/∂q, d×d) against fma_ref, a loop doing the
//                    n·d² fused multiply-adds of Σ_j x_j h_jᵀ and nothing else;
//   jacobian_note:   attn::jacobian_note (∂c/∂h_j for one j) against forward.
#include <attn/backward.hpp>
#include <attn/jacobian.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <vector>

#include "common.hpp"
#include "eigen.hpp"

namespace {

const std::vector<std::array<long, 2>> shapes{{64, 64}, {1024, 64}};

void apply_shapes(benchmark::internal::Benchmark* b) { bench::apply_pairs(b, shapes); }

template <class T>
struct problem {
  std::size_t n, d;
  const bench::buffer<T>& H;
  const bench::buffer<T>& q;
  const bench::buffer<T>& g;
  explicit problem(const benchmark::State& state)
      : n(static_cast<std::size_t>(state.range(0))),
        d(static_cast<std::size_t>(state.range(1))),
        H(bench::data<T>(n * d, 21)),
        q(bench::data<T>(d, 22)),
        g(bench::data<T>(d, 23)) {}
  [[nodiscard]] attn::MatrixView<const T> notes() const { return attn::MatrixView<const T>(H.data(), n, d); }
};

template <class T>
void finish(benchmark::State& state, std::size_t n, std::size_t d) {
  bench::counters(state, static_cast<double>(n), static_cast<double>(n * d * sizeof(T)));
}

template <class T>
void backward_attn(benchmark::State& state) {
  const problem<T> p(state);
  bench::buffer<T> gs(p.n), gq(p.d);
  attn::Matrix<T> gn(p.n, p.d);
  for (auto _ : state) {
    bench::touch(p.H.data());
    attn::backward(p.q, p.notes(), attn::dot, p.g, attn::notes_backward_views<T>{gs, gq, gn.view()});
    bench::touch(gn.data());
  }
  finish<T>(state, p.n, p.d);
}

/// backward_from_weights from attend's weights (formed once, outside the loop), as autograd
/// keeps the forward's softmax output.
template <class T>
void backward_attn_weights(benchmark::State& state) {
  const problem<T> p(state);
  bench::buffer<T> s(p.n), w(p.n), c(p.d), gs(p.n), gq(p.d);
  attn::attend(p.q, p.notes(), attn::dot, s, w, c);
  attn::Matrix<T> gn(p.n, p.d);
  for (auto _ : state) {
    bench::touch(p.H.data());
    attn::backward(p.q, p.notes(), attn::dot, attn::saved_forward<T>{w}, p.g,
                   attn::notes_backward_views<T>{gs, gq, gn.view()});
    bench::touch(gn.data());
  }
  finish<T>(state, p.n, p.d);
}

/// backward_from_forward from attend's weights and context (formed once, outside the loop):
/// one pass over the notes. The input (bench::data, uniform numbers, as every benchmark here)
/// has no weight above 1/2 at these shapes (checked: the benchmark fails otherwise), so this
/// measures the one-pass path, not its fallback to backward_from_weights.
template <class T>
void backward_attn_forward(benchmark::State& state) {
  const problem<T> p(state);
  bench::buffer<T> s(p.n), w(p.n), c(p.d), gs(p.n), gq(p.d);
  attn::attend(p.q, p.notes(), attn::dot, s, w, c);
  for (const T x : w)
    if (x > T(0.5)) {
      state.SkipWithError("a weight above 1/2: backward_from_forward would take the two-pass path");
      return;
    }
  attn::Matrix<T> gn(p.n, p.d);
  for (auto _ : state) {
    bench::touch(p.H.data());
    attn::backward(p.q, p.notes(), attn::dot, attn::saved_forward<T>{w, c}, p.g,
                   attn::notes_backward_views<T>{gs, gq, gn.view()});
    bench::touch(gn.data());
  }
  finish<T>(state, p.n, p.d);
}

template <class T>
void backward_forward(benchmark::State& state) {
  const problem<T> p(state);
  bench::buffer<T> s(p.n), w(p.n), c(p.d);
  for (auto _ : state) {
    bench::touch(p.H.data());
    attn::attend(p.q, p.notes(), attn::dot, s, w, c);
    bench::touch(c.data());
  }
  finish<T>(state, p.n, p.d);
}

/// The backward pass as loops: s, α (std::exp), c, u_j = ⟨g, h_j⟩, ∂L/∂s_j = α_j (u_j − ⟨g, c⟩),
/// ∂L/∂h_j = α_j g + (∂L/∂s_j) q, ∂L/∂q = Σ_j (∂L/∂s_j) h_j.
template <class T>
void backward_naive(benchmark::State& state) {
  const problem<T> p(state);
  const std::size_t n = p.n, d = p.d;
  bench::buffer<T> s(n), a(n), c(d), gs(n), gq(d), gn(n * d);
  for (auto _ : state) {
    bench::touch(p.H.data());
    const T* H = p.H.data();
    const T* q = p.q.data();
    const T* g = p.g.data();
    bench::naive_attend(H, q, n, d, s.data(), a.data(), c.data());
    T gc = 0;
    for (std::size_t i = 0; i < d; ++i) gc += g[i] * c[i];
    for (std::size_t i = 0; i < d; ++i) gq[i] = 0;
    for (std::size_t j = 0; j < n; ++j) {
      T u = 0;
      for (std::size_t i = 0; i < d; ++i) u += g[i] * H[j * d + i];
      gs[j] = a[j] * (u - gc);
      for (std::size_t i = 0; i < d; ++i) {
        gn[j * d + i] = a[j] * g[i] + gs[j] * q[i];
        gq[i] += gs[j] * H[j * d + i];
      }
    }
    bench::touch(gn.data());
    bench::touch(gq.data());
  }
  finish<T>(state, n, d);
}

#ifdef ATTN_BENCH_HAVE_EIGEN
template <class T>
void backward_eigen(benchmark::State& state) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  const problem<T> p(state);
  const auto n = static_cast<Eigen::Index>(p.n), d = static_cast<Eigen::Index>(p.d);
  const Eigen::Map<const Mat> H(p.H.data(), n, d);
  const Eigen::Map<const Vec> q(p.q.data(), d), g(p.g.data(), d);
  Vec s(n), a(n), c(d), u(n), gs(n), gq(d);
  Mat gn(n, d);
  for (auto _ : state) {
    bench::touch(p.H.data());
    s.noalias() = H * q;
    a.array() = (s.array() - s.maxCoeff()).exp();
    a *= T(1) / a.sum();
    c.noalias() = H.transpose() * a;
    u.noalias() = H * g;
    gs.array() = a.array() * (u.array() - g.dot(c));
    gn.noalias() = a * g.transpose();
    gn.noalias() += gs * q.transpose();
    gq.noalias() = H.transpose() * gs;
    bench::touch(gn.data());
    bench::touch(gq.data());
  }
  finish<T>(state, p.n, p.d);
}
#endif

template <class T>
void jacobian_query_attn(benchmark::State& state) {
  const problem<T> p(state);
  attn::Matrix<T> J(p.d, p.d);
  for (auto _ : state) {
    bench::touch(p.H.data());
    attn::jacobian_query(p.q, p.notes(), attn::dot, J.view());
    bench::touch(J.data());
  }
  finish<T>(state, p.n, p.d);
}

/// n rank-one updates J += x_j h_jᵀ (x_j = h_j here): the n·d² fused multiply-adds that any
/// ∂c/∂q = β Σ_j α_j (h_j − c) h_jᵀ must do, and nothing else.
template <class T>
void jacobian_query_fma_ref(benchmark::State& state) {
  const problem<T> p(state);
  const std::size_t n = p.n, d = p.d;
  bench::buffer<T> J(d * d);
  for (auto _ : state) {
    bench::touch(p.H.data());
    const T* H = p.H.data();
    for (auto& x : J) x = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const T* h = H + j * d;
      for (std::size_t a = 0; a < d; ++a) {
        const T x = h[a];
        T* row = J.data() + a * d;
        for (std::size_t b = 0; b < d; ++b) row[b] += x * h[b];
      }
    }
    bench::touch(J.data());
  }
  finish<T>(state, n, d);
}

template <class T>
void jacobian_note_attn(benchmark::State& state) {
  const problem<T> p(state);
  attn::Matrix<T> J(p.d, p.d);
  for (auto _ : state) {
    bench::touch(p.H.data());
    attn::jacobian_note(p.q, p.notes(), attn::dot, p.n / 2, J.view());
    bench::touch(J.data());
  }
  finish<T>(state, p.n, p.d);
}

}  // namespace

BENCHMARK_TEMPLATE(backward_attn, double)->Name("backward/f64/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_forward, double)->Name("backward/f64/forward")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_naive, double)->Name("backward/f64/naive")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_attn, float)->Name("backward/f32/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_forward, float)->Name("backward/f32/forward")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_naive, float)->Name("backward/f32/naive")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_attn_weights, double)->Name("backward/f64/attn_weights")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_attn_weights, float)->Name("backward/f32/attn_weights")->Apply(apply_shapes);
// the same against the forward alone: ratios.py's table for backward_w shows attn/forward
BENCHMARK_TEMPLATE(backward_attn_weights, double)->Name("backward_w/f64/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_forward, double)->Name("backward_w/f64/forward")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_attn_weights, float)->Name("backward_w/f32/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_forward, float)->Name("backward_w/f32/forward")->Apply(apply_shapes);
// backward_from_forward (one pass, given attend's weights and context) against the forward
BENCHMARK_TEMPLATE(backward_attn_forward, double)->Name("backward_1p/f64/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_forward, double)->Name("backward_1p/f64/forward")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_attn_forward, float)->Name("backward_1p/f32/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_forward, float)->Name("backward_1p/f32/forward")->Apply(apply_shapes);
#ifdef ATTN_BENCH_HAVE_EIGEN
BENCHMARK_TEMPLATE(backward_eigen, double)->Name("backward/f64/eigen")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_eigen, float)->Name("backward/f32/eigen")->Apply(apply_shapes);
#endif
BENCHMARK_TEMPLATE(jacobian_query_attn, double)->Name("jacobian_query/f64/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(jacobian_query_fma_ref, double)->Name("jacobian_query/f64/fma_ref")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(jacobian_query_attn, float)->Name("jacobian_query/f32/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(jacobian_query_fma_ref, float)->Name("jacobian_query/f32/fma_ref")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(jacobian_note_attn, double)->Name("jacobian_note/f64/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_forward, double)->Name("jacobian_note/f64/forward")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(jacobian_note_attn, float)->Name("jacobian_note/f32/attn")->Apply(apply_shapes);
BENCHMARK_TEMPLATE(backward_forward, float)->Name("jacobian_note/f32/forward")->Apply(apply_shapes);
