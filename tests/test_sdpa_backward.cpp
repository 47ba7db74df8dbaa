// The backward of scaled_dot_product_attention (attn/sdpa_backward.hpp) and the Jacobians of one
// query row (attn/jacobian.hpp): against central finite differences (the public checker), against
// each other (Jᵀg = VJP) and against align_backward (the exact rules row by row), in float,
// double and long double, over key, row and causal masks, T ≠ n, and every all-masked policy.
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "attn/attn.hpp"
#include "attn/gradcheck.hpp"
#include "attn_catch.hpp"

using attn::Matrix;
using attn::MatrixView;

namespace {

template <class T>
Matrix<T> random_matrix(std::size_t r, std::size_t c, std::mt19937_64& rng, double scale = 1) {
  std::normal_distribution<double> normal(0, scale);
  Matrix<T> m(r, c);
  for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(normal(rng));
  return m;
}

template <class T>
std::span<const T> flat(const Matrix<T>& m) {
  return {m.data(), m.size()};
}

// The problem: Q (T × d), K (n × d), V (n × dv), the masks of case `masks`, and dY.
template <class T>
struct problem {
  Matrix<T> Q, K, V, dY;
  std::vector<char> keys, rows;
  attn::options opt;
};

template <class T>
problem<T> make_problem(std::size_t tq, std::size_t n, std::size_t d, std::size_t dv, int masks,
                        std::mt19937_64& rng) {
  problem<T> p{random_matrix<T>(tq, d, rng), random_matrix<T>(n, d, rng), random_matrix<T>(n, dv, rng),
               random_matrix<T>(tq, dv, rng), std::vector<char>(n, 1), std::vector<char>(tq * n, 1), {}};
  p.opt.beta = 1.4;
  p.keys[n / 2] = 0;
  for (std::size_t t = 0; t < tq; ++t) p.rows[t * n + (t + 1) % n] = 0;
  if (masks & 1) p.opt.mask = p.keys;
  if (masks & 2) p.opt.row_mask = attn::mask_matrix_view(p.rows, tq, n);
  if (masks & 4) p.opt.causal = true;
  return p;
}

// Each gradient against central differences of ⟨dY, Y(·)⟩.
template <class T>
void check_finite_differences(const problem<T>& p) {
  const auto g = attn::scaled_dot_product_attention_backward(p.Q, p.K, p.V, attn::scaled_dot, {}, p.dY, p.opt);
  const auto forward_with = [&](const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V) {
    const auto r = attn::scaled_dot_product_attention(Q, K, V, p.opt);
    return std::vector<T>(r.out.data(), r.out.data() + r.out.size());
  };
  const auto replaced = [](const Matrix<T>& m, std::span<const T> x) {
    Matrix<T> c(m.rows(), m.cols());
    for (std::size_t i = 0; i < x.size(); ++i) c.data()[i] = x[i];
    return c;
  };
  const T tol = attn::gradcheck_tolerance<T>();
  CHECK(attn::check_vjp([&](std::span<const T> x) { return forward_with(replaced(p.Q, x), p.K, p.V); },
                        flat(p.Q), flat(p.dY), flat(g.queries), "Q")
            .passed(tol));
  CHECK(attn::check_vjp([&](std::span<const T> x) { return forward_with(p.Q, replaced(p.K, x), p.V); },
                        flat(p.K), flat(p.dY), flat(g.keys), "K")
            .passed(tol));
  CHECK(attn::check_vjp([&](std::span<const T> x) { return forward_with(p.Q, p.K, replaced(p.V, x)); },
                        flat(p.V), flat(p.dY), flat(g.values), "V")
            .passed(tol));
}

// Row t's Jacobians against the backward of a dY that is g in row t and 0 elsewhere.
template <class T>
void check_jacobians_against_backward(const problem<T>& p, std::size_t t) {
  const std::size_t tq = p.Q.rows(), n = p.K.rows(), d = p.K.cols(), dv = p.V.cols();
  Matrix<T> dY(tq, dv);
  for (std::size_t i = 0; i < dv; ++i) dY(t, i) = p.dY(t, i);
  const auto b = attn::scaled_dot_product_attention_backward(p.Q, p.K, p.V, attn::scaled_dot, {}, dY, p.opt);
  const std::span<const T> g(p.dY.row(t));
  const T tol = attn::vjp_tolerance<T>();
  Matrix<T> Jq(dv, d);
  attn::jacobian_query(p.Q, p.K, p.V, attn::scaled_dot, t, Jq.view(), p.opt);
  CHECK(attn::compare_vjp(Jq, g, std::span<const T>(b.queries.row(t))).passed(tol));
  for (std::size_t j = 0; j < n; ++j) {
    Matrix<T> Jk(dv, d), Jv(dv, dv);
    attn::jacobian_key(p.Q, p.K, p.V, attn::scaled_dot, t, j, Jk.view(), p.opt);
    attn::jacobian_value(p.Q, p.K, p.V, attn::scaled_dot, t, j, Jv.view(), p.opt);
    INFO("t = " << t << ", j = " << j);
    CHECK(attn::compare_vjp(Jk, g, std::span<const T>(b.keys.row(j))).passed(tol));
    CHECK(attn::compare_vjp(Jv, g, std::span<const T>(b.values.row(j))).passed(tol));
  }
}

}  // namespace

