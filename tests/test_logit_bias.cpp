// The additive bias on the logits (attn/logit_bias.hpp): Z = β·S + B + A inside the tiled kernel
// and its exact rows, forward and backward. Against the formula in long double with a bound
// derived from the roundings; ALiBi inside the tiles against the same bias stored as a matrix
// (attn::alibi_bias) bit for bit; a zero bias against none and a −inf bias against a mask (PyTorch's
// float attn_mask convention); every gradient, ∂L/∂B included, against central differences, in
// the tiles and in the exact rows (d_k > 256); threads against one thread bit for bit; the
// non-finite rules and the errors.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "attn/attn.hpp"
#include "attn/gradcheck.hpp"
#include "attn_catch.hpp"
#include "random_data.hpp"

using attn::Matrix;
using attn::MatrixView;

namespace {

using attn_test::random_matrix;
using attn_test::same_bits;

template <class T>
std::span<const T> flat(const Matrix<T>& m) {
  return {m.data(), m.size()};
}

// What a row may see: the key mask (or none) and causal.
struct allowed {
  const std::vector<char>* keys = nullptr;
  bool causal = false;
  std::size_t tq = 0, n = 0;
  bool operator()(std::size_t t, std::size_t j) const {
    if (causal && j + tq > t + n) return false;
    return keys == nullptr || (*keys)[j] != 0;
  }
};

// The forward against z_tj = β·s_tj + B_tj − m·(p_t − j) in long double. The kernel's z differs by
// Δz ≤ |β|·Δs + 2u·(|β s| + |B| + |a|)·2 (Δs = γ_{d+1}·scale·Σ|q k|: the score's sum; then the
// roundings of β·s, a = m·(p − j), and the two sums, each at most u of a magnitude below the sum
// of the three); from there as test_sdpa.cpp's require_close: the weights move by
// ρ = 2·max Δz + (M + n + 2·blocks + 16)·ε with M = max |z|, the output by its own sum besides.
template <class T>
void require_close(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V, const Matrix<T>* B,
                   T slope, double beta, const allowed& ok, const Matrix<T>& Y, const std::vector<T>& L) {
  const std::size_t tq = Q.rows(), n = K.rows(), d = K.cols(), dv = V.cols();
  const long double scale = static_cast<long double>(T(1) / std::sqrt(static_cast<T>(d)));
  const long double u = std::numeric_limits<T>::epsilon() / 2.0L;
  const long double twice = std::is_same_v<T, long double> ? 2 : 1;  // the reference rounds too
  const long double eps = 2 * u * twice;
  const long double gamma = static_cast<long double>(d + 1) * u / (1 - static_cast<long double>(d + 1) * u);
  const long double tiny = static_cast<long double>(std::numeric_limits<T>::min());
  for (std::size_t t = 0; t < tq; ++t) {
    std::vector<long double> z(n), w(n, 0);
    long double m = -std::numeric_limits<long double>::infinity(), dz = 0, M = 0;
    for (std::size_t j = 0; j < n; ++j) {
      long double s = 0, mag = 0;
      for (std::size_t i = 0; i < d; ++i) {
        s += static_cast<long double>(Q(t, i)) * K(j, i);
        mag += std::abs(static_cast<long double>(Q(t, i)) * K(j, i));
      }
      const long double bs = static_cast<long double>(beta) * scale * s;
      const long double b = B != nullptr ? static_cast<long double>((*B)(t, j)) : 0.0L;
      const long double p = static_cast<long double>(t + n - tq);
      const long double a = -static_cast<long double>(slope) * (p - static_cast<long double>(j));
      z[j] = bs + b + a;
      if (!ok(t, j)) continue;
      m = std::max(m, z[j]);
      M = std::max(M, std::abs(z[j]));
      dz = std::max(dz, twice * (std::abs(static_cast<long double>(beta)) * gamma * scale * mag +
                                 4 * u * (std::abs(bs) + std::abs(b) + std::abs(a))));
    }
    long double sum = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (ok(t, j)) sum += w[j] = std::exp(z[j] - m);
    if (sum == 0) {  // no key kept: the all-masked policy's zeros
      for (std::size_t i = 0; i < dv; ++i) REQUIRE(Y(t, i) == T(0));
      REQUIRE(L[t] == -std::numeric_limits<T>::infinity());
      continue;
    }
    const long double blocks = static_cast<long double>((n + 15) / 16);
    const long double rho = 2 * dz + (M + static_cast<long double>(n) + 2 * blocks + 16) * eps;
    INFO("t = " << t << ", rho = " << static_cast<double>(rho));
    for (std::size_t i = 0; i < dv; ++i) {
      long double want = 0, mag = 0;
      for (std::size_t j = 0; j < n; ++j) {
        want += w[j] / sum * V(j, i);
        mag += w[j] / sum * std::abs(static_cast<long double>(V(j, i)));
      }
      REQUIRE(std::abs(static_cast<long double>(Y(t, i)) - want) <=
              (rho + static_cast<long double>(n + 2) * eps) * mag + eps * std::abs(want) + tiny);
    }
    const long double lw = m + std::log(sum);
    REQUIRE(std::abs(static_cast<long double>(L[t]) - lw) <=
            dz + (M + static_cast<long double>(n) + 8) * eps + eps * std::abs(lw));
  }
}

template <class T>
void check_against_formula() {
  std::mt19937_64 rng(777);
  const std::vector<T> slopes = attn::alibi_slopes<T>(6);
  for (const std::size_t tq : {1u, 7u, 131u})
    for (const std::size_t n : {131u, 257u})
      for (const std::size_t d : {16u, 33u})
        for (int c = 0; c < 6; ++c) {
          const Matrix<T> Q = random_matrix<T>(tq, d, rng), K = random_matrix<T>(n, d, rng),
                          V = random_matrix<T>(n, d + 3, rng), B = random_matrix<T>(tq, n, rng, 2.0);
          std::vector<char> keys(n, 1);
          for (std::size_t j = 0; j < n; j += 3) keys[j] = 0;
          attn::options opt{.beta = c % 2 == 0 ? 1.0 : 1.7};
          allowed ok{nullptr, false, tq, n};
          if (c >= 2) opt.causal = ok.causal = true;
          if (c >= 4) {
            opt.mask = keys;
            ok.keys = &keys;
          }
          const bool matrix = c != 1, alibi = c != 0;  // the matrix, ALiBi, or both
          const T slope = alibi ? slopes[static_cast<std::size_t>(c)] : T(0);
          INFO("T = " << tq << ", n = " << n << ", d = " << d << ", case " << c);
          Matrix<T> Y(tq, d + 3, T(7));
          std::vector<T> L(tq, T(7));
          attn::scaled_dot_product_attention(
              Q, K, V, attn::scaled_dot, {.out = Y.view(), .logsumexp = L}, opt,
              attn::logit_bias<T>{matrix ? B.view() : MatrixView<const T>{}, slope});
          require_close(Q, K, V, matrix ? &B : nullptr, slope, opt.beta, ok, Y, L);
        }
}

// One backward with everything given: dQ, dK, dV, dS and dZ.
template <class T>
struct all_gradients {
  Matrix<T> Q, K, V, S, Z;
  all_gradients(std::size_t tq, std::size_t n, std::size_t d, std::size_t dv)
      : Q(tq, d), K(n, d), V(n, dv), S(tq, n), Z(tq, n) {}
  attn::attention_gradients<T> views() {
    return {Q.view(), K.view(), V.view(), false, S.view(), Z.view()};
  }
  bool same_as(const all_gradients& o) const {
    return same_bits(Q, o.Q) && same_bits(K, o.K) && same_bits(V, o.V) && same_bits(S, o.S) &&
           same_bits(Z, o.Z);
  }
};

}  // namespace

