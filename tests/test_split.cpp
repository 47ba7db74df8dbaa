// Split attention: partial results of chunks of notes merge into the one-pass result.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"

using attn::Matrix;
using attn::Vector;

namespace {
template <class T>
constexpr T eps = std::numeric_limits<T>::epsilon();

template <class T>
Matrix<T> random_matrix(std::size_t r, std::size_t c, std::mt19937_64& rng, double scale = 1) {
  std::normal_distribution<double> normal(0, scale);
  Matrix<T> m(r, c);
  for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(normal(rng));
  return m;
}

// Splits [0, n) at the given cut points, reads every chunk, merges left to right.
template <class T, class S>
attn::partial_attention<T> split_left(std::span<const T> q, const Matrix<T>& keys, const Matrix<T>& values,
                                      const S& score, const std::vector<std::size_t>& cuts,
                                      std::span<const bool> mask, attn::options opt) {
  attn::partial_attention<T> acc;
  bool first = true;
  std::size_t begin = 0;
  std::vector<std::size_t> ends(cuts);
  ends.push_back(keys.rows());
  for (std::size_t end : ends) {
    opt.mask = mask.empty() ? mask : mask.subspan(begin, end - begin);
    auto p = attn::attend_partial(q, keys.subrows(begin, end - begin),
                                  values.subrows(begin, end - begin), score, opt);
    if (first) {
      acc = p;
      first = false;
    } else {
      attn::merge_into(acc, p);
    }
    begin = end;
  }
  return acc;
}

// The same chunks merged as a balanced tree (another grouping of the same merges).
template <class T, class S>
attn::partial_attention<T> split_tree(std::span<const T> q, const Matrix<T>& keys, const Matrix<T>& values,
                                      const S& score, const std::vector<std::size_t>& cuts,
                                      std::span<const bool> mask, attn::options opt) {
  std::vector<attn::partial_attention<T>> parts;
  std::size_t begin = 0;
  std::vector<std::size_t> ends(cuts);
  ends.push_back(keys.rows());
  for (std::size_t end : ends) {
    opt.mask = mask.empty() ? mask : mask.subspan(begin, end - begin);
    parts.push_back(attn::attend_partial(q, keys.subrows(begin, end - begin),
                                         values.subrows(begin, end - begin), score, opt));
    begin = end;
  }
  while (parts.size() > 1) {
    std::vector<attn::partial_attention<T>> next;
    for (std::size_t i = 0; i + 1 < parts.size(); i += 2) next.push_back(attn::merge(parts[i], parts[i + 1]));
    if (parts.size() % 2 == 1) next.push_back(parts.back());
    parts = std::move(next);
  }
  return parts[0];
}

// |a − b| ≤ tol·max(1, max|v|) element by element, NaN only where both are NaN.
template <class T>
void require_close(std::span<const T> a, std::span<const T> b, T tol, T scale) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(b[i])) {
      REQUIRE(std::isnan(a[i]));
    } else {
      REQUIRE(std::abs(a[i] - b[i]) <= tol * std::max(T(1), scale));
    }
  }
}

template <class T>
T max_abs(const Matrix<T>& m) {
  T s = 0;
  for (std::size_t i = 0; i < m.size(); ++i) s = std::max(s, std::abs(m.data()[i]));
  return s;
}
}  // namespace

TEMPLATE_TEST_CASE("Split attention agrees with one pass over all the notes", "[split]", float, double) {
  using T = TestType;
  std::mt19937_64 rng(31);
  for (std::size_t n : {1u, 2u, 7u, 64u, 65u, 300u, 1000u}) {
    for (std::size_t d : {3u, 64u}) {
      const auto keys = random_matrix<T>(n, d, rng);
      const auto values = random_matrix<T>(n, d + 1, rng);
      const auto q = random_matrix<T>(1, d, rng, 0.5);
      const std::span<const T> qs(q.data(), d);
      const auto one = attn::attend(qs, keys, values, attn::dot);
      const T tol = static_cast<T>(4 * n + 16) * eps<T>;
      const T scale = max_abs(values);
      std::vector<std::vector<std::size_t>> splits{{}, {n / 2}, {0, n}, {n / 3, n / 3, 2 * n / 3}};
      if (n > 10) splits.push_back({1, 5, 9, n - 1});
      for (const auto& cuts : splits) {
        const auto a = split_left<T>(qs, keys, values, attn::dot, cuts, {}, {});
        const auto b = split_tree<T>(qs, keys, values, attn::dot, cuts, {}, {});
        require_close<T>(attn::finish(a), one.context, tol, scale);
        require_close<T>(attn::finish(b), one.context, tol, scale);
        REQUIRE(a.notes == n);
      }
    }
  }
}