TEMPLATE_TEST_CASE("sdpa backward agrees with finite differences and with the Jacobians of each row",
                   "[sdpa][derivatives]", float, double, long double) {
  std::mt19937_64 rng(77);
  for (const auto& [tq, n] : {std::pair<std::size_t, std::size_t>{3, 5}, {5, 3}, {4, 4}, {1, 6}})
    for (int masks = 0; masks < 8; ++masks) {
      INFO("T = " << tq << ", n = " << n << ", masks " << masks);
      const auto p = make_problem<TestType>(tq, n, 4, 3, masks, rng);
      check_finite_differences(p);
      for (std::size_t t = 0; t < tq; ++t) check_jacobians_against_backward(p, t);
    }
}

TEMPLATE_TEST_CASE("sdpa backward from the tiles agrees with align_backward's exact rows", "[sdpa][derivatives]",
                   float, double) {
  std::mt19937_64 rng(5);
  using T = TestType;
  for (const std::size_t tq : {1u, 7u, 70u, 200u, 1600u})  // (200, 1600: past the tiles' row blocks)
    for (const std::size_t n : {1u, 9u, 100u})
      for (int masks = 0; masks < 8; ++masks) {
        const auto p = make_problem<T>(tq, n, 16, 8, masks, rng);
        const auto fw = attn::scaled_dot_product_attention(p.Q, p.K, p.V, p.opt);
        const auto g = attn::scaled_dot_product_attention_backward(p.Q, p.K, p.V, attn::scaled_dot,
                                                                   {fw.out.view(), fw.logsumexp}, p.dY, p.opt);
        const auto r = attn::align_backward(p.Q, p.K, p.V, attn::scaled_dot, p.dY, p.opt);
        // Both are sums of the same terms in other orders, the tiles' ∂L/∂s_tj = β P_tj (dP_tj − D_t)
        // without the dominant weight's form: within 4.5e3 ε of |terms| (vjp_tolerance's scale),
        // measured here against the largest gradient entry.
        const auto close = [](const Matrix<T>& a, const Matrix<T>& b) {
          double top = 0, diff = 0;
          for (std::size_t i = 0; i < a.size(); ++i) {
            top = std::max(top, std::abs(static_cast<double>(b.data()[i])));
            diff = std::max(diff, std::abs(static_cast<double>(a.data()[i]) - static_cast<double>(b.data()[i])));
          }
          return diff <= static_cast<double>(attn::vjp_tolerance<T>()) * std::max(top, 1.0);
        };
        INFO("T = " << tq << ", n = " << n << ", masks " << masks);
        CHECK(close(g.queries, r.queries));
        CHECK(close(g.keys, r.keys));
        CHECK(close(g.values, r.values));
      }
}

