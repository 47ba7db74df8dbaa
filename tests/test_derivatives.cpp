// Derivatives of attention, checked: every Jacobian and every backward against central finite
// differences (attn/gradcheck.hpp), every Jacobian against its backward (Jᵀg = VJP), for dot,
// scaled_dot, general, additive and two scores defined here, in float, double and long double,
// at several sizes and scales, with β ≠ 1 and masks; E7; masked and all-masked rows; and the
// examples of docs/derivatives.md (the TEST_CASEs named "docs/derivatives.md: ...").
//
// `./attn_tests "[derivatives-report]"` prints the measured agreement per score and type.

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "attn/attn.hpp"
#include "attn/gradcheck.hpp"
#include "attn/jacobian.hpp"
#include "attn_catch.hpp"

using attn::Matrix;
using attn::Vector;

namespace {

// ---------------------------------------------------------------------------------------------
// Two scores a user might write. Neither is known to the library.
// ---------------------------------------------------------------------------------------------

// s = −‖q − h‖² (a distance score): no parameters, no batched members, so backward goes note
// by note through gradient_note / gradient_query.
struct neg_sq_distance {
  static constexpr bool same_size = true;
  void check(std::size_t d_q, std::size_t d_h) const {
    if (d_q != d_h) throw attn::dimension_error("neg_sq_distance: sizes differ");
  }
  template <class T>
  T operator()(std::span<const T> q, std::span<const T> h) const {
    T s = 0;
    for (std::size_t i = 0; i < q.size(); ++i) s -= (q[i] - h[i]) * (q[i] - h[i]);
    return s;
  }
  template <class T>
  void gradient_note(std::span<const T> q, std::span<const T> h, std::span<T> out) const {
    for (std::size_t i = 0; i < q.size(); ++i) out[i] = T(2) * (q[i] - h[i]);
  }
  template <class T>
  void gradient_query(std::span<const T> q, std::span<const T> h, std::span<T> out) const {
    for (std::size_t i = 0; i < q.size(); ++i) out[i] = T(2) * (h[i] - q[i]);
  }
};

// s = Σ_i w_i q_i h_i: one parameter vector w, reported through the per-note hook
// accumulate_parameter_gradient (grads += a ∂s/∂w = a q ⊙ h).
template <class T>
struct weighted_dot {
  std::vector<T> w;
  static constexpr bool same_size = true;
  void check(std::size_t d_q, std::size_t d_h) const {
    if (d_q != d_h || d_q != w.size()) throw attn::dimension_error("weighted_dot: sizes differ");
  }
  T operator()(std::span<const T> q, std::span<const T> h) const {
    T s = 0;
    for (std::size_t i = 0; i < q.size(); ++i) s += w[i] * q[i] * h[i];
    return s;
  }
  void gradient_note(std::span<const T> q, std::span<const T>, std::span<T> out) const {
    for (std::size_t i = 0; i < q.size(); ++i) out[i] = w[i] * q[i];
  }
  void gradient_query(std::span<const T>, std::span<const T> h, std::span<T> out) const {
    for (std::size_t i = 0; i < h.size(); ++i) out[i] = w[i] * h[i];
  }
  std::vector<T> zero_parameter_gradient() const { return std::vector<T>(w.size(), T(0)); }
  void accumulate_parameter_gradient(std::span<const T> q, std::span<const T> h, T a,
                                     std::vector<T>& g) const {
    for (std::size_t i = 0; i < q.size(); ++i) g[i] += a * q[i] * h[i];
  }
};

// Compile-time probes: a call that must not compile is a `requires` that is false.
template <class Q, class N, class Out>
constexpr bool can_jacobian_note_into = requires(Q q, N n, Out o) { attn::jacobian_note(q, n, attn::dot, 0, o); };
template <class Q, class N, class G>
constexpr bool can_backward = requires(Q q, N n, G g) { attn::backward(q, n, attn::dot, g); };
template <class Q, class N, class G, class GS, class GQ, class GN>
constexpr bool can_backward_into = requires(Q q, N n, G g, GS gs, GQ gq, GN gn) {
  attn::backward(q, n, attn::dot, g, gs, gq, gn);
};

static_assert(attn::Score<neg_sq_distance, double>);
static_assert(attn::Score<weighted_dot<float>, float>);
static_assert(std::is_same_v<attn::parameter_gradient_t<neg_sq_distance>, attn::no_parameters>);
static_assert(std::is_same_v<attn::parameter_gradient_t<weighted_dot<double>>, std::vector<double>>);
static_assert(std::is_same_v<attn::parameter_gradient_t<attn::general<double, 2, 3>>,
                             attn::general<double, 2, 3>::gradient>);

// ---------------------------------------------------------------------------------------------
// Random inputs and flattening
// ---------------------------------------------------------------------------------------------

using rng_t = std::mt19937_64;

template <class T>
T uniform(rng_t& rng, T scale) {
  return static_cast<T>(std::uniform_real_distribution<double>(-1.0, 1.0)(rng)) * scale;
}
template <class T>
Vector<T> random_vector(rng_t& rng, std::size_t n, T scale) {
  Vector<T> v(n);
  for (auto& x : v) x = uniform(rng, scale);
  return v;
}
template <class T>
Matrix<T> random_matrix(rng_t& rng, std::size_t r, std::size_t c, T scale) {
  Matrix<T> m(r, c);
  for (std::size_t i = 0; i < r; ++i)
    for (std::size_t j = 0; j < c; ++j) m(i, j) = uniform(rng, scale);
  return m;
}
template <class T>
Vector<T> flat(const Matrix<T>& m) {
  Vector<T> v(m.size());
  for (std::size_t i = 0; i < m.size(); ++i) v[i] = m.data()[i];
  return v;
}
template <class T>
Matrix<T> unflat(std::span<const T> x, std::size_t r, std::size_t c) {
  Matrix<T> m(r, c);
  for (std::size_t i = 0; i < r * c; ++i) m.data()[i] = x[i];
  return m;
}
template <class T, class... Parts>
Vector<T> concat(const Parts&... parts) {
  Vector<T> v((attn::as_span(parts).size() + ...));
  std::size_t k = 0;
  for (const auto p : {std::span<const T>(attn::as_span(parts))...})
    for (const T& x : p) v[k++] = x;
  return v;
}
template <class T>
Matrix<T> with_row(const Matrix<T>& m, std::size_t j, std::span<const T> x) {
  Matrix<T> out = m;
  for (std::size_t i = 0; i < m.cols(); ++i) out(j, i) = x[i];
  return out;
}

// ---------------------------------------------------------------------------------------------
// One case per score: how to make it, its parameters θ as one flat vector, and ∂L/∂θ flattened
// ---------------------------------------------------------------------------------------------

template <class T>
struct dot_case {
  static constexpr const char* name = "dot";
  static constexpr bool same_size = true;
  dot_case(rng_t&, std::size_t, std::size_t) {}
  attn::dot_score score() const { return attn::dot; }
  Vector<T> theta() const { return Vector<T>(); }
  template <class F>
  auto with_theta(std::span<const T>, F&& f) const { return f(attn::dot); }
  Vector<T> flat_gradient(const attn::no_parameters&) const { return Vector<T>(); }
};

template <class T>
struct scaled_dot_case {
  static constexpr const char* name = "scaled_dot";
  static constexpr bool same_size = true;
  scaled_dot_case(rng_t&, std::size_t, std::size_t) {}
  attn::scaled_dot_score score() const { return attn::scaled_dot; }
  Vector<T> theta() const { return Vector<T>(); }
  template <class F>
  auto with_theta(std::span<const T>, F&& f) const { return f(attn::scaled_dot); }
  Vector<T> flat_gradient(const attn::no_parameters&) const { return Vector<T>(); }
};

template <class T>
struct general_case {
  static constexpr const char* name = "general";
  static constexpr bool same_size = false;
  Matrix<T> W;
  general_case(rng_t& rng, std::size_t dq, std::size_t dk)
      : W(random_matrix<T>(rng, dq, dk, T(1) / std::sqrt(static_cast<T>(dk)))) {}
  attn::general<T> score() const { return attn::general<T>(W); }
  Vector<T> theta() const { return flat(W); }
  template <class F>
  auto with_theta(std::span<const T> th, F&& f) const {
    const Matrix<T> W2 = unflat(th, W.rows(), W.cols());
    return f(attn::general<T>(W2));
  }
  Vector<T> flat_gradient(const typename attn::general<T>::gradient& g) const { return flat(g.W); }
};

template <class T>
struct additive_case {
  static constexpr const char* name = "additive";
  static constexpr bool same_size = false;
  Matrix<T> W1, W2;
  Vector<T> v;
  additive_case(rng_t& rng, std::size_t dq, std::size_t dk)
      : W1(random_matrix<T>(rng, 3, dk, T(1.5) / std::sqrt(static_cast<T>(dk)))),
        W2(random_matrix<T>(rng, 3, dq, T(1.5) / std::sqrt(static_cast<T>(dq)))),
        v(random_vector<T>(rng, 3, T(2))) {}
  attn::additive<T> score() const { return attn::additive<T>(W1, W2, v); }
  Vector<T> theta() const { return concat<T>(flat(W1), flat(W2), v); }
  template <class F>
  auto with_theta(std::span<const T> th, F&& f) const {
    const std::size_t a = W1.size(), b = W2.size();
    const Matrix<T> A = unflat(th.subspan(0, a), W1.rows(), W1.cols());
    const Matrix<T> B = unflat(th.subspan(a, b), W2.rows(), W2.cols());
    const Vector<T> c(th.subspan(a + b));
    return f(attn::additive<T>(A, B, c));
  }
  Vector<T> flat_gradient(const typename attn::additive<T>::gradient& g) const {
    return concat<T>(flat(g.W1), flat(g.W2), g.v);
  }
};

template <class T>
struct distance_case {
  static constexpr const char* name = "user distance";
  static constexpr bool same_size = true;
  distance_case(rng_t&, std::size_t, std::size_t) {}
  neg_sq_distance score() const { return {}; }
  Vector<T> theta() const { return Vector<T>(); }
  template <class F>
  auto with_theta(std::span<const T>, F&& f) const { return f(neg_sq_distance{}); }
  Vector<T> flat_gradient(const attn::no_parameters&) const { return Vector<T>(); }
};

template <class T>
struct weighted_dot_case {
  static constexpr const char* name = "user weighted_dot";
  static constexpr bool same_size = true;
  std::vector<T> w;
  weighted_dot_case(rng_t& rng, std::size_t dq, std::size_t) {
    for (std::size_t i = 0; i < dq; ++i) w.push_back(uniform(rng, T(1.5)));
  }
  weighted_dot<T> score() const { return {w}; }
  Vector<T> theta() const { return Vector<T>(std::span<const T>(w)); }
  template <class F>
  auto with_theta(std::span<const T> th, F&& f) const {
    return f(weighted_dot<T>{std::vector<T>(th.begin(), th.end())});
  }
  Vector<T> flat_gradient(const std::vector<T>& g) const { return Vector<T>(std::span<const T>(g)); }
};

// ---------------------------------------------------------------------------------------------
// One score behind a table of functions, so that the checks below compile once per type
// ---------------------------------------------------------------------------------------------

template <class T>
using vec_in = std::span<const T>;
template <class T>
using mat_in = attn::MatrixView<const T>;
/// A function from a vector to a vector: what the checker differentiates.
template <class T>
using fn = std::function<Vector<T>(std::span<const T>)>;

/// backward's outputs, flattened to dynamic sizes (`keys` holds ∂L/∂h when notes are both).
template <class T>
struct grads {
  Matrix<T> scores, queries;  // one row per query
  Matrix<T> keys, values;
  Vector<T> theta;  // ∂L/∂θ, flattened as the case flattens θ
};

/// Everything the checks call, for one score (built by `erase` from a case).
template <class T>
struct erased_score {
  const char* name = "";
  Vector<T> theta;  // the score's parameters, flattened
  std::function<Vector<T>(vec_in<T> theta, vec_in<T> q, mat_in<T> K, mat_in<T> V, const attn::options&)> context;
  std::function<Vector<T>(vec_in<T> q, mat_in<T> K, mat_in<T> V, const attn::options&)> scores;
  std::function<Matrix<T>(vec_in<T> q, mat_in<T> N, std::size_t j, const attn::options&)> jacobian_note;
  std::function<Matrix<T>(vec_in<T> q, mat_in<T> K, mat_in<T> V, std::size_t j, const attn::options&)> jacobian_key,
      jacobian_value;
  std::function<Matrix<T>(vec_in<T> q, mat_in<T> K, mat_in<T> V, const attn::options&)> jacobian_query;
  std::function<Matrix<T>(vec_in<T> q, mat_in<T> N, const attn::options&)> jacobian_query_notes;
  std::function<grads<T>(vec_in<T> q, mat_in<T> N, vec_in<T> g, const attn::options&)> backward_notes;
  std::function<grads<T>(vec_in<T> q, mat_in<T> K, mat_in<T> V, vec_in<T> g, const attn::options&)> backward;
  std::function<grads<T>(mat_in<T> Qs, mat_in<T> K, mat_in<T> V, mat_in<T> G, const attn::options&)> align_backward;
  std::function<Matrix<T>(mat_in<T> Qs, mat_in<T> K, mat_in<T> V, const attn::options&)> align_contexts;
};

template <class T>
Matrix<T> row_matrix(std::span<const T> v) {
  return Matrix<T>(attn::MatrixView<const T>(v.data(), 1, v.size()));
}

/// The table for one case; the case is shared with the functions, which keep it alive.
template <class T, class C>
erased_score<T> erase(std::shared_ptr<const C> cs) {
  using attn::options;
  erased_score<T> e;
  e.name = C::name;
  e.theta = cs->theta();
  const auto sc = cs->score();  // borrows the case's parameters
  e.context = [cs](vec_in<T> th, vec_in<T> q, mat_in<T> K, mat_in<T> V, const options& o) {
    return cs->with_theta(th, [&](const auto& s) { return attn::attend(q, K, V, s, o).context; });
  };
  e.scores = [cs, sc](vec_in<T> q, mat_in<T> K, mat_in<T> V, const options& o) {
    return attn::attend(q, K, V, sc, o).scores;
  };
  e.jacobian_note = [cs, sc](vec_in<T> q, mat_in<T> N, std::size_t j, const options& o) {
    return attn::jacobian_note(q, N, sc, j, o);
  };
  e.jacobian_key = [cs, sc](vec_in<T> q, mat_in<T> K, mat_in<T> V, std::size_t j, const options& o) {
    return attn::jacobian_key(q, K, V, sc, j, o);
  };
  e.jacobian_value = [cs, sc](vec_in<T> q, mat_in<T> K, mat_in<T> V, std::size_t j, const options& o) {
    return attn::jacobian_value(q, K, V, sc, j, o);
  };
  e.jacobian_query = [cs, sc](vec_in<T> q, mat_in<T> K, mat_in<T> V, const options& o) {
    return attn::jacobian_query(q, K, V, sc, o);
  };
  e.jacobian_query_notes = [cs, sc](vec_in<T> q, mat_in<T> N, const options& o) {
    return attn::jacobian_query(q, N, sc, o);
  };
  e.backward_notes = [cs, sc](vec_in<T> q, mat_in<T> N, vec_in<T> g, const options& o) {
    const auto b = attn::backward(q, N, sc, g, o);
    return grads<T>{row_matrix<T>(b.scores), row_matrix<T>(b.query), b.notes, Matrix<T>(),
                    cs->flat_gradient(b.parameters)};
  };
  e.backward = [cs, sc](vec_in<T> q, mat_in<T> K, mat_in<T> V, vec_in<T> g, const options& o) {
    const auto b = attn::backward(q, K, V, sc, g, o);
    return grads<T>{row_matrix<T>(b.scores), row_matrix<T>(b.query), b.keys, b.values,
                    cs->flat_gradient(b.parameters)};
  };
  e.align_backward = [cs, sc](mat_in<T> Qs, mat_in<T> K, mat_in<T> V, mat_in<T> G, const options& o) {
    const auto b = attn::align_backward(Qs, K, V, sc, G, o);
    return grads<T>{b.scores, b.queries, b.keys, b.values, cs->flat_gradient(b.parameters)};
  };
  e.align_contexts = [cs, sc](mat_in<T> Qs, mat_in<T> K, mat_in<T> V, const options& o) {
    return attn::align(Qs, K, V, sc, o).contexts;
  };
  return e;
}

// ---------------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------------

/// The worst agreement seen: finite differences (fd) and Jacobian-vs-backward (vjp).
template <class T>
struct tally {
  attn::gradcheck_report<T> fd, vjp;
  void fd_check(const attn::gradcheck_report<T>& r) { fd.merge(r); }
  void vjp_check(const attn::gradcheck_report<T>& r) { vjp.merge(r); }
};

template <class T>
std::string describe(const attn::gradcheck_report<T>& r) {
  return "worst relative error " + std::to_string(static_cast<double>(r.max_rel_error)) + " at " +
         r.worst_rel.input + " (" + std::to_string(r.worst_rel.output) + ", " +
         std::to_string(r.worst_rel.index) + "); worst absolute " +
         std::to_string(static_cast<double>(r.max_abs_error));
}

/// The context as a function of the scores: c(s) = Σ_j softmax(β·s, mask)_j v_j.
template <class T>
Vector<T> context_of_scores(std::span<const T> s, const Matrix<T>& values, const attn::options& opt) {
  const Vector<T> a = attn::softmax(s, opt);
  Vector<T> c(values.cols());
  for (std::size_t j = 0; j < values.rows(); ++j)
    if (a[j] != T(0))
      for (std::size_t i = 0; i < values.cols(); ++i) c[i] += a[j] * values(j, i);
  return c;
}

/// ∂L/∂α_j = ⟨g, v_j⟩.
template <class T>
Vector<T> loss_by_weights(const Vector<T>& g, const Matrix<T>& values) {
  Vector<T> u(values.rows());
  for (std::size_t j = 0; j < values.rows(); ++j)
    for (std::size_t i = 0; i < values.cols(); ++i) u[j] += g[i] * values(j, i);
  return u;
}

/// Every derivative of one look back over notes that are both keys and values.
template <class T>
void check_notes(tally<T>& t, const erased_score<T>& sc, const Vector<T>& q, const Matrix<T>& N,
                 const Vector<T>& g, const attn::options& opt) {
  const vec_in<T> th = attn::as_span(sc.theta);
  const grads<T> b = sc.backward_notes(q, N, g, opt);
  for (std::size_t j = 0; j < N.rows(); ++j) {
    const Matrix<T> J = sc.jacobian_note(q, N, j, opt);
    const fn<T> f = [&](std::span<const T> x) {
      const Matrix<T> N2 = with_row(N, j, x);
      return sc.context(th, q, N2, N2, opt);
    };
    const std::string h = "h_" + std::to_string(j);
    t.fd_check(attn::check_jacobian(f, N.row(j), J, "dc/d" + h));
    t.fd_check(attn::check_vjp(f, N.row(j), g, b.keys.row(j), "dL/d" + h));
    t.vjp_check(attn::compare_vjp(J, g, b.keys.row(j), h));
  }
  const Matrix<T> Jq = sc.jacobian_query_notes(q, N, opt);
  const fn<T> fq = [&](std::span<const T> x) { return sc.context(th, x, N, N, opt); };
  t.fd_check(attn::check_jacobian(fq, q, Jq, "dc/dq"));
  t.fd_check(attn::check_vjp(fq, q, g, b.queries.row(0), "dL/dq"));
  t.vjp_check(attn::compare_vjp(Jq, g, b.queries.row(0), "q"));
  // the scores: softmax Jacobian, softmax VJP and backward's ∂L/∂s
  const Vector<T> s = sc.scores(q, N, N, opt);
  const Vector<T> u = loss_by_weights(g, N);
  const Matrix<T> Js = attn::softmax_jacobian(s, opt);
  const fn<T> fa = [&](std::span<const T> x) { return attn::softmax(x, opt); };
  t.fd_check(attn::check_jacobian(fa, s, Js, "dalpha/ds"));
  const fn<T> fs = [&](std::span<const T> x) { return context_of_scores(x, N, opt); };
  t.fd_check(attn::check_vjp(fs, s, g, b.scores.row(0), "dL/ds"));
  t.vjp_check(attn::compare_vjp(Js, u, b.scores.row(0), "s"));
  t.vjp_check(attn::compare_vjp(Js, u, attn::softmax_vjp(s, u, opt), "softmax_vjp"));
  // the parameters
  if (th.size() != 0) {
    const fn<T> fth = [&](std::span<const T> x) { return sc.context(x, q, N, N, opt); };
    t.fd_check(attn::check_vjp(fth, th, g, b.theta, "dL/dtheta"));
  }
}

/// Every derivative of one look back over keys ≠ values.
template <class T>
void check_keys_values(tally<T>& t, const erased_score<T>& sc, const Vector<T>& q, const Matrix<T>& K,
                       const Matrix<T>& V, const Vector<T>& g, const attn::options& opt) {
  const vec_in<T> th = attn::as_span(sc.theta);
  const grads<T> b = sc.backward(q, K, V, g, opt);
  for (std::size_t j = 0; j < K.rows(); ++j) {
    const std::string k = "k_" + std::to_string(j), v = "v_" + std::to_string(j);
    const Matrix<T> Jk = sc.jacobian_key(q, K, V, j, opt);
    const fn<T> fk = [&](std::span<const T> x) { return sc.context(th, q, with_row(K, j, x), V, opt); };
    t.fd_check(attn::check_jacobian(fk, K.row(j), Jk, "dc/d" + k));
    t.fd_check(attn::check_vjp(fk, K.row(j), g, b.keys.row(j), "dL/d" + k));
    t.vjp_check(attn::compare_vjp(Jk, g, b.keys.row(j), k));
    const Matrix<T> Jv = sc.jacobian_value(q, K, V, j, opt);
    const fn<T> fv = [&](std::span<const T> x) { return sc.context(th, q, K, with_row(V, j, x), opt); };
    t.fd_check(attn::check_jacobian(fv, V.row(j), Jv, "dc/d" + v));
    t.fd_check(attn::check_vjp(fv, V.row(j), g, b.values.row(j), "dL/d" + v));
    t.vjp_check(attn::compare_vjp(Jv, g, b.values.row(j), v));
  }
  const Matrix<T> Jq = sc.jacobian_query(q, K, V, opt);
  const fn<T> fq = [&](std::span<const T> x) { return sc.context(th, x, K, V, opt); };
  t.fd_check(attn::check_jacobian(fq, q, Jq, "dc/dq"));
  t.fd_check(attn::check_vjp(fq, q, g, b.queries.row(0), "dL/dq"));
  t.vjp_check(attn::compare_vjp(Jq, g, b.queries.row(0), "q"));
  const Vector<T> s = sc.scores(q, K, V, opt);
  const fn<T> fs = [&](std::span<const T> x) { return context_of_scores(x, V, opt); };
  t.fd_check(attn::check_vjp(fs, s, g, b.scores.row(0), "dL/ds"));
  if (th.size() != 0) {
    const fn<T> fth = [&](std::span<const T> x) { return sc.context(x, q, K, V, opt); };
    t.fd_check(attn::check_vjp(fth, th, g, b.theta, "dL/dtheta"));
  }
}

/// align_backward against finite differences of L = Σ_t ⟨G_t, c_t⟩ (through align's own
/// forward), and against the sum of one-query backward calls.
template <class T>
void check_align(tally<T>& t, const erased_score<T>& sc, const Matrix<T>& Qs, const Matrix<T>& K,
                 const Matrix<T>& V, const Matrix<T>& G, const attn::options& opt) {
  const grads<T> ab = sc.align_backward(Qs, K, V, G, opt);
  const Vector<T> g = flat(G);
  const fn<T> fq = [&](std::span<const T> x) { return flat(sc.align_contexts(unflat(x, Qs.rows(), Qs.cols()), K, V, opt)); };
  const fn<T> fk = [&](std::span<const T> x) { return flat(sc.align_contexts(Qs, unflat(x, K.rows(), K.cols()), V, opt)); };
  const fn<T> fv = [&](std::span<const T> x) { return flat(sc.align_contexts(Qs, K, unflat(x, V.rows(), V.cols()), opt)); };
  t.fd_check(attn::check_vjp(fq, flat(Qs), g, flat(ab.queries), "align dL/dQ"));
  t.fd_check(attn::check_vjp(fk, flat(K), g, flat(ab.keys), "align dL/dK"));
  t.fd_check(attn::check_vjp(fv, flat(V), g, flat(ab.values), "align dL/dV"));
  if (sc.theta.size() != 0) {
    const fn<T> fth = [&](std::span<const T> x) {
      Vector<T> c(Qs.rows() * V.cols());
      for (std::size_t r = 0; r < Qs.rows(); ++r) {
        const Vector<T> cr = sc.context(x, Qs.row(r), K, V, opt);
        for (std::size_t i = 0; i < V.cols(); ++i) c[r * V.cols() + i] = cr[i];
      }
      return c;
    };
    t.fd_check(attn::check_vjp(fth, sc.theta, g, ab.theta, "align dL/dtheta"));
  }
  // the same as T one-query backward calls (the per-query rows exactly; the note gradients,
  // summed in another order, to rounding: |Σ − Σ'| ≤ 16 ε Σ|parts|)
  Matrix<T> sumK(K.rows(), K.cols()), sumV(V.rows(), V.cols()), absK(K.rows(), K.cols());
  for (std::size_t r = 0; r < Qs.rows(); ++r) {
    const grads<T> b = sc.backward(Qs.row(r), K, V, G.row(r), opt);
    for (std::size_t i = 0; i < Qs.cols(); ++i) REQUIRE(b.queries(0, i) == ab.queries(r, i));
    for (std::size_t j = 0; j < K.rows(); ++j) {
      REQUIRE(b.scores(0, j) == ab.scores(r, j));
      for (std::size_t i = 0; i < K.cols(); ++i) {
        sumK(j, i) += b.keys(j, i);
        absK(j, i) += std::fabs(b.keys(j, i));
      }
      for (std::size_t i = 0; i < V.cols(); ++i) sumV(j, i) += b.values(j, i);
    }
  }
  const T eps = std::numeric_limits<T>::epsilon();
  for (std::size_t j = 0; j < K.rows(); ++j) {
    for (std::size_t i = 0; i < K.cols(); ++i) REQUIRE(std::fabs(sumK(j, i) - ab.keys(j, i)) <= 16 * eps * absK(j, i));
    for (std::size_t i = 0; i < V.cols(); ++i) REQUIRE(sumV(j, i) == ab.values(j, i));
  }
}

/// A mask keeping each note with probability 3/4 (and at least one note).
inline std::vector<char> random_mask(rng_t& rng, std::size_t n) {
  std::vector<char> keep(n);
  bool any = false;
  for (auto& k : keep) any |= (k = rng() % 4 != 0 ? 1 : 0) != 0;
  if (!any) keep[rng() % n] = 1;
  return keep;
}

/// Makes a score of random parameters for query length dq and key length dk.
template <class T>
using score_maker = std::function<erased_score<T>(rng_t&, std::size_t dq, std::size_t dk)>;

template <class T, template <class> class C>
score_maker<T> maker() {
  return [](rng_t& rng, std::size_t dq, std::size_t dk) {
    return erase<T, C<T>>(std::make_shared<const C<T>>(rng, dq, dk));
  };
}

/// Runs every check for one score over sizes, scales, β and masks.
template <class T>
tally<T> run_suite(const score_maker<T>& make, bool same_size) {
  tally<T> t;
  rng_t rng(20240611);
  struct shape {
    std::size_t n, dq, dk, dv;
  };
  // notes that are keys and values (dk = dv); for same-size scores dq = dk
  const shape note_shapes[] = {{1, 1, 1, 1}, {3, 2, 3, 3}, {6, 3, 4, 4}, {11, 4, 5, 5}};
  const shape kv_shapes[] = {{4, 2, 3, 2}, {9, 4, 5, 3}};
  const T scales[] = {T(0.5), T(1.5), T(3)};
  for (const T scale : scales) {
    for (int variant = 0; variant < 2; ++variant) {
      // β ≠ 1 throughout; the second variant also masks notes out
      const double beta = variant == 0 ? 0.7 : 1.9;
      for (const bool kv : {false, true}) {
        for (const shape& s0 : kv ? std::span<const shape>(kv_shapes) : std::span<const shape>(note_shapes)) {
          shape s = s0;
          if (same_size) s.dq = s.dk;
          const erased_score<T> sc = make(rng, s.dq, s.dk);
          const std::vector<char> keep = variant == 1 ? random_mask(rng, s.n) : std::vector<char>(s.n, 1);
          bool mask[16];
          for (std::size_t j = 0; j < s.n; ++j) mask[j] = keep[j] != 0;
          attn::options opt{.beta = beta, .mask = {}};
          if (variant == 1) opt.mask = std::span<const bool>(mask, s.n);
          const Vector<T> q = random_vector<T>(rng, s.dq, scale);
          const Matrix<T> K = random_matrix<T>(rng, s.n, s.dk, scale);
          const Vector<T> g = random_vector<T>(rng, s.dv, T(1));
          if (kv) {
            const Matrix<T> V = random_matrix<T>(rng, s.n, s.dv, scale);
            check_keys_values(t, sc, q, K, V, g, opt);
            const Matrix<T> Qs = random_matrix<T>(rng, 3, s.dq, scale);
            const Matrix<T> G = random_matrix<T>(rng, 3, s.dv, T(1));
            check_align(t, sc, Qs, K, V, G, opt);
          } else {
            check_notes(t, sc, q, K, g, opt);
          }
        }
      }
    }
  }
  return t;
}

template <class T, template <class> class C>
void require_suite() {
  const tally<T> t = run_suite<T>(maker<T, C>(), C<T>::same_size);
  INFO(C<T>::name << ", finite differences: " << describe(t.fd));
  INFO(C<T>::name << ", Jacobian vs backward: " << describe(t.vjp));
  REQUIRE(t.fd.passed(attn::gradcheck_tolerance<T>()));
  REQUIRE(t.vjp.passed(attn::vjp_tolerance<T>()));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The checker itself
// ---------------------------------------------------------------------------------------------

TEST_CASE("gradcheck: the step and the tolerances follow from epsilon", "[derivatives][gradcheck]") {
  REQUIRE_THAT(attn::gradcheck_step(0.0), Catch::Matchers::WithinRel(std::cbrt(0x1p-52), 1e-15));
  REQUIRE_THAT(attn::gradcheck_step(-8.0), Catch::Matchers::WithinRel(8 * std::cbrt(0x1p-52), 1e-15));
  REQUIRE_THAT(attn::gradcheck_tolerance<double>(), Catch::Matchers::WithinRel(1e-7, 1e-12));
  // float: 1e-7·(2^29)^{2/3}; long double (x87, ε = 2^-63): 1e-7·(2^-11)^{2/3}
  const double f_ratio = static_cast<double>(std::numeric_limits<float>::epsilon()) / 0x1p-52;
  REQUIRE_THAT(static_cast<double>(attn::gradcheck_tolerance<float>()),
               Catch::Matchers::WithinRel(1e-7 * std::cbrt(f_ratio * f_ratio), 1e-6));
  const double ld_ratio = static_cast<double>(std::numeric_limits<long double>::epsilon()) / 0x1p-52;
  REQUIRE_THAT(static_cast<double>(attn::gradcheck_tolerance<long double>()),
               Catch::Matchers::WithinRel(1e-7 * std::cbrt(ld_ratio * ld_ratio), 1e-12));
  REQUIRE_THAT(attn::vjp_tolerance<double>(), Catch::Matchers::WithinRel(1e-12, 1e-12));
  REQUIRE_THAT(static_cast<double>(attn::vjp_tolerance<float>()), Catch::Matchers::WithinRel(1e-12 * f_ratio, 1e-6));
}

TEST_CASE("gradcheck: finds a wrong Jacobian entry and says where", "[derivatives][gradcheck]") {
  // f(x) = (x0·x1, sin x1): J = [[x1, x0], [0, cos x1]]
  const auto f = [](std::span<const double> x) { return Vector<double, 2>{x[0] * x[1], std::sin(x[1])}; };
  const Vector<double, 2> x{1.5, -0.25};
  Matrix<double, 2, 2> J{{-0.25, 1.5}, {0, std::cos(-0.25)}};
  const auto good = attn::check_jacobian(f, x, J, "x");
  REQUIRE(good.passed(attn::gradcheck_tolerance<double>()));
  REQUIRE(good.max_rel_error < 1e-9);
  J(1, 1) *= 1.001;
  const auto bad = attn::check_jacobian(f, x, J, "x");
  REQUIRE_FALSE(bad.passed(attn::gradcheck_tolerance<double>()));
  REQUIRE(bad.worst_rel.input == "x");
  REQUIRE(bad.worst_rel.output == 1);
  REQUIRE(bad.worst_rel.index == 1);
  REQUIRE_THAT(bad.max_abs_error, Catch::Matchers::WithinRel(0.001 * std::cos(-0.25), 1e-6));
  // a NaN never passes
  J(0, 0) = std::numeric_limits<double>::quiet_NaN();
  REQUIRE_FALSE(attn::check_jacobian(f, x, J).passed(1.0));
  // merging keeps the worst, with its place
  auto r = good;
  r.merge(bad);
  REQUIRE(r.max_rel_error == bad.max_rel_error);
  REQUIRE(r.worst_rel.index == 1);
}

// ---------------------------------------------------------------------------------------------
// Every score, every derivative, three types
// ---------------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("derivatives agree with finite differences and with each other, every score",
                   "[derivatives]", float, double, long double) {
  SECTION("dot") { require_suite<TestType, dot_case>(); }
  SECTION("scaled_dot") { require_suite<TestType, scaled_dot_case>(); }
  SECTION("general") { require_suite<TestType, general_case>(); }
  SECTION("additive") { require_suite<TestType, additive_case>(); }
  SECTION("a user's score without parameters") { require_suite<TestType, distance_case>(); }
  SECTION("a user's score with parameters") { require_suite<TestType, weighted_dot_case>(); }
}

TEST_CASE("derivative agreement table", "[derivatives-report][.]") {
  std::printf("%-18s %-12s %-26s %-26s\n", "score", "type", "finite differences (tol)", "Jt g vs backward (tol)");
  const auto row = [](const char* score, const char* type, const auto& t, double tol_fd, double tol_vjp) {
    std::printf("%-18s %-12s %9.2e (%8.2e)      %9.2e (%8.2e)   worst at %s[%zu,%zu] / %s[%zu]\n", score, type,
                static_cast<double>(t.fd.max_rel_error), tol_fd, static_cast<double>(t.vjp.max_rel_error), tol_vjp,
                t.fd.worst_rel.input.c_str(), t.fd.worst_rel.output, t.fd.worst_rel.index,
                t.vjp.worst_rel.input.c_str(), t.vjp.worst_rel.index);
  };
  const auto all = [&](auto tag, const char* type) {
    using T = decltype(tag);
    const double a = static_cast<double>(attn::gradcheck_tolerance<T>());
    const double b = static_cast<double>(attn::vjp_tolerance<T>());
    row("dot", type, run_suite<T>(maker<T, dot_case>(), true), a, b);
    row("scaled_dot", type, run_suite<T>(maker<T, scaled_dot_case>(), true), a, b);
    row("general", type, run_suite<T>(maker<T, general_case>(), false), a, b);
    row("additive", type, run_suite<T>(maker<T, additive_case>(), false), a, b);
    row("user distance", type, run_suite<T>(maker<T, distance_case>(), true), a, b);
    row("user weighted_dot", type, run_suite<T>(maker<T, weighted_dot_case>(), true), a, b);
  };
  all(float{}, "float");
  all(double{}, "double");
  all(static_cast<long double>(0), "long double");
}

// ---------------------------------------------------------------------------------------------
// Fixed sizes: fixed-size results, the same numbers as dynamic sizes, and the caller-buffer forms
// ---------------------------------------------------------------------------------------------

TEST_CASE("fixed sizes give fixed-size Jacobians and gradients equal to the dynamic ones", "[derivatives]") {
  const Vector<double, 3> q{0.3, -0.8, 0.5};
  const Matrix<double, 4, 3> N{{1, 0.2, -0.4}, {0.1, 0.9, 0.3}, {-0.5, 0.4, 1.1}, {0.7, -0.6, 0.2}};
  const Matrix<double, 2, 3> W{{0.5, -0.2, 0.1}, {0.3, 0.8, -0.7}};
  const Vector<double, 2> q2{0.6, -0.4};
  const Vector<double, 3> g{1, -0.5, 0.25};
  const std::array<bool, 4> keep{true, false, true, true};
  const attn::options opt{.beta = 1.7, .mask = keep};
  const attn::general gen(W);

  const auto J = attn::jacobian_note(q, N, attn::dot, 2, opt);
  static_assert(std::is_same_v<decltype(J), const Matrix<double, 3, 3>>);
  const auto Jq = attn::jacobian_query(q2, N, gen, opt);
  static_assert(std::is_same_v<decltype(Jq), const Matrix<double, 3, 2>>);
  const auto Js = attn::softmax_jacobian(Vector<double, 4>{1, 2, 3, 4}, opt);
  static_assert(std::is_same_v<decltype(Js), const Matrix<double, 4, 4>>);
  const auto b = attn::backward(q2, N, gen, g, opt);
  static_assert(std::is_same_v<decltype(b.notes), Matrix<double, 4, 3>>);
  static_assert(std::is_same_v<decltype(b.query), Vector<double, 2>>);
  static_assert(std::is_same_v<decltype(b.parameters.W), Matrix<double, 2, 3>>);

  const Matrix<double> Nd(N.view());
  const Matrix<double> Wd(W.view());
  const attn::general<double> gend(Wd);
  const std::vector<double> qd(q.begin(), q.end()), q2d(q2.begin(), q2.end()), gd(g.begin(), g.end());
  const auto Jd = attn::jacobian_note(qd, Nd, attn::dot, 2, opt);
  const auto bd = attn::backward(q2d, Nd, gend, gd, opt);
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t k = 0; k < 3; ++k) REQUIRE(J(i, k) == Jd(i, k));
    for (std::size_t j = 0; j < 4; ++j) REQUIRE(b.notes(j, i) == bd.notes(j, i));
  }
  for (std::size_t i = 0; i < 2; ++i) REQUIRE(b.query[i] == bd.query[i]);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 3; ++k) REQUIRE(b.parameters.W(i, k) == bd.parameters.W(i, k));

  SECTION("the caller-buffer forms write the same numbers") {
    Matrix<double, 3, 3> Jb;
    attn::jacobian_note(q, N, attn::dot, 2, Jb.view(), opt);
    REQUIRE(Jb == J);
    std::array<double, 4> gs{};
    std::array<double, 2> gq{};
    Matrix<double, 4, 3> gn;
    Matrix<double, 2, 3> gW;  // parameter gradients accumulate: start from 0
    attn::backward(q2, N, gen, g, gs, gq, gn.view(), attn::general<double, 2, 3>::gradient_view{gW.view()}, opt);
    REQUIRE(gn == b.notes);
    REQUIRE(gW == b.parameters.W);
    attn::backward(q2, N, gen, g, gs, gq, gn.view(), attn::general<double, 2, 3>::gradient_view{gW.view()}, opt);
    REQUIRE_THAT(gW(1, 2), Catch::Matchers::WithinRel(2 * b.parameters.W(1, 2), 1e-15));
  }
  SECTION("fixed shapes that disagree do not compile") {
    using Q3 = Vector<double, 3>;
    using N43 = Matrix<double, 4, 3>;
    STATIC_REQUIRE(can_jacobian_note_into<Q3, N43, attn::MatrixView<double, 3, 3>>);
    STATIC_REQUIRE_FALSE(can_jacobian_note_into<Q3, N43, attn::MatrixView<double, 2, 3>>);
    STATIC_REQUIRE(can_backward<Q3, N43, Vector<double, 3>>);
    STATIC_REQUIRE_FALSE(can_backward<Q3, N43, Vector<double, 2>>);  // ∂L/∂c must have d_v numbers
    STATIC_REQUIRE(can_backward_into<Q3, N43, Q3, std::array<double, 4>, Q3, attn::MatrixView<double, 4, 3>>);
    STATIC_REQUIRE_FALSE(can_backward_into<Q3, N43, Q3, std::array<double, 3>, Q3, attn::MatrixView<double, 4, 3>>);
    STATIC_REQUIRE_FALSE(can_backward_into<Q3, N43, Q3, std::array<double, 4>, Q3, attn::MatrixView<double, 4, 2>>);
  }
}

