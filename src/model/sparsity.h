// 2:4 sparse FFN training (Hu et al., ICML 2024, "Accelerating Transformer Pre-training with 2:4
// Sparsity"): which FFN linears are sparse, the phases of a run (dense warm-up, sparse, dense fine-tuning),
// and the transposable masks of the sparse linears. The masks are computed from the fp32 master weights
// and recomputed every few steps; the forward and backward passes use W * mask, the gradient reaches the
// dense master W (straight-through), and masked decay pulls the pruned weights towards zero so the masks
// settle. Attention, embeddings and the LM head stay dense.
#pragma once

#include "core/arena.h"
#include "core/tensor.h"
#include "model/config.h"
#include "model/parameters.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace pt {

// The MLP linears of a layer: the up projection (SwiGLU's fused gate|up [2F, C], or GELU's fc [F, C], called
// gate_up alike) and the down projection [C, F].
enum class FfnLinear : uint8_t { gate_up, down };
const char* ffn_linear_name(FfnLinear which);  // "gate_up", "down" (as --sparse-layers spells them)

// How a sparse linear computes its weight gradient: from the output gradient pruned 2:4 by MVUE (the
// paper's unbiased estimator, which lets the dW GEMM run on sparse tensor cores), or from the dense output
// gradient (exact). automatic takes MVUE only where the dW GEMM runs sparse, per layer shape as the GEMM
// autotuner decides (ops::SparseLinear::weight_grad_sparse): elsewhere the pruning would cost a pass over
// the gradient and add variance, and buy no speed.
enum class WeightGrad : uint8_t { automatic, mvue, dense };
WeightGrad parse_weight_grad(const std::string& text);  // "auto", "mvue", "dense"; throws naming --sparse-dw
const char* weight_grad_name(WeightGrad mode);

struct SparsityConfig {
  bool enabled = false;
  bool gate_up = true;  // which FFN linears are sparse while enabled
  bool down = true;
  int64_t mask_every = 40;          // steps between mask recomputations
  double masked_decay = 6e-5;       // lambda of grad += lambda (1 - mask) W (the paper's GPT-2 124M value)
  int64_t masked_decay_warmup = 0;  // lambda rises linearly over this many steps from the first sparse one
  double dense_finetune = 1.0 / 6;  // the last fraction of the steps trains dense
  int64_t dense_warmup = 0;         // the first steps train dense
  WeightGrad weight_grad = WeightGrad::automatic;

  bool sparse(FfnLinear which) const { return enabled && (which == FfnLinear::gate_up ? gate_up : down); }
  std::string layers() const;  // "gate_up,down", "gate_up" or "down"
  // weight_grad for a model on `device`: automatic stays only where the dW GEMM can run sparse at all
  // (ops::sparse_weight_grad_gemm), else it is dense.
  WeightGrad weight_grad_on(Device device) const;
  // Throws naming the flag: sizes not multiples of 4, settings out of range, no sparse step left.
  void validate(const ModelConfig& model, int64_t total_steps) const;
};

// "gate_up", "down" or both, comma-separated, into config.gate_up / config.down; throws naming the flag.
void parse_sparse_layers(const std::string& list, SparsityConfig& config);

// The phases of a run by optimizer step, indexed from 0 (the number of steps done before it): dense for
// [0, sparse_begin), sparse for [sparse_begin, sparse_end), dense fine-tuning for [sparse_end, total).
class SparsitySchedule {
 public:
  SparsitySchedule(const SparsityConfig& config, int64_t total_steps);

  int64_t sparse_begin() const { return begin_; }
  int64_t sparse_end() const { return end_; }
  bool sparse_at(int64_t step) const { return step >= begin_ && step < end_; }
  // The masks are computed before the first sparse step and recomputed every mask_every steps after it.
  bool recompute_at(int64_t step) const { return sparse_at(step) && (step - begin_) % every_ == 0; }
  // Masked decay's lambda at a sparse step (0 outside the sparse phase).
  double decay_at(int64_t step) const;

 private:
  int64_t begin_ = 0, end_ = 0, every_ = 1, decay_warmup_ = 0;
  double decay_ = 0;
};

