// The training pieces (docs/training.md): cross_entropy.hpp, optimizer.hpp and sampling.hpp, each
// against a reference written here in long double from the formulas (not from a run of attn),
// against central differences, and against PyTorch's own numbers in the hidden test case that the
// CTest test pytorch_training runs (tests/torch/training.py writes them; skipped where `import
// torch` fails). u below is the unit roundoff of the type under test (epsilon/2).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"
#include "doc_snippets.hpp"

namespace {

using ld = long double;

template <class T>
constexpr double unit_roundoff = std::numeric_limits<T>::epsilon() / 2;

// ℓ = log Σ_j exp(z_j) − z_y in long double, shifted by the max: (m − z_y) + log1p(below), below
// the sum without the (first) max's term, so that a tiny ℓ keeps its digits here too.
template <class T>
ld reference_below(const T* z, std::size_t V, ld& m) {
  std::size_t arg = 0;
  for (std::size_t j = 0; j < V; ++j)
    if (z[j] > z[arg]) arg = j;
  m = static_cast<ld>(z[arg]);
  ld below = 0;
  for (std::size_t j = 0; j < V; ++j)
    if (j != arg) below += std::exp(static_cast<ld>(z[j]) - m);
  return below;
}

template <class T>
ld reference_loss(const T* z, std::size_t V, std::size_t y) {
  ld m = 0;
  const ld below = reference_below(z, V, m);
  return (m - static_cast<ld>(z[y])) + std::log1p(below);
}

// (softmax(z) − onehot(y))_j in long double; at an argmax target p_y − 1 = −below/(1 + below).
template <class T>
std::vector<ld> reference_gradient(const T* z, std::size_t V, std::size_t y) {
  ld m = 0;
  const ld below = reference_below(z, V, m);
  std::vector<ld> p(V);
  for (std::size_t j = 0; j < V; ++j) p[j] = std::exp(static_cast<ld>(z[j]) - m) / (1 + below);
  p[y] = static_cast<ld>(z[y]) == m ? -below / (1 + below) : p[y] - 1;
  return p;
}

// Logits T × V from a formula (spread over about ±3, offset by `shift`).
template <class T>
attn::Matrix<T> logits_of(std::size_t rows, std::size_t V, double shift = 0) {
  attn::Matrix<T> Z(rows, V);
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t j = 0; j < V; ++j)
      Z(t, j) = static_cast<T>(shift + 3 * std::sin(1.3 * static_cast<double>(t * V + j) + 0.4));
  return Z;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// cross_entropy.hpp
// ---------------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("cross_entropy: the per-position losses and their mean against long double",
                   "[training][cross_entropy]", float, double) {
  using T = TestType;
  const double u = unit_roundoff<T>;
  for (const std::size_t V : {1u, 2u, 7u, 40u, 300u}) {
    const std::size_t rows = 5;
    const attn::Matrix<T> Z = logits_of<T>(rows, V);
    std::vector<std::int64_t> y(rows);
    for (std::size_t t = 0; t < rows; ++t) y[t] = static_cast<std::int64_t>((3 * t + 1) % V);
    std::vector<T> losses(rows, T(-1));
    const T L = attn::cross_entropy(Z, y, losses);
    ld sum = 0;
    for (std::size_t t = 0; t < rows; ++t) {
      const ld ref = reference_loss(Z.row(t).data(), V, static_cast<std::size_t>(y[t]));
      sum += ref;
      // ℓ = (m − z_y) + log1p(below): m − z_y ≤ ℓ rounds once (u·ℓ); below's V − 1 exps (≤ 2u each,
      // attn's exp is within 1 ulp) and V − 2 additions give it a relative error ≤ (V + 2)u, which
      // log1p passes on at most 1:1 in absolute terms, plus its own u·ℓ; the last addition u·ℓ.
      const double tol = 2 * (static_cast<double>(V) + 4) * u * (1 + static_cast<double>(ref));
      INFO("V = " << V << ", t = " << t);
      CHECK(std::abs(static_cast<double>(losses[t]) - static_cast<double>(ref)) <= tol);
    }
    const ld mean = sum / rows;
    // each ℓ as above, the mean's sum in double (rows·2⁻⁵³) and its rounding to T (u)
    const double tol = 2 * (static_cast<double>(V) + 4) * u * (1 + static_cast<double>(mean)) + u * static_cast<double>(mean);
    CHECK(std::abs(static_cast<double>(L) - static_cast<double>(mean)) <= tol);
    CHECK(attn::cross_entropy(Z, y) == L);  // the same bits without the losses
  }
}

TEMPLATE_TEST_CASE("cross_entropy: each loss is log_softmax's entry negated, to rounding",
                   "[training][cross_entropy]", float, double) {
  using T = TestType;
  const double u = unit_roundoff<T>;
  const std::size_t rows = 4, V = 600;  // three chunks of the sum
  const attn::Matrix<T> Z = logits_of<T>(rows, V, 2);
  const std::vector<std::int64_t> y = {0, 599, 5, 300};
  std::vector<T> losses(rows);
  (void)attn::cross_entropy(Z, y, losses);
  std::vector<T> ls(V);
  for (std::size_t t = 0; t < rows; ++t) {
    attn::log_softmax(Z.row(t), ls);
    // the same formula, its sum below the max in another order: each within the first test's
    // bound of the exact ℓ, so within twice it of each other
    const double l = static_cast<double>(losses[t]);
    CHECK(std::abs(l + static_cast<double>(ls[static_cast<std::size_t>(y[t])])) <= 2 * 2 * (V + 4) * u * (1 + l));
  }
}