TEMPLATE_TEST_CASE("a bias on the logits: the tiles agree with β·S + B − m·(p_t − j), every mask",
                   "[sdpa][bias]", float, double, long double) {
  check_against_formula<TestType>();
}

TEMPLATE_TEST_CASE("a bias on the logits: ALiBi in the tiles is its matrix bit for bit; a zero bias is none; "
                   "−inf is a mask; threads are one thread",
                   "[sdpa][bias][positions]", float, double) {
  using T = TestType;
  std::mt19937_64 rng(31);
  for (const std::size_t tq : {5u, 100u})
    for (const bool causal : {false, true}) {
      const std::size_t n = 200, d = 24, dv = 20;
      const Matrix<T> Q = random_matrix<T>(tq, d, rng), K = random_matrix<T>(n, d, rng),
                      V = random_matrix<T>(n, dv, rng), dY = random_matrix<T>(tq, dv, rng);
      attn::options opt{.beta = 1.3};
      opt.causal = causal;
      const T slope = attn::alibi_slopes<T>(3)[2];  // 1/4: p − j up to 199, logits up to −50
      Matrix<T> A(tq, n);
      attn::alibi_bias(A.view(), slope);
      const auto forward = [&](const attn::logit_bias<T>& bias, const attn::options& o, std::size_t threads,
                               Matrix<T>& Y, std::vector<T>& L) {
        Y = Matrix<T>(tq, dv);
        L.assign(tq, T(0));
        attn::scaled_dot_product_attention(Q, K, V, attn::scaled_dot, {.out = Y.view(), .logsumexp = L}, o,
                                           bias, threads);
      };
      Matrix<T> Y1, Y2;
      std::vector<T> L1, L2;
      INFO("T = " << tq << (causal ? ", causal" : ""));
      forward({{}, slope}, opt, 1, Y1, L1);
      forward({A.view(), T(0)}, opt, 1, Y2, L2);
      REQUIRE(same_bits(Y1, Y2));
      REQUIRE(L1 == L2);
      forward({{}, slope}, opt, 3, Y2, L2);
      REQUIRE(same_bits(Y1, Y2));
      REQUIRE(L1 == L2);
      // the backward: ALiBi's gradients are the matrix's, and on threads the same
      all_gradients<T> g1(tq, n, d, dv), g2(tq, n, d, dv), g3(tq, n, d, dv);
      attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {Y1.view(), L1}, dY, g1.views(),
                                                  opt, attn::logit_bias<T>{{}, slope});
      attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {Y1.view(), L1}, dY, g2.views(),
                                                  opt, attn::logit_bias<T>{A.view(), T(0)});
      attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {Y1.view(), L1}, dY, g3.views(),
                                                  opt, attn::logit_bias<T>{{}, slope}, 2);
      REQUIRE(g1.same_as(g2));
      REQUIRE(g1.same_as(g3));
      // a bias of zeros is no bias; ∂L/∂Z without a bias is the same as with zeros
      const Matrix<T> zeros(tq, n, T(0));
      Matrix<T> Y0, Y3;
      std::vector<T> L0, L3;
      forward({}, opt, 1, Y0, L0);
      forward({zeros.view(), T(0)}, opt, 1, Y3, L3);
      REQUIRE(same_bits(Y0, Y3));
      REQUIRE(L0 == L3);
      all_gradients<T> g4(tq, n, d, dv), g5(tq, n, d, dv);
      attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {Y0.view(), L0}, dY, g4.views(), opt);
      attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {Y0.view(), L0}, dY, g5.views(), opt,
                                                  attn::logit_bias<T>{zeros.view(), T(0)});
      REQUIRE(g4.same_as(g5));
      // −inf in B where a mask says no: the mask's numbers (exp(−inf − m) = 0 adds 0 to every sum)
      std::vector<char> keys(n, 1);
      Matrix<T> minus(tq, n, T(0));
      for (std::size_t j = 1; j < n; j += 4) {
        keys[j] = 0;
        for (std::size_t t = 0; t < tq; ++t) minus(t, j) = -std::numeric_limits<T>::infinity();
      }
      attn::options masked = opt;
      masked.mask = keys;
      forward({}, masked, 1, Y0, L0);
      forward({minus.view(), T(0)}, opt, 1, Y3, L3);
      REQUIRE(same_bits(Y0, Y3));
      REQUIRE(L0 == L3);
      all_gradients<T> g6(tq, n, d, dv), g7(tq, n, d, dv);
      attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {Y0.view(), L0}, dY, g6.views(), masked);
      attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {Y3.view(), L3}, dY, g7.views(), opt,
                                                  attn::logit_bias<T>{minus.view(), T(0)});
      REQUIRE(g6.same_as(g7));
    }
}

