// Every family's model (tests/model/family_configs.h) against finite differences in float64, across packing
// strategies, and across recompute modes, with random values in every parameter. Encoders (BERT) run on
// masked-LM batches, decoders on causal-LM ones; the head on the labelled tokens alone adds up to the head
// on every token.
#include "model/batches.h"
#include "model/compare.h"
#include "model/decoder.h"
#include "model/family_configs.h"
#include "model/generate.h"
#include "model/parameters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace pt {
namespace {

using testing::family_config;
using testing::max_batch_tokens;
using testing::packed_batches;
using testing::random_params;
using testing::random_split;

class DecoderFamily : public ::testing::TestWithParam<std::string> {
 protected:
  ModelConfig config() const { return family_config(GetParam()); }
  // The batches the family's model trains on.
  static std::vector<Batch> batches(const ModelConfig& c, const DatasetSplit& split, Strategy s,
                                    int32_t row_len, int32_t examples) {
    return packed_batches(split, s, row_len, examples, c.objective(), c.vocab_size);
  }
};

// Examples longer than every variant's window, a one-token one among them.
const std::vector<int64_t> kLengths = {1, 9, 4, 17, 2, 30, 6, 11};

TEST_P(DecoderFamily, GradientsMatchFiniteDifferencesInFloat64) {
  const ModelConfig c = config();
  auto split = random_split({1, 5, 3, 7}, c.vocab_size, 3);
  const Batch batch = batches(c, split, Strategy::kFlatten, 64, 4).at(0);
  DecoderModel model(c, batch.num_tokens(), Device::cpu, DType::f64);
  const auto init = random_params(c, 11, 0.5);  // large weights: gradients far from zero
  std::vector<double> params(init.begin(), init.end()), grads(params.size(), 0.0);
  const auto n = static_cast<int64_t>(params.size());
  const Tensor p = Tensor::of(params.data(), {n}), g = Tensor::of(grads.data(), {n});
  ASSERT_GT(model.forward_backward(batch, p, g, 1.0).tokens, 0);
  // Up to 6 elements of every parameter tensor, so each path is covered.
  for (const auto& info : model.layout().params()) {
    const int64_t samples = std::min<int64_t>(info.numel, 6);
    for (int64_t k = 0; k < samples; ++k) {
      const auto i = static_cast<size_t>(info.offset + k * info.numel / samples);
      const double saved = params[i], h = 1e-6;
      params[i] = saved + h;
      const double up = model.forward(batch, p).loss_sum;
      params[i] = saved - h;
      const double down = model.forward(batch, p).loss_sum;
      params[i] = saved;
      const double numeric = (up - down) / (2 * h);
      const double err =
          std::abs(numeric - grads[i]) / (1e-7 + 1e-5 * std::max(std::abs(numeric), std::abs(grads[i])));
      ASSERT_LE(err, 1.0) << info.name << "[" << k << "]: analytic " << grads[i] << ", numeric " << numeric;
    }
  }
}

double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(b[i])));
  }
  return diff / scale;
}

struct Totals {
  double loss = 0;
  int64_t targets = 0;
  std::vector<float> grads;
};

Totals run(const ModelConfig& c, const std::vector<Batch>& batches, const std::vector<float>& params,
           Recompute recompute = Recompute::none) {
  DecoderModel model(c, max_batch_tokens(batches), Device::cpu, DType::f32, {}, recompute);
  Totals t;
  t.grads.assign(params.size(), 0.0f);
  const auto n = static_cast<int64_t>(params.size());
  std::vector<float> weights = params;
  for (const Batch& b : batches) {
    const LossSum r =
        model.forward_backward(b, Tensor::of(weights.data(), {n}), Tensor::of(t.grads.data(), {n}), 0.5);
    t.loss += r.loss_sum, t.targets += r.tokens;
  }
  return t;
}

