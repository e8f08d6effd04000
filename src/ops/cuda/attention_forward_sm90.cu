// Forward kernel for Hopper (sm_90a), on warpgroup MMA (ops/cuda/wgmma.cuh). It computes what the mma.sync
// forward (attention_forward.cu) computes, from the same schedule with kSm90Rows-row tiles, and replaced it
// on sm_90a after the kernel lab measured it 1.1x faster on SFT-like batches at head dim 128 and 1.3-1.5x on
// long sequences (bench_attention --impls).
//
// One CTA of 256 threads per (query tile of 128 rows of one segment, head): warpgroup wg owns query rows
// 64 wg .. 64 wg + 63. K and V tiles of 128 keys stream through two shared-memory stages filled by cp.async
// from all threads; every K/V load of step j + 1 is in flight while step j computes. Per step and warpgroup:
//   S[64 x 128] = Q[64 x D] K^T   wgmma m64n128k16, Q and K K-major in shared memory
//   mask (causal, segment end), online softmax in registers (running max and sum per row, base 2)
//   O[64 x D] += P V              wgmma m64nDk16, P from registers (bf16), V MN-major in shared memory
// and lse = max * scale + log(sum) per row at the end. Not yet FA3: no producer warp or TMA, and the
// warpgroups wait for each MMA, so the tensor cores idle during the softmax.
#include <cmath>

#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/attention_order.cuh"
#include "ops/cuda/attention_sm90.cuh"

namespace pt::ops::cuda::attn {

namespace {

constexpr int kBlockN = 128;  // keys per step
constexpr int kThreads = 256;
static_assert(kSm90Rows == 128, "two consumer warpgroups of 64 query rows");

template <int D>
__host__ __device__ constexpr int tile_bytes(int rows) {
  return rows * D * 2;
}
// The Q tile, then two stages of {K tile, V tile}, plus slack to align the base to 1024 bytes.
template <int D>
constexpr int smem_bytes() {
  return 1024 + tile_bytes<D>(kSm90Rows) + 2 * 2 * tile_bytes<D>(kBlockN);
}

#if PT_SM90A
using namespace sm90;

constexpr float kLog2e = 1.4426950408889634f;

// A tile of pads only (row0 >= real): out rows zero and lse 0, as the mma.sync kernel writes them.
template <int D>
__device__ void write_pad_tile(const Args& a, int64_t start, int row0, int rows, int head) {
  constexpr int kChunks = D / 8;
  for (int c = static_cast<int>(threadIdx.x); c < rows * kChunks; c += kThreads) {
    const int64_t token = start + row0 + c / kChunks;
    *reinterpret_cast<uint4*>(a.out + (token * a.H + head) * D + (c % kChunks) * 8) = make_uint4(0, 0, 0, 0);
  }
  for (int r = static_cast<int>(threadIdx.x); r < rows; r += kThreads)
    a.lse[static_cast<int64_t>(head) * a.T + start + row0 + r] = 0.0f;
}
#endif  // PT_SM90A

// Registers: __launch_bounds__(256, 1) lets ptxas use up to 255 per thread; it takes 212 (D = 128) and 154
// (D = 64) with no local memory.
template <int D>
__global__ void __launch_bounds__(kThreads, 1) forward_kernel_sm90(const Args a, const int* order) {
#if PT_SM90A
  if (static_cast<int>(blockIdx.x) >= *a.schedule.count) return;
  const int4 seg = a.schedule.items[order[blockIdx.x]];  // {start, real, len, row0}
  const int64_t start = seg.x;
  const int real = seg.y, len = seg.z, row0 = seg.w;
  const int head = static_cast<int>(blockIdx.y), kv_head = head / (a.H / a.Hkv);
  if (row0 >= real) {
    write_pad_tile<D>(a, start, row0, min(kSm90Rows, len - row0), head);
    return;
  }

  // The swizzle pattern repeats every 1024 bytes and the descriptors assume base offset 0: the dynamic base
  // (only 16-byte aligned) is rounded up inside the slack smem_bytes() adds.
  extern __shared__ unsigned char smem_raw[];
  constexpr uint32_t kQBytes = tile_bytes<D>(kSm90Rows), kKVBytes = tile_bytes<D>(kBlockN);
  const uint32_t sq = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const auto sk = [&](int stage) { return sq + kQBytes + static_cast<uint32_t>(stage) * 2 * kKVBytes; };
  const auto sv = [&](int stage) { return sk(stage) + kKVBytes; };

  const int wg = static_cast<int>(threadIdx.x) / 128, warp = static_cast<int>(threadIdx.x) / 32 % 4;
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int wg_row0 = row0 + 64 * wg;               // the warpgroup's first query row in the segment
  const int thread_row0 = wg_row0 + 16 * warp + g;  // this thread's rows: thread_row0 and thread_row0 + 8

  // cp.async groups in commit order: Q, K0, V0, then K(j+1), V(j+1) after step j's first barrier. Step j
  // starts with K(j), V(j) as its newest groups: wait_group 1 completes K(j) (and Q); after the prefetch
  // V(j), K(j+1), V(j+1) are the newest, so wait_group 2 completes V(j) (the last step: 0).
  load_tile<D, kSm90Rows, kThreads>(sq, a.q, start, row0, real, a.H, head);
  cp_async_commit();
  const int key_end = min(real, row0 + kSm90Rows);  // causal: the tile's last query sees keys < row0 + 128
  const int steps = (key_end + kBlockN - 1) / kBlockN;
  load_tile<D, kBlockN, kThreads>(sk(0), a.k, start, 0, real, a.Hkv, kv_head);
  cp_async_commit();
  load_tile<D, kBlockN, kThreads>(sv(0), a.v, start, 0, real, a.Hkv, kv_head);
  cp_async_commit();

  const float scale_log2 = a.scale * kLog2e;
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  for (int j = 0; j < steps; ++j) {
    const int stage = j & 1, key0 = j * kBlockN;
    const bool prefetch = j + 1 < steps;
    cp_async_wait<1>();
    fence_proxy_async();
    // K(j) is visible to both warpgroups, and both have waited for step j - 1's MMAs, the last readers of
    // the other stage: it can be refilled.
    __syncthreads();
    if (prefetch) {
      load_tile<D, kBlockN, kThreads>(sk(stage ^ 1), a.k, start, key0 + kBlockN, real, a.Hkv, kv_head);
      cp_async_commit();
      load_tile<D, kBlockN, kThreads>(sv(stage ^ 1), a.v, start, key0 + kBlockN, real, a.Hkv, kv_head);
      cp_async_commit();
    }

    float s[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) s[i] = 0.0f;
    pin(s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_m64nNk16_ss<128>(s, desc_k_major(sq, kSm90Rows, 64 * wg, kk),
                             desc_k_major(sk(stage), kBlockN, 0, kk));
    wgmma_commit();
    wgmma_wait<0>();  // the softmax reads s
    pin(s);

    // s[4 i + e] is row thread_row0 + 8 (e / 2), key key0 + 8 i + 2 t + e % 2. Every real row sees key 0
    // in step 0, so no row's max stays -inf past it.
    if (key0 + kBlockN - 1 > wg_row0 || key0 + kBlockN > real) {  // the diagonal or the segment's end
#pragma unroll
      for (int i = 0; i < kBlockN / 8; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = thread_row0 + 8 * (e / 2), key = key0 + 8 * i + 2 * t + e % 2;
          if (key > row || key >= real) s[4 * i + e] = -INFINITY;
        }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = row_max[h];
#pragma unroll
      for (int i = 0; i < kBlockN / 8; ++i) m = fmaxf(m, fmaxf(s[4 * i + 2 * h], s[4 * i + 2 * h + 1]));
      m = quad_max(m);
      // Rows with every score masked so far keep max -inf; subtracting 0 instead avoids inf - inf.
      const float base = m == -INFINITY ? 0.0f : m * scale_log2;
      const float rescale = exp2f(row_max[h] * scale_log2 - base);
      row_max[h] = m;
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kBlockN / 8; ++i)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          s[4 * i + e] = exp2f(fmaf(s[4 * i + e], scale_log2, -base));
          sum += s[4 * i + e];
        }
      row_sum[h] = row_sum[h] * rescale + sum;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) o[4 * n + 2 * h] *= rescale, o[4 * n + 2 * h + 1] *= rescale;
    }
    uint32_t p[kBlockN / 16][4];
    to_a_fragments(s, p);

