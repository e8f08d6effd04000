// Element-type dispatch for the CPU kernels, which are templates over float and double.
#pragma once

#include "core/tensor.h"

namespace pt::ops::cpu {

// Calls fn(T{}) with T = float or double; other types (bf16 storage) are an error naming the op.
template <class Fn>
void dispatch_real(const char* op, DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      fn(float{});
      return;
    case DType::f64:
      fn(double{});
      return;
    default:
      fail("{}: {} is not supported on cpu; use f32 or f64", op, dtype_name(dtype));
  }
}

}  // namespace pt::ops::cpu
