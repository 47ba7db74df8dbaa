#pragma once
/// \file attn/sampling.hpp
/// Choosing the next token from a row of logits z (V numbers; docs/training.md, "Sampling"):
///
///   greedy(z)          = the least j with z_j = max z (torch.argmax's tie rule);
///   sample(z, gen, o)  = j drawn with probability p_j = exp((z_j − m)/τ) / Σ_k exp((z_k − m)/τ)
///                        over the kept entries (m their max, τ = o.temperature > 0; τ = 0 is
///                        greedy and draws nothing), by the inverse CDF: u = gen.uniform()·Σ,
///                        j the first index whose running sum exceeds u, all in double.
///
/// Kept entries: top-k keeps every j with z_j ≥ the k-th largest value (k = 0: all), so ties at the
/// k-th value are all kept (nanoGPT's `logits[logits < v[:, [-1]]] = -inf`) and more than k may
/// be; top-p then keeps every j with p_j ≥ the largest threshold q for which the probabilities
/// ≥ q sum to at least top_p (the smallest set of the most likely tokens that holds top_p of the
/// mass, ties at the edge kept; 1 keeps all). Both find their threshold on z (the probabilities
/// are monotone in z) without sorting or allocating: a radix select over the bytes of z's order
/// key, 8 passes over the row (top-p forms each exp in the first, then only for the few logits
/// that share the bytes chosen so far).
///
/// `random_generator` is splitmix64 (detail/random.hpp): integer arithmetic only, so the same seed
/// gives the same tokens with every compiler and standard library. Errors: a NaN or +inf logit, a
/// row of nothing but −inf, an empty row, τ < 0 or not finite, k > V, top_p outside (0, 1]:
/// domain_error (dimension_error for the empty row), naming the function.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>

#include "attn/detail/exp.hpp"
#include "attn/detail/math.hpp"
#include "attn/detail/random.hpp"
#include "attn/error.hpp"
#include "attn/vector.hpp"

namespace attn {

/// splitmix64 (Vigna's splitmix64.c): the state starts at the seed; each number adds
/// γ = 0x9E3779B97F4A7C15 to it and returns it through splitmix64's mix. The same bits everywhere.
class random_generator {
public:
  /// The stream of `seed`.
  constexpr explicit random_generator(std::uint64_t seed) noexcept : state_(seed) {}

  /// The next 64 random bits.
  constexpr std::uint64_t next() noexcept {
    state_ += detail::splitmix64_gamma;
    return detail::splitmix64_mix(state_);
  }

  /// The next number uniform on [0, 1): ⌊next() / 2¹¹⌋·2⁻⁵³ (every double of that grid equally
  /// likely).
  constexpr double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1p-53; }

  /// The state (the seed plus γ times the numbers drawn so far, modulo 2⁶⁴).
  [[nodiscard]] constexpr std::uint64_t state() const noexcept { return state_; }

private:
  std::uint64_t state_;
};

/// How `sample` draws: temperature τ ≥ 0 (0: greedy), top-k (0: every token; else 1 ≤ k ≤ V),
/// top-p in (0, 1] (1: every token).
struct sampling_options {
  double temperature = 1.0;  ///< τ
  std::size_t top_k = 0;     ///< k
  double top_p = 1.0;        ///< nucleus mass
};

namespace detail {

[[noreturn]] ATTN_NOINLINE inline void throw_bad_logit(const char* where, std::size_t j, double z) {
  raise<domain_error>(std::string(where) + ": logit " + std::to_string(j) + " is " + std::to_string(z) +
                      " (NaN and +inf have no probability)");
}

[[noreturn]] ATTN_NOINLINE inline void throw_no_token(const char* where) {
  raise<domain_error>(std::string(where) + ": every logit is -inf: no token may be chosen");
}

[[noreturn]] ATTN_NOINLINE inline void throw_bad_sampling(const char* where, const char* what, double x,
                                                          const char* range) {
  raise<domain_error>(std::string(where) + ": " + what + " is " + std::to_string(x) + " but must be " +
                      range);
}

[[noreturn]] ATTN_NOINLINE inline void throw_bad_top_k(const char* where, std::size_t k, std::size_t n) {
  raise<domain_error>(std::string(where) + ": top_k is " + std::to_string(k) + " but there are " +
                      std::to_string(n) + " logits");
}

/// Checks the row (not empty, no NaN, no +inf, not all −inf); returns the least index of its max.
template <class T>
std::size_t checked_argmax(const char* where, std::span<const T> z) {
  check_nonempty(where, "the row of logits", z.size());
  std::size_t best = 0;
  for (std::size_t j = 0; j < z.size(); ++j) {
    // on the bits (finite_as, is_minus_infinity): -ffast-math may fold z == z and z == inf
    if (!finite_as<double>(static_cast<double>(z[j])) && !is_minus_infinity(z[j]))
      throw_bad_logit(where, j, static_cast<double>(z[j]));
    if (z[j] > z[best]) best = j;
  }
  if (is_minus_infinity(z[best])) throw_no_token(where);
  return best;
}

/// A double's bits as an unsigned key in the order of the numbers (−0 below +0; no NaN here).
[[nodiscard]] inline std::uint64_t ordered_key(double x) noexcept {
  const auto u = detail::bit_cast<std::uint64_t>(x);
  return (u >> 63) != 0 ? ~u : u | (std::uint64_t{1} << 63);
}

/// The largest key q with weight(keys ≥ q) ≥ target, digit by digit from the top (radix select,
/// bytes): at each of the 8 passes a histogram of the next byte of the keys that share the digits
/// chosen so far, and the highest byte whose keys, with those above them, still weigh enough.
/// weight(j) ≥ 0 is asked for only for the keys that share those digits (after the first pass, a
/// few). If rounding leaves no byte that weighs enough, the byte is 0 (more is kept, not less).
template <class Key, class Weight>
std::uint64_t threshold_key(std::size_t n, Key key, Weight weight, double target) {
  std::uint64_t prefix = 0;
  double above = 0;  // the weight of the keys above the range of the digits chosen
  for (int shift = 56; shift >= 0; shift -= 8) {
    double hist[256] = {};
    for (std::size_t j = 0; j < n; ++j) {
      const std::uint64_t k = key(j);
      if (shift == 56 || (k >> (shift + 8)) == (prefix >> (shift + 8)))
        hist[(k >> shift) & 0xffu] += weight(j);
    }
    unsigned b = 255;
    for (; b > 0; --b) {
      if (above + hist[b] >= target) break;
      above += hist[b];
    }
    prefix |= static_cast<std::uint64_t>(b) << shift;
  }
  return prefix;
}

}  // namespace detail

