// The linear layer and the feed-forward layer (attn/linear.hpp, attn/feed_forward.hpp): values
// against the formulas written out here in long double, every gradient against central
// differences (gradcheck.hpp's check_vjp on each input flattened), weights in attn's layout and
// in PyTorch's (out × in, through attn::transposed), accumulating, the forward/backward pair
// checked, errors. Tolerances: a product of k terms in T is within k·ε·Σ|terms| of the exact sum
// (plus one rounding for a bias); the activation adds its own (test_activations.cpp) and, through
// W₂, its slope times that of H⁻.
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "attn/gradcheck.hpp"
#include "attn_catch.hpp"

using attn::Matrix;
using ld = long double;

namespace {

template <class T>
constexpr ld eps() {
  return static_cast<ld>(std::numeric_limits<T>::epsilon());
}

template <class T>
std::vector<T> random_vector(std::size_t n, std::mt19937_64& rng, double sd = 1) {
  std::normal_distribution<double> normal(0, sd);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(normal(rng));
  return v;
}

// A weight of in × out numbers stored as attn's rows (in × out) or PyTorch's (out × in).
template <class T>
struct weight {
  std::size_t in, out;
  bool pytorch;
  std::vector<T> numbers;
  T at(std::size_t i, std::size_t o) const { return pytorch ? numbers[o * in + i] : numbers[i * out + o]; }
  attn::StridedMatrixView<const T> view() const {
    if (pytorch) return attn::transposed(attn::MatrixView<const T>(numbers.data(), out, in));
    return attn::MatrixView<const T>(numbers.data(), in, out);
  }
  attn::StridedMatrixView<T> view_of(std::vector<T>& g) const {
    if (pytorch) return attn::transposed(attn::MatrixView<T>(g.data(), out, in));
    return attn::MatrixView<T>(g.data(), in, out);
  }
};

template <class T>
weight<T> random_weight(std::size_t in, std::size_t out, bool pytorch, std::mt19937_64& rng) {
  return {in, out, pytorch, random_vector<T>(in * out, rng, 1 / std::sqrt(static_cast<double>(in)))};
}

// Σ_k a_k b_k in long double and Σ |a_k b_k|
struct sum_mag {
  ld sum = 0, mag = 0;
  void add(ld a, ld b) {
    sum += a * b;
    mag += std::abs(a * b);
  }
};

}  // namespace

TEMPLATE_TEST_CASE("linear: X W + b in both layouts, against long double", "[linear]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(101);
  for (const bool pytorch : {false, true}) {
    const std::size_t rows = 5, in = 7, out = 3;
    const std::vector<T> X = random_vector<T>(rows * in, rng), b = random_vector<T>(out, rng);
    const weight<T> W = random_weight<T>(in, out, pytorch, rng);
    const attn::MatrixView<const T> x(X.data(), rows, in);
    const Matrix<T> Y = attn::linear(x, {.W = W.view(), .b = b});
    Matrix<T> Y2(rows, out, T(1));
    attn::linear(x, {.W = W.view(), .b = b}, Y2, true);  // accumulate: Y2 = 1 + X W + b
    for (std::size_t t = 0; t < rows; ++t)
      for (std::size_t o = 0; o < out; ++o) {
        sum_mag s;
        for (std::size_t i = 0; i < in; ++i) s.add(X[t * in + i], W.at(i, o));
        const ld want = s.sum + b[o], bound = (in + 2) * eps<T>() * (s.mag + std::abs(static_cast<ld>(b[o])));
        INFO((pytorch ? "PyTorch's layout" : "attn's layout") << ", (" << t << ", " << o << ")");
        CHECK(std::abs(static_cast<ld>(Y(t, o)) - want) <= bound);
        CHECK(std::abs(static_cast<ld>(Y2(t, o)) - (want + 1)) <= bound + 2 * eps<T>() * (1 + std::abs(want)));
      }
  }
}

