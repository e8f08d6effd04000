#include <string>

#include "data/packing/batch.h"
#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/reduce.cuh"
#include "ops/cuda/scratch.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda {

namespace {

constexpr int kRowThreads = 512;
constexpr int kSumThreads = 1024;
constexpr unsigned char kNoBadRow = 0x7f;  // memset byte: 0x7f7f7f7f exceeds every row index

constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// A running softmax denominator in base 2: the values seen so far as x log2(e), their max and the sum of
// 2^(x log2(e) - max). Base 2 costs one FMA and the multi-function unit's 2^x per value; expf costs several.
struct MaxSum {
  float max = -INFINITY;
  float sum = 0;
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  if (a.sum == 0) return b;  // an empty side (all lanes start empty) contributes nothing
  if (b.sum == 0) return a;
  const float m = fmaxf(a.max, b.max);
  return {m, a.sum * exp2_ftz(a.max - m) + b.sum * exp2_ftz(b.max - m)};
}

__device__ MaxSum block_max_sum(MaxSum v) {
  __shared__ MaxSum warp_totals[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int offset = 16; offset > 0; offset /= 2)
    v = combine(v,
                {__shfl_xor_sync(0xffffffffu, v.max, offset), __shfl_xor_sync(0xffffffffu, v.sum, offset)});
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  v = lane < warps ? warp_totals[lane] : MaxSum{};
  for (int offset = 16; offset > 0; offset /= 2)
    v = combine(v,
                {__shfl_xor_sync(0xffffffffu, v.max, offset), __shfl_xor_sync(0xffffffffu, v.sum, offset)});
  return v;
}

// One block per row, its threads striding over the row in vectors of kVec logits (16-byte accesses where
// the row stride ld and the pointers allow). The row's classes are its first V values; a vector reaching
// past V (into the row's padding, up to ld) has those lanes masked out of the sums, and the gradient's
// padding is written 0. Pass 1 streams the row once with an online max and sum per thread (no copy of the
// row is kept); pass 2 rereads it (mostly from L2) to write (softmax - onehot) * scale, in place if asked:
// a thread reads each vector before writing it.
template <class T, int kVec>
__global__ void row_kernel(const T* logits, const int32_t* __restrict__ targets, float grad_scale, T* dlogits,
                           int64_t V, int64_t ld, float* __restrict__ row_loss, int* first_bad) {
  const int64_t t = blockIdx.x;
  const T* row = logits + t * ld;
  T* grad = dlogits ? dlogits + t * ld : nullptr;
  const int64_t span = (V + kVec - 1) / kVec * kVec;  // the vectors holding classes; ld % kVec == 0
  const int32_t target = targets[t];
  const bool bad = target != kIgnoreLabel && (target < 0 || target >= V);
  if (bad && first_bad && threadIdx.x == 0) atomicMin(first_bad, static_cast<int>(t));
  if (target == kIgnoreLabel || bad) {
    if (threadIdx.x == 0) row_loss[t] = 0;
    if (grad) {
      const float zeros[kVec] = {};
      for (int64_t j = int64_t{threadIdx.x} * kVec; j < ld; j += int64_t{blockDim.x} * kVec)
        store_floats<kVec>(grad + j, zeros);
    }
    return;
  }
  MaxSum ms;
  for (int64_t j = int64_t{threadIdx.x} * kVec; j < span; j += int64_t{blockDim.x} * kVec) {
    float x[kVec];
    load_floats<kVec>(row + j, x);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      if (kVec > 1 && j + k >= V) x[k] = -INFINITY;  // padding: exp(-inf - max) adds 0
    float m = x[0];
#pragma unroll
    for (int k = 1; k < kVec; ++k) m = fmaxf(m, x[k]);
    m *= kLog2e;
    if (m > ms.max) {  // rescale the sum once per vector, not per element
      ms.sum *= exp2_ftz(ms.max - m);
      ms.max = m;
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) ms.sum += exp2_ftz(fmaf(x[k], kLog2e, -ms.max));
  }
  ms = block_max_sum(ms);
  const float lse2 = ms.max + log2f(ms.sum), lse = lse2 * kLn2;  // log-sum-exp in base 2 and e
  const float target_logit = load(row + target);
  __syncthreads();  // every thread has read row[target] before it may be overwritten
  if (threadIdx.x == 0) row_loss[t] = lse - target_logit;
  if (!grad) return;
  for (int64_t j = int64_t{threadIdx.x} * kVec; j < ld; j += int64_t{blockDim.x} * kVec) {
    float x[kVec];
    load_floats<kVec>(row + j, x);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float p = exp2_ftz(fmaf(x[k], kLog2e, -lse2));
      x[k] = j + k >= V ? 0.0f : (j + k == target ? p - 1.0f : p) * grad_scale;
    }
    store_floats<kVec>(grad + j, x);
  }
}

