// ZeRO-1 shard math and gradient buckets: shards tile the padded buffer, AdamW pieces cut tensors at
// shard edges keeping their decay flags, checkpoints reshard between rank counts, buckets tile the layout
// in backward order; the 2:4 masked cast and masked decay of a range (a shard) are the full ones restricted
// to it (cpu, and cuda where a GPU is present); and each of N ranks holds 1/N of the optimizer state.
#include "distributed/zero.h"
#include "distributed/grad_reducer.h"

#include "core/device.h"
#include "core/device_buffer.h"
#include "core/error.h"
#include "core/float16.h"
#include "distributed/data_parallel.h"
#include "model/batches.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/init.h"
#include "model/sparsity.h"
#include "ops/elementwise.h"
#include "ops/grad_norm.h"
#include "ops/sparse24.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

namespace pt::dist {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 101, c.hidden_size = 24, c.intermediate_size = 40, c.num_hidden_layers = 3;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 6;
  c.validate("test");
  return c;
}

TEST(ShardLayout, ShardsTileThePaddedBufferAligned) {
  for (int64_t total : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{12345}}) {
    for (int world : {1, 2, 3, 5}) {
      const ShardLayout s = make_shard_layout(total, world);
      EXPECT_EQ(s.shard % kShardAlign, 0);
      EXPECT_GE(s.padded_total(), total);
      EXPECT_LT(s.padded_total() - total, int64_t(world) * kShardAlign + s.shard);
      int64_t real = 0;
      for (int r = 0; r < world; ++r) real += s.real_count(r);
      EXPECT_EQ(real, total);
      const auto counts = s.counts_in(total / 3, total);
      EXPECT_EQ(std::reduce(counts.begin(), counts.end(), int64_t{0}), total - total / 3);
    }
  }
  EXPECT_THROW(make_shard_layout(10, 0), Error);
}

TEST(ShardLayout, AdamWPiecesCutTensorsAtShardEdgesWithTheirDecayFlags) {
  const ParameterLayout layout(small_config());
  const ShardLayout s = make_shard_layout(layout.total(), 3);
  std::vector<float> params(size_t(s.padded_total())), grads(params.size()), m(size_t(s.shard)), v(m.size());
  const Tensor P = Tensor::of(params.data(), {s.padded_total()}),
               G = Tensor::of(grads.data(), {s.padded_total()});
  int64_t covered = 0;
  for (int r = 0; r < 3; ++r) {
    const int64_t b = s.begin(r), e = b + s.real_count(r);
    const auto pieces = adamw_range(layout.params(), b, e, Tensor::of(params.data() + b, {s.shard}), G,
                                    {Tensor::of(m.data(), {s.shard}), Tensor::of(v.data(), {s.shard})});
    int64_t at = b;
    for (const auto& piece : pieces) {
      const int64_t offset = piece.param.ptr<float>() - params.data();
      EXPECT_EQ(offset, at);  // contiguous pieces, in order
      EXPECT_EQ(piece.grad.ptr<float>() - grads.data(), offset);
      EXPECT_EQ(piece.m.ptr<float>() - m.data(), offset - b);
      // The decay flag of the tensor the piece belongs to.
      for (const ParamInfo& p : layout.params())
        if (offset >= p.offset && offset < p.offset + p.numel) {
          EXPECT_EQ(piece.decay, p.weight_decay()) << p.name;
        }
      at += piece.param.numel();
    }
    EXPECT_EQ(at, e);
    covered += e - b;
  }
  EXPECT_EQ(covered, layout.total());
  EXPECT_THROW(adamw_range(layout.params(), 0, layout.total(), P, G,
                           {Tensor::of(m.data(), {s.shard}), Tensor::of(v.data(), {s.shard})}),
               Error);  // moments too small for the range
}

