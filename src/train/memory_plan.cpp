#include "train/memory_plan.h"

#include "core/error.h"
#include "distributed/data_parallel.h"
#include "distributed/state_offload.h"
#include "distributed/zero.h"
#include "model/parameters.h"
#include "ops/linear.h"
#include "train/step_in_backward.h"

#include <fmt/format.h>

#include <algorithm>

namespace pt {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// An arena slot's bytes: every reservation is rounded up to 256 (core/arena.cpp).
int64_t slot(int64_t bytes) { return (bytes + 255) / 256 * 256; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The DecoderModel constructor's reservations, buffer by buffer: the activations each layer keeps for the
// backward, or one buffer all layers share where the backward recomputes it, then the final norm, the
// logit chunk and the backward's buffers. Returns the arena's bytes; *chunk gets the logit chunk's.
int64_t activation_arena_bytes(const ModelConfig& c, int64_t T, DType dtype, Recompute recompute, bool sparse,
                               int64_t* chunk) {
  const int64_t real = dtype_size(dtype), stat = dtype == DType::bf16 ? 4 : real;  // stats: master dtype
  const int64_t C = c.hidden_size, F = c.intermediate_size, U = c.mlp_up_rows(), D = c.head_dim;
  const int64_t H = c.num_attention_heads, Hkv = c.num_key_value_heads, L = c.num_hidden_layers;
  const bool all = recompute == Recompute::layers, norms = recompute == Recompute::norms_and_swiglu;
  const bool layer_norm = c.norm == Norm::layer, post = c.post_norm;
  int64_t bytes = slot(2 * 8);  // the loss sums
  const auto layer = [&](int64_t b, bool shared) { bytes += (shared ? 1 : L) * slot(b); };
  layer(real * T * C, false);  // the layer's input: what layer recomputation starts from
  if (layer_norm) layer(stat * T, all);
  layer(stat * T, all);                          // rstd1
  if (!post) layer(real * T * C, all || norms);  // xn1 (and xn2, taking turns, when norms are recomputed)
  layer(real * T * H * D, all);                  // q
  layer(real * T * Hkv * D, all);                // k
  layer(real * T * Hkv * D, all);                // v
  if (c.qk_norm) {
    layer(real * T * H * D, all);    // q_pre
    layer(real * T * Hkv * D, all);  // k_pre
    layer(stat * T * H, all);        // rstd_q
    layer(stat * T * Hkv, all);      // rstd_k
  }
  layer(real * T * H * D, all);  // attn
  layer(stat * H * T, all);      // lse
  layer(real * T * C, all);      // mid
  if (layer_norm) layer(stat * T, all);
  layer(stat * T, all);  // rstd2
  if (post) {
    layer(real * T * C, all || norms);  // xn2
    layer(real * T * C, all);           // sum2
  } else if (!norms) {
    layer(real * T * C, all);  // xn2
  }
  layer(real * T * U, all);           // h
  layer(real * T * F, all || norms);  // act
  if (c.embedding_norm)               // its input and statistics
    bytes += slot(real * T * C) + (layer_norm ? 2 : 1) * slot(stat * T);
  if (c.head_transform) bytes += 2 * slot(real * T * C);  // its dense output and activation
  bytes += 2 * slot(real * T * C);                        // final_in, xn_f
  bytes += (layer_norm ? 2 : 1) * slot(stat * T);         // mean_f, rstd_f
  const int64_t W = DecoderModel::logit_row_width(c.vocab_size);
  *chunk = slot(real * std::min(T, DecoderModel::logit_chunk_tokens(c.vocab_size)) * W);
  if (W != c.vocab_size)  // the head's weight (and bias) in padded rows
    *chunk += slot(real * W * C) + (c.lm_head_bias ? slot(real * W) : 0);
  bytes += *chunk;
  bytes += 3 * slot(real * T * C);                                                  // dx, dtmp, dxn
  if (DecoderModel::keeps_activation_grad(c, sparse)) bytes += slot(real * T * F);  // dact
  bytes += slot(real * T * U);                                                      // dh
  bytes += 2 * slot(real * T * H * D);                                              // dq, dattn
  bytes += 2 * slot(real * T * Hkv * D);                                            // dk, dv
  if (DecoderModel::packs_qkv(c)) bytes += slot(real * T * (H + 2 * Hkv) * D);      // q | k | v packed
  return bytes;
}

struct SparseShape {
  int64_t rows, cols;
};

// The 2:4 sparse linears of the model, as FfnMasks and DecoderModel::build_sparse list them.
std::vector<SparseShape> sparse_shapes(const ModelConfig& c, const SparsityConfig& s) {
  std::vector<SparseShape> out;
  if (!s.enabled) return out;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (s.sparse(FfnLinear::gate_up)) out.push_back({c.mlp_up_rows(), c.hidden_size});
    if (s.sparse(FfnLinear::down)) out.push_back({c.hidden_size, c.intermediate_size});
  }
  return out;
}

// CUDA estimates, from ops/cuda/sparse_gemm.cpp: a weight's compressed form (values and metadata,
// cusparselt_pack_bytes, plus the zeroed slack cuSPARSELt reads past it) is kept per GEMM (forward, input
// gradient) and per arrangement the autotuner tried (2:4 operand as cuSPARSELt's A or B): up to four.
constexpr int64_t kCompressedSlack = 16 << 10;
constexpr int64_t kFormsPerWeight = 4;
int64_t compressed_bytes(int64_t n) { return n + n / 8 + kCompressedSlack; }

// cuda: the compressed forms of every sparse weight, the MVUE-pruned output gradient packed for the
// weight-gradient GEMM (the largest), and the bf16 product added into an f32 weight gradient.
int64_t cuda_sparse_bytes(const std::vector<SparseShape>& shapes, int64_t T) {
  int64_t bytes = 0, largest = 0, widest = 0;
  for (const SparseShape& s : shapes) {
    bytes += kFormsPerWeight * compressed_bytes(s.rows * s.cols);
    largest = std::max(largest, s.rows * s.cols);
    widest = std::max(widest, s.rows);
  }
  return shapes.empty() ? 0 : bytes + compressed_bytes(T * widest) + 2 * largest;
}

// cuda: the shared scratch buffer (ops/cuda/scratch.h) grows to the largest op's temporaries: the
// attention backward's f32 dq accumulator and row sums with its work lists, the embedding backward's sort,
// or the norm backwards' per-block partial weight gradients.
int64_t cuda_scratch_bytes(const ModelConfig& c, int64_t T) {
  const int64_t C = c.hidden_size, H = c.num_attention_heads, D = c.head_dim;
  // dq_accum has 64 rows of slack per head in the tiled layout of the wgmma backward's bulk reductions.
  const int64_t attention = 4 * (T + 64) * H * D + 4 * T * H + 20 * T + 4096;
  const int64_t embedding = 32 * T + 2 * ceil_div(T, 32) * C * 4 + 4096;
  const int64_t row_bytes = (c.norm == Norm::layer ? 2 : 1) * C * 4;
  const int64_t rows_per_block = std::clamp<int64_t>((48 << 10) / row_bytes, 1, 8) * 4;
  const int64_t norm = ceil_div(T, rows_per_block) * row_bytes;
  return slot(std::max({attention, embedding, norm}));
}

// cuda: memory the libraries keep for themselves beside the CUDA context (which free memory already
// excludes): NCCL's channel buffers, the cuBLASLt and cuSPARSELt handles, the autotuner's stream-ordered
// pool. A margin, not a measurement.
constexpr int64_t kCudaLibraries = int64_t{512} << 20;

}  // namespace

