// Scores, attend, align and no_attention: the unit's worked examples E1, E2, E5, a user's own
// score, properties over random inputs, and the error contract.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <span>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"
#include "constant_options.hpp"

using attn::Matrix;
using attn::Vector;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

// Compile-time probes: a call that must not compile is a `requires` that is false.
template <class Q, class N, class S>
constexpr bool can_attend = requires(Q q, N n, S s) { attn::attend(q, n, s); };
template <class Q, class K, class V>
constexpr bool can_attend_kv = requires(Q q, K k, V v) { attn::attend(q, k, v, attn::dot); };
static_assert(can_attend<Vector<double, 3>, Matrix<double, 2, 3>, attn::dot_score>);
static_assert(!can_attend<Vector<double, 3>, Matrix<double, 2, 4>, attn::dot_score>);
static_assert(!can_attend<Vector<double, 3>, Matrix<double, 2, 4>, attn::scaled_dot_score>);
// general{W}: q must have W's rows and the notes W's columns (when both are fixed).
static_assert(can_attend<Vector<double, 2>, Matrix<double, 5, 3>, attn::general<double, 2, 3>>);
static_assert(!can_attend<Vector<double, 3>, Matrix<double, 5, 3>, attn::general<double, 2, 3>>);
static_assert(!can_attend<Vector<double, 2>, Matrix<double, 5, 4>, attn::general<double, 2, 3>>);
static_assert(!can_attend<Vector<double, 2>, Matrix<double, 5, 4>, attn::additive<double, 7, 3, 2>>);
// Keys and values must agree on the number of notes.
static_assert(can_attend_kv<Vector<double, 2>, Matrix<double, 5, 2>, Matrix<double, 5, 7>>);
static_assert(!can_attend_kv<Vector<double, 2>, Matrix<double, 5, 2>, Matrix<double, 4, 7>>);

