// AdamW, gradient norm and clipping over the whole parameter set, each in a few multi-tensor launches.
#include <array>
#include <cmath>
#include <mutex>

#include "ops/adamw_update.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/multi_tensor.cuh"
#include "ops/cuda/reduce.cuh"
#include "ops/cuda/scratch.h"
#include "ops/cuda/stream.h"
#include "ops/quantize8.h"

namespace pt::ops::cuda {

namespace {

constexpr int kTotalThreads = 1024;

struct AdamWScalars {
  float beta1, beta2, eps, decay, step_size, sqrt_bias2;
  double grad_scale;
};

// The same float arithmetic as the cpu backend, element by element; the gradient read scaled as
// adamw_math::scaled does.
__device__ __forceinline__ void adamw_update(const AdamWScalars& s, float decay, float& p, float grad,
                                             float& m, float& v) {
  grad = static_cast<float>(static_cast<double>(grad) * s.grad_scale);
  m = s.beta1 * m + (1.0f - s.beta1) * grad;
  v = s.beta2 * v + (1.0f - s.beta2) * grad * grad;
  p = p * decay - s.step_size * m / (sqrtf(v) / s.sqrt_bias2 + s.eps);
}

// Whether tensor i's range [begin, end) moves in vectors of 4 elements: whole vectors, the f32 arrays
// (param, grad, m, v) 16-byte aligned and the bf16 working copy, where there is one, 8-byte aligned.
__device__ __forceinline__ bool vector4_range(const TensorTable<5, void>& table, int i, int64_t begin,
                                              int64_t end) {
  if ((end - begin) % 4 != 0) return false;
  for (int p = 0; p < 4; ++p)
    if (reinterpret_cast<uintptr_t>(static_cast<const float*>(table.ptr[p][i]) + begin) % 16 != 0)
      return false;
  const auto* w = static_cast<const uint16_t*>(table.ptr[4][i]);
  return w == nullptr || reinterpret_cast<uintptr_t>(w + begin) % 8 == 0;
}

// Memory-bound (7 f32 streams, and a bf16 one with a working copy): vectors of 4 where the block's range
// allows, else scalar. table: param, grad, m, v, and the bf16 working copy (nullptr: none).
__global__ void adamw_kernel(const TensorTable<5, void> table, const AdamWScalars s) {
  int64_t begin, end;
  const int i = table_entry(table, begin, end);
  auto *p = static_cast<float*>(table.ptr[0][i]), *m = static_cast<float*>(table.ptr[2][i]),
       *v = static_cast<float*>(table.ptr[3][i]);
  const auto* g = static_cast<const float*>(table.ptr[1][i]);
  auto* w = static_cast<uint16_t*>(table.ptr[4][i]);
  const float decay = table.flag[i] ? s.decay : 1.0f;
  if (vector4_range(table, i, begin, end)) {
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
      if (w)
        store_pack(w + j, Pack<uint16_t, 4>{{float_to_bf16_bits(pj.x), float_to_bf16_bits(pj.y),
                                             float_to_bf16_bits(pj.z), float_to_bf16_bits(pj.w)}});
    }
    return;
  }
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
    adamw_update(s, decay, p[j], g[j], m[j], v[j]);
    if (w) w[j] = float_to_bf16_bits(p[j]);
  }
}

// One element's update (adamw_update.h) as the cpu backend makes it: f32 parameters (masters) in place,
// bf16 ones (no masters) widened and rounded stochastically with the draws of their flat index.
__device__ __forceinline__ void update(const adamw_math::Scalars& s, float decay, float g, float* p, int64_t,
                                       float& m, float& v) {
  adamw_math::update(s, decay, g, *p, m, v);
}
__device__ __forceinline__ void update(const adamw_math::Scalars& s, float decay, float g, __nv_bfloat16* p,
                                       int64_t index, float& m, float& v) {
  float x = load(p);
  adamw_math::update(s, decay, g, x, m, v);
  *p = __ushort_as_bfloat16(
      adamw_math::round_bf16_stochastic(x, adamw_math::rounding_bits(s.rounding_key, index)));
}

// The updated parameter into the working copy w (nullptr: none), rounded as ops::cast rounds: f32
// parameters only (ops::adamw_step refuses a working copy beside bf16 ones).
__device__ __forceinline__ void write_working(uint16_t* w, int64_t j, const float* p) {
  if (w) w[j] = float_to_bf16_bits(*p);
}
__device__ __forceinline__ void write_working(uint16_t*, int64_t, const __nv_bfloat16*) {}

// Moments of M element by element (table: param, grad, m, v, working copy), bf16 ones rounded to nearest
// even: bf16 moments beside P = f32 or bf16 parameters, f32 moments beside bf16 ones.
template <class P, class M>
__global__ void adamw_elementwise_kernel(const TensorTable<5, void> table, const adamw_math::Scalars s) {
  int64_t begin, end;
  const int i = table_entry(table, begin, end);
  auto* p = static_cast<P*>(table.ptr[0][i]);
  const float* g = static_cast<const float*>(table.ptr[1][i]);
  auto *m = static_cast<M*>(table.ptr[2][i]), *v = static_cast<M*>(table.ptr[3][i]);
  auto* w = static_cast<uint16_t*>(table.ptr[4][i]);
  const float decay = table.flag[i] ? s.decay : 1.0f;
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
    float mj = load(m + j), vj = load(v + j);
    update(s, decay, g[j], p + j, table.offset[i] + j, mj, vj);
    write_working(w, j, p + j);
    store(m + j, mj);
    store(v + j, vj);
  }
}

