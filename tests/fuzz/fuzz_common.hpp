#pragma once
/// \file tests/fuzz/fuzz_common.hpp
/// What attn's libFuzzer targets share: a reader that turns the fuzzer's bytes into sizes,
/// numbers and options (numbers are often raw bit patterns, so inf, NaN, subnormals and huge
/// values all appear), output buffers full of sentinels, the softmax rules in exact arithmetic,
/// the long double reference and the error bounds of docs/errors.md ("Fuzzing"). A check that
/// fails prints what and where, and aborts: libFuzzer then saves the input as a crash.

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "attn/attn.hpp"

namespace attn_fuzz {

/// Prints the failed check and aborts (libFuzzer reports the input as a crash).
[[noreturn]] inline void fail(const char* file, int line, const char* cond, const char* fmt, ...) {
  std::fprintf(stderr, "%s:%d: check failed: %s\n  ", file, line, cond);
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  std::abort();
}

/// Aborts with a printf-style message unless cond holds.
#define ATTN_FUZZ_CHECK(cond, ...)                                             \
  do {                                                                         \
    if (!(cond)) ::attn_fuzz::fail(__FILE__, __LINE__, #cond, __VA_ARGS__);   \
  } while (0)

using ld = long double;

/// ATTN_FUZZ_VERBOSE=1 in the environment: the targets print their inputs (to replay a crash).
inline const bool verbose = std::getenv("ATTN_FUZZ_VERBOSE") != nullptr;

/// With ATTN_FUZZ_VERBOSE: prints name and the numbers of x, each with its bits' value.
template <class T>
void dump(const char* name, std::span<const T> x) {
  if (!verbose) return;
  std::fprintf(stderr, "%s (%zu):", name, x.size());
  for (const T v : x) std::fprintf(stderr, " %.9g", static_cast<double>(v));
  std::fprintf(stderr, "\n");
}

/// The fuzzer's bytes, read front to back; past the end every read gives 0.
class reader {
  const std::uint8_t* p_;
  const std::uint8_t* end_;

public:
  /// Reads `size` bytes from `data`.
  reader(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size) {}

  /// The next byte, or 0 past the end.
  std::uint8_t byte() { return p_ < end_ ? *p_++ : std::uint8_t{0}; }
  /// The low bit of the next byte.
  bool flag() { return (byte() & 1u) != 0; }
  /// A size in [0, max] (max < 256).
  std::size_t size_upto(std::size_t max) { return byte() % (max + 1); }

  /// A number: small multiples of 1/16 (ties are common), moderate values over 32 octaves,
  /// special values (±inf, NaN of either sign, ±max, subnormals, ±0), or raw bits.
  template <class T>
  T number() {
    const std::uint8_t tag = byte();
    if (tag < 0x60) return static_cast<T>(static_cast<std::int8_t>(byte())) / T(16);
    if (tag < 0xA0) return std::ldexp(static_cast<T>(static_cast<std::int8_t>(byte())) / T(16), (tag & 0x1F) - 16);
    if (tag >= 0xF0) return special<T>(tag & 0x0Fu);
    T x;
    unsigned char bits[sizeof(T)] = {};
    for (unsigned char& b : bits) b = byte();
    std::memcpy(&x, bits, sizeof(T));
    return x;
  }

  /// The k-th of 16 special values of T (k < 16).
  template <class T>
  static T special(unsigned k) {
    using L = std::numeric_limits<T>;
    const T table[16] = {L::infinity(),  -L::infinity(), L::quiet_NaN(), -L::quiet_NaN(),
                         L::max(),       -L::max(),      L::min(),       L::denorm_min(),
                         -L::denorm_min(), T(0),         -T(0),          T(1),
                         T(-1),          L::max() / 2,   L::epsilon(),   T(1e-3)};
    return table[k];
  }

  /// Sharpness: usual values most of the time, else any double (NaN and ±inf included).
  double beta() {
    const std::uint8_t tag = byte();
    static constexpr double usual[] = {1, 1, 1, 0.5, 2, -1, 0, 3, 10, 100, 1e-3, -0.25, 1e4, 1e30, 1e-300, 4};
    if (tag < 0xC0) return usual[tag % 16];
    double b;
    unsigned char bits[8];
    for (unsigned char& c : bits) c = byte();
    std::memcpy(&b, bits, 8);
    return b;
  }

  /// One bool per entry (true = keep), or none at all (an empty mask keeps everything).
  std::vector<char> mask(std::size_t n) {
    std::vector<char> m;
    if (!flag()) return m;
    m.resize(n);
    std::uint8_t bits = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (j % 8 == 0) bits = byte();
      m[j] = ((bits >> (j % 8)) & 1u) != 0 ? 0 : 1;  // mostly kept when the bytes run out
    }
    return m;
  }

  /// One of the four all-masked policies.
  attn::all_masked_policy policy() { return static_cast<attn::all_masked_policy>(byte() % 4); }
};

/// A view of a mask of chars as the span of bools that options take.
struct mask_view {
  std::unique_ptr<bool[]> b;  ///< the bools
  std::size_t n = 0;          ///< how many (0: no mask)
  /// Copies m (0 = masked out).
  explicit mask_view(const std::vector<char>& m) : b(std::make_unique<bool[]>(m.size() + 1)), n(m.size()) {
    for (std::size_t j = 0; j < n; ++j) b[j] = m[j] != 0;
  }
  /// The mask as options take it.
  [[nodiscard]] std::span<const bool> span() const { return {b.get(), n}; }
  /// Whether entry j is kept.
  [[nodiscard]] bool kept(std::size_t j) const { return n == 0 || b[j]; }
};

/// Output buffer full of sentinels (NaNs with payloads among them) that remembers its bytes.
template <class T>
struct guarded {
  std::vector<T> data;               ///< the buffer
  std::vector<unsigned char> bytes;  ///< its bytes as filled
  /// n sentinels.
  explicit guarded(std::size_t n) : data(n) {
    for (std::size_t i = 0; i < n; ++i)
      data[i] = i % 3 == 0 ? -std::numeric_limits<T>::quiet_NaN() : static_cast<T>(777 + i);
    bytes.resize(n * sizeof(T));
    if (n != 0) std::memcpy(bytes.data(), data.data(), bytes.size());
  }
  /// Whether every byte is as filled.
  [[nodiscard]] bool untouched() const {
    return data.empty() || std::memcmp(bytes.data(), data.data(), bytes.size()) == 0;
  }
};

/// The same bits, or both NaN (whose payloads may differ between two paths).
template <class T>
bool same_or_both_nan(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0 || (std::isnan(a) && std::isnan(b));
}

/// |β| finite as a T: otherwise attn throws domain_error.
template <class T>
bool beta_ok(double beta) {
  return std::isfinite(beta) && std::abs(beta) <= static_cast<double>(std::numeric_limits<T>::max());
}

/// β as the T attn computes with, or 0 where attn refuses it (not beta_ok).
template <class T>
T beta_as(double beta) {
  return beta_ok<T>(beta) ? static_cast<T>(beta) : T(0);
}

/// What a row is in exact arithmetic (docs/softmax.md): scores x in T, β as T.
enum class kind { finite, pos_inf, none_kept, nan };

/// The kind of a row of scores x under β (as T) and a mask, in exact arithmetic.
template <class T>
kind classify(std::span<const T> x, T beta, const mask_view& m) {
  bool any_finite = false, pos_inf = false;
  for (std::size_t j = 0; j < x.size(); ++j) {
    if (!m.kept(j)) continue;
    const T v = x[j];
    if (std::isnan(v) || (beta == T(0) && std::isinf(v))) return kind::nan;
    if (std::isinf(v) && ((v > 0) == (beta > 0))) pos_inf = true;  // β·x = +inf for an infinite x
    if (std::isfinite(v)) any_finite = true;
  }
  if (pos_inf) return kind::pos_inf;
  return any_finite ? kind::finite : kind::none_kept;
}

/// Long double log-weights ℓ_j = y_j − m − log Σ_k e^{y_k − m} over kept finite y (masked or
/// y = −inf: −inf). No underflow: the sum is at least 1.
inline std::vector<ld> reference_log_softmax(std::span<const ld> y, const mask_view& m) {
  const ld inf = std::numeric_limits<ld>::infinity();
  ld mx = -inf;
  for (std::size_t j = 0; j < y.size(); ++j)
    if (m.kept(j) && std::isfinite(y[j])) mx = std::max(mx, y[j]);
  ld s = 0;
  for (std::size_t j = 0; j < y.size(); ++j)
    if (m.kept(j) && std::isfinite(y[j])) s += std::exp(y[j] - mx);
  const ld ls = std::log(s);
  std::vector<ld> l(y.size(), -inf);
  for (std::size_t j = 0; j < y.size(); ++j)
    if (m.kept(j) && std::isfinite(y[j])) l[j] = (y[j] - mx) - ls;
  return l;
}

/// The bound of docs/errors.md on |log α̂_j − ℓ_j| for softmax over n entries whose largest
/// |β x| is Y: B = ε·(4.1·Y + (n + 9)/2).
template <class T>
ld softmax_log_bound(std::size_t n, ld Y) {
  const ld eps = std::numeric_limits<T>::epsilon();
  return eps * (ld(4.1) * Y + (static_cast<ld>(n) + 9) / 2);
}

/// Checks weights against the rules for their row kind, and, for a finite row, against the
/// reference log-weights ℓ within B: α_j e^{−B} − η ≤ α̂_j ≤ α_j e^{B} + η (η = 2 subnormal
/// steps), masked entries exactly 0, Σ α̂ within sum_bound of 1.
template <class T>
void check_weights(const char* what, std::span<const T> w, kind k, std::span<const T> x, T beta, const mask_view& m,
                   attn::all_masked_policy policy, std::span<const ld> ref, ld B, ld sum_bound) {
  const std::size_t n = w.size();
  const T inf = std::numeric_limits<T>::infinity();
  switch (k) {
    case kind::nan:
      for (std::size_t j = 0; j < n; ++j) ATTN_FUZZ_CHECK(std::isnan(w[j]), "%s: NaN row, weight %zu is %g", what, j, double(w[j]));
      return;
    case kind::pos_inf: {
      std::size_t count = 0;
      for (std::size_t j = 0; j < n; ++j) count += m.kept(j) && beta * x[j] == inf && std::isinf(x[j]) ? 1 : 0;
      for (std::size_t j = 0; j < n; ++j) {
        const bool share = m.kept(j) && beta * x[j] == inf && std::isinf(x[j]);
        ATTN_FUZZ_CHECK(w[j] == (share ? T(1) / static_cast<T>(count) : T(0)), "%s: +inf row, weight %zu is %g", what,
                        j, double(w[j]));
      }
      return;
    }
    case kind::none_kept:
      for (std::size_t j = 0; j < n; ++j) {
        switch (policy) {
          case attn::all_masked_policy::zeros: ATTN_FUZZ_CHECK(w[j] == T(0), "%s: zeros policy", what); break;
          case attn::all_masked_policy::uniform:
            ATTN_FUZZ_CHECK(w[j] == T(1) / static_cast<T>(n), "%s: uniform policy", what);
            break;
          case attn::all_masked_policy::nan: ATTN_FUZZ_CHECK(std::isnan(w[j]), "%s: nan policy", what); break;
          case attn::all_masked_policy::throw_error: ATTN_FUZZ_CHECK(false, "%s: should have thrown", what);
        }
      }
      return;
    case kind::finite: break;
  }
  const ld eta = 2 * static_cast<ld>(std::numeric_limits<T>::denorm_min());
  ld sum = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const T a = w[j];
    ATTN_FUZZ_CHECK(std::isfinite(a) && a >= T(0), "%s: weight %zu is %g on a finite row", what, j, double(a));
    if (!m.kept(j)) ATTN_FUZZ_CHECK(a == T(0), "%s: masked weight %zu is %g", what, j, double(a));
    sum += a;
    const ld lo = ref[j] == -std::numeric_limits<ld>::infinity() ? 0 : std::exp(ref[j] - B) - eta;
    const ld hi = ref[j] == -std::numeric_limits<ld>::infinity() ? 0 : std::exp(ref[j] + B) + eta;
    ATTN_FUZZ_CHECK(static_cast<ld>(a) >= lo && static_cast<ld>(a) <= hi,
                    "%s: weight %zu is %.17g, reference %.17Lg, bound B = %Lg", what, j, double(a), std::exp(ref[j]), B);
  }
  ATTN_FUZZ_CHECK(std::abs(sum - 1) <= sum_bound, "%s: weights sum to 1 + %Lg (bound %Lg)", what, sum - 1, sum_bound);
}


