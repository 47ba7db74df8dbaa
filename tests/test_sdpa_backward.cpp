// The backward of scaled_dot_product_attention (attn/sdpa_backward.hpp) and the Jacobians of one
// query row (attn/jacobian.hpp): against central finite differences (the public checker), against
// each other (Jᵀg = VJP) and against align_backward (the exact rules row by row), in float,
// double and long double, over key, row and causal masks, T ≠ n, and every all-masked policy.
#include <algorithm>
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

namespace {

// Row t's key mask as one query sees it: the key mask, row t of the row mask, the causal limit.
template <class T>
std::vector<char> row_mask_of(const problem<T>& p, std::size_t t) {
  const std::size_t tq = p.Q.rows(), n = p.K.rows();
  std::vector<char> m(n, 1);
  for (std::size_t j = 0; j < n; ++j) {
    if (!p.opt.mask.empty() && !p.keys[j]) m[j] = 0;
    if (!p.opt.row_mask.empty() && !p.rows[t * n + j]) m[j] = 0;
    if (p.opt.causal && j + tq > t + n) m[j] = 0;
  }
  return m;
}

// dL/dS of the problem through the views, from a saved forward (or none), with the other
// gradients given or not.
template <class T>
Matrix<T> score_gradient(const problem<T>& p, const attn::saved_attention<T>& saved) {
  Matrix<T> gS(p.Q.rows(), p.K.rows(), T(7));
  attn::scaled_dot_product_attention_backward(p.Q, p.K, p.V, attn::scaled_dot, saved, p.dY,
                                              {.scores = gS.view()}, p.opt);
  return gS;
}

}  // namespace

TEST_CASE("sdpa backward: dL/dS against central differences of softmax(β S, masks) V",
          "[sdpa][derivatives][mask]") {
  // F(S) = Σ_t dY_t · (softmax(β S_t, row t's mask) V), with attn::softmax row by row (another
  // path than the kernel's P = exp(β s − L)); S the forward's own attention_views::scores.
  std::mt19937_64 rng(41);
  for (const auto& shape : {std::pair<std::size_t, std::size_t>{3, 5}, {5, 3}, {4, 4}, {6, 9}})
    for (int masks = 0; masks < 8; ++masks) {
      const std::size_t tq = shape.first, n = shape.second;  // (clang 14: no bindings in lambdas)
      INFO("T = " << tq << ", n = " << n << ", masks " << masks);
      const auto p = make_problem<double>(tq, n, 4, 3, masks, rng);
      Matrix<double> S(tq, n), Y(tq, 3);
      std::vector<double> L(tq);
      attn::scaled_dot_product_attention(p.Q, p.K, p.V, attn::scaled_dot,
                                         {.out = Y.view(), .scores = S.view(), .logsumexp = L}, p.opt);
      const Matrix<double> gS = score_gradient(p, {Y.view(), L});
      double top = 0;  // max_tj |dY_t·V_j|: each derivative of F in S_tj is β^k times a sum of such
      for (std::size_t t = 0; t < tq; ++t)
        for (std::size_t j = 0; j < n; ++j) {
          double u = 0;
          for (std::size_t i = 0; i < 3; ++i) u += p.dY(t, i) * p.V(j, i);
          top = std::max(top, std::abs(u));
        }
      for (std::size_t t = 0; t < tq; ++t) {
        const std::vector<char> m = row_mask_of(p, t);
        attn::options ro;
        ro.beta = p.opt.beta;
        ro.mask = m;
        const auto F = [&](std::size_t j, double s) {  // row t's term of F with S_tj = s
          std::vector<double> row(S.row(t).begin(), S.row(t).end()), w(n);
          row[j] = s;
          attn::softmax(row, w, ro);
          double f = 0;
          for (std::size_t k = 0; k < n; ++k)
            for (std::size_t i = 0; i < 3; ++i) f += p.dY(t, i) * w[k] * p.V(k, i);
          return f;
        };
        const bool sees = std::find(m.begin(), m.end(), char{1}) != m.end();
        for (std::size_t j = 0; j < n; ++j) {
          INFO("t = " << t << ", j = " << j);
          if (!m[j] || !sees) {  // masked, or a row with no key (zeros: the weights do not move)
            REQUIRE(gS(t, j) == 0.0);
            continue;
          }
          // central difference with h = 1e-4: truncation h²/6·|∂³F/∂S³| ≤ h²/6·β³·2·top (the
          // third derivative of a softmax weight is below 1 in size times β³, times dY·(V_j − Y)),
          // rounding 2ε·|terms|/h with |terms| ≤ top; the sum below covers both twice over
          const double h = 1e-4, beta = p.opt.beta;
          const double fd = (F(j, S(t, j) + h) - F(j, S(t, j) - h)) / (2 * h);
          const double tol = 2 * (h * h / 6 * beta * beta * beta * 2 * top +
                                  2 * std::numeric_limits<double>::epsilon() * static_cast<double>(n) * top / h);
          REQUIRE_THAT(gS(t, j), Catch::Matchers::WithinAbs(fd, tol));
        }
      }
    }
}

