// Our Hopper (sm_90a) 2:4 sparse GEMM on wgmma.mma_async.sp, with an operand format of our own that one
// cheap pass writes from the masked weight (cuSPARSELt's compression costs as much as a GEMM, and its format
// is opaque). ops/cuda/sparse_gemm.cpp runs it for the forward and input-gradient GEMMs of sparse linears;
// bench_sparse_gemm_lab (bench/lab) probes its layouts, checks it against cuBLASLt and times it.
//
// Operand format of a 2:4 weight W[N, K] (bf16, row-major; N a multiple of 64, K of 128):
//   values [N, K/2] bf16, row-major: per row and aligned group of 4 along K, the two kept elements in
//          ascending column order (a group that keeps fewer is completed with zeros at unkept columns).
//   meta   N*K/8 bytes: the 2-bit in-group column of each value, as wgmma.mma_async.sp reads its sparsity
//          metadata register (PTX ISA, "Sparse Warpgroup Level Matrix Multiply-Accumulate", the metadata
//          layout of m64nNk32 .bf16 with sparsity selector 0), pre-arranged so that each thread of the
//          GEMM gets the registers of four k32 steps with one 16-byte shared-memory load. u32 word
//            ((rb * K/128 + kt) * 64 + 16 w + 2 g + h) * 4 + s
//          covers rows 64 rb + 16 w + g (bits 0-15) and 64 rb + 16 w + g + 8 (bits 16-31), columns
//          128 kt + 32 s + 16 h .. + 15, one nibble per group of 4 in column order (group 0 in bits 0-3):
//          low 2 bits = column of the first kept value, high 2 bits = column of the second.
// The kept set comes from the u8 mask (1 = kept) when one is given: that is what the training state holds
// (ops/sparse24.h), it keeps exact zeros that are still "kept" weights, and the optimizer's fused masked
// cast will have it in hand. Without a mask, the nonzeros are kept (any bf16 W that is already 2:4).
#pragma once

#include <cstdint>
#include <string>

namespace pt::ops::cuda {

// "" when the GEMM takes these sizes, else why not: N a multiple of 256 (a CTA's weight rows), K of 128
// (a pipeline stage and a metadata block), M >= 1 (any count of tokens; the last tile is masked).
std::string wgmma_sparse_gemm_unsupported(int64_t M, int64_t N, int64_t K);
// The build holds the sm_90a kernels and the current GPU runs them.
bool wgmma_sparse_gemm_available();

constexpr int64_t sparse24_values_bytes(int64_t N, int64_t K) { return N * K; }  // N x K/2 bf16
constexpr int64_t sparse24_meta_bytes(int64_t N, int64_t K) { return N * K / 8; }

// One pass over w [N, K] bf16 (and mask u8 [N, K], or nullptr to keep the nonzeros) into values and meta
// (16-byte aligned device buffers). overfull (device int, or nullptr): incremented per group of 4 with
// more than 2 kept entries (its first two are used). On the current stream; N % 64 == 0, K % 128 == 0.
void compress24(const void* w, const uint8_t* mask, int64_t N, int64_t K, void* values, void* meta,
                int* overfull);
// The same format for W^T [K, N] (2:4 along N), read from w and mask [N, K] as they lie: the operand of the
// input gradient dx = dy W, which is y = x W'^T with W' = W^T. K % 64 == 0, N % 128 == 0.
void compress24_transposed(const void* w, const uint8_t* mask, int64_t N, int64_t K, void* values,
                           void* meta, int* overfull);

// y[M, N] = x[M, K] W^T + beta y (bf16 out, f32 accumulation; beta 0 never reads y, so y may hold NaN).
// W in the format above; x and y row-major, 16-byte aligned. On the current stream.
void wgmma_sparse_gemm(const void* x, const void* values, const void* meta, void* y, int64_t M, int64_t N,
                       int64_t K, float beta);

// The GEMM's main loop alone, its f32 accumulators written raw to acc [N, M] (row n = weight row, column
// = token) straight from the wgmma fragments, skipping the shared-memory epilogue: the lab's layout
// probe. Waits for the GPU; returns "" when it ran, else why not.
std::string wgmma_sparse_gemm_raw(const void* x, const void* values, const void* meta, float* acc, int64_t M,
                                  int64_t N, int64_t K);

}  // namespace pt::ops::cuda