    if (prefetch)
      cp_async_wait<2>();  // V(j) has landed
    else
      cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();

    // The rescaled o and the freshly written p are wgmma registers: both before the fence.
    pin(o);
    pin(p);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
      wgmma_m64nNk16_rs<D>(o, p[kk], desc_mn_major(sv(stage), kBlockN, kk));
    wgmma_commit();
    wgmma_wait<0>();  // o is rescaled next step, and this stage's reads complete before step j + 1's barrier
    pin(o);
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] = quad_sum(row_sum[h]);
    const int row = thread_row0 + 8 * h;
    if (row >= len) continue;  // past the segment: another segment's tokens
    const bool keep = row < real;
    const float inv = keep && row_sum[h] > 0.0f ? 1.0f / row_sum[h] : 0.0f;
    __nv_bfloat16* dst = a.out + ((start + row) * a.H + head) * D + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(dst + 8 * n) =
          __floats2bfloat162_rn(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv);
    // Natural-log units: row_sum = sum exp2((s - max) scale log2e) = sum exp((s - max) scale).
    if (t == 0)
      a.lse[static_cast<int64_t>(head) * a.T + start + row] =
          keep ? row_max[h] * a.scale + logf(row_sum[h]) : 0.0f;
  }
#endif  // PT_SM90A: other targets hold an empty kernel that forward_sm90_available() never selects
}

// The blocks' order: every schedule item, by decreasing number of key steps.
__global__ void __launch_bounds__(kOrderThreads) order_kernel(const Args a, int* order) {
  order_by_work(
      a.schedule, [](int4) { return true; },
      [](int4 item) { return (min(item.y, item.w + kSm90Rows) + kBlockN - 1) / kBlockN; }, order,
      a.schedule.capacity);
}

}  // namespace

bool forward_sm90_available() {
  static const bool available = [] {
    cudaFuncAttributes attributes{};
    int device = 0, major = 0;
    return cudaGetDevice(&device) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
           major == 9 && cudaFuncGetAttributes(&attributes, forward_kernel_sm90<128>) == cudaSuccess &&
           attributes.binaryVersion == 90;
  }();
  return available;
}

template <int D>
void launch_forward_sm90(const Args& a, int* order, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<D>();
  static const cudaError_t configured =
      cudaFuncSetAttribute(forward_kernel_sm90<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  (void)configured;  // a failure resurfaces as the launch error, which the caller checks
  order_kernel<<<1, kOrderThreads, 0, stream>>>(a, order);
  forward_kernel_sm90<D><<<dim3(a.schedule.capacity, a.H), kThreads, kSmem, stream>>>(a, order);
}

template void launch_forward_sm90<64>(const Args&, int*, cudaStream_t);
template void launch_forward_sm90<128>(const Args&, int*, cudaStream_t);

}  // namespace pt::ops::cuda::attn
