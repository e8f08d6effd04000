#include "core/error.h"
#include "data/packing/packer.h"
#include "data/packing/synthetic_split.h"
#include "epoch_checker.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace pt {
namespace {

// An SFT-like corpus (lognormal lengths, median 330, capped at 2048) big enough for several bfd windows.
const DatasetSplit& sft_corpus() {
  static const DatasetSplit split = [] {
    auto lengths = sft_like_lengths(24000, 42);
    return synthetic_split(lengths, 42);
  }();
  return split;
}

TEST(Bfd, PacksAnSftCorpusAtLeast99PercentFullWithoutSplitting) {
  for (int32_t n : {16, 64}) {
    SCOPED_TRACE("examples per batch " + std::to_string(n));
    PackingOptions o;
    o.strategy = Strategy::kBfd;
    o.examples_per_batch = n;
    o.row_len = 2048;
    o.seed = 3;
    // The full contract check once, where the epoch spans the most windows.
    bool check = n == 16;
    testing::EpochChecker checker(sft_corpus(), o.strategy, o.pad_id);
    auto packer = make_packer(sft_corpus(), o, 0);
    int64_t real = 0, processed = 0;
    while (auto batch = packer->next()) {
      if (check) checker.check(*batch);
      ASSERT_FALSE(::testing::Test::HasFatalFailure());
      real += batch->real_tokens;
      processed += batch->processed_tokens;
    }
    if (check) checker.check_epoch_complete();
    EXPECT_EQ(real, sft_corpus().num_tokens());
    double efficiency = static_cast<double>(real) / static_cast<double>(processed);
    EXPECT_GE(efficiency, 0.99) << "real " << real << " of " << processed;
  }
}

// The lengths of the examples of each batch of one epoch (all but a final partial batch): every real
// segment of a bfd or flatten batch is one whole example.
std::vector<std::vector<int32_t>> example_lengths_by_batch(const DatasetSplit& split,
                                                           const PackingOptions& o) {
  std::vector<std::vector<int32_t>> batches;
  auto packer = make_packer(split, o, 0);
  while (auto b = packer->next()) {
    std::vector<int32_t>& lengths = batches.emplace_back();
    for (size_t s = 0; s + 1 < b->cu_seqlens.size(); ++s) {
      int32_t begin = b->cu_seqlens[s], row = begin / b->row_len;
      if (begin - row * b->row_len < b->row_real_len[static_cast<size_t>(row)])
        lengths.push_back(b->cu_seqlens[s + 1] - begin);
    }
  }
  batches.pop_back();
  return batches;
}

// How much batches differ in what they hold: the standard deviation over batches of their examples' mean
// log2 length.
double spread_of_mean_log_length(const std::vector<std::vector<int32_t>>& batches) {
  double sum = 0, sum2 = 0;
  for (const auto& lengths : batches) {
    double mean = 0;
    for (int32_t length : lengths) mean += std::log2(length);
    mean /= static_cast<double>(lengths.size());
    sum += mean, sum2 += mean * mean;
  }
  double n = static_cast<double>(batches.size()), mean = sum / n;
  return std::sqrt(std::max(0.0, sum2 / n - mean * mean));
}

// Packing must not sort examples into batches by length: a bfd batch should hold a sample of the data
// like a random minibatch of flatten, not rows of long examples in one step and rows of short ones in the
// next. Longest-first packing of a whole window did that, and its few-row batches trained worse (issue #4).
TEST(Bfd, BatchesMixLengthsLikeRandomMinibatches) {
  struct Case {
    double median, sigma;
    int32_t examples;
  };
  // The default corpus's shape (short, long-tailed: 2 rows a batch) and an SFT-like one (4 rows).
  for (Case c : {Case{30, 1.2, 72}, Case{330, 0.9, 16}}) {
    SCOPED_TRACE("median length " + std::to_string(c.median) + ", " + std::to_string(c.examples) +
                 " examples per batch");
    DatasetSplit split = synthetic_split(sft_like_lengths(30000, 5, c.median, c.sigma), 5);
    PackingOptions o;
    o.examples_per_batch = c.examples;
    o.row_len = 2048;
    o.seed = 9;
    o.strategy = Strategy::kFlatten;
    auto flatten = example_lengths_by_batch(split, o);
    o.strategy = Strategy::kBfd;
    auto bfd = example_lengths_by_batch(split, o);
    double mean_examples = 0;
    for (const auto& lengths : bfd) mean_examples += static_cast<double>(lengths.size());
    mean_examples /= static_cast<double>(bfd.size());
    EXPECT_NEAR(mean_examples, c.examples, 0.1 * c.examples);
    double spread_bfd = spread_of_mean_log_length(bfd), spread_flatten = spread_of_mean_log_length(flatten);
    EXPECT_LE(spread_bfd, 1.5 * spread_flatten) << "bfd " << spread_bfd << ", flatten " << spread_flatten;
  }
}

TEST(Bfd, RejectsAnExampleLongerThanARowWithAdvice) {
  std::vector<int64_t> lengths{10, 100, 20};
  DatasetSplit split = synthetic_split(lengths, 1);
  PackingOptions o;
  o.strategy = Strategy::kBfd;
  o.examples_per_batch = 2;
  o.row_len = 64;
  try {
    make_packer(split, o, 0);
    FAIL() << "an example of 100 tokens cannot fit rows of 64";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-len <= 64"), std::string::npos) << e.what();
  }
  o.row_len = 100;
  EXPECT_NO_THROW(make_packer(split, o, 0));
}

TEST(Bfd, FillsRowsBestFirstOnAKnownCase) {
  // Unshuffled, lengths 4,3,2,1 into rows of 4: BFD gives [4] [3,1] [2].
  std::vector<int64_t> lengths{3, 2, 4, 1};
  DatasetSplit split = synthetic_split(lengths, 1);
  PackingOptions o;
  o.strategy = Strategy::kBfd;
  o.tokens_per_batch = 12;
  o.row_len = 4;
  o.shuffle = false;
  auto batch = make_packer(split, o, 0)->next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->rows, 3);
  EXPECT_EQ(batch->row_real_len, (std::vector<int32_t>{4, 4, 2}));
  // Example starts 0 (3 tokens), 3 (2), 5 (4), 9 (1); token id = global index + 1; pad 0.
  EXPECT_EQ(batch->input_ids, (std::vector<int32_t>{6, 7, 8, 9, 1, 2, 3, 10, 4, 5, 0, 0}));
  EXPECT_EQ(batch->cu_seqlens, (std::vector<int32_t>{0, 4, 7, 8, 10, 12}));
  EXPECT_EQ(batch->position_ids, (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 0, 0, 1, 0, 1}));
  EXPECT_EQ(batch->max_seqlen, 4);
}

}  // namespace
}  // namespace pt
