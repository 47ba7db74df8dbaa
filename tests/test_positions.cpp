// Where each word is (attn/positions.hpp; the unit's §8, NEXT_SECTIONS.md's conventions and W8).
// Every expected number is the formula written out here in long double, not another path of the
// library. Tolerances: an entry that attn rounds once to T from an angle formed in a wider type W
// is within half an ulp of T of the true value plus the angle's own error, |angle|·ε_W (a sine's
// and a cosine's slope is at most 1); a rotated entry a·cos φ − b·sin φ adds two products and a
// sum rounded in T: (|a| + |b|)·(2ε_T + the cos/sin roundings ε_T/2 each + the angle's error).
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "attn/attn.hpp"
#include "attn/report/format.hpp"
#include "attn_catch.hpp"

using attn::Matrix;
using ld = long double;

namespace {

template <class T>
constexpr ld eps() {
  return static_cast<ld>(std::numeric_limits<T>::epsilon());
}
// the wider type attn forms angles in (positions.hpp: double for float, long double otherwise)
template <class T>
constexpr ld angle_eps() {
  return std::is_same_v<T, float> ? eps<double>() : eps<long double>();
}

ld frequency(std::size_t i, std::size_t d, ld base = 10000) {  // base^(−2i/d)
  return std::pow(base, -static_cast<ld>(2 * i) / static_cast<ld>(d));
}

template <class T>
Matrix<T> random_matrix(std::size_t r, std::size_t c, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0, 1);
  Matrix<T> m(r, c);
  for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(normal(rng));
  return m;
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T) > 10 ? 10 : sizeof(T)) == 0;
}

}  // namespace

TEMPLATE_TEST_CASE("sinusoidal_encoding: each entry is sin or cos of p·10000^(−2i/d), rounded once",
                   "[positions]", float, double, long double) {
  using T = TestType;
  for (const std::size_t d : {2u, 4u, 8u, 64u})
    for (const std::size_t offset : {0u, 7u, 9000u}) {
      const std::size_t P = 40;
      const Matrix<T> pe = attn::sinusoidal_encoding<T>(P, d, offset);
      REQUIRE(pe.rows() == P);
      REQUIRE(pe.cols() == d);
      for (std::size_t t = 0; t < P; ++t)
        for (std::size_t i = 0; i < d / 2; ++i) {
          const ld angle = static_cast<ld>(offset + t) * frequency(i, d);
          const ld bound_extra = 4 * angle * angle_eps<T>() + std::numeric_limits<T>::denorm_min();
          const ld s = std::sin(angle), c = std::cos(angle);
          INFO("d " << d << ", position " << offset + t << ", pair " << i);
          CHECK(std::abs(static_cast<ld>(pe(t, 2 * i)) - s) <= eps<T>() / 2 * std::abs(s) + bound_extra);
          CHECK(std::abs(static_cast<ld>(pe(t, 2 * i + 1)) - c) <= eps<T>() / 2 * std::abs(c) + bound_extra);
        }
    }
}

TEST_CASE("sinusoidal_encoding: W8's row 1 for d = 4 is (sin 1, cos 1, sin 0.01, cos 0.01)", "[positions][unit]") {
  const Matrix<double> pe = attn::sinusoidal_encoding<double>(4, 4);
  // 10000^(−2/4) = 0.01: the second pair turns a hundred times slower
  const double want[4] = {std::sin(1.0), std::cos(1.0), std::sin(0.01), std::cos(0.01)};
  for (std::size_t i = 0; i < 4; ++i) CHECK(std::abs(pe(1, i) - want[i]) <= 1e-15);
  // as the unit prints them: 0.841, 0.540, 0.010, 1.000
  CHECK(attn::report::fixed(pe(1, 0), 3) == "0.841");
  CHECK(attn::report::fixed(pe(1, 1), 3) == "0.540");
  CHECK(attn::report::fixed(pe(1, 2), 3) == "0.010");
  CHECK(attn::report::fixed(pe(1, 3), 3) == "1.000");
  // position 0: sines 0, cosines 1, exactly
  for (std::size_t i = 0; i < 4; ++i) CHECK(pe(0, i) == (i % 2 == 0 ? 0.0 : 1.0));
}

