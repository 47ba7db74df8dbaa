// scaled_dot_product_attention: T queries over n keys as matrices, in tiles. Checked against the
// formulas written out here in long double (S = Q Kᵀ·scale, A = softmax(β·S, masks), Y = A V,
// L = log Σ exp(β S)), within bounds derived from the rounding of each step, for every mask
// (key, row, causal, all at once), T ≠ n, float, double and long double; and the rules of
// docs/errors.md row by row (all masked, NaN, ±inf, sizes).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"

using attn::Matrix;

namespace {

template <class T>
Matrix<T> random_matrix(std::size_t r, std::size_t c, std::mt19937_64& rng, double scale = 1) {
  std::normal_distribution<double> normal(0, scale);
  Matrix<T> m(r, c);
  for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(normal(rng));
  return m;
}

// Which keys query t may see: every mask given must allow (the convention of NEXT_SECTIONS.md).
struct allowed_keys {
  const std::vector<char>* keys = nullptr;  // n
  const std::vector<char>* rows = nullptr;  // T × n
  bool causal = false;
  std::size_t tq = 0, n = 0;
  bool operator()(std::size_t t, std::size_t j) const {
    if (causal && j + tq > t + n) return false;  // t sees 0 … t + n − T
    if (keys != nullptr && (*keys)[j] == 0) return false;
    if (rows != nullptr && (*rows)[t * n + j] == 0) return false;
    return true;
  }
};

struct reference {
  std::vector<long double> S, A, Y, L;
  std::vector<double> score_error;  // Δs_tj: the rounding the kernel may make in s_tj
};

// The formulas, in long double, and the bound on each score's rounding in T: a sum of d products
// in any order and one product by the scale, γ_{d+1}·|scale|·Σ_i |q_i k_ji|.
template <class T>
reference reference_attention(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V, long double scale,
                              double beta, const allowed_keys& ok) {
  const std::size_t tq = Q.rows(), n = K.rows(), d = K.cols(), dv = V.cols();
  const double u = std::numeric_limits<T>::epsilon() / 2;
  const double gamma = static_cast<double>(d + 1) * u / (1 - static_cast<double>(d + 1) * u);
  reference r{std::vector<long double>(tq * n), std::vector<long double>(tq * n, 0),
              std::vector<long double>(tq * dv, 0), std::vector<long double>(tq),
              std::vector<double>(tq * n)};
  for (std::size_t t = 0; t < tq; ++t) {
    long double m = -std::numeric_limits<long double>::infinity();
    for (std::size_t j = 0; j < n; ++j) {
      long double s = 0;
      double mag = 0;
      for (std::size_t i = 0; i < d; ++i) {
        s += static_cast<long double>(Q(t, i)) * K(j, i);
        mag += std::abs(static_cast<double>(Q(t, i)) * static_cast<double>(K(j, i)));
      }
      r.S[t * n + j] = s * scale;  // scale: the T the kernel multiplies by
      r.score_error[t * n + j] = gamma * static_cast<double>(std::abs(scale)) * mag;
      if (ok(t, j)) m = std::max(m, static_cast<long double>(beta) * r.S[t * n + j]);
    }
    long double sum = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (ok(t, j)) sum += r.A[t * n + j] = std::exp(static_cast<long double>(beta) * r.S[t * n + j] - m);
    r.L[t] = m + std::log(sum);
    for (std::size_t j = 0; j < n; ++j) {
      if (sum > 0) r.A[t * n + j] /= sum;
      for (std::size_t i = 0; i < dv; ++i) r.Y[t * dv + i] += r.A[t * n + j] * V(j, i);
    }
  }
  return r;
}

// The kernel's result against the reference. Row t's weights move by ρ_t relative: twice β times
// the largest score error, the rounding of β·s − m (|β s| ulps at most M·ε), the exp (1.5 ulp),
// the sum of the exps and its rescalings (n + 2 per block of 16), the reciprocal and its product;
// the output adds the rounding of its own sum, γ_n Σ_j A_tj |v_ji|.
template <class T>
void require_close(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V, long double scale, double beta,
                   const allowed_keys& ok, const Matrix<T>& Y, const Matrix<T>* A, const Matrix<T>* S,
                   const std::vector<T>& L) {
  const reference r = reference_attention(Q, K, V, scale, beta, ok);
  const std::size_t tq = Q.rows(), n = K.rows(), dv = V.cols();
  // in long double the reference rounds as much as the kernel: twice the bounds
  const long double eps = std::numeric_limits<T>::epsilon() * (std::is_same_v<T, long double> ? 2 : 1);
  const long double tiny = static_cast<long double>(std::numeric_limits<T>::min());
  const long double twice = std::is_same_v<T, long double> ? 2 : 1;
  for (std::size_t t = 0; t < tq; ++t) {
    long double ds = 0, M = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (!ok(t, j)) continue;
      ds = std::max(ds, twice * static_cast<long double>(r.score_error[t * n + j]));
      M = std::max(M, std::abs(static_cast<long double>(beta) * r.S[t * n + j]));
    }
    const long double blocks = static_cast<long double>((n + 15) / 16);
    const long double rho = 2 * std::abs(static_cast<long double>(beta)) * ds + (M + static_cast<long double>(n) + 2 * blocks + 16) * eps;
    INFO("t = " << t << ", rho = " << rho);
    for (std::size_t j = 0; j < n; ++j) {
      const long double a = static_cast<long double>(r.A[t * n + j]);
      if (A != nullptr) REQUIRE(std::abs(static_cast<long double>((*A)(t, j)) - a) <= rho * a + tiny);
      if (S != nullptr)
        REQUIRE(std::abs(static_cast<long double>((*S)(t, j)) - static_cast<long double>(r.S[t * n + j])) <=
                twice * static_cast<long double>(r.score_error[t * n + j]) + tiny);
    }
    for (std::size_t i = 0; i < dv; ++i) {
      long double mag = 0;
      for (std::size_t j = 0; j < n; ++j) mag += static_cast<long double>(r.A[t * n + j]) * std::abs(static_cast<long double>(V(j, i)));
      const long double want = static_cast<long double>(r.Y[t * dv + i]);
      REQUIRE(std::abs(static_cast<long double>(Y(t, i)) - want) <=
              (rho + static_cast<long double>(n + 2) * eps) * mag + eps * std::abs(want) + tiny);
    }
    const long double lw = static_cast<long double>(r.L[t]);
    if (std::isinf(lw)) {
      REQUIRE(L[t] == static_cast<T>(lw));
    } else {
      REQUIRE(std::abs(static_cast<long double>(L[t]) - lw) <= std::abs(static_cast<long double>(beta)) * ds + (M + static_cast<long double>(n) + 8) * eps + eps * std::abs(lw));
    }
  }
}