namespace {
constexpr double eps = std::numeric_limits<double>::epsilon();

// The unit's three decimals: |x − printed| ≤ 0.0005.
void require_3_decimals(double x, double printed) { REQUIRE_THAT(x, WithinAbs(printed, 0.0005)); }

// softmax of three scores from the formula with std::exp, independent of the library.
std::array<double, 3> softmax3(double a, double b, double c) {
  const double ea = std::exp(a), eb = std::exp(b), ec = std::exp(c), s = ea + eb + ec;
  return {ea / s, eb / s, ec / s};
}

constexpr bool near(double x, double y, double tol) { return x - y <= tol && y - x <= tol; }

// E1 at compile time: "I drink tea", the decoder about to write चाय.
constexpr Vector<double, 3> e1_state{0, 0.5, 2};
constexpr Matrix<double, 3, 3> e1_notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
constexpr auto e1 = attn::attend(e1_state, e1_notes, attn::dot);
static_assert(near(e1.weights[0], 0.100, 0.0005) && near(e1.weights[1], 0.164, 0.0005) &&
              near(e1.weights[2], 0.736, 0.0005));
static_assert(near(e1.context[2], 0.736, 0.0005));

// Constant evaluation: attend and align for each of the four scores, with β and a mask, in
// float, double and long double, with g++ and clang++ alike (docs/attention.md, "Constant
// evaluation"). E1's notes and state, β = 2, note 1 masked out:
//   α_0 = 1/(1 + e^{β(s_2 − s_0)}), α_1 = 0, α_2 = 1 − α_0, c = (α_0, 0, α_2)
// with s = q·h_j (dot), q·h_j/√3 (scaled_dot), qᵀW h_j, W = diag(1, 2, 1/2) (general: s = (0, 1,
// 1)), and vᵀ tanh(W1 h_j + W2 q), W1 picking h's first and last number, W2 q = (1, 0), v = (1, 1)
// (additive: s_0 = tanh 2, s_2 = 2 tanh 1). The references are printed to 17 digits from Python's
// math (error ≤ 1e-16); the tolerance is softmax's bound B = ε(4.1·Y + (n + 9)/2) ≤ 25ε for these
// rows (Y = max|β s| ≤ 4.7, n = 3: docs/errors.md, "The bounds") with room, plus the references'.
namespace constant {
template <class T>
constexpr T tol = 30 * std::numeric_limits<T>::epsilon() + static_cast<T>(1e-15);
template <class T>
constexpr bool near_t(T x, long double y) {
  return static_cast<long double>(x) - y <= static_cast<long double>(tol<T>) &&
         y - static_cast<long double>(x) <= static_cast<long double>(tol<T>);
}
template <class T>
constexpr Vector<T, 3> q{0, 0.5, 2};
template <class T>
constexpr Matrix<T, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
template <class T>
constexpr Matrix<T, 2, 3> queries{{0, 0.5, 2}, {1, 0, 0}};
template <class T>
constexpr Matrix<T, 3, 3> W{{1, 0, 0}, {0, 2, 0}, {0, 0, 0.5}};
template <class T>
constexpr Matrix<T, 2, 3> W1{{1, 0, 0}, {0, 0, 1}};
template <class T>
constexpr Matrix<T, 2, 3> W2{{0, 0, 0.5}, {0, 0, 0}};
template <class T>
constexpr Vector<T, 2> v{1, 1};
template <class T>
constexpr attn::general<T, 3, 3> general{W<T>};
template <class T>
constexpr attn::additive<T, 2, 3, 3> additive{W1<T>, W2<T>, v<T>};
using attn_test::beta2_middle_masked;
template <class T, class S>
constexpr attn::attention_result<T, 3, 3> attend_masked(const S& score) {
  return attn::attend(q<T>, notes<T>, score, beta2_middle_masked());
}
template <class T, class S>
constexpr auto align_masked(const S& score) {
  return attn::align(queries<T>, notes<T>, score, beta2_middle_masked());
}
/// α_0 for each score; α_2 = 1 − α_0.
constexpr long double dot_a0 = 0.01798620996209156L, scaled_a0 = 0.0903473549608496L,
                      general_a0 = 0.11920292202211755L, additive_a0 = 0.2463227675262593L;

template <class T>
constexpr bool weights_are(const attn::attention_result<T, 3, 3>& r, long double a0) {
  return near_t(r.weights[0], a0) && r.weights[1] == 0 && near_t(r.weights[2], 1 - a0) &&
         near_t(r.context[0], a0) && r.context[1] == 0 && near_t(r.context[2], 1 - a0);
}
template <class T>
constexpr bool all_scores() {
  return weights_are(attend_masked<T>(attn::dot), dot_a0) &&
         weights_are(attend_masked<T>(attn::scaled_dot), scaled_a0) &&
         near_t(attend_masked<T>(attn::scaled_dot).scores[2], 1.1547005383792517L) &&
         weights_are(attend_masked<T>(general<T>), general_a0) &&
         weights_are(attend_masked<T>(additive<T>), additive_a0) &&
         near_t(attend_masked<T>(additive<T>).scores[0], 0.9640275800758169L) &&
         near_t(attend_masked<T>(additive<T>).scores[2], 1.5231883119115297L);
}
static_assert(all_scores<float>());
static_assert(all_scores<double>());
static_assert(all_scores<long double>());

// align: row 0 is attend's; row 1 (q = (1, 0, 0), dot) α_0 = e²/(1 + e²)
template <class T>
constexpr bool align_rows() {
  const auto m = align_masked<T>(attn::dot);
  const auto g = align_masked<T>(additive<T>);
  return near_t(m.weights(0, 0), dot_a0) && m.weights(0, 1) == 0 &&
         near_t(m.weights(1, 0), 0.8807970779778824L) && near_t(m.contexts(1, 2), 0.11920292202211755L) &&
         near_t(g.weights(0, 0), additive_a0) &&
         near_t(align_masked<T>(attn::scaled_dot).weights(0, 0), scaled_a0) &&
         near_t(align_masked<T>(general<T>).weights(0, 0), general_a0);
}
static_assert(align_rows<float>());
static_assert(align_rows<double>());
static_assert(align_rows<long double>());

// into views
static_assert([] {
  Matrix<double, 2, 3> s, w, c;
  attn::align(queries<double>, notes<double>, additive<double>, s.view(), w.view(), c.view(), beta2_middle_masked());
  return near_t(w(0, 0), additive_a0) && near_t(c(0, 2), 1 - additive_a0);
}());
#if ATTN_TEST_CONSTEXPR_VECTOR
// dynamic sizes, whose storage the constant expression owns
static_assert([] {
  const attn::Vector<double> qd{0, 0.5, 2};
  const Matrix<double> hd{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const auto r = attn::attend(qd, hd, attn::dot, beta2_middle_masked());
  return near_t(r.weights[0], dot_a0);
}());
#endif
}  // namespace constant

// A user's own score: cosine similarity. It satisfies attn::Score and then works everywhere.
struct cosine_score {
  static constexpr bool same_size = true;
  void check(std::size_t dq, std::size_t dh) const {
    if (dq != dh) throw attn::dimension_error("cosine: sizes differ");
  }
  template <class T>
  static T norm(std::span<const T> x) {
    T s = 0;
    for (T v : x) s += v * v;
    return std::sqrt(s);
  }
  template <class T>
  T operator()(std::span<const T> q, std::span<const T> h) const {
    T d = 0;
    for (std::size_t i = 0; i < q.size(); ++i) d += q[i] * h[i];
    return d / (norm(q) * norm(h));
  }
  template <class T>  // ∂/∂h (q·h/(|q||h|)) = q/(|q||h|) − s h/|h|²
  void gradient_note(std::span<const T> q, std::span<const T> h, std::span<T> out) const {
    const T s = (*this)(q, h), nq = norm(q), nh = norm(h);
    for (std::size_t i = 0; i < h.size(); ++i) out[i] = q[i] / (nq * nh) - s * h[i] / (nh * nh);
  }
  template <class T>
  void gradient_query(std::span<const T> q, std::span<const T> h, std::span<T> out) const {
    gradient_note(h, q, out);
  }
};
static_assert(attn::Score<cosine_score, double>);
}  // namespace

TEST_CASE("E1: dot-product attention by hand", "[attention][unit]") {
  const Vector<double, 3> q{0, 0.5, 2};
  const Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const auto r = attn::attend(q, notes, attn::dot);
  const auto ref = softmax3(0, 0.5, 2);
  for (std::size_t j = 0; j < 3; ++j) {
    REQUIRE(r.scores[j] == q[j]);
    REQUIRE_THAT(r.weights[j], WithinRel(ref[j], 1e-12));
    REQUIRE_THAT(r.context[j], WithinRel(ref[j], 1e-12));
  }
  const double printed[3] = {0.100, 0.164, 0.736};
  for (std::size_t j = 0; j < 3; ++j) {
    require_3_decimals(r.weights[j], printed[j]);
    require_3_decimals(r.context[j], printed[j]);
  }
  // The sum under the fraction bar: 1 + 1.649 + 7.389.
  REQUIRE_THAT(std::exp(0.5), WithinAbs(1.649, 0.0005));
  REQUIRE_THAT(std::exp(2.0), WithinAbs(7.389, 0.0005));
}

TEST_CASE("E2: how sure — doubling the state, or β = 2", "[attention][unit]") {
  const Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const auto doubled = attn::attend(Vector<double, 3>{0, 1, 4}, notes, attn::dot);
  const auto sharp = attn::attend(Vector<double, 3>{0, 0.5, 2}, notes, attn::dot, {.beta = 2});
  const auto ref = softmax3(0, 1, 4);
  const double printed[3] = {0.017, 0.047, 0.936};
  for (std::size_t j = 0; j < 3; ++j) {
    REQUIRE_THAT(doubled.weights[j], WithinRel(ref[j], 1e-12));
    REQUIRE_THAT(sharp.weights[j], WithinRel(ref[j], 1e-12));
    require_3_decimals(doubled.weights[j], printed[j]);
  }
  // The share of "tea" climbs with β.
  double previous = 0;
  for (double beta = 0; beta <= 4; beta += 0.25) {
    const double tea = attn::attend(Vector<double, 3>{0, 0.5, 2}, notes, attn::dot, {.beta = beta}).weights[2];
    REQUIRE(tea > previous);
    previous = tea;
  }
}

TEST_CASE("E5: an additive score by hand", "[attention][unit][score]") {
  const Matrix<double> I{{1, 0}, {0, 1}};
  const Vector<double> v{1, 1};
  const attn::additive score(I, I, v);
  const Matrix<double> notes{{1, 0}, {0, 1}, {1, 1}};
  const std::vector<double> q{0.5, -0.5};
  const auto r = attn::attend(q, notes, score);
  const double s[3] = {std::tanh(1.5) + std::tanh(-0.5), 2 * std::tanh(0.5), std::tanh(1.5) + std::tanh(0.5)};
  const auto ref = softmax3(s[0], s[1], s[2]);
  const double printed_s[3] = {0.443, 0.924, 1.367}, printed_w[3] = {0.195, 0.315, 0.490};
  for (std::size_t j = 0; j < 3; ++j) {
    REQUIRE_THAT(r.scores[j], WithinRel(s[j], 1e-12));
    REQUIRE_THAT(r.weights[j], WithinRel(ref[j], 1e-12));
    require_3_decimals(r.scores[j], printed_s[j]);
    require_3_decimals(r.weights[j], printed_w[j]);
  }
  // The intermediate tanh values the unit prints.
  require_3_decimals(std::tanh(1.5), 0.905);
  require_3_decimals(std::tanh(-0.5), -0.462);
}

TEST_CASE("Keys differ from values: attention as a soft lookup", "[attention]") {
  const Matrix<double> keys{{1, 0}, {0, 1}, {1, 1}};
  const Matrix<double> values{{10, 0, 0, 1}, {0, 10, 0, 1}, {0, 0, 10, 1}};
  const std::vector<double> q{2, -1};
  const auto r = attn::attend(q, keys, values, attn::dot);
  const auto ref = softmax3(2, -1, 1);
  REQUIRE(r.context.size() == 4);
  for (std::size_t j = 0; j < 3; ++j) REQUIRE_THAT(r.context[j], WithinRel(10 * ref[j], 4 * eps));
  REQUIRE_THAT(r.context[3], WithinRel(1.0, 4 * eps));
}

TEST_CASE("align: the alignment map, one row per written word", "[attention][align]") {
  const Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const Matrix<double, 4, 3> states{{2, 0.5, 0}, {0, 0.5, 2}, {0, 2, 0.5}, {1, 1, 0}};
  const auto map = attn::align(states, notes, attn::dot);
  static_assert(decltype(map.weights)::rows_extent == 4 && decltype(map.weights)::cols_extent == 3);
  for (std::size_t t = 0; t < 4; ++t) {
    const auto one = attn::attend(states.row(t), notes, attn::dot);
    double sum = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      REQUIRE(map.weights(t, j) == one.weights[j]);
      REQUIRE(map.contexts(t, j) == one.context[j]);
      sum += map.weights(t, j);
    }
    REQUIRE_THAT(sum, WithinAbs(1.0, 7 * eps));
  }
  // No attention: every written word gets the same summary, the last note.
  const auto summary = attn::no_attention(states, notes);
  for (std::size_t t = 0; t < 4; ++t) REQUIRE((summary(t, 0) == 0 && summary(t, 1) == 0 && summary(t, 2) == 1));

