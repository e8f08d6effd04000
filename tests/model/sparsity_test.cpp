// 2:4 sparse FFN training in the model: the sparse model is the dense model on masked weights (forward,
// and the weight gradients of the masked model with dense dW, straight-through to the masters), MVUE dW is
// an unbiased, seeded estimate of dense dW, the masks are transposable 2:4, masked decay reaches only the
// pruned weights, and the schedule and the flags behave as documented.
#include "model/sparsity.h"
#include "core/error.h"
#include "model/batches.h"
#include "model/decoder.h"
#include "model/family_configs.h"
#include "model/init.h"
#include "ops/sparse_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace pt {
namespace {

using testing::packed_batches;
using testing::random_split;

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 13, c.hidden_size = 8, c.intermediate_size = 12, c.num_hidden_layers = 2;
  c.num_attention_heads = 2, c.num_key_value_heads = 1, c.head_dim = 4, c.rope.theta = 100.0;
  return c;
}

SparsityConfig sparse_config(WeightGrad dw) {
  SparsityConfig s;
  s.enabled = true;
  s.weight_grad = dw;
  return s;
}

Batch one_batch(const ModelConfig& c, uint64_t seed) {
  auto batches = packed_batches(random_split({5, 9, 3, 7}, c.vocab_size, seed), Strategy::kFlatten, 64, 4,
                                c.objective(), c.vocab_size);
  EXPECT_EQ(batches.size(), 1u);
  return batches.at(0);
}

template <class T>
Tensor flat(std::vector<T>& v) {
  return Tensor::of(v.data(), {static_cast<int64_t>(v.size())});
}

// The masks applied to a copy of flat host params, through the masks' HF names.
template <class T>
std::vector<T> masked(std::vector<T> params, const FfnMasks& masks, const ParameterLayout& layout) {
  for (const MaskTensor& m : masks.to_host()) {
    const ParamInfo& p = layout.find(m.name);
    EXPECT_EQ(m.shape, p.flat_shape()) << m.name;
    for (int64_t i = 0; i < p.numel; ++i)
      if (!m.values[static_cast<size_t>(i)]) params[static_cast<size_t>(p.offset + i)] = 0;
  }
  return params;
}

// init_params widened to f64, for the f64 models of the gradient tests.
std::vector<double> f64_params(const ModelConfig& c, uint64_t seed, double scale) {
  std::vector<double> params;
  for (float x : init_params(c, seed, scale)) params.push_back(x);
  return params;
}

// Loss and gradients (grad_scale 1) of one batch.
template <class T>
struct Pass {
  LossSum loss;
  std::vector<T> grads;
};

template <class T>
Pass<T> run(DecoderModel& model, std::vector<T>& params, const Batch& batch) {
  Pass<T> r;
  r.grads.assign(params.size(), T(0));
  r.loss = model.forward_backward(batch, flat(params), flat(r.grads), 1.0);
  return r;
}

