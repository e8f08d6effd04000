// The model against finite differences (float64), and the packing contract end to end: every strategy
// but concat gives the loss and gradients of padding; gradient accumulation equals one large batch.
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

TEST(DecoderModel, GradientsMatchFiniteDifferencesInFloat64) {
  for (bool tied : {false, true}) {
    const ModelConfig c = small_config(tied);
    auto split = random_split({1, 5, 3, 7}, c.vocab_size, 3);
    Batch batch = one_batch(split, Strategy::kFlatten, 64);
    DecoderModel model(c, batch.num_tokens(), Device::cpu, DType::f64);
    auto init = init_params(c, 11, 0.5);  // large weights: gradients far from zero
    std::vector<double> params(init.begin(), init.end()), grads(params.size(), 0.0);
    const auto n = static_cast<int64_t>(params.size());
    Tensor p = Tensor::of(params.data(), {n}), g = Tensor::of(grads.data(), {n});
    const auto loss = model.forward_backward(batch, p, g, 1.0);
    ASSERT_GT(loss.tokens, 0);
    // Up to 8 elements of every parameter tensor (all of the small ones), so each path is covered.
    double worst = 0;
    for (const auto& info : model.layout().params()) {
      for (int64_t k = 0; k < std::min<int64_t>(info.numel, 8); ++k) {
        const auto i = static_cast<size_t>(info.offset + k * info.numel / std::min<int64_t>(info.numel, 8));
        const double saved = params[i], h = 1e-6;
        params[i] = saved + h;
        const double up = model.forward(batch, p).loss_sum;
        params[i] = saved - h;
        const double down = model.forward(batch, p).loss_sum;
        params[i] = saved;
        const double numeric = (up - down) / (2 * h);
        const double err =
            std::abs(numeric - grads[i]) / (1e-7 + 1e-5 * std::max(std::abs(numeric), std::abs(grads[i])));
        worst = std::max(worst, err);
        ASSERT_LE(err, 1.0) << "tied=" << tied << " " << info.name << "[" << k << "]: analytic " << grads[i]
                            << ", numeric " << numeric;
      }
    }
    EXPECT_GT(worst, 0.0);
  }
}

