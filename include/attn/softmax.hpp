#pragma once
/// \file attn/softmax.hpp
/// The numerically stable softmax family over any vector view, with sharpness β, masks and
/// an explicit policy for rows where nothing is left to attend to.
///
///   softmax(x)_j     = exp(β x_j − m) / Σ_k exp(β x_k − m),  m = max_k β x_k
///   log_softmax(x)_j = β x_j − m − log1p(Σ_{k ≠ argmax} exp(β x_k − m))
///   logsumexp(x)     = m + log1p(Σ_{k ≠ argmax} exp(β x_k − m))
///
/// Rules (docs/softmax.md): a masked entry (mask[j] == false) gets weight exactly 0 and
/// log-weight −inf; a NaN in a kept entry makes the whole row NaN; if some kept entries are
/// +inf they share the weight equally and every other entry gets 0; a row in which every
/// entry is masked or −inf follows `options::if_all_masked`; an empty row throws
/// dimension_error, a β that is not finite as a T throws domain_error. Outputs are untouched
/// on a throw. β·x is taken as in exact arithmetic: where it overflows T for a finite x, the
/// row is computed as β·(x − x_p) for the kept x_p of largest β·x_p (so finite input never
/// gives the +inf or all-masked answers).

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "attn/detail/exp.hpp"
#include "attn/detail/math.hpp"
#include "attn/detail/reduce.hpp"
#include "attn/detail/softmax_row.hpp"
#include "attn/error.hpp"
#include "attn/extent.hpp"
#include "attn/mask.hpp"
#include "attn/matrix.hpp"
#include "attn/vector.hpp"

namespace attn {

/// What a row gets when every entry is masked out (or −inf), so no weight can be formed.
enum class all_masked_policy {
  zeros,       ///< every weight 0, the context 0 (PyTorch SDPA and JAX); log-weights −inf
  uniform,     ///< every weight 1/n, as if nothing were masked
  nan,         ///< every weight NaN
  throw_error  ///< throw attn::domain_error
};

/// Options shared by softmax and attention: sharpness β ("how sure"; temperature is 1/β),
/// masks (true or nonzero = may attend: attn/mask.hpp) and the all-masked policy. Over T queries
/// a key may be attended to only if every mask given allows it; a function of one row (softmax,
/// attend, backward) is the case T = 1: `causal` changes nothing, a row mask has one row.
struct options {
  double beta = 1.0;                                           ///< scores are multiplied by β
  mask_view mask{};                                            ///< n entries, every row; empty: none
  all_masked_policy if_all_masked = all_masked_policy::zeros;  ///< see all_masked_policy
  mask_matrix_view row_mask{};  ///< T × n: row t for query t; empty: none
  bool causal = false;          ///< query t sees keys 0 … t + n − T
};

namespace detail {

/// opt with its key mask borrowed, not copied: a mask made from a std::vector<bool> owns its
/// bytes, and a copy of the options would copy them (an allocation on every call that makes
/// one). Valid while opt is. What the calls that adjust the options use (a sentence's, a row's).
constexpr options borrowing(const options& opt) {
  options o;
  o.beta = opt.beta;
  o.mask = opt.mask.subview(0, opt.mask.size());
  o.if_all_masked = opt.if_all_masked;
  o.row_mask = opt.row_mask;
  o.causal = opt.causal;
  return o;
}

/// Whether β is finite as a T (detail::finite_as, on the bits: it holds under -ffast-math).
template <class T>
[[nodiscard]] constexpr bool beta_fits(double beta) noexcept {
  return finite_as<T>(beta);
}

/// Throws `domain_error` "<where>: sharpness beta must be finite" (+ " as a float"): the
/// checks' throw, out of line so that the checks themselves inline to a compare.
[[noreturn]] inline void throw_row_mask_one_row(const char* where) {
  attn::detail::raise<dimension_error>(
      std::string(where) +
      ": a row mask is for many queries (align and the matrix functions); give "
      "one row's mask as options::mask");
}

[[noreturn]] inline void throw_beta_not_finite(const char* where, bool as_float) {
  raise<domain_error>(std::string(where) + ": sharpness beta must be finite" +
                      (as_float ? " as a float" : ""));
}

/// Throws domain_error unless β is finite as a T (a double β beyond float's range would be
/// ±inf in float, and 0·inf is NaN).
template <class T = double>
constexpr void check_beta(const char* where, const options& opt) {
  if (!beta_fits<T>(opt.beta))
    throw_beta_not_finite(where, narrower_than_double<T>);
}

/// How a row's checks name its buffers: softmax's input and output, or attend's notes and weights.
struct row_names {
  const char* empty = "the input";        ///< what is empty when n is 0
  const char* count = "input size";       ///< what n counts
  const char* output = "output size";     ///< the output's size
};

/// attend's names: "the notes matrix" is empty, "weights size is 5 but number of notes is 4".
inline constexpr row_names notes_row{"the notes matrix", "number of notes", "weights size"};

/// Throws unless the row is non-empty, the output fits, the mask fits and β is finite as a T
/// (check_beta).
template <class T = double>
constexpr void check_softmax_args(const char* where, std::size_t n, std::size_t out_n,
                                  const options& opt, const row_names& names = {}) {
  check_nonempty(where, names.empty, n);
  check_equal(where, names.output, out_n, names.count, n);
  if (!opt.mask.empty()) check_equal(where, "mask size", opt.mask.size(), names.count, n);
  if (!opt.row_mask.empty()) throw_row_mask_one_row(where);
  check_beta<T>(where, opt);
}

/// Throws dimension_error unless opt's masks fit T queries over n keys: the key mask n entries,
/// the row mask T × n.
constexpr void check_masks(const char* where, const options& opt, std::size_t tq, std::size_t n) {
  if (!opt.mask.empty()) check_equal(where, "mask size", opt.mask.size(), "number of notes", n);
  if (!opt.row_mask.empty()) {
    check_equal(where, "rows of the row mask", opt.row_mask.rows(), "number of queries", tq);
    check_equal(where, "columns of the row mask", opt.row_mask.cols(), "number of notes", n);
  }
}

/// The keys query t of tq may attend to under `causal`: 0 … t + n − tq, so this many (0 when
/// t + n < tq: that row has nothing to attend to).
[[nodiscard]] constexpr std::size_t causal_keys(std::size_t t, std::size_t tq,
                                                std::size_t n) noexcept {
  return t + n + 1 > tq ? (t + n + 1 - tq < n ? t + n + 1 - tq : n) : 0;
}

/// Row t's combined mask entries (key mask, row mask, causal), in storage of its own: inline up
/// to 1024 entries, else on the heap.
class row_mask_buffer {
public:
  static constexpr std::size_t inline_entries = 1024;

private:
  std::array<mask_byte, inline_entries> inline_{};
  heap_array<mask_byte> heap_{};

public:
  constexpr explicit row_mask_buffer(std::size_t n) {
    if (n > inline_entries) heap_ = heap_array<mask_byte>(n);
  }
  [[nodiscard]] constexpr mask_byte* data() noexcept {
    return heap_.empty() ? inline_.data() : heap_.data();
  }
};

/// The options of one row of many queries: opt's β and policy, and the mask of row t, which is
/// opt.mask itself when nothing else masks, else the entries every mask given allows. Sizes must
/// be checked (check_masks).
class row_options {
  const options& opt_;
  std::size_t tq_, n_;
  bool combine_;
  row_mask_buffer buffer_;
  options row_{};

public:
  constexpr row_options(const options& opt, std::size_t tq, std::size_t n)
      : opt_(opt), tq_(tq), n_(n), combine_(!opt.row_mask.empty() || opt.causal),
        buffer_(combine_ ? n : 0) {
    row_.beta = opt.beta;
    row_.if_all_masked = opt.if_all_masked;
    if (!combine_) row_.mask = opt.mask.subview(0, opt.mask.size());  // borrowed: no copy
  }
  row_options(const row_options&) = delete;
  row_options& operator=(const row_options&) = delete;

