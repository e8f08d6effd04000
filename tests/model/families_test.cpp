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
  EXPECT_EQ(c.num_parameters(),
            12 * (4LL * 768 * 768 + 3LL * 768 * 2048 + 2 * 768) + 768 + 2LL * 32000 * 768);
  EXPECT_EQ(preset_config("1b").num_key_value_heads, 8);
  EXPECT_THROW(preset_config("7b"), Error);
}

// The parameter counts the models' publishers give (embeddings included, tied ones once).
TEST(ModelPresets, RealModelsHaveTheirPublishedParameterCounts) {
  const std::pair<const char*, int64_t> published[] = {
      {"gpt2", 124439808},         {"llama3.2-1b", 1235814400}, {"llama3.2-3b", 3212749824},
      {"llama3.1-8b", 8030261248}, {"qwen2.5-0.5b", 494032768}, {"qwen2.5-7b", 7615616512},
      {"mistral-7b", 7241732096},
      // BertForMaskedLM: BertModel's 109482240 less the pooler, plus the MLM head
      {"bert-base", 109514298},
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
  for (const char* name : {"tiny", "gpt2", "llama3.2-1b", "llama3.1-8b", "qwen2.5-0.5b", "qwen3-0.6b",
                           "mistral-7b", "bert-base"}) {
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
    for (int l = 0; l < c.num_hidden_layers; ++l)
      EXPECT_EQ(back.window(l), c.window(l)) << name << " layer " << l;
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
  const std::string base =
      R"({"model_type": "qwen2", "vocab_size": 10, "hidden_size": 64, "intermediate_size": 8,
      "num_hidden_layers": 4, "num_attention_heads": 4, "sliding_window": 32)";
  // Qwen2.5's shipped configs: a window size without use_sliding_window means no window.
  ModelConfig c = parse_config(base + R"(, "max_window_layers": 2})", "a");
  for (int l = 0; l < 4; ++l) EXPECT_EQ(c.window(l), 0);
  c = parse_config(base + R"(, "use_sliding_window": true, "max_window_layers": 3})", "b");
  EXPECT_EQ(c.window(2), 0);
  EXPECT_EQ(c.window(3), 32);
  c = parse_config(
      base + R"(, "use_sliding_window": true, "layer_types": ["sliding_attention", "full_attention",
      "sliding_attention", "full_attention"]})",
      "c");
  EXPECT_EQ(c.window(0), 32);
  EXPECT_EQ(c.window(1), 0);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
}

TEST(ModelFamilies, Gpt2ReadsItsOwnFieldNames) {
  const ModelConfig c = parse_config(R"({"model_type": "gpt2", "vocab_size": 50, "n_embd": 64, "n_layer": 2,
      "n_head": 4, "n_positions": 128, "resid_pdrop": 0.1})",
                                     "gpt2");
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

// bert-base-uncased's config.json as transformers writes it.
const std::string kBertBase = R"({"architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1,
    "gradient_checkpointing": false, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768,
    "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512, "model_type": "bert", "num_attention_heads": 12, "num_hidden_layers": 12,
    "pad_token_id": 0, "position_embedding_type": "absolute", "transformers_version": "4.6.0.dev0",
    "type_vocab_size": 2, "use_cache": true, "vocab_size": 30522})";

