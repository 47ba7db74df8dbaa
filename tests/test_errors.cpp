// Every kind of bad input, and attn's answer to it (docs/errors.md names these test cases):
// sizes that disagree, empty inputs, NaN, ±inf, huge and subnormal values, all-masked rows
// under each policy, β, malformed shapes and the attn-calc inputs no other test covers; and the
// strong guarantee: a call that throws leaves every byte of every output as it was (outputs are
// filled with sentinels, NaNs with payloads among them, and compared byte for byte).

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "../examples/attn_calc/calc.hpp"
#include "../examples/attn_calc/parse.hpp"
#include "attn/attn.hpp"
#include "attn_catch.hpp"
#include "user_scores.hpp"

using attn::all_masked_policy;
using attn::Matrix;
using attn::MatrixView;

namespace {

template <class T>
constexpr T inf = std::numeric_limits<T>::infinity();
template <class T>
constexpr T qnan = std::numeric_limits<T>::quiet_NaN();

/// A quiet NaN with its sign bit set: what x86 makes for inf − inf and 0·inf.
template <class T>
T negative_nan() {
  if constexpr (sizeof(T) == 4)
    return std::bit_cast<T>(std::uint32_t{0xFFC00000u});
  else
    return std::bit_cast<T>(std::uint64_t{0xFFF8000000000000u});
}

/// The i-th sentinel: NaNs with payloads of either sign, −0, a subnormal, −inf and a plain
/// number, so that a write of any value (even a NaN) shows in the bytes.
template <class T>
T sentinel(std::size_t i) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  const U k = static_cast<U>(i & 0xFFFu);
  switch (i % 6) {
    case 0: return std::bit_cast<T>(static_cast<U>(std::bit_cast<U>(qnan<T>) | (k + 1)));        // +NaN, payload
    case 1: return std::bit_cast<T>(static_cast<U>(std::bit_cast<U>(negative_nan<T>()) | (k + 2)));  // −NaN, payload
    case 2: return T(-0.0);
    case 3: return std::numeric_limits<T>::denorm_min() * static_cast<T>(k + 3);
    case 4: return -inf<T>;
    default: return static_cast<T>(1234.5) + static_cast<T>(k);
  }
}

/// An output buffer full of sentinels that remembers its bytes.
template <class T>
struct guarded {
  std::vector<T> data;
  std::vector<unsigned char> bytes;

  explicit guarded(std::size_t n, std::size_t salt = 0) : data(n) {
    for (std::size_t i = 0; i < n; ++i) data[i] = sentinel<T>(i + salt);
    bytes.resize(n * sizeof(T));
    if (n != 0) std::memcpy(bytes.data(), data.data(), bytes.size());
  }
  [[nodiscard]] bool untouched() const {
    return data.empty() || std::memcmp(bytes.data(), data.data(), bytes.size()) == 0;
  }
  [[nodiscard]] std::span<T> span() { return data; }
  [[nodiscard]] MatrixView<T> view(std::size_t rows, std::size_t cols) {
    return MatrixView<T>(data.data(), rows, cols);
  }
};

/// Runs f, which must throw E, then checks that every guarded buffer kept its bytes.
template <class E, class F, class... B>
void require_throws_untouched(F&& f, const B&... buffers) {
  REQUIRE_THROWS_AS(f(), E);
  const std::array<bool, sizeof...(B)> kept{buffers.untouched()...};
  for (std::size_t i = 0; i < kept.size(); ++i) {
    INFO("output buffer " << i);
    REQUIRE(kept[i]);
  }
}

/// The what() of the exception f throws ("no throw" if none).
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no throw";
}

template <class T>
bool all_nan(std::span<const T> x) {
  for (const T v : x)
    if (!std::isnan(v)) return false;
  return true;
}

template <class T>
Matrix<T> matrix_of(std::size_t rows, std::size_t cols, std::initializer_list<T> values) {
  Matrix<T> m(rows, cols);
  std::size_t k = 0;
  for (const T v : values) m.data()[k++] = v;
  return m;
}

}  // namespace

// =============================================================================================
// Compile-time: fixed sizes that disagree are not candidates (the concept names the rule).
// =============================================================================================

// Probes: a call that must not compile is a `requires` that is false.
template <class X, class Y>
constexpr bool can_log_softmax_into = requires(X x, Y y) { attn::log_softmax(x, y); };
template <class X, class Y>
constexpr bool can_softmax_vjp = requires(X x, Y y) { attn::softmax_vjp(x, y); };
template <class Q, class N, class S, class W, class C>
constexpr bool can_attend_into = requires(Q q, N n, S s, W w, C c) { attn::attend(q, n, attn::dot, s, w, c); };
template <class Q, class N, class G>
constexpr bool can_backward = requires(Q q, N n, G g) { attn::backward(q, n, attn::dot, g); };
template <class Q, class N>
constexpr bool can_jacobian_note = requires(Q q, N n) { attn::jacobian_note(q, n, attn::dot, std::size_t{0}); };
template <class Qs, class N, class G>
constexpr bool can_align_backward = requires(Qs q, N n, G g) { attn::align_backward(q, n, attn::dot, g); };

TEST_CASE("errors: fixed sizes that disagree do not compile, for every entry point", "[errors][sizes]") {
  using V2 = attn::Vector<double, 2>;
  using V3 = attn::Vector<double, 3>;
  using V4 = attn::Vector<double, 4>;
  using M23 = Matrix<double, 2, 3>;
  STATIC_REQUIRE(!can_log_softmax_into<V3, V4>);
  STATIC_REQUIRE(can_log_softmax_into<V3, V3>);
  STATIC_REQUIRE(!can_softmax_vjp<V3, V4>);
  STATIC_REQUIRE(!can_attend_into<V3, M23, V3, V2, V3>);  // two notes, but three scores
  STATIC_REQUIRE(!can_attend_into<V3, M23, V2, V2, V2>);  // notes of three, a context of two
  STATIC_REQUIRE(can_attend_into<V3, M23, V2, V2, V3>);
  STATIC_REQUIRE(!can_backward<V3, M23, V4>);  // dL/dc must have the notes' length
  STATIC_REQUIRE(can_backward<V3, M23, V3>);
  STATIC_REQUIRE(!can_jacobian_note<V4, M23>);
  STATIC_REQUIRE(!can_align_backward<Matrix<double, 2, 3>, M23, Matrix<double, 3, 3>>);  // 3 rows of dL/dc, 2 queries
  STATIC_REQUIRE(can_align_backward<Matrix<double, 2, 3>, M23, Matrix<double, 2, 3>>);
}

// =============================================================================================
// Dynamic sizes that disagree, and empty inputs: dimension_error naming both sizes.
// =============================================================================================

TEST_CASE("errors: dynamic sizes that disagree name the function and both sizes", "[errors][sizes]") {
  const Matrix<double> notes{{1, 0, 0}, {0, 1, 0}};
  const std::vector<double> q3{1, 2, 3}, q2{1, 2};
  std::vector<double> s2(2), w2(2), c3(3), c2(2), s3(3);
  CHECK(message_of([&] { attn::attend(q2, notes, attn::dot, s2, w2, c3); }) ==
        "attn::attend: query size is 2 but note size is 3");
  CHECK(message_of([&] { attn::attend(q3, notes, attn::dot, s3, w2, c3); }) ==
        "attn::attend: scores size is 3 but number of notes is 2");
  CHECK(message_of([&] { attn::attend(q3, notes, attn::dot, s2, s3, c3); }) ==
        "attn::attend: weights size is 3 but number of notes is 2");
  CHECK(message_of([&] { attn::attend(q3, notes, attn::dot, s2, w2, c2); }) ==
        "attn::attend: context size is 2 but columns of values is 3");
  const Matrix<double> three_values{{1}, {2}, {3}};
  CHECK(message_of([&] { (void)attn::attend(q3, notes, three_values, attn::dot); }) ==
        "attn::attend: rows of values is 3 but rows of keys is 2");
  const std::array<bool, 3> mask3{true, true, true};
  CHECK(message_of([&] { (void)attn::attend(q3, notes, attn::dot, {.mask = mask3}); }) ==
        "attn::attend: mask size is 3 but number of notes is 2");
  CHECK(message_of([&] { attn::softmax(q3, s2); }) == "attn::softmax: output size is 2 but input size is 3");
  CHECK(message_of([&] { (void)attn::softmax(q2, {.mask = mask3}); }) ==
        "attn::softmax: mask size is 3 but input size is 2");
  const Matrix<double> W(2, 2, 1.0);
  CHECK(message_of([&] { (void)attn::attend(q3, notes, attn::general<double>(W)); }) ==
        "attn::attend: query size is 3 but rows of W is 2");
  const Matrix<double> W1(2, 3, 1.0), W2(2, 3, 1.0);
  const std::vector<double> v3{1, 1, 1};
  CHECK(message_of([&] { attn::additive<double>(W1.view(), W2.view(), std::span<const double>(v3)); }) ==
        "attn::additive: size of v is 3 but rows of W1 is 2");
  // derivatives
  CHECK(message_of([&] { (void)attn::backward(q3, notes, attn::dot, q2); }) ==
        "attn::backward: size of dL/dc is 2 but columns of values is 3");
  // a size that does not fit is named before a β that is refused (the fuzzer found the other
  // order): the dimension_error first, as in the forward
  CHECK(message_of([&] {
          (void)attn::backward(q3, notes, attn::dot, q2,
                               {.beta = std::numeric_limits<double>::infinity()});
        }) == "attn::backward: size of dL/dc is 2 but columns of values is 3");
  CHECK(message_of([&] { attn::backward(q3, notes, attn::dot, q3, {s3, {}, {}}); }) ==
        "attn::backward: size of dL/ds is 3 but number of notes is 2");
  CHECK(message_of([&] { (void)attn::jacobian_note(q3, notes, attn::dot, 2); }) ==
        "attn::jacobian_note: note index 2 is out of range for 2 notes");
  Matrix<double> j23(2, 3);
  CHECK(message_of([&] { attn::jacobian_note(q3, notes, attn::dot, 0, j23.view()); }) ==
        "attn::jacobian_note: the Jacobian is 2x3 but should be 3x3");
  Matrix<double> gk(3, 3);
  std::vector<double> gq(3);
  CHECK(message_of([&] { attn::backward(q3, notes, attn::dot, q3, {s2, gq, gk.view()}); }) ==
        "attn::backward: dL/dnotes is 3x3 but should be 2x3");
  CHECK(message_of([&] { (void)attn::softmax_vjp(q3, q2); }) ==
        "attn::softmax_vjp: size of dL/dalpha is 2 but input size is 3");
  CHECK(message_of([&] { (void)attn::backward_from_weights(q3, notes, attn::dot, q3, q3); }) ==
        "attn::backward_from_weights: weights size is 3 but number of notes is 2");
  const attn::saved_forward<double> saved_w2{w2};
  CHECK(message_of([&] { attn::backward(q3, notes, attn::dot, saved_w2, q3, {s2, gq, gk.view()}); }) ==
        "attn::backward: dL/dnotes is 3x3 but should be 2x3");
  CHECK(message_of([&] { (void)attn::backward_from_forward(q3, notes, attn::dot, w2, q2, q3); }) ==
        "attn::backward_from_forward: size of the forward's context is 2 but columns of values is 3");
  CHECK(message_of([&] {
          attn::backward(q3, notes, attn::dot, attn::saved_forward<double>{w2, q3}, q3, {s2, gq, gk.view()});
        }) == "attn::backward: dL/dnotes is 3x3 but should be 2x3");
  // a fixed-size Vector from a range of another size
  CHECK(message_of([&] { (void)attn::Vector<double, 2>(q3); }) == "attn::Vector: source size is 3 but fixed size is 2");
  // a parameter gradient of the wrong shape names the function called, not the score
  const Matrix<double> W33(3, 3, 1.0);
  const attn::general<double> g33(W33);
  Matrix<double> dW23(2, 3);
  CHECK(message_of([&] {
          attn::backward(q3, notes, g33, q3,
                         attn::notes_backward_views<double, attn::general<double>::gradient_view>{
                             .parameters = {dW23.view()}});
        }) == "attn::backward: rows of dL/dW is 2 but rows of W is 3");
  const std::vector<double> v2{1, 1};
  const attn::additive<double> add(W1.view(), W2.view(), std::span<const double>(v2));
  auto dadd = add.zero_parameter_gradient();
  dadd.v = attn::Vector<double>(3);
  CHECK(message_of([&] {
          attn::backward(q3, notes, add, q3,
                         attn::notes_backward_views<double, attn::additive<double>::gradient_view>{
                             .parameters = dadd});
        }) == "attn::backward: size of dL/dv is 3 but size of v is 2");
  // align's outputs: their columns
  const Matrix<double> queries(2, 3, 1.0);
  Matrix<double> S23(2, 3), S22(2, 2), W22(2, 2), C23(2, 3), C22(2, 2);
  CHECK(message_of([&] { attn::align(queries, notes, attn::dot, S23.view(), W22.view(), C23.view()); }) ==
        "attn::align: columns of scores is 3 but number of notes is 2");
  CHECK(message_of([&] { attn::align(queries, notes, attn::dot, S22.view(), W22.view(), C22.view()); }) ==
        "attn::align: columns of contexts is 2 but columns of values is 3");
  // split attention: merge and merge_into name themselves and both partial results
  auto a = attn::attend_partial(q3, notes, attn::dot);
  const auto b = attn::attend_partial(q2, Matrix<double>{{1, 0}}, attn::dot);
  CHECK(message_of([&] { attn::merge_into(a, b); }) ==
        "attn::merge_into: size of b's context is 2 but size of a's context is 3");
  CHECK(message_of([&] { (void)attn::merge(a, b); }) ==
        "attn::merge: size of b's context is 2 but size of a's context is 3");
}