  /// Whether any row differs from the others (a row mask or causal).
  [[nodiscard]] constexpr bool per_row() const noexcept { return combine_; }

  /// The options of row t.
  [[nodiscard]] constexpr const options& operator()(std::size_t t) {
    if (!combine_) return row_;
    mask_byte* m = buffer_.data();
    const std::size_t limit = opt_.causal ? causal_keys(t, tq_, n_) : n_;
    for (std::size_t j = 0; j < n_; ++j)
      m[j] = j < limit && (opt_.mask.empty() || opt_.mask[j]) &&
                     (opt_.row_mask.empty() || opt_.row_mask(t, j))
                 ? 1
                 : 0;
    row_.mask = mask_view(static_cast<const mask_byte*>(m), n_);
    return row_;
  }
};

/// What one read-only pass over β·x tells: its max over kept entries and how many entries are
/// kept. A kept NaN makes the max NaN or leaves it out (classify and the sum find it either way).
template <class T>
struct row_scan {
  T max;
  std::size_t kept;
};

template <class T>
constexpr row_scan<T> scan_row(const T* x, std::size_t n, T beta, const mask_byte* mask) {
  if (mask == nullptr) return {scaled_max_of(x, n, beta), n};
  std::size_t kept = 0;
  const T m = masked_scaled_max_of(x, n, beta, mask, kept);
  return {m, kept};
}

template <class T>
constexpr bool kept_nan(const T* x, std::size_t n, const mask_byte* mask, T beta) {
  for (std::size_t j = 0; j < n; ++j)  // β·x_j is NaN for a NaN x_j, and for β = 0, x_j = ±inf
    if ((mask == nullptr || mask[j]) && !(beta * x[j] == beta * x[j])) return true;
  return false;
}

/// overflow: β·x_j is ±inf for some finite x_j (the product overflowed T) and no kept x_j that
/// is itself infinite has β·x_j = +inf; in exact arithmetic the row is finite.
enum class row_kind { finite, pos_inf, none_kept, nan, overflow };

/// Whether the weights of a row of this kind move with the scores (derivatives flow).
constexpr bool weights_move(row_kind k) noexcept {
  return k == row_kind::finite || k == row_kind::overflow;
}

/// x is neither ±inf nor NaN (x − x is 0 exactly then; constexpr, unlike std::isfinite).
template <class T>
constexpr bool is_finite(T x) noexcept {
  return x - x == T(0);
}

/// β·x_j = +inf because x_j itself is infinite (not because the product overflowed).
template <class T>
constexpr bool infinite_score(T x, T beta) noexcept {
  return beta * x == std::numeric_limits<T>::infinity() && !is_finite(x);
}

template <class T>
constexpr row_kind classify(const T* x, std::size_t n, const row_scan<T>& s, const mask_byte* mask,
                            T beta) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  if (s.kept != 0 && s.max > -inf && s.max < inf) return row_kind::finite;  // NaN flows through
  if (kept_nan(x, n, mask, beta)) return row_kind::nan;
  // Rare: the max is ±inf or nothing is kept. Tell infinite scores from products that overflowed.
  bool overflowed = false;
  for (std::size_t j = 0; j < n; ++j) {
    if (mask != nullptr && !mask[j]) continue;
    if (infinite_score(x[j], beta)) return row_kind::pos_inf;
    overflowed = overflowed || (is_finite(x[j]) && !is_finite(beta * x[j]));
  }
  if (overflowed) return row_kind::overflow;
  return s.max == inf ? row_kind::pos_inf : row_kind::none_kept;
}

/// For an overflow row: the kept finite x_p with the largest β·x_p (the largest x for β > 0,
/// the smallest for β < 0; β ≠ 0, or nothing would overflow).
template <class T>
constexpr T overflow_pivot(const T* x, std::size_t n, T beta, const mask_byte* mask) noexcept {
  T p = 0;
  bool found = false;
  for (std::size_t j = 0; j < n; ++j) {
    if ((mask != nullptr && !mask[j]) || !is_finite(x[j])) continue;
    if (!found || (beta > T(0) ? x[j] > p : x[j] < p)) p = x[j];
    found = true;
  }
  return p;
}

/// β·(x_j − x_p), shifted before it is scaled so that it cannot overflow upwards: ≤ 0 for a
/// kept finite x_j (0 at the pivot), −inf for a masked or infinite x_j (whose β·x_j is −inf in
/// an overflow row) and where the difference itself overflows (e^−huge is 0 anyway).
template <class T>
constexpr T shifted_score(T xj, T p, T beta, bool kept) noexcept {
  return kept && is_finite(xj) ? beta * (xj - p) : -std::numeric_limits<T>::infinity();
}

[[noreturn]] inline void throw_all_masked(const char* where) {
  raise<domain_error>(std::string(where) +
                      ": every entry is masked out or -inf and the policy is throw_error");
}

/// softmax of β·x into out (out may alias x), by the rules of the file comment. Validates
/// before writing anything.
template <class T>
constexpr void softmax_rows(const char* where, const T* x, T* out, std::size_t n, std::size_t out_n,
                            const options& opt) {
  check_softmax_args<T>(where, n, out_n, opt);
  const T beta = static_cast<T>(opt.beta);
  const mask_bytes mask_storage(opt.mask);
  const mask_byte* mask = mask_storage.data();
  // without a mask the pass that finds the max also finds the least β·x: when it lies within
  // exp's fast range of the max, no exp needs its range checked
  bool in_range = false;
  row_scan<T> s{};
  if (mask == nullptr) {
    const min_max<T> mm = scaled_min_max_of(x, n, beta);
    s = {mm.max, n};
    in_range = exps_in_range(mm.min, mm.max);
  } else {
    s = scan_row(x, n, beta, mask);
  }
  switch (classify(x, n, s, mask, beta)) {
  case row_kind::finite:
    softmax_finite_row(x, out, n, beta, s.max, mask, in_range);
    return;
  case row_kind::nan:
    fill(out, n, std::numeric_limits<T>::quiet_NaN());
    return;
  case row_kind::pos_inf: {  // the +inf entries share the weight: the limit of softmax
    std::size_t count = 0;
    for (std::size_t j = 0; j < n; ++j)
      count += ((mask == nullptr || mask[j]) && infinite_score(x[j], beta)) ? 1u : 0u;
    const T share = T(1) / static_cast<T>(count);
    for (std::size_t j = 0; j < n; ++j)
      out[j] = ((mask == nullptr || mask[j]) && infinite_score(x[j], beta)) ? share : T(0);
    return;
  }
  case row_kind::overflow: {  // β·x overflowed T for finite x: shift by x_p, then scale
    const T p = overflow_pivot(x, n, beta, mask);
    sum_t<T> sum = 0;
    for (std::size_t j = 0; j < n; ++j) {
      out[j] = attn::detail::exp(shifted_score(x[j], p, beta, mask == nullptr || mask[j]));
      sum += static_cast<sum_t<T>>(out[j]);
    }
    scale(out, n, static_cast<T>(sum_t<T>(1) / sum));  // sum ≥ 1: the pivot's e^0
    return;
  }
  case row_kind::none_kept:
    switch (opt.if_all_masked) {
    case all_masked_policy::zeros:
      fill(out, n, T(0));
      return;
    case all_masked_policy::uniform:
      fill(out, n, T(1) / static_cast<T>(n));
      return;
    case all_masked_policy::nan:
      fill(out, n, std::numeric_limits<T>::quiet_NaN());
      return;
    case all_masked_policy::throw_error:
      throw_all_masked(where);
    }
  }
}

/// softmax of β·x into out (out may alias x). A short row with every argument valid and no
/// mask first tries softmax_short_row (its exps all in range: the same bits, in registers);
/// everything else, and every check and throw, is softmax_rows'.
template <class T>
ATTN_ALWAYS_INLINE constexpr void softmax_row(const char* where, const T* x, T* out, std::size_t n,
                                              std::size_t out_n, const options& opt) {
  if (out_n == n && opt.mask.empty() && opt.row_mask.empty() && beta_fits<T>(opt.beta) &&
      softmax_short_row(x, out, n, static_cast<T>(opt.beta)))
    return;
  softmax_rows(where, x, out, n, out_n, opt);
}

/// Refuses (overlap_error, naming both) an output that overlaps an earlier output, an input, the
/// mask or the row mask: the check of every call that writes into caller buffers.
template <class T>
constexpr void check_buffers_apart(const char* where, std::span<const named_region<T>> outputs,
                                   std::span<const named_region<T>> inputs, const options& opt) {
  check_outputs_apart(where, outputs, inputs);
  for (const named_region<T>& o : outputs) {
    if (overlaps(o.numbers, region_of(opt.mask))) throw_overlap(where, o.name, "mask");
    if (overlaps(o.numbers, region_of(opt.row_mask))) throw_overlap(where, o.name, "row mask");
  }
}

/// check_buffers_apart of lists written in braces: `{{"scores", region_of(s)}, …}`. At run time
/// the common answer comes first: whether any output's span of memory meets an earlier output's,
/// an input's or a mask's, every pair compared without a branch (independent compares beside the
/// call's own work: a small attend would otherwise pay for the check in its latency); only spans
/// that meet go on to the exact check, which looks at the rows and names both buffers.
template <class T, std::size_t NO, std::size_t NI>
ATTN_ALWAYS_INLINE constexpr void
check_buffers_apart(const char* where, const named_region<T> (&outputs)[NO],
                    const named_region<T> (&inputs)[NI], const options& opt) {
  if (!std::is_constant_evaluated()) {
    byte_span out[NO], in[NI + 2];
    for (std::size_t k = 0; k < NO; ++k) out[k] = bytes_of(outputs[k].numbers);
    for (std::size_t k = 0; k < NI; ++k) in[k] = bytes_of(inputs[k].numbers);
    in[NI] = bytes_of(region_of(opt.mask));
    in[NI + 1] = bytes_of(region_of(opt.row_mask));
    unsigned meet = 0;
    for (std::size_t k = 0; k < NO; ++k) {
      for (std::size_t p = 0; p < k; ++p) meet |= spans_meet(out[k], out[p]);
      for (std::size_t i = 0; i < NI + 2; ++i) meet |= spans_meet(out[k], in[i]);
    }
    if (!meet) return;
  }
  check_buffers_apart<T>(where, std::span<const named_region<T>>(outputs),
                         std::span<const named_region<T>>(inputs), opt);
}

/// Refuses (overlap_error) an output `out` of a softmax-family call that overlaps its input
/// `in` — unless it is `in` exactly and the call works in place (`in_place`) — or a mask.
template <class T>
ATTN_NOINLINE constexpr void
check_output_apart_exact(const char* where, const char* out_name, const region<T>& out,
                         const char* in_name, const region<T>& in, bool in_place,
                         const options& opt) {
  if (!(in_place && same_numbers(out, in)) && overlaps(out, in))
    throw_overlap(where, out_name, in_name);
  const named_region<T> outputs[1] = {{out_name, out}};
  check_buffers_apart<T>(where, std::span<const named_region<T>>(outputs), {}, opt);
}

/// As check_buffers_apart: inline the common answers (out is the input itself, in place, or the
/// spans meet nowhere), out of line the rest (check_output_apart_exact). The masks' spans are
/// only looked at when there is a mask: the unmasked call, the common one, compares two spans.
template <class T>
ATTN_ALWAYS_INLINE constexpr void
check_output_apart(const char* where, const char* out_name, region<T> out, const char* in_name,
                   region<T> in, bool in_place, const options& opt) {
  if (!std::is_constant_evaluated()) {
    const byte_span o = bytes_of(out);
    unsigned meet = spans_meet(o, bytes_of(in)) & static_cast<unsigned>(!(in_place && same_numbers(out, in)));
    if (!opt.mask.empty() || !opt.row_mask.empty())
      meet |= spans_meet(o, bytes_of(region_of(opt.mask))) |
              spans_meet(o, bytes_of(region_of(opt.row_mask)));
    if (meet == 0) [[likely]]
      return;
  }
  check_output_apart_exact(where, out_name, out, in_name, in, in_place, opt);
}

/// check_output_apart, then softmax_rows: softmax_into's every call but the common one.
template <class T>
constexpr void checked_softmax_rows(const char* where, std::span<const T> x, std::span<T> out,
                                    const char* out_name, const options& opt) {
  check_output_apart(where, out_name, region_of(out), "input", region_of(x), true, opt);
  softmax_rows(where, x.data(), out.data(), x.size(), out.size(), opt);
}

/// softmax of β·x into a caller's out, as the public calls take it: an unmasked short row whose
/// out is x itself or apart from it goes to softmax_short_row with nothing else before it; any
/// other call is checked (check_output_apart) and goes to softmax_rows.
template <class T>
ATTN_ALWAYS_INLINE constexpr void softmax_into(const char* where, std::span<const T> x,
                                               std::span<T> out, const char* out_name,
                                               const options& opt) {
  if (!std::is_constant_evaluated() && out.size() == x.size() && opt.mask.empty() &&
      opt.row_mask.empty() && beta_fits<T>(opt.beta) &&
      (out.data() == x.data() || !spans_meet(bytes_of(region_of(out)), bytes_of(region_of(x)))) &&
      softmax_short_row(x.data(), out.data(), x.size(), static_cast<T>(opt.beta)))
    return;
  checked_softmax_rows(where, x, out, out_name, opt);
}

/// Σ_{kept k ≠ argmax} exp(β x_k − m): the argmax term (exactly 1) is left out so that
/// log1p keeps tiny probabilities. Ties at the max count 1 each beyond the first.
template <class T>
constexpr T sum_below_max(const T* x, std::size_t n, T beta, T m, const mask_byte* mask) {
  T acc = 0;
  std::size_t at_max = 0;
  for (std::size_t j = 0; j < n; ++j) {
    if (mask != nullptr && !mask[j]) continue;
    const T y = rounded_product(beta, x[j]);  // y − m not fused: see rounded_product
    if (y < m)
      acc += attn::detail::exp(y - m);
    else if (y == m)
      ++at_max;
    else
      return y;  // a kept NaN that the max left out (one with its sign bit set): the row is NaN
  }
  return acc + static_cast<T>(at_max - 1);
}

}  // namespace detail

