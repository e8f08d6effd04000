// Data parallelism over an index range with plain std::threads: [0, n) is cut into contiguous chunks,
// one per thread, so results written by index stay deterministic whatever the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace pt {

inline int hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

// fn(begin, end) on disjoint chunks; the first exception thrown by any chunk is rethrown.
template <class Fn>
void parallel_for(int64_t n, int threads, Fn&& fn) {
  threads = static_cast<int>(std::clamp<int64_t>(threads, 1, std::max<int64_t>(1, n)));
  if (threads == 1) {
    fn(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    int64_t begin = n * t / threads, end = n * (t + 1) / threads;
    pool.emplace_back([&, t, begin, end] {
      try {
        fn(begin, end);
      } catch (...) {
        errors[static_cast<size_t>(t)] = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace pt
