// The CUDA attention (bf16 in and out, fp32 lse) against the CPU reference run in fp32 on the same
// bf16-rounded inputs, over length mixes that stress the tile schedule: 1-token examples, long examples,
// hundreds of short ones, lengths off every tile multiple, SFT-like mixes and padded segments, causal, with
// sliding windows on either side of every tile size, and bidirectional. Outputs are poisoned with NaN bytes
// first and fenced by guard regions that must stay untouched. Every kernel kind the GPU can run is checked
// (mma.sync everywhere, wgmma on sm_90a).
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
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/float16.h"
#include "data/packing/synthetic_split.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/attention.h"
#endif

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
  int32_t window = 0;               // AttentionParams::window
  bool causal = true;               // AttentionParams::causal
};

// The case with bidirectional attention (AttentionParams::causal false).
Case bidirectional(Case c) {
  c.causal = false;
  return c;
}

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

// A case's inputs (bf16 bits) and the CPU reference's results on them (fp32 from the same rounded values).
struct Problem {
  std::vector<int32_t> cu;
  std::vector<uint16_t> q, k, v, dout;
  std::vector<float> out, lse, dq, dk, dv;
};

Problem make_problem(const Case& c) {
  Problem r;
  r.cu.assign(c.lengths.size() + 1, 0);
  std::partial_sum(c.lengths.begin(), c.lengths.end(), r.cu.begin() + 1);
  const int64_t T = r.cu.back(), S = int64_t(c.lengths.size()), H = c.H, Hkv = c.Hkv, D = c.D;
  const int64_t nq = T * H * D, nkv = T * Hkv * D;
  r.q = random_bf16(nq, 1, 2.0f);
  r.k = random_bf16(nkv, 2, 2.0f);
  r.v = random_bf16(nkv, 3, 1.0f);
  r.dout = random_bf16(nq, 4, 1.0f);
  std::vector<float> fq = to_float(r.q), fk = to_float(r.k), fv = to_float(r.v), fdout = to_float(r.dout);
  r.out.resize(nq);
  r.lse.resize(H * T);
  r.dq.resize(nq);
  r.dk.resize(nkv);
  r.dv.resize(nkv);
  std::vector<int32_t> valid = c.valid;
  const Tensor cpu_valid = valid.empty() ? Tensor() : Tensor::of(valid.data(), {S});
  AttentionParams cpu{Tensor::of(fq.data(), {T, H, D}),
                      Tensor::of(fk.data(), {T, Hkv, D}),
                      Tensor::of(fv.data(), {T, Hkv, D}),
                      Tensor::of(r.cu.data(), {S + 1}),
                      cpu_valid,
                      Tensor::of(r.out.data(), {T, H, D}),
                      Tensor::of(r.lse.data(), {H, T}),
                      0};
  cpu.window = c.window;
  cpu.causal = c.causal;
  attention_forward(cpu);
  attention_backward(cpu, {Tensor::of(fdout.data(), {T, H, D}), Tensor::of(r.dq.data(), {T, H, D}),
                           Tensor::of(r.dk.data(), {T, Hkv, D}), Tensor::of(r.dv.data(), {T, Hkv, D})});
  return r;
}

// The CUDA forward and backward of a problem, each output between guard regions.
struct CudaRun {
  explicit CudaRun(const Case& c, const Problem& r)
      : T(r.cu.back()),
        S(int64_t(c.lengths.size())),
        H(c.H),
        Hkv(c.Hkv),
        D(c.D),
        gq(T * H * D * 2),
        gk(T * Hkv * D * 2),
        gv(T * Hkv * D * 2),
        gdout(T * H * D * 2),
        gcu((S + 1) * 4),
        gvalid(std::max<int64_t>(S, 1) * 4),
        gout(T * H * D * 2),
        glse(H * T * 4),
        gdq(T * H * D * 2),
        gdk(T * Hkv * D * 2),
        gdv(T * Hkv * D * 2) {
    gq.upload(r.q);
    gk.upload(r.k);
    gv.upload(r.v);
    gdout.upload(r.dout);
    gcu.upload(r.cu);
    if (!c.valid.empty()) gvalid.upload(c.valid);
    const Device gpu = Device::cuda;
    params = AttentionParams{Tensor(gq.data(), DType::bf16, {T, H, D}, gpu),
                             Tensor(gk.data(), DType::bf16, {T, Hkv, D}, gpu),
                             Tensor(gv.data(), DType::bf16, {T, Hkv, D}, gpu),
                             Tensor(gcu.data(), DType::i32, {S + 1}, gpu),
                             c.valid.empty() ? Tensor() : Tensor(gvalid.data(), DType::i32, {S}, gpu),
                             Tensor(gout.data(), DType::bf16, {T, H, D}, gpu),
                             Tensor(glse.data(), DType::f32, {H, T}, gpu),
                             0};
    params.window = c.window;
    params.causal = c.causal;
    grads = AttentionGrads{
        Tensor(gdout.data(), DType::bf16, {T, H, D}, gpu), Tensor(gdq.data(), DType::bf16, {T, H, D}, gpu),
        Tensor(gdk.data(), DType::bf16, {T, Hkv, D}, gpu), Tensor(gdv.data(), DType::bf16, {T, Hkv, D}, gpu)};
    attention_forward(params);
    attention_backward(params, grads);
  }

