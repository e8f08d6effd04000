// Forward kernel for Hopper (sm_90a), on warpgroup MMA (ops/cuda/wgmma.cuh). It computes what the mma.sync
// forward (attention_forward.cu) computes, from the same schedule with kSm90Rows-row tiles.
//
// Persistent, one CTA of 384 threads per SM, over work items (query tile of 128 rows of one segment, head),
// warp-specialized as in FA3:
// - the producer, warpgroup 0 (24 registers a thread), of which one thread issues every copy, claims the
//   items from a counter, longest first and head by head, and copies each one's Q into one of two Q buffers,
//   then its K(j) and V(j) of the CTA's step g into stage g % kStages with TMA; each copy completes a "full"
//   mbarrier, and waits for the buffer's "empty" one. So the next item's Q and first keys arrive while the
//   current one computes;
// - two consumers, warpgroups 1 and 2 (240 registers), own query rows 64 (wg - 1) .. + 63. Per step:
//     S[64 x 128] = Q[64 x D] K^T   wgmma m64n128k16, Q and K K-major in shared memory
//     mask (causal, segment end, window), online softmax in registers (running max and sum per row, base 2)
//     O[64 x D] += P V              wgmma m64nDk16, P from registers (bf16), V MN-major in shared memory
//   and release each K or V stage as soon as their MMAs have read it; lse = max * scale + log(sum) per row
//   at the end, and O leaves through their rows of the Q buffer, which they then release.
// The consumers issue S(j) and P V(j - 1) back to back and take turns to do so (pingpong: named barriers),
// so that one's softmax runs while the other's MMAs hold the tensor cores. With a sliding window
// (kWindowed) step j covers keys key_begin + 128 j on, key_begin the key tile of the first key the tile's
// first query attends; without one key_begin is 0. Bidirectional (!kCausal), the steps run over all of the
// segment's real keys, and only the last one masks (keys past them).
//
// The kernel lab (bench_attention, H100, 2026-12-06) measured it against the previous design (256 threads,
// every thread loading, a CTA barrier a step): 1.27x on one 8k sequence at head dim 128, 1.20x at 64,
// 1.15x and 1.09x on SFT-like batches; the producer alone gave two thirds of that, the turns the rest.
// Persistence with the second Q buffer, against one CTA per item (same lab, H100, 2026-12-06): forward
// 1.14-1.16x on SFT-like batches, rows of 1k and bidirectional batches at head dim 64, 1.07-1.13x at 128;
// on one 8k sequence 1.00x at 64 and 0.95x at 128.
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/attention_order.cuh"
#include "ops/cuda/attention_sm90.cuh"
#include "ops/cuda/tensor_map.h"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda::attn {

