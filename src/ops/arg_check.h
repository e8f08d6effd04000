// Argument validation shared by the op front ends, so every backend receives tensors whose shapes,
// element types and device already agree. Messages name the op and the argument.
#pragma once

#include "core/tensor.h"

#include <initializer_list>

namespace pt::ops {

class ArgCheck {
 public:
  explicit ArgCheck(const char* op) : op_(op) {}

  // A floating-point tensor; every one an op takes shares one dtype. In `dims`, -1 matches any size.
  ArgCheck& real(const char* name, const Tensor& t, std::initializer_list<int64_t> dims);
  // Like real(), but f32 is accepted beside bf16 arguments: norm weights, statistics and parameter
  // gradients stay fp32 while activations are bf16. Call it after the tensor that sets the shared dtype.
  ArgCheck& real_or_f32(const char* name, const Tensor& t, std::initializer_list<int64_t> dims);
  // A real [rows, >= cols] matrix, as real(): its rows may be padded past cols (the logits' rows are, to
  // the 16-byte multiples cuBLASLt's fast kernels need); ops read and write its first cols columns only.
  ArgCheck& padded_rows(const char* name, const Tensor& t, int64_t rows, int64_t cols);
  // An int32 tensor (token ids, labels, positions, sequence offsets).
  ArgCheck& ints(const char* name, const Tensor& t, std::initializer_list<int64_t> dims);

  // A u8 mask, 1 where an element is kept (2:4 sparsity).
  ArgCheck& mask(const char* name, const Tensor& t, std::initializer_list<int64_t> dims);

  // `out` may be `in` itself (an in-place op) or a separate buffer, but must not partly overlap it.
  ArgCheck& same_or_disjoint(const char* in_name, const Tensor& in, const char* out_name, const Tensor& out);
  // `out` shares no byte with `in`: ops whose fused kernels read one while writing the other.
  ArgCheck& disjoint(const char* in_name, const Tensor& in, const char* out_name, const Tensor& out);

  Device device() const { return device_; }
  const char* op() const { return op_; }
  [[noreturn]] void unsupported_device() const;

 private:
  void common(const char* name, const Tensor& t, std::initializer_list<int64_t> dims);

  const char* op_;
  bool seen_ = false, seen_real_ = false;
  Device device_ = Device::cpu;
  DType dtype_ = DType::f32;
};

}  // namespace pt::ops
