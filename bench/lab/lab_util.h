// Utilities of the kernel lab's harnesses (bench/lab), on the current stream.
#pragma once

#include <cstdint>
#include <functional>

namespace pt::lab {

// Uniform bf16 values in [lo, hi) from a counter hash of (seed, index).
void fill_uniform_bf16(void* p, int64_t n, uint64_t seed, float lo, float hi);

// The largest |got - want|, the largest |want| and the NaN count of got over n bf16 values (waits).
struct Compare {
  float max_abs_diff = 0, max_abs_want = 0;
  int64_t nans = 0;
};
Compare compare_bf16(const void* got, const void* want, int64_t n);

// Mean milliseconds of fn over reps calls after one warm-up call, by CUDA events on the current stream.
double time_ms(const std::function<void()>& fn, int reps);

}  // namespace pt::lab
