// The model on cuda in bf16 with f32 master weights and gradients, against float64 Hugging Face
// (the oracle fixtures), against itself across packing strategies, and against the f32 cpu model.
// bf16 keeps about three significant digits, so losses must agree within 1% and every gradient tensor
// within 2% of its largest reference element (the cpu model gets the bf16-rounded weights the GPU computes
// with; the HF fixtures get extra room for their steepness, see there); no value may be NaN.
#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "core/float16.h"
#include "model/batches.h"
#include "model/compare.h"
#include "model/decoder.h"
#include "model/family_configs.h"
#include "model/hf_oracle_fixture.h"
#include "model/init.h"
#include "ops/cuda/cuda_test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace pt {
namespace {

using testing::bf16_rounded;
using testing::max_batch_tokens;
using testing::packed_batches;
using testing::random_split;
using testing::relative_error;

constexpr double kLossTolerance = 1e-2;
constexpr double kGradTolerance = 2e-2;

struct Totals {
  double loss_sum = 0;
  int64_t targets = 0;
  std::vector<float> grads;
};

// Sums loss and gradients over `batches` (grad_scale 1) on the cpu in f32 or on cuda in bf16.
Totals run(const ModelConfig& c, const std::vector<float>& params, const std::vector<Batch>& batches,
           Device device) {
  const auto n = static_cast<int64_t>(params.size());
  Totals totals;
  totals.grads.assign(params.size(), 0.0f);
  if (device == Device::cpu) {
    DecoderModel model(c, max_batch_tokens(batches));
    model.load_weights(Tensor::of(params.data(), {n}));
    for (const auto& b : batches) {
      const LossSum r = model.forward_backward(b, Tensor::of(totals.grads.data(), {n}), 1.0);
      totals.loss_sum += r.loss_sum, totals.targets += r.tokens;
    }
    return totals;
  }
  DecoderModel model(c, max_batch_tokens(batches), Device::cuda, DType::bf16);
  DeviceBuffer master(params.size() * sizeof(float)), grads(params.size() * sizeof(float));
  master.upload(params.data(), params.size() * sizeof(float));
  model.load_weights(master.view(DType::f32, {n}));
  for (const auto& b : batches) {
    const LossSum r = model.forward_backward(b, grads.view(DType::f32, {n}), 1.0);
    totals.loss_sum += r.loss_sum, totals.targets += r.tokens;
  }
  grads.download(totals.grads.data(), totals.grads.size() * sizeof(float));
  return totals;
}

// Every parameter tensor of `got` within `tolerance` of `want`, each failure naming the tensor.
void expect_grads_close(const ParameterLayout& layout, const std::vector<float>& got,
                        const std::vector<float>& want, double tolerance, const std::string& what) {
  for (const auto& p : layout.params()) {
    const auto at = static_cast<size_t>(p.offset), n = static_cast<size_t>(p.numel);
    EXPECT_LE(relative_error({got.data() + at, n}, {want.data() + at, n}), tolerance)
        << what << ": gradient of " << p.name << " (max |a-b| / max |reference|)";
  }
}

// A GQA model whose head_dim the cuda attention supports.
ModelConfig cuda_config(bool tied) {
  ModelConfig c;
  c.vocab_size = 300, c.hidden_size = 128, c.intermediate_size = 256, c.num_hidden_layers = 2;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 64, c.tie_word_embeddings = tied;
  return c;
}

// Lengths across the attention kernels' tile sizes, a one-token example among them.
const std::vector<int64_t> kLengths = {1, 9, 64, 17, 2, 130, 65, 11, 100, 33};

// HF's fixture models have head_dim 8, which the cuda attention does not run. Each is embedded exactly in a
// head_dim-64 model: dim d < 4 of a head moves to 8d and dim d >= 4 to 32 + 8(d - 4), so RoPE's pair
// (d, d + 4) lands on (8d, 8d + 32), rotated at theta^(-16d/64) = theta^(-2d/8) as before; the other 56
// dims are zero in q, k and v, and stay so. q_proj is scaled by sqrt(64/8), which turns the softmax scale
// 1/sqrt(64) into HF's 1/sqrt(8). Gradients map back through the same positions (and the same factor).
class WideHeads {
 public:
  static constexpr int64_t kWide = 64;

