#include "ops/cross_entropy.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace pt::ops {

CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, double grad_scale,
                                 const Tensor& dlogits) {
  ArgCheck a("cross_entropy");
  a.real("logits", logits, {-1, -1}).ints("targets", targets, {logits.size(0)});
  if (!dlogits.empty())
    a.real("dlogits", dlogits, {logits.size(0), logits.size(1)})
        .same_or_disjoint("logits", logits, "dlogits", dlogits);
  switch (a.device()) {
    case Device::cpu:
      return cpu::cross_entropy(logits, targets, grad_scale, dlogits);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::cross_entropy(logits, targets, grad_scale, dlogits);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