TEST_CASE("errors: empty inputs throw dimension_error, zero-length notes are allowed", "[errors][empty]") {
  const std::vector<double> none;
  std::vector<double> out;
  CHECK(message_of([&] { attn::softmax(none, out); }) == "attn::softmax: the input is empty");
  CHECK(message_of([&] { attn::log_softmax(none, out); }) == "attn::log_softmax: the input is empty");
  CHECK(message_of([&] { (void)attn::logsumexp(none); }) == "attn::logsumexp: the input is empty");
  CHECK(message_of([&] { (void)attn::softmax_jacobian(none); }) == "attn::softmax_jacobian: the input is empty");
  const std::vector<double> q{1, 2};
  const MatrixView<const double> no_notes(nullptr, 0, 2);
  CHECK(message_of([&] { (void)attn::attend(q, no_notes, attn::dot); }) ==
        "attn::attend: the notes matrix is empty");
  CHECK(message_of([&] { (void)attn::backward(q, no_notes, attn::dot, q); }) ==
        "attn::backward: the notes matrix is empty");
  CHECK(message_of([&] { (void)attn::jacobian_query(q, no_notes, attn::dot); }) ==
        "attn::jacobian_query: the notes matrix is empty");
  CHECK(message_of([&] { (void)attn::no_attention(Matrix<double>(1, 2), no_notes); }) ==
        "attn::no_attention: the notes matrix is empty");
  const Matrix<double> notes{{1, 0}, {0, 1}};
  const MatrixView<const double> no_queries(nullptr, 0, 2);
  CHECK(message_of([&] { (void)attn::align(no_queries, notes, attn::dot); }) ==
        "attn::align: the queries matrix is empty");
  CHECK(message_of([&] { (void)attn::align_backward(no_queries, notes, attn::dot, no_queries); }) ==
        "attn::align_backward: the queries matrix is empty");

  // Notes of length 0 are not an error: every score is 0, the weights are uniform, the
  // context has no numbers, and every gradient is 0.
  const std::vector<double> empty_q;
  const std::array<double, 1> storage{};
  const MatrixView<const double> zero_length(storage.data(), 4, 0);
  const auto r = attn::attend(empty_q, zero_length, attn::dot);
  for (std::size_t j = 0; j < 4; ++j) CHECK((r.scores[j] == 0.0 && r.weights[j] == 0.25));
  CHECK(r.context.size() == 0);
  const auto b = attn::backward(empty_q, zero_length, attn::dot, empty_q);
  for (const double g : b.scores) CHECK(g == 0.0);
}

TEST_CASE("errors: malformed matrices and views", "[errors][views]") {
  std::vector<double> buf(12);
  CHECK(message_of([&] { MatrixView<double>(buf.data(), 3, 4, 2); }) ==
        "attn::MatrixView: row stride 2 is smaller than the row length 4");
  CHECK(message_of([] { MatrixView<double>(nullptr, 3, 4); }) == "attn::MatrixView: null data for a 3x4 matrix");
  CHECK(message_of([&] { MatrixView<double, 2, 4>(buf.data(), 3, 4); }) ==
        "attn::MatrixView: rows is 3 but fixed rows is 2");
  CHECK(message_of([] { Matrix<double>{{1, 2}, {3}}; }) ==
        "attn::Matrix: row length is 1 but first row length is 2");
  // rows·cols beyond std::size_t: length_error, as std::vector's own for a size beyond max_size
  constexpr std::size_t half = std::size_t{1} << (sizeof(std::size_t) * 8 - 1);
  REQUIRE_THROWS_AS(Matrix<double>(half, 4), std::length_error);
  REQUIRE_THROWS_AS(Matrix<double>(4, half), std::length_error);
  REQUIRE_THROWS_AS(attn::Vector<double>(std::numeric_limits<std::size_t>::max()), std::length_error);
  // a null view of 0 columns but a stride: its rows do not step a null pointer (UBSan's
  // pointer-overflow check would stop the asan build here); every score is 0
  const MatrixView<const double> null_rows(nullptr, 3, 0, 5);
  CHECK(null_rows.row_stride() == 0);
  const auto u = attn::attend(std::vector<double>{}, null_rows, attn::dot);
  CHECK((u.weights[0] == 1.0 / 3.0 && u.weights[2] == 1.0 / 3.0));
  const auto ub = attn::backward(std::vector<double>{}, null_rows, attn::dot, std::vector<double>{});
  CHECK(ub.scores[1] == 0.0);
  // a view with a stride: rows are found where the stride says, the padding is never read
  const double nan = qnan<double>;
  const std::vector<double> padded{1, 0, nan, 0, 1, nan};
  const MatrixView<const double> strided(padded.data(), 2, 2, 3);
  const auto r = attn::attend(std::vector<double>{1, 1}, strided, attn::dot);
  CHECK((r.weights[0] == 0.5 && r.weights[1] == 0.5 && r.context[0] == 0.5 && r.context[1] == 0.5));
}

// =============================================================================================
// β and NaN.
// =============================================================================================

TEMPLATE_TEST_CASE("errors: beta must be finite in the scalar type", "[errors][beta]", float, double) {
  using T = TestType;
  const std::vector<T> x{0, 1};
  for (const double beta : {std::nan(""), std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
    CHECK_THROWS_AS(attn::softmax(x, {.beta = beta}), attn::domain_error);
    CHECK_THROWS_AS(attn::logsumexp(x, {.beta = beta}), attn::domain_error);
  }
  if constexpr (std::is_same_v<T, float>) {
    // finite as a double, ±inf as a float (and 0·inf = NaN): refused, not rounded to inf
    CHECK(message_of([&] { (void)attn::softmax(x, {.beta = 1e39}); }) ==
          "attn::softmax: sharpness beta must be finite as a float");
    CHECK_THROWS_AS(attn::attend(x, Matrix<float>{{1, 0}}, attn::dot, {.beta = -1e39}), attn::domain_error);
    CHECK_NOTHROW(attn::softmax(x, {.beta = 3e38}));
  }
  // a subnormal β is a (very flat) β like any other
  const auto flat = attn::softmax(x, {.beta = 1e-310});
  CHECK((flat[0] == T(0.5) && flat[1] == T(0.5)));
}

TEMPLATE_TEST_CASE("errors: a kept NaN makes the row NaN, whatever its sign bit", "[errors][nan]", float, double) {
  using T = TestType;
  for (const T nan : {qnan<T>, negative_nan<T>()}) {
    INFO("sign bit " << std::signbit(nan));
    const std::vector<T> x{1, nan, 2};
    CHECK(all_nan<T>(attn::softmax(x)));
    std::vector<T> lw(3);
    attn::log_softmax(x, lw);
    CHECK(all_nan<T>(lw));
    CHECK(std::isnan(attn::logsumexp(x)));
    // a NaN next to +inf or −inf, too
    CHECK(all_nan<T>(attn::softmax(std::vector<T>{inf<T>, nan})));
    CHECK(all_nan<T>(attn::softmax(std::vector<T>{-inf<T>, nan})));
    // masked out, it is ignored
    const std::array<bool, 3> keep{true, false, true};
    const auto w = attn::softmax(x, {.mask = keep});
    CHECK((w[1] == T(0) && !std::isnan(w[0]) && !std::isnan(w[2])));
    attn::log_softmax(x, lw, {.mask = keep});
    CHECK((lw[1] == -inf<T> && !std::isnan(lw[0])));
  }
}

TEST_CASE("errors: NaN and inf in queries, notes and values follow IEEE into the scores", "[errors][nan]") {
  const Matrix<double> notes{{1, 0}, {-1, 0}, {0, 1}};
  // NaN in q: every score NaN, so the whole row is NaN
  const auto n = attn::attend(std::vector<double>{qnan<double>, 0}, notes, attn::dot);
  CHECK(all_nan<double>(n.weights));
  CHECK(all_nan<double>(n.context));
  // inf in q: scores inf, −inf and inf·0 + 0·1 = NaN, so again NaN
  const auto i = attn::attend(std::vector<double>{inf<double>, 0}, notes, attn::dot);
  CHECK(std::isnan(i.scores[2]));
  CHECK(all_nan<double>(i.weights));
  // inf in q with no 0·inf: +inf score takes all the weight
  const Matrix<double> pos{{1, 1}, {-1, 1}};
  const auto p = attn::attend(std::vector<double>{inf<double>, 1}, pos, attn::dot);
  CHECK((p.weights[0] == 1.0 && p.weights[1] == 0.0));
  // NaN or inf in a value whose weight is exactly 0 (masked, or e^−huge) never reaches c,
  // also on attend's one-pass path (n ≥ 32)
  for (const std::size_t count : {3u, 40u}) {
    Matrix<double> keys(count, 2, 0.0), values(count, 2, 0.0);
    keys(0, 0) = 1e6;
    values(0, 0) = 7;
    for (std::size_t j = 1; j < count; ++j) {
      values(j, 0) = j % 2 == 0 ? qnan<double> : inf<double>;
      values(j, 1) = -inf<double>;
    }
    const auto r = attn::attend(std::vector<double>{1, 0}, keys, values, attn::dot);
    CHECK((r.context[0] == 7.0 && r.context[1] == 0.0));
  }
  // inf in values with weight > 0: c is what IEEE gives (here inf − inf = NaN)
  const Matrix<double> flat_keys(2, 2, 0.0);
  const Matrix<double> vals{{inf<double>, 1}, {-inf<double>, 1}};
  const auto c = attn::attend(std::vector<double>{0, 0}, flat_keys, vals, attn::dot);
  CHECK((std::isnan(c.context[0]) && c.context[1] == 1.0));
}

// =============================================================================================
// ±inf, huge and subnormal values.
// =============================================================================================

TEMPLATE_TEST_CASE("errors: +inf scores share the weight, -inf scores get none", "[errors][inf]", float, double) {
  using T = TestType;
  const auto w = attn::softmax(std::vector<T>{inf<T>, 3, inf<T>, -inf<T>});
  CHECK((w[0] == T(0.5) && w[1] == T(0) && w[2] == T(0.5) && w[3] == T(0)));
  // a genuine +inf wins over a finite score whose β·x overflows to +inf
  const auto g = attn::softmax(std::vector<T>{std::numeric_limits<T>::max(), inf<T>}, {.beta = 4});
  CHECK((g[0] == T(0) && g[1] == T(1)));
  // β < 0 turns −inf scores into +inf ones
  const auto neg = attn::softmax(std::vector<T>{-inf<T>, 0}, {.beta = -1});
  CHECK((neg[0] == T(1) && neg[1] == T(0)));
  CHECK(attn::logsumexp(std::vector<T>{1, inf<T>}) == inf<T>);
  // β = 0 and an infinite score: 0·inf is NaN
  CHECK(all_nan<T>(attn::softmax(std::vector<T>{inf<T>, 1}, {.beta = 0})));
  CHECK(all_nan<T>(attn::softmax(std::vector<T>{inf<T>, -inf<T>}, {.beta = 0})));
  CHECK(std::isnan(attn::logsumexp(std::vector<T>{-inf<T>, -inf<T>}, {.beta = 0})));
}

TEMPLATE_TEST_CASE("errors: finite scores whose beta*x overflows still give a distribution", "[errors][huge]", float,
                   double) {
  using T = TestType;
  const T big = std::numeric_limits<T>::max() / 2;
  // β·x is +inf for two entries, finite for one: in exact arithmetic the two tie and share
  const std::vector<T> up{big, big, big / 4};
  const auto w = attn::softmax(up, {.beta = 10});
  CHECK((w[0] == T(0.5) && w[1] == T(0.5) && w[2] == T(0)));
  // every β·x is −inf: not "all masked" (zeros), but the largest ones share
  const std::vector<T> down{-big, -big / 2, -big / 2};
  const auto d = attn::softmax(down, {.beta = 10, .if_all_masked = all_masked_policy::throw_error});
  CHECK((d[0] == T(0) && d[1] == T(0.5) && d[2] == T(0.5)));
  std::vector<T> lw(3);
  attn::log_softmax(down, lw, {.beta = 10});
  CHECK(lw[0] == -inf<T>);
  CHECK_THAT(static_cast<double>(lw[1]), Catch::Matchers::WithinRel(-std::log(2.0), 1e-6));
  // log Σ e^{β x} itself is beyond T: ±inf is its honest rounding
  CHECK(attn::logsumexp(up, {.beta = 10}) == inf<T>);
  CHECK(attn::logsumexp(down, {.beta = 10}) == -inf<T>);
  // in place, and with β < 0
  std::vector<T> in_place{-big, -big / 2};
  attn::softmax_inplace(in_place, {.beta = -10});
  CHECK((in_place[0] == T(1) && in_place[1] == T(0)));
  // the derivatives flow: β (diag α − α αᵀ) for α = (1/2, 1/2, 0)
  const auto J = attn::softmax_jacobian(up, {.beta = 10});
  CHECK((J(0, 0) == T(2.5) && J(0, 1) == T(-2.5) && J(2, 2) == T(0) && J(0, 2) == T(0)));
  const auto vjp = attn::softmax_vjp(up, std::vector<T>{1, 0, 0}, {.beta = 10});
  CHECK((vjp[0] == T(2.5) && vjp[1] == T(-2.5) && vjp[2] == T(0)));
}

TEST_CASE("errors: attend and backward on rows whose beta*s overflows agree with double", "[errors][huge]") {
  // float scores q·h_j = 3e38, 3e38, 1e38 and β = 10: β·s overflows float but not double.
  const attn::Vector<float, 1> qf{1e38f};
  const Matrix<float> nf{{3}, {3}, {1}};
  const attn::Vector<double, 1> qd{1e38};
  const Matrix<double> nd{{3}, {3}, {1}};
  const Matrix<float> vf{{1, 2}, {3, -1}, {0, 5}};
  const Matrix<double> vd{{1, 2}, {3, -1}, {0, 5}};
  const attn::options opt{.beta = 10};
  const auto rf = attn::attend(qf, nf, vf, attn::dot, opt);
  const auto rd = attn::attend(qd, nd, vd, attn::dot, opt);
  for (std::size_t j = 0; j < 3; ++j) CHECK(static_cast<double>(rf.weights[j]) == rd.weights[j]);
  for (std::size_t i = 0; i < 2; ++i) CHECK(static_cast<double>(rf.context[i]) == rd.context[i]);
  const std::vector<float> g2f{1, -2};
  const std::vector<double> g2d{1, -2};
  const auto bf = attn::backward(qf, nf, vf, attn::dot, g2f, opt);
  const auto bd = attn::backward(qd, nd, vd, attn::dot, g2d, opt);
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK_THAT(static_cast<double>(bf.scores[j]), Catch::Matchers::WithinAbs(bd.scores[j], 1e-5));
    CHECK(static_cast<double>(bf.values(j, 1)) == bd.values(j, 1));
  }
  CHECK(bf.scores[0] != 0.0f);  // the weights move with the scores here
  // and the throw_error policy does not take such a row for "all masked"
  const Matrix<float> low{{-3}, {-3}};
  const auto t = attn::attend(qf, low, attn::dot, {.beta = 10, .if_all_masked = all_masked_policy::throw_error});
  CHECK((t.weights[0] == 0.5f && t.weights[1] == 0.5f));
}

