// The CPU reference backend: one function per op with the front end's signature. Arguments arrive
// validated (shapes, dtypes, device agree), so these check only data-dependent conditions (ids in range).
// A CUDA backend provides the same set in ops/cuda/, and tests compare the two op by op.
#pragma once

#include "ops/adamw.h"
#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/head_norm_rope.h"
#include "ops/rope.h"
#include "ops/write_mode.h"

#include <span>

namespace pt::ops::cpu {

void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out);
void embedding_backward(const Tensor& ids, const Tensor& dout, const Tensor& dtable, Write mode);

void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd);
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      const Tensor& dx, Write dx_mode, const Tensor& dweight, Write dweight_mode);

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd);
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, Write dx_mode, const Tensor& dweight,
                        const Tensor& dbias, Write param_mode);

// sign = +1 rotates forward, -1 applies the transposed rotation (the backward); both scaled by
// freq.attention_scale.
void rope_rotate(const Tensor& x, const Tensor& position_ids, const RopeFrequencies& freq, int sign,
                 const Tensor& out);

void head_norm_rope_forward(const HeadNormRope& p, const Tensor& q, const Tensor& k);
void head_norm_rope_backward(const HeadNormRope& p, const Tensor& dq, const Tensor& dk, const Tensor& dq_pre,
                             const Tensor& dk_pre, const Tensor& dq_weight, const Tensor& dk_weight);

void attention_forward(const AttentionParams& p);
void attention_backward(const AttentionParams& p, const AttentionGrads& g);

void swiglu_forward(const Tensor& h, const Tensor& out);
void swiglu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh);

void gelu_forward(const Tensor& h, const Tensor& out);
void gelu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh);
void gelu_erf_forward(const Tensor& h, const Tensor& out);
void gelu_erf_backward(const Tensor& dout, const Tensor& h, const Tensor& dh);

void linear_forward(const Tensor& x, const Tensor& w, const Tensor& y, Write mode);
void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& dx, Write dx_mode,
                     const Tensor& dw, Write dw_mode);

void bias_add(const Tensor& y, const Tensor& bias);
void bias_backward(const Tensor& dy, const Tensor& dbias, Write mode);

// The first V columns of each row are the classes (rows may be padded past them).
CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, double grad_scale,
                                 const Tensor& dlogits, int64_t V);
// Checks the targets all the same (cheap on the host).
void cross_entropy_accumulate(const Tensor& logits, const Tensor& targets, double grad_scale,
                              const Tensor& dlogits, const Tensor& sums, int64_t V);

void adamw_step(std::span<const AdamWTensor> tensors, const AdamWConfig& config, int64_t step);

double sum_of_squares(const Tensor& t);
void add(const Tensor& src, const Tensor& dst);   // dst += src
void cast(const Tensor& src, const Tensor& dst);  // f32 <-> bf16
void scale(const Tensor& t, double factor);

// 2:4 sparsity (ops/sparse24.h). A mask byte other than 0 counts as kept.
void transposable_mask24(const Tensor& w, const Tensor& mask);
int64_t mask_flips(const Tensor& a, const Tensor& b);
void apply_mask(const Tensor& w, const Tensor& mask, const Tensor& out);
void masked_decay(const Tensor& w, const Tensor& mask, double lambda, const Tensor& grad);
void mvue24(const Tensor& g, uint64_t seed, const Tensor& out);

}  // namespace pt::ops::cpu
