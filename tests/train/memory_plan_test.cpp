// The memory plan (train/memory_plan.h) against what packtrain allocates, and the refusal with the settings
// that fit (train/memory_fit.h):
// - the plan's arena lines equal, to the byte, the arenas of a model of every family shape, recompute mode,
//   micro-batch size and 2:4 sparsity; of ZeRO-1 optimizers on ranks of several worlds; and of whole CPU
//   training runs (setup and steps: grad accumulation, recompute, sparse, ZeRO-1);
// - the 8B preset on an H200 is refused with settings that fit, and a new mode is one more candidate;
// - `packtrain train --dry-run` prints the plan and exits 0 without allocating it, and a run that cannot
//   fit is refused before anything is allocated.
#include "train/memory_plan.h"
#include "train/memory_fit.h"
#include "train/step_in_backward.h"

#include "core/error.h"
#include "core/file.h"
#include "data/prepare/prepare.h"
#include "distributed/data_parallel.h"
#include "model/decoder.h"
#include "model/presets.h"
#include "model/sparsity.h"
#include "train/trainer.h"

#include "model/family_configs.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace pt {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kGiB = int64_t{1} << 30;

PlanSettings cpu_settings(const ModelConfig& model, int64_t tokens, Recompute recompute = Recompute::none) {
  PlanSettings s;
  s.model = model;
  s.tokens = tokens;
  s.recompute = recompute;
  return s;
}

SparsityConfig sparse_ffn() {
  SparsityConfig s;
  s.enabled = true;
  return s;
}

TEST(MemoryPlan, ModelArenasEqualThePlanForEveryFamilyRecomputeModeAndBatchSize) {
  for (const std::string& variant : testing::kFamilyVariants)
    for (Recompute recompute : {Recompute::none, Recompute::norms_and_swiglu, Recompute::layers}) {
      const ModelConfig c = testing::family_config(variant, 8);
      for (int64_t tokens :
           {int64_t{1}, int64_t{100}, DecoderModel::logit_chunk_tokens(c.vocab_size) + 300}) {
        const MemoryPlan plan = plan_memory(cpu_settings(c, tokens, recompute));
        const DecoderModel model(c, tokens, Device::cpu, DType::f32, {}, recompute);
        const DecoderModel::Memory held = model.memory();
        SCOPED_TRACE(variant + ", " + std::to_string(tokens) + " tokens, recompute " +
                     std::to_string(static_cast<int>(recompute)));
        EXPECT_EQ(plan.activations + plan.lm_head_chunk, held.activations);
        EXPECT_EQ(plan.batch_inputs, held.batch_inputs);
        EXPECT_EQ(plan.parameters, ParameterLayout(c).total());
      }
    }
}

TEST(MemoryPlan, RecomputeShrinksTheActivationsPerToken) {
  const ModelConfig c = preset_config("llama3.2-1b");
  auto per_token = [&](Recompute r) {
    return plan_memory(cpu_settings(c, 8192, r)).activation_bytes_per_token();
  };
  const double none = per_token(Recompute::none), norms = per_token(Recompute::norms_and_swiglu),
               layers = per_token(Recompute::layers);
  EXPECT_LT(norms, 0.8 * none);  // about 29% less, as --recompute says
  EXPECT_LT(layers, 0.25 * none);
}

// GPT-2 among them: its dense MLP runs the GELU in the GEMMs' epilogues and keeps no activation gradient,
// its sparse one does.
TEST(MemoryPlan, SparseWeightCopiesMasksAndActivationsEqualTheirArenas) {
  for (const std::string variant : {"llama", "gpt2"})
    for (bool gate_up : {true, false}) {
      const ModelConfig c = testing::family_config(variant, 8);
      SparsityConfig sparsity = sparse_ffn();
      sparsity.gate_up = gate_up;
      PlanSettings s = cpu_settings(c, 64);
      s.sparsity = sparsity;
      const MemoryPlan plan = plan_memory(s);
      const DecoderModel model(c, 64, Device::cpu, DType::f32, sparsity);
      const FfnMasks masks(c, sparsity, Device::cpu);
      SCOPED_TRACE(variant + ", gate_up " + std::to_string(gate_up));
      EXPECT_EQ(plan.sparse_weights, model.memory().sparse_copies);
      EXPECT_EQ(plan.sparse_masks, masks.bytes());
      EXPECT_EQ(plan.activations + plan.lm_head_chunk, model.memory().activations);
    }
  const ModelConfig gpt2 = testing::family_config("gpt2", 8);
  PlanSettings sparse = cpu_settings(gpt2, 64);
  sparse.sparsity = sparse_ffn();
  EXPECT_LT(plan_memory(cpu_settings(gpt2, 64)).activations, plan_memory(sparse).activations)
      << "the dense GPT-2 MLP keeps no activation gradient";
}

