// CUDA linear layers (cuBLASLt) against the cpu backend in f64: f32 without TF32, bf16 inputs with f32 or
// bf16 weight gradients, overwrite and accumulate, shapes that fit no tile; and the GELU-fused pair of
// GPT-2's MLP against the cpu's composition.
#include "ops/linear.h"

#include "cuda_test_util.h"
#include "ops/cuda/cuda_ops.h"
#include "shifted.h"

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

// {33, 2053, 96}: dW's transposed B runs as aligned columns and a tail (linear.cpp's gemm).
const std::vector<Case> kCases = {{1, 1, 1},        {1, 768, 64},    {3, 5, 7},
                                  {37, 61, 129},    {64, 768, 768},  {257, 2048, 768},
                                  {200, 768, 2048}, {16, 32000, 64}, {33, 2053, 96}};

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

// linear_weight_grads: n gradients [M,N] lying `gap` elements apart in one buffer (equal gaps: one batched
// GEMM; uneven ones, or gap 0 meaning separate buffers: a GEMM each), against the cpu in f64.
void check_weight_grads(DType dtype, DType dw_type, Case s, int n, Write mode, bool uneven) {
  const auto [M, N, K] = s;
  SCOPED_TRACE(fmt::format("{} (dw {}) M={} N={} K={} n={} {}{}", dtype_name(dtype), dtype_name(dw_type), M,
                           N, K, n, mode == Write::accumulate ? "accumulate" : "overwrite",
                           uneven ? " uneven" : ""));
  std::vector<double> x = rounded(random_values(M * K, 1), dtype);
  // Room for every gradient with a gap of 8 elements after each (16 more after the first when uneven).
  const int64_t dy_slot = M * N + 8, dw_slot = N * K + 8, extra = uneven ? 16 : 0;
  DeviceBuffer dy_buffer(static_cast<size_t>((n * dy_slot + extra) * dtype_size(dtype))),
      dw_buffer(static_cast<size_t>((n * dw_slot + extra) * dtype_size(dw_type)));
  std::vector<Tensor> d_dy, d_dw;
  std::vector<std::vector<double>> want;
  const bool acc = mode == Write::accumulate;
  for (int i = 0; i < n; ++i) {
    std::vector<double> dy = rounded(random_values(M * N, 10 + i), dtype);
    const std::vector<double> dw0 = rounded(random_values(N * K, 20 + i), dw_type);
    std::vector<double> dw = dw0;
    linear_backward(view(dy, {M, N}), view(x, {M, K}), view(dw, {N, K}), Tensor(), mode, view(dw, {N, K}),
                    mode);
    want.push_back(dw);
    const int64_t shift = uneven && i > 0 ? extra : 0;
    char* dy_at = static_cast<char*>(dy_buffer.data()) + (i * dy_slot + shift) * dtype_size(dtype);
    char* dw_at = static_cast<char*>(dw_buffer.data()) + (i * dw_slot + shift) * dtype_size(dw_type);
    d_dy.emplace_back(dy_at, dtype, std::initializer_list<int64_t>{M, N}, Device::cuda);
    d_dw.emplace_back(dw_at, dw_type, std::initializer_list<int64_t>{N, K}, Device::cuda);
    const DeviceTensor dy_up = upload(dy, dtype, {M, N});
    const DeviceTensor dw_up = acc ? upload(dw0, dw_type, {N, K}) : poisoned(dw_type, {N, K});
    copy_bytes(d_dy.back().data, true, dy_up.t.data, true, static_cast<size_t>(d_dy.back().bytes()));
    copy_bytes(d_dw.back().data, true, dw_up.t.data, true, static_cast<size_t>(d_dw.back().bytes()));
  }
  const DeviceTensor d_x = upload(x, dtype, {M, K});
  linear_weight_grads(d_dy, d_x.t, d_dw, mode);
  for (int i = 0; i < n; ++i) {
    SCOPED_TRACE(fmt::format("layer {}", i));
    EXPECT_CLOSE(d_dw[i], want[i], tolerance(dw_type == DType::f32 ? dtype : dw_type, true));
  }
}

