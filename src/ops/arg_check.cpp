#include "ops/arg_check.h"

#include <fmt/format.h>

namespace pt::ops {

namespace {

std::string dims_str(std::initializer_list<int64_t> dims) {
  std::string s;
  for (int64_t d : dims) s += fmt::format("{}{}", s.empty() ? "" : ",", d < 0 ? "*" : std::to_string(d));
  return "[" + s + "]";
}

}  // namespace

void ArgCheck::common(const char* name, const Tensor& t, std::initializer_list<int64_t> dims) {
  bool shape_ok = t.ndim == static_cast<int>(dims.size());
  size_t i = 0;
  for (int64_t d : dims) shape_ok = shape_ok && (d < 0 || t.shape[i] == d), ++i;
  if (!shape_ok) fail("{}: {} must have shape {}, got {}", op_, name, dims_str(dims), t.str());
  if (t.data == nullptr && t.numel() > 0) fail("{}: {} ({}) has no data pointer", op_, name, t.str());
  if (!seen_) {
    device_ = t.device;
    seen_ = true;
  } else if (t.device != device_) {
    fail("{}: {} is on {} but earlier arguments are on {}; move all tensors to one device", op_, name,
         device_name(t.device), device_name(device_));
  }
}

ArgCheck& ArgCheck::real(const char* name, const Tensor& t, std::initializer_list<int64_t> dims) {
  common(name, t, dims);
  if (t.dtype == DType::i32 || t.dtype == DType::u8)
    fail("{}: {} must be floating point, got {}", op_, name, t.str());
  if (!seen_real_) {
    dtype_ = t.dtype;
    seen_real_ = true;
  } else if (t.dtype != dtype_) {
    fail("{}: {} is {} but earlier arguments are {}; use one floating-point type", op_, name,
         dtype_name(t.dtype), dtype_name(dtype_));
  }
  return *this;
}

ArgCheck& ArgCheck::padded_rows(const char* name, const Tensor& t, int64_t rows, int64_t cols) {
  real(name, t, {rows, -1});
  if (t.shape[1] < cols)
    fail("{}: {} is {} but needs at least {} columns (rows padded past them are allowed)", op_, name, t.str(),
         cols);
  return *this;
}

ArgCheck& ArgCheck::real_or_f32(const char* name, const Tensor& t, std::initializer_list<int64_t> dims) {
  if (seen_real_ && dtype_ == DType::bf16 && t.dtype == DType::f32) {
    common(name, t, dims);
    return *this;
  }
  return real(name, t, dims);
}

ArgCheck& ArgCheck::ints(const char* name, const Tensor& t, std::initializer_list<int64_t> dims) {
  common(name, t, dims);
  if (t.dtype != DType::i32) fail("{}: {} must be i32, got {}", op_, name, t.str());
  return *this;
}

ArgCheck& ArgCheck::mask(const char* name, const Tensor& t, std::initializer_list<int64_t> dims) {
  common(name, t, dims);
  if (t.dtype != DType::u8) fail("{}: {} must be a u8 mask (1 = kept), got {}", op_, name, t.str());
  return *this;
}

ArgCheck& ArgCheck::same_or_disjoint(const char* in_name, const Tensor& in, const char* out_name,
                                     const Tensor& out) {
  const auto* a = static_cast<const char*>(in.data);
  const auto* b = static_cast<const char*>(out.data);
  if (a != b && a < b + out.bytes() && b < a + in.bytes())
    fail("{}: {} partly overlaps {}; pass the same tensor to work in place, or a separate buffer", op_,
         out_name, in_name);
  return *this;
}

ArgCheck& ArgCheck::disjoint(const char* in_name, const Tensor& in, const char* out_name, const Tensor& out) {
  const auto* a = static_cast<const char*>(in.data);
  const auto* b = static_cast<const char*>(out.data);
  if (in.numel() > 0 && out.numel() > 0 && a < b + out.bytes() && b < a + in.bytes())
    fail("{}: {} overlaps {}; pass a separate buffer", op_, out_name, in_name);
  return *this;
}

void ArgCheck::unsupported_device() const {
  fail("{}: no {} implementation in this build; run it on cpu", op_, device_name(device_));
}

}  // namespace pt::ops