TEST_P(DecoderFamily, PackedStrategiesEqualPaddingAndConcatDoesNot) {
  const ModelConfig c = config();
  const auto split = random_split(kLengths, c.vocab_size, 5);
  const auto params = random_params(c, 2, 0.3);
  // Rows of 128 hold every example: concat-posid splits none.
  const auto packed = [&](Strategy s) { return batches(c, split, s, 128, 8); };
  const Totals padding = run(c, packed(Strategy::kPadding), params);
  for (Strategy s : {Strategy::kFlatten, Strategy::kBfd, Strategy::kConcatPosId}) {
    const Totals other = run(c, packed(s), params);
    EXPECT_EQ(other.targets, padding.targets) << strategy_name(s);
    EXPECT_NEAR(other.loss, padding.loss, 1e-5 * padding.loss) << strategy_name(s);
    EXPECT_LE(max_relative_difference(other.grads, padding.grads), 1e-5) << strategy_name(s);
  }
  // concat lets attention cross examples and runs positions on: the same targets, another loss.
  const Totals concat = run(c, packed(Strategy::kConcat), params);
  EXPECT_EQ(concat.targets, padding.targets);
  EXPECT_GT(std::abs(concat.loss - padding.loss), 1e-3 * padding.loss);
}

TEST_P(DecoderFamily, RecomputedActivationsGiveTheSameGradients) {
  const ModelConfig c = config();
  const auto flatten = batches(c, random_split(kLengths, c.vocab_size, 6), Strategy::kFlatten, 64, 4);
  const auto params = random_params(c, 7, 0.3);
  const Totals kept = run(c, flatten, params);
  for (Recompute mode : {Recompute::norms_and_swiglu, Recompute::layers}) {
    const Totals recomputed = run(c, flatten, params, mode);
    EXPECT_EQ(recomputed.loss, kept.loss) << static_cast<int>(mode);
    EXPECT_EQ(recomputed.grads, kept.grads) << static_cast<int>(mode);
  }
}

// The optimizer step in the backward (DecoderModel::GradientBlocks): every block of the layout is opened
// before the pass writes it and closed, in backward order (the head, the layers from the last, then the
// embeddings, which were opened first), holding exactly the flat pass's gradients of its range and nothing
// written past it, with recomputed layers too.
TEST_P(DecoderFamily, GradientBlocksHoldTheFlatPassesGradientsAndCloseInBackwardOrder) {
  const ModelConfig c = config();
  const Batch batch = batches(c, random_split(kLengths, c.vocab_size, 5), Strategy::kFlatten, 64, 8).at(0);
  const auto params = random_params(c, 3, 0.5);
  const auto n = std::ssize(params);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Recompute mode : {Recompute::none, Recompute::layers}) {
    DecoderModel model(c, batch.num_tokens(), Device::cpu, DType::f32, {}, mode);
    model.load_weights(Tensor::of(params.data(), {n}));
    std::vector<float> flat(params.size(), 0.0f);
    const LossSum want = model.forward_backward(batch, Tensor::of(flat.data(), {n}), 0.25);

    // Two buffers of every parameter's size, NaN past what a block is given.
    std::vector<float> embeddings(params.size()), block(params.size()), got(params.size(), nan);
    std::vector<std::pair<int64_t, int64_t>> opened, closed;
    const DecoderModel::GradientBlocks blocks{
        .open =
            [&](int64_t begin, int64_t end) {
              opened.emplace_back(begin, end);
              std::vector<float>& buffer = begin == 0 ? embeddings : block;
              std::fill(buffer.begin(), buffer.end(), nan);
              std::fill_n(buffer.begin(), end - begin, 0.0f);
              return Tensor::of(buffer.data(), {end - begin});
            },
        .close =
            [&](int64_t begin, int64_t end, const Tensor& grads) {
              closed.emplace_back(begin, end);
              const std::vector<float>& buffer = begin == 0 ? embeddings : block;
              EXPECT_EQ(grads.data, buffer.data());
              std::copy_n(buffer.begin(), end - begin, got.begin() + begin);
              EXPECT_TRUE(std::all_of(buffer.begin() + (end - begin), buffer.end(),
                                      [](float x) { return std::isnan(x); }))
                  << "written past block [" << begin << ", " << end << ")";
            },
    };
    model.forward_backward(model.stage(batch), blocks, 0.25);
    const LossSum loss = model.take_loss();
    EXPECT_EQ(loss.loss_sum, want.loss_sum);

    const ParameterLayout& layout = model.layout();
    std::vector<std::pair<int64_t, int64_t>> order = {{layout.head_begin(), n}};
    for (int l = c.num_hidden_layers; l-- > 0;)
      order.emplace_back(layout.layer_begin(l), layout.layer_begin(l + 1));
    order.emplace_back(0, layout.layer_begin(0));
    EXPECT_EQ(closed, order) << GetParam();
    std::rotate(order.begin(), order.end() - 1, order.end());  // the embeddings open first
    EXPECT_EQ(opened, order) << GetParam();
    EXPECT_EQ(got, flat) << GetParam() << " recompute " << static_cast<int>(mode);
  }
}