TEMPLATE_TEST_CASE("errors: huge and subnormal values", "[errors][huge][subnormal]", float, double) {
  using T = TestType;
  const T max = std::numeric_limits<T>::max(), tiny = std::numeric_limits<T>::denorm_min();
  // softmax of the extremes: finite, no overflow
  const auto w = attn::softmax(std::vector<T>{max, -max, tiny, 0});
  CHECK((w[0] == T(1) && w[1] == T(0) && w[2] == T(0) && w[3] == T(0)));
  // subnormal scores are as good as 0: uniform
  const auto u = attn::softmax(std::vector<T>{tiny, 2 * tiny, -tiny, 0});
  for (const T a : u) CHECK(a == T(0.25));
  // subnormal notes: the context is their (subnormal) mean, to within one subnormal step
  const Matrix<T> sub = matrix_of<T>(2, 1, {2 * tiny, 4 * tiny});
  const auto r = attn::attend(std::vector<T>{1}, sub, attn::dot);
  CHECK(std::abs(r.context[0] - 3 * tiny) <= tiny);
  // a score that overflows in the score's own arithmetic is +inf (it follows the +inf rule)
  const Matrix<T> big = matrix_of<T>(2, 1, {max, 1});
  const auto b = attn::attend(std::vector<T>{4}, big, attn::dot);
  CHECK((b.scores[0] == inf<T> && b.weights[0] == T(1) && b.weights[1] == T(0)));
  // and one whose terms overflow with opposite signs is NaN (inf − inf): a NaN row. Where the
  // build fuses multiply-adds (attn_test::fma_contracted), 4·max + 4·(−max) may be computed as
  // fma(4, −max, inf) = +inf instead: then the row follows the +inf rule
  const Matrix<T> cancel = matrix_of<T>(1, 2, {max, -max});
  const auto c = attn::attend(std::vector<T>{4, 4}, cancel, attn::dot);
  if (attn_test::fma_contracted() && c.scores[0] == inf<T>) {
    CHECK(c.weights[0] == T(1));
  } else {
    CHECK(c.scores[0] != c.scores[0]);
    CHECK(all_nan<T>(c.weights));
  }
}

// =============================================================================================
// All-masked rows under each policy, through every layer.
// =============================================================================================

TEST_CASE("errors: an all-masked row under each policy", "[errors][mask]") {
  const Matrix<double> keys{{1, 0}, {0, 1}, {1, 1}};
  const Matrix<double> values{{2, 0}, {0, 4}, {6, 2}};
  const std::vector<double> q{1, 2}, g{1, -1};
  const std::array<bool, 3> none{};
  SECTION("zeros: weights 0, log-weights -inf, context 0, every derivative 0") {
    const attn::options opt{.mask = none};
    const auto r = attn::attend(q, keys, values, attn::dot, opt);
    for (std::size_t j = 0; j < 3; ++j) CHECK(r.weights[j] == 0.0);
    CHECK((r.context[0] == 0.0 && r.context[1] == 0.0));
    std::vector<double> lw(3);
    attn::log_softmax(r.scores, lw, opt);
    for (const double x : lw) CHECK(x == -inf<double>);
    const auto b = attn::backward(q, keys, values, attn::dot, g, opt);
    for (std::size_t j = 0; j < 3; ++j) CHECK((b.scores[j] == 0.0 && b.values(j, 0) == 0.0 && b.keys(j, 1) == 0.0));
    CHECK((b.query[0] == 0.0 && b.query[1] == 0.0));
    const auto J = attn::jacobian_value(q, keys, values, attn::dot, 1, opt);
    CHECK((J(0, 0) == 0.0 && J(1, 1) == 0.0));
  }
  SECTION("uniform: weights 1/n, context the mean of the values, dc/dv_j = I/n") {
    const attn::options opt{.mask = none, .if_all_masked = all_masked_policy::uniform};
    const auto r = attn::attend(q, keys, values, attn::dot, opt);
    for (std::size_t j = 0; j < 3; ++j) CHECK(r.weights[j] == 1.0 / 3.0);
    CHECK_THAT(r.context[0], Catch::Matchers::WithinAbs(8.0 / 3.0, 1e-15));
    const auto b = attn::backward(q, keys, values, attn::dot, g, opt);
    CHECK((b.scores[0] == 0.0 && b.values(0, 0) == 1.0 / 3.0 && b.query[0] == 0.0));
    std::vector<double> lw(3);
    attn::log_softmax(r.scores, lw, opt);
    CHECK_THAT(lw[0], Catch::Matchers::WithinRel(-std::log(3.0), 1e-15));
  }
  SECTION("nan: weights, context and derivatives NaN") {
    const attn::options opt{.mask = none, .if_all_masked = all_masked_policy::nan};
    const auto r = attn::attend(q, keys, values, attn::dot, opt);
    CHECK(all_nan<double>(r.weights));
    CHECK(all_nan<double>(r.context));
    CHECK(std::isnan(attn::logsumexp(r.scores, opt)));
    const auto b = attn::backward(q, keys, values, attn::dot, g, opt);
    CHECK(all_nan<double>(b.scores));
    const auto J = attn::jacobian_query(q, keys, values, attn::dot, opt);
    CHECK(std::isnan(J(0, 0)));
  }
  SECTION("throw_error: domain_error from every entry point") {
    const attn::options opt{.mask = none, .if_all_masked = all_masked_policy::throw_error};
    const std::string what = "every entry is masked out or -inf and the policy is throw_error";
    CHECK(message_of([&] { (void)attn::attend(q, keys, values, attn::dot, opt); }) == "attn::attend: " + what);
    CHECK(message_of([&] { (void)attn::softmax(q, {.mask = std::span<const bool>(none).first(2), .if_all_masked = opt.if_all_masked}); }) ==
          "attn::softmax: " + what);
    CHECK(message_of([&] { (void)attn::backward(q, keys, values, attn::dot, g, opt); }) == "attn::backward: " + what);
    CHECK(message_of([&] { (void)attn::jacobian_key(q, keys, values, attn::dot, 0, opt); }) ==
          "attn::jacobian_key: " + what);
    CHECK(message_of([&] { (void)attn::align(keys, keys, values, attn::dot, opt); }) == "attn::align: " + what);
  }
  SECTION("a row of -inf scores counts as all masked; masked NaN notes do not leak") {
    const Matrix<double> nan_keys{{qnan<double>, 0}, {1, 0}};
    const std::array<bool, 2> second{false, true};
    const auto b = attn::backward(std::vector<double>{1, 0}, nan_keys, attn::dot, std::vector<double>{qnan<double>, 1},
                                  {.mask = second});
    CHECK((b.scores[0] == 0.0 && b.notes(0, 0) == 0.0 && b.notes(0, 1) == 0.0));
    CHECK(std::isnan(b.notes(1, 0)));  // a NaN in dL/dc reaches the notes that have weight
  }
}

// =============================================================================================
// Derivatives on non-finite input.
// =============================================================================================

TEST_CASE("errors: derivatives of NaN and +inf rows", "[errors][derivatives]") {
  const Matrix<double> notes{{1, 0}, {0, 1}};
  const std::vector<double> g{1, 1};
  // a NaN row: every derivative NaN (and nothing thrown)
  const std::vector<double> q_nan{qnan<double>, 0};
  const auto b = attn::backward(q_nan, notes, attn::dot, g);
  CHECK(all_nan<double>(b.scores));
  const auto Jn = attn::jacobian_note(q_nan, notes, attn::dot, 0);
  CHECK(std::isnan(Jn(1, 1)));
  const auto Jq = attn::jacobian_query(q_nan, notes, attn::dot);
  CHECK(std::isnan(Jq(0, 0)));
  const auto sj = attn::softmax_jacobian(std::vector<double>{1, negative_nan<double>()});
  CHECK((std::isnan(sj(0, 0)) && std::isnan(sj(1, 0))));
  // a +inf score: the weights do not move with the scores, so the score terms are 0
  const std::vector<double> q_inf{inf<double>, 1};
  const Matrix<double> pos{{1, 1}, {-1, 1}};
  const auto bi = attn::backward(q_inf, pos, attn::dot, g);
  CHECK((bi.scores[0] == 0.0 && bi.scores[1] == 0.0));
  CHECK((bi.notes(0, 0) == 1.0 && bi.notes(1, 0) == 0.0));  // α_j g
  // a huge dL/dc: gradients overflow to ±inf, never to NaN where nothing was NaN
  const auto bh = attn::backward(std::vector<double>{1, 0}, notes, attn::dot, std::vector<double>{1e308, 1e308});
  for (std::size_t i = 0; i < 2; ++i) CHECK(!std::isnan(bh.notes(0, i)));
}

