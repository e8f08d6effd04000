#include "ops/elementwise.h"

#include "core/device.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace pt::ops {

void copy(const Tensor& src, const Tensor& dst) {
  if (src.dtype != dst.dtype || src.numel() != dst.numel() || src.device != dst.device)
    fail("copy: {} into {}: element types, sizes and devices must agree", src.str(), dst.str());
  copy_bytes(dst.data, dst.device == Device::cuda, src.data, src.device == Device::cuda,
             static_cast<size_t>(src.bytes()));
}

void add(const Tensor& src, const Tensor& dst) {
  if (src.dtype != dst.dtype || src.numel() != dst.numel() || src.device != dst.device)
    fail("add: {} into {}: element types, sizes and devices must agree", src.str(), dst.str());
  switch (dst.device) {
    case Device::cpu: return cpu::add(src, dst);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::add(src, dst);
#else
      break;
#endif
  }
  fail("add: no {} implementation in this build", device_name(dst.device));
}

}  // namespace pt::ops
