// ZeRO-1 shard math and gradient buckets: shards tile the padded buffer, AdamW pieces cut tensors at
// shard edges keeping their decay flags, checkpoints reshard between rank counts, buckets tile the layout
// in backward order.
#include "distributed/zero.h"
#include "distributed/grad_reducer.h"

#include "core/error.h"
#include "model/config.h"

#include <gtest/gtest.h>

#include <numeric>

namespace pt::dist {
namespace {

LlamaConfig small_config() {
  LlamaConfig c;
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
    const auto pieces = adamw_range(layout.params(), b, e, P, G, Tensor::of(m.data(), {s.shard}),
                                    Tensor::of(v.data(), {s.shard}));
    int64_t at = b;
    for (const auto& piece : pieces) {
      const int64_t offset = piece.param.ptr<float>() - params.data();
      EXPECT_EQ(offset, at);  // contiguous pieces, in order
      EXPECT_EQ(piece.grad.ptr<float>() - grads.data(), offset);
      EXPECT_EQ(piece.m.ptr<float>() - m.data(), offset - b);
      // The decay flag of the tensor the piece belongs to.
      for (const ParamInfo& p : layout.params())
        if (offset >= p.offset && offset < p.offset + p.numel) {
          EXPECT_EQ(piece.decay, p.weight_decay) << p.name;
        }
      at += piece.param.numel();
    }
    EXPECT_EQ(at, e);
    covered += e - b;
  }
  EXPECT_EQ(covered, layout.total());
  EXPECT_THROW(adamw_range(layout.params(), 0, layout.total(), P, G, Tensor::of(m.data(), {s.shard}),
                           Tensor::of(v.data(), {s.shard})),
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

}  // namespace
}  // namespace pt::dist
