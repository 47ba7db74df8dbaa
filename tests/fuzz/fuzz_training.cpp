// libFuzzer target: cross_entropy (the losses out), cross_entropy_backward (written, accumulated,
// in place), greedy and sample, on 0 to 6 rows of 0 to 40 logits read from the fuzzer's bytes
// (float or double: NaN, ±inf, ±max, subnormals, ties), targets in range, out of range and the
// ignore index, any temperature, top-k and top-p. Checks (docs/errors.md, "Fuzzing"): exactly the
// documented exceptions, nothing written then; NaN, +inf and all −inf rows NaN; a −inf target
// +inf; on finite rows each loss within 2(V + 4)ε(1 + ℓ) of the long double reference (or +inf
// where ℓ is beyond T's max) and each gradient entry within (V + 8)ε|g| + 4ε/C + 4η; the mean the
// sum of the losses in sum_t over C, bit for bit; the three backward forms and the forward's loss
// bit for bit alike; ignored rows 0 (written) or untouched (accumulated); greedy the first max; a
// sampled token never −inf, never below top-k's k-th largest logit, greedy's at τ = 0.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_common.hpp"

namespace {

using namespace attn_fuzz;

template <class T>
bool same_bits_or_nan(T a, T b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
void cross_entropy_case(reader& r) {
  const std::size_t rows = r.size_upto(6), V = r.size_upto(40);
  std::vector<T> z(rows * V);
  for (T& v : z) v = r.template number<T>();
  const std::int64_t ignore = r.flag() ? -100 : static_cast<std::int64_t>(r.byte() % 5);
  std::vector<std::int64_t> y(rows);
  for (std::int64_t& t : y) {
    const std::uint8_t b = r.byte();
    t = b < 40 ? ignore : static_cast<std::int64_t>(b % (V + 2)) - 1;  // −1 and V are out of range
  }
  dump<T>(sizeof(T) == 4 ? "logits (float)" : "logits (double)", z);
  if (verbose) {
    std::fprintf(stderr, "rows %zu, V %zu, ignore %lld, targets:", rows, V, static_cast<long long>(ignore));
    for (const std::int64_t t : y) std::fprintf(stderr, " %lld", static_cast<long long>(t));
    std::fprintf(stderr, "\n");
  }
  int expected = V == 0 ? 1 : 0;
  std::size_t C = 0;
  for (const std::int64_t t : y) {
    if (t == ignore) continue;
    ++C;
    if (expected == 0 && (t < 0 || t >= static_cast<std::int64_t>(V))) expected = 2;
  }
  const attn::MatrixView<const T> Z(z.data(), rows, V);
  guarded<T> losses(rows), W(rows * V), A(rows * V), I(rows * V);
  for (T& a : A.data) a = T(0.5);
  A.bytes.assign(reinterpret_cast<const unsigned char*>(A.data.data()),
                 reinterpret_cast<const unsigned char*>(A.data.data()) + A.data.size() * sizeof(T));
  I.data = z;
  I.bytes.assign(reinterpret_cast<const unsigned char*>(z.data()),
                 reinterpret_cast<const unsigned char*>(z.data()) + z.size() * sizeof(T));
  const attn::cross_entropy_options opt{.ignore_index = ignore};
  T L = 0, LW = 0, LA = 0, LI = 0;
  ATTN_FUZZ_CHECK(thrown([&] { L = attn::cross_entropy(Z, y, losses.data, opt); }) == expected,
                  "cross_entropy threw otherwise than %d", expected);
  ATTN_FUZZ_CHECK(thrown([&] { LW = attn::cross_entropy_backward(Z, y, attn::MatrixView<T>(W.data.data(), rows, V), opt); }) ==
                      expected,
                  "cross_entropy_backward threw otherwise");
  ATTN_FUZZ_CHECK(thrown([&] {
                    LA = attn::cross_entropy_backward(Z, y, attn::MatrixView<T>(A.data.data(), rows, V), opt, T(1), true);
                  }) == expected,
                  "cross_entropy_backward (accumulate) threw otherwise");
  ATTN_FUZZ_CHECK(thrown([&] {
                    const attn::MatrixView<T> in(I.data.data(), rows, V);
                    LI = attn::cross_entropy_backward(in, y, in, opt);
                  }) == expected,
                  "cross_entropy_backward (in place) threw otherwise");
  if (expected != 0) {
    ATTN_FUZZ_CHECK(losses.untouched() && W.untouched() && A.untouched() && I.untouched(), "a throw wrote to an output");
    return;
  }
  ATTN_FUZZ_CHECK(same_bits_or_nan(L, LW) && same_bits_or_nan(L, LA) && same_bits_or_nan(L, LI),
                  "the losses differ: %g %g %g %g", double(L), double(LW), double(LA), double(LI));
  attn::detail::sum_t<T> total = 0;
  for (std::size_t t = 0; t < rows; ++t)
    if (y[t] != ignore) total += static_cast<attn::detail::sum_t<T>>(losses.data[t]);
  const T mean = C == 0 ? T(0) : static_cast<T>(total / static_cast<attn::detail::sum_t<T>>(C));
  ATTN_FUZZ_CHECK(same_bits_or_nan(L, mean), "the mean %g is not the losses' %g", double(L), double(mean));
  const ld eps = std::numeric_limits<T>::epsilon(), tiny = std::numeric_limits<T>::denorm_min();
  const ld big = static_cast<ld>(std::numeric_limits<T>::max());
  for (std::size_t t = 0; t < rows; ++t) {
    const T* zr = z.data() + t * V;
    const T* w = W.data.data() + t * V;
    const T* a = A.data.data() + t * V;
    for (std::size_t j = 0; j < V; ++j) {
      ATTN_FUZZ_CHECK(same_bits_or_nan(w[j], I.data[t * V + j]), "in place differs at (%zu, %zu)", t, j);
      if (y[t] == ignore)
        ATTN_FUZZ_CHECK(w[j] == T(0) && a[j] == T(0.5), "ignored row %zu written", t);
      else
        ATTN_FUZZ_CHECK(same_bits_or_nan(a[j], T(T(0.5) + w[j])), "accumulate is not 0.5 + the written at (%zu, %zu)", t, j);
    }
    if (y[t] == ignore) {
      ATTN_FUZZ_CHECK(losses.data[t] == T(0), "ignored row's loss");
      continue;
    }
    const auto yt = static_cast<std::size_t>(y[t]);
    bool nan = false, pos_inf = false, any = false;
    std::size_t arg = 0;
    for (std::size_t j = 0; j < V; ++j) {
      nan = nan || std::isnan(zr[j]);
      pos_inf = pos_inf || zr[j] == std::numeric_limits<T>::infinity();
      any = any || zr[j] != -std::numeric_limits<T>::infinity();
      if (zr[j] > zr[arg]) arg = j;
    }
    const T l = losses.data[t];
    if (nan || pos_inf || !any) {
      ATTN_FUZZ_CHECK(std::isnan(l), "row %zu (NaN, +inf or all -inf): loss %g", t, double(l));
      for (std::size_t j = 0; j < V; ++j) ATTN_FUZZ_CHECK(std::isnan(w[j]), "row %zu: gradient not NaN", t);
      continue;
    }
    const ld m = static_cast<ld>(zr[arg]);
    ld below = 0;
    for (std::size_t j = 0; j < V; ++j)
      if (j != arg) below += std::exp(static_cast<ld>(zr[j]) - m);
    const ld ref = (m - static_cast<ld>(zr[yt])) + std::log1p(below);
    if (ref > big * (1 - eps))  // beyond T (a −inf target, or m − z_y overflows): +inf
      ATTN_FUZZ_CHECK(l == std::numeric_limits<T>::infinity() || std::abs(static_cast<ld>(l) - ref) <= 2 * (V + 4) * eps * (1 + ref),
                      "row %zu: loss %g, reference %Lg (beyond max)", t, double(l), ref);
    else
      ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(l) - ref) <= 2 * (V + 4) * eps * (1 + ref),
                      "row %zu: loss %.17g, reference %.17Lg", t, double(l), ref);
    const ld c = ld(1) / static_cast<ld>(C);
    for (std::size_t j = 0; j < V; ++j) {
      const ld p = std::exp(static_cast<ld>(zr[j]) - m) / (1 + below);
      const ld want = (j == yt ? (static_cast<ld>(zr[yt]) == m ? -below / (1 + below) : p - 1) : p) * c;
      // as the unit tests' bound, with room for subnormal results: (V + 8)ε relative, 4ε·c, 4η
      const ld bound = (V + 8) * eps * std::abs(want) + 4 * eps * c + 4 * tiny;
      ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(w[j]) - want) <= bound, "row %zu: gradient %zu is %.17g, reference %.17Lg",
                      t, j, double(w[j]), want);
    }
  }
}