TEMPLATE_TEST_CASE("sinusoidal_encoding: the concatenated layout is the interleaved one permuted",
                   "[positions]", float, double, long double) {
  // column 2i of the interleaved table is column i of the concatenated one, 2i + 1 is d/2 + i:
  // the same numbers, bit for bit
  using T = TestType;
  for (const std::size_t d : {2u, 6u, 32u}) {
    const Matrix<T> a = attn::sinusoidal_encoding<T>(50, d, 3);
    const Matrix<T> b = attn::sinusoidal_encoding<T>(50, d, 3, {.layout = attn::sinusoid_layout::concatenated});
    for (std::size_t t = 0; t < 50; ++t)
      for (std::size_t i = 0; i < d / 2; ++i) {
        CHECK(same_bits(b(t, i), a(t, 2 * i)));
        CHECK(same_bits(b(t, d / 2 + i), a(t, 2 * i + 1)));
      }
  }
}

TEMPLATE_TEST_CASE("add_sinusoidal_encoding: in place, into a buffer, a batch and an offset",
                   "[positions]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(81);
  const std::size_t B = 3, tq = 5, d = 6, offset = 11;
  const Matrix<T> X = random_matrix<T>(B * tq, d, rng);
  const Matrix<T> pe = attn::sinusoidal_encoding<T>(tq, d, offset);
  Matrix<T> in_place = X, out(B * tq, d);
  attn::add_sinusoidal_encoding(in_place, offset, B);
  attn::add_sinusoidal_encoding(X, out, offset, B);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < tq; ++t)
      for (std::size_t i = 0; i < d; ++i) {
        const T want = X(b * tq + t, i) + pe(t, i);  // one addition, rounded once
        CHECK(same_bits(in_place(b * tq + t, i), want));
        CHECK(same_bits(out(b * tq + t, i), want));
      }
  // the same buffer as X: in place
  Matrix<T> same = X;
  attn::add_sinusoidal_encoding(same, same, offset, B);
  for (std::size_t k = 0; k < same.size(); ++k) CHECK(same_bits(same.data()[k], in_place.data()[k]));
  // writing the table into a view: the batch's sentences get the same rows
  Matrix<T> table(B * tq, d);
  attn::sinusoidal_encoding(table, offset, B);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < tq; ++t)
      for (std::size_t i = 0; i < d; ++i) CHECK(same_bits(table(b * tq + t, i), pe(t, i)));
}

