#include "model/init.h"

#include "model/parameters.h"

#include <random>

namespace pt {

std::vector<float> init_params(const LlamaConfig& config, uint64_t seed, double stddev) {
  ParameterLayout layout(config);
  std::vector<float> params(static_cast<size_t>(layout.total()));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, stddev);
  for (const auto& p : layout.params()) {
    const bool is_norm = p.shape.size() == 1;
    for (int64_t i = 0; i < p.numel; ++i)
      params[static_cast<size_t>(p.offset + i)] = is_norm ? 1.0f : static_cast<float>(normal(rng));
  }
  return params;
}

}  // namespace pt