// The backward progress hook (data-parallel overlap): offsets never increase, end at 0, and every
// gradient at or after a reported offset already holds its final value for the pass (accumulated onto an
// earlier micro-batch's, tied LM head included), while the tensor just before it is still to change.
TEST(DecoderModel, BackwardProgressReportsOnlyFinalGradients) {
  for (bool tied : {false, true}) {
    const ModelConfig c = small_config(tied);
    auto split = random_split({4, 9, 3, 7, 6, 2}, c.vocab_size, 5);
    const auto batches = packed_batches(split, Strategy::kFlatten, 64, 3);
    ASSERT_EQ(batches.size(), 2u);
    DecoderModel model(c, max_batch_tokens(batches), Device::cpu, DType::f64);
    auto init = init_params(c, 7, 0.5);
    std::vector<double> params(init.begin(), init.end()), grads(params.size(), 0.0);
    const auto n = static_cast<int64_t>(params.size());
    Tensor p = Tensor::of(params.data(), {n}), g = Tensor::of(grads.data(), {n});
    model.forward_backward(batches[0], p, g, 0.5);
    std::vector<std::pair<int64_t, std::vector<double>>> reports;
    model.set_backward_progress([&](int64_t offset) { reports.emplace_back(offset, grads); });
    model.forward_backward(batches[1], g, 0.5);
    model.set_backward_progress({});
    model.forward(batches[1]);
    ASSERT_EQ(reports.size(), static_cast<size_t>(c.num_hidden_layers) + 2) << "tied=" << tied;
    EXPECT_EQ(reports.back().first, 0);
    const auto& layout = model.layout();
    for (size_t r = 0; r < reports.size(); ++r) {
      const auto& [offset, snapshot] = reports[r];
      ASSERT_TRUE(offset >= 0 && offset < n) << offset;
      if (r > 0) {
        EXPECT_LE(offset, reports[r - 1].first) << "report " << r;
      }
      for (int64_t i = offset; i < n; ++i)
        ASSERT_EQ(snapshot[size_t(i)], grads[size_t(i)]) << "tied=" << tied << " report " << r << " offset "
                                                         << offset << ": gradient " << i << " changed later";
      if (offset == 0) continue;
      // Not more conservative than needed: the tensor ending at the offset is not final yet.
      const auto before =
          std::find_if(layout.params().begin(), layout.params().end(),
                       [&](const ParamInfo& info) { return info.offset + info.numel == offset; });
      ASSERT_NE(before, layout.params().end());
      bool changes = false;
      for (int64_t i = before->offset; i < offset; ++i) changes |= snapshot[size_t(i)] != grads[size_t(i)];
      EXPECT_TRUE(changes) << "tied=" << tied << ": " << before->name << " was final before report " << r;
    }
  }
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
    for (int32_t t : shifted_targets(b)) targets += t != kIgnoreLabel;
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

TEST(DecoderModel, PackedStrategiesEqualPaddingAndConcatDoesNot) {
  ModelConfig c = small_config(true);
  c.hidden_size = 16, c.head_dim = 8, c.vocab_size = 50;
  auto split = random_split({1, 9, 4, 17, 2, 30, 6, 11}, c.vocab_size, 5);
  auto params = init_params(c, 2, 0.2);
  const int32_t row = 128;  // holds every example: concat-posid splits none, so it keeps every target
  auto padding = run_epoch(c, split, Strategy::kPadding, row, params, 8);
  for (Strategy s : {Strategy::kFlatten, Strategy::kBfd, Strategy::kConcatPosId}) {
    auto other = run_epoch(c, split, s, row, params, 8);
    EXPECT_EQ(other.targets, padding.targets) << strategy_name(s);
    EXPECT_NEAR(other.loss_sum, padding.loss_sum, 1e-5 * padding.loss_sum) << strategy_name(s);
    EXPECT_LE(max_relative_difference(other.grads, padding.grads), 1e-5) << strategy_name(s);
  }
  // concat lets attention cross examples and runs positions on: the same targets, another loss.
  auto concat = run_epoch(c, split, Strategy::kConcat, row, params, 8);
  EXPECT_EQ(concat.targets, padding.targets);
  EXPECT_GT(std::abs(concat.loss_sum - padding.loss_sum), 1e-3 * padding.loss_sum);
  EXPECT_GT(max_relative_difference(concat.grads, padding.grads), 1e-2);
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

// The LM head and the loss run over chunks of DecoderModel::kLogitChunk tokens: a batch of several chunks,
// with chunk edges inside examples, gives what micro-batches below one chunk give.
TEST(DecoderModel, LogitChunksDoNotChangeLossOrGradients) {
  ModelConfig c = small_config(true);
  std::vector<int64_t> lengths;
  for (int i = 0; i < 24; ++i) lengths.push_back(150 + 37 * i % 200);
  auto split = random_split(lengths, c.vocab_size, 12);
  auto params = init_params(c, 5, 0.2);
  auto chunked = run_epoch(c, split, Strategy::kFlatten, 512, params, 24);  // one batch of 2-3 chunks
  ASSERT_GT(split.num_tokens(), 2 * DecoderModel::kLogitChunk);
  auto micro = run_epoch(c, split, Strategy::kFlatten, 512, params, 4);  // below one chunk each
  EXPECT_EQ(chunked.targets, micro.targets);
  EXPECT_NEAR(chunked.loss_sum, micro.loss_sum, 1e-5 * micro.loss_sum);
  EXPECT_LE(max_relative_difference(chunked.grads, micro.grads), 1e-5);
}

// Recomputing the norms and SwiGLU, or whole layers, in the backward repeats the forward's arithmetic: the
// same loss and gradients to the bit.
TEST(DecoderModel, RecomputedActivationsGiveTheSameGradients) {
  for (bool tied : {false, true}) {
    const ModelConfig c = small_config(tied);
    const auto batches =
        packed_batches(random_split({4, 9, 3, 7, 6, 2}, c.vocab_size, 5), Strategy::kFlatten, 64, 3);
    auto init = init_params(c, 7, 0.5);
    const auto n = static_cast<int64_t>(init.size());
    auto run = [&](Recompute recompute) {
      DecoderModel model(c, max_batch_tokens(batches), Device::cpu, DType::f32, {}, recompute);
      std::vector<float> grads(init.size(), 0.0f);
      double loss = 0;
      for (const Batch& b : batches)
        loss += model.forward_backward(b, Tensor::of(init.data(), {n}), Tensor::of(grads.data(), {n}), 0.5)
                    .loss_sum;
      return std::pair{loss, grads};
    };
    const auto kept = run(Recompute::none);
    for (Recompute mode : {Recompute::norms_and_swiglu, Recompute::layers}) {
      const auto recomputed = run(mode);
      EXPECT_EQ(recomputed.first, kept.first) << "tied=" << tied << " mode " << static_cast<int>(mode);
      EXPECT_EQ(recomputed.second, kept.second) << "tied=" << tied << " mode " << static_cast<int>(mode);
    }
  }
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
  EXPECT_EQ(shifted_targets(b), (std::vector<int32_t>{5, 6, -100, 8, 9, -100}));
}

}  // namespace
}  // namespace pt
