#pragma once
// What the scans of every float in tests/test_exp.cpp and tests/test_exp_fastmath.cpp share
// (two executables, built with different flags): how much of the 2^32 bit patterns a build
// scans, what exp must give for each, the ulp error, the two threads that scan them, the merge
// of what they found and its message.
// A Scan has max_err, worst, failures, first_failure, checked and merge(const Scan&).

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// Two scans of each function. The sampled one (CTest's default run, the quick start's line)
// checks every 64th block of 4096 bit patterns and every block where the expected result changes
// kind or that holds a special value (boundary_blocks): about 1/60 of the floats, spread over
// the whole range, with the same assertions. The scan of every float (a hidden Catch2 test
// tagged [exhaustive]; the CTest label `exhaustive`, tests/CMakeLists.txt) costs 20 to 50 CPU
// seconds optimized, and minutes unoptimized or under a sanitizer: there it checks every 61st
// block instead.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) ||                         \
    __has_feature(thread_sanitizer)
#define ATTN_EXP_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ATTN_EXP_TEST_SANITIZED 1
#endif
#if (defined(__OPTIMIZE__) || (defined(_MSC_VER) && defined(NDEBUG))) &&                           \
    !defined(ATTN_EXP_TEST_SANITIZED)
#define ATTN_EXP_TEST_EVERY_FLOAT 1
#else
#define ATTN_EXP_TEST_EVERY_FLOAT 0
#endif