// Rank r of a world of n whose collectives do nothing: the optimizer's allocations are what is compared.
class StubWorld : public dist::Communicator {
 public:
  StubWorld(int rank, int size) : Communicator(rank, size, Device::cpu, 1) {}
  std::string_view backend() const override { return "stub"; }

 protected:
  void start(const dist::Collective&) override {}
  void finish(const dist::Collective&, Clock::time_point) override {}
};

TEST(MemoryPlan, OptimizerStateGradientsAndWorkingCopyPerRankEqualTheOptimizersUnderZeroOne) {
  const ModelConfig c = testing::family_config("qwen3", 8);
  const ParameterLayout layout(c);
  for (int world : {1, 2, 3, 8})
    for (bool zero1 : {false, true})
      for (int rank = 0; rank < world; ++rank) {
        PlanSettings s = cpu_settings(c, 16);
        s.world_size = world, s.zero1 = zero1;
        const MemoryPlan plan = plan_memory(s);
        const int64_t flat = dist::DataParallelOptimizer::flat_size(layout.total(), world, zero1);
        std::vector<float> grads(static_cast<size_t>(flat));
        StubWorld comm(rank, world);
        const dist::DataParallelOptimizer dp(comm, layout, Tensor::of(grads.data(), {flat}),
                                             {.zero1 = zero1});
        SCOPED_TRACE("rank " + std::to_string(rank) + " of " + std::to_string(world) +
                     (zero1 ? ", ZeRO-1" : ""));
        EXPECT_EQ(plan.masters + plan.moments, dp.state_bytes());
        EXPECT_EQ(plan.working_weights, dp.working_bytes());
        EXPECT_EQ(plan.gradients, (flat * 4 + 255) / 256 * 256);
      }
}

TEST(MemoryPlan, MomentFormatsTakeTheirBytesPerParameter) {
  const int64_t n = 1024 * ops::kQuantBlock;
  EXPECT_EQ(ops::moment_bytes(MomentFormat::f32, n), 4 * n);
  EXPECT_EQ(ops::moment_bytes(MomentFormat::bf16, n), 2 * n);
  EXPECT_EQ(ops::moment_bytes(MomentFormat::q8, n), n + 4 * 1024);  // a byte each and an f32 absmax per block
  EXPECT_EQ(ops::moment_bytes(MomentFormat::q8, 1), 1 + 4);
}

// With every moment format, the plan's optimizer state is the largest rank's allocation (8-bit moments'
// block absmax counts differ a little between ZeRO-1 ranks).
TEST(MemoryPlan, OptimizerStateOfEveryMomentFormatIsTheLargestRanks) {
  const ModelConfig c = testing::family_config("qwen3", 8);
  const ParameterLayout layout(c);
  for (const MomentFormat format : {MomentFormat::f32, MomentFormat::bf16, MomentFormat::q8})
    for (int world : {1, 3, 8}) {
      PlanSettings s = cpu_settings(c, 16);
      s.world_size = world, s.zero1 = world > 1, s.moments = format;
      const MemoryPlan plan = plan_memory(s);
      const int64_t flat = dist::DataParallelOptimizer::flat_size(layout.total(), world, s.zero1);
      std::vector<float> grads(static_cast<size_t>(flat));
      int64_t largest = 0;
      for (int rank = 0; rank < world; ++rank) {
        StubWorld comm(rank, world);
        const dist::DataParallelOptimizer dp(comm, layout, Tensor::of(grads.data(), {flat}),
                                             {.zero1 = s.zero1, .moments = format});
        largest = std::max(largest, dp.state_bytes());
      }
      EXPECT_EQ(plan.masters + plan.moments, largest) << moment_format_name(format) << " on " << world;
    }
}

// --- The 8B preset on one H200 (139 GiB free), pure computation.