TEST_CASE("dynamic sizes that disagree throw and leave the outputs untouched", "[derivatives]") {
  const std::vector<double> q{0.1, 0.2};
  const Matrix<double> N{{1, 0}, {0, 1}, {1, 1}};
  std::vector<double> g3{1, 2, 3}, gs(3, 7.0), gq(2, 7.0);
  Matrix<double> gn(3, 2, 7.0);
  REQUIRE_THROWS_AS(attn::backward(q, N, attn::dot, g3, gs, gq, gn), attn::dimension_error);
  REQUIRE(gs[0] == 7.0);
  REQUIRE(gn(2, 1) == 7.0);
  const std::vector<double> g2{1, 2};
  Matrix<double> bad(2, 2, 7.0);
  REQUIRE_THROWS_AS(attn::backward(q, N, attn::dot, g2, gs, gq, bad), attn::dimension_error);
  REQUIRE(gs[0] == 7.0);
  REQUIRE_THROWS_AS(attn::jacobian_note(q, N, attn::dot, 3), attn::dimension_error);
  REQUIRE_THROWS_AS(attn::jacobian_key(q, N, N, attn::dot, 5), attn::dimension_error);
  const bool keep_none[3] = {false, false, false};
  REQUIRE_THROWS_AS(attn::backward(q, N, attn::dot, g2, gs, gq, gn,
                                   {.mask = keep_none, .if_all_masked = attn::all_masked_policy::throw_error}),
                    attn::domain_error);
  REQUIRE(gn(0, 0) == 7.0);
}

