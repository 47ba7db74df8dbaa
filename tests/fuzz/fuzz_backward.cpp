// libFuzzer target: backward into caller buffers (notes, or keys ≠ values) with dot or
// scaled_dot, in float or double, at 0 to 80 notes of length 0 to 8, with any dL/dc, β, mask and
// policy, and now and then a buffer of the wrong size. Checks (docs/errors.md, "Fuzzing"):
// exactly the documented exceptions, every gradient untouched on a throw; masked notes get
// exactly 0 whatever they hold; a NaN row gives NaN; a row whose weights do not move gives
// zero score gradients; otherwise every gradient lies within its bound of the long double
// reference computed from the weights softmax gives (backward's own arithmetic; the weights'
// error is fuzz_attend's and fuzz_softmax's to check).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_common.hpp"

namespace {

using namespace attn_fuzz;

template <class T>
void run(reader& r) {
  const look<T> in(r, 2);
  const std::size_t n = in.n, dk = in.dk, dv = in.dv, dq = in.dq;
  std::vector<T> g(dv + (in.broken == 2 ? 1 : 0));
  for (T& x : g) x = r.template number<T>();
  const mask_view mask(in.mask);
  const attn::options opt{.beta = in.beta, .mask = mask.span(), .if_all_masked = in.policy};
  const T beta = beta_ok<T>(in.beta) ? static_cast<T>(in.beta) : T(0);
  dump<T>("q", in.q);
  dump<T>("keys", in.keys);
  dump<T>("values", in.values);
  dump<T>("dL/dc", g);
  if (verbose) std::fprintf(stderr, "score %d, n %zu, beta %g, policy %d, broken %d\n", in.score, n, in.beta,
                            static_cast<int>(in.policy), in.broken);

  std::vector<T> s(n);
  in.with_score([&](const auto& score) { attn::score_all<T>(score, in.q, in.key_view(), s); });
  const kind k = classify<T>(s, beta, mask);
  const int expected = in.broken != 0 || n == 0                                                        ? 1
                       : !beta_ok<T>(in.beta)                                                          ? 2
                       : k == kind::none_kept && in.policy == attn::all_masked_policy::throw_error ? 2
                                                                                                      : 0;
  guarded<T> gs(n + (in.broken == 1 ? 1 : 0)), gq(dq), gk(n * dk), gv(in.separate ? n * dv : 0);
  const int got = thrown([&] {
    attn::MatrixView<T> gkv(gk.data.data(), n, dk);
    in.with_score([&](const auto& score) {
      if (in.separate) {
        attn::MatrixView<T> gvv(gv.data.data(), n, dv);
        attn::backward(in.q, in.key_view(), in.value_view(), score, g, gs.data, gq.data, gkv, gvv, opt);
      } else {
        attn::backward(in.q, in.key_view(), score, g, gs.data, gq.data, gkv, opt);
      }
    });
  });
  ATTN_FUZZ_CHECK(got == expected, "backward threw %d, expected %d", got, expected);
  if (got != 0) {
    ATTN_FUZZ_CHECK(gs.untouched() && gq.untouched() && gk.untouched() && gv.untouched(), "a throw wrote to an output");
    return;
  }

  // The weights backward works from: softmax of the same scores (the same code, bit for bit).
  std::vector<T> alpha(n);
  attn::softmax(s, alpha, opt);
  const bool nan_row = k == kind::nan || (k == kind::none_kept && in.policy == attn::all_masked_policy::nan);
  if (nan_row) {
    for (std::size_t j = 0; j < n; ++j) ATTN_FUZZ_CHECK(std::isnan(gs.data[j]), "NaN row: dL/ds_%zu is %g", j, double(gs.data[j]));
    return;
  }
  // Masked notes: exactly 0, whatever they or dL/dc hold (except under uniform on a row where
  // every note is masked: then c is the mean of the values and dL/dv_j = g/n).
  const bool uniform_row = k == kind::none_kept && in.policy == attn::all_masked_policy::uniform;
  for (std::size_t j = 0; j < n && !uniform_row; ++j) {
    if (mask.kept(j)) continue;
    ATTN_FUZZ_CHECK(gs.data[j] == T(0), "masked note %zu: dL/ds is %g", j, double(gs.data[j]));
    for (std::size_t i = 0; i < dk; ++i) ATTN_FUZZ_CHECK(gk.data[j * dk + i] == T(0), "masked note %zu: dL/dk", j);
    for (std::size_t i = 0; i < (in.separate ? dv : 0); ++i)
      ATTN_FUZZ_CHECK(gv.data[j * dv + i] == T(0), "masked note %zu: dL/dv", j);
  }
  const bool flows = k == kind::finite;  // pos_inf and all-masked rows: the weights do not move
  if (!flows)
    for (std::size_t j = 0; j < n; ++j)
      ATTN_FUZZ_CHECK(gs.data[j] == T(0), "weights that do not move: dL/ds_%zu is %g", j, double(gs.data[j]));

  // Past here, compare with the long double reference; skip inputs that hold inf or NaN (where
  // they count) and those whose intermediates come within a factor 16(n + d + 8) of T's range.
  const ld eps = std::numeric_limits<T>::epsilon(), eta = std::numeric_limits<T>::denorm_min();
  const ld max = std::numeric_limits<T>::max();
  bool finite_in = true;
  ld qmax = 0, kmax = 0, gmax = 0;
  for (const T x : in.q) finite_in = finite_in && std::isfinite(x), qmax = std::max(qmax, std::abs(static_cast<ld>(x)));
  for (const T x : g) finite_in = finite_in && std::isfinite(x), gmax = std::max(gmax, std::abs(static_cast<ld>(x)));
  std::vector<ld> u(n, 0);
  ld G = 0;
  for (std::size_t j = 0; j < n; ++j) {
    if (alpha[j] == T(0)) continue;  // never read
    if (!std::isfinite(alpha[j])) finite_in = false;
    ld Gj = 0;
    for (std::size_t i = 0; i < dk; ++i) {
      finite_in = finite_in && std::isfinite(in.keys[j * dk + i]);
      kmax = std::max(kmax, std::abs(static_cast<ld>(in.keys[j * dk + i])));
    }
    for (std::size_t i = 0; i < dv; ++i) {
      const T v = in.value(j, i);
      finite_in = finite_in && std::isfinite(v);
      u[j] += static_cast<ld>(g[i]) * static_cast<ld>(v);
      Gj += std::abs(static_cast<ld>(g[i]) * static_cast<ld>(v));
    }
    G = std::max(G, Gj);
  }
  const ld nd = static_cast<ld>(n + dk + dv + 8);
  const ld range = std::max(std::abs(static_cast<ld>(beta)), ld(1)) * (2 * G + gmax) * (1 + qmax) * (1 + kmax) *
                   (static_cast<ld>(n) + 1);
  if (!finite_in || !(range * 16 * nd < max)) return;

  const ld b = beta, f = in.factor();
  ld ubar = 0;
  for (std::size_t j = 0; j < n; ++j)
    if (alpha[j] != T(0)) ubar += static_cast<ld>(alpha[j]) * u[j];
  std::vector<ld> a(n, 0), ea(n, 0);  // ∂L/∂s_j and the bound on its error
  for (std::size_t j = 0; j < n; ++j) {
    if (!flows || alpha[j] == T(0)) continue;
    a[j] = b * static_cast<ld>(alpha[j]) * (u[j] - ubar);
    // ⟨g, v_j⟩ − ⟨g, c⟩ rounds by (n + d_v + 4)·ε·G; products that underflow lose (n + d_v + 2)·η
    ea[j] = std::abs(b) * static_cast<ld>(alpha[j]) * ld(1.03) *
                (static_cast<ld>(n + dv + 4) * eps * G + static_cast<ld>(n + dv + 2) * eta) +
            eps * std::abs(a[j]) + eta * (2 * G + 2);  // β·α_j itself may underflow, then times ≤ 2G
    ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(gs.data[j]) - a[j]) <= ea[j],
                    "dL/ds_%zu is %.17g, reference %.17Lg, bound %Lg", j, double(gs.data[j]), a[j], ea[j]);
  }
  // ∂L/∂q = Σ_j a_j f k_j
  for (std::size_t i = 0; i < dq; ++i) {
    ld ref = 0, bound = 0, mag = 0, ksum = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (a[j] == 0 && ea[j] == 0) continue;  // notes with a_j = 0 add nothing, whatever they hold
      const ld kj = in.keys[j * dk + i];
      ref += a[j] * f * kj;
      mag += std::abs(a[j] * f * kj);
      bound += ea[j] * f * std::abs(kj);
      ksum += std::abs(kj);
    }
    bound += static_cast<ld>(n + 3) * eps * mag + eta * (static_cast<ld>(n) + ksum);
    ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(gq.data[i]) - ref) <= bound, "dL/dq_%zu is %.17g, reference %.17Lg, bound %Lg",
                    i, double(gq.data[i]), ref, bound);
  }
  // ∂L/∂k_j = a_j f q (+ α_j g when the notes are also the values); ∂L/∂v_j = α_j g
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t i = 0; i < dk; ++i) {
      const ld qi = in.q[i];
      ld ref = a[j] * f * qi;
      ld bound = ea[j] * f * std::abs(qi) + 2 * eps * std::abs(ref) + eta * (1 + std::abs(qi));
      if (!in.separate && alpha[j] != T(0)) {
        const ld ag = static_cast<ld>(alpha[j]) * static_cast<ld>(g[i]);
        ref += ag;
        bound += 2 * eps * std::abs(ag) + eps * std::abs(ref) + eta;
      }
      ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(gk.data[j * dk + i]) - ref) <= bound,
                      "dL/d%s_%zu[%zu] is %.17g, reference %.17Lg, bound %Lg", in.separate ? "k" : "h", j, i,
                      double(gk.data[j * dk + i]), ref, bound);
    }
    for (std::size_t i = 0; i < (in.separate ? dv : 0); ++i) {
      const ld ref = static_cast<ld>(alpha[j]) * static_cast<ld>(g[i]);
      ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(gv.data[j * dv + i]) - ref) <= eps * std::abs(ref) + eta,
                      "dL/dv_%zu[%zu] is %.17g, reference %.17Lg", j, i, double(gv.data[j * dv + i]), ref);
    }
  }
}

}  // namespace

ATTN_FUZZ_FLOAT_OR_DOUBLE(run)
