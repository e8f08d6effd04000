// cuTensorMapEncodeTiled is a driver API function: taken through the runtime's entry-point query, so that
// the project links the runtime alone.
#include "ops/cuda/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace pt::ops::cuda {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      entry = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  }();
  if (!fn) throw Error("the CUDA driver has no cuTensorMapEncodeTiled (TMA needs driver 12.0 or newer)");
  return fn;
}

}  // namespace

CUtensorMap head_tile_map(const void* data, int64_t tokens, int heads, int head_dim, int rows) {
  constexpr cuuint32_t kBoxColumns = 64;  // 128 bytes of bf16: the swizzle span
  // Innermost first: columns of a head, heads, tokens; strides in bytes for the outer two.
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(tokens)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(head_dim) * 2,
                                 static_cast<cuuint64_t>(heads) * static_cast<cuuint64_t>(head_dim) * 2};
  const cuuint32_t box[3] = {kBoxColumns, 1, static_cast<cuuint32_t>(rows)};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  CUtensorMap map{};
  const CUresult result =
      encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(data), dims, strides, box,
                     element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
    throw Error("cuTensorMapEncodeTiled failed (error " + std::to_string(static_cast<int>(result)) +
                ") for a [" + std::to_string(tokens) + ", " + std::to_string(heads) + ", " +
                std::to_string(head_dim) + "] bf16 tensor in boxes of " + std::to_string(rows) + " rows");
  return map;
}

}  // namespace pt::ops::cuda