PlanSettings llama8b_on_gpu() {
  PlanSettings s;
  s.model = preset_config("llama3.1-8b");
  s.device = Device::cuda;
  s.tokens = 16384;
  return s;
}

constexpr int64_t kH200Free = 139 * kGiB;

TEST(MemoryFit, Llama8bWithFp32StateTakes18BytesAParameterAndIsRefusedWithSettingsThatFit) {
  const MemoryPlan plan = plan_memory(llama8b_on_gpu());
  const double n = static_cast<double>(plan.parameters);
  EXPECT_NEAR(n / 1e9, 8.03, 0.01);
  EXPECT_NEAR(static_cast<double>(plan.working_weights) / n, 2.0, 1e-6);
  EXPECT_NEAR(static_cast<double>(plan.masters) / n, 4.0, 1e-6);
  EXPECT_NEAR(static_cast<double>(plan.moments) / n, 8.0, 1e-6);
  EXPECT_NEAR(static_cast<double>(plan.gradients) / n, 4.0, 1e-6);
  EXPECT_GT(plan.total(), kH200Free);

  const std::string refusal = fit_refusal(plan, kH200Free, 2048);
  EXPECT_NE(refusal.find("GiB of GPU memory per rank"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("Settings that fit:"), std::string::npos) << refusal;
  const std::vector<FitSuggestion> fitting = fitting_settings(plan.settings, kH200Free, 2048);
  ASSERT_FALSE(fitting.empty());
  bool in_backward = false;
  for (const FitSuggestion& f : fitting) {
    EXPECT_LE(f.total, kH200Free) << f.flags;
    EXPECT_NE(refusal.find(f.flags), std::string::npos) << f.flags;
    in_backward |= f.flags == "--recompute=layers --optimizer-in-backward --clip 0";
  }
  // On one GPU AdamW's whole fp32 state (masters and f32 moments) fits with layer recomputation once the
  // gradients are one block's at a time.
  EXPECT_TRUE(in_backward) << refusal;
  PlanSettings blocks = plan.settings;
  blocks.gradient_blocks = true;
  blocks.recompute = Recompute::layers;
  EXPECT_LT(static_cast<double>(plan_memory(blocks).gradients) / n, 0.6);
  EXPECT_LE(plan_memory(blocks).total(), kH200Free);
  // On a 48 GiB GPU the fp32 state must leave it: offloaded, with the gradients a block at a time.
  const std::vector<FitSuggestion> on_48 = fitting_settings(plan.settings, 48 * kGiB, 2048);
  ASSERT_FALSE(on_48.empty());
  EXPECT_EQ(on_48.front().flags, "--recompute=layers --optimizer-in-backward --clip 0 --offload-optimizer");
  // Without those two modes, where no setting fits one GPU, ZeRO-1 on more ranks comes first.
  std::vector<FitCandidate> on_the_gpu;
  for (const FitCandidate& c : fit_candidates())
    if (c.kind != "offload" && c.kind != "gradients") on_the_gpu.push_back(c);
  const std::vector<FitSuggestion> on_64 = fitting_settings(plan.settings, 64 * kGiB, 2048, on_the_gpu);
  ASSERT_FALSE(on_64.empty());
  EXPECT_NE(on_64.front().flags.find("--zero1 on "), std::string::npos) << on_64.front().flags;
  PlanSettings layers = plan.settings;
  layers.recompute = Recompute::layers;
  EXPECT_GT(plan_memory(layers).total(), kH200Free);
}

// Without fp32 masters an 8B model's state is 8 bytes a parameter with 8-bit moments (bf16 weights 2,
// moments about 2, gradients 4; no separate working copy): with layer recomputation it fits one 80 GB
// H100, and the refusal of the fp32-master plan there suggests it.
TEST(MemoryFit, Llama8bWithoutFp32MastersFitsOneH100) {
  constexpr int64_t kH100Free = 79 * kGiB;
  PlanSettings s = llama8b_on_gpu();
  s.masters = DType::bf16;
  s.moments = MomentFormat::q8;
  s.recompute = Recompute::layers;
  const MemoryPlan plan = plan_memory(s);
  const double n = static_cast<double>(plan.parameters);
  EXPECT_EQ(plan.working_weights, 0);
  EXPECT_NEAR(static_cast<double>(plan.masters) / n, 2.0, 1e-6);
  EXPECT_NEAR(static_cast<double>(plan.moments) / n, 2.03, 0.01);
  EXPECT_LE(plan.total(), kH100Free) << format_plan(plan);
  bool suggested = false;
  for (const FitSuggestion& f : fitting_settings(llama8b_on_gpu(), kH100Free, 2048))
    suggested |= f.flags.find("--master-weights bf16") != std::string::npos;
  EXPECT_TRUE(suggested) << fit_refusal(plan_memory(llama8b_on_gpu()), kH100Free, 2048);
}

// Offloaded state is planned in pinned host memory: the device total drops by it, and a host too small
// for it is refused naming the flags that shrink it.
TEST(MemoryFit, OffloadedStateMovesToTheHostAndMustFitThere) {
  PlanSettings s = llama8b_on_gpu();
  const MemoryPlan on_device = plan_memory(s);
  s.offload = true;
  const MemoryPlan offloaded = plan_memory(s);
  EXPECT_EQ(offloaded.host_state, on_device.masters + on_device.moments);
  EXPECT_EQ(offloaded.masters + offloaded.moments, 0);
  EXPECT_LT(offloaded.total(), on_device.total() - offloaded.host_state / 2);
  EXPECT_EQ(host_refusal(offloaded, offloaded.host_state), "");
  const std::string refusal = host_refusal(offloaded, 64 * kGiB);
  EXPECT_NE(refusal.find("GiB of master weights and AdamW moments in pinned host memory"), std::string::npos)
      << refusal;
  EXPECT_NE(refusal.find("--optimizer-state 8bit"), std::string::npos) << refusal;
  EXPECT_EQ(host_refusal(on_device, 1), "");
}

TEST(MemoryFit, ANewModeIsOneMoreCandidate) {
  std::vector<FitCandidate> candidates = fit_candidates();
  candidates.push_back(
      {"moments", "--optimizer-state 8bit", "block-wise quantized moments", [](PlanSettings& s) {
         if (s.moments == MomentFormat::q8) return false;
         s.moments = MomentFormat::q8;
         return true;
       }});
  const std::vector<FitSuggestion> fitting = fitting_settings(llama8b_on_gpu(), kH200Free, 2048, candidates);
  bool one_gpu = false;
  for (const FitSuggestion& f : fitting) {
    EXPECT_LE(f.total, kH200Free) << f.flags;
    one_gpu |= f.flags == "--recompute=layers --optimizer-state 8bit";
  }
  EXPECT_TRUE(one_gpu);
}

TEST(MemoryFit, ASmallerMicroBatchIsTheLargestThatFits) {
  PlanSettings s = cpu_settings(preset_config("llama3.2-1b"), 32768);
  const MemoryPlan plan = plan_memory(s);
  const int64_t budget = plan.total() - plan.activations / 2;  // half the activations must go
  const std::vector<FitSuggestion> fitting = fitting_settings(s, budget, 1000);
  const auto it = std::find_if(fitting.begin(), fitting.end(),
                               [](const FitSuggestion& f) { return f.flags.rfind("--tokens ", 0) == 0; });
  ASSERT_NE(it, fitting.end());
  const int64_t tokens = std::stoll(it->flags.substr(9));
  EXPECT_EQ(tokens % 256, 0);
  EXPECT_LE(it->total, budget);
  s.tokens = tokens + 256;
  EXPECT_GT(plan_memory(s).total(), budget) << "a larger micro-batch fits too";
  EXPECT_NE(it->cost.find("--grad-accum x"), std::string::npos) << it->cost;
  // None below the longest example.
  for (const FitSuggestion& f : fitting_settings(cpu_settings(s.model, 32768), budget, 30000))
    EXPECT_EQ(f.flags.find("--tokens"), std::string::npos) << f.flags;
}

// --- Whole CPU runs: what their buffers hold after setup and steps equals the plan.

class MemoryPlanRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::fresh_temp_dir();
    std::string records;
    for (int i = 0; i < 200; ++i)
      records += nlohmann::json{{"text", "the cat " + std::to_string(i) + " sat on the mat " +
                                             std::string(static_cast<size_t>(i % 13), 'a')}}
                     .dump() +
                 "\n";
    write_file_atomic((dir_ / "records.jsonl").string(), records);
    PrepareOptions o;
    o.inputs = {(dir_ / "records.jsonl").string()};
    o.tokenizer_path = PACKTRAIN_FIXTURES "/prepare/tokenizer.json";
    o.output_dir = (dir_ / "data").string();
    o.val_fraction = 0.1;
    o.threads = 2;
    o.show_progress = false;
    prepare_dataset(o);
    base_.data_dir = o.output_dir;
    base_.model = write_config(16, 2, 32);
    base_.device = "cpu";
    base_.packing.examples_per_batch = 8;
    base_.eval_every = 0;
    base_.save_every = 0;
    base_.steps = 2;
  }

  std::string write_config(int hidden, int layers, int intermediate) const {
    const fs::path path = dir_ / fmt::format("config-{}-{}-{}.json", hidden, layers, intermediate);
    write_file_atomic(path.string(), nlohmann::json{{"model_type", "llama"},
                                                    {"hidden_size", hidden},
                                                    {"num_hidden_layers", layers},
                                                    {"num_attention_heads", 2},
                                                    {"num_key_value_heads", 1},
                                                    {"intermediate_size", intermediate},
                                                    {"vocab_size", 260}}
                                         .dump());
    return path.string();
  }

  TrainConfig config(const std::string& name) const {
    TrainConfig c = base_;
    c.out_dir = (dir_ / name).string();
    return c;
  }

  fs::path dir_;
  TrainConfig base_;
};