  SECTION("dynamic sizes and a wrong output shape leave every output untouched") {
    const Matrix<double> qs{{1, 0, 0}, {0, 1, 0}};
    Matrix<double> s(2, 3, 9.0), w(2, 3, 9.0), c(3, 3, 9.0);
    REQUIRE_THROWS_AS(attn::align(qs, notes, attn::dot, s.view(), w.view(), c.view()), attn::dimension_error);
    for (std::size_t i = 0; i < 6; ++i) REQUIRE((s.data()[i] == 9.0 && w.data()[i] == 9.0));
  }
}

TEST_CASE("Dynamic size errors name both sizes and leave outputs untouched", "[attention][errors]") {
  const Matrix<double> notes{{1, 0, 0}, {0, 1, 0}};
  const std::vector<double> q{1, 2};
  std::vector<double> s(2, 7.0), w(2, 7.0), c(3, 7.0);
  try {
    attn::attend(q, notes, attn::dot, s, w, c);
    FAIL("no throw");
  } catch (const attn::dimension_error& e) {
    REQUIRE(std::string(e.what()) == "attn::attend: query size is 2 but note size is 3");
  }
  const std::vector<double> q3{1, 2, 3};
  std::vector<double> c_short(2, 7.0);
  REQUIRE_THROWS_WITH(attn::attend(q3, notes, attn::dot, s, w, c_short),
                      "attn::attend: context size is 2 but columns of values is 3");
  const std::array<bool, 2> none{false, false};
  REQUIRE_THROWS_AS(attn::attend(q3, notes, attn::dot, s, w, c,
                                 {.mask = none, .if_all_masked = attn::all_masked_policy::throw_error}),
                    attn::domain_error);
  // Scores of −inf everywhere are found before anything is written, too.
  const Matrix<double> far{{-1e308, 0, 0}, {-1e308, 0, 0}};
  const std::vector<double> big{1e308, 0, 0};
  REQUIRE_THROWS_AS(attn::attend(big, far, attn::dot, s, w, c, {.if_all_masked = attn::all_masked_policy::throw_error}),
                    attn::domain_error);
  for (double x : s) REQUIRE(x == 7.0);
  for (double x : w) REQUIRE(x == 7.0);
  for (double x : c) REQUIRE(x == 7.0);
  const Matrix<double> empty;
  REQUIRE_THROWS_WITH(attn::attend(q3, attn::MatrixView<const double>(nullptr, 0, 3), attn::dot),
                      "attn::attend: the notes matrix is empty");
  (void)empty;
}