TEST(ShardLayout, CheckpointsReshardBetweenRankCounts) {
  const int64_t total = 1000;
  std::vector<float> full(total);
  std::iota(full.begin(), full.end(), 1.0f);
  const ShardLayout two = make_shard_layout(total, 2), three = make_shard_layout(total, 3);
  std::vector<std::vector<float>> shards2, shards3;
  for (int r = 0; r < 2; ++r) shards2.push_back(slice_shard(full, two, r));
  const auto via2 = join_shards(shards2, two);
  for (int r = 0; r < 3; ++r) shards3.push_back(slice_shard(via2, three, r));
  EXPECT_EQ(join_shards(shards3, three), full);
  EXPECT_EQ(shards3[2].back(), 0.0f);  // the padding is zero
  EXPECT_THROW(slice_shard(std::vector<float>(999), three, 0), Error);
  EXPECT_THROW(join_shards(shards2, three), Error);
}

TEST(GradientBuckets, TileTheLayoutInBackwardOrderAtTensorBoundaries) {
  const ParameterLayout layout(small_config());
  for (int64_t elems : {int64_t{1}, int64_t{500}, int64_t{5000}, int64_t{1} << 30}) {
    const auto buckets = make_buckets(layout.params(), elems);
    ASSERT_FALSE(buckets.empty());
    EXPECT_EQ(buckets.front().end, layout.total());
    EXPECT_EQ(buckets.back().begin, 0);
    for (size_t i = 1; i < buckets.size(); ++i) EXPECT_EQ(buckets[i].end, buckets[i - 1].begin);
    for (const Bucket& b : buckets) {
      bool starts_at_tensor = false;
      for (const ParamInfo& p : layout.params()) starts_at_tensor |= p.offset == b.begin;
      EXPECT_TRUE(starts_at_tensor);
      // Over the size only when one tensor is.
      if (b.end - b.begin > elems)
        for (const ParamInfo& p : layout.params())
          if (p.offset == b.begin) {
            EXPECT_EQ(p.numel, b.end - b.begin);
          }
    }
    if (elems == int64_t{1} << 30) {
      EXPECT_EQ(buckets.size(), 1u);
    }
    if (elems == 1) {
      EXPECT_EQ(buckets.size(), layout.params().size());
    }
  }
  EXPECT_THROW(make_buckets(layout.params(), 0), Error);
}

// --- 2:4 range pieces: a shard cuts the sparse linears anywhere (mid-row too) and may run into padding.

SparsityConfig sparse_ffn() {
  SparsityConfig s;
  s.enabled = true;
  return s;
}

std::vector<float> random_values(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// Ranges over [0, padded): every shard of 1 to 7 ranks, and random ones with odd edges.
std::vector<std::pair<int64_t, int64_t>> test_ranges(int64_t total, int64_t padded) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int world = 1; world <= 7; ++world) {
    const ShardLayout s = make_shard_layout(total, world);
    for (int r = 0; r < world; ++r)
      if (s.begin(r) + s.shard <= padded) ranges.emplace_back(s.begin(r), s.begin(r) + s.shard);
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 40; ++i) {
    const int64_t b = int64_t(rng() % uint32_t(padded)), e = b + 1 + int64_t(rng() % uint32_t(padded - b));
    ranges.emplace_back(b, e);
  }
  return ranges;
}

struct MaskedModel {
  ModelConfig config = small_config();
  ParameterLayout layout{config};
  int64_t total = layout.total(), padded = total + 300;  // zero padding past the layout, as shards have
  std::vector<float> masters = random_values(padded, 1);

  MaskedModel() { std::fill(masters.begin() + total, masters.end(), 0.0f); }
};

