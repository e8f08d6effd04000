// CUDA element-wise ops against the cpu backend in f64: SwiGLU, RoPE and add, in f32 and bf16.
#include "ops/elementwise.h"

#include "cuda_test_util.h"
#include "ops/rope.h"
#include "ops/swiglu.h"

namespace pt::ops {
namespace {

using namespace pt::testing;

const DType kTypes[] = {DType::f32, DType::bf16};

TEST(CudaSwiglu, ForwardAndBackwardMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kTypes)
    for (auto [T, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 2048}, {7, 33}, {129, 2048}}) {
      SCOPED_TRACE(fmt::format("{} T={} F={}", dtype_name(dtype), T, F));
      std::vector<double> h = rounded(random_values(T * 2 * F, 1, -6, 6), dtype);
      std::vector<double> dout = rounded(random_values(T * F, 2), dtype);
      std::vector<double> out(T * F), dh(T * 2 * F);
      swiglu_forward(view(h, {T, 2 * F}), view(out, {T, F}));
      swiglu_backward(view(dout, {T, F}), view(h, {T, 2 * F}), view(dh, {T, 2 * F}));

      DeviceTensor d_h = upload(h, dtype, {T, 2 * F}), d_dout = upload(dout, dtype, {T, F});
      DeviceTensor d_out = poisoned(dtype, {T, F}), d_dh = poisoned(dtype, {T, 2 * F});
      swiglu_forward(d_h.t, d_out.t);
      swiglu_backward(d_dout.t, d_h.t, d_dh.t);
      EXPECT_CLOSE(d_out.t, out, tolerance(dtype));
      EXPECT_CLOSE(d_dh.t, dh, tolerance(dtype));
    }
}

// Positions restart per packed example, as the batch builder emits them.
std::vector<int32_t> packed_positions(int64_t T) {
  std::vector<int32_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t % 37);
  if (T > 1) pos.back() = 4095;  // a long-context angle
  return pos;
}

TEST(CudaRope, ForwardAndBackwardMatchCpuInPlaceAndNot) {
  SKIP_WITHOUT_GPU();
  const double theta = 10000;
  for (DType dtype : kTypes)
    for (auto [T, N, D] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {1, 1, 2}, {5, 3, 6}, {300, 12, 64}, {65, 4, 128}}) {
      SCOPED_TRACE(fmt::format("{} T={} N={} D={}", dtype_name(dtype), T, N, D));
      std::vector<double> x = rounded(random_values(T * N * D, 3), dtype), out(T * N * D), back(T * N * D);
      const std::vector<int32_t> pos = packed_positions(T);
      std::vector<int32_t> pos_host = pos;
      rope_forward(view(x, {T, N, D}), view(pos_host, {T}), theta, view(out, {T, N, D}));
      rope_backward(view(x, {T, N, D}), view(pos_host, {T}), theta, view(back, {T, N, D}));

      DeviceTensor d_pos = upload_ints(pos, {T}), d_x = upload(x, dtype, {T, N, D});
      DeviceTensor d_out = poisoned(dtype, {T, N, D});
      rope_forward(d_x.t, d_pos.t, theta, d_out.t);
      EXPECT_CLOSE(d_out.t, out, tolerance(dtype));
      rope_backward(d_x.t, d_pos.t, theta, d_x.t);  // in place
      EXPECT_CLOSE(d_x.t, back, tolerance(dtype));
    }
}

TEST(CudaAdd, MatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kTypes)
    for (int64_t n : {1, 1000, 1 << 20}) {
      SCOPED_TRACE(fmt::format("{} n={}", dtype_name(dtype), n));
      std::vector<double> src = rounded(random_values(n, 4), dtype),
                          dst = rounded(random_values(n, 5), dtype);
      DeviceTensor d_src = upload(src, dtype, {n}), d_dst = upload(dst, dtype, {n});
      add(view(src, {n}), view(dst, {n}));
      add(d_src.t, d_dst.t);
      EXPECT_CLOSE(d_dst.t, dst, tolerance(dtype));
    }
}

}  // namespace
}  // namespace pt::ops
