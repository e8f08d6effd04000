// Helpers of the GPU benchmarks: timing (mean milliseconds per call, after one untimed warm-up call,
// measured between device synchronisations) and device tensors the benchmark owns.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "core/device.h"
#include "core/device_buffer.h"
#include "core/tensor.h"
#include "data/packing/synthetic_split.h"

namespace pt::bench {

inline double gpu_time_ms(const std::function<void()>& fn, int iters) {
  fn();
  cuda_synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) fn();
  cuda_synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / iters;
}

// SFT-like lengths filling exactly `tokens` (the last example is cut to fit): the attention benchmarks'
// batch.
inline std::vector<int32_t> sft_batch(int64_t tokens) {
  std::vector<int32_t> out;
  int64_t total = 0;
  for (int64_t len : sft_like_lengths(tokens, 11)) {
    const int64_t take = std::min(len, tokens - total);
    if (take == 0) break;
    out.push_back(static_cast<int32_t>(take));
    total += take;
  }
  return out;
}

// Device tensors that live as long as the pool: zero-filled from make() (a valid input for every op the
// benchmarks time), uploaded from ints() or bf16() (bf16 bit patterns, float_to_bf16's).
struct Pool {
  std::vector<DeviceBuffer> buffers;
  Tensor make(DType dtype, std::initializer_list<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    buffers.emplace_back(static_cast<size_t>(n * dtype_size(dtype)));
    return buffers.back().view(dtype, dims);
  }
  Tensor ints(const std::vector<int32_t>& v) {
    Tensor t = make(DType::i32, {static_cast<int64_t>(v.size())});
    buffers.back().upload(v.data(), v.size() * sizeof(int32_t));
    return t;
  }
  Tensor bf16(const std::vector<uint16_t>& bits, std::initializer_list<int64_t> dims) {
    Tensor t = make(DType::bf16, dims);
    PT_ASSERT(static_cast<size_t>(t.numel()) == bits.size());
    buffers.back().upload(bits.data(), bits.size() * sizeof(uint16_t));
    return t;
  }
};

}  // namespace pt::bench
