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

// cross_entropy_accumulate adds into sums on the device: two calls (one with its gradient, possibly in
// place or off alignment, one for the loss alone) against the cpu backend in f64 on top of nonzero sums.
void check_accumulate(DType dtype, int64_t T, int64_t V, bool in_place, int64_t offset = 0) {
  SCOPED_TRACE(fmt::format("accumulate {} T={} V={} {} offset {}", dtype_name(dtype), T, V,
                           in_place ? "in place" : "separate", offset));
  const double grad_scale = 1.0 / 29;
  std::vector<double> logits = rounded(random_values(T * V, 11, -8, 8), dtype),
                      logits2 = rounded(random_values(T * V, 12, -6, 6), dtype);
  std::vector<int32_t> targets = random_targets(T, V, 13), targets2 = random_targets(T, V, 14);
  std::vector<double> dlogits(T * V);
  const CrossEntropyResult want =
      cross_entropy(view(logits, {T, V}), view(targets, {T}), grad_scale, view(dlogits, {T, V}));
  const CrossEntropyResult want2 = cross_entropy(view(logits2, {T, V}), view(targets2, {T}), 1.0, Tensor());

  const std::vector<double> start = {2.5, 7.0};
  DeviceTensor d_logits = upload_shifted(logits, dtype, {T, V}, offset),
               d_targets = upload_ints(targets, {T});
  DeviceTensor d_logits2 = upload(logits2, dtype, {T, V}), d_targets2 = upload_ints(targets2, {T});
  DeviceTensor d_grad = poisoned_shifted(dtype, {T, V}, offset), sums = upload_f64(start, {2});
  const Tensor grad = in_place ? d_logits.t : d_grad.t;
  cross_entropy_accumulate(d_logits.t, d_targets.t, grad_scale, grad, sums.t);
  cross_entropy_accumulate(d_logits2.t, d_targets2.t, 1.0, Tensor(), sums.t);
  const std::vector<double> got = download_f64(sums.t);
  const double want_loss = start[0] + want.loss_sum + want2.loss_sum;
  EXPECT_NEAR(got[0], want_loss, tolerance(DType::f32, true) * std::max(1.0, std::fabs(want_loss)));
  EXPECT_EQ(got[1], start[1] + double(want.tokens + want2.tokens));
  EXPECT_CLOSE(grad, dlogits, tolerance(dtype));
}

TEST(CudaCrossEntropyAccumulate, MatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (auto [T, V] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {7, 1000}, {64, 32000}, {3, 32004}}) {
      check_accumulate(dtype, T, V, false);
      check_accumulate(dtype, T, V, true);
    }
    check_accumulate(dtype, 11, 32000, false, 1);
    check_accumulate(dtype, 4, 1003, true, 1);
  }
}

// The same kernels as cross_entropy: from zero sums the loss is bitwise the checking version's; no rows
// leave the sums unchanged.
TEST(CudaCrossEntropyAccumulate, EqualsCrossEntropyBitwise) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 300, V = 32000;
  DeviceTensor logits = upload(random_values(T * V, 15, -5, 5), DType::bf16, {T, V});
  DeviceTensor targets = upload_ints(random_targets(T, V, 16), {T});
  DeviceTensor sums = upload_f64({0.0, 0.0}, {2});
  const CrossEntropyResult want = cross_entropy(logits.t, targets.t, 1.0, Tensor());
  cross_entropy_accumulate(logits.t, targets.t, 1.0, Tensor(), sums.t);
  const std::vector<double> got = download_f64(sums.t);
  EXPECT_EQ(got[0], want.loss_sum);
  EXPECT_EQ(got[1], double(want.tokens));
  DeviceTensor empty_logits = poisoned(DType::bf16, {0, V}), empty_targets = upload_ints({}, {0});
  cross_entropy_accumulate(empty_logits.t, empty_targets.t, 1.0, Tensor(), sums.t);
  EXPECT_EQ(download_f64(sums.t), got);
}

// Rows padded past the vocabulary to a multiple of 64 (as the model's logits are), NaN in the padding: the
// loss and the first V columns of the gradient against the cpu backend on compact rows, the gradient's
// padding 0, on the vector path (aligned rows, the last vector partly padding) and, off alignment, the
// scalar one.
TEST(CudaCrossEntropy, PaddedRowsMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::f32, DType::bf16})
    for (auto [T, V] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {9, 1003}, {5, 50257}, {3, 30522}})
      for (int64_t offset : {0, 1})
        for (bool in_place : {false, true}) {
          const int64_t width = (V + 63) / 64 * 64;
          SCOPED_TRACE(fmt::format("{} T={} V={} rows of {} offset {} {}", dtype_name(dtype), T, V, width,
                                   offset, in_place ? "in place" : "separate"));
          const std::vector<double> logits = rounded(random_values(T * V, 7, -8, 8), dtype);
          std::vector<double> compact = logits, dlogits(T * V);
          std::vector<int32_t> targets = random_targets(T, V, 8);
          const CrossEntropyResult want =
              cross_entropy(view(compact, {T, V}), view(targets, {T}), 0.25, view(dlogits, {T, V}));
          DeviceTensor d_logits =
              upload_shifted(pad_rows(logits, T, V, width, NAN), dtype, {T, width}, offset);
          DeviceTensor d_grad = poisoned_shifted(dtype, {T, width}, offset),
                       d_targets = upload_ints(targets, {T});
          const Tensor grad = in_place ? d_logits.t : d_grad.t;
          const CrossEntropyResult got = cross_entropy(d_logits.t, d_targets.t, 0.25, grad, V);
          EXPECT_EQ(got.tokens, want.tokens);
          EXPECT_NEAR(got.loss_sum, want.loss_sum,
                      tolerance(DType::f32, true) * std::max(1.0, std::fabs(want.loss_sum)));
          const std::vector<double> got_grad = download(grad);
          const Comparison c = compare(unpad_rows(got_grad, T, V, width), dlogits);
          EXPECT_LE(c.error, tolerance(dtype)) << "dlogits: " << c.str();
          int64_t nonzero_padding = 0;
          for (int64_t t = 0; t < T; ++t)
            for (int64_t j = V; j < width; ++j) nonzero_padding += got_grad[t * width + j] != 0.0;
          EXPECT_EQ(nonzero_padding, 0) << "the gradient's padding must be 0";
        }
}

}  // namespace
}  // namespace pt::ops
