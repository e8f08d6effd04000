// The stream every CUDA op runs on. Ops ask here rather than using the default stream directly, so moving
// them onto a dedicated compute stream (and capturing CUDA graphs) is a change in one place.
#pragma once

#include <cuda_runtime.h>

namespace pt::ops::cuda {

cudaStream_t current_stream();

// The side stream of host-to-device input copies (ops/upload.h): non-blocking, so it never waits on the
// default stream implicitly; events order it.
cudaStream_t copy_stream();

// Waits for the current stream, e.g. before the host reads a result copied back from the device.
void sync_current_stream();

}  // namespace pt::ops::cuda