/// Writes softmax(β·x) into `out` (same size; may be `x` itself). See the file comment for
/// masks, NaN, ±inf and the all-masked policy. Throws dimension_error on empty input or a
/// size mismatch, domain_error on non-finite β or (policy throw_error) an all-masked row.
template <vector_like In, mutable_vector_like Out>
  requires std::same_as<scalar_of<In>, scalar_of<Out>> &&
      compatible_extents<extent_of<In>, extent_of<Out>>
constexpr void softmax(const In& x, Out&& out, const options& opt = {}) {
  const auto xs = as_span(x);
  const auto os = as_mutable_span(out);
  using T = scalar_of<In>;
  detail::softmax_into("attn::softmax", std::span<const T>(xs), std::span<T>(os), "output", opt);
}

/// Returns softmax(β·x) as a new Vector of the same extent.
template <vector_like In>
[[nodiscard]] constexpr Vector<scalar_of<In>, extent_of<In>> softmax(const In& x,
                                                                     const options& opt = {}) {
  Vector<scalar_of<In>, extent_of<In>> out(as_span(x));
  detail::softmax_row("attn::softmax", out.data(), out.data(), out.size(), out.size(), opt);
  return out;
}

/// Replaces x by softmax(β·x).
template <mutable_vector_like X>
constexpr void softmax_inplace(X&& x, const options& opt = {}) {
  const auto xs = as_mutable_span(x);
  using T = scalar_of<X>;
  detail::softmax_into("attn::softmax_inplace", std::span<const T>(xs), std::span<T>(xs), "input",
                       opt);
}