TEST_CASE("Masked notes get weight 0 and cannot leak NaN into the context", "[attention][mask]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Matrix<double> notes{{1, 0}, {nan, nan}, {0, 1}};
  const std::vector<double> q{1, 1};
  const std::array<bool, 3> keep{true, false, true};
  const auto r = attn::attend(q, notes, attn::dot, {.mask = keep});
  REQUIRE(r.weights[1] == 0.0);
  REQUIRE(r.context[0] == 0.5);
  REQUIRE(r.context[1] == 0.5);
  const std::array<bool, 3> none{};
  const auto z = attn::attend(q, notes, attn::dot, {.mask = none});
  REQUIRE((z.context[0] == 0.0 && z.context[1] == 0.0));
}

namespace {
// How far the batched scores may be from one-note-at-a-time ones: 0 where both sum in the same
// order (dot, scaled_dot, additive, a user's score); general forms Wᵀq first, so the two
// orders differ by at most 2(d_q + d_h)·ε·Σ|q_a W_ab h_b|.
double no_reordering(std::span<const double>, std::span<const double>) { return 0; }
// dot and scaled_dot sum in the same order, but where the build fuses multiply-adds each loop
// fuses where the compiler chooses: two evaluations differ by at most 2γ_d·Σ|q_i h_i|.
double same_order_fused(std::span<const double> q, std::span<const double> h) {
  if (!attn_test::fma_contracted()) return 0;
  double m = 0;
  for (std::size_t i = 0; i < q.size(); ++i) m += std::abs(q[i] * h[i]);
  return static_cast<double>(q.size() + 1) * std::numeric_limits<double>::epsilon() * m;
}

template <class S, class Tolerance = decltype(&no_reordering)>
void check_properties(const S& score, std::size_t dq, std::size_t dh, std::mt19937_64& rng,
                      Tolerance batch_tolerance = &no_reordering) {
  std::normal_distribution<double> normal(0, 1);
  for (std::size_t n : {1u, 3u, 17u, 64u}) {
    for (double scale : {1e-3, 1.0, 10.0}) {
      std::vector<double> q(dq);
      for (auto& x : q) x = scale * normal(rng);
      Matrix<double> notes(n, dh);
      for (std::size_t i = 0; i < n * dh; ++i) notes.data()[i] = scale * normal(rng);
      const auto r = attn::attend(q, notes, score);
      double sum = 0;
      for (double a : r.weights) {
        REQUIRE(a >= 0);
        sum += a;
      }
      REQUIRE(std::abs(sum - 1) <= static_cast<double>(n + 4) * eps);
      // The context lies in the convex hull of the notes: along any direction u,
      // u·c ≤ max_j u·h_j (up to the rounding of a convex combination, (n + d + 4)·ε·max|u·h|).
      for (int trial = 0; trial < 4; ++trial) {
        std::vector<double> u(dh);
        for (auto& x : u) x = normal(rng);
        double hi = -std::numeric_limits<double>::infinity(), mag = 0;
        for (std::size_t j = 0; j < n; ++j) {
          const double p = attn::dot(u, notes.row(j));
          hi = std::max(hi, p);
          mag = std::max(mag, std::abs(p));
          for (std::size_t i = 0; i < dh; ++i) mag = std::max(mag, std::abs(u[i] * notes(j, i)) * static_cast<double>(dh));
        }
        REQUIRE(attn::dot(u, r.context) <= hi + static_cast<double>(n + dh + 4) * eps * mag);
      }
      // β = 0: uniform; β large: the argmax note.
      const auto flat = attn::attend(q, notes, score, {.beta = 0});
      for (double a : flat.weights) REQUIRE_THAT(a, WithinRel(1.0 / static_cast<double>(n), 2 * eps));
      std::size_t best = 0;
      for (std::size_t j = 1; j < n; ++j)
        if (r.scores[j] > r.scores[best]) best = j;
      double gap = std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j < n; ++j)
        if (j != best) gap = std::min(gap, r.scores[best] - r.scores[j]);
      if (gap > 1e-9) {
        const auto sharp = attn::attend(q, notes, score, {.beta = 800 / gap});
        REQUIRE(sharp.weights[best] == 1.0);
      }
      // Each score matches score(q, h_j) one note at a time.
      for (std::size_t j = 0; j < n; ++j)
        REQUIRE_THAT(r.scores[j], WithinAbs(score(std::span<const double>(q), std::span<const double>(notes.row(j))),
                                            batch_tolerance(q, notes.row(j))));
    }
  }
}
}  // namespace