/// The inputs of one look back, read from the fuzzer's bytes: a score (dot, scaled_dot or, when
/// allowed, general), n notes (0 to 80: from 32 on, attend takes its one-pass path for dot and
/// scaled_dot), lengths 0 to 8, keys that are or are not the values, β, a mask, a policy, and
/// now and then one output or mask of the wrong size (`broken`, which must throw dimension_error).
template <class T>
struct look {
  int score = 0;  ///< 0 dot, 1 scaled_dot, 2 general
  std::size_t n = 0, dq = 0, dk = 0, dv = 0;
  bool separate = false;  ///< keys ≠ values
  std::vector<T> q, keys, values, W;
  double beta = 1;
  std::vector<char> mask;
  attn::all_masked_policy policy = attn::all_masked_policy::zeros;
  int broken = 0;  ///< 0: sizes fit; 1: one more score; 2: one more context number; 3: a longer mask

  /// Reads one look back; score_kinds = 2 leaves general out.
  look(reader& r, int score_kinds) {
    score = r.byte() % score_kinds;
    n = r.size_upto(80);
    dk = r.size_upto(8);
    dq = score == 2 ? r.size_upto(8) : dk;
    separate = r.flag();
    dv = separate ? r.size_upto(8) : dk;
    q.resize(dq);
    for (T& x : q) x = r.template number<T>();
    W.resize(dq * dk);
    for (T& x : W) x = r.template number<T>();
    keys.resize(n * dk);
    for (T& x : keys) x = r.template number<T>();
    values.resize(separate ? n * dv : 0);
    for (T& x : values) x = r.template number<T>();
    beta = r.beta();
    mask = r.mask(n);
    policy = r.policy();
    const std::uint8_t b = r.byte();
    broken = b < 0xF0 ? 0 : 1 + b % 3;
    if (broken == 3) mask.resize(n + 1, 1);
  }

