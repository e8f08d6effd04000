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
  if (src.device == Device::cuda) {
#ifdef PACKTRAIN_CUDA
    return cuda::copy(src, dst);
#else
    fail("copy: no cuda implementation in this build; run on cpu");
#endif
  }
  copy_bytes(dst.data, false, src.data, false, static_cast<size_t>(src.bytes()));
}

void cast(const Tensor& src, const Tensor& dst) {
  if (src.numel() != dst.numel() || src.device != dst.device)
    fail("cast: {} into {}: element counts and devices must agree", src.str(), dst.str());
  if (src.dtype == dst.dtype) return copy(src, dst);
  auto convertible = [](DType t) { return t == DType::f32 || t == DType::bf16; };
  if (!convertible(src.dtype) || !convertible(dst.dtype))
    fail("cast: {} into {}: only f32 <-> bf16 conversions are supported", src.str(), dst.str());
  switch (dst.device) {
    case Device::cpu:
      return cpu::cast(src, dst);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::cast(src, dst);
#else
      break;
#endif
  }
  fail("cast: no {} implementation in this build", device_name(dst.device));
}

void add(const Tensor& src, const Tensor& dst) {
  if (src.dtype != dst.dtype || src.numel() != dst.numel() || src.device != dst.device)
    fail("add: {} into {}: element types, sizes and devices must agree", src.str(), dst.str());
  switch (dst.device) {
    case Device::cpu:
      return cpu::add(src, dst);
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
