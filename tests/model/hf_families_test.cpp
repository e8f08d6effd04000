// Every supported family against Hugging Face transformers, replayed from fixtures that
// `scripts/hf_oracle.py families` wrote with torch in float64: tiny random models with every parameter
// nonzero (biases and norms too), a packed batch with a 1-token example and examples longer than the
// sliding windows. The CPU model's logits at every token, loss and every gradient match; a checkpoint
// packtrain writes is the one transformers loaded back
// (`hf_oracle.py check`), byte for byte. BERT's fixture (BertForMaskedLM on a masked-LM batch) is
// generated on a machine with torch (hf_oracle.py families DIR bert); until it is there, its tests skip
// saying so.
#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "core/file.h"
#include "model/compare.h"
#include "model/decoder.h"
#include "model/hf_oracle_fixture.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace pt {
namespace {

namespace fs = std::filesystem;
using testing::hf_oracle_batch;
using testing::hf_oracle_expected;
using testing::relative_error;

class HfFamily : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "bert" && !fs::exists(dir() + "/expected.json"))
      GTEST_SKIP()
          << dir() << " is not generated yet: run scripts/hf_oracle.py families " << testing::kHfFamiliesDir
          << " bert where torch and transformers are installed, then "
          << "PACKTRAIN_UPDATE_FIXTURES=1 build/packtrain_tests --gtest_filter='Families/HfFamily.*/6' and "
          << "scripts/hf_oracle.py check " << testing::kHfFamiliesDir;
  }
  std::string dir() const { return testing::kHfFamiliesDir + "/" + GetParam(); }
};

// A parameter's gradient as HF lays it out (Conv1D weights [in, out]).
std::vector<float> hf_layout(const ParamInfo& p, const std::vector<float>& flat) {
  std::vector<float> out(flat.begin() + p.offset, flat.begin() + p.offset + p.numel);
  if (!p.transposed) return out;
  const int64_t rows = p.shape[1], cols = p.shape[0];  // as the flat buffer holds it
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(c * rows + r)] = flat[static_cast<size_t>(p.offset + r * cols + c)];
  return out;
}

TEST_P(HfFamily, LogitsLossAndGradientsMatchTransformers) {
  const ModelWeights weights = load_model_dir(dir() + "/hf_model");
  EXPECT_EQ(weights.config.family, GetParam().rfind("llama", 0) == 0 ? "llama" : GetParam());
  const auto reference = SafetensorsReader::open(dir() + "/expected.safetensors");
  const Batch batch = hf_oracle_batch(dir());
  DecoderModel model(weights.config, batch.num_tokens());
  const auto n = static_cast<int64_t>(weights.params.size());
  std::vector<float> params = weights.params, grads(weights.params.size(), 0.0f);
  const LossSum loss =
      model.forward_backward(batch, Tensor::of(params.data(), {n}), Tensor::of(grads.data(), {n}), 1.0);
  const double expected = hf_oracle_expected("loss_sum", dir());
  EXPECT_NEAR(loss.loss_sum, expected, 1e-4 * expected);

  // Every token's logits (forward_backward overwrote the labelled tokens' with their gradient).
  model.forward(batch, Tensor::of(params.data(), {n}), HeadRows::every);
  const int64_t V = weights.config.vocab_size;
  std::vector<float> ref_logits(static_cast<size_t>(batch.num_tokens() * V));
  reference.read_f32("logits", std::vector<int64_t>{batch.num_tokens(), V}, ref_logits);
  EXPECT_LE(relative_error(testing::logit_rows(model, batch.num_tokens()), ref_logits), 1e-4);

  std::vector<std::vector<float>> refs;
  double model_scale = 0;
  for (const ParamInfo& p : model.layout().params()) {
    refs.emplace_back(static_cast<size_t>(p.numel));
    reference.read_f32("grad." + p.name, p.shape, refs.back());
    model_scale = std::max(model_scale, testing::max_abs(refs.back()));
  }
  for (size_t i = 0; i < refs.size(); ++i) {
    const ParamInfo& p = model.layout().params()[i];
    EXPECT_LE(testing::gradient_error(hf_layout(p, grads), refs[i], model_scale), 1e-4) << p.name;
  }
}

// packtrain's own save of the HF model is the packtrain_model fixture that transformers loaded back to the
// same tensors (hf_oracle.py check: max_abs_diff 0) and the same loss. PACKTRAIN_UPDATE_FIXTURES=1
// rewrites the fixture instead, for hf_oracle.py check to verify.
TEST_P(HfFamily, TransformersLoadsWhatPacktrainWrites) {
  const ModelWeights weights = load_model_dir(dir() + "/hf_model");
  const fs::path fixture = fs::path(dir()) / "packtrain_model";
  if (std::getenv("PACKTRAIN_UPDATE_FIXTURES")) {
    save_model_dir(fixture.string(), weights.config, weights.params, "");
    GTEST_SKIP() << "rewrote " << fixture << "; run scripts/hf_oracle.py check on it";
  }
  const fs::path out = test::fresh_temp_dir() / "model";
  save_model_dir(out.string(), weights.config, weights.params, "");
  for (const char* file : {"config.json", "model.safetensors"})
    EXPECT_EQ(read_file((out / file).string()), read_file((fixture / file).string())) << file;
  EXPECT_EQ(hf_oracle_expected("packtrain_model.max_abs_diff", dir()), 0.0);
  EXPECT_NEAR(hf_oracle_expected("packtrain_model.loss_sum", dir()), hf_oracle_expected("loss_sum", dir()),
              1e-9 * hf_oracle_expected("loss_sum", dir()));
  // And packtrain reads its own save back to the same weights.
  EXPECT_EQ(load_model_dir(out.string()).params, weights.params);
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamily,
                         ::testing::Values("llama3", "llama_yarn", "mistral", "qwen2", "qwen3", "gpt2",
                                           "bert"));

}  // namespace
}  // namespace pt