TEMPLATE_TEST_CASE("linear_backward: every gradient against central differences, both layouts, accumulating",
                   "[linear][derivatives]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(102);
  for (const bool pytorch : {false, true}) {
    INFO((pytorch ? "PyTorch's layout" : "attn's layout"));
    const std::size_t rows = 4, in = 3, out = 5;
    const std::vector<T> X = random_vector<T>(rows * in, rng), b = random_vector<T>(out, rng),
                         G = random_vector<T>(rows * out, rng);
    const weight<T> W = random_weight<T>(in, out, pytorch, rng);
    std::vector<T> dX(rows * in, T(3)), dW(in * out, T(3)), db(out, T(3));
    attn::linear_backward(attn::MatrixView<const T>(X.data(), rows, in), {.W = W.view(), .b = b},
                          attn::MatrixView<const T>(G.data(), rows, out),
                          {.input = {dX.data(), rows, in}, .W = W.view_of(dW), .b = db});
    // L = Σ G ∘ (X W + b), each input flattened
    const auto y_of = [&](const std::vector<T>& x, const weight<T>& w, const std::vector<T>& bias) {
      return attn::linear(attn::MatrixView<const T>(x.data(), rows, in), {.W = w.view(), .b = bias});
    };
    const auto flat = [](const Matrix<T>& m) { return std::vector<T>(m.data(), m.data() + m.size()); };
    const T tol = attn::gradcheck_tolerance<T>();
    CHECK(attn::check_vjp([&](std::span<const T> v) { return flat(y_of(std::vector<T>(v.begin(), v.end()), W, b)); }, X,
                          G, dX)
              .passed(tol));
    CHECK(attn::check_vjp(
              [&](std::span<const T> v) {
                weight<T> w = W;
                w.numbers.assign(v.begin(), v.end());
                return flat(y_of(X, w, b));
              },
              W.numbers, G, dW)
              .passed(tol));
    CHECK(attn::check_vjp([&](std::span<const T> v) { return flat(y_of(X, W, std::vector<T>(v.begin(), v.end()))); },
                          b, G, db)
              .passed(tol));
    // accumulate: added to what they hold (each entry of ∂L/∂X and ∂L/∂W one sum plus one addition)
    std::vector<T> dX2(rows * in, T(0.5)), dW2(in * out, T(0.5)), db2(out, T(0.5));
    attn::linear_backward(attn::MatrixView<const T>(X.data(), rows, in), {.W = W.view(), .b = b},
                          attn::MatrixView<const T>(G.data(), rows, out),
                          {.input = {dX2.data(), rows, in}, .W = W.view_of(dW2), .b = db2, .accumulate = true});
    for (std::size_t k = 0; k < dX.size(); ++k)
      CHECK(std::abs(static_cast<ld>(dX2[k]) - (static_cast<ld>(dX[k]) + 0.5L)) <= 32 * eps<T>() * (1 + std::abs(static_cast<ld>(dX[k]))));
    for (std::size_t k = 0; k < dW.size(); ++k)
      CHECK(std::abs(static_cast<ld>(dW2[k]) - (static_cast<ld>(dW[k]) + 0.5L)) <= 32 * eps<T>() * (1 + std::abs(static_cast<ld>(dW[k]))));
    for (std::size_t k = 0; k < db.size(); ++k)
      CHECK(std::abs(static_cast<ld>(db2[k]) - (static_cast<ld>(db[k]) + 0.5L)) <= 32 * eps<T>() * (1 + std::abs(static_cast<ld>(db[k]))));
  }
}

TEST_CASE("linear: bad input is refused by name, nothing written", "[linear][errors]") {
  const Matrix<double> X(2, 3, 1.0), W(3, 4, 1.0), W2(2, 4, 1.0);
  const std::vector<double> b3(3, 1.0);
  Matrix<double> Y(2, 4, 9.0);
  REQUIRE_THROWS_MATCHES(attn::linear(X, {.W = attn::MatrixView<const double>(W2.view())}, Y), attn::dimension_error,
                         Catch::Matchers::Message("attn::linear: columns of X is 3 but rows of W is 2"));
  REQUIRE_THROWS_MATCHES(attn::linear(X, {.W = attn::MatrixView<const double>(W.view()), .b = b3}, Y),
                         attn::dimension_error, Catch::Matchers::Message("attn::linear: size of b is 3 but columns of W is 4"));
  Matrix<double> small(2, 3);
  REQUIRE_THROWS_MATCHES(attn::linear(X, {.W = attn::MatrixView<const double>(W.view())}, small), attn::dimension_error,
                         Catch::Matchers::Message("attn::linear: the output is 2x3 but should be 2x4"));
  for (std::size_t k = 0; k < Y.size(); ++k) CHECK(Y.data()[k] == 9.0);
  // the output over X
  Matrix<double> Z(2, 3, 1.0);
  const Matrix<double> Wsq(3, 3, 1.0);
  REQUIRE_THROWS_AS(attn::linear(Z, {.W = attn::MatrixView<const double>(Wsq.view())}, Z), attn::overlap_error);
  // the backward: dY of another shape, a gradient over an input
  Matrix<double> dY(2, 3), dX(2, 3);
  REQUIRE_THROWS_MATCHES(attn::linear_backward(X, {.W = attn::MatrixView<const double>(W.view())}, dY,
                                               {.input = dX.view()}),
                         attn::dimension_error,
                         Catch::Matchers::Message("attn::linear_backward: dL/dY is 2x3 but should be 2x4"));
  REQUIRE_THROWS_AS(attn::linear_backward(X, {.W = attn::MatrixView<const double>(W.view())}, Y,
                                          {.input = attn::MatrixView<double>(const_cast<double*>(X.data()), 2, 3)}),
                    attn::overlap_error);
}

