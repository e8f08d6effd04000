// Checkpoints: a save killed at any moment, or out of space, leaves the previous checkpoint loadable;
// damage is an error naming the tensor or file; Hugging Face directories load from sharded bf16/fp16 and tied
// layouts.
#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/file.h"
#include "core/float16.h"
#include "model/families.h"
#include "model/init.h"
#include "model/presets.h"

#include "core/file_size_limit.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace pt {
namespace {

namespace fs = std::filesystem;

ModelConfig small_config(int32_t hidden, int32_t vocab, bool tied) {
  ModelConfig c;
  c.vocab_size = vocab, c.hidden_size = hidden, c.intermediate_size = 2 * hidden, c.num_hidden_layers = 2;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = hidden / 4;
  c.tie_word_embeddings = tied;
  return c;
}

// Checkpoint contents derived from the step, so a loaded checkpoint can be checked exactly.
struct StepValues {
  std::vector<float> params;
  ops::HostMoment m, v;
  StepValues(int64_t step, int64_t n) : params(static_cast<size_t>(n)) {
    for (size_t i = 0; i < params.size(); ++i) {
      params[i] = static_cast<float>(step * 100 + static_cast<int64_t>(i % 97));
      m.values.push_back(params[i] + 0.25f);
      v.values.push_back(params[i] + 0.5f);
    }
  }
};

// Odd steps carry a data-parallel run's data position, even ones a single-process run's (none).
TrainerState state_at(int64_t step) {
  return {step, step / 10,   step % 10,
          42,   step * 1000, step % 2 ? std::optional<int64_t>(step * 3) : std::nullopt};
}

std::string save_values(const fs::path& root, const ModelConfig& c, int64_t step, const StepValues& s) {
  return save_training_checkpoint(root.string(), c, s.params, s.m, s.v, state_at(step), R"({"tok": 1})");
}

std::string save_step(const fs::path& root, const ModelConfig& c, int64_t step) {
  return save_values(root, c, step, StepValues(step, ParameterLayout(c).total()));
}

void expect_checkpoint_of_step(const std::string& dir, const ModelConfig& c, int64_t step) {
  const auto ck = load_training_checkpoint(dir);
  ASSERT_EQ(ck.state.step, step) << dir;
  const StepValues s(step, ParameterLayout(c).total());
  EXPECT_TRUE(ck.weights.params == s.params) << dir;
  EXPECT_TRUE(ck.adam_m == s.m) << dir;
  EXPECT_TRUE(ck.adam_v == s.v) << dir;
  EXPECT_EQ(ck.state.tokens_seen, step * 1000);
  EXPECT_EQ(ck.state.position, state_at(step).position);
  EXPECT_EQ(config_to_json(ck.weights.config), config_to_json(c));
}

int64_t partial_saves(const fs::path& root) {
  int64_t n = 0;
  for (const auto& e : fs::directory_iterator(root)) n += e.path().extension() == ".tmp";
  return n;
}

// bf16 moments are written as BF16 (exactly: their values are bf16 already), 8-bit ones as their U8 codes
// and F32 block absmax values: each loads back equal, in its format, from a smaller file.
TEST(Checkpoint, MomentsKeepTheirFormat) {
  const auto root = test::fresh_temp_dir() / "checkpoints";
  const auto c = small_config(32, 64, false);
  const int64_t n = ParameterLayout(c).total();
  const StepValues s(4, n);
  ops::HostMoment bf16{.format = ops::MomentFormat::bf16}, q8{.format = ops::MomentFormat::q8};
  for (int64_t i = 0; i < n; ++i) {
    bf16.values.push_back(bf16_to_float(float_to_bf16(0.001f * float(i % 1000) - 0.3f)));
    q8.codes.push_back(static_cast<uint8_t>(i * 37 % 251));
  }
  for (int64_t b = 0; b < n / 200; ++b) q8.absmax.push_back(1e-6f * float(b + 1));
  std::map<ops::MomentFormat, uintmax_t> bytes;
  for (const ops::HostMoment& moment : {s.m, bf16, q8}) {
    SCOPED_TRACE(std::string(ops::moment_format_name(moment.format)));
    const auto dir = save_training_checkpoint(root.string(), c, s.params, moment, moment, state_at(4), "");
    const auto ck = load_training_checkpoint(dir);
    EXPECT_TRUE(ck.adam_m == moment);
    EXPECT_TRUE(ck.adam_v == moment);
    bytes[moment.format] = fs::file_size(fs::path(dir) / "optimizer.safetensors");
  }
  EXPECT_LT(bytes[ops::MomentFormat::bf16], bytes[ops::MomentFormat::f32] * 55 / 100);
  EXPECT_LT(bytes[ops::MomentFormat::q8], bytes[ops::MomentFormat::f32] * 30 / 100);
}

TEST(Checkpoint, KillDuringSaveLeavesThePreviousCheckpointLoadable) {
  const auto root = test::fresh_temp_dir() / "checkpoints";
  const auto c = small_config(256, 1024, false);  // about 1.3M parameters: 5 MB of weights, 10 MB of moments
  const int64_t n = ParameterLayout(c).total();
  int64_t step = 1;
  // The kills are timed against the save alone: making the values first keeps the share of the time spent
  // inside a save the same in optimized and unoptimized (sanitizer) builds.
  const StepValues first(step, n);
  const auto t0 = std::chrono::steady_clock::now();
  save_values(root, c, step, first);
  const auto save_time = std::chrono::steady_clock::now() - t0;

  int64_t killed_mid_save = 0;
  for (double fraction : {0.0, 0.05, 0.15, 0.3, 0.5, 0.7, 0.9, 1.1, 2.5}) {
    int announce[2];
    ASSERT_EQ(::pipe(announce), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // saves step after step, announcing each save before it starts
      ::close(announce[0]);
      try {
        for (int64_t s = step + 1;; ++s) {
          const StepValues values(s, n);
          if (::write(announce[1], &s, sizeof s) != sizeof s) ::_exit(2);
          save_values(root, c, s, values);
        }
      } catch (...) {
        ::_exit(1);
      }
    }
    ::close(announce[1]);
    int64_t announced = 0;
    ASSERT_EQ(::read(announce[0], &announced, sizeof announced), static_cast<ssize_t>(sizeof announced));
    std::this_thread::sleep_for(std::chrono::duration_cast<std::chrono::microseconds>(save_time * fraction));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ::close(announce[0]);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the saving child failed before it was killed";
    killed_mid_save += partial_saves(root) > 0;

    const auto latest = latest_checkpoint(root.string());
    ASSERT_TRUE(latest.has_value());
    const auto ck_step = load_training_checkpoint(*latest).state.step;
    EXPECT_GE(ck_step, announced - 1) << "at fraction " << fraction;
    expect_checkpoint_of_step(*latest, c, ck_step);
    step = ck_step;
  }
  EXPECT_GT(killed_mid_save, 0) << "no kill landed inside a save; the test did not test anything";

  save_step(root, c, step + 1);  // the next save clears what interrupted ones left
  EXPECT_EQ(partial_saves(root), 0);
  expect_checkpoint_of_step(*latest_checkpoint(root.string()), c, step + 1);
}

TEST(Checkpoint, ASaveOutOfSpaceLeavesThePreviousCheckpointAndSaysWhatItNeeds) {
  const auto root = test::fresh_temp_dir() / "checkpoints";
  const auto c = small_config(64, 256, false);  // about 90k parameters: 1 MB of checkpoint
  save_step(root, c, 1);
  const uint64_t needed = 3 * 4 * static_cast<uint64_t>(ParameterLayout(c).total()) + 10;  // + {"tok": 1}
  try {
    const test::FileSizeLimit limit(64 * 1024);
    save_step(root, c, 2);
    FAIL() << "a checkpoint was saved past the file size limit";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cannot save the checkpoint of step 2 in " + root.string() + ": cannot write " +
                     (root / "step-00000002.tmp").string()),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("File too large"), std::string::npos) << m;
    EXPECT_NE(m.find("The checkpoint needs about " + format_bytes(needed)), std::string::npos) << m;
    EXPECT_NE(m.find((root / "latest").string() + " still points to the previous checkpoint"),
              std::string::npos)
        << m;
  }
  EXPECT_EQ(partial_saves(root), 0) << "the failed save's partial directory stays, taking space";
  expect_checkpoint_of_step(*latest_checkpoint(root.string()), c, 1);
  save_step(root, c, 2);  // with room again
  expect_checkpoint_of_step(*latest_checkpoint(root.string()), c, 2);
}

class DamagedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = fs::path(save_step(test::fresh_temp_dir(), config_, 7)); }
  std::string load_error() const {
    try {
      load_training_checkpoint(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "the damaged checkpoint loaded";
    return "";
  }
  void rewrite(const std::string& file, const std::function<void(std::string&)>& damage) const {
    auto bytes = read_file((dir_ / file).string());
    damage(bytes);
    write_file_atomic((dir_ / file).string(), bytes);
  }

  ModelConfig config_ = small_config(16, 32, false);
  fs::path dir_;
};

TEST_F(DamagedCheckpoint, FlippedWeightByteNamesTheTensor) {
  rewrite("model.safetensors", [](std::string& b) { b[b.size() - 3] ^= 0x10; });  // inside lm_head.weight
  const auto msg = load_error();
  EXPECT_NE(msg.find("lm_head.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
}

TEST_F(DamagedCheckpoint, TruncatedOptimizerStateNamesTheFile) {
  rewrite("optimizer.safetensors", [](std::string& b) { b.resize(b.size() / 2); });
  const auto msg = load_error();
  EXPECT_NE(msg.find("optimizer.safetensors"), std::string::npos) << msg;
}

TEST_F(DamagedCheckpoint, MalformedTrainerStateNamesTheFile) {
  for (
      const char* bad :
      {"{\"step\": 7", "{\"step\": \"seven\"}", "[]",
       R"({"step": 1, "epoch": 0, "batches_in_epoch": 0, "seed": 0, "tokens_seen": 0, "master_weights": "f8"})"}) {
    rewrite("trainer_state.json", [&](std::string& b) { b = bad; });
    const auto msg = load_error();
    EXPECT_NE(msg.find("trainer_state.json"), std::string::npos) << msg;
  }
}

TEST_F(DamagedCheckpoint, ConfigThatDisagreesWithTheWeightsNamesTheTensorAndShapes) {
  auto wrong = config_;
  wrong.intermediate_size = 48;
  write_file_atomic((dir_ / "config.json").string(), config_to_json(wrong));
  const auto msg = load_error();
  EXPECT_NE(msg.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[32, 16]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[48, 16]"), std::string::npos) << msg;
}

TEST_F(DamagedCheckpoint, FlippedMaskByteNamesTheMask) {
  const ParameterLayout layout(config_);
  const ParamInfo& down = layout.find("model.layers.1.mlp.down_proj.weight");
  std::vector<uint8_t> values(static_cast<size_t>(down.numel));
  for (size_t i = 0; i < values.size(); ++i) values[i] = (i / 2) % 2 ? 1 : 0;
  const std::vector<MaskTensor> masks = {{down.name, down.shape, values}};
  const StepValues s(8, layout.total());
  const auto dir = save_training_checkpoint(dir_.parent_path().string(), config_, s.params, s.m, s.v,
                                            state_at(8), "", masks);
  const auto ck = load_training_checkpoint(dir);
  ASSERT_EQ(ck.masks.size(), 1u);
  EXPECT_EQ(ck.masks[0].name, down.name);
  EXPECT_EQ(ck.masks[0].shape, down.shape);
  EXPECT_EQ(ck.masks[0].values, values);
  EXPECT_TRUE(load_training_checkpoint(dir_.string()).masks.empty()) << "a dense checkpoint has no masks";

  dir_ = dir;
  rewrite("masks.safetensors", [](std::string& b) { b[b.size() - 1] ^= 0x01; });
  const auto msg = load_error();
  EXPECT_NE(msg.find(down.name), std::string::npos) << msg;
  EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
}

// An HF-style sharded checkpoint: the layout's tensors split over two shards (plus extra tensors in the
// first), in bf16 or fp16, with model.safetensors.index.json.
void write_sharded(const fs::path& dir, const ModelConfig& c, const std::vector<float>& params, StDtype dtype,
                   const std::vector<std::string>& extra) {
  fs::create_directories(dir);
  write_file_atomic((dir / "config.json").string(), config_to_json(c));
  const ParameterLayout layout(c);
  std::vector<uint16_t> halves(params.size());
  for (size_t i = 0; i < params.size(); ++i) halves[i] = float_to_fp16(params[i]);
  std::vector<float> extra_values(4, 1.0f);
  std::vector<StTensorToWrite> shards[2];
  nlohmann::json weight_map;
  for (size_t i = 0; i < layout.params().size(); ++i) {
    const auto& p = layout.params()[i];
    const void* data = dtype == StDtype::kF16 ? static_cast<const void*>(halves.data() + p.offset)
                                              : static_cast<const void*>(params.data() + p.offset);
    const size_t shard = i < layout.params().size() / 2 ? 0 : 1;
    shards[shard].push_back({p.name, dtype, p.shape, data});
    weight_map[p.name] = "model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors";
  }
  for (const auto& name : extra) {
    shards[0].push_back({name, StDtype::kF32, {4}, extra_values.data()});
    weight_map[name] = "model-00001-of-00002.safetensors";
  }
  for (size_t s = 0; s < 2; ++s)
    write_safetensors((dir / ("model-0000" + std::to_string(s + 1) + "-of-00002.safetensors")).string(),
                      shards[s], {{"format", "pt"}});
  write_file_atomic((dir / "model.safetensors.index.json").string(),
                    nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2));
}

TEST(HuggingFaceLoading, ShardedBf16AndFp16LoadTheSameValues) {
  const auto dir = test::fresh_temp_dir();
  const auto c = small_config(32, 64, false);
  const auto params = init_params(c, 3, 0.5);
  write_sharded(dir / "bf16", c, params, StDtype::kBF16, {});
  write_sharded(dir / "fp16", c, params, StDtype::kF16, {});
  const auto bf16 = load_model_dir((dir / "bf16").string());
  const auto fp16 = load_model_dir((dir / "fp16").string());
  ASSERT_EQ(bf16.params.size(), params.size());
  ASSERT_EQ(fp16.params.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const float scale = std::max(std::abs(params[i]), 1e-3f);
    ASSERT_NEAR(bf16.params[i], params[i], scale * 0x1p-8f) << i;
    ASSERT_NEAR(fp16.params[i], params[i], scale * 0x1p-10f) << i;
  }
}

// Rotary inv_freq buffers are constants and load silently; a tensor the model does not use is an error
// naming it, or a warning naming it when the user allows unused tensors.
TEST(HuggingFaceLoading, UnusedTensorsAreNamed) {
  const auto dir = test::fresh_temp_dir();
  const auto c = small_config(32, 64, false);
  write_sharded(dir / "buffer", c, init_params(c, 1), StDtype::kBF16,
                {"model.layers.0.self_attn.rotary_emb.inv_freq"});
  ::testing::internal::CaptureStderr();
  load_model_dir((dir / "buffer").string());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");

  write_sharded(dir / "head", c, init_params(c, 1), StDtype::kBF16, {"score.weight"});
  try {
    load_model_dir((dir / "head").string());
    ADD_FAILURE() << "an unused tensor loaded silently";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("score.weight"), std::string::npos) << e.what();
  }
  ::testing::internal::CaptureStderr();
  load_model_dir((dir / "head").string(), /*allow_unused_tensors=*/true);
  const auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning"), std::string::npos) << err;
  EXPECT_NE(err.find("score.weight"), std::string::npos) << err;
}

TEST(HuggingFaceLoading, TiedEmbeddingsIgnoreAnExtraLmHead) {
  const auto dir = test::fresh_temp_dir();
  const auto c = small_config(32, 64, true);
  const auto params = init_params(c, 2);
  const ParameterLayout layout(c);
  std::vector<StTensorToWrite> tensors;
  for (const auto& p : layout.params())
    tensors.push_back({p.name, StDtype::kF32, p.shape, params.data() + p.offset});
  const auto& embed = layout.find("model.embed_tokens.weight");
  tensors.push_back({"lm_head.weight", StDtype::kF32, embed.shape, params.data() + embed.offset});
  write_file_atomic((dir / "config.json").string(), config_to_json(c));
  write_safetensors((dir / "model.safetensors").string(), tensors, {});
  ::testing::internal::CaptureStderr();
  const auto w = load_model_dir(dir.string());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(w.config.tie_word_embeddings);
  EXPECT_EQ(w.params, params);
}

// A tiny BertForMaskedLM config (tied decoder, the MLM head's bias).
ModelConfig tiny_bert() {
  return parse_config(R"({"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": 40,
      "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 2,
      "max_position_embeddings": 32, "type_vocab_size": 2, "pad_token_id": 0})",
                      "tiny bert");
}