// One block sums the row losses in double and counts the loss tokens, in a fixed order, into sums[0] and
// sums[1]; add keeps what sums held.
__global__ void total_kernel(const float* __restrict__ row_loss, const int32_t* __restrict__ targets,
                             int64_t T_, double* sums, bool add) {
  double sum = 0;
  long long count = 0;
  for (int64_t t = threadIdx.x; t < T_; t += blockDim.x) {
    sum += row_loss[t];
    count += targets[t] != kIgnoreLabel;
  }
  sum = block_sum(sum);
  count = block_sum(count);
  if (threadIdx.x == 0) {
    sums[0] = (add ? sums[0] : 0.0) + sum;
    sums[1] = (add ? sums[1] : 0.0) + double(count);
  }
}

// Queues the rows and their total into sums (see total_kernel). row_loss holds T floats; first_bad, if
// not null, receives the first row whose target is outside the vocabulary (it must start at kNoBadRow).
void queue(const Tensor& logits, const Tensor& targets, double grad_scale, const Tensor& dlogits, int64_t V,
           float* row_loss, int* first_bad, double* sums, bool add) {
  const int64_t T = logits.shape[0], ld = logits.shape[1];
  const cudaStream_t stream = current_stream();
  dispatch_float("cross_entropy", "logits", logits.dtype, [&](auto tag) {
    using E = decltype(tag);
    constexpr int kVec = kPack16<E>;
    const bool vector = ld % kVec == 0 && aligned16({logits.data, dlogits.data});
    auto kernel = vector ? row_kernel<E, kVec> : row_kernel<E, 1>;
    kernel<<<static_cast<unsigned>(T), kRowThreads, 0, stream>>>(
        data<E>(logits), data<int32_t>(targets), float(grad_scale),
        dlogits.empty() ? nullptr : data<E>(dlogits), V, ld, row_loss, first_bad);
    PT_CUDA_CHECK_LAUNCH();
  });
  total_kernel<<<1, kSumThreads, 0, stream>>>(row_loss, data<int32_t>(targets), T, sums, add);
  PT_CUDA_CHECK_LAUNCH();
}

}  // namespace

CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, double grad_scale,
                                 const Tensor& dlogits, int64_t V) {
  const int64_t T = logits.shape[0];
  if (T == 0) return {};
  ScratchPlan plan;
  const size_t loss_at = plan.reserve<float>(T), bad_at = plan.reserve<int>(1),
               sums_at = plan.reserve<double>(2);
  plan.allocate();
  int* first_bad = plan.at<int>(bad_at);
  double* device_sums = plan.at<double>(sums_at);
  const cudaStream_t stream = current_stream();
  PT_CUDA_CHECK(cudaMemsetAsync(first_bad, kNoBadRow, sizeof(int), stream));
  queue(logits, targets, grad_scale, dlogits, V, plan.at<float>(loss_at), first_bad, device_sums, false);
  int bad = 0;
  double sums[2] = {};
  PT_CUDA_CHECK(cudaMemcpyAsync(&bad, first_bad, sizeof bad, cudaMemcpyDeviceToHost, stream));
  PT_CUDA_CHECK(cudaMemcpyAsync(sums, device_sums, sizeof sums, cudaMemcpyDeviceToHost, stream));
  sync_current_stream();
  if (bad < T)
    throw Error("cross_entropy: target of token " + std::to_string(bad) + " is outside the vocabulary [0, " +
                std::to_string(V) + ") and not the ignore label " + std::to_string(kIgnoreLabel));
  return {sums[0], static_cast<int64_t>(sums[1])};
}

void cross_entropy_accumulate(const Tensor& logits, const Tensor& targets, double grad_scale,
                              const Tensor& dlogits, const Tensor& sums, int64_t V) {
  const int64_t T = logits.shape[0];
  if (T == 0) return;
  ScratchPlan plan;
  const size_t loss_at = plan.reserve<float>(T);
  plan.allocate();
  queue(logits, targets, grad_scale, dlogits, V, plan.at<float>(loss_at), nullptr, data<double>(sums), true);
}

}  // namespace pt::ops::cuda