TEST_CASE("Split attention: masks, chunks with nothing kept, and empty chunks", "[split][mask]") {
  using T = double;
  std::mt19937_64 rng(32);
  std::bernoulli_distribution keep(0.6);
  const std::size_t n = 200, d = 8;
  const auto notes = random_matrix<T>(n, d, rng);
  const auto q = random_matrix<T>(1, d, rng);
  const std::span<const T> qs(q.data(), d);
  const T tol = 1e-13;

  std::array<bool, n> mask{};
  for (auto& m : mask) m = keep(rng);
  for (std::size_t j = 50; j < 120; ++j) mask[j] = false;  // a whole chunk masked out
  const std::vector<std::size_t> cuts{50, 120, 120, 199};   // includes an empty chunk
  const auto one = attn::attend(qs, notes, attn::dot, {.mask = mask});
  const auto left = split_left<T>(qs, notes, notes, attn::dot, cuts, mask, {});
  const auto tree = split_tree<T>(qs, notes, notes, attn::dot, cuts, mask, {});
  require_close<T>(attn::finish(left), one.context, tol, max_abs(notes));
  require_close<T>(attn::finish(tree), one.context, tol, max_abs(notes));

  SECTION("a chunk that is entirely masked is the identity of merge") {
    const std::span<const bool> all(mask);
    const auto p =
        attn::attend_partial(qs, notes.subrows(50, 70), attn::dot, {.mask = all.subspan(50, 70)});
    REQUIRE(p.max == -std::numeric_limits<T>::infinity());
    REQUIRE(p.sum == 0.0);
    for (T x : p.context) REQUIRE(x == 0.0);
    const auto rest =
        attn::attend_partial(qs, notes.subrows(0, 50), attn::dot, {.mask = all.subspan(0, 50)});
    const auto merged = attn::merge(p, rest);
    REQUIRE(merged.max == rest.max);
    REQUIRE(merged.sum == rest.sum);
    for (std::size_t i = 0; i < d; ++i) REQUIRE(merged.context[i] == rest.context[i]);
  }
  SECTION("a chunk whose every score is −inf counts as masked") {
    Matrix<T> far(3, d, 0.0);
    for (std::size_t j = 0; j < 3; ++j) far(j, 0) = -1e308;
    std::vector<T> big(d, 0.0);
    big[0] = 1e308;  // every score of `far` overflows to −inf
    const auto p = attn::attend_partial(big, far, attn::dot);
    REQUIRE(p.max == -std::numeric_limits<T>::infinity());
    REQUIRE(p.sum == 0.0);
  }
  SECTION("masked notes holding NaN do not leak into the merged context") {
    auto dirty = notes;
    for (std::size_t j = 0; j < n; ++j)
      if (!mask[j]) dirty(j, 3) = std::numeric_limits<T>::quiet_NaN();
    const auto a = split_left<T>(qs, dirty, dirty, attn::dot, cuts, mask, {});
    const auto c = attn::finish(a);
    require_close<T>(c, one.context, tol, max_abs(notes));
  }
}

