// bfd against padding on the model, in float64, over an epoch long enough for bfd to pack two windows
// (the second with the rows carried over from the first) into batches of several rows: many examples a
// row, pad tails between rows, rows shuffled. The epoch's loss and gradients must be padding's (one
// example a row), so bfd's segments, position ids, targets at example starts and row ends, and pad tails
// are exact, and the per-step target count the trainer normalises by is each batch's own.
#include "model/batches.h"
#include "model/decoder.h"
#include "model/init.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace pt {
namespace {

constexpr int32_t kRowLen = 48;

struct Epoch {
  double loss_sum = 0;
  int64_t targets = 0;
  std::vector<double> grads;
};

std::vector<Batch> epoch_batches(const DatasetSplit& split, const PackingOptions& o) {
  std::vector<Batch> batches;
  for (auto packer = make_packer(split, o, 0); auto b = packer->next();) batches.push_back(std::move(*b));
  return batches;
}

// Gradients of the epoch's mean loss over its targets, the batches accumulated.
Epoch run(const ModelConfig& c, const std::vector<Batch>& batches, const std::vector<double>& params) {
  int64_t targets = 0;
  for (const Batch& b : batches) {
    int64_t shifted = 0;
    for (int32_t t : loss_targets(b)) shifted += t != kIgnoreLabel;
    EXPECT_EQ(shifted, b.loss_tokens) << "a batch's targets are its labels' loss tokens";
    targets += shifted;
  }
  DecoderModel model(c, testing::max_batch_tokens(batches), Device::cpu, DType::f64);
  std::vector<double> weights = params;
  Epoch e;
  e.grads.assign(params.size(), 0.0);
  const auto n = static_cast<int64_t>(params.size());
  for (const Batch& b : batches) {
    auto r = model.forward_backward(b, Tensor::of(weights.data(), {n}), Tensor::of(e.grads.data(), {n}),
                                    1.0 / static_cast<double>(targets));
    e.loss_sum += r.loss_sum;
    e.targets += r.tokens;
  }
  return e;
}

TEST(BfdExactness, AnEpochOfMultiRowBfdBatchesEqualsPadding) {
  ModelConfig c;
  c.vocab_size = 50, c.hidden_size = 16, c.intermediate_size = 24, c.num_hidden_layers = 2;
  c.num_attention_heads = 2, c.num_key_value_heads = 1, c.head_dim = 8, c.tie_word_embeddings = true;
  c.rope.theta = 100.0;
  std::mt19937_64 rng(17);
  std::vector<int64_t> lengths(2600);
  for (auto& length : lengths) length = 1 + static_cast<int64_t>(rng() % kRowLen);
  const DatasetSplit split = testing::random_split(lengths, c.vocab_size, 17);

  PackingOptions o;
  o.strategy = Strategy::kBfd, o.tokens_per_batch = 3 * kRowLen, o.row_len = kRowLen, o.seed = 4;
  const std::vector<Batch> bfd = epoch_batches(split, o);
  // What the epoch exercises: more than one window of 256 batches, and inside rows, pad tails that
  // another row follows and rows of several examples.
  int64_t padded_inner_rows = 0, shared_rows = 0;
  for (const Batch& b : bfd) {
    for (int32_t r = 0; r + 1 < b.rows; ++r) padded_inner_rows += b.row_real_len[size_t(r)] < kRowLen;
    shared_rows += b.examples > b.rows;
  }
  ASSERT_GT(bfd.size(), 256u);
  EXPECT_GT(padded_inner_rows, 0);
  EXPECT_GT(shared_rows, 0);

  PackingOptions p;
  p.strategy = Strategy::kPadding, p.examples_per_batch = 16, p.seed = 4;
  const std::vector<Batch> padding = epoch_batches(split, p);

  const auto init = init_params(c, 5, 0.3);
  const std::vector<double> params(init.begin(), init.end());
  const Epoch a = run(c, bfd, params), b = run(c, padding, params);
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_NEAR(a.loss_sum, b.loss_sum, 1e-10 * b.loss_sum);
  double diff = 0, scale = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    diff = std::max(diff, std::abs(a.grads[i] - b.grads[i]));
    scale = std::max(scale, std::abs(b.grads[i]));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(diff, 1e-10 * scale);
}

}  // namespace
}  // namespace pt
