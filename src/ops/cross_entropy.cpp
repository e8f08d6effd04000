#include "ops/cross_entropy.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace pt::ops {

namespace {

// The number of classes: vocab, or every column when it is 0.
int64_t check_args(ArgCheck& a, const Tensor& logits, const Tensor& targets, const Tensor& dlogits,
                   int64_t vocab) {
  a.real("logits", logits, {-1, -1}).ints("targets", targets, {logits.size(0)});
  if (vocab < 0) fail("{}: vocab must be >= 0 (0: every column), got {}", a.op(), vocab);
  if (vocab == 0) vocab = logits.size(1);
  a.padded_rows("logits", logits, logits.size(0), vocab);
  if (!dlogits.empty())
    a.real("dlogits", dlogits, {logits.size(0), logits.size(1)})
        .same_or_disjoint("logits", logits, "dlogits", dlogits);
  return vocab;
}

}  // namespace

CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, double grad_scale,
                                 const Tensor& dlogits, int64_t vocab) {
  ArgCheck a("cross_entropy");
  const int64_t V = check_args(a, logits, targets, dlogits, vocab);
  switch (a.device()) {
    case Device::cpu:
      return cpu::cross_entropy(logits, targets, grad_scale, dlogits, V);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::cross_entropy(logits, targets, grad_scale, dlogits, V);
#else
      break;
#endif
  }
  a.unsupported_device();
}

void cross_entropy_accumulate(const Tensor& logits, const Tensor& targets, double grad_scale,
                              const Tensor& dlogits, const Tensor& sums, int64_t vocab) {
  ArgCheck a("cross_entropy_accumulate");
  const int64_t V = check_args(a, logits, targets, dlogits, vocab);
  if (sums.dtype != DType::f64 || sums.ndim != 1 || sums.shape[0] != 2 || sums.data == nullptr)
    fail("cross_entropy_accumulate: sums must be an f64 tensor of shape [2] ({{loss_sum, tokens}}), got {}",
         sums.str());
  if (sums.device != a.device())
    fail("cross_entropy_accumulate: sums is on {} but the logits are on {}; allocate it there",
         device_name(sums.device), device_name(a.device()));
  switch (a.device()) {
    case Device::cpu:
      return cpu::cross_entropy_accumulate(logits, targets, grad_scale, dlogits, sums, V);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::cross_entropy_accumulate(logits, targets, grad_scale, dlogits, sums, V);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