TEST(ZeroRanges, MaskedCastOfARangeIsTheFullMaskedCastRestrictedToIt) {
  const MaskedModel m;
  FfnMasks masks(m.config, sparse_ffn(), Device::cpu);
  masks.recompute(Tensor::of(const_cast<float*>(m.masters.data()), {m.total}));
  // The full masked cast, as load_weights makes it: masked f32, and its bf16 rounding.
  std::vector<float> want = m.masters;
  masks.apply_on_host(std::span<float>(want.data(), size_t(m.total)));
  int64_t pruned = 0;
  for (int64_t i = 0; i < m.total; ++i) pruned += want[i] == 0.0f && m.masters[i] != 0.0f;
  ASSERT_GT(pruned, 0);
  for (auto [b, e] : test_ranges(m.total, m.padded)) {
    const int64_t n = e - b;
    const Tensor in = Tensor::of(const_cast<float*>(m.masters.data()) + b, {n});
    std::vector<float> f32(size_t(n), NAN);
    masks.masked_cast_range(in, b, Tensor::of(f32.data(), {n}));
    std::vector<uint16_t> bf16(size_t(n), 0xFFFF);
    masks.masked_cast_range(in, b, Tensor(bf16.data(), DType::bf16, {n}));
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(f32[i], want[b + i]) << "f32, range [" << b << ", " << e << "), element " << b + i;
      ASSERT_EQ(bf16[i], float_to_bf16(want[b + i]))
          << "bf16, range [" << b << ", " << e << "), element " << b + i;
    }
  }
  // Two flat ranges of one length on the masks' device, nothing else.
  std::vector<float> out(10);
  EXPECT_THROW(masks.masked_cast_range(Tensor::of(const_cast<float*>(m.masters.data()), {11}), 0,
                                       Tensor::of(out.data(), {10})),
               Error);
}

TEST(ZeroRanges, MaskedDecayOfARangeIsTheFullOneRestrictedToIt) {
  const MaskedModel m;
  FfnMasks masks(m.config, sparse_ffn(), Device::cpu);
  masks.recompute(Tensor::of(const_cast<float*>(m.masters.data()), {m.total}));
  const std::vector<float> grads = random_values(m.padded, 2);
  const double lambda = 0.25;
  std::vector<float> want = grads;
  masks.masked_decay(Tensor::of(const_cast<float*>(m.masters.data()), {m.total}), lambda,
                     Tensor::of(want.data(), {m.total}));
  int64_t decayed = 0;
  for (int64_t i = 0; i < m.total; ++i) decayed += want[i] != grads[i];
  ASSERT_GT(decayed, 0);
  for (auto [b, e] : test_ranges(m.total, m.padded)) {
    std::vector<float> got = grads;
    masks.masked_decay_range(Tensor::of(const_cast<float*>(m.masters.data()) + b, {e - b}), b, lambda,
                             Tensor::of(got.data() + b, {e - b}));
    for (int64_t i = 0; i < m.padded; ++i)
      ASSERT_EQ(got[i], i >= b && i < e ? want[i] : grads[i])
          << "range [" << b << ", " << e << "), element " << i;
  }
}

// The same on the GPU (the element-wise kernels on [1, n] pieces), against the GPU's full ops.
TEST(ZeroRanges, RangesMatchTheFullOpsOnTheGpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const MaskedModel m;
  const int64_t total = m.total, padded = m.padded;
  FfnMasks masks(m.config, sparse_ffn(), Device::cuda);
  DeviceBuffer masters(size_t(padded) * 4), grads(size_t(padded) * 4), out(size_t(padded) * 4);
  masters.upload(m.masters.data(), size_t(padded) * 4);
  const Tensor full_masters = masters.view(DType::f32, {total});
  masks.recompute(full_masters);
  auto download = [](const DeviceBuffer& b, size_t bytes) {
    std::vector<uint8_t> host(bytes);
    copy_bytes(host.data(), false, b.data(), true, bytes);
    return host;
  };
  auto at = [](const DeviceBuffer& b, DType dtype, int64_t offset, int64_t n) {
    return Tensor(static_cast<char*>(b.data()) + offset * dtype_size(dtype), dtype, {n}, Device::cuda);
  };
  // The full masked cast (f32 -> bf16, then the masked linears) as a bf16 model's load_weights does it.
  const FfnMasks& cm = masks;
  std::vector<uint16_t> want_cast(static_cast<size_t>(total));
  {
    DeviceBuffer full(size_t(total) * 2);
    ops::cast(full_masters, full.view(DType::bf16, {total}));
    for (const FfnMasks::Linear& l : cm.linears())
      ops::apply_mask(
          Tensor(static_cast<float*>(masters.data()) + l.offset, DType::f32, {l.rows, l.cols}, Device::cuda),
          l.mask,
          Tensor(static_cast<uint16_t*>(full.data()) + l.offset, DType::bf16, {l.rows, l.cols},
                 Device::cuda));
    std::memcpy(want_cast.data(), download(full, size_t(total) * 2).data(), size_t(total) * 2);
  }
  const std::vector<float> host_grads = random_values(padded, 2);
  grads.upload(host_grads.data(), size_t(padded) * 4);
  masks.masked_decay(full_masters, 0.25, grads.view(DType::f32, {total}));
  std::vector<float> want_decay(static_cast<size_t>(padded));
  std::memcpy(want_decay.data(), download(grads, size_t(padded) * 4).data(), size_t(padded) * 4);
  for (auto [b, e] : test_ranges(total, padded)) {
    const int64_t n = e - b;
    std::vector<uint8_t> poison(size_t(n) * 2, 0xFF);
    out.upload(poison.data(), poison.size());
    masks.masked_cast_range(at(masters, DType::f32, b, n), b, at(out, DType::bf16, 0, n));
    std::vector<uint16_t> cast(static_cast<size_t>(n));
    std::memcpy(cast.data(), download(out, size_t(n) * 2).data(), size_t(n) * 2);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(cast[i], b + i < total ? want_cast[b + i] : uint16_t{0})
          << "cast, range [" << b << ", " << e << ")";
    grads.upload(host_grads.data(), size_t(padded) * 4);
    masks.masked_decay_range(at(masters, DType::f32, b, n), b, 0.25, at(grads, DType::f32, b, n));
    std::vector<float> decay(static_cast<size_t>(padded));
    std::memcpy(decay.data(), download(grads, size_t(padded) * 4).data(), size_t(padded) * 4);
    for (int64_t i = 0; i < padded; ++i)
      ASSERT_EQ(decay[i], i >= b && i < e ? want_decay[i] : host_grads[i])
          << "decay, range [" << b << ", " << e << ")";
  }
}

