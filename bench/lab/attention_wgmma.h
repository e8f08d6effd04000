// Kernel lab: a Hopper (sm_90a) varlen causal attention forward built on warpgroup MMA (wgmma), with the
// inputs and semantics of ops/attention.h's forward (q [T,H,D], k/v [T,Hkv,D] bf16, cu_seqlens segments,
// causal within a segment, GQA, out [T,H,D] bf16, lse [H,T] f32 in natural-log units), head dims 64 and 128.
// It is not wired into the production op: bench/lab/attention_lab.cpp checks it against
// pt::ops::attention_forward and times both. Builds for other architectures hold a stub kernel that
// reports "needs sm_90a" through the status words.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace pt::lab {

struct LabAttention {
  const void *q, *k, *v;      // bf16 [T,H,D], [T,Hkv,D], [T,Hkv,D]
  void* out;                  // bf16 [T,H,D]
  float* lse;                 // [H,T]
  const int32_t* cu_seqlens;  // [segments + 1] on the device
  const int32_t* valid_lens;  // [segments] on the device, or null (every token real)
  int segments = 0, T = 0, H = 0, Hkv = 0, D = 0;
  float scale = 0;  // softmax scale; 0 means 1/sqrt(D)
};

// Device scratch that lab_attention_forward needs (work list and status words), in bytes.
size_t lab_scratch_bytes(int T, int segments);

// Queues the schedule and the forward kernel on `stream`; never waits for the GPU. Throws pt::Error for
// shapes it does not support and for launch failures. `scratch` holds lab_scratch_bytes(T, segments) bytes.
void lab_attention_forward(const LabAttention& p, void* scratch, cudaStream_t stream);

// Layout probe (bench_attention_lab --probe): one CTA computes s = Q K^T (f32 [128, 128]) and o = P V (f32
// [128, D]) from q, k, v (bf16 [128, D]) and p (bf16 [128, 128]), all row-major device buffers, through the
// forward kernel's own tile loads, descriptors, wgmma wrappers and fragment layouts, so that a layout bug
// shows as a pattern of wrong elements. Waits for the GPU; returns "" when it ran, else why not (no sm_90a
// code).
std::string lab_layout_probe(int D, const void* q, const void* k, const void* v, const void* p, float* s,
                             float* o);

// Waits for `stream`, then reads the status words the last call (same T and segments) left: "" when the
// kernel ran, else why it did not (a build without sm_90a device code, an inconsistent segment table).
std::string lab_status(const void* scratch, int T, int segments, cudaStream_t stream);

}  // namespace pt::lab
