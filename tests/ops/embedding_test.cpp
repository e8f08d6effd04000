#include "ops/embedding.h"

#include "gradcheck.h"
#include "ops/cpu/threads.h"
#include "ops/linear.h"

#include <gtest/gtest.h>

namespace pt::ops {
namespace {

using testing::gradcheck;
using testing::random_values;
using testing::view;
using testing::weighted_sum;

TEST(Embedding, ForwardCopiesRows) {
  const int64_t V = 5, C = 3;
  std::vector<double> table = random_values(V * C, 1);
  std::vector<int32_t> ids = {4, 0, 4, 2};
  std::vector<double> out(ids.size() * C);
  embedding_forward(view(ids, {4}), view(table, {V, C}), view(out, {4, C}));
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(out[t * C + c], table[ids[t] * C + c]);
}

TEST(Embedding, BackwardMatchesFiniteDifferencesWithRepeatedIds) {
  const int64_t V = 6, C = 5, T = 7;
  std::vector<double> table = random_values(V * C, 2);
  std::vector<int32_t> ids = {1, 3, 1, 0, 5, 1, 3};  // repeats must add up; row 2 and 4 get nothing
  std::vector<double> weights = random_values(T * C, 3), out(T * C);
  auto loss = [&] {
    embedding_forward(view(ids, {T}), view(table, {V, C}), view(out, {T, C}));
    return weighted_sum(out, weights);
  };
  std::vector<double> dtable(V * C, 123.0);  // overwrite must clear the stale contents
  embedding_backward(view(ids, {T}), view(weights, {T, C}), view(dtable, {V, C}), Write::overwrite);
  EXPECT_GRAD(gradcheck(loss, table, dtable));

  std::vector<double> twice = dtable;
  embedding_backward(view(ids, {T}), view(weights, {T, C}), view(twice, {V, C}), Write::accumulate);
  for (size_t i = 0; i < twice.size(); ++i) EXPECT_DOUBLE_EQ(twice[i], 2 * dtable[i]);
}

TEST(Embedding, BackwardIsIndependentOfThreadCount) {
  const int64_t V = 50, C = 37, T = 300;
  std::vector<int32_t> ids(T);
  for (int64_t t = 0; t < T; ++t) ids[t] = static_cast<int32_t>((t * 7) % V);
  std::vector<float> dout(T * C);
  std::vector<double> r = random_values(T * C, 4);
  for (size_t i = 0; i < r.size(); ++i) dout[i] = static_cast<float>(r[i]);
  std::vector<float> one(V * C), many(V * C);
  set_cpu_threads(1);
  embedding_backward(view(ids, {T}), view(dout, {T, C}), view(one, {V, C}), Write::overwrite);
  set_cpu_threads(5);
  embedding_backward(view(ids, {T}), view(dout, {T, C}), view(many, {V, C}), Write::overwrite);
  set_cpu_threads(0);
  EXPECT_EQ(one, many);
}

TEST(Embedding, OutOfRangeIdNamesTheToken) {
  std::vector<double> table(4 * 2), out(3 * 2);
  std::vector<int32_t> ids = {0, 4, 1};
  try {
    embedding_forward(view(ids, {3}), view(table, {4, 2}), view(out, {3, 2}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 1 has id 4"), std::string::npos) << e.what();
  }
}

// Tied embeddings: the table is both the input embedding and the LM-head weight, so its gradient is the
// sum of both paths: embedding_backward (overwrite) then linear_backward's dw (accumulate) into one buffer.
TEST(Embedding, TiedWithLmHeadGradientsFromBothPathsAdd) {
  const int64_t V = 7, C = 4, T = 5;
  std::vector<double> table = random_values(V * C, 5);
  std::vector<int32_t> ids = {2, 6, 2, 0, 3};
  std::vector<double> weights = random_values(T * V, 6), x(T * C), logits(T * V);
  auto forward = [&] {
    embedding_forward(view(ids, {T}), view(table, {V, C}), view(x, {T, C}));
    linear_forward(view(x, {T, C}), view(table, {V, C}), view(logits, {T, V}));
    return weighted_sum(logits, weights);
  };
  forward();
  std::vector<double> dx(T * C), dtable(V * C);
  linear_backward(view(weights, {T, V}), view(x, {T, C}), view(table, {V, C}), view(dx, {T, C}),
                  Write::overwrite, Tensor(), Write::overwrite);
  embedding_backward(view(ids, {T}), view(dx, {T, C}), view(dtable, {V, C}), Write::overwrite);
  linear_backward(view(weights, {T, V}), view(x, {T, C}), view(table, {V, C}), Tensor(), Write::overwrite,
                  view(dtable, {V, C}), Write::accumulate);
  EXPECT_GRAD(gradcheck(forward, table, dtable));
}

}  // namespace
}  // namespace pt::ops