// --- Optimizer state per rank: rank r of a world of N, every collective a no-op (nothing is gathered
// here; the real collectives run in packtrain_dist_tests).
class StubWorld : public Communicator {
 public:
  StubWorld(int rank, int size) : Communicator(rank, size, Device::cpu, 1) {}
  std::string_view backend() const override { return "stub"; }

 protected:
  void start(const Collective&) override {}
  void finish(const Collective&, Clock::time_point) override {}
};

TEST(ZeroOneState, EachOfNRanksHoldsAboutOneNthOfTheReplicatedMastersAndMoments) {
  const ParameterLayout layout(small_config());
  const int64_t n = layout.total();
  std::vector<float> one_grads(static_cast<size_t>(n));
  StubWorld one(0, 1);
  const DataParallelOptimizer replicated(one, layout, Tensor::of(one_grads.data(), {n}), {});
  EXPECT_EQ(replicated.masters().numel(), n);
  EXPECT_GE(replicated.state_bytes(), 3 * 4 * n);
  EXPECT_LE(replicated.state_bytes(), 3 * (4 * n + 256));  // each buffer aligned to 256 bytes
  for (int world : {2, 3, 7}) {
    std::vector<float> grads(size_t(DataParallelOptimizer::flat_size(n, world, true)));
    int64_t owned = 0;
    for (int rank = 0; rank < world; ++rank) {
      StubWorld w(rank, world);
      const DataParallelOptimizer dp(w, layout, Tensor::of(grads.data(), {std::ssize(grads)}),
                                     {.zero1 = true});
      const double ratio = double(dp.state_bytes()) / double(replicated.state_bytes());
      EXPECT_NEAR(ratio, 1.0 / world, 0.02) << "rank " << rank << " of " << world;
      EXPECT_EQ(dp.masters().numel(), dp.shards().shard);
      owned += dp.owned_end() - dp.owned_begin();
    }
    EXPECT_EQ(owned, n);
  }
}

