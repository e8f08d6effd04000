// The CUDA attention (bf16 in and out, fp32 lse) against the CPU reference run in fp32 on the same
// bf16-rounded inputs, over length mixes that stress the tile schedule: 1-token examples, long examples,
// hundreds of short ones, lengths off every tile multiple, SFT-like mixes and padded segments. Outputs are
// poisoned with NaN bytes first and fenced by guard regions that must stay untouched.
#include "ops/attention.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/float16.h"
#include "data/packing/synthetic_split.h"

namespace pt::ops {
namespace {

constexpr size_t kGuardBytes = 4096;
constexpr unsigned char kPoison = 0xff;  // 0xffff... is a NaN in bf16 and f32 alike

// Device memory between two guard regions, all poisoned at creation.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes), base_(cuda_malloc_zeroed(bytes + 2 * kGuardBytes)) {
    std::vector<unsigned char> poison(bytes + 2 * kGuardBytes, kPoison);
    copy_bytes(base_, true, poison.data(), false, poison.size());
  }
  ~GuardedBuffer() { cuda_free(base_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  void* data() const { return static_cast<char*>(base_) + kGuardBytes; }
  template <class T>
  void upload(const std::vector<T>& v) {
    copy_bytes(data(), true, v.data(), false, v.size() * sizeof(T));
  }
  template <class T>
  std::vector<T> download() const {
    std::vector<T> v(bytes_ / sizeof(T));
    copy_bytes(v.data(), false, data(), true, bytes_);
    return v;
  }
  // True when no byte before or after the tensor was written.
  bool guards_intact() const {
    std::vector<unsigned char> all(bytes_ + 2 * kGuardBytes);
    copy_bytes(all.data(), false, base_, true, all.size());
    auto poisoned = [](auto first, auto last) {
      return std::all_of(first, last, [](unsigned char b) { return b == kPoison; });
    };
    return poisoned(all.begin(), all.begin() + kGuardBytes) && poisoned(all.end() - kGuardBytes, all.end());
  }

 private:
  size_t bytes_;
  void* base_;
};

struct Case {
  std::string name;
  std::vector<int32_t> lengths;
  int64_t H, Hkv, D;
  std::vector<int32_t> valid = {};  // empty: no pads
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<uint16_t> random_bf16(int64_t n, uint64_t seed, float amplitude) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-amplitude, amplitude);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& x : v) x = float_to_bf16(dist(rng));
  return v;
}

std::vector<float> to_float(const std::vector<uint16_t>& bits) {
  std::vector<float> f(bits.size());
  std::transform(bits.begin(), bits.end(), f.begin(), bf16_to_float);
  return f;
}

// Compares a CUDA result with the reference over rows of `row_width` elements; rows are tokens of a [T,
// heads, width] tensor, or for lse ([H,T]) heads x tokens. Reports the worst element with its segment.
class Comparison {
 public:
  explicit Comparison(const std::vector<int32_t>& cu) : cu_(cu) {}

  void expect_close(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref,
                    int64_t heads, int64_t width, bool token_major, double tol, bool relative) const {
    ASSERT_EQ(got.size(), ref.size());
    double ref_max = 0, worst = -1;
    size_t worst_at = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      ref_max = std::max(ref_max, double(std::fabs(ref[i])));
      const double err = std::isfinite(got[i]) ? std::fabs(double(got[i]) - ref[i]) : INFINITY;
      if (err > worst) worst = err, worst_at = i;
    }
    // Where the reference is identically zero (dq and dk of 1-token examples), rounding noise is judged
    // against the O(1) scale of the inputs instead of a zero denominator.
    const double scaled = relative ? worst / std::max(ref_max, 1e-3) : worst;
    EXPECT_LE(scaled, tol) << what << ": " << (relative ? "relative" : "absolute") << " error " << scaled
                           << " at " << where(worst_at, heads, width, token_major) << ": got "
                           << got[worst_at] << ", reference " << ref[worst_at] << " (max |reference| "
                           << ref_max << ")";
  }

 private:
  std::string where(size_t i, int64_t heads, int64_t width, bool token_major) const {
    const int64_t T = cu_.back();
    const int64_t token = token_major ? int64_t(i) / (heads * width) : int64_t(i) % T;
    const int64_t head = token_major ? int64_t(i) / width % heads : int64_t(i) / T;
    const int64_t seg = std::upper_bound(cu_.begin(), cu_.end(), token) - cu_.begin() - 1;
    return fmt::format("token {} (segment {} of length {}, position {}), head {}, element {}", token, seg,
                       cu_[seg + 1] - cu_[seg], token - cu_[seg], head, token_major ? int64_t(i) % width : 0);
  }

  const std::vector<int32_t>& cu_;
};