TEST_CASE("positions: bad input is refused by name and nothing is written", "[positions][errors]") {
  Matrix<double> X(6, 5, 2.0);
  const auto untouched = [&] {
    for (std::size_t i = 0; i < X.size(); ++i)
      if (X.data()[i] != 2.0) return false;
    return true;
  };
  REQUIRE_THROWS_MATCHES(attn::add_sinusoidal_encoding(X), attn::dimension_error,
                         Catch::Matchers::Message("attn::add_sinusoidal_encoding: the width d is 5 but must be even "
                                                  "(sines and cosines come in pairs)"));
  CHECK(untouched());
  Matrix<double> Y(6, 4, 2.0);
  REQUIRE_THROWS_MATCHES(attn::add_sinusoidal_encoding(Y, 0, 4), attn::dimension_error,
                         Catch::Matchers::Message("attn::add_sinusoidal_encoding: X has 6 rows, which is not 4 "
                                                  "sentences of equal length (the batch)"));
  for (const double base : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()})
    REQUIRE_THROWS_MATCHES(attn::add_sinusoidal_encoding(Y, 0, 1, {.base = base}), attn::domain_error,
                           Catch::Matchers::Message("attn::add_sinusoidal_encoding: the base of the frequencies "
                                                    "must be finite and above 0"));
  for (std::size_t i = 0; i < Y.size(); ++i) CHECK(Y.data()[i] == 2.0);
  Matrix<double> out(5, 4);
  REQUIRE_THROWS_MATCHES(attn::add_sinusoidal_encoding(Y, out), attn::dimension_error,
                         Catch::Matchers::Message("attn::add_sinusoidal_encoding: the output is 5x4 but should be 6x4"));
  // RoPE: heads of an odd size, or columns that are not h heads
  REQUIRE_THROWS_MATCHES(attn::apply_rotary(X, 1), attn::dimension_error,
                         Catch::Matchers::Message("attn::apply_rotary: 5 columns are not 1 heads of an even size "
                                                  "(RoPE rotates pairs within each head)"));
  REQUIRE_THROWS_MATCHES(attn::rotary_backward(Y, 3), attn::dimension_error,
                         Catch::Matchers::Message("attn::rotary_backward: 4 columns are not 3 heads of an even size "
                                                  "(RoPE rotates pairs within each head)"));
  CHECK(untouched());
  // learned: a table too short for the positions, widths that differ, X overlapping the table
  Matrix<double> P(8, 4, 1.0);
  REQUIRE_THROWS_MATCHES(attn::add_learned_positions(Y, P, 3), attn::dimension_error,
                         Catch::Matchers::Message("attn::add_learned_positions: positions 3 to 8 need 9 rows of the "
                                                  "table but it has 8"));
  REQUIRE_THROWS_MATCHES(attn::add_learned_positions(X, P), attn::dimension_error,
                         Catch::Matchers::Message("attn::add_learned_positions: columns of X is 5 but columns of the "
                                                  "table is 4"));
  REQUIRE_THROWS_MATCHES(attn::learned_positions_backward(Y, P, 0, 4), attn::dimension_error,
                         Catch::Matchers::Message("attn::learned_positions_backward: dL/dY has 6 rows, which is not 4 "
                                                  "sentences of equal length (the batch)"));
  attn::MatrixView<double> top(P.data(), 4, 4), bottom(P.data() + 8, 4, 4);
  REQUIRE_THROWS_AS(attn::add_learned_positions(top, bottom), attn::overlap_error);
  for (std::size_t i = 0; i < P.size(); ++i) CHECK(P.data()[i] == 1.0);
  CHECK(untouched());
  // ALiBi's bias: the queries are the last of the keys' positions
  Matrix<double> bias(4, 3);
  REQUIRE_THROWS_MATCHES(attn::alibi_bias(bias, 0.5), attn::dimension_error,
                         Catch::Matchers::Message("attn::alibi_bias: 4 queries over 3 keys: the queries are the last "
                                                  "positions of the keys"));
}

TEMPLATE_TEST_CASE("learned positions: X + P[offset + t], and the table's gradient against finite differences",
                   "[positions][derivatives]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(82);
  const std::size_t B = 2, tq = 3, d = 4, Tmax = 7, offset = 2;
  const Matrix<T> X = random_matrix<T>(B * tq, d, rng), P = random_matrix<T>(Tmax, d, rng);
  Matrix<T> Y = X;
  attn::add_learned_positions(Y, P, offset, B);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < tq; ++t)
      for (std::size_t i = 0; i < d; ++i) CHECK(same_bits(Y(b * tq + t, i), T(X(b * tq + t, i) + P(offset + t, i))));
  // L = Σ G ∘ Y: ∂L/∂P[offset + t] = Σ_b G_(b·T + t), added to what the gradient holds
  const Matrix<T> G = random_matrix<T>(B * tq, d, rng);
  Matrix<T> dP(Tmax, d, T(0.25));
  attn::learned_positions_backward(G, dP, offset, B);
  for (std::size_t p = 0; p < Tmax; ++p)
    for (std::size_t i = 0; i < d; ++i) {
      const bool used = p >= offset && p < offset + tq;
      const T want = used ? T(T(T(0.25) + G(p - offset, i)) + G(tq + p - offset, i)) : T(0.25);
      CHECK(same_bits(dP(p, i), want));
    }
  if constexpr (!std::is_same_v<T, float>) {
    // central differences of L in P (L is linear in P: the difference is exact up to rounding)
    const auto loss = [&](const Matrix<T>& table) {
      Matrix<T> y = X;
      attn::add_learned_positions(y, table, offset, B);
      ld l = 0;
      for (std::size_t k = 0; k < y.size(); ++k) l += static_cast<ld>(G.data()[k]) * static_cast<ld>(y.data()[k]);
      return l;
    };
    Matrix<T> grad(Tmax, d, T(0));
    attn::learned_positions_backward(G, grad, offset, B);
    const ld h = 1e-3L;
    for (std::size_t k = 0; k < P.size(); ++k) {
      Matrix<T> up = P, down = P;
      up.data()[k] += static_cast<T>(h);
      down.data()[k] -= static_cast<T>(h);
      const ld fd = (loss(up) - loss(down)) / (2 * h);
      // the rounding of P ± h and of y in T, over a difference of 2h: ~ 8ε·(|X| + |P| + 1)·|G| / h
      CHECK(std::abs(fd - static_cast<ld>(grad.data()[k])) <= 200 * eps<T>() / h);
    }
  }
}