// The optimizer's parameters after `steps` AdamW steps with deterministic gradients over four decades,
// on rank `rank` of a stub world (collectives are no-ops: each rank is given the full summed gradient, and
// the clip, a sum over ranks, is left out). Its masters (f32, or bf16 ones widened): the owned range's.
std::vector<float> stub_rank_params(const ParameterLayout& layout, int rank, int world,
                                    ops::MomentFormat format, int steps, DType masters = DType::f32) {
  const int64_t n = layout.total();
  std::vector<float> init(static_cast<size_t>(n)),
      grads(size_t(DataParallelOptimizer::flat_size(n, world, world > 1)));
  for (int64_t i = 0; i < n; ++i) init[size_t(i)] = 0.02f * std::sin(0.7f * float(i));
  StubWorld w(rank, world);
  DataParallelOptimizer dp(w, layout, Tensor::of(grads.data(), {std::ssize(grads)}),
                           {.zero1 = world > 1, .moments = format, .masters = masters});
  dp.set_params(init);
  for (int step = 1; step <= steps; ++step) {
    for (int64_t i = 0; i < n; ++i)
      grads[size_t(i)] = std::cos(0.37f * float(i) + float(step)) * std::pow(10.0f, -float(i % 4));
    dp.step({1e-2, 0.9, 0.95, 1e-8, 0.1, /*seed=*/7}, step);
  }
  const auto owned = static_cast<size_t>(dp.owned_end() - dp.owned_begin());
  if (masters == DType::f32) return {dp.masters().ptr<float>(), dp.masters().ptr<float>() + owned};
  std::vector<float> out(owned);
  for (size_t i = 0; i < owned; ++i) out[i] = bf16_to_float(dp.masters().ptr<bf16>()[i].bits);
  return out;
}

// 8-bit moments quantize blocks of a grid over the flat buffer cut at tensor boundaries, and shards hold
// whole grid cells: a shard of any world trains to the bits of the same range of a world of one.
TEST(ZeroOneState, EightBitMomentsGiveEveryRankCountTheSameParameters) {
  const ParameterLayout layout(small_config());
  const int64_t n = layout.total();
  const std::vector<float> want = stub_rank_params(layout, 0, 1, ops::MomentFormat::q8, 4);
  EXPECT_NE(want, stub_rank_params(layout, 0, 1, ops::MomentFormat::f32, 4)) << "the format is in use";
  for (int world : {2, 3, 7}) {
    const ShardLayout s = make_shard_layout(n, world);
    int64_t blocks = 0;
    for (int rank = 0; rank < world; ++rank) {
      const std::vector<float> got = stub_rank_params(layout, rank, world, ops::MomentFormat::q8, 4);
      ASSERT_EQ(std::ssize(got), s.real_count(rank));
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], want[size_t(s.begin(rank)) + i])
            << "rank " << rank << " of " << world << ", element " << i;
      blocks += range_quant_blocks(layout.params(), s.begin(rank), s.begin(rank) + s.real_count(rank));
    }
    EXPECT_EQ(blocks, range_quant_blocks(layout.params(), 0, n)) << "the ranks' blocks partition the model's";
  }
}

// Without fp32 masters each weight's stochastic rounding draws hash its flat index: a shard of any world
// rounds (and so trains) to the bits of the same range of a world of one, with each moment format.
TEST(ZeroOneState, Bf16MastersGiveEveryRankCountTheSameParameters) {
  const ParameterLayout layout(small_config());
  const int64_t n = layout.total();
  for (const auto format : {ops::MomentFormat::f32, ops::MomentFormat::q8}) {
    const std::vector<float> want = stub_rank_params(layout, 0, 1, format, 4, DType::bf16);
    size_t off_grid = 0;
    for (const float w : want) off_grid += bf16_to_float(float_to_bf16(w)) != w;
    EXPECT_EQ(off_grid, 0u) << "bf16 masters hold bf16 values";
    EXPECT_NE(want, stub_rank_params(layout, 0, 1, format, 4)) << "the masters' dtype is in use";
    for (int world : {2, 3, 7}) {
      const ShardLayout s = make_shard_layout(n, world);
      for (int rank = 0; rank < world; ++rank) {
        const std::vector<float> got = stub_rank_params(layout, rank, world, format, 4, DType::bf16);
        ASSERT_EQ(std::ssize(got), s.real_count(rank));
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], want[size_t(s.begin(rank)) + i])
              << "rank " << rank << " of " << world << ", element " << i;
      }
    }
  }
}

