// Temporary device memory for ops that need it (partial sums, sort buffers, result words). One grow-only
// buffer serves every op: ops run in stream order, so one op's temporaries are dead before the next starts.
// Growing frees the old buffer with cudaFree, which waits for the device, so no kernel still reads it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pt::ops::cuda {

// Carves typed, 256-byte-aligned regions out of the scratch buffer: declare every region with reserve(),
// call allocate() once, then take each region's pointer with at().
class ScratchPlan {
 public:
  template <class T>
  size_t reserve(int64_t count) {
    const size_t offset = bytes_;
    bytes_ += (static_cast<size_t>(count) * sizeof(T) + 255) / 256 * 256;
    return offset;
  }
  void allocate();  // grows the shared buffer to hold every region reserved so far
  template <class T>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(base_ + offset);
  }

 private:
  size_t bytes_ = 0;
  char* base_ = nullptr;
};

}  // namespace pt::ops::cuda
