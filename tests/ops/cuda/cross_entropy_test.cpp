// CUDA cross-entropy against the cpu backend in f64: loss sum, token count and dlogits (separate buffer
// or in place), ignored rows, vocabularies up to 32000, f32 and bf16 logits.
#include "ops/cross_entropy.h"

#include <random>

#include "cuda_test_util.h"
#include "data/packing/batch.h"
#include "shifted.h"

namespace pt::ops {
namespace {

using namespace pt::testing;

std::vector<int32_t> random_targets(int64_t T, int64_t V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> targets(static_cast<size_t>(T));
  for (int32_t& t : targets) t = rng() % 4 == 0 ? kIgnoreLabel : static_cast<int32_t>(rng() % V);
  if (T > 1) targets[0] = static_cast<int32_t>(V - 1);  // the last column is a real target somewhere
  return targets;
}

// offset > 0 places logits and dlogits that many elements into their buffers: rows off 16-byte alignment.
void check_cross_entropy(DType dtype, int64_t T, int64_t V, bool in_place, int64_t offset = 0) {
  SCOPED_TRACE(fmt::format("{} T={} V={} {} offset {}", dtype_name(dtype), T, V,
                           in_place ? "in place" : "separate", offset));
  const double grad_scale = 1.0 / 37;
  // Logits spread over [-8, 8] so the max-subtraction matters; one row has a large outlier.
  std::vector<double> logits = random_values(T * V, 1, -8, 8);
  logits[static_cast<size_t>(V / 2)] = 30;
  logits = rounded(logits, dtype);
  const std::vector<int32_t> targets = random_targets(T, V, 2);
  std::vector<int32_t> host_targets = targets;
  std::vector<double> dlogits(T * V);
  const CrossEntropyResult want =
      cross_entropy(view(logits, {T, V}), view(host_targets, {T}), grad_scale, view(dlogits, {T, V}));

  DeviceTensor d_logits = upload_shifted(logits, dtype, {T, V}, offset),
               d_targets = upload_ints(targets, {T});
  DeviceTensor d_grad = poisoned_shifted(dtype, {T, V}, offset);
  const Tensor grad = in_place ? d_logits.t : d_grad.t;
  const CrossEntropyResult got = cross_entropy(d_logits.t, d_targets.t, grad_scale, grad);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_NEAR(got.loss_sum, want.loss_sum,
              tolerance(DType::f32, true) * std::max(1.0, std::fabs(want.loss_sum)));
  EXPECT_CLOSE(grad, dlogits, tolerance(dtype));
}

TEST(CudaCrossEntropy, F32MatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (auto [T, V] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {7, 1000}, {64, 32000}, {3, 50257}})
    check_cross_entropy(DType::f32, T, V, false);
  check_cross_entropy(DType::f32, 17, 32000, true);
}

TEST(CudaCrossEntropy, Bf16MatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (auto [T, V] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {7, 1000}, {64, 32000}})
    check_cross_entropy(DType::bf16, T, V, true);
  check_cross_entropy(DType::bf16, 9, 32000, false);
}

// Vocabularies that are not whole 16-byte vectors and rows off alignment take the scalar path; the
// aligned ones the vector path, with targets in the first and last vector of a row.
TEST(CudaCrossEntropy, VectorAndScalarPathsMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (auto [T, V] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 8}, {5, 9}, {40, 4100}, {3, 32004}})
      check_cross_entropy(dtype, T, V, true);
    for (auto [T, V] : std::vector<std::pair<int64_t, int64_t>>{{1, 32000}, {11, 32000}, {4, 1003}}) {
      check_cross_entropy(dtype, T, V, true, 1);
      check_cross_entropy(dtype, T, V, false, 1);
    }
  }
}

TEST(CudaCrossEntropy, LossAloneAndIsReproducible) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 300, V = 32000;
  DeviceTensor logits = upload(random_values(T * V, 3, -5, 5), DType::bf16, {T, V});
  DeviceTensor targets = upload_ints(random_targets(T, V, 4), {T});
  const CrossEntropyResult a = cross_entropy(logits.t, targets.t, 1.0, Tensor());
  const CrossEntropyResult b = cross_entropy(logits.t, targets.t, 1.0, Tensor());
  EXPECT_EQ(a.loss_sum, b.loss_sum) << "the loss must be summed in a fixed order";
  EXPECT_EQ(a.tokens, b.tokens);
}

TEST(CudaCrossEntropy, TargetOutsideTheVocabularyIsAnError) {
  SKIP_WITHOUT_GPU();
  DeviceTensor logits = upload(random_values(3 * 10, 5), DType::f32, {3, 10});
  DeviceTensor targets = upload_ints({1, 10, kIgnoreLabel}, {3});
  try {
    cross_entropy(logits.t, targets.t, 1.0, Tensor());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target of token 1 is outside the vocabulary [0, 10)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pt::ops