// =============================================================================================
// The strong guarantee: a call that throws writes nothing.
// =============================================================================================

TEMPLATE_TEST_CASE("errors: softmax and log_softmax that throw leave their outputs untouched", "[errors][strong]",
                   float, double) {
  using T = TestType;
  const std::vector<T> x{1, 2, 3, 4};
  const std::vector<T> empty;
  const std::array<bool, 4> none{};
  const std::array<bool, 3> short_mask{true, true, true};
  const attn::options throws{.mask = none, .if_all_masked = all_masked_policy::throw_error};
  for (int which = 0; which < 2; ++which) {
    INFO((which == 0 ? "softmax" : "log_softmax"));
    const auto call = [which](const std::vector<T>& in, std::span<T> out, const attn::options& opt) {
      if (which == 0)
        attn::softmax(in, out, opt);
      else
        attn::log_softmax(in, out, opt);
    };
    guarded<T> out4(4), out3(3, 7);
    require_throws_untouched<attn::dimension_error>([&] { call(x, out3.span(), {}); }, out3);
    require_throws_untouched<attn::dimension_error>([&] { call(empty, out3.span().first(0), {}); }, out3);
    require_throws_untouched<attn::dimension_error>([&] { call(x, out4.span(), {.mask = short_mask}); }, out4);
    require_throws_untouched<attn::domain_error>([&] { call(x, out4.span(), {.beta = std::nan("")}); }, out4);
    require_throws_untouched<attn::domain_error>([&] { call(x, out4.span(), {.beta = -HUGE_VAL}); }, out4);
    require_throws_untouched<attn::domain_error>([&] { call(x, out4.span(), throws); }, out4);
    const std::vector<T> neg{-inf<T>, -inf<T>, -inf<T>, -inf<T>};
    require_throws_untouched<attn::domain_error>(
        [&] { call(neg, out4.span(), {.if_all_masked = all_masked_policy::throw_error}); }, out4);
    if constexpr (std::is_same_v<T, float>)
      require_throws_untouched<attn::domain_error>([&] { call(x, out4.span(), {.beta = 1e39}); }, out4);
  }
  // in place: the input is the output (its NaN sentinels are masked out)
  guarded<T> in_place(4, 3);
  require_throws_untouched<attn::domain_error>([&] { attn::softmax_inplace(in_place.data, throws); }, in_place);
  require_throws_untouched<attn::domain_error>([&] { attn::log_softmax_inplace(in_place.data, throws); }, in_place);
  // the softmax Jacobian and its product, into buffers
  guarded<T> J(16), J9(9, 5), v4(4, 2), v3(3, 4);
  require_throws_untouched<attn::dimension_error>([&] { attn::softmax_jacobian(x, J9.view(3, 3)); }, J9);
  require_throws_untouched<attn::domain_error>([&] { attn::softmax_jacobian(x, J.view(4, 4), throws); }, J);
  require_throws_untouched<attn::dimension_error>([&] { attn::softmax_vjp(x, std::span<const T>(x).first(3), v4.span()); },
                                                  v4);
  require_throws_untouched<attn::dimension_error>([&] { attn::softmax_vjp(x, x, v3.span()); }, v3);
  require_throws_untouched<attn::domain_error>([&] { attn::softmax_vjp(x, x, v4.span(), throws); }, v4);
}

TEMPLATE_TEST_CASE("errors: attend that throws leaves scores, weights and context untouched", "[errors][strong]",
                   float, double) {
  using T = TestType;
  const Matrix<T> notes = matrix_of<T>(3, 2, {1, 0, 0, 1, 1, 1});
  const Matrix<T> values = matrix_of<T>(3, 4, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const std::vector<T> q{1, 2}, q3{1, 2, 3};
  const std::array<bool, 3> none{};
  const std::array<bool, 2> short_mask{true, true};
  const attn::options throws{.mask = none, .if_all_masked = all_masked_policy::throw_error};
  guarded<T> s(3, 0), w(3, 3), c2(2, 6), c4(4, 9), s2(2, 11), w4(4, 13);
  // notes are keys and values
  require_throws_untouched<attn::dimension_error>([&] { attn::attend(q3, notes, attn::dot, s.span(), w.span(), c2.span()); },
                                                  s, w, c2);
  require_throws_untouched<attn::dimension_error>([&] { attn::attend(q, notes, attn::dot, s2.span(), w.span(), c2.span()); },
                                                  s2, w, c2);
  require_throws_untouched<attn::dimension_error>([&] { attn::attend(q, notes, attn::dot, s.span(), w4.span(), c2.span()); },
                                                  s, w4, c2);
  require_throws_untouched<attn::dimension_error>([&] { attn::attend(q, notes, attn::dot, s.span(), w.span(), c4.span()); },
                                                  s, w, c4);
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::attend(q, notes, attn::dot, s.span(), w.span(), c2.span(), {.mask = short_mask}); }, s, w, c2);
  require_throws_untouched<attn::domain_error>(
      [&] { attn::attend(q, notes, attn::scaled_dot, s.span(), w.span(), c2.span(), {.beta = HUGE_VAL}); }, s, w, c2);
  require_throws_untouched<attn::domain_error>(
      [&] { attn::attend(q, notes, attn::dot, s.span(), w.span(), c2.span(), throws); }, s, w, c2);
  const MatrixView<const T> no_notes(nullptr, 0, 2);
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::attend(q, no_notes, attn::dot, s.span().first(0), w.span().first(0), c2.span()); }, s, w, c2);
  // keys ≠ values
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::attend(q, notes, values, attn::dot, s.span(), w.span(), c2.span()); }, s, w, c2);
  const Matrix<T> two_values(2, 4);
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::attend(q, notes, two_values, attn::dot, s.span(), w.span(), c4.span()); }, s, w, c4);
  require_throws_untouched<attn::domain_error>(
      [&] { attn::attend(q, notes, values, attn::dot, s.span(), w.span(), c4.span(), throws); }, s, w, c4);
  // every score −inf under throw_error, on attend's one-pass path (n ≥ 32) as well
  for (const std::size_t n : {3u, 40u}) {
    const Matrix<T> far(n, 2, -std::numeric_limits<T>::max());
    const std::vector<T> up{std::numeric_limits<T>::max(), 0};
    guarded<T> sn(n, 1), wn(n, 2), cn(2, 4);
    require_throws_untouched<attn::domain_error>(
        [&] {
          attn::attend(up, far, attn::dot, sn.span(), wn.span(), cn.span(),
                       {.if_all_masked = all_masked_policy::throw_error});
        },
        sn, wn, cn);
  }
  // general: W's shape, and a score that is finite one note at a time but −inf batched
  // (Wᵀq overflows): the check forms the scores as attend does, so it throws before writing
  const T big = std::numeric_limits<T>::max();
  const Matrix<T> W = matrix_of<T>(2, 1, {big, big});
  const Matrix<T> one = matrix_of<T>(1, 1, {T(-0.5)});
  const attn::general<T> gen(W);
  guarded<T> s1(1, 4), w1(1, 5), c1(1, 8);
  require_throws_untouched<attn::domain_error>(
      [&] {
        attn::attend(std::vector<T>{1, 1}, one, gen, s1.span(), w1.span(), c1.span(),
                     {.if_all_masked = all_masked_policy::throw_error});
      },
      s1, w1, c1);
  require_throws_untouched<attn::dimension_error>([&] { attn::attend(q, notes, gen, s.span(), w.span(), c2.span()); },
                                                  s, w, c2);
}

TEST_CASE("errors: align that throws leaves every row untouched", "[errors][strong]") {
  const Matrix<double> notes{{1, 0}, {0, 1}, {-1e308, 0}};
  const Matrix<double> queries{{1, 0}, {0, 1}, {1e308, 0}};  // row 3: its kept scores are -inf
  guarded<double> s(9), w(9, 1), c(6, 2), s_short(6, 3);
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::align(queries, notes, attn::dot, s_short.view(2, 3), w.view(3, 3), c.view(3, 2)); }, s_short, w, c);
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::align(queries, notes, attn::dot, s.view(3, 3), w.view(3, 3), c.view(2, 3)); }, s, w, c);
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::align(queries, notes, attn::dot, s.view(3, 3), s_short.view(3, 2), c.view(3, 2)); }, s, s_short, c);
  const Matrix<double> wide(3, 3);
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::align(wide, notes, attn::dot, s.view(3, 3), w.view(3, 3), c.view(3, 2)); }, s, w, c);
  const MatrixView<const double> no_queries(nullptr, 0, 2);
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::align(no_queries, notes, attn::dot, s.view(0, 3), w.view(0, 3), c.view(0, 2)); }, s, w, c);
  // rows 1 and 2 are fine, row 3 throws: rows 1 and 2 are not written either
  const std::array<bool, 3> first_two{false, false, true};
  require_throws_untouched<attn::domain_error>(
      [&] {
        attn::align(queries, notes, attn::dot, s.view(3, 3), w.view(3, 3), c.view(3, 2),
                    {.mask = first_two, .if_all_masked = all_masked_policy::throw_error});
      },
      s, w, c);
}

