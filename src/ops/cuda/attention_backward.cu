// Backward kernels. With P = exp(scale QK^T - lse) recomputed from the forward's lse, dP = dO V^T,
// delta_i = rowsum(dO_i * O_i) and dS = P * (dP - delta):  dV = P^T dO,  dK = scale dS^T Q,
// dQ = scale dS K.  Two passes keep every result deterministic and free of atomics: one block per
// (key tile, kv head) sums dK and dV over all queries of the kv head's query heads (GQA) in registers,
// and one block per (query tile, head) sums dQ over the keys. The price is computing QK^T and dO V^T
// twice (7 tile products instead of 5).
#include <cmath>

#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/attention_mma.cuh"

namespace pt::ops::cuda::attn {

namespace {

constexpr float kLog2e = 1.4426950408889634f;

// delta[h, i] = sum_d dout[i, h, d] * out[i, h, d], one warp per (token, head).
template <int D>
__global__ void __launch_bounds__(256) delta_kernel(const Args a) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= static_cast<int64_t>(a.T) * a.H) return;
  const int64_t token = warp / a.H;
  const int head = static_cast<int>(warp % a.H);
  const __nv_bfloat162* o = reinterpret_cast<const __nv_bfloat162*>(a.out + warp * D);
  const __nv_bfloat162* d = reinterpret_cast<const __nv_bfloat162*>(a.dout + warp * D);
  float sum = 0.0f;
#pragma unroll
  for (int c = lane; c < D / 2; c += 32) {
    const float2 x = __bfloat1622float2(o[c]), y = __bfloat1622float2(d[c]);
    sum += x.x * y.x + x.y * y.y;
  }
  for (int m = 16; m > 0; m /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, m);
  if (lane == 0) a.delta[static_cast<int64_t>(head) * a.T + token] = sum;
}

// dQ for kTile queries of one head: the forward's loop over keys, with dS K in place of P V.
template <int D>
__global__ void __launch_bounds__(kThreads) dq_kernel(const Args a) {
  const int item = blockIdx.x;
  if (item >= *a.schedule.count) return;
  const int4 seg = a.schedule.items[item];  // {start, real, len, row0}
  const int64_t start = seg.x;
  const int real = seg.y, row0 = seg.w, head = blockIdx.y, kv_head = head / (a.H / a.Hkv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int warp_row0 = row0 + warp * 16;
  const int warp_rows = min(16, seg.z - warp_row0), warp_real = real - warp_row0;
  const float scales[2] = {a.scale, a.scale};
  float dq[D / 8][4] = {};
  if (row0 >= real) {  // pads only
    store_rows<D>(a.dq, dq, scales, start + warp_row0, warp_rows, 0, a.H, head);
    return;
  }

  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kLd = ld<D>();
  __nv_bfloat16* sq = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* sdo = sq + kTile * kLd;
  __nv_bfloat16* sk = sdo + kTile * kLd;
  __nv_bfloat16* sv = sk + kTile * kLd;
  load_tile_async<D>(sq, a.q, start, row0, real, a.H, head);
  load_tile_async<D>(sdo, a.dout, start, row0, real, a.H, head);
  cp_async_commit();

  const float scale_log2 = a.scale * kLog2e;
  float lse_log2[2], delta[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = warp_row0 + g + 8 * half;
    const int64_t at = static_cast<int64_t>(head) * a.T + start + min(i, real - 1);
    lse_log2[half] = a.lse[at] * kLog2e;
    delta[half] = a.delta[at];
  }
  const int key_end = min(real, row0 + kTile);
  for (int key0 = 0; key0 < key_end; key0 += kTile) {
    __syncthreads();
    load_tile_async<D>(sk, a.k, start, key0, real, a.Hkv, kv_head);
    load_tile_async<D>(sv, a.v, start, key0, real, a.Hkv, kv_head);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    float s[kTile / 8][4] = {}, dp[kTile / 8][4] = {};
    gemm_abt<kTile / 8, D>(s, sq + warp * 16 * kLd, sk, kLd, kLd);
    gemm_abt<kTile / 8, D>(dp, sdo + warp * 16 * kLd, sv, kLd, kLd);
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = warp_row0 + g + 8 * (e / 2), j = key0 + 8 * n + 2 * t + e % 2;
        const float p = (j > i || i >= real) ? 0.0f : exp2f(fmaf(s[n][e], scale_log2, -lse_log2[e / 2]));
        s[n][e] = p * (dp[n][e] - delta[e / 2]);  // dS
      }
    uint32_t ds[kTile / 16][4];
    to_a_fragments<kTile>(ds, s);
    gemm_rb<D / 8, kTile>(dq, ds, sk, kLd);
  }
  store_rows<D>(a.dq, dq, scales, start + warp_row0, warp_rows, warp_real, a.H, head);
}

