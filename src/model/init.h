// Initial weights as Hugging Face initialises LlamaForCausalLM: normal(0, 0.02) for every matrix, ones
// for the RMSNorm weights. Deterministic for a seed.
#pragma once

#include "model/config.h"

#include <cstdint>
#include <vector>

namespace pt {

std::vector<float> init_params(const LlamaConfig& config, uint64_t seed, double stddev = 0.02);

}  // namespace pt
