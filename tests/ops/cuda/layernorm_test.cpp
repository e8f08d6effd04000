// CUDA LayerNorm against the cpu backend in f64: f32, bf16 activations with f32 or bf16 parameters.
#include "ops/layernorm.h"

#include "cuda_test_util.h"
#include "shifted.h"

namespace pt::ops {
namespace {

using namespace pt::testing;

struct Dtypes {
  DType x, param;  // weight, bias and their gradients; mean and rstd are f32 on the device
};

// offset > 0 places every tensor that many elements into its buffer: rows off 16-byte alignment. shift
// moves x away from zero, where a variance taken as mean(x^2) - mean^2 would cancel. sum_dx: the backward
// also sums dx into dx_bias, checked against the sums of the device's dx (as stored) in f64.
void check_layernorm(Dtypes types, int64_t T, int64_t C, Write mode, int64_t offset = 0, double shift = 0,
                     bool sum_dx = false) {
  SCOPED_TRACE(fmt::format(
      "x {} params {} T={} C={} {} offset {} shift {}{}", dtype_name(types.x), dtype_name(types.param), T, C,
      mode == Write::accumulate ? "accumulate" : "overwrite", offset, shift, sum_dx ? " dx_bias" : ""));
  const double eps = 1e-5;
  std::vector<double> x = rounded(random_values(T * C, 1, shift - 2, shift + 2), types.x);
  std::vector<double> w = rounded(random_values(C, 2, 0.5, 1.5), types.param);
  std::vector<double> b = rounded(random_values(C, 3), types.param);
  std::vector<double> dy = rounded(random_values(T * C, 4), types.x);
  std::vector<double> dw0 = rounded(random_values(C, 5), types.param),
                      db0 = rounded(random_values(C, 6), types.param),
                      dx0 = rounded(random_values(T * C, 7), types.x);
  // f64 reference: forward, then backward from the reference statistics; mode applies to dx and the
  // parameter gradients alike.
  std::vector<double> y(T * C), mean(T), rstd(T), dx = dx0, dw = dw0, db = db0;
  layernorm_forward(view(x, {T, C}), view(w, {C}), view(b, {C}), eps, view(y, {T, C}), view(mean, {T}),
                    view(rstd, {T}));
  layernorm_backward(view(dy, {T, C}), view(x, {T, C}), view(w, {C}), view(mean, {T}), view(rstd, {T}),
                     view(dx, {T, C}), mode, view(dw, {C}), view(db, {C}), mode);

  DeviceTensor d_x = upload_shifted(x, types.x, {T, C}, offset),
               d_w = upload_shifted(w, types.param, {C}, offset),
               d_b = upload_shifted(b, types.param, {C}, offset);
  DeviceTensor d_dy = upload_shifted(dy, types.x, {T, C}, offset);
  DeviceTensor d_y = poisoned_shifted(types.x, {T, C}, offset), d_mean = poisoned(DType::f32, {T}),
               d_rstd = poisoned(DType::f32, {T});
  layernorm_forward(d_x.t, d_w.t, d_b.t, eps, d_y.t, d_mean.t, d_rstd.t);
  EXPECT_CLOSE(d_y.t, y, tolerance(types.x, true));
  EXPECT_CLOSE(d_mean.t, mean, tolerance(DType::f32, true));
  EXPECT_CLOSE(d_rstd.t, rstd, tolerance(DType::f32, true));

  const bool add = mode == Write::accumulate;
  DeviceTensor d_dx =
      add ? upload_shifted(dx0, types.x, {T, C}, offset) : poisoned_shifted(types.x, {T, C}, offset);
  DeviceTensor d_dw =
      add ? upload_shifted(dw0, types.param, {C}, offset) : poisoned_shifted(types.param, {C}, offset);
  DeviceTensor d_db =
      add ? upload_shifted(db0, types.param, {C}, offset) : poisoned_shifted(types.param, {C}, offset);
  const std::vector<double> dxb0 = rounded(random_values(C, 8), types.param);
  DeviceTensor d_dxb = !sum_dx ? DeviceTensor()
                       : add   ? upload_shifted(dxb0, types.param, {C}, offset)
                               : poisoned_shifted(types.param, {C}, offset);
  layernorm_backward(d_dy.t, d_x.t, d_w.t, d_mean.t, d_rstd.t, d_dx.t, mode, d_dw.t, d_db.t, mode, d_dxb.t);
  EXPECT_CLOSE(d_dx.t, dx, tolerance(types.x, true));
  const double param_tol = tolerance(types.param == DType::bf16 ? DType::bf16 : types.x, true);
  EXPECT_CLOSE(d_dw.t, dw, param_tol);
  EXPECT_CLOSE(d_db.t, db, param_tol);
  if (!sum_dx) return;
  std::vector<double> sums = add ? dxb0 : std::vector<double>(C);
  const std::vector<double> stored = download(d_dx.t);
  for (int64_t i = 0; i < T * C; ++i) sums[i % C] += stored[i];
  EXPECT_CLOSE(d_dxb.t, sums, param_tol);
}

// GPT-2's widths (768, 1600, 3072) among others; T = 1, C = 1 (every token normalizes to 0) and T past
// several blocks of rows.
const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1, 1},    {5, 1},   {1, 64},    {3, 768},
                                                          {5, 3072}, {67, 77}, {300, 768}, {40, 1600}};

