// Backward kernel for Hopper (sm_90a), on warpgroup MMA (ops/cuda/wgmma.cuh). It computes what the mma.sync
// backward (attention_backward.cu) computes, from the same prologue (delta, dq_accum cleared, key-tile
// order), work list and dQ conversion: with P = exp(scale QK^T - lse), dP = dO V^T, dS = P * (dP - delta):
// dV = P^T dO, dK = scale dS^T Q, dQ = scale dS K, dQ summed over key tiles by fp32 atomics into dq_accum.
//
// One CTA of 256 threads per (key tile of kBackwardKeys = 128 keys, kv head): warpgroup wg owns keys 64 wg ..
// 64 wg + 63 and sums their dK and dV [64 x D] in registers over the query tiles of kBackwardRows = 64 rows
// at or after the key tile (causal), head by head over the kv head's query heads (GQA). K and V stay in
// shared memory; Q, dO, lse and delta of step j + 1 load (cp.async, two buffers) during step j. Per step,
// in the transposed orientation (the warpgroup's keys are the MMA's M):
//   S^T[64 x 64] = K Q^T, dP^T = V dO^T   wgmma m64n64k16, both operands K-major in shared memory
//   P^T, dS^T = P^T * (dP^T - delta)      registers, masked (key > query, query past the real tokens)
//   dV += P^T dO, dK += dS^T Q            wgmma m64nDk16, A from registers, dO / Q MN-major
//   dS^T -> shared memory (bf16), barrier
//   dQ[64 x D/2] = dS K                   wgmma m64n(D/2)k16, dS^T and K both MN-major, one half of D
//                                         per warpgroup; red.global.add.v2.f32 into dq_accum
// Like the forward, not yet FA3: no producer warp or TMA, and each warpgroup waits for its MMAs.
#include <cmath>
#include <type_traits>

#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/attention_sm90.cuh"

