// Property tests of every strategy in both batch modes on random splits with awkward lengths.
#include "data/packing/packer.h"
#include "data/packing/shuffle.h"
#include "data/packing/synthetic_split.h"
#include "epoch_checker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

namespace pt {
namespace {

constexpr int32_t kRowLen = 64;
constexpr int32_t kExamplesPerBatch = 7;
constexpr int64_t kTokensPerBatch = 256;
constexpr int32_t kPadId = 0;

// Lengths 0 (skipped), 1, exactly row_len, longer than a row (unless whole_rows), and in between.
std::vector<int64_t> awkward_lengths(int64_t count, uint64_t seed, bool fit_rows) {
  SplitMix64 rng(seed);
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < count; ++i) {
    uint64_t kind = rng.below(20);
    if (kind == 0)
      lengths.push_back(0);
    else if (kind <= 2)
      lengths.push_back(1);
    else if (kind <= 4)
      lengths.push_back(kRowLen);
    else if (kind <= 6 && !fit_rows)
      lengths.push_back(kRowLen + 1 + static_cast<int64_t>(rng.below(2 * kRowLen)));
    else
      lengths.push_back(1 + static_cast<int64_t>(rng.below(kRowLen - 1)));
  }
  return lengths;
}

class PackingProperties : public ::testing::TestWithParam<std::tuple<Strategy, bool>> {
 protected:
  Strategy strategy() const { return std::get<0>(GetParam()); }
  bool token_mode() const { return std::get<1>(GetParam()); }

  PackingOptions options(uint64_t seed) const {
    PackingOptions o;
    o.strategy = strategy();
    o.examples_per_batch = token_mode() ? 0 : kExamplesPerBatch;
    o.tokens_per_batch = token_mode() ? kTokensPerBatch : 0;
    o.row_len = kRowLen;
    o.pad_id = kPadId;
    o.seed = seed;
    return o;
  }

  DatasetSplit split(uint64_t seed) const {
    auto lengths = awkward_lengths(300, seed, strategy() == Strategy::kBfd);
    return synthetic_split(lengths, seed);
  }
};

TEST_P(PackingProperties, EveryEpochHoldsEveryTokenOnceUnderTheBatchContract) {
  for (uint64_t seed : {1, 2, 3}) {
    DatasetSplit data = split(seed);
    for (int64_t epoch : {0, 1}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " epoch " + std::to_string(epoch));
      testing::EpochChecker checker(data, strategy(), kPadId);
      auto packer = make_packer(data, options(seed), epoch);
      double last_progress = 0;
      while (auto batch = packer->next()) {
        checker.check(*batch);
        if (::testing::Test::HasFatalFailure()) return;
        EXPECT_GE(packer->progress(), last_progress);
        last_progress = packer->progress();
      }
      EXPECT_DOUBLE_EQ(packer->progress(), 1.0);
      EXPECT_FALSE(packer->next().has_value()) << "a finished epoch stays finished";
      checker.check_epoch_complete();
    }
  }
}

TEST_P(PackingProperties, BatchesHaveTheRequestedSize) {
  DatasetSplit data = split(7);
  PackingOptions o = options(7);
  auto packer = make_packer(data, o, 0);
  std::vector<Batch> batches;
  while (auto batch = packer->next()) batches.push_back(std::move(*batch));
  ASSERT_GT(batches.size(), 3u);
  double mean = static_cast<double>(data.num_tokens()) / static_cast<double>(data.size());
  int32_t fixed_rows =
      token_mode() ? static_cast<int32_t>(kTokensPerBatch / kRowLen)
                   : std::max(1, static_cast<int32_t>(std::round(kExamplesPerBatch * mean / kRowLen)));
  for (size_t i = 0; i < batches.size(); ++i) {
    const Batch& b = batches[i];
    bool last = i + 1 == batches.size();
    SCOPED_TRACE("batch " + std::to_string(i));
    switch (strategy()) {
      case Strategy::kPadding:
        if (token_mode()) {
          EXPECT_LE(b.num_tokens(), kTokensPerBatch);
        } else if (!last) {
          EXPECT_EQ(b.rows, kExamplesPerBatch);
        }
        EXPECT_EQ(b.row_len, *std::max_element(b.row_real_len.begin(), b.row_real_len.end()));
        break;
      case Strategy::kFlatten:
        EXPECT_EQ(b.rows, 1);
        EXPECT_EQ(b.processed_tokens, b.real_tokens) << "flatten never pads";
        if (token_mode()) {
          EXPECT_LE(b.real_tokens, kTokensPerBatch);
        } else if (!last) {
          EXPECT_EQ(b.examples, kExamplesPerBatch);
        }
        break;
      case Strategy::kConcat:
      case Strategy::kConcatPosId:
      case Strategy::kBfd:
        EXPECT_EQ(b.row_len, kRowLen);
        EXPECT_EQ(b.rows, last ? std::min(b.rows, fixed_rows) : fixed_rows);
        break;
    }
    if (strategy() == Strategy::kConcat || strategy() == Strategy::kConcatPosId) {
      // Only the epoch's final row is padded.
      int32_t full_rows = last ? b.rows - 1 : b.rows;
      for (int32_t r = 0; r < full_rows; ++r) EXPECT_EQ(b.row_real_len[static_cast<size_t>(r)], kRowLen);
    }
  }
  // The budget is used: token-mode minibatches stop only when the next example would not fit.
  if (token_mode() && strategy() == Strategy::kFlatten) {
    for (size_t i = 0; i + 1 < batches.size(); ++i) {
      int64_t next_length = batches[i + 1].cu_seqlens[1];
      EXPECT_GT(batches[i].real_tokens + next_length, kTokensPerBatch) << "batch " << i << " stopped early";
    }
  }
}

TEST_P(PackingProperties, SameSeedSameBatchesOtherSeedOtherOrder) {
  DatasetSplit data = split(11);
  auto collect = [&](uint64_t seed, int64_t epoch) {
    std::vector<int32_t> ids;
    auto packer = make_packer(data, options(seed), epoch);
    while (auto batch = packer->next())
      ids.insert(ids.end(), batch->input_ids.begin(), batch->input_ids.end());
    return ids;
  };
  auto first = collect(5, 0);
  EXPECT_EQ(first, collect(5, 0));
  EXPECT_NE(first, collect(6, 0));
  EXPECT_NE(first, collect(5, 1)) << "each epoch has its own order";
}

TEST_P(PackingProperties, SplitsCountedOnlyWhereExamplesCross) {
  DatasetSplit data = split(13);
  testing::EpochChecker checker(data, strategy(), kPadId);
  auto packer = make_packer(data, options(13), 0);
  while (auto batch = packer->next()) checker.check(*batch);
  if (strategy() == Strategy::kConcat || strategy() == Strategy::kConcatPosId)
    EXPECT_GT(checker.examples_split(), 0) << "examples longer than a row must be split";
  else
    EXPECT_EQ(checker.examples_split(), 0);
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<Strategy, bool>>& info) {
  std::string name(strategy_name(std::get<0>(info.param)));
  std::erase(name, '-');
  return name + (std::get<1>(info.param) ? "_Tokens" : "_Examples");
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, PackingProperties,
                         ::testing::Combine(::testing::ValuesIn(kAllStrategies), ::testing::Bool()),
                         param_name);

}  // namespace
}  // namespace pt