// ---------------------------------------------------------------------------------------------
// E7: the blame reaches every note in one hop
// ---------------------------------------------------------------------------------------------

TEST_CASE("E7: dc/dh_tea on E1's numbers", "[derivatives][E7]") {
  const Vector<double, 3> q{0, 0.5, 2};
  const Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};  // I, drink, tea
  // independently: α = softmax(q·h) with std::exp, c = Σ α_j h_j = α, J = α_tea (I + (h_tea − c) qᵀ)
  const double e[3] = {std::exp(0.0), std::exp(0.5), std::exp(2.0)};
  const double sum = e[0] + e[1] + e[2];
  const double alpha[3] = {e[0] / sum, e[1] / sum, e[2] / sum};
  const double h_minus_c[3] = {-alpha[0], -alpha[1], 1 - alpha[2]};
  double expected[3][3];
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t k = 0; k < 3; ++k) expected[i][k] = alpha[2] * ((i == k ? 1.0 : 0.0) + h_minus_c[i] * q[k]);

  const auto J = attn::jacobian_note(q, notes, attn::dot, 2);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t k = 0; k < 3; ++k) REQUIRE_THAT(J(i, k), Catch::Matchers::WithinAbs(expected[i][k], 1e-15));
  // the unit's rounded figures
  const double unit[3][3] = {{0.7361, -0.0367, -0.1467}, {0, 0.6757, -0.2418}, {0, 0.0971, 1.1246}};
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t k = 0; k < 3; ++k) REQUIRE_THAT(J(i, k), Catch::Matchers::WithinAbs(unit[i][k], 5e-5));
  // the α_tea·I part: "tea" gets its blame at 0.736 strength
  REQUIRE_THAT(attn::jacobian_value(q, notes, notes, attn::dot, 2)(0, 0), Catch::Matchers::WithinAbs(0.736, 5e-4));
  // and central differences agree
  const auto f = [&](std::span<const double> x) { return attn::attend(q, with_row(Matrix<double>(notes.view()), 2, x), attn::dot).context; };
  REQUIRE(attn::check_jacobian(f, notes.row(2), J, "h_tea").passed(attn::gradcheck_tolerance<double>()));
  // every note gets blame directly: no Jacobian is zero
  for (std::size_t j = 0; j < 3; ++j) REQUIRE(attn::jacobian_note(q, notes, attn::dot, j)(j, j) > 0.09);
}

