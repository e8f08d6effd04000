#include "ops/rope.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace pt::ops {

namespace {

// Both directions share the checks; the backward is the same rotation by the negated angle.
void rope(const char* op, const Tensor& x, const Tensor& position_ids, double theta, int sign,
          const Tensor& out) {
  ArgCheck a(op);
  a.real("input", x, {-1, -1, -1});
  a.ints("position_ids", position_ids, {x.size(0)}).real("output", out, {x.size(0), x.size(1), x.size(2)});
  if (x.size(2) % 2 != 0) fail("{}: head dim must be even for rotate_half pairs, got {}", op, x.size(2));
  if (!(theta > 0)) fail("{}: rope theta must be > 0, got {}", op, theta);
  a.same_or_disjoint("input", x, "output", out);
  switch (a.device()) {
    case Device::cpu:
      return cpu::rope_rotate(x, position_ids, theta, sign, out);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::rope_rotate(x, position_ids, theta, sign, out);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace

void rope_forward(const Tensor& x, const Tensor& position_ids, double theta, const Tensor& out) {
  rope("rope_forward", x, position_ids, theta, +1, out);
}

void rope_backward(const Tensor& dout, const Tensor& position_ids, double theta, const Tensor& dx) {
  rope("rope_backward", dout, position_ids, theta, -1, dx);
}

}  // namespace pt::ops
