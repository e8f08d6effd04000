// Training FLOPs for MFU, against the count written out by hand for one segment.
#include "model/flops.h"

#include "model/family_configs.h"

#include <gtest/gtest.h>

namespace pt {
namespace {

Batch one_segment(int32_t L, int32_t labelled, Objective objective) {
  Batch b;
  b.rows = 1, b.row_len = L, b.row_real_len = {L}, b.cu_seqlens = {0, L};
  b.real_tokens = L, b.loss_tokens = labelled, b.objective = objective;
  return b;
}

TEST(TrainingFlops, SixPerMatmulParameterPerTokenPlusAttentionPairs) {
  const ModelConfig c = testing::family_config("llama");
  const double C = c.hidden_size, F = c.intermediate_size, D = c.head_dim, V = c.vocab_size;
  const double H = c.num_attention_heads, Hkv = c.num_key_value_heads, layers = c.num_hidden_layers;
  const double L = 10;
  const double params = layers * (C * D * (2 * H + 2 * Hkv) + 3 * C * F) + C * V;
  const double attention = layers * 12 * H * D * L * (L + 1) / 2;  // causal: query i sees i + 1 keys
  EXPECT_DOUBLE_EQ(training_flops(c, one_segment(10, 9, Objective::kCausalLm)), 6 * params * L + attention);
}

// BERT's head runs on the labelled tokens alone, and every query sees every key of its segment.
TEST(TrainingFlops, MaskedLmHeadCountsLabelledTokensAndAttentionIsBidirectional) {
  const ModelConfig c = testing::family_config("bert");
  const double C = c.hidden_size, F = c.intermediate_size, D = c.head_dim, V = c.vocab_size;
  const double H = c.num_attention_heads, Hkv = c.num_key_value_heads, layers = c.num_hidden_layers;
  const double L = 20, labelled = 3;
  const double layer_params = layers * (C * D * (2 * H + 2 * Hkv) + 2 * C * F), head = C * V + C * C;
  const double attention = layers * 12 * H * D * L * L;
  EXPECT_DOUBLE_EQ(training_flops(c, one_segment(20, 3, Objective::kMaskedLm)),
                   6 * (layer_params * L + head * labelled) + attention);
}

}  // namespace
}  // namespace pt
