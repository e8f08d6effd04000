// The CPU trainer end to end on a small dataset prepared here: the loss goes down, a run stopped and
// resumed is bit-identical to one that was not, and the checkpoints it leaves load back; the same for 2:4
// sparse FFN training, whose masks follow their schedule and whose exported model is the masked one.
// Faults: non-finite steps skip the update (injected NaN and Inf), a stop signal ends the run with a
// checkpoint, a save out of space leaves the previous checkpoint, and the run directory has one writer
// (tests/train/preemption_test.cpp signals the packtrain binary at random points).
#include "train/trainer.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "core/device.h"
#include "core/dir_lock.h"
#include "core/error.h"
#include "core/file.h"
#include "core/float16.h"
#include "data/prepare/prepare.h"
#include "model/families.h"

#include "core/file_size_limit.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace pt {
namespace {

namespace fs = std::filesystem;

// A few hundred short records in the three input shapes, with enough regularity to be learnable.
std::string records_jsonl() {
  const std::vector<std::string> animals = {"cat", "dog", "bird", "fox", "owl", "bee"};
  const std::vector<std::string> places = {"mat", "log", "tree", "den", "barn", "hive"};
  std::string out;
  for (int i = 0; i < 300; ++i) {
    const auto& a = animals[static_cast<size_t>(i) % animals.size()];
    const auto& p = places[static_cast<size_t>(i * 7 / 3) % places.size()];
    const std::string sentence = "the " + a + " sat on the " + p + " " + std::to_string(i % 10);
    nlohmann::json record;
    switch (i % 3) {
      case 0:
        record = {{"text", sentence + ". the " + a + " is happy."}};
        break;
      case 1:
        record = {{"prompt", "where is the " + a + "? "}, {"completion", sentence}};
        break;
      default:
        record = {{"messages",
                   {{{"role", "user"}, {"content", "tell me about the " + a}},
                    {{"role", "assistant"}, {"content", sentence}}}}};
    }
    out += record.dump() + "\n";
  }
  return out;
}

class TrainingRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::fresh_temp_dir();
    const auto input = dir_ / "records.jsonl";
    write_file_atomic(input.string(), records_jsonl());
    PrepareOptions o;
    o.inputs = {input.string()};
    o.tokenizer_path = PACKTRAIN_FIXTURES "/prepare/tokenizer.json";
    o.output_dir = (dir_ / "data").string();
    o.max_len = 96;
    o.val_fraction = 0.1;
    o.threads = 2;
    o.show_progress = false;
    prepare_dataset(o);
    const auto config = dir_ / "config.json";
    write_file_atomic(config.string(), R"({"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 64, "vocab_size": 260})");
    base_.data_dir = o.output_dir;
    base_.model = config.string();
    base_.device = "cpu";  // the reference backend (head_dim 16 is below what the CUDA attention runs)
    base_.packing.strategy = Strategy::kFlatten;
    base_.packing.examples_per_batch = 8;
    base_.lr.peak = 3e-3;
    base_.lr.min_lr = 3e-4;
    base_.eval_every = 0;
    base_.save_every = 0;
  }

  TrainConfig run_config(const std::string& name, int64_t steps) const {
    TrainConfig c = base_;
    c.out_dir = (dir_ / name).string();
    c.steps = steps;
    return c;
  }

  fs::path dir_;
  TrainConfig base_;
};

// The "loss" and "grad_norm" of every train record, as printed.
std::vector<std::string> printed_train_numbers(const fs::path& run_dir) {
  std::ifstream in(run_dir / "metrics.jsonl");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (line.find(R"("type":"train")") == std::string::npos) continue;
    for (const std::string name : {"loss", "grad_norm"})
      out.push_back(name + "=" + test::printed_field(line, name));
  }
  return out;
}

// The metrics.jsonl records of one type, as printed.
std::vector<std::string> records(const fs::path& run_dir, const std::string& type) {
  std::ifstream in(run_dir / "metrics.jsonl");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (line.find(R"("type":")" + type + "\"") != std::string::npos) out.push_back(line);
  return out;
}

// The steps of the "masks" records: where the 2:4 masks were computed.
std::vector<int64_t> mask_steps(const fs::path& run_dir) {
  std::vector<int64_t> steps;
  for (const auto& line : records(run_dir, "masks"))
    steps.push_back(nlohmann::json::parse(line).at("step").get<int64_t>());
  return steps;
}

void expect_resume_is_bitwise(const TrainConfig& uninterrupted, TrainConfig interrupted) {
  train(uninterrupted);
  interrupted.stop_after = 3;
  auto stopped = train(interrupted);
  EXPECT_TRUE(stopped.final_dir.empty());
  EXPECT_FALSE(fs::exists(fs::path(interrupted.out_dir) / "final"));
  train(interrupted);  // resumes at step 3, runs to the end

  const auto a = printed_train_numbers(uninterrupted.out_dir), b = printed_train_numbers(interrupted.out_dir);
  ASSERT_EQ(a.size(), 2 * static_cast<size_t>(uninterrupted.steps));
  EXPECT_EQ(a, b);
  for (const auto& n : a)
    EXPECT_GE(n.size(), std::string("loss=1.2345678").size()) << "too few digits: " << n;
  const auto final_model = [](const TrainConfig& c) {
    return read_file((fs::path(c.out_dir) / "final/model.safetensors").string());
  };
  EXPECT_TRUE(final_model(uninterrupted) == final_model(interrupted)) << "the final weights differ";
  EXPECT_EQ(records(uninterrupted.out_dir, "masks"), records(interrupted.out_dir, "masks"));
}

// MVUE weight gradients, as the paper trains: on the cpu `auto` would take dense ones.
SparsityConfig sparse24() {
  SparsityConfig s;
  s.enabled = true;
  s.weight_grad = WeightGrad::mvue;
  return s;
}

TEST_F(TrainingRun, TrainingLowersTheValidationLoss) {
  auto c = run_config("run", 30);
  c.lr.warmup_steps = 3;
  const auto r = train(c);
  EXPECT_GT(r.first_val_loss, 4.0);  // about ln(260) at initialisation
  EXPECT_LT(r.final_val_loss, r.first_val_loss - 1.0)
      << "first " << r.first_val_loss << " final " << r.final_val_loss;
}

TEST_F(TrainingRun, ResumedRunIsBitwiseEqualToUninterrupted) {
  expect_resume_is_bitwise(run_config("a", 6), run_config("b", 6));
}

TEST_F(TrainingRun, ResumeIsBitwiseWithGradAccumAndBfd) {
  base_.packing.strategy = Strategy::kBfd;
  base_.packing.examples_per_batch = 6;
  base_.packing.row_len = 128;
  base_.grad_accum = 2;
  expect_resume_is_bitwise(run_config("a", 6), run_config("b", 6));
}

TEST_F(TrainingRun, LeavesLatestCheckpointAndHuggingFaceFinalDirectory) {
  auto c = run_config("run", 4);
  c.save_every = 2;
  const auto r = train(c);
  const auto root = fs::path(c.out_dir) / "checkpoints";
  EXPECT_TRUE(fs::is_directory(root / "step-00000002"));
  const auto latest = latest_checkpoint(root.string());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(fs::path(*latest).filename(), "step-00000004");
  const auto ck = load_training_checkpoint(*latest);
  EXPECT_EQ(ck.state.step, 4);

  ASSERT_EQ(r.final_dir, (fs::path(c.out_dir) / "final").string());
  for (const char* file : {"config.json", "model.safetensors", "tokenizer.json"})
    EXPECT_TRUE(fs::exists(fs::path(r.final_dir) / file)) << file;
  EXPECT_EQ(read_file((fs::path(r.final_dir) / "tokenizer.json").string()),
            read_file(PACKTRAIN_FIXTURES "/prepare/tokenizer.json"));
  const auto final_model = load_model_dir(r.final_dir);
  EXPECT_EQ(config_to_json(final_model.config), config_to_json(ck.weights.config));
  EXPECT_EQ(final_model.config.hidden_size, 32);
  EXPECT_EQ(final_model.params, ck.weights.params);
}

