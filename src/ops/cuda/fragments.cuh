// Register-fragment helpers shared by the mma.sync (attention_mma.cuh) and wgmma (wgmma.cuh) kernels: both
// MMA families lay a row of an accumulator over the four threads of a quad (lane / 4 = row, lane % 4 =
// column pair), and both feed bf16 pairs packed in one register.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace pt::ops::cuda {

__device__ inline uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Max and sum over the four threads of a quad, which together hold one accumulator row.
__device__ inline float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ inline float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// *p += x, p[1] += y in global memory, without returning the old values (unordered: the summation order of
// concurrent adds is not deterministic). sm_90 adds both in one vector reduction.
__device__ inline void red_add_f32x2(float* p, float x, float y) {
#if __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(x), "f"(y) : "memory");
#else
  atomicAdd(p, x);
  atomicAdd(p + 1, y);
#endif
}

}  // namespace pt::ops::cuda
