// Initial weights as Hugging Face initialises its causal LMs: normal(0, stddev) for every matrix and
// embedding table, ones for norm weights, zeros for biases. Deterministic for a seed, each value a function
// of the seed and its flat index (filled in parallel).
#pragma once

#include "model/config.h"

#include <cstdint>
#include <vector>

namespace pt {

std::vector<float> init_params(const ModelConfig& config, uint64_t seed, double stddev = 0.02);

}  // namespace pt
