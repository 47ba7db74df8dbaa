#pragma once
/// \file attn/detail/threads.hpp
/// Work split over threads: items 0 … count − 1, taken in order from a shared counter by the
/// calling thread and up to threads − 1 std::threads, joined before the call returns. Which
/// thread runs an item changes no number when items write disjoint outputs. Kernel layer: knows
/// no public algorithm.

#include "attn/detail/config.hpp"

#include <atomic>
#include <cstddef>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace attn::detail {

/// The threads worth starting for a call asked to use `threads`: at most as many as the machine
/// runs at once (std::thread::hardware_concurrency; 256 when it does not say), at least 1. Any
/// count is valid (SIZE_MAX: as many as there are), and the pieces of work counted from it
/// cannot overflow.
[[nodiscard]] inline std::size_t usable_threads(std::size_t threads) noexcept {
  if (threads <= 1) return 1;  // (the one-thread calls ask the system nothing)
  static const std::size_t most = [] {  // asked once: glibc reads it from /sys
    const unsigned hardware = std::thread::hardware_concurrency();
    return hardware != 0 ? std::size_t{hardware} : std::size_t{256};
  }();
  return threads < most ? threads : most;
}

/// fn(k) for every k < count, on `threads` threads at most (the calling thread one of them; 0
/// and 1: the calling thread alone), each taking the next item as it finishes one, so that items
/// of unequal cost even out. Allocates the thread objects and nothing else. A thread that cannot
/// be started leaves its share to the others. The first exception an item throws stops the
/// items not yet taken and is rethrown here once every thread has joined. Built without
/// exceptions, an error aborts (detail::raise), and so does a thread that cannot be started.
template <class F>
void split_over_threads(std::size_t count, std::size_t threads, F&& fn) {
  threads = usable_threads(threads);
  if (threads > count) threads = count;
  if (threads <= 1) {
    for (std::size_t k = 0; k < count; ++k) fn(k);
    return;
  }
  std::atomic<std::size_t> next{0};
  const auto work = [&]([[maybe_unused]] std::exception_ptr& error) {
    const auto items = [&] {
      for (std::size_t k = next.fetch_add(1, std::memory_order_relaxed); k < count;
           k = next.fetch_add(1, std::memory_order_relaxed))
        fn(k);
    };
#if ATTN_EXCEPTIONS
    try {
      items();
    } catch (...) {
      error = std::current_exception();
      next.store(count, std::memory_order_relaxed);  // the items not taken yet: none
    }
#else
    items();  // (without exceptions every error aborts)
#endif
  };
  struct worker {
    std::thread thread;
    std::exception_ptr error;
  };
  std::vector<worker> workers(threads - 1);
  for (worker& w : workers) {
#if ATTN_EXCEPTIONS
    try {
      w.thread = std::thread([&work, &w] { work(w.error); });
    } catch (const std::system_error&) {
      break;  // no more threads: the items go to those running
    }
#else
    w.thread = std::thread([&work, &w] { work(w.error); });  // (a failure aborts)
#endif
  }
  std::exception_ptr error;
  work(error);
  for (worker& w : workers)
    if (w.thread.joinable()) w.thread.join();
  if (error) std::rethrow_exception(error);
  for (const worker& w : workers)
    if (w.error) std::rethrow_exception(w.error);
}

}  // namespace attn::detail
