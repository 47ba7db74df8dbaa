// Scores: the four of the unit, their gradients, the capabilities a score declares (the
// concepts of attn/score.hpp, held by static tests), and a user's dot-product score, which takes
// the same fast paths as attn::dot without attn calling any of its members.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"

using attn::Matrix;
using attn::Vector;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {
constexpr double eps = std::numeric_limits<double>::epsilon();

// Counts every call attn makes of a user score's members (the fast paths make none).
inline int member_calls = 0;

// s = q·h written by a user: a Score, and nothing more (no batched members, no capability).
struct plain_dot {
  static constexpr bool same_size = true;
  void check(std::size_t d_q, std::size_t d_h) const {
    if (d_q != d_h) throw attn::dimension_error("plain_dot: sizes differ");
  }
  template <attn::real T>
  T operator()(std::span<const T> q, std::span<const T> h) const {
    ++member_calls;
    return attn::detail::sum_of_products(q.data(), h.data(), q.size());
  }
  template <attn::real T>
  void gradient_note(std::span<const T> q, std::span<const T>, std::span<T> out) const {
    ++member_calls;
    for (std::size_t i = 0; i < q.size(); ++i) out[i] = q[i];
  }
  template <attn::real T>
  void gradient_query(std::span<const T>, std::span<const T> h, std::span<T> out) const {
    ++member_calls;
    for (std::size_t i = 0; i < h.size(); ++i) out[i] = h[i];
  }
};

// The same score declaring the dot-product capability: s = scale(d)·(q·h) with scale 1. Its
// members count their calls too; attn's dot-product paths must not need them.
struct my_dot : plain_dot {
  static constexpr bool dot_product = true;
  template <attn::real T>
  static constexpr T scale(std::size_t) noexcept {
    return T(1);
  }
};

// q·h/√d by way of dot_product_family, as a user may derive it.
struct my_scaled_dot : attn::dot_product_family<my_scaled_dot> {
  [[maybe_unused]] static constexpr const char* name = "my_scaled_dot";
  template <attn::real T>
  static T scale(std::size_t d) {
    return T(1) / std::sqrt(static_cast<T>(d));
  }
};

// Declares dot_product but says false, or gives no scale: not the dot-product family.
struct says_not_dot : plain_dot {
  static constexpr bool dot_product = false;
  template <attn::real T>
  static T scale(std::size_t) { return T(1); }
};
struct dot_without_scale : plain_dot {
  static constexpr bool dot_product = true;
};
}  // namespace

// ---------------------------------------------------------------------------------------------
// What a score can do: the concepts of attn/score.hpp
// ---------------------------------------------------------------------------------------------

// Compile-time probes: a call that must not compile is a `requires` that is false.
template <class A, class B>
constexpr bool can_dot = requires(A a, B b) { attn::dot(a, b); };
static_assert(can_dot<Vector<double, 3>, Vector<double, 3>>);
static_assert(!can_dot<Vector<double, 3>, Vector<double, 4>>);
static_assert(!can_dot<std::array<float, 2>, std::array<float, 5>>);
static_assert(can_dot<std::array<float, 2>, std::vector<float>>);  // checked at run time
static_assert(!can_dot<Vector<float, 3>, Vector<double, 3>>);       // no silent mixing of types

// A temporary W would dangle: general refuses it.
static_assert(!std::is_constructible_v<attn::general<double>, Matrix<double>&&>);
static_assert(std::is_constructible_v<attn::additive<double>, const Matrix<double>&, const Matrix<double>&,
                                      const Vector<double>&>);
static_assert(!std::is_constructible_v<attn::additive<double>, const Matrix<double>&, const Matrix<double>&,
                                       Vector<double>&&>);
static_assert(!std::is_constructible_v<attn::additive<double>, Matrix<double>&&, const Matrix<double>&,
                                       const Vector<double>&>);
// additive{W1, W2, v} deduces its type from Matrix or MatrixView parameters and any vector of T
// (std::vector, std::array, std::span, Vector), and refuses a temporary that owns its numbers.
static_assert(std::is_same_v<decltype(attn::additive{std::declval<const Matrix<double>&>(),
                                                     std::declval<const Matrix<double>&>(),
                                                     std::declval<const std::vector<double>&>()}),
                             attn::additive<double>>);
