// Token balance across ranks: deterministic, disjoint and complete, and within max/mean <= 1.02 on
// realistic steps: the default corpus' own lengths when it is prepared, its length histogram otherwise,
// and a synthetic long tail.
#include "distributed/balance.h"

#include "core/error.h"
#include "data/dataset.h"
#include "distributed/step_data.h"
#include "model/batches.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

namespace pt::dist {
namespace {

TEST(TokenBalance, CoversEveryExampleOnceAndIsDeterministic) {
  std::mt19937 rng(1);
  std::vector<int64_t> lengths;
  for (int i = 0; i < 500; ++i) lengths.push_back(1 + int64_t(rng() % 300));
  for (int world : {1, 2, 3, 7}) {
    const TokenBalance b = balance_by_tokens(lengths, world);
    EXPECT_EQ(b.rank_of, balance_by_tokens(lengths, world).rank_of);
    std::vector<int> seen(lengths.size(), 0);
    int64_t total = 0;
    for (int r = 0; r < world; ++r) {
      int64_t tokens = 0;
      const auto share = b.share(r);
      EXPECT_TRUE(std::is_sorted(share.begin(), share.end()));
      for (int64_t i : share) ++seen[size_t(i)], tokens += lengths[size_t(i)];
      EXPECT_EQ(tokens, b.tokens[size_t(r)]);
      total += tokens;
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
    EXPECT_EQ(total, std::reduce(lengths.begin(), lengths.end(), int64_t{0}));
  }
}

TEST(TokenBalance, OneExampleLongerThanTheMeanShareSetsTheMaximum) {
  // 1000 + 10 * 20 tokens over 4 ranks: the mean share is 300, the long example alone is 1000. LPT puts
  // every short one elsewhere, which is the best possible.
  std::vector<int64_t> lengths(20, 10);
  lengths.push_back(1000);
  const TokenBalance b = balance_by_tokens(lengths, 4);
  EXPECT_EQ(b.max_tokens(), 1000);
  EXPECT_DOUBLE_EQ(b.imbalance(), 1000.0 / 300.0);
  EXPECT_THROW(balance_by_tokens(lengths, 0), Error);
  EXPECT_EQ(balance_by_tokens({}, 3).imbalance(), 1.0);
  EXPECT_EQ(balance_by_tokens(std::vector<int64_t>{5}, 3).share(1).size(), 0u);  // fewer examples than ranks
}

// Lengths drawn from the default corpus' prepared length histogram (log2 buckets: examples per bucket),
// uniform within a bucket.
std::vector<int64_t> default_corpus_like_lengths(int n, uint64_t seed) {
  struct Bin {
    int64_t lo, hi, count;
  };
  const Bin bins[] = {{2, 3, 1},        {4, 7, 216},      {8, 15, 2135},    {16, 31, 11546},
                      {32, 63, 10146},  {64, 127, 3267},  {128, 255, 1394}, {256, 511, 562},
                      {512, 1023, 116}, {1024, 2047, 59}, {2048, 2048, 30}};
  std::vector<double> weights;
  for (const Bin& b : bins) weights.push_back(double(b.count));
  std::mt19937_64 rng(seed);
  std::discrete_distribution<int> pick(weights.begin(), weights.end());
  std::vector<int64_t> lengths;
  for (int i = 0; i < n; ++i) {
    const Bin& b = bins[pick(rng)];
    lengths.push_back(b.lo + int64_t(rng() % uint64_t(b.hi - b.lo + 1)));
  }
  return lengths;
}

// The worst step's max/mean over `steps` steps of the sampler (flatten, tokens_per_rank per micro-batch).
double worst_imbalance(const DatasetSplit& split, int world, int64_t tokens_per_rank, int steps,
                       double* mean_out) {
  PackingOptions o;
  o.strategy = Strategy::kFlatten, o.tokens_per_batch = tokens_per_rank, o.seed = 3;
  StepSampler sampler(split, o, world, 1);
  double worst = 1, sum = 0;
  for (int s = 0; s < steps; ++s) {
    std::vector<int64_t> lengths;
    for (int64_t i : sampler.next()) lengths.push_back(split.length(i));
    const double imbalance = balance_by_tokens(lengths, world).imbalance();
    worst = std::max(worst, imbalance);
    sum += imbalance;
  }
  if (mean_out) *mean_out = sum / steps;
  return worst;
}

void expect_balanced(const DatasetSplit& split, const char* what) {
  for (int world : {2, 3, 4, 8}) {
    for (int64_t tokens : {4096, 16384}) {
      double mean = 0;
      const double worst = worst_imbalance(split, world, tokens, 300, &mean);
      EXPECT_LE(worst, 1.02) << what << ", " << world << " ranks, " << tokens << " tokens per rank";
      ::testing::Test::RecordProperty(fmt::format("{}_w{}_t{}", what, world, tokens),
                                      fmt::format("worst {:.4f} mean {:.4f}", worst, mean));
    }
  }
}

TEST(TokenBalance, DefaultCorpusLengthsStayWithinTwoPercent) {
  const auto lengths = default_corpus_like_lengths(28000, 9);
  expect_balanced(pt::testing::random_split(lengths, 100, 1), "histogram");
}

TEST(TokenBalance, PreparedDefaultCorpusStaysWithinTwoPercent) {
  const auto dir = std::filesystem::path(PACKTRAIN_FIXTURES) / "../../data/prepared/default";
  if (!std::filesystem::exists(dir / "metadata.json"))
    GTEST_SKIP() << "the default corpus is not prepared (scripts/main.sh prepares it)";
  expect_balanced(PreparedDataset::open(dir.string(), false).train(), "corpus");
}

TEST(TokenBalance, SyntheticLongTailStaysWithinTwoPercentWithEnoughExamplesPerRank) {
  // Pareto-like lengths (shape 1.2, 8 .. 4096 tokens): many short examples and a heavy tail.
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int world : {2, 3, 8}) {
    double worst = 1;
    for (int step = 0; step < 200; ++step) {
      std::vector<int64_t> lengths;
      for (int i = 0; i < 256 * world; ++i)
        lengths.push_back(std::min<int64_t>(4096, int64_t(8.0 / std::pow(1.0 - u(rng), 1.0 / 1.2))));
      const TokenBalance b = balance_by_tokens(lengths, world);
      // The bound holds whenever no example is longer than the mean share.
      if (double(*std::max_element(lengths.begin(), lengths.end())) <= b.mean_tokens())
        worst = std::max(worst, b.imbalance());
    }
    EXPECT_LE(worst, 1.02) << world << " ranks";
  }
}

}  // namespace
}  // namespace pt::dist
