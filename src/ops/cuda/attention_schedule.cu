// Builds the attention work list on the device: every segment contributes ceil(len / rows) tiles, in
// segment order, so a grid of `capacity` blocks covers examples of any length mix with no idle block
// beyond the bound's slack of at most one per segment.
#include <climits>

#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/block_scan.cuh"

namespace pt::ops::cuda::attn {

namespace {

constexpr int kScheduleThreads = 1024;

__global__ void __launch_bounds__(kScheduleThreads)
    schedule_kernel(const int32_t* cu, const int32_t* valid_lens, int segments, int tokens, int rows,
                    int4* items, int capacity, int* status) {
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
    const int tiles = (len + rows - 1) / rows;
    int total = 0;
    const int first = base + block_exclusive_scan<kScheduleThreads>(tiles, &total);
    for (int t = 0; t < tiles && first + t < capacity; ++t)
      items[first + t] = make_int4(start, real, len, t * rows);
    base += total;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    status[kCount] = (bad != INT_MAX || base > capacity) ? 0 : base;
    status[kBadSegment] = bad;
  }
}

}  // namespace

void launch_schedule(const int32_t* cu_seqlens, const int32_t* valid_lens, int segments, int tokens, int rows,
                     int4* items, int capacity, int* status, cudaStream_t stream) {
  schedule_kernel<<<1, kScheduleThreads, 0, stream>>>(cu_seqlens, valid_lens, segments, tokens, rows, items,
                                                      capacity, status);
}

}  // namespace pt::ops::cuda::attn
