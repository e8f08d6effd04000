// CUDA varlen attention, causal (with an optional sliding window) or bidirectional (bf16 q/k/v/out and
// gradients, fp32 lse and accumulation; head dims 64 and 128). Called by ops/attention.cpp after its shape
// and device checks; the semantics are those of ops/attention.h. Work runs on the default stream. Unless the
// caller checked the segment table (AttentionParams::segments_checked, as the model does), a call waits for
// its kernels and reads back the schedule's verdict on cu_seqlens and valid_lens, to report a bad table.
#pragma once

#include "ops/attention.h"

namespace pt::ops::cuda {

// The kernels, forward and backward: wgmma (Hopper warpgroup MMA, attention_{forward,backward}_sm90.cu)
// where the GPU is sm_90 and the build holds sm_90a code, else mma.sync (attention_{forward,backward}.cu).
// The environment variable PACKTRAIN_ATTENTION_KERNEL (auto, mma, wgmma) overrides the automatic choice;
// tests and benchmarks call set_attention_kernel to run each.
enum class AttentionKernel { automatic, mma, wgmma };
const char* attention_kernel_name(AttentionKernel kernel);
bool attention_kernel_available(AttentionKernel kernel);
// Throws pt::Error for a kernel this GPU or build cannot run.
void set_attention_kernel(AttentionKernel kernel);
// The kernel the next call runs (never automatic).
AttentionKernel attention_kernel();

void attention_forward(const AttentionParams& p);
void attention_backward(const AttentionParams& p, const AttentionGrads& g);

}  // namespace pt::ops::cuda