template <class T>
void sampling_case(reader& r) {
  const std::size_t V = r.size_upto(40);
  std::vector<T> z(V);
  for (T& v : z) v = r.template number<T>();
  static constexpr double taus[] = {1, 0.7, 0, 2, 1e-3, 1e300, -1, std::numeric_limits<double>::quiet_NaN()};
  static constexpr double ps[] = {1, 0.9, 0.5, 1e-9, 0.999999, 0, 1.5, std::numeric_limits<double>::quiet_NaN()};
  attn::sampling_options o{.temperature = taus[r.byte() % 8], .top_k = r.byte() % (V + 2), .top_p = ps[r.byte() % 8]};
  dump<T>(sizeof(T) == 4 ? "sample logits (float)" : "sample logits (double)", z);
  if (verbose) std::fprintf(stderr, "tau %g, top_k %zu, top_p %g\n", o.temperature, o.top_k, o.top_p);
  bool bad_logit = false, any = false;
  std::size_t first_max = 0;
  for (std::size_t j = 0; j < V; ++j) {
    bad_logit = bad_logit || std::isnan(z[j]) || z[j] == std::numeric_limits<T>::infinity();
    any = any || z[j] != -std::numeric_limits<T>::infinity();
    if (z[j] > z[first_max]) first_max = j;
  }
  const int greedy_expected = V == 0 ? 1 : bad_logit || !any ? 2 : 0;
  std::size_t g = V;
  ATTN_FUZZ_CHECK(thrown([&] { g = attn::greedy(z); }) == greedy_expected, "greedy threw otherwise");
  if (greedy_expected == 0) ATTN_FUZZ_CHECK(g == first_max, "greedy gave %zu, the first max is %zu", g, first_max);
  const bool bad_option = !(o.temperature >= 0 && o.temperature < 1e308) || o.top_k > V || !(o.top_p > 0 && o.top_p <= 1);
  const int expected = greedy_expected != 0 ? greedy_expected : bad_option ? 2 : 0;
  attn::random_generator gen{r.byte()};
  const std::uint64_t before = gen.state();
  std::size_t s = V;
  ATTN_FUZZ_CHECK(thrown([&] { s = attn::sample(z, gen, o); }) == expected, "sample threw otherwise than %d", expected);
  if (expected != 0) {
    ATTN_FUZZ_CHECK(gen.state() == before, "the generator advanced on an error");
    return;
  }
  ATTN_FUZZ_CHECK(s < V && z[s] != -std::numeric_limits<T>::infinity(), "sample gave %zu", s);
  if (o.temperature == 0) ATTN_FUZZ_CHECK(s == first_max, "tau 0 is not greedy");
  if (o.top_k != 0) {
    std::vector<T> sorted = z;
    std::sort(sorted.begin(), sorted.end(), [](T a, T b) { return a > b; });
    ATTN_FUZZ_CHECK(z[s] >= sorted[o.top_k - 1], "sample gave %g, below the k-th largest %g", double(z[s]),
                    double(sorted[o.top_k - 1]));
  }
}

template <class T>
void run(reader& r) {
  if (r.flag())
    cross_entropy_case<T>(r);
  else
    sampling_case<T>(r);
}

}  // namespace

ATTN_FUZZ_FLOAT_OR_DOUBLE(run)