TEMPLATE_TEST_CASE("cross_entropy: logits of ±1e4 keep the loss and the gradient",
                   "[training][cross_entropy]", float, double) {
  using T = TestType;
  const double u = unit_roundoff<T>;
  // 1e4 + k/2 and −1e4 + k/2 are exact in float (its ulp at 1e4 is 2⁻¹⁰): exp(1e4) overflows any
  // type, so a sum of unshifted exps would be inf; and ℓ ≪ z, so ℓ taken as lse − z_y would lose
  // all of ℓ's digits to lse's rounding (u·1e4 ≈ 6e-4 in float)
  const std::size_t V = 6;
  attn::Matrix<T> Z(2, V);
  const double base[2] = {1e4, -1e4};
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t j = 0; j < V; ++j) Z(t, j) = static_cast<T>(base[t] + 0.5 * static_cast<double>(j));
  Z(0, 5) = static_cast<T>(1e4 + 30);  // a confident, right prediction: ℓ ≈ 6·e⁻²⁷·… tiny
  const std::vector<std::int64_t> y = {5, 2};
  std::vector<T> losses(2);
  const T L = attn::cross_entropy(Z, y, losses);
  attn::Matrix<T> G(2, V);
  const T L2 = attn::cross_entropy_backward(Z, y, G);
  CHECK(L2 == L);
  for (std::size_t t = 0; t < 2; ++t) {
    const ld ref = reference_loss(Z.row(t).data(), V, static_cast<std::size_t>(y[t]));
    // as the first test: relative to 1 + ℓ, with no term in |z|
    CHECK(std::abs(static_cast<double>(losses[t]) - static_cast<double>(ref)) <=
          2 * (V + 4) * u * static_cast<double>(1 + ref));
    const std::vector<ld> p = reference_gradient(Z.row(t).data(), V, static_cast<std::size_t>(y[t]));
    for (std::size_t j = 0; j < V; ++j) {
      const ld want = p[j] / 2;
      // p_j = e_j·(c/S): e_j ≤ 2u, c/S 2u, the product u, S (V − 1 additions) (V + 1)u: all relative
      CHECK(std::abs(static_cast<double>(G(t, j)) - static_cast<double>(want)) <=
            (V + 6) * u * static_cast<double>(std::abs(want)) + std::numeric_limits<T>::denorm_min());
    }
  }
  // row 0: ℓ is tiny and relative accuracy holds (ℓ ≈ Σ_{j<5} e^(z_j − z_5) ≈ 1.6e-13)
  const ld ref0 = reference_loss(Z.row(0).data(), V, 5);
  CHECK(std::abs(static_cast<double>(losses[0] - static_cast<T>(ref0))) <= 2 * (V + 4) * u * static_cast<double>(ref0));
}

TEMPLATE_TEST_CASE("cross_entropy_backward: (softmax − onehot)/C against long double and central differences",
                   "[training][cross_entropy]", float, double) {
  using T = TestType;
  const double u = unit_roundoff<T>;
  const std::size_t rows = 6, V = 9;
  const attn::Matrix<T> Z = logits_of<T>(rows, V, 1);
  const std::vector<std::int64_t> y = {3, -100, 8, 0, -100, 4};
  const double C = 4;
  attn::Matrix<T> G(rows, V, T(7));
  (void)attn::cross_entropy_backward(Z, y, G);
  for (std::size_t t = 0; t < rows; ++t) {
    if (y[t] == -100) {
      for (std::size_t j = 0; j < V; ++j) CHECK(G(t, j) == T(0));
      continue;
    }
    const std::vector<ld> p = reference_gradient(Z.row(t).data(), V, static_cast<std::size_t>(y[t]));
    for (std::size_t j = 0; j < V; ++j) {
      const ld want = p[j] / C;
      // relative (V + 6)u as in the ±1e4 test; at the target p_y − 1 is formed as −below/S (argmax)
      // or as p_y·c − c with p_y ≤ ½ (one more rounding of a number ≤ c)
      CHECK(std::abs(static_cast<double>(G(t, j)) - static_cast<double>(want)) <=
            (V + 6) * u * static_cast<double>(std::abs(want)) + 2 * u / C);
    }
  }
  if constexpr (std::is_same_v<T, double>) {
    // central differences of the mean loss, h = 1e-5: truncation h²/6·max|∂³L| ≤ h²/6·(1/C)
    // (a softmax's third derivatives are at most 1 in size) ≈ 4e-12, rounding 2u·max L/h with
    // L ≤ 8 here ≈ 2e-10: 1e-9 holds both
    const double h = 1e-5;
    attn::Matrix<double> Zp = Z;
    for (std::size_t t = 0; t < rows; ++t)
      for (std::size_t j = 0; j < V; ++j) {
        const double z0 = Zp(t, j);
        Zp(t, j) = z0 + h;
        const double up = attn::cross_entropy(Zp, y);
        Zp(t, j) = z0 - h;
        const double down = attn::cross_entropy(Zp, y);
        Zp(t, j) = z0;
        CHECK(std::abs((up - down) / (2 * h) - G(t, j)) <= 1e-9);
      }
  }
}

TEMPLATE_TEST_CASE("cross_entropy_backward: accumulate, upstream, in place, a long row",
                   "[training][cross_entropy]", float, double) {
  using T = TestType;
  const double u = unit_roundoff<T>;
  const std::size_t rows = 3, V = 600;  // more than the accumulate path's chunk of 256
  const attn::Matrix<T> Z = logits_of<T>(rows, V);
  const std::vector<std::int64_t> y = {599, -100, 255};
  attn::Matrix<T> W(rows, V);
  const T L = attn::cross_entropy_backward(Z, y, W);
  attn::Matrix<T> A(rows, V, T(1));
  CHECK(attn::cross_entropy_backward(Z, y, A, {}, T(1), true) == L);
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t j = 0; j < V; ++j) CHECK(A(t, j) == T(1) + W(t, j));  // the same numbers added
  attn::Matrix<T> S(rows, V);
  (void)attn::cross_entropy_backward(Z, y, S, {}, T(3));
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t j = 0; j < V; ++j)  // c = 3/C and 1/C: each one rounding, then the same steps
      CHECK(std::abs(static_cast<double>(S(t, j) - 3 * W(t, j))) <= 8 * u * std::abs(3 * static_cast<double>(W(t, j))) + std::numeric_limits<T>::denorm_min());
  attn::Matrix<T> I = Z;  // the gradient over the logits themselves
  CHECK(attn::cross_entropy_backward(I, y, I) == L);
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t j = 0; j < V; ++j) CHECK(I(t, j) == W(t, j));
}