TEST(ZeroOneState, StateBytesFollowTheMomentFormat) {
  const ParameterLayout layout(small_config());
  const int64_t n = layout.total();
  std::vector<float> grads(static_cast<size_t>(n));
  StubWorld one(0, 1);
  const auto bytes = [&](ops::MomentFormat f) {
    return DataParallelOptimizer(one, layout, Tensor::of(grads.data(), {n}), {.moments = f}).state_bytes();
  };
  const int64_t blocks = range_quant_blocks(layout.params(), 0, n);
  EXPECT_LE(blocks, ops::quant_blocks(n) + std::ssize(layout.params())) << "at most one more block a tensor";
  // Each buffer is aligned to 256 bytes.
  for (const auto& [format, want] : {std::pair{ops::MomentFormat::f32, 12 * n},
                                     {ops::MomentFormat::bf16, 8 * n},
                                     {ops::MomentFormat::q8, 6 * n + 8 * blocks}}) {
    EXPECT_GE(bytes(format), want) << ops::moment_format_name(format);
    EXPECT_LE(bytes(format), want + 5 * 256) << ops::moment_format_name(format);
  }
}

// --- The bf16 working copy of f32 masters (a GPU model's weights): AdamW writes it as it updates them.

// This rank's part of a gathered working copy, and the cast of its masters (masked where masks are given)
// that it must equal.
std::vector<uint16_t> own_part(const DataParallelOptimizer& dp, const Tensor& gathered) {
  const auto* at = static_cast<const uint16_t*>(gathered.data) + dp.owned_begin();
  return {at, at + (dp.owned_end() - dp.owned_begin())};
}
std::vector<uint16_t> cast_of_masters(const DataParallelOptimizer& dp, const FfnMasks* masks) {
  const int64_t n = dp.owned_end() - dp.owned_begin();
  std::vector<uint16_t> out(static_cast<size_t>(n));
  const Tensor masters(dp.masters().data, DType::f32, {n}), to(out.data(), DType::bf16, {n});
  if (masks)
    masks->masked_cast_range(masters, dp.owned_begin(), to);
  else
    ops::cast(masters, to);
  return out;
}

// Bit for bit: a stub world's gathered state holds other ranks' garbage, possibly NaN.
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}
bool same_bits(const ops::HostMoment& a, const ops::HostMoment& b) {
  return same_bits(a.values, b.values) && same_bits(a.codes, b.codes) && same_bits(a.absmax, b.absmax);
}

