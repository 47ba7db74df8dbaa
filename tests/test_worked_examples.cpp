// The worked examples W2–W12 (examples/*.cpp, NEXT_SECTIONS.md): every number they print that
// the unit does not give, derived again here from the formulas, written out in long double, and
// held to the text the example prints (examples/worked_examples.hpp). The examples compute the
// same numbers with attn and check them against that text, so the two meet there; nothing here
// runs attn. A printed "0.514" holds when the derived number lies within half a unit of its
// last decimal.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "../examples/worked_examples.hpp"
#include "attn_catch.hpp"

namespace {

using real = long double;
using matrix = std::vector<std::vector<real>>;

template <class M>
matrix of(const M& m) {
  matrix out(m.rows(), std::vector<real>(m.cols()));
  for (std::size_t i = 0; i < m.rows(); ++i)
    for (std::size_t j = 0; j < m.cols(); ++j) out[i][j] = m(i, j);
  return out;
}

matrix product(const matrix& A, const matrix& B) {
  matrix C(A.size(), std::vector<real>(B[0].size(), 0));
  for (std::size_t i = 0; i < A.size(); ++i)
    for (std::size_t k = 0; k < B.size(); ++k)
      for (std::size_t j = 0; j < B[0].size(); ++j) C[i][j] += A[i][k] * B[k][j];
  return C;
}

// Columns [c0, c0 + count) of A.
matrix columns(const matrix& A, std::size_t c0, std::size_t count) {
  matrix out(A.size());
  for (std::size_t i = 0; i < A.size(); ++i)
    out[i].assign(A[i].begin() + static_cast<std::ptrdiff_t>(c0),
                  A[i].begin() + static_cast<std::ptrdiff_t>(c0 + count));
  return out;
}

// softmax(x) over the entries j with keep(j): e^(x_j − m) / Σ e^(x_k − m), 0 elsewhere.
template <class Keep>
std::vector<real> softmax(const std::vector<real>& x, Keep keep) {
  real m = -std::numeric_limits<real>::infinity(), sum = 0;
  for (std::size_t j = 0; j < x.size(); ++j)
    if (keep(j)) m = std::max(m, x[j]);
  std::vector<real> a(x.size(), 0);
  for (std::size_t j = 0; j < x.size(); ++j)
    if (keep(j)) sum += a[j] = std::exp(x[j] - m);
  for (real& v : a) v /= sum;
  return a;
}
std::vector<real> softmax(const std::vector<real>& x) {
  return softmax(x, [](std::size_t) { return true; });
}

struct attention {
  matrix map, out;
};

// A = softmax(Q Kᵀ·scale), causal: row t of T sees keys 0 … t + n − T; Y = A V.
attention attend(const matrix& Q, const matrix& K, const matrix& V, real scale,
                 bool causal = false) {
  const std::size_t T = Q.size(), n = K.size();
  attention r;
  for (std::size_t t = 0; t < T; ++t) {
    std::vector<real> s(n, 0);
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < Q[t].size(); ++i) s[j] += Q[t][i] * K[j][i] * scale;
    r.map.push_back(softmax(s, [&](std::size_t j) { return !causal || j + T <= t + n; }));
  }
  r.out = product(r.map, V);
  return r;
}

// Whether x, printed with as many decimals as `text` has, reads `text`.
bool prints_as(real x, const char* text) {
  const char* point = std::strchr(text, '.');
  const int decimals = point == nullptr ? 0 : static_cast<int>(std::strlen(point + 1));
  return std::abs(x - std::strtold(text, nullptr)) <= 0.5L * std::pow(10.0L, -decimals);
}

void require_prints(const matrix& m, const char* const* text) {
  for (std::size_t i = 0; i < m.size(); ++i)
    for (std::size_t j = 0; j < m[i].size(); ++j) {
      INFO("entry (" << i << ", " << j << ") = " << static_cast<double>(m[i][j]) << ", printed "
                     << text[i * m[i].size() + j]);
      CHECK(prints_as(m[i][j], text[i * m[i].size() + j]));
    }
}