TEST_CASE("cross_entropy: the ignore index, and no position counted", "[training][cross_entropy]") {
  const std::size_t V = 4;
  attn::Matrix<double> Z = logits_of<double>(3, V);
  Z(1, 2) = std::numeric_limits<double>::quiet_NaN();  // an ignored row is never read
  std::vector<double> losses(3, -1);
  const double L = attn::cross_entropy(Z, std::vector<std::int64_t>{1, -100, 3}, losses);
  CHECK(losses[1] == 0);
  CHECK(L == (losses[0] + losses[2]) / 2);
  // another ignore index: 3 is then ignored although in range, and −100 is out of range
  const attn::cross_entropy_options three{.ignore_index = 3};
  CHECK(attn::cross_entropy(Z, std::vector<std::int64_t>{1, 3, 3}, losses, three) == losses[0]);
  CHECK_THROWS_AS(attn::cross_entropy(Z, std::vector<std::int64_t>{1, -100, 3}, three), attn::domain_error);
  // nothing counted: loss 0 and gradient 0 (PyTorch's mean gives NaN), accumulate leaves it
  attn::Matrix<double> G(3, V, 5.0);
  const std::vector<std::int64_t> none = {-100, -100, -100};
  CHECK(attn::cross_entropy_backward(Z, none, G, {}, 1.0, true) == 0);
  CHECK(G(2, 3) == 5);
  CHECK(attn::cross_entropy_backward(Z, none, G) == 0);
  for (std::size_t t = 0; t < 3; ++t)
    for (std::size_t j = 0; j < V; ++j) CHECK(G(t, j) == 0);
  const attn::Matrix<double> empty(0, V);
  CHECK(attn::cross_entropy(empty, std::span<const std::int64_t>{}) == 0);
}

TEST_CASE("cross_entropy: non-finite logits", "[training][cross_entropy]") {
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  attn::Matrix<double> Z(5, 3);
  const double rows[5][3] = {{0, nan, 1}, {inf, 0, 1}, {-inf, -inf, -inf}, {-inf, 0, 1}, {0, 1, -inf}};
  for (std::size_t t = 0; t < 5; ++t)
    for (std::size_t j = 0; j < 3; ++j) Z(t, j) = rows[t][j];
  const std::vector<std::int64_t> y = {0, 1, 2, 0, 1};
  std::vector<double> losses(5);
  attn::Matrix<double> G(5, 3);
  CHECK(std::isnan(attn::cross_entropy(Z, y, losses)));
  (void)attn::cross_entropy_backward(Z, y, G);
  for (std::size_t t = 0; t < 3; ++t) {  // NaN, +inf, all −inf: NaN loss and gradient row
    CHECK(std::isnan(losses[t]));
    for (std::size_t j = 0; j < 3; ++j) CHECK(std::isnan(G(t, j)));
  }
  CHECK(losses[3] == inf);  // −inf at the target: probability 0
  const double p1 = 1 / (1 + std::exp(1.0)), p2 = 1 - p1;  // softmax(−inf, 0, 1)
  CHECK(G(3, 0) == -0.2);  // (0 − 1)/C, C = 5
  CHECK(std::abs(G(3, 1) - p1 / 5) <= 1e-16);
  CHECK(std::abs(G(3, 2) - p2 / 5) <= 1e-16);
  CHECK(std::abs(losses[4] - (1 + std::log1p(std::exp(-1.0))) + 1) <= 1e-15);  // log(1 + e) − 1
  CHECK(G(4, 2) == 0);  // −inf elsewhere: its gradient entry is 0
}

TEST_CASE("cross_entropy: errors name the function, the position and the value; nothing written",
          "[training][cross_entropy][errors]") {
  const attn::Matrix<double> Z = logits_of<double>(3, 4);
  std::vector<double> losses(3, 9);
  attn::Matrix<double> G(3, 4, 9.0);
  const std::vector<std::int64_t> bad = {1, 2, 4};
  try {
    (void)attn::cross_entropy(Z, bad, losses);
    FAIL("no throw");
  } catch (const attn::domain_error& e) {
    const std::string what = e.what();
    CHECK(what.find("attn::cross_entropy") == 0);
    CHECK(what.find("position 2 is 4") != std::string::npos);
  }
  CHECK_THROWS_AS(attn::cross_entropy_backward(Z, std::vector<std::int64_t>{-1, 0, 0}, G), attn::domain_error);
  CHECK_THROWS_AS(attn::cross_entropy(Z, std::vector<std::int64_t>{1, 2}), attn::dimension_error);
  std::vector<double> short_losses(2);
  CHECK_THROWS_AS(attn::cross_entropy(Z, std::vector<std::int64_t>{1, 2, 3}, short_losses), attn::dimension_error);
  attn::Matrix<double> G2(3, 5);
  CHECK_THROWS_AS(attn::cross_entropy_backward(Z, std::vector<std::int64_t>{1, 2, 3}, G2), attn::dimension_error);
  const attn::Matrix<double> none(3, 0);
  CHECK_THROWS_AS(attn::cross_entropy(none, std::vector<std::int64_t>{-100, -100, -100}), attn::dimension_error);
  attn::Matrix<double> Zc = Z;  // dL/dlogits over a part of the logits
  CHECK_THROWS_AS(attn::cross_entropy_backward(attn::MatrixView<const double>(Zc.data(), 2, 4),
                                               std::vector<std::int64_t>{0, 0},
                                               attn::MatrixView<double>(Zc.data() + 4, 2, 4)),
                  attn::overlap_error);
  for (const double x : losses) CHECK(x == 9);
  for (std::size_t t = 0; t < 3; ++t)
    for (std::size_t j = 0; j < 4; ++j) CHECK(G(t, j) == 9);
}

// ---------------------------------------------------------------------------------------------
// optimizer.hpp
// ---------------------------------------------------------------------------------------------

namespace {

// The formulas of torch.optim.SGD and AdamW in long double, every step.
struct ref_sgd {
  std::vector<ld> p, b;
  bool first = true;
  void step(const std::vector<ld>& g, const attn::sgd_options& o) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      ld d = g[i] + static_cast<ld>(o.weight_decay) * p[i];
      if (o.momentum != 0) {
        b[i] = first ? d : static_cast<ld>(o.momentum) * b[i] + (1 - static_cast<ld>(o.dampening)) * d;
        d = o.nesterov ? d + static_cast<ld>(o.momentum) * b[i] : b[i];
      }
      p[i] -= static_cast<ld>(o.lr) * d;
    }
    first = false;
  }
};

struct ref_adamw {
  std::vector<ld> p, m, v;
  int t = 0;
  void step(const std::vector<ld>& g, const attn::adamw_options& o) {
    ++t;
    const ld b1 = o.beta1, b2 = o.beta2;
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - static_cast<ld>(o.lr) * static_cast<ld>(o.weight_decay);
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      const ld mh = m[i] / (1 - std::pow(b1, static_cast<ld>(t)));
      const ld vh = v[i] / (1 - std::pow(b2, static_cast<ld>(t)));
      p[i] -= static_cast<ld>(o.lr) * mh / (std::sqrt(vh) + static_cast<ld>(o.eps));
    }
  }
};