const Dtypes kAllTypes[] = {{DType::f32, DType::f32}, {DType::bf16, DType::f32}, {DType::bf16, DType::bf16}};

TEST(CudaLayerNorm, F32MatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (auto [T, C] : kShapes) check_layernorm({DType::f32, DType::f32}, T, C, Write::overwrite);
  check_layernorm({DType::f32, DType::f32}, 130, 64, Write::accumulate);
}

TEST(CudaLayerNorm, Bf16WithF32ParamsMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (auto [T, C] : kShapes) check_layernorm({DType::bf16, DType::f32}, T, C, Write::overwrite);
  check_layernorm({DType::bf16, DType::f32}, 130, 768, Write::accumulate);
}

TEST(CudaLayerNorm, Bf16WithBf16ParamsMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (auto [T, C] : kShapes) check_layernorm({DType::bf16, DType::bf16}, T, C, Write::overwrite);
  check_layernorm({DType::bf16, DType::bf16}, 70, 3072, Write::accumulate);
}

// Rows that are not whole 16-byte vectors (C % 8 != 0 for bf16, % 4 for f32) or start off alignment take
// the scalar path; wide rows take fewer warps per block (C = 16384 needs more than the default 48 KiB of
// shared memory for one warp's two rows); T not a multiple of a block's 32 rows leaves a part block.
TEST(CudaLayerNorm, VectorAndScalarPathsAndOddShapesMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (Dtypes types : kAllTypes) {
    for (auto [T, C] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {1, 7}, {33, 12}, {70, 1000}, {4, 4096}})
      check_layernorm(types, T, C, Write::accumulate);
    check_layernorm(types, 3, 16384, Write::overwrite);
    for (auto [T, C] : std::vector<std::pair<int64_t, int64_t>>{{1, 768}, {37, 768}, {5, 77}})
      check_layernorm(types, T, C, Write::overwrite, 1);
  }
}

// dx summed into dx_bias in the same pass (a post-norm layer's projection bias): both write modes, the vector
// and scalar paths, wide rows (fewer warps a block with three shared rows each).
TEST(CudaLayerNorm, InputBiasGradientMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (Dtypes types : kAllTypes) {
    for (auto [T, C] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 768}, {300, 768}, {67, 77}})
      for (Write mode : {Write::overwrite, Write::accumulate}) check_layernorm(types, T, C, mode, 0, 0, true);
    check_layernorm(types, 37, 768, Write::overwrite, 1, 0, true);
    check_layernorm(types, 3, 12288, Write::overwrite, 0, 0, true);
  }
}

// Rows around 50 with a spread of 2: the variance is taken around the mean.
TEST(CudaLayerNorm, OffsetRowsMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (Dtypes types : kAllTypes) check_layernorm(types, 45, 768, Write::overwrite, 0, 50);
}

TEST(CudaLayerNorm, ParameterGradientsAreBitwiseReproducible) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 1000, C = 768;
  DeviceTensor x = upload(random_values(T * C, 7), DType::bf16, {T, C}),
               w = upload(random_values(C, 8), DType::f32, {C}),
               b = upload(random_values(C, 9), DType::f32, {C});
  DeviceTensor dy = upload(random_values(T * C, 10), DType::bf16, {T, C});
  DeviceTensor y = poisoned(DType::bf16, {T, C}), mean = poisoned(DType::f32, {T}),
               rstd = poisoned(DType::f32, {T}), dx = poisoned(DType::bf16, {T, C});
  DeviceTensor dw = poisoned(DType::f32, {C}), db = poisoned(DType::f32, {C});
  layernorm_forward(x.t, w.t, b.t, 1e-5, y.t, mean.t, rstd.t);
  layernorm_backward(dy.t, x.t, w.t, mean.t, rstd.t, dx.t, Write::overwrite, dw.t, db.t, Write::overwrite);
  const auto first_dw = download_bytes(dw.t), first_db = download_bytes(db.t);
  layernorm_backward(dy.t, x.t, w.t, mean.t, rstd.t, dx.t, Write::overwrite, dw.t, db.t, Write::overwrite);
  EXPECT_EQ(download_bytes(dw.t), first_dw);
  EXPECT_EQ(download_bytes(db.t), first_db);
}

}  // namespace
}  // namespace pt::ops
