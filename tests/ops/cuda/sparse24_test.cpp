// CUDA 2:4 sparsity ops against the cpu backend on fresh random inputs, outputs poisoned before each run:
// masks and MVUE bit for bit (both backends share the per-block arithmetic), counts exactly.
#include "ops/sparse24.h"

#include "cuda_test_util.h"
#include "ops/cuda/cuda_ops.h"
#include "shifted.h"

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

// The cpu's f32 results as the device stores them: f32 as is, bf16 rounded to nearest even.
std::vector<unsigned char> as_stored(const std::vector<float>& v, DType dtype) {
  std::vector<unsigned char> bytes(v.size() * static_cast<size_t>(dtype_size(dtype)));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::bf16) {
      const uint16_t h = float_to_bf16(v[i]);
      std::memcpy(&bytes[2 * i], &h, 2);
    } else {
      std::memcpy(&bytes[4 * i], &v[i], 4);
    }
  }
  return bytes;
}

// Elements of `size` bytes that differ between got[got_at..] and want, or -1 when got is too short.
int64_t element_differences(const std::vector<unsigned char>& got, size_t got_at,
                            const std::vector<unsigned char>& want, size_t size) {
  if (got.size() < got_at + want.size()) return -1;
  int64_t d = 0;
  for (size_t i = 0; i < want.size(); i += size) d += std::memcmp(&got[got_at + i], &want[i], size) != 0;
  return d;
}

// The cpu's MVUE of g (values as the device stores them) with the device's fp32 arithmetic.
std::vector<float> cpu_mvue(const std::vector<double>& g, int64_t M, int64_t N, uint64_t seed) {
  std::vector<float> gf = as_floats(g), want(gf.size());
  mvue24(Tensor::of(gf.data(), {M, N}), seed, Tensor::of(want.data(), {M, N}));
  return want;
}

// The same draws and the same fp32 arithmetic as the cpu, so the results agree bit for bit: in f32, and
// in bf16 once the cpu's f32 results are rounded as the device stores them (the cpu ran on the bf16
// values widened to f32).
TEST(CudaMvue24, MatchesCpuInPlaceAndNot) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = 0x5eed;
  for (DType dtype : kTypes)
    for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 7}, {3, 1}, {6, 33}, {13, 256}, {4096, 64}, {5003, 96}, {5000, 1030}}) {
      SCOPED_TRACE(fmt::format("{} M={} N={}", dtype_name(dtype), M, N));
      std::vector<double> g = rounded(gradients(M * N, static_cast<uint64_t>(M * 31 + N)), dtype);
      const std::vector<float> want = cpu_mvue(g, M, N, seed);
      const std::vector<double> want_d(want.begin(), want.end());
      const std::vector<unsigned char> want_bytes = as_stored(want, dtype);
      const auto size = static_cast<size_t>(dtype_size(dtype));

      DeviceTensor d_g = upload(g, dtype, {M, N}), d_out = poisoned(dtype, {M, N});
      mvue24(d_g.t, seed, d_out.t);
      const std::vector<double> got = download(d_out.t);
      int64_t pattern_differs = 0, nonfinite = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        pattern_differs += (got[i] == 0) != (want_d[i] == 0);
        nonfinite += !std::isfinite(got[i]);
      }
      EXPECT_EQ(pattern_differs, 0) << "kept entries differ from the cpu's";
      EXPECT_EQ(nonfinite, 0);
      EXPECT_EQ(element_differences(download_bytes(d_out.t), 0, want_bytes, size), 0)
          << "values differ from the cpu's";
      EXPECT_CLOSE(d_out.t, want_d, tolerance(dtype));

      mvue24(d_g.t, seed, d_g.t);  // in place
      EXPECT_EQ(0, std::memcmp(download_bytes(d_g.t).data(), download_bytes(d_out.t).data(),
                               static_cast<size_t>(d_out.t.bytes())))
          << "in place differs";
    }
}

