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

// Run by one block of kOrderThreads threads: a counting sort of the schedule items by decreasing
// work(item) (items with kOrderBuckets - 1 or more share the top bucket). Item i takes n = size(item)
// consecutive positions from `at`, written by emit(i, at, n); returns the positions' total to every thread.
template <class Size, class Work, class Emit>
__device__ int sort_by_work(const Schedule& schedule, Size size, Work work, Emit emit) {
  __shared__ int next[kOrderBuckets];  // per bucket: its positions' count, then the next free position
  static_assert(kOrderBuckets == kOrderThreads);
  const int count = *schedule.count, tid = static_cast<int>(threadIdx.x);
  auto bucket = [&](int4 item) { return kOrderBuckets - 1 - min(work(item), kOrderBuckets - 1); };
  next[tid] = 0;
  __syncthreads();
  for (int i = tid; i < count; i += kOrderThreads) {
    const int4 item = schedule.items[i];
    if (const int n = size(item)) atomicAdd(&next[bucket(item)], n);
  }
  __syncthreads();
  int total = 0;
  next[tid] = block_exclusive_scan<kOrderThreads>(next[tid], &total);  // each bucket's first position
  __syncthreads();
  for (int i = tid; i < count; i += kOrderThreads) {
    const int4 item = schedule.items[i];
    if (const int n = size(item)) emit(i, atomicAdd(&next[bucket(item)], n), n);
  }
  return total;
}

// Writes the indices of the schedule items that keep(item) accepts to order[0 .. min(total, capacity)), by
// decreasing work(item), and returns their total count to every thread.
template <class Keep, class Work>
__device__ int order_by_work(const Schedule& schedule, Keep keep, Work work, int* order, int capacity) {
  return sort_by_work(
      schedule, [&](int4 item) { return keep(item) ? 1 : 0; }, work,
      [&](int i, int at, int) {
        if (at < capacity) order[at] = i;
      });
}

// Writes to order[0 .. min(total, capacity)) the indices of the schedule items that start a tile of
// `tile_rows` rows (a multiple of schedule.rows), segment by segment, each segment's in row order, the
// segments by decreasing work(first item of the segment); returns their total count to every thread. When
// one causal key tile's items are short (a few query tiles each), the tiles that run at the same time then
// share their segment's queries, output gradients and dQ accumulator in L2; sorted item by item, they would
// come from as many segments as there are SMs and miss L2.
template <class Work>
__device__ int order_segments_by_work(const Schedule& schedule, int tile_rows, Work work, int* order,
                                      int capacity) {
  const int stride = tile_rows / schedule.rows;
  return sort_by_work(
      schedule, [&](int4 item) { return item.w == 0 ? (item.z + tile_rows - 1) / tile_rows : 0; }, work,
      [&](int i, int at, int n) {
        for (int j = 0; j < n && at + j < capacity; ++j) order[at + j] = i + j * stride;
      });
}

}  // namespace pt::ops::cuda::attn