void expect_held_as_planned(const TrainResult& r) {
  const MemoryPlan& p = r.memory_plan;
  const HeldMemory& h = r.memory_held;
  EXPECT_EQ(plan_mismatches(p, h), "");
  EXPECT_EQ(p.working_weights, h.working_weights);
  EXPECT_EQ(p.masters + p.moments, h.optimizer_state);
  EXPECT_EQ(p.gradients, h.gradients);
  EXPECT_EQ(p.activations + p.lm_head_chunk, h.activations);
  EXPECT_EQ(p.batch_inputs, h.batch_inputs);
  EXPECT_EQ(p.sparse_masks, h.sparse_masks);
  EXPECT_EQ(p.sparse_weights, h.sparse_weights);
  EXPECT_EQ(p.workspaces, h.workspaces);
  EXPECT_GT(h.activations, 0);
}

TEST_F(MemoryPlanRun, WhatTheRunAllocatesIsThePlan) { expect_held_as_planned(train(config("plain"))); }

TEST_F(MemoryPlanRun, WithGradAccumulationAndRecompute) {
  TrainConfig c = config("norms");
  c.grad_accum = 3;
  c.recompute = Recompute::norms_and_swiglu;
  expect_held_as_planned(train(c));
  c = config("layers");
  c.packing.examples_per_batch = 0;
  c.packing.tokens_per_batch = 256;
  c.recompute = Recompute::layers;
  const TrainResult r = train(c);
  expect_held_as_planned(r);
  EXPECT_LE(r.memory_plan.settings.tokens, 256);
}

