// config.json (model/families.cpp parse_config). A config that parses is one packtrain can build: its
// parameter count is computable, its rotary frequencies are finite for any batch, and what packtrain
// writes back for it (config_to_json) reads back to the same model. The count and the round trip are
// checked up to 4096 layers: both work layer by layer, and a config may ask for 2^31 (tiny) layers.
#include "fuzz_util.h"
#include "model/families.h"

#include <cmath>
#include <optional>

namespace {

// original_max_position_embeddings 0 stands for max_position_embeddings, which config_to_json writes out.
pt::RopeScaling rope_of(const pt::ModelConfig& c) {
  auto r = c.rope;
  if (r.original_max_position_embeddings == 0 && (r.type == "llama3" || r.type == "yarn"))
    r.original_max_position_embeddings = c.max_position_embeddings;
  return r;
}

bool same_model(const pt::ModelConfig& a, const pt::ModelConfig& b) {
  return a.family == b.family && a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size &&
         a.intermediate_size == b.intermediate_size && a.num_hidden_layers == b.num_hidden_layers &&
         a.num_attention_heads == b.num_attention_heads && a.num_key_value_heads == b.num_key_value_heads &&
         a.head_dim == b.head_dim && a.max_position_embeddings == b.max_position_embeddings &&
         a.norm == b.norm && a.norm_eps == b.norm_eps && a.positions == b.positions &&
         rope_of(a) == rope_of(b) && a.qkv_bias == b.qkv_bias && a.o_bias == b.o_bias &&
         a.qk_norm == b.qk_norm && a.sliding_window == b.sliding_window &&
         a.windowed_layers == b.windowed_layers && a.mlp == b.mlp && a.mlp_bias == b.mlp_bias &&
         a.tie_word_embeddings == b.tie_word_embeddings && a.bos_token_id == b.bos_token_id &&
         a.eos_token_id == b.eos_token_id;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<pt::ModelConfig> config;
  if (!pt::fuzz::parses([&] {
        config.emplace(pt::parse_config(std::string(pt::fuzz::as_text(data, size)), "config.json"));
      }))
    return 0;
  const pt::ModelConfig& c = *config;
  PT_FUZZ_CHECK(c.num_hidden_layers > 4096 || c.num_parameters() > 0);
  if (c.positions == pt::Positions::rope && c.head_dim <= 1024) {
    for (int64_t max_position : {int64_t{1}, int64_t{c.max_position_embeddings}, int64_t{1} << 20}) {
      auto f = pt::rope_frequencies(c.rope, c.head_dim, c.max_position_embeddings, max_position);
      PT_FUZZ_CHECK(f.inv_freq.size() == static_cast<size_t>(c.head_dim / 2));
      PT_FUZZ_CHECK(std::isfinite(f.attention_scale));
      for (double v : f.inv_freq) PT_FUZZ_CHECK(std::isfinite(v));
    }
  }
  if (c.num_hidden_layers <= 4096)
    PT_FUZZ_CHECK(same_model(c, pt::parse_config(pt::config_to_json(c), "config.json written back")));
  return 0;
}
