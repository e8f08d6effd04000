// BatchInputs: what a pass reads is the batch as packed (targets shifted, or where the head runs on the
// labelled tokens alone those tokens and their targets), bad batches are named errors at staging, and a
// ticket whose slot was staged again is refused rather than read.
#include "model/batch_inputs.h"
#include "core/error.h"
#include "model/batches.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <tuple>
#include <vector>

namespace pt {
namespace {

using testing::packed_batches;
using testing::random_split;

constexpr int32_t kVocab = 50;

std::vector<int32_t> ints(const Tensor& t) {
  const auto* p = static_cast<const int32_t*>(t.data);
  return std::vector<int32_t>(p, p + t.numel());
}

TEST(BatchInputs, PassesReadTheStagedBatch) {
  const auto split = random_split({5, 1, 12, 7, 3, 9}, kVocab, 3);
  for (Strategy strategy : {Strategy::kFlatten, Strategy::kPadding}) {
    const auto batches = packed_batches(split, strategy, 16, 3);
    ASSERT_GE(batches.size(), 2u);
    BatchInputs inputs(Device::cpu, 64, kVocab);
    // Both staged before either is read: the ahead slots alternate.
    const auto first = inputs.stage(batches[0], HeadRows::every),
               second = inputs.stage(batches[1], HeadRows::every);
    for (const auto& [ticket, b] : {std::pair{first, &batches[0]}, std::pair{second, &batches[1]}}) {
      const BatchInputs::View v = inputs.acquire(ticket);
      EXPECT_EQ(v.tokens, b->num_tokens());
      EXPECT_EQ(ints(v.ids), b->input_ids);
      EXPECT_EQ(ints(v.positions), b->position_ids);
      EXPECT_EQ(ints(v.targets), loss_targets(*b));
      EXPECT_EQ(v.head_rows, v.tokens);  // a logit row per token
      EXPECT_FALSE(v.gathered);
      EXPECT_TRUE(v.label_rows.empty());
      EXPECT_EQ(ints(v.cu_seqlens), b->cu_seqlens);
      EXPECT_EQ(v.segments + 1, static_cast<int64_t>(b->cu_seqlens.size()));
      // Rows that are one segment each (padding) carry their real lengths; flatten's segments do not.
      if (strategy == Strategy::kPadding)
        EXPECT_EQ(ints(v.valid_lens), b->row_real_len);
      else
        EXPECT_TRUE(v.valid_lens.empty());
      inputs.release(ticket);
    }
  }
}

TEST(BatchInputs, RefusesATicketWhoseSlotWasStagedAgain) {
  const auto batches = packed_batches(random_split({4, 6, 5, 8}, kVocab, 1), Strategy::kFlatten, 16, 1);
  BatchInputs inputs(Device::cpu, 64, kVocab);
  const auto old = inputs.stage(batches[0]);
  inputs.stage(batches[1]);
  const auto now = inputs.stage_now(batches[3]);  // a slot of its own: the ahead slots are untouched
  EXPECT_NO_THROW(inputs.acquire(old));
  EXPECT_NO_THROW(inputs.acquire(now));
  inputs.stage(batches[2]);  // reuses the first ahead slot
  EXPECT_THROW(inputs.acquire(old), Error);
}

TEST(BatchInputs, NamesBadBatches) {
  const auto good = packed_batches(random_split({6, 5}, kVocab, 2), Strategy::kFlatten, 16, 2)[0];
  BatchInputs inputs(Device::cpu, 64, kVocab);
  auto expect_error = [&](const Batch& b, const char* words) {
    try {
      inputs.stage(b);
      ADD_FAILURE() << "no error; wanted one saying: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  Batch b = good;
  b.input_ids[3] = kVocab;
  expect_error(b, "outside the model's vocabulary");
  b = good;
  b.labels[4] = -7;
  expect_error(b, "neither in the vocabulary");
  b = good;
  b.cu_seqlens.back() -= 1;
  expect_error(b, "cu_seqlens must run from 0");
  b = good;
  b.position_ids.pop_back();
  expect_error(b, "position ids");
  BatchInputs small(Device::cpu, good.num_tokens() - 1, kVocab);
  EXPECT_THROW(small.stage(good), Error);
  // The ignore label is a valid target.
  b = good;
  b.labels[4] = kIgnoreLabel;
  EXPECT_NO_THROW(inputs.stage(b));
}

// Masked-LM batches reach the model's targets unshifted: the label at t is the target of the logits at t,
// which the MLM head computes at the labelled tokens alone, listed in order with their labels.
TEST(BatchInputs, MaskedLmTargetsAreTheLabelsOfTheLabelledTokens) {
  const auto split = random_split({5, 1, 12, 7}, kVocab, 4);
  const auto batches = packed_batches(split, Strategy::kFlatten, 32, 4, Objective::kMaskedLm, kVocab);
  const Batch& b = batches.at(0);
  ASSERT_EQ(b.objective, Objective::kMaskedLm);
  ASSERT_GT(b.loss_tokens, 0);
  ASSERT_LT(b.loss_tokens, b.num_tokens());
  EXPECT_EQ(loss_targets(b), b.labels);
  std::vector<int32_t> rows, labels;
  for (size_t t = 0; t < b.labels.size(); ++t)
    if (b.labels[t] != kIgnoreLabel) rows.push_back(static_cast<int32_t>(t)), labels.push_back(b.labels[t]);
  BatchInputs inputs(Device::cpu, 64, kVocab, 0, Objective::kMaskedLm);
  const BatchInputs::View v = inputs.acquire(inputs.stage_now(b));
  EXPECT_EQ(v.head_rows, b.loss_tokens);
  EXPECT_EQ(ints(v.label_rows), rows);
  EXPECT_EQ(ints(v.targets), labels);
  EXPECT_EQ(ints(v.ids), b.input_ids);
  // A batch without a labelled token has no rows; staged into the same slot, nothing of the last is left.
  Batch none = b;
  none.labels.assign(none.labels.size(), kIgnoreLabel);
  const BatchInputs::View empty = inputs.acquire(inputs.stage_now(none));
  EXPECT_EQ(empty.head_rows, 0);
  EXPECT_EQ(empty.label_rows.numel(), 0);
  EXPECT_EQ(empty.targets.numel(), 0);
}

// A causal batch's head runs on its targeted tokens gathered once at least 1/16 of the tokens have no
// target (a masked prompt), and on every token below that (a concat row's last token) or when asked.
TEST(BatchInputs, CausalHeadGathersTheTargetedTokensWhereManyHaveNone) {
  Batch b = packed_batches(random_split({32}, kVocab, 6), Strategy::kFlatten, 32, 1).at(0);
  b.labels.assign(b.labels.size(), 7);
  BatchInputs inputs(Device::cpu, 64, kVocab);
  const BatchInputs::View all = inputs.acquire(inputs.stage_now(b));  // the last token alone has no target
  EXPECT_FALSE(all.gathered);
  EXPECT_EQ(all.head_rows, 32);
  EXPECT_EQ(ints(all.targets), loss_targets(b));
  b.labels[1] = b.labels[2] = kIgnoreLabel;  // tokens 0 and 1 predict them: with the last, 3 of 32 untargeted
  const BatchInputs::View prompt = inputs.acquire(inputs.stage_now(b));
  EXPECT_TRUE(prompt.gathered);
  EXPECT_EQ(prompt.head_rows, 29);
  std::vector<int32_t> rows(29);
  std::iota(rows.begin(), rows.end(), 2);
  EXPECT_EQ(ints(prompt.label_rows), rows);
  EXPECT_EQ(ints(prompt.targets), std::vector<int32_t>(29, 7));
  const BatchInputs::View every = inputs.acquire(inputs.stage_now(b, HeadRows::every));
  EXPECT_FALSE(every.gathered);
  EXPECT_EQ(every.head_rows, 32);
  EXPECT_TRUE(every.label_rows.empty());
}

// A causal LM trained on masked-LM batches, or an encoder on causal ones, is a user error named as such.
TEST(BatchInputs, RefusesBatchesOfTheOtherObjective) {
  const auto split = random_split({5, 9}, kVocab, 5);
  const Batch causal = packed_batches(split, Strategy::kFlatten, 32, 2).at(0);
  const Batch masked = packed_batches(split, Strategy::kFlatten, 32, 2, Objective::kMaskedLm, kVocab).at(0);
  BatchInputs decoder(Device::cpu, 64, kVocab), encoder(Device::cpu, 64, kVocab, 0, Objective::kMaskedLm);
  for (auto [inputs, batch, words] :
       {std::tuple{&decoder, &masked, "a masked-LM batch for a model that trains on causal-LM batches"},
        std::tuple{&encoder, &causal, "a causal-LM batch for a model that trains on masked-LM batches"}}) {
    try {
      inputs->stage(*batch);
      ADD_FAILURE() << "no error; wanted: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--objective"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(decoder.stage(causal));
  EXPECT_NO_THROW(encoder.stage(masked));
}

}  // namespace
}  // namespace pt