TEST_F(MemoryPlanRun, WithSparsityAndZeroOne) {
  TrainConfig c = config("sparse");
  c.sparsity = sparse_ffn();
  c.sparsity.dense_finetune = 0;
  expect_held_as_planned(train(c));
  c = config("zero1");
  c.dist.zero1 = true;
  const TrainResult r = train(c);
  expect_held_as_planned(r);
  EXPECT_TRUE(r.memory_plan.settings.zero1);
}

// Without fp32 masters the plan's masters are bf16 and the cpu model's f32 copy of them is its working
// weights, as the run allocates them (replicated and ZeRO-1).
TEST_F(MemoryPlanRun, WithBf16MasterWeights) {
  TrainConfig c = config("bf16");
  c.master_weights = DType::bf16;
  c.optimizer_state = MomentFormat::q8;
  const TrainResult r = train(c);
  expect_held_as_planned(r);
  const ParameterLayout layout(r.memory_plan.settings.model);
  EXPECT_GE(r.memory_plan.masters, 2 * layout.total());
  EXPECT_LT(r.memory_plan.masters, 2 * layout.total() + 256);
  EXPECT_GE(r.memory_plan.working_weights, 4 * layout.total());
  c = config("bf16-zero1");
  c.master_weights = DType::bf16;
  c.dist.zero1 = true;
  expect_held_as_planned(train(c));
}