// dK and dV for kTile keys of one kv head. Warps own key rows, so the products are computed transposed:
// S^T = K Q^T and dP^T = V dO^T, then dV += P^T dO and dK += dS^T Q over the query tiles at or after the
// key tile, for each query head of the group.
template <int D>
__global__ void __launch_bounds__(kThreads) dkdv_kernel(const Args a) {
  const int item = blockIdx.x;
  if (item >= *a.schedule.count) return;
  const int4 seg = a.schedule.items[item];  // {start, real, len, key0}
  const int64_t start = seg.x;
  const int real = seg.y, key0 = seg.w, kv_head = blockIdx.y, group = a.H / a.Hkv;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int warp_key0 = key0 + warp * 16;
  const int warp_keys = min(16, seg.z - warp_key0), warp_real = real - warp_key0;
  const float dk_scales[2] = {a.scale, a.scale}, dv_scales[2] = {1.0f, 1.0f};
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  if (key0 < real) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int kLd = ld<D>();
    __nv_bfloat16* sk = reinterpret_cast<__nv_bfloat16*>(smem);
    __nv_bfloat16* sv = sk + kTile * kLd;
    __nv_bfloat16* sq = sv + kTile * kLd;
    __nv_bfloat16* sdo = sq + kTile * kLd;
    float* slse = reinterpret_cast<float*>(sdo + kTile * kLd);  // lse * log2(e) of the query tile
    float* sdelta = slse + kTile;
    load_tile_async<D>(sk, a.k, start, key0, real, a.Hkv, kv_head);
    load_tile_async<D>(sv, a.v, start, key0, real, a.Hkv, kv_head);
    cp_async_commit();

    const float scale_log2 = a.scale * kLog2e;
    for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
      for (int row0 = key0; row0 < real; row0 += kTile) {  // causal: queries at or after the keys
        __syncthreads();
        load_tile_async<D>(sq, a.q, start, row0, real, a.H, head);
        load_tile_async<D>(sdo, a.dout, start, row0, real, a.H, head);
        cp_async_commit();
        if (threadIdx.x < kTile) {
          const int i = row0 + static_cast<int>(threadIdx.x);
          const int64_t at = static_cast<int64_t>(head) * a.T + start + min(i, real - 1);
          slse[threadIdx.x] = a.lse[at] * kLog2e;
          sdelta[threadIdx.x] = a.delta[at];
        }
        cp_async_wait<0>();
        __syncthreads();

        float st[kTile / 8][4] = {};
        gemm_abt<kTile / 8, D>(st, sk + warp * 16 * kLd, sq, kLd, kLd);
        const bool edge = row0 < warp_key0 + 16 || row0 + kTile > real;  // diagonal or segment end
#pragma unroll
        for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int j = warp_key0 + g + 8 * (e / 2), c = 8 * n + 2 * t + e % 2, i = row0 + c;
            const bool masked = edge && (j > i || i >= real || j >= real);
            st[n][e] = masked ? 0.0f : exp2f(fmaf(st[n][e], scale_log2, -slse[c]));  // P^T
          }
        uint32_t frag[kTile / 16][4];
        to_a_fragments<kTile>(frag, st);
        gemm_rb<D / 8, kTile>(dv, frag, sdo, kLd);

        float dpt[kTile / 8][4] = {};
        gemm_abt<kTile / 8, D>(dpt, sv + warp * 16 * kLd, sdo, kLd, kLd);
#pragma unroll
        for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) st[n][e] *= dpt[n][e] - sdelta[8 * n + 2 * t + e % 2];  // dS^T
        to_a_fragments<kTile>(frag, st);
        gemm_rb<D / 8, kTile>(dk, frag, sq, kLd);
      }
    }
  }
  store_rows<D>(a.dk, dk, dk_scales, start + warp_key0, warp_keys, warp_real, a.Hkv, kv_head);
  store_rows<D>(a.dv, dv, dv_scales, start + warp_key0, warp_keys, warp_real, a.Hkv, kv_head);
}

template <class Kernel>
void allow_smem(Kernel kernel, int bytes) {
  // A failure resurfaces as the launch error, which the caller checks.
  (void)cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

}  // namespace

template <int D>
void launch_backward(const Args& a, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(a.T) * a.H;
  delta_kernel<D><<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(a);

  constexpr int kDqSmem = 4 * kTile * ld<D>() * 2;
  constexpr int kDkdvSmem = 4 * kTile * ld<D>() * 2 + 2 * kTile * 4;
  static const bool configured =
      (allow_smem(dq_kernel<D>, kDqSmem), allow_smem(dkdv_kernel<D>, kDkdvSmem), true);
  (void)configured;
  dkdv_kernel<D><<<dim3(a.schedule.capacity, a.Hkv), kThreads, kDkdvSmem, stream>>>(a);
  dq_kernel<D><<<dim3(a.schedule.capacity, a.H), kThreads, kDqSmem, stream>>>(a);
}

template void launch_backward<64>(const Args&, cudaStream_t);
template void launch_backward<128>(const Args&, cudaStream_t);

}  // namespace pt::ops::cuda::attn
