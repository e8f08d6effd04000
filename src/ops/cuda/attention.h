// CUDA varlen causal attention (bf16 q/k/v/out and gradients, fp32 lse and accumulation; head dims 64 and
// 128). Called by ops/attention.cpp after its shape and device checks; the semantics are those of
// ops/attention.h. Work runs on the default stream; each call returns after its kernels finish, because
// it reads back the schedule's consistency verdict on cu_seqlens and valid_lens to report bad tables.
#pragma once

#include "ops/attention.h"

namespace pt::ops::cuda {

void attention_forward(const AttentionParams& p);
void attention_backward(const AttentionParams& p, const AttentionGrads& g);

}  // namespace pt::ops::cuda