TEST_CASE("Properties over random inputs, for every score", "[attention][property]") {
  std::mt19937_64 rng(2026);
  std::normal_distribution<double> normal(0, 1);
  for (std::size_t d : {1u, 4u, 9u}) {
    check_properties(attn::dot, d, d, rng, &same_order_fused);
    check_properties(attn::scaled_dot, d, d, rng, &same_order_fused);
    check_properties(cosine_score{}, d, d, rng);
    const std::size_t dq = d + 2, k = 5;
    Matrix<double> W(dq, d), W1(k, d), W2(k, dq);
    Vector<double> v(k);
    for (std::size_t i = 0; i < W.size(); ++i) W.data()[i] = normal(rng);
    for (std::size_t i = 0; i < W1.size(); ++i) W1.data()[i] = normal(rng);
    for (std::size_t i = 0; i < W2.size(); ++i) W2.data()[i] = normal(rng);
    for (auto& x : v) x = normal(rng);
    const auto general_tolerance = [&](std::span<const double> q, std::span<const double> h) {
      double m = 0;
      for (std::size_t a = 0; a < q.size(); ++a)
        for (std::size_t b = 0; b < h.size(); ++b) m += std::abs(q[a] * W(a, b) * h[b]);
      return 2 * static_cast<double>(q.size() + h.size()) * eps * m;
    };
    check_properties(attn::general(W), dq, d, rng, general_tolerance);
    check_properties(attn::additive(W1, W2, v), dq, d, rng);
  }
}

namespace {
// attend with sizes fixed at compile time (the small path, N ≤ 31; N = 32, the first size past
// it, takes the general path) against the same numbers
// through dynamic views (the general path): the same scores, weights and context to the bit
// where the build fuses no multiply-adds, to rounding where it does.
template <class T, std::size_t N, std::size_t D>
void check_small_path_matches(std::mt19937_64& rng, double spread, const attn::options& opt) {
  std::uniform_real_distribution<double> u(-spread, spread);
  Matrix<T, N, D> keys;
  Matrix<T, N, D> values;
  Vector<T, D> q;
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t i = 0; i < D; ++i) {
      keys(j, i) = static_cast<T>(u(rng));
      values(j, i) = static_cast<T>(u(rng));
    }
  for (std::size_t i = 0; i < D; ++i) q[i] = static_cast<T>(u(rng));
  for (const auto* score_name : {"dot", "scaled_dot"}) {
    const bool scaled = score_name[0] == 's';
    const auto fixed = scaled ? attn::attend(q, keys, values, attn::scaled_dot, opt)
                              : attn::attend(q, keys, values, attn::dot, opt);
    std::vector<T> kd(keys.data(), keys.data() + N * D), vd(values.data(), values.data() + N * D);
    std::vector<T> qd(q.data(), q.data() + D), s(N), w(N), c(D);
    const attn::MatrixView<const T> K(kd.data(), N, D), V(vd.data(), N, D);
    if (scaled) {
      attn::attend(qd, K, V, attn::scaled_dot, s, w, c, opt);
    } else {
      attn::attend(qd, K, V, attn::dot, s, w, c, opt);
    }
    INFO(score_name << " N=" << N << " D=" << D << " spread=" << spread);
    if (!attn_test::fma_contracted()) {
      for (std::size_t j = 0; j < N; ++j) {
        REQUIRE(fixed.scores[j] == s[j]);
        REQUIRE(fixed.weights[j] == w[j]);
      }
      for (std::size_t i = 0; i < D; ++i) REQUIRE(fixed.context[i] == c[i]);
      continue;
    }
    // Fused multiply-adds (fma_contracted): each path's dot products and blend fuse where the
    // compiler chooses, so the paths agree to rounding. Scores: each sum of D products is off
    // by at most γ_D·Σ_i|q_i k_ji| (γ_D ≈ D·ε), plus one rounding for the scale. Weights: a
    // change Δs of the scores moves log α_j by β(Δs_j − Σ_k α_k Δs_k), at most 2|β|·max|Δs|,
    // and each path's own roundings (t = β·s − m: ε·|β·s| each, exp 1.5 ulp, 1/Σ and the
    // product) add 8ε·(1 + |β|·max|s|). Context: each blend is off by γ_N·Σ_j α_j|v_ji|, plus
    // Σ_j |Δα_j|·|v_ji|.
    const double ulp = std::numeric_limits<T>::epsilon();
    const double f = scaled ? 1 / std::sqrt(static_cast<double>(D)) : 1.0;
    double ds = 0, smax = 0;
    for (std::size_t j = 0; j < N; ++j) {
      double mag = 0;
      for (std::size_t i = 0; i < D; ++i) mag += std::abs(static_cast<double>(q[i]) * keys(j, i));
      const double bound = (2.0 * D + 2) * ulp * mag * f;
      REQUIRE(std::abs(static_cast<double>(fixed.scores[j]) - s[j]) <= bound);
      ds = std::max(ds, bound);
      smax = std::max(smax, std::abs(static_cast<double>(s[j])));
    }
    const double rel = 2 * std::abs(opt.beta) * ds + 8 * ulp * (1 + std::abs(opt.beta) * smax);
    for (std::size_t j = 0; j < N; ++j)
      REQUIRE(std::abs(static_cast<double>(fixed.weights[j]) - w[j]) <=
              rel * w[j] + 4 * static_cast<double>(std::numeric_limits<T>::denorm_min()));
    for (std::size_t i = 0; i < D; ++i) {
      double mag = 0;
      for (std::size_t j = 0; j < N; ++j) mag += w[j] * std::abs(static_cast<double>(values(j, i)));
      REQUIRE(std::abs(static_cast<double>(fixed.context[i]) - c[i]) <= (2.0 * N * ulp + rel) * mag);
    }
  }
}