TEST_CASE("errors: backward and align_backward that throw leave every gradient untouched", "[errors][strong]") {
  const Matrix<double> keys{{1, 0}, {0, 1}, {1, 1}};
  const Matrix<double> values{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  const std::vector<double> q{1, 2}, g3{1, -1, 2}, g2{1, -1};
  const std::array<bool, 3> none{};
  const attn::options throws{.mask = none, .if_all_masked = all_masked_policy::throw_error};
  guarded<double> gs(3), gq(2, 1), gk(6, 2), gv(9, 3), gs2(2, 4), gq3(3, 5), gk4(8, 6), gv6(6, 7);
  SECTION("keys and values") {
    const auto call = [&](std::span<const double> q_, std::span<const double> g_, std::span<double> s_,
                          std::span<double> q_out, MatrixView<double> k_, MatrixView<double> v_,
                          const attn::options& o = {}) {
      attn::backward(q_, keys, values, attn::dot, g_, {s_, q_out, k_, v_}, o);
    };
    require_throws_untouched<attn::dimension_error>(
        [&] { call(q, g2, gs.span(), gq.span(), gk.view(3, 2), gv.view(3, 3)); }, gs, gq, gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(q, g3, gs2.span(), gq.span(), gk.view(3, 2), gv.view(3, 3)); }, gs2, gq, gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(q, g3, gs.span(), gq3.span(), gk.view(3, 2), gv.view(3, 3)); }, gs, gq3, gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(q, g3, gs.span(), gq.span(), gk4.view(4, 2), gv.view(3, 3)); }, gs, gq, gk4, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(q, g3, gs.span(), gq.span(), gk.view(3, 2), gv6.view(3, 2)); }, gs, gq, gk, gv6);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(g3, g3, gs.span(), gq3.span(), gk.view(3, 2), gv.view(3, 3)); }, gs, gq3, gk, gv);
    require_throws_untouched<attn::domain_error>(
        [&] { call(q, g3, gs.span(), gq.span(), gk.view(3, 2), gv.view(3, 3), throws); }, gs, gq, gk, gv);
    require_throws_untouched<attn::domain_error>(
        [&] { call(q, g3, gs.span(), gq.span(), gk.view(3, 2), gv.view(3, 3), {.beta = std::nan("")}); }, gs, gq, gk,
        gv);
  }
  SECTION("notes, and parameter gradients (which accumulate) untouched too") {
    const Matrix<double> W{{1, 0}, {0, 1}};
    const attn::general<double> gen(W);
    guarded<double> dW(4, 8), dW_wrong(6, 9);
    const auto call = [&](MatrixView<double> dw, const attn::options& o) {
      attn::backward(q, keys, gen, g2,
                     attn::notes_backward_views<double, attn::general<double>::gradient_view>{
                         gs.span(), gq.span(), gk.view(3, 2), {dw}},
                     o);
    };
    require_throws_untouched<attn::dimension_error>([&] { call(dW_wrong.view(3, 2), {}); }, gs, gq, gk, dW_wrong);
    require_throws_untouched<attn::domain_error>([&] { call(dW.view(2, 2), throws); }, gs, gq, gk, dW);
    require_throws_untouched<attn::dimension_error>(
        [&] { attn::backward(q, keys, attn::dot, g3, {gs.span(), gq.span(), gk.view(3, 2)}); }, gs, gq, gk);
  }
  SECTION("backward from the weights") {
    const std::vector<double> a3{0.2, 0.3, 0.5}, a2{0.5, 0.5};
    const auto call = [&](std::span<const double> a_, std::span<const double> g_, std::span<double> s_,
                          std::span<double> q_out, MatrixView<double> k_, MatrixView<double> v_,
                          const attn::options& o = {}) {
      attn::backward(q, keys, values, attn::dot, attn::saved_forward<double>{a_}, g_, {s_, q_out, k_, v_}, o);
    };
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a2, g3, gs.span(), gq.span(), gk.view(3, 2), gv.view(3, 3)); }, gs, gq, gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a3, g2, gs.span(), gq.span(), gk.view(3, 2), gv.view(3, 3)); }, gs, gq, gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a3, g3, gs2.span(), gq.span(), gk.view(3, 2), gv.view(3, 3)); }, gs2, gq, gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a3, g3, gs.span(), gq3.span(), gk.view(3, 2), gv.view(3, 3)); }, gs, gq3, gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a3, g3, gs.span(), gq.span(), gk4.view(4, 2), gv.view(3, 3)); }, gs, gq, gk4, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a3, g3, gs.span(), gq.span(), gk.view(3, 2), gv6.view(3, 2)); }, gs, gq, gk, gv6);
    const std::array<bool, 2> mask2{true, true};
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a3, g3, gs.span(), gq.span(), gk.view(3, 2), gv.view(3, 3), {.mask = mask2}); }, gs, gq, gk, gv);
    require_throws_untouched<attn::domain_error>(
        [&] { call(a3, g3, gs.span(), gq.span(), gk.view(3, 2), gv.view(3, 3), {.beta = std::nan("")}); }, gs, gq,
        gk, gv);
    // notes that are keys and values, with a parameter gradient (which accumulates)
    const Matrix<double> W{{1, 0}, {0, 1}};
    const attn::general<double> gen(W);
    guarded<double> dW_wrong(6, 9);
    require_throws_untouched<attn::dimension_error>(
        [&] {
          attn::backward(q, keys, gen, attn::saved_forward<double>{a3}, g2,
                         attn::notes_backward_views<double, attn::general<double>::gradient_view>{
                             gs.span(), gq.span(), gk.view(3, 2), {dW_wrong.view(3, 2)}});
        },
        gs, gq, gk, dW_wrong);
    require_throws_untouched<attn::dimension_error>(
        [&] {
          attn::backward(q, keys, attn::dot, attn::saved_forward<double>{a3}, g3,
                         {gs.span(), gq.span(), gk.view(3, 2)});
        },
        gs, gq, gk);
  }
  SECTION("backward from the weights and the context") {
    const std::vector<double> a3{0.2, 0.3, 0.5}, a2{0.5, 0.5}, c3{0.1, 0.2, 0.3}, c2{0.1, 0.2};
    const auto call = [&](std::span<const double> a_, std::span<const double> c_, std::span<const double> g_,
                          std::span<double> s_, std::span<double> q_out, MatrixView<double> k_,
                          MatrixView<double> v_, const attn::options& o = {}) {
      attn::backward(q, keys, values, attn::dot, attn::saved_forward<double>{a_, c_}, g_, {s_, q_out, k_, v_}, o);
    };
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a3, c2, g3, gs.span(), gq.span(), gk.view(3, 2), gv.view(3, 3)); }, gs, gq, gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a2, c3, g3, gs.span(), gq.span(), gk.view(3, 2), gv.view(3, 3)); }, gs, gq, gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a3, c3, g2, gs.span(), gq.span(), gk.view(3, 2), gv.view(3, 3)); }, gs, gq, gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a3, c3, g3, gs2.span(), gq.span(), gk.view(3, 2), gv.view(3, 3)); }, gs2, gq, gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a3, c3, g3, gs.span(), gq3.span(), gk.view(3, 2), gv.view(3, 3)); }, gs, gq3, gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a3, c3, g3, gs.span(), gq.span(), gk4.view(4, 2), gv.view(3, 3)); }, gs, gq, gk4, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a3, c3, g3, gs.span(), gq.span(), gk.view(3, 2), gv6.view(3, 2)); }, gs, gq, gk, gv6);
    const std::array<bool, 2> mask2{true, true};
    require_throws_untouched<attn::dimension_error>(
        [&] { call(a3, c3, g3, gs.span(), gq.span(), gk.view(3, 2), gv.view(3, 3), {.mask = mask2}); }, gs, gq, gk,
        gv);
    require_throws_untouched<attn::domain_error>(
        [&] { call(a3, c3, g3, gs.span(), gq.span(), gk.view(3, 2), gv.view(3, 3), {.beta = std::nan("")}); }, gs,
        gq, gk, gv);
    // notes that are keys and values: the context has d = 2 numbers
    require_throws_untouched<attn::dimension_error>(
        [&] {
          attn::backward(q, keys, attn::dot, attn::saved_forward<double>{a3, c3}, g2,
                         {gs.span(), gq.span(), gk.view(3, 2)});
        },
        gs, gq, gk);
  }
  SECTION("align_backward") {
    const Matrix<double> queries{{1, 0}, {0, 1}};
    const Matrix<double> gc{{1, 0, 0}, {0, 1, 0}};
    guarded<double> gss(6, 1), gqs(4, 2), gss_wrong(9, 3);
    const auto call = [&](MatrixView<const double> gc_, MatrixView<double> s_, MatrixView<double> q_,
                          MatrixView<double> k_, MatrixView<double> v_, const attn::options& o = {}) {
      attn::align_backward(queries, keys, values, attn::dot, gc_, {s_, q_, k_, v_}, o);
    };
    const Matrix<double> gc_wrong(3, 3);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(gc_wrong.view(), gss.view(2, 3), gqs.view(2, 2), gk.view(3, 2), gv.view(3, 3)); }, gss, gqs, gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(gc.view(), gss_wrong.view(3, 3), gqs.view(2, 2), gk.view(3, 2), gv.view(3, 3)); }, gss_wrong, gqs,
        gk, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(gc.view(), gss.view(2, 3), gqs.view(2, 2), gk4.view(4, 2), gv.view(3, 3)); }, gss, gqs, gk4, gv);
    require_throws_untouched<attn::dimension_error>(
        [&] { call(gc.view(), gss.view(2, 3), gqs.view(2, 2), gk.view(3, 2), gv6.view(2, 3)); }, gss, gqs, gk, gv6);
    // query 1 is fine, query 2 has every kept score −inf: nothing is written for query 1 either
    const Matrix<double> qs2{{1, 0}, {-1e308, 0}};
    const Matrix<double> far{{1e308, 0}, {1e308, 0}, {1e308, 0}};
    require_throws_untouched<attn::domain_error>(
        [&] {
          attn::align_backward(qs2, far, values, attn::dot, gc.view(),
                               {gss.view(2, 3), gqs.view(2, 2), gk.view(3, 2), gv.view(3, 3)},
                               {.if_all_masked = all_masked_policy::throw_error});
        },
        gss, gqs, gk, gv);
  }
}

TEST_CASE("errors: Jacobians into buffers that throw leave the buffer untouched", "[errors][strong]") {
  const Matrix<double> keys{{1, 0}, {0, 1}, {1, 1}};
  const Matrix<double> values{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  const std::vector<double> q{1, 2};
  const std::array<bool, 3> none{};
  const attn::options throws{.mask = none, .if_all_masked = all_masked_policy::throw_error};
  guarded<double> J(9), J6(6, 1), J4(4, 2);
  // ∂c/∂h_j (notes are keys and values: d × d)
  require_throws_untouched<attn::dimension_error>([&] { attn::jacobian_note(q, keys, attn::dot, 3, J4.view(2, 2)); },
                                                  J4);
  require_throws_untouched<attn::dimension_error>([&] { attn::jacobian_note(q, keys, attn::dot, 0, J6.view(2, 3)); },
                                                  J6);
  require_throws_untouched<attn::domain_error>([&] { attn::jacobian_note(q, keys, attn::dot, 0, J4.view(2, 2), throws); },
                                               J4);
  // ∂c/∂k_j (d_v × d_k), ∂c/∂v_j (d_v × d_v), ∂c/∂q (d_v × d_q)
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::jacobian_key(q, keys, values, attn::dot, 0, J6.view(2, 3)); }, J6);
  require_throws_untouched<attn::domain_error>(
      [&] { attn::jacobian_key(q, keys, values, attn::dot, 0, J6.view(3, 2), throws); }, J6);
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::jacobian_value(q, keys, values, attn::dot, 7, J.view(3, 3)); }, J);
  require_throws_untouched<attn::domain_error>(
      [&] { attn::jacobian_value(q, keys, values, attn::dot, 0, J.view(3, 3), throws); }, J);
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::jacobian_query(q, keys, values, attn::dot, J6.view(2, 3)); }, J6);
  require_throws_untouched<attn::domain_error>(
      [&] { attn::jacobian_query(q, keys, values, attn::dot, J6.view(3, 2), {.beta = -HUGE_VAL}); }, J6);
  const std::vector<double> q3{1, 2, 3};
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::jacobian_query(q3, keys, values, attn::dot, J.view(3, 3)); }, J);
}

// =============================================================================================
// Buffers that overlap: refused with overlap_error naming both, nothing written (or, for the
// calls that allow it, in place: tests/test_overlap.cpp).
// =============================================================================================