// --init fine-tunes each family's HF checkpoint (the oracle fixtures: transformers wrote them), and the
// final model is of the same family, loadable again.
TEST_F(TrainingRun, FineTunesEveryFamilysHfCheckpoint) {
  for (const char* family : {"llama3", "mistral", "qwen2", "qwen3"}) {
    auto c = run_config(family, 8);
    c.init_from = std::string(PACKTRAIN_FIXTURES) + "/hf_oracle/families/" + family + "/hf_model";
    c.lr.peak = 1e-3;
    const auto r = train(c);
    EXPECT_LT(r.final_val_loss, r.first_val_loss - 0.2) << family;
    const ModelWeights final_model = load_model_dir(r.final_dir);
    EXPECT_EQ(final_model.config.family, load_model_dir(c.init_from).config.family) << family;
  }
}

// GPT-2: Conv1D weights and learned positions through training, checkpoints and resumption.
TEST_F(TrainingRun, Gpt2TrainsAndResumesBitwise) {
  const auto config = dir_ / "gpt2.json";
  write_file_atomic(config.string(), R"({"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 2,
      "n_positions": 128, "vocab_size": 260})");
  base_.model = config.string();
  auto c = run_config("run", 20);
  const auto r = train(c);
  EXPECT_LT(r.final_val_loss, r.first_val_loss - 1.0);
  EXPECT_EQ(load_model_dir(r.final_dir).config.family, "gpt2");
  expect_resume_is_bitwise(run_config("a", 6), run_config("b", 6));
}

// BERT: masked-LM pre-training (--objective mlm) on documents tokenized with WordPiece as [CLS] ... [SEP],
// validated on masked-LM batches; the run resumes bit for bit (the masks are drawn from the seed and the
// epoch) and saves a BertForMaskedLM. The objective must be the model's.
TEST_F(TrainingRun, BertTrainsOnMaskedLmAndResumesBitwise) {
  std::string text;
  const std::vector<std::string> animals = {"cat", "dog", "bird", "fox", "owl", "bee"};
  const std::vector<std::string> places = {"mat", "log", "tree", "den", "barn", "hive"};
  for (int i = 0; i < 300; ++i) {
    const auto& a = animals[static_cast<size_t>(i) % animals.size()];
    const std::string sentence =
        "the " + a + " sat on the " + places[static_cast<size_t>(i * 7 / 3) % 6] + ".";
    text += nlohmann::json{{"text", sentence + " the " + a + " is happy."}}.dump() + "\n";
  }
  write_file_atomic((dir_ / "docs.jsonl").string(), text);
  PrepareOptions o;
  o.inputs = {(dir_ / "docs.jsonl").string()};
  o.tokenizer_path = PACKTRAIN_FIXTURES "/tokenizer/wordpiece_bert_uncased.tokenizer.json";
  o.output_dir = (dir_ / "bert_data").string();
  o.max_len = 64;
  o.val_fraction = 0.1;
  o.add_bos = true;  // [CLS] ... [SEP]
  o.threads = 2;
  o.show_progress = false;
  prepare_dataset(o);
  const auto config = dir_ / "bert.json";
  write_file_atomic(config.string(), R"({"model_type": "bert", "architectures": ["BertForMaskedLM"],
      "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
      "max_position_embeddings": 64, "vocab_size": 2000})");
  base_.data_dir = o.output_dir;
  base_.model = config.string();
  base_.packing.objective = Objective::kMaskedLm;
  auto c = run_config("run", 20);
  const auto r = train(c);
  EXPECT_LT(r.final_val_loss, r.first_val_loss - 1.0);
  EXPECT_EQ(load_model_dir(r.final_dir).config.family, "bert");
  expect_resume_is_bitwise(run_config("a", 6), run_config("b", 6));

  auto expect_refused = [&](TrainConfig bad, const char* words) {
    try {
      train(bad);
      ADD_FAILURE() << "no error; wanted: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  auto causal = run_config("causal", 2);
  causal.packing.objective = Objective::kCausalLm;
  expect_refused(causal, "a bert model trains on masked-LM batches; pass --objective mlm");
  causal.dry_run = true;
  expect_refused(causal, "pass --objective mlm");
  auto llama = run_config("llama_mlm", 2);
  const auto llama_config = dir_ / "llama.json";
  write_file_atomic(llama_config.string(),
                    R"({"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 1,
      "num_attention_heads": 2, "intermediate_size": 64, "vocab_size": 2000})");
  llama.model = llama_config.string();
  expect_refused(llama, "a llama model trains on causal-LM batches; pass --objective causal");
}

// concat rows no longer than the learned positions train a GPT-2 on longer examples, validation included:
// it runs in the same rows (flattened validation examples would reach past position 63).
TEST_F(TrainingRun, Gpt2ConcatRowsFitItsPositionsInTrainingAndValidation) {
  auto c = run_config("gpt2_concat", 3);
  c.init_from = std::string(PACKTRAIN_FIXTURES) + "/hf_oracle/families/gpt2/hf_model";  // n_positions 64
  c.packing.strategy = Strategy::kConcat;
  c.packing.row_len = 64;
  c.packing.examples_per_batch = 0;
  c.packing.tokens_per_batch = 128;
  const auto r = train(c);
  EXPECT_GT(r.first_val_loss, 0);
  EXPECT_GT(r.final_val_loss, 0);
}

// A checkpoint whose learned positions are fewer than the data's longest example is refused before
// training, naming what to change; so is a checkpoint holding a tensor the model does not read.
TEST_F(TrainingRun, CheckpointsThatDoNotFitAreRefusedByName) {
  const std::string fixtures = std::string(PACKTRAIN_FIXTURES) + "/hf_oracle/families/";
  auto c = run_config("gpt2", 2);
  c.init_from = fixtures + "gpt2/hf_model";  // n_positions 64, examples up to 96 tokens
  try {
    train(c);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("64 learned positions (n_positions)"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--max-len 64"), std::string::npos) << e.what();
  }
  // qwen2's weights under a llama config: the q/k/v biases are tensors a llama model does not use.
  const auto model = dir_ / "qwen_as_llama";
  fs::create_directories(model);
  fs::copy_file(fixtures + "qwen2/hf_model/model.safetensors", model / "model.safetensors");
  auto cfg = nlohmann::json::parse(read_file(fixtures + "qwen2/hf_model/config.json"));
  cfg["model_type"] = "llama";
  cfg["architectures"] = {"LlamaForCausalLM"};
  for (const char* qwen_only : {"layer_types", "use_sliding_window", "sliding_window", "max_window_layers"})
    cfg.erase(qwen_only);
  write_file_atomic((model / "config.json").string(), cfg.dump());
  c = run_config("llama", 2);
  c.init_from = model.string();
  try {
    train(c);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.self_attn.q_proj.bias"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--allow-unused-tensors"), std::string::npos) << e.what();
  }
  c.allow_unused_tensors = true;
  EXPECT_NO_THROW(train(c));
}