namespace attn_test {

// Every spread-th block of 4096 floats is scanned: all of them in optimized builds, every 61st
// under a sanitizer or without optimization (the [exhaustive] tests); every 64th in every build
// (the sampled tests, which add boundary_blocks).
constexpr std::uint64_t every_float_spread = ATTN_EXP_TEST_EVERY_FLOAT ? 1 : 61;
constexpr std::uint64_t sampled_spread = 64;

// The last x with a finite exp(x), and the most negative x with exp(x) > 0 (checked against the
// reference in test_exp.cpp, "exp: float thresholds").
constexpr std::uint32_t f_max_finite_x = 0x42b17217U;   // 88.7228317
constexpr std::uint32_t f_min_nonzero_x = 0xc2cff1b4U;  // -103.972076

// What exp must give, by the bits of x. For all but `general` the result is exact: for
// |x| < 2^-25, |e^x - 1| < 2^-25 is less than half an ulp on either side of 1, so e^x rounds
// to 1. The kinds are intervals of the bit patterns taken as unsigned integers.
enum class exp_kind { one, general, pos_inf, nan, zero };

constexpr exp_kind classify_exp(std::uint32_t b) {
  const std::uint32_t a = b & 0x7fffffffU;
  if (a > 0x7f800000U) return exp_kind::nan;
  if (static_cast<std::int32_t>(b) > static_cast<std::int32_t>(f_max_finite_x))
    return exp_kind::pos_inf;
  if (b > f_min_nonzero_x) return exp_kind::zero;
  if (a < 0x33000000U) return exp_kind::one;
  return exp_kind::general;
}

// Whether the bits yb are the exact result exp must give for kind k (never for `general`).
constexpr bool exp_exact_result(exp_kind k, std::uint32_t yb) {
  switch (k) {
  case exp_kind::one:
    return yb == 0x3f800000U;
  case exp_kind::pos_inf:
    return yb == 0x7f800000U;
  case exp_kind::zero:
    return yb == 0U;
  case exp_kind::nan:
    return (yb & 0x7fffffffU) > 0x7f800000U;
  case exp_kind::general:
    break;
  }
  return false;
}

// |y - ref| in ulps of the float nearest ref (ref a positive double in float range; subnormal
// floats all have the ulp 2^-149). The ulp is a power of two built from ref's exponent bits.
inline double float_ulp_error(float y, double ref) {
  const auto e = static_cast<int>((std::bit_cast<std::uint64_t>(ref) >> 52U) & 0x7ffU) - 1023;
  const int ulp_exp = std::max(e, -126) - 23;
  const double inv_ulp = std::bit_cast<double>(static_cast<std::uint64_t>(1023 - ulp_exp) << 52U);
  return std::fabs(static_cast<double>(y) - ref) * inv_ulp;
}

// The floats are scanned in blocks of this many bit patterns.
constexpr std::size_t scan_block = 4096;
constexpr std::uint64_t n_scan_blocks = (std::uint64_t{1} << 32U) / scan_block;

// The blocks a sampled scan checks besides every spread-th (block b holds the bit patterns
// b·4096 ... b·4096 + 4095): those where classify(bits), the kind of result expected, changes
// inside the block, both blocks on either side of a change at a block's edge, and the blocks of
// the special inputs of either sign (0 and the smallest subnormals, the smallest normal, 1, the
// largest finite, inf and the first NaNs, the quiet NaN, the last NaN). Sorted, without the
// multiples of spread (which the sampled scan checks anyway).
template <class Classify>
std::vector<std::uint64_t> boundary_blocks(Classify classify, std::uint64_t spread) {
  std::vector<std::uint64_t> blocks;
  for (const std::uint32_t special :
       {0x00000000U, 0x00800000U, 0x3f800000U, 0x7f7fffffU, 0x7f800000U, 0x7fc00000U, 0x7fffffffU})
    for (const std::uint32_t sign : {0U, 0x80000000U})
      blocks.push_back((special | sign) / scan_block);
  for (std::uint64_t b = 0; b < n_scan_blocks; ++b) {
    const auto first = static_cast<std::uint32_t>(b * scan_block);
    const auto last = static_cast<std::uint32_t>(first + (scan_block - 1));
    if (classify(first) != classify(last)) blocks.push_back(b);
    if (b + 1 < n_scan_blocks && classify(last) != classify(last + 1)) {
      blocks.push_back(b);
      blocks.push_back(b + 1);
    }
  }
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  std::erase_if(blocks, [spread](std::uint64_t b) { return b % spread == 0; });
  return blocks;
}

// What a scan found, for the failure message: the worst error, where, and the first failure.
template <class Scan>
std::string scan_summary(const Scan& all) {
  std::ostringstream out;
  out << "max error " << all.max_err << " ulp at x = " << std::bit_cast<float>(all.worst) << " (bits 0x"
      << std::hex << all.worst << "); " << std::dec << all.failures << " failures, the first at bits 0x"
      << std::hex << all.first_failure;
  return out.str();
}

// The fields every scan of the floats has, merged from two threads' scans: the larger error and
// where, the lowest first failure, the counts of failures and of inputs checked.
template <class Scan>
void merge_worst(Scan& all, const Scan& s) {
  if (s.max_err > all.max_err) {
    all.max_err = s.max_err;
    all.worst = s.worst;
  }
  if (s.failures != 0 && (all.failures == 0 || s.first_failure < all.first_failure))
    all.first_failure = s.first_failure;
  all.failures += s.failures;
  all.checked += s.checked;
}

// Runs scan(first, stride, arg, result) on two threads, over interleaved blocks (those
// 0, 2·spread, ... and spread, 3·spread, ...), and merges what they found (Scan::merge).
template <class Scan, class Fn, class Arg>
Scan scan_on_two_threads(Fn scan, std::uint64_t spread, Arg arg) {
  constexpr std::uint64_t n_threads = 2;
  std::array<Scan, n_threads> scans{};
  std::vector<std::thread> threads;
  for (std::uint64_t t = 0; t < n_threads; ++t)
    threads.emplace_back(scan, t * spread, n_threads * spread, arg, std::ref(scans[t]));
  for (auto& th : threads) th.join();
  Scan all;
  for (const auto& s : scans) all.merge(s);
  return all;
}

// The sampled scan: scan_on_two_threads over every spread-th block, then each of `extra` (from
// boundary_blocks) alone (a stride past the last block), merged in.
template <class Scan, class Fn, class Arg>
Scan scan_sampled(Fn scan, std::uint64_t spread, Arg arg, const std::vector<std::uint64_t>& extra) {
  Scan all = scan_on_two_threads<Scan>(scan, spread, arg);
  for (const std::uint64_t b : extra) {
    Scan one{};
    scan(b, n_scan_blocks, arg, one);
    all.merge(one);
  }
  return all;
}

}  // namespace attn_test