TEST_CASE("sdpa backward: accumulate adds, left-out views are left out, all-masked rows follow the policy",
          "[sdpa][derivatives][mask]") {
  std::mt19937_64 rng(8);
  auto p = make_problem<double>(4, 2, 3, 2, 4, rng);  // causal, T > n: rows 0 and 1 see nothing
  for (const auto policy : {attn::all_masked_policy::zeros, attn::all_masked_policy::uniform}) {
    p.opt.if_all_masked = policy;
    const auto once = attn::scaled_dot_product_attention_backward(p.Q, p.K, p.V, attn::scaled_dot, {}, p.dY, p.opt);
    const auto r = attn::align_backward(p.Q, p.K, p.V, attn::scaled_dot, p.dY, p.opt);
    for (std::size_t i = 0; i < once.values.size(); ++i)
      REQUIRE_THAT(once.values.data()[i], Catch::Matchers::WithinAbs(r.values.data()[i], 1e-14));
    for (std::size_t i = 0; i < 3; ++i) REQUIRE(once.queries(0, i) == 0.0);  // no score terms
    Matrix<double> dQ(4, 3, 1.0), dV(2, 2, 1.0);
    attn::scaled_dot_product_attention_backward(p.Q, p.K, p.V, attn::scaled_dot, {}, p.dY,
                                                {.queries = dQ.view(), .values = dV.view(), .accumulate = true}, p.opt);
    for (std::size_t i = 0; i < dV.size(); ++i)
      REQUIRE_THAT(dV.data()[i], Catch::Matchers::WithinAbs(1.0 + once.values.data()[i], 1e-14));
    for (std::size_t i = 0; i < dQ.size(); ++i)
      REQUIRE_THAT(dQ.data()[i], Catch::Matchers::WithinAbs(1.0 + once.queries.data()[i], 1e-14));
  }
  p.opt.if_all_masked = attn::all_masked_policy::nan;
  const auto nan = attn::scaled_dot_product_attention_backward(p.Q, p.K, p.V, attn::scaled_dot, {}, p.dY, p.opt);
  REQUIRE(std::isnan(nan.values(0, 0)));
}

TEST_CASE("sdpa backward: sizes that disagree name the buffer and write nothing", "[sdpa][errors]") {
  const Matrix<double> Q(3, 4, 0.5), K(5, 4, 0.25), V(5, 2, 1.0), dY(3, 2, 1.0), dYbad(2, 2, 1.0);
  Matrix<double> dQ(3, 4, 7.0), dK(5, 4, 7.0), dKbad(4, 4, 7.0);
  REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {}, dYbad,
                                                                  {.queries = dQ.view()}),
                      "attn::scaled_dot_product_attention_backward: dL/dY is 2x2 but should be 3x2");
  REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {}, dY,
                                                                  {.queries = dQ.view(), .keys = dKbad.view()}),
                      "attn::scaled_dot_product_attention_backward: dL/dK is 4x4 but should be 5x4");
  REQUIRE(dQ(0, 0) == 7.0);
  // a gradient over an input, an output over an input: refused, naming both, before any write
  Matrix<double> Qm(3, 4, 0.5), Vm(5, 2, 1.0);
  REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention_backward(Qm, K, V, attn::scaled_dot, {}, dY,
                                                                  {.queries = Qm.view()}),
                      "attn::scaled_dot_product_attention_backward: dL/dQ overlaps the queries");
  REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {}, dY,
                                                                  {.queries = dQ.view(), .keys = dK.view(),
                                                                   .values = MatrixView<double>(dK.data(), 5, 2)}),
                      "attn::scaled_dot_product_attention_backward: dL/dV overlaps dL/dK");
  REQUIRE(Qm(0, 0) == 0.5);
  REQUIRE(dQ(0, 0) == 7.0);
  REQUIRE(dK(0, 0) == 7.0);
  REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention(Q, K, Vm, attn::scaled_dot,
                                                         {.out = MatrixView<double>(Vm.data() + 4, 3, 2)}),
                      "attn::scaled_dot_product_attention: the output overlaps the values");
  REQUIRE(Vm(2, 0) == 1.0);
  Matrix<double> J(2, 4);
  REQUIRE_THROWS_WITH(attn::jacobian_query(Q, K, V, attn::scaled_dot, 3, J.view()),
                      "attn::jacobian_query: query index 3 is out of range for 3 queries");
}

namespace {

// Gradients of the problem p from a saved forward, through the tiled backward.
template <class T>
attn::attention_gradients_result<T> tiled_gradients(const problem<T>& p) {
  const auto fw = attn::scaled_dot_product_attention(p.Q, p.K, p.V, p.opt);
  return attn::scaled_dot_product_attention_backward(p.Q, p.K, p.V, attn::scaled_dot,
                                                     {fw.out.view(), fw.logsumexp}, p.dY, p.opt);
}

// Whether rows [r0, r1) of a and b are finite and agree within vjp_tolerance of the largest entry
// of b (two sums of the same nonzero terms in the same or another order: the tiled kernel's
// rows skip what the clean problem adds as 0, and the garbage problem's forward may take the
// exact rows, whose L_t rounds otherwise).
template <class T>
bool same_rows(const Matrix<T>& a, const Matrix<T>& b, std::size_t r0, std::size_t r1) {
  double top = 1, diff = 0;
  for (std::size_t i = 0; i < b.size(); ++i) top = std::max(top, std::abs(static_cast<double>(b.data()[i])));
  for (std::size_t r = r0; r < r1; ++r)
    for (std::size_t c = 0; c < a.cols(); ++c) {
      if (!std::isfinite(static_cast<double>(a(r, c)))) return false;
      diff = std::max(diff, std::abs(static_cast<double>(a(r, c)) - static_cast<double>(b(r, c))));
    }
  return diff <= static_cast<double>(attn::vjp_tolerance<T>()) * top;
}

}  // namespace

