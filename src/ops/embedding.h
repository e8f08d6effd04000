// Token embedding lookup. T tokens, V vocabulary rows, C hidden.
#pragma once

#include "core/tensor.h"
#include "ops/write_mode.h"

namespace pt::ops {

// ids[T] (i32, each in [0, V)), table[V,C] -> out[T,C], out[t] = table[ids[t]].
// An id outside the table is a pt::Error naming the token index. ids_checked = true says the caller
// checked every id on the host: the cuda path then does not read the check back (no wait for the device)
// and a bad id's row is zeroed silently.
void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out, bool ids_checked = false);

// dtable[V,C] (overwritten or added to) receives dout[t] in row ids[t] for every t. Deterministic: each
// (row, column) sums its tokens in a fixed order without atomics, the same on every run. Bad ids as in
// embedding_forward (with ids_checked, a bad id's row gets nothing).
void embedding_backward(const Tensor& ids, const Tensor& dout, const Tensor& dtable, Write mode,
                        bool ids_checked = false);

}  // namespace pt::ops
