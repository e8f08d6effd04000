#include "model/families.h"

#include "core/error.h"
#include "core/file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <type_traits>

namespace pt {

using nlohmann::json;

namespace {

// The config.json fields of one document, read with errors that name the file, the field and its value.
class Fields {
 public:
  Fields(const json& j, std::string origin) : j_(j), origin_(std::move(origin)) {}
  const std::string& origin() const { return origin_; }
  bool has(const char* name) const { return j_.contains(name) && !j_[name].is_null(); }
  const json& raw(const char* name) const { return j_.at(name); }
  const json& doc() const { return j_; }

  template <class T>
  void get(const char* name, T& field, bool required = false) const {
    if (!has(name)) {
      if (required) fail("{}: missing required field \"{}\"", origin_, name);
      return;
    }
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      field = integer<T>(j_[name], name);
    } else if constexpr (std::is_floating_point_v<T>) {
      // 1e300 as a float was infinity (an infinite rms_norm_eps passed validate; JSON writes it as null).
      const json& v = j_[name];
      if (!v.is_number()) fail("{}: field \"{}\" has the wrong type ({})", origin_, name, v.dump());
      if (!(std::fabs(v.get<double>()) <= std::numeric_limits<T>::max()))
        fail("{}: field \"{}\" is {}; expected a finite number", origin_, name, v.dump());
      field = static_cast<T>(v.get<double>());
    } else {
      try {
        field = j_[name].get<T>();
      } catch (const json::exception&) {
        fail("{}: field \"{}\" has the wrong type ({})", origin_, name, j_[name].dump());
      }
    }
  }
  // A whole number that T holds (2048.0 too): nlohmann's get would wrap a larger one, and converting a
  // float outside T's range is undefined.
  template <class T>
  T integer(const json& v, const char* name) const {
    constexpr auto lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
    if (!v.is_number()) fail("{}: field \"{}\" has the wrong type ({})", origin_, name, v.dump());
    const double d = v.get<double>();
    const bool fits = v.is_number_unsigned()  ? v.get<uint64_t>() <= static_cast<uint64_t>(hi)
                      : v.is_number_integer() ? v.get<int64_t>() >= lo && v.get<int64_t>() <= hi
                                              : d == std::trunc(d) && d >= lo && d < hi + 1.0;
    if (!fits)
      fail("{}: field \"{}\" is {}; expected a whole number from {} to {}", origin_, name, v.dump(), lo, hi);
    return v.is_number_float() ? static_cast<T>(d) : v.get<T>();
  }
  template <class T>
  T value(const char* name, T fallback) const {
    get(name, fallback);
    return fallback;
  }

  // A field packtrain does not implement: an error unless absent, null or equal to `harmless`.
  void refuse(const char* name, const json& harmless, const char* why) const {
    if (has(name) && j_[name] != harmless)
      fail("{}: \"{}\" is {}; {}. Supported families: {}", origin_, name, j_[name].dump(), why,
           supported_families());
  }