template <class T>
void check_small_paths(std::mt19937_64& rng) {
  // spreads small enough that every exp is in exp_in_range's range, and large enough
  // (100·d) that some are not and the block falls back to exp
  for (const double spread : {1.0, 4.0, 30.0}) {
    for (const double beta : {1.0, 0.5, 3.0}) {
      const attn::options opt{.beta = beta};
      check_small_path_matches<T, 1, 3>(rng, spread, opt);
      check_small_path_matches<T, 2, 2>(rng, spread, opt);
      check_small_path_matches<T, 3, 3>(rng, spread, opt);
      check_small_path_matches<T, 4, 5>(rng, spread, opt);
      check_small_path_matches<T, 5, 8>(rng, spread, opt);
      check_small_path_matches<T, 8, 16>(rng, spread, opt);
      check_small_path_matches<T, 16, 4>(rng, spread, opt);
      check_small_path_matches<T, 31, 7>(rng, spread, opt);
      check_small_path_matches<T, 32, 64>(rng, spread, opt);
    }
  }
  const std::array<bool, 5> keep{true, false, true, true, false};
  check_small_path_matches<T, 5, 8>(rng, 3.0, attn::options{.mask = keep});
}
}  // namespace

TEMPLATE_TEST_CASE("Constant evaluation gives the run time's numbers (to the bit unfused)", "[attention][constexpr]",
                   float, double, long double) {
  using T = TestType;
  // The constant results against the same calls at run time. Same bits where no multiply-add is
  // fused, except long double's additive score: std::tanh at run time, tanh_constant (within
  // 4 ulp of it, tests/test_math.cpp) in constant evaluation: with |v_i| = 1 and two hidden
  // units its scores move by 8 ulp of 1 and the weights by β·8ε relative, times 2: 32ε.
  // With fusion each path fuses on its own: both within constant::tol of the truth.
  constexpr auto dot = constant::attend_masked<T>(attn::dot);
  constexpr auto scaled = constant::attend_masked<T>(attn::scaled_dot);
  constexpr auto general = constant::attend_masked<T>(constant::general<T>);
  constexpr auto additive = constant::attend_masked<T>(constant::additive<T>);
  constexpr auto map = constant::align_masked<T>(constant::additive<T>);
  const bool fused = attn_test::fma_contracted();
  const auto same = [&](std::span<const T> at_compile, std::span<const T> at_run, T tol) {
    for (std::size_t i = 0; i < at_compile.size(); ++i) {
      INFO("entry " << i << ": " << at_compile[i] << " vs " << at_run[i]);
      if (tol == T(0) && !fused)  // the same bits: equal, and zeros of one sign (no NaN here)
        REQUIRE((at_compile[i] == at_run[i] && std::signbit(at_compile[i]) == std::signbit(at_run[i])));
      else
        REQUIRE(std::fabs(at_compile[i] - at_run[i]) <= (fused ? 2 * constant::tol<T> : tol));
    }
  };
  const auto check = [&](const auto& c, const auto& r, T tol) {
    same(std::span<const T>(c.scores), std::span<const T>(r.scores), tol);
    same(std::span<const T>(c.weights), std::span<const T>(r.weights), tol);
    same(std::span<const T>(c.context), std::span<const T>(r.context), tol);
  };
  check(dot, constant::attend_masked<T>(attn::dot), 0);
  check(scaled, constant::attend_masked<T>(attn::scaled_dot), 0);
  check(general, constant::attend_masked<T>(constant::general<T>), 0);
  constexpr bool tanh_differs = !std::is_same_v<T, float> && !std::is_same_v<T, double> &&
                                std::numeric_limits<T>::digits != 53;
  const T additive_tol = tanh_differs ? 32 * std::numeric_limits<T>::epsilon() : T(0);
  check(additive, constant::attend_masked<T>(constant::additive<T>), additive_tol);
  const auto map_run = constant::align_masked<T>(constant::additive<T>);
  same(std::span<const T>(map.weights.data(), 6), std::span<const T>(map_run.weights.data(), 6), additive_tol);
  same(std::span<const T>(map.contexts.data(), 6), std::span<const T>(map_run.contexts.data(), 6), additive_tol);
}

