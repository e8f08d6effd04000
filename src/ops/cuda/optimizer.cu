// AdamW, gradient norm and clipping over the whole parameter set, each in a few multi-tensor launches.
#include <cmath>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/multi_tensor.cuh"
#include "ops/cuda/reduce.cuh"
#include "ops/cuda/scratch.h"
#include "ops/cuda/stream.h"

namespace pt::ops::cuda {

namespace {

constexpr int kTotalThreads = 1024;

struct AdamWScalars {
  float beta1, beta2, eps, decay, step_size, sqrt_bias2;
};

// The same float arithmetic as the cpu backend, element by element.
__device__ __forceinline__ void adamw_update(const AdamWScalars& s, float decay, float& p, float grad,
                                             float& m, float& v) {
  m = s.beta1 * m + (1.0f - s.beta1) * grad;
  v = s.beta2 * v + (1.0f - s.beta2) * grad * grad;
  p = p * decay - s.step_size * m / (sqrtf(v) / s.sqrt_bias2 + s.eps);
}

// Memory-bound (7 f32 streams): float4 accesses where the block's range allows, else scalar.
__global__ void adamw_kernel(const TensorTable<4> table, const AdamWScalars s) {
  int64_t begin, end;
  const int i = table_entry(table, begin, end);
  float *p = table.ptr[0][i], *g = table.ptr[1][i], *m = table.ptr[2][i], *v = table.ptr[3][i];
  const float decay = table.flag[i] ? s.decay : 1.0f;
  if (float4_range(table, i, begin, end)) {
    for (int64_t j = begin + 4 * int64_t{threadIdx.x}; j < end; j += 4 * int64_t{blockDim.x}) {
      float4 pj = *reinterpret_cast<float4*>(p + j), mj = *reinterpret_cast<float4*>(m + j),
             vj = *reinterpret_cast<float4*>(v + j);
      const float4 gj = *reinterpret_cast<const float4*>(g + j);
      adamw_update(s, decay, pj.x, gj.x, mj.x, vj.x);
      adamw_update(s, decay, pj.y, gj.y, mj.y, vj.y);
      adamw_update(s, decay, pj.z, gj.z, mj.z, vj.z);
      adamw_update(s, decay, pj.w, gj.w, mj.w, vj.w);
      *reinterpret_cast<float4*>(p + j) = pj;
      *reinterpret_cast<float4*>(m + j) = mj;
      *reinterpret_cast<float4*>(v + j) = vj;
    }
    return;
  }
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x)
    adamw_update(s, decay, p[j], g[j], m[j], v[j]);
}

// partial[first + block] = sum of squares of the block's chunk, in double, in a fixed order.
__global__ void squares_kernel(const TensorTable<1> table, int first, double* __restrict__ partial) {
  int64_t begin, end;
  const int i = table_entry(table, begin, end);
  const float* x = table.ptr[0][i];
  double sum = 0;
  if (float4_range(table, i, begin, end)) {
    for (int64_t j = begin + 4 * int64_t{threadIdx.x}; j < end; j += 4 * int64_t{blockDim.x}) {
      const float4 xj = *reinterpret_cast<const float4*>(x + j);
      sum += double(xj.x) * double(xj.x) + double(xj.y) * double(xj.y) + double(xj.z) * double(xj.z) +
             double(xj.w) * double(xj.w);
    }
  } else {
    for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) sum += double(x[j]) * double(x[j]);
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) partial[first + static_cast<int>(blockIdx.x)] = sum;
}

// The sum of partial[0, n) in a fixed order; every thread of the (one) block gets it.
__device__ double sum_partials(const double* __restrict__ partial, int n) {
  double sum = 0;
  for (int j = static_cast<int>(threadIdx.x); j < n; j += blockDim.x) sum += partial[j];
  return block_sum(sum);
}

__global__ void total_kernel(const double* __restrict__ partial, int n, double* total) {
  const double sum = sum_partials(partial, n);
  if (threadIdx.x == 0) *total = sum;
}

// The norm and clip factor as clip_grad_norm computes them on the host (IEEE sqrt and division).
__global__ void clip_factor_kernel(const double* __restrict__ partial, int n, double max_norm, double* norm,
                                   double* factor) {
  const double sum = sum_partials(partial, n);
  if (threadIdx.x != 0) return;
  *norm = sqrt(sum);
  *factor = max_norm / (*norm + 1e-6);
}

// Scales by factor, or by *device_factor when that is given (then a factor >= 1 leaves x as it is).
__global__ void scale_kernel(const TensorTable<1> table, double factor, const double* device_factor) {
  if (device_factor) {
    factor = *device_factor;
    if (factor >= 1) return;
  }
  int64_t begin, end;
  const int i = table_entry(table, begin, end);
  float* x = table.ptr[0][i];
  if (float4_range(table, i, begin, end)) {
    for (int64_t j = begin + 4 * int64_t{threadIdx.x}; j < end; j += 4 * int64_t{blockDim.x}) {
      float4 xj = *reinterpret_cast<float4*>(x + j);
      xj = {float(double(xj.x) * factor), float(double(xj.y) * factor), float(double(xj.z) * factor),
            float(double(xj.w) * factor)};
      *reinterpret_cast<float4*>(x + j) = xj;
    }
    return;
  }
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) x[j] = float(double(x[j]) * factor);
}