TEST_F(TrainingRun, BadSettingsAreErrorsNamingTheFlag) {
  auto c = run_config("run", 4);
  c.log_every = 0;
  try {
    train(c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--log-every"), std::string::npos) << e.what();
  }
}

TEST_F(TrainingRun, BadDataParallelSettingsAreErrorsNamingTheFlagOrBackend) {
  auto expect_error = [&](TrainConfig c, const std::string& needle) {
    try {
      train(c);
      FAIL() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto c = run_config("run", 4);
  c.dist.timeout_s = 0;
  expect_error(c, "--dist-timeout");
  c = run_config("run", 4);
  c.dist.bucket_mb = -1;
  expect_error(c, "--bucket-mb");
  c = run_config("run", 4);
  c.dist.backend = dist::Backend::kNccl;  // on the cpu
  expect_error(c, "the nccl backend moves cuda tensors");
}

TEST_F(TrainingRun, ZeroOneOnOneLocalProcessIsBitwiseEqualToTheReplicatedOptimizer) {
  auto plain = run_config("plain", 6), zero1 = run_config("zero1", 6);
  zero1.dist.zero1 = true;
  train(plain);
  train(zero1);
  EXPECT_EQ(printed_train_numbers(plain.out_dir), printed_train_numbers(zero1.out_dir));
}

// The clip, folded into AdamW (grad_scale), still clips: a run with a small --clip logs the norm before
// clipping, so its first step logs the loss and norm an unclipped run's does, and every later loss differs.
TEST_F(TrainingRun, ASmallClipScalesTheStepsAndLogsTheNormBeforeIt) {
  auto clipped = run_config("clipped", 4), unclipped = run_config("unclipped", 4);
  clipped.max_grad_norm = 0.05;
  unclipped.max_grad_norm = 0;
  train(clipped);
  train(unclipped);
  const auto a = printed_train_numbers(clipped.out_dir), b = printed_train_numbers(unclipped.out_dir);
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(a[0], b[0]) << "the first step's loss";
  EXPECT_EQ(a[1], b[1]) << "the norm before clipping";
  EXPECT_GT(std::stod(a[1].substr(std::string("grad_norm=").size())), 0.05) << "the run clips";
  for (size_t i = 2; i < a.size(); i += 2) EXPECT_NE(a[i], b[i]);
}

// The data-parallel path on one GPU through NCCL (a world of one: every collective is NCCL's, with the
// ranks' data split, ZeRO-1 sharding and gathered checkpoints of size one), against itself: a run stopped
// and resumed continues as the uninterrupted one, ZeRO-1 trains as the replicated optimizer (to bf16
// reduction noise), and the loss goes down.
TEST_F(TrainingRun, NcclOneRankDataParallelRunTrainsAndResumesOnTheGpu) {
  if (cuda_device_count() == 0 || !dist::backend_available(dist::Backend::kNccl))
    GTEST_SKIP() << "needs a GPU and NCCL";
  const auto config = dir_ / "config_gpu.json";  // head_dim 64, as the CUDA attention needs
  write_file_atomic(config.string(), R"({"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 256, "vocab_size": 260})");
  auto gpu = [&](const std::string& name, bool zero1) {
    auto c = run_config(name, 12);
    c.model = config.string();
    c.device = "cuda";
    c.dist.backend = dist::Backend::kNccl;
    c.dist.zero1 = zero1;
    c.grad_accum = 2;
    return c;
  };
  const auto full = gpu("nccl", false), zero1 = gpu("nccl_zero1", true);
  auto stopped = gpu("nccl_zero1_stopped", true);
  const auto r = train(full);
  EXPECT_LT(r.final_val_loss, r.first_val_loss - 0.1);
  train(zero1);
  stopped.stop_after = 5;
  train(stopped);
  const auto state = nlohmann::json::parse(
      read_file((fs::path(stopped.out_dir) / "checkpoints/step-00000005/trainer_state.json").string()));
  EXPECT_TRUE(state.contains("position")) << state.dump();
  stopped.stop_after = 0;  // the resumed invocation runs to the end
  train(stopped);
  const auto losses = [](const fs::path& dir) {
    std::vector<double> out;
    for (const auto& line : records(dir, "train")) out.push_back(nlohmann::json::parse(line).at("loss"));
    return out;
  };
  const auto a = losses(full.out_dir), b = losses(zero1.out_dir), c = losses(stopped.out_dir);
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(b.size(), 12u);
  ASSERT_EQ(c.size(), 12u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i], a[i], 2e-3 * a[i]) << "step " << i + 1 << ": ZeRO-1 against replicated";
    EXPECT_NEAR(c[i], b[i], 2e-3 * b[i]) << "step " << i + 1 << ": resumed against uninterrupted";
  }
}

// The data-parallel path through NCCL in a world of one GPU against the single-process run (local backend)
// on the same data and seed: with flatten, a one-rank data-parallel step packs the examples the
// single-process stream takes for its micro-batches (on the cpu the two agree to 1e-9 over 8 steps, sparse
// included: only the order of fp32 gradient sums differs). Replicated, ZeRO-1 (sharded fp32 masters, the
// bf16 working weights gathered and read in place) and ZeRO-1 2:4 sparse (masks from the gathered masters,
// the masked cast of the shard, range masked decay, dense fine-tuning) each match the run without NCCL. The
// first step's loss is a forward of the same bf16 weights on the same tokens (summed in double): 1e-6.
// Later steps add the order of fp32 gradient sums (the attention backward's atomics, the batches' token
// order), amplified by bf16 rounding of masters that differ in their last bits: 3e-4 leaves a wide margin
// and still catches a wrong mask or a stale shard, which move the loss by 1e-3 and more (on the cpu).
TEST_F(TrainingRun, NcclOneRankMatchesTheSingleProcessRunOnTheGpu) {
  if (cuda_device_count() == 0 || !dist::backend_available(dist::Backend::kNccl))
    GTEST_SKIP() << "needs a GPU and NCCL";
  const auto config = dir_ / "config_gpu.json";  // head_dim 64, as the CUDA attention needs
  write_file_atomic(config.string(), R"({"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 256, "vocab_size": 260})");
  auto gpu = [&](const std::string& name, dist::Backend backend, bool zero1, bool sparse) {
    auto c = run_config(name, 8);
    c.model = config.string();
    c.device = "cuda";
    c.dist.backend = backend;
    c.dist.zero1 = zero1;
    c.grad_accum = 2;
    c.eval_every = 4;
    if (sparse) {  // dense step 1, masks before steps 2, 4 and 6, dense steps 7 and 8
      c.sparsity = sparse24();
      c.sparsity.mask_every = 2;
      c.sparsity.dense_warmup = 1;
      c.sparsity.dense_finetune = 0.25;
      c.sparsity.masked_decay = 0.05;
    }
    return c;
  };
  struct Case {
    TrainConfig reference, nccl;
  };
  const std::vector<Case> cases = {
      {gpu("local", dist::Backend::kLocal, false, false), gpu("nccl", dist::Backend::kNccl, false, false)},
      {gpu("local", dist::Backend::kLocal, false, false),
       gpu("nccl_zero1", dist::Backend::kNccl, true, false)},
      {gpu("local_sparse", dist::Backend::kLocal, false, true),
       gpu("nccl_zero1_sparse", dist::Backend::kNccl, true, true)}};
  train(cases[0].reference);
  train(cases[2].reference);
  const auto field = [](const fs::path& dir, const std::string& type, const char* name) {
    std::vector<double> out;
    for (const auto& line : records(dir, type)) out.push_back(nlohmann::json::parse(line).at(name));
    return out;
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.nccl.out_dir);
    const auto r = train(c.nccl);
    EXPECT_LT(r.final_val_loss, r.first_val_loss - 0.1);
    const auto want = field(c.reference.out_dir, "train", "loss"),
               got = field(c.nccl.out_dir, "train", "loss");
    ASSERT_EQ(want.size(), 8u);
    ASSERT_EQ(got.size(), 8u);
    EXPECT_NEAR(got[0], want[0], 1e-6 * want[0]) << "step 1";
    for (size_t i = 1; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 3e-4 * want[i]) << "step " << i + 1;
    const auto want_norm = field(c.reference.out_dir, "train", "grad_norm"),
               got_norm = field(c.nccl.out_dir, "train", "grad_norm");
    ASSERT_EQ(got_norm.size(), want_norm.size());
    for (size_t i = 0; i < want_norm.size(); ++i)
      EXPECT_NEAR(got_norm[i], want_norm[i], 3e-3 * want_norm[i]) << "step " << i + 1;
    const auto want_val = field(c.reference.out_dir, "val", "loss"),
               got_val = field(c.nccl.out_dir, "val", "loss");
    ASSERT_EQ(want_val.size(), 3u);  // steps 0, 4 and 8
    ASSERT_EQ(got_val.size(), want_val.size());
    for (size_t i = 0; i < want_val.size(); ++i)
      EXPECT_NEAR(got_val[i], want_val[i], 3e-4 * want_val[i]) << "validation " << i;
    EXPECT_EQ(mask_steps(c.nccl.out_dir), mask_steps(c.reference.out_dir));
    if (c.nccl.sparsity.enabled) {
      EXPECT_EQ(mask_steps(c.nccl.out_dir), (std::vector<int64_t>{2, 4, 6}));
    }
  }
}