namespace {

constexpr int kBlockN = 128;  // keys per step
constexpr int kThreads = 384;
constexpr int kStages = 2;
constexpr int kQBuffers = 2;
static_assert(kSm90Rows == 128, "two consumer warpgroups of 64 query rows");

// The TMA descriptors of q, k and v (boxes of kSm90Rows and kBlockN rows), passed as a __grid_constant__
// kernel parameter.
struct Maps {
  CUtensorMap q, k, v;
};

template <int D>
__host__ __device__ constexpr int tile_bytes(int rows) {
  return rows * D * 2;
}
// kQBuffers Q tiles, kStages stages of {K tile, V tile}, 2 kQBuffers + 4 kStages mbarriers, the items of
// the Q tiles, plus slack to align the base to 1024 bytes.
template <int D>
constexpr int smem_bytes() {
  return 1024 + kQBuffers * tile_bytes<D>(kSm90Rows) + kStages * 2 * tile_bytes<D>(kBlockN) +
         (2 * kQBuffers + 4 * kStages) * 8 + kQBuffers * 4;
}

#if PT_SM90A
using namespace sm90;

constexpr float kLog2e = 1.4426950408889634f;

// A warpgroup's rows of a tile of pads only (row0 >= real): out rows zero and lse 0, as the mma.sync kernel
// writes them. tid: the thread's index in the warpgroup.
template <int D>
__device__ void write_pad_rows(const Args& a, int64_t start, int row0, int rows, int head, int tid) {
  constexpr int kChunks = D / 8;
  for (int c = tid; c < rows * kChunks; c += 128) {
    const int64_t token = start + row0 + c / kChunks;
    *reinterpret_cast<uint4*>(a.out + (token * a.H + head) * D + (c % kChunks) * 8) = make_uint4(0, 0, 0, 0);
  }
  for (int r = tid; r < rows; r += 128) a.lse[static_cast<int64_t>(head) * a.T + start + row0 + r] = 0.0f;
}

// Work item `work` of the CTAs' list: query tile order[work % count] of head work / count (the tiles of one
// head run together: they share its K and V in L2). Causal, the tile's last query sees keys < row0 + 128;
// step j covers keys key_begin + 128 j on, key_begin <= row0 < key_end, so a real tile has a step or more.
// A tile of pads has none.
struct QueryTile {
  int start;  // T < 2^31
  int real, len, row0, head, key_begin, steps;
};

template <bool kWindowed, bool kCausal>
__device__ inline QueryTile query_tile(const Args& a, const int* order, int count, int work) {
  const int4 seg = a.schedule.items[order[work % count]];  // {start, real, len, row0}
  const int real = seg.y, row0 = seg.w;
  const int key_end = kCausal ? min(real, row0 + kSm90Rows) : real;
  const int key_begin = kWindowed ? window_key_begin(row0, a.window, kBlockN) : 0;
  const int steps = row0 < real ? (key_end - key_begin + kBlockN - 1) / kBlockN : 0;
  return {seg.x, real, seg.z, row0, work / count, key_begin, steps};
}

// Whether step j's scores, keys key0 .. key0 + kBlockN - 1 against the warpgroup's rows wg_row0 ..
// wg_row0 + 63, meet the diagonal, the segment's end, or the window's lower edge (key <= row - window for the
// last row and key key0): only then does a key of the step need masking.
template <bool kWindowed, bool kCausal>
__device__ inline bool step_needs_mask(int key0, int real, int window, int wg_row0) {
  return (kCausal && key0 + kBlockN - 1 > wg_row0) || key0 + kBlockN > real ||
         (kWindowed && key0 + window < wg_row0 + 64);
}

// Step j's online softmax in place: masks the scores when kMask (causal, segment end, window), updates the
// running max and sum per row, and leaves in s the probabilities and in rescale the factor by which o,
// which holds the steps before j, must be multiplied before P V of step j accumulates into it. s[4 i + e]
// is row thread_row0 + 8 (e / 2), key key0 + 8 i + 2 t + e % 2. Without kMask the code has no branch, so
// that ptxas keeps a wgmma in flight across it.
template <bool kWindowed, bool kCausal, bool kMask>
__device__ inline void online_softmax(float (&s)[64], int key0, int real, int window, int thread_row0, int t,
                                      float scale_log2, float (&row_max)[2], float (&row_sum)[2],
                                      float (&rescale)[2]) {
  if constexpr (kMask) {
#pragma unroll
    for (int i = 0; i < kBlockN / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = thread_row0 + 8 * (e / 2), key = key0 + 8 * i + 2 * t + e % 2;
        if ((kCausal && key > row) || key >= real || (kWindowed && row - key >= window))
          s[4 * i + e] = -INFINITY;
      }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float m = row_max[h];
#pragma unroll
    for (int i = 0; i < kBlockN / 8; ++i) m = fmaxf(m, fmaxf(s[4 * i + 2 * h], s[4 * i + 2 * h + 1]));
    m = quad_max(m);
    // Rows with every score masked so far keep max -inf; subtracting 0 instead avoids inf - inf, and
    // rescale = exp2(-inf) = 0 drops nothing (row_sum and o are still 0). Without a window every real row
    // sees key 0 in step 0; with one, a row whose window starts past step j's keys stays at -inf until a
    // later step, at the latest the last, which holds the row's own key.
    const float base = m == -INFINITY ? 0.0f : m * scale_log2;
    rescale[h] = exp2_ftz(row_max[h] * scale_log2 - base);
    row_max[h] = m;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kBlockN / 8; ++i)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) {
        s[4 * i + e] = exp2_ftz(fmaf(s[4 * i + e], scale_log2, -base));
        sum += s[4 * i + e];
      }
    row_sum[h] = row_sum[h] * rescale[h] + sum;
  }
}