// BERT-base's q, k and v (MHA) and Qwen3's k and v shapes; one token; a narrow odd shape.
TEST(CudaLinear, WeightGradsOfLayersSharingAnInputMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (Write mode : {Write::overwrite, Write::accumulate})
    for (bool uneven : {false, true}) {
      check_weight_grads(DType::bf16, DType::f32, {1000, 768, 768}, 3, mode, uneven);
      check_weight_grads(DType::bf16, DType::f32, {517, 1024, 1024}, 2, mode, uneven);
      check_weight_grads(DType::bf16, DType::f32, {1, 64, 96}, 3, mode, uneven);
      check_weight_grads(DType::f32, DType::f32, {37, 61, 129}, 2, mode, uneven);
      check_weight_grads(DType::bf16, DType::bf16, {64, 128, 256}, 2, mode, uneven);
    }
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

// y = residual + x W^T + bias with the residual read as cuBLASLt's C and y written as D: against the cpu op,
// in place and from a separate residual (which must stay as it was), with the bias in the epilogue or after
// (an f32 bias beside bf16 y), and with no inner dimension (y = residual + bias).
TEST(CudaLinear, ResidualFromItsOwnBufferOrInPlaceMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const auto& [dtype, bias_type] :
       {std::pair{DType::bf16, DType::bf16}, {DType::f32, DType::f32}, {DType::bf16, DType::f32}})
    for (const Case& s : {Case{1, 768, 64}, Case{37, 61, 129}, Case{257, 768, 2048}, Case{5, 8, 0}})
      for (bool in_place : {false, true}) {
        const auto [M, N, K] = s;
        SCOPED_TRACE(fmt::format("{} bias {} M={} N={} K={} {}", dtype_name(dtype), dtype_name(bias_type), M,
                                 N, K, in_place ? "in place" : "separate residual"));
        std::vector<double> x = rounded(random_values(M * K, 1), dtype),
                            w = rounded(random_values(N * K, 2), dtype),
                            b = rounded(random_values(N, 3), bias_type);
        const std::vector<double> residual = rounded(random_values(M * N, 4), dtype);
        std::vector<double> y(M * N), r = residual;
        linear_residual_forward(view(x, {M, K}), view(w, {N, K}), view(r, {M, N}), view(y, {M, N}),
                                view(b, {N}));
        DeviceTensor d_x = upload(x, dtype, {M, K}), d_w = upload(w, dtype, {N, K}),
                     d_b = upload(b, bias_type, {N});
        DeviceTensor d_r = upload(residual, dtype, {M, N});
        DeviceTensor d_y = in_place ? upload(residual, dtype, {M, N}) : poisoned(dtype, {M, N});
        linear_residual_forward(d_x.t, d_w.t, in_place ? d_y.t : d_r.t, d_y.t, d_b.t);
        EXPECT_CLOSE(d_y.t, y, tolerance(dtype, true));
        if (!in_place) EXPECT_CLOSE(d_r.t, residual, 0.0);
      }
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

// --- linear_gelu_forward and linear_dgelu_backward (cuBLASLt's GELU_AUX_BIAS and DGELU epilogues) ---

// cuBLASLt may evaluate its GELU epilogue's tanh with the hardware approximation (tanh.approx.f32, relative
// error up to about 2^-11; its docs say neither way), for which GEMM's f32 bound (1e-4) leaves no room.
double gelu_tolerance(DType dtype) { return dtype == DType::bf16 ? tolerance(dtype, true) : 3e-3; }

// Forward: x[M,K], w[N,K] -> h, act [M,N]. Backward: dy[M,N], w[N,K], h[M,K] -> dh[M,K] (N and K as the down
// projection has them). The epilogue runs where its aux matrix's leading dimension (N forward, K backward)
// is a multiple of 8; the rest take the fallback.
struct GeluCase {
  int64_t M, N, K;
};

const std::vector<GeluCase> kGeluCases = {{1, 768, 64}, {3, 200, 129},   {77, 3072, 768}, {77, 61, 64},
                                          {5, 8, 1},    {33, 768, 3072}, {1, 13, 7},      {129, 96, 40}};

// Weights scaled by 1/sqrt(K) beside inputs in [-1, 1]: h = x W^T + b spreads over GELU's bend (std ~1.5)
// rather than its nearly linear tails.
std::vector<double> gelu_weights(int64_t N, int64_t K, uint64_t seed, DType dtype) {
  const double a = 4.5 / std::sqrt(static_cast<double>(K));
  return rounded(random_values(N * K, seed, -a, a), dtype);
}

// The cpu's h and act, and the device's inputs with poisoned outputs (h `offset` elements into its buffer).
struct GeluForward {
  std::vector<double> h, act;
  DeviceTensor x, w, b, d_h, d_act;
  Tensor bias;
};

GeluForward gelu_forward_case(DType dtype, DType bias_type, GeluCase s, bool with_bias, int64_t offset) {
  const auto [M, N, K] = s;
  std::vector<double> x = rounded(random_values(M * K, 11), dtype), w = gelu_weights(N, K, 12, dtype),
                      b = rounded(random_values(N, 13), bias_type);
  GeluForward r{std::vector<double>(M * N), std::vector<double>(M * N),
                upload(x, dtype, {M, K}),   upload(w, dtype, {N, K}),
                upload(b, bias_type, {N}),  poisoned_shifted(dtype, {M, N}, offset),
                poisoned(dtype, {M, N}),    Tensor()};
  linear_gelu_forward(view(x, {M, K}), view(w, {N, K}), with_bias ? view(b, {N}) : Tensor(),
                      view(r.h, {M, N}), view(r.act, {M, N}));
  if (with_bias) r.bias = r.b.t;
  return r;
}

void expect_gelu_forward_close(const GeluForward& r, DType dtype) {
  EXPECT_CLOSE(r.d_h.t, r.h, tolerance(dtype, true));
  EXPECT_CLOSE(r.d_act.t, r.act, gelu_tolerance(dtype));
}

void check_gelu_forward(DType dtype, DType bias_type, GeluCase s, bool with_bias, int64_t offset) {
  SCOPED_TRACE(fmt::format("{} bias {} M={} N={} K={} h offset {}", dtype_name(dtype),
                           with_bias ? dtype_name(bias_type) : "none", s.M, s.N, s.K, offset));
  GeluForward r = gelu_forward_case(dtype, bias_type, s, with_bias, offset);
  linear_gelu_forward(r.x.t, r.w.t, r.bias, r.d_h.t, r.d_act.t);
  expect_gelu_forward_close(r, dtype);
}

// The cpu's dh and the device's inputs (dy in rows of `width` >= N, padded with NaN; h `offset` elements into
// its buffer) with dh poisoned.
struct GeluBackward {
  std::vector<double> dh;
  DeviceTensor dy, w, h, d_dh;
};

GeluBackward gelu_backward_case(DType dtype, GeluCase s, int64_t width, int64_t offset) {
  const auto [M, N, K] = s;
  std::vector<double> dy = rounded(random_values(M * N, 21), dtype), w = gelu_weights(N, K, 22, dtype),
                      h = rounded(random_values(M * K, 23, -4, 4), dtype);
  GeluBackward r{std::vector<double>(M * K), upload(pad_rows(dy, M, N, width, NAN), dtype, {M, width}),
                 upload(w, dtype, {N, K}), upload_shifted(h, dtype, {M, K}, offset), poisoned(dtype, {M, K})};
  linear_dgelu_backward(view(dy, {M, N}), view(w, {N, K}), view(h, {M, K}), view(r.dh, {M, K}));
  return r;
}

void check_gelu_backward(DType dtype, GeluCase s, int64_t width, int64_t offset) {
  SCOPED_TRACE(fmt::format("{} M={} N={} K={} dy rows of {}, h offset {}", dtype_name(dtype), s.M, s.N, s.K,
                           width, offset));
  GeluBackward r = gelu_backward_case(dtype, s, width, offset);
  linear_dgelu_backward(r.dy.t, r.w.t, r.h.t, r.d_dh.t);
  EXPECT_CLOSE(r.d_dh.t, r.dh, gelu_tolerance(dtype));
}

TEST(CudaLinearGelu, ForwardMatchesTheCpuComposition) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::bf16, DType::f32})
    for (const GeluCase& s : kGeluCases) {
      check_gelu_forward(dtype, dtype, s, true, 0);
      if (s.M < 10) check_gelu_forward(dtype, dtype, s, false, 0);  // GELU_AUX, no bias
    }
}