TEST_F(TrainingRun, SparseTrainingLowersTheValidationLoss) {
  auto c = run_config("run", 30);
  c.lr.warmup_steps = 3;
  c.sparsity = sparse24();
  c.sparsity.mask_every = 5;
  const auto r = train(c);
  EXPECT_GT(r.first_val_loss, 4.0);
  EXPECT_LT(r.final_val_loss, r.first_val_loss - 1.0)
      << "first " << r.first_val_loss << " final " << r.final_val_loss;
  EXPECT_EQ(mask_steps(c.out_dir), (std::vector<int64_t>{1, 6, 11, 16, 21}));  // dense from step 26
  for (const auto& line : records(c.out_dir, "masks")) {
    const auto j = nlohmann::json::parse(line);
    if (j.at("step") == 1) continue;
    const double rate = j.at("flip_rate").get<double>();
    EXPECT_GE(rate, 0.0);
    EXPECT_LT(rate, 0.5) << line;
  }
}

// Resumed at step 3, between two mask computations (steps 1, 3 and 5 compute them), so the resumed run
// needs the checkpoint's masks; the MVUE draws of both micro-batches and the dense last step must match.
TEST_F(TrainingRun, ResumeIsBitwiseWithSparsity) {
  base_.grad_accum = 2;
  base_.sparsity = sparse24();
  base_.sparsity.mask_every = 2;
  base_.sparsity.masked_decay = 1e-2;  // large enough to move the masks in six steps
  expect_resume_is_bitwise(run_config("a", 6), run_config("b", 6));
  EXPECT_EQ(mask_steps(fs::path(dir_) / "a"), (std::vector<int64_t>{1, 3, 5}));
  const auto ck = load_training_checkpoint((fs::path(dir_) / "b/checkpoints/step-00000003").string());
  EXPECT_EQ(ck.masks.size(), 6u);  // gate, up and down of both layers
}

TEST_F(TrainingRun, ResumeIsBitwiseWithSparsityAndDenseDw) {
  base_.sparsity = sparse24();
  base_.sparsity.mask_every = 4;
  base_.sparsity.weight_grad = WeightGrad::dense;
  base_.sparsity.dense_warmup = 1;
  base_.sparsity.dense_finetune = 0;
  expect_resume_is_bitwise(run_config("a", 6), run_config("b", 6));
  EXPECT_EQ(mask_steps(fs::path(dir_) / "a"), (std::vector<int64_t>{2, 6}));
}

// A run that ends sparse exports the masked model (zeros where pruned) and checkpoints the dense masters
// with the masks; the masks are transposable 2:4.
TEST_F(TrainingRun, SparseRunExportsMaskedWeightsAndCheckpointsDenseMastersWithMasks) {
  auto c = run_config("run", 4);
  c.sparsity = sparse24();
  c.sparsity.dense_finetune = 0;
  c.sparsity.mask_every = 3;
  const auto r = train(c);
  EXPECT_EQ(mask_steps(c.out_dir), (std::vector<int64_t>{1, 4}));
  const auto ck = load_training_checkpoint((fs::path(c.out_dir) / "checkpoints/step-00000004").string());
  const auto exported = load_model_dir(r.final_dir);
  const ParameterLayout layout(ck.weights.config);
  ASSERT_EQ(ck.masks.size(), 6u);
  std::vector<float> want = ck.weights.params;
  int64_t pruned = 0;
  for (const auto& m : ck.masks) {
    const ParamInfo& p = layout.find(m.name);
    ASSERT_EQ(m.shape, p.shape) << m.name;
    const int64_t rows = p.shape[0], cols = p.shape[1];
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; j += 4) {
        int kept = 0;
        for (int64_t k = 0; k < 4; ++k) kept += m.values[static_cast<size_t>(i * cols + j + k)];
        ASSERT_EQ(kept, 2) << m.name << " row " << i << " columns " << j << "-" << j + 3;
      }
    for (int64_t i = 0; i < p.numel; ++i) {
      const auto at = static_cast<size_t>(p.offset + i);
      if (m.values[static_cast<size_t>(i)]) continue;
      EXPECT_NE(ck.weights.params[at], 0.0f) << m.name << ": the checkpoint must keep the dense master";
      want[at] = 0;
      ++pruned;
    }
  }
  EXPECT_EQ(pruned, ck.weights.config.num_hidden_layers * 3LL * 32 * 64 / 2);
  EXPECT_EQ(exported.params, want) << "final/ must hold the masked weights";
}

// Steps 1-3 sparse, 4-6 dense: the masks stop at step 3, checkpoints hold masks only while sparse, and
// the exported model is dense again.
TEST_F(TrainingRun, DenseFinetuneDropsTheMasksAtItsStep) {
  auto c = run_config("run", 6);
  c.sparsity = sparse24();
  c.sparsity.dense_finetune = 0.5;
  c.sparsity.mask_every = 1;
  c.save_every = 1;
  const auto r = train(c);
  EXPECT_EQ(mask_steps(c.out_dir), (std::vector<int64_t>{1, 2, 3}));
  const auto root = fs::path(c.out_dir) / "checkpoints";
  EXPECT_EQ(load_training_checkpoint((root / "step-00000003").string()).masks.size(), 6u);
  EXPECT_TRUE(load_training_checkpoint((root / "step-00000004").string()).masks.empty());
  const auto last = load_training_checkpoint((root / "step-00000006").string());
  EXPECT_TRUE(last.masks.empty());
  EXPECT_EQ(load_model_dir(r.final_dir).params, last.weights.params);
}