// The gradient of step k at p: a fixed quadratic's, 2·(p − c) with c_i = sin(i), plus a term
// that changes with k so that the moments see different gradients.
template <class T>
std::vector<T> gradient_at(const std::vector<T>& p, int k) {
  std::vector<T> g(p.size());
  for (std::size_t i = 0; i < p.size(); ++i)
    g[i] = static_cast<T>(2 * (static_cast<double>(p[i]) - std::sin(static_cast<double>(i))) +
                          0.3 * std::cos(static_cast<double>(k + 3 * static_cast<int>(i))));
  return g;
}

}  // namespace

TEMPLATE_TEST_CASE("sgd_step: momentum, dampening, nesterov and weight decay against long double",
                   "[training][optimizer]", float, double) {
  using T = TestType;
  const double u = unit_roundoff<T>;
  const attn::sgd_options cases[] = {
      {.lr = 0.1},
      {.lr = 0.05, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01},
      {.lr = 0.02, .momentum = 0.8, .weight_decay = 0.1, .nesterov = true}};
  for (const attn::sgd_options& o : cases) {
    const std::size_t n = 7;
    std::vector<T> p(n), b(n, std::numeric_limits<T>::quiet_NaN());  // step 0 does not read b
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(0.5 * static_cast<double>(i) - 1);
    ref_sgd ref{{p.begin(), p.end()}, std::vector<ld>(n), true};
    attn::sgd_state<T> state{o.momentum != 0 ? std::span<T>(b) : std::span<T>()};
    const int steps = 6;
    for (int k = 0; k < steps; ++k) {
      const std::vector<T> g = gradient_at(p, k);
      attn::sgd_step(p, g, state, o);
      ref.step({g.begin(), g.end()}, o);  // the reference takes attn's gradient (rounded to T)
    }
    CHECK(state.step == steps);
    for (std::size_t i = 0; i < n; ++i) {
      // each step: the coefficients rounded to T (u each), about 6 operations on numbers ≤ |p| + 3
      // (|g| ≤ 2|p| + 2.3, |b| ≤ Σ μᵏ|g| ≤ 10|g|): ≤ 8u·10·(|p| + 3) per step, not amplified
      // (|∂p'/∂p| ≤ 1 + lr·2·(1 + μ)/(1 − μ) ≤ 2 here) beyond 2ᵏ: 8·10·2⁶·u·(|p| + 3)
      const double tol = 8 * 10 * 64 * u * (std::abs(static_cast<double>(ref.p[i])) + 3);
      CHECK(std::abs(static_cast<double>(p[i]) - static_cast<double>(ref.p[i])) <= tol);
      if (o.momentum != 0) CHECK(std::abs(static_cast<double>(b[i]) - static_cast<double>(ref.b[i])) <= tol * 10);
    }
  }
}

TEMPLATE_TEST_CASE("adamw_step: several steps against long double; the first step moves by lr·sign(g)",
                   "[training][optimizer]", float, double) {
  using T = TestType;
  const double u = unit_roundoff<T>;
  const attn::adamw_options cases[] = {
      {}, {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1}, {.weight_decay = 0}};
  for (const attn::adamw_options& o : cases) {
    const std::size_t n = 9;
    const T nan = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> p(n), m(n, nan), v(n, nan);  // step 0 writes m and v without reading them
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(0.25 * static_cast<double>(i) - 1);
    ref_adamw ref{{p.begin(), p.end()}, std::vector<ld>(n), std::vector<ld>(n)};
    attn::adamw_state<T> state{m, v};
    const std::vector<T> p0 = p;
    for (int k = 0; k < 5; ++k) {
      const std::vector<T> g = gradient_at(p, k);
      attn::adamw_step(p, g, state, o);
      ref.step({g.begin(), g.end()}, o);
      if (k == 0)
        for (std::size_t i = 0; i < n; ++i) {
          // t = 1: m̂ = g, v̂ = g², so p₁ = p₀(1 − ηλ) − η·g/(|g| + ε): within a few u of η
          const double want = static_cast<double>(p0[i]) * (1 - o.lr * o.weight_decay) -
                              o.lr * static_cast<double>(g[i]) / (std::abs(static_cast<double>(g[i])) + o.eps);
          CHECK(std::abs(static_cast<double>(p[i]) - want) <= 16 * u * (std::abs(want) + o.lr));
        }
    }
    CHECK(state.step == 5);
    for (std::size_t i = 0; i < n; ++i) {
      // per step: the update η·m̂/(√v̂ + ε) is at most about η/(1 − β₁)·… ≤ 10η in size, with a
      // relative error ≤ 12u (m, v: 3 roundings each, √, two divisions, the coefficients); the
      // decay p·(1 − ηλ) 2u·|p|; five steps add: 5·(12u·10η + 2u·|p|), ×4 for the coefficients' T
      // rounding of 1 − β (relative u/(1 − β), ≤ 1000u for β₂ = 0.999, on v only: √ halves it,
      // and v's share of the update is a ratio: 1000u/2 of 12u·10η·5 is covered by the factor 16 below
      const double tol = 16 * 5 * (12 * u * 10 * o.lr + 2 * u * std::abs(static_cast<double>(ref.p[i]))) +
                         5 * 1000 * u * o.lr;
      CHECK(std::abs(static_cast<double>(p[i]) - static_cast<double>(ref.p[i])) <= tol);
    }
  }
}