// online_softmax with the mask decided at run time.
template <bool kWindowed, bool kCausal>
__device__ inline void online_softmax_any(float (&s)[64], int key0, int real, int window, int wg_row0,
                                          int thread_row0, int t, float scale_log2, float (&row_max)[2],
                                          float (&row_sum)[2], float (&rescale)[2]) {
  if (step_needs_mask<kWindowed, kCausal>(key0, real, window, wg_row0))
    online_softmax<kWindowed, kCausal, true>(s, key0, real, window, thread_row0, t, scale_log2, row_max,
                                             row_sum, rescale);
  else
    online_softmax<kWindowed, kCausal, false>(s, key0, real, window, thread_row0, t, scale_log2, row_max,
                                              row_sum, rescale);
}

template <int D>
__device__ inline void rescale_rows(float (&o)[D / 2], const float (&rescale)[2]) {
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[4 * n + e] *= rescale[e / 2];
}

// The end of a warpgroup's rows: O = o / row_sum (pad rows zero) and lse. O leaves through the warpgroup's
// own 64 rows of the Q tile sq, which only its own S products (all complete) read. wg: the consumer
// warpgroup (0 or 1); tid: the thread's index within the consumer warpgroups.
template <int D>
__device__ inline void finish_rows(const Args& a, float (&o)[D / 2], const float (&row_max)[2],
                                   float (&row_sum)[2], uint32_t sq, int wg, int thread_row0, int64_t start,
                                   int wg_row0, int real, int len, int head, int tid) {
  const int t = tid % 4;
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] = quad_sum(row_sum[h]);
    const int row = thread_row0 + 8 * h;
    const bool keep = row < real;
    inv[h] = keep && row_sum[h] > 0.0f ? 1.0f / row_sum[h] : 0.0f;
    // Natural-log units: row_sum = sum exp2((s - max) scale log2e) = sum exp((s - max) scale).
    if (t == 0 && row < len)  // past the segment: another segment's tokens
      a.lse[static_cast<int64_t>(head) * a.T + start + row] =
          keep ? row_max[h] * a.scale + logf(row_sum[h]) : 0.0f;
  }
  stage_accumulator<D>(sq, kSm90Rows, 64 * wg, o, inv, tid);
  warpgroup_barrier(wg);
  copy_rows_out<D>(sq, kSm90Rows, 64 * wg, a.out, start + wg_row0, min(len - wg_row0, 64), a.H, head, tid);
}
#endif  // PT_SM90A