TEST_CASE("Split attention: every note masked follows the policy", "[split][mask]") {
  using attn::all_masked_policy;
  const Matrix<double> notes{{1, 2}, {3, 4}, {5, 6}, {7, 8}};
  const std::vector<double> q{0.5, -0.25};
  const std::array<bool, 4> none{};
  const std::span<const bool> m(none);
  for (auto policy : {all_masked_policy::zeros, all_masked_policy::uniform, all_masked_policy::nan}) {
    const attn::options opt{.mask = none, .if_all_masked = policy};
    const auto one = attn::attend(q, notes, attn::dot, opt);
    attn::options first = opt, second = opt;
    first.mask = m.subspan(0, 1);
    second.mask = m.subspan(1, 3);
    const auto a = attn::attend_partial(q, notes.subrows(0, 1), attn::dot, first);
    const auto b = attn::attend_partial(q, notes.subrows(1, 3), attn::dot, second);
    const auto c = attn::finish(attn::merge(a, b), opt);
    for (std::size_t i = 0; i < 2; ++i) {
      if (policy == all_masked_policy::nan) {
        REQUIRE(std::isnan(c[i]));
      } else {
        REQUIRE_THAT(c[i], Catch::Matchers::WithinRel(one.context[i], 1e-15));
      }
    }
  }
  const attn::options throwing{.mask = none, .if_all_masked = all_masked_policy::throw_error};
  const auto p = attn::attend_partial(q, notes, attn::dot, throwing);
  std::vector<double> out{7, 7};
  REQUIRE_THROWS_AS(attn::finish(p, out, throwing), attn::domain_error);
  REQUIRE(out == std::vector<double>{7, 7});
  // uniform needs every chunk read under uniform
  const auto plain = attn::attend_partial(q, notes, attn::dot, {.mask = none});
  REQUIRE_THROWS_AS(attn::finish(plain, {.if_all_masked = all_masked_policy::uniform}), attn::domain_error);
}

TEST_CASE("Split attention: +inf and NaN scores", "[split]") {
  const double inf = std::numeric_limits<double>::infinity();
  // scores: 3, +inf, 1, +inf, 2 (q = (1, 1e308), the +inf rows overflow); they share the weight
  const Matrix<double> keys{{3, 0}, {1, 1e308}, {1, 0}, {2, 1e308}, {2, 0}};
  const Matrix<double> values{{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}};
  const std::vector<double> q{1, 1e308};
  const auto one = attn::attend(q, keys, values, attn::dot);
  REQUIRE((one.context[0] == 5 && one.context[1] == 6));
  const auto a = attn::attend_partial(q, keys.subrows(0, 2), values.subrows(0, 2), attn::dot);
  const auto b = attn::attend_partial(q, keys.subrows(2, 3), values.subrows(2, 3), attn::dot);
  REQUIRE(a.max == inf);
  REQUIRE(a.sum == 1.0);
  const auto c = attn::finish(attn::merge(a, b));
  const auto c2 = attn::finish(attn::merge(b, a));
  for (std::size_t i = 0; i < 2; ++i) {
    REQUIRE(c[i] == one.context[i]);
    REQUIRE(c2[i] == one.context[i]);
  }
  // a NaN score anywhere makes the row NaN
  const Matrix<double> with_nan{{1, 0}, {std::numeric_limits<double>::quiet_NaN(), 0}, {0, 1}};
  const std::vector<double> q2{1, 1};
  const auto n1 = attn::attend_partial(q2, with_nan.subrows(0, 1), attn::dot);
  const auto n2 = attn::attend_partial(q2, with_nan.subrows(1, 2), attn::dot);
  for (double x : attn::finish(attn::merge(n1, n2))) REQUIRE(std::isnan(x));
  for (double x : attn::attend(q2, with_nan, attn::dot).context) REQUIRE(std::isnan(x));
}

