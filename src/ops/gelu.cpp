#include "ops/gelu.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace pt::ops {

void gelu_forward(const Tensor& h, const Tensor& out) {
  ArgCheck a("gelu_forward");
  a.real("h", h, {-1, -1}).real("out", out, {h.size(0), h.size(1)}).same_or_disjoint("h", h, "out", out);
  switch (a.device()) {
    case Device::cpu:
      return cpu::gelu_forward(h, out);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::gelu_forward(h, out);
#else
      break;
#endif
  }
  a.unsupported_device();
}

void gelu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh) {
  ArgCheck a("gelu_backward");
  a.real("h", h, {-1, -1});
  a.real("dout", dout, {h.size(0), h.size(1)}).real("dh", dh, {h.size(0), h.size(1)});
  a.same_or_disjoint("dout", dout, "dh", dh).same_or_disjoint("h", h, "dh", dh);
  switch (a.device()) {
    case Device::cpu:
      return cpu::gelu_backward(dout, h, dh);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::gelu_backward(dout, h, dh);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
