// Builds the attention work list on the device: every segment contributes ceil(len / kTile) tiles, in
// segment order, so a grid of `capacity` blocks covers examples of any length mix with no idle block
// beyond the bound's slack of at most one per segment.
#include <climits>

#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/attention_mma.cuh"

namespace pt::ops::cuda::attn {

namespace {

constexpr int kScheduleThreads = 1024;

// Exclusive prefix sum over the block; *total gets the sum.
__device__ int block_exclusive_scan(int x, int* total) {
  __shared__ int warp_sums[kScheduleThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int inclusive = x;
  for (int d = 1; d < 32; d *= 2) {
    const int y = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += y;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int w = warp_sums[lane];
    for (int d = 1; d < 32; d *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += y;
    }
    warp_sums[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  const int before = (warp > 0 ? warp_sums[warp - 1] : 0) + inclusive - x;
  *total = warp_sums[kScheduleThreads / 32 - 1];
  __syncthreads();  // warp_sums is reused by the next call
  return before;
}

__global__ void __launch_bounds__(kScheduleThreads)
    schedule_kernel(const int32_t* cu, const int32_t* valid_lens, int segments, int tokens, int4* items,
                    int capacity, int* status) {
  __shared__ int bad;
  if (threadIdx.x == 0) bad = (cu[0] != 0 || cu[segments] != tokens) ? 0 : INT_MAX;
  __syncthreads();
  int base = 0;
  for (int chunk = 0; chunk < segments; chunk += kScheduleThreads) {
    const int s = chunk + static_cast<int>(threadIdx.x);
    int start = 0, len = 0, real = 0;
    if (s < segments) {
      start = cu[s];
      len = cu[s + 1] - start;
      real = valid_lens ? valid_lens[s] : len;
      if (start < 0 || len < 0 || cu[s + 1] > tokens || real < 0 || real > len) {
        atomicMin(&bad, s);
        len = real = 0;
      }
    }
    const int tiles = (len + kTile - 1) / kTile;
    int total = 0;
    const int first = base + block_exclusive_scan(tiles, &total);
    for (int t = 0; t < tiles && first + t < capacity; ++t)
      items[first + t] = make_int4(start, real, len, t * kTile);
    base += total;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    status[kCount] = (bad != INT_MAX || base > capacity) ? 0 : base;
    status[kBadSegment] = bad;
  }
}

}  // namespace

void launch_schedule(const int32_t* cu_seqlens, const int32_t* valid_lens, int segments, int tokens,
                     int4* items, int capacity, int* status, cudaStream_t stream) {
  schedule_kernel<<<1, kScheduleThreads, 0, stream>>>(cu_seqlens, valid_lens, segments, tokens, items,
                                                      capacity, status);
}

}  // namespace pt::ops::cuda::attn
