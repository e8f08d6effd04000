// Dynamic masking of one example (data/mlm/masking.h) and the vocabulary roles it reads
// (data/mlm/vocab.h): the chosen fraction and the 80/10/10 split within binomial bounds, exact targets,
// specials never chosen, whole words kept whole, determinism per (seed, epoch, example), edge cases.
#include "data/mlm/masking.h"

#include "core/error.h"
#include "data/packing/batch.h"
#include "mlm_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace pt {
namespace {

using test::bert_example;
using test::bert_tokenizer;
using test::bert_vocab;
using test::kCls;
using test::kMask;
using test::kSep;

struct Masked {
  std::vector<int32_t> inputs, targets;
};

Masked mask(const std::vector<uint32_t>& tokens, const MlmSettings& settings, MaskKey key,
            const MlmVocab& vocab = bert_vocab()) {
  Masked m{std::vector<int32_t>(tokens.size()), std::vector<int32_t>(tokens.size())};
  mask_example(tokens, vocab, settings, key, m.inputs, m.targets);
  return m;
}

// A count of Binomial(n, p) is within 6 standard deviations of its mean except with probability about
// 2e-9 (normal approximation, good at these n): a correct implementation practically never fails, and a
// share off by a percentage point or two fails every time at these sample sizes.
void expect_binomial(int64_t count, int64_t n, double p, const std::string& what) {
  const double mean = static_cast<double>(n) * p, sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  EXPECT_LE(std::abs(static_cast<double>(count) - mean), 6 * sd)
      << what << ": " << count << " of " << n << ", expected " << mean << " +- " << 6 * sd;
}

// Every token: specials untouched; a chosen token's target is its own id; an unchosen one keeps its id.
void expect_consistent(const std::vector<uint32_t>& tokens, const Masked& m) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto token = static_cast<int32_t>(tokens[i]);
    if (bert_vocab().role(tokens[i]) == TokenRole::kSpecial) {
      EXPECT_EQ(m.inputs[i], token) << i;
      EXPECT_EQ(m.targets[i], kIgnoreLabel) << i;
    } else if (m.targets[i] == kIgnoreLabel) {
      EXPECT_EQ(m.inputs[i], token) << i;
    } else {
      EXPECT_EQ(m.targets[i], token) << i;
    }
  }
}

TEST(MlmVocab, RolesComeFromTheWordPieceTokenizer) {
  const MlmVocab& vocab = bert_vocab();
  EXPECT_EQ(vocab.mask_id(), static_cast<int32_t>(kMask));
  for (uint32_t special = 0; special <= kMask; ++special) EXPECT_EQ(vocab.role(special), TokenRole::kSpecial);
  EXPECT_EQ(vocab.role(static_cast<uint32_t>(*bert_tokenizer().token_to_id("a"))), TokenRole::kWordStart);
  EXPECT_EQ(vocab.role(static_cast<uint32_t>(*bert_tokenizer().token_to_id("##s"))),
            TokenRole::kContinuation);
  EXPECT_TRUE(vocab.marks_words());
  EXPECT_EQ(vocab.random_ids().size(), static_cast<size_t>(bert_tokenizer().vocab_size()) - 5);
  EXPECT_EQ(vocab.random_ids().front(), 5);
  EXPECT_THROW(vocab.role(static_cast<uint32_t>(bert_tokenizer().vocab_size())), Error);
}

TEST(MlmVocab, ByteLevelBpeHasNoMaskTokenAndNoWords) {
  const Tokenizer gpt2 =
      Tokenizer::from_file(std::string(PACKTRAIN_FIXTURES) + "/tokenizer/gpt2.tokenizer.json");
  EXPECT_THROW(MlmVocab::from_tokenizer(gpt2), Error);
  EXPECT_THROW(MlmVocab::from_tokenizer(gpt2, "[no such token]"), Error);
  const MlmVocab vocab = MlmVocab::from_tokenizer(gpt2, "<|endoftext|>");
  EXPECT_EQ(vocab.role(static_cast<uint32_t>(vocab.mask_id())), TokenRole::kSpecial);
  EXPECT_FALSE(vocab.marks_words());
  MlmSettings whole;
  whole.whole_word = true;
  EXPECT_THROW(whole.validate(vocab), Error);  // refused, rather than silently masking single tokens
  EXPECT_NO_THROW(MlmSettings{}.validate(vocab));
}