namespace pt::ops::cuda::attn {

namespace {

constexpr int kThreads = 256;
constexpr int kRows = kBackwardRows;  // queries per step
static_assert(kBackwardKeys == 128 && kRows == 64, "two warpgroups of 64 keys against 64-query steps");

// Shared memory, from a 1024-byte aligned base: K and V tiles [128 x D], two buffers each of Q and dO
// [64 x D], dS^T [128 keys x 64 queries] (bf16), two buffers each of lse and delta [64] (f32); plus slack to
// align the base.
template <int D>
constexpr int smem_bytes() {
  return 1024 + (2 * kBackwardKeys * D + 4 * kRows * D + kBackwardKeys * kRows) * 2 + 4 * kRows * 4;
}

#if PT_SM90A
using namespace sm90;

constexpr float kLog2e = 1.4426950408889634f;
#endif  // PT_SM90A

// Registers: __launch_bounds__(256, 1) lets ptxas use up to 255 per thread (dK and dV alone take D); it
// takes 254 (D = 128) and 215 (D = 64) with no local memory.
template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    backward_kernel_sm90(const Args a, const BackwardScratch scratch) {
#if PT_SM90A
  // Offsets of the parts of smem_bytes() from the aligned base.
  constexpr uint32_t kKeyTile = kBackwardKeys * D * 2, kRowTile = kRows * D * 2;
  constexpr uint32_t kV = kKeyTile, kQ = 2 * kKeyTile, kDo = kQ + 2 * kRowTile, kDs = kDo + 2 * kRowTile;
  constexpr uint32_t kLse = kDs + kBackwardKeys * kRows * 2, kDelta = kLse + 2 * kRows * 4;
  const int block = static_cast<int>(blockIdx.x), slot = block / a.Hkv, kv_head = block % a.Hkv;
  if (slot >= scratch.key_tiles[0]) return;
  const int4 seg = a.schedule.items[scratch.key_tiles[1 + slot]];  // {start, real, len, key0}
  const int64_t start = seg.x;
  const int real = seg.y, len = seg.z, key0 = seg.w, group = a.H / a.Hkv;
  const int wg = static_cast<int>(threadIdx.x) / 128, warp = static_cast<int>(threadIdx.x) / 32 % 4;
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int wg_key0 = key0 + 64 * wg;               // the warpgroup's first key in the segment
  const int thread_key0 = wg_key0 + 16 * warp + g;  // this thread's keys: thread_key0 and thread_key0 + 8

  // dk[4 i + 2 h + e] (and dv) is key thread_key0 + 8 h, column 8 i + 2 t + e.
  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.0f;
  if (key0 < real) {
    // The descriptors assume 1024-byte aligned tiles: the dynamic base (16-byte aligned) is rounded up
    // inside the slack of smem_bytes().
    extern __shared__ unsigned char smem_raw[];
    const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
    const float* slse = reinterpret_cast<const float*>(smem_raw + (base - raw) + kLse);
    const float* sdelta = reinterpret_cast<const float*>(smem_raw + (base - raw) + kDelta);

    load_tile<D, kBackwardKeys, kThreads>(base, a.k, start, key0, real, a.Hkv, kv_head);
    load_tile<D, kBackwardKeys, kThreads>(base + kV, a.v, start, key0, real, a.Hkv, kv_head);
    cp_async_commit();

    // Steps run over the query tiles at or after the keys (causal), head by head.
    const int row_tiles = (real - key0 + kRows - 1) / kRows, steps = group * row_tiles;
    auto load_step = [&](int step) {
      const int buf = step & 1, head = kv_head * group + step / row_tiles;
      const int row0 = key0 + step % row_tiles * kRows;
      load_tile<D, kRows, kThreads>(base + kQ + buf * kRowTile, a.q, start, row0, real, a.H, head);
      load_tile<D, kRows, kThreads>(base + kDo + buf * kRowTile, a.dout, start, row0, real, a.H, head);
      if (threadIdx.x < 2 * kRows) {  // lse by the first kRows threads, delta by the next; pads read 0
        const bool is_lse = threadIdx.x < kRows;
        const int r = static_cast<int>(threadIdx.x) % kRows, i = row0 + r;
        const int64_t at = static_cast<int64_t>(head) * a.T + start + (i < real ? i : 0);
        cp_async_4(base + (is_lse ? kLse : kDelta) + static_cast<uint32_t>(buf * kRows + r) * 4,
                   (is_lse ? a.lse : a.delta) + at, i < real ? 4 : 0);
      }
      cp_async_commit();
    };
    load_step(0);

    const float scale_log2 = a.scale * kLog2e;
    for (int step = 0; step < steps; ++step) {
      // The buffers step + 1 fills were last read before the previous step's dS^T barrier, by every thread.
      if (step + 1 < steps) {
        load_step(step + 1);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      fence_proxy_async();
      __syncthreads();  // this step's tiles are visible; the previous step's dQ MMAs have read dS^T
      const int buf = step & 1, head = kv_head * group + step / row_tiles;
      const int row0 = key0 + step % row_tiles * kRows;
      // The descriptors of K and V are the same every step; hoisted out of the loop they would hold ~50
      // registers (spilling at D = 128). Hiding the base from the optimizer recomputes them, a few integer
      // operations per wgmma.
      uint32_t at = base;
      asm volatile("" : "+r"(at));
      const uint32_t sk = at, sv = at + kV, sds = at + kDs;
      const auto sq = [&](int b) { return at + kQ + static_cast<uint32_t>(b) * kRowTile; };
      const auto sdo = [&](int b) { return at + kDo + static_cast<uint32_t>(b) * kRowTile; };

      // A warpgroup whose keys all lie after every real query of the step has P = dS = 0: it skips the
      // step, and the dQ product below reads none of its dS^T rows (that happens only when row0 == key0).
      if (wg_key0 < min(row0 + kRows, real)) {
        // s[4 i + 2 h + e]: key thread_key0 + 8 h, query row0 + 8 i + 2 t + e. Both written by their first
        // k-step (accumulate false), so no instructions zero them.
        float s[32], dp[32];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          wgmma_m64nNk16_ss<64>(s, desc_k_major(sk, kBackwardKeys, 64 * wg, kk),
                                desc_k_major(sq(buf), kRows, 0, kk), kk > 0);
        wgmma_commit();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          wgmma_m64nNk16_ss<64>(dp, desc_k_major(sv, kBackwardKeys, 64 * wg, kk),
                                desc_k_major(sdo(buf), kRows, 0, kk), kk > 0);
        wgmma_commit();
        wgmma_wait<1>();  // S^T is ready; dP^T's MMAs run on under the exponentials
        pin(s);

        const float* lse = slse + buf * kRows;
        const float* delta = sdelta + buf * kRows;
        const bool edge = row0 < wg_key0 + 63 || row0 + kRows > real;  // the diagonal or the segment's end
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float2 l = *reinterpret_cast<const float2*>(lse + 8 * i + 2 * t);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = thread_key0 + 8 * (e / 2), query = row0 + 8 * i + 2 * t + e % 2;
            const bool masked = edge && (key > query || query >= real);
            s[4 * i + e] =  // P^T
                masked ? 0.0f : exp2f(fmaf(s[4 * i + e], scale_log2, -(e % 2 ? l.y : l.x) * kLog2e));
          }
        }
        uint32_t p[4][4];
        to_a_fragments(s, p);
        pin(dv);
        pin(p);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kRows / 16; ++kk)
          wgmma_m64nNk16_rs<D>(dv, p[kk], desc_mn_major(sdo(buf), kRows, kk));
        wgmma_commit();
        wgmma_wait<1>();  // dP^T is ready; dV's MMAs run on under dS
        pin(dp);

#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float2 d = *reinterpret_cast<const float2*>(delta + 8 * i + 2 * t);
#pragma unroll
          for (int e = 0; e < 4; ++e) dp[4 * i + e] = s[4 * i + e] * (dp[4 * i + e] - (e % 2 ? d.y : d.x));
        }
        uint32_t ds[4][4];
        to_a_fragments(dp, ds);
        // Before the MMAs that read ds: registers of a running wgmma are off limits until its wait.
        store_a_fragments(sds, kBackwardKeys, 64 * wg, ds);

        pin(dk);
        pin(ds);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kRows / 16; ++kk)
          wgmma_m64nNk16_rs<D>(dk, ds[kk], desc_mn_major(sq(buf), kRows, kk));
        wgmma_commit();
        wgmma_wait<0>();  // the buffers are refilled after the next barrier; p and ds die here
        pin(dv);
        pin(dk);
        pin(p);
        pin(ds);
      }
      fence_proxy_async();  // dS^T, written through the generic proxy, is read by wgmma
      __syncthreads();

