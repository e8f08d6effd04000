// config.json inputs that the fuzzer (fuzz/model_config.cpp) found mishandled: each is now refused by name
// or read as transformers reads it. Their files are kept in fuzz/regressions/model_config/.
#include "core/error.h"
#include "model/families.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pt {
namespace {

const std::string kLlama =
    R"("vocab_size": 10, "hidden_size": 8, "intermediate_size": 8, "num_attention_heads": 2)";

void expect_refused(const std::string& text, const std::vector<std::string>& needles) {
  try {
    parse_config(text, "cfg.json");
    FAIL() << "accepted: " << text;
  } catch (const Error& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

// nlohmann's get<int32_t> wrapped large integers and was undefined for floats out of range (1e300); a
// number beyond a double threw nlohmann's out_of_range past the handler, which caught only parse errors.
TEST(ConfigFuzzFindings, NumbersOutsideTheirFieldsTypeAreRefused) {
  const std::string llama = R"({"model_type": "llama", "num_hidden_layers": 2, )" + kLlama;
  expect_refused(llama + R"(, "max_position_embeddings": 1e300})", {"max_position_embeddings", "1e+300"});
  expect_refused(llama + R"(, "max_position_embeddings": 4294967296})", {"max_position_embeddings", "whole"});
  expect_refused(llama + R"(, "max_position_embeddings": -2147483649})", {"max_position_embeddings"});
  expect_refused(llama + R"(, "head_dim": 2.5})", {"head_dim", "2.5"});
  expect_refused(llama + R"(, "max_position_embeddings": true})", {"max_position_embeddings", "wrong type"});
  expect_refused(llama + R"(, "eos_token_id": [4294967297, 2]})", {"eos_token_id"});
  expect_refused(llama + R"(, "max_position_embeddings": 1e999})", {"cfg.json", "not valid JSON"});
  // A double beyond a float became an infinite epsilon, which passed validate() and was written back as null.
  expect_refused(llama + R"(, "rms_norm_eps": 6.7e68})", {"rms_norm_eps", "finite"});
  expect_refused(llama + R"(, "rms_norm_eps": "1e-5"})", {"rms_norm_eps", "wrong type"});
  // A whole number written as a float still reads, as before.
  EXPECT_EQ(
      parse_config(llama + R"(, "max_position_embeddings": 2048.0})", "cfg.json").max_position_embeddings,
      2048);
}

// num_hidden_layers sized the per-layer windows before validate() saw it: -1 asked vector<bool> for 2^64
// entries (std::length_error); a negative max_window_layers indexed the windows out of bounds.
TEST(ConfigFuzzFindings, LayerCountsAreCheckedBeforeUse) {
  expect_refused(R"({"model_type": "mistral", "num_hidden_layers": -1, )" + kLlama + "}",
                 {"num_hidden_layers", "positive", "-1"});
  const auto c = parse_config(R"({"model_type": "qwen2", "num_hidden_layers": 3, "use_sliding_window": true,
      "sliding_window": 4, "max_window_layers": -5, )" +
                                  kLlama + "}",
                              "cfg.json");
  EXPECT_EQ(c.windowed_layers, std::vector<bool>({true, true, true}));  // transformers: layer >= -5 slides
}

// GPT-2's default n_inner (4 n_embd) overflowed int32, and sizes whose parameter count passes int64
// overflowed the parameter layout.
TEST(ConfigFuzzFindings, SizesThatOverflowAreRefusedByName) {
  expect_refused(R"({"model_type": "gpt2", "vocab_size": 50, "n_embd": 1073741824, "n_layer": 2, "n_head": 4,
      "n_positions": 64})",
                 {"n_embd", "1073741824", "n_inner"});
  expect_refused(R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 2147483647,
      "intermediate_size": 2147483647, "num_hidden_layers": 2, "num_attention_heads": 1, "head_dim": 1073741824})",
                 {"cfg.json", "parameters", "2^62"});
}

}  // namespace
}  // namespace pt