/// The index of the largest logit; ties: the least index (torch.argmax). domain_error for a NaN
/// or +inf logit or a row of nothing but −inf; dimension_error for an empty row.
template <vector_like Z>
[[nodiscard]] std::size_t greedy(const Z& logits) {
  using T = scalar_of<Z>;
  return detail::checked_argmax<T>("attn::greedy", as_span(logits));
}

/// A token drawn from softmax(z/τ) over the kept entries (the file comment), one gen.uniform()
/// per call (none for τ = 0, which returns greedy(z)). Errors as greedy, and domain_error for
/// τ < 0 or not finite, k > V, top_p outside (0, 1]; the generator does not advance on an error.
template <vector_like Z>
[[nodiscard]] std::size_t sample(const Z& logits, random_generator& gen, const sampling_options& opt = {}) {
  using T = scalar_of<Z>;
  const char* where = "attn::sample";
  const std::span<const T> z = as_span(logits);
  const std::size_t best = detail::checked_argmax<T>(where, z);
  const double tau = opt.temperature;
  if (!detail::finite_as<double>(tau) || tau < 0)
    detail::throw_bad_sampling(where, "the temperature", tau, "finite and at least 0");
  if (opt.top_k > z.size()) detail::throw_bad_top_k(where, opt.top_k, z.size());
  if (!detail::finite_as<double>(opt.top_p) || !(opt.top_p > 0 && opt.top_p <= 1))
    detail::throw_bad_sampling(where, "top_p", opt.top_p, "in (0, 1]");
  if (tau == 0) return best;
  const std::size_t n = z.size();
  const double m = static_cast<double>(z[best]);
  const auto key = [&](std::size_t j) { return detail::ordered_key(static_cast<double>(z[j])); };
  const auto weight = [&](std::size_t j) {  // exp((z_j − m)/τ): monotone in z_j, 0 for −inf
    return attn::detail::exp((static_cast<double>(z[j]) - m) / tau);
  };
  // the kept tokens are those with key(j) ≥ floor (ordered_key(−inf) > 0: floor 0 keeps all)
  std::uint64_t floor = 0;
  if (opt.top_k != 0 && opt.top_k < n)  // the largest key with at least k logits at or above it
    floor = detail::threshold_key(n, key, [](std::size_t) { return 1.0; }, static_cast<double>(opt.top_k));
  if (opt.top_p < 1) {  // the weights are monotone in z: a threshold on z, weighed by the weights
    double kept = 0;
    for (std::size_t j = 0; j < n; ++j) kept += key(j) >= floor ? weight(j) : 0.0;
    const std::uint64_t top_k_floor = floor;
    floor = detail::threshold_key(
        n, key, [&](std::size_t j) { return key(j) >= top_k_floor ? weight(j) : 0.0; }, opt.top_p * kept);
  }
  double total = 0;
  for (std::size_t j = 0; j < n; ++j) total += key(j) >= floor ? weight(j) : 0.0;
  const double u = gen.uniform() * total;
  double run = 0;
  std::size_t last = best;
  for (std::size_t j = 0; j < n; ++j) {
    if (key(j) < floor) continue;
    const double w = weight(j);
    if (w == 0) continue;
    run += w;
    last = j;
    if (u < run) return j;
  }
  return last;  // u within rounding of Σ: the last kept token
}

}  // namespace attn