// Replicated and ZeRO-1 (a middle and the last rank's shard), in every moment format, over steps with
// and without 2:4 masks, a step skipped and new parameters: every gather gives the cast of the masters
// (masked while masks are set); where AdamW wrote the copy the gather casts nothing (a copy spoiled after
// it is read back as it is, until the next step rewrites every element). And the norm alone with the clip
// folded into AdamW (grad_scale) gives the bits of the clip in place: masters, moments and working copy.
TEST(WorkingCopy, AdamWKeepsItTheCastOfTheMastersAndTheFoldedClipIsTheClip) {
  const ModelConfig config = small_config();
  const ParameterLayout layout(config);
  const int64_t n = layout.total();
  std::vector<float> init = random_values(n, 3), init2 = random_values(n, 4);
  for (float& x : init) x *= 0.05f;
  FfnMasks masks(config, sparse_ffn(), Device::cpu);
  masks.recompute(Tensor::of(init.data(), {n}));
  for (const auto format : {ops::MomentFormat::f32, ops::MomentFormat::bf16, ops::MomentFormat::q8})
    for (const auto& [world, rank] : {std::pair{1, -1}, {1, 0}, {3, 1}, {3, 2}}) {  // rank -1: replicated
      const bool zero1 = rank >= 0;
      SCOPED_TRACE(fmt::format("{} moments, {}", ops::moment_format_name(format),
                               zero1 ? fmt::format("ZeRO-1 rank {} of {}", rank, world) : "replicated"));
      const int64_t flat = DataParallelOptimizer::flat_size(n, world, zero1);
      std::vector<float> clip_grads(size_t(flat), 0.0f), fold_grads(clip_grads);
      StubWorld clip_world(std::max(rank, 0), world), fold_world(std::max(rank, 0), world);
      const DataParallelOptions options{.zero1 = zero1, .compute_dtype = DType::bf16, .moments = format};
      DataParallelOptimizer clipped(clip_world, layout, Tensor::of(clip_grads.data(), {flat}), options),
          folded(fold_world, layout, Tensor::of(fold_grads.data(), {flat}), options);
      EXPECT_TRUE(folded.gathers_weights());
      for (DataParallelOptimizer* dp : {&clipped, &folded}) dp->set_params(init);
      std::vector<double> clip_norm(1), fold_norm(1);
      for (int step = 1; step <= 7; ++step) {
        SCOPED_TRACE(fmt::format("step {}", step));
        if (step == 6)  // new parameters: the working copy no longer theirs
          for (DataParallelOptimizer* dp : {&clipped, &folded}) dp->set_params(init2);
        const FfnMasks* active = step == 3 || step == 4 ? &masks : nullptr;
        const Tensor want = clipped.gather_weights(active), got = folded.gather_weights(active);
        ASSERT_EQ(own_part(folded, got), cast_of_masters(folded, active));
        ASSERT_EQ(own_part(folded, got), own_part(clipped, want));
        if (step == 2 && !active) {  // read back as AdamW wrote it
          std::vector<uint16_t> spoiled(own_part(folded, got).size(), 0xFFFF);
          std::memcpy(static_cast<uint16_t*>(got.data) + folded.owned_begin(), spoiled.data(),
                      spoiled.size() * 2);
          EXPECT_EQ(own_part(folded, folded.gather_weights(nullptr)), spoiled);
        }
        for (int64_t i = 0; i < n; ++i)
          clip_grads[size_t(i)] = fold_grads[size_t(i)] = std::cos(0.37f * float(i) + float(step));
        clipped.reduce_gradients(), folded.reduce_gradients();
        clipped.clip_grad_norm_deferred(0.5, Tensor::of(clip_norm.data(), {1}));
        folded.grad_norm_deferred(Tensor::of(fold_norm.data(), {1}));
        ASSERT_EQ(fold_norm[0], clip_norm[0]);
        if (step == 5) continue;  // skipped (a non-finite step): masters and working copy as they were
        ops::AdamWConfig c{1e-2, 0.9, 0.95, 1e-8, 0.1};
        clipped.step(c, step);
        c.grad_scale = ops::clip_factor(0.5, fold_norm[0]);
        ASSERT_LT(c.grad_scale, 1) << "the run clips";
        folded.step(c, step);
      }
      const FullState want = clipped.gather_state(), got = folded.gather_state();
      EXPECT_TRUE(same_bits(got.params, want.params));
      EXPECT_TRUE(same_bits(got.m, want.m));
      EXPECT_TRUE(same_bits(got.v, want.v));
      EXPECT_EQ(own_part(folded, folded.gather_weights(nullptr)), cast_of_masters(folded, nullptr));
    }
}

// --- A model reading a caller's working copy (as ZeRO-1 gathers it: the masked cast of the masters) runs
// the passes a model that loads the masters runs, with masks, after the copy moved, and dense.

// A flat buffer on the cpu or the GPU, filled from and read back to the host.
class Flat {
 public:
  Flat(Device device, DType dtype, int64_t n)
      : bytes_(static_cast<size_t>(n * dtype_size(dtype))),
        host_(device == Device::cpu ? bytes_ : 0),
        device_(device == Device::cuda ? bytes_ : 0),
        t_(device == Device::cuda ? device_.data() : static_cast<void*>(host_.data()), dtype, {n}, device) {}
  const Tensor& t() const { return t_; }
  Tensor first(int64_t n) const { return Tensor(t_.data, t_.dtype, {n}, t_.device); }
  void set(const void* values) const {
    copy_bytes(t_.data, t_.device == Device::cuda, values, false, bytes_);
  }
  void zero() const { zero_bytes(t_.data, t_.device == Device::cuda, bytes_); }
  std::vector<float> floats() const {
    std::vector<float> out(bytes_ / 4);
    copy_bytes(out.data(), false, t_.data, t_.device == Device::cuda, bytes_);
    return out;
  }

 private:
  size_t bytes_;
  std::vector<uint8_t> host_;
  DeviceBuffer device_;
  Tensor t_;
};

