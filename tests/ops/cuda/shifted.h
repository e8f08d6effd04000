// Device tensors that start a few elements into their buffer: one element in, no row is 16-byte aligned,
// so the kernels' scalar fallbacks run on shapes their vector paths would otherwise take.
#pragma once

#include "cuda_test_util.h"

namespace pt::testing {

inline Tensor shifted_view(const DeviceTensor& d, DType dtype, int64_t offset,
                           std::initializer_list<int64_t> dims) {
  return Tensor(static_cast<char*>(d.buffer.data()) + offset * dtype_size(dtype), dtype, dims, Device::cuda);
}

inline DeviceTensor upload_shifted(const std::vector<double>& v, DType dtype,
                                   std::initializer_list<int64_t> dims, int64_t offset) {
  std::vector<double> padded(static_cast<size_t>(offset), 0.0);
  padded.insert(padded.end(), v.begin(), v.end());
  DeviceTensor d = upload(padded, dtype, {static_cast<int64_t>(padded.size())});
  d.t = shifted_view(d, dtype, offset, dims);
  return d;
}

inline DeviceTensor poisoned_shifted(DType dtype, std::initializer_list<int64_t> dims, int64_t offset) {
  int64_t numel = 1;
  for (int64_t size : dims) numel *= size;
  DeviceTensor d = poisoned(dtype, {numel + offset});
  d.t = shifted_view(d, dtype, offset, dims);
  return d;
}

}  // namespace pt::testing