  int64_t T, S, H, Hkv, D;
  GuardedBuffer gq, gk, gv, gdout, gcu, gvalid;
  GuardedBuffer gout, glse, gdq, gdk, gdv;
  AttentionParams params;
  AttentionGrads grads;
};

#ifdef PACKTRAIN_CUDA
// Runs `body` once per kernel this GPU can run, with that kernel selected, and restores the automatic
// choice after.
template <class Body>
void for_each_kernel(Body&& body) {
  using cuda::AttentionKernel;
  for (const AttentionKernel kernel : {AttentionKernel::mma, AttentionKernel::wgmma}) {
    if (!cuda::attention_kernel_available(kernel)) continue;
    SCOPED_TRACE(std::string("kernel ") + cuda::attention_kernel_name(kernel));
    cuda::set_attention_kernel(kernel);
    body();
  }
  cuda::set_attention_kernel(AttentionKernel::automatic);
}
#else
template <class Body>
void for_each_kernel(Body&& body) {
  body();
}
#endif

class CudaAttention : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  }
};

TEST_P(CudaAttention, MatchesCpuReference) {
  const Case& c = GetParam();
  const Problem ref = make_problem(c);
  const int64_t H = c.H, Hkv = c.Hkv, D = c.D;
  const Comparison cmp(ref.cu);
  for_each_kernel([&] {
    const CudaRun run(c, ref);
    cmp.expect_close("out", to_float(run.gout.download<uint16_t>()), ref.out, H, D, true, 1e-2, true);
    cmp.expect_close("lse", run.glse.download<float>(), ref.lse, H, 1, false, 1e-2, false);
    cmp.expect_close("dq", to_float(run.gdq.download<uint16_t>()), ref.dq, H, D, true, 1e-2, true);
    cmp.expect_close("dk", to_float(run.gdk.download<uint16_t>()), ref.dk, Hkv, D, true, 1e-2, true);
    cmp.expect_close("dv", to_float(run.gdv.download<uint16_t>()), ref.dv, Hkv, D, true, 1e-2, true);
    for (const GuardedBuffer* b : {&run.gout, &run.glse, &run.gdq, &run.gdk, &run.gdv})
      EXPECT_TRUE(b->guards_intact()) << "a kernel wrote outside its tensor";
  });
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

const std::vector<int32_t> kLongAndShort = {3000, 1, 17, 64, 129, 700, 2, 1500, 33, 128, 1};

// For sliding windows: 1-token segments, lengths on both sides of the 64- and 128-row tiles, and segments of
// more than two tiles of 128 (so that key tiles lie wholly outside the windows of later query tiles).
const std::vector<int32_t> kWindowMix = {1, 700, 2, 63, 129, 1, 300, 64, 17, 257, 128, 1000, 5, 191};
const std::vector<int32_t> kWindowLong = {3000, 1, 1100, 129, 2};

const Case kCases[] = {
    {"OneTokenExamples", std::vector<int32_t>(300, 1), 12, 12, 64},
    {"OneTokenExamplesGqa2D128", std::vector<int32_t>(300, 1), 8, 4, 128},
    {"Long2048", {2048}, 16, 8, 128},
    {"Long3000Gqa2D128", {3000}, 8, 4, 128},
    {"Long4096", {4096}, 4, 1, 64},
    {"HundredsShort", short_lengths(400, 7), 16, 4, 128},
    {"HundredsShortGqa4D64", short_lengths(500, 9), 12, 3, 64},
    {"LongAndShortD64", kLongAndShort, 8, 2, 64},
    {"OffTileD64", kOffTile, 16, 8, 64},
    {"OffTileD128", kOffTile, 12, 12, 128},
    {"SftLikeD64", sft_lengths(12, 5), 12, 12, 64},
    {"SftLikeGqa4D128", sft_lengths(8, 6), 16, 4, 128},
    {"SftLikeGqa2D128", sft_lengths(8, 8), 16, 8, 128},
    {"PaddedD64", {100, 64, 37, 200, 5, 130}, 16, 4, 64, {70, 64, 0, 131, 5, 1}},
    {"PaddedD128", {100, 64, 37, 200, 5, 130}, 12, 12, 128, {1, 63, 36, 200, 0, 129}},
    // Sliding windows: only the query itself (1), a few keys (3), about a tile (64, 100, 127, 128, 129
    // against tiles of 64 and 128 queries or keys), and 1000 within segments of 1100 and 3000.
    {"Window1D64", kWindowMix, 8, 2, 64, {}, 1},
    {"Window1D128", kWindowMix, 4, 4, 128, {}, 1},
    {"Window3Gqa2D128", kWindowMix, 8, 4, 128, {}, 3},
    {"Window64Gqa4D64", kWindowMix, 12, 3, 64, {}, 64},
    {"Window100D128", kWindowMix, 8, 8, 128, {}, 100},
    {"Window127Gqa4D64", kWindowMix, 16, 4, 64, {}, 127},
    {"Window128Gqa4D128", kWindowMix, 8, 2, 128, {}, 128},
    {"Window129D64", kWindowMix, 8, 8, 64, {}, 129},
    {"Window129Gqa2D128", kWindowLong, 4, 2, 128, {}, 129},
    {"Window1000Gqa2D64", kWindowLong, 8, 4, 64, {}, 1000},
    {"Window1000Gqa4D128", kWindowLong, 8, 2, 128, {}, 1000},
    {"Window64OffTileD128", kOffTile, 12, 12, 128, {}, 64},
    {"Window3OneTokenExamplesD64", std::vector<int32_t>(300, 1), 12, 12, 64, {}, 3},
    {"Window100PaddedGqa4D64", {100, 64, 37, 200, 5, 130}, 16, 4, 64, {70, 64, 0, 131, 5, 1}, 100},
    {"Window127PaddedD128", {100, 64, 37, 200, 5, 130}, 12, 12, 128, {1, 63, 36, 200, 0, 129}, 127},
    // Longer than every segment but shorter than T (the windowed kernels, masking nothing), and T or more
    // (the causal kernels).
    {"Window300LongerThanSegmentsD64", kOffTile, 8, 2, 64, {}, 300},
    {"Window5000BeyondTD128", kOffTile, 8, 4, 128, {}, 5000},
    // Bidirectional: every query tile reaches every key tile of its segment, and pad keys (off-tile ends,
    // valid_lens, key tiles of pads only) must be masked out of the queries before them too.
    bidirectional({"BidirOneTokenExamplesD64", std::vector<int32_t>(300, 1), 12, 12, 64}),
    bidirectional({"BidirOneTokenExamplesGqa2D128", std::vector<int32_t>(300, 1), 8, 4, 128}),
    bidirectional({"BidirLong2048Gqa2D128", {2048}, 16, 8, 128}),
    bidirectional({"BidirLong3000Gqa4D64", {3000}, 8, 2, 64}),
    bidirectional({"BidirLongAndShortGqa2D128", kLongAndShort, 8, 4, 128}),
    bidirectional({"BidirOffTileGqa2D64", kOffTile, 16, 8, 64}),
    bidirectional({"BidirOffTileGqa4D128", kOffTile, 16, 4, 128}),
    bidirectional({"BidirHundredsShortGqa4D64", short_lengths(400, 11), 12, 3, 64}),
    bidirectional({"BidirSftLikeD64", sft_lengths(12, 5), 12, 12, 64}),
    bidirectional({"BidirSftLikeGqa2D128", sft_lengths(8, 8), 16, 8, 128}),
    bidirectional({"BidirPaddedGqa4D64", {100, 64, 37, 200, 5, 130}, 16, 4, 64, {70, 64, 0, 131, 5, 1}}),
    bidirectional({"BidirPaddedD128", {100, 64, 37, 200, 5, 130}, 12, 12, 128, {1, 63, 36, 200, 0, 129}}),
    // Pads filling whole key tiles of 64 and 128 after a few real tokens, and a long padded segment.
    bidirectional({"BidirPaddedTilesGqa2D128", {300, 129, 700, 2500}, 8, 4, 128, {40, 129, 65, 2100}}),
    bidirectional({"BidirPaddedTilesGqa4D64", {300, 129, 700, 2500}, 16, 4, 64, {40, 129, 65, 2100}}),
};

INSTANTIATE_TEST_SUITE_P(Mixes, CudaAttention, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& test) { return test.param.name; });

// The backward sums dQ with atomics in no fixed order, but dK and dV come from one block each: two runs
// must agree on them bit for bit, and on dQ up to rounding.
TEST(CudaAttentionRepeat, DkDvBitwiseAndDqUpToRounding) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const Case c{"Repeat", sft_lengths(16, 12), 16, 4, 128};
  const Problem ref = make_problem(c);
  const CudaRun first(c, ref), second(c, ref);
  EXPECT_TRUE(first.gdk.download<uint16_t>() == second.gdk.download<uint16_t>()) << "dk changed between runs";
  EXPECT_TRUE(first.gdv.download<uint16_t>() == second.gdv.download<uint16_t>()) << "dv changed between runs";
  const Comparison cmp(ref.cu);
  cmp.expect_close("dq of two runs", to_float(first.gdq.download<uint16_t>()),
                   to_float(second.gdq.download<uint16_t>()), c.H, c.D, true, 1e-2, true);
}

class CudaAttentionErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  }
};

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
  for_each_kernel([&] {
    try {
      attention_forward(bf);
      ADD_FAILURE() << "a cu_seqlens that ends short of T was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cu_seqlens"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace pt::ops
