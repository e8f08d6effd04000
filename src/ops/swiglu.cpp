#include "ops/swiglu.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace pt::ops {

namespace {

int64_t half_width(const char* op, const Tensor& h) {
  if (h.size(1) % 2 != 0) fail("{}: h must be [T,2F] (gate and up halves), got odd width {}", op, h.size(1));
  return h.size(1) / 2;
}

}  // namespace

void swiglu_forward(const Tensor& h, const Tensor& out) {
  ArgCheck a("swiglu_forward");
  a.real("h", h, {-1, -1});
  a.real("out", out, {h.size(0), half_width(a.op(), h)});
  switch (a.device()) {
    case Device::cpu:
      return cpu::swiglu_forward(h, out);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::swiglu_forward(h, out);
#else
      break;
#endif
  }
  a.unsupported_device();
}

void swiglu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh) {
  ArgCheck a("swiglu_backward");
  a.real("h", h, {-1, -1});
  a.real("dout", dout, {h.size(0), half_width(a.op(), h)}).real("dh", dh, {h.size(0), h.size(1)});
  switch (a.device()) {
    case Device::cpu:
      return cpu::swiglu_backward(dout, h, dh);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::swiglu_backward(dout, h, dh);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
