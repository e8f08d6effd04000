// The order in which attention blocks take their schedule items: longest work first, so that long tiles of
// long examples start early and short ones fill the last wave instead of one long tile running alone at the
// end. Built on the device by one block, like the schedule itself.
// order_by_work sorts the items themselves; order_segments_by_work keeps each segment's items together,
// for kernels whose concurrent items should share the segment's tensors in L2.
#pragma once

#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/block_scan.cuh"

namespace pt::ops::cuda::attn {

constexpr int kOrderThreads = 1024, kOrderBuckets = 1024;

// Run by one block of kOrderThreads threads: writes the indices of the schedule items that keep(item)
// accepts to order[0 .. min(total, capacity)), by decreasing work(item) (a counting sort; items with
// kOrderBuckets - 1 or more share the top bucket), and returns their total count to every thread.
template <class Keep, class Work>
__device__ int order_by_work(const Schedule& schedule, Keep keep, Work work, int* order, int capacity) {
  __shared__ int next[kOrderBuckets];  // per bucket: its count, then the next free position
  static_assert(kOrderBuckets == kOrderThreads);
  const int count = *schedule.count, tid = static_cast<int>(threadIdx.x);
  auto bucket = [&](int4 item) { return kOrderBuckets - 1 - min(work(item), kOrderBuckets - 1); };
  next[tid] = 0;
  __syncthreads();
  for (int i = tid; i < count; i += kOrderThreads) {
    const int4 item = schedule.items[i];
    if (keep(item)) atomicAdd(&next[bucket(item)], 1);
  }
  __syncthreads();
  int total = 0;
  next[tid] = block_exclusive_scan<kOrderThreads>(next[tid], &total);  // each bucket's first position
  __syncthreads();
  for (int i = tid; i < count; i += kOrderThreads) {
    const int4 item = schedule.items[i];
    if (!keep(item)) continue;
    const int at = atomicAdd(&next[bucket(item)], 1);
    if (at < capacity) order[at] = i;
  }
  return total;
}

// Run by one block of kOrderThreads threads: writes to order[0 .. min(total, capacity)) the indices of the
// schedule items that start a tile of `tile_rows` rows (a multiple of schedule.rows), segment by segment,
// each segment's in row order, the segments by decreasing work(first item of the segment) (a counting sort
// as above); returns their total count to every thread. When one causal key tile's items are short (a few
// query tiles each), the tiles that run at the same time then share their segment's queries, output
// gradients and dQ accumulator in L2; sorted item by item, they would come from as many segments as there
// are SMs and miss L2.
template <class Work>
__device__ int order_segments_by_work(const Schedule& schedule, int tile_rows, Work work, int* order,
                                      int capacity) {
  __shared__ int next[kOrderBuckets];  // per bucket: its tiles' count, then the next free position
  static_assert(kOrderBuckets == kOrderThreads);
  const int count = *schedule.count, tid = static_cast<int>(threadIdx.x), stride = tile_rows / schedule.rows;
  auto bucket = [&](int4 item) { return kOrderBuckets - 1 - min(work(item), kOrderBuckets - 1); };
  auto tiles = [&](int4 item) { return (item.z + tile_rows - 1) / tile_rows; };
  next[tid] = 0;
  __syncthreads();
  for (int i = tid; i < count; i += kOrderThreads) {
    const int4 item = schedule.items[i];
    if (item.w == 0) atomicAdd(&next[bucket(item)], tiles(item));
  }
  __syncthreads();
  int total = 0;
  next[tid] = block_exclusive_scan<kOrderThreads>(next[tid], &total);  // each bucket's first position
  __syncthreads();
  for (int i = tid; i < count; i += kOrderThreads) {
    const int4 item = schedule.items[i];
    if (item.w != 0) continue;
    const int n = tiles(item), at = atomicAdd(&next[bucket(item)], n);
    for (int j = 0; j < n && at + j < capacity; ++j) order[at + j] = i + j * stride;
  }
  return total;
}

}  // namespace pt::ops::cuda::attn