// Registers: the launch bound (384, 1) gives every thread 168 at entry; setmaxnreg moves them to the
// consumers.
template <int D, bool kWindowed, bool kCausal>
__global__ void __launch_bounds__(kThreads, 1)
    forward_kernel_sm90(const Args a, const __grid_constant__ Maps maps, const int* order, int* next) {
  static_assert(kCausal || !kWindowed, "a sliding window is causal");
#if PT_SM90A
  const int count = *a.schedule.count, items = count * a.H;
  if (static_cast<int>(blockIdx.x) >= items) return;

  // The swizzle pattern repeats every 1024 bytes and the descriptors assume base offset 0: the dynamic base
  // (only 16-byte aligned) is rounded up inside the slack smem_bytes() adds.
  extern __shared__ unsigned char smem_raw[];
  constexpr uint32_t kQBytes = tile_bytes<D>(kSm90Rows), kKVBytes = tile_bytes<D>(kBlockN);
  const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
  const auto sq = [&](int b) { return base + static_cast<uint32_t>(b) * kQBytes; };
  const auto sk = [&](int stage) { return sq(kQBuffers) + static_cast<uint32_t>(stage) * 2 * kKVBytes; };
  const auto sv = [&](int stage) { return sk(stage) + kKVBytes; };
  // Barriers: per Q buffer full and empty, then per stage K full, V full, K empty, V empty; then the items
  // of the Q buffers.
  const uint32_t bars = sk(kStages);
  const auto q_full = [&](int b) { return bars + 8 * b; };
  const auto q_empty = [&](int b) { return bars + 8 * (kQBuffers + b); };
  const auto k_full = [&](int stage) { return bars + 8 * (2 * kQBuffers + stage); };
  const auto v_full = [&](int stage) { return bars + 8 * (2 * kQBuffers + kStages + stage); };
  const auto k_empty = [&](int stage) { return bars + 8 * (2 * kQBuffers + 2 * kStages + stage); };
  const auto v_empty = [&](int stage) { return bars + 8 * (2 * kQBuffers + 3 * kStages + stage); };
  int* const slots = reinterpret_cast<int*>(smem_raw + (bars - raw) + 8 * (2 * kQBuffers + 4 * kStages));

  if (threadIdx.x == 0) {
    for (int b = 0; b < kQBuffers; ++b) {
      mbarrier_init(q_full(b), 1);     // the producer's item, and its copy's bytes
      mbarrier_init(q_empty(b), 256);  // every consumer thread, after its rows left through the buffer
    }
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(k_full(stage), 1);  // the producer's arrival, and its copies' bytes
      mbarrier_init(v_full(stage), 1);
      mbarrier_init(k_empty(stage), 2);  // one arrival per consumer warpgroup
      mbarrier_init(v_empty(stage), 2);
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  const int wg = static_cast<int>(threadIdx.x) / 128;
  // Persistent: items claimed from a counter, each's Q into Q buffer n % 2, and K(j) and V(j) of the CTA's
  // step g (counted over its life) into stage g % kStages once the consumers freed it.
  if (wg == 0) {  // the producer: its first thread issues every copy
    setmaxnreg_dec<24>();
    if (threadIdx.x != 0) return;
    int work = static_cast<int>(blockIdx.x);
    for (int n = 0, g = 0;; ++n) {
      const int qb = n % kQBuffers;
      if (n >= kQBuffers)
        mbarrier_wait(q_empty(qb), ((n / kQBuffers) + 1) & 1);  // the buffer's previous item has left
      const bool done = work >= items;
      const QueryTile qt = done ? QueryTile{} : query_tile<kWindowed, kCausal>(a, order, count, work);
      slots[qb] = work;  // items or more: the consumers stop
      if (qt.steps > 0) {
        mbarrier_arrive_expect_tx(q_full(qb), kQBytes);
        tma_tile<D, kSm90Rows>(sq(qb), &maps.q, qt.start + qt.row0, qt.head, q_full(qb));
      } else {
        mbarrier_arrive(q_full(qb));
      }
      if (done) break;
      const int kv_head = qt.head / (a.H / a.Hkv);
      for (int j = 0; j < qt.steps; ++j, ++g) {
        const int stage = g % kStages, key = qt.start + qt.key_begin + j * kBlockN;
        const uint32_t parity = (g / kStages + 1) & 1;  // the previous use's release
        if (g >= kStages) mbarrier_wait(k_empty(stage), parity);
        mbarrier_arrive_expect_tx(k_full(stage), kKVBytes);
        tma_tile<D, kBlockN>(sk(stage), &maps.k, key, kv_head, k_full(stage));
        if (g >= kStages) mbarrier_wait(v_empty(stage), parity);
        mbarrier_arrive_expect_tx(v_full(stage), kKVBytes);
        tma_tile<D, kBlockN>(sv(stage), &maps.v, key, kv_head, v_full(stage));
      }
      work = static_cast<int>(gridDim.x) + atomicAdd(next, 1);
    }
    return;
  }
  setmaxnreg_inc<240>();

  const int c = wg - 1, tid = static_cast<int>(threadIdx.x) - 128;  // consumer warpgroup, its thread index
  const int warp = tid / 32 % 4, lane = tid % 32, t = lane % 4;
  const float scale_log2 = a.scale * kLog2e;
  // TMA writes the stages through the async proxy that wgmma reads them through: no proxy fence.
  const auto wait_full = [&](uint32_t bar, int g) {
    mbarrier_wait(bar, static_cast<uint32_t>(g / kStages) & 1);
  };
  const auto release = [&](uint32_t bar) {
    if (tid % 128 == 0) mbarrier_arrive(bar);
  };
  // Turns: consumer c waits on barrier 3 + c (its 128 threads with the other's 128 arrivals) before it
  // issues, and arrives on the other's after. Consumer 1 lets consumer 0 go first; consumer 0 takes the
  // turn consumer 1 passes last, which no issue waits for, before the CTA ends.
  const auto take_turn = [&] { asm volatile("bar.sync %0, 256;\n" ::"r"(3 + c) : "memory"); };
  const auto pass_turn = [&] { asm volatile("bar.arrive %0, 256;\n" ::"r"(4 - c) : "memory"); };
  if (c == 1) pass_turn();
  for (int n = 0, g = 0;; ++n) {
    const int qb = n % kQBuffers;
    mbarrier_wait(q_full(qb), (n / kQBuffers) & 1);
    const int work = slots[qb];
    if (work >= items) break;
    const QueryTile qt = query_tile<kWindowed, kCausal>(a, order, count, work);
    const int wg_row0 = qt.row0 + 64 * c, real = qt.real;
    if (qt.steps == 0) {
      write_pad_rows<D>(a, qt.start, wg_row0, max(min(qt.len - wg_row0, 64), 0), qt.head, tid % 128);
      mbarrier_arrive(q_empty(qb));
      continue;
    }
    const int thread_row0 = wg_row0 + 16 * warp + lane / 4;
    // The descriptors of the Q tile and of the stages are the same every step; hoisted out of the loop they
    // would hold tens of registers and spill. Hiding the base from the optimizer recomputes them, a few
    // integer operations per wgmma.
    const auto hidden_base = [&] {
      uint32_t at = base;
      asm volatile("" : "+r"(at));
      return at;
    };
    const auto issue_s = [&](float(&s)[64], int stage) {
      const uint32_t at = hidden_base(), q_tile = at + static_cast<uint32_t>(qb) * kQBytes;
      const uint32_t k_tile = at + kQBuffers * kQBytes + static_cast<uint32_t>(stage) * 2 * kKVBytes;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        wgmma_m64nNk16_ss<128>(s, desc_k_major(q_tile, kSm90Rows, 64 * c, kk),
                               desc_k_major(k_tile, kBlockN, 0, kk), kk > 0);
      wgmma_commit();
    };
    const auto issue_pv = [&](float(&o)[D / 2], uint32_t(&p)[kBlockN / 16][4], int stage) {
      const uint32_t v_tile =
          hidden_base() + kQBuffers * kQBytes + static_cast<uint32_t>(stage) * 2 * kKVBytes + kKVBytes;
      pin(o);
      pin(p);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk)
        wgmma_m64nNk16_rs<D>(o, p[kk], desc_mn_major(v_tile, kBlockN, kk));
      wgmma_commit();
    };

    float o[D / 2], s[64], row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}, rescale[2];
    uint32_t p[kBlockN / 16][4];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
    wait_full(k_full(g % kStages), g);
    take_turn();
    issue_s(s, g % kStages);
    pass_turn();
    wgmma_wait<0>();
    pin(s);
    release(k_empty(g % kStages));
    online_softmax_any<kWindowed, kCausal>(s, qt.key_begin, real, a.window, wg_row0, thread_row0, t,
                                           scale_log2, row_max, row_sum, rescale);
    to_a_fragments(s, p);

    // Step j >= 1 (the CTA's step g + j): S(j) and P V of step j - 1 issued back to back, step j's softmax
    // under P V (FA3's intra-warpgroup overlap). Each body is built with and without masking and holds no
    // branch: ptxas waits for every wgmma in flight where control flow merges.
    const auto step = [&](int j, auto mask) {
      const int ks = (g + j) % kStages, vs = (g + j - 1) % kStages;
      wait_full(k_full(ks), g + j);
      wait_full(v_full(vs), g + j - 1);
      rescale_rows<D>(o, rescale);
      take_turn();
      issue_s(s, ks);
      issue_pv(o, p, vs);
      pass_turn();
      wgmma_wait<1>();  // S(j) is done
      pin(s);
      release(k_empty(ks));
      online_softmax<kWindowed, kCausal, decltype(mask)::value>(s, qt.key_begin + j * kBlockN, real, a.window,
                                                                thread_row0, t, scale_log2, row_max, row_sum,
                                                                rescale);
      pin(s);  // the exponentials before the wait: they run under P V
      wgmma_wait<0>();
      pin(o);
      pin(p);
      release(v_empty(vs));
      to_a_fragments(s, p);
    };
    for (int j = 1; j < qt.steps; ++j) {
      if (step_needs_mask<kWindowed, kCausal>(qt.key_begin + j * kBlockN, real, a.window, wg_row0))
        step(j, std::true_type{});
      else
        step(j, std::false_type{});
    }

    g += qt.steps;
    const int last = (g - 1) % kStages;
    wait_full(v_full(last), g - 1);
    rescale_rows<D>(o, rescale);
    take_turn();
    issue_pv(o, p, last);
    pass_turn();
    wgmma_wait<0>();
    pin(o);
    release(v_empty(last));
    // The item's fields again, and the thread's index hidden from the optimizer: the epilogue's addresses
    // would otherwise be hoisted out of the item loop and held (spilled) across every step.
    int work_again = slots[qb], id = tid;
    asm volatile("" : "+r"(work_again), "+r"(id));
    const QueryTile fin = query_tile<kWindowed, kCausal>(a, order, count, work_again);
    finish_rows<D>(a, o, row_max, row_sum, sq(qb), c, fin.row0 + 64 * c + 16 * (id / 32 % 4) + id % 32 / 4,
                   fin.start, fin.row0 + 64 * c, fin.real, fin.len, fin.head, id);
    fence_proxy_async();           // its stores and loads of the buffer come before the next item's TMA copy
    mbarrier_arrive(q_empty(qb));  // this thread's rows have left through the buffer
  }
  if (c == 0) take_turn();