#ifdef PACKTRAIN_CUDA  // calls the cuda launcher directly (no cpu twin), which CPU-only builds lack
// A gradient pruned in row ranges (first_row naming where each starts, as the sparse weight gradient prunes
// only the rows a dense GEMM reads) equals it pruned whole, bit for bit; a first row off the groups fails.
TEST(CudaMvue24, RowRangesDrawAsTheWholeGradient) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = 0xabc;
  const int64_t M = 2103, N = 96;
  const std::vector<double> g = rounded(gradients(M * N, 7), DType::bf16);
  DeviceTensor d_g = upload(g, DType::bf16, {M, N}), whole = poisoned(DType::bf16, {M, N});
  mvue24(d_g.t, seed, whole.t);
  DeviceTensor parts = poisoned(DType::bf16, {M, N});
  const auto range = [&](const Tensor& t, int64_t r0, int64_t r1) {
    return Tensor(static_cast<uint16_t*>(t.data) + r0 * N, DType::bf16, {r1 - r0, N}, Device::cuda);
  };
  for (const auto& [r0, r1] : {std::pair<int64_t, int64_t>{2048, M}, {1024, 2048}, {0, 1024}})
    cuda::mvue24(range(d_g.t, r0, r1), seed, range(parts.t, r0, r1), r0);
  EXPECT_EQ(download_bytes(parts.t), download_bytes(whole.t));
  EXPECT_THROW(cuda::mvue24(range(d_g.t, 2, M), seed, range(parts.t, 2, M), 2), Error);
}
#endif

// Every access width of the kernel, which N and the pointers' alignment pick (offsets of 0, 1, 2 and 4
// elements with N = 1..8 and a few wider rows reach each width from 16 bytes down to one element),
// partial last groups and M < 4: bit for bit against the cpu, out of place with either side shifted and
// in place, and nothing written outside the output.
TEST(CudaMvue24, BitExactOnEveryWidthOffsetAndPartialGroup) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = 0xfeed;
  constexpr int64_t kGuard = 16;  // poisoned elements after the output, which must stay poisoned
  for (DType dtype : kTypes)
    for (int64_t M : {1, 2, 3, 4, 5, 6, 13})
      for (int64_t N : {1, 2, 3, 4, 5, 6, 7, 8, 12, 24, 40, 1030})
        for (int64_t offset : {0, 1, 2, 4}) {
          SCOPED_TRACE(fmt::format("{} M={} N={} offset={}", dtype_name(dtype), M, N, offset));
          const std::vector<double> g = rounded(gradients(M * N, static_cast<uint64_t>(M * 131 + N)), dtype);
          const std::vector<unsigned char> want = as_stored(cpu_mvue(g, M, N, seed), dtype);
          const auto size = static_cast<size_t>(dtype_size(dtype));
          const std::vector<unsigned char> poison(size, 0xFF);

          // g aligned, out `offset` elements into a poisoned buffer with kGuard more after it.
          DeviceTensor d_g = upload(g, dtype, {M, N});
          DeviceTensor d_out = poisoned(dtype, {offset + M * N + kGuard});
          mvue24(d_g.t, seed, shifted_view(d_out, dtype, offset, {M, N}));
          const std::vector<unsigned char> all = download_bytes(d_out.t);
          EXPECT_EQ(element_differences(all, static_cast<size_t>(offset) * size, want, size), 0)
              << "out shifted";
          int64_t outside = 0;
          for (int64_t i = 0; i < offset + M * N + kGuard; ++i)
            if (i < offset || i >= offset + M * N)
              outside += element_differences(all, static_cast<size_t>(i) * size, poison, size);
          EXPECT_EQ(outside, 0) << "elements written outside the output";

          // g `offset` elements in, out aligned.
          DeviceTensor d_g_shifted = upload_shifted(g, dtype, {M, N}, offset);
          DeviceTensor d_out_aligned = poisoned(dtype, {M, N});
          mvue24(d_g_shifted.t, seed, d_out_aligned.t);
          EXPECT_EQ(element_differences(download_bytes(d_out_aligned.t), 0, want, size), 0) << "g shifted";

          mvue24(d_g_shifted.t, seed, d_g_shifted.t);  // in place, both shifted
          EXPECT_EQ(element_differences(download_bytes(d_g_shifted.t), 0, want, size), 0) << "in place";
        }
}

}  // namespace
}  // namespace pt::ops
