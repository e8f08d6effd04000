#include "ops/gelu.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace pt::ops {

namespace {

using Forward = void (*)(const Tensor&, const Tensor&);
using Backward = void (*)(const Tensor&, const Tensor&, const Tensor&);
using CudaBackward = void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Write);

// The front ends of both forms: the same checks, then the backend's kernel. cuda is null in a build
// without CUDA.
void forward(const char* op, Forward cpu, Forward cuda, const Tensor& h, const Tensor& out) {
  ArgCheck a(op);
  a.real("h", h, {-1, -1}).real("out", out, {h.size(0), h.size(1)}).same_or_disjoint("h", h, "out", out);
  if (a.device() == Device::cpu) return cpu(h, out);
  if (a.device() == Device::cuda && cuda) return cuda(h, out);
  a.unsupported_device();
}

// The cpu composes its GELU and bias backwards; cuda sums dbias in the GELU's pass.
void backward(const char* op, Backward cpu, CudaBackward cuda, const Tensor& dout, const Tensor& h,
              const Tensor& dh, const Tensor& dbias, Write dbias_mode) {
  ArgCheck a(op);
  a.real("h", h, {-1, -1});
  a.real("dout", dout, {h.size(0), h.size(1)}).real("dh", dh, {h.size(0), h.size(1)});
  a.same_or_disjoint("dout", dout, "dh", dh).same_or_disjoint("h", h, "dh", dh);
  if (!dbias.empty()) a.real_or_f32("dbias", dbias, {h.size(1)});
  if (a.device() == Device::cpu) {
    cpu(dout, h, dh);
    if (!dbias.empty()) cpu::bias_backward(dh, dbias, dbias_mode);
    return;
  }
  if (a.device() == Device::cuda && cuda) return cuda(dout, h, dh, dbias, dbias_mode);
  a.unsupported_device();
}

#ifdef PACKTRAIN_CUDA
constexpr Forward kCudaTanh = cuda::gelu_forward, kCudaErf = cuda::gelu_erf_forward;
constexpr CudaBackward kCudaTanhGrad = cuda::gelu_backward, kCudaErfGrad = cuda::gelu_erf_backward;
#else
constexpr Forward kCudaTanh = nullptr, kCudaErf = nullptr;
constexpr CudaBackward kCudaTanhGrad = nullptr, kCudaErfGrad = nullptr;
#endif

}  // namespace

void gelu_forward(const Tensor& h, const Tensor& out) {
  forward("gelu_forward", cpu::gelu_forward, kCudaTanh, h, out);
}

void gelu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh, const Tensor& dbias,
                   Write dbias_mode) {
  backward("gelu_backward", cpu::gelu_backward, kCudaTanhGrad, dout, h, dh, dbias, dbias_mode);
}

void gelu_erf_forward(const Tensor& h, const Tensor& out) {
  forward("gelu_erf_forward", cpu::gelu_erf_forward, kCudaErf, h, out);
}

void gelu_erf_backward(const Tensor& dout, const Tensor& h, const Tensor& dh, const Tensor& dbias,
                       Write dbias_mode) {
  backward("gelu_erf_backward", cpu::gelu_erf_backward, kCudaErfGrad, dout, h, dh, dbias, dbias_mode);
}

}  // namespace pt::ops
