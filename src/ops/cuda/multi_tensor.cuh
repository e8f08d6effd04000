// Kernels over many tensors at once (optimizer step, gradient norm, clipping): a table of tensor
// descriptors travels as a kernel parameter, and each block finds its tensor and its chunk of that tensor
// from the table. A 110M-parameter model's ~110 tensors take two launches instead of ~110.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "ops/cuda/check.h"

namespace pt::ops::cuda {

inline constexpr int64_t kChunkElements = 1 << 16;  // elements per block
inline constexpr int kChunkThreads = 256;

// kPointers arrays per tensor (e.g. param, grad, m, v), all of numel elements: of T, or of types the
// kernel knows when T is void (moments stored in another format than the parameters).
template <int kPointers, class T = float>
struct TensorTable {
  // At most 64 tensors, as many as keep the table (a kernel parameter) under 4 KiB: 58 of 6 pointers.
  static constexpr int kTensors = std::min(64, (4096 - 32) / (21 + 8 * kPointers));
  int count = 0;
  int first_block[kTensors + 1] = {};  // blocks of tensors [0, i); the last entry is the grid size
  int64_t numel[kTensors] = {};
  int64_t offset[kTensors] = {};  // a per-tensor index base (AdamW: element 0's in the flat parameters)
  T* ptr[kPointers][kTensors] = {};
  bool flag[kTensors] = {};  // a per-tensor switch (AdamW: weight decay)
};

// The tensor and element range of this block, found by binary search over first_block.
template <int kPointers, class T>
__device__ __forceinline__ int table_entry(const TensorTable<kPointers, T>& table, int64_t& begin,
                                           int64_t& end) {
  int lo = 0, hi = table.count - 1;
  const int block = static_cast<int>(blockIdx.x);
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table.first_block[mid] <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  begin = int64_t{block - table.first_block[lo]} * kChunkElements;
  end = begin + kChunkElements < table.numel[lo] ? begin + kChunkElements : table.numel[lo];
  return lo;
}

// Whether every array's part [begin, end) of tensor i can move as float4: 16-byte aligned, whole vectors.
template <int kPointers>
__device__ __forceinline__ bool float4_range(const TensorTable<kPointers>& table, int i, int64_t begin,
                                             int64_t end) {
  if ((end - begin) % 4 != 0) return false;
  for (int p = 0; p < kPointers; ++p)
    if (reinterpret_cast<uintptr_t>(table.ptr[p][i] + begin) % 16 != 0) return false;
  return true;
}

// Splits `count` tensors into tables of at most kTensors and calls launch(table, first_global_block) for
// each; fill(i, table, slot) writes tensor i's pointers, numel, offset and flag into slot `slot`.
template <int kPointers, class T = float, class Fill, class Launch>
void launch_over_tables(size_t count, Fill&& fill, Launch&& launch) {
  using Table = TensorTable<kPointers, T>;
  static_assert(sizeof(Table) <= 4096, "a kernel parameter of 4 KiB at most");
  int global_block = 0;
  for (size_t start = 0; start < count; start += Table::kTensors) {
    Table table;
    table.count = static_cast<int>(std::min<size_t>(Table::kTensors, count - start));
    for (int slot = 0; slot < table.count; ++slot) {
      fill(start + static_cast<size_t>(slot), table, slot);
      const int64_t blocks = (table.numel[slot] + kChunkElements - 1) / kChunkElements;
      table.first_block[slot + 1] = table.first_block[slot] + static_cast<int>(blocks);
    }
    if (table.first_block[table.count] > 0) launch(table, global_block);
    global_block += table.first_block[table.count];
  }
}

}  // namespace pt::ops::cuda