#endif  // PT_SM90A: other targets hold an empty kernel that forward_sm90_available() never selects
}

// The work list's order: every schedule item, by decreasing number of key steps (with a window, those from
// key_begin; bidirectional, those over the segment's real keys; a tile of pads then counts none).
__global__ void __launch_bounds__(kOrderThreads) order_kernel(const Args a, int* order, int* next) {
  const int window = a.window;
  const bool causal = a.causal;
  if (threadIdx.x == 0) *next = 0;
  order_by_work(
      a.schedule, [](int4) { return true; },
      [window, causal](int4 item) {
        if (!causal) return item.w < item.y ? (item.y + kBlockN - 1) / kBlockN : 0;
        const int key_end = min(item.y, item.w + kSm90Rows);
        if (window == 0) return (key_end + kBlockN - 1) / kBlockN;
        return item.w < item.y ? (key_end - window_key_begin(item.w, window, kBlockN) + kBlockN - 1) / kBlockN
                               : 0;
      },
      order, a.schedule.capacity);
}

}  // namespace

bool forward_sm90_available() {
  static const bool available = [] {
    cudaFuncAttributes attributes{};
    int device = 0, major = 0;
    return cudaGetDevice(&device) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
           major == 9 &&
           cudaFuncGetAttributes(&attributes, forward_kernel_sm90<128, false, true>) == cudaSuccess &&
           attributes.binaryVersion == 90;
  }();
  return available;
}

