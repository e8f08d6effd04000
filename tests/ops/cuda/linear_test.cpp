// CUDA linear layers (cuBLASLt) against the cpu backend in f64: f32 without TF32, bf16 inputs with f32 or
// bf16 weight gradients, overwrite and accumulate, shapes that fit no tile.
#include "ops/linear.h"

#include "cuda_test_util.h"

namespace pt::ops {
namespace {

using namespace pt::testing;

struct Case {
  int64_t M, N, K;
};

void check_linear(DType dtype, DType dw_type, Case s, Write mode) {
  const auto [M, N, K] = s;
  SCOPED_TRACE(fmt::format("{} (dw {}) M={} N={} K={} {}", dtype_name(dtype), dtype_name(dw_type), M, N, K,
                           mode == Write::accumulate ? "accumulate" : "overwrite"));
  std::vector<double> x = rounded(random_values(M * K, 1), dtype),
                      w = rounded(random_values(N * K, 2), dtype);
  std::vector<double> dy = rounded(random_values(M * N, 3), dtype);
  const std::vector<double> y0 = rounded(random_values(M * N, 4), dtype),
                            dx0 = rounded(random_values(M * K, 5), dtype),
                            dw0 = rounded(random_values(N * K, 6), dw_type);
  std::vector<double> y = y0, dx = dx0, dw = dw0;
  linear_forward(view(x, {M, K}), view(w, {N, K}), view(y, {M, N}), mode);
  linear_backward(view(dy, {M, N}), view(x, {M, K}), view(w, {N, K}), view(dx, {M, K}), mode,
                  view(dw, {N, K}), mode);

  const bool acc = mode == Write::accumulate;
  DeviceTensor d_x = upload(x, dtype, {M, K}), d_w = upload(w, dtype, {N, K}),
               d_dy = upload(dy, dtype, {M, N});
  DeviceTensor d_y = acc ? upload(y0, dtype, {M, N}) : poisoned(dtype, {M, N});
  DeviceTensor d_dx = acc ? upload(dx0, dtype, {M, K}) : poisoned(dtype, {M, K});
  DeviceTensor d_dw = acc ? upload(dw0, dw_type, {N, K}) : poisoned(dw_type, {N, K});
  linear_forward(d_x.t, d_w.t, d_y.t, mode);
  linear_backward(d_dy.t, d_x.t, d_w.t, d_dx.t, mode, d_dw.t, mode);
  EXPECT_CLOSE(d_y.t, y, tolerance(dtype, true));
  EXPECT_CLOSE(d_dx.t, dx, tolerance(dtype, true));
  EXPECT_CLOSE(d_dw.t, dw, tolerance(dw_type == DType::f32 ? dtype : dw_type, true));
}

const std::vector<Case> kCases = {{1, 1, 1},      {1, 768, 64},     {3, 5, 7},        {37, 61, 129},
                                  {64, 768, 768}, {257, 2048, 768}, {200, 768, 2048}, {16, 32000, 64}};

TEST(CudaLinear, F32MatchesCpuWithoutTf32) {
  SKIP_WITHOUT_GPU();
  for (const Case& s : kCases) check_linear(DType::f32, DType::f32, s, Write::overwrite);
  check_linear(DType::f32, DType::f32, {33, 65, 129}, Write::accumulate);
}

TEST(CudaLinear, Bf16WithF32WeightGradientMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const Case& s : kCases) check_linear(DType::bf16, DType::f32, s, Write::overwrite);
  check_linear(DType::bf16, DType::f32, {64, 768, 768}, Write::accumulate);
}

TEST(CudaLinear, Bf16WithBf16WeightGradientMatchesCpu) {
  SKIP_WITHOUT_GPU();
  check_linear(DType::bf16, DType::bf16, {37, 61, 129}, Write::overwrite);
  check_linear(DType::bf16, DType::bf16, {64, 768, 768}, Write::accumulate);
}

// With packing the token count M changes every step: cuBLASLt's algorithm is cached per bucket of the
// token dimension (8 per power of two: 1000..1024 round up to 1024, 1025..1030 to 1152, 4097 to 4608) and
// reused for every M of the bucket that cublasLtMatmulAlgoCheck accepts. Each M is checked against the cpu,
// in an order where most shapes take an algorithm found for another M of their bucket.
TEST(CudaLinear, TokenCountsSharingABucketMatchCpu) {
  SKIP_WITHOUT_GPU();
  std::vector<int64_t> counts = {1030, 1024};
  for (int64_t M = 1000; M <= 1030; ++M) counts.push_back(M);
  for (int64_t M : {7919, 4097, 4100, 8000, 7, 1, 16, 17, 1001}) counts.push_back(M);
  for (int64_t M : counts) check_linear(DType::bf16, DType::f32, {M, 192, 320}, Write::overwrite);
  for (int64_t M : {1003, 1029, 1, 4097}) {
    check_linear(DType::bf16, DType::f32, {M, 192, 320}, Write::accumulate);
    check_linear(DType::bf16, DType::bf16, {M, 192, 320}, Write::overwrite);
  }
  for (int64_t M : {1030, 1000, 1017, 7, 7919})
    check_linear(DType::f32, DType::f32, {M, 96, 160}, Write::overwrite);
}

// More exact shapes than the plan cache keeps (1024): it is emptied and refilled without changing results.
TEST(CudaLinear, ManyTokenCountsOutgrowThePlanCache) {
  SKIP_WITHOUT_GPU();
  for (int64_t M = 1; M <= 400; ++M) check_linear(DType::bf16, DType::f32, {M, 24, 40}, Write::overwrite);
  for (int64_t M : {1, 200, 400}) check_linear(DType::bf16, DType::f32, {M, 24, 40}, Write::overwrite);
}

// Views into an arena start at any element: cuBLASLt must get the real (small) alignment of each pointer.
TEST(CudaLinear, UnalignedViewsMatchCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t M = 9, N = 17, K = 31;
  std::vector<double> x = rounded(random_values(M * K + 1, 7), DType::bf16),
                      w = rounded(random_values(N * K, 8), DType::bf16);
  std::vector<double> y(M * N);
  std::vector<double> x_view(x.begin() + 1, x.end());
  linear_forward(view(x_view, {M, K}), view(w, {N, K}), view(y, {M, N}));
  DeviceTensor d_x = upload(x, DType::bf16, {M * K + 1}), d_w = upload(w, DType::bf16, {N, K});
  DeviceTensor d_y = poisoned(DType::bf16, {M * N + 1});
  const Tensor x_off(static_cast<uint16_t*>(d_x.t.data) + 1, DType::bf16, {M, K}, Device::cuda);
  const Tensor y_off(static_cast<uint16_t*>(d_y.t.data) + 1, DType::bf16, {M, N}, Device::cuda);
  linear_forward(x_off, d_w.t, y_off);
  EXPECT_CLOSE(y_off, y, tolerance(DType::bf16, true));
}

// The bias in cuBLASLt's epilogue (y's type, 16-byte aligned) and the fallbacks (an f32 bias beside bf16 y,
// a bias view at an odd element, no inner dimension): each equals the cpu's product plus bias, in both
// write modes, the accumulated output's old values kept.
TEST(CudaLinear, BiasInTheEpilogueOrAfterMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const auto& [dtype, bias_type] :
       {std::pair{DType::bf16, DType::bf16}, {DType::f32, DType::f32}, {DType::bf16, DType::f32}})
    for (const Case& s : {Case{1, 768, 64}, Case{37, 61, 129}, Case{257, 2048, 768}, Case{5, 8, 0}})
      for (Write mode : {Write::overwrite, Write::accumulate})
        for (int64_t offset : {0, 1}) {
          const auto [M, N, K] = s;
          SCOPED_TRACE(fmt::format("{} bias {} M={} N={} K={} {} offset {}", dtype_name(dtype),
                                   dtype_name(bias_type), M, N, K,
                                   mode == Write::accumulate ? "accumulate" : "overwrite", offset));
          std::vector<double> x = rounded(random_values(M * K, 1), dtype),
                              w = rounded(random_values(N * K, 2), dtype),
                              b = rounded(random_values(N + 1, 3), bias_type);
          const std::vector<double> y0 = rounded(random_values(M * N, 4), dtype);
          std::vector<double> y = y0, b_view(b.begin() + offset, b.begin() + offset + N);
          linear_forward(view(x, {M, K}), view(w, {N, K}), view(y, {M, N}), mode, view(b_view, {N}));
          DeviceTensor d_x = upload(x, dtype, {M, K}), d_w = upload(w, dtype, {N, K}),
                       d_b = upload(b, bias_type, {N + 1});
          DeviceTensor d_y = mode == Write::accumulate ? upload(y0, dtype, {M, N}) : poisoned(dtype, {M, N});
          const Tensor bias(static_cast<char*>(d_b.t.data) + offset * dtype_size(bias_type), bias_type, {N},
                            Device::cuda);
          linear_forward(d_x.t, d_w.t, d_y.t, mode, bias);
          EXPECT_CLOSE(d_y.t, y, tolerance(dtype, true));
        }
}