TEST_CASE("a bias on the logits: every gradient, ∂L/∂B included, against central differences, "
          "in the tiles and in the exact rows", "[sdpa][bias][derivatives]") {
  std::mt19937_64 rng(5);
  for (const std::size_t d : {6u, 260u})  // d_k > 256: every row one query's exact path
    for (int c = 0; c < 4; ++c) {
      const std::size_t tq = 4, n = 6, dv = 3;
      const Matrix<double> Q = random_matrix<double>(tq, d, rng, 1 / std::sqrt(static_cast<double>(d) / 6)),
                           K = random_matrix<double>(n, d, rng), V = random_matrix<double>(n, dv, rng),
                           B = random_matrix<double>(tq, n, rng), dY = random_matrix<double>(tq, dv, rng);
      std::vector<char> keys(n, 1);
      keys[2] = 0;
      attn::options opt{.beta = 1.4};
      if (c & 1) opt.causal = true;
      if (c & 2) opt.mask = keys;
      const double slope = c == 3 ? 0.0 : 0.3;
      INFO("d = " << d << ", case " << c);
      const auto forward_with = [&](const Matrix<double>& q, const Matrix<double>& k, const Matrix<double>& v,
                                    const Matrix<double>& b) {
        Matrix<double> Y(tq, dv);
        attn::scaled_dot_product_attention(q, k, v, attn::scaled_dot, {.out = Y.view()}, opt,
                                           attn::logit_bias<double>{b.view(), slope});
        return std::vector<double>(Y.data(), Y.data() + Y.size());
      };
      const auto replaced = [](const Matrix<double>& m, std::span<const double> x) {
        Matrix<double> r(m.rows(), m.cols());
        std::copy(x.begin(), x.end(), r.data());
        return r;
      };
      all_gradients<double> g(tq, n, d, dv);
      attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {}, dY, g.views(), opt,
                                                  attn::logit_bias<double>{B.view(), slope});
      const double tol = attn::gradcheck_tolerance<double>();
      CHECK(attn::check_vjp([&](std::span<const double> x) { return forward_with(replaced(Q, x), K, V, B); },
                            flat(Q), flat(dY), flat(g.Q), "Q")
                .passed(tol));
      CHECK(attn::check_vjp([&](std::span<const double> x) { return forward_with(Q, replaced(K, x), V, B); },
                            flat(K), flat(dY), flat(g.K), "K")
                .passed(tol));
      CHECK(attn::check_vjp([&](std::span<const double> x) { return forward_with(Q, K, replaced(V, x), B); },
                            flat(V), flat(dY), flat(g.V), "V")
                .passed(tol));
      CHECK(attn::check_vjp([&](std::span<const double> x) { return forward_with(Q, K, V, replaced(B, x)); },
                            flat(B), flat(dY), flat(g.Z), "B")
                .passed(tol));
      // ∂L/∂S = β ∂L/∂Z entry by entry (∂z/∂s = β), to the rounding of the two products
      for (std::size_t i = 0; i < g.S.size(); ++i)
        REQUIRE(std::abs(g.S.data()[i] - opt.beta * g.Z.data()[i]) <=
                4 * std::numeric_limits<double>::epsilon() * std::abs(g.S.data()[i]));
    }
}

