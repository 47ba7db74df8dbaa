// libFuzzer target: attend into caller buffers (notes, or keys ≠ values) with dot, scaled_dot or
// general, in float or double, at 0 to 80 notes of length 0 to 8, any β, mask and policy, and
// now and then a buffer of the wrong size. Checks (docs/errors.md, "Fuzzing"): exactly the
// documented exceptions, every output untouched on a throw; the scores are score_all's, bit
// for bit; the weights follow the rules of their row (NaN, +inf, all masked) and, on a finite
// row, are finite, ≥ 0, sum to 1 and lie within the bound B of the long double reference; the
// context lies within its bound of Σ_j α̂_j v_j.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_common.hpp"

namespace {

using namespace attn_fuzz;

template <class T>
void run(reader& r) {
  const look<T> in(r, 3);
  const std::size_t n = in.n, dv = in.dv;
  const mask_view mask(in.mask);
  const attn::options opt{.beta = in.beta, .mask = mask.span(), .if_all_masked = in.policy};
  const T beta = beta_ok<T>(in.beta) ? static_cast<T>(in.beta) : T(0);
  dump<T>("q", in.q);
  dump<T>("keys", in.keys);
  dump<T>("values", in.values);
  dump<T>("W", in.W);
  if (verbose) std::fprintf(stderr, "score %d, n %zu, beta %g, policy %d, broken %d\n", in.score, n, in.beta,
                            static_cast<int>(in.policy), in.broken);

  // The scores exactly as attend forms them.
  std::vector<T> s(n);
  in.with_score([&](const auto& score) { attn::score_all<T>(score, in.q, in.key_view(), s); });
  const kind k = classify<T>(s, beta, mask);
  dump<T>("scores", s);
  if (verbose) {
    std::fprintf(stderr, "mask:");
    for (const char c : in.mask) std::fprintf(stderr, "%d", c);
    std::fprintf(stderr, "\n");
  }
  const int expected = in.broken != 0 || n == 0                                                        ? 1
                       : !beta_ok<T>(in.beta)                                                          ? 2
                       : k == kind::none_kept && in.policy == attn::all_masked_policy::throw_error ? 2
                                                                                                      : 0;
  guarded<T> scores(n + (in.broken == 1 ? 1 : 0)), weights(n), context(dv + (in.broken == 2 ? 1 : 0));
  const int got = thrown([&] {
    in.with_score([&](const auto& score) {
      if (in.separate)
        attn::attend(in.q, in.key_view(), in.value_view(), score, scores.data, weights.data, context.data, opt);
      else
        attn::attend(in.q, in.key_view(), score, scores.data, weights.data, context.data, opt);
    });
  });
  ATTN_FUZZ_CHECK(got == expected, "attend threw %d, expected %d", got, expected);
  if (got != 0) {
    ATTN_FUZZ_CHECK(scores.untouched() && weights.untouched() && context.untouched(), "a throw wrote to an output");
    return;
  }
  for (std::size_t j = 0; j < n; ++j)
    ATTN_FUZZ_CHECK(std::memcmp(&scores.data[j], &s[j], sizeof(T)) == 0 || (std::isnan(scores.data[j]) && std::isnan(s[j])),
                    "score %zu is %g, score_all gives %g", j, double(scores.data[j]), double(s[j]));

  // Weights against the exact (long double) scores. B adds to softmax's bound twice the scores'
  // own error, |β|·((terms)·u·max_j Σ|terms of s_j| + U) with U what underflow loses, and on the
  // one-pass path twice the rescaling error E = ε·((r + 2)·Y + 2r + 4), r = ⌈n/64⌉ − 1
  // (see docs/errors.md).
  const ld eps = std::numeric_limits<T>::epsilon();
  std::vector<ld> y(n);
  ld Y = 0, M = 0, U = 0;
  for (std::size_t j = 0; j < n; ++j) {
    ld mag = 0, under = 0;
    y[j] = static_cast<ld>(beta) * in.exact_score(j, mag, under);
    if (!mask.kept(j)) continue;
    M = std::max(M, mag);
    U = std::max(U, under);
    if (std::isfinite(s[j])) Y = std::max(Y, std::abs(static_cast<ld>(beta) * static_cast<ld>(s[j])));
  }
  const bool one_pass = in.score != 2 && n >= attn::detail::online_min_notes;
  const ld r_blocks = static_cast<ld>((n + attn::detail::online_block - 1) / attn::detail::online_block) - 1;
  const ld E = one_pass ? eps * ((r_blocks + 2) * Y + 2 * r_blocks + 4) : 0;
  const ld B = softmax_log_bound<T>(n, Y) +
               2 * std::abs(static_cast<ld>(beta)) * (static_cast<ld>(in.score_terms()) * eps / 2 * M + U) + 2 * E;
  const ld eta = std::numeric_limits<T>::denorm_min();
  const ld sum_bound = (static_cast<ld>(n) + 4) * eps + static_cast<ld>(n) * eta + (std::exp(E) - 1);
  // the exact scores of notes whose computed score is finite (an overflowed score is ±inf and
  // follows the inf rules, so in the reference it has no weight either)
  for (std::size_t j = 0; j < n; ++j)
    if (!std::isfinite(s[j])) y[j] = -std::numeric_limits<ld>::infinity();
  const std::vector<ld> ref = k == kind::finite ? reference_log_softmax(y, mask) : std::vector<ld>(n);
  check_weights<T>("attend", weights.data, k, s, beta, mask, in.policy, ref, B, sum_bound);

  // The context against Σ_j α̂_j v_j in long double, from attend's own weights: the blend rounds
  // (n + r + 4)·ε relative to A_i = Σ_j α̂_j |v_ji|, the one-pass path adds e^E − 1; weights and
  // products that underflow lose η·(n + Σ_j |v_ji|). Notes of weight exactly 0 never count,
  // whatever their values hold.
  const T* c = context.data.data();
  if (k == kind::nan || (k == kind::none_kept && in.policy == attn::all_masked_policy::nan)) {
    for (std::size_t i = 0; i < dv; ++i) ATTN_FUZZ_CHECK(std::isnan(c[i]), "NaN row, context %zu is %g", i, double(c[i]));
    return;
  }
  bool values_finite = true;
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < dv; ++i)
      if (weights.data[j] != T(0) && !std::isfinite(in.value(j, i))) values_finite = false;
  if (!values_finite) return;  // inf or NaN in a value that has weight: IEEE's answer
  const ld max = std::numeric_limits<T>::max();
  for (std::size_t i = 0; i < dv; ++i) {
    ld exact = 0, A = 0, V = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (std::isfinite(in.value(j, i))) V += std::abs(static_cast<ld>(in.value(j, i)));
      if (weights.data[j] == T(0)) continue;
      exact += static_cast<ld>(weights.data[j]) * static_cast<ld>(in.value(j, i));
      A += static_cast<ld>(weights.data[j]) * std::abs(static_cast<ld>(in.value(j, i)));
    }
    const ld rel = std::exp(E) - 1 + (static_cast<ld>(n) + r_blocks + 4) * eps;  // may be inf for huge Y
    const ld bound = (A == 0 ? 0 : rel * A * ld(1.01)) + (static_cast<ld>(n) + V) * eta;
    if (A + bound >= max * (1 - eps))  // c_i may round past T's largest number
      ATTN_FUZZ_CHECK(std::isinf(c[i]) || std::abs(static_cast<ld>(c[i]) - exact) <= bound, "context %zu overflow", i);
    else
      ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(c[i]) - exact) <= bound,
                      "context %zu is %.17g, reference %.17Lg, bound %Lg", i, double(c[i]), exact, bound);
  }
}

}  // namespace

ATTN_FUZZ_FLOAT_OR_DOUBLE(run)