// The code maps of quantize8.h, uploaded once per device.
__constant__ float c_signed_map[quant8::kSignedCodes];
__constant__ float c_unsigned_map[quant8::kUnsignedCodes];

void upload_code_maps() {
  static std::mutex mutex;
  static std::array<bool, 64> done{};
  int device = 0;
  PT_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard lock(mutex);
  if (done.at(static_cast<size_t>(device))) return;
  PT_CUDA_CHECK(cudaMemcpyToSymbol(c_signed_map, quant8::signed_map().data(), sizeof c_signed_map));
  PT_CUDA_CHECK(cudaMemcpyToSymbol(c_unsigned_map, quant8::unsigned_map().data(), sizeof c_unsigned_map));
  done.at(static_cast<size_t>(device)) = true;
}

// q8 moments (table: param, grad, m codes, v codes, m absmax, v absmax, working copy). A chunk of
// kChunkElements starts on a quantization block, so the CUDA block walks whole quantization blocks of its
// chunk, one element a thread: decode, update (adamw_update.h), the block's new absmax by a shared-memory
// max, encode. The arithmetic and the code search are those of the cpu backend, so codes and absmax agree bit
// for bit. P: the parameters' type, float or __nv_bfloat16.
template <class P>
__global__ void __launch_bounds__(kQuantBlock)
    adamw_q8_kernel(const TensorTable<7, void> table, const adamw_math::Scalars s) {
  __shared__ float signed_map[quant8::kSignedCodes], unsigned_map[quant8::kUnsignedCodes];
  for (int c = static_cast<int>(threadIdx.x); c < quant8::kUnsignedCodes; c += blockDim.x) {
    if (c < quant8::kSignedCodes) signed_map[c] = c_signed_map[c];
    unsigned_map[c] = c_unsigned_map[c];
  }
  __syncthreads();
  int64_t begin, end;
  const int i = table_entry(table, begin, end);
  auto* p = static_cast<P*>(table.ptr[0][i]);
  const float* g = static_cast<const float*>(table.ptr[1][i]);
  auto *mc = static_cast<uint8_t*>(table.ptr[2][i]), *vc = static_cast<uint8_t*>(table.ptr[3][i]);
  auto *ma = static_cast<float*>(table.ptr[4][i]), *va = static_cast<float*>(table.ptr[5][i]);
  auto* w = static_cast<uint16_t*>(table.ptr[6][i]);
  const float decay = table.flag[i] ? s.decay : 1.0f;
  for (int64_t first = begin; first < end; first += kQuantBlock) {
    const int64_t b = first / kQuantBlock, j = first + threadIdx.x;
    const bool mine = j < end;
    float m = 0, v = 0;
    if (mine) {
      m = quant8::decode(signed_map, mc[j], ma[b]);
      v = quant8::decode(unsigned_map, vc[j], va[b]);
      update(s, decay, g[j], p + j, table.offset[i] + j, m, v);
      write_working(w, j, p + j);
    }
    const float m_max = block_max_nonnegative(fabsf(m)), v_max = block_max_nonnegative(v);
    if (mine) {
      mc[j] = quant8::encode(signed_map, quant8::kSignedCodes, quant8::kSignedZero, m, m_max);
      vc[j] = quant8::encode(unsigned_map, quant8::kUnsignedCodes, quant8::kUnsignedZero, v, v_max);
    }
    if (threadIdx.x == 0) {  // after every thread has read the old absmax (the block max synchronizes)
      ma[b] = m_max;
      va[b] = v_max;
    }
  }
}
static_assert(kChunkThreads == kQuantBlock && kChunkElements % kQuantBlock == 0,
              "adamw_q8_kernel: a thread per element of a quantization block, chunks of whole blocks");

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