class CudaAttention : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  }
};

TEST_P(CudaAttention, MatchesCpuReference) {
  const Case& c = GetParam();
  std::vector<int32_t> cu(c.lengths.size() + 1, 0);
  std::partial_sum(c.lengths.begin(), c.lengths.end(), cu.begin() + 1);
  const int64_t T = cu.back(), S = int64_t(c.lengths.size()), H = c.H, Hkv = c.Hkv, D = c.D;
  const int64_t nq = T * H * D, nkv = T * Hkv * D;
  const std::vector<uint16_t> q = random_bf16(nq, 1, 2.0f), k = random_bf16(nkv, 2, 2.0f),
                              v = random_bf16(nkv, 3, 1.0f), dout = random_bf16(nq, 4, 1.0f);

  // Reference: fp32 on the CPU from the same rounded values.
  std::vector<float> fq = to_float(q), fk = to_float(k), fv = to_float(v), fdout = to_float(dout);
  std::vector<float> ref_out(nq), ref_lse(H * T), ref_dq(nq), ref_dk(nkv), ref_dv(nkv);
  std::vector<int32_t> valid = c.valid;
  const Tensor cpu_valid = valid.empty() ? Tensor() : Tensor::of(valid.data(), {S});
  AttentionParams cpu{Tensor::of(fq.data(), {T, H, D}),
                      Tensor::of(fk.data(), {T, Hkv, D}),
                      Tensor::of(fv.data(), {T, Hkv, D}),
                      Tensor::of(cu.data(), {S + 1}),
                      cpu_valid,
                      Tensor::of(ref_out.data(), {T, H, D}),
                      Tensor::of(ref_lse.data(), {H, T}),
                      0};
  attention_forward(cpu);
  attention_backward(cpu, {Tensor::of(fdout.data(), {T, H, D}), Tensor::of(ref_dq.data(), {T, H, D}),
                           Tensor::of(ref_dk.data(), {T, Hkv, D}), Tensor::of(ref_dv.data(), {T, Hkv, D})});

  const size_t bf = sizeof(uint16_t);
  GuardedBuffer gq(nq * bf), gk(nkv * bf), gv(nkv * bf), gdout(nq * bf), gcu((S + 1) * 4),
      gvalid(std::max<int64_t>(S, 1) * 4);
  GuardedBuffer gout(nq * bf), glse(H * T * 4), gdq(nq * bf), gdk(nkv * bf), gdv(nkv * bf);
  gq.upload(q);
  gk.upload(k);
  gv.upload(v);
  gdout.upload(dout);
  gcu.upload(cu);
  if (!valid.empty()) gvalid.upload(valid);
  const Device gpu = Device::cuda;
  AttentionParams p{Tensor(gq.data(), DType::bf16, {T, H, D}, gpu),
                    Tensor(gk.data(), DType::bf16, {T, Hkv, D}, gpu),
                    Tensor(gv.data(), DType::bf16, {T, Hkv, D}, gpu),
                    Tensor(gcu.data(), DType::i32, {S + 1}, gpu),
                    valid.empty() ? Tensor() : Tensor(gvalid.data(), DType::i32, {S}, gpu),
                    Tensor(gout.data(), DType::bf16, {T, H, D}, gpu),
                    Tensor(glse.data(), DType::f32, {H, T}, gpu),
                    0};
  attention_forward(p);
  attention_backward(
      p,
      {Tensor(gdout.data(), DType::bf16, {T, H, D}, gpu), Tensor(gdq.data(), DType::bf16, {T, H, D}, gpu),
       Tensor(gdk.data(), DType::bf16, {T, Hkv, D}, gpu), Tensor(gdv.data(), DType::bf16, {T, Hkv, D}, gpu)});

  const Comparison cmp(cu);
  cmp.expect_close("out", to_float(gout.download<uint16_t>()), ref_out, H, D, true, 1e-2, true);
  cmp.expect_close("lse", glse.download<float>(), ref_lse, H, 1, false, 1e-2, false);
  cmp.expect_close("dq", to_float(gdq.download<uint16_t>()), ref_dq, H, D, true, 1e-2, true);
  cmp.expect_close("dk", to_float(gdk.download<uint16_t>()), ref_dk, Hkv, D, true, 1e-2, true);
  cmp.expect_close("dv", to_float(gdv.download<uint16_t>()), ref_dv, Hkv, D, true, 1e-2, true);
  for (const GuardedBuffer* b : {&gout, &glse, &gdq, &gdk, &gdv})
    EXPECT_TRUE(b->guards_intact()) << "a kernel wrote outside its tensor";
}

