// CUDA 2:4 sparsity ops against the cpu backend on fresh random inputs, outputs poisoned before each run:
// masks and f32 MVUE bit for bit (both backends share the per-block arithmetic), bf16 within the bf16
// bound, counts exactly.
#include "ops/sparse24.h"

#include "cuda_test_util.h"

#include <random>
#include <tuple>

namespace pt::ops {
namespace {

using namespace pt::testing;

const DType kTypes[] = {DType::f32, DType::bf16};

std::vector<float> as_floats(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

DeviceTensor upload_mask(const std::vector<uint8_t>& m, std::initializer_list<int64_t> dims) {
  DeviceTensor d{DeviceBuffer(m.size()), {}};
  d.t = d.buffer.view(DType::u8, dims);
  d.buffer.upload(m.data(), m.size());
  return d;
}

std::vector<uint8_t> random_mask(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> m(static_cast<size_t>(n));
  for (auto& x : m) x = static_cast<uint8_t>(rng() % 2);
  return m;
}

// Weights with the ties and heavy tails trained weights have: a share of exact repeats and zeros.
std::vector<double> weights(int64_t n, uint64_t seed) {
  std::vector<double> w = random_values(n, seed, -1, 1);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (double& x : w) {
    const uint32_t r = rng() % 16;
    if (r == 0) x = 0;
    if (r == 1) x = 0.25;
    if (r == 2) x *= 30;
  }
  return w;
}

int64_t count_differences(const std::vector<unsigned char>& a, const std::vector<uint8_t>& b) {
  int64_t d = a.size() == b.size() ? 0 : -1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d += a[i] != b[i];
  return d;
}

TEST(CudaTransposableMask24, IdenticalToCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kTypes)
    for (auto [N, K] :
         std::vector<std::pair<int64_t, int64_t>>{{4, 4}, {8, 12}, {4, 1028}, {5004, 64}, {256, 768}}) {
      SCOPED_TRACE(fmt::format("{} N={} K={}", dtype_name(dtype), N, K));
      // The cpu sees the device's values widened to f32, so both score the same floats.
      std::vector<float> w = as_floats(rounded(weights(N * K, static_cast<uint64_t>(N + K)), dtype));
      std::vector<uint8_t> want(static_cast<size_t>(N * K));
      transposable_mask24(Tensor::of(w.data(), {N, K}), Tensor::of(want.data(), {N, K}));
      DeviceTensor d_w = upload(std::vector<double>(w.begin(), w.end()), dtype, {N, K});
      DeviceTensor d_mask = poisoned(DType::u8, {N, K});
      transposable_mask24(d_w.t, d_mask.t);
      EXPECT_EQ(count_differences(download_bytes(d_mask.t), want), 0);
    }
}

TEST(CudaMaskFlips, CountsLikeCpu) {
  SKIP_WITHOUT_GPU();
  for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {4, 4}, {1025, 1027}, {8192, 2048}}) {
    SCOPED_TRACE(fmt::format("N={} K={}", N, K));
    std::vector<uint8_t> a = random_mask(N * K, 1), b = a;
    std::mt19937 rng(2);
    for (auto& x : b)
      if (rng() % 5 == 0) x = static_cast<uint8_t>(1 - x);
    const int64_t want = mask_flips(Tensor::of(a.data(), {N, K}), Tensor::of(b.data(), {N, K}));
    DeviceTensor d_a = upload_mask(a, {N, K}), d_b = upload_mask(b, {N, K});
    EXPECT_EQ(mask_flips(d_a.t, d_b.t), want);
    EXPECT_EQ(mask_flips(d_a.t, d_a.t), 0);
  }
}

TEST(CudaApplyMask, MatchesCpuBitForBitIncludingTheMaskedCast) {
  SKIP_WITHOUT_GPU();
  for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {8, 12}, {5001, 130}}) {
    SCOPED_TRACE(fmt::format("N={} K={}", N, K));
    std::vector<float> w = as_floats(weights(N * K, 3));
    const std::vector<uint8_t> mask = random_mask(N * K, 4);
    DeviceTensor d_mask = upload_mask(mask, {N, K});
    const std::vector<double> wd(w.begin(), w.end());

    std::vector<float> want_f(w.size());
    apply_mask(Tensor::of(w.data(), {N, K}), Tensor::of(mask.data(), {N, K}),
               Tensor::of(want_f.data(), {N, K}));
    std::vector<bf16> want_h(w.size());
    apply_mask(Tensor::of(w.data(), {N, K}), Tensor::of(mask.data(), {N, K}),
               Tensor::of(want_h.data(), {N, K}));

    DeviceTensor d_w = upload(wd, DType::f32, {N, K});
    DeviceTensor d_f = poisoned(DType::f32, {N, K}), d_h = poisoned(DType::bf16, {N, K});
    apply_mask(d_w.t, d_mask.t, d_f.t);
    apply_mask(d_w.t, d_mask.t, d_h.t);
    EXPECT_EQ(0, std::memcmp(download_bytes(d_f.t).data(), want_f.data(), w.size() * 4)) << "f32 -> f32";
    EXPECT_EQ(0, std::memcmp(download_bytes(d_h.t).data(), want_h.data(), w.size() * 2)) << "f32 -> bf16";
    apply_mask(d_w.t, d_mask.t, d_w.t);  // in place
    EXPECT_EQ(0, std::memcmp(download_bytes(d_w.t).data(), want_f.data(), w.size() * 4)) << "f32 in place";

    // bf16 -> bf16 in place: the bf16 copy of w, pruned, is the masked cast.
    DeviceTensor d_wh = upload(wd, DType::bf16, {N, K});
    apply_mask(d_wh.t, d_mask.t, d_wh.t);
    EXPECT_EQ(0, std::memcmp(download_bytes(d_wh.t).data(), want_h.data(), w.size() * 2)) << "bf16 in place";
  }
}