/// Writes log softmax(β·x) into `out`, accurate for tiny probabilities (log1p of the sum of
/// the non-max terms). Masked entries get −inf; an all-masked row gets −inf (zeros),
/// −log n (uniform), NaN (nan) or throws (throw_error). Errors as for softmax.
template <vector_like In, mutable_vector_like Out>
  requires std::same_as<scalar_of<In>, scalar_of<Out>> &&
      compatible_extents<extent_of<In>, extent_of<Out>>
constexpr void log_softmax(const In& x, Out&& out, const options& opt = {}) {
  using T = scalar_of<In>;
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  const auto xs = as_span(x);
  const auto os = as_mutable_span(out);
  const char* where = "attn::log_softmax";
  const std::size_t n = xs.size();
  detail::check_output_apart(where, "output", detail::region_of(os), "input", detail::region_of(xs),
                             true, opt);
  detail::check_softmax_args<T>(where, n, os.size(), opt);
  const T beta = static_cast<T>(opt.beta);
  const detail::mask_bytes mask_storage(opt.mask);
  const detail::mask_byte* mask = mask_storage.data();
  const auto s = detail::scan_row(xs.data(), n, beta, mask);
  const T* in = xs.data();
  T* o = os.data();
  switch (detail::classify(in, n, s, mask, beta)) {
  case detail::row_kind::finite: {
    const T lse = detail::log1p(detail::sum_below_max(in, n, beta, s.max, mask));
    if (!(lse == lse)) {  // a kept NaN
      detail::fill(o, n, nan);
      return;
    }
    // A kept finite x_j whose β·x_j overflows T (to −inf: the max is finite) still has the
    // log-weight β x_j − m − lse of exact arithmetic, finite where that is within T's range:
    // β·(x_j − x_p) from the entry x_p of the max, as the overflow rows take it. Only |β| > 1
    // overflows a finite x; x_p is found before anything is written (out may be x itself).
    // With |β| ≤ 1, β·x_j is exact-range and a −inf from β x_j − m is the rounded exact value.
    const bool may_overflow = beta > T(1) || beta < T(-1);
    const T p = may_overflow ? detail::overflow_pivot(in, n, beta, mask) : T(0);
    for (std::size_t j = 0; j < n; ++j) {
      const bool kept = mask == nullptr || mask[j];
      T t = kept ? detail::scaled_minus(beta, in[j], s.max) : -inf;
      if (may_overflow && kept && t == -inf && detail::is_finite(in[j]))
        t = detail::shifted_score(in[j], p, beta, true);
      o[j] = t - lse;
    }
    return;
  }
  case detail::row_kind::nan:
    detail::fill(o, n, nan);
    return;
  case detail::row_kind::pos_inf: {
    std::size_t count = 0;
    for (std::size_t j = 0; j < n; ++j)
      count += ((mask == nullptr || mask[j]) && detail::infinite_score(in[j], beta)) ? 1u : 0u;
    const T share = -detail::log(static_cast<T>(count));
    for (std::size_t j = 0; j < n; ++j)
      o[j] = ((mask == nullptr || mask[j]) && detail::infinite_score(in[j], beta)) ? share : -inf;
    return;
  }
  case detail::row_kind::overflow: {  // β·x overflowed T for finite x: shift, then scale
    const T p = detail::overflow_pivot(in, n, beta, mask);
    T acc = 0;
    std::size_t at_max = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const T y = detail::shifted_score(in[j], p, beta, mask == nullptr || mask[j]);
      if (y < T(0))
        acc += attn::detail::exp(y);
      else
        ++at_max;  // the pivot, and its ties
    }
    const T lse = detail::log1p(acc + static_cast<T>(at_max - 1));
    for (std::size_t j = 0; j < n; ++j)
      o[j] = detail::shifted_score(in[j], p, beta, mask == nullptr || mask[j]) - lse;
    return;
  }
  case detail::row_kind::none_kept:
    switch (opt.if_all_masked) {
    case all_masked_policy::zeros:
      detail::fill(o, n, -inf);
      return;
    case all_masked_policy::uniform:
      detail::fill(o, n, -detail::log(static_cast<T>(n)));
      return;
    case all_masked_policy::nan:
      detail::fill(o, n, nan);
      return;
    case all_masked_policy::throw_error:
      detail::throw_all_masked(where);
    }
  }
}

