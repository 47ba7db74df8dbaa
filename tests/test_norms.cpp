// LayerNorm and RMSNorm (attn/norms.hpp; the unit's §9, W9): values against the formula written
// out here in long double, the backward against central differences (gradcheck.hpp) and against
// the Jacobian (Jᵀg = the VJP), the Jacobian against central differences, near-constant rows of
// a large offset, errors. Tolerances: a normalised entry x̂ = (x − μ)·r is within about
// (n + 8)·ε·(1 + |x̂|) of its true value when the corrected two-pass sums are used (μ's error is
// ε·|μ| relative to a spread that may be tiny, but it cancels in x − μ as each x_i − μ₀ is formed
// exactly when μ₀ is within a factor 2 of x_i — Sterbenz — and c/n corrects μ₀); γ and β add one
// rounding each.
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "attn/gradcheck.hpp"
#include "attn/report/format.hpp"
#include "attn_catch.hpp"

using attn::Matrix;
using ld = long double;

namespace {

template <class T>
constexpr ld eps() {
  return static_cast<ld>(std::numeric_limits<T>::epsilon());
}

// the formula, in long double: y_i = γ_i (x_i − μ)/√(σ² + ε) + β_i (RMSNorm: x_i/√(mean x² + ε))
template <class T>
std::vector<ld> reference_row(const T* x, std::size_t n, const std::vector<T>& gamma, const std::vector<T>& beta,
                              ld e, bool layer) {
  ld mu = 0;
  if (layer) {
    for (std::size_t i = 0; i < n; ++i) mu += x[i];
    mu /= static_cast<ld>(n);
  }
  ld var = 0;
  for (std::size_t i = 0; i < n; ++i) var += (x[i] - mu) * (x[i] - mu);
  var /= static_cast<ld>(n);
  std::vector<ld> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    const ld xhat = (x[i] - mu) / std::sqrt(var + e);
    y[i] = (gamma.empty() ? 1 : static_cast<ld>(gamma[i])) * xhat + (beta.empty() ? 0 : static_cast<ld>(beta[i]));
  }
  return y;
}

template <class T>
std::vector<T> random_vector(std::size_t n, std::mt19937_64& rng, double sd = 1, double mean = 0) {
  std::normal_distribution<double> normal(mean, sd);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(normal(rng));
  return v;
}

}  // namespace

TEST_CASE("layer_norm: W9's row (1, 2, 3, 4), gamma 1, beta 0, eps 0", "[norms][unit]") {
  // mean 2.5, variance 1.25, output (x − 2.5)/√1.25 ≈ (−1.342, −0.447, 0.447, 1.342)
  const Matrix<double> X{{1, 2, 3, 4}};
  Matrix<double> Y(1, 4);
  std::vector<double> mean(1), rstd(1);
  attn::layer_norm(X, Y, {.eps = 0}, {mean, rstd});
  CHECK(mean[0] == 2.5);
  CHECK(std::abs(1 / (rstd[0] * rstd[0]) - 1.25) <= 4e-16);
  const char* unit[] = {"-1.342", "-0.447", "0.447", "1.342"};
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(std::abs(Y(0, i) - (static_cast<double>(i) + 1 - 2.5) / std::sqrt(1.25)) <= 4e-16);
    CHECK(attn::report::fixed(Y(0, i), 3) == unit[i]);
  }
}

TEMPLATE_TEST_CASE("layer_norm and rms_norm: every entry against the formula in long double", "[norms]", float,
                   double, long double) {
  using T = TestType;
  std::mt19937_64 rng(91);
  for (const auto kind : {attn::norm_kind::layer, attn::norm_kind::rms})
    for (const std::size_t d : {1u, 2u, 7u, 64u, 300u}) {
      const std::size_t rows = 5;
      const std::vector<T> x = random_vector<T>(rows * d, rng, 2, 0.5);
      const std::vector<T> gamma = random_vector<T>(d, rng, 1, 1);
      const std::vector<T> beta = kind == attn::norm_kind::layer ? random_vector<T>(d, rng) : std::vector<T>{};
      const attn::norm_parameters<T> p{.gamma = gamma, .beta = beta, .eps = 1e-5, .kind = kind};
      const auto r = attn::norm(attn::MatrixView<const T>(x.data(), rows, d), p);
      for (std::size_t t = 0; t < rows; ++t) {
        const std::vector<ld> want = reference_row(x.data() + t * d, d, gamma, beta, static_cast<ld>(static_cast<T>(1e-5)),
                                                   kind == attn::norm_kind::layer);
        for (std::size_t i = 0; i < d; ++i) {
          INFO("d " << d << ", row " << t << ", entry " << i);
          const ld g = gamma[i], b = beta.empty() ? 0 : static_cast<ld>(beta[i]);
          const ld xhat = (want[i] - b) / g;
          const ld bound = (static_cast<ld>(d) + 8) * eps<T>() * (1 + std::abs(xhat)) * std::abs(g) +
                           eps<T>() * (std::abs(want[i]) + std::abs(b));
          CHECK(std::abs(static_cast<ld>(r.out(t, i)) - want[i]) <= bound);
        }
      }
    }
}

