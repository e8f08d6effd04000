// The data of data-parallel steps: the same examples whatever the world size, disjoint shares that
// cover the step, every example packed exactly once, exact resumption from a position.
#include "distributed/step_data.h"

#include "core/error.h"
#include "data/packing/batch_sizing.h"
#include "model/batches.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace pt::dist {
namespace {

// Mostly short examples, every 29th long, every 50th empty (never drawn: it carries no tokens).
DatasetSplit long_tailed_split(int n) {
  std::mt19937 rng(2);
  std::vector<int64_t> lengths;
  for (int i = 0; i < n; ++i) lengths.push_back(2 + int64_t(rng() % 60) + (i % 29 == 0 ? 200 : 0));
  const DatasetSplit full = pt::testing::random_split(lengths, 100, 3);
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> mask;
  std::vector<uint64_t> offsets = {0};
  for (int i = 0; i < n; ++i) {
    if (i % 50 != 7) {
      const Example e = full.example(i);
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      mask.insert(mask.end(), e.loss_mask.begin(), e.loss_mask.end());
    }
    offsets.push_back(tokens.size());
  }
  return DatasetSplit::from_vectors(std::move(tokens), std::move(mask), std::move(offsets));
}

PackingOptions options(Strategy s, int32_t examples, int64_t tokens) {
  PackingOptions o;
  o.strategy = s, o.examples_per_batch = examples, o.tokens_per_batch = tokens, o.row_len = 512, o.seed = 5;
  return o;
}

TEST(StepSampler, StepsAreTheSameExamplesForAnyWorldSizeWithTheSameGlobalBatch) {
  const DatasetSplit split = long_tailed_split(300);
  for (const PackingOptions& o : {options(Strategy::kFlatten, 4, 0), options(Strategy::kFlatten, 0, 600)}) {
    StepSampler one(split, o, 1, 6), two(split, o, 2, 3), three(split, o, 3, 2);
    for (int s = 0; s < 40; ++s) {  // several epochs
      const auto want = one.next();
      EXPECT_EQ(two.next(), want);
      EXPECT_EQ(three.next(), want);
      int64_t tokens = 0;
      for (int64_t i : want) {
        tokens += split.length(i);
        EXPECT_GT(split.length(i), 0);
      }
      if (o.examples_per_batch > 0)
        EXPECT_EQ(want.size(), 24u);
      else
        EXPECT_LE(tokens, 3600);
    }
  }
}

TEST(StepSampler, WalksTheEpochOrdersBackToBackAndResumesFromItsPosition) {
  const DatasetSplit split = long_tailed_split(100);
  const PackingOptions o = options(Strategy::kBfd, 7, 0);
  StepSampler sampler(split, o, 2, 1);
  std::vector<int64_t> seen;
  while (sampler.epoch() < 2) {
    const auto step = sampler.next();
    seen.insert(seen.end(), step.begin(), step.end());
  }
  auto expected = packing_order(split, o, 0);
  const auto second = packing_order(split, o, 1);
  expected.insert(expected.end(), second.begin(), second.end());
  ASSERT_GE(seen.size(), expected.size());
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), seen.begin()));

  StepSampler a(split, o, 2, 1);
  for (int s = 0; s < 13; ++s) a.next();
  StepSampler b(split, o, 2, 1, a.epoch(), a.position());
  for (int s = 0; s < 20; ++s) EXPECT_EQ(a.next(), b.next());
  EXPECT_THROW(StepSampler(split, o, 2, 1, 0, 1000000), Error);
  EXPECT_THROW(StepSampler(split, options(Strategy::kFlatten, 0, 0), 2, 1), Error);  // no batch size
}

TEST(RankStepStream, SharesAreDisjointCoverTheStepAndPackEveryExampleOnce) {
  const DatasetSplit split = long_tailed_split(400);
  for (Strategy s : kAllStrategies) {
    const PackingOptions o =
        s == Strategy::kPadding || s == Strategy::kFlatten ? options(s, 3, 0) : options(s, 0, 1024);
    const int world = 3;
    std::vector<RankStepStream> ranks;
    for (int r = 0; r < world; ++r) ranks.emplace_back(split, o, 2, r, world);
    StepSampler global(split, o, world, 2);
    for (int step = 0; step < 10; ++step) {
      auto want = global.next();
      std::vector<int64_t> got;
      int64_t step_tokens = 0;
      for (int r = 0; r < world; ++r) {
        const RankStep rs = ranks[r].next();
        got.insert(got.end(), rs.examples.begin(), rs.examples.end());
        int64_t share_tokens = 0, examples = 0;
        for (int64_t i : rs.examples) share_tokens += split.length(i);
        for (const Batch& b : rs.micro) examples += b.examples;
        EXPECT_EQ(rs.real_tokens(), share_tokens) << strategy_name(s);
        EXPECT_EQ(rs.balance.tokens[size_t(r)], share_tokens);
        if (s != Strategy::kConcat && s != Strategy::kConcatPosId) {
          EXPECT_EQ(examples, std::ssize(rs.examples));
        }
        step_tokens = rs.global_real_tokens();
      }
      int64_t want_tokens = 0;
      for (int64_t i : want) want_tokens += split.length(i);
      EXPECT_EQ(step_tokens, want_tokens);
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      EXPECT_EQ(got, want) << strategy_name(s) << " step " << step;
    }
  }
}

TEST(RankStepStream, FixedRowStrategiesKeepTheWholeSplitsRowsPerBatch) {
  const DatasetSplit split = long_tailed_split(200);
  const PackingOptions o = options(Strategy::kBfd, 16, 0);
  const PackingOptions share = share_packing_options(split, o);
  EXPECT_EQ(share.examples_per_batch, 0);
  EXPECT_EQ(share.tokens_per_batch % o.row_len, 0);
  EXPECT_FALSE(share.shuffle);
  EXPECT_TRUE(pack_examples(split, {}, share).empty());
}

}  // namespace
}  // namespace pt::dist
