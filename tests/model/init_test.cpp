// Initial weights: normal(0, stddev) in matrices and embeddings (the moments and tails of a normal), ones in
// norm weights, zeros in biases; the same for a seed, another for another seed.
#include "model/init.h"

#include "model/parameters.h"
#include "model/presets.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pt {
namespace {

TEST(InitParams, MatricesAreNormalNormsOnesBiasesZerosAndTheSeedDecides) {
  ModelConfig c = preset_config("gpt2");  // LayerNorm with biases, linear biases
  c.num_hidden_layers = 2, c.vocab_size = 4000;  // 9M draws
  const ParameterLayout layout(c);
  const std::vector<float> a = init_params(c, 7, 0.02);
  EXPECT_EQ(a, init_params(c, 7, 0.02));
  const std::vector<float> b = init_params(c, 8, 0.02);
  ASSERT_EQ(a.size(), b.size());
  double n = 0, sum = 0, squares = 0, beyond_2sigma = 0, same = 0;
  for (const ParamInfo& p : layout.params()) {
    for (int64_t i = p.offset; i < p.offset + p.numel; ++i) {
      const double x = a[static_cast<size_t>(i)];
      switch (p.role) {
        case ParamRole::norm: ASSERT_EQ(x, 1.0) << p.name; break;
        case ParamRole::bias: ASSERT_EQ(x, 0.0) << p.name; break;
        case ParamRole::matrix:
        case ParamRole::embedding:
          n += 1, sum += x, squares += x * x, beyond_2sigma += std::abs(x) > 0.04;
          same += x == b[static_cast<size_t>(i)];
          break;
      }
    }
  }
  const double mean = sum / n, stddev = std::sqrt(squares / n - mean * mean);
  EXPECT_LT(std::abs(mean), 4 * 0.02 / std::sqrt(n));
  EXPECT_NEAR(stddev, 0.02, 0.02 * 1e-3);
  EXPECT_NEAR(beyond_2sigma / n, 0.0455, 0.001);  // a normal's two-sided tail past 2 sigma
  EXPECT_LT(same / n, 1e-4);
}

}  // namespace
}  // namespace pt
