// Text generation from a trained model: greedy or sampled (temperature, top-k, top-p) decoding, one token
// at a time, each handed to a callback as it is chosen so the CLI can stream it. The whole context is
// recomputed per token (no KV cache): simple and exact, fine for the CPU-sized models it serves here.
#pragma once

#include "core/tensor.h"
#include "model/decoder.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace pt {

struct SamplingOptions {
  int32_t max_new_tokens = 64;
  bool greedy = false;
  double temperature = 1.0;
  int32_t top_k = 0;   // 0: no top-k cut
  double top_p = 1.0;  // 1: no nucleus cut
  uint64_t seed = 0;
};

// Picks the next token from one row of logits. rng_state advances deterministically.
int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, uint64_t& rng_state);

// Appends up to max_new_tokens to `prompt` (stopping after `eos`), calling on_token for each new id.
std::vector<int32_t> generate(DecoderModel& model, const Tensor& params, std::vector<int32_t> prompt,
                              const SamplingOptions& options, std::optional<int32_t> eos,
                              const std::function<void(int32_t)>& on_token);

}  // namespace pt
