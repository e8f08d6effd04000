// CUDA element-wise ops against the cpu backend in f64: SwiGLU, RoPE and add, in f32 and bf16; cast
// bit for bit against the cpu cast.
#include "ops/elementwise.h"

#include "cuda_test_util.h"
#include "ops/rope.h"
#include "ops/swiglu.h"
#include "shifted.h"

#include <bit>
#include <limits>
#include <random>

namespace pt::ops {
namespace {

using namespace pt::testing;

const DType kTypes[] = {DType::f32, DType::bf16};

TEST(CudaSwiglu, ForwardAndBackwardMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kTypes)
    for (auto [T, F] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {1, 2048}, {7, 33}, {129, 2048}, {5, 520}, {3, 8200}}) {
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
      const RopeFrequencies freq = RopeFrequencies::plain(D, theta);
      rope_forward(view(x, {T, N, D}), view(pos_host, {T}), freq, view(out, {T, N, D}));
      rope_backward(view(x, {T, N, D}), view(pos_host, {T}), freq, view(back, {T, N, D}));

      DeviceTensor d_pos = upload_ints(pos, {T}), d_x = upload(x, dtype, {T, N, D});
      DeviceTensor d_out = poisoned(dtype, {T, N, D});
      rope_forward(d_x.t, d_pos.t, freq, d_out.t);
      EXPECT_CLOSE(d_out.t, out, tolerance(dtype));
      rope_backward(d_x.t, d_pos.t, freq, d_x.t);  // in place
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

// Sizes with and without a tail after the 16-byte vectors, and tensors one element off alignment (the
// scalar path), also when only one of the two is.
TEST(CudaAdd, VectorTailAndMisalignedMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kTypes)
    for (int64_t n : {1, 3, 7, 8, 9, 4099, (1 << 20) + 5})
      for (auto [src_offset, dst_offset] : std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {1, 1}, {0, 3}}) {
        SCOPED_TRACE(fmt::format("{} n={} offsets {} {}", dtype_name(dtype), n, src_offset, dst_offset));
        std::vector<double> src = rounded(random_values(n, 6), dtype),
                            dst = rounded(random_values(n, 7), dtype);
        DeviceTensor d_src = upload_shifted(src, dtype, {n}, src_offset),
                     d_dst = upload_shifted(dst, dtype, {n}, dst_offset);
        add(view(src, {n}), view(dst, {n}));
        add(d_src.t, d_dst.t);
        EXPECT_CLOSE(d_dst.t, dst, tolerance(dtype));
      }
}

// Both directions bit for bit at sizes with a tail and with misaligned views.
TEST(CudaCast, VectorTailAndMisalignedMatchCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  for (int64_t n : {1, 7, 8, 13, 70001})
    for (int64_t offset : {0, 1}) {
      SCOPED_TRACE(fmt::format("n={} offset {}", n, offset));
      std::vector<float> f(static_cast<size_t>(n));
      for (float& x : f) x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
      std::vector<bf16> want(f.size()), got(f.size());
      cast(Tensor::of(f.data(), {n}), Tensor::of(want.data(), {n}));
      DeviceTensor d_f = poisoned_shifted(DType::f32, {n}, offset),
                   d_h = poisoned_shifted(DType::bf16, {n}, offset);
      copy_bytes(d_f.t.data, true, f.data(), false, f.size() * 4);
      cast(d_f.t, d_h.t);
      copy_bytes(got.data(), false, d_h.t.data, true, got.size() * 2);
      for (size_t i = 0; i < f.size(); ++i)
        ASSERT_EQ(got[i].bits, want[i].bits) << "f32 -> bf16 of bits " << std::bit_cast<uint32_t>(f[i]);

      std::vector<float> wide(f.size()), wide_got(f.size());
      cast(Tensor::of(want.data(), {n}), Tensor::of(wide.data(), {n}));
      DeviceTensor d_back = poisoned_shifted(DType::f32, {n}, 1 - offset);
      cast(d_h.t, d_back.t);
      copy_bytes(wide_got.data(), false, d_back.t.data, true, wide_got.size() * 4);
      EXPECT_EQ(0, std::memcmp(wide.data(), wide_got.data(), wide.size() * 4)) << "bf16 -> f32 differs";
    }
}

TEST(CudaCast, MatchesCpuBitForBitBothWays) {
  SKIP_WITHOUT_GPU();
  // Every bit pattern class: random words (NaNs, infinities, subnormals among them) and rounding ties.
  std::vector<float> f = {std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::infinity(),
                          -0.0f,
                          std::bit_cast<float>(0x3F808000u),
                          std::bit_cast<float>(0x3F818000u),
                          std::bit_cast<float>(0x7F7FFFFFu)};
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) f.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  const auto n = static_cast<int64_t>(f.size());
  std::vector<bf16> want(f.size());
  cast(Tensor::of(f.data(), {n}), Tensor::of(want.data(), {n}));
  DeviceBuffer d_f(f.size() * 4), d_h(f.size() * 2);
  d_f.upload(f.data(), f.size() * 4);
  cast(d_f.view(DType::f32, {n}), d_h.view(DType::bf16, {n}));
  std::vector<bf16> got(f.size());
  d_h.download(got.data(), got.size() * 2);
  for (size_t i = 0; i < f.size(); ++i)
    ASSERT_EQ(got[i].bits, want[i].bits) << "f32 -> bf16 of bits " << std::bit_cast<uint32_t>(f[i]);

  std::vector<bf16> all(65536);
  for (size_t b = 0; b < all.size(); ++b) all[b].bits = static_cast<uint16_t>(b);
  std::vector<float> wide(all.size()), wide_got(all.size());
  cast(Tensor::of(all.data(), {65536}), Tensor::of(wide.data(), {65536}));
  d_h.upload(all.data(), all.size() * 2);
  cast(d_h.view(DType::bf16, {65536}), d_f.view(DType::f32, {65536}));
  d_f.download(wide_got.data(), wide_got.size() * 4);
  EXPECT_EQ(0, std::memcmp(wide.data(), wide_got.data(), wide.size() * 4)) << "bf16 -> f32 differs";
}

}  // namespace
}  // namespace pt::ops