static_assert(std::is_same_v<decltype(attn::additive{std::declval<const Matrix<float, 2, 3>&>(),
                                                     std::declval<attn::MatrixView<const float, 2, 4>>(),
                                                     std::declval<std::array<float, 2>&>()}),
                             attn::additive<float, 2, 3, 4>>);
static_assert(std::is_same_v<decltype(attn::additive{std::declval<attn::MatrixView<double>>(),
                                                     std::declval<attn::MatrixView<double>>(),
                                                     std::declval<std::span<const double>>()}),
                             attn::additive<double>>);
static_assert(!std::is_constructible_v<attn::additive<double>, const Matrix<double>&, const Matrix<double>&,
                                       std::vector<double>&&>);
static_assert(std::is_constructible_v<attn::additive<double>, attn::MatrixView<const double>,
                                      attn::MatrixView<const double>, std::span<const double>>);
static_assert(attn::Score<attn::dot_score, float> && attn::Score<attn::scaled_dot_score, long double>);
static_assert(attn::Score<attn::general<double>, double> && attn::Score<attn::additive<float>, float>);
static_assert(!attn::Score<int, double>);
static_assert(attn::Score<plain_dot, double> && attn::Score<my_dot, float>);
static_assert(!attn::Score<attn::dot_score, int>);  // scores compute in float, double or long double

// Batched scores (all n at once) and batched backward: the four of the unit; not a bare Score.
static_assert(attn::batched_score<attn::dot_score, float> && attn::batched_score<attn::scaled_dot_score, double>);
static_assert(attn::batched_score<attn::general<double>, double> && attn::batched_score<attn::additive<float>, float>);
static_assert(!attn::batched_score<plain_dot, double>);
static_assert(attn::batched_gradient_score<attn::dot_score, double> &&
              attn::batched_gradient_score<attn::general<double>, double> &&
              attn::batched_gradient_score<attn::additive<double>, double>);
static_assert(!attn::batched_gradient_score<plain_dot, double>);

// The dot-product family: declared, never inferred from a type's name.
static_assert(attn::dot_product_score<attn::dot_score, double> &&
              attn::dot_product_score<attn::scaled_dot_score, float>);
static_assert(attn::dot_product_score<my_dot, double> && attn::dot_product_score<my_scaled_dot, long double>);
static_assert(!attn::dot_product_score<plain_dot, double>);
static_assert(!attn::dot_product_score<says_not_dot, double>);
static_assert(!attn::dot_product_score<dot_without_scale, double>);
static_assert(!attn::dot_product_score<attn::general<double>, double>);
static_assert(!attn::dot_product_score<attn::additive<double>, double>);

// Parameters and their gradients.
static_assert(attn::parameterized_score<attn::general<double>> && attn::parameterized_score<attn::additive<float>>);
static_assert(!attn::parameterized_score<attn::dot_score> && !attn::parameterized_score<my_dot>);
static_assert(std::is_same_v<attn::parameter_gradient_t<attn::dot_score>, attn::no_parameters>);
static_assert(std::is_same_v<attn::parameter_gradient_t<attn::general<double>>, attn::general<double>::gradient>);
static_assert(attn::parameter_gradient_for<attn::general<double>::gradient_view, attn::general<double>, double>);
static_assert(attn::parameter_gradient_for<attn::additive<double>::gradient_view, attn::additive<double>, double>);
static_assert(!attn::parameter_gradient_for<attn::no_parameters, attn::general<double>, double>);
static_assert(!attn::parameter_gradient_for<attn::general<double>::gradient_view, attn::additive<double>, double>);
static_assert(!attn::parameter_gradient_for<attn::general<double>::gradient_view, attn::dot_score, double>);

// Fixed extents: dot-like scores need q and h of one length; general's W fixes both.
static_assert(attn::score_fits_extents<attn::dot_score, 3, 3> && !attn::score_fits_extents<attn::dot_score, 3, 4>);
static_assert(attn::score_fits_extents<my_scaled_dot, 3, attn::dynamic>);
static_assert(attn::score_fits_extents<attn::general<double, 2, 3>, 2, 3> &&
              !attn::score_fits_extents<attn::general<double, 2, 3>, 3, 3>);