// ---------------------------------------------------------------------------------------------
// Masks and all-masked rows
// ---------------------------------------------------------------------------------------------

TEST_CASE("masked notes get exactly zero derivatives, whatever they hold", "[derivatives][mask]") {
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> q{0.4, -0.3};
  const Matrix<double> N{{1, 0.5}, {nan, inf}, {-0.2, 0.8}};  // note 1 is masked and holds garbage
  const bool keep[3] = {true, false, true};
  const attn::options opt{.beta = 1.3, .mask = keep};
  const std::vector<double> g{0.7, -1.1};
  const Matrix<double> W1{{0.5, -0.3}, {0.2, 0.9}};
  const Matrix<double> W2{{1, 0}, {0.3, -0.6}};
  const Vector<double> v{0.8, -1.2};
  const Matrix<double> W{{0.4, 0.1}, {-0.5, 0.7}};
  const auto check = [&](const auto& score) {
    const auto b = attn::backward(q, N, score, g, opt);
    REQUIRE(b.notes(1, 0) == 0.0);
    REQUIRE(b.notes(1, 1) == 0.0);
    REQUIRE(b.scores[1] == 0.0);
    for (std::size_t i = 0; i < 2; ++i) {
      REQUIRE(std::isfinite(b.query[i]));
      REQUIRE(std::isfinite(b.notes(0, i)));
      REQUIRE(std::isfinite(b.notes(2, i)));
    }
    const auto J = attn::jacobian_note(q, N, score, 1, opt);
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t k = 0; k < 2; ++k) REQUIRE(J(i, k) == 0.0);
    const auto Jq = attn::jacobian_query(q, N, score, opt);
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t k = 0; k < 2; ++k) REQUIRE(std::isfinite(Jq(i, k)));
    return b;
  };
  check(attn::dot);
  check(attn::scaled_dot);
  check(neg_sq_distance{});
  const auto bg = check(attn::general<double>(W));
  for (std::size_t i = 0; i < 4; ++i) REQUIRE(std::isfinite(bg.parameters.W.data()[i]));
  const auto ba = check(attn::additive<double>(W1, W2, v));
  REQUIRE(std::isfinite(ba.parameters.v[0]));
  REQUIRE(std::isfinite(ba.parameters.W1(1, 1)));
  // softmax: a masked entry's row and column are zero; g there may be anything
  const std::vector<double> s{0.5, 2.0, -1.0};
  const auto Js = attn::softmax_jacobian(s, opt);
  for (std::size_t i = 0; i < 3; ++i) REQUIRE((Js(1, i) == 0.0 && Js(i, 1) == 0.0));
  const auto vjp = attn::softmax_vjp(s, std::vector<double>{1.0, nan, -2.0}, opt);
  REQUIRE(vjp[1] == 0.0);
  REQUIRE(std::isfinite(vjp[0]));
}