double max_abs(std::span<const double> v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// Llama's SwiGLU MLP, GPT-2's GELU one (c_fc, c_proj; biases, LayerNorm, learned positions around it) and
// BERT's exact-GELU one (post-norm, on masked-LM batches).
class SparseFamily : public ::testing::TestWithParam<std::string> {
 protected:
  ModelConfig config() const {
    if (GetParam() == "llama") return small_config();
    ModelConfig c = testing::family_config(GetParam());
    c.vocab_size = 13;
    return c;
  }
};

TEST_P(SparseFamily, ForwardEqualsTheDenseModelOnMaskedWeights) {
  const ModelConfig c = config();
  const Batch batch = one_batch(c, 3);
  std::vector<float> params = init_params(c, 5, 0.3);
  DecoderModel sparse(c, batch.num_tokens(), Device::cpu, DType::f32, sparse_config(WeightGrad::mvue));
  FfnMasks masks(c, sparse_config(WeightGrad::mvue), Device::cpu);
  masks.recompute(flat(params));
  sparse.set_masks(&masks);
  const double got = sparse.forward(batch, flat(params)).loss_sum;
  std::vector<float> pruned = masked(params, masks, sparse.layout());
  DecoderModel dense(c, batch.num_tokens());
  const double want = dense.forward(batch, flat(pruned)).loss_sum;
  const double unpruned = dense.forward(batch, flat(params)).loss_sum;
  EXPECT_NEAR(got, want, 1e-6 * want);
  EXPECT_GT(std::abs(unpruned - want), 1e-3 * want) << "pruning half the FFN weights should change the loss";
  // Without masks the same model is dense again, on the unchanged masters.
  sparse.set_masks(nullptr);
  EXPECT_NEAR(sparse.forward(batch, flat(params)).loss_sum, unpruned, 1e-6 * unpruned);
}

// With dense dW the sparse model's gradients are the dense model's gradients at the masked weights: for
// kept weights that is the derivative of the masked model (finite differences agree), for pruned weights
// the straight-through estimate (the masked model itself does not depend on them).
TEST_P(SparseFamily, DenseDwGradientsAreThoseOfTheMaskedModelStraightThrough) {
  const ModelConfig c = config();
  const Batch batch = one_batch(c, 7);
  const std::vector<float> init = init_params(c, 11, 0.5);
  std::vector<double> params(init.begin(), init.end());
  DecoderModel sparse(c, batch.num_tokens(), Device::cpu, DType::f64, sparse_config(WeightGrad::dense));
  FfnMasks masks(c, sparse_config(WeightGrad::dense), Device::cpu);
  masks.recompute(flat(params));
  sparse.set_masks(&masks);
  const Pass<double> got = run(sparse, params, batch);

  std::vector<double> pruned = masked(params, masks, sparse.layout());
  DecoderModel dense(c, batch.num_tokens(), Device::cpu, DType::f64);
  const Pass<double> want = run(dense, pruned, batch);
  EXPECT_NEAR(got.loss.loss_sum, want.loss.loss_sum, 1e-12 * want.loss.loss_sum);
  for (const auto& p : sparse.layout().params()) {
    const std::span<const double> g(got.grads.data() + p.offset, static_cast<size_t>(p.numel));
    const std::span<const double> w(want.grads.data() + p.offset, static_cast<size_t>(p.numel));
    double diff = 0;
    for (size_t i = 0; i < g.size(); ++i) diff = std::max(diff, std::abs(g[i] - w[i]));
    EXPECT_LE(diff, 1e-10 * max_abs(w)) << p.name;
  }

  // Finite differences of the sparse model (masks held) at kept and pruned FFN weights.
  int kept_checked = 0, pruned_checked = 0;
  for (const auto& p : sparse.layout().params()) {
    if (!testing::is_sparse_ffn_weight(c, p)) continue;
    for (int64_t k = 0; k < p.numel; k += 5) {
      const auto i = static_cast<size_t>(p.offset + k);
      const bool kept = pruned[i] != 0;
      const double saved = params[i], h = 1e-6;
      params[i] = saved + h;
      const double up = sparse.forward(batch, flat(params)).loss_sum;
      params[i] = saved - h;
      const double down = sparse.forward(batch, flat(params)).loss_sum;
      params[i] = saved;
      const double numeric = (up - down) / (2 * h);
      if (kept) {
        ++kept_checked;
        EXPECT_NEAR(got.grads[i], numeric, 1e-7 + 1e-5 * std::abs(numeric)) << p.name << "[" << k << "] kept";
      } else {
        ++pruned_checked;
        EXPECT_EQ(numeric, 0.0) << p.name << "[" << k << "]: the masked model depends on a pruned weight";
        EXPECT_NE(got.grads[i], 0.0) << p.name << "[" << k << "]: no straight-through gradient";
      }
    }
  }
  EXPECT_GT(kept_checked, 10);
  EXPECT_GT(pruned_checked, 10);
}

INSTANTIATE_TEST_SUITE_P(Families, SparseFamily, ::testing::Values("llama", "gpt2", "bert"));

// MVUE prunes only the output gradients that feed dW: the loss and every other gradient equal dense dW's;
// the sparse weights' gradients are seeded draws whose mean over seeds is dense dW.
TEST_P(SparseFamily, MvueDwIsASeededUnbiasedEstimateOfDenseDw) {
  const ModelConfig c = config();
  const Batch batch = one_batch(c, 9);
  std::vector<double> params = f64_params(c, 13, 0.4);
  FfnMasks masks(c, sparse_config(WeightGrad::mvue), Device::cpu);
  masks.recompute(flat(params));
  DecoderModel dense_dw(c, batch.num_tokens(), Device::cpu, DType::f64, sparse_config(WeightGrad::dense));
  DecoderModel mvue(c, batch.num_tokens(), Device::cpu, DType::f64, sparse_config(WeightGrad::mvue));
  dense_dw.set_masks(&masks);
  mvue.set_masks(&masks);
  const Pass<double> want = run(dense_dw, params, batch);

  mvue.set_mvue_seed({1, 2, 0});
  const Pass<double> a = run(mvue, params, batch), again = run(mvue, params, batch);
  EXPECT_EQ(a.grads, again.grads) << "the same seed must draw the same pruning";
  mvue.set_mvue_seed({1, 2, 1});  // another micro-batch
  const Pass<double> b = run(mvue, params, batch);
  EXPECT_NE(a.grads, b.grads);
  EXPECT_EQ(a.loss.loss_sum, want.loss.loss_sum);

  const int kSeeds = 400;
  std::vector<double> mean(params.size(), 0.0);
  for (int s = 0; s < kSeeds; ++s) {
    mvue.set_mvue_seed({7, s, 0});
    const Pass<double> r = run(mvue, params, batch);
    for (size_t i = 0; i < mean.size(); ++i) mean[i] += r.grads[i] / kSeeds;
  }
  for (const auto& p : mvue.layout().params()) {
    const auto at = static_cast<size_t>(p.offset), n = static_cast<size_t>(p.numel);
    const std::span<const double> w(want.grads.data() + at, n);
    double one_draw = 0, averaged = 0;
    for (size_t i = 0; i < n; ++i) {
      one_draw = std::max(one_draw, std::abs(a.grads[at + i] - w[i]));
      averaged = std::max(averaged, std::abs(mean[at + i] - w[i]));
    }
    if (!testing::is_sparse_ffn_weight(c, p)) {
      EXPECT_LE(one_draw, 1e-12 * max_abs(w)) << p.name << ": only the sparse linears' dW is pruned";
      continue;
    }
    // A draw is off by a large part of the gradient; the mean of 400 by about 1/20 of that.
    EXPECT_GT(one_draw, 0.05 * max_abs(w)) << p.name << ": MVUE pruned nothing";
    EXPECT_LT(averaged, 0.25 * one_draw) << p.name << ": the mean over seeds does not approach dense dW";
  }
}

// Recomputing whole layers reruns the sparse forward GEMMs; with the same MVUE seed the backward draws the
// same pruning, so loss and gradients are those of the model that kept its activations, to the bit.
TEST(SparseModel, RecomputedLayersGiveTheSameGradients) {
  const ModelConfig c = small_config();
  const Batch batch = one_batch(c, 4);
  std::vector<double> params = f64_params(c, 5, 0.4);
  FfnMasks masks(c, sparse_config(WeightGrad::mvue), Device::cpu);
  masks.recompute(flat(params));
  auto run_with = [&](Recompute recompute) {
    DecoderModel model(c, batch.num_tokens(), Device::cpu, DType::f64, sparse_config(WeightGrad::mvue),
                       recompute);
    model.set_masks(&masks);
    model.set_mvue_seed({3, 1, 0});
    return run(model, params, batch);
  };
  const Pass<double> kept = run_with(Recompute::none), recomputed = run_with(Recompute::layers);
  EXPECT_EQ(recomputed.loss.loss_sum, kept.loss.loss_sum);
  EXPECT_EQ(recomputed.grads, kept.grads);
}

TEST(SparseModel, MasksAreTransposable24AndFollowTheWeights) {
  const ModelConfig c = small_config();
  std::vector<float> params = init_params(c, 21, 0.3);
  SparsityConfig s = sparse_config(WeightGrad::mvue);
  s.gate_up = false;  // down only
  FfnMasks masks(c, s, Device::cpu);
  ASSERT_EQ(masks.linears().size(), 2u);
  EXPECT_EQ(masks.find(0, FfnLinear::gate_up), nullptr);
  ASSERT_NE(masks.find(1, FfnLinear::down), nullptr);
  EXPECT_FALSE(masks.computed());
  const MaskUpdate first = masks.recompute(flat(params));
  EXPECT_TRUE(first.first);
  EXPECT_EQ(first.entries, 2 * c.hidden_size * c.intermediate_size);
  for (const auto& l : masks.linears()) {
    const uint8_t* m = l.mask.ptr<uint8_t>();
    for (int64_t br = 0; br < l.rows; br += 4)
      for (int64_t bc = 0; bc < l.cols; bc += 4)
        for (int64_t i = 0; i < 4; ++i) {
          int row = 0, col = 0;
          for (int64_t j = 0; j < 4; ++j) {
            row += m[(br + i) * l.cols + bc + j];
            col += m[(br + j) * l.cols + bc + i];
          }
          EXPECT_EQ(row, 2) << "layer " << l.layer << " block (" << br << ", " << bc << ") row " << i;
          EXPECT_EQ(col, 2) << "layer " << l.layer << " block (" << br << ", " << bc << ") column " << i;
        }
  }
  // Unchanged weights keep their masks; shrinking the kept weights of one block moves its mask.
  EXPECT_EQ(masks.recompute(flat(params)).flips, 0);
  const auto& down = masks.linears()[0];
  const uint8_t* m = down.mask.ptr<uint8_t>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j)
      if (m[i * down.cols + j]) params[static_cast<size_t>(down.offset + i * down.cols + j)] *= 1e-3f;
  const MaskUpdate moved = masks.recompute(flat(params));
  EXPECT_FALSE(moved.first);
  EXPECT_EQ(moved.flips, 16);  // every entry of the block: its kept and pruned entries swap
  EXPECT_DOUBLE_EQ(moved.flip_rate(), 16.0 / static_cast<double>(moved.entries));
}