TEMPLATE_TEST_CASE("layer_norm: a large offset and a tiny spread keep the spread", "[norms]", double, long double) {
  // rows 1e4 + 1e-6·z: E[x²] − μ² would cancel every digit of σ² (1e8 against 1e-12); the
  // corrected two-pass sums keep it. x̂ within (n + 8)ε·|x|/σ of the true one: each x_i carries
  // its own rounding, ε·1e4, which relative to σ = 1e-6 is 1e10·ε — the input's conditioning,
  // not the algorithm's
  using T = TestType;
  std::mt19937_64 rng(92);
  const std::size_t d = 16;
  std::vector<T> x(d);
  std::normal_distribution<double> normal(0, 1);
  for (T& v : x) v = static_cast<T>(1e4L + 1e-6L * static_cast<ld>(normal(rng)));
  Matrix<T> Y(1, d);
  attn::layer_norm(attn::MatrixView<const T>(x.data(), 1, d), Y, {.eps = 0});
  const std::vector<ld> want = reference_row(x.data(), d, std::vector<T>{}, std::vector<T>{}, 0, true);
  ld sd = 0, mu = 0;
  for (const T v : x) mu += v;
  mu /= d;
  for (const T v : x) sd += (v - mu) * (v - mu);
  sd = std::sqrt(sd / d);
  for (std::size_t i = 0; i < d; ++i) {
    INFO("entry " << i);
    CHECK(std::abs(static_cast<ld>(Y(0, i)) - want[i]) <= (d + 8) * eps<T>() * 1e4L / sd * (1 + std::abs(want[i])));
  }
  // and the output is normalised: mean 0, variance 1, to the same bound
  ld m = 0, v = 0;
  for (std::size_t i = 0; i < d; ++i) m += Y(0, i);
  for (std::size_t i = 0; i < d; ++i) v += (Y(0, i) - m / d) * (Y(0, i) - m / d);
  CHECK(std::abs(v / d - 1) <= 4 * (d + 8) * eps<T>() * 1e4L / sd);
}

TEST_CASE("layer_norm: a constant row gives beta (eps > 0) or NaN (eps = 0: no scale)", "[norms][errors]") {
  const Matrix<double> X{{0.1, 0.1, 0.1}, {5, 5, 5}};
  const std::vector<double> gamma{2, 3, 4}, beta{-1, 0, 1};
  Matrix<double> Y(2, 3);
  attn::layer_norm(X, Y, {.gamma = gamma, .beta = beta});
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t i = 0; i < 3; ++i) CHECK(Y(t, i) == beta[i]);  // x − μ = 0 exactly: μ corrected by c/n
  attn::layer_norm(X, Y, {.gamma = gamma, .beta = beta, .eps = 0});
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t i = 0; i < 3; ++i) CHECK(std::isnan(Y(t, i)));
}

