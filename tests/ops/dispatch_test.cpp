// The front ends' argument checks, shared by every op: clear errors for unsupported types and devices.
#include "core/device.h"
#include "gradcheck.h"
#include "ops/rmsnorm.h"
#include "ops/swiglu.h"

#include <gtest/gtest.h>

namespace pt::ops {
namespace {

using testing::view;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(OpDispatch, Bf16IsStorageOnlyOnCpu) {
  std::vector<bf16> h(8), out(4);
  EXPECT_EQ(error_of([&] {
              swiglu_forward(view(h, {2, 4}), view(out, {2, 2}));
            }),
            "swiglu_forward: bf16 is not supported on cpu; use f32 or f64");
}

TEST(OpDispatch, CudaTensorsNeedACudaBackend) {
  if (built_with_cuda()) GTEST_SKIP() << "this build has the cuda backend";
  std::vector<float> h(8), out(4);
  Tensor hc(h.data(), DType::f32, {2, 4}, Device::cuda), oc(out.data(), DType::f32, {2, 2}, Device::cuda);
  EXPECT_EQ(error_of([&] { swiglu_forward(hc, oc); }),
            "swiglu_forward: no cuda implementation in this build; run it on cpu");
}

TEST(OpDispatch, TensorsMustShareADevice) {
  std::vector<float> h(8), out(4);
  Tensor oc(out.data(), DType::f32, {2, 2}, Device::cuda);
  EXPECT_EQ(
      error_of([&] {
        swiglu_forward(view(h, {2, 4}), oc);
      }),
      "swiglu_forward: out is on cuda but earlier arguments are on cpu; move all tensors to one device");
}

TEST(OpDispatch, MixedTypesAndShapesAreNamed) {
  std::vector<float> x(6), y(6), rstd(2);
  std::vector<double> w(3);
  EXPECT_EQ(error_of([&] {
              rmsnorm_forward(view(x, {2, 3}), view(w, {3}), 1e-5, view(y, {2, 3}), view(rstd, {2}));
            }),
            "rmsnorm_forward: weight is f64 but earlier arguments are f32; use one floating-point type");
  std::vector<float> wf(3);
  EXPECT_EQ(error_of([&] {
              rmsnorm_forward(view(x, {2, 3}), view(wf, {3}), 1e-5, view(y, {3, 2}), view(rstd, {2}));
            }),
            "rmsnorm_forward: y must have shape [2,3], got f32[3,2]@cpu");
}

}  // namespace
}  // namespace pt::ops