TEST(CudaMaskedDecay, MatchesCpu) {
  SKIP_WITHOUT_GPU();
  const double lambda = 2e-4;
  for (DType dtype : kTypes)
    for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {8, 12}, {5003, 96}}) {
      SCOPED_TRACE(fmt::format("{} N={} K={}", dtype_name(dtype), N, K));
      std::vector<double> w = rounded(random_values(N * K, 5, -50, 50), dtype);
      std::vector<double> grad = rounded(random_values(N * K, 6, -0.02, 0.02), dtype);
      const std::vector<uint8_t> mask = random_mask(N * K, 7);
      DeviceTensor d_w = upload(w, dtype, {N, K}), d_grad = upload(grad, dtype, {N, K});
      DeviceTensor d_mask = upload_mask(mask, {N, K});
      masked_decay(Tensor::of(w.data(), {N, K}), Tensor::of(mask.data(), {N, K}), lambda,
                   Tensor::of(grad.data(), {N, K}));
      masked_decay(d_w.t, d_mask.t, lambda, d_grad.t);
      EXPECT_CLOSE(d_grad.t, grad, tolerance(dtype));
    }
}

// MVUE input: gradients with zeros (groups of 0..4 nonzeros) and dominant entries (capped probabilities).
std::vector<double> gradients(int64_t n, uint64_t seed) {
  std::vector<double> g = random_values(n, seed, -1e-3, 1e-3);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (double& x : g) {
    if (rng() % 4 == 0) x = 0;
    if (rng() % 8 == 0) x *= 40;
  }
  return g;
}

// f32: the same draws and the same fp32 arithmetic as the cpu, bit for bit. bf16: the cpu runs on the
// bf16 values widened to f32; the device rounds its results to bf16, so the kept entries agree within the
// bf16 bound, pruned ones exactly, and nothing is NaN.
TEST(CudaMvue24, MatchesCpuInPlaceAndNot) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = 0x5eed;
  for (DType dtype : kTypes)
    for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 7}, {3, 1}, {6, 33}, {13, 256}, {4096, 64}, {5003, 96}, {5000, 1030}}) {
      SCOPED_TRACE(fmt::format("{} M={} N={}", dtype_name(dtype), M, N));
      std::vector<double> g = rounded(gradients(M * N, static_cast<uint64_t>(M * 31 + N)), dtype);
      std::vector<float> gf = as_floats(g), want(gf.size());
      mvue24(Tensor::of(gf.data(), {M, N}), seed, Tensor::of(want.data(), {M, N}));
      const std::vector<double> want_d(want.begin(), want.end());

      DeviceTensor d_g = upload(g, dtype, {M, N}), d_out = poisoned(dtype, {M, N});
      mvue24(d_g.t, seed, d_out.t);
      const std::vector<double> got = download(d_out.t);
      int64_t pattern_differs = 0, bits_differ = 0, nonfinite = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        pattern_differs += (got[i] == 0) != (want_d[i] == 0);
        bits_differ += got[i] != want_d[i];
        nonfinite += !std::isfinite(got[i]);
      }
      EXPECT_EQ(pattern_differs, 0) << "kept entries differ from the cpu's";
      EXPECT_EQ(nonfinite, 0);
      if (dtype == DType::f32) {
        EXPECT_EQ(bits_differ, 0) << "f32 values differ from the cpu's";
      }
      EXPECT_CLOSE(d_out.t, want_d, tolerance(dtype));

      mvue24(d_g.t, seed, d_g.t);  // in place
      EXPECT_EQ(0, std::memcmp(download_bytes(d_g.t).data(), download_bytes(d_out.t).data(),
                               static_cast<size_t>(d_out.t.bytes())))
          << "in place differs";
    }
}

}  // namespace
}  // namespace pt::ops