/// Replaces x by log softmax(β·x).
template <mutable_vector_like X>
constexpr void log_softmax_inplace(X&& x, const options& opt = {}) {
  log_softmax(as_span(x), as_mutable_span(x), opt);
}

/// Returns log Σ_j exp(β x_j) over the kept entries without overflow: m + log1p(Σ_{j≠argmax}
/// exp(β x_j − m)). All masked (or all −inf): −inf, except NaN under the nan policy and a
/// throw under throw_error. A kept NaN gives NaN; a kept +inf gives +inf.
template <vector_like In>
[[nodiscard]] constexpr scalar_of<In> logsumexp(const In& x, const options& opt = {}) {
  using T = scalar_of<In>;
  const auto xs = as_span(x);
  const char* where = "attn::logsumexp";
  detail::check_softmax_args<T>(where, xs.size(), xs.size(), opt);
  const T beta = static_cast<T>(opt.beta);
  const detail::mask_bytes mask_storage(opt.mask);
  const detail::mask_byte* mask = mask_storage.data();
  const auto s = detail::scan_row(xs.data(), xs.size(), beta, mask);
  switch (detail::classify(xs.data(), xs.size(), s, mask, beta)) {
  case detail::row_kind::finite:
    return s.max + detail::log1p(detail::sum_below_max(xs.data(), xs.size(), beta, s.max, mask));
  case detail::row_kind::nan:
    return std::numeric_limits<T>::quiet_NaN();
  case detail::row_kind::pos_inf:
    return std::numeric_limits<T>::infinity();
  case detail::row_kind::overflow:  // β·x_p overflowed, and so does the log of the sum: ±inf
    return beta * detail::overflow_pivot(xs.data(), xs.size(), beta, mask);
  case detail::row_kind::none_kept:
    break;
  }
  if (opt.if_all_masked == all_masked_policy::nan) return std::numeric_limits<T>::quiet_NaN();
  if (opt.if_all_masked == all_masked_policy::throw_error) detail::throw_all_masked(where);
  return -std::numeric_limits<T>::infinity();
}

}  // namespace attn