int64_t MemoryPlan::total() const {
  return working_weights + masters + moments + gradients + activations + lm_head_chunk + batch_inputs +
         sparse_masks + sparse_weights + workspaces + libraries + offload_slots;
}

double MemoryPlan::activation_bytes_per_token() const {
  return settings.tokens > 0 ? static_cast<double>(activations) / static_cast<double>(settings.tokens) : 0;
}

MemoryPlan plan_memory(const PlanSettings& s) {
  if (s.tokens <= 0) fail("memory plan: the micro-batch must hold tokens (got {})", s.tokens);
  if (s.world_size <= 0) fail("memory plan: the world size must be positive (got {})", s.world_size);
  MemoryPlan p;
  p.settings = s;
  const bool gpu = s.device == Device::cuda;
  const DType compute = s.compute_dtype();
  const ParameterLayout layout(s.model);
  const int64_t total = layout.total(), T = s.tokens;
  p.parameters = total;
  // ZeRO-1 (distributed/data_parallel.h): this rank's shard of masters and moments; the gradients and the
  // gathered working copy span every shard.
  const dist::ShardLayout shards = dist::make_shard_layout(total, s.world_size);
  const int64_t owned = s.zero1 ? shards.shard : total, flat = s.zero1 ? shards.padded_total() : total;
  p.masters = slot(dtype_size(s.masters) * owned);
  // The optimizer's own reservations; 8-bit moments' absmax counts differ a little between ZeRO-1 ranks
  // (blocks are cut at tensor boundaries), so the plan takes the largest rank's.
  int64_t state = 0;
  for (int rank = 0; rank < (s.zero1 ? s.world_size : 1); ++rank)
    state = std::max(state, dist::DataParallelOptimizer::state_bytes(layout, s.world_size, rank, s.zero1,
                                                                     s.moments, s.masters));
  p.moments = state - p.masters;
  if (s.gradient_blocks) {  // train/step_in_backward.h
    const StepInBackward::Sizes blocks = StepInBackward::sizes(layout);
    p.gradients = slot(blocks.embeddings * dtype_size(s.grad_dtype)) +
                  slot(std::max<int64_t>(1, blocks.block) * dtype_size(s.grad_dtype));
  } else {
    p.gradients = slot(flat * dtype_size(s.grad_dtype));
  }
  // A model computing in the master dtype reads the masters in place; otherwise the optimizer keeps the
  // copy it reads (bf16 ones of f32 masters written by AdamW), as ZeRO-1 (a gathered one) and the offload
  // always do.
  if (s.zero1)
    p.working_weights = slot(flat * dtype_size(compute));
  else if (s.masters != compute || s.offload)
    p.working_weights = slot(total * dtype_size(compute));
  if (s.offload) {  // distributed/state_offload.h
    p.offload_slots = dist::StateOffload::slot_bytes(layout, s.moments, s.masters);
    if (gpu) p.host_state = p.masters + p.moments, p.masters = p.moments = 0;
  }
  p.activations =
      activation_arena_bytes(s.model, T, compute, s.recompute, s.sparsity.enabled, &p.lm_head_chunk) -
      p.lm_head_chunk;
  // model/batch_inputs.cpp: two slots ahead, one for now, each with room for the labelled rows.
  const int64_t slot_ints = 6 * T + 1;
  p.batch_inputs = 3 * slot(4 * slot_ints);
  const std::vector<SparseShape> sparse = sparse_shapes(s.model, s.sparsity);
  if (!sparse.empty()) {
    int64_t largest = 0;
    for (const SparseShape& w : sparse) {
      p.sparse_masks += slot(w.rows * w.cols);
      largest = std::max(largest, w.rows * w.cols);
      if (!gpu) p.sparse_weights += slot(w.rows * w.cols * dtype_size(compute));
    }
    p.sparse_masks += slot(largest);
    if (gpu) p.sparse_weights = cuda_sparse_bytes(sparse, T);
  }
  p.workspaces = slot(8);  // the step's gradient norm
  if (gpu) {
    p.workspaces += static_cast<int64_t>(ops::kCublasLtWorkspaceBytes) + cuda_scratch_bytes(s.model, T);
    p.libraries = kCudaLibraries;
  }
  return p;
}