void expect_working_weights_run_as_loaded_masters(Device device) {
  ModelConfig c;
  c.vocab_size = 300, c.hidden_size = 128, c.intermediate_size = 256, c.num_hidden_layers = 2;
  c.num_attention_heads = 2, c.num_key_value_heads = 1, c.head_dim = 64;  // what the CUDA attention runs
  const bool gpu = device == Device::cuda;
  const DType dtype = gpu ? DType::bf16 : DType::f32;
  const SparsityConfig sparsity = sparse_ffn();
  const std::vector<Batch> batches =
      pt::testing::packed_batches(pt::testing::random_split({9, 64, 17, 130, 33, 70}, c.vocab_size, 9),
                                  Strategy::kFlatten, 128, 3);  // two micro-batches accumulate
  const ParameterLayout layout(c);
  const int64_t n = layout.total();
  std::vector<float> masters0 = init_params(c, 4, 0.05), masters1 = masters0;
  std::mt19937 rng(6);
  std::normal_distribution<float> noise(0.0f, 0.01f);
  for (float& x : masters1) x += noise(rng);  // an optimizer step
  const Flat masters(device, DType::f32, n), grads(device, DType::f32, n);
  // Two working copies, padded past the layout as the gathered one is.
  const Flat copy_a(device, dtype, n + kShardAlign), copy_b(device, dtype, n + 3 * kShardAlign);
  FfnMasks masks(c, sparsity, device);
  DecoderModel loading(c, pt::testing::max_batch_tokens(batches), device, dtype, sparsity),
      reading(c, pt::testing::max_batch_tokens(batches), device, dtype, sparsity);
  struct Pass {
    double loss = 0;
    std::vector<float> grads;
  };
  auto pass = [&](DecoderModel& model) {
    Pass p;
    grads.zero();
    for (size_t i = 0; i < batches.size(); ++i) {
      model.set_mvue_seed({1, 0, static_cast<int64_t>(i)});
      p.loss += model.forward_backward(batches[i], grads.t(), 1.0).loss_sum;
    }
    p.grads = grads.floats();
    return p;
  };
  for (int phase = 0; phase < 3; ++phase) {
    SCOPED_TRACE(phase == 0 ? "masked" : phase == 1 ? "masked, updated, copy moved" : "dense");
    masters.set(phase == 0 ? masters0.data() : masters1.data());
    if (phase == 0) masks.recompute(masters.t());
    const FfnMasks* active = phase < 2 ? &masks : nullptr;
    loading.set_masks(active);
    reading.set_masks(active);
    loading.load_weights(masters.t());
    const Flat& copy = phase == 1 ? copy_b : copy_a;
    if (active)
      masks.masked_cast_range(masters.t(), 0, copy.first(n));
    else
      ops::cast(masters.t(), copy.first(n));
    reading.use_working_weights(copy.t());
    const Pass want = pass(loading), got = pass(reading);
    // The same weights through the same kernels: equal, but for the order of the GPU attention backward's
    // fp32 atomic sums.
    if (!gpu) {
      EXPECT_EQ(got.loss, want.loss);
      EXPECT_EQ(got.grads, want.grads);
      continue;
    }
    EXPECT_NEAR(got.loss, want.loss, 1e-6 * std::abs(want.loss));
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      diff += std::pow(double(got.grads[i]) - want.grads[i], 2);
      norm += std::pow(double(want.grads[i]), 2);
    }
    EXPECT_LT(std::sqrt(diff / norm), 1e-4);
  }
  const Flat wrong_dtype(device, gpu ? DType::f32 : DType::bf16, n), short_copy(device, dtype, n - 1);
  EXPECT_THROW(reading.use_working_weights(wrong_dtype.t()), Error);
  EXPECT_THROW(reading.use_working_weights(short_copy.t()), Error);
}

TEST(LlamaWorkingWeights, RunAsLoadedMastersOnTheCpu) {
  expect_working_weights_run_as_loaded_masters(Device::cpu);
}

TEST(LlamaWorkingWeights, RunAsLoadedMastersOnTheGpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  expect_working_weights_run_as_loaded_masters(Device::cuda);
}

}  // namespace
}  // namespace pt::dist
