// Warp and block reductions with a fixed combination order, so results do not vary from run to run.
#pragma once

namespace pt::ops::cuda {

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <class T>
__device__ __forceinline__ T warp_max(T v) {
  for (int offset = 16; offset > 0; offset /= 2) v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block, returned to every thread. blockDim.x must be a multiple of 32, at most 1024.
template <class T>
__device__ T block_sum(T v) {
  __shared__ T warp_totals[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // warp_totals may still be read by a previous call
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  v = lane < warps ? warp_totals[lane] : T(0);
  return warp_sum(v);
}

// Maximum over the block of values >= 0, returned to every thread (exact: no order to fix). blockDim.x as
// for block_sum.
__device__ __forceinline__ float block_max_nonnegative(float v) {
  __shared__ float warp_maxima[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();  // warp_maxima may still be read by a previous call
  if (lane == 0) warp_maxima[warp] = v;
  __syncthreads();
  v = lane < warps ? warp_maxima[lane] : 0.0f;
  return warp_max(v);
}

}  // namespace pt::ops::cuda
