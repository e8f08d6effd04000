// Linear layer y = x W^T (+ b) with W stored [out, in] as in PyTorch and Hugging Face checkpoints.
// The CPU backend calls CBLAS (cblas_sgemm / cblas_dgemm); CUDA cuBLASLt, which adds the bias in the GEMM's
// epilogue (no second pass over y).
#pragma once

#include "core/tensor.h"
#include "ops/write_mode.h"

#include <cstddef>
#include <span>

namespace pt::ops {

// The cuBLASLt workspace the CUDA backend allocates once for every GEMM (what cuBLAS suggests for Hopper);
// here so that the memory plan (train/memory_plan.h) counts it.
inline constexpr size_t kCublasLtWorkspaceBytes = size_t{32} << 20;

// x[M,K], w[N,K] -> y[M,N] = x W^T (overwritten, or added to with Write::accumulate), plus bias[N] on every
// row when a bias is given (y's type, or f32 beside bf16 y; its gradient is ops::bias_backward's).
// y may be [M, >= N]: rows padded past N (aligned rows for an odd N such as GPT-2's vocabulary), the
// columns past N left as they are; dy likewise in linear_backward, its columns past N unread.
void linear_forward(const Tensor& x, const Tensor& w, const Tensor& y, Write mode = Write::overwrite,
                    const Tensor& bias = Tensor());

// The residual stream's add fused into the layer: y[M,N] = residual[M,N] + x W^T (+ bias[N]), y overwritten.
// residual may be y itself; otherwise it shares no byte with y. CUDA reads the residual as cuBLASLt's C and
// writes D = y, so the residual is not first copied into y.
void linear_residual_forward(const Tensor& x, const Tensor& w, const Tensor& residual, const Tensor& y,
                             const Tensor& bias = Tensor());

// dy[M,N] -> dx[M,K] = dy W and dw[N,K] = dy^T x, each overwritten or added to. Either output may be an
// empty Tensor() to skip it (no dx for a layer whose input needs no gradient).
void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& dx, Write dx_mode,
                     const Tensor& dw, Write dw_mode);

// The weight gradients of linear layers of one shape that share their input (an MHA layer's q, k and v
// projections, a GQA layer's k and v): dw[i][N,K] = (or +=) dy[i][M,N]^T x[M,K] for each i, as
// linear_backward's dw. CUDA runs them as one strided-batched GEMM where the dy, and the dw, lie equally
// spaced in memory (as the decoder's buffers do), else a GEMM each: a narrow weight gradient alone has too
// few output tiles to fill the GPU, and cuBLASLt splits it over the tokens and adds the parts in a second
// kernel.
void linear_weight_grads(std::span<const Tensor> dy, const Tensor& x, std::span<const Tensor> dw, Write mode);

// GPT-2's MLP with its tanh GELU (ops/gelu.h) fused into the GEMMs, which spares the activation its own
// passes over [tokens, 4C] (CUDA: cuBLASLt's GELU epilogues). The cpu backend composes the ops above, and
// CUDA falls back to that composition where cuBLASLt has no fused kernel (cuda_ops.h says when).
//
// x[M,K], w[N,K] -> h[M,N] = x W^T (+ bias[N]) and act[M,N] = gelu(h), both overwritten; h is kept for
// the backward. bias as linear_forward's; h and act are separate buffers.
void linear_gelu_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& h,
                         const Tensor& act);

// The input gradient of y = gelu(h) W^T through both: dy[M,N], w[N,K], h[M,K] -> dh[M,K] = gelu'(h) * (dy W),
// overwritten (dy may be [M, >= N] as in linear_backward). W's gradient is linear_backward's, from gelu(h);
// dh shares no byte with dy or h.
void linear_dgelu_backward(const Tensor& dy, const Tensor& w, const Tensor& h, const Tensor& dh);

}  // namespace pt::ops