// A BERT directory as transformers may write it: the layout's tensors plus `extra` (name, values).
fs::path write_bert(const fs::path& dir, const ModelConfig& c, const std::vector<float>& params,
                    const std::vector<std::pair<std::string, std::vector<float>>>& extra) {
  fs::create_directories(dir);
  const ParameterLayout layout(c);
  std::vector<StTensorToWrite> tensors;
  for (const auto& p : layout.params())
    tensors.push_back({p.name, StDtype::kF32, p.shape, params.data() + p.offset});
  for (const auto& [name, values] : extra)
    tensors.push_back({name, StDtype::kF32, {static_cast<int64_t>(values.size())}, values.data()});
  write_file_atomic((dir / "config.json").string(), config_to_json(c));
  write_safetensors((dir / "model.safetensors").string(), tensors, {});
  return dir;
}

// BERT checkpoints both ways: packtrain's save holds HF's names (no decoder weight: it is tied) and loads
// back equal; HF's copies of tied tensors (the decoder's weight and bias, as some exports write them) load
// when equal and are errors when not; position_ids is a constant; the pooler is a tensor the MLM model does
// not use.
TEST(HuggingFaceLoading, BertCheckpointsRoundTripAndAcceptTiedCopies) {
  const auto dir = test::fresh_temp_dir();
  const ModelConfig c = tiny_bert();
  const auto params = init_params(c, 5, 0.5);
  save_model_dir((dir / "saved").string(), c, params, "");
  const auto reader = SafetensorsReader::open((dir / "saved").string());
  EXPECT_TRUE(reader.contains("cls.predictions.bias"));
  EXPECT_TRUE(reader.contains("bert.embeddings.token_type_embeddings.weight"));
  EXPECT_FALSE(reader.contains("cls.predictions.decoder.weight"));
  const auto back = load_model_dir((dir / "saved").string());
  EXPECT_EQ(back.params, params);
  EXPECT_EQ(back.config.family, "bert");
  const std::string config = read_file((dir / "saved" / "config.json").string());
  EXPECT_NE(config.find("\"BertForMaskedLM\""), std::string::npos) << config;

  const ParameterLayout layout(c);
  const ParamInfo& embed = layout.find("bert.embeddings.word_embeddings.weight");
  const ParamInfo& bias = layout.find("cls.predictions.bias");
  auto values = [&](const ParamInfo& p) {
    return std::vector<float>(params.begin() + p.offset, params.begin() + p.offset + p.numel);
  };
  std::vector<float> flat_embed = values(embed), other_bias = values(bias);
  other_bias[3] += 1;
  std::vector<float> position_ids(32);
  for (size_t i = 0; i < position_ids.size(); ++i) position_ids[i] = static_cast<float>(i);
  // The decoder's weight (the embedding's [V, C]) and bias, and position_ids, beside the layout's tensors.
  auto with_decoder = [&](const fs::path& d, const std::vector<float>& decoder_bias) {
    fs::create_directories(d);
    write_file_atomic((d / "config.json").string(), config_to_json(c));
    auto tensors = std::vector<StTensorToWrite>{};
    for (const auto& p : layout.params())
      tensors.push_back({p.name, StDtype::kF32, p.shape, params.data() + p.offset});
    tensors.push_back({"cls.predictions.decoder.weight", StDtype::kF32, embed.shape, flat_embed.data()});
    tensors.push_back({"cls.predictions.decoder.bias", StDtype::kF32, bias.shape, decoder_bias.data()});
    tensors.push_back({"bert.embeddings.position_ids", StDtype::kF32, {32}, position_ids.data()});
    write_safetensors((d / "model.safetensors").string(), tensors, {});
    return d;
  };
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(load_model_dir(with_decoder(dir / "copies", values(bias)).string()).params, params);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  try {
    load_model_dir(with_decoder(dir / "other_bias", other_bias).string());
    ADD_FAILURE() << "a decoder bias unlike cls.predictions.bias loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cls.predictions.decoder.bias"), std::string::npos) << e.what();
  }
  // TensorFlow's LayerNorm names (gamma, beta), as bert-base-uncased's checkpoint has them.
  {
    fs::create_directories(dir / "tf_names");
    write_file_atomic((dir / "tf_names" / "config.json").string(), config_to_json(c));
    std::vector<std::string> names;
    std::vector<StTensorToWrite> tensors;
    for (const auto& p : layout.params()) {
      std::string name = p.name;
      for (auto [hf, tf] :
           {std::pair{".LayerNorm.weight", ".LayerNorm.gamma"}, {".LayerNorm.bias", ".LayerNorm.beta"}})
        if (name.ends_with(hf)) name = name.substr(0, name.size() - std::string(hf).size()) + tf;
      names.push_back(name);
    }
    for (size_t i = 0; i < names.size(); ++i) {
      const ParamInfo& p = layout.params()[i];
      tensors.push_back({names[i], StDtype::kF32, p.shape, params.data() + p.offset});
    }
    write_safetensors((dir / "tf_names" / "model.safetensors").string(), tensors, {});
    EXPECT_EQ(load_model_dir((dir / "tf_names").string()).params, params);
    EXPECT_NE(std::find(names.begin(), names.end(), "bert.embeddings.LayerNorm.gamma"), names.end());
  }
  write_bert(dir / "pooler", c, params, {{"bert.pooler.dense.bias", std::vector<float>(16, 0.5f)}});
  try {
    load_model_dir((dir / "pooler").string());
    ADD_FAILURE() << "the pooler loaded silently";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bert.pooler.dense.bias"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--allow-unused-tensors"), std::string::npos) << e.what();
  }
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(load_model_dir((dir / "pooler").string(), /*allow_unused_tensors=*/true).params, params);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("bert.pooler.dense.bias"), std::string::npos);
}