TEMPLATE_TEST_CASE("sdpa backward: a masked position's contents reach no gradient, whatever they hold",
                   "[sdpa][derivatives][mask][errors]", float, double, long double) {
  using T = TestType;
  constexpr T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  std::mt19937_64 rng(28);
  for (const T garbage : {nan, inf, -inf}) {
    for (const auto& [tq, n] : {std::pair<std::size_t, std::size_t>{13, 20}, {70, 140}, {200, 9}}) {
      INFO("T = " << tq << ", n = " << n << ", garbage " << static_cast<double>(garbage));
      // 1. padding keys: K_j and V_j of key-masked keys hold garbage; the gradients are the clean
      // problem's (those keys' rows of dL/dK and dL/dV exactly 0). 2. rows that see no key (a row
      // mask of zeros) hold garbage in Q and dY.
      for (const int kind : {1, 2}) {
        auto clean = make_problem<T>(tq, n, 8, 5, kind, rng);
        if (kind == 1)
          for (std::size_t j = 0; j < n; j += 3) clean.keys[j] = 0;
        else
          for (std::size_t t = 0; t < tq; t += 4)
            for (std::size_t j = 0; j < n; ++j) clean.rows[t * n + j] = 0;
        auto dirty = clean;
        for (auto* p : {&clean, &dirty}) {  // (each problem's masks view its own entries)
          if (kind == 1) p->opt.mask = p->keys;
          if (kind == 2) p->opt.row_mask = attn::mask_matrix_view(p->rows, tq, n);
        }
        for (std::size_t j = 0; kind == 1 && j < n; ++j)
          if (!dirty.keys[j]) {
            for (std::size_t i = 0; i < 8; ++i) dirty.K(j, i) = garbage;
            for (std::size_t i = 0; i < 5; ++i) dirty.V(j, i) = garbage;
          }
        for (std::size_t t = 0; kind == 2 && t < tq; t += 4) {
          for (std::size_t i = 0; i < 8; ++i) dirty.Q(t, i) = garbage;
          for (std::size_t i = 0; i < 5; ++i) dirty.dY(t, i) = garbage;
        }
        INFO("case " << kind);
        const auto want = tiled_gradients(clean), got = tiled_gradients(dirty);
        CHECK(same_rows(got.queries, want.queries, 0, tq));
        CHECK(same_rows(got.keys, want.keys, 0, n));
        CHECK(same_rows(got.values, want.values, 0, n));
        for (std::size_t j = 0; kind == 1 && j < n; ++j)
          if (!dirty.keys[j]) {
            CHECK(got.keys(j, 0) == T(0));
            CHECK(got.values(j, 0) == T(0));
          }
      }
    }
    // 3. causal, T = n: a key past row t's causal limit in t's tile holds garbage (the rows from
    // j on see it, and are NaN or +inf rows by the rules): the rows before j keep their dL/dQ.
    // One row's dY holds garbage: the keys after row u (which u does not see) keep their dL/dK
    // and dL/dV, and every other row its dL/dQ.
    const std::size_t T_ = 40, j = 30, u = 10;
    const auto clean3 = make_problem<T>(T_, T_, 8, 5, 4, rng);
    auto dirty3 = clean3;
    for (std::size_t i = 0; i < 8; ++i) dirty3.K(j, i) = garbage;
    const auto want3 = tiled_gradients(clean3), got3 = tiled_gradients(dirty3);
    INFO("causal, garbage " << static_cast<double>(garbage));
    CHECK(same_rows(got3.queries, want3.queries, 0, j));
    auto clean4 = clean3, dirty4 = clean3;
    for (std::size_t i = 0; i < 5; ++i) {
      clean4.dY(u, i) = 0;
      dirty4.dY(u, i) = garbage;
    }
    const auto want4 = tiled_gradients(clean4), got4 = tiled_gradients(dirty4);
    CHECK(same_rows(got4.keys, want4.keys, u + 1, T_));
    CHECK(same_rows(got4.values, want4.values, u + 1, T_));
    CHECK(same_rows(got4.queries, want4.queries, 0, u));
    CHECK(same_rows(got4.queries, want4.queries, u + 1, T_));
  }
}
