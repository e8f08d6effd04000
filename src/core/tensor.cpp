#include "core/tensor.h"

#include <fmt/format.h>

namespace pt {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::u8:
      return "u8";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType d : {DType::f32, DType::f64, DType::bf16, DType::i32, DType::u8})
    if (name == dtype_name(d)) return d;
  return std::nullopt;
}

const char* device_name(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

int64_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::bf16:
      return 2;
    case DType::i32:
      return 4;
    case DType::u8:
      return 1;
  }
  return 0;
}

Tensor::Tensor(void* data_, DType dtype_, std::initializer_list<int64_t> dims, Device device_)
    : data(data_), dtype(dtype_), device(device_), ndim(static_cast<int>(dims.size())) {
  if (dims.size() > kMaxDims) fail("tensor with {} dims: at most {} are supported", dims.size(), kMaxDims);
  int i = 0;
  for (int64_t d : dims) {
    if (d < 0) fail("tensor dimension {} is {}: sizes must be >= 0", i, d);
    shape[static_cast<size_t>(i++)] = d;
  }
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[static_cast<size_t>(i)];
  return n;
}

int64_t Tensor::size(int dim) const {
  int d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= ndim) fail("tensor {} has no dimension {}", str(), dim);
  return shape[static_cast<size_t>(d)];
}

Tensor Tensor::reshape(std::initializer_list<int64_t> dims) const {
  Tensor t(data, dtype, dims, device);
  if (t.numel() != numel()) fail("cannot reshape {} to {}: element counts differ", str(), t.str());
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  if (ndim != 2 || begin < 0 || begin > end || end > shape[0])
    fail("rows [{}, {}) of {}: needs a 2-D tensor and 0 <= begin <= end <= rows", begin, end, str());
  return Tensor(static_cast<char*>(data) + begin * shape[1] * dtype_size(dtype), dtype,
                {end - begin, shape[1]}, device);
}

Tensor Tensor::elements(int64_t offset, int64_t n) const {
  if (offset < 0 || n < 0 || offset + n > numel())
    fail("elements [{}, {}) of {}: needs 0 <= offset <= offset + n <= numel", offset, offset + n, str());
  return Tensor(static_cast<char*>(data) + offset * dtype_size(dtype), dtype, {n}, device);
}

std::string Tensor::str() const {
  std::string dims;
  for (int i = 0; i < ndim; ++i) dims += fmt::format("{}{}", i ? "," : "", shape[static_cast<size_t>(i)]);
  return fmt::format("{}[{}]@{}", dtype_name(dtype), dims, device_name(device));
}

}  // namespace pt