// An f32 bias beside bf16 h (the bias epilogue takes D's type) and h off 16-byte alignment take the
// composition; the results are the same.
TEST(CudaLinearGelu, ForwardFallbacksMatchTheCpuComposition) {
  SKIP_WITHOUT_GPU();
  for (const GeluCase& s : {GeluCase{1, 768, 64}, GeluCase{77, 3072, 768}, GeluCase{5, 8, 1}}) {
    check_gelu_forward(DType::bf16, DType::f32, s, true, 0);
    check_gelu_forward(DType::bf16, DType::bf16, s, true, 1);
    check_gelu_forward(DType::f32, DType::f32, s, true, 1);
  }
}

TEST(CudaLinearGelu, BackwardMatchesTheCpuComposition) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::bf16, DType::f32})
    for (const GeluCase& s : kGeluCases) {
      check_gelu_backward(dtype, s, s.N, 0);
      check_gelu_backward(dtype, s, (s.N / 64 + 1) * 64, 0);  // dy's rows padded past N
      if (s.M < 10) check_gelu_backward(dtype, s, s.N, 1);    // h misaligned: the composition
    }
}

// The token count changes every step: the epilogues' algorithms are cached per bucket of M (as
// CudaLinear.TokenCountsSharingABucketMatchCpu checks for the plain GEMMs) and each M matches the cpu.
TEST(CudaLinearGelu, TokenCountsSharingABucketMatchCpu) {
  SKIP_WITHOUT_GPU();
  std::vector<int64_t> counts = {1030, 1024};
  for (int64_t M = 1000; M <= 1030; M += 3) counts.push_back(M);
  for (int64_t M : {7919, 4097, 7, 1, 17}) counts.push_back(M);
  for (int64_t M : counts) {
    check_gelu_forward(DType::bf16, DType::bf16, {M, 192, 320}, true, 0);
    check_gelu_backward(DType::bf16, {M, 320, 192}, 320, 0);
  }
}

