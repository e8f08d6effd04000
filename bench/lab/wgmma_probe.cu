// Device side of bench_wgmma_probe (wgmma_probe.h): one tile of each wgmma form of the sm_90a backward.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "ops/cuda/attention_sm90.cuh"
#include "wgmma_probe.h"

namespace pt::lab {

namespace {

constexpr int kThreads = 256, kKeys = 128, kQueries = 64;

template <int D>
constexpr int smem_bytes() {
  return 1024 + (2 * kKeys * D + kQueries * D + kKeys * kQueries) * 2;
}

#if PT_SM90A
// Copies a row-major [kRows, D] tile into the swizzled layout the kernels' TMA copies produce
// (ops/cuda/wgmma.cuh's swizzled_offset), by one warpgroup.
template <int D, int kRows>
__device__ void load_tile(uint32_t tile, const __nv_bfloat16* src) {
  for (int c = static_cast<int>(threadIdx.x); c < kRows * D / 8; c += 128)
    ops::cuda::sm90::cp_async_16(tile + ops::cuda::sm90::swizzled_offset(c / (D / 8), c % (D / 8), kRows),
                                 src + c * 8, 16);
}
#endif

// flag: 1 when the sm_90a code ran, 2 for the stub.
template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    probe_kernel(const __nv_bfloat16* k, const __nv_bfloat16* q, const __nv_bfloat16* x, float* st_out,
                 float* xq_out, float* xtk_out, int* flag) {
#if PT_SM90A
  using namespace ops::cuda::sm90;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t sk = (smem_u32(smem_raw) + 1023u) & ~1023u, sq = sk + kKeys * D * 2;
  const uint32_t sds = sq + kQueries * D * 2;
  if (threadIdx.x < 128) {  // the first warpgroup loads
    load_tile<D, kKeys>(sk, k);
    load_tile<D, kQueries>(sq, q);
  }
  cp_async_commit();
  cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();

  const int wg = static_cast<int>(threadIdx.x) / 128, warp = static_cast<int>(threadIdx.x) / 32 % 4;
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int row0 = 64 * wg + 16 * warp + g;  // accumulator rows row0 and row0 + 8 (of the 128 keys)
  const auto row = [&](int i) { return row0 + 8 * (i % 4 / 2); };
  const auto col = [&](int i) { return 8 * (i / 4) + 2 * t + i % 2; };

  float st[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) st[i] = 0.0f;
  pin(st);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    wgmma_m64nNk16_ss<64>(st, desc_k_major(sk, kKeys, 64 * wg, kk), desc_k_major(sq, kQueries, 0, kk));
  wgmma_commit();
  wgmma_wait<0>();
  pin(st);
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    st_out[row(i) * kQueries + col(i)] = st[i];
    st[i] = __bfloat162float(x[row(i) * kQueries + col(i)]);  // X in the accumulator layout
  }
  uint32_t xa[4][4];
  to_a_fragments(st, xa);
  ops::cuda::attn::store_a_fragments(sds, kKeys, 64 * wg, xa);

  float xq[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) xq[i] = 0.0f;
  pin(xq);
  pin(xa);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kQueries / 16; ++kk)
    wgmma_m64nNk16_rs<D>(xq, xa[kk], desc_mn_major(sq, kQueries, kk));
  wgmma_commit();
  wgmma_wait<0>();
  pin(xq);
  pin(xa);
#pragma unroll
  for (int i = 0; i < D / 2; ++i) xq_out[row(i) * D + col(i)] = xq[i];

  fence_proxy_async();
  __syncthreads();
  float xtk[D / 4];
#pragma unroll
  for (int i = 0; i < D / 4; ++i) xtk[i] = 0.0f;
  pin(xtk);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk)
    wgmma_m64nNk16_ss<D / 2, 1, 1>(xtk, desc_mn_major(sds, kKeys, kk),
                                   desc_mn_major(sk, kKeys, kk, D / 2 * wg));
  wgmma_commit();
  wgmma_wait<0>();
  pin(xtk);
#pragma unroll
  for (int i = 0; i < D / 4; ++i) xtk_out[(row(i) - 64 * wg) * D + D / 2 * wg + col(i)] = xtk[i];
  if (threadIdx.x == 0) *flag = 1;
#else
  (void)k, (void)q, (void)x, (void)st_out, (void)xq_out, (void)xtk_out;
  if (threadIdx.x == 0) *flag = 2;
#endif
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("wgmma_probe_backward: ") + what +
                             " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace

std::string wgmma_probe_backward(int D, const void* k, const void* q, const void* x, float* st, float* xq,
                                 float* xtk) {
  if (D != 64 && D != 128) return "head dims 64 and 128 are supported, got " + std::to_string(D);
  int* flag = nullptr;
  check(cudaMalloc(&flag, sizeof(int)), "allocating the flag");
  check(cudaMemset(flag, 0, sizeof(int)), "clearing the flag");
  const auto launch = [&](auto kernel, int smem) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
          "raising the shared memory limit");
    kernel<<<1, kThreads, smem>>>(static_cast<const __nv_bfloat16*>(k), static_cast<const __nv_bfloat16*>(q),
                                  static_cast<const __nv_bfloat16*>(x), st, xq, xtk, flag);
  };
  if (D == 64)
    launch(probe_kernel<64>, smem_bytes<64>());
  else
    launch(probe_kernel<128>, smem_bytes<128>());
  check(cudaGetLastError(), "launching the probe");
  int ran = 0;
  const cudaError_t err = cudaDeviceSynchronize();
  if (err == cudaSuccess)
    check(cudaMemcpy(&ran, flag, sizeof(int), cudaMemcpyDeviceToHost), "reading the flag");
  cudaFree(flag);
  check(err, "running the probe");
  if (ran == 2) return "the probe ran the stub: the build has no sm_90a device code";
  if (ran != 1) return "the probe kernel did not report back";
  return "";
}

}  // namespace pt::lab
