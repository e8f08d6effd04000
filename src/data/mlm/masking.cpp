#include "data/mlm/masking.h"

#include "core/error.h"
#include "data/packing/batch.h"
#include "data/packing/shuffle.h"

namespace pt {
namespace {

constexpr uint64_t kMaskStream = 3;  // beside the packers' example-order (1) and row-order (2) streams

SplitMix64 mask_stream(const MaskKey& key) {
  SplitMix64 epoch_stream = seeded_stream(key.seed, key.epoch, kMaskStream);
  SplitMix64 mix(epoch_stream.next() ^ static_cast<uint64_t>(key.example) * 0xD6E8FEB86659FD93ull);
  return SplitMix64(mix.next());
}

// Uniform in [0, 1) from the top 53 bits, exact in a double.
double uniform(SplitMix64& rng) { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; }

bool probability(double p) { return p >= 0 && p <= 1; }

}  // namespace

void MlmSettings::validate(const MlmVocab& vocab) const {
  if (!probability(mask_prob)) fail("masked LM: the mask probability must be in [0, 1], got {}", mask_prob);
  if (!probability(mask_token_prob) || !probability(random_token_prob) ||
      mask_token_prob + random_token_prob > 1)
    fail(
        "masked LM: the shares of chosen tokens replaced by the mask token ({}) and by a random token ({}) "
        "must be in [0, 1] and sum to at most 1",
        mask_token_prob, random_token_prob);
  if (whole_word && !vocab.marks_words())
    fail(
        "masked LM: whole-word masking needs a tokenizer that marks word continuations (WordPiece's "
        "\"##\"); this one marks none");
}

void mask_example(std::span<const uint32_t> tokens, const MlmVocab& vocab, const MlmSettings& settings,
                  const MaskKey& key, std::span<int32_t> inputs, std::span<int32_t> targets) {
  PT_ASSERT(inputs.size() == tokens.size() && targets.size() == tokens.size());
  SplitMix64 rng = mask_stream(key);
  const auto& random_ids = vocab.random_ids();
  bool in_word = false;  // the token before is maskable, so a continuation here extends its word
  bool chosen = false;   // the current word (or token) is chosen
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t token = tokens[i];
    inputs[i] = static_cast<int32_t>(token);
    targets[i] = kIgnoreLabel;
    const TokenRole role = vocab.role(token);
    if (role == TokenRole::kSpecial) {
      in_word = false;
      continue;
    }
    // A continuation with no word before it (after a special token, or first) starts a word of its own.
    if (!settings.whole_word || role == TokenRole::kWordStart || !in_word)
      chosen = uniform(rng) < settings.mask_prob;
    in_word = true;
    if (!chosen) continue;
    targets[i] = static_cast<int32_t>(token);
    const double replace = uniform(rng);
    if (replace < settings.mask_token_prob)
      inputs[i] = vocab.mask_id();
    else if (replace < settings.mask_token_prob + settings.random_token_prob)
      inputs[i] = random_ids[rng.below(random_ids.size())];
  }
}

}  // namespace pt
