#include "model/config.h"
#include "core/error.h"
#include "core/file.h"
#include "test_util.h"

#include <gtest/gtest.h>

namespace pt {
namespace {

TEST(LlamaConfig, PresetsHaveTheDocumentedShapes) {
  auto c = preset_config("110m");
  c.vocab_size = 32000;
  c.validate("110m");
  EXPECT_EQ(c.head_dim, 64);
  // 12 layers of (4*768^2 + 3*768*2048 + 2*768) + final norm + untied embeddings.
  EXPECT_EQ(c.num_parameters(),
            12 * (4LL * 768 * 768 + 3LL * 768 * 2048 + 2 * 768) + 768 + 2LL * 32000 * 768);
  auto b = preset_config("1b");
  EXPECT_EQ(b.num_key_value_heads, 8);
  EXPECT_EQ(b.head_dim, 64);
  EXPECT_THROW(preset_config("7b"), Error);
}

TEST(LlamaConfig, JsonRoundTripAndErrors) {
  auto dir = test::fresh_temp_dir();
  auto c = preset_config("tiny");
  c.vocab_size = 512;
  c.eos_token_id = 3;
  auto path = (dir / "config.json").string();
  write_file_atomic(path, config_to_json(c));
  auto c2 = load_config(path);
  EXPECT_EQ(c2.hidden_size, c.hidden_size);
  EXPECT_EQ(c2.num_key_value_heads, c.num_key_value_heads);
  EXPECT_EQ(c2.tie_word_embeddings, true);
  EXPECT_EQ(c2.eos_token_id, 3);

  auto expect_error = [&](const std::string& text, const std::string& needle) {
    write_file_atomic(path, text);
    try {
      load_config(path);
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(R"({"vocab_size": 10, "hidden_size": 64, "intermediate_size": 8, "num_hidden_layers": 1,
                  "num_attention_heads": 4, "rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5}})",
               "rope_type");
  write_file_atomic(path,
                    R"({"vocab_size": 10, "hidden_size": 64, "intermediate_size": 8, "num_hidden_layers": 1,
                  "num_attention_heads": 4, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}})");
  EXPECT_EQ(load_config(path).rope_theta, 5e5f);
  expect_error("{", "not valid JSON");
  expect_error(R"({"hidden_size": 64})", "vocab_size");
  expect_error(R"({"vocab_size": 10, "hidden_size": "big", "intermediate_size": 8, "num_hidden_layers": 1,
                  "num_attention_heads": 2})",
               "hidden_size");
  expect_error(R"({"vocab_size": 10, "hidden_size": 64, "intermediate_size": 8, "num_hidden_layers": 1,
                  "num_attention_heads": 4, "num_key_value_heads": 3})",
               "multiple");
  expect_error(R"({"vocab_size": 10, "hidden_size": 64, "intermediate_size": 8, "num_hidden_layers": 1,
                  "num_attention_heads": 4, "rope_scaling": {"type": "linear"}})",
               "rope_scaling");
}

}  // namespace
}  // namespace pt