 private:
  const json& j_;
  std::string origin_;
};

// Fields of other architectures that change what the model computes. A config carrying any of them (set
// to a non-null value) is refused by name instead of loaded as a plain decoder.
constexpr const char* kForeignFields[][2] = {
    {"num_experts", "mixture-of-experts layers are not implemented"},
    {"num_local_experts", "mixture-of-experts layers are not implemented"},
    {"n_routed_experts", "mixture-of-experts layers are not implemented"},
    {"moe_intermediate_size", "mixture-of-experts layers are not implemented"},
    {"vision_config", "multimodal models are not implemented"},
    {"audio_config", "multimodal models are not implemented"},
    {"text_config", "multimodal models are not implemented"},
    {"quantization_config", "quantized checkpoints are not supported; load the full-precision weights"},
    {"attn_logit_softcapping", "attention soft-capping is not implemented"},
    {"final_logit_softcapping", "logit soft-capping is not implemented"},
    {"embedding_multiplier", "scaled embeddings are not implemented"},
    {"residual_multiplier", "scaled residuals are not implemented"},
    {"logits_scaling", "scaled logits are not implemented"},
};

void refuse_foreign(const Fields& f) {
  for (const auto& [name, why] : kForeignFields) f.refuse(name, nullptr, why);
}

// How a Llama-like family spells its options.
struct LlamaLike {
  bool attention_bias;  // reads attention_bias (q, k, v and o biases)
  bool mlp_bias;        // reads mlp_bias
  bool qkv_bias;        // always has q, k and v biases (Qwen2)
  bool qk_norm;         // always has per-head q/k norms (Qwen3)
  enum { none, all_layers, per_layer } window;  // Mistral: sliding_window on every layer; Qwen: see below
};

struct Family;
using ReadConfig = ModelConfig (*)(const Fields&, const Family&);
using WriteConfig = void (*)(const ModelConfig&, const Family&, json&);

struct Family {
  const char* model_type;
  const char* architecture;
  const TensorNames* names;
  ReadConfig read;    // config.json's fields into the choices
  WriteConfig write;  // and back
  LlamaLike llama;    // read_llama_like's options
};

constexpr TensorNames kLlamaNames{
    "model.embed_tokens.weight", nullptr, "model.layers.{}.input_layernorm",
    "model.layers.{}.self_attn.q_proj", "model.layers.{}.self_attn.k_proj", "model.layers.{}.self_attn.v_proj",
    nullptr, "model.layers.{}.self_attn.o_proj", "model.layers.{}.self_attn.q_norm",
    "model.layers.{}.self_attn.k_norm", "model.layers.{}.post_attention_layernorm",
    "model.layers.{}.mlp.gate_proj", "model.layers.{}.mlp.up_proj", nullptr, "model.layers.{}.mlp.down_proj",
    "model.norm", "lm_head.weight", false};

constexpr TensorNames kGpt2Names{
    "transformer.wte.weight", "transformer.wpe.weight", "transformer.h.{}.ln_1", nullptr, nullptr, nullptr,
    "transformer.h.{}.attn.c_attn", "transformer.h.{}.attn.c_proj", nullptr, nullptr, "transformer.h.{}.ln_2",
    nullptr, nullptr, "transformer.h.{}.mlp.c_fc", "transformer.h.{}.mlp.c_proj", "transformer.ln_f",
    "lm_head.weight", true};

// BERT's post-norm layers keep HF's norm names: attention.output.LayerNorm is norm 1 (after attention),
// output.LayerNorm norm 2 (after the MLP); the MLM head's transform norm is the final norm.
constexpr TensorNames kBertNames{.embed = "bert.embeddings.word_embeddings.weight",
                                 .positions = "bert.embeddings.position_embeddings.weight",
                                 .attn_norm = "bert.encoder.layer.{}.attention.output.LayerNorm",
                                 .q = "bert.encoder.layer.{}.attention.self.query",
                                 .k = "bert.encoder.layer.{}.attention.self.key",
                                 .v = "bert.encoder.layer.{}.attention.self.value",
                                 .qkv = nullptr,
                                 .o = "bert.encoder.layer.{}.attention.output.dense",
                                 .q_norm = nullptr,
                                 .k_norm = nullptr,
                                 .ffn_norm = "bert.encoder.layer.{}.output.LayerNorm",
                                 .gate = nullptr,
                                 .up = nullptr,
                                 .fc = "bert.encoder.layer.{}.intermediate.dense",
                                 .down = "bert.encoder.layer.{}.output.dense",
                                 .final_norm = "cls.predictions.transform.LayerNorm",
                                 .lm_head = "cls.predictions.decoder.weight",
                                 .conv1d = false,
                                 .token_types = "bert.embeddings.token_type_embeddings.weight",
                                 .embed_norm = "bert.embeddings.LayerNorm",
                                 .head_dense = "cls.predictions.transform.dense",
                                 .lm_head_bias = "cls.predictions.bias"};

ModelConfig read_llama_like(const Fields& f, const Family& fam);
ModelConfig read_gpt2(const Fields& f, const Family& fam);
ModelConfig read_bert(const Fields& f, const Family& fam);
void write_llama_like(const ModelConfig& c, const Family& fam, json& j);
void write_gpt2(const ModelConfig& c, const Family& fam, json& j);
void write_bert(const ModelConfig& c, const Family& fam, json& j);

// One family a row.
// clang-format off
constexpr Family kFamilies[] = {
    {"llama", "LlamaForCausalLM", &kLlamaNames, read_llama_like, write_llama_like,
     {true, true, false, false, LlamaLike::none}},
    {"mistral", "MistralForCausalLM", &kLlamaNames, read_llama_like, write_llama_like,
     {false, false, false, false, LlamaLike::all_layers}},
    {"qwen2", "Qwen2ForCausalLM", &kLlamaNames, read_llama_like, write_llama_like,
     {false, false, true, false, LlamaLike::per_layer}},
    {"qwen3", "Qwen3ForCausalLM", &kLlamaNames, read_llama_like, write_llama_like,
     {true, false, false, true, LlamaLike::per_layer}},
    {"gpt2", "GPT2LMHeadModel", &kGpt2Names, read_gpt2, write_gpt2, {}},
    {"bert", "BertForMaskedLM", &kBertNames, read_bert, write_bert, {}},
};
// clang-format on

const Family& family(const std::string& model_type, const std::string& origin) {
  for (const Family& f : kFamilies)
    if (model_type == f.model_type) return f;
  fail("{}: model_type \"{}\" is not supported; supported families: {}", origin, model_type,
       supported_families());
}

// Qwen2/Qwen3: layer l slides when use_sliding_window and l >= max_window_layers, unless layer_types says
// per layer (transformers 5 writes it); "sliding_window" without use_sliding_window means no window.
void read_qwen_windows(const Fields& f, ModelConfig& c) {
  const bool use = f.value("use_sliding_window", false);
  const int32_t window = f.value("sliding_window", int32_t{0});
  c.windowed_layers.assign(static_cast<size_t>(c.num_hidden_layers), false);
  if (f.has("layer_types")) {
    std::vector<std::string> types;
    f.get("layer_types", types);
    if (types.size() != c.windowed_layers.size())
      fail("{}: \"layer_types\" lists {} layers, the model has {}", f.origin(), types.size(),
           c.num_hidden_layers);
    for (size_t l = 0; l < types.size(); ++l) {
      if (types[l] != "full_attention" && types[l] != "sliding_attention")
        fail("{}: layer_types[{}] is \"{}\"; packtrain implements \"full_attention\" and \"sliding_attention\"",
             f.origin(), l, types[l]);
      c.windowed_layers[l] = types[l] == "sliding_attention";
    }
  } else {
    // Below 0 slides every layer, as in transformers (layer_idx >= max_window_layers).
    const int32_t first = std::max(f.value("max_window_layers", c.num_hidden_layers), 0);
    for (int32_t l = first; l < c.num_hidden_layers; ++l) c.windowed_layers[static_cast<size_t>(l)] = true;
  }
  c.sliding_window = use ? window : 0;
}

ModelConfig read_llama_like(const Fields& f, const Family& fam) {
  const LlamaLike& o = fam.llama;
  ModelConfig c;
  c.family = fam.model_type;
  f.get("vocab_size", c.vocab_size, true);
  f.get("hidden_size", c.hidden_size, true);
  f.get("intermediate_size", c.intermediate_size, true);
  f.get("num_hidden_layers", c.num_hidden_layers, true);
  if (c.num_hidden_layers <= 0)  // before the per-layer windows are sized by it
    fail("{}: \"num_hidden_layers\" must be positive (got {})", f.origin(), c.num_hidden_layers);
  f.get("num_attention_heads", c.num_attention_heads, true);
  c.num_key_value_heads = f.value("num_key_value_heads", c.num_attention_heads);
  c.head_dim = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  f.get("head_dim", c.head_dim);
  f.get("rms_norm_eps", c.norm_eps);
  f.get("max_position_embeddings", c.max_position_embeddings);
  f.get("tie_word_embeddings", c.tie_word_embeddings);
  if (f.has("hidden_act") && f.raw("hidden_act") != "silu")
    fail("{}: \"hidden_act\" is {}; {} models use SwiGLU (\"silu\")", f.origin(), f.raw("hidden_act").dump(),
         fam.model_type);
  c.rope = parse_rope_scaling(f.doc(), f.origin(), 10000.0);
  if (o.attention_bias) c.qkv_bias = c.o_bias = f.value("attention_bias", false);
  else f.refuse("attention_bias", false, "this family has no attention biases");
  if (o.mlp_bias) c.mlp_bias = f.value("mlp_bias", false);
  else f.refuse("mlp_bias", false, "this family has no MLP biases");
  c.qkv_bias = c.qkv_bias || o.qkv_bias;
  c.qk_norm = o.qk_norm;
  switch (o.window) {
    case LlamaLike::none:
      f.refuse("sliding_window", nullptr, "this family has no sliding-window attention");
      f.refuse("use_sliding_window", false, "this family has no sliding-window attention");
      f.refuse("layer_types", nullptr, "this family has no per-layer attention types");
      break;
    case LlamaLike::all_layers:
      c.sliding_window = f.value("sliding_window", int32_t{0});
      c.windowed_layers.assign(static_cast<size_t>(c.num_hidden_layers), c.sliding_window > 0);
      f.refuse("layer_types", nullptr, "Mistral applies its window to every layer (per-layer types are Ministral's)");
      break;
    case LlamaLike::per_layer:
      read_qwen_windows(f, c);
      break;
  }
  return c;
}

ModelConfig read_gpt2(const Fields& f, const Family&) {
  ModelConfig c;
  c.family = "gpt2";
  f.get("vocab_size", c.vocab_size, true);
  f.get("n_embd", c.hidden_size, true);
  f.get("n_layer", c.num_hidden_layers, true);
  f.get("n_head", c.num_attention_heads, true);
  f.get("n_positions", c.max_position_embeddings, true);
  c.num_key_value_heads = c.num_attention_heads;
  c.head_dim = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  if (f.has("n_inner")) {
    f.get("n_inner", c.intermediate_size);
  } else {  // GPT-2's default, 4 n_embd
    if (c.hidden_size <= 0 || c.hidden_size > std::numeric_limits<int32_t>::max() / 4)
      fail("{}: \"n_embd\" is {}; without n_inner it must be positive and at most {} (n_inner = 4 n_embd)",
           f.origin(), c.hidden_size, std::numeric_limits<int32_t>::max() / 4);
    c.intermediate_size = 4 * c.hidden_size;
  }
  f.get("layer_norm_epsilon", c.norm_eps);
  c.tie_word_embeddings = f.value("tie_word_embeddings", true);
  if (!c.tie_word_embeddings) fail("{}: GPT-2 ties its LM head to the token embeddings; tie_word_embeddings must be true", f.origin());
  const std::string act = f.value("activation_function", std::string("gelu_new"));
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    fail("{}: \"activation_function\" is \"{}\"; packtrain's GPT-2 MLP is GELU with the tanh approximation "
         "(\"gelu_new\" or \"gelu_pytorch_tanh\")",
         f.origin(), act);
  f.refuse("scale_attn_weights", true, "packtrain scales attention scores by 1/sqrt(head_dim)");
  f.refuse("scale_attn_by_inverse_layer_idx", false, "per-layer attention scaling is not implemented");
  f.refuse("add_cross_attention", false, "cross-attention is not implemented");
  c.norm = Norm::layer;
  c.positions = Positions::learned;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.mlp = Mlp::gelu;
  return c;
}

ModelConfig read_bert(const Fields& f, const Family&) {
  ModelConfig c;
  c.family = "bert";
  f.get("vocab_size", c.vocab_size, true);
  f.get("hidden_size", c.hidden_size, true);
  f.get("intermediate_size", c.intermediate_size, true);
  f.get("num_hidden_layers", c.num_hidden_layers, true);
  f.get("num_attention_heads", c.num_attention_heads, true);
  if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0)
    fail(
        "{}: \"hidden_size\" ({}) must be a multiple of \"num_attention_heads\" ({}), as BERT's heads split "
        "it",
        f.origin(), c.hidden_size, c.num_attention_heads);
  c.num_key_value_heads = c.num_attention_heads;
  c.head_dim = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  c.max_position_embeddings = 512;  // BertConfig's defaults
  c.type_vocab_size = 2;
  c.norm_eps = 1e-12f;
  f.get("max_position_embeddings", c.max_position_embeddings);
  f.get("type_vocab_size", c.type_vocab_size);
  if (c.type_vocab_size <= 0)
    fail("{}: \"type_vocab_size\" is {}; BERT's token-type table needs at least the row of type 0",
         f.origin(), c.type_vocab_size);
  f.get("layer_norm_eps", c.norm_eps);
  c.tie_word_embeddings = f.value("tie_word_embeddings", true);
  const std::string act = f.value("hidden_act", std::string("gelu"));
  if (act != "gelu")
    fail("{}: \"hidden_act\" is \"{}\"; packtrain's BERT uses the exact GELU (\"gelu\")", f.origin(), act);
  f.refuse("position_embedding_type", "absolute", "packtrain's BERT has absolute learned positions only");
  f.refuse("is_decoder", false,
           "BERT as a causal decoder is not implemented; packtrain trains it as an encoder");
  f.refuse("add_cross_attention", false, "cross-attention is not implemented");
  c.norm = Norm::layer;
  c.post_norm = c.embedding_norm = true;
  c.causal = false;
  c.positions = Positions::learned;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.mlp = Mlp::gelu_erf;
  c.head_transform = c.lm_head_bias = true;
  return c;
}

