// Masked-LM batches (data/packing/masked_lm.h): every strategy, rank count and resumed stream gives each
// example exactly the mask of its (seed, epoch, index); labels are unshifted targets; position ids and
// cu_seqlens stay as packing made them; the causal objective is untouched.
#include "data/packing/masked_lm.h"

#include "core/error.h"
#include "data/batch_stream.h"
#include "distributed/step_data.h"
#include "mlm_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

namespace pt {
namespace {

constexpr uint64_t kSeed = 21;

PackingOptions mlm_options(Strategy strategy, bool whole_word = false) {
  PackingOptions o;
  o.strategy = strategy, o.examples_per_batch = 6, o.row_len = 128, o.seed = kSeed;
  o.objective = Objective::kMaskedLm;
  o.mlm.whole_word = whole_word;
  o.mlm_vocab = std::shared_ptr<const MlmVocab>(&test::bert_vocab(), [](const MlmVocab*) {});
  return o;
}

struct Masked {
  std::vector<int32_t> inputs, labels;
  auto operator<=>(const Masked&) const = default;
};

// Each example's tokens as the batches hold them, reassembled from the pieces (concat cuts examples). A
// data-parallel step that straddles an epoch's end may hold an example twice, once for each epoch.
using ByExample = std::map<int64_t, std::vector<Masked>>;

void collect(const Batch& batch, ByExample& out) {
  EXPECT_EQ(batch.objective, Objective::kMaskedLm);
  int64_t loss = 0;
  for (int32_t label : batch.labels) loss += label != kIgnoreLabel;
  EXPECT_EQ(batch.loss_tokens, loss);
  int64_t real = 0;
  for (const ExamplePiece& p : batch.pieces) {
    std::vector<Masked>& drawn = out[p.example];
    if (p.begin == 0 || drawn.empty()) drawn.emplace_back();
    Masked& m = drawn.back();
    EXPECT_EQ(std::ssize(m.inputs), p.begin) << "pieces of example " << p.example << " out of order";
    m.inputs.insert(m.inputs.end(), batch.input_ids.begin() + p.at,
                    batch.input_ids.begin() + p.at + p.length);
    m.labels.insert(m.labels.end(), batch.labels.begin() + p.at, batch.labels.begin() + p.at + p.length);
    real += p.length;
  }
  EXPECT_EQ(real, batch.real_tokens);
}

Masked expected(const DatasetSplit& split, const MlmSettings& settings, int64_t epoch, int64_t example) {
  const Example e = split.example(example);
  Masked m{std::vector<int32_t>(e.tokens.size()), std::vector<int32_t>(e.tokens.size())};
  mask_example(e.tokens, test::bert_vocab(), settings, {kSeed, epoch, example}, m.inputs, m.labels);
  return m;
}

void expect_masks_of_epoch(const DatasetSplit& split, const ByExample& got, const MlmSettings& settings,
                           int64_t epoch) {
  for (const auto& [example, drawn] : got) {
    ASSERT_EQ(drawn.size(), 1u) << "example " << example;
    EXPECT_EQ(drawn[0], expected(split, settings, epoch, example)) << "example " << example;
  }
}

ByExample one_epoch(const DatasetSplit& split, const PackingOptions& o, int64_t epoch) {
  ByExample got;
  for (auto packer = make_packer(split, o, epoch); auto batch = packer->next();) collect(*batch, got);
  return got;
}

TEST(MlmBatches, EveryStrategyGivesEachExampleTheMaskOfItsKey) {
  const DatasetSplit split = test::bert_split(300, 1);
  for (bool whole_word : {false, true}) {
    ByExample first;
    for (Strategy s : kAllStrategies) {
      SCOPED_TRACE(std::string(strategy_name(s)));
      const PackingOptions o = mlm_options(s, whole_word);
      const ByExample got = one_epoch(split, o, 0);
      EXPECT_EQ(std::ssize(got), split.size() - 1);  // all but the empty example
      expect_masks_of_epoch(split, got, o.mlm, 0);
      if (first.empty()) first = got;
      EXPECT_EQ(got, first);  // padding == flatten == every other strategy
    }
  }
}

TEST(MlmBatches, LabelsAreUnshiftedAndPositionsRestartPerExample) {
  const DatasetSplit split = test::bert_split(100, 2);
  PackingOptions o = mlm_options(Strategy::kFlatten);
  o.mlm.mask_prob = 1;  // every maskable token a target: the first token of an example too
  for (auto packer = make_packer(split, o, 0); auto batch = packer->next();) {
    for (const ExamplePiece& p : batch->pieces) {
      const Example e = split.example(p.example);
      for (int32_t i = 0; i < p.length; ++i) {
        const auto t = static_cast<size_t>(p.at + i);
        EXPECT_EQ(batch->position_ids[t], p.begin + i);
        const uint32_t token = e.tokens[static_cast<size_t>(p.begin + i)];
        const bool special = test::bert_vocab().role(token) == TokenRole::kSpecial;
        EXPECT_EQ(batch->labels[t], special ? kIgnoreLabel : static_cast<int32_t>(token));
      }
    }
    ASSERT_EQ(batch->cu_seqlens.size(), batch->pieces.size() + 1);
    for (size_t k = 0; k < batch->pieces.size(); ++k) EXPECT_EQ(batch->cu_seqlens[k], batch->pieces[k].at);
  }
}

TEST(MlmBatches, EpochsDrawNewMasksAndResumedStreamsTheSame) {
  const DatasetSplit split = test::bert_split(60, 3);
  const PackingOptions o = mlm_options(Strategy::kBfd);
  const ByExample e0 = one_epoch(split, o, 0), e1 = one_epoch(split, o, 1);
  expect_masks_of_epoch(split, e1, o.mlm, 1);
  int64_t differ = 0;
  for (const auto& [example, drawn] : e0) differ += drawn != e1.at(example);
  EXPECT_GT(differ, split.size() / 2);

  BatchStream stream(split, o);
  std::vector<Batch> run;
  std::vector<std::pair<int64_t, int64_t>> positions;  // (epoch, batches in it) before each batch
  for (int i = 0; i < 40; ++i) {                       // several epochs
    positions.emplace_back(stream.epoch(), stream.batches_in_epoch());
    run.push_back(stream.next());
  }
  for (size_t at : {size_t{0}, size_t{7}, size_t{23}}) {
    BatchStream resumed(split, o, positions[at].first, positions[at].second);
    for (size_t i = at; i < run.size(); ++i) {
      const Batch b = resumed.next();
      EXPECT_EQ(b.input_ids, run[i].input_ids) << i;
      EXPECT_EQ(b.labels, run[i].labels) << i;
    }
  }
}

TEST(MlmBatches, RanksMaskAsOneProcessWhateverTheWorldSize) {
  const DatasetSplit split = test::bert_split(90, 4);
  for (Strategy s : {Strategy::kFlatten, Strategy::kPadding, Strategy::kBfd}) {
    SCOPED_TRACE(std::string(strategy_name(s)));
    const PackingOptions o = mlm_options(s);
    for (int world : {1, 2, 3}) {
      std::vector<dist::RankStepStream> ranks;
      for (int r = 0; r < world; ++r) ranks.emplace_back(split, o, 6 / world, r, world);
      int64_t straddling = 0;  // steps of examples of two epochs: 93 examples an epoch, 36 a step
      for (int step = 0; step < 8; ++step)
        for (auto& rank : ranks) {
          const dist::RankStep rs = rank.next();
          ByExample got, want;
          for (const Batch& b : rs.micro) collect(b, got);
          for (size_t i = 0; i < rs.examples.size(); ++i)
            want[rs.examples[i]].push_back(expected(split, o.mlm, rs.epochs[i], rs.examples[i]));
          for (auto* by : {&got, &want})
            for (auto& [example, drawn] : *by) std::sort(drawn.begin(), drawn.end());
          EXPECT_EQ(got, want) << "step " << step;
          straddling += !rs.epochs.empty() && rs.epochs.front() != rs.epochs.back();
        }
      EXPECT_GE(straddling, 2);
    }
  }
}

TEST(MlmBatches, TheCausalObjectiveIsUntouched) {
  const DatasetSplit split = test::bert_split(40, 5);
  PackingOptions causal = mlm_options(Strategy::kFlatten);
  causal.objective = Objective::kCausalLm;
  for (auto packer = make_packer(split, causal, 0); auto batch = packer->next();) {
    EXPECT_EQ(batch->objective, Objective::kCausalLm);
    for (const ExamplePiece& p : batch->pieces) {
      const Example e = split.example(p.example);
      for (int32_t i = 0; i < p.length; ++i) {
        const auto token = static_cast<int32_t>(e.tokens[static_cast<size_t>(p.begin + i)]);
        EXPECT_EQ(batch->input_ids[static_cast<size_t>(p.at + i)], token);
        EXPECT_EQ(batch->labels[static_cast<size_t>(p.at + i)], p.begin + i == 0 ? kIgnoreLabel : token);
      }
    }
  }
}

TEST(MlmBatches, OptionsAreChecked) {
  const DatasetSplit split = test::bert_split(10, 6);
  PackingOptions no_vocab = mlm_options(Strategy::kFlatten);
  no_vocab.mlm_vocab.reset();
  EXPECT_THROW(make_packer(split, no_vocab, 0), Error);
  PackingOptions bad = mlm_options(Strategy::kFlatten);
  bad.mlm.mask_prob = 2;
  EXPECT_THROW(make_packer(split, bad, 0), Error);
  const PackingOptions o = mlm_options(Strategy::kFlatten);
  const std::vector<int64_t> examples = {1, 2};
  EXPECT_THROW(dist::pack_examples(split, examples, dist::share_packing_options(split, o)),
               Error);  // no epochs
}

}  // namespace
}  // namespace pt