TEST_CASE("additive from a std::vector v: the Vector's numbers, and k checked", "[score]") {
  const Matrix<double> W1{{1, -0.5, 0.25}, {0.5, 2, -1}}, W2{{0.25, 1}, {-1, 0.5}};
  const std::vector<double> v{1.5, -2};
  const Vector<double> v_ours{1.5, -2};
  const attn::additive from_vector{W1, W2, v};
  const attn::additive from_ours{W1, W2, v_ours};
  const std::vector<double> q{0.5, -1}, h{1, 2, -0.5};
  CHECK(from_vector(q, h) == from_ours(q, h));
  const std::vector<double> v3{1, 2, 3};
  REQUIRE_THROWS_WITH(attn::additive(W1, W2, v3), "attn::additive: size of v is 3 but rows of W1 is 2");
  const Matrix<double, 2, 3> F1{{1, 0, 0}, {0, 1, 0}};
  const Matrix<double, 2, 2> F2{{1, 0}, {0, 1}};
  const attn::additive fixed{F1, F2, v};  // k fixed by W1, v checked against it
  static_assert(std::is_same_v<decltype(fixed), const attn::additive<double, 2, 3, 2>>);
  REQUIRE_THROWS_WITH(attn::additive(F1, F2, v3), "attn::additive: size of v is 3 but rows of W1 is 2");
}

TEST_CASE("The four scores and their gradients", "[score]") {
  const std::vector<double> q{0.5, -1, 2};
  const std::vector<double> h{1, 3, -0.25};
  std::vector<double> g(3);
  REQUIRE(attn::dot(q, h) == 0.5 - 3 - 0.5);
  REQUIRE_THAT(attn::scaled_dot(q, h), WithinRel(-3.0 / std::sqrt(3.0), 2 * eps));
  attn::dot.gradient_note<double>(q, h, g);
  REQUIRE(g == q);
  attn::scaled_dot.gradient_query<double>(q, h, g);
  REQUIRE_THAT(g[1], WithinRel(3 / std::sqrt(3.0), 2 * eps));

  SECTION("general works when d_q ≠ d_h") {
    const Matrix<double> W{{1, 2, 0, -1}, {0.5, 0, 1, 1}};  // d_q = 2, d_h = 4
    const attn::general score(W);
    const std::vector<double> q2{2, -1};
    const std::vector<double> h4{1, 0.5, -2, 3};
    double expect = 0;
    for (std::size_t a = 0; a < 2; ++a)
      for (std::size_t b = 0; b < 4; ++b) expect += q2[a] * W(a, b) * h4[b];
    REQUIRE_THAT(score(q2, h4), WithinRel(expect, 4 * eps));
    std::vector<double> gh(4), gq(2);
    score.gradient_note(q2, h4, gh);  // Wᵀq
    score.gradient_query(q2, h4, gq);  // W h
    for (std::size_t b = 0; b < 4; ++b) REQUIRE_THAT(gh[b], WithinAbs(q2[0] * W(0, b) + q2[1] * W(1, b), 4 * eps));
    REQUIRE_THAT(gq[0], WithinAbs(1 + 1 - 0 - 3, 4 * eps));
    REQUIRE_THROWS_AS(score.check(3, 4), attn::dimension_error);
    REQUIRE_THROWS_AS(attn::attend(h4, Matrix<double>{{1, 2, 3, 4}}, score), attn::dimension_error);
  }
  SECTION("additive works when d_q ≠ d_h, and checks k") {
    const Matrix<double> W1{{1, 0, 2}, {0, 1, -1}};  // k = 2, d_h = 3
    const Matrix<double> W2{{0.5}, {-0.5}};          // d_q = 1
    const Vector<double> v{1, -2};
    const attn::additive score(W1, W2, v);
    const std::vector<double> q1{2};
    const std::vector<double> h3{1, 1, 1};
    REQUIRE_THAT(score(q1, h3), WithinRel(std::tanh(3.0 + 1.0) - 2 * std::tanh(0.0 - 1.0), 4 * eps));
    const Vector<double> short_v{1};
    REQUIRE_THROWS_AS(attn::additive(W1, W2, short_v), attn::dimension_error);
  }
}