// Tokens ids are single integers in packtrain; HF allows a list for eos (several stop tokens): the first.
void read_special_tokens(const Fields& f, ModelConfig& c) {
  for (auto [name, field] : {std::pair{"bos_token_id", &c.bos_token_id}, std::pair{"eos_token_id", &c.eos_token_id}}) {
    if (!f.has(name)) continue;
    const json& v = f.raw(name);
    if (v.is_array() && !v.empty() && v[0].is_number_integer()) *field = f.integer<int32_t>(v[0], name);
    else f.get(name, *field);
  }
}

void write_llama_like(const ModelConfig& c, const Family& fam, json& j) {
  const LlamaLike& o = fam.llama;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["rms_norm_eps"] = c.norm_eps;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  write_rope_scaling(c.rope, j);
  if (o.attention_bias) j["attention_bias"] = c.o_bias;
  if (o.mlp_bias) j["mlp_bias"] = c.mlp_bias;
  if (o.window == LlamaLike::all_layers)
    j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  if (o.window == LlamaLike::per_layer) {
    json types = json::array();
    for (bool w : c.windowed_layers) types.push_back(w ? "sliding_attention" : "full_attention");
    j["use_sliding_window"] = c.sliding_window > 0;
    j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
    j["layer_types"] = types;
    j.erase("max_window_layers");  // layer_types says it per layer
  }
}