TEMPLATE_TEST_CASE("norm_backward: against central differences and against the Jacobian", "[norms][derivatives]",
                   float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(93);
  for (const auto kind : {attn::norm_kind::layer, attn::norm_kind::rms})
    for (const std::size_t d : {1u, 3u, 8u}) {
      const bool layer = kind == attn::norm_kind::layer;
      const std::vector<T> x = random_vector<T>(d, rng, 1.5, 0.3), gy = random_vector<T>(d, rng);
      const std::vector<T> gamma = random_vector<T>(d, rng, 0.5, 1);
      const std::vector<T> beta = layer ? random_vector<T>(d, rng) : std::vector<T>{};
      const attn::norm_parameters<T> p{.gamma = gamma, .beta = beta, .eps = 1e-3, .kind = kind};
      INFO((layer ? "LayerNorm" : "RMSNorm") << ", d " << d);
      // y(x) as gradcheck wants it
      const auto f = [&](std::span<const T> xs) {
        std::vector<T> y(d);
        attn::norm(attn::MatrixView<const T>(xs.data(), 1, d), attn::MatrixView<T>(y.data(), 1, d), p);
        return y;
      };
      const Matrix<T> J = attn::norm_jacobian(x, p);
      CHECK(attn::check_jacobian(f, x, J).passed(attn::gradcheck_tolerance<T>()));
      // the backward's ∂L/∂x = Jᵀ g
      std::vector<T> dx(d, T(7)), dgamma(d, T(0.5)), dbeta(layer ? d : 0, T(0.25));
      attn::norm_backward(attn::MatrixView<const T>(x.data(), 1, d), p, attn::MatrixView<const T>(gy.data(), 1, d),
                          attn::norm_gradients<T>{.input = {dx.data(), 1, d}, .gamma = dgamma, .beta = dbeta});
      ld mag = 0;
      for (std::size_t j = 0; j < d; ++j) {
        ld jtg = 0;
        for (std::size_t i = 0; i < d; ++i) {
          jtg += static_cast<ld>(J(i, j)) * gy[i];
          mag += std::abs(static_cast<ld>(J(i, j)) * gy[i]);
        }
        CHECK(std::abs(static_cast<ld>(dx[j]) - jtg) <= static_cast<ld>(attn::vjp_tolerance<T>()) * (mag + 1));
      }
      CHECK(attn::check_vjp(f, x, gy, dx).passed(attn::gradcheck_tolerance<T>()));
      // ∂L/∂γ = dy ⊙ x̂, ∂L/∂β = dy (overwritten: accumulate is false)
      const std::vector<ld> xhat = reference_row(x.data(), d, std::vector<T>{}, std::vector<T>{},
                                                 static_cast<ld>(static_cast<T>(1e-3)), layer);
      for (std::size_t i = 0; i < d; ++i) {
        CHECK(std::abs(static_cast<ld>(dgamma[i]) - gy[i] * xhat[i]) <= 4 * (d + 8) * eps<T>() * (1 + std::abs(xhat[i])) * std::abs(gy[i]));
        if (layer) CHECK(dbeta[i] == gy[i]);
      }
    }
}

TEMPLATE_TEST_CASE("norm_backward: saved statistics or recomputed, accumulating, rows of a batch", "[norms][derivatives]",
                   float, double) {
  using T = TestType;
  std::mt19937_64 rng(94);
  const std::size_t rows = 6, d = 5;
  const std::vector<T> x = random_vector<T>(rows * d, rng), gy = random_vector<T>(rows * d, rng);
  const std::vector<T> gamma = random_vector<T>(d, rng), beta = random_vector<T>(d, rng);
  const attn::norm_parameters<T> p{.gamma = gamma, .beta = beta};
  const attn::MatrixView<const T> X(x.data(), rows, d), G(gy.data(), rows, d);
  std::vector<T> mean(rows), rstd(rows);
  Matrix<T> Y(rows, d);
  attn::layer_norm(X, Y, p, {mean, rstd});
  std::vector<T> dx1(rows * d), dg1(d), db1(d), dx2(rows * d), dg2(d), db2(d);
  attn::norm_backward(X, p, G, attn::norm_gradients<T>{{dx1.data(), rows, d}, dg1, db1});
  attn::norm_backward(X, p, G, attn::norm_gradients<T>{{dx2.data(), rows, d}, dg2, db2},
                      attn::saved_norm<T>{mean, rstd});
  CHECK(dx1 == dx2);  // the same statistics, the same arithmetic: the same bits
  CHECK(dg1 == dg2);
  CHECK(db1 == db2);
  // accumulate: the gradients of X (each entry one addition: exactly twice), and of γ and β, sums
  // over the rows added one row at a time to what they hold: twice, within the rounding of 2·rows
  // additions of terms of at most Σ_t |dy_t x̂_t|
  attn::norm_backward(X, p, G, attn::norm_gradients<T>{{dx2.data(), rows, d}, dg2, db2, true});
  for (std::size_t i = 0; i < d; ++i) {
    ld mag_g = 0, mag_b = 0;
    for (std::size_t t = 0; t < rows; ++t) {
      mag_g += std::abs(static_cast<ld>(gy[t * d + i]) * 3);  // |x̂| ≤ √d < 3
      mag_b += std::abs(static_cast<ld>(gy[t * d + i]));
    }
    CHECK(std::abs(static_cast<ld>(dg2[i]) - 2 * static_cast<ld>(dg1[i])) <= 4 * (rows + 2) * eps<T>() * mag_g);
    CHECK(std::abs(static_cast<ld>(db2[i]) - 2 * static_cast<ld>(db1[i])) <= 4 * (rows + 2) * eps<T>() * mag_b);
  }
  for (std::size_t k = 0; k < dx1.size(); ++k) CHECK(dx2[k] == dx1[k] + dx1[k]);
  // ∂L/∂β sums over the rows
  for (std::size_t i = 0; i < d; ++i) {
    T s = 0;
    for (std::size_t t = 0; t < rows; ++t) s += gy[t * d + i];
    CHECK(db1[i] == s);
  }
}