  /// With ATTN_FUZZ_VERBOSE: prints the inputs (q, keys, values, W, then score, n, β, policy
  /// and broken).
  void dump() const {
    attn_fuzz::dump<T>("q", q);
    attn_fuzz::dump<T>("keys", keys);
    attn_fuzz::dump<T>("values", values);
    attn_fuzz::dump<T>("W", W);
    if (verbose) std::fprintf(stderr, "score %d, n %zu, beta %g, policy %d, broken %d\n", score, n, beta,
                              static_cast<int>(policy), broken);
  }

  /// The keys (the notes when keys are values), n × d_k.
  [[nodiscard]] attn::MatrixView<const T> key_view() const { return {keys.data(), n, dk}; }
  /// The values, n × d_v.
  [[nodiscard]] attn::MatrixView<const T> value_view() const {
    return separate ? attn::MatrixView<const T>(values.data(), n, dv) : key_view();
  }
  /// Value j, number i.
  [[nodiscard]] T value(std::size_t j, std::size_t i) const { return separate ? values[j * dv + i] : keys[j * dk + i]; }

  /// Calls f(score) with the attn score object.
  template <class F>
  void with_score(F&& f) const {
    if (score == 0) f(attn::dot);
    else if (score == 1) f(attn::scaled_dot);
    else f(attn::general<T>(attn::MatrixView<const T>(W.data(), dq, dk)));
  }