// The norm, and with factor the clip factor, as clip_grad_norm computes them on the host (IEEE sqrt and
// division; ops::clip_factor repeats the division).
__global__ void norm_kernel(const double* __restrict__ partial, int n, double max_norm, double* norm,
                            double* factor) {
  const double sum = sum_partials(partial, n);
  if (threadIdx.x != 0) return;
  *norm = sqrt(sum);
  if (factor) *factor = max_norm / (*norm + 1e-6);
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

template <int kPointers, class T>
unsigned grid_of(const TensorTable<kPointers, T>& table) {
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

namespace {

void adamw_f32(std::span<const AdamWTensor> tensors, const AdamWConfig& config, int64_t step) {
  for (const AdamWTensor& t : tensors)
    for (const Tensor* x : {&t.param, &t.grad, &t.m, &t.v})
      require_f32("adamw_step", "every tensor", x->dtype);
  const double bias1 = 1 - std::pow(config.beta1, double(step)),
               bias2 = 1 - std::pow(config.beta2, double(step));
  const AdamWScalars s{float(config.beta1),      float(config.beta2),
                       float(config.eps),        float(1 - config.lr * config.weight_decay),
                       float(config.lr / bias1), float(std::sqrt(bias2)),
                       config.grad_scale};
  launch_over_tables<5, void>(
      tensors.size(),
      [&](size_t i, TensorTable<5, void>& table, int slot) {
        const AdamWTensor& t = tensors[i];
        table.numel[slot] = t.param.numel();
        table.flag[slot] = t.decay;
        int p = 0;
        for (const Tensor* x : {&t.param, &t.grad, &t.m, &t.v, &t.working}) table.ptr[p++][slot] = x->data;
      },
      [&](const TensorTable<5, void>& table, int) {
        adamw_kernel<<<grid_of(table), kChunkThreads, 0, current_stream()>>>(table, s);
        PT_CUDA_CHECK_LAUNCH();
      });
}

// The kernels of adamw_update.h (all but f32 moments beside f32 parameters): the pointers in the order they
// read them (ops::adamw_step checked dtypes), the working copy's (nullptr: none) last.
template <int kPointers, class Kernel>
void adamw_coded(std::span<const AdamWTensor> tensors, const adamw_math::Scalars& s, Kernel kernel) {
  launch_over_tables<kPointers, void>(
      tensors.size(),
      [&](size_t i, TensorTable<kPointers, void>& table, int slot) {
        const AdamWTensor& t = tensors[i];
        table.numel[slot] = t.param.numel();
        table.flag[slot] = t.decay;
        table.offset[slot] = t.offset;
        const Tensor* all[] = {&t.param, &t.grad, &t.m, &t.v, &t.m_absmax, &t.v_absmax};
        for (int p = 0; p + 1 < kPointers; ++p) table.ptr[p][slot] = all[p]->data;
        table.ptr[kPointers - 1][slot] = t.working.data;
      },
      [&](const TensorTable<kPointers, void>& table, int) {
        kernel<<<grid_of(table), kChunkThreads, 0, current_stream()>>>(table, s);
        PT_CUDA_CHECK_LAUNCH();
      });
}

}  // namespace

void adamw_step(std::span<const AdamWTensor> tensors, const AdamWConfig& config, int64_t step) {
  if (tensors.empty()) return;
  const bool bf16_params = tensors[0].param.dtype == DType::bf16;  // one dtype a call (ops::adamw_step)
  const adamw_math::Scalars s = adamw_math::scalars_of(config, step);
  switch (moment_format_of(tensors[0].m.dtype)) {
    case MomentFormat::f32:
      if (!bf16_params) return adamw_f32(tensors, config, step);
      return adamw_coded<5>(tensors, s, adamw_elementwise_kernel<__nv_bfloat16, float>);
    case MomentFormat::bf16:
      return adamw_coded<5>(tensors, s,
                            bf16_params ? adamw_elementwise_kernel<__nv_bfloat16, __nv_bfloat16>
                                        : adamw_elementwise_kernel<float, __nv_bfloat16>);
    case MomentFormat::q8:
      upload_code_maps();
      return adamw_coded<7>(tensors, s,
                            bf16_params ? adamw_q8_kernel<__nv_bfloat16> : adamw_q8_kernel<float>);
  }
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

namespace {

// The norm of the gradients into norm, queued; with clip, every gradient then scaled by
// min(1, max_norm / (norm + 1e-6)) on the device.
void queue_norm(const char* op, std::span<const Tensor> grads, const Tensor& norm, bool clip,
                double max_norm) {
  const int64_t blocks = chunk_blocks(op, grads);
  const cudaStream_t stream = current_stream();
  if (blocks == 0) {  // no elements: the norm is 0 and nothing needs scaling
    PT_CUDA_CHECK(cudaMemsetAsync(norm.data, 0, sizeof(double), stream));
    return;
  }
  // The factor lives in scratch: only the scale kernels below read it, before the next op may reuse it.
  ScratchPlan plan;
  const size_t partial_at = plan.reserve<double>(blocks), factor_at = plan.reserve<double>(1);
  plan.allocate();
  double *partial = plan.at<double>(partial_at), *factor = clip ? plan.at<double>(factor_at) : nullptr;
  queue_squares(grads, partial);
  norm_kernel<<<1, kTotalThreads, 0, stream>>>(partial, static_cast<int>(blocks), max_norm,
                                               data<double>(norm), factor);
  PT_CUDA_CHECK_LAUNCH();
  if (clip) queue_scale(grads, 1.0, factor);
}

}  // namespace

void global_norm_deferred(std::span<const Tensor> grads, const Tensor& norm) {
  queue_norm("global_norm_deferred", grads, norm, false, 0);
}

void clip_grad_norm_deferred(std::span<const Tensor> grads, double max_norm, const Tensor& norm) {
  queue_norm("clip_grad_norm_deferred", grads, norm, true, max_norm);
}

}  // namespace pt::ops::cuda