// The seed of one MVUE draw: a hash of the run's seed, the step, the micro-batch, the layer and the linear,
// so a run draws the same pruning whether or not it was resumed, and every linear draws independently.
struct MvueSeed {
  uint64_t run_seed = 0;
  int64_t step = 0, micro_batch = 0;
  uint64_t at(int layer, FfnLinear which) const;
};

// A mask on the host, named after the HF weight it prunes (checkpoints keep one per tensor, so gate|up's
// mask is stored as gate_proj's and up_proj's halves).
struct MaskTensor {
  std::string name;  // e.g. "model.layers.0.mlp.down_proj.weight"
  std::vector<int64_t> shape;
  std::vector<uint8_t> values;  // 1 = kept
};

struct MaskUpdate {
  int64_t flips = 0, entries = 0;
  bool first = false;  // no earlier masks to compare with
  double flip_rate() const { return entries ? static_cast<double>(flips) / static_cast<double>(entries) : 0; }
};

// The transposable 2:4 masks (u8, 1 = kept) of a model's sparse FFN linears, on the training device.
class FfnMasks {
 public:
  struct Linear {
    int layer;
    FfnLinear which;
    int64_t offset, rows, cols;  // of the weight in the flat parameter layout
    Tensor mask;                 // [rows, cols]
  };

  FfnMasks(const ModelConfig& model, const SparsityConfig& config, Device device);

  const std::vector<Linear>& linears() const { return linears_; }
  int64_t bytes() const { return arena_.bytes(); }  // on the device: every mask and the scratch one
  // The mask of one linear; nullptr when it is dense.
  const Tensor* find(int layer, FfnLinear which) const;
  // False before the first computation and after drop() (dense fine-tuning).
  bool computed() const { return computed_; }

  // Every mask from the master weights (flat, layout order, on the masks' device), compared with the
  // masks before (when there were some).
  MaskUpdate recompute(const Tensor& master_params);
  void drop() { computed_ = false; }

  // grads += lambda (1 - mask) W for every sparse linear (flat master weights and gradients).
  void masked_decay(const Tensor& master_params, double lambda, const Tensor& grads) const;

  // The same restricted to the flat range [begin, begin + n) (a ZeRO-1 shard; it may cut linears
  // anywhere, and run past the layout into padding, which no linear covers): master_range and grad_range
  // hold that range only (element 0 is flat offset begin), n elements, f32 or f64, one device. Element-wise,
  // so it equals masked_decay restricted to the range.
  void masked_decay_range(const Tensor& master_range, int64_t begin, double lambda,
                          const Tensor& grad_range) const;
  // out_range = master_range in out_range's dtype (a cast, or a copy), with the masks applied where the
  // range covers sparse linears: the range of the working copy DecoderModel::load_weights builds from the
  // full masters while these masks are set (ranges as in masked_decay_range; out_range is bf16 beside f32
  // masters, or the masters' dtype).
  void masked_cast_range(const Tensor& master_range, int64_t begin, const Tensor& out_range) const;
  // The masks applied to flat host weights (for exporting the masked model).
  void apply_on_host(std::span<float> params) const;

  // For checkpoints: the masks per HF weight, and back (throws naming a missing or misshapen mask).
  std::vector<MaskTensor> to_host() const;
  void from_host(const std::vector<MaskTensor>& masks, const std::string& origin);

 private:
  Tensor weight(const Tensor& flat, const Linear& l) const;
  // The pieces of the sparse linears inside [begin, begin + n): per piece, its flat offset, length and
  // mask (a [1, length] view), in flat order.
  struct Piece {
    int64_t offset, length;
    Tensor mask;
  };
  std::vector<Piece> pieces_in(int64_t begin, int64_t n) const;
  // The HF tensors one linear's mask is stored as: (name, first row, rows).
  struct Part {
    std::string name;
    int64_t row, rows;
  };
  std::vector<Part> parts(const Linear& l) const;

  ParameterLayout layout_;
  Arena arena_;
  std::vector<Linear> linears_;
  Tensor scratch_;  // the new mask of one linear while it is compared with the old
  bool computed_ = false;
};

}  // namespace pt
