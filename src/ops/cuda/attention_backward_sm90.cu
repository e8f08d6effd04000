// Backward kernel for Hopper (sm_90a), on warpgroup MMA (ops/cuda/wgmma.cuh). It computes what the mma.sync
// backward (attention_backward.cu) computes, from the same prologue (delta, dq_accum cleared, key-tile
// order), work list and dQ conversion: with P = exp(scale QK^T - lse), dP = dO V^T, dS = P * (dP - delta):
// dV = P^T dO, dK = scale dS^T Q, dQ = scale dS K, dQ summed over key tiles into dq_accum (its tiled layout,
// attention_kernels.h) by bulk reductions.
//
// Persistent and warp-specialized: one CTA of 384 threads per SM.
// - The producer, the first warp of warpgroup 0 (24 registers a thread), claims work items, each a (key
//   tile of kBackwardKeys = 128 keys, kv head), segment by segment and longest first, from a counter, and
//   copies each item's K and V (two buffers: an item ahead; one at D = 128) and each step's Q and dO (two
//   buffers: a step ahead) with TMA, and the step's lse and delta with cp.async, completing "full" mbarriers
//   and waiting for the consumers' "empty" ones. On SFT-like batches an item lasts a few steps, so the next
//   item's loads must run under the current one's.
// - Two consumers, warpgroups 1 and 2 (240 registers), own keys 64 (wg - 1) .. + 63 of the item and sum
//   their dK and dV [64 x D] in registers over the query tiles of kBackwardRows = 64 rows at or after the
//   key tile (causal; with a sliding window, kWindowed, only those up to window_query_end; bidirectional,
//   !kCausal, all of the segment's), head by head over the kv head's query heads (GQA). Per step, in the
//   transposed orientation (the warpgroup's keys are the MMA's M):
//     S^T[64 x 64] = K Q^T, dP^T = V dO^T   wgmma m64n64k16, both operands K-major in shared memory
//     P^T, dS^T = P^T * (dP^T - delta)      registers, masked (key > query or, bidirectional, key past the
//                                           real tokens; query past them; query - key >= window)
//     dV += P^T dO                          wgmma m64nDk16, A from registers, dO MN-major; left running
//     dS^T -> shared memory (bf16, two buffers), the consumers' barrier
//     dQ[64 x D/2] = dS K                   wgmma m64n(D/2)k16, dS^T and K both MN-major, one half of D
//                                           per warpgroup
//     dK += dS^T Q                          wgmma m64nDk16, A from registers, Q MN-major; left running
//                                           while dQ goes out: st.shared into a buffer (two, a step
//                                           apart) in the order of the tiled layout, where a warp's 16
//                                           rows of the half are contiguous; one cp.reduce.async.bulk per
//                                           warp adds them to dq_accum, and no thread waits for it
//   That is FA3's order: the tensor cores run dV's product through the barrier and dK's under dQ's
//   stores. No branch skips a step's products where the warpgroup has no keys (a wgmma left running across
//   a branch is serialized, ptxas advisory C7520); the masks zero its P^T and dS^T. Each step's query head
//   and row tile are counted, not divided out of the step index. Against the order before (dV, dK, the
//   barrier, dQ, its stores), 1.02-1.06x on SFT-like batches and 1.08-1.13x on one 8k or 32k sequence
//   (H100, docs/results/h100-2026-12-07-s17).
// At the item's end dK and dV leave through its K/V buffer (stage_accumulator, copy_rows_out).
// The kernel lab (H100, bench_attention): the bulk reductions were 1.19x fp32 atomics from registers
// (8-byte adds that touch 8 rows a warp instruction) on the backward of one 8k or 32k sequence at D = 128,
// 1.10-1.12x at 64; with the segment-grouped order (attention_order.cuh) 1.0-1.1x on SFT-like batches and
// rows of 1k. The order itself: 1.2-1.35x on those (the concurrent items had missed L2: 76% of DRAM's
// bandwidth, 23% L2 hits on rows of 1k), unchanged on single sequences. (An earlier bulk design, one
// reduction per row issued and waited for by the consumers, was 0.69-0.75x.)
#include <cuda.h>

