#include "model/config.h"

#include "core/error.h"
#include "core/file.h"

#include <nlohmann/json.hpp>

namespace pt {

using nlohmann::json;

int64_t LlamaConfig::num_parameters() const {
  int64_t c = hidden_size, f = intermediate_size, d = head_dim;
  int64_t attn = c * d * (num_attention_heads * 2 + num_key_value_heads * 2);  // q, o, k, v
  int64_t layer = attn + 3 * c * f + 2 * c;
  int64_t embed = int64_t{vocab_size} * c;
  return num_hidden_layers * layer + c + embed * (tie_word_embeddings ? 1 : 2);
}

void LlamaConfig::validate(const std::string& origin) const {
  auto positive = [&](const char* name, int64_t v) {
    if (v <= 0) fail("{}: \"{}\" must be positive (got {})", origin, name, v);
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("intermediate_size", intermediate_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("num_key_value_heads", num_key_value_heads);
  positive("head_dim", head_dim);
  positive("max_position_embeddings", max_position_embeddings);
  if (num_attention_heads % num_key_value_heads != 0)
    fail("{}: num_attention_heads ({}) must be a multiple of num_key_value_heads ({})", origin,
         num_attention_heads, num_key_value_heads);
  if (head_dim % 2 != 0) fail("{}: head_dim ({}) must be even for rotary embeddings", origin, head_dim);
  if (!(rms_norm_eps > 0)) fail("{}: rms_norm_eps must be positive", origin);
  if (!(rope_theta > 0)) fail("{}: rope_theta must be positive", origin);
}

bool is_preset_name(const std::string& name) { return name == "tiny" || name == "110m" || name == "1b"; }

LlamaConfig preset_config(const std::string& name) {
  LlamaConfig c;
  if (name == "tiny") {  // trains visibly on 2 CPU cores in minutes; head_dim 64 also runs on the GPU
    c.hidden_size = 128, c.intermediate_size = 384, c.num_hidden_layers = 4;
    c.num_attention_heads = 2, c.num_key_value_heads = 1, c.max_position_embeddings = 2048;
    c.tie_word_embeddings = true;
  } else if (name == "110m") {  // ANCHORS.md's peer model
    c.hidden_size = 768, c.intermediate_size = 2048, c.num_hidden_layers = 12;
    c.num_attention_heads = 12, c.num_key_value_heads = 12, c.max_position_embeddings = 2048;
  } else if (name == "1b") {  // the Llama-3.2-1B shape
    c.hidden_size = 2048, c.intermediate_size = 8192, c.num_hidden_layers = 16;
    c.num_attention_heads = 32, c.num_key_value_heads = 8, c.max_position_embeddings = 8192;
    c.rope_theta = 500000.0f, c.tie_word_embeddings = true;
  } else {
    fail("unknown model preset \"{}\"; presets: tiny, 110m, 1b (or give a config.json path)", name);
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  return c;
}

LlamaConfig load_config(const std::string& path) {
  json j;
  try {
    j = json::parse(read_file(path));
  } catch (const json::parse_error& e) {
    fail("{}: not valid JSON ({})", path, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object with LlamaConfig fields", path);
  for (const char* unsupported : {"rope_scaling", "attention_bias", "mlp_bias"}) {
    if (j.contains(unsupported) && !j[unsupported].is_null() && j[unsupported] != false)
      fail("{}: \"{}\" is set; packtrain supports plain Llama (no rope scaling, no biases)", path,
           unsupported);
  }
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    fail("{}: \"hidden_act\" is {}; packtrain's FFN is SwiGLU (silu)", path, j["hidden_act"].dump());
  LlamaConfig c;
  auto get = [&](const char* name, auto& field, bool required) {
    if (!j.contains(name) || j[name].is_null()) {
      if (required) fail("{}: missing required field \"{}\"", path, name);
      return;
    }
    try {
      field = j[name].get<std::remove_reference_t<decltype(field)>>();
    } catch (const json::exception&) {
      fail("{}: field \"{}\" has the wrong type ({})", path, name, j[name].dump());
    }
  };
  get("vocab_size", c.vocab_size, true);
  get("hidden_size", c.hidden_size, true);
  get("intermediate_size", c.intermediate_size, true);
  get("num_hidden_layers", c.num_hidden_layers, true);
  get("num_attention_heads", c.num_attention_heads, true);
  c.num_key_value_heads = c.num_attention_heads;
  get("num_key_value_heads", c.num_key_value_heads, false);
  c.head_dim = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  get("head_dim", c.head_dim, false);
  get("rms_norm_eps", c.rms_norm_eps, false);
  get("rope_theta", c.rope_theta, false);
  // transformers 5 writes rope_parameters {rope_theta, rope_type} instead of a top-level rope_theta.
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const auto& rope = j["rope_parameters"];
    if (rope.contains("rope_type") && rope["rope_type"] != "default")
      fail("{}: rope_parameters.rope_type is {}; packtrain supports plain rotary embeddings (\"default\")",
           path, rope["rope_type"].dump());
    if (rope.contains("rope_theta")) {
      if (!rope["rope_theta"].is_number()) fail("{}: rope_parameters.rope_theta must be a number", path);
      c.rope_theta = rope["rope_theta"].get<float>();
    }
  }
  get("max_position_embeddings", c.max_position_embeddings, false);
  get("tie_word_embeddings", c.tie_word_embeddings, false);
  get("bos_token_id", c.bos_token_id, false);
  get("eos_token_id", c.eos_token_id, false);
  c.validate(path);
  return c;
}

std::string config_to_json(const LlamaConfig& c) {
  json j = {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"vocab_size", c.vocab_size},
            {"hidden_size", c.hidden_size},
            {"intermediate_size", c.intermediate_size},
            {"num_hidden_layers", c.num_hidden_layers},
            {"num_attention_heads", c.num_attention_heads},
            {"num_key_value_heads", c.num_key_value_heads},
            {"head_dim", c.head_dim},
            {"hidden_act", "silu"},
            {"rms_norm_eps", c.rms_norm_eps},
            {"rope_theta", c.rope_theta},
            {"rope_parameters", {{"rope_theta", c.rope_theta}, {"rope_type", "default"}}},
            {"max_position_embeddings", c.max_position_embeddings},
            {"tie_word_embeddings", c.tie_word_embeddings},
            {"attention_bias", false},
            {"mlp_bias", false},
            {"torch_dtype", "float32"}};
  if (c.bos_token_id >= 0) j["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_id >= 0) j["eos_token_id"] = c.eos_token_id;
  return j.dump(2) + "\n";
}

}  // namespace pt