TEST_CASE("optimizer: one state per group counts that group's steps", "[training][optimizer]") {
  // one buffer of parameters in two groups (weights decayed, biases not, as nanoGPT's), one
  // buffer for m and one for v, cut the same way
  std::vector<double> p = {1, -2, 0.5, 3, -1}, m(5), v(5);
  const std::vector<double> g = {0.1, -0.3, 0.2, 0.05, -0.4};
  const std::span<double> P(p), M(m), Vv(v);
  attn::adamw_state<double> weights{M.first(3), Vv.first(3)}, biases{M.last(2), Vv.last(2)};
  const attn::adamw_options decayed{.weight_decay = 0.1}, plain{.weight_decay = 0};
  std::vector<double> a = {1, -2, 0.5}, b = {3, -1}, am(3), av(3), bm(2), bv(2);
  attn::adamw_state<double> sa{am, av}, sb{bm, bv};
  const std::span<const double> G(g);
  for (int k = 0; k < 3; ++k) {
    attn::adamw_step(P.first(3), G.first(3), weights, decayed);
    attn::adamw_step(P.last(2), G.last(2), biases, plain);
    attn::adamw_step(a, G.first(3), sa, decayed);
    attn::adamw_step(b, G.last(2), sb, plain);
  }
  CHECK(weights.step == 3);
  CHECK(biases.step == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(p[i] == a[i]);
  for (std::size_t i = 0; i < 2; ++i) CHECK(p[3 + i] == b[i]);
}

TEST_CASE("optimizer: a quadratic minimised", "[training][optimizer]") {
  // f(p) = ½ Σ a_i (p_i − c_i)², a_i ∈ [1, 4]: plain SGD with η = 0.1 shrinks each p_i − c_i by
  // exactly 1 − η a_i ∈ [0.6, 0.9] per step, so after 200 steps |p − c| ≤ 0.9²⁰⁰·|p₀ − c| ≈
  // 7.1e-10·|p₀ − c| (plus rounding, u per step on numbers ≤ 3: 200·3u ≈ 1.3e-13)
  const std::vector<double> a = {1, 2, 3, 4}, c = {0.5, -1, 2, 0};
  const auto grad = [&](const std::vector<double>& p) {
    std::vector<double> g(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) g[i] = a[i] * (p[i] - c[i]);
    return g;
  };
  std::vector<double> p = {0, 0, 0, 1};
  attn::sgd_state<double> s;
  for (int k = 0; k < 200; ++k) attn::sgd_step(p, grad(p), s, {.lr = 0.1});
  for (std::size_t i = 0; i < 4; ++i) CHECK(std::abs(p[i] - c[i]) <= 7.1e-10 * 2 + 1.3e-13);
  // AdamW (no decay) and SGD with momentum: a behaviour check that both get f below 1e-6 of its
  // start, the formulas themselves being held to the references above
  const auto f = [&](const std::vector<double>& q) {
    double s2 = 0;
    for (std::size_t i = 0; i < q.size(); ++i) s2 += a[i] * (q[i] - c[i]) * (q[i] - c[i]) / 2;
    return s2;
  };
  std::vector<double> q = {0, 0, 0, 1}, m(4), v(4), r = {0, 0, 0, 1}, b(4);
  const double f0 = f(q);
  attn::adamw_state<double> as{m, v};
  attn::sgd_state<double> ms{b};
  for (int k = 0; k < 2000; ++k) {
    attn::adamw_step(q, grad(q), as, {.lr = k < 1000 ? 0.01 : 0.001, .weight_decay = 0});
    attn::sgd_step(r, grad(r), ms, {.lr = 0.05, .momentum = 0.9});
  }
  CHECK(f(q) <= 1e-6 * f0);
  CHECK(f(r) <= 1e-6 * f0);
}

TEST_CASE("clip_grad_norm: PyTorch's rule over several buffers", "[training][optimizer]") {
  std::vector<double> g1 = {3, 0}, g2 = {0, 4, 0};
  const std::span<double> both[2] = {g1, g2};
  CHECK(attn::clip_grad_norm<double>(both, 1.0) == 5);
  const double coef = 1 / (5 + 1e-6);
  CHECK(g1[0] == 3 * coef);
  CHECK(g2[1] == 4 * coef);
  std::vector<float> h = {0.3f, -0.4f};  // norm 0.5 ≤ 1: multiplied by 1, unchanged
  CHECK(std::abs(attn::clip_grad_norm(h, 1.0) - 0.5f) <= 1e-7f);
  CHECK(h[0] == 0.3f);
  CHECK(h[1] == -0.4f);
  CHECK_THROWS_AS(attn::clip_grad_norm(h, -1.0), attn::domain_error);
  CHECK_THROWS_AS(attn::clip_grad_norm(h, std::numeric_limits<double>::quiet_NaN()), attn::domain_error);
}

TEST_CASE("optimizer: errors name the buffer or the hyper-parameter; nothing written",
          "[training][optimizer][errors]") {
  std::vector<double> p = {1, 2, 3}, g = {1, 1, 1}, m(3, 7), v(3, 7), shorter(2);
  attn::adamw_state<double> s{m, v};
  const auto message = [](auto&& call) {
    try {
      call();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no throw");
  };
  CHECK(message([&] { attn::adamw_step(p, shorter, s, {}); }) ==
        "attn::adamw_step: size of the gradients is 2 but size of the parameters is 3");
  attn::adamw_state<double> short_v{m, shorter};
  CHECK(message([&] { attn::adamw_step(p, g, short_v, {}); }) ==
        "attn::adamw_step: size of v is 2 but size of the parameters is 3");
  CHECK_THROWS_AS(attn::adamw_step(p, g, s, {.beta1 = 1}), attn::domain_error);
  CHECK_THROWS_AS(attn::adamw_step(p, g, s, {.beta2 = -0.1}), attn::domain_error);
  CHECK_THROWS_AS(attn::adamw_step(p, g, s, {.eps = std::numeric_limits<double>::quiet_NaN()}), attn::domain_error);
  CHECK(message([&] { attn::adamw_step(p, g, s, {.lr = -1}); }).find("attn::adamw_step: lr is -1") == 0);
  attn::adamw_state<double> over{std::span<double>(p), v};  // m over the parameters
  CHECK(message([&] { attn::adamw_step(p, g, over, {}); }) == "attn::adamw_step: m overlaps the parameters");
  attn::adamw_state<double> m_over_g{std::span<double>(g), v};
  CHECK(message([&] { attn::adamw_step(p, g, m_over_g, {}); }) == "attn::adamw_step: m overlaps the gradients");
  attn::sgd_state<double> b{shorter};
  CHECK(message([&] { attn::sgd_step(p, g, b, {.momentum = 0.9}); }) ==
        "attn::sgd_step: size of the momentum buffer is 2 but size of the parameters is 3");
  attn::sgd_state<double> none;
  CHECK_THROWS_AS(attn::sgd_step(p, g, none, {.nesterov = true}), attn::domain_error);
  CHECK_THROWS_AS(attn::sgd_step(p, g, none, {.weight_decay = -1}), attn::domain_error);
  CHECK_THROWS_AS(attn::sgd_step(p, g, none, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}), attn::domain_error);
  CHECK(p == std::vector<double>{1, 2, 3});
  CHECK(m == std::vector<double>(3, 7));
  CHECK(s.step == 0);
  CHECK(none.step == 0);
}

// ---------------------------------------------------------------------------------------------
// sampling.hpp
// ---------------------------------------------------------------------------------------------

namespace {

// splitmix64 written out (Vigna's splitmix64.c), independently of attn.
struct test_splitmix {
  std::uint64_t x;
  std::uint64_t next() {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
  }
};

// p_j = softmax(z/τ) in long double over the kept entries (kept[j]).
std::vector<ld> tempered(const std::vector<double>& z, double tau, const std::vector<bool>& kept) {
  ld m = -std::numeric_limits<ld>::infinity();
  for (std::size_t j = 0; j < z.size(); ++j)
    if (kept[j]) m = std::max(m, static_cast<ld>(z[j]));
  std::vector<ld> p(z.size(), 0);
  ld s = 0;
  for (std::size_t j = 0; j < z.size(); ++j)
    if (kept[j]) s += p[j] = std::exp((static_cast<ld>(z[j]) - m) / tau);
  for (ld& x : p) x /= s;
  return p;
}

// Draws N tokens and checks each count against N·p_j within 5 binomial standard deviations
// (√(N p (1 − p))): for a fair draw a miss has probability about 6e-7 per token (the seed is
// fixed, so the test is deterministic; 5σ keeps a correct sampler from failing by chance with
// any seed one would try), and a count where p_j = 0 must be 0.
void check_frequencies(const std::vector<double>& z, const attn::sampling_options& o,
                       const std::vector<ld>& p, std::uint64_t seed) {
  attn::random_generator gen{seed};
  const int N = 100000;
  std::vector<int> count(z.size());
  for (int i = 0; i < N; ++i) ++count[attn::sample(z, gen, o)];
  for (std::size_t j = 0; j < z.size(); ++j) {
    const double pj = static_cast<double>(p[j]);
    const double sigma = std::sqrt(N * pj * (1 - pj));
    INFO("token " << j << ": " << count[j] << " draws, expected " << N * pj);
    if (pj == 0)
      CHECK(count[j] == 0);
    else
      CHECK(std::abs(count[j] - N * pj) <= 5 * sigma);
  }
}

}  // namespace

TEST_CASE("random_generator is splitmix64", "[training][sampling]") {
  attn::random_generator gen{0};
  CHECK(gen.next() == 0xe220a8397b1dcdafu);  // splitmix64.c's first number from 0
  test_splitmix ref{12345};
  attn::random_generator g2{12345};
  for (int i = 0; i < 100; ++i) CHECK(g2.next() == ref.next());
  const double u = g2.uniform();
  CHECK(u == static_cast<double>(ref.next() >> 11) * 0x1p-53);
}

TEST_CASE("greedy: the first of the largest", "[training][sampling]") {
  constexpr double inf = std::numeric_limits<double>::infinity();
  CHECK(attn::greedy(std::vector<double>{1, 3, 2, 3}) == 1);
  CHECK(attn::greedy(std::vector<float>{-HUGE_VALF, -5, -HUGE_VALF}) == 1);
  CHECK(attn::greedy(std::vector<double>{0.0, -0.0}) == 0);
  CHECK_THROWS_AS(attn::greedy(std::vector<double>{1, std::nan("")}), attn::domain_error);
  CHECK_THROWS_AS(attn::greedy(std::vector<double>{1, inf}), attn::domain_error);
  CHECK_THROWS_AS(attn::greedy(std::vector<double>{-inf, -inf}), attn::domain_error);
  CHECK_THROWS_AS(attn::greedy(std::vector<double>{}), attn::dimension_error);
}

TEST_CASE("sample: frequencies follow softmax(z/τ), with top-k and top-p", "[training][sampling]") {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> z = {1, 0.5, 0, -1, -inf, 0.25};
  const std::vector<bool> all = {true, true, true, true, true, true};
  check_frequencies(z, {.temperature = 0.7}, tempered(z, 0.7, all), 1);
  check_frequencies(z, {.temperature = 2}, tempered(z, 2, all), 2);
  // top-k = 3 keeps 1, 0.5, 0.25
  check_frequencies(z, {.temperature = 1, .top_k = 3}, tempered(z, 1, {true, true, false, false, false, true}), 3);
  // ties at the k-th value are all kept: k = 2 over (3, 2, 2, 1) keeps three
  const std::vector<double> tie = {3, 2, 2, 1};
  check_frequencies(tie, {.top_k = 2}, tempered(tie, 1, {true, true, true, false}), 4);
  // top-p: τ = 1 over z gives p ≈ (.35, .21, .13, .05, 0, .27) (sorted .35, .27, .21, .13, .05):
  // the two largest hold .62 < 0.65, the three largest .83: top_p = 0.65 keeps 1, 0.5, 0.25
  const std::vector<ld> p = tempered(z, 1, all);
  CHECK(static_cast<double>(p[0] + p[5]) < 0.65);
  CHECK(static_cast<double>(p[0] + p[5] + p[1]) > 0.65);
  check_frequencies(z, {.top_p = 0.65}, tempered(z, 1, {true, true, false, false, false, true}), 5);
  // both: top-k 2 first (1, 0.25), then top-p 0.5 of what is left keeps only the largest
  check_frequencies(z, {.top_k = 2, .top_p = 0.5}, tempered(z, 1, {true, false, false, false, false, false}), 6);
}

TEST_CASE("sample: the radix select finds top-k's and top-p's threshold, as sorting does", "[training][sampling]") {
  // rows of few distinct values (ties) and −inf, weights small integers (sums exact, targets
  // half-way between them): the threshold is the key at which the sorted keys' weight, ties
  // included, first reaches the target
  test_splitmix r{99};
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t V = 1 + r.next() % 40;
    std::vector<double> z(V), w(V);
    for (std::size_t j = 0; j < V; ++j) {
      const std::uint64_t c = r.next() % 9;
      z[j] = c == 0 ? -std::numeric_limits<double>::infinity() : static_cast<double>(c) - 4.5;
      w[j] = static_cast<double>(1 + r.next() % 5);
    }
    const auto key = [&](std::size_t j) { return attn::detail::ordered_key(z[j]); };
    std::vector<std::size_t> order(V);
    for (std::size_t j = 0; j < V; ++j) order[j] = j;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return z[a] > z[b]; });
    const std::size_t k = 1 + r.next() % V;
    CHECK(attn::detail::threshold_key(V, key, [](std::size_t) { return 1.0; }, static_cast<double>(k)) ==
          key(order[k - 1]));
    double total = 0;
    for (const double x : w) total += x;
    const double target = std::floor(static_cast<double>(r.next() % 1000) / 1000 * total) + 0.5;
    double run = 0;
    std::uint64_t want = 0;
    for (std::size_t i = 0; i < V; ++i) {
      run += w[order[i]];
      if (run >= target && (i + 1 == V || z[order[i + 1]] != z[order[i]])) {
        want = key(order[i]);
        break;
      }
    }
    INFO("trial " << trial << ", V = " << V);
    CHECK(attn::detail::threshold_key(V, key, [&](std::size_t j) { return w[j]; }, target) == want);
  }
}

