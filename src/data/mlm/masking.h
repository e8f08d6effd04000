// Dynamic masking for masked-LM training (BERT): which tokens of an example are chosen, and what the
// model sees in their place. A pure function of the example's tokens, the vocabulary's roles and the key
// (seed, epoch, example index), so a mask never depends on how examples are packed, on the batch they
// share or on the number of ranks: padding equals flatten, and a resumed run sees the same masks.
#pragma once

#include "data/mlm/vocab.h"

#include <cstdint>
#include <span>

namespace pt {

struct MlmSettings {
  double mask_prob = 0.15;         // each maskable token (whole_word: each word) is chosen with this chance
  double mask_token_prob = 0.8;    // a chosen token becomes the mask token with this chance,
  double random_token_prob = 0.1;  // a random non-special token with this one, else keeps its id
  bool whole_word = false;         // choose whole words: a word start and the continuations after it
  // Throws pt::Error naming the setting out of range (and whole-word masking without words to keep).
  void validate(const MlmVocab& vocab) const;
};

// Which draw of masking this is: a new mask for every (seed, epoch, example).
struct MaskKey {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t example = 0;  // index in the dataset split
};

// Fills inputs (the ids the model sees) and targets (the original id where the token was chosen,
// kIgnoreLabel elsewhere), both tokens.size(). Special tokens are never chosen; an example without a
// maskable token gets no target. The same arguments give the same result on every platform.
void mask_example(std::span<const uint32_t> tokens, const MlmVocab& vocab, const MlmSettings& settings,
                  const MaskKey& key, std::span<int32_t> inputs, std::span<int32_t> targets);

}  // namespace pt
