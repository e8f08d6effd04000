// Self-attention over packed variable-length segments, in the manner of flash-attention's mha_varlen_fwd:
// tokens are flattened to T, and segment s covers [cu_seqlens[s], cu_seqlens[s+1]); no query attends across
// a segment boundary. H query heads share Hkv key/value heads (GQA, H % Hkv == 0). Causal (decoders) or
// bidirectional (encoders: BERT); an optional sliding window (Mistral, Qwen2/3) limits each causal query to
// the keys just before it.
// The forward keeps one log-sum-exp per query so the backward recomputes probabilities instead of
// storing them; no T x T (or segment x segment) matrix is ever formed.
#pragma once

#include "core/tensor.h"

namespace pt::ops {

struct AttentionParams {
  Tensor q;           // [T,H,D]
  Tensor k, v;        // [T,Hkv,D]
  Tensor cu_seqlens;  // [S+1] i32: 0 = cu_seqlens[0] <= ... <= cu_seqlens[S] = T
  // Optional [S] i32: real tokens at the start of each segment; the rest are pads that are neither
  // queries (output and lse 0, no gradient) nor keys, and cost no work. Empty: every token is real.
  Tensor valid_lens;
  Tensor out;                // [T,H,D]
  Tensor lse;                // [H,T] log-sum-exp of each query's scaled scores; q's dtype, f32 for bf16 q
  double softmax_scale = 0;  // 0 means 1/sqrt(D)
  // The caller has checked cu_seqlens and valid_lens on the host (BatchInputs::stage does). The cuda
  // backend then skips reading back its own check of the table, a host sync that would wait for the
  // kernels on every call and leave the GPU idle while the next launches are issued.
  bool segments_checked = false;
  // > 0: query i of a segment attends the keys j of that segment with i - window < j <= i (Hugging Face's
  // sliding_window: the query and the window - 1 keys before it); 0: every earlier key. Causal only.
  int32_t window = 0;
  // true: query i attends the keys j <= i of its segment; false (bidirectional): every key of its segment.
  bool causal = true;
};

struct AttentionGrads {
  Tensor dout;    // [T,H,D]
  Tensor dq;      // [T,H,D], overwritten
  Tensor dk, dv;  // [T,Hkv,D], overwritten
};

// Reads q, k, v, cu_seqlens, valid_lens; writes out and lse.
void attention_forward(const AttentionParams& p);

// Reads everything attention_forward read plus its out and lse; writes dq, dk, dv.
void attention_backward(const AttentionParams& p, const AttentionGrads& g);

}  // namespace pt::ops