TEST_CASE("a bias on the logits: +inf, NaN and all −inf follow softmax's rules in value and gradient",
          "[sdpa][bias][errors]") {
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::mt19937_64 rng(9);
  const std::size_t tq = 3, n = 40, d = 8, dv = 4;  // 40 keys: attend's one-pass path in the exact rows too
  const Matrix<double> Q = random_matrix<double>(tq, d, rng), K = random_matrix<double>(n, d, rng),
                       V = random_matrix<double>(n, dv, rng), dY = random_matrix<double>(tq, dv, rng);
  Matrix<double> B(tq, n, 0.0);
  B(0, 7) = inf;          // row 0: key 7 takes the whole share, the weights stop moving
  B(1, 3) = std::nan(""); // row 1: NaN
  for (std::size_t j = 0; j < n; ++j) B(2, j) = -inf;  // row 2: nothing left (softmax's zeros)
  Matrix<double> Y(tq, dv, 7.0), W(tq, n, 7.0);
  std::vector<double> L(tq, 7.0);
  attn::scaled_dot_product_attention(Q, K, V, attn::scaled_dot, {.out = Y.view(), .weights = W.view(), .logsumexp = L},
                                     {}, attn::logit_bias<double>{B.view(), 0.0});
  for (std::size_t i = 0; i < dv; ++i) {
    REQUIRE(Y(0, i) == V(7, i));
    REQUIRE(std::isnan(Y(1, i)));
    REQUIRE(Y(2, i) == 0.0);
  }
  REQUIRE(L[0] == inf);
  REQUIRE(std::isnan(L[1]));
  REQUIRE(L[2] == -inf);
  all_gradients<double> g(tq, n, d, dv);
  attn::scaled_dot_product_attention_backward(Q, K, V, attn::scaled_dot, {Y.view(), L}, dY, g.views(), {},
                                              attn::logit_bias<double>{B.view(), 0.0});
  for (std::size_t j = 0; j < n; ++j) {
    REQUIRE(g.Z(0, j) == 0.0);  // row 0's weights do not move: no score terms
    REQUIRE(g.S(0, j) == 0.0);
    REQUIRE(std::isnan(g.Z(1, j)));
    REQUIRE(g.Z(2, j) == 0.0);
  }
  for (std::size_t i = 0; i < d; ++i) {
    REQUIRE(g.Q(0, i) == 0.0);
    REQUIRE(std::isnan(g.Q(1, i)));
    REQUIRE(g.Q(2, i) == 0.0);
  }
}