TEMPLATE_TEST_CASE("apply_rotary: each pair turned by (offset + t)·θ_i, per head, against long double",
                   "[positions][rope]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(83);
  for (const auto form : {attn::rotary_form::interleaved, attn::rotary_form::half_split}) {
    const std::size_t B = 2, tq = 4, h = 3, dk = 6, offset = 500;
    const Matrix<T> X = random_matrix<T>(B * tq, h * dk, rng);
    Matrix<T> Y = X;
    attn::apply_rotary(Y, h, offset, B, {.form = form});
    const bool inter = form == attn::rotary_form::interleaved;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t < tq; ++t)
        for (std::size_t head = 0; head < h; ++head)
          for (std::size_t i = 0; i < dk / 2; ++i) {
            const std::size_t c1 = head * dk + (inter ? 2 * i : i), c2 = head * dk + (inter ? 2 * i + 1 : dk / 2 + i);
            const ld phi = static_cast<ld>(offset + t) * frequency(i, dk);
            const ld a = X(b * tq + t, c1), v = X(b * tq + t, c2);
            const ld want1 = a * std::cos(phi) - v * std::sin(phi), want2 = a * std::sin(phi) + v * std::cos(phi);
            const ld bound = (std::abs(a) + std::abs(v)) * (3 * eps<T>() + 2 * phi * angle_eps<T>());
            INFO("row " << b * tq + t << ", head " << head << ", pair " << i);
            CHECK(std::abs(static_cast<ld>(Y(b * tq + t, c1)) - want1) <= bound);
            CHECK(std::abs(static_cast<ld>(Y(b * tq + t, c2)) - want2) <= bound);
          }
  }
}

TEMPLATE_TEST_CASE("apply_rotary: the half-split form is the interleaved one on permuted numbers",
                   "[positions][rope]", float, double, long double) {
  // π: interleaved column 2i ↔ half-split column i, 2i + 1 ↔ d_k/2 + i. half_split(π x) = π
  // interleaved(x), bit for bit (the same cos, sin and products on the same numbers).
  using T = TestType;
  std::mt19937_64 rng(84);
  const std::size_t tq = 9, h = 2, dk = 8, offset = 3;
  const Matrix<T> X = random_matrix<T>(tq, h * dk, rng);
  Matrix<T> inter = X, half(tq, h * dk);
  for (std::size_t t = 0; t < tq; ++t)
    for (std::size_t head = 0; head < h; ++head)
      for (std::size_t i = 0; i < dk / 2; ++i) {
        half(t, head * dk + i) = X(t, head * dk + 2 * i);
        half(t, head * dk + dk / 2 + i) = X(t, head * dk + 2 * i + 1);
      }
  attn::apply_rotary(inter, h, offset);
  attn::apply_rotary(half, h, offset, 1, {.form = attn::rotary_form::half_split});
  for (std::size_t t = 0; t < tq; ++t)
    for (std::size_t head = 0; head < h; ++head)
      for (std::size_t i = 0; i < dk / 2; ++i) {
        CHECK(same_bits(half(t, head * dk + i), inter(t, head * dk + 2 * i)));
        CHECK(same_bits(half(t, head * dk + dk / 2 + i), inter(t, head * dk + 2 * i + 1)));
      }
}

