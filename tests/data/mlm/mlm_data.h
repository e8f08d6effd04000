// Shared by the masked-LM tests: BERT's WordPiece vocabulary (the uncased fixture) and BERT-like examples
// drawn from it, [CLS] words [SEP] with the odd [UNK] and [PAD] inside.
#pragma once

#include "data/dataset.h"
#include "data/mlm/vocab.h"
#include "data/packing/shuffle.h"
#include "data/tokenizer/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pt::test {

inline const Tokenizer& bert_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_file(std::string(PACKTRAIN_FIXTURES) +
                                                          "/tokenizer/wordpiece_bert_uncased.tokenizer.json");
  return tokenizer;
}

inline const MlmVocab& bert_vocab() {
  static const MlmVocab vocab = MlmVocab::from_tokenizer(bert_tokenizer());
  return vocab;
}

inline constexpr uint32_t kPad = 0, kUnk = 1, kCls = 2, kSep = 3, kMask = 4;

// One example: [CLS], then `words` words of 1-3 tokens (a word start and continuations), then [SEP].
inline std::vector<uint32_t> bert_example(SplitMix64& rng, int64_t words) {
  std::vector<uint32_t> starts, continuations;
  const MlmVocab& vocab = bert_vocab();
  for (int32_t id : vocab.random_ids())
    (vocab.role(static_cast<uint32_t>(id)) == TokenRole::kWordStart ? starts : continuations)
        .push_back(static_cast<uint32_t>(id));
  std::vector<uint32_t> tokens = {kCls};
  for (int64_t w = 0; w < words; ++w) {
    if (rng.below(50) == 0) {
      tokens.push_back(rng.below(2) ? kUnk : kPad);  // specials inside an example are never masked
      continue;
    }
    tokens.push_back(starts[rng.below(starts.size())]);
    for (uint64_t c = rng.below(3); c > 0; --c)
      tokens.push_back(continuations[rng.below(continuations.size())]);
  }
  tokens.push_back(kSep);
  return tokens;
}

// `count` examples of 0-40 words, plus the edge cases: a lone [CLS], a lone word, [CLS] [SEP], and an
// empty example (which packers skip).
inline DatasetSplit bert_split(int64_t count, uint64_t seed) {
  SplitMix64 rng(seed);
  const auto word = static_cast<uint32_t>(*bert_tokenizer().token_to_id("a"));
  std::vector<std::vector<uint32_t>> examples = {{kCls}, {word}, {kCls, kSep}, {}};
  for (int64_t i = 0; i < count; ++i)
    examples.push_back(bert_example(rng, static_cast<int64_t>(rng.below(41))));
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> offsets = {0};
  for (const auto& e : examples) {
    tokens.insert(tokens.end(), e.begin(), e.end());
    offsets.push_back(tokens.size());
  }
  std::vector<uint8_t> loss(tokens.size(), 1);
  return DatasetSplit::from_vectors(std::move(tokens), std::move(loss), std::move(offsets));
}

}  // namespace pt::test
