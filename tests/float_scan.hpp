#pragma once
// What the scans of every float in tests/test_exp.cpp and tests/test_exp_fastmath.cpp share
// (two executables, built with different flags): how much of the 2^32 bit patterns a build
// scans, the two threads that scan them, the merge of what they found and its message.
// A Scan has max_err, worst, failures, first_failure, checked and merge(const Scan&).

#include <array>
#include <bit>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// The scan of every float takes a few seconds optimized, but minutes unoptimized or under a
// sanitizer: there it checks every 61st block of 4096 bit patterns instead.
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
// under a sanitizer or without optimization.
constexpr std::uint64_t every_float_spread = ATTN_EXP_TEST_EVERY_FLOAT ? 1 : 61;

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

}  // namespace attn_test