// One shape through the plain GEMM with its bias epilogue, the GELU forward and the GELU gradient, in turns:
// the plan cache keeps a plan per epilogue, so each call still gets its own.
TEST(CudaLinearGelu, PlansOfOtherEpiloguesDoNotMix) {
  SKIP_WITHOUT_GPU();
  const int64_t M = 77, N = 256, K = 128;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(fmt::format("round {}", round));
    check_gelu_forward(DType::bf16, DType::bf16, {M, N, K}, true, 0);
    std::vector<double> x = rounded(random_values(M * K, 31), DType::bf16),
                        w = gelu_weights(N, K, 32, DType::bf16),
                        b = rounded(random_values(N, 33), DType::bf16), y(M * N);
    linear_forward(view(x, {M, K}), view(w, {N, K}), view(y, {M, N}), Write::overwrite, view(b, {N}));
    DeviceTensor d_x = upload(x, DType::bf16, {M, K}), d_w = upload(w, DType::bf16, {N, K}),
                 d_b = upload(b, DType::bf16, {N}), d_y = poisoned(DType::bf16, {M, N});
    linear_forward(d_x.t, d_w.t, d_y.t, Write::overwrite, d_b.t);
    EXPECT_CLOSE(d_y.t, y, tolerance(DType::bf16, true));  // the bias epilogue's plan
    // The dx GEMM of the same shape, plain and with the GELU gradient.
    check_linear(DType::bf16, DType::f32, {M, K, N}, Write::overwrite);
    check_gelu_backward(DType::bf16, {M, K, N}, K, 0);
  }
}

#ifdef PACKTRAIN_CUDA  // the cuda backend's own functions, which say whether the epilogue ran
// GPT-2 124M's MLP shapes in bf16 with a bf16 bias, as the model runs them: both GEMMs take the epilogue on
// this GPU's cuBLASLt (no fallback) and match the cpu; the fallbacks report themselves.
TEST(CudaLinearGelu, Gpt2ShapesRunInTheEpilogue) {
  SKIP_WITHOUT_GPU();
  const int64_t C = 768, F = 3072;
  for (int64_t M : {77, 1024}) {
    SCOPED_TRACE(fmt::format("M={}", M));
    GeluForward f = gelu_forward_case(DType::bf16, DType::bf16, {M, F, C}, true, 0);
    EXPECT_TRUE(cuda::linear_gelu_forward(f.x.t, f.w.t, f.bias, f.d_h.t, f.d_act.t))
        << "GELU_AUX_BIAS fell back";
    expect_gelu_forward_close(f, DType::bf16);
    GeluBackward b = gelu_backward_case(DType::bf16, {M, C, F}, C, 0);
    EXPECT_TRUE(cuda::linear_dgelu_backward(b.dy.t, b.w.t, b.h.t, b.d_dh.t)) << "DGELU fell back";
    EXPECT_CLOSE(b.d_dh.t, b.dh, gelu_tolerance(DType::bf16));
  }
  GeluForward f32_bias = gelu_forward_case(DType::bf16, DType::f32, {77, F, C}, true, 0);
  EXPECT_FALSE(
      cuda::linear_gelu_forward(f32_bias.x.t, f32_bias.w.t, f32_bias.bias, f32_bias.d_h.t, f32_bias.d_act.t));
  expect_gelu_forward_close(f32_bias, DType::bf16);
  GeluForward odd = gelu_forward_case(DType::bf16, DType::bf16, {77, 61, C}, true, 0);
  EXPECT_FALSE(cuda::linear_gelu_forward(odd.x.t, odd.w.t, odd.bias, odd.d_h.t, odd.d_act.t));
  expect_gelu_forward_close(odd, DType::bf16);
  GeluBackward misaligned = gelu_backward_case(DType::bf16, {77, C, F}, C, 1);
  EXPECT_FALSE(
      cuda::linear_dgelu_backward(misaligned.dy.t, misaligned.w.t, misaligned.h.t, misaligned.d_dh.t));
  EXPECT_CLOSE(misaligned.d_dh.t, misaligned.dh, gelu_tolerance(DType::bf16));
}
#endif

}  // namespace
}  // namespace pt::ops