  /// 1/√d as scaled_dot forms it (in T), else 1.
  [[nodiscard]] T factor() const { return score == 1 ? attn::scaled_dot_score::scale<T>(dk) : T(1); }

  /// Score j in long double (d_q + d_h products: exact to far below T's rounding), and in
  /// `mag` the sum of the magnitudes of its terms, Σ|q_a W_ab k_b| or Σ|q_i k_i| (times 1/√d).
  /// `under` bounds what products that underflow T lose: η = the smallest subnormal per
  /// product, and general's Wᵀq is multiplied by the note afterwards: η·(d_q·Σ_b|k_b| + d_q + d_h + 2).
  [[nodiscard]] ld exact_score(std::size_t j, ld& mag, ld& under) const {
    ld s = 0;
    mag = 0;
    const T* k = keys.data() + j * dk;
    ld knorm = 0;
    for (std::size_t c = 0; c < dk; ++c) knorm += std::abs(static_cast<ld>(k[c]));
    under = static_cast<ld>(std::numeric_limits<T>::denorm_min()) *
            (static_cast<ld>(score == 2 ? dq : 0) * knorm + static_cast<ld>(dq + dk + 2));
    if (score == 2) {
      for (std::size_t a = 0; a < dq; ++a)
        for (std::size_t c = 0; c < dk; ++c) {
          const ld t = static_cast<ld>(q[a]) * static_cast<ld>(W[a * dk + c]) * static_cast<ld>(k[c]);
          s += t;
          mag += std::abs(t);
        }
      return s;
    }
    for (std::size_t i = 0; i < dk; ++i) {
      const ld t = static_cast<ld>(q[i]) * static_cast<ld>(k[i]);
      s += t;
      mag += std::abs(t);
    }
    // scaled_dot on notes of length 0: every score 0 (docs/attention.md), not 0·(1/√0)
    const ld f = score == 1 && dk != 0 ? 1 / std::sqrt(static_cast<ld>(dk)) : 1;
    mag *= f;
    return s * f;
  }

  /// Products per score that round: d (dot), d + 1 (scaled_dot), d_q + d_h (general), plus 2.
  [[nodiscard]] std::size_t score_terms() const { return (score == 2 ? dq + dk : dk + (score == 1 ? 1 : 0)) + 2; }
};

/// The libFuzzer entry point of a target whose `run<T>(reader&)` checks one input: the first
/// byte picks float or double.
#define ATTN_FUZZ_FLOAT_OR_DOUBLE(run)                                                \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
    attn_fuzz::reader r(data, size);                                                  \
    if (r.flag())                                                                     \
      run<float>(r);                                                                  \
    else                                                                              \
      run<double>(r);                                                                 \
    return 0;                                                                         \
  }

/// Which exception a call threw: 0 none, 1 dimension_error, 2 domain_error.
template <class F>
int thrown(F&& f) {
  try {
    f();
  } catch (const attn::dimension_error&) {
    return 1;
  } catch (const attn::domain_error&) {
    return 2;
  } catch (const attn::forward_mismatch_error&) {
    return 3;
  }
  return 0;
}

}  // namespace attn_fuzz
