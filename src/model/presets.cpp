#include "model/presets.h"

#include "core/error.h"
#include "model/families.h"

#include <algorithm>
#include <functional>
#include <utility>

namespace pt {

namespace {

ModelConfig shape(const char* family, int32_t vocab, int32_t hidden, int32_t ffn, int32_t layers, int32_t heads,
                  int32_t kv_heads, int32_t head_dim, int32_t max_positions, bool tied) {
  ModelConfig c;
  c.family = family;
  c.vocab_size = vocab, c.hidden_size = hidden, c.intermediate_size = ffn, c.num_hidden_layers = layers;
  c.num_attention_heads = heads, c.num_key_value_heads = kv_heads, c.head_dim = head_dim;
  c.max_position_embeddings = max_positions, c.tie_word_embeddings = tied;
  return c;
}

ModelConfig gpt2(int32_t hidden, int32_t layers, int32_t heads) {
  ModelConfig c = shape("gpt2", 50257, hidden, 4 * hidden, layers, heads, heads, hidden / heads, 1024, true);
  c.norm = Norm::layer, c.positions = Positions::learned, c.mlp = Mlp::gelu;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.bos_token_id = c.eos_token_id = 50256;
  return c;
}

// Llama 3.1/3.2's rotary: theta 500000, llama3 scaling from 8192 positions.
ModelConfig llama3(int32_t hidden, int32_t ffn, int32_t layers, int32_t heads, int32_t head_dim, bool tied,
                   double factor) {
  ModelConfig c = shape("llama", 128256, hidden, ffn, layers, heads, 8, head_dim, 131072, tied);
  c.rope.type = "llama3", c.rope.theta = 500000, c.rope.factor = factor;
  c.rope.low_freq_factor = 1, c.rope.high_freq_factor = 4, c.rope.original_max_position_embeddings = 8192;
  c.bos_token_id = 128000, c.eos_token_id = 128001;
  return c;
}

ModelConfig qwen(const char* family, int32_t hidden, int32_t ffn, int32_t layers, int32_t heads, int32_t kv_heads,
                 int32_t head_dim, int32_t max_positions) {
  ModelConfig c = shape(family, 151936, hidden, ffn, layers, heads, kv_heads, head_dim, max_positions, true);
  c.norm_eps = 1e-6f, c.rope.theta = 1000000;
  c.windowed_layers.assign(static_cast<size_t>(layers), false);
  c.bos_token_id = c.eos_token_id = 151643;
  return c;
}

// packtrain's own Llama-style shapes; their vocab comes from the dataset's tokenizer.
ModelConfig own(int32_t hidden, int32_t ffn, int32_t layers, int32_t heads, int32_t kv_heads, int32_t max_positions,
                bool tied) {
  return shape("llama", 0, hidden, ffn, layers, heads, kv_heads, hidden / heads, max_positions, tied);
}

const std::vector<std::pair<const char*, std::function<ModelConfig()>>>& presets() {
  static const std::vector<std::pair<const char*, std::function<ModelConfig()>>> table = {
      // trains visibly on 2 CPU cores in minutes; head_dim 64 also runs on the GPU
      {"tiny", [] { return own(128, 384, 4, 2, 1, 2048, true); }},
      {"110m", [] { return own(768, 2048, 12, 12, 12, 2048, false); }},  // ANCHORS.md's peer model
      {"1b",
       [] {
         ModelConfig c = own(2048, 8192, 16, 32, 8, 8192, true);  // the Llama-3.2-1B shape, plain rotary
         c.rope.theta = 500000;
         return c;
       }},
      {"gpt2", [] { return gpt2(768, 12, 12); }},
      {"gpt2-medium", [] { return gpt2(1024, 24, 16); }},
      {"llama3.2-1b", [] { return llama3(2048, 8192, 16, 32, 64, true, 32); }},
      {"llama3.2-3b", [] { return llama3(3072, 8192, 28, 24, 128, true, 32); }},
      {"llama3.1-8b", [] { return llama3(4096, 14336, 32, 32, 128, false, 8); }},
      {"qwen2.5-0.5b",
       [] {
         ModelConfig c = qwen("qwen2", 896, 4864, 24, 14, 2, 64, 32768);
         c.qkv_bias = true;
         return c;
       }},
      {"qwen2.5-7b",  // Qwen2.5-7B: vocab 152064, untied
       [] {
         ModelConfig c = qwen("qwen2", 3584, 18944, 28, 28, 4, 128, 131072);
         c.vocab_size = 152064, c.tie_word_embeddings = false, c.qkv_bias = true;
         return c;
       }},
      {"qwen3-0.6b",
       [] {
         ModelConfig c = qwen("qwen3", 1024, 3072, 28, 16, 8, 128, 40960);
         c.qk_norm = true, c.eos_token_id = 151645;
         return c;
       }},
      // bert-base-uncased as BertForMaskedLM, read as its config.json is, so that the family's choices
      // have one source (model/families.cpp).
      {"bert-base",
       [] {
         return parse_config(R"({"model_type": "bert", "architectures": ["BertForMaskedLM"],
             "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
             "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2,
             "layer_norm_eps": 1e-12, "hidden_act": "gelu", "pad_token_id": 0})",
                             "preset bert-base");
       }},
      {"mistral-7b",  // Mistral-7B-v0.1: a 4096-token sliding window on every layer
       [] {
         ModelConfig c = shape("mistral", 32000, 4096, 14336, 32, 32, 8, 128, 32768, false);
         c.sliding_window = 4096, c.windowed_layers.assign(32, true);
         c.bos_token_id = 1, c.eos_token_id = 2;
         return c;
       }},
  };
  return table;
}

}  // namespace

std::string preset_names() {
  std::string out;
  for (const auto& [name, make] : presets()) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

bool is_preset_name(const std::string& name) {
  const auto& p = presets();
  return std::any_of(p.begin(), p.end(), [&](const auto& entry) { return name == entry.first; });
}

ModelConfig preset_config(const std::string& name) {
  for (const auto& [preset, make] : presets())
    if (name == preset) return make();
  fail("unknown model preset \"{}\"; presets: {} (or give a config.json path)", name, preset_names());
}

}  // namespace pt
