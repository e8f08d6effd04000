// Whether an op's output replaces what is in the buffer or adds to it. Gradients of parameters add
// across micro-batches (and across uses, as with tied embeddings); activations usually overwrite.
#pragma once

namespace pt::ops {

enum class Write { overwrite, accumulate };

}  // namespace pt::ops