TEST_CASE("a bias on the logits: a wrong shape, slope or place names the buffer and writes nothing",
          "[sdpa][bias][errors]") {
  const Matrix<double> Q(3, 4, 0.5), K(5, 4, 0.25), V(5, 2, 1.0), dY(3, 2, 1.0), Bbad(3, 4, 0.0), B(3, 5, 0.0);
  Matrix<double> Y(3, 2, 7.0), dQ(3, 4, 7.0);
  REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention(Q, K, V, attn::scaled_dot, {.out = Y.view()}, {},
                                                         attn::logit_bias<double>{Bbad.view(), 0.0}),
                      "attn::scaled_dot_product_attention: the bias is 3x4 but should be 3x5");
  REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention(Q, K, V, attn::scaled_dot, {.out = Y.view()}, {},
                                                         attn::logit_bias<double>{{}, std::nan("")}),
                      "attn::scaled_dot_product_attention: the ALiBi slope must be finite");
  const Matrix<double> Qlong(6, 4, 0.5);
  Matrix<double> Ylong(6, 2, 7.0);
  REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention(Qlong, K, V, attn::scaled_dot, {.out = Ylong.view()}, {},
                                                         attn::logit_bias<double>{{}, 0.5}),
                      "attn::scaled_dot_product_attention: 6 queries over 5 keys: the queries are the last "
                      "positions of the keys");
  Matrix<double> shared(3, 5, 0.0);
  REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention(Q, K, V, attn::scaled_dot,
                                                         {.out = MatrixView<double>(shared.data(), 3, 2)}, {},
                                                         attn::logit_bias<double>{shared.view(), 0.0}),
                      "attn::scaled_dot_product_attention: the output overlaps the bias");
  REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention_backward(
                          Q, K, V, attn::scaled_dot, {}, dY,
                          {.queries = dQ.view(), .bias = MatrixView<double>(shared.data(), 3, 4)}, {},
                          attn::logit_bias<double>{B.view(), 0.0}),
                      "attn::scaled_dot_product_attention_backward: dL/dZ is 3x4 but should be 3x5");
  REQUIRE(Y(0, 0) == 7.0);
  REQUIRE(Ylong(0, 0) == 7.0);
  REQUIRE(dQ(0, 0) == 7.0);
  REQUIRE(shared(0, 0) == 0.0);
}

