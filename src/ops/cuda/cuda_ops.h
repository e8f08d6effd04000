// The CUDA backend: one function per op with the front end's signature (mirror of ops/cpu/cpu_ops.h).
// Arguments arrive validated by the front ends (shapes and devices agree). Activations may be f32 or
// bf16; where the front end allows an f32 tensor beside bf16 ones (norm weights and statistics, parameter
// gradients) these accept it, and every kernel accumulates in fp32. All work is queued on
// pt::cuda::current_stream(); ops that return a host value (loss, norm) or check data on the device
// (token ids, targets) wait for it.
#pragma once

#include <memory>
#include <span>

#include "ops/adamw.h"
#include "ops/cross_entropy.h"
#include "ops/head_norm_rope.h"
#include "ops/rope.h"
#include "ops/state_transfer.h"
#include "ops/upload.h"
#include "ops/write_mode.h"

namespace pt::ops::cuda {

// ids_checked: the caller checked the ids on the host, so none is read back (no wait for the device).
void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out, bool ids_checked);
// dtable is f32 or dout's type; tokens are grouped by id with a stable sort, so every row sums its tokens
// in token order: deterministic and race-free.
void embedding_backward(const Tensor& ids, const Tensor& dout, const Tensor& dtable, Write mode,
                        bool ids_checked);
// weight is f32 or x's type; rstd is f32.
void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd);
// dweight is f32 or x's type and is reduced over tokens in a fixed order.
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      const Tensor& dx, Write dx_mode, const Tensor& dweight, Write dweight_mode);
// weight and bias share a type, f32 or x's; mean and rstd are f32.
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd);
// dweight, dbias and dx_bias (empty: not summed) share a type, f32 or x's, and are reduced over tokens in a
// fixed order.
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, Write dx_mode, const Tensor& dweight,
                        const Tensor& dbias, Write param_mode, const Tensor& dx_bias);
// sign = +1 rotates forward, -1 applies the transposed rotation (the backward); both scaled by
// freq.attention_scale. k may be empty (one tensor); otherwise q and k are rotated in one launch. Head dims
// up to 512 (the frequencies travel in the kernel's parameters). Position ids are not range-checked on the
// device (that would wait for the GPU in every layer).
void rope_rotate(const Tensor& q, const Tensor& k, const Tensor& position_ids, const RopeFrequencies& freq,
                 int sign, const Tensor& q_out, const Tensor& k_out);
// ops/rope.h's packed forms: q and k rotated out of (or back into) the packed rows in one launch, v copied.
void rope_forward_qkv(const Tensor& qkv, const Tensor& position_ids, const RopeFrequencies& freq,
                      const Tensor& q, const Tensor& k, const Tensor& v);
void rope_backward_qkv(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& position_ids,
                       const RopeFrequencies& freq, const Tensor& dqkv);
// Fused where every row is one 16-byte vector a lane of a team of 8, 16 or 32 lanes (head dims 64, 128 and
// 256 in bf16; 32, 64 and 128 in f32) and the tensors are 16-byte aligned; the norm and rotation kernels
// one after the other otherwise.
void head_norm_rope_forward(const HeadNormRope& p, const Tensor& q, const Tensor& k);
void head_norm_rope_backward(const HeadNormRope& p, const Tensor& dq, const Tensor& dk, const Tensor& dq_pre,
                             const Tensor& dk_pre, const Tensor& dq_weight, const Tensor& dk_weight);
void swiglu_forward(const Tensor& h, const Tensor& out);
void swiglu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh);
// out may be h, and dh may be dout or h (each element is read before it is written).
void gelu_forward(const Tensor& h, const Tensor& out);
// With dbias (else empty), the backward also sums dh over rows into it (ops/gelu.h).
void gelu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh, const Tensor& dbias,
                   Write dbias_mode);
void gelu_erf_forward(const Tensor& h, const Tensor& out);  // the same for the exact GELU
void gelu_erf_backward(const Tensor& dout, const Tensor& h, const Tensor& dh, const Tensor& dbias,
                       Write dbias_mode);
// swiglu_backward whose dh feeds a 2:4 weight gradient (the gate_up projection's): in the same pass, rows
// [0, rows) of dh are pruned by mvue24 with `seed` and packed as A = mvue24(dh[:rows])^T [2F, rows] into
// `packed` (cusparselt_pack_bytes(2F, rows)), the bytes cusparselt_pack24_mvue writes from dh; rows past
// them get the plain backward. Needs bf16, 16-byte aligned tensors, F and rows multiples of 64 (rows <= T):
// otherwise only the plain backward runs and it returns false.
bool swiglu_backward_mvue_packed(const Tensor& dout, const Tensor& h, const Tensor& dh, uint64_t seed,
                                 int64_t rows, void* packed);
// The same for gelu_backward, whose dh [T, F] feeds the fc projection's weight gradient: A =
// mvue24(dh[:rows])^T [F, rows], under the same conditions (F and rows multiples of 64, bf16, 16-byte
// aligned).
bool gelu_backward_mvue_packed(const Tensor& dout, const Tensor& h, const Tensor& dh, uint64_t seed,
                               int64_t rows, void* packed);