TEST(MlmMasking, SettingsOutOfRangeAreRefused) {
  const MlmVocab& vocab = bert_vocab();
  EXPECT_NO_THROW(MlmSettings{}.validate(vocab));
  for (auto bad :
       {MlmSettings{-0.1}, MlmSettings{1.5}, MlmSettings{0.15, 0.9, 0.2}, MlmSettings{0.15, -1, 0}})
    EXPECT_THROW(bad.validate(vocab), Error);
  EXPECT_THROW(MlmVocab({TokenRole::kSpecial, TokenRole::kSpecial}, 0), Error);  // nothing maskable
  EXPECT_THROW(MlmVocab({TokenRole::kWordStart}, 1), Error);                     // mask id out of range
}

TEST(MlmMasking, ChoosesFifteenPercentAndSplitsThemEightyTenTen) {
  const MlmSettings settings;
  const MlmVocab& vocab = bert_vocab();
  const double others = static_cast<double>(vocab.random_ids().size());
  SplitMix64 rng(11);
  int64_t maskable = 0, chosen = 0, masked = 0, replaced = 0;
  double replaced_id_sum = 0;
  for (int64_t example = 0; example < 4000; ++example) {
    const std::vector<uint32_t> tokens = bert_example(rng, 30);
    const Masked m = mask(tokens, settings, {7, 0, example});
    expect_consistent(tokens, m);
    for (size_t i = 0; i < tokens.size(); ++i) {
      maskable += vocab.role(tokens[i]) != TokenRole::kSpecial;
      if (m.targets[i] == kIgnoreLabel) continue;
      ++chosen;
      if (m.inputs[i] == vocab.mask_id()) {
        ++masked;
      } else if (m.inputs[i] != m.targets[i]) {
        ++replaced;
        replaced_id_sum += m.inputs[i];
        EXPECT_NE(vocab.role(static_cast<uint32_t>(m.inputs[i])), TokenRole::kSpecial);
      }
    }
  }
  ASSERT_GT(maskable, 100000);
  expect_binomial(chosen, maskable, 0.15, "chosen");
  expect_binomial(masked, chosen, 0.8, "replaced by [MASK]");
  // A random replacement equal to the original (1 in `others`) looks kept.
  expect_binomial(replaced, chosen, 0.1 * (1 - 1 / others), "replaced by another token");
  // Random ids are uniform over the non-special ids: their mean is that of the ids, within 6 sd.
  const auto& ids = vocab.random_ids();
  const double mean = std::accumulate(ids.begin(), ids.end(), 0.0) / others;
  double var = 0;
  for (int32_t id : ids) var += (id - mean) * (id - mean) / others;
  EXPECT_LE(std::abs(replaced_id_sum / static_cast<double>(replaced) - mean),
            6 * std::sqrt(var / static_cast<double>(replaced)));
}

TEST(MlmMasking, OtherSettingsAreHonoured) {
  MlmSettings settings;
  settings.mask_prob = 0.4, settings.mask_token_prob = 0.5, settings.random_token_prob = 0.5;
  SplitMix64 rng(12);
  int64_t maskable = 0, chosen = 0, masked = 0, kept = 0;
  for (int64_t example = 0; example < 2000; ++example) {
    const std::vector<uint32_t> tokens = bert_example(rng, 30);
    const Masked m = mask(tokens, settings, {8, 0, example});
    for (size_t i = 0; i < tokens.size(); ++i) {
      maskable += bert_vocab().role(tokens[i]) != TokenRole::kSpecial;
      if (m.targets[i] == kIgnoreLabel) continue;
      ++chosen;
      masked += m.inputs[i] == bert_vocab().mask_id();
      kept += m.inputs[i] == m.targets[i];
    }
  }
  expect_binomial(chosen, maskable, 0.4, "chosen");
  expect_binomial(masked, chosen, 0.5, "replaced by [MASK]");
  EXPECT_LT(kept, chosen / 100);  // only random draws of the same id
}

TEST(MlmMasking, WholeWordMaskingChoosesWordsWhole) {
  MlmSettings settings;
  settings.whole_word = true;
  const MlmVocab& vocab = bert_vocab();
  SplitMix64 rng(13);
  int64_t words = 0, chosen_words = 0, multi_token_chosen = 0;
  for (int64_t example = 0; example < 4000; ++example) {
    const std::vector<uint32_t> tokens = bert_example(rng, 30);
    const Masked m = mask(tokens, settings, {9, 2, example});
    expect_consistent(tokens, m);
    for (size_t i = 0; i < tokens.size();) {
      if (vocab.role(tokens[i]) == TokenRole::kSpecial) {
        ++i;
        continue;
      }
      size_t end = i + 1;
      while (end < tokens.size() && vocab.role(tokens[end]) == TokenRole::kContinuation) ++end;
      const bool chosen = m.targets[i] != kIgnoreLabel;
      for (size_t t = i; t < end; ++t) EXPECT_EQ(m.targets[t] != kIgnoreLabel, chosen) << example << " " << t;
      ++words;
      chosen_words += chosen;
      multi_token_chosen += chosen && end - i > 1;
      i = end;
    }
  }
  expect_binomial(chosen_words, words, 0.15, "chosen words");
  EXPECT_GT(multi_token_chosen, 1000);
}