TEMPLATE_TEST_CASE("sdpa backward: dL/dS is the one-query backward's dL/ds row by row", "[sdpa][derivatives]",
                   float, double) {
  using T = TestType;
  std::mt19937_64 rng(42);
  const bool fused = attn_test::fma_contracted();
  for (const std::size_t tq : {7u, 200u})
    for (const std::size_t n : {9u, 150u})  // (150: past a block of keys in float and double)
      for (int masks = 0; masks < 8; ++masks) {
        INFO("T = " << tq << ", n = " << n << ", masks " << masks);
        const auto p = make_problem<T>(tq, n, 16, 8, masks, rng);
        const auto fw = attn::scaled_dot_product_attention(p.Q, p.K, p.V, p.opt);
        // rows t ≡ 1 (mod 3) with a NaN log-sum-exp: the tiled kernel leaves them to one query's path
        std::vector<T> L(fw.logsumexp.begin(), fw.logsumexp.end());
        for (std::size_t t = 1; t < tq; t += 3) L[t] = std::numeric_limits<T>::quiet_NaN();
        const Matrix<T> tiled = score_gradient(p, {fw.out.view(), fw.logsumexp});
        const Matrix<T> mixed = score_gradient(p, {fw.out.view(), L});
        for (std::size_t t = 0; t < tq; ++t) {
          const std::vector<char> m = row_mask_of(p, t);
          attn::options ro;
          ro.beta = p.opt.beta;
          ro.mask = m;
          const auto one = attn::backward(p.Q.row(t), p.K, p.V, attn::scaled_dot, p.dY.row(t), ro);
          // the tiles' β P_tj (dP_tj − D_t) and one query's β α_j (u_j − ū) (the dominant weight's
          // form): the same terms rounded otherwise, within vjp_tolerance of the row's largest
          double top = 1;
          for (std::size_t j = 0; j < n; ++j) top = std::max(top, std::abs(static_cast<double>(one.scores[j])));
          for (std::size_t j = 0; j < n; ++j) {
            INFO("t = " << t << ", j = " << j);
            if (!m[j]) REQUIRE(tiled(t, j) == T(0));  // masked: exactly 0
            REQUIRE_THAT(static_cast<double>(tiled(t, j)),
                         Catch::Matchers::WithinAbs(static_cast<double>(one.scores[j]),
                                                    static_cast<double>(attn::vjp_tolerance<T>()) * top));
            if (t % 3 == 1 && !fused)  // the exact rows: one query's numbers, copied
              REQUIRE(mixed(t, j) == one.scores[j]);
            else if (t % 3 != 1)  // the other rows: the tiled numbers, whatever rows are left
              REQUIRE(mixed(t, j) == tiled(t, j));
          }
        }
      }
}