TEST(ModelFamilies, BertIsAPostNormEncoderWithTheMlmHead) {
  const ModelConfig c = parse_config(kBertBase, "bert-base-uncased");
  EXPECT_EQ(c.family, "bert");
  EXPECT_EQ(c.norm, Norm::layer);
  EXPECT_TRUE(c.post_norm);
  EXPECT_TRUE(c.embedding_norm);
  EXPECT_FALSE(c.causal);
  EXPECT_EQ(c.objective(), Objective::kMaskedLm);
  EXPECT_EQ(c.positions, Positions::learned);
  EXPECT_EQ(c.mlp, Mlp::gelu_erf);
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.mlp_bias);
  EXPECT_TRUE(c.head_transform && c.lm_head_bias && c.tie_word_embeddings);
  EXPECT_EQ(c.type_vocab_size, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-12f);
  // BertForMaskedLM's published count: BertModel's 109482240 without the pooler (768^2 + 768), plus the
  // MLM head's transform (768^2 + 768 + 2 x 768) and the logits' bias (30522).
  EXPECT_EQ(c.num_parameters(), 109482240 - (768 * 768 + 768) + (768 * 768 + 768 + 2 * 768) + 30522);
  const ParameterLayout layout(c);
  for (const char* name :
       {"bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
        "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
        "bert.embeddings.LayerNorm.bias", "bert.encoder.layer.11.attention.self.query.weight",
        "bert.encoder.layer.0.attention.self.key.bias", "bert.encoder.layer.0.attention.self.value.weight",
        "bert.encoder.layer.0.attention.output.dense.bias",
        "bert.encoder.layer.0.attention.output.LayerNorm.bias",
        "bert.encoder.layer.0.intermediate.dense.weight", "bert.encoder.layer.0.output.dense.weight",
        "bert.encoder.layer.0.output.LayerNorm.weight", "cls.predictions.transform.dense.weight",
        "cls.predictions.transform.dense.bias", "cls.predictions.transform.LayerNorm.weight",
        "cls.predictions.transform.LayerNorm.bias", "cls.predictions.bias"})
    EXPECT_NO_THROW(layout.find(name)) << name;
  EXPECT_EQ(layout.find("bert.encoder.layer.0.intermediate.dense.weight").shape,
            (std::vector<int64_t>{3072, 768}));
  EXPECT_EQ(layout.find("bert.embeddings.token_type_embeddings.weight").shape,
            (std::vector<int64_t>{2, 768}));
  EXPECT_EQ(layout.find("cls.predictions.bias").role, ParamRole::bias);
  EXPECT_EQ(layout.lm_head(), layout.embedding());  // the decoder is tied: no tensor of its own
  EXPECT_THROW(layout.find("cls.predictions.decoder.weight"), Error);

  const ModelConfig back = parse_config(config_to_json(c), "saved");
  EXPECT_EQ(back.num_parameters(), c.num_parameters());
  EXPECT_EQ(back.type_vocab_size, 2);
  EXPECT_FLOAT_EQ(back.norm_eps, 1e-12f);
  EXPECT_EQ(back.mlp, Mlp::gelu_erf);
  const std::string saved = config_to_json(c);
  for (const char* kept : {"\"BertForMaskedLM\"", "\"model_type\": \"bert\"", "\"pad_token_id\": 0",
                           "\"hidden_dropout_prob\": 0.1", "\"hidden_act\": \"gelu\""})
    EXPECT_NE(saved.find(kept), std::string::npos) << kept << " in " << saved;
  // An untied decoder is a tensor of its own.
  const ModelConfig untied = parse_config(
      R"({"model_type": "bert", "vocab_size": 40, "hidden_size": 16, "intermediate_size": 8,
          "num_hidden_layers": 1, "num_attention_heads": 2, "tie_word_embeddings": false})",
      "untied");
  EXPECT_EQ(ParameterLayout(untied).find("cls.predictions.decoder.weight").shape,
            (std::vector<int64_t>{40, 16}));
  EXPECT_EQ(untied.max_position_embeddings, 512);  // BertConfig's defaults
  EXPECT_EQ(untied.type_vocab_size, 2);
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
  expect_error(R"({"model_type": "gemma2", )" + llama + "}",
               {"\"gemma2\"", "llama, mistral, qwen2, qwen3, gpt2"});
  expect_error(R"({"model_type": "mixtral", )" + llama + "}", {"mixtral"});
  expect_error(R"({"model_type": "llama", "num_local_experts": 8, )" + llama + "}",
               {"num_local_experts", "8"});
  expect_error(R"({"model_type": "llama", "vision_config": {}, )" + llama + "}",
               {"vision_config", "multimodal"});
  expect_error(R"({"model_type": "llama", "quantization_config": {"bits": 4}, )" + llama + "}",
               {"quantization_config"});
  expect_error(R"({"model_type": "llama", "hidden_act": "gelu", )" + llama + "}", {"hidden_act", "gelu"});
  expect_error(R"({"model_type": "llama", "sliding_window": 16, )" + llama + "}", {"sliding_window", "16"});
  expect_error(R"({"model_type": "mistral", "attention_bias": true, )" + llama + "}",
               {"attention_bias", "true"});
  expect_error(R"({"model_type": "qwen2", "mlp_bias": true, )" + llama + "}", {"mlp_bias"});
  expect_error(R"({"model_type": "qwen3", "layer_types": ["chunked_attention"], )" + llama + "}",
               {"layer_types", "chunked_attention"});
  expect_error(
      R"({"model_type": "llama", "architectures": ["LlamaForSequenceClassification"], )" + llama + "}",
      {"architectures", "LlamaForSequenceClassification", "LlamaForCausalLM"});
  expect_error(
      R"({"model_type": "llama", "rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}, )" + llama +
          "}",
      {"longrope"});
  expect_error(R"({"model_type": "llama", "num_key_value_heads": 3, )" + llama + "}", {"multiple"});
  expect_error(R"({"model_type": "llama", "hidden_size": "big", "vocab_size": 10, "intermediate_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 2})",
               {"hidden_size", "wrong type"});
  const std::string gpt2 = R"("model_type": "gpt2", "vocab_size": 50, "n_embd": 64, "n_layer": 2, "n_head": 4,
      "n_positions": 128)";
  expect_error("{" + gpt2 + R"(, "activation_function": "relu"})", {"activation_function", "relu"});
  expect_error("{" + gpt2 + R"(, "scale_attn_by_inverse_layer_idx": true})",
               {"scale_attn_by_inverse_layer_idx"});
  expect_error("{" + gpt2 + R"(, "scale_attn_weights": false})", {"scale_attn_weights"});
  expect_error("{" + gpt2 + R"(, "add_cross_attention": true})", {"add_cross_attention"});
  const std::string bert =
      R"("model_type": "bert", "vocab_size": 50, "hidden_size": 64, "intermediate_size": 8,
      "num_hidden_layers": 2, "num_attention_heads": 4)";
  expect_error("{" + bert + R"(, "position_embedding_type": "relative_key"})",
               {"position_embedding_type", "relative_key", "absolute"});
  expect_error("{" + bert + R"(, "is_decoder": true})", {"is_decoder", "true"});
  expect_error("{" + bert + R"(, "add_cross_attention": true})", {"add_cross_attention"});
  expect_error("{" + bert + R"(, "hidden_act": "gelu_new"})", {"hidden_act", "gelu_new"});
  expect_error("{" + bert + R"(, "hidden_act": "relu"})", {"hidden_act", "relu"});
  expect_error("{" + bert + R"(, "type_vocab_size": 0})", {"type_vocab_size", "0"});
  expect_error("{" + bert + R"(, "architectures": ["BertForSequenceClassification"]})",
               {"architectures", "BertForSequenceClassification", "BertForMaskedLM"});
  expect_error("{" + bert + R"(, "architectures": ["BertForPreTraining"]})", {"BertForPreTraining"});
  expect_error(R"({"model_type": "bert", "vocab_size": 50, "hidden_size": 60, "intermediate_size": 8,
      "num_hidden_layers": 2, "num_attention_heads": 8})",
               {"hidden_size", "60", "multiple", "num_attention_heads"});
  // Harmless values of the same fields load.
  EXPECT_NO_THROW(parse_config("{" + bert + R"(, "position_embedding_type": "absolute", "is_decoder": false,
      "add_cross_attention": false, "hidden_act": "gelu", "type_vocab_size": 1})",
                               "bert"));
}

}  // namespace
}  // namespace pt
