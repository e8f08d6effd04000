#include "core/error.h"
#include "data/packing/packer.h"
#include "data/packing/synthetic_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>

namespace pt {
namespace {

TEST(Strategy, NamesRoundTripAndUnknownNamesListTheValidOnes) {
  for (Strategy s : kAllStrategies) EXPECT_EQ(parse_strategy(strategy_name(s)), s);
  try {
    parse_strategy("pad");
    FAIL() << "'pad' is not a strategy";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("concat-posid"), std::string::npos) << e.what();
  }
}

TEST(EpochOrder, IsASeededPermutationPerEpoch) {
  auto order = epoch_order(1000, 7, 0, true);
  auto sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(order, identity);
  EXPECT_EQ(order, epoch_order(1000, 7, 0, true));
  EXPECT_NE(order, epoch_order(1000, 8, 0, true));
  EXPECT_NE(order, epoch_order(1000, 7, 1, true));
  EXPECT_EQ(epoch_order(1000, 7, 3, false), identity);
}

class PackerOptions : public ::testing::Test {
 protected:
  std::vector<int64_t> lengths{5, 40, 12};
  DatasetSplit split = synthetic_split(lengths, 1);

  void expect_rejected(const PackingOptions& o, const std::string& advice) {
    try {
      make_packer(split, o, 0);
      ADD_FAILURE() << strategy_name(o.strategy) << ": expected an error mentioning '" << advice << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(advice), std::string::npos) << e.what();
    }
  }
};

TEST_F(PackerOptions, NeedsExactlyOneBatchSize) {
  PackingOptions o;
  expect_rejected(o, "exactly one");
  o.examples_per_batch = 4;
  o.tokens_per_batch = 100;
  expect_rejected(o, "exactly one");
}

TEST_F(PackerOptions, TokenBudgetMustHoldARowOrTheLongestExample) {
  PackingOptions o;
  o.row_len = 32;
  o.tokens_per_batch = 30;
  for (Strategy s : {Strategy::kConcat, Strategy::kConcatPosId}) {
    o.strategy = s;
    expect_rejected(o, "at least 32");
  }
  for (Strategy s : {Strategy::kPadding, Strategy::kFlatten}) {
    o.strategy = s;
    expect_rejected(o, "longest example has 40 tokens");
  }
  o.tokens_per_batch = 40;
  for (Strategy s : {Strategy::kPadding, Strategy::kFlatten, Strategy::kConcat, Strategy::kConcatPosId}) {
    o.strategy = s;
    EXPECT_NO_THROW(make_packer(split, o, 0)) << strategy_name(s);
  }
}

TEST_F(PackerOptions, AnEmptySplitHasNoBatches) {
  DatasetSplit empty = DatasetSplit::from_vectors({}, {}, {0});
  for (Strategy s : kAllStrategies) {
    PackingOptions o;
    o.strategy = s;
    o.examples_per_batch = 4;
    auto packer = make_packer(empty, o, 0);
    EXPECT_FALSE(packer->next().has_value()) << strategy_name(s);
    EXPECT_DOUBLE_EQ(packer->progress(), 1.0);
  }
}

}  // namespace
}  // namespace pt
