// The 2:4 encoding shared by our GEMM's operand format (sparse_gemm_sm90.h) and the cuSPARSELt layout we
// write ourselves (cusparselt_pack.h): both store, per group of 4 along the contraction, the two kept
// values in ascending column order and a nibble with their 2-bit columns (first in the low 2 bits).
#pragma once

#include <cstdint>

namespace pt::ops::cuda {

// The encoding of 16 consecutive elements of one row (bf16 bits, kept set as 16 bits): per group
// of 4 the first two kept columns, completed by the lowest unkept ones (zero values there). Returns the 8
// packed values; bits gets the 16-bit metadata half, and overfull groups (more than 2 kept) are counted.
__device__ inline uint4 encode16(const uint16_t (&v)[16], unsigned keep, unsigned& bits, int& bad) {
  uint32_t out[4];
  bits = 0;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const unsigned nib = keep >> (4 * q) & 0xFu;
    unsigned chosen = nib;
    if (__popc(nib) > 2) {
      ++bad;
      const unsigned first = nib & (0u - nib), rest = nib ^ first;
      chosen = first | (rest & (0u - rest));
    }
    while (__popc(chosen) < 2) {
      const unsigned unkept = ~chosen & 0xFu;
      chosen |= unkept & (0u - unkept);
    }
    const int i0 = __ffs(static_cast<int>(chosen)) - 1, i1 = 31 - __clz(static_cast<int>(chosen));
    // Selects rather than v[4 q + col]: an index known only at run time would put v in local memory.
    const auto value = [&](int col) {
      const uint32_t x = col == 0   ? v[4 * q]
                         : col == 1 ? v[4 * q + 1]
                         : col == 2 ? v[4 * q + 2]
                                    : v[4 * q + 3];
      return (nib >> col & 1u) ? x : 0u;
    };
    out[q] = value(i0) | value(i1) << 16;
    bits |= static_cast<unsigned>(i0 | i1 << 2) << (4 * q);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// The kept set of 16 bf16 values without a mask: the nonzeros (either sign of zero counts as zero).
__device__ inline unsigned nonzero_bits16(const uint16_t (&v)[16]) {
  unsigned keep = 0;
#pragma unroll
  for (int k = 0; k < 16; ++k) keep |= ((v[k] & 0x7FFFu) != 0 ? 1u : 0u) << k;
  return keep;
}

}  // namespace pt::ops::cuda
