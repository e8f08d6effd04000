// AdamW as torch.optim.AdamW: decoupled weight decay (p -= lr * wd * p), bias-corrected moments.
//
// The two moments can be kept in three formats (MomentFormat), chosen by the moments' dtype:
//   f32   as f32 or f64 parameters, f32 beside bf16 ones: 4 bytes a moment element;
//   bf16  rounded to nearest even after each update: 2 bytes;
//   q8    8-bit block-wise dynamic quantization (ops/quantize8.h; Dettmers et al. 2022): a u8 code per
//         element and an f32 absmax per block of kQuantBlock elements: 1 + 4 / 256 bytes.
// In the bf16 and q8 formats each update decodes the moments, computes in f32 and encodes them again, and
// the parameter step uses the updated moments before they are encoded.
//
// The parameters are f32 masters (f64 too on the cpu, with f32 moments), or bf16 with no masters at all:
// then the weights the model computes with are the parameters, each update computes in f32 from their bf16
// value and rounds the result stochastically (adamw_update.h), so steps smaller than half a bf16 spacing
// still move a weight in expectation. 2 bytes a parameter instead of 4 for the masters and 2 for the
// working copy.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace pt::ops {

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  uint64_t seed = 0;  // bf16 parameters: the stochastic rounding's draws hash (seed, step, element)
  // Each gradient is read as float(double(g) * grad_scale): the global-norm clip folded into the update
  // (ops::clip_factor), giving the bits the gradients scaled in place beforehand would (ops/grad_norm.h).
  double grad_scale = 1.0;
};

enum class MomentFormat : uint8_t { f32, bf16, q8 };

// "f32", "bf16", "8bit": the names of the train flag --optimizer-state and of checkpoints.
std::string_view moment_format_name(MomentFormat format);
std::optional<MomentFormat> parse_moment_format(std::string_view name);
// The format of moments of this dtype: f32 and f64 are f32 (as the parameters), bf16, u8 is q8.
MomentFormat moment_format_of(DType moment_dtype);
// The dtype of moments of a format beside f32 parameters.
DType moment_dtype(MomentFormat format);

// Elements per quantization block of the q8 format. 256: an outlier coarsens only its own 256 neighbours'
// codes (the paper's reason for small blocks; it used 2048), a CUDA block of 256 threads holds a block in
// registers with one element a thread, and the absmax costs 4 / 256 bytes an element.
inline constexpr int64_t kQuantBlock = 256;
// Blocks of a tensor of numel elements (the last one partial): elements of its absmax tensor.
inline int64_t quant_blocks(int64_t numel) { return (numel + kQuantBlock - 1) / kQuantBlock; }
// Device bytes of one moment of a numel-element tensor in a format (the q8 absmax included).
int64_t moment_bytes(MomentFormat format, int64_t numel);

// One parameter: weights, gradient and both moments, all of one element count. param and grad share a
// dtype (f32 in training; the cpu backend takes f64 too), or param is bf16 (no masters) with an f32 grad;
// the parameters of one call share a dtype. m and v share one that names the format. q8 moments come with
// their absmax tensors, f32[quant_blocks(numel)]; blocks start at element 0. The caller decides decay per
// tensor (Llama recipes leave norms and embeddings undecayed). offset: where element 0 sits in the whole
// flat parameter vector, which bf16 parameters' rounding draws hash (so any sharding rounds each weight
// alike). working, optional beside f32 parameters: a bf16 tensor of the same element count on their device
// that also gets each updated parameter rounded to nearest even (what ops::cast writes), in the same pass:
// the copy a bf16 model computes with, without a cast of every master after the step.
struct AdamWTensor {
  Tensor param, grad, m, v;
  bool decay = true;
  Tensor m_absmax{}, v_absmax{};
  int64_t offset = 0;
  Tensor working{};
};

// Updates every tensor in place; all of them hold their moments in one format. step is the 1-based count
// of optimizer steps including this one.
void adamw_step(std::span<const AdamWTensor> tensors, const AdamWConfig& config, int64_t step);

// One moment of a whole flat parameter range on the host, as the optimizer holds it (checkpoints store it
// so): values for f32 and bf16 (every bf16 one exactly a float), codes and absmax for q8.
struct HostMoment {
  MomentFormat format = MomentFormat::f32;
  std::vector<float> values{};
  std::vector<uint8_t> codes{};
  std::vector<float> absmax{};
  bool operator==(const HostMoment&) const = default;
};

}  // namespace pt::ops