template <class T>
void check_against_reference(std::mt19937_64& rng) {
  for (const std::size_t tq : {1u, 3u, 7u, 64u, 131u})
    for (const std::size_t n : {1u, 5u, 64u, 100u, 257u})
      for (const std::size_t d : {1u, 16u, 33u}) {
        const std::size_t dv = d == 1 ? 3 : d + 5;
        const Matrix<T> Q = random_matrix<T>(tq, d, rng), K = random_matrix<T>(n, d, rng),
                        V = random_matrix<T>(n, dv, rng);
        std::vector<char> keys(n), rows(tq * n);
        std::bernoulli_distribution keep(0.8);
        for (auto& k : keys) k = keep(rng) ? 1 : 0;
        for (auto& k : rows) k = keep(rng) ? 1 : 0;
        for (int masks = 0; masks < 5; ++masks) {
          attn::options opt{.beta = masks % 2 == 0 ? 1.0 : 2.5};
          allowed_keys ok{nullptr, nullptr, false, tq, n};
          if (masks == 1 || masks == 4) {
            opt.mask = keys;
            ok.keys = &keys;
          }
          if (masks == 2 || masks == 4) {
            opt.row_mask = attn::mask_matrix_view(rows, tq, n);
            ok.rows = &rows;
          }
          if (masks >= 3) opt.causal = ok.causal = true;
          INFO("T = " << tq << ", n = " << n << ", d = " << d << ", masks " << masks);
          Matrix<T> Y(tq, dv, T(7)), A(tq, n, T(7)), S(tq, n, T(7));
          std::vector<T> L(tq, T(7));
          attn::scaled_dot_product_attention(Q, K, V, {.out = Y.view(), .weights = A.view(), .scores = S.view(), .logsumexp = L}, opt);
          require_close(Q, K, V, static_cast<long double>(T(1) / std::sqrt(static_cast<T>(d))), opt.beta, ok, Y, &A, &S, L);
          // without the map, and with the other scales: the same rules
          Matrix<T> Y2(tq, dv);
          std::vector<T> L2(tq);
          attn::scaled_dot_product_attention(Q, K, V, attn::dot_scaled_by{0.3}, {.out = Y2.view(), .logsumexp = L2}, opt);
          require_close<T>(Q, K, V, static_cast<long double>(static_cast<T>(0.3)), opt.beta, ok, Y2, nullptr, nullptr, L2);
        }
      }
}

}  // namespace