TEST_CASE("sdpa backward: dL/dS of rows whose weights do not move, NaN rows, wide keys", "[sdpa][derivatives][mask]") {
  constexpr double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::mt19937_64 rng(43);
  auto p = make_problem<double>(6, 5, 4, 3, 0, rng);
  for (std::size_t j = 0; j < 5; ++j) p.K(j, 0) = 1;  // row 2: every score +inf; row 4: NaN
  p.Q(2, 0) = inf;
  for (std::size_t i = 1; i < 4; ++i) p.Q(2, i) = 0;
  p.Q(4, 1) = nan;
  p.keys[3] = 0;
  p.opt.mask = p.keys;
  const Matrix<double> gS = score_gradient(p, {});
  for (std::size_t j = 0; j < 5; ++j) {
    INFO("j = " << j);
    REQUIRE(gS(2, j) == 0.0);                    // a kept +inf: the weights do not move
    const bool masked = !p.keys[j];              // (keys 2 and 3)
    REQUIRE(std::isnan(gS(4, j)));               // a NaN row: NaN (one query's ∂L/∂s, masked too)
    REQUIRE((gS(0, j) == 0.0) == masked);        // a tiled row: masked 0, the rest not
  }
  // no key kept: 0 under zeros and uniform (nothing moves), NaN under nan
  for (std::size_t j = 0; j < 5; ++j) p.keys[j] = 0;
  for (const auto policy : {attn::all_masked_policy::zeros, attn::all_masked_policy::uniform,
                            attn::all_masked_policy::nan}) {
    p.opt.if_all_masked = policy;
    const Matrix<double> g = score_gradient(p, {});
    for (std::size_t i = 0; i < g.size(); ++i)
      REQUIRE((policy == attn::all_masked_policy::nan ? std::isnan(g.data()[i]) : g.data()[i] == 0.0));
  }
  // d_k above 256: every row takes one query's path, its dL/ds copied
  const auto w = make_problem<double>(3, 5, 260, 3, 3, rng);
  const Matrix<double> gw = score_gradient(w, {});
  for (std::size_t t = 0; t < 3; ++t) {
    const std::vector<char> m = row_mask_of(w, t);
    attn::options ro;
    ro.beta = w.opt.beta;
    ro.mask = m;
    const auto one = attn::backward(w.Q.row(t), w.K, w.V, attn::scaled_dot, w.dY.row(t), ro);
    for (std::size_t j = 0; j < 5; ++j)
      if (!attn_test::fma_contracted()) REQUIRE(gw(t, j) == one.scores[j]);
  }
}

TEST_CASE("sdpa backward: dL/dS accumulates, costs the other gradients no bit, is checked", "[sdpa][derivatives][errors]") {
  std::mt19937_64 rng(44);
  const auto p = make_problem<double>(70, 140, 8, 5, 7, rng);
  const auto once = tiled_gradients(p);
  const auto fw = attn::scaled_dot_product_attention(p.Q, p.K, p.V, p.opt);
  const attn::saved_attention<double> saved{fw.out.view(), fw.logsumexp};
  Matrix<double> dQ(70, 8), dK(140, 8), dV(140, 5), gS(70, 140, 1.0);
  attn::scaled_dot_product_attention_backward(
      p.Q, p.K, p.V, attn::scaled_dot, saved, p.dY,
      {.queries = dQ.view(), .keys = dK.view(), .values = dV.view(), .accumulate = false, .scores = gS.view()},
      p.opt);
  for (std::size_t i = 0; i < dQ.size(); ++i) REQUIRE(dQ.data()[i] == once.queries.data()[i]);
  for (std::size_t i = 0; i < dK.size(); ++i) REQUIRE(dK.data()[i] == once.keys.data()[i]);
  for (std::size_t i = 0; i < dV.size(); ++i) REQUIRE(dV.data()[i] == once.values.data()[i]);
  Matrix<double> acc(70, 140, 1.0);
  attn::scaled_dot_product_attention_backward(p.Q, p.K, p.V, attn::scaled_dot, saved, p.dY,
                                              {.accumulate = true, .scores = acc.view()}, p.opt);
  for (std::size_t i = 0; i < acc.size(); ++i) REQUIRE(acc.data()[i] == 1.0 + gS.data()[i]);
  Matrix<double> bad(70, 139, 7.0);
  REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention_backward(p.Q, p.K, p.V, attn::scaled_dot, saved, p.dY,
                                                                  {.queries = dQ.view(), .scores = bad.view()}, p.opt),
                      "attn::scaled_dot_product_attention_backward: dL/dS is 70x139 but should be 70x140");
  Matrix<double> big(70, 148, 7.0);
  REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention_backward(
                          p.Q, p.K, p.V, attn::scaled_dot, saved, p.dY,
                          {.queries = MatrixView<double>(big.data(), 70, 8),
                           .scores = MatrixView<double>(big.data() + 8, 70, 140, 148)},
                          p.opt),
                      "attn::scaled_dot_product_attention_backward: dL/dS overlaps dL/dQ");
  REQUIRE(big(0, 0) == 7.0);
  REQUIRE(bad(0, 0) == 7.0);
}