TEMPLATE_TEST_CASE("apply_rotary: q_m·k_n depends on m − n only (W8)", "[positions][rope][unit]", float, double,
                   long double) {
  // R(φ_m)q · R(φ_n)k = q · R(φ_n − φ_m)k pair by pair: the same for (m, n) = (1, 0) and (5, 4).
  // Each rotated number carries (|a| + |b|)(3ε + 2|φ|ε_W); the dot of 8 such numbers adds 8ε more.
  using T = TestType;
  std::mt19937_64 rng(85);
  const std::size_t dk = 8;
  const Matrix<T> q = random_matrix<T>(1, dk, rng), k = random_matrix<T>(1, dk, rng);
  const auto score = [&](std::size_t m, std::size_t n) {
    Matrix<T> qm = q, kn = k;
    attn::apply_rotary(qm, 1, m);
    attn::apply_rotary(kn, 1, n);
    ld s = 0;
    for (std::size_t i = 0; i < dk; ++i) s += static_cast<ld>(qm(0, i)) * static_cast<ld>(kn(0, i));
    return s;
  };
  ld norm = 0;
  for (std::size_t i = 0; i < dk; ++i) norm += std::abs(static_cast<ld>(q(0, i))) * std::abs(static_cast<ld>(k(0, i)));
  const ld bound = 4 * norm * (3 * eps<T>() + 12 * angle_eps<T>()) + 8 * eps<T>() * norm;
  for (const auto& [m, n] : {std::pair<std::size_t, std::size_t>{5, 4}, {11, 10}, {101, 100}})
    CHECK(std::abs(score(m, n) - score(1, 0)) <= bound);
  CHECK(std::abs(score(7, 3) - score(4, 0)) <= bound);
  // and it does depend on m − n: one step and two steps apart differ
  CHECK(std::abs(score(2, 0) - score(1, 0)) > 100 * bound);
}

TEMPLATE_TEST_CASE("rotary_backward: the inverse rotation; against finite differences and the Jacobian",
                   "[positions][rope][derivatives]", float, double, long double) {
  using T = TestType;
  std::mt19937_64 rng(86);
  for (const auto form : {attn::rotary_form::interleaved, attn::rotary_form::half_split}) {
    const attn::rotary r{.form = form};
    const std::size_t B = 2, tq = 3, h = 2, dk = 4, offset = 6, cols = h * dk;
    const Matrix<T> X = random_matrix<T>(B * tq, cols, rng), G = random_matrix<T>(B * tq, cols, rng);
    // round trip: forward then backward is x again, within a rotation's rounding twice
    Matrix<T> round = X;
    attn::apply_rotary(round, h, offset, B, r);
    attn::rotary_backward(round, h, offset, B, r);
    for (std::size_t k = 0; k < X.size(); ++k)
      CHECK(std::abs(static_cast<ld>(round.data()[k]) - static_cast<ld>(X.data()[k])) <= 20 * eps<T>() * 4);
    // the Jacobian, column by column: RoPE is linear, so J e_k is rope(e_k); Jᵀ g = backward(g)
    Matrix<T> dX = G;
    attn::rotary_backward(dX, h, offset, B, r);
    for (std::size_t row = 0; row < B * tq; ++row) {
      const std::size_t b = row / tq, t = row % tq;
      for (std::size_t c = 0; c < cols; ++c) {
        Matrix<T> e(1, cols, T(0));
        e(0, c) = T(1);
        attn::apply_rotary(e, h, offset + t, 1, r);  // column c of row `row`'s block of J
        ld jtg = 0, mag = 0;
        for (std::size_t o = 0; o < cols; ++o) {
          jtg += static_cast<ld>(e(0, o)) * static_cast<ld>(G(row, o));
          mag += std::abs(static_cast<ld>(e(0, o)) * static_cast<ld>(G(row, o)));
        }
        INFO("sentence " << b << ", row " << t << ", column " << c);
        CHECK(std::abs(static_cast<ld>(dX(row, c)) - jtg) <= 8 * eps<T>() * (mag + 1));
      }
    }
    if constexpr (!std::is_same_v<T, float>) {
      // central differences of L = Σ G ∘ rope(X): linear, so exact but for rounding
      const auto loss = [&](const Matrix<T>& x) {
        Matrix<T> y = x;
        attn::apply_rotary(y, h, offset, B, r);
        ld l = 0;
        for (std::size_t k = 0; k < y.size(); ++k) l += static_cast<ld>(G.data()[k]) * static_cast<ld>(y.data()[k]);
        return l;
      };
      const ld step = 1e-3L;
      for (std::size_t k = 0; k < X.size(); ++k) {
        Matrix<T> up = X, down = X;
        up.data()[k] += static_cast<T>(step);
        down.data()[k] -= static_cast<T>(step);
        const ld fd = (loss(up) - loss(down)) / (2 * step);
        CHECK(std::abs(fd - static_cast<ld>(dX.data()[k])) <= 400 * eps<T>() / step);
      }
    }
  }
}

