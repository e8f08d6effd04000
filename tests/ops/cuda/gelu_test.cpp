// CUDA GELU (the tanh approximation and the exact erf form) against the cpu backend in f64, in f32 and
// bf16, in place and not, with and without the bias gradient in the backward's pass.
#include "ops/gelu.h"

#include "cuda_test_util.h"
#include "shifted.h"

namespace pt::ops {
namespace {

using namespace pt::testing;

const DType kTypes[] = {DType::f32, DType::bf16};

struct Form {
  const char* name;
  void (*forward)(const Tensor&, const Tensor&);
  void (*backward)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Write);
};
const Form kForms[] = {{"tanh", gelu_forward, gelu_backward}, {"erf", gelu_erf_forward, gelu_erf_backward}};

// offset > 0 places every tensor that many elements into its buffer, off 16-byte alignment (the scalar
// path). in_place runs the forward into h and the backward into dout.
void check_form(const Form& form, DType dtype, int64_t T, int64_t F, int64_t offset, bool in_place) {
  const auto gelu_forward = form.forward;
  const auto gelu_backward = form.backward;
  SCOPED_TRACE(fmt::format("{} {} T={} F={} offset {}{}", form.name, dtype_name(dtype), T, F, offset,
                           in_place ? " in place" : ""));
  std::vector<double> h = rounded(random_values(T * F, 1, -8, 8), dtype);
  std::vector<double> dout = rounded(random_values(T * F, 2), dtype);
  std::vector<double> out(T * F), dh(T * F);
  gelu_forward(view(h, {T, F}), view(out, {T, F}));
  gelu_backward(view(dout, {T, F}), view(h, {T, F}), view(dh, {T, F}), Tensor(), Write::overwrite);

  DeviceTensor d_h = upload_shifted(h, dtype, {T, F}, offset),
               d_dout = upload_shifted(dout, dtype, {T, F}, offset);
  if (in_place) {
    gelu_backward(d_dout.t, d_h.t, d_dout.t, Tensor(), Write::overwrite);  // before the forward overwrites h
    EXPECT_CLOSE(d_dout.t, dh, tolerance(dtype));
    gelu_forward(d_h.t, d_h.t);
    EXPECT_CLOSE(d_h.t, out, tolerance(dtype));
    return;
  }
  DeviceTensor d_out = poisoned_shifted(dtype, {T, F}, offset),
               d_dh = poisoned_shifted(dtype, {T, F}, offset);
  gelu_forward(d_h.t, d_out.t);
  gelu_backward(d_dout.t, d_h.t, d_dh.t, Tensor(), Write::overwrite);
  EXPECT_CLOSE(d_out.t, out, tolerance(dtype));
  EXPECT_CLOSE(d_dh.t, dh, tolerance(dtype));
}

// The backward with dbias (dh's type, or f32 beside bf16), overwritten and added to, in place or not. The
// reference sums the device's dh (as rounded to dtype) in f64, so bf16 rounding of dh does not count twice.
void check_bias_grad(const Form& form, DType dtype, DType bias_type, int64_t T, int64_t F, int64_t offset,
                     bool in_place) {
  SCOPED_TRACE(fmt::format("{} {} bias {} T={} F={} offset {}{}", form.name, dtype_name(dtype),
                           dtype_name(bias_type), T, F, offset, in_place ? " in place" : ""));
  std::vector<double> h = rounded(random_values(T * F, 3, -8, 8), dtype);
  std::vector<double> dout = rounded(random_values(T * F, 4), dtype);
  std::vector<double> dh(T * F), dbias(F);
  form.backward(view(dout, {T, F}), view(h, {T, F}), view(dh, {T, F}), view(dbias, {F}), Write::overwrite);
  DeviceTensor d_h = upload_shifted(h, dtype, {T, F}, offset),
               d_dout = upload_shifted(dout, dtype, {T, F}, offset);
  DeviceTensor d_dh = in_place ? DeviceTensor() : poisoned_shifted(dtype, {T, F}, offset);
  const Tensor out = in_place ? d_dout.t : d_dh.t;
  DeviceTensor d_dbias = poisoned(bias_type, {F});
  form.backward(d_dout.t, d_h.t, out, d_dbias.t, Write::overwrite);
  EXPECT_CLOSE(out, dh, tolerance(dtype));
  std::vector<double> sums(F);
  const std::vector<double> stored = download(out);
  for (int64_t i = 0; i < T * F; ++i) sums[i % F] += stored[i];
  const double sum_tol = tolerance(bias_type, /*reduction=*/true);
  EXPECT_CLOSE(d_dbias.t, sums, sum_tol);
  // Again, added to what dbias holds: twice the sums (dh is recomputed from the same dout unless in place).
  if (in_place) return;
  form.backward(d_dout.t, d_h.t, out, d_dbias.t, Write::accumulate);
  for (double& s : sums) s *= 2;
  EXPECT_CLOSE(d_dbias.t, sums, sum_tol);
}

void check_gelu(DType dtype, int64_t T, int64_t F, int64_t offset, bool in_place) {
  for (const Form& form : kForms) check_form(form, dtype, T, F, offset, in_place);
}

// GPT-2's MLP width (3072) and sizes with a tail after the 16-byte vectors (T F % 8 != 0 for bf16).
TEST(CudaGelu, ForwardAndBackwardMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kTypes)
    for (auto [T, F] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {1, 3072}, {7, 33}, {129, 3072}, {5, 770}, {3, 8200}, {1, 13}})
      check_gelu(dtype, T, F, 0, false);
}

// Widths with a tail past the 32-vector tiles, more rows than one block's 64, a single row.
TEST(CudaGelu, BackwardWithBiasGradientMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const Form& form : kForms)
    for (DType dtype : kTypes)
      for (auto [T, F] : std::vector<std::pair<int64_t, int64_t>>{
               {1, 1}, {1, 3072}, {7, 33}, {129, 3072}, {200, 770}, {65, 8}, {3, 13}}) {
        check_bias_grad(form, dtype, dtype, T, F, 0, false);
        if (dtype == DType::bf16) check_bias_grad(form, dtype, DType::f32, T, F, 0, false);
      }
}

TEST(CudaGelu, BackwardWithBiasGradientMisalignedAndInPlaceMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const Form& form : kForms)
    for (DType dtype : kTypes)
      for (auto [T, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {70, 3072}, {7, 33}}) {
        check_bias_grad(form, dtype, dtype, T, F, 1, false);
        check_bias_grad(form, dtype, dtype, T, F, 0, true);
        check_bias_grad(form, dtype, dtype, T, F, 1, true);
      }
}

TEST(CudaGelu, MisalignedAndInPlaceMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kTypes)
    for (auto [T, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 3072}, {7, 33}}) {
      check_gelu(dtype, T, F, 1, false);
      check_gelu(dtype, T, F, 0, true);
      check_gelu(dtype, T, F, 1, true);
    }
}

}  // namespace
}  // namespace pt::ops