namespace {

// A layer of h heads (d_k = 4, d_v = 3) over h_kv key/value heads, d_model = 5, W_O to 5.
template <class T>
struct heads_layer {
  std::size_t h, kvh;
  Matrix<T> WQ, WK, WV, WO;
  heads_layer(std::size_t heads, std::size_t kv_heads, std::mt19937_64& rng)
      : h(heads), kvh(kv_heads), WQ(random_matrix<T>(5, heads * 4, rng, 0.6)),
        WK(random_matrix<T>(5, kv_heads * 4, rng, 0.6)), WV(random_matrix<T>(5, kv_heads * 3, rng, 0.6)),
        WO(random_matrix<T>(heads * 3, 5, rng, 0.6)) {}
  attn::multi_head_parameters<T> params() const {
    return {.W_Q = WQ, .W_K = WK, .W_V = WV, .W_O = WO, .heads = h, .kv_heads = kvh};
  }
};

// Every head's ALiBi as a bias matrix, h·B·T × n as the maps (attn::alibi_bias per head).
template <class T>
Matrix<T> stacked_alibi(std::size_t h, std::size_t batch, std::size_t tq, std::size_t n) {
  Matrix<T> A(h * batch * tq, n);
  const std::vector<T> m = attn::alibi_slopes<T>(h);
  for (std::size_t i = 0; i < h; ++i)
    for (std::size_t b = 0; b < batch; ++b)
      attn::alibi_bias(MatrixView<T>(A.row((i * batch + b) * tq).data(), tq, n), m[i]);
  return A;
}

template <class T>
struct heads_run {
  Matrix<T> Y, dX, dWQ, dWK, dWV, dWO, dB;
  bool same_as(const heads_run& o) const {
    return same_bits(Y, o.Y) && same_bits(dX, o.dX) && same_bits(dWQ, o.dWQ) && same_bits(dWK, o.dWK) &&
           same_bits(dWV, o.dWV) && same_bits(dWO, o.dWO) && same_bits(dB, o.dB);
  }
};

// The forward and backward of self-attention with p, ∂L/∂bias (shaped bias_rows × n) asked for.
template <class T>
heads_run<T> run_heads(const Matrix<T>& X, const attn::multi_head_parameters<T>& p, const Matrix<T>& dY,
                       const attn::options& opt, std::size_t batch, std::size_t bias_rows, std::size_t n,
                       std::size_t threads) {
  heads_run<T> r{Matrix<T>(X.rows(), 5), Matrix<T>(X.rows(), 5), Matrix<T>(p.W_Q.rows(), p.W_Q.cols()),
                 Matrix<T>(p.W_K.rows(), p.W_K.cols()), Matrix<T>(p.W_V.rows(), p.W_V.cols()),
                 Matrix<T>(p.W_O.rows(), p.W_O.cols()), Matrix<T>(bias_rows, n)};
  attn::multi_head_cache<T> cache;
  attn::multi_head_attention(X, p, attn::multi_head_views<T>{.out = r.Y.view()}, cache, opt, batch, threads);
  attn::multi_head_gradients<T> g{.inputs = r.dX.view(), .W_Q = r.dWQ.view(), .W_K = r.dWK.view(),
                                  .W_V = r.dWV.view(), .W_O = r.dWO.view()};
  if (bias_rows != 0) g.bias = r.dB.view();
  attn::multi_head_attention_backward(X, p, cache, dY, g, opt, batch, threads);
  return r;
}

}  // namespace

TEMPLATE_TEST_CASE("multi_head_attention with ALiBi and a bias: each head's slope and rows, forward and "
                   "backward, on threads",
                   "[heads][bias][positions]", float, double) {
  using T = TestType;
  std::mt19937_64 rng(99);
  for (const auto& hk : {std::pair<std::size_t, std::size_t>{3, 3}, {4, 2}})
    for (const bool causal : {false, true}) {
      const std::size_t batch = 2, tq = 70, n = tq;
      const heads_layer<T> w(hk.first, hk.second, rng);
      const Matrix<T> X = random_matrix<T>(batch * tq, 5, rng), dY = random_matrix<T>(batch * tq, 5, rng);
      attn::options opt{.beta = 1.2};
      opt.causal = causal;
      INFO("h = " << w.h << ", h_kv = " << w.kvh << (causal ? ", causal" : ""));
      attn::multi_head_parameters<T> alibi = w.params();
      alibi.alibi = true;
      const Matrix<T> A = stacked_alibi<T>(w.h, batch, tq, n);
      attn::multi_head_parameters<T> matrix = w.params();
      matrix.bias = A;
      const heads_run<T> r1 = run_heads(X, alibi, dY, opt, batch, w.h * batch * tq, n, 1);
      REQUIRE(r1.same_as(run_heads(X, matrix, dY, opt, batch, w.h * batch * tq, n, 1)));
      REQUIRE(r1.same_as(run_heads(X, alibi, dY, opt, batch, w.h * batch * tq, n, 2)));
      // ALiBi did something
      const heads_run<T> plain = run_heads(X, w.params(), dY, opt, batch, 0, n, 1);
      REQUIRE(!same_bits(plain.Y, r1.Y));
      // a shared T × n bias is every head's: the same as it stacked h·B times, and its gradient
      // the sum of theirs over heads and sentences (in that order)
      const Matrix<T> B = random_matrix<T>(tq, n, rng);
      Matrix<T> stacked(w.h * batch * tq, n);
      for (std::size_t r = 0; r < stacked.rows(); ++r)
        for (std::size_t j = 0; j < n; ++j) stacked(r, j) = B(r % tq, j);
      attn::multi_head_parameters<T> shared = alibi, each = alibi;
      shared.bias = B;
      each.bias = stacked;
      const heads_run<T> rs = run_heads(X, shared, dY, opt, batch, tq, n, 1);
      const heads_run<T> re = run_heads(X, each, dY, opt, batch, w.h * batch * tq, n, 1);
      REQUIRE(same_bits(rs.Y, re.Y));
      REQUIRE(same_bits(rs.dX, re.dX));
      for (std::size_t t = 0; t < tq; ++t)
        for (std::size_t j = 0; j < n; ++j) {
          T sum = 0;
          for (std::size_t unit = 0; unit < w.h * batch; ++unit) sum += re.dB(unit * tq + t, j);
          REQUIRE(rs.dB(t, j) == sum);
        }
      REQUIRE(rs.same_as(run_heads(X, shared, dY, opt, batch, tq, n, 2)));
    }
}