template <int kPointers>
unsigned grid_of(const TensorTable<kPointers>& table) {
  return static_cast<unsigned>(table.first_block[table.count]);
}

// Chunks of kChunkElements over every (f32) tensor: the blocks of squares_kernel.
int64_t chunk_blocks(const char* op, std::span<const Tensor> tensors) {
  int64_t blocks = 0;
  for (const Tensor& t : tensors) {
    require_f32(op, "every gradient", t.dtype);
    blocks += (t.numel() + kChunkElements - 1) / kChunkElements;
  }
  return blocks;
}

void fill_table(std::span<const Tensor> tensors, size_t i, TensorTable<1>& table, int slot) {
  table.numel[slot] = tensors[i].numel();
  table.ptr[0][slot] = data<float>(tensors[i]);
}

// partial[block] = the sum of squares of each chunk.
void queue_squares(std::span<const Tensor> tensors, double* partial) {
  launch_over_tables<1>(
      tensors.size(), [&](size_t i, TensorTable<1>& table, int slot) { fill_table(tensors, i, table, slot); },
      [&](const TensorTable<1>& table, int first) {
        squares_kernel<<<grid_of(table), kChunkThreads, 0, current_stream()>>>(table, first, partial);
        PT_CUDA_CHECK_LAUNCH();
      });
}

void queue_scale(std::span<const Tensor> tensors, double factor, const double* device_factor) {
  launch_over_tables<1>(
      tensors.size(), [&](size_t i, TensorTable<1>& table, int slot) { fill_table(tensors, i, table, slot); },
      [&](const TensorTable<1>& table, int) {
        scale_kernel<<<grid_of(table), kChunkThreads, 0, current_stream()>>>(table, factor, device_factor);
        PT_CUDA_CHECK_LAUNCH();
      });
}

}  // namespace

void adamw_step(std::span<const AdamWTensor> tensors, const AdamWConfig& config, int64_t step) {
  for (const AdamWTensor& t : tensors)
    for (const Tensor* x : {&t.param, &t.grad, &t.m, &t.v})
      require_f32("adamw_step", "every tensor", x->dtype);
  const double bias1 = 1 - std::pow(config.beta1, double(step)),
               bias2 = 1 - std::pow(config.beta2, double(step));
  const AdamWScalars s{float(config.beta1),      float(config.beta2),
                       float(config.eps),        float(1 - config.lr * config.weight_decay),
                       float(config.lr / bias1), float(std::sqrt(bias2))};
  launch_over_tables<4>(
      tensors.size(),
      [&](size_t i, TensorTable<4>& table, int slot) {
        const AdamWTensor& t = tensors[i];
        table.numel[slot] = t.param.numel();
        table.flag[slot] = t.decay;
        int p = 0;
        for (const Tensor* x : {&t.param, &t.grad, &t.m, &t.v}) table.ptr[p++][slot] = data<float>(*x);
      },
      [&](const TensorTable<4>& table, int) {
        adamw_kernel<<<grid_of(table), kChunkThreads, 0, current_stream()>>>(table, s);
        PT_CUDA_CHECK_LAUNCH();
      });
}

double sum_of_squares(std::span<const Tensor> tensors) {
  const int64_t blocks = chunk_blocks("global_norm", tensors);
  if (blocks == 0) return 0;
  ScratchPlan plan;
  const size_t partial_at = plan.reserve<double>(blocks), total_at = plan.reserve<double>(1);
  plan.allocate();
  double* partial = plan.at<double>(partial_at);
  const cudaStream_t stream = current_stream();
  queue_squares(tensors, partial);
  total_kernel<<<1, kTotalThreads, 0, stream>>>(partial, static_cast<int>(blocks), plan.at<double>(total_at));
  PT_CUDA_CHECK_LAUNCH();
  double total = 0;
  PT_CUDA_CHECK(
      cudaMemcpyAsync(&total, plan.at<double>(total_at), sizeof total, cudaMemcpyDeviceToHost, stream));
  sync_current_stream();
  return total;
}

void scale(std::span<const Tensor> tensors, double factor) {
  for (const Tensor& t : tensors) require_f32("clip_grad_norm", "every gradient", t.dtype);
  queue_scale(tensors, factor, nullptr);
}

void clip_grad_norm_deferred(std::span<const Tensor> grads, double max_norm, const Tensor& norm) {
  const int64_t blocks = chunk_blocks("clip_grad_norm_deferred", grads);
  const cudaStream_t stream = current_stream();
  if (blocks == 0) {  // no elements: the norm is 0 and nothing needs scaling
    PT_CUDA_CHECK(cudaMemsetAsync(norm.data, 0, sizeof(double), stream));
    return;
  }
  // The factor lives in scratch: only the scale kernels below read it, before the next op may reuse it.
  ScratchPlan plan;
  const size_t partial_at = plan.reserve<double>(blocks), factor_at = plan.reserve<double>(1);
  plan.allocate();
  double *partial = plan.at<double>(partial_at), *factor = plan.at<double>(factor_at);
  queue_squares(grads, partial);
  clip_factor_kernel<<<1, kTotalThreads, 0, stream>>>(partial, static_cast<int>(blocks), max_norm,
                                                      data<double>(norm), factor);
  PT_CUDA_CHECK_LAUNCH();
  queue_scale(grads, 1.0, factor);
}

}  // namespace pt::ops::cuda