TEST(SparseModel, MaskedDecayReachesOnlyPrunedSparseWeights) {
  const ModelConfig c = small_config();
  std::vector<float> params = init_params(c, 3, 0.3);
  FfnMasks masks(c, sparse_config(WeightGrad::mvue), Device::cpu);
  masks.recompute(flat(params));
  const std::vector<float> pruned = masked(params, masks, ParameterLayout(c));
  std::vector<float> grads(params.size(), 1.0f);
  const double lambda = 0.25;
  masks.masked_decay(flat(params), lambda, flat(grads));
  int64_t decayed = 0;
  const ParameterLayout layout(c);
  for (const auto& p : layout.params()) {
    const bool sparse_weight = testing::is_sparse_ffn_weight(c, p);
    for (int64_t k = 0; k < p.numel; ++k) {
      const auto i = static_cast<size_t>(p.offset + k);
      const bool pruned_here = sparse_weight && pruned[i] == 0 && params[i] != 0;
      const float want = pruned_here ? static_cast<float>(1.0 + lambda * params[i]) : 1.0f;
      EXPECT_FLOAT_EQ(grads[i], want) << p.name << "[" << k << "]";
      decayed += pruned_here;
    }
  }
  EXPECT_EQ(decayed, c.num_hidden_layers * 3 * c.hidden_size * c.intermediate_size / 2);
}