TEMPLATE_TEST_CASE("feed_forward: act(X W1 + b1) W2 + b2 against long double; the hidden layer in the cache",
                   "[feed_forward]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(103);
  for (const auto act : {attn::activation::relu, attn::activation::gelu, attn::activation::gelu_tanh})
    for (const bool pytorch : {false, true}) {
      const std::size_t rows = 3, dm = 4, dff = 6;
      const std::vector<T> X = random_vector<T>(rows * dm, rng), b1 = random_vector<T>(dff, rng),
                           b2 = random_vector<T>(dm, rng);
      const weight<T> W1 = random_weight<T>(dm, dff, pytorch, rng), W2 = random_weight<T>(dff, dm, pytorch, rng);
      attn::feed_forward_cache<T> cache;
      const attn::feed_forward_parameters<T> p{.W_1 = W1.view(), .b_1 = b1, .W_2 = W2.view(), .b_2 = b2, .act = act};
      const Matrix<T> Y = attn::feed_forward(attn::MatrixView<const T>(X.data(), rows, dm), p, cache);
      for (std::size_t t = 0; t < rows; ++t) {
        std::vector<ld> h(dff), hbound(dff);
        for (std::size_t f = 0; f < dff; ++f) {
          sum_mag s;
          for (std::size_t i = 0; i < dm; ++i) s.add(X[t * dm + i], W1.at(i, f));
          const ld pre = s.sum + b1[f];
          const ld pre_bound = (dm + 2) * eps<T>() * (s.mag + std::abs(static_cast<ld>(b1[f])));
          CHECK(std::abs(static_cast<ld>(cache.pre(t, f)) - pre) <= pre_bound);
          // act(pre) within act's rounding and its slope (≤ 1.13) times pre's error
          h[f] = attn::activate(act, static_cast<ld>(cache.pre(t, f)));
          hbound[f] = 16 * eps<T>() * (std::abs(h[f]) + std::abs(static_cast<ld>(cache.pre(t, f)))) + 1.13L * pre_bound;
          CHECK(std::abs(static_cast<ld>(cache.hidden(t, f)) - h[f]) <= 16 * eps<T>() * (std::abs(h[f]) + 1e-30L));
        }
        for (std::size_t o = 0; o < dm; ++o) {
          sum_mag s;
          ld carried = 0;
          for (std::size_t f = 0; f < dff; ++f) {
            s.add(h[f], W2.at(f, o));
            carried += hbound[f] * std::abs(static_cast<ld>(W2.at(f, o)));
          }
          INFO("activation " << static_cast<int>(act) << ", (" << t << ", " << o << ")");
          CHECK(std::abs(static_cast<ld>(Y(t, o)) - (s.sum + b2[o])) <=
                (dff + 2) * eps<T>() * (s.mag + std::abs(static_cast<ld>(b2[o]))) + carried);
        }
      }
    }
}