#include <algorithm>
#include <cmath>

#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/attention_sm90.cuh"
#include "ops/cuda/tensor_map.h"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda::attn {

namespace {

constexpr int kThreads = 384;
constexpr int kRows = kBackwardRows;  // queries per step
static_assert(kBackwardKeys == 128 && kRows == 64, "two warpgroups of 64 keys against 64-query steps");

// The TMA descriptors of k and v (boxes of kBackwardKeys rows), q and dout (kRows rows), passed as a
// __grid_constant__ kernel parameter.
struct Maps {
  CUtensorMap k, v, q, dout;
};

// K/V buffers: at D = 128, one, to make room for the dQ buffers (two of [64 x D] f32).
template <int D>
constexpr int kKvStages = D == 128 ? 1 : 2;

// Shared memory, from a 1024-byte aligned base: kKvStages buffers of {K tile, V tile} [128 x D], two
// buffers each of Q and dO [64 x D] and of dS^T [128 keys x 64 queries] (bf16), two dQ
// buffers [64 x D] (f32), 8 mbarriers, two buffers each of lse and delta [64] (f32), the items of the K/V
// buffers (ints, two words of padding after them); plus slack to align the base. 226 KiB at D = 128,
// within the 227 a block may have.
template <int D>
__host__ __device__ constexpr int smem_bytes() {
  return 1024 + (2 * kKvStages<D> * kBackwardKeys * D + 4 * kRows * D + 2 * kBackwardKeys * kRows) * 2 +
         2 * kRows * D * 4 + 8 * 8 + 4 * kRows * 4 + 4 * 4;
}

#if PT_SM90A
using namespace sm90;

constexpr float kLog2e = 1.4426950408889634f;

// Work item `work`: key tile work / Hkv of the order (a schedule item {start, real, len, key0}) for kv head
// work % Hkv, and its steps: the query tiles at or after the keys (causal) and, with a window, before
// window_query_end, for each query head of the kv head. Bidirectional, every query tile of the segment's
// real tokens, unless the keys are all pads. Step s's queries start at query0(key0) + s % row_tiles * 64.
struct KeyTile {
  int64_t start;
  int real, len, key0, kv_head, row_tiles, steps;
};

template <bool kCausal>
__device__ inline int query0(int key0) {
  return kCausal ? key0 : 0;
}

template <bool kWindowed, bool kCausal>
__device__ inline KeyTile key_tile(const Args& a, const BackwardScratch& scratch, int work) {
  const int4 seg = a.schedule.items[scratch.key_tiles[1 + work / a.Hkv]];
  const int query_end = kWindowed ? window_query_end(seg.w, kBackwardKeys, seg.y, a.window) : seg.y;
  const int row_tiles = kCausal ? (max(query_end - seg.w, 0) + kRows - 1) / kRows
                                : (seg.w < seg.y ? (seg.y + kRows - 1) / kRows : 0);
  return {seg.x, seg.y, seg.z, seg.w, work % a.Hkv, row_tiles, a.H / a.Hkv * row_tiles};
}
#endif  // PT_SM90A

// Registers: the launch bound (384, 1) gives every thread 168 at entry; setmaxnreg moves them to the
// consumers. With CUDA 13.0 the builds spill nothing.
template <int D, bool kWindowed, bool kCausal>
__global__ void __launch_bounds__(kThreads, 1)
    backward_kernel_sm90(const Args a, const __grid_constant__ Maps maps, const BackwardScratch scratch) {
  static_assert(kCausal || !kWindowed, "a sliding window is causal");
#if PT_SM90A
  // Offsets from the aligned base: K/V buffer b at b * kKv, Q/dO buffers, dS^T buffers, 8 mbarriers
  // (K/V full and empty, Q/dO full and empty, two each), lse and delta (two buffers each), the items of the
  // K/V buffers.
  constexpr uint32_t kKeyTile = kBackwardKeys * D * 2, kRowTile = kRows * D * 2, kKv = 2 * kKeyTile;
  constexpr uint32_t kDsTile = kBackwardKeys * kRows * 2, kDqTile = kRows * D / 2 * 4;
  constexpr int kStages = kKvStages<D>;
  constexpr uint32_t kQ = kStages * kKv, kDo = kQ + 2 * kRowTile, kDs = kDo + 2 * kRowTile,
                     kDq = kDs + 2 * kDsTile, kBars = kDq + 4 * kDqTile;
  constexpr uint32_t kLse = kBars + 8 * 8, kDelta = kLse + 2 * kRows * 4, kSlots = kDelta + 2 * kRows * 4;
  static_assert(kSlots + 4 * 4 + 1024 == smem_bytes<D>());
  const int items = scratch.key_tiles[0] * a.Hkv, group = a.H / a.Hkv;
  if (static_cast<int>(blockIdx.x) >= items) return;

  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
  unsigned char* const aligned = smem_raw + (base - raw);
  // slots[0, 1]: the items of the K/V buffers.
  int* const slots = reinterpret_cast<int*>(aligned + kSlots);
  const auto kv_full = [&](int b) { return base + kBars + 8 * b; };
  const auto kv_empty = [&](int b) { return base + kBars + 16 + 8 * b; };
  const auto qdo_full = [&](int b) { return base + kBars + 32 + 8 * b; };
  const auto qdo_empty = [&](int b) { return base + kBars + 48 + 8 * b; };
  if (threadIdx.x == 0) {
    for (int b = 0; b < 2; ++b) {
      mbarrier_init(kv_full(b), 1);      // the producer's item, and its copies' bytes
      mbarrier_init(kv_empty(b), 256);   // every consumer thread, after its own reads of the buffer
      mbarrier_init(qdo_full(b), 33);    // the copies' bytes, and every producer lane's lse and delta
      mbarrier_init(qdo_empty(b), 256);  // every consumer thread: each has read lse and delta itself
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  const int wg = static_cast<int>(threadIdx.x) / 128;
  if (wg == 0) {  // the producer: its first warp, whose first lane issues the TMA copies
    setmaxnreg_dec<24>();
    if (threadIdx.x >= 32) return;
    const int lane = static_cast<int>(threadIdx.x);
    int work = static_cast<int>(blockIdx.x);
    for (int n = 0, g = 0;; ++n) {  // n: items, g: steps, over the CTA's life
      const int kvb = n % kStages;
      if (n >= kStages) mbarrier_wait(kv_empty(kvb), (n / kStages + 1) & 1);
      const bool done = work >= items;
      const KeyTile kt = done ? KeyTile{} : key_tile<kWindowed, kCausal>(a, scratch, work);
      if (lane == 0) {
        slots[kvb] = work;  // items or more: the consumers stop
        if (kt.steps > 0) {
          const uint32_t kv = base + static_cast<uint32_t>(kvb) * kKv;
          const int key = static_cast<int>(kt.start) + kt.key0;
          mbarrier_arrive_expect_tx(kv_full(kvb), kKv);
          tma_tile<D, kBackwardKeys>(kv, &maps.k, key, kt.kv_head, kv_full(kvb));
          tma_tile<D, kBackwardKeys>(kv + kKeyTile, &maps.v, key, kt.kv_head, kv_full(kvb));
        } else {
          mbarrier_arrive(kv_full(kvb));
        }
      }
      if (done) break;
      // head and tile: the step's query head and row tile, counted rather than divided out of the step.
      for (int step = 0, head = kt.kv_head * group, tile = 0; step < kt.steps; ++step, ++g) {
        const int qb = g & 1;
        if (g >= 2) mbarrier_wait(qdo_empty(qb), ((g >> 1) + 1) & 1);
        const int row0 = query0<kCausal>(kt.key0) + tile * kRows;
        if (lane == 0) {
          const int token = static_cast<int>(kt.start) + row0;
          mbarrier_arrive_expect_tx(qdo_full(qb), 2 * kRowTile);
          tma_tile<D, kRows>(base + kQ + qb * kRowTile, &maps.q, token, head, qdo_full(qb));
          tma_tile<D, kRows>(base + kDo + qb * kRowTile, &maps.dout, token, head, qdo_full(qb));
        }
        // lse and delta: each lane two rows of each; pads read 0.
#pragma unroll
        for (int r = lane; r < kRows; r += 32) {
          const int i = row0 + r;
          const int64_t at = static_cast<int64_t>(head) * a.T + kt.start + (i < kt.real ? i : 0);
          const uint32_t to = static_cast<uint32_t>(qb * kRows + r) * 4;
          cp_async_4(base + kLse + to, a.lse + at, i < kt.real ? 4 : 0);
          cp_async_4(base + kDelta + to, a.delta + at, i < kt.real ? 4 : 0);
        }
        cp_async_mbarrier_arrive(qdo_full(qb));
        if (++tile == kt.row_tiles) {
          tile = 0;
          ++head;
        }
      }
      work = __shfl_sync(0xffffffffu,
                         lane == 0 ? static_cast<int>(gridDim.x) + atomicAdd(scratch.next_tile, 1) : 0, 0);
    }
    cp_async_wait_all();  // no copy outlives its thread
    return;
  }
  setmaxnreg_inc<240>();

  const int c = wg - 1, tid = static_cast<int>(threadIdx.x) - 128;
  const int warp = tid / 32 % 4, lane = tid % 32, g4 = lane / 4, t = lane % 4;
  const auto consumers_sync = [] { asm volatile("bar.sync 3, 256;\n" ::: "memory"); };
  const float* const slse = reinterpret_cast<const float*>(aligned + kLse);
  const float* const sdelta = reinterpret_cast<const float*>(aligned + kDelta);
  const float scale_log2 = a.scale * kLog2e;

  float dk[D / 2], dv[D / 2];  // dk[4 i + 2 h + e]: key thread_key0 + 8 h of the item, column 8 i + 2 t + e
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.0f;
  for (int n = 0, g = 0;; ++n) {
    const int kvb = n % kStages;
    mbarrier_wait(kv_full(kvb), n / kStages & 1);  // TMA writes through wgmma's async proxy: no fence
    const int work = slots[kvb];
    if (work >= items) break;
    const KeyTile cur = key_tile<kWindowed, kCausal>(a, scratch, work);
    const int wg_key0 = cur.key0 + 64 * c;             // the warpgroup's first key in the segment
    const int thread_key0 = wg_key0 + 16 * warp + g4;  // this thread's keys: thread_key0 and thread_key0 + 8
    for (int step = 0, head = cur.kv_head * group, tile = 0; step < cur.steps; ++step, ++g) {
      const int qb = g & 1;
      mbarrier_wait(qdo_full(qb), (g >> 1) & 1);
      const int row0 = query0<kCausal>(cur.key0) + tile * kRows, real = cur.real;
      // The descriptors of K and V are the same every step; hoisted out of the loop they would hold ~50
      // registers. Hiding the base from the optimizer recomputes them, a few integer operations per wgmma.
      uint32_t at = base;
      asm volatile("" : "+r"(at));
      const uint32_t sk = at + static_cast<uint32_t>(kvb) * kKv, sv = sk + kKeyTile;
      const uint32_t sds = at + kDs + static_cast<uint32_t>(g & 1) * kDsTile;
      const uint32_t sq = at + kQ + static_cast<uint32_t>(qb) * kRowTile;
      const uint32_t sdo = at + kDo + static_cast<uint32_t>(qb) * kRowTile;

      // No branch around the products: a wgmma left running across a branch is serialized (ptxas C7520).
      // A warpgroup with no keys in the step (the diagonal's second half, keys past the real tokens or out of
      // the window) runs its products on masked scores: P^T and dS^T are zeros, and so is its half of dS^T
      // that dQ's product reads.
      uint32_t p[4][4], ds[4][4];  // P^T and dS^T as A fragments, read by dV's and dK's products
      {
        float s[32], dp[32];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          wgmma_m64nNk16_ss<64>(s, desc_k_major(sk, kBackwardKeys, 64 * c, kk),
                                desc_k_major(sq, kRows, 0, kk), kk > 0);
        wgmma_commit();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          wgmma_m64nNk16_ss<64>(dp, desc_k_major(sv, kBackwardKeys, 64 * c, kk),
                                desc_k_major(sdo, kRows, 0, kk), kk > 0);
        wgmma_commit();
        wgmma_wait<1>();
        pin(s);

        const float* lse = slse + qb * kRows;
        const float* delta = sdelta + qb * kRows;
        const bool edge = (kCausal ? row0 < wg_key0 + 63 : wg_key0 + 64 > real) || row0 + kRows > real ||
                          (kWindowed && wg_key0 + a.window < row0 + kRows);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float2 l = *reinterpret_cast<const float2*>(lse + 8 * i + 2 * t);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = thread_key0 + 8 * (e / 2), query = row0 + 8 * i + 2 * t + e % 2;
            const bool masked = edge && ((kCausal ? key > query : key >= real) || query >= real ||
                                         (kWindowed && query - key >= a.window));
            s[4 * i + e] =
                masked ? 0.0f : exp2_ftz(fmaf(s[4 * i + e], scale_log2, -(e % 2 ? l.y : l.x) * kLog2e));
          }
        }
        to_a_fragments(s, p);
        pin(dv);
        pin(p);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kRows / 16; ++kk)
          wgmma_m64nNk16_rs<D>(dv, p[kk], desc_mn_major(sdo, kRows, kk));
        wgmma_commit();
        wgmma_wait<1>();
        pin(dp);

#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float2 d = *reinterpret_cast<const float2*>(delta + 8 * i + 2 * t);
#pragma unroll
          for (int e = 0; e < 4; ++e) dp[4 * i + e] = s[4 * i + e] * (dp[4 * i + e] - (e % 2 ? d.y : d.x));
        }
        to_a_fragments(dp, ds);
        store_a_fragments(sds, kBackwardKeys, 64 * c, ds);
      }
      fence_proxy_async();  // dS^T, written through the generic proxy, is read by wgmma
      // The dQ buffer this step fills was sent two steps ago: its reductions must have read it.
      if (lane == 0) bulk_wait_read<1>();
      consumers_sync();

      // dQ's product, then dK's: dV's (issued before dS) ran through the barrier, and dK's runs while dQ
      // goes out through shared memory.
      float dq[D / 4];  // dq[4 i + 2 h + e]: query row0 + 16 warp + g4 + 8 h, column D/2 c + 8 i + 2 t + e
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBackwardKeys / 16; ++kk)
        wgmma_m64nNk16_ss<D / 2, 1, 1>(dq, desc_mn_major(sds, kBackwardKeys, kk),
                                       desc_mn_major(sk, kBackwardKeys, kk, D / 2 * c), kk > 0);
      wgmma_commit();
      pin(dk);
      pin(ds);
#pragma unroll
      for (int kk = 0; kk < kRows / 16; ++kk) wgmma_m64nNk16_rs<D>(dk, ds[kk], desc_mn_major(sq, kRows, kk));
      wgmma_commit();
      wgmma_wait<1>();  // dV's and dQ's products
      pin(dq);
      pin(dv);
      pin(p);
      // The warpgroup's [64 x D/2] half in its buffer, in the tiled layout's order (rows past the real
      // tokens hold zeros: their dS^T is masked); then each warp adds its 16 rows, contiguous there, with
      // one bulk reduction and goes on while it runs.
      const int64_t row_start = cur.start + row0;
      const uint32_t sdq = at + kDq + static_cast<uint32_t>((g & 1) * 2 + c) * kDqTile;
      const int swizzle = static_cast<int>((row_start + g4) & 3);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t row = sdq + static_cast<uint32_t>((16 * warp + g4 + 8 * h) * (D / 2) + 2 * t) * 4;
#pragma unroll
        for (int i = 0; i < D / 16; ++i)
          asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(row + ((i ^ swizzle) * 8) * 4),
                       "f"(dq[4 * i + 2 * h]), "f"(dq[4 * i + 2 * h + 1])
                       : "memory");
      }
      fence_proxy_async();
      __syncwarp();
      if (lane == 0) {
        constexpr int kWarpRows = kRows / 4;
        bulk_reduce_add_f32(scratch.dq_accum + dq_tiled_row<D>(a.T, head, c, row_start + kWarpRows * warp),
                            sdq + static_cast<uint32_t>(kWarpRows * warp) * (D / 2) * 4, kDqTile / 4);
        bulk_commit();
      }
      wgmma_wait<0>();  // dK's product
      pin(dk);
      pin(ds);
      mbarrier_arrive(qdo_empty(qb));  // this thread's reads of the step's Q, dO, lse and delta are done
      if (++tile == cur.row_tiles) {
        tile = 0;
        ++head;
      }
    }

    // dK and dV leave through the item's K/V buffer once both warpgroups' dQ products have read K: keys up to
    // the segment's length, the real ones their sums, pads zeros.
    consumers_sync();
    {
      int id = tid;
      asm volatile("" : "+r"(id));
      const uint32_t sk = base + static_cast<uint32_t>(kvb) * kKv, sv = sk + kKeyTile;
      const int first_row = 64 * c, key0 = cur.key0 + first_row;
      const int key = key0 + id / 32 % 4 * 16 + id % 32 / 4;
      const float dk_factor[2] = {key < cur.real ? a.scale : 0.0f, key + 8 < cur.real ? a.scale : 0.0f};
      const float dv_factor[2] = {key < cur.real ? 1.0f : 0.0f, key + 8 < cur.real ? 1.0f : 0.0f};
      stage_accumulator<D>(sk, kBackwardKeys, first_row, dk, dk_factor, id);
      stage_accumulator<D>(sv, kBackwardKeys, first_row, dv, dv_factor, id);
      warpgroup_barrier(c);
      const int count = min(cur.len - key0, 64);
      copy_rows_out<D>(sk, kBackwardKeys, first_row, a.dk, cur.start + key0, count, a.Hkv, cur.kv_head, id);
      copy_rows_out<D>(sv, kBackwardKeys, first_row, a.dv, cur.start + key0, count, a.Hkv, cur.kv_head, id);
      fence_proxy_async();             // its stores and loads of the buffer come before the next TMA copy
      mbarrier_arrive(kv_empty(kvb));  // this thread's reads of the item and its buffer are done
    }
