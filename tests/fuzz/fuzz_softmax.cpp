// libFuzzer target: softmax, log_softmax, logsumexp, softmax_inplace, log_softmax_inplace and
// softmax_vjp on rows of 0 to 80 numbers read from the fuzzer's bytes (float or double), with
// any β, mask and all-masked policy. Checks (docs/errors.md, "Fuzzing"): exactly the documented exceptions,
// with the output untouched; the documented answer for NaN, +inf and all-masked rows; for
// finite rows, weights finite, ≥ 0, summing to 1 within (n + 4)ε, within the bound B of the
// long double reference, and log-weights within ε(4.1·Y + 2|ℓ| + n + 8); softmax and log_softmax
// in place = into a buffer, bit for bit.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_common.hpp"

namespace {

using namespace attn_fuzz;

template <class T>
void run(reader& r) {
  const std::size_t n = r.size_upto(80);
  std::vector<T> x(n);
  for (T& v : x) v = r.template number<T>();
  const double beta = r.beta();
  const std::vector<char> mask_chars = r.mask(n);
  const mask_view mask(mask_chars);
  attn::options opt{.beta = beta, .mask = mask.span(), .if_all_masked = r.policy()};
  const T beta_t = beta_as<T>(beta);
  dump<T>(sizeof(T) == 4 ? "x (float)" : "x (double)", x);
  if (verbose)
    std::fprintf(stderr, "beta %g, mask %zu entries (%zu kept), policy %d\n", beta, mask_chars.size(),
                 static_cast<std::size_t>(std::count(mask_chars.begin(), mask_chars.end(), 1)),
                 static_cast<int>(opt.if_all_masked));
  const kind k = n == 0 || !beta_ok<T>(beta) ? kind::finite : classify<T>(x, beta_t, mask);
  // What must throw: an empty row (dimension_error), β not finite as a T, an all-masked row under
  // throw_error (domain_error). Nothing else.
  const int expected = n == 0 ? 1 : !beta_ok<T>(beta) || (k == kind::none_kept && opt.if_all_masked ==
                                                                                     attn::all_masked_policy::throw_error)
                                        ? 2
                                        : 0;

  guarded<T> w(n), lw(n), in_place(n), log_in_place(n);
  in_place.data = x;
  in_place.bytes.assign(reinterpret_cast<const unsigned char*>(x.data()),
                        reinterpret_cast<const unsigned char*>(x.data()) + n * sizeof(T));
  log_in_place.data = in_place.data;
  log_in_place.bytes = in_place.bytes;
  const int got = thrown([&] { attn::softmax(x, w.data, opt); });
  ATTN_FUZZ_CHECK(got == expected, "softmax threw %d, expected %d (n = %zu, beta = %g)", got, expected, n, beta);
  ATTN_FUZZ_CHECK(thrown([&] { attn::log_softmax(x, lw.data, opt); }) == expected, "log_softmax threw otherwise");
  ATTN_FUZZ_CHECK(thrown([&] { attn::softmax_inplace(in_place.data, opt); }) == expected, "softmax_inplace");
  ATTN_FUZZ_CHECK(thrown([&] { attn::log_softmax_inplace(log_in_place.data, opt); }) == expected,
                  "log_softmax_inplace threw otherwise");
  T lse = 0;
  ATTN_FUZZ_CHECK(thrown([&] { lse = attn::logsumexp(x, opt); }) == expected, "logsumexp threw otherwise");
  if (expected != 0) {
    ATTN_FUZZ_CHECK(w.untouched() && lw.untouched() && in_place.untouched() && log_in_place.untouched(),
                    "a throw wrote to an output");
    return;
  }
  ATTN_FUZZ_CHECK(std::memcmp(w.data.data(), in_place.data.data(), n * sizeof(T)) == 0,
                  "softmax in place differs from softmax into a buffer");
  // log_softmax in place and into a buffer agree (issue 20: the pivot was once searched for in
  // the input after it was overwritten, giving -inf in place for a finite answer)
  for (std::size_t j = 0; j < n; ++j)
    ATTN_FUZZ_CHECK(same_or_both_nan(lw.data[j], log_in_place.data[j]),
                    "log_softmax in place gives %g at %zu, into a buffer %g", double(log_in_place.data[j]), j,
                    double(lw.data[j]));

  // Exact scores β·x in long double (x86: 64-bit significand, exponent range beyond any T).
  std::vector<ld> y(n);
  ld Y = 0;
  for (std::size_t j = 0; j < n; ++j) {
    y[j] = static_cast<ld>(beta_t) * static_cast<ld>(x[j]);
    if (mask.kept(j) && std::isfinite(x[j])) Y = std::max(Y, std::abs(y[j]));
  }
  const std::vector<ld> ref = k == kind::finite ? reference_log_softmax(y, mask) : std::vector<ld>(n);
  const ld eps = std::numeric_limits<T>::epsilon();
  const ld B = softmax_log_bound<T>(n, Y);
  const ld sum_bound = (static_cast<ld>(n) + 4) * eps + static_cast<ld>(n) * std::numeric_limits<T>::denorm_min();
  check_weights<T>("softmax", w.data, k, x, beta_t, mask, opt.if_all_masked, ref, B, sum_bound);

  // log_softmax: ℓ_j within ε(4.1·Y + 2|ℓ_j| + n + 8); masked entries −inf.
  const T inf = std::numeric_limits<T>::infinity();
  for (std::size_t j = 0; j < n; ++j) {
    const T l = lw.data[j];
    switch (k) {
      case kind::nan: ATTN_FUZZ_CHECK(std::isnan(l), "log_softmax: NaN row"); break;
      case kind::pos_inf:
        ATTN_FUZZ_CHECK(w.data[j] == T(0) ? l == -inf : std::abs(l + std::log(T(1) / w.data[j])) <= 4 * eps,
                        "log_softmax: +inf row, entry %zu is %g", j, double(l));
        break;
      case kind::none_kept:
        if (opt.if_all_masked == attn::all_masked_policy::zeros) ATTN_FUZZ_CHECK(l == -inf, "log_softmax: zeros");
        if (opt.if_all_masked == attn::all_masked_policy::nan) ATTN_FUZZ_CHECK(std::isnan(l), "log_softmax: nan");
        if (opt.if_all_masked == attn::all_masked_policy::uniform)
          ATTN_FUZZ_CHECK(l == -std::log(static_cast<T>(n)), "log_softmax: uniform");
        break;
      case kind::finite:
        if (ref[j] == -std::numeric_limits<ld>::infinity()) {
          ATTN_FUZZ_CHECK(l == -inf, "log_softmax: masked or -inf entry %zu is %g", j, double(l));
        } else {
          const ld bound = eps * (ld(4.1) * Y + 2 * std::abs(ref[j]) + static_cast<ld>(n) + 8);
          // a log-weight beyond −max(T) rounds to −inf: an honest overflow of the result
          const bool beyond = -ref[j] >= static_cast<ld>(std::numeric_limits<T>::max()) * (1 - eps);
          ATTN_FUZZ_CHECK(!std::isnan(l) && (std::abs(static_cast<ld>(l) - ref[j]) <= bound || (beyond && l == -inf)),
                          "log_softmax: entry %zu is %.17g, reference %.17Lg, bound %Lg", j, double(l), ref[j], bound);
        }
        break;
    }
  }
  // logsumexp = m + log Σ e^{y − m}, within ε(4.1·Y + n + 8) + ε|lse|; ±inf when beyond T.
  if (k == kind::finite) {
    ld mx = -std::numeric_limits<ld>::infinity(), s = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (ref[j] != -std::numeric_limits<ld>::infinity()) mx = std::max(mx, y[j]);
    for (std::size_t j = 0; j < n; ++j)
      if (ref[j] != -std::numeric_limits<ld>::infinity()) s += std::exp(y[j] - mx);
    const ld exact = mx + std::log(s);  // log Σ e^y over the kept finite entries
    const ld bound = eps * (ld(4.1) * Y + static_cast<ld>(n) + 8) + eps * std::abs(exact);
    if (std::abs(exact) > static_cast<ld>(std::numeric_limits<T>::max()) * (1 - eps))
      ATTN_FUZZ_CHECK(std::isinf(lse) || std::abs(static_cast<ld>(lse) - exact) <= bound, "logsumexp overflow");
    else
      ATTN_FUZZ_CHECK(std::abs(static_cast<ld>(lse) - exact) <= bound, "logsumexp is %.17g, reference %.17Lg",
                      double(lse), exact);
  }

  // softmax_vjp with any g: no crash; finite row and finite g give finite gradients unless
  // β·α·g overflows (|β|·max|g| near T's max).
  std::vector<T> g(n), v(n);
  T gmax = 0;
  for (T& gi : g) {
    gi = r.template number<T>();
    gmax = std::isfinite(gi) ? std::max(gmax, std::abs(gi)) : std::numeric_limits<T>::infinity();
  }
  attn::softmax_vjp(x, g, v, opt);
  if (k == kind::finite && static_cast<ld>(gmax) * std::max(std::abs(static_cast<ld>(beta_t)), ld(1)) * 4 <
                               static_cast<ld>(std::numeric_limits<T>::max()))
    for (std::size_t j = 0; j < n; ++j) ATTN_FUZZ_CHECK(std::isfinite(v[j]), "softmax_vjp: entry %zu is %g", j, double(v[j]));
}

}  // namespace

ATTN_FUZZ_FLOAT_OR_DOUBLE(run)