TEMPLATE_TEST_CASE("feed_forward_backward: every gradient against central differences", "[feed_forward][derivatives]",
                   double, long double) {
  // (ReLU's kink: the inputs keep H⁻ away from 0 by more than the difference step)
  using T = TestType;
  std::mt19937_64 rng(104);
  for (const auto act : {attn::activation::relu, attn::activation::gelu, attn::activation::gelu_tanh})
    for (const bool pytorch : {false, true}) {
      INFO("activation " << static_cast<int>(act) << (pytorch ? ", PyTorch's layout" : ""));
      const std::size_t rows = 3, dm = 3, dff = 5, dout = 2;
      std::vector<T> X = random_vector<T>(rows * dm, rng), b1 = random_vector<T>(dff, rng),
                     b2 = random_vector<T>(dout, rng), G = random_vector<T>(rows * dout, rng);
      weight<T> W1 = random_weight<T>(dm, dff, pytorch, rng), W2 = random_weight<T>(dff, dout, pytorch, rng);
      const auto forward = [&](const std::vector<T>& x, const weight<T>& w1, const std::vector<T>& c1,
                               const weight<T>& w2, const std::vector<T>& c2) {
        attn::feed_forward_cache<T> cache;
        const Matrix<T> y = attn::feed_forward(attn::MatrixView<const T>(x.data(), rows, dm),
                                               {.W_1 = w1.view(), .b_1 = c1, .W_2 = w2.view(), .b_2 = c2, .act = act},
                                               cache);
        return std::vector<T>(y.data(), y.data() + y.size());
      };
      {  // keep every H⁻ at least 1e-3 from ReLU's kink
        attn::feed_forward_cache<T> cache;
        (void)attn::feed_forward(attn::MatrixView<const T>(X.data(), rows, dm),
                                 {.W_1 = W1.view(), .b_1 = b1, .W_2 = W2.view(), .b_2 = b2, .act = act}, cache);
        for (std::size_t t = 0; t < rows; ++t)
          for (std::size_t f = 0; f < dff; ++f)
            if (std::abs(cache.pre(t, f)) < T(1e-2)) b1[f] += T(0.05);
      }
      attn::feed_forward_cache<T> cache;
      const attn::feed_forward_parameters<T> p{.W_1 = W1.view(), .b_1 = b1, .W_2 = W2.view(), .b_2 = b2, .act = act};
      (void)attn::feed_forward(attn::MatrixView<const T>(X.data(), rows, dm), p, cache);
      std::vector<T> dX(X.size()), dW1(W1.numbers.size()), db1(dff), dW2(W2.numbers.size()), db2(dout);
      attn::feed_forward_backward(attn::MatrixView<const T>(X.data(), rows, dm), p, cache,
                                  attn::MatrixView<const T>(G.data(), rows, dout),
                                  {.input = {dX.data(), rows, dm}, .W_1 = W1.view_of(dW1), .b_1 = db1,
                                   .W_2 = W2.view_of(dW2), .b_2 = db2});
      const T tol = attn::gradcheck_tolerance<T>();
      const auto vec = [](std::span<const T> v) { return std::vector<T>(v.begin(), v.end()); };
      CHECK(attn::check_vjp([&](std::span<const T> v) { return forward(vec(v), W1, b1, W2, b2); }, X, G, dX).passed(tol));
      CHECK(attn::check_vjp(
                [&](std::span<const T> v) {
                  weight<T> w = W1;
                  w.numbers = vec(v);
                  return forward(X, w, b1, W2, b2);
                },
                W1.numbers, G, dW1)
                .passed(tol));
      CHECK(attn::check_vjp([&](std::span<const T> v) { return forward(X, W1, vec(v), W2, b2); }, b1, G, db1).passed(tol));
      CHECK(attn::check_vjp(
                [&](std::span<const T> v) {
                  weight<T> w = W2;
                  w.numbers = vec(v);
                  return forward(X, W1, b1, w, b2);
                },
                W2.numbers, G, dW2)
                .passed(tol));
      CHECK(attn::check_vjp([&](std::span<const T> v) { return forward(X, W1, b1, W2, vec(v)); }, b2, G, db2).passed(tol));
    }
}

TEST_CASE("feed_forward_backward: another forward's input or parameters are refused, naming which",
          "[feed_forward][errors]") {
  std::mt19937_64 rng(105);
  const std::size_t rows = 2, dm = 3, dff = 4;
  std::vector<double> X = random_vector<double>(rows * dm, rng), W1 = random_vector<double>(dm * dff, rng),
                      W2 = random_vector<double>(dff * dm, rng), G = random_vector<double>(rows * dm, rng);
  attn::feed_forward_parameters<double> p{.W_1 = attn::MatrixView<const double>(W1.data(), dm, dff),
                                          .W_2 = attn::MatrixView<const double>(W2.data(), dff, dm)};
  attn::feed_forward_cache<double> cache;
  std::vector<double> dX(rows * dm, 7.0);
  const attn::feed_forward_gradients<double> g{.input = {dX.data(), rows, dm}};
  const attn::MatrixView<const double> x(X.data(), rows, dm), dY(G.data(), rows, dm);
  REQUIRE_THROWS_MATCHES(attn::feed_forward_backward(x, p, cache, dY, g), attn::forward_mismatch_error,
                         Catch::Matchers::Message("attn::feed_forward_backward: the cache holds no forward of these "
                                                  "shapes (call feed_forward first)"));
  (void)attn::feed_forward(x, p, cache);
  const std::string tail = " is not the forward's (the backward must be given its forward's inputs and parameters)";
  attn::feed_forward_parameters<double> q = p;
  q.act = attn::activation::gelu;
  REQUIRE_THROWS_MATCHES(attn::feed_forward_backward(x, q, cache, dY, g), attn::forward_mismatch_error,
                         Catch::Matchers::Message("attn::feed_forward_backward: the activation" + tail));
  W2[3] += 1;  // a weight changed in place
  REQUIRE_THROWS_MATCHES(attn::feed_forward_backward(x, p, cache, dY, g), attn::forward_mismatch_error,
                         Catch::Matchers::Message("attn::feed_forward_backward: W_2" + tail));
  W2[3] -= 1;
  X[0] += 1;
  REQUIRE_THROWS_MATCHES(attn::feed_forward_backward(x, p, cache, dY, g), attn::forward_mismatch_error,
                         Catch::Matchers::Message("attn::feed_forward_backward: X" + tail));
  X[0] -= 1;
  for (const double v : dX) CHECK(v == 7.0);
  attn::feed_forward_backward(x, p, cache, dY, g);  // the forward's own: accepted
  CHECK(dX[0] != 7.0);
}