#pragma unroll
    for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.0f;
  }
  // The last reductions must have read their buffers before the CTA's shared memory goes.
  if (lane == 0) bulk_wait<0>();
#endif  // PT_SM90A: other targets hold an empty kernel that forward_sm90_available() never selects
}

// One resident CTA per SM (registers and shared memory allow no more), no more than the work bound.
template <int D, bool kWindowed, bool kCausal>
void launch_backward_kernel_sm90(const Args& a, const Maps& maps, const BackwardScratch& scratch,
                                 cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<D>();
  const auto kernel = backward_kernel_sm90<D, kWindowed, kCausal>;
  static const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  (void)configured;  // a failure resurfaces as the launch error, which the caller checks
  const int64_t items = int64_t{scratch.key_capacity} * a.Hkv;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(items, sm_count()));
  kernel<<<blocks, kThreads, kSmem, stream>>>(a, maps, scratch);
}

}  // namespace

template <int D>
void launch_backward_sm90(const Args& a, const BackwardScratch& scratch, cudaStream_t stream) {
  const Maps maps{head_tile_map(a.k, a.T, a.Hkv, D, kBackwardKeys),
                  head_tile_map(a.v, a.T, a.Hkv, D, kBackwardKeys), head_tile_map(a.q, a.T, a.H, D, kRows),
                  head_tile_map(a.dout, a.T, a.H, D, kRows)};
  launch_backward_prologue<D, true>(a, scratch, stream);
  with_mask(a, [&](auto windowed, auto causal) {
    launch_backward_kernel_sm90<D, decltype(windowed)::value, decltype(causal)::value>(a, maps, scratch,
                                                                                       stream);
  });
  launch_dq_convert<D, true>(a, scratch, stream);
}

template void launch_backward_sm90<64>(const Args&, const BackwardScratch&, cudaStream_t);
template void launch_backward_sm90<128>(const Args&, const BackwardScratch&, cudaStream_t);

}  // namespace pt::ops::cuda::attn