const matrix words3 = of(worked::i_drink_tea);

}  // namespace

TEST_CASE("W2: the soft lookup twice as sure blends the values", "[worked]") {
  const matrix keys = words3, values{{1, 0}, {1, 1}, {0, 1}};
  const attention r = attend({{0, 0.5L, 2}}, keys, values, 2);  // β = 2 multiplies the scores
  CHECK(prints_as(r.out[0][0], worked::w2::sharp_context[0]));
  CHECK(prints_as(r.out[0][1], worked::w2::sharp_context[1]));
}

TEST_CASE("W3: self-attention by hand, drink looks hardest at tea", "[worked]") {
  using namespace worked::w3;
  const matrix Q = product(words3, of(W_Q)), K = product(words3, of(W_K)),
               V = product(words3, of(W_V));
  const attention r = attend(Q, K, V, 1 / std::sqrt(2.0L));
  require_prints(r.map, map);
  require_prints(r.out, out);
  for (std::size_t j = 0; j < 3; ++j)
    CHECK(prints_as((Q[1][0] * K[j][0] + Q[1][1] * K[j][1]) / std::sqrt(2.0L), drink_scores[j]));
  CHECK((r.map[1][2] > r.map[1][0] && r.map[1][2] > r.map[1][1]));
}

TEST_CASE("W4: the unit's weights, and the softmax's largest slope raw and scaled", "[worked]") {
  const std::vector<real> raw = softmax({16, 8, 0}), scaled = softmax({4, 2, 0});
  const char* unit_raw[] = {"0.99966", "0.00034", "0.00000"};
  const char* unit_scaled[] = {"0.867", "0.117", "0.016"};
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK(prints_as(raw[j], unit_raw[j]));
    CHECK(prints_as(scaled[j], unit_scaled[j]));
  }
  // ∂α_i/∂s_j = α_i (δ_ij − α_j)
  const auto largest = [](const std::vector<real>& a) {
    real top = 0;
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 3; ++j)
        top = std::max(top, std::abs(a[i] * ((i == j ? 1 : 0) - a[j])));
    return top;
  };
  CHECK(prints_as(largest(raw), worked::w4::raw_slope));
  CHECK(prints_as(largest(scaled), worked::w4::scaled_slope));
}

TEST_CASE("W5: bank in two sentences", "[worked]") {
  using namespace worked::w5;
  const matrix a = of(river_bank), b = of(bank_loan);
  const attention ra = attend(a, a, a, 1 / std::sqrt(2.0L)),
                  rb = attend(b, b, b, 1 / std::sqrt(2.0L));
  require_prints(ra.map, river_bank_map);
  require_prints(rb.map, bank_loan_map);
  require_prints(ra.out, river_bank_out);
  require_prints(rb.out, bank_loan_out);
  CHECK(
      prints_as(std::hypot(ra.out[1][0] - rb.out[0][0], ra.out[1][1] - rb.out[0][1]), banks_apart));
}

TEST_CASE("W7: two heads, the word before and the word itself, concatenated and mixed by W_O",
          "[worked]") {
  using namespace worked::w7;
  const matrix Q = product(words3, of(W_Q)), K = product(words3, of(W_K)),
               V = product(words3, of(W_V));
  matrix concat(3);
  std::vector<attention> heads;
  for (std::size_t i = 0; i < 2; ++i) {  // head i: columns [3i, 3i + 3) of Q, K and V
    heads.push_back(attend(columns(Q, 3 * i, 3), columns(K, 3 * i, 3), columns(V, 3 * i, 3),
                           1 / std::sqrt(3.0L)));
    for (std::size_t t = 0; t < 3; ++t)
      concat[t].insert(concat[t].end(), heads[i].out[t].begin(), heads[i].out[t].end());
  }
  require_prints(heads[0].map, before_map);
  require_prints(heads[1].map, itself_map);
  require_prints(columns(concat, 0, 3), before_map);  // the values are the words: Z_i = A_i
  require_prints(columns(concat, 3, 3), itself_map);
  require_prints(product(concat, of(W_O)), out);
}