TEMPLATE_TEST_CASE("scaled_dot_product_attention agrees with its formulas, every mask, T != n",
                   "[sdpa]", float, double, long double) {
  std::mt19937_64 rng(2031);
  check_against_reference<TestType>(rng);
}

TEST_CASE("scaled_dot_product_attention: the map when asked is align's, and keys past 256 numbers",
          "[sdpa]") {
  std::mt19937_64 rng(9);
  for (const std::size_t d : {8u, 300u}) {  // 300: past the tiled kernel's keys, row by row
    const Matrix<double> Q = random_matrix<double>(9, d, rng), K = random_matrix<double>(70, d, rng),
                         V = random_matrix<double>(70, 4, rng);
    const std::vector<double> pad(70, 1.0);
    Matrix<double> Y(9, 4), A(9, 70), S(9, 70), Ya(9, 4), Aa(9, 70), Sa(9, 70);
    const attn::options opt{.beta = 0.7, .causal = true};
    attn::scaled_dot_product_attention(Q, K, V, {.out = Y.view(), .weights = A.view(), .scores = S.view()}, opt);
    attn::align(Q, K, V, attn::scaled_dot, Sa.view(), Aa.view(), Ya.view(), opt);
    for (std::size_t t = 0; t < 9; ++t) {
      for (std::size_t j = 0; j < 70; ++j) {
        REQUIRE_THAT(A(t, j), Catch::Matchers::WithinAbs(Aa(t, j), 1e-14));
        REQUIRE_THAT(S(t, j), Catch::Matchers::WithinAbs(Sa(t, j), 1e-12));
        if (j > t + 70 - 9) REQUIRE(A(t, j) == 0.0);  // causal: t sees 0 … t + n − T
      }
      for (std::size_t i = 0; i < 4; ++i) REQUIRE_THAT(Y(t, i), Catch::Matchers::WithinAbs(Ya(t, i), 1e-13));
    }
  }
}

TEST_CASE("scaled_dot_product_attention: rows with nothing to attend to follow the policy", "[sdpa][mask]") {
  // causal with T > n: rows 0 and 1 of 4 queries over 2 keys see nothing
  const Matrix<double> Q{{1, 0}, {0, 1}, {1, 1}, {0.5, -1}};
  const Matrix<double> K{{1, 0}, {0, 2}};
  const Matrix<double> V{{1, 2, 3}, {-1, 0, 5}};
  const auto run = [&](attn::all_masked_policy p, Matrix<double>& Y, Matrix<double>& A, std::vector<double>& L) {
    attn::scaled_dot_product_attention(Q, K, V, {.out = Y.view(), .weights = A.view(), .logsumexp = L},
                                       {.if_all_masked = p, .causal = true});
  };
  Matrix<double> Y(4, 3, 7.0), A(4, 2, 7.0);
  std::vector<double> L(4, 7.0);
  run(attn::all_masked_policy::zeros, Y, A, L);
  for (std::size_t i = 0; i < 3; ++i) REQUIRE((Y(0, i) == 0.0 && Y(1, i) == 0.0));
  REQUIRE((A(1, 0) == 0.0 && A(1, 1) == 0.0));
  REQUIRE(L[0] == -std::numeric_limits<double>::infinity());
  REQUIRE(A(2, 0) == 1.0);  // row 2 sees key 0 only
  run(attn::all_masked_policy::uniform, Y, A, L);
  REQUIRE(Y(0, 0) == 0.0);
  REQUIRE(Y(0, 2) == 4.0);
  REQUIRE(A(1, 1) == 0.5);
  run(attn::all_masked_policy::nan, Y, A, L);
  REQUIRE(std::isnan(Y(1, 2)));
  REQUIRE(std::isnan(A(0, 0)));
  REQUIRE(A(3, 1) == A(3, 1));  // rows with keys are numbers
  Matrix<double> Yt(4, 3, 7.0);
  REQUIRE_THROWS_AS(attn::scaled_dot_product_attention(Q, K, V, {.out = Yt.view()},
                                                       {.if_all_masked = attn::all_masked_policy::throw_error, .causal = true}),
                    attn::domain_error);
  REQUIRE(Yt(3, 2) == 7.0);  // nothing written
}