TEST(MlmMasking, WholeWordsOfRealText) {
  MlmSettings settings;
  settings.whole_word = true, settings.mask_prob = 0.5;
  std::vector<uint32_t> tokens = {kCls};
  for (int32_t id :
       bert_tokenizer().encode("Tokenization of unbelievably long words, e.g. antidisestablishment."))
    tokens.push_back(static_cast<uint32_t>(id));
  tokens.push_back(kSep);
  // Word starts from the tokens' spelling, independently of the vocab table.
  std::vector<size_t> word_of(tokens.size());
  for (size_t i = 1, word = 0; i < tokens.size(); ++i)
    word_of[i] =
        bert_tokenizer().id_to_token(static_cast<int32_t>(tokens[i])).starts_with("##") ? word : ++word;
  ASSERT_GT(tokens.size(), word_of.back() + 4);  // several words of several pieces
  for (int64_t example = 0; example < 50; ++example) {
    const Masked m = mask(tokens, settings, {1, 0, example});
    for (size_t i = 2; i + 1 < tokens.size(); ++i) {
      if (word_of[i] != word_of[i - 1]) continue;
      EXPECT_EQ(m.targets[i] != kIgnoreLabel, m.targets[i - 1] != kIgnoreLabel) << example << " " << i;
    }
  }
}

TEST(MlmMasking, AContinuationAfterASpecialTokenIsAWordOfItsOwn) {
  MlmSettings settings;
  settings.whole_word = true, settings.mask_prob = 0.5;
  const auto s = static_cast<uint32_t>(*bert_tokenizer().token_to_id("##s"));
  const std::vector<uint32_t> tokens = {s, kCls, s, kSep, s, s};
  bool apart = false;
  for (int64_t example = 0; example < 64; ++example) {
    const Masked m = mask(tokens, settings, {1, 0, example});
    expect_consistent(tokens, m);
    EXPECT_EQ(m.targets[4] != kIgnoreLabel, m.targets[5] != kIgnoreLabel);  // one word
    apart |= (m.targets[0] != kIgnoreLabel) != (m.targets[2] != kIgnoreLabel);
  }
  EXPECT_TRUE(apart);
}

TEST(MlmMasking, TheSameKeyGivesTheSameMaskAndAnotherKeyAnother) {
  SplitMix64 rng(14);
  const std::vector<uint32_t> tokens = bert_example(rng, 400);
  const MlmSettings settings;
  const Masked base = mask(tokens, settings, {5, 3, 17});
  const Masked again = mask(tokens, settings, {5, 3, 17});
  EXPECT_EQ(base.inputs, again.inputs);
  EXPECT_EQ(base.targets, again.targets);
  for (MaskKey other : {MaskKey{6, 3, 17}, MaskKey{5, 4, 17}, MaskKey{5, 3, 18}})
    EXPECT_NE(mask(tokens, settings, other).targets, base.targets);
}

TEST(MlmMasking, ShortAndUnmaskableExamplesCarryNoLossAndDoNotFail) {
  MlmSettings always;
  always.mask_prob = 1;
  EXPECT_TRUE(mask({}, always, {}).targets.empty());
  for (const std::vector<uint32_t>& specials :
       {std::vector<uint32_t>{kCls}, {kCls, kSep}, {kCls, 0, 1, kSep}}) {
    const Masked m = mask(specials, always, {});
    EXPECT_EQ(m.targets, std::vector<int32_t>(specials.size(), kIgnoreLabel));
    EXPECT_EQ(m.inputs, std::vector<int32_t>(specials.begin(), specials.end()));
  }
  const auto word = static_cast<uint32_t>(*bert_tokenizer().token_to_id("a"));
  EXPECT_EQ(mask({word}, always, {}).targets, std::vector<int32_t>{static_cast<int32_t>(word)});
  MlmSettings never;
  never.mask_prob = 0;
  SplitMix64 rng(15);
  const std::vector<uint32_t> tokens = bert_example(rng, 50);
  EXPECT_EQ(mask(tokens, never, {}).targets, std::vector<int32_t>(tokens.size(), kIgnoreLabel));
}

}  // namespace
}  // namespace pt