TEST_CASE("W10: the causal map and the four next-word losses", "[worked]") {
  using namespace worked::w10;
  matrix X(4, std::vector<real>(vocabulary, 0)),
      W_vocab(vocabulary, std::vector<real>(vocabulary, 0));
  for (std::size_t t = 0; t < 4; ++t) {
    X[t][inputs[t]] = 1;
    W_vocab[inputs[t]][targets[t]] = follows;
  }
  // loss_t = log Σ_w e^(z_tw) − z_t,target with z = Y W_vocab
  const auto next_word_losses = [&](const matrix& x, bool causal) {
    const attention r = attend(x, x, x, 1 / std::sqrt(static_cast<real>(vocabulary)), causal);
    const matrix z = product(r.out, W_vocab);
    std::vector<real> l(4);
    for (std::size_t t = 0; t < 4; ++t) {
      real sum = 0;
      for (const real v : z[t]) sum += std::exp(v);
      l[t] = std::log(sum) - z[t][targets[t]];
    }
    return std::pair{r.map, l};
  };
  const auto [A, l] = next_word_losses(X, true);
  require_prints(A, map);
  real mean = 0;
  for (std::size_t t = 0; t < 4; ++t) {
    CHECK(prints_as(l[t], worked::w10::losses[t]));
    mean += l[t] / 4;
  }
  CHECK(prints_as(mean, mean_loss));
  matrix changed = X;  // word 4 becomes "I"
  changed[3].assign(vocabulary, 0);
  changed[3][0] = 1;
  CHECK(prints_as(next_word_losses(X, false).second[0], open_loss_1[0]));
  CHECK(prints_as(next_word_losses(changed, false).second[0], open_loss_1[1]));
  CHECK(next_word_losses(changed, true).second[2] == l[2]);  // under the mask, position 3 never sees word 4
}

TEST_CASE("W11: the decoder's causal map, and E3's map as cross-attention", "[worked]") {
  using namespace worked::w11;
  const matrix X = of(hindi);
  require_prints(attend(X, X, X, 1 / std::sqrt(3.0L), true).map, decoder_map);
  const attention cross = attend(X, words3, words3, 1);  // E3: the plain dot
  require_prints(cross.map, cross_map);
  const char* e1[] = {"0.100", "0.164", "0.736"};  // the unit's row for चाय
  for (std::size_t j = 0; j < 3; ++j) CHECK(prints_as(cross.map[1][j], e1[j]));
}

TEST_CASE("W12: the map's price and what the tiled form keeps", "[worked]") {
  using namespace worked::w12;
  for (std::size_t k = 0; k < 3; ++k) {
    const real T = static_cast<real>(lengths[k]);
    CHECK(prints_as(T * T, scores[k]));
    CHECK(prints_as(T * T * 4 / (1024 * 1024), map_mib[k]));
    CHECK(prints_as(T * (T + 1) / 2, causal_scores[k]));
    CHECK(prints_as(4 * T * static_cast<real>(d) * 4 / (1024 * 1024), qkvy_mib[k]));
    CHECK(prints_as(T * 4 / 1024, logsumexp_kib[k]));
  }
  CHECK(prints_as((1024.0L * static_cast<real>(d) + 1024) * 4 / 1024, tiled_output_kib));
  CHECK(prints_as(1024.0L * 1024, "1048576"));  // the unit's: 1,048,576 scores, 4 MiB in float
  CHECK(prints_as(1024.0L * 1024 * 4 / (1024 * 1024), "4"));
}