TEST(SparseModel, MasksRoundTripThroughTheHostPerHfTensor) {
  const ModelConfig c = small_config();
  std::vector<float> params = init_params(c, 8, 0.3);
  FfnMasks masks(c, sparse_config(WeightGrad::mvue), Device::cpu);
  masks.recompute(flat(params));
  const std::vector<MaskTensor> host = masks.to_host();
  ASSERT_EQ(host.size(), 6u);  // gate, up and down of two layers
  EXPECT_EQ(host[0].name, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(host[1].name, "model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(host[2].name, "model.layers.0.mlp.down_proj.weight");
  FfnMasks loaded(c, sparse_config(WeightGrad::mvue), Device::cpu);
  loaded.from_host(host, "test");
  EXPECT_TRUE(loaded.computed());
  EXPECT_EQ(loaded.recompute(flat(params)).flips, 0);

  std::vector<float> exported = params;
  masks.apply_on_host(exported);
  EXPECT_EQ(exported, masked(params, masks, ParameterLayout(c)));

  std::vector<MaskTensor> missing(host.begin(), host.end() - 1);
  try {
    FfnMasks(c, sparse_config(WeightGrad::mvue), Device::cpu).from_host(missing, "ckpt");
    FAIL() << "a missing mask was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.1.mlp.down_proj"), std::string::npos) << e.what();
  }
}