namespace {

// One resident CTA per SM (registers and shared memory allow no more), no more than the work bound.
template <int D, bool kWindowed, bool kCausal>
void launch_forward_kernel_sm90(const Args& a, const Maps& maps, const int* order, int* next,
                                cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<D>();
  const auto kernel = forward_kernel_sm90<D, kWindowed, kCausal>;
  static const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  (void)configured;  // a failure resurfaces as the launch error, which the caller checks
  const int64_t items = int64_t{a.schedule.capacity} * a.H;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(items, sm_count()));
  kernel<<<blocks, kThreads, kSmem, stream>>>(a, maps, order, next);
}

}  // namespace

template <int D>
void launch_forward_sm90(const Args& a, int* order, cudaStream_t stream) {
  int* const next = order + a.schedule.capacity;
  const Maps maps{head_tile_map(a.q, a.T, a.H, D, kSm90Rows), head_tile_map(a.k, a.T, a.Hkv, D, kBlockN),
                  head_tile_map(a.v, a.T, a.Hkv, D, kBlockN)};
  order_kernel<<<1, kOrderThreads, 0, stream>>>(a, order, next);
  with_mask(a, [&](auto windowed, auto causal) {
    launch_forward_kernel_sm90<D, decltype(windowed)::value, decltype(causal)::value>(a, maps, order, next,
                                                                                      stream);
  });
}

template void launch_forward_sm90<64>(const Args&, int*, cudaStream_t);
template void launch_forward_sm90<128>(const Args&, int*, cudaStream_t);

}  // namespace pt::ops::cuda::attn
