// `packtrain train`: train a decoder or an encoder (model/families.h) on a prepared dataset. Exit status: 0
// when the run finished (or --stop-after stopped it), 1 on an error, 75 when a stop signal stopped it with a
// checkpoint (the same command resumes), 3 after --max-bad-steps non-finite steps in a row (with a
// checkpoint).
#include "cli/commands.h"
#include "data/packing/packer.h"
#include "model/families.h"
#include "model/presets.h"
#include "ops/cpu/threads.h"
#include "train/trainer.h"

#include <memory>

namespace pt::cli {

namespace {
// EX_TEMPFAIL of sysexits.h, "try again later": a scheduler's requeue rule can match it.
constexpr int kExitStopSignal = 75;
constexpr int kExitNonFinite = 3;
}  // namespace

void register_train(CLI::App& app) {
  auto* cmd = app.add_subcommand("train",
                                 "Train a decoder (Llama, Mistral, Qwen2/3, GPT-2) or BERT (--objective mlm) "
                                 "on a prepared dataset (on a GPU when one is visible)");
  cmd->footer(
      "SIGTERM, SIGINT (Ctrl-C) or SIGUSR1 stop training after the step in flight, with a checkpoint\n"
      "(under mpirun send SIGUSR1: mpirun forwards it to every rank). Exit status: 0 finished or\n"
      "--stop-after, 1 error, 75 stopped by a signal (run the same command to resume), 3 stopped after\n"
      "--max-bad-steps non-finite steps. One train at a time per --out: a second fails, naming the first\n"
      "(OUT/.packtrain.lock).");
  auto tc = std::make_shared<TrainConfig>();
  auto strategy = std::make_shared<std::string>("flatten");
  auto threads = std::make_shared<int>(0);
  auto no_resume = std::make_shared<bool>(false);
  auto no_save = std::make_shared<bool>(false);
  auto sparse_layers = std::make_shared<std::string>(tc->sparsity.layers());
  auto sparse_dw = std::make_shared<std::string>(weight_grad_name(tc->sparsity.weight_grad));
  auto recompute = std::make_shared<std::string>("none");
  auto optimizer_state = std::make_shared<std::string>("f32");
  auto master_weights = std::make_shared<std::string>("f32");
  auto objective = std::make_shared<std::string>("causal");
  cmd->add_option("--data", tc->data_dir, "Prepared dataset directory (packtrain prepare)")->required();
  cmd->add_option("--out", tc->out_dir, "Run directory: metrics.jsonl, checkpoints/, final/")->required();
  cmd->add_option("--model", tc->model, "Preset (" + preset_names() + ") or an HF config.json path")
      ->capture_default_str();
  cmd->add_option(
      "--init", tc->init_from,
      "Hugging Face model directory to fine-tune (its config wins); families: " + supported_families());
  cmd->add_flag("--allow-unused-tensors", tc->allow_unused_tensors,
                "With --init: load a checkpoint that holds tensors the model does not use, without them");
  cmd->add_flag("--no-resume", *no_resume, "Start afresh even if OUT/checkpoints/latest exists");
  cmd->add_flag("--no-save", *no_save,
                "Write no checkpoint and no final model, not even when stopped (benchmarks)");
  cmd->add_option("--strategy", *strategy, "padding, concat, concat-posid, flatten or bfd")
      ->capture_default_str();
  cmd->add_option("--examples", tc->packing.examples_per_batch, "Examples per micro-batch");
  cmd->add_option("--tokens", tc->packing.tokens_per_batch,
                  "Token budget per micro-batch (instead of --examples)");
  cmd->add_option("--row-len", tc->packing.row_len, "Row length of concat, concat-posid and bfd")
      ->capture_default_str();
  cmd->add_option("--grad-accum", tc->grad_accum, "Micro-batches per optimizer step")->capture_default_str();
  cmd->add_option("--steps", tc->steps, "Optimizer steps")->capture_default_str();
  cmd->add_option("--lr", tc->lr.peak, "Peak learning rate")->capture_default_str();
  cmd->add_option("--min-lr", tc->lr.min_lr, "Learning rate at the end of the cosine decay")
      ->capture_default_str();
  cmd->add_option("--warmup", tc->lr.warmup_steps, "Linear warmup steps")->capture_default_str();
  cmd->add_option("--weight-decay", tc->adamw.weight_decay,
                  "AdamW decoupled weight decay (not on norms and embeddings)")
      ->capture_default_str();
  cmd->add_option("--beta1", tc->adamw.beta1)->capture_default_str();
  cmd->add_option("--beta2", tc->adamw.beta2)->capture_default_str();
  cmd->add_option("--clip", tc->max_grad_norm,
                  "Global gradient-norm clip (0: none; the norm is still logged)")
      ->capture_default_str();
  cmd->add_option("--eval-every", tc->eval_every, "Validate every N steps (0: at the end only)")
      ->capture_default_str();
  cmd->add_option("--eval-batches", tc->eval_batches, "Validation batches (0: the whole split)")
      ->capture_default_str();
  cmd->add_option("--save-every", tc->save_every, "Checkpoint every N steps (0: at the end only)")
      ->capture_default_str();
  cmd->add_option("--log-every", tc->log_every, "Log every N steps")->capture_default_str();
  cmd->add_option("--seed", tc->seed, "Seed of initialisation and data order")->capture_default_str();
  cmd->add_option("--device", tc->device, "auto (a GPU when one is visible), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--threads", *threads, "CPU threads (0: all)");
  cmd->add_option("--peak-tflops", tc->peak_tflops, "Peak TFLOP/s for MFU (0: estimated)");
  cmd->add_option("--stop-after", tc->stop_after,
                  "Stop after N steps of this invocation, with a checkpoint (resume later)");
  cmd->add_option("--max-bad-steps", tc->max_bad_steps,
                  "Stop, with a checkpoint of the last good weights, after N steps in a row whose loss or "
                  "gradient norm is not finite (each skips its optimizer update); 0: never")
      ->capture_default_str();
  cmd->add_flag("--dry-run", tc->dry_run,
                "Print the memory plan (weights, masters, moments, gradients, activations, workspaces per "
                "rank) and whether it fits this device, listing settings that would if not; then stop, "
                "allocating and writing nothing (exit status 1 when it does not fit)");
  cmd->add_flag("--recompute{norms}", *recompute,
                "Recompute activations in the backward instead of keeping them: norms (--recompute: the "
                "RMSNorm and SwiGLU outputs, about 29% less activation memory for a few percent more step "
                "time) or layers (--recompute=layers: every layer's, from its input; one layer's "
                "activations held at a time, each layer's forward run twice)")
      ->check(CLI::IsMember({"none", "norms", "layers"}));
  cmd->add_option("--optimizer-state", *optimizer_state,
                  "How the AdamW moments are kept: f32 (8 bytes a parameter), bf16 (4) or 8bit (block-wise "
                  "dynamic quantization, about 2.03); a checkpoint resumes only in its own mode")
      ->check(CLI::IsMember({"f32", "bf16", "8bit"}))
      ->capture_default_str();
  cmd->add_option(
         "--master-weights", *master_weights,
         "The weights AdamW updates: f32 masters beside the bf16 copy the GPU computes with (6 bytes "
         "a parameter), or bf16: no masters, the bf16 weights updated in place with stochastic "
         "rounding (2 bytes; not with --sparse24); a checkpoint resumes only in its own mode")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_flag("--optimizer-in-backward", tc->optimizer_in_backward,
                "AdamW on each layer as soon as the backward has its gradients, so no buffer of every "
                "gradient exists (4 bytes a parameter less); one GPU, --grad-accum 1, --clip 0, not with "
                "--sparse24");
  cmd->add_flag("--offload-optimizer", tc->offload_optimizer,
                "Keep the master weights and AdamW moments in pinned host memory and stream each layer's "
                "through the GPU for its update (ZeRO-Offload's idea): the GPU keeps the bf16 weights and "
                "two layers' state; not with --zero1 or --sparse24");
  // Masked-LM pre-training of encoders (docs/formats.md).
  auto* objective_option =
      cmd->add_option("--objective", *objective,
                      "causal (decoders: next-token prediction) or mlm (encoders such as "
                      "BERT: masked tokens, masks drawn per epoch from the seed)");
  objective_option->check(CLI::IsMember({"causal", "mlm"}))->capture_default_str()->group("Masked LM");
  auto mlm_option = [&](CLI::Option* o) {
    o->needs(objective_option)->capture_default_str()->group("Masked LM");
  };
  mlm_option(cmd->add_option("--mlm-probability", tc->packing.mlm.mask_prob,
                             "Chance that a token (with --whole-word-mask: a word) is chosen"));
  mlm_option(cmd->add_option("--mask-replace-prob", tc->packing.mlm.mask_token_prob,
                             "Chance that a chosen token becomes the mask token"));
  mlm_option(cmd->add_option("--random-replace-prob", tc->packing.mlm.random_token_prob,
                             "Chance that a chosen token becomes a random one (else it stays)"));
  mlm_option(cmd->add_flag("--whole-word-mask", tc->packing.mlm.whole_word,
                           "Choose whole words (WordPiece: a token and the ## tokens after it)"));
  mlm_option(cmd->add_option("--mask-token", tc->mask_token,
                             "The tokenizer's mask token (default: [MASK], else <mask>)"));
  // 2:4 sparse FFN training (docs/sparse24.md).
  auto* sparse =
      cmd->add_flag("--sparse24", tc->sparsity.enabled,
                    "Train the FFN linears 2:4 sparse (transposable masks, MVUE weight gradients)");
  auto sparse_option = [&](CLI::Option* o) {
    o->needs(sparse)->capture_default_str()->group("2:4 sparsity");
  };
  sparse->group("2:4 sparsity");
  sparse_option(cmd->add_option("--sparse-layers", *sparse_layers,
                                "Sparse FFN linears: gate_up, down or gate_up,down"));
  sparse_option(
      cmd->add_option("--mask-every", tc->sparsity.mask_every, "Recompute the 2:4 masks every N steps"));
  sparse_option(cmd->add_option("--masked-decay", tc->sparsity.masked_decay,
                                "Masked decay lambda: grad += lambda * (1 - mask) * W on sparse weights"));
  sparse_option(cmd->add_option("--masked-decay-warmup", tc->sparsity.masked_decay_warmup,
                                "Raise the masked decay linearly over the first N sparse steps"));
  sparse_option(cmd->add_option("--dense-finetune", tc->sparsity.dense_finetune,
                                "Fraction of the steps, at the end, trained dense (masks dropped)"));
  sparse_option(cmd->add_option("--dense-warmup", tc->sparsity.dense_warmup,
                                "Steps trained dense before the first masks"));
  sparse_option(cmd->add_option("--sparse-dw", *sparse_dw,
                                "Weight gradients: mvue (the output gradient pruned 2:4, unbiased), dense "
                                "(exact), or auto: mvue where the dW GEMM runs on sparse tensor cores")
                    ->check(CLI::IsMember({"auto", "mvue", "dense"})));
  // Data parallelism (docs/distributed.md): launch one process per rank with mpirun, srun or RANK/WORLD_SIZE.
  auto backend = std::make_shared<std::string>("auto");
  cmd->add_option(
         "--dist-backend", *backend,
         "auto (one process: local; several: nccl on cuda, mpi on cpu), local, mpi or nccl; naming mpi "
         "or nccl trains data-parallel even on one rank")
      ->check(CLI::IsMember({"auto", "local", "mpi", "nccl"}))
      ->capture_default_str()
      ->group("Data parallelism");
  cmd->add_flag("--zero1", tc->dist.zero1,
                "Shard the fp32 master weights and AdamW moments across ranks (ZeRO-1)")
      ->group("Data parallelism");
  cmd->add_option("--dist-timeout", tc->dist.timeout_s,
                  "Seconds one collective may wait for the other ranks before the job is aborted")
      ->capture_default_str()
      ->group("Data parallelism");
  cmd->add_option("--bucket-mb", tc->dist.bucket_mb, "Gradient reduction bucket size in MiB")
      ->capture_default_str()
      ->group("Data parallelism");
  cmd->callback([=] {
    TrainConfig c = *tc;
    parse_sparse_layers(*sparse_layers, c.sparsity);
    c.sparsity.weight_grad = parse_weight_grad(*sparse_dw);
    c.recompute = parse_recompute(*recompute);
    c.optimizer_state = *ops::parse_moment_format(*optimizer_state);
    c.master_weights = *parse_dtype(*master_weights);
    c.packing.strategy = parse_strategy(*strategy);
    c.packing.objective = *objective == "mlm" ? Objective::kMaskedLm : Objective::kCausalLm;
    if (c.packing.examples_per_batch == 0 && c.packing.tokens_per_batch == 0)
      c.packing.examples_per_batch = 16;
    c.resume = !*no_resume;
    c.save = !*no_save;
    c.dist.backend = dist::parse_backend(*backend);
    ops::set_cpu_threads(*threads);
    const TrainResult result = train(c);  // says itself why it stopped early
    if (result.end == TrainEnd::signal) throw CLI::RuntimeError(kExitStopSignal);
    if (result.end == TrainEnd::non_finite) throw CLI::RuntimeError(kExitNonFinite);
  });
}

}  // namespace pt::cli