TEST_CASE("errors: an output that overlaps an input or another output is refused, naming both", "[errors][overlap]") {
  // The issue's case: attend's context into its own query, 200 notes (the one-pass path, which
  // wrote the context while it still read the query: max difference 3.29, silently).
  const std::size_t n = 200, d = 4;
  Matrix<double> notes(n, d);
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < d; ++i) notes(j, i) = std::sin(0.37 * static_cast<double>(j * d + i));
  guarded<double> q(d), s(n, 1), w(n, 2);
  for (std::size_t i = 0; i < d; ++i) q.data[i] = 0.25 * static_cast<double>(i + 1);
  std::memcpy(q.bytes.data(), q.data.data(), q.bytes.size());
  CHECK(message_of([&] { attn::attend(q.data, notes, attn::dot, s.span(), w.span(), q.span()); }) ==
        "attn::attend: context overlaps query");
  CHECK((q.untouched() && s.untouched() && w.untouched()));
  guarded<double> c(d, 3);
  CHECK(message_of([&] { attn::attend(q.data, notes, attn::dot, s.span(), s.span(), c.span()); }) ==
        "attn::attend: weights overlaps scores");
  CHECK(message_of([&] {
          attn::attend(q.data, notes, notes, attn::dot, s.span(), w.span(),
                       std::span<double>(notes.data() + 8, d));
        }) == "attn::attend: context overlaps keys");
  CHECK(message_of([&] {
          attn::attend(q.data, notes, attn::dot, std::span<double>(notes.data() + 1, n), w.span(), c.span());
        }) == "attn::attend: scores overlaps notes");
  const auto mask_over = std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(w.data.data()), n);
  CHECK(message_of([&] { attn::attend(q.data, notes, attn::dot, s.span(), w.span(), c.span(), {.mask = mask_over}); }) ==
        "attn::attend: weights overlaps mask");
  CHECK((s.untouched() && w.untouched() && c.untouched()));
  std::vector<unsigned char> keep(n + 8, 1);  // a mask beside the outputs: fine
  std::vector<double> s2(n), w2(n), c2(d);
  CHECK(message_of([&] {
          attn::attend(q.data, notes, attn::dot, s2, w2, c2, {.mask = std::span<const unsigned char>(keep.data(), n)});
        }) == "no throw");

  // softmax and log_softmax: into themselves exactly (in place) is allowed; shifted is not
  std::vector<double> x{1, 2, 3, 4};
  const std::vector<double> x0 = x;
  CHECK(message_of([&] {
          attn::softmax(std::span<const double>(x).first(3), std::span<double>(x).last(3));
        }) == "attn::softmax: output overlaps input");
  CHECK(message_of([&] {
          attn::log_softmax(std::span<const double>(x).last(3), std::span<double>(x).first(3));
        }) == "attn::log_softmax: output overlaps input");
  CHECK(message_of([&] { attn::softmax_vjp(std::span<const double>(x), std::span<const double>(x), std::span<double>(x)); }) ==
        "attn::softmax_vjp: output overlaps dL/dalpha");
  CHECK(message_of([&] {
          attn::softmax_jacobian(std::span<const double>(x.data(), 2), MatrixView<double>(x.data(), 2, 2));
        }) == "attn::softmax_jacobian: the Jacobian overlaps input");
  CHECK(x == x0);

  // align, backward, align_backward, the Jacobians, attend_partial
  const Matrix<double> keys{{1, 0}, {0, 1}, {1, 1}};
  Matrix<double> queries{{1, 2}, {0.5, -1}};
  guarded<double> S(6), A(6, 1), C(4, 2);
  CHECK(message_of([&] { attn::align(queries, keys, attn::dot, S.view(2, 3), A.view(2, 3), queries.view()); }) ==
        "attn::align: contexts overlaps queries");
  CHECK(message_of([&] {
          attn::align(queries, keys, attn::dot, S.view(2, 3), MatrixView<double>(S.data.data() + 1, 2, 3),
                      C.view(2, 2));
        }) == "attn::align: weights overlaps scores");
  CHECK((S.untouched() && A.untouched() && C.untouched()));
  const std::vector<double> q2{1, 2}, g2{1, -1};
  std::vector<double> gq(2), gs(3);
  Matrix<double> gk(3, 2);
  Matrix<double> own_notes = keys;
  CHECK(message_of([&] { attn::backward(q2, own_notes, attn::dot, g2, {gs, gq, own_notes.view()}); }) ==
        "attn::backward: dL/dnotes overlaps notes");
  std::vector<double> qg{1, 2};
  CHECK(message_of([&] { attn::backward(qg, keys, attn::dot, g2, {gs, std::span<double>(qg), gk.view()}); }) ==
        "attn::backward: dL/dq overlaps query");
  const attn::saved_forward<double> saved{gs};
  CHECK(message_of([&] { attn::backward(q2, keys, attn::dot, saved, g2, {std::span<double>(gs), {}, gk.view()}); }) ==
        "attn::backward: dL/ds overlaps the forward's weights");
  Matrix<double> Wm{{1, 0}, {0, 1}};
  const attn::general<double> gen(Wm);
  CHECK(message_of([&] {
          attn::backward(q2, keys, gen, g2,
                         attn::notes_backward_views<double, attn::general<double>::gradient_view>{
                             .parameters = {Wm.view()}});
        }) == "attn::backward: dL/dW overlaps W");
  Matrix<double> G2{{1, 1}, {1, 1}};
  CHECK(message_of([&] {
          attn::align_backward(queries, keys, attn::dot, G2,
                               attn::align_notes_backward_views<double>{.queries = G2.view()});
        }) == "attn::align_backward: dL/dqueries overlaps dL/dcontexts");
  CHECK(message_of([&] { attn::jacobian_query(q2, keys, gen, Wm.view()); }) ==
        "attn::jacobian_query: the Jacobian overlaps W");
  CHECK(message_of([&] { attn::jacobian_note(q2, keys, attn::dot, 0, MatrixView<double>(queries.data(), 2, 2)); }) ==
        "no throw");
  attn::partial_attention<double> part;
  part.context = attn::Vector<double>(2);
  CHECK(message_of([&] { attn::attend_partial(std::span<const double>(part.context), keys, attn::dot, part); }) ==
        "attn::attend_partial: part.context overlaps query");
  REQUIRE_THROWS_AS(attn::attend(q.data, notes, attn::dot, s.span(), w.span(), q.span()), attn::overlap_error);
  REQUIRE_THROWS_AS(attn::attend(q.data, notes, attn::dot, s.span(), w.span(), q.span()), std::invalid_argument);
}

// =============================================================================================
// attn-calc: the malformed inputs that tests/cli and test_attn_calc.cpp do not cover.
// =============================================================================================