TEST_CASE("all-masked rows: zeros gives zero gradients, uniform the mean's, nan gives NaN",
          "[derivatives][mask]") {
  const std::vector<double> q{0.4, -0.3};
  const Matrix<double> N{{1, 0.5}, {0.3, -0.7}, {-0.2, 0.8}};
  const bool none[3] = {false, false, false};
  const std::vector<double> g{0.7, -1.1};
  const Matrix<double> W{{0.4, 0.1}, {-0.5, 0.7}};
  const attn::general<double> gen(W);

  SECTION("zeros: every derivative is 0, nothing NaN") {
    const attn::options opt{.beta = 2, .mask = none};
    const auto b = attn::backward(q, N, gen, g, opt);
    for (std::size_t j = 0; j < 3; ++j) {
      REQUIRE(b.scores[j] == 0.0);
      for (std::size_t i = 0; i < 2; ++i) REQUIRE(b.notes(j, i) == 0.0);
    }
    REQUIRE((b.query[0] == 0.0 && b.query[1] == 0.0));
    REQUIRE(b.parameters.W(1, 1) == 0.0);
    const auto J = attn::jacobian_note(q, N, gen, 0, opt);
    REQUIRE((J(0, 0) == 0.0 && J(1, 0) == 0.0));
    REQUIRE(attn::softmax_jacobian(std::vector<double>{1, 2, 3}, opt)(0, 0) == 0.0);
    REQUIRE(attn::softmax_vjp(std::vector<double>{1, 2, 3}, std::vector<double>{1, 2, 3}, opt)[2] == 0.0);
    // a zeros row inside align leaves the other rows' gradients as they were
    const Matrix<double> Qs{{0.4, -0.3}, {0.1, 0.9}};
    const Matrix<double> G{{0.7, -1.1}, {0.2, 0.3}};
    const auto ab = attn::align_backward(Qs, N, gen, G, opt);
    for (std::size_t i = 0; i < ab.notes.size(); ++i) REQUIRE(ab.notes.data()[i] == 0.0);
  }
  SECTION("uniform: c is the mean of the values, so dc/dv_j = I/n and nothing reaches scores, q or W") {
    const attn::options opt{.beta = 2, .mask = none, .if_all_masked = attn::all_masked_policy::uniform};
    const auto b = attn::backward(q, N, gen, g, opt);
    for (std::size_t j = 0; j < 3; ++j) {
      REQUIRE(b.scores[j] == 0.0);
      for (std::size_t i = 0; i < 2; ++i) REQUIRE_THAT(b.notes(j, i), Catch::Matchers::WithinRel(g[i] / 3, 1e-15));
    }
    REQUIRE((b.query[0] == 0.0 && b.parameters.W(0, 0) == 0.0));
    const auto J = attn::jacobian_note(q, N, gen, 1, opt);
    REQUIRE_THAT(J(0, 0), Catch::Matchers::WithinRel(1.0 / 3, 1e-15));
    REQUIRE(J(0, 1) == 0.0);
    // central differences agree: the context is the plain mean
    const auto f = [&](std::span<const double> x) { return attn::attend(q, with_row(N, 1, x), gen, opt).context; };
    REQUIRE(attn::check_jacobian(f, N.row(1), J).passed(attn::gradcheck_tolerance<double>()));
    const auto fq = [&](std::span<const double> x) { return attn::attend(x, N, gen, opt).context; };
    REQUIRE(attn::check_jacobian(fq, q, attn::jacobian_query(q, N, gen, opt)).max_abs_error == 0.0);
  }
  SECTION("nan: NaN is the answer") {
    const attn::options opt{.mask = none, .if_all_masked = attn::all_masked_policy::nan};
    const auto b = attn::backward(q, N, gen, g, opt);
    REQUIRE(std::isnan(b.notes(0, 0)));
    REQUIRE(std::isnan(attn::jacobian_note(q, N, gen, 0, opt)(0, 0)));
  }
  SECTION("every score -inf, or one +inf: the weights are fixed, so only the values get gradient") {
    constexpr double inf = std::numeric_limits<double>::infinity();
    const std::vector<double> s{1.0, inf, 2.0};
    const auto Js = attn::softmax_jacobian(s);
    for (std::size_t i = 0; i < 9; ++i) REQUIRE(Js.data()[i] == 0.0);
    REQUIRE(attn::softmax_vjp(s, std::vector<double>{1, 2, 3})[1] == 0.0);
  }
}

