#include "model/init.h"

#include "model/parameters.h"

#include <random>

namespace pt {

std::vector<float> init_params(const ModelConfig& config, uint64_t seed, double stddev) {
  ParameterLayout layout(config);
  std::vector<float> params(static_cast<size_t>(layout.total()));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, stddev);
  for (const auto& p : layout.params()) {
    for (int64_t i = 0; i < p.numel; ++i) {
      float& x = params[static_cast<size_t>(p.offset + i)];
      switch (p.role) {
        case ParamRole::norm: x = 1.0f; break;
        case ParamRole::bias: x = 0.0f; break;
        case ParamRole::matrix:
        case ParamRole::embedding: x = static_cast<float>(normal(rng)); break;
      }
    }
  }
  return params;
}

}  // namespace pt