TEST_CASE("scaled_dot_product_attention: NaN and inf follow the rules of one query", "[sdpa][errors]") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Matrix<double> K(40, 3, 0.5);
  Matrix<double> V(40, 2, 1.0);
  K(3, 0) = nan;  // masked below: ignored
  K(7, 1) = inf;  // a kept +inf score for queries with q_1 > 0
  V(9, 0) = 5;
  const Matrix<double> Q{{0, 1, 0}, {0, -1, 0}, {0, -2, 1}};
  std::vector<char> keys(40, 1);
  keys[3] = 0;
  Matrix<double> Y(3, 2), A(3, 40);
  attn::scaled_dot_product_attention(Q, K, V, {.out = Y.view(), .weights = A.view()}, {.mask = keys});
  REQUIRE(A(0, 7) == 1.0);  // the +inf score takes all the weight
  REQUIRE(Y(0, 0) == 1.0);
  REQUIRE(A(1, 7) == 0.0);  // −inf for q_1 < 0
  REQUIRE(A(1, 3) == 0.0);
  REQUIRE(Y(1, 0) == Y(1, 0));
  REQUIRE(A(2, 3) == 0.0);  // the masked NaN stays out
  REQUIRE(A(2, 7) == 0.0);  // (−2)·inf: −inf
  REQUIRE(Y(2, 0) == Y(2, 0));
  // unmasked, the NaN key makes every row NaN (0·NaN in its score)
  Matrix<double> Yn(3, 2);
  attn::scaled_dot_product_attention(Q, K, V, {.out = Yn.view()});
  REQUIRE(std::isnan(Yn(2, 0)));
}

TEMPLATE_TEST_CASE("scaled_dot_product_attention: a row's numbers do not depend on the rows computed with it, "
                   "inf in a value it does not see",
                   "[sdpa][mask][errors]", float, double, long double) {
  // Causal over 12 keys whose key 7 has a value of ±inf: the rows before 7 do not see it, and
  // each must come out as computed alone over its own keys, bit for bit, whichever rows it is
  // computed with (rows [first, 12) with the offset: the tiles of MR rows fall elsewhere). The
  // tiled kernel summed a tile's rows over the keys its last row sees, so 0·inf made a NaN that
  // sent a row whose tile reaches key 7 to the exact path, which rounds otherwise
  // (fuzz_cache: a cached step's rows were not the whole forward's, 1 ulp in float). d_v = 2
  // takes the kernel's scalar sums, d_v = 16 its vectors.
  using T = TestType;
  std::mt19937_64 rng(2828);
  const std::size_t n = 12, dk = 3;
  for (const std::size_t dv : {std::size_t{2}, std::size_t{16}}) {
    const Matrix<T> Q = random_matrix<T>(n, dk, rng, 2), K = random_matrix<T>(n, dk, rng, 2);
    Matrix<T> V = random_matrix<T>(n, dv, rng, 100);
    for (std::size_t c = 0; c < dv; ++c) V(7, c) = (c % 2 == 0 ? 1 : -1) * std::numeric_limits<T>::infinity();
    for (std::size_t first = 0; first < 7; ++first) {
      const attn::MatrixView<const T> q(Q.data() + first * dk, n - first, dk);
      Matrix<T> Y(n - first, dv);
      attn::scaled_dot_product_attention(q, K, V, {.out = Y.view()}, {.causal = true});
      for (std::size_t t = first; t < 7; ++t) {
        Matrix<T> y(1, dv);
        attn::scaled_dot_product_attention(attn::MatrixView<const T>(Q.data() + t * dk, 1, dk),
                                           attn::MatrixView<const T>(K.data(), t + 1, dk),
                                           attn::MatrixView<const T>(V.data(), t + 1, dv), {.out = y.view()});
        INFO("d_v " << dv << ", rows from " << first << ", row " << t);
        for (std::size_t c = 0; c < dv; ++c) REQUIRE(Y(t - first, c) == y(0, c));
      }
    }
  }
}

