// What the attention entry points (attention.cu) hand the kernels (attention_{schedule,forward,backward}.cu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace pt::ops::cuda::attn {

// The work list: one item per (segment, tile of `rows` rows: kTile for the mma.sync kernels, kSm90Rows for
// the sm_90a forward), built on the device from cu_seqlens so the host never waits for it. Grids are sized
// from the bound sum_s ceil(len_s / rows) <= (T + S (rows-1)) / rows; blocks past *count exit at once.
struct Schedule {
  const int4* items;  // {segment start token, real tokens, length, first row of the tile}
  const int* count;
  int capacity;
  int rows;  // of an item: a segment's items start at rows 0, rows, 2 rows, ...
};

struct Args {
  const __nv_bfloat16 *q, *k, *v;  // [T,H,D], [T,Hkv,D], [T,Hkv,D]
  __nv_bfloat16* out;              // [T,H,D]
  float* lse;                      // [H,T]
  const __nv_bfloat16* dout;       // backward only: [T,H,D]
  __nv_bfloat16 *dq, *dk, *dv;     // backward only
  float* delta;                    // backward scratch [H,T]: rowsum(dout * out)
  Schedule schedule;
  int T, H, Hkv;
  float scale;  // softmax scale
  // AttentionParams::window when it is below T, else 0 (a window of T or more leaves every key in sight).
  int window;
  // AttentionParams::causal. Each kernel is built three times (kWindowed, kCausal): causal, windowed (causal
  // too: no family has a bidirectional window) and bidirectional, and with_mask runs the build the call
  // needs. The causal build holds no window arithmetic, the bidirectional one no diagonal.
  bool causal;
};

// Calls launch(std::bool_constant<kWindowed>, std::bool_constant<kCausal>) for the mask of `a`.
template <class Launch>
void with_mask(const Args& a, Launch&& launch) {
  if (!a.causal)
    launch(std::false_type{}, std::false_type{});
  else if (a.window > 0)
    launch(std::true_type{}, std::true_type{});
  else
    launch(std::false_type{}, std::true_type{});
}

// Sliding window (window > 0): query i attends keys i - window < j <= i. A query tile starting at row0
// visits key tiles (of `tile` keys, aligned to the segment's start as without a window) from the one that
// holds row0 - window + 1, the first key its first query attends; later queries attend later keys only.
__host__ __device__ constexpr int window_key_begin(int row0, int window, int tile) {
  return row0 - window + 1 > 0 ? (row0 - window + 1) / tile * tile : 0;
}
// A key tile [key0, key0 + keys) is attended by queries up to key0 + keys - 1 + window - 1, its last key's
// last query: the end (exclusive, within the real tokens) of the query tiles it visits. No overflow: window
// < T, and T * H * D < 2^31.
__host__ __device__ constexpr int window_query_end(int key0, int keys, int real, int window) {
  return key0 + keys - 1 + window < real ? key0 + keys - 1 + window : real;
}

// Status words the schedule kernel leaves: kCount items, kBadSegment (first inconsistent segment, or
// INT_MAX when cu_seqlens and valid_lens are consistent).
enum StatusWord { kCount = 0, kBadSegment = 1, kStatusWords = 2 };

// Fills items and status from cu_seqlens [S+1] and valid_lens [S] (or null). Inconsistent tables never
// lead to out-of-range accesses: they leave zero items and name the segment.
void launch_schedule(const int32_t* cu_seqlens, const int32_t* valid_lens, int segments, int tokens, int rows,
                     int4* items, int capacity, int* status, cudaStream_t stream);

// The mma.sync forward (any sm_80+ GPU): schedule items of kTile rows.
template <int D>
void launch_forward(const Args& a, cudaStream_t stream);

// The warp-specialized wgmma forward (attention_forward_sm90.cu): schedule items of kSm90Rows rows.
// Available when the GPU is sm_90 and the build holds sm_90a code for it.
constexpr int kSm90Rows = 128;
bool forward_sm90_available();
// order: scratch for schedule.capacity + 1 ints (the work list's order, longest work first, and the
// persistent CTAs' claim counter).
template <int D>
void launch_forward_sm90(const Args& a, int* order, cudaStream_t stream);

// Keys per block of the backward, and queries per step. Its work list holds the schedule items that start
// such a key tile, at most min(schedule capacity, (T + S (kBackwardKeys-1)) / kBackwardKeys) of them,
// longest first (by the query tiles of kBackwardRows it visits: causal, those after the keys, up to
// window_query_end with a window; bidirectional, every one of the segment's real tokens).
constexpr int kBackwardKeys = 128, kBackwardRows = 64;

struct BackwardScratch {
  float* dq_accum;   // dq / scale: [T,H,D] (mma.sync backward), or the tiled layout below (wgmma)
  int* key_tiles;    // [1 + key_capacity]: a count, then that many schedule item indices
  int* next_tile;    // the persistent wgmma kernel's work counter, zeroed with the order
  int key_capacity;  // the bound above
};

// The tiled dq_accum layout of the bulk-reduction backward: per query head and half of D, the rows of every
// token (and kBackwardRows rows of slack past T for a tile overhanging the last segment), so that a step's
// 64 rows of one half are one contiguous block that one bulk reduction adds. Within a row, 8-float chunk j
// sits at j ^ (row % 4): the staging stores of a warp's 8 rows then fill every bank (dq_tiled_index).
template <int D>
__host__ __device__ inline int64_t dq_tiled_row(int T, int head, int half, int64_t row) {
  return ((static_cast<int64_t>(head) * 2 + half) * (T + kBackwardRows) + row) * (D / 2);
}
template <int D>
__host__ __device__ inline int64_t dq_tiled_index(int T, int head, int64_t row, int col) {
  const int in_half = col % (D / 2);
  return dq_tiled_row<D>(T, head, col / (D / 2), row) + ((in_half / 8) ^ static_cast<int>(row & 3)) * 8 +
         in_half % 8;
}

// One pass over key tiles: dK and dV per block, dQ summed by atomics in scratch.dq_accum. The mma.sync
// version (attention_backward.cu) runs on any sm_80+ GPU, the wgmma one (attention_backward_sm90.cu) where
// forward_sm90_available(). Both are launch_backward_prologue (delta = rowsum(dout * out), dq_accum
// cleared, the key-tile order), their kernel, then launch_dq_convert (dq = scale * dq_accum in bf16);
// kTiled: dq_accum in the tiled layout, which the wgmma backward's bulk reductions add to.
template <int D, bool kTiled>
void launch_backward_prologue(const Args& a, const BackwardScratch& scratch, cudaStream_t stream);
template <int D, bool kTiled>
void launch_dq_convert(const Args& a, const BackwardScratch& scratch, cudaStream_t stream);
template <int D>
void launch_backward(const Args& a, const BackwardScratch& scratch, cudaStream_t stream);
template <int D>
void launch_backward_sm90(const Args& a, const BackwardScratch& scratch, cudaStream_t stream);

}  // namespace pt::ops::cuda::attn