TEST_F(MemoryPlanRun, WithTheOptimizerInTheBackward) {
  TrainConfig c = config("in-backward");
  c.optimizer_in_backward = true;
  c.max_grad_norm = 0;
  const TrainResult r = train(c);
  expect_held_as_planned(r);
  const StepInBackward::Sizes blocks = StepInBackward::sizes(ParameterLayout(r.memory_plan.settings.model));
  EXPECT_GE(r.memory_plan.gradients, 4 * (blocks.embeddings + blocks.block));
  EXPECT_LT(r.memory_plan.gradients, 4 * (blocks.embeddings + blocks.block) + 512);
}

TEST_F(MemoryPlanRun, ARunThatCannotFitIsRefusedBeforeAllocating) {
  TrainConfig c = config("huge");
  c.model = write_config(16384, 96, 65536);  // hundreds of billions of parameters
  try {
    train(c);
    FAIL() << "the run was not refused";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("GiB of host memory per rank (the memory plan above)"), std::string::npos) << what;
    EXPECT_NE(what.find("No setting packtrain can change fits it"), std::string::npos) << what;
  }
}

fs::path packtrain_binary() {
  if (const char* path = std::getenv("PACKTRAIN_BIN")) return path;
  return fs::read_symlink("/proc/self/exe").parent_path() / "packtrain";
}

// A forked child's peak resident memory starts at its parent's resident memory at the fork (Linux copies
// the counters with the address space, and exec keeps the peak), which a test process that ran other tests
// first may have grown: `inherited_bytes` is that much.
struct Exit {
  int status = -1;
  int64_t max_rss_bytes = 0, inherited_bytes = 0;
};

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// Runs packtrain with args, stdout and stderr into `log`; its exit status and peak resident memory.
Exit run_packtrain(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> argv = {packtrain_binary().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  const int64_t inherited = resident_bytes();
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> c_args;
    for (std::string& a : argv) c_args.push_back(a.data());
    c_args.push_back(nullptr);
    execv(c_args[0], c_args.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, int64_t{usage.ru_maxrss} * 1024, inherited};
}

TEST_F(MemoryPlanRun, DryRunPrintsThePlanAndAllocatesNothing) {
  if (!fs::exists(packtrain_binary())) GTEST_SKIP() << "no packtrain binary (set PACKTRAIN_BIN)";
  // A model whose plan (about 5 GiB on the cpu) would show in the process's peak memory if allocated, far
  // above what the process holds anyway (a few hundred MiB under AddressSanitizer).
  const std::string model = write_config(768, 32, 3072);
  const fs::path out = dir_ / "dry", log = dir_ / "dry.log";
  const Exit e = run_packtrain({"train", "--dry-run", "--data", base_.data_dir, "--out", out.string(),
                                "--model", model, "--device", "cpu", "--examples", "8", "--steps", "5"},
                               log);
  const std::string printed = read_file(log.string());
  EXPECT_EQ(e.status, 0) << printed;
  EXPECT_NE(printed.find("memory plan per rank (cpu"), std::string::npos) << printed;
  EXPECT_NE(printed.find("fp32 master weights"), std::string::npos) << printed;
  EXPECT_NE(printed.find("B/param"), std::string::npos) << printed;
  EXPECT_NE(printed.find("of host memory available"), std::string::npos) << printed;
  EXPECT_FALSE(fs::exists(out)) << "a dry run writes nothing";
  TrainConfig c = config("dry-in-process");
  c.model = model;
  c.dry_run = true;
  const TrainResult r = train(c);
  EXPECT_EQ(r.end, TrainEnd::dry_run);
  EXPECT_GT(r.memory_plan.total(), kGiB);
  EXPECT_LT(e.max_rss_bytes - e.inherited_bytes, r.memory_plan.total() / 4)
      << "the dry run allocated its plan";

  const Exit refused = run_packtrain({"train", "--dry-run", "--data", base_.data_dir, "--out", out.string(),
                                      "--model", write_config(16384, 96, 65536), "--device", "cpu"},
                                     log);
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(read_file(log.string()).find("No setting packtrain can change fits it"), std::string::npos)
      << read_file(log.string());
}

}  // namespace
}  // namespace pt