TEST_CASE("multi_head_attention with ALiBi and a bias: dX, dW and dbias against central differences",
          "[heads][bias][derivatives]") {
  std::mt19937_64 rng(12);
  const std::size_t batch = 2, tq = 4, n = 4;
  const heads_layer<double> w(3, 3, rng);
  const Matrix<double> X = random_matrix<double>(batch * tq, 5, rng), dY = random_matrix<double>(batch * tq, 5, rng);
  for (const std::size_t bias_rows : {tq, 3 * batch * tq}) {
    const Matrix<double> B = random_matrix<double>(bias_rows, n, rng);
    attn::multi_head_parameters<double> p = w.params();
    p.alibi = true;
    p.bias = B;
    const attn::options opt{.beta = 0.9, .causal = true};
    INFO("bias rows " << bias_rows);
    const heads_run<double> r = run_heads(X, p, dY, opt, batch, bias_rows, n, 1);
    const auto forward = [&](const Matrix<double>& x, const Matrix<double>& b, const Matrix<double>& wq) {
      attn::multi_head_parameters<double> q = p;
      q.bias = b;
      q.W_Q = wq;
      attn::multi_head_cache<double> cache;
      Matrix<double> Y(x.rows(), 5);
      attn::multi_head_attention(x, q, attn::multi_head_views<double>{.out = Y.view()}, cache, opt, batch);
      return std::vector<double>(Y.data(), Y.data() + Y.size());
    };
    const auto replaced = [](const Matrix<double>& m, std::span<const double> x) {
      Matrix<double> c(m.rows(), m.cols());
      std::copy(x.begin(), x.end(), c.data());
      return c;
    };
    const double tol = attn::gradcheck_tolerance<double>();
    CHECK(attn::check_vjp([&](std::span<const double> x) { return forward(replaced(X, x), B, w.WQ); }, flat(X),
                          flat(dY), flat(r.dX), "X")
              .passed(tol));
    CHECK(attn::check_vjp([&](std::span<const double> x) { return forward(X, replaced(B, x), w.WQ); }, flat(B),
                          flat(dY), flat(r.dB), "bias")
              .passed(tol));
    CHECK(attn::check_vjp([&](std::span<const double> x) { return forward(X, B, replaced(w.WQ, x)); },
                          flat(w.WQ), flat(dY), flat(r.dWQ), "W_Q")
              .passed(tol));
  }
}

