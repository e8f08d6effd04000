// The model's contracts beyond one family's arithmetic (decoder_families_test.cpp checks that per family):
// gradient accumulation equals one large batch, logit chunks change nothing, backward progress reports only
// final gradients, broken batches are rejected.
#include "model/decoder.h"
#include "model/batches.h"
#include "model/init.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace pt {
namespace {

using testing::max_batch_tokens;
using testing::packed_batches;
using testing::random_split;

ModelConfig small_config(bool tied) {
  ModelConfig c;
  c.vocab_size = 13, c.hidden_size = 8, c.intermediate_size = 12, c.num_hidden_layers = 2;
  c.num_attention_heads = 2, c.num_key_value_heads = 1, c.head_dim = 4, c.tie_word_embeddings = tied;
  c.rope.theta = 100.0;
  return c;
}

Batch one_batch(const DatasetSplit& split, Strategy strategy, int32_t row_len) {
  auto batches = packed_batches(split, strategy, row_len, static_cast<int32_t>(split.size()));
  EXPECT_EQ(batches.size(), 1u);
  return batches.at(0);
}

struct EpochTotals {
  double loss_sum = 0;
  int64_t targets = 0;
  std::vector<float> grads;
};

EpochTotals run_epoch(const ModelConfig& c, const DatasetSplit& split, Strategy strategy, int32_t row_len,
                      const std::vector<float>& params, int32_t examples_per_batch) {
  const std::vector<Batch> batches = packed_batches(split, strategy, row_len, examples_per_batch);
  int64_t targets = 0;
  for (const auto& b : batches)
    for (int32_t t : loss_targets(b)) targets += t != kIgnoreLabel;
  DecoderModel model(c, max_batch_tokens(batches));
  EpochTotals totals;
  totals.grads.assign(params.size(), 0.0f);
  const auto n = static_cast<int64_t>(params.size());
  for (const auto& b : batches) {
    auto r = model.forward_backward(b, Tensor::of(params.data(), {n}), Tensor::of(totals.grads.data(), {n}),
                                    1.0 / static_cast<double>(targets));
    totals.loss_sum += r.loss_sum;
    totals.targets += r.tokens;
  }
  return totals;
}

double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(b[i])));
  }
  return diff / scale;
}

TEST(DecoderModel, GradientAccumulationEqualsOneLargeBatch) {
  ModelConfig c = small_config(false);
  auto split = random_split({3, 8, 1, 12, 5, 7, 9, 2}, c.vocab_size, 9);
  auto params = init_params(c, 4, 0.2);
  auto big = run_epoch(c, split, Strategy::kFlatten, 64, params, 8);    // one batch of 8
  auto micro = run_epoch(c, split, Strategy::kFlatten, 64, params, 2);  // four micro-batches of 2
  EXPECT_EQ(micro.targets, big.targets);
  EXPECT_NEAR(micro.loss_sum, big.loss_sum, 1e-5 * big.loss_sum);
  EXPECT_LE(max_relative_difference(micro.grads, big.grads), 1e-5);
}

// The LM head and the loss run over chunks of DecoderModel::logit_chunk_tokens tokens: a batch of several
// chunks, with chunk edges inside examples, gives what micro-batches below one chunk give.
TEST(DecoderModel, LogitChunksDoNotChangeLossOrGradients) {
  ModelConfig c = small_config(true);
  const int64_t chunk = DecoderModel::logit_chunk_tokens(c.vocab_size);
  std::vector<int64_t> lengths;
  for (int i = 0; int64_t{i} * 150 < 2 * chunk + 300; ++i) lengths.push_back(150 + 37 * i % 200);
  auto split = random_split(lengths, c.vocab_size, 12);
  auto params = init_params(c, 5, 0.2);
  const auto examples = static_cast<int32_t>(lengths.size());
  auto chunked = run_epoch(c, split, Strategy::kFlatten, 512, params, examples);  // one batch of 2-3 chunks
  ASSERT_GT(split.num_tokens(), 2 * chunk);
  auto micro = run_epoch(c, split, Strategy::kFlatten, 512, params, 4);  // below one chunk each
  EXPECT_EQ(chunked.targets, micro.targets);
  EXPECT_NEAR(chunked.loss_sum, micro.loss_sum, 1e-5 * micro.loss_sum);
  EXPECT_LE(max_relative_difference(chunked.grads, micro.grads), 1e-5);
}

TEST(DecoderModel, RecomputeModesParseByName) {
  EXPECT_EQ(parse_recompute("none"), Recompute::none);
  EXPECT_EQ(parse_recompute("norms"), Recompute::norms_and_swiglu);
  EXPECT_EQ(parse_recompute("layers"), Recompute::layers);
  EXPECT_THROW(parse_recompute("all"), Error);
}

// The model checks the segment table on the host, since the cuda attention no longer reads its own check
// back: a table that does not cover the batch, runs backwards, or gives a row more real tokens than its
// segment is an error naming the problem, never a pass.
TEST(DecoderModel, BrokenSegmentTablesAreRejectedAtUpload) {
  const ModelConfig c = small_config(false);
  auto split = random_split({3, 8, 1, 12}, c.vocab_size, 9);
  auto params = init_params(c, 4, 0.2);
  DecoderModel model(c, 256, Device::cpu, DType::f32);
  const Tensor weights = Tensor::of(params.data(), {model.layout().total()});
  const Batch flat = one_batch(split, Strategy::kFlatten, 64);
  EXPECT_NO_THROW(model.forward(flat, weights));
  auto expect_rejected = [&](Batch b, const char* what) {
    try {
      model.forward(b, weights);
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  Batch short_table = flat;
  short_table.cu_seqlens.back() -= 1;
  expect_rejected(short_table, "must run from 0");
  Batch backwards = flat;
  std::swap(backwards.cu_seqlens[1], backwards.cu_seqlens[2]);
  expect_rejected(backwards, "decreases at segment");
  Batch padded = packed_batches(split, Strategy::kPadding, 16, 4).at(0);
  EXPECT_NO_THROW(model.forward(padded, weights));
  padded.row_real_len[1] = padded.row_len + 1;
  expect_rejected(padded, "real tokens, outside");
}

TEST(DecoderModel, ShiftedTargetsStayInsideRows) {
  Batch b;
  b.rows = 2, b.row_len = 3;
  b.labels = {-100, 5, 6, -100, 8, 9};
  EXPECT_EQ(loss_targets(b), (std::vector<int32_t>{5, 6, -100, 8, 9, -100}));
}

}  // namespace
}  // namespace pt