TEST_CASE("sample: the same seed gives the same tokens, each the inverse CDF of its uniform",
          "[training][sampling]") {
  const std::vector<double> z = {0.3, -1.2, 2.0, 0.7, 0.0};
  attn::random_generator a{42}, b{42};
  test_splitmix ref{42};
  const std::vector<ld> p = tempered(z, 0.9, std::vector<bool>(5, true));
  for (int i = 0; i < 50; ++i) {
    const std::size_t t = attn::sample(z, a, {.temperature = 0.9});
    CHECK(attn::sample(z, b, {.temperature = 0.9}) == t);
    // the token whose CDF interval holds u (a u within 1e-12 of an edge would make the check
    // depend on rounding: none of these 50 is)
    const ld u = static_cast<ld>(ref.next() >> 11) * 0x1p-53L;
    ld run = 0;
    std::size_t want = 0;
    while (want < 4 && u >= run + p[want]) run += p[want++];
    CHECK(t == want);
  }
  // τ = 0 is greedy and draws nothing
  const std::uint64_t before = a.state();
  CHECK(attn::sample(z, a, {.temperature = 0}) == 2);
  CHECK(a.state() == before);
}

TEST_CASE("sample: errors; the generator does not advance", "[training][sampling][errors]") {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> z = {0, 1, 2};
  attn::random_generator gen{7};
  const std::uint64_t before = gen.state();
  CHECK_THROWS_AS(attn::sample(z, gen, {.temperature = -1}), attn::domain_error);
  CHECK_THROWS_AS(attn::sample(z, gen, {.temperature = inf}), attn::domain_error);
  try {
    (void)attn::sample(z, gen, {.top_k = 4});
    FAIL("no throw");
  } catch (const attn::domain_error& e) {
    CHECK(std::string(e.what()) == "attn::sample: top_k is 4 but there are 3 logits");
  }
  CHECK_THROWS_AS(attn::sample(z, gen, {.top_p = 0}), attn::domain_error);
  CHECK_THROWS_AS(attn::sample(z, gen, {.top_p = 1.5}), attn::domain_error);
  CHECK_THROWS_AS(attn::sample(std::vector<double>{0, std::nan("")}, gen), attn::domain_error);
  CHECK_THROWS_AS(attn::sample(std::vector<double>{0, inf}, gen), attn::domain_error);
  CHECK_THROWS_AS(attn::sample(std::vector<double>{-inf}, gen), attn::domain_error);
  CHECK(gen.state() == before);
  try {
    (void)attn::sample(std::vector<double>{0, std::nan("")}, gen);
  } catch (const attn::domain_error& e) {
    CHECK(std::string(e.what()).find("attn::sample: logit 1 is") == 0);
  }
}