TEST_CASE("norms: bad input is refused by name, nothing written", "[norms][errors]") {
  const Matrix<double> X{{1, 2, 3}, {4, 5, 6}};
  Matrix<double> Y(2, 3, 9.0);
  const std::vector<double> g2{1, 1}, g3{1, 1, 1};
  const auto untouched = [&] {
    for (std::size_t i = 0; i < Y.size(); ++i)
      if (Y.data()[i] != 9.0) return false;
    return true;
  };
  REQUIRE_THROWS_MATCHES(attn::layer_norm(X, Y, {.gamma = g2}), attn::dimension_error,
                         Catch::Matchers::Message("attn::layer_norm: size of gamma is 2 but columns of X is 3"));
  REQUIRE_THROWS_MATCHES(attn::rms_norm(X, Y, {.beta = g3}), attn::dimension_error,
                         Catch::Matchers::Message("attn::rms_norm: RMSNorm has no beta: leave it (and its gradient) empty"));
  for (const double e : {-1e-5, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()})
    REQUIRE_THROWS_MATCHES(attn::layer_norm(X, Y, {.eps = e}), attn::domain_error,
                           Catch::Matchers::Message("attn::layer_norm: eps must be finite and at least 0"));
  Matrix<double> small(2, 2);
  REQUIRE_THROWS_MATCHES(attn::layer_norm(X, small), attn::dimension_error,
                         Catch::Matchers::Message("attn::layer_norm: the output is 2x2 but should be 2x3"));
  std::vector<double> mean(3);
  REQUIRE_THROWS_MATCHES(attn::layer_norm(X, Y, {}, {mean, {}}), attn::dimension_error,
                         Catch::Matchers::Message("attn::layer_norm: size of the means is 3 but rows of X is 2"));
  CHECK(untouched());
  // in place is allowed; an output that overlaps X partly is not
  Matrix<double> Z(3, 3, 1.0);
  REQUIRE_THROWS_AS(attn::layer_norm(attn::MatrixView<const double>(Z.data(), 2, 3),
                                     attn::MatrixView<double>(Z.data() + 3, 2, 3)),
                    attn::overlap_error);
  Matrix<double> W = X;
  attn::layer_norm(W, W);
  attn::layer_norm(X, Y);
  for (std::size_t i = 0; i < W.size(); ++i) CHECK(W.data()[i] == Y.data()[i]);
  // the backward: dY of another shape, a gradient over an input
  Matrix<double> dY(2, 2), dX(2, 3);
  REQUIRE_THROWS_MATCHES(attn::norm_backward(X, attn::norm_parameters<double>{}, dY,
                                             attn::norm_gradients<double>{.input = dX.view()}),
                         attn::dimension_error,
                         Catch::Matchers::Message("attn::layer_norm_backward: dL/dY is 2x2 but should be 2x3"));
  REQUIRE_THROWS_AS(attn::norm_backward(X, attn::norm_parameters<double>{}, Y,
                                        attn::norm_gradients<double>{.input = Y.view()}),
                    attn::overlap_error);
}