TEST(CudaLinear, EmptyInnerDimensionZeroesOrKeepsTheOutput) {
  SKIP_WITHOUT_GPU();
  const int64_t M = 4, N = 3;
  DeviceTensor x = poisoned(DType::f32, {M, 0}), w = poisoned(DType::f32, {N, 0});
  DeviceTensor y = poisoned(DType::f32, {M, N});
  linear_forward(x.t, w.t, y.t);
  EXPECT_CLOSE(y.t, std::vector<double>(M * N, 0.0), 0.0);
}

// y and dy in rows padded past N (the logits' rows, aligned for cuBLASLt): the first N columns against the
// cpu backend, y's padding kept, dy's padding (NaN) never read.
TEST(CudaLinear, PaddedRowsMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::f32, DType::bf16})
    for (auto [M, N, K] : std::vector<Case>{{37, 61, 64}, {129, 50257, 64}, {5, 30522, 96}}) {
      const int64_t width = (N + 63) / 64 * 64;
      SCOPED_TRACE(fmt::format("{} M={} N={} K={} rows of {}", dtype_name(dtype), M, N, K, width));
      std::vector<double> x = rounded(random_values(M * K, 1), dtype),
                          w = rounded(random_values(N * K, 2), dtype),
                          dy = rounded(random_values(M * N, 3), dtype), y(M * N), dx(M * K), dw(N * K);
      linear_forward(view(x, {M, K}), view(w, {N, K}), view(y, {M, N}));
      linear_backward(view(dy, {M, N}), view(x, {M, K}), view(w, {N, K}), view(dx, {M, K}), Write::overwrite,
                      view(dw, {N, K}), Write::overwrite);
      DeviceTensor d_x = upload(x, dtype, {M, K}), d_w = upload(w, dtype, {N, K});
      DeviceTensor d_y =
          upload(pad_rows(std::vector<double>(M * N, NAN), M, N, width, -7.0), dtype, {M, width});
      DeviceTensor d_dy = upload(pad_rows(dy, M, N, width, NAN), dtype, {M, width});
      DeviceTensor d_dx = poisoned(dtype, {M, K}), d_dw = poisoned(DType::f32, {N, K});
      linear_forward(d_x.t, d_w.t, d_y.t, Write::overwrite);
      linear_backward(d_dy.t, d_x.t, d_w.t, d_dx.t, Write::overwrite, d_dw.t, Write::overwrite);
      const std::vector<double> got_y = download(d_y.t);
      const Comparison c = compare(unpad_rows(got_y, M, N, width), y);
      EXPECT_LE(c.error, tolerance(dtype, true)) << "y: " << c.str();
      EXPECT_EQ(unpad_rows(got_y, M, width, width)[width - 1], -7.0) << "the padding was written";
      EXPECT_CLOSE(d_dx.t, dx, tolerance(dtype, true));
      EXPECT_CLOSE(d_dw.t, dw, tolerance(dtype, true));
    }
}

}  // namespace
}  // namespace pt::ops