// Found by fuzz_attend's split check: a β·s that overflows double from a finite score gave a
// plausible wrong context (the mean of the overflowed notes, or the all-masked answer).
TEST_CASE("Split attention: a finite score whose β·s overflows gives NaN, never a plausible number",
          "[split][errors]") {
  // scores 1e300 and 2e300: attend takes β·s as in exact arithmetic (docs/softmax.md)
  const Matrix<double> keys{{1}, {2}}, values{{10}, {20}};
  const std::vector<double> q{1e300};
  for (const double beta : {1e10, -1e10}) {
    INFO("beta " << beta);
    const attn::options opt{.beta = beta, .if_all_masked = attn::all_masked_policy::throw_error};
    REQUIRE(attn::attend(q, keys, values, attn::dot, opt).context[0] == (beta > 0 ? 20.0 : 10.0));
    // the chunk's max would be ±1e310: no number of double
    const auto whole = attn::attend_partial(q, keys, values, attn::dot, opt);
    REQUIRE(std::isnan(whole.max));
    REQUIRE(std::isnan(whole.sum));
    REQUIRE(std::isnan(attn::finish(whole, opt)[0]));
    // beside a chunk whose max is a number, NaN through the merge, in either order
    const Matrix<double> small{{0}};
    const auto other = attn::attend_partial(q, small, Matrix<double>{{5}}, attn::dot, opt);
    REQUIRE(other.max == 0.0);
    REQUIRE(std::isnan(attn::finish(attn::merge(whole, other), opt)[0]));
    REQUIRE(std::isnan(attn::finish(attn::merge(other, whole), opt)[0]));
  }
  // beside a score that is +inf itself, an overflowed β·s has no weight, as in attend
  const Matrix<double> k2{{1e308, 0}, {1, 0}}, v2{{3, 4}, {5, 6}};
  const std::vector<double> q2{1e308, 0};  // scores +inf and 1e308; β·1e308 overflows
  const attn::options sharp{.beta = 10};
  const auto one = attn::attend(q2, k2, v2, attn::dot, sharp);
  REQUIRE((one.context[0] == 3 && one.context[1] == 4));
  const auto c = attn::finish(attn::attend_partial(q2, k2, v2, attn::dot, sharp));
  REQUIRE((c[0] == 3 && c[1] == 4));
  // and a β beyond float's range is refused in float, as attend refuses it
  const Vector<float, 1> qf{1};
  const Matrix<float, 1, 1> hf{{1}};
  REQUIRE_THROWS_AS(attn::attend_partial(qf, hf, attn::dot, {.beta = 1e39}), attn::domain_error);
  REQUIRE_THROWS_AS(attn::attend(qf, hf, attn::dot, {.beta = 1e39}), attn::domain_error);
}

// Every partial context is a weighted mean of values, not a sum of them: values whose sum
// overflows T (here 40 values of 0.45–0.9 of T's largest number) still give attend's finite
// context, through one chunk (its one-pass sum overflows: the weights are normalized first),
// several, the uniform policy's mean, and +inf scores that share the weight.
TEMPLATE_TEST_CASE("Split attention: values whose sum overflows give attend's finite context",
                   "[split]", float, double) {
  using T = TestType;
  const T big = std::numeric_limits<T>::max() * T(0.9);
  std::mt19937_64 rng(43);
  std::uniform_real_distribution<double> half_to_one(0.5, 1.0);
  const std::size_t n = 40, d = 4;
  const auto keys = random_matrix<T>(n, d, rng, 0.1);  // scores near 0: weights near 1/n
  Matrix<T> values(n, 3);
  for (std::size_t i = 0; i < values.size(); ++i)
    values.data()[i] = static_cast<T>(half_to_one(rng)) * big * (i % 3 == 1 ? T(-1) : T(1));
  const auto q = random_matrix<T>(1, d, rng);
  const std::span<const T> qs(q.data(), d);
  const T tol = static_cast<T>(4 * n + 16) * eps<T>;
  const T scale = max_abs(values);

  const auto one = attn::attend(qs, keys, values, attn::dot);
  for (const T x : one.context) REQUIRE(std::isfinite(x));
  for (const std::vector<std::size_t>& cuts :
       std::vector<std::vector<std::size_t>>{{}, {13}, {1, 5, 9, 39}, {20, 20}}) {
    const auto a = split_left<T>(qs, keys, values, attn::dot, cuts, {}, {});
    const auto b = split_tree<T>(qs, keys, values, attn::dot, cuts, {}, {});
    for (const T x : a.context) REQUIRE(std::isfinite(x));
    require_close<T>(attn::finish(a), one.context, tol, scale);
    require_close<T>(attn::finish(b), one.context, tol, scale);
  }

  // every note masked, policy uniform: the mean of all the values
  const std::array<bool, n> none{};
  const attn::options uniform{.mask = none, .if_all_masked = attn::all_masked_policy::uniform};
  const auto mean = attn::attend(qs, keys, values, attn::dot, uniform);
  const auto split_mean = split_left<T>(qs, keys, values, attn::dot, {7, 30}, none, uniform);
  const auto c = attn::finish(split_mean, uniform);
  for (const T x : c) REQUIRE(std::isfinite(x));
  require_close<T>(c, mean.context, tol, scale);

  // two +inf scores (the second coordinate of q and of those keys is T's largest number)
  const T top = std::numeric_limits<T>::max();
  const Matrix<T> k2{{1, top}, {2, 0}, {3, top}};
  const std::vector<T> q2{1, top};
  const Matrix<T> v2(values.subrows(0, 3));
  const auto sharp = attn::attend(q2, k2, v2, attn::dot);
  for (const std::vector<std::size_t>& cuts : std::vector<std::vector<std::size_t>>{{}, {1}, {2}}) {
    const auto ci = attn::finish(split_left<T>(q2, k2, v2, attn::dot, cuts, {}, {}));
    // both: the mean of two values, weights 1/2 (exact), two products and a sum: 4ε·max|v|
    for (std::size_t i = 0; i < 3; ++i) {
      REQUIRE(std::isfinite(ci[i]));
      REQUIRE(std::abs(ci[i] - sharp.context[i]) <= 4 * eps<T> * scale);
    }
  }
}