// ---------------------------------------------------------------------------------------------
// PyTorch's own numbers (tests/torch/training.py; the CTest test pytorch_training runs this
// hidden case on the file it writes, and is skipped where `import torch` fails). Each side is
// within the bound of the long-double tests above of the exact result (PyTorch's kernels take the
// same steps: log_softmax, then exp; torch.optim's single-tensor loops; the norm of the norms),
// so the two are held to twice that bound.
// ---------------------------------------------------------------------------------------------

namespace {

std::map<std::string, std::vector<double>> read_training_fixture(const char* path) {
  std::ifstream in(path);
  std::map<std::string, std::vector<double>> f;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string name;
    std::size_t n = 0;
    ls >> name;
    if (name == "route") continue;
    ls >> n;
    std::vector<double> v(n);
    for (double& x : v) ls >> x;
    f[name] = v;
  }
  return f;
}

template <class T>
void check_against_torch(const std::map<std::string, std::vector<double>>& f, const char* tag) {
  const double u = unit_roundoff<T>;
  const auto at = [&](const std::string& name) -> const std::vector<double>& {
    INFO("fixture entry " << name);
    REQUIRE(f.count(name) == 1);
    return f.at(name);
  };
  // cross-entropy
  const std::size_t rows = 5, V = 7;
  attn::Matrix<T> Z(rows, V);
  for (std::size_t i = 0; i < rows * V; ++i) Z.data()[i] = static_cast<T>(at("ce_logits")[i]);
  for (const std::string itag : {"", "_ignore2"}) {
    const std::int64_t ignore = itag.empty() ? -100 : 2;
    std::vector<std::int64_t> y;
    for (const double t : at("ce" + itag + "_targets")) y.push_back(static_cast<std::int64_t>(t));
    std::vector<T> losses(rows);
    attn::Matrix<T> G(rows, V);
    const T L = attn::cross_entropy(Z, y, losses, {.ignore_index = ignore});
    (void)attn::cross_entropy_backward(Z, y, G, {.ignore_index = ignore});
    const std::string pre = "ce" + itag + "_";
    const double mean = at(pre + "mean_" + tag)[0];
    CHECK(std::abs(static_cast<double>(L) - mean) <= 2 * (2 * (V + 4) * u * (1 + mean) + u * mean));
    double C = 0;
    for (const std::int64_t t : y) C += t != ignore ? 1 : 0;
    for (std::size_t t = 0; t < rows; ++t) {
      const double l = at(pre + "none_" + tag)[t];
      CHECK(std::abs(static_cast<double>(losses[t]) - l) <= 2 * 2 * (V + 4) * u * (1 + l));
      for (std::size_t j = 0; j < V; ++j) {
        const double g = at(pre + "grad_" + tag)[t * V + j];
        CHECK(std::abs(static_cast<double>(G(t, j)) - g) <= 2 * ((V + 6) * u * std::abs(g) + 4 * u / C));
      }
    }
  }
  // the optimizers, 5 steps from the same p₀ and gradients
  const std::size_t n = 6;
  const int steps = 5;
  const std::vector<double>& p0 = at("opt_p0");
  const std::vector<double>& gs = at("opt_grads");
  const auto run = [&](const std::string& name, auto&& step_once) {
    std::vector<T> p(n), b(n), m(n), v(n);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p0[i]);
    for (int k = 0; k < steps; ++k) {
      std::vector<T> g(n);
      for (std::size_t i = 0; i < n; ++i) g[i] = static_cast<T>(gs[static_cast<std::size_t>(k) * n + i]);
      step_once(p, g, b, m, v);
    }
    INFO(name << " " << tag);
    const std::vector<double>& want = at(name + "_p_" + tag);
    for (std::size_t i = 0; i < n; ++i) {
      // SGD's bound of the reference test (8·10·2⁶·u·(|p| + 3)); AdamW's is smaller
      CHECK(std::abs(static_cast<double>(p[i]) - want[i]) <= 2 * 8 * 10 * 64 * u * (std::abs(want[i]) + 3));
    }
    // the state: b ≤ 10·max|g|·… as above; m a weighted mean of |g| ≤ 2.2 (4 roundings a step),
    // v of g² ≤ 4.9 (5 a step)
    if (f.count(name + "_b_" + tag) != 0)
      for (std::size_t i = 0; i < n; ++i)
        CHECK(std::abs(static_cast<double>(b[i]) - at(name + "_b_" + tag)[i]) <= 2 * 8 * 10 * 64 * u * 25);
    if (f.count(name + "_m_" + tag) != 0)
      for (std::size_t i = 0; i < n; ++i) {
        CHECK(std::abs(static_cast<double>(m[i]) - at(name + "_m_" + tag)[i]) <= 2 * steps * 4 * u * 2.2);
        CHECK(std::abs(static_cast<double>(v[i]) - at(name + "_v_" + tag)[i]) <= 2 * steps * 5 * u * 4.9);
      }
  };
  const auto sgd = [&](attn::sgd_options o) {
    return [o, state = attn::sgd_state<T>{}](std::vector<T>& p, const std::vector<T>& g, std::vector<T>& b,
                                             std::vector<T>&, std::vector<T>&) mutable {
      state.momentum = o.momentum != 0 ? std::span<T>(b) : std::span<T>();
      attn::sgd_step(p, g, state, o);
    };
  };
  const auto adamw = [&](attn::adamw_options o) {
    return [o, state = attn::adamw_state<T>{}](std::vector<T>& p, const std::vector<T>& g, std::vector<T>&,
                                               std::vector<T>& m, std::vector<T>& v) mutable {
      state.m = m;
      state.v = v;
      attn::adamw_step(p, g, state, o);
    };
  };
  run("sgd_plain", sgd({.lr = 0.1}));
  run("sgd_momentum", sgd({.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}));
  run("sgd_nesterov", sgd({.lr = 0.02, .momentum = 0.8, .weight_decay = 0.1, .nesterov = true}));
  run("adamw_default", adamw({}));
  run("adamw_custom", adamw({.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1}));
  // clip_grad_norm_
  for (const std::string mtag : {"1", "100"}) {
    std::vector<T> g1, g2;
    for (const double x : at("clip_g1")) g1.push_back(static_cast<T>(x));
    for (const double x : at("clip_g2")) g2.push_back(static_cast<T>(x));
    const std::span<T> both[2] = {g1, g2};
    const T total = attn::clip_grad_norm<T>(both, std::stod(mtag));
    const double want = at("clip" + mtag + "_total_" + tag)[0];
    CHECK(std::abs(static_cast<double>(total) - want) <= 2 * 8 * u * want);  // sums of 5 squares, √
    const std::vector<double>& wg = at("clip" + mtag + "_grads_" + tag);
    for (std::size_t i = 0; i < 5; ++i) {
      const double got = static_cast<double>(i < 3 ? g1[i] : g2[i - 3]);
      CHECK(std::abs(got - wg[i]) <= 2 * 12 * u * std::abs(wg[i]));  // + the coefficient's 3u, the product's u
    }
  }
}

}  // namespace