  explicit WideHeads(const ModelConfig& narrow)
      : D_(narrow.head_dim), narrow_(narrow), wide_config_(widened(narrow)), wide_(wide_config_) {}

  const ModelConfig& config() const { return wide_config_; }
  const ParameterLayout& narrow_layout() const { return narrow_; }

  std::vector<float> embed(const std::vector<float>& params) const {
    std::vector<float> wide(static_cast<size_t>(wide_.total()), 0.0f);
    visit([&](size_t narrow, size_t wide_at, float scale) { wide[wide_at] = params[narrow] * scale; });
    return wide;
  }
  // d loss / d w = factor * d loss / d (factor * w) at the wide position.
  std::vector<float> gradients_back(const std::vector<float>& wide_grads) const {
    std::vector<float> grads(static_cast<size_t>(narrow_.total()));
    visit([&](size_t narrow, size_t wide_at, float scale) { grads[narrow] = wide_grads[wide_at] * scale; });
    return grads;
  }

 private:
  static ModelConfig widened(ModelConfig c) {
    c.head_dim = static_cast<int32_t>(kWide);
    return c;
  }
  // Where row or column i of a q/k/v/o projection (head i / D, dim i % D) goes in the wide model.
  int64_t wide_index(int64_t i) const {
    const int64_t head = i / D_, d = i % D_, half = D_ / 2, stride = kWide / D_;
    return head * kWide + (d < half ? d * stride : kWide / 2 + (d - half) * stride);
  }

  // fn(narrow index, wide index, factor) for every element of every narrow parameter.
  template <class Fn>
  void visit(Fn&& fn) const {
    const auto q_scale = static_cast<float>(std::sqrt(static_cast<double>(kWide) / static_cast<double>(D_)));
    for (const auto& p : narrow_.params()) {
      const ParamInfo& w = wide_.find(p.name);
      const bool q = p.name.ends_with("q_proj.weight");
      const bool rows = q || p.name.ends_with("k_proj.weight") || p.name.ends_with("v_proj.weight");
      const bool cols = p.name.ends_with("o_proj.weight");
      const int64_t in = p.shape.back();
      for (int64_t i = 0; i < p.numel; ++i) {
        const int64_t r = rows ? wide_index(i / in) : i / in, col = cols ? wide_index(i % in) : i % in;
        fn(static_cast<size_t>(p.offset + i), static_cast<size_t>(w.offset + r * w.shape.back() + col),
           q ? q_scale : 1.0f);
      }
    }
  }

