// 2:4 structured sparsity for training (Hu et al., ICML 2024, "Accelerating Transformer Pre-training with
// 2:4 Sparsity"): the element-wise ops around the sparse GEMMs. A weight W[N,K] is pruned by a
// transposable mask, so W (2:4 along K, for Y = X W^T) and W^T (2:4 along N, for dX = dY W) can both feed
// sparse tensor cores; the output gradient is pruned 2:4 along tokens by the minimum-variance unbiased
// estimator for dW = MVUE(dY)^T X; pruned weights keep training and are pulled towards zero by masked
// decay. Masks are u8, 1 = kept. Each op has a CPU reference and a CUDA kernel with the same results.
#pragma once

#include "core/tensor.h"

#include <cstdint>

namespace pt::ops {

// The transposable 2:4 mask of w[N,K] (N and K multiples of 4) into mask u8[N,K]: in every aligned 4x4
// block, of the 90 patterns keeping exactly 2 entries per row and 2 per column, the one whose kept sum of
// |w| is largest. Ties go to the first pattern in the enumeration order of transposable_patterns24().
void transposable_mask24(const Tensor& w, const Tensor& mask);

// The 90 transposable 4x4 patterns as 16-bit row-major bitmasks (bit 4*r + c set = kept), in the order
// that breaks ties: ascending numeric value.
const uint16_t* transposable_patterns24();
constexpr int kTransposablePatterns24 = 90;

// How many entries differ between two masks of one shape (the flip count; a host value).
int64_t mask_flips(const Tensor& a, const Tensor& b);

// out = w * mask. out is w's dtype, or bf16 beside an f32 w: the masked cast that builds a bf16 working
// copy from fp32 master weights in one pass. out may be w itself (same dtype) to prune in place.
void apply_mask(const Tensor& w, const Tensor& mask, const Tensor& out);

// Masked decay (the SR-STE variant of the paper): grad += lambda * (1 - mask) * w, before the optimizer,
// so pruned weights decay towards zero and the mask settles. w and grad share a dtype.
void masked_decay(const Tensor& w, const Tensor& mask, double lambda, const Tensor& grad);

// MVUE 2:4 pruning of g[M,N] along M (tokens) into out[M,N]. In every column, each group of 4
// consecutive rows (a last partial group is completed with zeros) keeps 2 entries, drawn with inclusion
// probabilities p_i = min(1, c |g_i|) with c such that sum p_i = 2 (all nonzeros when fewer than 3 are
// nonzero), each kept entry divided by its p_i. So E[out] = g (unbiased) with the least variance of any
// such 2-of-4 estimator. The two entries come from one uniform draw u in [0,1) by systematic sampling
// (entry i is kept when [P_{i-1}, P_i) holds u or u+1, P the running sum of p); u is a counter-based hash
// of (seed, group, column), so cpu and cuda draw the same values. out may be g itself.
void mvue24(const Tensor& g, uint64_t seed, const Tensor& out);

}  // namespace pt::ops