TEST_CASE("errors: attn-calc refuses the remaining malformed inputs", "[errors][attn-calc]") {
  const auto refusal = [](std::vector<std::string_view> args) {
    try {
      (void)attn_calc::compute(attn_calc::parse_args(args));
    } catch (const attn_calc::usage_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refusal({"--q", "1,0,0", "--notes", "@"}) == "--notes: '@' needs a file name");
  CHECK(refusal({"--score", "additive", "--q", "1", "--notes", "1", "--W1", "1;1", "--W2", "1;1", "--v", "1,1;1,1"}) ==
        "--v must be one row or one column of numbers, not 2x2");
  CHECK(refusal({"--mask", "1,0;0,1"}) ==
        "--mask is 2x2: give one row of 3 entries (every query the same), 4 rows of 3 (one per query) or causal");
  CHECK(refusal({"--decimals", ""}) == "--decimals: \"\" is not a whole number");
  CHECK(refusal({"--decimals", "99999999999999999999"}) == "--decimals: \"99999999999999999999\" is not a whole number");
  CHECK(refusal({"--beta", "-1e999"}) == "--beta: \"-1e999\" is out of the range of a double");
  CHECK(refusal({"--q", "1,0,0", "--notes", "1e-400,0,0"}) == "--notes: \"1e-400\" is out of the range of a double");
  CHECK(refusal({"--note-labels", "I,\xF4\x90\x80\x80,tea"}) == "--note-labels: label 2 is not printable UTF-8 text");
  CHECK(refusal({"--note-labels", "I,\xED\xA0\x80,tea"}) == "--note-labels: label 2 is not printable UTF-8 text");
  CHECK(refusal({"--note-labels", "I,\xC2\x85,tea"}) == "--note-labels: label 2 is not printable UTF-8 text");
  // β·s beyond a double is not an error: the weights are those of exact arithmetic, (1, 0, 0)
  CHECK(refusal({"--beta", "1e308", "--q", "2,0,0", "--jacobian"}) == "accepted");
}

TEST_CASE("errors: a block of NaN scores with the sign bit set makes attend's row NaN on the one-pass path",
          "[errors][nan]") {
  // 70 notes: attend reads them in blocks of 64. The scores of notes 64..69 are inf − inf, a NaN
  // whose sign bit is set on x86; it orders below −inf, so that block looked like "nothing kept".
  Matrix<double> notes(70, 2, 0.0);
  for (std::size_t j = 0; j < 64; ++j) notes(j, 0) = static_cast<double>(j % 7);
  for (std::size_t j = 64; j < 70; ++j) {
    notes(j, 0) = inf<double>;
    notes(j, 1) = -inf<double>;
  }
  const std::vector<double> q{1, 1};
  const auto r = attn::attend(q, notes, attn::dot);
  CHECK(std::isnan(r.scores[64]));
  CHECK(all_nan<double>(r.weights));
  CHECK(all_nan<double>(r.context));
  // the same from β = 0 and infinite scores (0·inf)
  Matrix<double> tall(70, 1, 1.0);
  for (std::size_t j = 64; j < 70; ++j) tall(j, 0) = inf<double>;
  CHECK(all_nan<double>(attn::attend(std::vector<double>{1}, tall, attn::dot, {.beta = 0}).weights));
}

// =============================================================================================
// Many queries, projections and heads (docs/errors.md, "Many queries, projections and heads"):
// the rules no other test names, each leaving every output as it was.
// =============================================================================================

TEST_CASE("errors: row masks, heads, batches, the cache and jacobian_input name what is wrong and write nothing",
          "[errors][strong][heads]") {
  using P = attn::multi_head_parameters<double>;
  // a mask matrix borrowed from entries that do not fit it
  const std::vector<char> five(5, 1);
  CHECK(message_of([&] { (void)attn::mask_matrix_view(five, 2, 3); }) ==
        "attn::mask_matrix_view: size of the entries is 5 but rows x columns is 6");
  CHECK(message_of([&] { (void)attn::mask_matrix_view(five.data(), 2, 3, 2); }) ==
        "attn::mask_matrix_view: row stride 2 is smaller than the row length 3");
  // align with a row mask of another number of rows
  const Matrix<double> Q(3, 2, 0.5), K(4, 2, 0.25), V(4, 2, 1.0);
  const std::vector<char> eight(8, 1);
  guarded<double> s(12), w(12, 1), c(6, 2);
  require_throws_untouched<attn::dimension_error>(
      [&] { attn::align(Q, K, V, attn::dot, s.view(3, 4), w.view(3, 4), c.view(3, 2), {.row_mask = attn::mask_matrix_view(eight, 2, 4)}); },
      s, w, c);
  CHECK(message_of([&] { attn::align(Q, K, V, attn::dot, s.view(3, 4), w.view(3, 4), c.view(3, 2), {.row_mask = attn::mask_matrix_view(eight, 2, 4)}); }) ==
        "attn::align: rows of the row mask is 2 but number of queries is 3");
  // the saved forward of another shape
  const Matrix<double> dY(3, 2, 1.0), Ysaved(2, 2, 0.0);
  const std::vector<double> L2(2, 0.0), L3(3, 0.0);
  guarded<double> dq(6);
  CHECK(message_of([&] { attn::scaled_dot_product_attention_backward(Q, K, V, attn::dot, {Ysaved.view(), L3}, dY, {.queries = dq.view(3, 2)}); }) ==
        "attn::scaled_dot_product_attention_backward: the saved output is 2x2 but should be 3x2");
  CHECK(message_of([&] { attn::scaled_dot_product_attention_backward(Q, K, V, attn::dot, {dY.view(), L2}, dY, {.queries = dq.view(3, 2)}); }) ==
        "attn::scaled_dot_product_attention_backward: size of the saved log-sum-exp is 2 but number of queries is 3");
  REQUIRE(dq.untouched());

  // multi_head_attention: B = 2 sentences of 3 words, d_model = 2, two heads of 2
  const Matrix<double> X(6, 2, 0.5), W(2, 4, 0.25), WO(4, 2, 1.0);
  const P p{.W_Q = W.view(), .W_K = W.view(), .W_V = W.view(), .W_O = WO.view(), .heads = 2};
  attn::multi_head_cache<double> cache;
  guarded<double> y(12);
  const auto forward = [&](const P& params, const attn::options& opt) {
    attn::multi_head_attention(X, params, {.out = y.view(6, 2)}, cache, opt, 2);
  };
  P none = p;
  none.heads = 0;
  CHECK(message_of([&] { forward(none, {}); }) == "attn::multi_head_attention: heads must be at least 1 (it is 0)");
  CHECK(message_of([&] { forward(p, {.mask = five}); }) ==
        "attn::multi_head_attention: mask size is 5 but number of keys of the batch is 6");
  CHECK(message_of([&] { forward(p, {.row_mask = attn::mask_matrix_view(eight, 2, 4)}); }) ==
        "attn::multi_head_attention: rows of the row mask is 2 but rows of X is 6");
  const std::vector<double> b3(3, 0.0);
  P short_bias = p;
  short_bias.b_Q = b3;
  CHECK(message_of([&] { forward(short_bias, {}); }) == "attn::multi_head_attention: size of b_Q is 3 but columns of W_Q is 4");
  P nan_scale = p;
  nan_scale.score = attn::dot_scaled_by{qnan<double>};
  require_throws_untouched<attn::domain_error>([&] { forward(nan_scale, {}); }, y);
  CHECK(message_of([&] { forward(nan_scale, {}); }) == "attn::multi_head_attention: the scale of attn::dot_scaled_by must be finite");
  REQUIRE(y.untouched());

  // the backward: gradients it cannot give, and a cache without this forward
  Matrix<double> Y(6, 2);
  attn::multi_head_attention(X, p, {.out = Y.view()}, cache, {}, 2);
  const Matrix<double> dY6(6, 2, 1.0);
  guarded<double> dx(12), dwq(8, 1), dwo(8, 2);
  const auto backward = [&](const P& params, attn::multi_head_cache<double>& kept, const attn::multi_head_gradients<double>& g) {
    attn::multi_head_attention_backward(X, params, kept, dY6, g, {}, 2);
  };
  P no_wo = p;
  no_wo.W_O = {};
  attn::multi_head_cache<double> empty;
  const Matrix<double> dZ(6, 4, 1.0);  // without W_O, Y is the concatenation
  CHECK(message_of([&] {
          attn::multi_head_attention_backward(X, no_wo, cache, dZ, {.inputs = dx.view(6, 2), .W_O = dwo.view(4, 2)}, {}, 2);
        }) == "attn::multi_head_attention_backward: dL/dW_O given but no W_O");
  CHECK(message_of([&] { backward(p, cache, {.kv_inputs = dx.view(6, 2)}); }) ==
        "attn::multi_head_attention_backward: dL/dX_kv is for cross-attention; self-attention's is all in dL/dX");
  CHECK(message_of([&] { backward(p, cache, {.inputs = dx.view(6, 2), .W_Q = dwq.view(4, 2)}); }) ==
        "attn::multi_head_attention_backward: dL/dW_Q is 4x2 but should be 2x4");
  CHECK(message_of([&] { backward(p, empty, {.inputs = dx.view(6, 2)}); }) ==
        "attn::multi_head_attention_backward: the cache holds no forward (run multi_head_attention with it first)");
  // a cache of another batch: refused before its shapes are read
  CHECK(message_of([&] { attn::multi_head_attention_backward(X, p, cache, dY6, {.inputs = dx.view(6, 2)}, {}, 1); }) ==
        "attn::multi_head_attention_backward: the batch is 1 sentences but the forward's was 2");
  // a cache of other shapes (a forward of 2 heads, a backward of 1): the one matrix that differs
  P one_head = p;
  one_head.heads = 1;
  CHECK(message_of([&] { backward(one_head, cache, {.inputs = dx.view(6, 2)}); }) ==
        "attn::multi_head_attention_backward: the cache's logsumexp is 4x3 but should be 2x3 (it does not "
        "hold a forward of these shapes: run multi_head_attention with it first)");
  REQUIRE((dx.untouched() && dwq.untouched() && dwo.untouched()));

  // jacobian_input: rows of X and the Jacobian's shape
  const Matrix<double> X3(3, 2, 0.5);
  guarded<double> J(4, 3), Jbad(6, 4);
  CHECK(message_of([&] { attn::jacobian_input(X3, p, 3, 0, J.view(2, 2)); }) ==
        "attn::jacobian_input: row 3 is out of range for the 3 rows of X");
  CHECK(message_of([&] { attn::jacobian_input(X3, p, 0, 0, Jbad.view(3, 2)); }) ==
        "attn::jacobian_input: the Jacobian is 3x2 but should be 2x2");
  REQUIRE((J.untouched() && Jbad.untouched()));
}

// =============================================================================================
// What adversarial testing found (issue 20): each with the inputs that broke it.
// =============================================================================================

TEMPLATE_TEST_CASE("errors: log_softmax in place equals log_softmax into a buffer where beta*x overflows",
                   "[errors][huge]", float, double) {
  using T = TestType;
  // β·x_1 overflows T to −inf while β·x_0 does not: x_1's log-weight is β·(x_1 − x_0) − lse
  // (lse = log1p(e^{β(x_1 − x_0)}) = 0), finite; the in-place call searched x_0 in its own output
  const bool is_float = std::is_same_v<T, float>;
  const std::vector<T> x = is_float ? std::vector<T>{T(-1.5e38), T(-1.8e38)} : std::vector<T>{T(-1e308), T(-1.7e308)};
  const double beta = is_float ? 2 : 1.5;
  std::vector<T> out(2), in_place = x;
  attn::log_softmax(x, out, {.beta = beta});
  attn::log_softmax_inplace(in_place, {.beta = beta});
  const T expected = static_cast<T>(beta) * (x[1] - x[0]);  // β·(x_1 − x_p): the roundings attn makes
  CHECK(out[0] == T(0));
  CHECK(out[1] == expected);
  CHECK(std::memcmp(out.data(), in_place.data(), 2 * sizeof(T)) == 0);
  // β < 0: the pivot is the least x
  std::vector<T> neg_out(2), neg_in_place{-x[0], -x[1]};
  attn::log_softmax(neg_in_place, neg_out, {.beta = -beta});
  attn::log_softmax_inplace(neg_in_place, {.beta = -beta});
  CHECK(neg_out[1] == expected);
  CHECK(std::memcmp(neg_out.data(), neg_in_place.data(), 2 * sizeof(T)) == 0);
}

TEMPLATE_TEST_CASE("errors: scaled_dot on notes of length 0 gives scores 0 and uniform weights, as dot does",
                   "[errors][empty]", float, double) {
  using T = TestType;
  // s = (q·h)/√d with d = 0 is the empty sum: 0, not 0·(1/√0) = NaN
  CHECK(attn::scaled_dot_score::scale<T>(0) == T(1));
  const std::vector<T> q;
  const std::array<T, 1> storage{};
  for (const std::size_t n : {std::size_t{3}, std::size_t{40}}) {  // two-pass and one-pass paths
    INFO("n = " << n);
    const MatrixView<const T> notes(storage.data(), n, 0);
    const auto r = attn::attend(q, notes, attn::scaled_dot);
    const auto d = attn::attend(q, notes, attn::dot);
    for (std::size_t j = 0; j < n; ++j) {
      CHECK(r.scores[j] == T(0));
      CHECK(r.weights[j] == d.weights[j]);
    }
    CHECK(r.weights[0] == T(1) / static_cast<T>(n));
    const auto b = attn::backward(q, notes, attn::scaled_dot, q);
    for (const T g : b.scores) CHECK(g == T(0));
    const Matrix<T> queries(2, 0);
    const auto map = attn::align(queries, notes, attn::scaled_dot);
    CHECK((map.weights(1, 0) == T(1) / static_cast<T>(n) && map.scores(0, n - 1) == T(0)));
  }
  // fixed sizes: the small path in registers
  const attn::Vector<T, 0> qf;
  const Matrix<T, 3, 0> nf;
  const auto f = attn::attend(qf, nf, attn::scaled_dot);
  CHECK((f.scores[2] == T(0) && f.weights[0] == T(1) / T(3) && f.weights[2] == T(1) / T(3)));
}

TEST_CASE("errors: zero fixed notes throw the documented message", "[errors][empty]") {
  // the small fixed path's register arrays would have had no entries (and no check)
  const attn::Vector<double, 2> q{1, 2};
  const Matrix<double, 0, 2> none;
  CHECK(message_of([&] { (void)attn::attend(q, none, attn::dot); }) == "attn::attend: the notes matrix is empty");
  CHECK(message_of([&] { (void)attn::attend(q, none, attn::scaled_dot); }) ==
        "attn::attend: the notes matrix is empty");
  CHECK(message_of([&] { (void)attn::backward(q, none, attn::dot, q); }) ==
        "attn::backward: the notes matrix is empty");
  CHECK(message_of([&] { (void)attn::softmax(attn::Vector<double, 0>{}); }) == "attn::softmax: the input is empty");
}

TEST_CASE("errors: a view whose rows span more numbers than an array can hold is refused", "[errors][views]") {
  std::vector<double> buf(8);
  constexpr std::size_t big = std::size_t{1} << (sizeof(std::size_t) * 8 - 2);
  // (3 − 1)·2^62 + 4 wraps std::size_t to 4: it looked like a 4-number buffer
  CHECK(message_of([&] { MatrixView<double>(buf.data(), 3, 4, big); }) ==
        "attn::MatrixView: rows 3, row stride " + std::to_string(big) +
            " and columns 4 span more numbers than one array can hold");
  // no wrap, but beyond the bytes an array may have
  CHECK(message_of([&] { MatrixView<double>(buf.data(), 2, 1, big / 4); }) ==
        "attn::MatrixView: rows 2, row stride " + std::to_string(big / 4) +
            " and columns 1 span more numbers than one array can hold");
  // one row needs only its columns: any stride is fine
  CHECK(MatrixView<double>(buf.data(), 1, 4, std::numeric_limits<std::size_t>::max()).cols() == 4);
  // Matrix from a view never computes a wrapped size; a default fixed-extent view has no data
  CHECK(message_of([] { (void)Matrix<double>(MatrixView<const double, 3, 4>{}); }) ==
        "attn::Matrix: null data for a 3x4 matrix");
  REQUIRE_THROWS_AS(Matrix<double>(big, 4), std::length_error);
}

TEST_CASE("errors: partial results whose values_mean disagrees with the context throw; a result merged with itself",
          "[errors][split]") {
  const Matrix<double> notes{{1, 0}, {0, 1}};
  const std::vector<double> q{1, 2};
  const attn::options uniform{.if_all_masked = all_masked_policy::uniform};
  auto a = attn::attend_partial(q, notes, attn::dot, uniform);
  const auto b = attn::attend_partial(q, notes, attn::dot, uniform);
  // the fields are public: a values_mean of another length would be read past its end
  auto broken = b;
  broken.values_mean = attn::Vector<double>(1);
  const auto kept = a;
  CHECK(message_of([&] { attn::merge_into(a, broken); }) ==
        "attn::merge_into: size of the values' mean is 1 but context size is 2");
  CHECK(message_of([&] { attn::merge_into(broken, a); }) ==
        "attn::merge_into: size of the values' mean is 1 but context size is 2");
  CHECK((a.notes == kept.notes && a.context[0] == kept.context[0] && a.values_mean[1] == kept.values_mean[1]));
  std::vector<double> out{7, 7};
  CHECK(message_of([&] { attn::finish(broken, out, uniform); }) ==
        "attn::finish: size of the values' mean is 1 but context size is 2");
  CHECK((out[0] == 7 && out[1] == 7));
  // a ⊕ a is merge(a, a): the same context and mean, twice the notes and the sum
  const auto twice = attn::merge(a, a);
  attn::merge_into(a, a);
  CHECK(std::memcmp(a.context.data(), twice.context.data(), 2 * sizeof(double)) == 0);
  CHECK(std::memcmp(a.values_mean.data(), twice.values_mean.data(), 2 * sizeof(double)) == 0);
  CHECK((a.notes == 4 && a.sum == twice.sum && a.max == twice.max));
  const auto c = attn::attend(q, notes, attn::dot).context;
  CHECK_THAT(a.context[0], Catch::Matchers::WithinRel(c[0], 4e-16));
  CHECK_THAT(a.context[1], Catch::Matchers::WithinRel(c[1], 4e-16));
}

namespace {

/// No entry of x is NaN.
bool none_nan(std::span<const double> x) {
  for (const double v : x)
    if (std::isnan(v)) return false;
  return true;
}
}  // namespace

TEST_CASE("errors: a zero factor times a derivative that overflowed contributes nothing, not NaN",
          "[errors][huge][derivatives]") {
  // notes (1,0), (0,1), (1,1), dL/dc = (max, −max) (the issue's q = (0.5, −0.5) gave
  // ∂L/∂q = (NaN, NaN)): ∂L/∂s_2 = α_2 (u_2 − ū) overflows to −inf, and ∂L/∂q = Σ_j ∂L/∂s_j k_j
  // met −inf·0 = NaN at k_2's zero. With q = (0.3, −0.3) no weight passes 1/2, and in exact
  // arithmetic ∂L/∂q_1 = a_1 + a_3 ≈ 0.287 max (every term within T), ∂L/∂q_2 = a_2 + a_3 with
  // a_2 ≈ −0.29 max but u_2 − ū ≈ −1.2 max beyond T: −inf.
  constexpr double max = std::numeric_limits<double>::max();
  const Matrix<double> notes{{1, 0}, {0, 1}, {1, 1}};
  const std::vector<double> q{0.3, -0.3}, g{max, -max};
  // the reference in long double (whose range holds every intermediate)
  using ld = long double;
  const ld e1 = std::exp(ld(0.3)), e2 = std::exp(ld(-0.3)), sum = e1 + e2 + 1;
  const ld a1 = e1 / sum, a2 = e2 / sum, a3 = 1 / sum;
  const ld ubar = a1 * max - a2 * max;
  const ld s1 = a1 * (max - ubar), s3 = a3 * (0 - ubar);
  const double dq1 = static_cast<double>(s1 + s3);
  const auto check_query = [&](std::span<const double> dq) {
    // (n + d + 8)·ε: a handful of roundings, each relative to terms no larger than max
    CHECK_THAT(dq[0], Catch::Matchers::WithinRel(dq1, 16 * std::numeric_limits<double>::epsilon()));
    CHECK(dq[1] == -inf<double>);
  };
  const auto b = attn::backward(q, notes, attn::dot, g);
  check_query(b.query);
  CHECK(b.scores[1] == -inf<double>);
  CHECK(none_nan(std::span<const double>(b.notes.data(), 6)));
  // every path: from the forward's weights, from weights and context (one pass), keys ≠ values,
  // the batched general score (W = I), a user's score note by note, align_backward
  const auto f = attn::attend(q, notes, attn::dot);
  check_query(attn::backward(q, notes, attn::dot, attn::saved_forward<double>{f.weights}, g).query);
  check_query(attn::backward(q, notes, attn::dot, f, g).query);
  const auto kv = attn::backward(q, notes, notes, attn::dot, g);
  check_query(kv.query);
  CHECK(none_nan(std::span<const double>(kv.keys.data(), 6)));
  const Matrix<double> I{{1, 0}, {0, 1}};
  const auto gen = attn::backward(q, notes, attn::general<double>(I), g);
  check_query(gen.query);
  CHECK(none_nan(std::span<const double>(gen.notes.data(), 6)));
  CHECK(none_nan(std::span<const double>(gen.parameters.W.data(), 4)));
  const auto user = attn::backward(q, notes, test_scores::note_by_note_dot{}, g);
  check_query(user.query);
  CHECK(none_nan(std::span<const double>(user.notes.data(), 6)));
  const Matrix<double> queries{{0.3, -0.3}};
  const Matrix<double> dC{{max, -max}};
  check_query(attn::align_backward(queries, notes, attn::dot, dC).queries.row(0));
  // the issue's q = (0.5, −0.5): α_1 > 1/2, whose u_1 − ū is formed as Σ_{k≠1} α_k (u_1 − u_k),
  // and u_1 − u_2 = 2 max overflows: +inf, not NaN
  const auto issue = attn::backward(std::vector<double>{0.5, -0.5}, notes, attn::dot, g);
  CHECK((issue.query[0] == inf<double> && issue.query[1] == -inf<double>));
  // β = 0: the weights do not depend on the scores, so ∂L/∂s = 0 however large u_j − ū is
  // (u = (max, −0.9 max, −0.9 max), uniform weights: u_1 − ū ≈ 1.27 max overflows)
  const Matrix<double> lopsided{{max}, {-0.9 * max}, {-0.9 * max}};
  const std::vector<double> one{1};
  const auto flat = attn::backward(q, notes, lopsided, attn::dot, one, {.beta = 0});
  for (const double s : flat.scores) CHECK(s == 0.0);
  const auto flat_w = attn::backward(q, notes, lopsided, attn::dot,
                                     attn::saved_forward<double>{std::vector<double>(3, 1.0 / 3)}, one,
                                     {.beta = 0});
  for (const double s : flat_w.scores) CHECK(s == 0.0);
  // the Jacobians: v_j − c overflows, and ∂s/∂k_j = q has a zero
  const Matrix<double> values{{max}, {-max}, {max}};
  const std::vector<double> q0{0.5, 0};
  const auto Jk = attn::jacobian_key(q0, notes, values, attn::dot, 1);
  CHECK((Jk(0, 0) == -inf<double> && Jk(0, 1) == 0.0));
}

TEST_CASE("errors: where infinities that overflowed meet, the derivatives are NaN as documented",
          "[errors][huge][derivatives]") {
  // values ±max and dL/dc = 2: u_j = ⟨g, v_j⟩ overflows to ±inf, so ū = Σ α_k u_k adds +inf and −inf
  // (NaN), and every ∂L/∂s_j is NaN though nothing was NaN: the documented limit (the exact
  // ∂L/∂s_j are finite; T cannot hold u_j)
  constexpr double max = std::numeric_limits<double>::max();
  const Matrix<double> keys{{1, 0}, {0, 1}, {1, 1}};
  const Matrix<double> values{{max}, {-max}, {max}};
  const std::vector<double> q{0.5, -0.5}, g{2};
  const auto b = attn::backward(q, keys, values, attn::dot, g);
  CHECK(all_nan<double>(b.scores));
  // ∂L/∂v_j = α_j g involves no overflow: finite
  for (std::size_t j = 0; j < 3; ++j) CHECK(std::isfinite(b.values(j, 0)));
  // one sign only: ū = +inf, and u_j − ū is inf − inf (NaN) exactly where u_j overflowed
  const Matrix<double> up{{max}, {1}, {max}};
  const auto u = attn::backward(q, keys, up, attn::dot, g);
  CHECK((std::isnan(u.scores[0]) && std::isnan(u.scores[2])));
  CHECK(u.scores[1] == -inf<double>);  // α_2 (2 − inf)
}

namespace {
using test_scores::score_failure;
using test_scores::throwing_score;

// A user's dot-product score (attn's fast paths) whose scale throws: the one-pass path zeroed
// the context before it asked for the scale.
struct throwing_scale : attn::dot_product_family<throwing_scale> {
  [[maybe_unused]] static constexpr const char* name = "throwing_scale";
  template <attn::real T>
  T scale(std::size_t) const {
    throw score_failure("scale gave up");
  }
};

// The score's members attn calls are noexcept for attn's scores: nothing to commit there.
static_assert(!attn::detail::scoring_may_throw<attn::dot_score, double>());
static_assert(!attn::detail::scoring_may_throw<attn::scaled_dot_score, float>());
static_assert(!attn::detail::scoring_may_throw<attn::general<double>, double>());
static_assert(!attn::detail::scoring_may_throw<attn::additive<float>, float>());
static_assert(!attn::detail::gradients_may_throw<attn::general<double>, double,
                                                 attn::general<double>::gradient_view>());
static_assert(!attn::detail::gradients_may_throw<attn::additive<double>, double,
                                                 attn::additive<double>::gradient_view>());
static_assert(attn::detail::scoring_may_throw<throwing_score, double>());
static_assert(attn::detail::scoring_may_throw<throwing_scale, double>());
}  // namespace

TEST_CASE("errors: a user's score that throws leaves every output untouched", "[errors][strong][score]") {
  // the exception is the score's own, and it propagates; outputs keep every byte
  Matrix<double> notes(40, 2);
  for (std::size_t j = 0; j < 40; ++j) {
    notes(j, 0) = static_cast<double>(j % 5) * 0.25;
    notes(j, 1) = static_cast<double>(j % 3) - 1.0;
  }
  const MatrixView<const double> five = notes.subrows(0, 5);
  const std::vector<double> q{1, 2}, g{1, -1};
  SECTION("attend into buffers, two-pass and one-pass") {
    guarded<double> s(5), w(5, 1), c(2, 2);
    require_throws_untouched<score_failure>([&] { attn::attend(q, five, throwing_score{}, s.span(), w.span(), c.span()); },
                                            s, w, c);
    guarded<double> s40(40), w40(40, 1);
    require_throws_untouched<score_failure>(
        [&] { attn::attend(q, notes, throwing_scale{}, s40.span(), w40.span(), c.span()); }, s40, w40, c);
    require_throws_untouched<score_failure>(
        [&] { attn::attend(q, notes, notes, throwing_score{.at = 30}, s40.span(), w40.span(), c.span()); }, s40, w40,
        c);
  }
  SECTION("align and scaled_dot_product_attention: the last row throws") {
    const Matrix<double> queries{{1, 2}, {0, 1}, {2, -1}};
    guarded<double> S(15), W(15, 1), C(6, 2), L(3, 3);
    require_throws_untouched<score_failure>(
        [&] { attn::align(queries, five, throwing_score{.at = 12}, S.view(3, 5), W.view(3, 5), C.view(3, 2)); }, S, W,
        C);
    require_throws_untouched<score_failure>(
        [&] {
          attn::scaled_dot_product_attention(
              queries, five, five, throwing_score{.at = 12},
              attn::attention_views<double>{C.view(3, 2), W.view(3, 5), S.view(3, 5), L.span()});
        },
        S, W, C, L);
  }
  SECTION("attend_partial into a kept result") {
    auto p = attn::attend_partial(q, five, attn::dot, {.if_all_masked = all_masked_policy::uniform});
    const auto kept = p;
    REQUIRE_THROWS_AS(attn::attend_partial(q, five, throwing_score{}, p), score_failure);
    CHECK(std::memcmp(p.context.data(), kept.context.data(), 2 * sizeof(double)) == 0);
    CHECK(std::memcmp(p.values_mean.data(), kept.values_mean.data(), 2 * sizeof(double)) == 0);
    CHECK((p.notes == kept.notes && p.max == kept.max && p.sum == kept.sum && p.has_values_mean));
  }
  SECTION("backward and align_backward, written or added to, from the forward or recomputing") {
    guarded<double> ds(5), dq(2, 1), dn(10, 2), dv(10, 3);
    const auto gn = [&] { return attn::notes_backward_views<double>{ds.span(), dq.span(), dn.view(5, 2)}; };
    require_throws_untouched<score_failure>([&] { attn::backward(q, five, throwing_score{}, g, gn()); }, ds, dq, dn);
    auto added = gn();
    added.accumulate = true;
    require_throws_untouched<score_failure>([&] { attn::backward(q, five, throwing_score{}, g, added); }, ds, dq, dn);
    const attn::backward_views<double> kv{ds.span(), dq.span(), dn.view(5, 2), dv.view(5, 2)};
    require_throws_untouched<score_failure>(
        [&] { attn::backward(q, five, five, throwing_score{.note_throws = true}, g, kv); }, ds, dq, dn, dv);
    const auto f = attn::attend(q, five, attn::dot);
    require_throws_untouched<score_failure>(
        [&] { attn::backward(q, five, throwing_score{.query_throws = true}, f, g, gn()); }, ds, dq, dn);
    const Matrix<double> queries{{1, 2}, {0, 1}};
    const Matrix<double> dC{{1, -1}, {0.5, 2}};
    guarded<double> dS(10), dQ(4, 1);
    require_throws_untouched<score_failure>(
        [&] {
          attn::align_backward(queries, five, throwing_score{.at = 8}, dC,
                               attn::align_notes_backward_views<double>{dS.view(2, 5), dQ.view(2, 2), dn.view(5, 2)});
        },
        dS, dQ, dn);
    guarded<double> gQ(4), gK(10, 1), gV(10, 2);
    require_throws_untouched<score_failure>(
        [&] {
          attn::scaled_dot_product_attention_backward(
              queries, five, five, throwing_score{.at = 8}, attn::saved_attention<double>{}, dC,
              attn::attention_gradients<double>{gQ.view(2, 2), gK.view(5, 2), gV.view(5, 2)});
        },
        gQ, gK, gV);
  }
  SECTION("the Jacobians into views") {
    guarded<double> J(4);
    require_throws_untouched<score_failure>([&] { attn::jacobian_note(q, five, throwing_score{}, 1, J.view(2, 2)); },
                                            J);
    require_throws_untouched<score_failure>(
        [&] { attn::jacobian_note(q, five, throwing_score{.at = 0, .note_throws = true}, 1, J.view(2, 2)); }, J);
    require_throws_untouched<score_failure>(
        [&] { attn::jacobian_key(q, five, five, throwing_score{}, 1, J.view(2, 2)); }, J);
    require_throws_untouched<score_failure>(
        [&] { attn::jacobian_value(q, five, five, throwing_score{}, 1, J.view(2, 2)); }, J);
    require_throws_untouched<score_failure>([&] { attn::jacobian_query(q, five, throwing_score{}, J.view(2, 2)); }, J);
    require_throws_untouched<score_failure>(
        [&] { attn::jacobian_query(q, five, throwing_score{.at = 0, .query_throws = true}, J.view(2, 2)); }, J);
  }
  // with a score that does not throw, the same calls give attn's numbers
  std::vector<double> s(5), w(5), c(2);
  attn::attend(q, five, throwing_score{.at = 0}, s, w, c);
  const auto ref = attn::attend(q, five, attn::dot);
  CHECK(std::memcmp(w.data(), ref.weights.data(), 5 * sizeof(double)) == 0);
}
