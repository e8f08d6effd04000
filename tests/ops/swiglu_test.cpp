#include "ops/swiglu.h"

#include "gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pt::ops {
namespace {

using testing::gradcheck;
using testing::random_values;
using testing::view;
using testing::weighted_sum;

TEST(SwiGlu, ForwardReadsGateThenUpHalves) {
  std::vector<double> h = {1.0, -2.0, 3.0, 0.5}, out(2);  // one row: gate (1, -2), up (3, 0.5)
  swiglu_forward(view(h, {1, 4}), view(out, {1, 2}));
  auto silu = [](double g) { return g / (1 + std::exp(-g)); };
  EXPECT_NEAR(out[0], silu(1.0) * 3.0, 1e-15);
  EXPECT_NEAR(out[1], silu(-2.0) * 0.5, 1e-15);
}

TEST(SwiGlu, BackwardMatchesFiniteDifferences) {
  for (auto [T, F] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {3, 16}}) {
    std::vector<double> h = random_values(T * 2 * F, 1, -4, 4), weights = random_values(T * F, 2), out(T * F);
    auto loss = [&] {
      swiglu_forward(view(h, {T, 2 * F}), view(out, {T, F}));
      return weighted_sum(out, weights);
    };
    std::vector<double> dh(T * 2 * F);
    swiglu_backward(view(weights, {T, F}), view(h, {T, 2 * F}), view(dh, {T, 2 * F}));
    EXPECT_GRAD(gradcheck(loss, h, dh));
  }
}

TEST(SwiGlu, OddWidthIsRejected) {
  std::vector<double> h(6), out(3);
  EXPECT_THROW(swiglu_forward(view(h, {2, 3}), view(out, {2, 1})), Error);
}

}  // namespace
}  // namespace pt::ops