TEST_CASE("a weight close to 1 keeps its derivative's relative accuracy", "[derivatives]") {
  // α = softmax(0, 40): α_0 = e^-40/(1 + e^-40) ≈ 4.2e-18 and α_1 rounds to 1, yet
  // ∂α_1/∂s_1 = β α_0 α_1 is computed from Σ_{k≠1} α_k, not from 1 − α_1 (which is 0).
  const std::vector<double> s{0.0, 40.0};
  const double a0 = std::exp(-40.0) / (1 + std::exp(-40.0)), a1 = 1 / (1 + std::exp(-40.0));
  const auto J = attn::softmax_jacobian(s, {.beta = 1.0});
  REQUIRE_THAT(J(1, 1), Catch::Matchers::WithinRel(a0 * a1, 1e-14));
  REQUIRE_THAT(J(0, 0), Catch::Matchers::WithinRel(a0 * a1, 1e-14));
  const auto v = attn::softmax_vjp(s, std::vector<double>{1.0, 3.0});  // β α_1 (g_1 − ⟨g, α⟩) = 2 α_0 α_1
  REQUIRE_THAT(v[1], Catch::Matchers::WithinRel(2 * a0 * a1, 1e-14));
  // and through attention: ∂L/∂s of the dominant note
  const Vector<double, 2> q{0, 40};
  const Matrix<double, 2, 2> N{{1, 0}, {0, 1}};
  const auto b = attn::backward(q, N, attn::dot, Vector<double, 2>{1, 3});
  REQUIRE_THAT(b.scores[1], Catch::Matchers::WithinRel(2 * a0 * a1, 1e-14));
}