// The backward progress hook (data-parallel overlap): offsets never increase, end at 0, and every
// gradient at or after a reported offset already holds its final value for the pass (accumulated onto an
// earlier micro-batch's, tied LM head included), while the tensor just before it is still to change.
TEST_P(DecoderFamily, BackwardProgressReportsOnlyFinalGradients) {
  const ModelConfig c = config();
  auto split = random_split({4, 9, 3, 7, 6, 2}, c.vocab_size, 5);
  const auto two = batches(c, split, Strategy::kFlatten, 64, 3);
  ASSERT_EQ(two.size(), 2u);
  DecoderModel model(c, max_batch_tokens(two), Device::cpu, DType::f64);
  auto init = random_params(c, 7, 0.5);
  std::vector<double> params(init.begin(), init.end()), grads(params.size(), 0.0);
  const auto n = static_cast<int64_t>(params.size());
  Tensor p = Tensor::of(params.data(), {n}), g = Tensor::of(grads.data(), {n});
  model.forward_backward(two[0], p, g, 0.5);
  std::vector<std::pair<int64_t, std::vector<double>>> reports;
  model.set_backward_progress([&](int64_t offset) { reports.emplace_back(offset, grads); });
  model.forward_backward(two[1], g, 0.5);
  model.set_backward_progress({});
  model.forward(two[1]);
  ASSERT_EQ(reports.size(), static_cast<size_t>(c.num_hidden_layers) + 2) << GetParam();
  EXPECT_EQ(reports.back().first, 0);
  const auto& layout = model.layout();
  for (size_t r = 0; r < reports.size(); ++r) {
    const auto& [offset, snapshot] = reports[r];
    ASSERT_TRUE(offset >= 0 && offset < n) << offset;
    if (r > 0) {
      EXPECT_LE(offset, reports[r - 1].first) << "report " << r;
    }
    for (int64_t i = offset; i < n; ++i)
      ASSERT_EQ(snapshot[size_t(i)], grads[size_t(i)])
          << GetParam() << " report " << r << " offset " << offset << ": gradient " << i << " changed later";
    if (offset == 0) continue;
    // Not more conservative than needed: the tensor ending at the offset is not final yet.
    const auto before =
        std::find_if(layout.params().begin(), layout.params().end(),
                     [&](const ParamInfo& info) { return info.offset + info.numel == offset; });
    ASSERT_NE(before, layout.params().end());
    bool changes = false;
    for (int64_t i = before->offset; i < offset; ++i) changes |= snapshot[size_t(i)] != grads[size_t(i)];
    EXPECT_TRUE(changes) << GetParam() << ": " << before->name << " was final before report " << r;
  }
}

