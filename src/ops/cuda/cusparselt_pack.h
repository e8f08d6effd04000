// cuSPARSELt's compressed form of a 2:4 bf16 operand, written by our own kernel. cusparseLtSpMMACompress
// costs as much as a sparse GEMM saves (0.3-2.6 ms per FFN weight on the H200, redone after every
// optimizer step); this pass runs at memory bandwidth and also reads the operand transposed, so W^T (the
// input gradient's operand) and g^T (the weight gradient's) need no transposed copy.
//
// The layout is cuSPARSELt's for a structured A, row-major, op N (cuSPARSELt 0.8 on sm_90; learned by
// compressing matrices whose groups encode their own indices, and checked against cusparseLtSpMMACompress2
// at start-up by ops/cuda/sparse_gemm.cpp and in the tests). For A [R, C]:
//   values    R x C/2 bf16, row-major: per group of 4 along a row, the two kept values in ascending
//             column order;
//   metadata  R*C/8 bytes right after them: one nibble per group (first kept column in the low 2 bits,
//             second in the high 2), nibble n at byte n / 2 (the low nibble when n is even), where the
//             group of row r and columns c .. c+3 has
//               n = 256 t + ((r/8)%2 | ((c/16)%2) << 1 | ((c/4)%4) << 2 | (r%8) << 4 | ((r/16)%2) << 7),
//               t = (r/64) * (C/32) * 2 + (c/32) * 2 + (r/32)%2
//             (32 x 32 tiles of 128 bytes, two per 64-row band and 32 columns, bands in row order).
// cuSPARSELt pads other shapes (rows to 64; columns that are odd multiples of 32 came out different at
// [64, 32] and [128, 96], and its GEMM then reads past the unpadded size): those use its own compression.
#pragma once

#include <cstdint>

namespace pt::ops::cuda {

// R and C positive multiples of 64.
bool cusparselt_pack_fits(int64_t R, int64_t C);
constexpr int64_t cusparselt_pack_bytes(int64_t R, int64_t C) { return R * C + R * C / 8; }

// dst (16-byte aligned, cusparselt_pack_bytes(R, C)) = the layout above for A = src[:R, :C] (transpose
// false) or A = src[:C, :R]^T (transpose true). src is bf16 and row-major with a row stride of ld
// elements (a multiple of 8), 16-byte aligned, and A keeps at most 2 nonzeros per group of 4: the kept
// set is the nonzeros (a group with fewer is completed with zeros). On the current stream.
void cusparselt_pack24(const void* src, int64_t ld, bool transpose, int64_t R, int64_t C, void* dst);

// The weight gradient's operand pruned and packed in one pass: as cusparselt_pack24 from a stored A^T, for
// A = mvue24(g, seed)^T [R, C] where g = src[:C, :R] is any output gradient (C tokens, R features),
// pruned 2:4 along its rows with the draws of ops::mvue24 (the same kept entries and values) on the way.
void cusparselt_pack24_mvue(const void* src, int64_t ld, int64_t R, int64_t C, uint64_t seed, void* dst);

}  // namespace pt::ops::cuda