  int64_t D_;
  ParameterLayout narrow_;
  ModelConfig wide_config_;
  ParameterLayout wide_;
};

// How far the model on `device` (on the head_dim-64 embedding) is from HF's float64 loss and gradients.
struct OracleErrors {
  double loss = 0;            // relative
  std::vector<double> grads;  // per tensor of the HF layout: max |a-b| / max |reference|
};

OracleErrors hf_oracle_errors(const std::string& name, Device device, bool bf16_weights) {
  const ModelWeights weights = load_model_dir(testing::kHfOracleDir + "/" + name);
  const WideHeads wide(weights.config);
  std::vector<float> params = wide.embed(weights.params);
  if (bf16_weights) params = bf16_rounded(std::move(params));
  const Totals got = run(wide.config(), params, {testing::hf_oracle_batch()}, device);
  const std::vector<float> grads = wide.gradients_back(got.grads);

  const double want = testing::hf_oracle_expected(name + ".loss_sum");
  OracleErrors e{std::abs(got.loss_sum - want) / want, {}};
  const auto reference = SafetensorsReader::open(testing::kHfOracleDir + "/expected.safetensors");
  for (const auto& p : wide.narrow_layout().params()) {
    std::vector<float> ref(static_cast<size_t>(p.numel));
    reference.read_f32(name + ".grad." + p.name, p.shape, ref);
    e.grads.push_back(relative_error({grads.data() + p.offset, ref.size()}, ref));
  }
  return e;
}

class HfOracleCuda : public ::testing::TestWithParam<std::string> {};

// The embedding itself is exact: the f32 cpu model on it still matches HF to f32 precision.
TEST_P(HfOracleCuda, HeadDim64EmbeddingMatchesTransformersOnCpu) {
  const OracleErrors e = hf_oracle_errors(GetParam(), Device::cpu, false);
  EXPECT_LE(e.loss, 1e-4);
  for (double g : e.grads) EXPECT_LE(g, 1e-4);
}

// These fixtures' large weights (std 0.3) make the gradients steep in them: rounding the weights to bf16
// alone moves the f32 cpu model's gradients by up to ~9% of a tensor's largest element (the loss by
// ~1e-4). So each gradient tensor may differ from HF by kGradTolerance plus twice what bf16 weights cost
// the cpu model; the well-conditioned random models below hold the plain kGradTolerance.
TEST_P(HfOracleCuda, Bf16LossAndGradientsMatchTransformersFloat64) {
  SKIP_WITHOUT_GPU();
  const std::string name = GetParam();
  const OracleErrors rounding = hf_oracle_errors(name, Device::cpu, true);
  const OracleErrors cuda = hf_oracle_errors(name, Device::cuda, false);
  EXPECT_LE(cuda.loss, kLossTolerance) << name << ": relative error of the loss sum vs HF float64";
  const ParameterLayout layout(load_model_dir(testing::kHfOracleDir + "/" + name).config);
  for (size_t i = 0; i < cuda.grads.size(); ++i)
    EXPECT_LE(cuda.grads[i], kGradTolerance + 2 * rounding.grads[i])
        << name << ": gradient of " << layout.params()[i].name << " vs HF float64 (max |a-b| / max |ref|); "
        << "bf16 weights alone cost the f32 cpu model " << rounding.grads[i];
}

INSTANTIATE_TEST_SUITE_P(Models, HfOracleCuda, ::testing::Values("hf_model", "hf_tied_model"));

TEST(LlamaCuda, PaddingAndFlattenGiveTheSameLossAndGradients) {
  SKIP_WITHOUT_GPU();
  const ModelConfig c = cuda_config(true);
  const auto split = random_split(kLengths, c.vocab_size, 5);
  const auto params = init_params(c, 2, 0.05);
  const auto padding = run(c, params, packed_batches(split, Strategy::kPadding, 256, 4), Device::cuda);
  const auto flatten = run(c, params, packed_batches(split, Strategy::kFlatten, 256, 4), Device::cuda);
  ASSERT_GT(padding.targets, 0);
  EXPECT_EQ(flatten.targets, padding.targets);
  EXPECT_NEAR(flatten.loss_sum, padding.loss_sum, kLossTolerance * padding.loss_sum);
  expect_grads_close(ParameterLayout(c), flatten.grads, padding.grads, kGradTolerance, "flatten vs padding");
}

// The trainer's order, with the host far ahead of the device: each batch is staged (copied on the side
// stream) while earlier passes run, and a slot is staged again while the pass that last read it may still
// be running. Every pass must still see its own batch: the loss and gradients of one-at-a-time passes.
TEST(LlamaCuda, BatchesStagedAheadOfTheirPassesGiveOneAtATimeResults) {
  SKIP_WITHOUT_GPU();
  const ModelConfig c = cuda_config(false);
  std::vector<int64_t> lengths;
  for (int i = 0; i < 4; ++i) lengths.insert(lengths.end(), {700, 1, 300, 45, 1000});
  const auto batches = packed_batches(random_split(lengths, c.vocab_size, 8), Strategy::kFlatten, 2048, 5);
  ASSERT_GE(batches.size(), 4u);
  const auto params = init_params(c, 3, 0.05);
  const Totals one_at_a_time = run(c, params, batches, Device::cuda);

  const auto n = static_cast<int64_t>(params.size());
  DecoderModel model(c, max_batch_tokens(batches), Device::cuda, DType::bf16);
  DeviceBuffer master(params.size() * sizeof(float)), grads(params.size() * sizeof(float));
  master.upload(params.data(), params.size() * sizeof(float));
  model.load_weights(master.view(DType::f32, {n}));
  auto staged = model.stage(batches[0]);
  for (size_t i = 0; i < batches.size(); ++i) {
    model.forward_backward(staged, grads.view(DType::f32, {n}), 1.0);
    if (i + 1 < batches.size()) staged = model.stage(batches[i + 1]);
  }
  EXPECT_THROW(model.forward(batches[0]), Error) << "the queued passes' loss is not taken yet";
  const LossSum ahead = model.take_loss();
  std::vector<float> ahead_grads(params.size());
  grads.download(ahead_grads.data(), ahead_grads.size() * sizeof(float));
  EXPECT_EQ(ahead.tokens, one_at_a_time.targets);
  EXPECT_NEAR(ahead.loss_sum, one_at_a_time.loss_sum, 1e-6 * one_at_a_time.loss_sum);
  // dQ sums over key tiles with atomics, so gradients may differ in the last bits, not more.
  expect_grads_close(ParameterLayout(c), ahead_grads, one_at_a_time.grads, 1e-4, "staged ahead");
}

// The bf16 model's loss and gradients summed over `batches`, recomputing activations as `recompute` says.
Totals run_recomputing(const ModelConfig& c, const std::vector<float>& params,
                       const std::vector<Batch>& batches, Recompute recompute) {
  const auto n = static_cast<int64_t>(params.size());
  DecoderModel model(c, max_batch_tokens(batches), Device::cuda, DType::bf16, {}, recompute);
  DeviceBuffer master(params.size() * sizeof(float)), grads(params.size() * sizeof(float));
  master.upload(params.data(), params.size() * sizeof(float));
  model.load_weights(master.view(DType::f32, {n}));
  Totals t;
  for (const auto& b : batches)
    t.loss_sum += model.forward_backward(b, grads.view(DType::f32, {n}), 1.0).loss_sum;
  t.grads.resize(params.size());
  grads.download(t.grads.data(), t.grads.size() * sizeof(float));
  return t;
}

// The bf16 model recomputing norms and SwiGLU, or whole layers, in the backward: the kernels repeat the
// forward's values, so only dQ's atomic summation order may differ.
TEST(LlamaCuda, RecomputedActivationsGiveTheSameGradients) {
  SKIP_WITHOUT_GPU();
  const ModelConfig c = cuda_config(true);
  const auto batches = packed_batches(random_split(kLengths, c.vocab_size, 4), Strategy::kFlatten, 256, 4);
  const auto params = init_params(c, 6, 0.05);
  const Totals kept = run_recomputing(c, params, batches, Recompute::none);
  for (Recompute mode : {Recompute::norms_and_swiglu, Recompute::layers}) {
    const Totals recomputed = run_recomputing(c, params, batches, mode);
    const std::string what = mode == Recompute::layers ? "layers recomputed" : "norms recomputed";
    EXPECT_NEAR(recomputed.loss_sum, kept.loss_sum, 1e-6 * kept.loss_sum) << what;
    expect_grads_close(ParameterLayout(c), recomputed.grads, kept.grads, 1e-4, what);
  }
}

// GPT-2, whose MLP runs its GELU in the GEMMs' epilogues (ops::linear_gelu_forward): recomputing whole layers
// repeats the fused forward (the same cuBLASLt plans, the same values). Recomputing the norms recomputes the
// GELU alone, with gelu_forward from the kept bf16 h where the epilogue took the GEMM's f32 sum, so act, and
// the down projection's weight gradient through it, may move by bf16 rounding: kGradTolerance there.
TEST(Gpt2Cuda, RecomputedActivationsGiveTheSameGradients) {
  SKIP_WITHOUT_GPU();
  ModelConfig c = testing::family_config("gpt2", 64, 300);
  c.max_position_embeddings = 512;
  const auto batches = packed_batches(random_split(kLengths, c.vocab_size, 4), Strategy::kFlatten, 256, 4);
  const auto params = testing::random_params(c, 6, 0.05);
  const Totals kept = run_recomputing(c, params, batches, Recompute::none);
  for (Recompute mode : {Recompute::norms_and_swiglu, Recompute::layers}) {
    const Totals recomputed = run_recomputing(c, params, batches, mode);
    const bool layers = mode == Recompute::layers;
    const std::string what = layers ? "layers recomputed" : "norms recomputed";
    EXPECT_NEAR(recomputed.loss_sum, kept.loss_sum, 1e-6 * kept.loss_sum) << what;
    expect_grads_close(ParameterLayout(c), recomputed.grads, kept.grads, layers ? 1e-4 : kGradTolerance,
                       what);
  }
}

TEST(LlamaCuda, Bf16MatchesTheF32CpuModel) {
  SKIP_WITHOUT_GPU();
  for (bool tied : {false, true}) {
    const ModelConfig c = cuda_config(tied);
    const auto split = random_split(kLengths, c.vocab_size, 9);
    const auto params = init_params(c, 4, 0.05);
    const auto batches = packed_batches(split, Strategy::kFlatten, 256, 5);  // two micro-batches accumulate
    const auto cpu = run(c, bf16_rounded(params), batches, Device::cpu);  // the weights the GPU computes with
    const auto gpu = run(c, params, batches, Device::cuda);
    const std::string what = fmt::format("cuda bf16 vs cpu f32 (tied={})", tied);
    EXPECT_EQ(gpu.targets, cpu.targets) << what;
    EXPECT_NEAR(gpu.loss_sum, cpu.loss_sum, kLossTolerance * cpu.loss_sum) << what;
    expect_grads_close(ParameterLayout(c), gpu.grads, cpu.grads, kGradTolerance, what);
  }
}

// Every family on cuda (LayerNorm and learned positions, biases, per-head q/k norms, sliding windows that
// end inside the attention kernels' tiles, rope scaling; BERT's post-norm encoder with bidirectional
// attention, exact GELU and the MLM head, on masked-LM batches) against the f32 cpu model, which matches HF
// (hf_families_test.cpp), and padding against flatten on cuda.
class FamilyCuda : public ::testing::TestWithParam<std::string> {
 protected:
  ModelConfig config() const {
    ModelConfig c = testing::family_config(GetParam(), 64, 300);
    c.max_position_embeddings = 512;
    if (c.sliding_window > 0) c.sliding_window = GetParam() == "mistral" ? 100 : 37;
    return c;
  }
};

TEST_P(FamilyCuda, Bf16MatchesTheF32CpuModelAndPaddingEqualsFlatten) {
  SKIP_WITHOUT_GPU();
  const ModelConfig c = config();
  std::vector<int64_t> lengths = kLengths;
  lengths.push_back(300);  // several tiles beyond the longest window
  const auto split = random_split(lengths, c.vocab_size, 9);
  const auto params = testing::random_params(c, 4, 0.05);
  const auto packed = [&](Strategy s) {
    return packed_batches(split, s, 512, 6, c.objective(), c.vocab_size);
  };
  const auto flatten = packed(Strategy::kFlatten);  // two micro-batches accumulate
  const auto cpu = run(c, bf16_rounded(params), flatten, Device::cpu);
  const auto gpu = run(c, params, flatten, Device::cuda);
  const std::string what = "cuda bf16 vs cpu f32, " + GetParam();
  EXPECT_EQ(gpu.targets, cpu.targets) << what;
  EXPECT_NEAR(gpu.loss_sum, cpu.loss_sum, kLossTolerance * cpu.loss_sum) << what;
  // Sharper families (Qwen3's q/k norms under yarn's attention factor) have steeper gradients: as for the
  // HF fixtures, each tensor gets twice what bf16 weights alone cost the f32 cpu model on top.
  const auto unrounded = run(c, params, flatten, Device::cpu);
  const ParameterLayout layout(c);
  const double model_scale = testing::max_abs(cpu.grads);
  for (const auto& p : layout.params()) {
    const auto at = static_cast<size_t>(p.offset), n = static_cast<size_t>(p.numel);
    const std::span<const float> want(cpu.grads.data() + at, n);
    const double steepness = testing::gradient_error({unrounded.grads.data() + at, n}, want, model_scale);
    EXPECT_LE(testing::gradient_error({gpu.grads.data() + at, n}, want, model_scale),
              kGradTolerance + 2 * steepness)
        << what << ": gradient of " << p.name << " (max |a-b| / max |reference|); bf16 weights alone cost "
        << "the f32 cpu model " << steepness;
  }
  const auto padding = run(c, params, packed(Strategy::kPadding), Device::cuda);
  EXPECT_EQ(padding.targets, gpu.targets);
  EXPECT_NEAR(padding.loss_sum, gpu.loss_sum, kLossTolerance * gpu.loss_sum) << GetParam();
  expect_grads_close(ParameterLayout(c), padding.grads, gpu.grads, kGradTolerance,
                     "padding vs flatten " + GetParam());
}

// The optimizer step in the backward on the GPU: each closed block holds the flat pass's gradients of its
// range (to the order of float atomics), in the device buffers the pass was given.
TEST_P(FamilyCuda, GradientBlocksHoldTheFlatPassesGradients) {
  SKIP_WITHOUT_GPU();
  const ModelConfig c = config();
  const auto split = random_split(kLengths, c.vocab_size, 5);
  const Batch batch = packed_batches(split, Strategy::kFlatten, 512, 10, c.objective(), c.vocab_size).at(0);
  const auto params = testing::random_params(c, 4, 0.05);
  const std::vector<Batch> one = {batch};
  const Totals flat = run(c, params, one, Device::cuda);

  const auto n = static_cast<int64_t>(params.size());
  DecoderModel model(c, batch.num_tokens(), Device::cuda, DType::bf16);
  DeviceBuffer master(params.size() * sizeof(float)), embeddings(params.size() * sizeof(float)),
      block(params.size() * sizeof(float));
  master.upload(params.data(), params.size() * sizeof(float));
  model.load_weights(master.view(DType::f32, {n}));
  std::vector<float> got(params.size(), std::numeric_limits<float>::quiet_NaN());
  const DecoderModel::GradientBlocks blocks{
      .open =
          [&](int64_t begin, int64_t end) {
            const Tensor g = (begin == 0 ? embeddings : block).view(DType::f32, {end - begin});
            zero_bytes(g.data, true, static_cast<size_t>(g.bytes()));
            return g;
          },
      .close =
          [&](int64_t begin, int64_t end, const Tensor& g) {
            EXPECT_EQ(g.data, (begin == 0 ? embeddings : block).data());
            copy_bytes(got.data() + begin, false, g.data, true,
                       static_cast<size_t>(end - begin) * sizeof(float));
          },
  };
  model.forward_backward(model.stage(batch), blocks, 1.0);
  const LossSum loss = model.take_loss();
  EXPECT_NEAR(loss.loss_sum, flat.loss_sum, 1e-6 * flat.loss_sum) << GetParam();
  expect_grads_close(ParameterLayout(c), got, flat.grads, 1e-3, "blocks vs flat " + GetParam());
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyCuda, ::testing::ValuesIn(testing::kFamilyVariants));

// BERT's MLM head runs on the labelled tokens alone on cuda as on the cpu: logit rows for those tokens, in
// order, that match the cpu's; and a batch without a labelled token (no rows to gather) takes no loss and
// adds no gradient.
TEST(BertCuda, MlmHeadRowsMatchTheCpuAndABatchWithoutLabelsAddsNothing) {
  SKIP_WITHOUT_GPU();
  const ModelConfig c = testing::family_config("bert", 64, 300);
  const auto params = testing::random_params(c, 4, 0.05);
  const Batch batch = packed_batches(random_split({40, 9, 70}, c.vocab_size, 2), Strategy::kFlatten, 128, 3,
                                     Objective::kMaskedLm, c.vocab_size)
                          .at(0);
  ASSERT_GT(batch.loss_tokens, 0);
  ASSERT_LT(batch.loss_tokens, batch.num_tokens());
  const auto n = static_cast<int64_t>(params.size());
  DecoderModel model(c, batch.num_tokens(), Device::cuda, DType::bf16);
  DeviceBuffer master(params.size() * sizeof(float)), grads(params.size() * sizeof(float));
  master.upload(params.data(), params.size() * sizeof(float));
  model.forward(batch, master.view(DType::f32, {n}));
  EXPECT_EQ(model.logits().size(0), batch.loss_tokens);
  DecoderModel cpu(c, batch.num_tokens());
  std::vector<float> rounded = bf16_rounded(params);  // the weights the GPU computes with
  cpu.forward(batch, Tensor::of(rounded.data(), {n}));
  EXPECT_LE(relative_error(testing::logit_rows(model, batch.loss_tokens),
                           testing::logit_rows(cpu, batch.loss_tokens)),
            kGradTolerance)
      << "the labelled tokens' logits, cuda bf16 vs cpu f32";

  Batch none = batch;
  none.labels.assign(none.labels.size(), kIgnoreLabel);
  const LossSum r = model.forward_backward(none, grads.view(DType::f32, {n}), 1.0);
  EXPECT_EQ(r.tokens, 0);
  EXPECT_EQ(r.loss_sum, 0.0);
  std::vector<float> got(params.size());
  grads.download(got.data(), got.size() * sizeof(float));
  EXPECT_EQ(testing::max_abs(got), 0.0);
}

TEST(LlamaCuda, LogitsRowReachesTheHostAndWeightsMustBeF32OnTheDevice) {
  SKIP_WITHOUT_GPU();
  const ModelConfig c = cuda_config(false);
  const auto params = init_params(c, 6, 0.05);
  const Batch batch = packed_batches(random_split({5, 3}, c.vocab_size, 1), Strategy::kFlatten, 64, 2).at(0);
  DecoderModel model(c, batch.num_tokens(), Device::cuda, DType::bf16);
  const auto n = static_cast<int64_t>(params.size());
  std::vector<float> host_params = params;
  EXPECT_THROW(model.load_weights(Tensor::of(host_params.data(), {n})), Error);  // on the cpu
  EXPECT_THROW(model.forward(batch), Error);                                     // nothing loaded
  DeviceBuffer master(params.size() * sizeof(float));
  master.upload(params.data(), params.size() * sizeof(float));
  model.forward(batch, master.view(DType::f32, {n}), HeadRows::every);
  EXPECT_EQ(model.logits().device, Device::cuda);
  EXPECT_EQ(model.logits().dtype, DType::bf16);

  DecoderModel cpu(c, batch.num_tokens());
  std::vector<float> rounded = bf16_rounded(params);  // the weights the GPU computes with
  cpu.forward(batch, Tensor::of(rounded.data(), {n}), HeadRows::every);
  std::vector<float> got(static_cast<size_t>(c.vocab_size)), want(got.size());
  const int64_t last = batch.num_tokens() - 1;
  model.copy_logits_row(last, got);
  cpu.copy_logits_row(last, want);
  EXPECT_LE(relative_error(got, want), kGradTolerance) << "last row of the logits, cuda bf16 vs cpu f32";
}

// The checks before any memory is allocated need no GPU.
TEST(LlamaPrecision, RejectsWhatNoBackendComputes) {
  ModelConfig c = cuda_config(false);
  EXPECT_THROW(DecoderModel(c, 8, Device::cpu, DType::bf16), Error);
  EXPECT_THROW(DecoderModel(c, 8, Device::cuda, DType::f32), Error);
  c.head_dim = 32;
  try {
    DecoderModel model(c, 8, Device::cuda, DType::bf16);
    FAIL() << "head_dim 32 was accepted on cuda";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim 32"), std::string::npos) << e.what();
  }
}

TEST(LlamaPrecision, CpuModelNeedsLoadedWeightsOfItsLayoutAndCopiesLogitRows) {
  const ModelConfig c = cuda_config(false);
  const Batch batch = packed_batches(random_split({5, 3}, c.vocab_size, 1), Strategy::kFlatten, 64, 2).at(0);
  DecoderModel model(c, batch.num_tokens());
  EXPECT_THROW(model.forward(batch), Error);
  std::vector<float> short_params(10);
  EXPECT_THROW(model.load_weights(Tensor::of(short_params.data(), {10})), Error);
  std::vector<double> wrong_type(static_cast<size_t>(model.layout().total()));
  EXPECT_THROW(model.load_weights(Tensor::of(wrong_type.data(), {model.layout().total()})), Error);

  const int64_t V = c.vocab_size, n = model.layout().total();
  std::vector<float> params = init_params(c, 3, 0.05), row(static_cast<size_t>(V));
  model.forward(batch, Tensor::of(params.data(), {n}), HeadRows::every);
  model.copy_logits_row(2, row);
  const int64_t width = DecoderModel::logit_row_width(V);  // the logits' rows are padded
  EXPECT_EQ(row[7], model.logits().ptr<float>()[2 * width + 7]);
  EXPECT_THROW(model.copy_logits_row(batch.num_tokens(), row), Error);
  DecoderModel f64(c, batch.num_tokens(), Device::cpu, DType::f64);
  std::vector<double> params64(params.begin(), params.end());
  f64.forward(batch, Tensor::of(params64.data(), {n}), HeadRows::every);
  f64.copy_logits_row(2, row);
  EXPECT_EQ(row[7], static_cast<float>(f64.logits().ptr<double>()[2 * width + 7]));
}

}  // namespace
}  // namespace pt