std::string plan_mismatches(const MemoryPlan& p, const HeldMemory& held) {
  const bool gpu = p.settings.device == Device::cuda;
  std::string out;
  const auto compare = [&](const char* line, int64_t planned, int64_t actual) {
    if (planned != actual)
      out +=
          fmt::format("{}{}: planned {} bytes, allocated {}", out.empty() ? "" : "\n", line, planned, actual);
  };
  compare("working weights", p.working_weights, held.working_weights);
  compare("masters and moments", p.masters + p.moments, held.optimizer_state);
  compare("pinned host masters and moments", p.host_state, held.host_state);
  compare("offload slots", p.offload_slots, held.offload_slots);
  compare("gradients", p.gradients, held.gradients);
  compare("activations and logit chunk", p.activations + p.lm_head_chunk, held.activations);
  compare("batch inputs", p.batch_inputs, held.batch_inputs);
  compare("2:4 masks", p.sparse_masks, held.sparse_masks);
  if (!gpu) {
    compare("2:4 masked weight copies", p.sparse_weights, held.sparse_weights);
    compare("workspaces", p.workspaces, held.workspaces);
  }
  return out;
}

std::string format_plan(const MemoryPlan& p, int64_t available) {
  const PlanSettings& s = p.settings;
  const bool gpu = s.device == Device::cuda;
  const double params = static_cast<double>(p.parameters);
  // One unit for the table: GiB for what trains on a GPU, MiB for small models.
  const bool gib = p.total() >= (int64_t{1} << 30);
  const double unit = gib ? kGiB : 1024.0 * 1024.0;
  const char* unit_name = gib ? "GiB" : "MiB";
  std::string out = fmt::format(
      "memory plan per rank ({}, {} parameters, {} tokens a micro-batch, recompute {}, {} rank{}{}{}):\n",
      device_name(s.device),
      params >= 1e9 ? fmt::format("{:.2f}B", params / 1e9) : fmt::format("{:.2f}M", params / 1e6), s.tokens,
      s.recompute == Recompute::none     ? "none"
      : s.recompute == Recompute::layers ? "layers"
                                         : "norms",
      s.world_size, s.world_size == 1 ? "" : "s", s.zero1 ? ", ZeRO-1" : "",
      s.sparsity.enabled ? ", 2:4" : "");
  const auto row = [&](const std::string& name, int64_t bytes, const std::string& natural) {
    if (bytes > 0)
      out += fmt::format("  {:<44} {:>9.2f} {}{}\n", name, static_cast<double>(bytes) / unit, unit_name,
                         natural.empty() ? "" : "  " + natural);
  };
  const auto per_param = [&](int64_t bytes) {
    return fmt::format("{:.2f} B/param", static_cast<double>(bytes) / params);
  };
  row(fmt::format("{} working weights{}", dtype_name(s.compute_dtype()), s.zero1 ? " (gathered)" : ""),
      p.working_weights, per_param(p.working_weights));
  row(s.masters == DType::f32 ? "fp32 master weights" : "bf16 weights (no fp32 masters)", p.masters,
      per_param(p.masters));
  row(fmt::format("AdamW moments ({})", moment_format_name(s.moments)), p.moments, per_param(p.moments));
  row(fmt::format("gradients ({}{})", dtype_name(s.grad_dtype),
                  s.gradient_blocks ? "; in backward: two blocks" : ""),
      p.gradients, per_param(p.gradients));
  row("activations", p.activations, fmt::format("{:.1f} KiB/token", p.activation_bytes_per_token() / 1024));
  row(fmt::format("LM head logit chunk ({} tokens)",
                  std::min(s.tokens, DecoderModel::logit_chunk_tokens(s.model.vocab_size))),
      p.lm_head_chunk, "");
  row("batch inputs", p.batch_inputs, "");
  row("2:4 masks", p.sparse_masks, "");
  row(gpu ? "2:4 compressed weights (estimate)" : "2:4 masked weight copies", p.sparse_weights, "");
  row(gpu ? "workspaces (cuBLASLt, op scratch; estimate)" : "workspaces", p.workspaces, "");
  row("CUDA libraries (estimate)", p.libraries, "");
  row("offloaded state's device slots (two blocks)", p.offload_slots, per_param(p.offload_slots));
  out += fmt::format("  {:<44} {:>9.2f} {}  {}", "total", static_cast<double>(p.total()) / unit, unit_name,
                     per_param(p.total()));
  if (available > 0)
    out += fmt::format(", {:.2f} GiB {}", static_cast<double>(available) / kGiB,
                       gpu ? "free on the GPU" : "of host memory available");
  if (p.host_state > 0)
    out +=
        fmt::format("\n  and {:.2f} GiB of masters and moments in pinned host memory (--offload-optimizer)",
                    static_cast<double>(p.host_state) / kGiB);
  return out;
}

}  // namespace pt