void write_gpt2(const ModelConfig& c, const Family&, json& j) {
  j["vocab_size"] = c.vocab_size;
  j["n_embd"] = c.hidden_size;
  j["n_layer"] = c.num_hidden_layers;
  j["n_head"] = c.num_attention_heads;
  j["n_inner"] = c.intermediate_size;
  j["n_positions"] = c.max_position_embeddings;
  j["layer_norm_epsilon"] = c.norm_eps;
  j["activation_function"] = "gelu_new";
  j["tie_word_embeddings"] = true;
}

void write_bert(const ModelConfig& c, const Family&, json& j) {
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["type_vocab_size"] = c.type_vocab_size;
  j["layer_norm_eps"] = c.norm_eps;
  j["hidden_act"] = "gelu";
  j["position_embedding_type"] = "absolute";
  j["tie_word_embeddings"] = c.tie_word_embeddings;
}

}  // namespace

std::string supported_families() {
  std::string out;
  for (const Family& f : kFamilies) out += (out.empty() ? "" : ", ") + std::string(f.model_type);
  return out;
}

const TensorNames& tensor_names(const std::string& model_type) {
  return *family(model_type, "model config").names;
}

ModelConfig parse_config(const std::string& json_text, const std::string& origin) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond a double
    fail("{}: not valid JSON ({})", origin, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object (an HF config.json)", origin);
  const Fields f(j, origin);
  if (!f.has("model_type"))
    fail("{}: no \"model_type\"; an HF config.json names its family (supported: {})", origin,
         supported_families());
  std::string model_type;
  f.get("model_type", model_type);
  const Family& fam = family(model_type, origin);
  refuse_foreign(f);
  if (f.has("architectures")) {
    std::vector<std::string> archs;
    f.get("architectures", archs);
    if (archs.size() != 1 || archs[0] != fam.architecture)
      fail("{}: \"architectures\" is {}; packtrain trains {} as {} (its LM head)", origin,
           f.raw("architectures").dump(), model_type, fam.architecture);
  }
  ModelConfig c = fam.read(f, fam);
  read_special_tokens(f, c);
  c.source_json = json_text;
  c.validate(origin);
  return c;
}

ModelConfig load_config(const std::string& path) { return parse_config(read_file(path), path); }

std::string config_to_json(const ModelConfig& c, DType weights) {
  const Family& fam = family(c.family, "model config");
  json j = c.source_json.empty() ? json::object() : json::parse(c.source_json);
  j["architectures"] = {fam.architecture};
  j["model_type"] = fam.model_type;
  fam.write(c, fam, j);
  // The source's own ids stay as they were (eos may list several stop tokens).
  if (c.bos_token_id >= 0 && !j.contains("bos_token_id")) j["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_id >= 0 && !j.contains("eos_token_id")) j["eos_token_id"] = c.eos_token_id;
  const char* torch_dtype = weights == DType::bf16 ? "bfloat16" : "float32";  // the saved weights' dtype
  j["torch_dtype"] = torch_dtype;
  if (j.contains("dtype")) j["dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

}  // namespace pt