// The weight files in a model directory, sorted.
std::vector<std::string> weight_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (name.starts_with("model")) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> shard_files(int n) {
  std::vector<std::string> out;
  for (int i = 1; i <= n; ++i) out.push_back(fmt::format("model-{:05}-of-{:05}.safetensors", i, n));
  out.push_back("model.safetensors.index.json");
  return out;
}

// Above the limit, save_model_dir shards as save_pretrained does: numbered shards of at most the limit (a
// larger tensor alone), and an index whose weight_map names every tensor's shard; the model loads back
// equal. At the limit, it writes the one file it always wrote.
TEST(HuggingFaceSaving, ModelsOverTheLimitAreShardedWithAnIndex) {
  const auto dir = test::fresh_temp_dir();
  const auto c = small_config(32, 64, false);
  const auto params = init_params(c, 5);
  const ParameterLayout layout(c);
  const int64_t total_bytes = layout.total() * 4;
  const int64_t limit = 10'000;  // over one FFN matrix (8 KiB) and the embedding, under two of them
  save_model_dir((dir / "sharded").string(), c, params, "", limit);

  const auto index =
      nlohmann::json::parse(read_file((dir / "sharded/model.safetensors.index.json").string()));
  EXPECT_EQ(index["metadata"]["total_size"], total_bytes);
  EXPECT_EQ(index["metadata"]["total_parameters"], layout.total());
  const auto& weight_map = index["weight_map"];
  ASSERT_EQ(weight_map.size(), layout.params().size());
  std::map<std::string, std::vector<std::string>> shards;  // file -> its tensors
  for (const auto& p : layout.params()) {
    ASSERT_TRUE(weight_map.contains(p.name)) << p.name;
    shards[weight_map[p.name].get<std::string>()].push_back(p.name);
  }
  const int n = static_cast<int>(shards.size());
  EXPECT_GE(n, 5);
  EXPECT_EQ(weight_files(dir / "sharded"), shard_files(n));
  for (const auto& [file, names] : shards) {
    const auto shard = SafetensorsReader::open((dir / "sharded" / file).string());
    EXPECT_EQ(shard.names().size(), names.size()) << file;
    size_t bytes = 0;
    for (const auto& name : names) bytes += shard.info(name).bytes;
    EXPECT_TRUE(bytes <= static_cast<size_t>(limit) || names.size() == 1)
        << file << ": " << bytes << " bytes";
    EXPECT_EQ(shard.metadata().at("format"), "pt");
  }
  EXPECT_EQ(load_model_dir((dir / "sharded").string()).params, params);

  // One shard exactly at the limit is model.safetensors, byte for byte the default save; a byte less
  // splits it.
  save_model_dir((dir / "default").string(), c, params, "");
  save_model_dir((dir / "at_limit").string(), c, params, "", total_bytes);
  save_model_dir((dir / "under").string(), c, params, "", total_bytes - 1);
  EXPECT_EQ(weight_files(dir / "at_limit"), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(read_file((dir / "at_limit/model.safetensors").string()),
            read_file((dir / "default/model.safetensors").string()));
  EXPECT_EQ(weight_files(dir / "under"), shard_files(2));
  EXPECT_EQ(load_model_dir((dir / "under").string()).params, params);
}

// A tensor over the limit is a shard of its own, ahead of the shard being filled (huggingface_hub's
// order): with a limit under every matrix, each matrix is alone and the norms share the last shard.
TEST(HuggingFaceSaving, TensorsOverTheLimitGetAShardOfTheirOwn) {
  const auto dir = test::fresh_temp_dir();
  const auto c = small_config(32, 64, true);
  const auto params = init_params(c, 6);
  save_model_dir(dir.string(), c, params, "", 1'000);
  const auto index = nlohmann::json::parse(read_file((dir / "model.safetensors.index.json").string()));
  const ParameterLayout layout(c);
  int matrices = 0;
  for (const auto& p : layout.params()) matrices += p.shape.size() == 2;
  const std::string last = fmt::format("model-{:05}-of-{:05}.safetensors", matrices + 1, matrices + 1);
  std::set<std::string> files;
  for (const auto& p : layout.params()) {
    const auto file = index["weight_map"][p.name].get<std::string>();
    files.insert(file);
    EXPECT_EQ(file == last, p.shape.size() == 1) << p.name << " in " << file;
  }
  EXPECT_EQ(files.size(), static_cast<size_t>(matrices + 1));
  EXPECT_EQ(load_model_dir(dir.string()).params, params);
}

// A save replaces whatever weights an earlier save into the directory left: one file after shards removes
// the shards and the index, shards after one file remove it, and other shard counts' files go too; files
// that are not weights stay.
TEST(HuggingFaceSaving, ResavingRemovesTheEarlierWeightFiles) {
  const auto dir = test::fresh_temp_dir();
  const auto c = small_config(32, 64, false);
  write_file_atomic((dir / "README.md").string(), "notes\n");
  const auto first = init_params(c, 7), second = init_params(c, 8), third = init_params(c, 9);

  save_model_dir(dir.string(), c, first, "", 10'000);
  const auto sharded = weight_files(dir);
  ASSERT_GT(sharded.size(), 3u);
  save_model_dir(dir.string(), c, second, "");
  EXPECT_EQ(weight_files(dir), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(load_model_dir(dir.string()).params, second);

  save_model_dir(dir.string(), c, third, "", 10'000);
  EXPECT_EQ(weight_files(dir), sharded);
  EXPECT_EQ(load_model_dir(dir.string()).params, third);

  save_model_dir(dir.string(), c, first, "", ParameterLayout(c).total() * 4 - 1);
  EXPECT_EQ(weight_files(dir), shard_files(2));
  EXPECT_EQ(load_model_dir(dir.string()).params, first);
  EXPECT_EQ(read_file((dir / "README.md").string()), "notes\n");
}

// A training checkpoint whose model is sharded loads as one with a single model file.
TEST(HuggingFaceSaving, TrainingCheckpointsLoadShardedWeights) {
  const auto root = test::fresh_temp_dir();
  const auto c = small_config(32, 64, false);
  const auto dir = save_step(root, c, 3);
  save_model_dir(dir, c, StepValues(3, ParameterLayout(c).total()).params, R"({"tok": 1})", 10'000);
  EXPECT_FALSE(fs::exists(fs::path(dir) / "model.safetensors"));
  expect_checkpoint_of_step(dir, c, 3);
}

}  // namespace
}  // namespace pt
