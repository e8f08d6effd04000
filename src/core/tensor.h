// A non-owning view of a contiguous row-major tensor: pointer, element type, device and up to 4 dims.
// Ops take views and never allocate their outputs, so the caller (model, optimizer, test) owns memory
// and the same op signatures serve the CPU and CUDA backends.
#pragma once

#include "core/error.h"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace pt {

enum class DType : uint8_t { f32, f64, bf16, i32, u8 };  // u8: masks
enum class Device : uint8_t { cpu, cuda };

// bfloat16 as raw storage bits; arithmetic on it comes with the CUDA backend.
struct bf16 {
  uint16_t bits;
};

const char* dtype_name(DType dtype);
// The dtype dtype_name names ("f32", "bf16"...), or nullopt.
std::optional<DType> parse_dtype(std::string_view name);
const char* device_name(Device device);
int64_t dtype_size(DType dtype);

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return DType::f32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::f64;
  else if constexpr (std::is_same_v<T, bf16>)
    return DType::bf16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::i32;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DType::u8;
  else
    static_assert(sizeof(T) == 0, "no DType for this element type");
}

struct Tensor {
  static constexpr int kMaxDims = 4;

  void* data = nullptr;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};

  Tensor() = default;
  Tensor(void* data_, DType dtype_, std::initializer_list<int64_t> dims, Device device_ = Device::cpu);

  // The element type follows the pointer: Tensor::of(floats.data(), {T, C}).
  template <class T>
  static Tensor of(T* data_, std::initializer_list<int64_t> dims, Device device_ = Device::cpu) {
    return Tensor(const_cast<std::remove_const_t<T>*>(data_), dtype_of<std::remove_const_t<T>>(), dims,
                  device_);
  }

  bool empty() const { return data == nullptr; }  // "no tensor" for optional arguments
  int64_t numel() const;
  int64_t bytes() const { return numel() * dtype_size(dtype); }
  int64_t size(int dim) const;  // negative counts from the end, like Python
  // The same memory with other dims and the same element count: [T, H*D] seen as [T, H, D].
  Tensor reshape(std::initializer_list<int64_t> dims) const;
  // Rows [begin, end) of a 2-D row-major tensor, the same memory.
  Tensor rows(int64_t begin, int64_t end) const;
  // Elements [offset, offset + n) of the tensor seen flat, as a 1-D tensor of the same memory.
  Tensor elements(int64_t offset, int64_t n) const;
  std::string str() const;  // "f32[4,8]@cpu"

  // Typed access; the element type must match dtype exactly.
  template <class T>
  T* ptr() const {
    if (dtype_of<T>() != dtype)
      fail("tensor {} accessed as {}: element types differ", str(), dtype_name(dtype_of<T>()));
    return static_cast<T*>(data);
  }
};

}  // namespace pt
