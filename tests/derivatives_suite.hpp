// The harness shared by the derivative tests: the scores under test (dot, scaled_dot, general,
// additive and two user-defined ones), random problems of several sizes and scales, and
// run_suite, which checks every Jacobian and backward against finite differences and every
// Jacobian against its backward. Split from the tests so that the per-type suites compile in
// parallel (tests/test_derivatives*.cpp).
#pragma once

#include <algorithm>
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
  std::function<Vector<T>(vec_in<T> q, mat_in<T> K, mat_in<T> V, const attn::options&)> scores, weights;
  std::function<Matrix<T>(vec_in<T> q, mat_in<T> N, std::size_t j, const attn::options&)> jacobian_note;
  std::function<Matrix<T>(vec_in<T> q, mat_in<T> K, mat_in<T> V, std::size_t j, const attn::options&)> jacobian_key,
      jacobian_value;
  std::function<Matrix<T>(vec_in<T> q, mat_in<T> K, mat_in<T> V, const attn::options&)> jacobian_query;
  std::function<Matrix<T>(vec_in<T> q, mat_in<T> N, const attn::options&)> jacobian_query_notes;
  std::function<grads<T>(vec_in<T> q, mat_in<T> N, vec_in<T> g, const attn::options&)> backward_notes;
  std::function<grads<T>(vec_in<T> q, mat_in<T> K, mat_in<T> V, vec_in<T> g, const attn::options&)> backward;
  // backward_from_weights, given the weights a
  std::function<grads<T>(vec_in<T> q, mat_in<T> N, vec_in<T> a, vec_in<T> g, const attn::options&)>
      backward_notes_from_weights;
  std::function<grads<T>(vec_in<T> q, mat_in<T> K, mat_in<T> V, vec_in<T> a, vec_in<T> g, const attn::options&)>
      backward_from_weights;
  // backward_from_forward, given the weights a and the context c
  std::function<grads<T>(vec_in<T> q, mat_in<T> N, vec_in<T> a, vec_in<T> c, vec_in<T> g, const attn::options&)>
      backward_notes_from_forward;
  std::function<grads<T>(vec_in<T> q, mat_in<T> K, mat_in<T> V, vec_in<T> a, vec_in<T> c, vec_in<T> g,
                         const attn::options&)>
      backward_from_forward;
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
  e.weights = [cs, sc](vec_in<T> q, mat_in<T> K, mat_in<T> V, const options& o) {
    return attn::attend(q, K, V, sc, o).weights;
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
  e.backward_notes_from_weights = [cs, sc](vec_in<T> q, mat_in<T> N, vec_in<T> a, vec_in<T> g, const options& o) {
    const auto b = attn::backward_from_weights(q, N, sc, a, g, o);
    return grads<T>{row_matrix<T>(b.scores), row_matrix<T>(b.query), b.notes, Matrix<T>(),
                    cs->flat_gradient(b.parameters)};
  };
  e.backward_from_weights = [cs, sc](vec_in<T> q, mat_in<T> K, mat_in<T> V, vec_in<T> a, vec_in<T> g,
                                     const options& o) {
    const auto b = attn::backward_from_weights(q, K, V, sc, a, g, o);
    return grads<T>{row_matrix<T>(b.scores), row_matrix<T>(b.query), b.keys, b.values,
                    cs->flat_gradient(b.parameters)};
  };
  e.backward_notes_from_forward = [cs, sc](vec_in<T> q, mat_in<T> N, vec_in<T> a, vec_in<T> c, vec_in<T> g,
                                           const options& o) {
    const auto b = attn::backward_from_forward(q, N, sc, a, c, g, o);
    return grads<T>{row_matrix<T>(b.scores), row_matrix<T>(b.query), b.notes, Matrix<T>(),
                    cs->flat_gradient(b.parameters)};
  };
  e.backward_from_forward = [cs, sc](vec_in<T> q, mat_in<T> K, mat_in<T> V, vec_in<T> a, vec_in<T> c,
                                     vec_in<T> g, const options& o) {
    const auto b = attn::backward_from_forward(q, K, V, sc, a, c, g, o);
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

/// The same numbers, bit for bit: equal with the same sign (so 0 ≠ −0), or both NaN (of any
/// payload). Compared as values, since long double's padding bytes hold anything.
template <class T>
bool same_bits(std::span<const T> a, std::span<const T> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool same = a[i] == b[i] && std::signbit(a[i]) == std::signbit(b[i]);
    if (!same && !(a[i] != a[i] && b[i] != b[i])) return false;
  }
  return true;
}
template <class T>
bool same_bits(const Matrix<T>& a, const Matrix<T>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         same_bits<T>(std::span<const T>(a.data(), a.rows() * a.cols()),
                      std::span<const T>(b.data(), b.rows() * b.cols()));
}
template <class T>
bool same_bits(const grads<T>& a, const grads<T>& b) {
  return same_bits(a.scores, b.scores) && same_bits(a.queries, b.queries) && same_bits(a.keys, b.keys) &&
         same_bits(a.values, b.values) && same_bits<T>(a.theta, b.theta);
}

/// backward_from_weights: given the softmax backward forms (attn::softmax of attend's scores)
/// it gives backward's numbers to the bit; given attend's own weights, central differences of
/// c agree with it (∂L/∂q, ∂L/∂s and ∂L/∂θ; the note rows equal backward's to the bit or are
/// checked by the first part).
template <class T>
void check_from_weights(tally<T>& t, const erased_score<T>& sc, const Vector<T>& q, const Matrix<T>& K,
                        const Matrix<T>* V, const Vector<T>& g, const grads<T>& b, const attn::options& opt) {
  const Matrix<T>& Vs = V != nullptr ? *V : K;
  const auto call = [&](const Vector<T>& a) {
    return V != nullptr ? sc.backward_from_weights(q, K, *V, a, g, opt) : sc.backward_notes_from_weights(q, K, a, g, opt);
  };
  const Vector<T> alpha = attn::softmax(sc.scores(q, K, Vs, opt), opt);
  REQUIRE(same_bits(call(alpha), b));
  const grads<T> bf = call(sc.weights(q, K, Vs, opt));
  const vec_in<T> th = attn::as_span(sc.theta);
  const fn<T> fq = [&](std::span<const T> x) { return sc.context(th, x, K, Vs, opt); };
  t.fd_check(attn::check_vjp(fq, q, g, bf.queries.row(0), "from weights dL/dq"));
  const fn<T> fs = [&](std::span<const T> x) { return context_of_scores(x, Vs, opt); };
  t.fd_check(attn::check_vjp(fs, sc.scores(q, K, Vs, opt), g, bf.scores.row(0), "from weights dL/ds"));
  const fn<T> fk = [&](std::span<const T> x) {
    const Matrix<T> K2 = unflat(x, K.rows(), K.cols());
    return sc.context(th, q, K2, V != nullptr ? *V : K2, opt);
  };
  t.fd_check(attn::check_vjp(fk, flat(K), g, flat(bf.keys), V != nullptr ? "from weights dL/dK" : "from weights dL/dH"));
  if (V != nullptr) {
    const fn<T> fv = [&](std::span<const T> x) { return sc.context(th, q, K, unflat(x, V->rows(), V->cols()), opt); };
    t.fd_check(attn::check_vjp(fv, flat(*V), g, flat(bf.values), "from weights dL/dV"));
  }
  if (th.size() != 0) {
    const fn<T> fth = [&](std::span<const T> x) { return sc.context(x, q, K, Vs, opt); };
    t.fd_check(attn::check_vjp(fth, th, g, bf.theta, "from weights dL/dtheta"));
  }
  // backward_from_forward, given attend's weights and context: central differences again (one
  // pass where no weight is above 1/2; else backward_from_weights's numbers, to the bit)
  const Vector<T> a = sc.weights(q, K, Vs, opt), c = sc.context(th, q, K, Vs, opt);
  const grads<T> ff = V != nullptr ? sc.backward_from_forward(q, K, *V, a, c, g, opt)
                                   : sc.backward_notes_from_forward(q, K, a, c, g, opt);
  if (attn::detail::dominant_weight(a.data(), a.size()) < a.size()) REQUIRE(same_bits(ff, bf));
  t.fd_check(attn::check_vjp(fq, q, g, ff.queries.row(0), "from forward dL/dq"));
  t.fd_check(attn::check_vjp(fs, sc.scores(q, K, Vs, opt), g, ff.scores.row(0), "from forward dL/ds"));
  t.fd_check(attn::check_vjp(fk, flat(K), g, flat(ff.keys), V != nullptr ? "from forward dL/dK" : "from forward dL/dH"));
  if (V != nullptr) {
    const fn<T> fv = [&](std::span<const T> x) { return sc.context(th, q, K, unflat(x, V->rows(), V->cols()), opt); };
    t.fd_check(attn::check_vjp(fv, flat(*V), g, flat(ff.values), "from forward dL/dV"));
  }
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
  check_from_weights<T>(t, sc, q, N, nullptr, g, b, opt);
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
  check_from_weights<T>(t, sc, q, K, &V, g, b, opt);
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
  Matrix<T> sumK(K.rows(), K.cols()), sumV(V.rows(), V.cols()), absK(K.rows(), K.cols()),
      absV(V.rows(), V.cols());
  for (std::size_t r = 0; r < Qs.rows(); ++r) {
    const grads<T> b = sc.backward(Qs.row(r), K, V, G.row(r), opt);
    for (std::size_t i = 0; i < Qs.cols(); ++i) REQUIRE(b.queries(0, i) == ab.queries(r, i));
    for (std::size_t j = 0; j < K.rows(); ++j) {
      REQUIRE(b.scores(0, j) == ab.scores(r, j));
      for (std::size_t i = 0; i < K.cols(); ++i) {
        sumK(j, i) += b.keys(j, i);
        absK(j, i) += std::fabs(b.keys(j, i));
      }
      for (std::size_t i = 0; i < V.cols(); ++i) {
        sumV(j, i) += b.values(j, i);
        absV(j, i) += std::fabs(b.values(j, i));
      }
    }
  }
  const T eps = std::numeric_limits<T>::epsilon();
  // Where the build fuses multiply-adds (attn_test::fma_contracted), the parts themselves are
  // rounded differently in the batch and in the one-query calls (a fused a·b + c keeps a·b's
  // rounding error), and a part formed by cancellation (α_j·(u_j − ū)·…) is then accurate
  // only relative to the terms that cancelled: the bound becomes normwise, relative to the
  // largest entry's parts.
  const bool fused = attn_test::fma_contracted();
  T scaleK = 0, scaleV = 0;
  for (std::size_t j = 0; j < K.rows(); ++j) {
    for (std::size_t i = 0; i < K.cols(); ++i) scaleK = std::max(scaleK, absK(j, i));
    for (std::size_t i = 0; i < V.cols(); ++i) scaleV = std::max(scaleV, absV(j, i));
  }
  for (std::size_t j = 0; j < K.rows(); ++j) {
    for (std::size_t i = 0; i < K.cols(); ++i)
      REQUIRE(std::fabs(sumK(j, i) - ab.keys(j, i)) <= 16 * eps * (fused ? scaleK : absK(j, i)));
    // the value gradients add in the same order: exactly, unless the build fuses
    for (std::size_t i = 0; i < V.cols(); ++i) {
      if (fused) {
        REQUIRE(std::fabs(sumV(j, i) - ab.values(j, i)) <= 16 * eps * scaleV);
      } else {
        REQUIRE(sumV(j, i) == ab.values(j, i));
      }
    }
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

/// One random backward case for keys ≠ values: q and the n keys scaled by `scale`, n values
/// of d_v numbers, g = ∂L/∂c (d_v) and gd (d, for notes that are keys and values), a random
/// mask when `masked`, and the options with β and that mask (pointing into `mask`).
template <class T>
struct random_backward_case {
  Vector<T> q;
  Matrix<T> K, V;
  Vector<T> g, gd;
  std::unique_ptr<bool[]> mask;
  attn::options opt;
};

template <class T>
random_backward_case<T> make_backward_case(rng_t& rng, std::size_t n, std::size_t d, std::size_t dv, bool masked,
                                           double beta, T scale) {
  random_backward_case<T> c;
  c.q = random_vector<T>(rng, d, scale);
  c.K = random_matrix<T>(rng, n, d, scale);
  c.V = random_matrix<T>(rng, n, dv, T(1));
  c.g = random_vector<T>(rng, dv, T(1));
  c.gd = random_vector<T>(rng, d, T(1));
  const std::vector<char> keep = masked ? random_mask(rng, n) : std::vector<char>(n, 1);
  c.mask = std::make_unique<bool[]>(n);
  for (std::size_t j = 0; j < n; ++j) c.mask[j] = keep[j] != 0;
  c.opt = attn::options{.beta = beta};
  if (masked) c.opt.mask = std::span<const bool>(c.mask.get(), n);
  return c;
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

// The "[derivatives-report]" table: one row per score with the worst relative errors at type T.
inline void print_agreement_header() {
  std::printf("%-18s %-12s %-26s %-26s\n", "score", "type", "finite differences (tol)", "Jt g vs backward (tol)");
}
template <class T>
void print_agreement(const char* type) {
  const double tol_fd = static_cast<double>(attn::gradcheck_tolerance<T>());
  const double tol_vjp = static_cast<double>(attn::vjp_tolerance<T>());
  const auto row = [&](const char* score, const auto& t) {
    std::printf("%-18s %-12s %9.2e (%8.2e)      %9.2e (%8.2e)   worst at %s[%zu,%zu] / %s[%zu]\n", score, type,
                static_cast<double>(t.fd.max_rel_error), tol_fd, static_cast<double>(t.vjp.max_rel_error), tol_vjp,
                t.fd.worst_rel.input.c_str(), t.fd.worst_rel.output, t.fd.worst_rel.index,
                t.vjp.worst_rel.input.c_str(), t.vjp.worst_rel.index);
  };
  row("dot", run_suite<T>(maker<T, dot_case>(), true));
  row("scaled_dot", run_suite<T>(maker<T, scaled_dot_case>(), true));
  row("general", run_suite<T>(maker<T, general_case>(), false));
  row("additive", run_suite<T>(maker<T, additive_case>(), false));
  row("user distance", run_suite<T>(maker<T, distance_case>(), true));
  row("user weighted_dot", run_suite<T>(maker<T, weighted_dot_case>(), true));
}

}  // namespace