// A learned-position model refuses a batch reaching past its table, naming the limit.
TEST(DecoderFamilies, PositionsPastGpt2sTableAreAnError) {
  const ModelConfig c = family_config("gpt2");
  const auto batches = packed_batches(random_split({130}, c.vocab_size, 1), Strategy::kFlatten, 256, 1);
  DecoderModel model(c, max_batch_tokens(batches));
  std::vector<float> params = random_params(c, 1, 0.1);
  try {
    model.forward(batches[0], Tensor::of(params.data(), {static_cast<int64_t>(params.size())}));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("128 learned positions"), std::string::npos) << e.what();
  }
}

// An encoder predicts masked tokens; asked to continue text, it says so.
TEST(DecoderFamilies, BertDoesNotGenerate) {
  const ModelConfig c = family_config("bert");
  DecoderModel model(c, 16);
  std::vector<float> params = random_params(c, 1, 0.1);
  try {
    generate(model, Tensor::of(params.data(), {static_cast<int64_t>(params.size())}), {2, 3},
             SamplingOptions{}, std::nullopt, [](int32_t) {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("masked-LM encoder"), std::string::npos) << e.what();
  }
}

// The head runs on the labelled tokens alone where that pays (model/batch_inputs.h): gathered from the last
// layer's output, their gradient scattered back. Labels on a random half of the tokens and on the other
// half (each gathered) must add up to labels on every token, where the head's rows are all the tokens in
// order (masked LM: all gathered; causal LM: the head on every token, the last one without a target): the
// same loss, targets and gradients (float64 rounding), and a half's logit rows those of every token at its
// tokens. Each half spans two logit chunks. A batch without a target takes no loss and adds no gradient
// (the last layer's output gradient is zeros), and the next pass is unaffected.
class LabelledHead : public ::testing::TestWithParam<std::string> {};

TEST_P(LabelledHead, LabelledTokensAloneAddUpToEveryToken) {
  const ModelConfig c = family_config(GetParam());
  const int64_t chunk = DecoderModel::logit_chunk_tokens(c.vocab_size);
  const auto examples = static_cast<int32_t>((2 * chunk + 1600) / 100);  // of 100 tokens
  const auto split = random_split(std::vector<int64_t>(static_cast<size_t>(examples), 100), c.vocab_size, 8);
  Batch every =
      packed_batches(split, Strategy::kFlatten, examples * 100, examples, c.objective(), c.vocab_size).at(0);
  const int64_t T = every.num_tokens(), V = c.vocab_size;
  ASSERT_GT(T, 2 * chunk + 500);
  Batch half = every, other = every;
  std::mt19937_64 rng(3);
  for (size_t t = 0; t < every.labels.size(); ++t) {
    every.labels[t] = static_cast<int32_t>(rng() % static_cast<uint64_t>(V));
    const bool in_half = rng() % 2 == 0;
    half.labels[t] = in_half ? every.labels[t] : kIgnoreLabel;
    other.labels[t] = in_half ? kIgnoreLabel : every.labels[t];
  }
  // The tokens with a target: a causal LM's last token has none.
  const auto targeted = [](const Batch& b) {
    std::vector<int64_t> tokens;
    const std::vector<int32_t> targets = loss_targets(b);
    for (size_t t = 0; t < targets.size(); ++t)
      if (targets[t] != kIgnoreLabel) tokens.push_back(static_cast<int64_t>(t));
    return tokens;
  };
  DecoderModel model(c, T, Device::cpu, DType::f64);
  const auto init = random_params(c, 5, 0.5);
  std::vector<double> params(init.begin(), init.end());
  const auto n = static_cast<int64_t>(params.size());
  const Tensor p = Tensor::of(params.data(), {n});
  const auto pass = [&](const Batch& b, std::vector<double>& grads) {
    grads.assign(params.size(), 0.0);
    return model.forward_backward(b, p, Tensor::of(grads.data(), {n}), 1.0);
  };
  std::vector<double> g_every, g_half, g_other;
  const LossSum l_every = pass(every, g_every);
  EXPECT_EQ(model.head_gathered(), !c.causal);
  const LossSum l_half = pass(half, g_half);
  EXPECT_TRUE(model.head_gathered());
  const LossSum l_other = pass(other, g_other);
  EXPECT_EQ(l_every.tokens, static_cast<int64_t>(targeted(every).size()));
  EXPECT_GE(l_every.tokens, T - 1);
  ASSERT_GT(l_half.tokens, chunk);
  ASSERT_GT(l_other.tokens, chunk);
  EXPECT_EQ(l_half.tokens + l_other.tokens, l_every.tokens);
  EXPECT_NEAR(l_half.loss_sum + l_other.loss_sum, l_every.loss_sum, 1e-12 * l_every.loss_sum);
  double model_scale = 0;
  for (double g : g_every) model_scale = std::max(model_scale, std::abs(g));
  for (const ParamInfo& info : model.layout().params()) {
    double diff = 0, scale = 1e-5 * model_scale;  // a key bias: rounding noise around zero
    for (int64_t i = info.offset; i < info.offset + info.numel; ++i) {
      const auto k = static_cast<size_t>(i);
      diff = std::max(diff, std::abs(g_half[k] + g_other[k] - g_every[k]));
      scale = std::max(scale, std::abs(g_every[k]));
    }
    EXPECT_LE(diff, 1e-10 * scale) << info.name;
  }

  // The final chunks' logit rows (DecoderModel::logits): every token's from e0 on, the half's from h0 on.
  const std::vector<int64_t> half_tokens = targeted(half);
  model.forward(every, p);
  const int64_t e0 = T - model.logits().size(0);
  std::vector<float> every_rows(static_cast<size_t>((T - e0) * V));
  for (int64_t t = e0; t < T; ++t)
    model.copy_logits_row(t, std::span(every_rows).subspan(static_cast<size_t>((t - e0) * V), V));
  model.forward(half, p);
  const auto h = static_cast<int64_t>(half_tokens.size()), h0 = h - model.logits().size(0);
  EXPECT_EQ(h0, chunk);
  std::vector<float> row(static_cast<size_t>(V));
  int64_t compared = 0;
  for (int64_t r = h0; r < h; ++r) {
    const int64_t t = half_tokens[static_cast<size_t>(r)];
    if (t < e0) continue;
    model.copy_logits_row(r, row);
    const auto want = std::span(every_rows).subspan(static_cast<size_t>((t - e0) * V), V);
    EXPECT_LE(testing::relative_error(row, want), 1e-6) << "row " << r << ", token " << t;
    ++compared;
  }
  EXPECT_GT(compared, 100);
  EXPECT_THROW(model.copy_logits_row(h, row), Error);
  EXPECT_THROW(model.copy_logits_row(h0 - 1, row), Error);
  // Asked for every token's logits, the head runs on all of them, with the same loss.
  EXPECT_NEAR(model.forward(half, p, HeadRows::every).loss_sum, l_half.loss_sum, 1e-12 * l_half.loss_sum);
  EXPECT_FALSE(model.head_gathered());
  EXPECT_EQ(model.logits().size(0), T - e0);

  Batch none = every;
  none.labels.assign(none.labels.size(), kIgnoreLabel);
  std::vector<double> g_none;
  const LossSum l_none = pass(none, g_none);
  EXPECT_EQ(l_none.tokens, 0);
  EXPECT_EQ(l_none.loss_sum, 0.0);
  EXPECT_EQ(g_none, std::vector<double>(params.size(), 0.0));
  EXPECT_EQ(model.logits().size(0), 0);
  EXPECT_THROW(model.copy_logits_row(0, row), Error);
  std::vector<double> g_again;
  EXPECT_EQ(pass(half, g_again).loss_sum, l_half.loss_sum);
  EXPECT_EQ(g_again, g_half);
}

INSTANTIATE_TEST_SUITE_P(Objectives, LabelledHead, ::testing::Values("bert", "gpt2", "qwen3"));

INSTANTIATE_TEST_SUITE_P(Families, DecoderFamily, ::testing::ValuesIn(testing::kFamilyVariants));

}  // namespace
}  // namespace pt
