#include "model/init.h"

#include "core/parallel.h"
#include "model/parameters.h"
#include "ops/counter_hash.h"

#include <cmath>
#include <numbers>

namespace pt {

namespace {

// A uniform in (0, 1] from 53 bits of a hash.
double unit(uint64_t bits) { return static_cast<double>((bits >> 11) + 1) * 0x1.0p-53; }

// normal(0, 1) for flat index i: Box-Muller on two uniforms hashed from (seed, i), so every value depends on
// its index alone and threads fill the buffer in any order with the same result.
double standard_normal(uint64_t seed, uint64_t i) {
  const uint64_t key = ops::mix64(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
  const double u1 = unit(ops::mix64(key ^ (2 * i))), u2 = unit(ops::mix64(key ^ (2 * i + 1)));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace

std::vector<float> init_params(const ModelConfig& config, uint64_t seed, double stddev) {
  ParameterLayout layout(config);
  std::vector<float> params(static_cast<size_t>(layout.total()));
  for (const auto& p : layout.params()) {
    float* x = params.data() + p.offset;
    // An 8B model's 8e9 draws take minutes on one thread.
    parallel_for(p.numel, p.numel < (1 << 20) ? 1 : hardware_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        switch (p.role) {
          case ParamRole::norm: x[i] = 1.0f; break;
          case ParamRole::bias: x[i] = 0.0f; break;
          case ParamRole::matrix:
          case ParamRole::embedding:
            x[i] = static_cast<float>(stddev * standard_normal(seed, static_cast<uint64_t>(p.offset + i)));
            break;
        }
      }
    });
  }
  return params;
}

}  // namespace pt
