// Forward kernel, flash-attention 2 style: a block owns kTile queries of one head and streams the
// segment's keys up to the causal limit (bidirectional, !kCausal: all of its real keys) in kTile-key steps,
// keeping a running max and sum per row (online softmax) so that scores never leave registers; lse = max +
// log(sum) is saved for the backward. With a sliding window (kWindowed) the steps start at the key tile of
// the first key the tile's first query attends.
#include <cmath>

#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/attention_mma.cuh"

namespace pt::ops::cuda::attn {

namespace {

constexpr float kLog2e = 1.4426950408889634f;

template <int D, bool kWindowed, bool kCausal>
__global__ void __launch_bounds__(kThreads) forward_kernel(const Args a) {
  static_assert(kCausal || !kWindowed, "a sliding window is causal");
  const int item = blockIdx.x;
  if (item >= *a.schedule.count) return;
  const int4 seg = a.schedule.items[item];  // {start, real, len, row0}
  const int64_t start = seg.x;
  const int real = seg.y, row0 = seg.w, head = blockIdx.y, kv_head = head / (a.H / a.Hkv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int warp_row0 = row0 + warp * 16;  // the warp's first query row within the segment
  const int warp_rows = min(16, seg.z - warp_row0), warp_real = real - warp_row0;

  if (row0 >= real) {  // a tile of pads: zeros, no work
    const float unit[2] = {1.0f, 1.0f};
    const float zeros[D / 8][4] = {};
    store_rows<D>(a.out, zeros, unit, start + warp_row0, warp_rows, 0, a.H, head);
    if (threadIdx.x < kTile && row0 + static_cast<int>(threadIdx.x) < seg.z)
      a.lse[static_cast<int64_t>(head) * a.T + start + row0 + threadIdx.x] = 0.0f;
    return;
  }

  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kLd = ld<D>();
  __nv_bfloat16* sq = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* sk = sq + kTile * kLd;
  __nv_bfloat16* sv = sk + kTile * kLd;

  load_tile_async<D>(sq, a.q, start, row0, real, a.H, head);
  cp_async_commit();

  const float scale_log2 = a.scale * kLog2e;
  float o[D / 8][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  // Causal: the tile's last query sees keys < row0 + kTile. key_begin <= row0 < key_end: at least one step.
  const int key_end = kCausal ? min(real, row0 + kTile) : real;
  const int key_begin = kWindowed ? window_key_begin(row0, a.window, kTile) : 0;
  for (int key0 = key_begin; key0 < key_end; key0 += kTile) {
    __syncthreads();  // the previous step's readers of sk and sv are done
    load_tile_async<D>(sk, a.k, start, key0, real, a.Hkv, kv_head);
    cp_async_commit();
    load_tile_async<D>(sv, a.v, start, key0, real, a.Hkv, kv_head);
    cp_async_commit();
    cp_async_wait<1>();  // q and k have landed; v may still be in flight during QK^T
    __syncthreads();

    float s[kTile / 8][4] = {};
    gemm_abt<kTile / 8, D>(s, sq + warp * 16 * kLd, sk, kLd, kLd);
    // The diagonal (causal only), the segment's end, or the window's lower edge: key j <= i - window for the
    // warp's last row i = warp_row0 + 15 and j = key0.
    if ((kCausal && key0 + kTile > warp_row0) || key0 + kTile > real ||
        (kWindowed && key0 + a.window < warp_row0 + 16)) {
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = warp_row0 + g + 8 * (e / 2), j = key0 + 8 * n + 2 * t + e % 2;
          if (kCausal ? j > i || j >= real || (kWindowed && i - j >= a.window) : j >= real)
            s[n][e] = -INFINITY;
        }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float m = row_max[half];
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n) m = fmaxf(m, fmaxf(s[n][2 * half], s[n][2 * half + 1]));
      m = quad_max(m);
      // Rows with every score masked so far (pads; with a window, rows whose window starts past this step's
      // keys) keep max -inf; subtracting 0 instead avoids inf - inf, and rescale = exp2(-inf) = 0 drops
      // nothing (row_sum and o are still 0). A real row sees at least its own key, by the last step.
      const float base = m == -INFINITY ? 0.0f : m * scale_log2;
      const float rescale = exp2f(row_max[half] * scale_log2 - base);
      row_max[half] = m;
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
        for (int e = 2 * half; e < 2 * half + 2; ++e) {
          s[n][e] = exp2f(fmaf(s[n][e], scale_log2, -base));
          sum += s[n][e];
        }
      row_sum[half] = row_sum[half] * rescale + sum;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) o[n][2 * half] *= rescale, o[n][2 * half + 1] *= rescale;
    }
    uint32_t p[kTile / 16][4];
    to_a_fragments<kTile>(p, s);
    cp_async_wait<0>();
    __syncthreads();
    gemm_rb<D / 8, kTile>(o, p, sv, kLd);
  }

  float inv_sum[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    row_sum[half] = quad_sum(row_sum[half]);
    inv_sum[half] = row_sum[half] > 0.0f ? 1.0f / row_sum[half] : 0.0f;
  }
  store_rows<D>(a.out, o, inv_sum, start + warp_row0, warp_rows, warp_real, a.H, head);
  if (t == 0) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = g + 8 * half;
      if (i >= warp_rows) continue;
      a.lse[static_cast<int64_t>(head) * a.T + start + warp_row0 + i] =
          i < warp_real ? row_max[half] * a.scale + logf(row_sum[half]) : 0.0f;
    }
  }
}

template <int D, bool kWindowed, bool kCausal>
void launch_forward_kernel(const Args& a, cudaStream_t stream) {
  constexpr int kSmem = 3 * kTile * ld<D>() * 2;
  const auto kernel = forward_kernel<D, kWindowed, kCausal>;
  static const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  (void)configured;  // a failure resurfaces as the launch error, which the caller checks
  kernel<<<dim3(a.schedule.capacity, a.H), kThreads, kSmem, stream>>>(a);
}

}  // namespace

template <int D>
void launch_forward(const Args& a, cudaStream_t stream) {
  with_mask(a, [&](auto windowed, auto causal) {
    launch_forward_kernel<D, decltype(windowed)::value, decltype(causal)::value>(a, stream);
  });
}

template void launch_forward<64>(const Args&, cudaStream_t);
template void launch_forward<128>(const Args&, cudaStream_t);

}  // namespace pt::ops::cuda::attn