TEST_CASE("Fixed sizes up to 32 notes give the dynamic path's numbers (to the bit unfused)",
          "[attention][fixed]") {
  std::mt19937_64 rng(33);
  check_small_paths<float>(rng);
  check_small_paths<double>(rng);
}

namespace {

// attend over notes of at least online_prefetch_bytes (where the one-pass kernel prefetches
// each next block) against the same sums in double from the formulas, for notes that are keys
// and values and for separate keys and values. Note 0 is made the clear argmax, so the running
// max is set by the first block and never rescales the sums. Bounds, with u = float's unit
// roundoff: each score is a sum of d products, off by at most γ_d Σ_i |q_i k_ji| (γ_k =
// k·u/(1 − k·u)) =: Δ_j; a weight's logarithm moves by at most 2·max_j Δ_j with the scores,
// by |t_j|·u with the rounding of t_j = s_j − m, by 3u in exp (1.5 ulp) and 3u for the
// reciprocal of the sum, its product and the sum in double, and by γ_64 for a block's float
// sum of at most 64 positive exps; the context, Σ_j α_j v_ji, adds the rounding of a chain of
// at most n additions, γ_n Σ_j α_j |v_ji|, and the final product, to Σ_j |Δα_j| |v_ji|.
void check_long_attend(bool separate_values, std::mt19937_64& rng) {
  using T = float;
  const std::size_t d = 128, n = attn::detail::online_prefetch_bytes / (d * sizeof(T)) + 40;
  std::normal_distribution<double> normal(0, 1);
  std::vector<T> keys(n * d), values(separate_values ? n * d : 0), q(d);
  for (auto* v : {&keys, &values, &q})
    for (auto& x : *v) x = static_cast<T>(normal(rng) * 0.2);
  const auto exact_score = [&](std::size_t j) {
    double acc = 0;
    for (std::size_t i = 0; i < d; ++i) acc += static_cast<double>(q[i]) * keys[j * d + i];
    return acc;
  };
  double top = -std::numeric_limits<double>::infinity(), qq = 0;
  for (std::size_t j = 1; j < n; ++j) top = std::max(top, exact_score(j));
  for (const T x : q) qq += static_cast<double>(x) * x;
  // s_0 ≈ top + 1
  for (std::size_t i = 0; i < d; ++i) keys[i] = static_cast<T>(q[i] * ((top + 1) / qq));
  const attn::MatrixView<const T> K(keys.data(), n, d);
  const attn::MatrixView<const T> V =
      separate_values ? attn::MatrixView<const T>(values.data(), n, d) : K;
  std::vector<T> s(n), w(n), c(d);
  attn::attend(q, K, V, attn::dot, s, w, c);

  const auto gamma = [](double k) {
    const double u = std::numeric_limits<T>::epsilon() / 2;
    return k * u / (1 - k * u);
  };
  const double u = std::numeric_limits<T>::epsilon() / 2;
  std::vector<double> s_ref(n), w_ref(n);
  double ds = 0, m = exact_score(0), t_max = 0;
  for (std::size_t j = 0; j < n; ++j) {
    double mag = 0;
    for (std::size_t i = 0; i < d; ++i)
      mag += std::abs(static_cast<double>(q[i]) * keys[j * d + i]);
    s_ref[j] = exact_score(j);
    REQUIRE(s_ref[j] <= m);
    REQUIRE(std::abs(s[j] - s_ref[j]) <= gamma(d) * mag);
    ds = std::max(ds, gamma(d) * mag);
    t_max = std::max(t_max, m - s_ref[j] + gamma(d) * mag);
  }
  double sum = 0;
  for (std::size_t j = 0; j < n; ++j) sum += w_ref[j] = std::exp(s_ref[j] - m);
  const double rel = std::expm1(2 * ds + (t_max + 6) * u + gamma(64));
  for (std::size_t j = 0; j < n; ++j) {
    w_ref[j] /= sum;
    REQUIRE(std::abs(w[j] - w_ref[j]) <= rel * w_ref[j]);
  }
  for (std::size_t i = 0; i < d; ++i) {
    double ref = 0, mag = 0;
    for (std::size_t j = 0; j < n; ++j) {
      ref += w_ref[j] * V(j, i);
      mag += w_ref[j] * std::abs(static_cast<double>(V(j, i)));
    }
    REQUIRE(std::abs(c[i] - ref) <= (gamma(static_cast<double>(n)) + rel + u) * mag);
  }
}
}  // namespace

