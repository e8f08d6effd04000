// packtrain's CPU model against Hugging Face transformers, replayed from fixtures that
// scripts/hf_oracle.py wrote with torch (float64): logits and loss of a packed batch, the gradients of
// the summed loss, and HF's loss on a checkpoint packtrain wrote.
#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "model/compare.h"
#include "model/decoder.h"
#include "model/hf_oracle_fixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace pt {
namespace {

using testing::hf_oracle_batch;
using testing::hf_oracle_expected;
using testing::relative_error;
const std::string& kDir = testing::kHfOracleDir;

class HfOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(HfOracle, LogitsLossAndGradientsMatchTransformers) {
  const std::string name = GetParam();
  auto weights = load_model_dir(kDir + "/" + name);
  auto reference = SafetensorsReader::open(kDir + "/expected.safetensors");
  const Batch batch = hf_oracle_batch();
  DecoderModel model(weights.config, batch.num_tokens());
  const auto n = static_cast<int64_t>(weights.params.size());
  std::vector<float> grads(weights.params.size(), 0.0f);
  auto loss = model.forward_backward(batch, Tensor::of(weights.params.data(), {n}),
                                     Tensor::of(grads.data(), {n}), 1.0);
  EXPECT_NEAR(loss.loss_sum, hf_oracle_expected(name + ".loss_sum"),
              1e-4 * hf_oracle_expected(name + ".loss_sum"));

  // The logits of the forward pass (dlogits replaced them in forward_backward, so run forward again).
  model.forward(batch, Tensor::of(weights.params.data(), {n}), HeadRows::every);
  const int64_t V = weights.config.vocab_size;
  std::vector<int64_t> shape = {batch.num_tokens(), V};
  std::vector<float> ref_logits(static_cast<size_t>(batch.num_tokens() * V));
  reference.read_f32(name + ".logits", shape, ref_logits);
  EXPECT_LE(relative_error(testing::logit_rows(model, batch.num_tokens()), ref_logits), 1e-4);

  for (const auto& p : model.layout().params()) {
    std::vector<float> ref(static_cast<size_t>(p.numel));
    reference.read_f32(name + ".grad." + p.name, p.shape, ref);
    EXPECT_LE(relative_error({grads.data() + p.offset, ref.size()}, ref), 1e-4) << p.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, HfOracle, ::testing::Values("hf_model", "hf_tied_model"));

TEST(HfOracle, TransformersGetsPackTrainsLossOnACheckpointPackTrainWrote) {
  auto weights = load_model_dir(kDir + "/packtrain_model");
  const Batch batch = hf_oracle_batch();
  DecoderModel model(weights.config, batch.num_tokens());
  auto loss =
      model.forward(batch, Tensor::of(weights.params.data(), {static_cast<int64_t>(weights.params.size())}));
  EXPECT_NEAR(loss.loss_sum, hf_oracle_expected("packtrain_model.loss_sum"), 1e-4 * loss.loss_sum);
}

}  // namespace
}  // namespace pt
