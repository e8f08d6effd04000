// Small models of every supported family for the model tests: each exercises its family's choices (biases,
// LayerNorm and learned positions, per-head q/k norms, sliding windows shorter than the test examples,
// rope scaling) at sizes a float64 gradient check runs in seconds. head_dim is a parameter so that the cuda
// tests can use the kernels' head dims.
#pragma once

#include "model/config.h"
#include "model/parameters.h"

#include <random>
#include <string>
#include <vector>

namespace pt::testing {

inline const std::vector<std::string> kFamilyVariants = {"llama", "llama3_biases", "mistral", "qwen2",
                                                         "qwen3", "gpt2",          "bert"};

inline ModelConfig family_config(const std::string& variant, int32_t head_dim = 4, int32_t vocab = 50) {
  ModelConfig c;
  c.vocab_size = vocab, c.num_hidden_layers = 2, c.num_attention_heads = 2, c.num_key_value_heads = 1;
  c.head_dim = head_dim, c.hidden_size = 2 * head_dim, c.intermediate_size = 3 * head_dim;
  c.max_position_embeddings = 128, c.rope.theta = 100.0;
  if (variant == "llama3_biases") {  // Llama with attention_bias and mlp_bias, llama3 rotary scaling
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
    c.rope.type = "llama3", c.rope.factor = 8, c.rope.original_max_position_embeddings = 8;
  } else if (variant == "mistral") {  // a window on every layer
    c.family = "mistral", c.sliding_window = 3, c.windowed_layers = {true, true};
  } else if (variant == "qwen2") {  // q/k/v biases, a window on the second layer only, tied
    c.family = "qwen2", c.qkv_bias = true, c.tie_word_embeddings = true;
    c.sliding_window = 2, c.windowed_layers = {false, true};
  } else if (variant == "qwen3") {  // per-head q/k norms, heads * head_dim != hidden, yarn rotary
    c.family = "qwen3", c.qk_norm = true, c.qkv_bias = c.o_bias = true, c.num_attention_heads = 4;
    c.num_key_value_heads = 2, c.hidden_size = 3 * head_dim, c.tie_word_embeddings = true;
    c.rope.type = "yarn", c.rope.factor = 4, c.rope.original_max_position_embeddings = 8;
  } else if (variant == "gpt2") {
    c.family = "gpt2", c.norm = Norm::layer, c.positions = Positions::learned, c.mlp = Mlp::gelu;
    c.qkv_bias = c.o_bias = c.mlp_bias = true, c.num_key_value_heads = 2, c.tie_word_embeddings = true;
  } else if (variant == "bert") {  // post-norm encoder: embedding norm, token types, the MLM head
    c.family = "bert", c.norm = Norm::layer, c.positions = Positions::learned, c.mlp = Mlp::gelu_erf;
    c.qkv_bias = c.o_bias = c.mlp_bias = true, c.num_key_value_heads = 2, c.tie_word_embeddings = true;
    c.post_norm = c.embedding_norm = c.head_transform = c.lm_head_bias = true, c.causal = false;
    c.type_vocab_size = 2;
  }
  return c;
}

// Random values everywhere, biases and norm weights too (init's zeros and ones would hide a missing
// gradient term): normal(0, scale), norm weights uniform in [0.5, 1.5].
inline std::vector<float> random_params(const ModelConfig& c, uint64_t seed, double scale) {
  const ParameterLayout layout(c);
  std::vector<float> params(static_cast<size_t>(layout.total()));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::uniform_real_distribution<double> around_one(0.5, 1.5);
  for (const ParamInfo& p : layout.params())
    for (int64_t i = 0; i < p.numel; ++i)
      params[static_cast<size_t>(p.offset + i)] =
          static_cast<float>(p.role == ParamRole::norm ? around_one(rng) : normal(rng));
  return params;
}

// Whether p is an FFN weight the 2:4 tests make sparse: every layer's up projection (gate and up; c_fc;
// BERT's intermediate dense) and down projection.
inline bool is_sparse_ffn_weight(const ModelConfig& c, const ParamInfo& p) {
  const ParameterLayout layout(c);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const LayerParams& w = layout.layer(l);
    if ((p.offset >= w.w_up && p.offset < w.w_up + c.mlp_up_rows() * c.hidden_size) || p.offset == w.w_down)
      return true;
  }
  return false;
}

}  // namespace pt::testing