bool gelu_erf_backward_mvue_packed(const Tensor& dout, const Tensor& h, const Tensor& dh, uint64_t seed,
                                   int64_t rows, void* packed);  // the same for the exact GELU
// cuBLASLt GEMMs with fp32 accumulation (no TF32); dw may be f32 beside bf16 inputs.
// With a bias, cuBLASLt's bias epilogue adds it when it lies 16-byte aligned in y's type (as the weights'
// flat buffer usually places it); otherwise bias_add runs after the GEMM.
void linear_forward(const Tensor& x, const Tensor& w, const Tensor& y, Write mode, const Tensor& bias);
void linear_residual_forward(const Tensor& x, const Tensor& w, const Tensor& residual, const Tensor& y,
                             const Tensor& bias);
void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& dx, Write dx_mode,
                     const Tensor& dw, Write dw_mode);
// One strided-batched GEMM where the dy and the dw each lie equally spaced (ops/linear.h), else one each.
void linear_weight_grads(std::span<const Tensor> dy, const Tensor& x, std::span<const Tensor> dw, Write mode);
// ops/linear.h's GELU-fused pair, each one cuBLASLt matmul: GELU_AUX_BIAS (GELU_AUX without a bias) writes
// act as D and h as the epilogue's aux matrix; DGELU reads h as aux and writes dh as D. They return true
// when fused. Otherwise (cuBLASLt's aux matrix needs a leading dimension, N here and K in the backward,
// divisible by 8 and a 16-byte aligned h; an f32 bias beside bf16 h, a misaligned bias, an empty
// dimension, or no algorithm for the epilogue) they run the composition: linear_forward and gelu_forward,
// linear_backward and gelu_backward.
bool linear_gelu_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& h,
                         const Tensor& act);
bool linear_dgelu_backward(const Tensor& dy, const Tensor& w, const Tensor& h, const Tensor& dh);
// bias and dbias are f32 or y's type; dbias is reduced over rows in a fixed order (two passes, no atomics).
void bias_add(const Tensor& y, const Tensor& bias);
void bias_backward(const Tensor& dy, const Tensor& dbias, Write mode);
// The first V columns of each row are the classes (rows may be padded past them).
CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, double grad_scale,
                                 const Tensor& dlogits, int64_t V);
// Queued only: the targets are not checked (a bad one counts as a token of loss 0 and zero gradient).
void cross_entropy_accumulate(const Tensor& logits, const Tensor& targets, double grad_scale,
                              const Tensor& dlogits, const Tensor& sums, int64_t V);
// f32 tensors, updated in a few launches over a table of tensor descriptors.
void adamw_step(std::span<const AdamWTensor> tensors, const AdamWConfig& config, int64_t step);
// Sum of squares of every element of every (f32) tensor, reduced in double in a fixed order.
double sum_of_squares(std::span<const Tensor> tensors);
void scale(std::span<const Tensor> tensors, double factor);
// The global norm written to norm (f64 [1]) on the device: no wait.
void global_norm_deferred(std::span<const Tensor> grads, const Tensor& norm);
// clip_grad_norm with the norm written to norm (f64 [1]) and the factor applied on the device: no wait.
void clip_grad_norm_deferred(std::span<const Tensor> grads, double max_norm, const Tensor& norm);
void add(const Tensor& src, const Tensor& dst);   // dst += src; also a bf16 src into an f32 dst
void copy(const Tensor& src, const Tensor& dst);  // queued on the stream (cudaMemcpy would wait for it)
// f32 <-> bf16 with pt::float_to_bf16's rounding bit for bit, so host and device copies of weights agree.
void cast(const Tensor& src, const Tensor& dst);

// 2:4 sparsity (ops/sparse24.h): masks bit for bit those of the cpu for the same fp32 values, and MVUE
// the cpu's draws and fp32 arithmetic. Weights and gradients are f32 or bf16; apply_mask takes f32 or
// bf16 to the same type, or f32 to bf16. mask_flips waits for the stream to return its count.
void transposable_mask24(const Tensor& w, const Tensor& mask);
int64_t mask_flips(const Tensor& a, const Tensor& b);
void apply_mask(const Tensor& w, const Tensor& mask, const Tensor& out);
void masked_decay(const Tensor& w, const Tensor& mask, double lambda, const Tensor& grad);
// first_row: g and out are rows [first_row, first_row + M) of a larger gradient (first_row a multiple of
// 4), pruned with that gradient's draws.
void mvue24(const Tensor& g, uint64_t seed, const Tensor& out, int64_t first_row = 0);

// ops/upload.h's slot: pinned staging and a copy on copy_stream(), ordered by events.
std::unique_ptr<UploadSlot::Impl> make_upload(size_t bytes);
// ops/state_transfer.h's copies: a fetch stream and a write-back stream, ordered by events.
std::unique_ptr<StateTransfer::Impl> make_state_transfer(int slots);

}  // namespace pt::ops::cuda