TEST_CASE("backward through a user's score at dynamic sizes above the inline scratch", "[derivatives]") {
  rng_t rng(7);
  const std::size_t d = 150;  // above the 128 numbers of inline scratch: the heap fallback
  const Vector<double> q = random_vector<double>(rng, d, 0.2);
  const Matrix<double> N = random_matrix<double>(rng, 3, d, 0.2);
  const Vector<double> g = random_vector<double>(rng, d, 1.0);
  const weighted_dot<double> s{std::vector<double>(d, 0.5)};
  const auto b = attn::backward(q, N, s, g, {.beta = 0.8});
  const auto fq = [&](std::span<const double> x) { return attn::attend(x, N, s, {.beta = 0.8}).context; };
  REQUIRE(attn::check_vjp(fq, q, g, b.query, "q").passed(attn::gradcheck_tolerance<double>()));
  const auto Jq = attn::jacobian_query(q, N, s, {.beta = 0.8});
  REQUIRE(attn::compare_vjp(Jq, g, b.query, "q").passed(attn::vjp_tolerance<double>()));
}

// ---------------------------------------------------------------------------------------------
// docs/derivatives.md: each example there is one of these test cases, verbatim
// ---------------------------------------------------------------------------------------------

TEST_CASE("docs/derivatives.md: the Jacobian of a note", "[derivatives][docs]") {
  // ∂c/∂h_j = α_j (I + β (h_j − c) g_jᵀ); for dot, g_j = q
  const attn::Vector<double, 3> q{0, 0.5, 2};
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Matrix<double, 3, 3> J = attn::jacobian_note(q, notes, attn::dot, 2);  // "tea"
  // J(0, 0) = α_tea (1 + (0 − α_I)·0) = 0.7361
  REQUIRE_THAT(J(0, 0), Catch::Matchers::WithinAbs(0.7361, 5e-5));
}