std::vector<int32_t> sft_lengths(int64_t count, uint64_t seed) {
  std::vector<int32_t> out;
  for (int64_t len : sft_like_lengths(count, seed)) out.push_back(static_cast<int32_t>(len));
  return out;
}

std::vector<int32_t> short_lengths(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(1, 40);
  std::vector<int32_t> out(static_cast<size_t>(count));
  for (int32_t& len : out) len = dist(rng);
  return out;
}

const std::vector<int32_t> kOffTile = {63, 65, 1, 127, 129, 0, 200, 64, 3, 191};

INSTANTIATE_TEST_SUITE_P(
    Mixes, CudaAttention,
    ::testing::Values(Case{"OneTokenExamples", std::vector<int32_t>(300, 1), 12, 12, 64},
                      Case{"Long2048", {2048}, 16, 8, 128}, Case{"Long4096", {4096}, 4, 1, 64},
                      Case{"HundredsShort", short_lengths(400, 7), 16, 4, 128},
                      Case{"OffTileD64", kOffTile, 16, 8, 64}, Case{"OffTileD128", kOffTile, 12, 12, 128},
                      Case{"SftLikeD64", sft_lengths(12, 5), 12, 12, 64},
                      Case{"SftLikeGqa4D128", sft_lengths(8, 6), 16, 4, 128},
                      Case{"SftLikeGqa2D128", sft_lengths(8, 8), 16, 8, 128},
                      Case{"PaddedD64", {100, 64, 37, 200, 5, 130}, 16, 4, 64, {70, 64, 0, 131, 5, 1}},
                      Case{"PaddedD128", {100, 64, 37, 200, 5, 130}, 12, 12, 128, {1, 63, 36, 200, 0, 129}}),
    [](const ::testing::TestParamInfo<Case>& test) { return test.param.name; });

class CudaAttentionErrors : public CudaAttention {};

TEST_F(CudaAttentionErrors, RejectsF32AndBadSegmentTables) {
  const int64_t T = 10, H = 2, D = 64;
  GuardedBuffer a(T * H * D * 4), b(T * H * D * 4), c(T * H * D * 4), o(T * H * D * 4), lse(H * T * 4),
      cu(3 * 4);
  cu.upload(std::vector<int32_t>{0, 6, 9});  // ends at 9, not T = 10
  const Device gpu = Device::cuda;
  AttentionParams f32{Tensor(a.data(), DType::f32, {T, H, D}, gpu),
                      Tensor(b.data(), DType::f32, {T, H, D}, gpu),
                      Tensor(c.data(), DType::f32, {T, H, D}, gpu),
                      Tensor(cu.data(), DType::i32, {3}, gpu),
                      Tensor(),
                      Tensor(o.data(), DType::f32, {T, H, D}, gpu),
                      Tensor(lse.data(), DType::f32, {H, T}, gpu),
                      0};
  EXPECT_THROW(attention_forward(f32), Error);
  AttentionParams bf = f32;
  for (Tensor* t : {&bf.q, &bf.k, &bf.v, &bf.out}) t->dtype = DType::bf16;
  try {
    attention_forward(bf);
    ADD_FAILURE() << "a cu_seqlens that ends short of T was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cu_seqlens"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pt::ops
