#include "ops/embedding.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace pt::ops {

void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out,
                       [[maybe_unused]] bool ids_checked) {
  ArgCheck a("embedding_forward");
  a.ints("ids", ids, {-1}).real("table", table, {-1, -1}).real("out", out, {ids.size(0), table.size(1)});
  switch (a.device()) {
    case Device::cpu:
      return cpu::embedding_forward(ids, table, out);  // checks the ids anyway: cheap on the host
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::embedding_forward(ids, table, out, ids_checked);
#else
      break;
#endif
  }
  a.unsupported_device();
}

void embedding_backward(const Tensor& ids, const Tensor& dout, const Tensor& dtable, Write mode,
                        [[maybe_unused]] bool ids_checked) {
  ArgCheck a("embedding_backward");
  a.ints("ids", ids, {-1}).real("dout", dout, {ids.size(0), -1});
  a.real_or_f32("dtable", dtable, {-1, dout.size(1)});
  switch (a.device()) {
    case Device::cpu:
      return cpu::embedding_backward(ids, dout, dtable, mode);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::embedding_backward(ids, dout, dtable, mode, ids_checked);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