TEST_CASE("scaled_dot_product_attention: sizes that disagree name the buffer and leave outputs alone",
          "[sdpa][errors]") {
  const Matrix<double> Q(3, 4, 1.0), K(5, 4, 1.0), V(5, 2, 1.0), K3(5, 3, 1.0), V4(4, 2, 1.0);
  Matrix<double> Y(3, 2, 7.0), Ybad(3, 3, 7.0), A(2, 5, 7.0);
  const auto what = [](auto&& f) {
    try {
      f();
    } catch (const attn::dimension_error& e) {
      return std::string(e.what());
    }
    return std::string("no throw");
  };
  CHECK(what([&] { attn::scaled_dot_product_attention(Q, K3, V, {.out = Y.view()}); }) ==
        "attn::scaled_dot_product_attention: query size is 4 but note size is 3");
  CHECK(what([&] { attn::scaled_dot_product_attention(Q, K, V4, {.out = Y.view()}); }) ==
        "attn::scaled_dot_product_attention: rows of values is 4 but rows of keys is 5");
  CHECK(what([&] { attn::scaled_dot_product_attention(Q, K, V, {.out = Ybad.view()}); }) ==
        "attn::scaled_dot_product_attention: the output is 3x3 but should be 3x2");
  CHECK(what([&] { attn::scaled_dot_product_attention(Q, K, V, {.out = Y.view(), .weights = A.view()}); }) ==
        "attn::scaled_dot_product_attention: the weights is 2x5 but should be 3x5");
  const std::vector<char> rows(10, 1);
  CHECK(what([&] { attn::scaled_dot_product_attention(Q, K, V, {.out = Y.view()}, {.row_mask = attn::mask_matrix_view(rows, 2, 5)}); }) ==
        "attn::scaled_dot_product_attention: rows of the row mask is 2 but number of queries is 3");
  REQUIRE(Y(0, 0) == 7.0);
  REQUIRE(A(0, 0) == 7.0);
  // one row's functions take one row's mask
  const std::vector<double> x{1, 2};
  CHECK_THROWS_AS(attn::softmax(x, {.row_mask = attn::mask_matrix_view(rows, 5, 2)}), attn::dimension_error);
}

TEST_CASE("scaled_dot_product_attention with fixed sizes is a constant expression", "[sdpa]") {
  // W2's keys and E1's query as one row: weights (0.100, 0.164, 0.736)
  static constexpr Matrix<double, 1, 3> Q{{0, 0.5, 2}};
  static constexpr Matrix<double, 3, 3> K{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  static constexpr Matrix<double, 3, 2> V{{1, 0}, {1, 1}, {0, 1}};
  constexpr auto r = attn::scaled_dot_product_attention(Q, K, V, {}, attn::dot);
  static_assert(r.out(0, 0) > 0.2635 && r.out(0, 0) < 0.2645 && r.out(0, 1) > 0.8995 && r.out(0, 1) < 0.9005);
  REQUIRE_THAT(r.out(0, 1), Catch::Matchers::WithinAbs(0.900, 5e-4));
}

TEST_CASE("scaled_dot_product_attention returns with the score before the options, as its other forms take it",
          "[sdpa]") {
  const attn::Matrix<double, 2, 3> Q{{1, 0, 0.5}, {0, 1, -1}};
  const attn::Matrix<double, 4, 3> K{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 1}};
  const attn::Matrix<double, 4, 2> V{{1, 0}, {0, 1}, {1, 1}, {2, -1}};
  const attn::options opt{.beta = 1.5, .causal = true};
  const auto a = attn::scaled_dot_product_attention(Q, K, V, attn::dot, opt);
  const auto b = attn::scaled_dot_product_attention(Q, K, V, opt, attn::dot);
  attn::Matrix<double> Y(2, 2);
  attn::scaled_dot_product_attention(Q, K, V, attn::dot, {.out = Y.view()}, opt);
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t i = 0; i < 2; ++i) {
      REQUIRE(a.out(t, i) == b.out(t, i));
      REQUIRE(a.out(t, i) == Y(t, i));
    }
  const auto d = attn::scaled_dot_product_attention(Q, K, V, attn::scaled_dot);  // options defaulted
  REQUIRE(d.out(0, 0) != a.out(0, 0));
}
