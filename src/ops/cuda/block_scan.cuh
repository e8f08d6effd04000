// Exclusive prefix sum of one int per thread over a block of kThreads threads (a multiple of 32, at most
// 1024), by warp shuffles: every thread of the block must call it.
#pragma once

namespace pt::ops::cuda {

// Returns the sum of x over the threads before this one; *total gets the sum over the block.
template <int kThreads>
__device__ int block_exclusive_scan(int x, int* total) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024);
  __shared__ int warp_sums[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int inclusive = x;
  for (int d = 1; d < 32; d *= 2) {
    const int y = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += y;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int w = lane < kThreads / 32 ? warp_sums[lane] : 0;
    for (int d = 1; d < 32; d *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += y;
    }
    if (lane < kThreads / 32) warp_sums[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  const int before = (warp > 0 ? warp_sums[warp - 1] : 0) + inclusive - x;
  *total = warp_sums[kThreads / 32 - 1];
  __syncthreads();  // warp_sums is reused by the next call
  return before;
}

}  // namespace pt::ops::cuda
