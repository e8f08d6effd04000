#include "data/packing/report.h"

#include <gtest/gtest.h>

namespace pt {
namespace {

// Lengths 3, 2, 4, 1 (10 tokens), every token a target, unshuffled; 2 examples per batch, rows of 4.
DatasetSplit tiny_split() {
  std::vector<uint32_t> tokens(10);
  for (uint32_t i = 0; i < 10; ++i) tokens[i] = i + 1;
  return DatasetSplit::from_vectors(tokens, std::vector<uint8_t>(10, 1), {0, 3, 5, 9, 10});
}

struct Expected {
  int64_t batches, rows, processed, loss, split, cost;
};

TEST(PackReport, MatchesHandComputedNumbersOnATinySplit) {
  PackingOptions o;
  o.examples_per_batch = 2;
  o.row_len = 4;
  o.shuffle = false;
  auto reports = pack_report(tiny_split(), o);
  // padding: [3,2] -> 2 rows of 3, [4,1] -> 2 rows of 4; cost 2*9 + 2*16.
  // concat (1 row per batch: round(2 * 2.5 / 4)): |0 0 0 1|1 2 2 2|2 3 . .|, each row costs 16; the
  //   first token of each example and of each row takes no loss: 10 - 4 - 2 targets.
  // concat-posid: the same rows, segments 3,1 | 1,3 | 1,1,(2 pads): 9+1+1+9+1+1.
  // flatten: rows [3 2] and [4 1]: 9+4+16+1.
  // bfd: 4,3,2,1 best fit into rows of 4: [4] [3 1] [2 . .]: 16+9+1+4.
  const Expected expected[] = {{2, 4, 14, 6, 0, 50},
                               {3, 3, 12, 4, 2, 48},
                               {3, 3, 12, 4, 2, 22},
                               {2, 2, 10, 6, 0, 30},
                               {3, 3, 12, 6, 0, 30}};
  ASSERT_EQ(reports.size(), 5u);
  for (size_t i = 0; i < reports.size(); ++i) {
    const StrategyReport& r = reports[i];
    const Expected& e = expected[i];
    SCOPED_TRACE(strategy_name(r.strategy));
    EXPECT_EQ(r.strategy, kAllStrategies[i]);
    EXPECT_EQ(r.batches, e.batches);
    EXPECT_EQ(r.rows, e.rows);
    EXPECT_EQ(r.real_tokens, 10);
    EXPECT_EQ(r.processed_tokens, e.processed);
    EXPECT_EQ(r.loss_tokens, e.loss);
    EXPECT_EQ(r.examples, 4);
    EXPECT_EQ(r.examples_split, e.split);
    EXPECT_EQ(r.attention_cost, e.cost);
    EXPECT_DOUBLE_EQ(r.attention_vs_padding, static_cast<double>(e.cost) / 50.0);
    EXPECT_DOUBLE_EQ(r.padding_fraction(), 1.0 - 10.0 / static_cast<double>(e.processed));
  }
}

TEST(PackReport, TokenBudgetChangesTheMinibatches) {
  PackingOptions o;
  o.tokens_per_batch = 8;
  o.row_len = 4;
  o.shuffle = false;
  o.strategy = Strategy::kPadding;
  // Padded cost rows * longest <= 8: [3,2] costs 2*3 (adding 4 would cost 3*4), then [4,1] costs 2*4.
  StrategyReport padding = measure_epoch(tiny_split(), o, 0);
  EXPECT_EQ(padding.batches, 2);
  EXPECT_EQ(padding.processed_tokens, 14);
  // Real tokens <= 8: [3,2] (5; +4 = 9 > 8), [4,1] (5).
  o.strategy = Strategy::kFlatten;
  StrategyReport flatten = measure_epoch(tiny_split(), o, 0);
  EXPECT_EQ(flatten.batches, 2);
  EXPECT_EQ(flatten.processed_tokens, 10);
  // Two rows of 4 per batch: 3 rows -> batches of 2 and 1 rows.
  o.strategy = Strategy::kConcat;
  StrategyReport concat = measure_epoch(tiny_split(), o, 0);
  EXPECT_EQ(concat.batches, 2);
  EXPECT_EQ(concat.rows, 3);
}

}  // namespace
}  // namespace pt
