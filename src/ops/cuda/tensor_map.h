// TMA descriptors (CUtensorMap) for the sm_90a kernels' tile loads: one map per [T, heads, D] bf16 tensor,
// whose box is `rows` tokens of one head and 64 columns (128 bytes), landing in shared memory in the 128-byte
// swizzled layout that wgmma reads (ops/cuda/wgmma.cuh's swizzled_offset: a D = 128 tile is two such boxes).
// Rows past the tensor's last token arrive as zeros.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace pt::ops::cuda {

// Throws pt::Error when the driver lacks cuTensorMapEncodeTiled or rejects the shape; `data` must be 16-byte
// aligned and D a multiple of 64.
CUtensorMap head_tile_map(const void* data, int64_t tokens, int heads, int head_dim, int rows);

}  // namespace pt::ops::cuda