TEST_CASE("alibi_slopes: the paper's rule for powers of 2 and for the rest", "[positions][alibi]") {
  // the paper's code, written out: for n a power of 2, start = 2^(−2^−(log2 n − 3)), slopes
  // start·start^i; else the closest power of 2 below, then every other slope of twice as many
  const auto power_of_2 = [](std::size_t n) {
    const ld start = std::pow(2.0L, -std::pow(2.0L, -(std::log2(static_cast<ld>(n)) - 3)));
    std::vector<ld> s;
    for (std::size_t i = 0; i < n; ++i) s.push_back(start * std::pow(start, static_cast<ld>(i)));
    return s;
  };
  for (std::size_t h = 1; h <= 32; ++h) {
    std::size_t c = 1;
    while (c * 2 <= h) c *= 2;
    std::vector<ld> want = power_of_2(c);
    const std::vector<ld> more = power_of_2(2 * c);
    for (std::size_t k = 0; want.size() < h; k += 2) want.push_back(more[k]);
    const std::vector<double> got = attn::alibi_slopes(h);
    const std::vector<float> got_f = attn::alibi_slopes<float>(h);
    REQUIRE(got.size() == h);
    for (std::size_t i = 0; i < h; ++i) {
      INFO(h << " heads, head " << i);
      CHECK(std::abs(static_cast<ld>(got[i]) - want[i]) <= eps<double>() * want[i]);
      CHECK(std::abs(static_cast<ld>(got_f[i]) - want[i]) <= eps<float>() / 2 * want[i] * 1.001L);
    }
  }
  // the numbers NEXT_SECTIONS.md gives: h = 3 gives 1/16, 1/256, 1/4 (exactly: powers of 2)
  CHECK(attn::alibi_slopes(3) == std::vector<double>{1.0 / 16, 1.0 / 256, 1.0 / 4});
  CHECK(attn::alibi_slopes(8) == std::vector<double>{0.5, 0.25, 0.125, 0.0625, 1.0 / 32, 1.0 / 64, 1.0 / 128, 1.0 / 256});
  CHECK(attn::alibi_slopes(6) == std::vector<double>{0.25, 1.0 / 16, 1.0 / 64, 1.0 / 256, 0.5, 0.125});
  CHECK(attn::alibi_slopes(0).empty());
}

TEST_CASE("alibi_bias: −m·(p_t − j), the queries the last positions, positive for later keys",
          "[positions][alibi]") {
  Matrix<double> bias(3, 5);
  attn::alibi_bias(bias, 0.25);
  for (std::size_t t = 0; t < 3; ++t)
    for (std::size_t j = 0; j < 5; ++j) {
      const double p = static_cast<double>(t + 2);  // t + n − T
      CHECK(bias(t, j) == -0.25 * (p - static_cast<double>(j)));
    }
  CHECK(bias(0, 4) == 0.5);   // a later key (no causal mask): positive
  CHECK(bias(2, 4) == -0.0);  // the query's own position
}