TEST_F(TrainingRun, ResumingASparseStepWithoutMasksIsAnError) {
  auto dense = run_config("run", 6);
  dense.stop_after = 3;
  train(dense);  // a dense checkpoint at step 3
  auto sparse = run_config("run", 6);
  sparse.sparsity = sparse24();
  sparse.sparsity.mask_every = 2;  // step 4 (index 3) keeps the masks of step 3
  try {
    train(sparse);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--no-resume"), std::string::npos) << e.what();
  }
}

TEST_F(TrainingRun, BadSparsitySettingsAreErrorsNamingTheFlag) {
  auto c = run_config("run", 4);
  c.sparsity = sparse24();
  c.sparsity.dense_warmup = 4;
  try {
    train(c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--dense-warmup"), std::string::npos) << e.what();
  }
}

// The checkpoint a run saved at `step`.
TrainingCheckpoint checkpoint_at(const TrainConfig& c, int64_t step) {
  return load_training_checkpoint(
      (fs::path(c.out_dir) / "checkpoints" / fmt::format("step-{:08}", step)).string());
}

void expect_same_optimizer_state(const TrainingCheckpoint& a, const TrainingCheckpoint& b) {
  EXPECT_TRUE(a.weights.params == b.weights.params) << a.dir << " vs " << b.dir;
  EXPECT_TRUE(a.adam_m == b.adam_m) << a.dir << " vs " << b.dir;
  EXPECT_TRUE(a.adam_v == b.adam_v) << a.dir << " vs " << b.dir;
}

// The train records of metrics.jsonl by step.
std::map<int64_t, nlohmann::json> train_records(const fs::path& run_dir) {
  std::map<int64_t, nlohmann::json> out;
  for (const auto& line : records(run_dir, "train")) {
    auto j = nlohmann::json::parse(line);
    out[j.at("step").get<int64_t>()] = j;
  }
  return out;
}

std::string final_weights(const TrainConfig& c) {
  return read_file((fs::path(c.out_dir) / "final/model.safetensors").string());
}

// A NaN loss (step 3) and an infinite gradient (step 4, through the real reduction and clipping) skip the
// optimizer: the weights and AdamW moments after step 4 are those after step 2. The steps still count,
// are logged as skipped with null for what was not finite, and the run goes on from there.
TEST_F(TrainingRun, NonFiniteStepsSkipTheUpdateButCount) {
  auto good = run_config("good", 6);
  good.stop_after = 2;
  train(good);
  auto bad = run_config("bad", 6);
  bad.faults.nan_loss = {3};
  bad.faults.inf_grad = {4};
  bad.stop_after = 4;
  const auto r = train(bad);
  EXPECT_EQ(r.end, TrainEnd::stop_after);
  EXPECT_EQ(r.skipped_steps, 2);
  const auto after = checkpoint_at(bad, 4);
  EXPECT_EQ(after.state.step, 4);
  EXPECT_GT(after.state.tokens_seen, checkpoint_at(good, 2).state.tokens_seen);
  expect_same_optimizer_state(after, checkpoint_at(good, 2));

  auto logged = train_records(bad.out_dir);
  ASSERT_EQ(logged.size(), 4u);
  EXPECT_FALSE(logged[2].contains("skipped"));
  EXPECT_EQ(logged[2]["skipped_steps"], 0);
  EXPECT_EQ(logged[3]["skipped"], true);
  EXPECT_TRUE(logged[3]["loss"].is_null()) << logged[3];
  EXPECT_EQ(logged[3]["skipped_steps"], 1);
  EXPECT_EQ(logged[4]["skipped"], true);
  EXPECT_TRUE(logged[4]["loss"].is_number()) << logged[4];
  EXPECT_TRUE(logged[4]["grad_norm"].is_null()) << logged[4];
  EXPECT_EQ(logged[4]["skipped_steps"], 2);

  bad.stop_after = 0;
  const auto rest = train(bad);
  EXPECT_EQ(rest.end, TrainEnd::finished);
  EXPECT_EQ(rest.skipped_steps, 0);  // counted per invocation
  logged = train_records(bad.out_dir);
  EXPECT_TRUE(std::isfinite(logged[6]["loss"].get<double>()));
  EXPECT_NE(logged[5]["loss"], logged[6]["loss"]);
}

// --max-bad-steps in a row stop the run with a checkpoint of the last good weights and advice; fewer in a
// row do not.
TEST_F(TrainingRun, TooManyNonFiniteStepsInARowStopWithTheLastGoodWeights) {
  auto good = run_config("good", 10);
  good.stop_after = 1;
  train(good);
  auto bad = run_config("bad", 10);
  bad.faults.nan_loss = {2, 3, 4};
  bad.max_bad_steps = 3;
  testing::internal::CaptureStderr();
  const auto r = train(bad);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.end, TrainEnd::non_finite);
  EXPECT_EQ(r.last_step, 4);
  EXPECT_TRUE(r.final_dir.empty());
  const auto latest = latest_checkpoint((fs::path(bad.out_dir) / "checkpoints").string());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(fs::path(*latest).filename(), "step-00000004");
  expect_same_optimizer_state(checkpoint_at(bad, 4), checkpoint_at(good, 1));
  EXPECT_NE(log.find("error: steps 2-4: 3 steps in a row had a non-finite loss or gradient norm "
                     "(--max-bad-steps 3)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("(those after step 1)"), std::string::npos) << log;
  EXPECT_NE(log.find("a lower --lr"), std::string::npos) << log;
  EXPECT_NE(log.find("SKIPPED: not finite (3 in a row, 3 in this run)"), std::string::npos) << log;

  auto spaced = run_config("spaced", 8);
  spaced.faults.nan_loss = {2, 3, 5, 6};
  spaced.max_bad_steps = 3;
  const auto ok = train(spaced);
  EXPECT_EQ(ok.end, TrainEnd::finished);
  EXPECT_EQ(ok.skipped_steps, 4);
  EXPECT_FALSE(ok.final_dir.empty());
}

// SIGUSR1 (sent over and over from another thread, so that one lands while train() runs) ends the run
// after a step with a checkpoint; the same config then resumes bit for bit.
TEST_F(TrainingRun, AStopSignalEndsTheRunWithACheckpointAndItResumesBitwise) {
  auto whole = run_config("whole", 6), stopped = run_config("stopped", 6);
  train(whole);
  // Signals that land outside train() (which installs its own handler) find this one.
  struct sigaction quiet {
  }, previous{};
  quiet.sa_handler = [](int) {};
  ::sigaction(SIGUSR1, &quiet, &previous);
  std::atomic<bool> done = false;
  std::thread sender([&] {
    while (!done) {
      ::kill(::getpid(), SIGUSR1);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  TrainResult r;
  try {
    r = train(stopped);
  } catch (...) {
    done = true;
    sender.join();
    throw;
  }
  done = true;
  sender.join();
  ::sigaction(SIGUSR1, &previous, nullptr);
  EXPECT_EQ(r.end, TrainEnd::signal);
  EXPECT_EQ(r.stop_signal, SIGUSR1);
  ASSERT_GE(r.last_step, 1);
  ASSERT_LT(r.last_step, 6);
  EXPECT_TRUE(r.final_dir.empty());
  EXPECT_EQ(checkpoint_at(stopped, r.last_step).state.step, r.last_step);
  EXPECT_EQ(train_records(stopped.out_dir).rbegin()->first, r.last_step) << "the last step is logged";

  EXPECT_EQ(train(stopped).end, TrainEnd::finished);
  EXPECT_EQ(printed_train_numbers(whole.out_dir), printed_train_numbers(stopped.out_dir));
  EXPECT_TRUE(final_weights(whole) == final_weights(stopped)) << "the final weights differ";
}

// A periodic save that runs out of space (RLIMIT_FSIZE) stops the run with an error naming what the
// checkpoint needs; the previous checkpoint stands, and with room again the run ends as if uninterrupted.
TEST_F(TrainingRun, ASaveOutOfSpaceStopsTheRunAndItResumesFromThePreviousCheckpoint) {
  auto whole = run_config("whole", 6), c = run_config("run", 6);
  train(whole);
  c.stop_after = 2;
  train(c);
  try {
    const test::FileSizeLimit limit(64 * 1024);  // the model file alone is larger
    train(c);                                    // steps 3 and 4, then the save of step 4
    FAIL() << "a checkpoint was saved past the file size limit";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cannot save the checkpoint of step 4"), std::string::npos) << m;
    EXPECT_NE(m.find("step-00000004.tmp"), std::string::npos) << m;
    EXPECT_NE(m.find("The checkpoint needs about "), std::string::npos) << m;
  }
  const auto latest = latest_checkpoint((fs::path(c.out_dir) / "checkpoints").string());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(fs::path(*latest).filename(), "step-00000002");
  c.stop_after = 0;
  train(c);
  EXPECT_TRUE(final_weights(whole) == final_weights(c)) << "the final weights differ";
}

TEST_F(TrainingRun, ASecondWriterOfTheRunDirectoryFailsAtOnce) {
  auto c = run_config("run", 2);
  fs::create_directories(c.out_dir);
  {
    const DirectoryLock held(c.out_dir, "train", "--out");
    try {
      train(c);
      FAIL() << "two writers trained into one run directory";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is in use: packtrain train (pid " + std::to_string(::getpid())),
                std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(fs::exists(fs::path(c.out_dir) / "metrics.jsonl")) << "the second writer wrote";
  }
  EXPECT_EQ(train(c).end, TrainEnd::finished);
}

// scripts/plot_run.py draws a tiny run's metrics, and two runs in one chart, into PNGs (skipped without
// python3's matplotlib).
TEST_F(TrainingRun, PlotRunDrawsRunsIntoAPng) {
  if (std::system(PACKTRAIN_PYTHON " -c 'import matplotlib' 2>/dev/null") != 0)
    GTEST_SKIP() << PACKTRAIN_PYTHON " has no matplotlib (Debian: python3-matplotlib)";
  const fs::path script =
      fs::path(PACKTRAIN_FIXTURES).parent_path().parent_path() / "scripts" / "plot_run.py";
  auto a = run_config("a", 4), b = run_config("b", 4);
  a.eval_every = 2;
  b.faults.nan_loss = {2};  // drawn as a skipped step
  train(a);
  train(b);
  const auto is_png = [](const fs::path& path) {
    return fs::exists(path) && fs::file_size(path) > 10'000 && read_file(path.string()).substr(1, 3) == "PNG";
  };
  const std::string plot = PACKTRAIN_PYTHON " " + script.string() + " ";
  ASSERT_EQ(std::system((plot + a.out_dir + " > /dev/null").c_str()), 0);
  EXPECT_TRUE(is_png(fs::path(a.out_dir) / "metrics.png"));
  const auto both = dir_ / "both.png";
  ASSERT_EQ(std::system((plot + a.out_dir + " " + b.out_dir + "/metrics.jsonl --x tokens --smooth 2 -o " +
                         both.string() + " > /dev/null")
                            .c_str()),
            0);
  EXPECT_TRUE(is_png(both));
  EXPECT_NE(std::system((plot + (dir_ / "missing").string() + " 2> /dev/null").c_str()), 0);
}

// The compact AdamW moment formats train as f32 moments do: over 30 steps of the tiny model each step's
// loss stays within 0.2% of the f32 run's, and the final validation loss within 0.1%.
TEST_F(TrainingRun, Bf16And8BitOptimizerStatesTrainAsF32Does) {
  const auto run = [&](const char* name, ops::MomentFormat format) {
    auto c = run_config(name, 30);
    c.lr.warmup_steps = 3;
    c.optimizer_state = format;
    const TrainResult r = train(c);
    return std::pair{train_records(c.out_dir), r};
  };
  const auto [want, f32] = run("f32", ops::MomentFormat::f32);
  for (const auto format : {ops::MomentFormat::bf16, ops::MomentFormat::q8}) {
    const auto name = std::string(ops::moment_format_name(format));
    const auto [got, r] = run(name.c_str(), format);
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    for (const auto& [step, record] : want) {
      const double a = record.at("loss").get<double>(), b = got.at(step).at("loss").get<double>();
      worst = std::max(worst, std::fabs(b - a) / a);
    }
    const double val = std::fabs(r.final_val_loss - f32.final_val_loss) / f32.final_val_loss;
    std::cout << "[ measured ] " << name << " moments, 30 steps: max step loss difference " << worst
              << " (relative), final validation loss " << r.final_val_loss << " vs f32 " << f32.final_val_loss
              << " (" << val << ")\n";
    EXPECT_LE(worst, 0.002) << name;
    EXPECT_LE(val, 0.001) << name;
    EXPECT_LT(r.final_val_loss, r.first_val_loss - 1.0) << name;
  }
}

// A run with bf16 or 8-bit moments resumes bit for bit; its checkpoints keep the moments as the optimizer
// holds them (8-bit: about a quarter of the f32 file).
TEST_F(TrainingRun, ResumeIsBitwiseWithBf16And8BitOptimizerStates) {
  auto f32 = run_config("f32", 4);
  f32.stop_after = 3;
  train(f32);
  const auto optimizer_file = [](const TrainConfig& c) {
    return fs::file_size(fs::path(c.out_dir) / "checkpoints/step-00000003/optimizer.safetensors");
  };
  for (const auto format : {ops::MomentFormat::bf16, ops::MomentFormat::q8}) {
    const auto name = std::string(ops::moment_format_name(format));
    SCOPED_TRACE(name);
    auto a = run_config(name + "-a", 6), b = run_config(name + "-b", 6);
    a.optimizer_state = b.optimizer_state = format;
    expect_resume_is_bitwise(a, b);
    EXPECT_EQ(checkpoint_at(b, 3).adam_m.format, format);
    const double ratio = double(optimizer_file(b)) / double(optimizer_file(f32));
    EXPECT_LT(ratio, format == ops::MomentFormat::q8 ? 0.3 : 0.55);
  }
}

TEST_F(TrainingRun, EightBitZeroOneOnOneLocalProcessIsBitwiseEqualToTheReplicatedOptimizer) {
  auto plain = run_config("plain", 6), zero1 = run_config("zero1", 6);
  plain.optimizer_state = zero1.optimizer_state = ops::MomentFormat::q8;
  zero1.dist.zero1 = true;
  train(plain);
  train(zero1);
  EXPECT_EQ(printed_train_numbers(plain.out_dir), printed_train_numbers(zero1.out_dir));
}

// The message of the error train(c) throws (a test failure when it throws none).
std::string train_error(const TrainConfig& c) {
  try {
    train(c);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "train() threw no error";
  return {};
}

// Moments are not converted between formats: resuming in another mode is an error naming both.
TEST_F(TrainingRun, ACheckpointResumesOnlyInItsOwnOptimizerStateMode) {
  auto c = run_config("run", 4);
  c.optimizer_state = ops::MomentFormat::q8;
  c.stop_after = 2;
  train(c);
  c.optimizer_state = ops::MomentFormat::f32;
  const std::string what = train_error(c);  // resumed 8-bit moments as f32
  EXPECT_NE(what.find("in 8bit but this run keeps them in f32"), std::string::npos) << what;
  EXPECT_NE(what.find("--optimizer-state 8bit"), std::string::npos) << what;
}

// --no-save (benchmarks): the run trains and validates but writes no checkpoint and no final model.
TEST_F(TrainingRun, NoSaveWritesNoCheckpointAndNoFinalModel) {
  auto c = run_config("run", 3);
  c.save = false;
  c.save_every = 1;
  const TrainResult r = train(c);
  EXPECT_EQ(r.last_step, 3);
  EXPECT_TRUE(r.final_dir.empty());
  const fs::path checkpoints = fs::path(c.out_dir) / "checkpoints";
  EXPECT_TRUE(!fs::exists(checkpoints) || fs::is_empty(checkpoints));
  EXPECT_FALSE(fs::exists(fs::path(c.out_dir) / "final"));
  EXPECT_EQ(records(c.out_dir, "train").size(), 3u);
}

// Without fp32 masters (--master-weights bf16) the weights are bf16 values updated with stochastic
// rounding: every weight a checkpoint and the final model hold is a bf16 value, and the run trains as the
// one with masters does (30 steps of the tiny model: the final validation loss within 1%). Each step's loss
// moves apart a little more than with compact moments, as the weights themselves carry the rounding.
TEST_F(TrainingRun, Bf16MasterWeightsTrainAsFp32MastersDo) {
  const auto run = [&](const char* name, DType masters) {
    auto c = run_config(name, 30);
    c.lr.warmup_steps = 3;
    c.master_weights = masters;
    const TrainResult r = train(c);
    return std::pair{c, r};
  };
  const auto [f32_config, f32] = run("f32", DType::f32);
  const auto [bf16_config, bf16] = run("bf16", DType::bf16);
  const double val = std::fabs(bf16.final_val_loss - f32.final_val_loss) / f32.final_val_loss;
  std::cout << "[ measured ] bf16 master weights, 30 steps: final validation loss " << bf16.final_val_loss
            << " vs fp32 masters " << f32.final_val_loss << " (" << val << " relative)\n";
  EXPECT_LE(val, 0.01);
  EXPECT_LT(bf16.final_val_loss, bf16.first_val_loss - 1.0);
  const ModelWeights final = load_model_dir((fs::path(bf16_config.out_dir) / "final").string());
  size_t off_grid = 0;
  for (const float w : final.params) off_grid += bf16_to_float(float_to_bf16(w)) != w;
  EXPECT_EQ(off_grid, 0u) << "weights that are not bf16 values";
  const ModelWeights with_masters = load_model_dir((fs::path(f32_config.out_dir) / "final").string());
  off_grid = 0;
  for (const float w : with_masters.params) off_grid += bf16_to_float(float_to_bf16(w)) != w;
  EXPECT_GT(off_grid, with_masters.params.size() / 2) << "the fp32 masters' run should not be on the grid";
  // bf16 values are saved as BF16 (exactly, in half the bytes), and config.json says so.
  const auto final_file = [](const TrainConfig& c) {
    return fs::path(c.out_dir) / "final/model.safetensors";
  };
  const auto reader = SafetensorsReader::open(final_file(bf16_config).string());
  EXPECT_EQ(reader.info(reader.names().front()).dtype, StDtype::kBF16);
  EXPECT_LT(double(fs::file_size(final_file(bf16_config))),
            0.55 * double(fs::file_size(final_file(f32_config))));
  const auto config =
      nlohmann::json::parse(read_file((fs::path(bf16_config.out_dir) / "final/config.json").string()));
  EXPECT_EQ(config.at("torch_dtype"), "bfloat16");
}

// Stochastic rounding draws hash the seed, the step and each weight's flat index: a resumed run repeats
// them (bit for bit, with 8-bit moments too, as 8B models train), and ZeRO-1's shards round each weight
// as the replicated optimizer does.
TEST_F(TrainingRun, Bf16MasterWeightsResumeBitwiseAndShardAlike) {
  auto a = run_config("a", 6), b = run_config("b", 6);
  a.master_weights = b.master_weights = DType::bf16;
  a.optimizer_state = b.optimizer_state = ops::MomentFormat::q8;
  expect_resume_is_bitwise(a, b);
  EXPECT_EQ(checkpoint_at(b, 3).state.masters, DType::bf16);
  auto zero1 = run_config("zero1", 6);
  zero1.master_weights = DType::bf16;
  zero1.optimizer_state = ops::MomentFormat::q8;
  zero1.dist.zero1 = true;
  train(zero1);
  EXPECT_EQ(printed_train_numbers(a.out_dir), printed_train_numbers(zero1.out_dir));
}

// Masters are not converted either way, and 2:4 training, which keeps the pruned weights in the masters,
// is refused without them; both errors name the flags.
TEST_F(TrainingRun, MasterWeightsModesAreRefusedWhereTheyDoNotApply) {
  auto c = run_config("run", 4);
  c.master_weights = DType::bf16;
  c.stop_after = 2;
  train(c);
  c.master_weights = DType::f32;
  const std::string resumed = train_error(c);  // bf16 weights as fp32 masters
  EXPECT_NE(resumed.find("keeps bf16 master weights but this run f32"), std::string::npos) << resumed;
  EXPECT_NE(resumed.find("--master-weights bf16"), std::string::npos) << resumed;
  auto sparse = run_config("sparse", 4);
  sparse.master_weights = DType::bf16;
  sparse.sparsity = sparse24();
  const std::string sparse_error = train_error(sparse);  // 2:4 training without masters
  EXPECT_NE(sparse_error.find("--sparse24 needs fp32 master weights"), std::string::npos) << sparse_error;
}

// --optimizer-in-backward updates each block of parameters as the backward finishes it: without clipping
// it trains exactly as the step after the backward does (every loss and the final weights bit for bit,
// the gradient norm to rounding, as it sums the blocks' squares), with f32 state and with bf16 weights and
// 8-bit moments; its gradients take the embeddings' and one block's buffers, as planned; it resumes
// bitwise.
TEST_F(TrainingRun, OptimizerInBackwardTrainsAsTheStepAfterTheBackwardAndResumesBitwise) {
  for (const bool compact : {false, true}) {
    const std::string mode = compact ? "bf16_8bit" : "f32";
    auto after = run_config("after_" + mode, 6), in = run_config("in_" + mode, 6);
    after.max_grad_norm = in.max_grad_norm = 0;
    in.optimizer_in_backward = true;
    if (compact) {
      for (TrainConfig* c : {&after, &in})
        c->master_weights = DType::bf16, c->optimizer_state = ops::MomentFormat::q8;
    }
    const TrainResult a = train(after), b = train(in);
    EXPECT_EQ(a.final_val_loss, b.final_val_loss) << mode;
    EXPECT_TRUE(final_weights(after) == final_weights(in)) << mode << ": the final weights differ";
    auto want = train_records(after.out_dir), got = train_records(in.out_dir);
    ASSERT_EQ(got.size(), 6u);
    for (auto& [step, record] : got) {
      EXPECT_EQ(record["loss"], want[step]["loss"]) << mode << " step " << step;
      EXPECT_NEAR(record["grad_norm"].get<double>(), want[step]["grad_norm"].get<double>(),
                  1e-9 * want[step]["grad_norm"].get<double>());
    }
    EXPECT_EQ(b.memory_held.gradients, b.memory_plan.gradients);
    EXPECT_LT(b.memory_plan.gradients, a.memory_plan.gradients);
    EXPECT_EQ(plan_mismatches(b.memory_plan, b.memory_held), "");
  }
  auto whole = run_config("whole", 6), resumed = run_config("resumed", 6);
  whole.max_grad_norm = resumed.max_grad_norm = 0;
  whole.optimizer_in_backward = resumed.optimizer_in_backward = true;
  expect_resume_is_bitwise(whole, resumed);
}

// An infinite gradient makes the head's block, the first to close, not finite: the whole step is skipped
// (weights and moments after step 3 are those after step 2) and counted.
TEST_F(TrainingRun, OptimizerInBackwardSkipsAStepWithInfiniteGradients) {
  auto good = run_config("good", 6), bad = run_config("bad", 6);
  for (TrainConfig* c : {&good, &bad}) c->max_grad_norm = 0, c->optimizer_in_backward = true;
  good.stop_after = 2;
  train(good);
  bad.faults.inf_grad = {3};
  bad.stop_after = 3;
  const TrainResult r = train(bad);
  EXPECT_EQ(r.skipped_steps, 1);
  expect_same_optimizer_state(checkpoint_at(bad, 3), checkpoint_at(good, 2));
  EXPECT_TRUE(train_records(bad.out_dir)[3]["grad_norm"].is_null());
}

// What a step in the backward cannot do is refused, naming the flag to change.
TEST_F(TrainingRun, OptimizerInBackwardRefusesClippingAccumulationSparsityAndZeroOne) {
  auto c = run_config("run", 2);
  c.optimizer_in_backward = true;
  const std::string clip = train_error(c);  // --clip 1 by default
  EXPECT_NE(clip.find("cannot clip: pass --clip 0"), std::string::npos) << clip;
  c.max_grad_norm = 0;
  c.grad_accum = 2;
  const std::string accum = train_error(c);
  EXPECT_NE(accum.find("pass --grad-accum 1 (got 2)"), std::string::npos) << accum;
  c.grad_accum = 1;
  c.sparsity = sparse24();
  const std::string sparse = train_error(c);
  EXPECT_NE(sparse.find("2:4 training's masked decay"), std::string::npos) << sparse;
  c.sparsity = {};
  c.dist.zero1 = true;
  const std::string zero1 = train_error(c);
  EXPECT_NE(zero1.find("drop --zero1"), std::string::npos) << zero1;
  c.dist.zero1 = false;
  c.max_grad_norm = -1;
  const std::string negative = train_error(c);
  EXPECT_NE(negative.find("--clip must be 0 (no clipping) or positive (got -1)"), std::string::npos)
      << negative;
}

// --offload-optimizer keeps the state in host memory and updates it block by block through two device
// slots: on the cpu (where the copies are plain) it trains exactly as the state kept in place does, with
// the step after the backward or in it, f32 state or bf16 weights with 8-bit moments; what it allocates is
// its plan, and it resumes bitwise.
TEST_F(TrainingRun, OffloadedOptimizerTrainsAsTheOneInPlaceAndResumesBitwise) {
  for (const bool in_backward : {false, true}) {
    for (const bool compact : {false, true}) {
      const std::string mode =
          std::string(in_backward ? "in_backward" : "after") + (compact ? "_compact" : "");
      auto in_place = run_config("in_place_" + mode, 5), offloaded = run_config("offloaded_" + mode, 5);
      for (TrainConfig* c : {&in_place, &offloaded}) {
        c->optimizer_in_backward = in_backward;
        if (in_backward) c->max_grad_norm = 0;
        if (compact) c->master_weights = DType::bf16, c->optimizer_state = ops::MomentFormat::q8;
      }
      offloaded.offload_optimizer = true;
      const TrainResult a = train(in_place), b = train(offloaded);
      EXPECT_EQ(printed_train_numbers(in_place.out_dir), printed_train_numbers(offloaded.out_dir)) << mode;
      EXPECT_EQ(a.final_val_loss, b.final_val_loss) << mode;
      EXPECT_TRUE(final_weights(in_place) == final_weights(offloaded))
          << mode << ": the final weights differ";
      expect_same_optimizer_state(checkpoint_at(in_place, 5), checkpoint_at(offloaded, 5));
      EXPECT_EQ(plan_mismatches(b.memory_plan, b.memory_held), "") << mode;
      EXPECT_GT(b.memory_plan.offload_slots, 0) << mode;
    }
  }
  auto whole = run_config("whole", 6), resumed = run_config("resumed", 6);
  whole.offload_optimizer = resumed.offload_optimizer = true;
  expect_resume_is_bitwise(whole, resumed);
  auto zero1 = run_config("zero1", 2);
  zero1.offload_optimizer = zero1.dist.zero1 = true;
  const std::string what = train_error(zero1);
  EXPECT_NE(what.find("--offload-optimizer keeps every parameter's state"), std::string::npos) << what;
  auto sparse = run_config("sparse", 2);
  sparse.offload_optimizer = true;
  sparse.sparsity = sparse24();
  const std::string sparse_what = train_error(sparse);
  EXPECT_NE(sparse_what.find("2:4 training computes its masks"), std::string::npos) << sparse_what;
}

// On the GPU the offloaded state goes over the bus on two copy streams beside the compute: the same
// losses as the state kept on the device (the same kernels on the same values, so to the order of float
// atomics), after the backward and in it, with f32 state and with bf16 weights and 8-bit moments; the
// plan's device lines and its pinned host memory are what the run allocates.
TEST_F(TrainingRun, OffloadedOptimizerMatchesTheDeviceStateOnTheGpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "needs a GPU";
  const auto config = dir_ / "config_gpu.json";  // head_dim 64, as the CUDA attention needs
  write_file_atomic(config.string(), R"({"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 256, "vocab_size": 260})");
  const auto field = [](const fs::path& dir, const char* name) {
    std::vector<double> out;
    for (const auto& line : records(dir, "train")) out.push_back(nlohmann::json::parse(line).at(name));
    return out;
  };
  for (const bool in_backward : {false, true}) {
    for (const bool compact : {false, true}) {
      const std::string mode =
          std::string(in_backward ? "in_backward" : "after") + (compact ? "_compact" : "");
      auto on_device = run_config("device_" + mode, 8), offloaded = run_config("offloaded_" + mode, 8);
      for (TrainConfig* c : {&on_device, &offloaded}) {
        c->model = config.string();
        c->device = "cuda";
        c->optimizer_in_backward = in_backward;
        if (in_backward) c->max_grad_norm = 0;
        if (compact) c->master_weights = DType::bf16, c->optimizer_state = ops::MomentFormat::q8;
      }
      offloaded.offload_optimizer = true;
      const TrainResult a = train(on_device), b = train(offloaded);
      const auto want = field(on_device.out_dir, "loss"), got = field(offloaded.out_dir, "loss");
      ASSERT_EQ(got.size(), 8u) << mode;
      ASSERT_EQ(want.size(), 8u) << mode;
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-4 * want[i]) << mode << " step " << i + 1;
      EXPECT_NEAR(b.final_val_loss, a.final_val_loss, 1e-4 * a.final_val_loss) << mode;
      EXPECT_LT(b.final_val_loss, b.first_val_loss - 0.1) << mode;
      EXPECT_EQ(plan_mismatches(b.memory_plan, b.memory_held), "") << mode;
      EXPECT_EQ(b.memory_plan.masters + b.memory_plan.moments, 0) << mode;
      EXPECT_EQ(b.memory_plan.host_state, a.memory_plan.masters + a.memory_plan.moments) << mode;
    }
  }
}

}  // namespace
}  // namespace pt