TEST(SparseModel, SetMasksChecksTheyBelongToTheModel) {
  const ModelConfig c = small_config();
  std::vector<float> params = init_params(c, 8, 0.3);
  FfnMasks masks(c, sparse_config(WeightGrad::mvue), Device::cpu);
  DecoderModel sparse(c, 16, Device::cpu, DType::f32, sparse_config(WeightGrad::mvue));
  EXPECT_THROW(sparse.set_masks(&masks), Error);  // not computed yet
  masks.recompute(flat(params));
  DecoderModel dense(c, 16);
  EXPECT_THROW(dense.set_masks(&masks), Error);
  SparsityConfig down_only = sparse_config(WeightGrad::mvue);
  down_only.gate_up = false;
  DecoderModel other(c, 16, Device::cpu, DType::f32, down_only);
  EXPECT_THROW(other.set_masks(&masks), Error);
  sparse.set_masks(&masks);
  EXPECT_TRUE(sparse.sparse_active());
}

TEST(SparsitySchedule, PhasesRecomputationAndDecayWarmupByStep) {
  SparsityConfig s = sparse_config(WeightGrad::mvue);
  s.dense_warmup = 2, s.dense_finetune = 0.25, s.mask_every = 3, s.masked_decay = 1e-4;
  s.masked_decay_warmup = 4;
  const SparsitySchedule sch(s, 12);  // dense 0-1, sparse 2-8, dense 9-11
  EXPECT_EQ(sch.sparse_begin(), 2);
  EXPECT_EQ(sch.sparse_end(), 9);
  std::vector<int64_t> sparse_steps, recomputed;
  for (int64_t i = 0; i < 12; ++i) {
    if (sch.sparse_at(i)) sparse_steps.push_back(i);
    if (sch.recompute_at(i)) recomputed.push_back(i);
  }
  EXPECT_EQ(sparse_steps, (std::vector<int64_t>{2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(recomputed, (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(sch.decay_at(1), 0.0);
  EXPECT_DOUBLE_EQ(sch.decay_at(2), 0.25e-4);
  EXPECT_DOUBLE_EQ(sch.decay_at(4), 0.75e-4);
  EXPECT_DOUBLE_EQ(sch.decay_at(5), 1e-4);
  EXPECT_DOUBLE_EQ(sch.decay_at(8), 1e-4);
  EXPECT_EQ(sch.decay_at(9), 0.0);
  // The default: the last sixth dense, masks from the first step.
  const SparsitySchedule defaults(sparse_config(WeightGrad::mvue), 60);
  EXPECT_EQ(defaults.sparse_begin(), 0);
  EXPECT_EQ(defaults.sparse_end(), 50);
  EXPECT_FALSE(SparsitySchedule(SparsityConfig{}, 60).sparse_at(0)) << "off by default";
}

void expect_error_naming(const std::string& needle, const std::function<void()>& fn) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SparsityConfig, BadSettingsAreErrorsNamingTheFlag) {
  const ModelConfig c = small_config();
  auto with = [&](auto change) {
    SparsityConfig s = sparse_config(WeightGrad::mvue);
    change(s);
    return [=] { s.validate(c, 60); };
  };
  EXPECT_NO_THROW(with([](SparsityConfig&) {})());
  expect_error_naming("--mask-every", with([](SparsityConfig& s) { s.mask_every = 0; }));
  expect_error_naming("--masked-decay", with([](SparsityConfig& s) { s.masked_decay = -1; }));
  expect_error_naming("--masked-decay-warmup", with([](SparsityConfig& s) { s.masked_decay_warmup = -1; }));
  expect_error_naming("--dense-finetune", with([](SparsityConfig& s) { s.dense_finetune = 1; }));
  expect_error_naming("--dense-warmup", with([](SparsityConfig& s) { s.dense_warmup = -2; }));
  expect_error_naming("no step", with([](SparsityConfig& s) { s.dense_warmup = 50; }));
  expect_error_naming("--sparse-layers", with([](SparsityConfig& s) { s.gate_up = s.down = false; }));
  ModelConfig odd = c;
  odd.intermediate_size = 10;
  expect_error_naming("multiples of 4", [&] { sparse_config(WeightGrad::mvue).validate(odd, 60); });
  SparsityConfig off;
  off.mask_every = 0;
  EXPECT_NO_THROW(off.validate(odd, 60)) << "a dense run ignores the sparsity settings";

  SparsityConfig s;
  parse_sparse_layers("down", s);
  EXPECT_FALSE(s.gate_up);
  EXPECT_TRUE(s.down);
  parse_sparse_layers("down,gate_up", s);
  EXPECT_TRUE(s.gate_up && s.down);
  EXPECT_EQ(s.layers(), "gate_up,down");
  expect_error_naming("--sparse-layers", [&] { parse_sparse_layers("gate,down", s); });
  expect_error_naming("--sparse-layers", [&] { parse_sparse_layers("", s); });
}

// auto resolves per device: the cpu's GEMMs are dense, so pruning the output gradient would buy nothing.
TEST(SparsityConfig, WeightGradParsesAndAutoIsDenseWhereTheDwGemmIsDense) {
  for (WeightGrad w : {WeightGrad::automatic, WeightGrad::mvue, WeightGrad::dense})
    EXPECT_EQ(parse_weight_grad(weight_grad_name(w)), w);
  expect_error_naming("--sparse-dw", [] { parse_weight_grad("MVUE"); });
  SparsityConfig s;
  EXPECT_EQ(s.weight_grad, WeightGrad::automatic);
  EXPECT_FALSE(ops::sparse_weight_grad_gemm(Device::cpu));
  EXPECT_EQ(s.weight_grad_on(Device::cpu), WeightGrad::dense);
  s.weight_grad = WeightGrad::mvue;
  EXPECT_EQ(s.weight_grad_on(Device::cpu), WeightGrad::mvue);
}

TEST(MvueSeed, DependsOnEveryPart) {
  const MvueSeed base{1, 2, 3};
  const uint64_t s = base.at(4, FfnLinear::down);
  EXPECT_EQ(s, (MvueSeed{1, 2, 3}.at(4, FfnLinear::down)));
  EXPECT_NE(s, (MvueSeed{0, 2, 3}.at(4, FfnLinear::down)));
  EXPECT_NE(s, (MvueSeed{1, 3, 3}.at(4, FfnLinear::down)));
  EXPECT_NE(s, (MvueSeed{1, 2, 4}.at(4, FfnLinear::down)));
  EXPECT_NE(s, base.at(5, FfnLinear::down));
  EXPECT_NE(s, base.at(4, FfnLinear::gate_up));
}

}  // namespace
}  // namespace pt