TEST_CASE("pytorch: the training file named by ATTN_TORCH_FIXTURE", "[.][torch]") {
  // run by the CTest test pytorch_training (tests/torch/training.py --out … --check)
  const char* path = std::getenv("ATTN_TORCH_FIXTURE");
  if (path == nullptr) FAIL("ATTN_TORCH_FIXTURE is not set: tests/torch/training.py --check runs this");
  const auto f = read_training_fixture(path);
  REQUIRE(!f.empty());
  check_against_torch<double>(f, "f64");
  check_against_torch<float>(f, "f32");
}

TEST_CASE("docs/training.md: a training loop on the three pieces, as the page shows it", "[training][docs]") {
  std::vector<float> losses;
  // docs/training.md:loop:begin
  const std::size_t T = 4, V = 5;
  std::vector<float> z(T * V, 0.0f), dz(T * V), m(T * V), v(T * V);  // the "model": its logits
  const std::vector<std::int64_t> next = {1, 2, 3, 4};                // each position's next token
  const attn::MatrixView<float> Z(z.data(), T, V), dZ(dz.data(), T, V);
  attn::adamw_state<float> state{m, v};
  for (int step = 0; step < 100; ++step) {
    const float loss = attn::cross_entropy_backward(Z, next, dZ);  // the mean; dZ = (softmax − onehot)/4
    attn::clip_grad_norm(dz, 1.0);
    attn::adamw_step(z, dz, state, {.lr = 0.1, .weight_decay = 0});
    losses.push_back(loss);
  }
  attn::random_generator gen{42};
  const std::size_t token = attn::sample(Z.row(0), gen, {.temperature = 0.8, .top_k = 3});
  // docs/training.md:loop:end
  REQUIRE(attn_test::quoted_in(__FILE__, "docs/training.md", "// docs/training.md:loop:begin\n",
                               "  // docs/training.md:loop:end"));
  // The first loss is ln 5 (every logit 0). Every gradient entry keeps its sign along the way
  // ((p_j − 1)/4 < 0 at the target, p_j/4 > 0 elsewhere; clipping scales by a positive number),
  // so m keeps it too and each AdamW step raises the target's logit and lowers the others: the
  // loss never rises (strictly falls while a step's change is above float's rounding: the first
  // 50 steps, where the loss is above 1e-3 and each step moves a logit by about lr = 0.1).
  CHECK(std::abs(losses[0] - std::log(5.0f)) <= 4 * std::numeric_limits<float>::epsilon());
  for (std::size_t k = 1; k < losses.size(); ++k) {
    INFO("step " << k);
    CHECK(losses[k] <= losses[k - 1]);
    if (k < 50) CHECK(losses[k] < losses[k - 1]);
  }
  CHECK(token < 5);
}
