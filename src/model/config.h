// Model configuration with Hugging Face LlamaConfig field names, read from and written to config.json,
// and the built-in presets.
#pragma once

#include <cstdint>
#include <string>

namespace pt {

struct LlamaConfig {
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_hidden_layers = 0;
  int32_t num_attention_heads = 0;
  int32_t num_key_value_heads = 0;
  int32_t head_dim = 0;  // hidden_size / num_attention_heads unless set
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int32_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  int32_t bos_token_id = -1;  // -1: none
  int32_t eos_token_id = -1;

  int64_t num_parameters() const;
  // Checks divisibility and ranges; throws pt::Error naming the field and `origin`.
  void validate(const std::string& origin) const;
};

// `name` is "tiny", "110m" or "1b"; vocab_size is left to the caller (it comes from the tokenizer).
LlamaConfig preset_config(const std::string& name);
bool is_preset_name(const std::string& name);

// Unknown fields are ignored (HF configs carry many); fields packtrain cannot honour (rope_scaling,
// attention_bias, mlp_bias, a non-silu hidden_act) are errors naming the field.
LlamaConfig load_config(const std::string& path);
std::string config_to_json(const LlamaConfig& c);  // HF config.json text (model_type "llama")

}  // namespace pt