TEST_CASE("Long notes: the one-pass kernel prefetches ahead, and the numbers do not change",
          "[attention][long]") {
  std::mt19937_64 rng(77);
  check_long_attend(false, rng);
  check_long_attend(true, rng);
}

namespace {
// The same query and notes (n × d, row stride d) copied to `lanes` different starting points:
// one on a 64-byte line, then one number further each time. attend (the one-pass kernel from 32
// notes on, two passes below), its scaled-dot scores and softmax give the bits of the aligned copy.
template <class T>
void check_alignment_independence(std::size_t n, std::size_t d, std::mt19937_64& rng) {
  constexpr std::size_t lanes = attn::storage_alignment / sizeof(T);
  std::normal_distribution<double> normal(0, 1);
  std::vector<T> q0(d), h0(n * d);
  for (T& x : q0) x = static_cast<T>(normal(rng));
  for (T& x : h0) x = static_cast<T>(normal(rng));
  std::vector<T, attn::aligned_allocator<T>> qbuf(d + lanes), hbuf(n * d + lanes);
  std::vector<T> s(n), w(n), c(d), e(n);  // at this offset
  std::vector<T> s0, w0, c0, e0;           // at offset 0
  for (std::size_t off = 0; off < lanes; ++off) {
    std::copy(q0.begin(), q0.end(), qbuf.begin() + static_cast<std::ptrdiff_t>(off));
    std::copy(h0.begin(), h0.end(), hbuf.begin() + static_cast<std::ptrdiff_t>(off));
    const std::span<const T> q(qbuf.data() + off, d);
    const attn::MatrixView<const T> H(hbuf.data() + off, n, d);
    attn::attend(q, H, attn::scaled_dot, s, w, c);
    attn::softmax(s, e, {.beta = 3});
    if (off == 0) {
      s0 = s;
      w0 = w;
      c0 = c;
      e0 = e;
      continue;
    }
    INFO("n = " << n << ", d = " << d << ", offset " << off << " numbers from a 64-byte line");
    REQUIRE(s == s0);  // (finite numbers: == is equality of the bits, bar the sign of a zero)
    REQUIRE(w == w0);
    REQUIRE(e == e0);
    REQUIRE(c == c0);
  }
}
}  // namespace

TEST_CASE("Results do not depend on where the numbers lie in memory", "[attention][alignment]") {
  std::mt19937_64 rng(64);
  for (const auto& [n, d] : std::vector<std::array<std::size_t, 2>>{{5, 3}, {31, 16}, {64, 64}, {100, 67}, {200, 128}}) {
    check_alignment_independence<float>(n, d, rng);
    check_alignment_independence<double>(n, d, rng);
  }
}

namespace {
// attend's one-pass context against split attention's (attend_partial, then finish) over the
// same notes: the same kernels, the same max, sum and undivided context, for a single block
// (attend's short path, n ≤ 64) and for several (the block loop), divided the same way (by
// 1/l rounded from sum_t), so the bits agree in float and double. Builds that fuse
// multiply-adds may fuse each path where they choose: there the numbers agree to rounding,
// γ_n + 2ε relative to Σ|v|.
template <class T>
void check_one_pass_against_split(std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0, 1);
  for (const std::size_t n : {32u, 33u, 47u, 64u, 65u, 128u, 200u}) {
    for (const std::size_t d : {3u, 16u, 64u}) {
      for (const bool apart : {false, true}) {
        Matrix<T> keys(n, d), values(n, d + 1);
        std::vector<T> q(d);
        for (std::size_t i = 0; i < keys.size(); ++i) keys.data()[i] = static_cast<T>(normal(rng));
        for (std::size_t i = 0; i < values.size(); ++i)
          values.data()[i] = static_cast<T>(normal(rng));
        for (T& x : q) x = static_cast<T>(normal(rng) * 0.5);
        const attn::MatrixView<const T> V =
            apart ? attn::MatrixView<const T>(values) : attn::MatrixView<const T>(keys);
        for (const double beta : {1.0, 0.7}) {
          const attn::options opt{.beta = beta};
          const auto one = attn::attend(q, keys, V, attn::scaled_dot, opt);
          const auto split = attn::finish(attn::attend_partial(q, keys, V, attn::scaled_dot, opt));
          INFO("n=" << n << " d=" << d << " apart=" << apart << " beta=" << beta);
          REQUIRE(split.size() == one.context.size());
          double mag = 0;
          for (std::size_t j = 0; j < n; ++j)
            for (std::size_t i = 0; i < V.cols(); ++i)
              mag = std::max(mag, std::abs(static_cast<double>(V(j, i))));
          const double ulp = std::numeric_limits<T>::epsilon();
          for (std::size_t i = 0; i < split.size(); ++i) {
            const double a = one.context[i], b = split[i];
            if (attn_test::fma_contracted()) {
              REQUIRE(std::abs(a - b) <= (static_cast<double>(n + 2) * ulp) * mag);
            } else {
              REQUIRE(one.context[i] == split[i]);
            }
          }
        }
      }
    }
  }
}
}  // namespace

TEST_CASE("attend's one-pass context is split attention's (one block and several)",
          "[attention][split]") {
  std::mt19937_64 rng(91);
  check_one_pass_against_split<double>(rng);
  check_one_pass_against_split<float>(rng);
}
