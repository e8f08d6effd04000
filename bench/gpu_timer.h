// Timing of GPU work for the benchmarks: mean milliseconds per call, after one untimed warm-up call,
// measured between device synchronisations.
#pragma once

#include <chrono>
#include <functional>

#include "core/device.h"

namespace pt::bench {

inline double gpu_time_ms(const std::function<void()>& fn, int iters) {
  fn();
  cuda_synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) fn();
  cuda_synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / iters;
}

}  // namespace pt::bench