TEST_CASE("Long rows: general and additive work in blocks without allocating", "[score]") {
  // d_h and k above the block size of 128 exercise the blocked paths.
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0, 0.1);
  const std::size_t n = 7, dh = 300, dq = 3, k = 260;
  Matrix<double> notes(n, dh), W(dq, dh), W1(k, dh), W2(k, dq);
  Vector<double> v(k);
  for (auto* m : {&notes, &W, &W1, &W2})
    for (std::size_t i = 0; i < m->size(); ++i) m->data()[i] = normal(rng);
  for (auto& x : v) x = normal(rng);
  const std::vector<double> q{0.3, -0.2, 0.9};
  const attn::general g(W);
  const attn::additive a(W1, W2, v);
  const auto rg = attn::attend(q, notes, g);
  const auto ra = attn::attend(q, notes, a);
  for (std::size_t j = 0; j < n; ++j) {
    REQUIRE_THAT(rg.scores[j], WithinAbs(g(q, notes.row(j)), 1e-13));
    REQUIRE_THAT(ra.scores[j], WithinAbs(a(q, notes.row(j)), 1e-13));
  }
}


// ---------------------------------------------------------------------------------------------
// A user's dot-product score takes attn::dot's paths, to the bit
// ---------------------------------------------------------------------------------------------

namespace {
template <class T>
Matrix<T> random_matrix(std::size_t r, std::size_t c, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0, 1);
  Matrix<T> m(r, c);
  for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(normal(rng));
  return m;
}

// attend, align and backward (recomputed, from the weights, from weights and context) with S
// and with Ref on the same input: the same bits everywhere, and no call of S's members.
template <class T, class S, class Ref>
void check_same_as(const S& score, const Ref& ref, std::size_t n, std::size_t d, std::mt19937_64& rng) {
  const Matrix<T> K = random_matrix<T>(n, d, rng), V = random_matrix<T>(n, d + 1, rng);
  const Matrix<T> Q = random_matrix<T>(2, d, rng), G = random_matrix<T>(2, d + 1, rng);
  const std::span<const T> q = Q.row(0), g = G.row(0);
  member_calls = 0;
  const auto mine = attn::attend(q, K, V, score);
  const auto theirs = attn::attend(q, K, V, ref);
  REQUIRE(mine.scores == theirs.scores);
  REQUIRE(mine.weights == theirs.weights);
  REQUIRE(mine.context == theirs.context);
  const auto map_mine = attn::align(Q, K, V, score, {.beta = 1.5});
  const auto map_theirs = attn::align(Q, K, V, ref, {.beta = 1.5});
  REQUIRE(map_mine.weights == map_theirs.weights);
  REQUIRE(map_mine.contexts == map_theirs.contexts);
  const auto b_mine = attn::backward(q, K, V, score, g);
  const auto b_theirs = attn::backward(q, K, V, ref, g);
  REQUIRE(b_mine.scores == b_theirs.scores);
  REQUIRE(b_mine.query == b_theirs.query);
  REQUIRE(b_mine.keys == b_theirs.keys);
  REQUIRE(b_mine.values == b_theirs.values);
  const attn::saved_forward<T> saved{theirs.weights, theirs.context};
  const auto f_mine = attn::backward(q, K, V, score, saved, g);
  const auto f_theirs = attn::backward(q, K, V, ref, saved, g);
  REQUIRE(f_mine.query == f_theirs.query);
  REQUIRE(f_mine.keys == f_theirs.keys);
  CHECK(member_calls == 0);
  // The Jacobian matrices ask the score for ∂s/∂q (its members): the same numbers.
  REQUIRE(attn::jacobian_query(q, K, V, score) == attn::jacobian_query(q, K, V, ref));
}
}  // namespace

