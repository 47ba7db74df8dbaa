// libFuzzer target: attend into caller buffers (notes, or keys ≠ values) with dot, scaled_dot or
// general, in float or double, at 0 to 80 notes of length 0 to 8, any β, mask and policy, and
// now and then a buffer of the wrong size. Checks (docs/errors.md, "Fuzzing"): exactly the
// documented exceptions, every output untouched on a throw; the scores are score_all's, bit
// for bit; the weights follow the rules of their row (NaN, +inf, all masked) and, on a finite
// row, are finite, ≥ 0, sum to 1 and lie within the bound B of the long double reference; the
// context lies within its bound of Σ_j α̂_j v_j.
//
// Then split attention on the same input: the notes cut at two points the fuzzer picks into
// three chunks (any of them may be empty), each read by attend_partial, merged in either
// grouping and finished. Checks: exactly the documented exceptions (β; finish under the
// all-masked policies), the output untouched on a throw; a NaN row NaN, and so is the context
// where a chunk's max is no number of T (β·s that overflows); no note kept: zeros,
// the mean of the values (uniform) or NaN; otherwise within the bounds of both paths' rounding
// of attend's context.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_common.hpp"

namespace {

using namespace attn_fuzz;

/// Where split attention cuts the notes and how it merges them.
struct split_plan {
  std::size_t cut1 = 0, cut2 = 0;  ///< chunks [0, cut1), [cut1, cut2), [cut2, n)
  bool right_first = false;        ///< a ⊕ (b ⊕ c) instead of (a ⊕ b) ⊕ c
};

/// Split attention's context for the plan (the file comment), into out; throws as the calls do.
template <class T>
void split_context(const look<T>& in, const mask_view& mask, const attn::options& opt, const split_plan& plan,
                   std::span<T> out) {
  const std::size_t n = in.n, dk = in.dk, dv = in.dv;
  const std::size_t cuts[4] = {0, plan.cut1, plan.cut2, n};
  std::vector<attn::partial_attention<T>> parts;
  for (std::size_t c = 0; c < 3; ++c) {
    const std::size_t a = cuts[c], rows = cuts[c + 1] - cuts[c];
    attn::options oc = opt;
    if (mask.n != 0) oc.mask = mask.span().subspan(a, rows);
    const attn::MatrixView<const T> K(in.keys.data() + a * dk, rows, dk);
    const attn::MatrixView<const T> V =
        in.separate ? attn::MatrixView<const T>(in.values.data() + a * dv, rows, dv) : K;
    in.with_score([&](const auto& score) { parts.push_back(attn::attend_partial(in.q, K, V, score, oc)); });
  }
  const auto all = plan.right_first ? attn::merge(parts[0], attn::merge(parts[1], parts[2]))
                                    : attn::merge(attn::merge(parts[0], parts[1]), parts[2]);
  attn::finish(all, out, opt);
}

/// Split attention against attend (the file comment). attended: attend gave `context` (and
/// the kind k, the bound B on its weights' log-error and E its one-pass rescaling's apply);
/// else only the exceptions and the all-masked answers are checked.
template <class T>
void check_split(const look<T>& in, const mask_view& mask, const attn::options& opt, const split_plan& plan,
                 std::span<const T> s, T beta, kind k, bool attended, std::span<const T> weights,
                 std::span<const T> context, ld B, ld E) {
  const std::size_t n = in.n, dv = in.dv;
  if (in.broken != 0) return;  // attend's size checks; split gets the sizes right
  // A chunk whose max is no number of T (attn/split.hpp) makes the whole context NaN: a kept
  // NaN β·s; or β·s = +inf only from finite scores that overflowed; or every kept β·s −inf, one
  // of them from a finite score.
  bool chunk_nan = false;
  const std::size_t cuts[4] = {0, plan.cut1, plan.cut2, n};
  const T inf = std::numeric_limits<T>::infinity();
  for (std::size_t c = 0; c < 3 && beta_ok<T>(in.beta); ++c) {
    bool nan = false, inf_score = false, over_plus = false, over_minus = false, finite_y = false;
    for (std::size_t j = cuts[c]; j < cuts[c + 1]; ++j) {
      if (!mask.kept(j)) continue;
      const T y = beta * s[j];
      nan = nan || std::isnan(y);
      inf_score = inf_score || (y == inf && std::isinf(s[j]));
      over_plus = over_plus || (y == inf && std::isfinite(s[j]));
      over_minus = over_minus || (y == -inf && std::isfinite(s[j]));
      finite_y = finite_y || std::isfinite(y);
    }
    chunk_nan = chunk_nan || nan || (over_plus && !inf_score) || (over_minus && !finite_y && !over_plus && !inf_score);
  }
  const bool none = n == 0 || k == kind::none_kept;
  using P = attn::all_masked_policy;
  const int expected = !beta_ok<T>(in.beta)                        ? 2
                       : none && in.policy == P::throw_error        ? 2
                       : none && in.policy == P::uniform && n == 0 ? 1
                                                                   : 0;
  guarded<T> out(dv);
  const int got = thrown([&] { split_context<T>(in, mask, opt, plan, out.data); });
  ATTN_FUZZ_CHECK(got == expected, "split attention threw %d, expected %d (cuts %zu %zu)", got, expected,
                  plan.cut1, plan.cut2);
  if (got != 0) {
    ATTN_FUZZ_CHECK(out.untouched(), "split attention: a throw wrote to the context");
    return;
  }
  const T* c = out.data.data();
  const ld eps = std::numeric_limits<T>::epsilon(), eta = std::numeric_limits<T>::denorm_min();
  // Each chunk's context is a weighted mean of its values, as attend's over those notes alone:
  // within (n + 16)ε of its largest finite value, which may round past T's largest number
  // (values a few ulps from it). Such columns give ±inf by design (attn/split.hpp): not checked.
  const auto near_top = [&](std::size_t i) {
    ld top = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (std::isfinite(in.value(j, i))) top = std::max(top, std::abs(static_cast<ld>(in.value(j, i))));
    return top * (1 + (static_cast<ld>(n) + 16) * eps) >= static_cast<ld>(std::numeric_limits<T>::max());
  };
  if (k == kind::nan || chunk_nan || (none && in.policy == P::nan)) {
    for (std::size_t i = 0; i < dv; ++i)
      ATTN_FUZZ_CHECK(std::isnan(c[i]), "split attention: NaN row, context %zu is %g", i, double(c[i]));
    return;
  }
  if (none) {
    for (std::size_t i = 0; i < dv; ++i) {
      if (in.policy == P::zeros) {
        ATTN_FUZZ_CHECK(c[i] == T(0), "split attention: nothing kept, context %zu is %g", i, double(c[i]));
        continue;
      }
      // uniform: each chunk's mean, Σ_j fl(1/n_c)·v_j in note order ((n_c + 1)ε of Σ_j |v_j|/n_c),
      // merged twice as r_a·a + r_b·b with r = fl(n_a/N) (3ε a merge): (n + 7)ε·Σ_j |v_j|/n in
      // all, and each of its n + 4 products may underflow (η/2 each). A chunk's mean near T's
      // largest number may round to ±inf (near_top).
      ld mean = 0, mag = 0;
      bool finite = true;
      for (std::size_t j = 0; j < n; ++j) {
        finite = finite && std::isfinite(in.value(j, i));
        mean += static_cast<ld>(in.value(j, i));
        mag += std::abs(static_cast<ld>(in.value(j, i)));
      }
      const ld nl = static_cast<ld>(n);
      if (!finite || near_top(i)) continue;
      ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(c[i]) - mean / nl) <= (nl + 7) * eps * mag / nl + (nl + 4) * eta,
                      "split attention: uniform, context %zu is %.17g, mean %.17Lg", i, double(c[i]), mean / nl);
    }
    return;
  }
  if (!attended) return;
  // Both contexts against Σ_j α_j v_j: attend's within rel·A of Σ_j α̂_j v_j (fuzz_attend's
  // bound, A = Σ_j α̂_j |v_j|) and its weights within e^{±B} of α; split's weights carry the same
  // log-error B, its chunks' rescalings E, and each of the two merges rounds m_a − m (≤ 2Y),
  // exp, and a product: e^{B + E + 2·(4Y + 4)ε} − 1 in all (Y ≤ B/(4.1 ε)); then each chunk's
  // blend and division as attend's, (n + r + 4)ε, and each merge's share w_a/(w_a + w_b) (a
  // sum and a division) and convex combination (a product and a sum): (n + r + 12)ε. Products
  // that underflow: (n + Σ_j |v_ji|)·η on each side, and the merges' 4 more on split's.
  // A value of inf or NaN counts wherever its note's computed weight is not 0. A kept note with
  // a finite β·s has a weight above 0 that may underflow in one path and not in the other
  // (within its chunk, exp(β s_j − m_a) can be a number where attend's exp(β s_j − m) is 0):
  // then either answer is right, so no such row is compared.
  bool values_finite = true;
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < dv; ++i)
      if ((weights[j] != T(0) || (mask.kept(j) && std::isfinite(beta * s[j]))) && !std::isfinite(in.value(j, i)))
        values_finite = false;
  if (!values_finite || k != kind::finite || !std::isfinite(B) || !std::isfinite(E)) return;
  const ld r = static_cast<ld>((n + attn::detail::online_block - 1) / attn::detail::online_block) + 2;
  const ld Y = B / (ld(4.1) * eps);
  const ld rel_a = std::exp(E) - 1 + (static_cast<ld>(n) + r + 4) * eps;
  const ld rel_s = std::exp(B + E + 2 * (4 * Y + 4) * eps) - 1 + (static_cast<ld>(n) + r + 12) * eps;
  for (std::size_t i = 0; i < dv; ++i) {
    ld A = 0, V = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (std::isfinite(in.value(j, i))) V += std::abs(static_cast<ld>(in.value(j, i)));
      if (weights[j] != T(0)) A += static_cast<ld>(weights[j]) * std::abs(static_cast<ld>(in.value(j, i)));
    }
    const ld Aa = A * std::exp(B);  // Σ_j α_j |v_ji| from above
    const ld bound = (rel_a + std::exp(B) - 1) * A * ld(1.01) + rel_s * Aa * ld(1.01) +
                     (2 * (static_cast<ld>(n) + V) + 4) * eta;
    // (every partial context is a weighted mean of the values, so values that sum past T's
    // range are checked too; not a context whose bound reaches T's largest number, nor near_top)
    if (!std::isfinite(bound) || A + bound >= static_cast<ld>(std::numeric_limits<T>::max()) * (1 - eps) ||
        near_top(i))
      continue;
    ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(c[i]) - static_cast<ld>(context[i])) <= bound,
                    "split attention (cuts %zu %zu): context %zu is %.17g, attend's %.17g, bound %Lg", plan.cut1,
                    plan.cut2, i, double(c[i]), double(context[i]), bound);
  }
}

template <class T>
void run(reader& r) {
  const look<T> in(r, 3);
  split_plan plan;  // (past the end of the older inputs: 0, 0, and the left grouping)
  plan.cut1 = r.size_upto(80);
  plan.cut2 = r.size_upto(80);
  plan.right_first = r.flag();
  plan.cut1 = std::min(plan.cut1, in.n);
  plan.cut2 = std::min(std::max(plan.cut2, plan.cut1), in.n);
  const std::size_t n = in.n, dv = in.dv;
  const mask_view mask(in.mask);
  const attn::options opt{.beta = in.beta, .mask = mask.span(), .if_all_masked = in.policy};
  const T beta = beta_as<T>(in.beta);
  in.dump();

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
    check_split<T>(in, mask, opt, plan, s, beta, k, false, {}, {}, 0, 0);
    return;
  }
  for (std::size_t j = 0; j < n; ++j)
    ATTN_FUZZ_CHECK(same_or_both_nan(scores.data[j], s[j]),
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
  check_split<T>(in, mask, opt, plan, s, beta, k, true, weights.data, context.data, B, E);

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
