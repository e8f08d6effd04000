// Helpers for the CUDA op tests: inputs are drawn on the host, rounded to the device's storage type, run
// through the cpu backend in f64 as the reference and through the cuda backend on device copies whose
// outputs were poisoned (every byte 0xFF, a NaN in f32 and bf16) so an unwritten element cannot pass.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/device_buffer.h"
#include "core/float16.h"
#include "ops/gradcheck.h"

// Every CUDA test starts with this: without a device (or a CUDA build) there is nothing to run.
#define SKIP_WITHOUT_GPU()                                                \
  do {                                                                    \
    if (::pt::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

namespace pt::testing {

// The values as the device stores them: bf16 rounds to nearest even, f32 rounds from double.
inline std::vector<double> rounded(std::vector<double> v, DType dtype) {
  for (double& x : v)
    x = dtype == DType::bf16 ? double(bf16_to_float(float_to_bf16(float(x)))) : double(float(x));
  return v;
}

// f32 values as bf16 stores them (weights a bf16 model reads, for a cpu reference on the same values).
inline std::vector<float> bf16_rounded(std::vector<float> v) {
  for (float& x : v) x = bf16_to_float(float_to_bf16(x));
  return v;
}

// A device tensor and the buffer that owns its memory.
struct DeviceTensor {
  DeviceBuffer buffer;
  Tensor t;
};

inline DeviceTensor upload(const std::vector<double>& v, DType dtype, std::initializer_list<int64_t> dims) {
  DeviceTensor d{DeviceBuffer(v.size() * static_cast<size_t>(dtype_size(dtype))), {}};
  d.t = d.buffer.view(dtype, dims);
  if (d.t.numel() != static_cast<int64_t>(v.size())) fail("upload: {} values for {}", v.size(), d.t.str());
  if (dtype == DType::bf16) {
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = float_to_bf16(float(v[i]));
    d.buffer.upload(bits.data(), bits.size() * 2);
  } else {
    std::vector<float> f(v.begin(), v.end());
    d.buffer.upload(f.data(), f.size() * 4);
  }
  return d;
}

inline DeviceTensor upload_ints(const std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
  DeviceTensor d{DeviceBuffer(v.size() * 4), {}};
  d.t = d.buffer.view(DType::i32, dims);
  d.buffer.upload(v.data(), v.size() * 4);
  return d;
}

// A device tensor whose every byte is 0xFF: NaN in f32 and bf16.
inline DeviceTensor poisoned(DType dtype, std::initializer_list<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  const std::vector<unsigned char> bytes(static_cast<size_t>(n * dtype_size(dtype)), 0xFF);
  DeviceTensor d{DeviceBuffer(bytes.size()), {}};
  d.t = d.buffer.view(dtype, dims);
  d.buffer.upload(bytes.data(), bytes.size());
  return d;
}

inline std::vector<double> download(const Tensor& t) {
  const auto n = static_cast<size_t>(t.numel());
  std::vector<double> out(n);
  if (t.dtype == DType::bf16) {
    std::vector<uint16_t> bits(n);
    copy_bytes(bits.data(), false, t.data, true, n * 2);
    for (size_t i = 0; i < n; ++i) out[i] = bf16_to_float(bits[i]);
  } else {
    std::vector<float> f(n);
    copy_bytes(f.data(), false, t.data, true, n * 4);
    std::copy(f.begin(), f.end(), out.begin());
  }
  return out;
}

// f64 device tensors hold results the device accumulates for the host (loss sums, norms).
inline DeviceTensor upload_f64(const std::vector<double>& v, std::initializer_list<int64_t> dims) {
  DeviceTensor d{DeviceBuffer(v.size() * 8), {}};
  d.t = d.buffer.view(DType::f64, dims);
  d.buffer.upload(v.data(), v.size() * 8);
  return d;
}

inline std::vector<double> download_f64(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  copy_bytes(out.data(), false, t.data, true, out.size() * 8);
  return out;
}

// Raw bytes of a device tensor, for bitwise determinism checks.
inline std::vector<unsigned char> download_bytes(const Tensor& t) {
  std::vector<unsigned char> bytes(static_cast<size_t>(t.bytes()));
  copy_bytes(bytes.data(), false, t.data, true, bytes.size());
  return bytes;
}

// How far a device result is from the reference: max |got - want| / max |want| over the tensor; a
// non-finite element in `got` makes the error infinite. str() names the worst element for the log.
struct Comparison {
  double error = 0;
  int64_t worst = -1, nonfinite = 0;
  double got = 0, want = 0, scale = 0;

  std::string str() const {
    return fmt::format(
        "relative error {:.3g} (max |want| {:.4g}); worst element {}: got {:.8g}, want {:.8g}; "
        "{} non-finite values",
        error, scale, worst, got, want, nonfinite);
  }
};

inline Comparison compare(const std::vector<double>& got, const std::vector<double>& want) {
  Comparison c;
  if (got.size() != want.size()) {
    c.error = INFINITY;
    return c;
  }
  for (double w : want) c.scale = std::max(c.scale, std::fabs(w));
  double worst_diff = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    double diff = std::fabs(got[i] - want[i]);
    if (!std::isfinite(got[i])) ++c.nonfinite, diff = INFINITY;
    if (diff > worst_diff)
      worst_diff = diff, c.worst = static_cast<int64_t>(i), c.got = got[i], c.want = want[i];
  }
  c.error = worst_diff <= 0 ? 0 : worst_diff / (c.scale > 0 ? c.scale : 1);
  return c;
}

// The brief's bounds: bf16 results within 1% of the f64 reference; f32 within 1e-5, or 1e-4 for long
// reductions (GEMMs, norms, losses) whose fp32 rounding grows with their length.
inline double tolerance(DType dtype, bool reduction = false) {
  if (dtype == DType::bf16) return 1e-2;
  return reduction ? 1e-4 : 1e-5;
}

}  // namespace pt::testing

// EXPECT_CLOSE(device tensor, reference values, tolerance) with the worst element in the message.
#define EXPECT_CLOSE(tensor, want, tol)                                                                   \
  do {                                                                                                    \
    const ::pt::testing::Comparison c_ = ::pt::testing::compare(::pt::testing::download(tensor), (want)); \
    EXPECT_LE(c_.error, (tol)) << #tensor << ": " << c_.str();                                            \
  } while (0)
