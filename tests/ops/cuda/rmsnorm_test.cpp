// CUDA RMSNorm against the cpu backend in f64: f32, bf16 activations with f32 or bf16 weights.
#include "ops/rmsnorm.h"

#include "cuda_test_util.h"
#include "shifted.h"

namespace pt::ops {
namespace {

using namespace pt::testing;

struct Dtypes {
  DType x, weight;  // rstd and dweight follow the weight: f32 beside bf16 is the mixed case
};

// offset > 0 places every tensor that many elements into its buffer: rows off 16-byte alignment.
void check_rmsnorm(Dtypes types, int64_t T, int64_t C, Write mode, int64_t offset = 0) {
  SCOPED_TRACE(fmt::format("x {} weight {} T={} C={} {} offset {}", dtype_name(types.x),
                           dtype_name(types.weight), T, C,
                           mode == Write::accumulate ? "accumulate" : "overwrite", offset));
  const double eps = 1e-5;
  std::vector<double> x = rounded(random_values(T * C, 1, -2, 2), types.x);
  std::vector<double> w = rounded(random_values(C, 2, 0.5, 1.5), types.weight);
  std::vector<double> dy = rounded(random_values(T * C, 3), types.x);
  std::vector<double> dw0 = rounded(random_values(C, 4), types.weight),
                      dx0 = rounded(random_values(T * C, 5), types.x);
  // f64 reference: forward, then backward from the reference rstd; mode applies to dx and dweight alike.
  std::vector<double> y(T * C), rstd(T), dx = dx0, dw = dw0;
  rmsnorm_forward(view(x, {T, C}), view(w, {C}), eps, view(y, {T, C}), view(rstd, {T}));
  rmsnorm_backward(view(dy, {T, C}), view(x, {T, C}), view(w, {C}), view(rstd, {T}), view(dx, {T, C}), mode,
                   view(dw, {C}), mode);

  DeviceTensor dx_in = upload_shifted(x, types.x, {T, C}, offset),
               dw_in = upload_shifted(w, types.weight, {C}, offset);
  DeviceTensor dy_in = upload_shifted(dy, types.x, {T, C}, offset);
  DeviceTensor d_y = poisoned_shifted(types.x, {T, C}, offset), d_rstd = poisoned(DType::f32, {T});
  rmsnorm_forward(dx_in.t, dw_in.t, eps, d_y.t, d_rstd.t);
  EXPECT_CLOSE(d_y.t, y, tolerance(types.x));
  EXPECT_CLOSE(d_rstd.t, rstd, tolerance(DType::f32, true));

  const DType dw_type = types.weight;
  const bool add = mode == Write::accumulate;
  DeviceTensor d_dx =
      add ? upload_shifted(dx0, types.x, {T, C}, offset) : poisoned_shifted(types.x, {T, C}, offset);
  DeviceTensor d_dw =
      add ? upload_shifted(dw0, dw_type, {C}, offset) : poisoned_shifted(dw_type, {C}, offset);
  rmsnorm_backward(dy_in.t, dx_in.t, dw_in.t, d_rstd.t, d_dx.t, mode, d_dw.t, mode);
  EXPECT_CLOSE(d_dx.t, dx, tolerance(types.x, true));
  EXPECT_CLOSE(d_dw.t, dw, tolerance(dw_type == DType::bf16 ? DType::bf16 : types.x, true));
}

const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1, 64}, {3, 768}, {5, 2048}, {67, 77}, {300, 768}};

TEST(CudaRmsNorm, F32MatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (auto [T, C] : kShapes) check_rmsnorm({DType::f32, DType::f32}, T, C, Write::overwrite);
  check_rmsnorm({DType::f32, DType::f32}, 130, 64, Write::accumulate);
}

TEST(CudaRmsNorm, Bf16WithF32WeightMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (auto [T, C] : kShapes) check_rmsnorm({DType::bf16, DType::f32}, T, C, Write::overwrite);
  check_rmsnorm({DType::bf16, DType::f32}, 130, 768, Write::accumulate);
}

TEST(CudaRmsNorm, Bf16WithBf16WeightMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (auto [T, C] : kShapes) check_rmsnorm({DType::bf16, DType::bf16}, T, C, Write::overwrite);
}

// Rows that are not whole 16-byte vectors (C % 8 != 0 for bf16, % 4 for f32) or start off alignment take
// the scalar path. Rows of up to 8 vectors a lane stay in registers (in bf16: 1 a lane at C = 64 and 256, 2
// at 512, 4 at 1000, 8 at 2048); wider ones take the shared-memory kernel, with fewer warps per block as C
// grows (C = 16384 needs more than the default 48 KiB of shared memory for one warp's dweight row). T not a
// multiple of a block's rows leaves a part block.
TEST(CudaRmsNorm, VectorAndScalarPathsAndOddShapesMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (Dtypes types :
       {Dtypes{DType::f32, DType::f32}, Dtypes{DType::bf16, DType::f32}, Dtypes{DType::bf16, DType::bf16}}) {
    for (auto [T, C] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 3}, {1, 7}, {33, 12}, {65, 256}, {129, 512}, {70, 1000}, {4, 4096}})
      check_rmsnorm(types, T, C, Write::accumulate);
    check_rmsnorm(types, 3, 16384, Write::overwrite);
    for (auto [T, C] : std::vector<std::pair<int64_t, int64_t>>{{1, 768}, {37, 768}, {5, 77}})
      check_rmsnorm(types, T, C, Write::overwrite, 1);
  }
}

// Rows of one attention head (32, 64 and 128 columns: lanes left idle in the register kernel) and many rows
// (hundreds of blocks, a part block at the end).
TEST(CudaRmsNorm, ShortRowsAndManyRowsMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (auto [T, C] :
       std::vector<std::pair<int64_t, int64_t>>{{17, 32}, {5003, 64}, {20011, 128}, {9001, 1024}})
    check_rmsnorm({DType::bf16, DType::f32}, T, C, Write::accumulate);
  check_rmsnorm({DType::f32, DType::f32}, 20011, 128, Write::overwrite);
  check_rmsnorm({DType::bf16, DType::bf16}, 3, 128, Write::overwrite);
}

TEST(CudaRmsNorm, DweightIsBitwiseReproducible) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 1000, C = 768;
  DeviceTensor x = upload(random_values(T * C, 5), DType::bf16, {T, C}),
               w = upload(random_values(C, 6), DType::f32, {C});
  DeviceTensor dy = upload(random_values(T * C, 7), DType::bf16, {T, C});
  DeviceTensor y = poisoned(DType::bf16, {T, C}), rstd = poisoned(DType::f32, {T}),
               dx = poisoned(DType::bf16, {T, C});
  DeviceTensor dw = poisoned(DType::f32, {C});
  rmsnorm_forward(x.t, w.t, 1e-5, y.t, rstd.t);
  rmsnorm_backward(dy.t, x.t, w.t, rstd.t, dx.t, Write::overwrite, dw.t, Write::overwrite);
  const auto first = download_bytes(dw.t);
  rmsnorm_backward(dy.t, x.t, w.t, rstd.t, dx.t, Write::overwrite, dw.t, Write::overwrite);
  EXPECT_EQ(download_bytes(dw.t), first);
}

}  // namespace
}  // namespace pt::ops