TEMPLATE_TEST_CASE("A user's dot-product score gives attn::dot's bits without a call of its members",
                   "[score]", float, double) {
  std::mt19937_64 rng(21);
  // 3 notes: the two-pass path; 40 and 300: the one pass (one block, several blocks)
  for (const std::size_t n : {3u, 40u, 300u}) {
    INFO("n = " << n);
    check_same_as<TestType>(my_dot{}, attn::dot, n, 16, rng);
    check_same_as<TestType>(my_scaled_dot{}, attn::scaled_dot, n, 16, rng);
  }
  SECTION("fixed sizes: the small path, in registers") {
    const Matrix<TestType, 3, 4> K{{1, 0, 2, 0}, {0, 1, 0, -1}, {1, 1, 0.5f, 0}};
    const Vector<TestType, 4> q{0.25f, -1, 2, 0.5f};
    member_calls = 0;
    const auto mine = attn::attend(q, K, my_dot{}, {.beta = 2});
    const auto theirs = attn::attend(q, K, attn::dot, {.beta = 2});
    REQUIRE(mine.weights == theirs.weights);
    REQUIRE(mine.context == theirs.context);
    CHECK(member_calls == 0);
  }
  SECTION("without the capability the same score goes note by note, to rounding") {
    const Matrix<TestType> K = random_matrix<TestType>(40, 8, rng);
    const Matrix<TestType> q = random_matrix<TestType>(1, 8, rng);
    member_calls = 0;
    const auto plain = attn::attend(q.row(0), K, plain_dot{});
    CHECK(member_calls == 40);  // one call per note: attn asked it, as it must
    const auto fast = attn::attend(q.row(0), K, attn::dot);
    // The scores are the same sums in the same order (where the build fuses multiply-adds, each
    // loop fuses on its own: within 2γ_d Σ|q_i h_ji|). The two-pass weights and the one pass's
    // differ by the order of the sum of the exps and the one pass's rescaling: (n + 8)ε relative,
    // plus twice the scores' difference.
    const double u = std::numeric_limits<TestType>::epsilon();
    double ds = 0;
    for (std::size_t j = 0; j < 40; ++j) {
      double mag = 0;
      for (std::size_t i = 0; i < 8; ++i) mag += std::abs(static_cast<double>(q(0, i)) * K(j, i));
      const double bound = attn_test::fma_contracted() ? 9 * u * mag : 0;
      REQUIRE(std::abs(static_cast<double>(plain.scores[j]) - fast.scores[j]) <= bound);
      ds = std::max(ds, bound);
    }
    for (std::size_t j = 0; j < 40; ++j)
      REQUIRE_THAT(static_cast<double>(plain.weights[j]),
                   WithinRel(static_cast<double>(fast.weights[j]), 48 * u + 2 * ds));
  }
}

TEMPLATE_TEST_CASE("dot_scaled_by: a scale that is not finite as a T is refused before anything is written",
                   "[score][errors]", float, double, long double) {
  using T = TestType;
  const attn::Matrix<T> notes{{1, 0}, {0, 1}, {1, 1}};
  const attn::Matrix<T, 3, 2> fixed_notes{{1, 0}, {0, 1}, {1, 1}};
  const std::vector<T> q{T(0.5), T(-1)};
  const attn::Matrix<T> Q{{T(0.5), T(-1)}, {1, 2}};
  const std::string as_float = std::is_same_v<T, float> ? " as a float" : "";
  std::vector<double> bad{std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
                          std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  if (std::is_same_v<T, float>) bad.push_back(-1e39);  // finite as a double, -inf as a float
  for (const double factor : bad) {
    INFO("factor " << factor);
    const attn::dot_scaled_by score{factor};
    std::vector<T> s(3, T(7)), w(3, T(7)), c(2, T(7));
    attn::Matrix<T> Y(2, 2, T(7)), dQ(2, 2, T(7));
    const std::string msg = "the scale of attn::dot_scaled_by must be finite" + as_float;
    REQUIRE_THROWS_WITH(attn::attend(q, notes, score, s, w, c), "attn::attend: " + msg);
    REQUIRE_THROWS_WITH((void)attn::attend(q, fixed_notes, score), "attn::attend: " + msg);
    REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention(Q, notes, notes, score, {.out = Y.view()}),
                        "attn::scaled_dot_product_attention: " + msg);
    REQUIRE_THROWS_WITH(attn::scaled_dot_product_attention_backward(Q, notes, notes, score, {}, Q, {.queries = dQ.view()}),
                        "attn::scaled_dot_product_attention_backward: " + msg);
    REQUIRE_THROWS_WITH(attn::backward(q, notes, score, c, attn::notes_backward_views<T>{.scores = s}),
                        "attn::backward: " + msg);
    for (const T x : s) REQUIRE(x == T(7));
    for (const T x : w) REQUIRE(x == T(7));
    for (const T x : c) REQUIRE(x == T(7));
    REQUIRE(Y(1, 1) == T(7));
    REQUIRE(dQ(1, 1) == T(7));
  }
  // a finite factor: the scores are factor·q·h (1e39 in double and long double)
  const auto r = attn::attend(q, notes, attn::dot_scaled_by{0.5});
  REQUIRE(r.scores[1] == T(-0.5));
  if (!std::is_same_v<T, float>) REQUIRE(attn::attend(q, notes, attn::dot_scaled_by{1e39}).scores[0] == T(0.5) * static_cast<T>(1e39));
}