      // dQ[64 x D/2] of the step's queries, columns D/2 wg on: the contraction runs over the key tile's
      // rows, but keys past row0 + 63 have dS = 0, so a diagonal step (row0 == key0) stops after 64.
      float dq[D / 4];  // dq[4 i + 2 h + e]: query row0 + 16 warp + g + 8 h, column D/2 wg + 8 i + 2 t + e
      const auto dq_product = [&](auto ksteps) {  // a fixed count: no branch between the wgmmas
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < decltype(ksteps)::value; ++kk)
          wgmma_m64nNk16_ss<D / 2, 1, 1>(dq, desc_mn_major(sds, kBackwardKeys, kk),
                                         desc_mn_major(sk, kBackwardKeys, kk, D / 2 * wg), kk > 0);
        wgmma_commit();
        wgmma_wait<0>();
        pin(dq);
      };
      if (row0 == key0)
        dq_product(std::integral_constant<int, 4>{});
      else
        dq_product(std::integral_constant<int, kBackwardKeys / 16>{});
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int query = row0 + 16 * warp + g + 8 * h;
        if (query >= real) continue;
        float* row = scratch.dq_accum + ((start + query) * a.H + head) * D + D / 2 * wg + 2 * t;
#pragma unroll
        for (int i = 0; i < D / 16; ++i) red_add_f32x2(row + 8 * i, dq[4 * i + 2 * h], dq[4 * i + 2 * h + 1]);
      }
    }
  }

  // Keys up to the segment's length: the real ones get dK and dV, pads zeros (as the mma.sync kernel).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = thread_key0 + 8 * h;
    if (key >= len) continue;
    const bool keep = key < real;
    const int64_t at = ((start + key) * a.Hkv + kv_head) * D + 2 * t;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const float k0 = dk[4 * i + 2 * h] * a.scale, k1 = dk[4 * i + 2 * h + 1] * a.scale;
      *reinterpret_cast<__nv_bfloat162*>(a.dk + at + 8 * i) =
          __floats2bfloat162_rn(keep ? k0 : 0.0f, keep ? k1 : 0.0f);
      *reinterpret_cast<__nv_bfloat162*>(a.dv + at + 8 * i) =
          __floats2bfloat162_rn(keep ? dv[4 * i + 2 * h] : 0.0f, keep ? dv[4 * i + 2 * h + 1] : 0.0f);
    }
  }
#endif  // PT_SM90A: other targets hold an empty kernel that forward_sm90_available() never selects
}

}  // namespace

template <int D>
void launch_backward_sm90(const Args& a, const BackwardScratch& scratch, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<D>();
  static const cudaError_t configured =
      cudaFuncSetAttribute(backward_kernel_sm90<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  (void)configured;  // a failure resurfaces as the launch error, which the caller checks
  launch_backward_prologue<D>(a, scratch, stream);
  const unsigned blocks = static_cast<unsigned>(scratch.key_capacity) * static_cast<unsigned>(a.Hkv);
  backward_kernel_sm90<D><<<blocks, kThreads, kSmem, stream>>>(a, scratch);
  launch_dq_convert<D>(a, scratch, stream);
}

template void launch_backward_sm90<64>(const Args&, const BackwardScratch&, cudaStream_t);
template void launch_backward_sm90<128>(const Args&, const BackwardScratch&, cudaStream_t);

}  // namespace pt::ops::cuda::attn
