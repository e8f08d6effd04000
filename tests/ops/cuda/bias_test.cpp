// CUDA bias add and bias gradient against the cpu backend in f64: f32, bf16 with f32 or bf16 bias.
#include "ops/bias.h"

#include "cuda_test_util.h"
#include "shifted.h"

namespace pt::ops {
namespace {

using namespace pt::testing;

struct Dtypes {
  DType y, bias;  // the bias and its gradient
};

const Dtypes kAllTypes[] = {{DType::f32, DType::f32}, {DType::bf16, DType::f32}, {DType::bf16, DType::bf16}};

// offset > 0 places every tensor that many elements into its buffer: rows off 16-byte alignment.
void check_bias(Dtypes types, int64_t M, int64_t N, Write mode, int64_t offset = 0) {
  SCOPED_TRACE(fmt::format("y {} bias {} M={} N={} {} offset {}", dtype_name(types.y), dtype_name(types.bias),
                           M, N, mode == Write::accumulate ? "accumulate" : "overwrite", offset));
  const std::vector<double> y0 = rounded(random_values(M * N, 1), types.y);
  std::vector<double> b = rounded(random_values(N, 2), types.bias);
  std::vector<double> dy = rounded(random_values(M * N, 3), types.y);
  const std::vector<double> db0 = rounded(random_values(N, 4), types.bias);
  std::vector<double> y = y0, db = db0;
  bias_add(view(y, {M, N}), view(b, {N}));
  bias_backward(view(dy, {M, N}), view(db, {N}), mode);

  // y is read and written, so it cannot be poisoned: an element left out keeps y0, off by its bias.
  DeviceTensor d_y = upload_shifted(y0, types.y, {M, N}, offset),
               d_b = upload_shifted(b, types.bias, {N}, offset);
  bias_add(d_y.t, d_b.t);
  EXPECT_CLOSE(d_y.t, y, tolerance(types.y));

  DeviceTensor d_dy = upload_shifted(dy, types.y, {M, N}, offset);
  DeviceTensor d_db = mode == Write::accumulate ? upload_shifted(db0, types.bias, {N}, offset)
                                                : poisoned_shifted(types.bias, {N}, offset);
  bias_backward(d_dy.t, d_db.t, mode);
  EXPECT_CLOSE(d_db.t, db, tolerance(types.bias == DType::bf16 ? DType::bf16 : types.y, true));
}

// GPT-2's widths (768, 2304 = 3 x 768 for the fused qkv, 3072); M = 1, M past one block's 64 rows and
// not a multiple of them; N without whole 16-byte vectors (the scalar path).
TEST(CudaBias, AddAndGradientMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (Dtypes types : kAllTypes) {
    for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {1, 768}, {7, 33}, {65, 3072}, {129, 2304}, {300, 768}, {1000, 77}, {3, 8200}})
      check_bias(types, M, N, Write::overwrite);
    for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {130, 768}, {200, 3}})
      check_bias(types, M, N, Write::accumulate);
  }
}

TEST(CudaBias, MisalignedRowsMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (Dtypes types : kAllTypes)
    for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{{1, 768}, {37, 768}, {5, 77}})
      check_bias(types, M, N, Write::accumulate, 1);
}

// More rows than the add kernel's grid covers at once, so its threads step over rows.
TEST(CudaBias, ManyRowsMatchCpu) {
  SKIP_WITHOUT_GPU();
  check_bias({DType::bf16, DType::f32}, 20000, 768, Write::overwrite);
}

TEST(CudaBias, GradientIsBitwiseReproducible) {
  SKIP_WITHOUT_GPU();
  const int64_t M = 1000, N = 768;
  DeviceTensor dy = upload(random_values(M * N, 5), DType::bf16, {M, N});
  DeviceTensor db = poisoned(DType::f32, {N});
  bias_backward(dy.t, db.t, Write::overwrite);
  const auto first = download_bytes(db.t);
  bias_backward(dy.t, db.t, Write::overwrite);
  EXPECT_EQ(download_bytes(db.t), first);
}

// Rows padded past N (NaN there), on the vector path (N and the row width multiples of 16 bytes) and the
// scalar one: the first N columns against the cpu backend; the padding is not read.
TEST(CudaBias, PaddedRowsMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (Dtypes types : kAllTypes)
    for (int64_t N : {1000, 1003}) {
      const int64_t M = 70, width = 1024;
      SCOPED_TRACE(fmt::format("y {} N={} rows of {}", dtype_name(types.y), N, width));
      std::vector<double> y = rounded(random_values(M * N, 1), types.y),
                          b = rounded(random_values(N, 2), types.bias);
      std::vector<double> dy = rounded(random_values(M * N, 3), types.y), db(N);
      DeviceTensor d_y = upload(pad_rows(y, M, N, width, NAN), types.y, {M, width}),
                   d_b = upload(b, types.bias, {N});
      DeviceTensor d_dy = upload(pad_rows(dy, M, N, width, NAN), types.y, {M, width});
      DeviceTensor d_db = poisoned(types.bias, {N});
      bias_add(view(y, {M, N}), view(b, {N}));
      bias_backward(view(dy, {M, N}), view(db, {N}), Write::overwrite);
      bias_add(d_y.t, d_b.t);
      bias_backward(d_dy.t, d_db.t, Write::overwrite);
      const Comparison c = compare(unpad_rows(download(d_y.t), M, N, width), y);
      EXPECT_LE(c.error, tolerance(types.y)) << "y: " << c.str();
      EXPECT_CLOSE(d_db.t, db, tolerance(types.bias == DType::bf16 ? DType::bf16 : types.y, true));
    }
}

}  // namespace
}  // namespace pt::ops
