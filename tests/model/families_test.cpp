// The family table: presets with the shapes (and parameter counts) of the real models, config.json round
// trips for every family, and every refusal naming its field.
#include "model/families.h"

#include "core/error.h"
#include "model/parameters.h"
#include "model/presets.h"

#include <gtest/gtest.h>

#include <string>

namespace pt {
namespace {

TEST(ModelPresets, OwnShapesTakeTheTokenizersVocab) {
  auto c = preset_config("110m");
  EXPECT_EQ(c.vocab_size, 0);
  c.vocab_size = 32000;
  c.validate("110m");
  EXPECT_EQ(c.head_dim, 64);
  // 12 layers of (4*768^2 + 3*768*2048 + 2*768) + final norm + untied embeddings.
  EXPECT_EQ(c.num_parameters(), 12 * (4LL * 768 * 768 + 3LL * 768 * 2048 + 2 * 768) + 768 + 2LL * 32000 * 768);
  EXPECT_EQ(preset_config("1b").num_key_value_heads, 8);
  EXPECT_THROW(preset_config("7b"), Error);
}

// The parameter counts the models' publishers give (embeddings included, tied ones once).
TEST(ModelPresets, RealModelsHaveTheirPublishedParameterCounts) {
  const std::pair<const char*, int64_t> published[] = {
      {"gpt2", 124439808},          {"llama3.2-1b", 1235814400},   {"llama3.2-3b", 3212749824},
      {"llama3.1-8b", 8030261248},  {"qwen2.5-0.5b", 494032768},   {"mistral-7b", 7241732096},
  };
  for (const auto& [name, count] : published) {
    const ModelConfig c = preset_config(name);
    c.validate(name);
    EXPECT_EQ(c.num_parameters(), count) << name;
  }
  // Qwen3-0.6B: 0.44B outside the (tied) 151936 x 1024 embeddings.
  const ModelConfig q3 = preset_config("qwen3-0.6b");
  EXPECT_EQ(q3.num_parameters() - 151936LL * 1024, 440467456);
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_EQ(preset_config("mistral-7b").window(31), 4096);
  EXPECT_EQ(preset_config("qwen2.5-0.5b").window(23), 0);
}

TEST(ModelFamilies, EveryPresetRoundTripsThroughConfigJson) {
  for (const char* name : {"tiny", "gpt2", "llama3.2-1b", "llama3.1-8b", "qwen2.5-0.5b", "qwen3-0.6b", "mistral-7b"}) {
    ModelConfig c = preset_config(name);
    if (c.vocab_size == 0) c.vocab_size = 512;
    const ModelConfig back = parse_config(config_to_json(c), name);
    EXPECT_EQ(back.family, c.family) << name;
    EXPECT_EQ(back.num_parameters(), c.num_parameters()) << name;
    EXPECT_EQ(ParameterLayout(back).params().size(), ParameterLayout(c).params().size()) << name;
    EXPECT_EQ(back.norm, c.norm) << name;
    EXPECT_EQ(back.positions, c.positions) << name;
    EXPECT_EQ(back.mlp, c.mlp) << name;
    EXPECT_EQ(back.qkv_bias, c.qkv_bias) << name;
    EXPECT_EQ(back.o_bias, c.o_bias) << name;
    EXPECT_EQ(back.qk_norm, c.qk_norm) << name;
    EXPECT_EQ(back.tie_word_embeddings, c.tie_word_embeddings) << name;
    EXPECT_EQ(back.max_position_embeddings, c.max_position_embeddings) << name;
    EXPECT_EQ(back.rope.type, c.rope.type) << name;
    EXPECT_EQ(back.rope.theta, c.rope.theta) << name;
    EXPECT_EQ(back.rope.factor, c.rope.factor) << name;
    EXPECT_FLOAT_EQ(back.norm_eps, c.norm_eps) << name;
    EXPECT_EQ(back.eos_token_id, c.eos_token_id) << name;
    for (int l = 0; l < c.num_hidden_layers; ++l) EXPECT_EQ(back.window(l), c.window(l)) << name << " layer " << l;
  }
}

TEST(ModelFamilies, SavingKeepsTheSourceConfigsOtherFields) {
  const std::string src = R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 10,
      "hidden_size": 64, "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 4,
      "initializer_range": 0.03, "eos_token_id": [7, 8], "torch_dtype": "bfloat16"})";
  const std::string out = config_to_json(parse_config(src, "src"));
  EXPECT_NE(out.find("\"initializer_range\": 0.03"), std::string::npos) << out;
  EXPECT_NE(out.find("\"torch_dtype\": \"float32\""), std::string::npos) << out;
  EXPECT_EQ(parse_config(out, "out").eos_token_id, 7);
  EXPECT_NE(out.find("8"), std::string::npos) << "every stop token kept";
}