TEMPLATE_TEST_CASE("multi_head_attention_cached with ALiBi: each step's rows are the whole sequence's",
                   "[kv_cache][heads][bias][positions]", float, double) {
  // a new row sits at the cache's length (then one more per row), the whole causal forward's row t
  // at t: the same distances p − j, the same numbers
  using T = TestType;
  std::mt19937_64 rng(4545);
  const heads_layer<T> w(3, 1, rng);
  attn::multi_head_parameters<T> p = w.params();
  p.alibi = true;
  const std::size_t total = 9;
  const Matrix<T> X = random_matrix<T>(total, 5, rng);
  attn::kv_cache<T> cache(1, 16, 1, 4, 3);
  Matrix<T> got(total, 5);
  for (const auto& rc : {std::pair<std::size_t, std::size_t>{0, 4}, {4, 1}, {5, 3}, {8, 1}}) {
    Matrix<T> Y(rc.second, 5);
    attn::multi_head_attention_cached(MatrixView<const T>(X.row(rc.first).data(), rc.second, 5), p, cache, Y.view());
    for (std::size_t r = 0; r < rc.second; ++r)
      for (std::size_t c = 0; c < 5; ++c) got(rc.first + r, c) = Y(r, c);
  }
  const auto whole = attn::multi_head_attention(X, p, {.causal = true});
  for (std::size_t i = 0; i < whole.out.size(); ++i) CHECK(got.data()[i] == whole.out.data()[i]);
  const auto plain = attn::multi_head_attention(X, w.params(), {.causal = true});
  REQUIRE(!same_bits(plain.out, whole.out));
}

TEST_CASE("multi_head_attention with ALiBi and a bias: shapes, a changed bias and a cache are refused, "
          "nothing written", "[heads][bias][errors]") {
  std::mt19937_64 rng(3);
  const heads_layer<double> w(2, 2, rng);
  const Matrix<double> X = random_matrix<double>(6, 5, rng), Xkv = random_matrix<double>(4, 5, rng),
                       Bbad = random_matrix<double>(5, 6, rng), dY(6, 5, 1.0);
  Matrix<double> Y(6, 5, 7.0);
  attn::multi_head_cache<double> cache;
  attn::multi_head_parameters<double> p = w.params();
  p.bias = Bbad;
  REQUIRE_THROWS_WITH(attn::multi_head_attention(X, p, {.out = Y.view()}, cache),
                      "attn::multi_head_attention: the bias is 5x6 but should be 6x6 (shared) or 12x6 "
                      "(per head and sentence)");
  p.bias = {};
  p.alibi = true;  // six queries over four keys: the queries are not the last positions
  REQUIRE_THROWS_WITH(attn::multi_head_attention(X, Xkv, p, {.out = Y.view()}, cache),
                      "attn::multi_head_attention: 6 queries over 4 keys: the queries are the last positions "
                      "of the keys");
  REQUIRE(Y(0, 0) == 7.0);
  // the backward of another forward: ALiBi on in one, off in the other; another bias
  attn::multi_head_attention(X, p, {.out = Y.view()}, cache);
  Matrix<double> dX(6, 5, 7.0), dB(6, 6, 7.0);
  attn::multi_head_parameters<double> off = p;
  off.alibi = false;
  REQUIRE_THROWS_WITH(attn::multi_head_attention_backward(X, off, cache, dY, {.inputs = dX.view()}),
                      "attn::multi_head_attention_backward: ALiBi is off but the forward's was on (the backward "
                      "must be given its forward's inputs, parameters and options)");
  const Matrix<double> B = random_matrix<double>(6, 6, rng);
  attn::multi_head_parameters<double> biased = p;
  biased.bias = B;
  REQUIRE_THROWS_WITH(attn::multi_head_attention_backward(X, biased, cache, dY, {.inputs = dX.view()}),
                      "attn::multi_head_attention_backward: the bias holds other numbers than the forward's "
                      "(the backward must be given its forward's inputs, parameters and options)");
  REQUIRE_THROWS_WITH(attn::multi_head_attention_backward(X, p, cache, dY,
                                                          {.inputs = dX.view(), .bias = MatrixView<double>(dB.data(), 5, 6)}),
                      "attn::multi_head_attention_backward: dL/dbias is 5x6 but should be 6x6 (shared) or 12x6 "
                      "(per head and sentence)");
  REQUIRE(dX(0, 0) == 7.0);
  REQUIRE(dB(0, 0) == 7.0);
  attn::kv_cache<double> kv(1, 8, 2, 4, 3);
  Matrix<double> Ys(2, 5, 7.0);
  REQUIRE_THROWS_WITH(attn::multi_head_attention_cached(MatrixView<const double>(X.data(), 2, 5), biased, kv, Ys.view()),
                      "attn::multi_head_attention_cached: a cached call takes no bias matrix (its keys grow with "
                      "each call; multi_head_parameters::alibi gives ALiBi with the cache's positions)");
  REQUIRE(Ys(0, 0) == 7.0);
  REQUIRE(kv.length(0) == 0);
}