// ---------------------------------------------------------------------------------------------
// The softmax Jacobian and its vector-Jacobian product (docs/derivatives.md).
// ---------------------------------------------------------------------------------------------
namespace attn {
namespace detail {

/// Which rule a row follows (softmax's classification of β·x over the kept entries).
template <class T>
constexpr row_kind softmax_row_kind(const T* x, std::size_t n, const options& opt) {
  const T beta = static_cast<T>(opt.beta);
  const mask_bytes mask_storage(opt.mask);
  const mask_byte* mask = mask_storage.data();
  return classify(x, n, scan_row(x, n, beta, mask), mask, beta);
}

/// The index of the weight above 1/2, or n if there is none. For that entry 1 − α_m and
/// u_m − ⟨u, α⟩ are formed from the other weights (Σ_{k≠m} α_k …), which keeps their relative
/// accuracy when α_m is close to 1; for every other entry the direct form is already accurate.
template <class T>
constexpr std::size_t dominant_weight(const T* alpha, std::size_t n) noexcept {
  std::size_t above = 0;  // counted without a branch (the loop vectorizes), then found
  for (std::size_t j = 0; j < n; ++j) above += alpha[j] > T(0.5);
  if (above == 0) return n;
  for (std::size_t j = 0; j < n; ++j)
    if (alpha[j] > T(0.5)) return j;
  return n;
}

/// What the softmax-backward step needs of a whole row before any entry: ū = Σ_k α_k u_k over
/// the weights that are not 0, the weight above 1/2 (`dominant`, n if none) and for it
/// u_m − ū = Σ_{k≠m} α_k (u_m − u_k), which does not cancel.
template <class T>
struct softmax_backward_terms {
  T mean = 0;
  std::size_t dominant = 0;
  T dominant_minus_mean = 0;
};

/// softmax_backward_terms of the n weights α and u_k = u(k) (read any number of times).
template <class T, class U>
constexpr softmax_backward_terms<T> softmax_backward_terms_of(const T* alpha, U&& u,
                                                              std::size_t n) {
  T mean = 0;  // (locals, not the result's members: those live in memory the weights might alias)
  for (std::size_t k = 0; k < n; ++k)
    if (alpha[k] != T(0)) mean += alpha[k] * u(k);
  const std::size_t m = dominant_weight(alpha, n);
  T dm = 0;
  if (m < n) {
    const T u_m = u(m);
    for (std::size_t k = 0; k < n; ++k)
      if (k != m && alpha[k] != T(0)) dm += alpha[k] * (u_m - u(k));
  }
  return {mean, m, dm};
}

/// The softmax-backward step: ∂L/∂x from u = ∂L/∂α for α = softmax(β·x), out_j = β α_j (u_j − ū)
/// (the dominant weight's from Σ_{k≠m} α_k (u_m − u_k)); 0 for a weight of 0. A row whose
/// weights do not move with x (flows false: all masked, a kept +inf, the nan policy) gives 0,
/// and NaN where α_j is NaN. out_j is written after α_j and u(j) are read for the last time, so
/// out may be α's storage or u's.
template <class T, class U>
constexpr void softmax_backward_row(const T* alpha, U&& u, std::size_t n, T beta, bool flows,
                                    T* out) {
  if (!flows) {
    for (std::size_t j = 0; j < n; ++j) out[j] = alpha[j] == alpha[j] ? T(0) : alpha[j];
    return;
  }
  const softmax_backward_terms<T> t = softmax_backward_terms_of(alpha, u, n);
  for (std::size_t j = 0; j < n; ++j)
    out[j] = softmax_backward_entry(alpha[j],
                                    j == t.dominant ? t.dominant_minus_mean : u(j) - t.mean, beta);
}

}  // namespace detail

/// Writes the softmax Jacobian ∂α_i/∂x_j = β α_i (δ_ij − α_j), i.e. β (diag α − α αᵀ) with
/// α = softmax(β·x, mask), into the n×n `out` (which must not alias x). Masked entries
/// (α = 0) get zero rows and columns. A row whose weights do not move with x — every entry
/// masked or −inf (policies zeros and uniform), or some kept entry +inf — gets the zero
/// matrix; a NaN row (or the nan policy) gets NaN. Errors as for softmax, and
/// dimension_error unless out is n×n; nothing is written on a throw.
template <vector_like In, mutable_matrix_like Out>
  requires std::same_as<scalar_of<In>, matrix_scalar_of<Out>> &&
      compatible_extents<extent_of<In>, rows_of<Out>> &&
      compatible_extents<extent_of<In>, cols_of<Out>>
void softmax_jacobian(const In& x, Out&& out, const options& opt = {}) {
  using T = scalar_of<In>;
  const char* where = "attn::softmax_jacobian";
  const auto xs = as_span(x);
  const MatrixView<T> o = as_mutable_view(out);
  const std::size_t n = xs.size();
  detail::check_output_apart(where, "the Jacobian", detail::region_of(o), "input",
                             detail::region_of(xs), false, opt);
  detail::check_softmax_args<T>(where, n, n, opt);
  detail::check_equal(where, "rows of the Jacobian", o.rows(), "input size", n);
  detail::check_equal(where, "columns of the Jacobian", o.cols(), "input size", n);
  const detail::row_kind kind = detail::softmax_row_kind(xs.data(), n, opt);
  detail::softmax_row(where, xs.data(), o.row(0).data(), n, n, opt);  // α, in row 0 for now
  if (!detail::weights_move(kind)) {
    const T fill = o(0, 0) == o(0, 0) ? T(0) : std::numeric_limits<T>::quiet_NaN();
    for (std::size_t i = 0; i < n; ++i) detail::fill(o.row(i).data(), n, fill);
    return;
  }
  const T beta = static_cast<T>(opt.beta);
  for (std::size_t j = 1; j < n; ++j) o(j, j) = o(0, j);  // α moves to the diagonal
  const auto alpha = [&](std::size_t j) { return o(j, j); };
  std::size_t m = n;  // the weight above 1/2, if any
  for (std::size_t j = 0; j < n && m == n; ++j) m = alpha(j) > T(0.5) ? j : n;
  T rest = 0;  // 1 − α_m, summed from the others
  for (std::size_t k = 0; k < n; ++k) rest += k == m ? T(0) : alpha(k);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (i != j) o(i, j) = -beta * alpha(i) * alpha(j);
  for (std::size_t i = 0; i < n; ++i) {
    const T a = o(i, i);
    o(i, i) = beta * a * (i == m ? rest : T(1) - a);
  }
}

/// Returns the softmax Jacobian β (diag α − α αᵀ) as an n×n Matrix (fixed n: no allocation).
/// Rules as for the overload that writes into a view.
template <vector_like In>
[[nodiscard]] Matrix<scalar_of<In>, extent_of<In>, extent_of<In>>
softmax_jacobian(const In& x, const options& opt = {}) {
  using T = scalar_of<In>;
  constexpr std::size_t N = extent_of<In>;
  Matrix<T, N, N> out;
  if constexpr (N == dynamic) {
    detail::check_nonempty("attn::softmax_jacobian", "the input", as_span(x).size());
    out = Matrix<T>(as_span(x).size(), as_span(x).size());
  }
  softmax_jacobian(x, out.view(), opt);
  return out;
}

/// Writes the softmax vector-Jacobian product ∂L/∂x_j = β α_j (g_j − ⟨g, α⟩), given
/// g = ∂L/∂α and α = softmax(β·x, mask), without forming the Jacobian (O(n)). `out` may be x
/// but not g. Masked entries get 0 whatever g holds there (inf and NaN included); a row whose
/// weights do not move with x (see softmax_jacobian) gets zeros; a NaN row gets NaN. Errors
/// as for softmax, and dimension_error unless g and out have n entries.
template <vector_like In, vector_like G, mutable_vector_like Out>
  requires std::same_as<scalar_of<In>, scalar_of<G>> &&
      std::same_as<scalar_of<In>, scalar_of<Out>> &&
      compatible_extents<extent_of<In>, extent_of<G>> &&
      compatible_extents<extent_of<In>, extent_of<Out>>
void softmax_vjp(const In& x, const G& g, Out&& out, const options& opt = {}) {
  using T = scalar_of<In>;
  const char* where = "attn::softmax_vjp";
  const auto xs = as_span(x);
  const auto gs = as_span(g);
  const auto os = as_mutable_span(out);
  const std::size_t n = xs.size();
  detail::check_output_apart(where, "output", detail::region_of(os), "input", detail::region_of(xs),
                             true, opt);
  if (detail::overlaps(detail::region_of(os), detail::region_of(gs)))
    detail::throw_overlap(where, "output", "dL/dalpha");
  detail::check_softmax_args<T>(where, n, os.size(), opt);
  detail::check_equal(where, "size of dL/dalpha", gs.size(), "input size", n);
  const detail::row_kind kind = detail::softmax_row_kind(xs.data(), n, opt);
  detail::softmax_row(where, xs.data(), os.data(), n, n, opt);  // α
  detail::softmax_backward_row(
      os.data(), [&](std::size_t k) { return gs[k]; }, n, static_cast<T>(opt.beta),
      detail::weights_move(kind), os.data());
}

/// Returns the softmax vector-Jacobian product β α ⊙ (g − ⟨g, α⟩) as a Vector of x's extent.
template <vector_like In, vector_like G>
  requires std::same_as<scalar_of<In>, scalar_of<G>> &&
      compatible_extents<extent_of<In>, extent_of<G>>
[[nodiscard]] Vector<scalar_of<In>, extent_of<In>> softmax_vjp(const In& x, const G& g,
                                                               const options& opt = {}) {
  Vector<scalar_of<In>, extent_of<In>> out(as_span(x));
  softmax_vjp(as_span(x), g, out, opt);
  return out;
}

/// Which keys row t of T queries over n keys may attend to under opt: out_j = true where every
/// mask given allows key j (the key mask, row t of the row mask, and under causal j < t + n − T
/// + 1; the unit's "key ∧ row ∧ causal"), else false, for j < n. What the many-query functions
/// apply to row t. dimension_error when a mask or `out` does not fit T × n, or t ≥ T; nothing is
/// written then.
template <class Out>
  requires requires(Out& o, std::size_t j) {
    o[j] = true;
    std::size(o);
  }
constexpr void row_mask_of(const options& opt, std::size_t tq, std::size_t n, std::size_t t,
                           Out&& out) {
  const char* where = "attn::row_mask_of";
  detail::check_masks(where, opt, tq, n);
  detail::check_equal(where, "size of the output", static_cast<std::size_t>(std::size(out)),
                      "number of keys", n);
  if (t >= tq)
    detail::raise<dimension_error>(std::string(where) + ": row " + std::to_string(t) +
                                   " is out of range for " + std::to_string(tq) + " queries");
  const std::size_t limit = opt.causal ? detail::causal_keys(t, tq, n) : n;
  for (std::size_t j = 0; j < n; ++j)
    out[j] = j < limit && (opt.mask.empty() || opt.mask[j]) &&
             (opt.row_mask.empty() || opt.row_mask(t, j));
}

}  // namespace attn