TEST(ModelFamilies, QwenWindowsFollowTransformers) {
  const std::string base = R"({"model_type": "qwen2", "vocab_size": 10, "hidden_size": 64, "intermediate_size": 8,
      "num_hidden_layers": 4, "num_attention_heads": 4, "sliding_window": 32)";
  // Qwen2.5's shipped configs: a window size without use_sliding_window means no window.
  ModelConfig c = parse_config(base + R"(, "max_window_layers": 2})", "a");
  for (int l = 0; l < 4; ++l) EXPECT_EQ(c.window(l), 0);
  c = parse_config(base + R"(, "use_sliding_window": true, "max_window_layers": 3})", "b");
  EXPECT_EQ(c.window(2), 0);
  EXPECT_EQ(c.window(3), 32);
  c = parse_config(base + R"(, "use_sliding_window": true, "layer_types": ["sliding_attention", "full_attention",
      "sliding_attention", "full_attention"]})", "c");
  EXPECT_EQ(c.window(0), 32);
  EXPECT_EQ(c.window(1), 0);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
}

TEST(ModelFamilies, Gpt2ReadsItsOwnFieldNames) {
  const ModelConfig c = parse_config(R"({"model_type": "gpt2", "vocab_size": 50, "n_embd": 64, "n_layer": 2,
      "n_head": 4, "n_positions": 128, "resid_pdrop": 0.1})", "gpt2");
  EXPECT_EQ(c.intermediate_size, 256);  // n_inner null: 4 n_embd
  EXPECT_EQ(c.norm, Norm::layer);
  EXPECT_EQ(c.positions, Positions::learned);
  EXPECT_EQ(c.mlp, Mlp::gelu);
  EXPECT_TRUE(c.tie_word_embeddings);
  const ParameterLayout layout(c);
  const ParamInfo& qkv = layout.find("transformer.h.0.attn.c_attn.weight");
  EXPECT_TRUE(qkv.transposed);
  EXPECT_EQ(qkv.shape, (std::vector<int64_t>{64, 192}));
  EXPECT_EQ(qkv.flat_shape(), (std::vector<int64_t>{192, 64}));
  EXPECT_EQ(layout.find("transformer.wpe.weight").shape, (std::vector<int64_t>{128, 64}));
}

// Each config names the field packtrain does not implement, and its value.
TEST(ModelFamilies, UnsupportedConfigsAreRefusedByName) {
  const std::string llama = R"("vocab_size": 10, "hidden_size": 64, "intermediate_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 4)";
  auto expect_error = [](const std::string& text, std::vector<std::string> needles) {
    try {
      parse_config(text, "cfg.json");
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      for (const auto& needle : needles)
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << needle << " in: " << e.what();
    }
  };
  expect_error("{", {"cfg.json", "not valid JSON"});
  expect_error("{" + llama + "}", {"model_type", "llama, mistral, qwen2, qwen3, gpt2"});
  expect_error(R"({"model_type": "gemma2", )" + llama + "}", {"\"gemma2\"", "llama, mistral, qwen2, qwen3, gpt2"});
  expect_error(R"({"model_type": "mixtral", )" + llama + "}", {"mixtral"});
  expect_error(R"({"model_type": "llama", "num_local_experts": 8, )" + llama + "}", {"num_local_experts", "8"});
  expect_error(R"({"model_type": "llama", "vision_config": {}, )" + llama + "}", {"vision_config", "multimodal"});
  expect_error(R"({"model_type": "llama", "quantization_config": {"bits": 4}, )" + llama + "}",
               {"quantization_config"});
  expect_error(R"({"model_type": "llama", "hidden_act": "gelu", )" + llama + "}", {"hidden_act", "gelu"});
  expect_error(R"({"model_type": "llama", "sliding_window": 16, )" + llama + "}", {"sliding_window", "16"});
  expect_error(R"({"model_type": "mistral", "attention_bias": true, )" + llama + "}", {"attention_bias", "true"});
  expect_error(R"({"model_type": "qwen2", "mlp_bias": true, )" + llama + "}", {"mlp_bias"});
  expect_error(R"({"model_type": "qwen3", "layer_types": ["chunked_attention"], )" + llama + "}",
               {"layer_types", "chunked_attention"});
  expect_error(R"({"model_type": "llama", "architectures": ["LlamaForSequenceClassification"], )" + llama + "}",
               {"architectures", "LlamaForSequenceClassification", "LlamaForCausalLM"});
  expect_error(R"({"model_type": "llama", "rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}, )" + llama +
                   "}",
               {"longrope"});
  expect_error(R"({"model_type": "llama", "num_key_value_heads": 3, )" + llama + "}", {"multiple"});
  expect_error(R"({"model_type": "llama", "hidden_size": "big", "vocab_size": 10, "intermediate_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 2})",
               {"hidden_size", "wrong type"});
  const std::string gpt2 = R"("model_type": "gpt2", "vocab_size": 50, "n_embd": 64, "n_layer": 2, "n_head": 4,
      "n_positions": 128)";
  expect_error("{" + gpt2 + R"(, "activation_function": "relu"})", {"activation_function", "relu"});
  expect_error("{" + gpt2 + R"(, "scale_attn_by_inverse_layer_idx": true})", {"scale_attn_by_inverse_layer_idx"});
  expect_error("{" + gpt2 + R"(, "scale_attn_weights": false})", {"scale_attn_weights"});
  expect_error("{" + gpt2 + R"(, "add_cross_attention": true})", {"add_cross_attention"});
}

}  // namespace
}  // namespace pt