TEST_CASE("Split attention: other scores, β, keys ≠ values, fixed sizes", "[split]") {
  std::mt19937_64 rng(33);
  const std::size_t n = 150, dk = 5, dv = 4;
  const auto keys = random_matrix<double>(n, dk, rng);
  const auto values = random_matrix<double>(n, dv, rng);
  const auto W = random_matrix<double>(dk, dk, rng);
  const auto qm = random_matrix<double>(1, dk, rng);
  const std::span<const double> q(qm.data(), dk);
  const attn::general g(W);
  const attn::options opt{.beta = 0.7};
  const auto one = attn::attend(q, keys, values, g, opt);
  const auto c = attn::finish(split_tree<double>(q, keys, values, g, {40, 41, 100}, {}, opt));
  require_close<double>(c, one.context, 1e-13, max_abs(values));
  const auto one_scaled = attn::attend(q, keys, values, attn::scaled_dot, opt);
  const auto c_scaled = attn::finish(split_left<double>(q, keys, values, attn::scaled_dot, {75}, {}, opt));
  require_close<double>(c_scaled, one_scaled.context, 1e-13, max_abs(values));

  // fixed sizes give a fixed-size partial result
  const Vector<float, 3> qf{0, 0.5f, 2};
  const Matrix<float, 3, 3> I{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const auto p = attn::attend_partial(qf, I, attn::dot);
  static_assert(decltype(p.context)::extent == 3);
  const auto cf = attn::finish(p);
  const auto rf = attn::attend(qf, I, attn::dot);
  for (std::size_t i = 0; i < 3; ++i) REQUIRE_THAT(cf[i], Catch::Matchers::WithinRel(rf.context[i], 4 * eps<float>));
}

TEST_CASE("Split attention: sizes are checked", "[split][errors]") {
  const Matrix<double> notes{{1, 0}, {0, 1}};
  const std::vector<double> q3{1, 2, 3};
  REQUIRE_THROWS_AS(attn::attend_partial(q3, notes, attn::dot), attn::dimension_error);
  const std::array<bool, 3> long_mask{true, true, true};
  const std::vector<double> q{1, 2};
  REQUIRE_THROWS_AS(attn::attend_partial(q, notes, attn::dot, {.mask = long_mask}), attn::dimension_error);
  REQUIRE_THROWS_AS(attn::attend_partial(q, notes, attn::dot, {.beta = std::numeric_limits<double>::infinity()}),
                    attn::domain_error);
  const Matrix<double> wide{{1, 0, 0}};
  auto a = attn::attend_partial(q, notes, attn::dot);
  const auto b = attn::attend_partial(std::vector<double>{1, 0, 0}, wide, attn::dot);
  REQUIRE_THROWS_AS(attn::merge_into(a, b), attn::dimension_error);
  std::vector<double> out(3);
  REQUIRE_THROWS_AS(attn::finish(a, out), attn::dimension_error);
}

namespace {
// Every field of two partial results, bit for bit (NaN equal to NaN).
template <class T, std::size_t D>
bool same_partial(const attn::partial_attention<T, D>& a, const attn::partial_attention<T, D>& b) {
  const auto same = [](T x, T y) { return std::memcmp(&x, &y, sizeof(T)) == 0; };
  if (!same(a.max, b.max) || !same(a.sum, b.sum) || a.notes != b.notes ||
      a.has_values_mean != b.has_values_mean || a.context.size() != b.context.size())
    return false;
  for (std::size_t i = 0; i < a.context.size(); ++i)
    if (!same(a.context[i], b.context[i])) return false;
  if (a.has_values_mean) {
    if (a.values_mean.size() != b.values_mean.size()) return false;
    for (std::size_t i = 0; i < a.values_mean.size(); ++i)
      if (!same(a.values_mean[i], b.values_mean[i])) return false;
  }
  return true;
}
}  // namespace

TEST_CASE("Split attention into a kept partial result: the returned one's bits, reused",
          "[split]") {
  std::mt19937_64 rng(41);
  const std::size_t n = 200, dk = 8, dv = 5;
  const auto keys = random_matrix<double>(n, dk, rng);
  const auto values = random_matrix<double>(n, dv, rng);
  const auto qm = random_matrix<double>(1, dk, rng, 0.5);
  const std::span<const double> q(qm.data(), dk);
  const auto mask = std::make_unique<bool[]>(n);
  for (std::size_t j = 0; j < n; ++j) mask[j] = j % 3 != 1;
  const std::span<const bool> all(mask.get(), n);

  attn::partial_attention<double> part;  // sized by its first use, then reused
  const std::vector<attn::options> runs{
      {},
      {.beta = 1.5, .mask = all.subspan(30, 120)},
      {.mask = all.subspan(30, 120), .if_all_masked = attn::all_masked_policy::uniform},
      {.beta = -0.5}};
  for (const auto& opt : runs) {
    const std::size_t first = opt.mask.empty() ? 0 : 30, count = opt.mask.empty() ? n : 120;
    const auto K = keys.subrows(first, count), V = values.subrows(first, count);
    const auto expect = attn::attend_partial(q, K, V, attn::dot, opt);
    attn::attend_partial(q, K, V, attn::dot, part, opt);
    REQUIRE(same_partial(part, expect));
  }
  // notes that are keys and values, and fixed sizes
  const auto notes = random_matrix<double>(n, dk, rng);
  attn::partial_attention<double> both;
  attn::attend_partial(q, notes, attn::scaled_dot, both);
  REQUIRE(same_partial(both, attn::attend_partial(q, notes, attn::scaled_dot)));
  const Vector<float, 3> qf{0, 0.5f, 2};
  const Matrix<float, 3, 3> I{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  attn::partial_attention<float, 3> fixed;
  attn::attend_partial(qf, I, attn::dot, fixed);
  REQUIRE(same_partial(fixed, attn::attend_partial(qf, I, attn::dot)));

  // a throw leaves the kept result as it was, also when it would have been sized first
  const auto before = part;
  const std::vector<double> wrong(dk + 1);
  REQUIRE_THROWS_AS(attn::attend_partial(wrong, keys, values, attn::dot, part),
                    attn::dimension_error);
  REQUIRE_THROWS_AS(attn::attend_partial(q, keys, keys, attn::dot, part,
                                         {.beta = std::numeric_limits<double>::infinity()}),
                    attn::domain_error);
  REQUIRE_THROWS_AS(
      attn::attend_partial(q, keys, values, attn::dot, part, {.mask = all.subspan(0, 3)}),
      attn::dimension_error);
  REQUIRE(same_partial(part, before));
  REQUIRE(part.context.size() == dv);
}
