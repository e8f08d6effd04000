// Layout probe of the wgmma forms the sm_90a attention backward (ops/cuda/attention_backward_sm90.cu) uses
// beyond the forward's: see wgmma_probe.cpp.
#pragma once

#include <string>

namespace pt::lab {

// One CTA of the backward's shape computes, from k [128, D], q [64, D] and x [128, 64] (bf16, row-major
// device buffers; x stands for P^T or dS^T: keys x queries), through the backward kernel's tile loads,
// descriptors, wgmma wrappers and fragment conversions (f32, row-major):
//   st  [128, 64] = K Q^T   ss m64n64k16, both K-major (S^T and dP^T)
//   xq  [128, D]  = X Q     rs m64nDk16: X as an accumulator -> to_a_fragments, Q MN-major (dV and dK)
//   xtk [64, D]   = X^T K   X stored by store_a_fragments, ss m64n(D/2)k16 with MN-major A and B, one D
//                           half per warpgroup (dQ)
// Waits for the GPU; returns "" when it ran, else why not (no sm_90a code).
std::string wgmma_probe_backward(int D, const void* k, const void* q, const void* x, float* st, float* xq,
                                 float* xtk);

}  // namespace pt::lab