TEST_CASE("docs/derivatives.md: keys and values apart", "[derivatives][docs]") {
  // ∂c/∂k_j = β α_j (v_j − c) g_jᵀ and ∂c/∂v_j = α_j I
  const attn::Vector<double, 2> q{1, -1};
  const attn::Matrix<double, 2, 2> keys{{1, 0}, {0, 1}};
  const attn::Matrix<double, 2, 3> values{{1, 2, 3}, {0, 0, 0}};
  const attn::options opt{.beta = 2};
  const auto Jk = attn::jacobian_key(q, keys, values, attn::dot, 0, opt);    // 3×2
  const auto Jv = attn::jacobian_value(q, keys, values, attn::dot, 0, opt);  // 3×3
  // s = (1, −1), α_0 = 1/(1 + e^−4); v_0 − c = (1 − α_0)·(1, 2, 3); g_0 = q
  const double a0 = 1 / (1 + std::exp(-4.0));
  REQUIRE_THAT(Jk(2, 0), Catch::Matchers::WithinRel(2 * a0 * (1 - a0) * 3 * 1, 1e-12));
  REQUIRE_THAT(Jv(1, 1), Catch::Matchers::WithinRel(a0, 1e-15));
}

TEST_CASE("docs/derivatives.md: the Jacobian of the query", "[derivatives][docs]") {
  // ∂c/∂q = β Σ_j α_j (v_j − c)(∂s_j/∂q)ᵀ; for general, ∂s_j/∂q = W h_j
  const attn::Matrix<double, 2, 3> W{{1, 0, 0}, {0, 1, 0}};
  const attn::general score(W);
  const attn::Vector<double, 2> q{0.5, -0.5};
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const auto Jq = attn::jacobian_query(q, notes, score, {.beta = 1.5});  // 3×2
  // the third note's score does not depend on q (W h_3 = 0), the first two do
  const auto a = attn::attend(q, notes, score, {.beta = 1.5}).weights;
  REQUIRE_THAT(Jq(0, 0), Catch::Matchers::WithinRel(1.5 * a[0] * (1 - a[0]), 1e-12));
}

TEST_CASE("docs/derivatives.md: the softmax Jacobian and its product", "[derivatives][docs]") {
  // ∂α/∂s = β (diag α − α αᵀ); ∂L/∂s = β α ⊙ (g − ⟨g, α⟩)
  const std::vector<double> s{0, 0.5, 2};
  const bool keep[3] = {true, false, true};
  const attn::options opt{.beta = 2, .mask = keep};
  const attn::Matrix<double> J = attn::softmax_jacobian(s, opt);  // row 1 and column 1 are 0
  const attn::Vector<double> v = attn::softmax_vjp(s, std::vector<double>{1, 5, 0}, opt);
  const double a0 = 1 / (1 + std::exp(4.0));
  REQUIRE_THAT(J(0, 2), Catch::Matchers::WithinRel(-2 * a0 * (1 - a0), 1e-12));
  REQUIRE(J(1, 1) == 0);
  REQUIRE_THAT(v[0], Catch::Matchers::WithinRel(2 * a0 * (1 - a0), 1e-12));  // g − ⟨g,α⟩ = 1 − α_0
}

TEST_CASE("docs/derivatives.md: backward for training", "[derivatives][docs]") {
  // From g = ∂L/∂c: ∂L/∂q, ∂L/∂h_j and ∂L/∂W at O(n·d + d_q·d_h), no Jacobian formed
  const attn::Matrix<double, 2, 3> W{{0.5, -0.2, 0.1}, {0.3, 0.8, -0.7}};
  const attn::general score(W);
  const attn::Vector<double, 2> q{0.6, -0.4};
  const attn::Matrix<double, 4, 3> notes{{1, 0.2, -0.4}, {0.1, 0.9, 0.3}, {-0.5, 0.4, 1.1}, {0.7, -0.6, 0.2}};
  const attn::Vector<double, 3> g{1, -0.5, 0.25};  // ∂L/∂c
  const auto grads = attn::backward(q, notes, score, g, {.beta = 2});
  // grads.scores (4), grads.query (2), grads.notes (4×3), grads.parameters.W (2×3)
  // Jᵀg from the Jacobians gives the same numbers:
  const auto Jq = attn::jacobian_query(q, notes, score, {.beta = 2});
  REQUIRE(attn::compare_vjp(Jq, g, grads.query).passed(attn::vjp_tolerance<double>()));
  // and so do central differences of L(W) = ⟨g, c(W)⟩:
  const auto L = [&](std::span<const double> w) {
    const attn::Matrix<double> W2(attn::MatrixView<const double>(w.data(), 2, 3));
    return attn::attend(q, notes, attn::general(W2), {.beta = 2}).context;
  };
  const std::vector<double> w(W.data(), W.data() + 6);
  const std::vector<double> dW(grads.parameters.W.data(), grads.parameters.W.data() + 6);
  REQUIRE(attn::check_vjp(L, w, g, dW, "W").passed(attn::gradcheck_tolerance<double>()));
}

TEST_CASE("docs/derivatives.md: backward into caller buffers", "[derivatives][docs]") {
  // no allocation: every output is the caller's; parameter gradients accumulate over a batch
  const attn::Matrix<double> W1{{1, 0}, {0, 1}}, W2{{1, 0}, {0, 1}};
  const attn::Vector<double> v{1, 1};
  const attn::additive score(W1, W2, v);  // E5's score
  const attn::Matrix<double> notes{{1, 0}, {0, 1}, {1, 1}};
  const attn::Matrix<double> batch{{0.5, -0.5}, {0.1, 0.2}};  // two queries
  std::vector<double> g{1, 0};
  std::vector<double> dscores(3), dq(2);
  attn::Matrix<double> dnotes(3, 2), dW1(2, 2), dW2(2, 2);
  attn::Vector<double> dv(2);
  const attn::additive<double>::gradient_view dtheta{dW1.view(), dW2.view(), dv};
  for (std::size_t t = 0; t < batch.rows(); ++t)
    attn::backward(batch.row(t), notes, score, g, dscores, dq, dnotes.view(), dtheta);
  // dW1, dW2, dv now hold the sum over the batch; dq and dnotes the last query's
  const auto one = attn::backward(batch.row(0), notes, score, g);
  const auto two = attn::backward(batch.row(1), notes, score, g);
  REQUIRE_THAT(dv[0], Catch::Matchers::WithinRel(one.parameters.v[0] + two.parameters.v[0], 1e-14));
  REQUIRE(dq[1] == two.query[1]);
}

TEST_CASE("docs/derivatives.md: many queries", "[derivatives][docs]") {
  // align_backward: ∂L/∂C (T×d_v) → ∂L/∂Q (T×d_q), ∂L/∂H summed over the queries
  const attn::Matrix<double, 2, 3> queries{{0, 0.5, 2}, {2, 0, 0}};
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Matrix<double, 2, 3> dC{{0, 0, 1}, {1, 0, 0}};
  const auto grads = attn::align_backward(queries, notes, attn::dot, dC);
  const auto row0 = attn::backward(queries.row(0), notes, attn::dot, dC.row(0));
  const auto row1 = attn::backward(queries.row(1), notes, attn::dot, dC.row(1));
  REQUIRE(grads.queries(0, 2) == row0.query[2]);
  REQUIRE_THAT(grads.notes(2, 2), Catch::Matchers::WithinRel(row0.notes(2, 2) + row1.notes(2, 2), 1e-14));
}

TEST_CASE("docs/derivatives.md: checking a derivative", "[derivatives][docs]") {
  // any function from a vector to a vector, any analytic Jacobian or backward
  const attn::Vector<double, 3> q{0, 0.5, 2};
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const auto f = [&](std::span<const double> x) {  // c as a function of q
    return attn::attend(x, notes, attn::dot, {.beta = 2}).context;
  };
  const auto J = attn::jacobian_query(q, notes, attn::dot, {.beta = 2});
  const attn::gradcheck_report<double> r = attn::check_jacobian(f, q, J, "q");
  // r.max_abs_error, r.max_rel_error, r.worst_rel.{input, output, index}
  REQUIRE(r.passed(attn::gradcheck_tolerance<double>()));  // 1e-7 in double
  REQUIRE(r.worst_rel.input == "q");
}
