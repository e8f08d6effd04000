// A bias-free linear layer y = x W^T whose weight is 2:4 sparse under a transposable mask (ops/sparse24.h),
// with the three GEMMs of training:
//   forward          y  = x W^T            (W 2:4 along K)
//   input gradient   dx = dy W             (W^T 2:4 along N: why the mask is transposable)
//   weight gradient  dw = MVUE24(dy)^T x   (dy pruned 2:4 along tokens), or dy^T x when asked for dense dw
// The results are always those of the masked dense math. On the cpu every GEMM is that dense GEMM (the
// reference). On cuda W and W^T are packed again after every weight update (into cuSPARSELt's layout by
// our own kernel, or into our wgmma kernel's format), and for each GEMM shape an autotuner times the sparse
// kernels, packing included, against the dense cuBLASLt one once, keeps the fastest and logs the choice, so
// sparsity never makes a GEMM slower.
#pragma once

#include "core/tensor.h"
#include "ops/write_mode.h"

#include <cstdint>
#include <memory>
#include <string>

namespace pt::ops {

// Whether the weight-gradient GEMM of sparse linears on `device` can run on sparse tensor cores: cuda with
// cuSPARSELt in a sparse GEMM mode that may run dW on it (auto, sparse, sparse-a, sparse-b; see
// ops/cuda/sparse_gemm.h). Only then does pruning the output gradient by MVUE pay.
bool sparse_weight_grad_gemm(Device device);

// The FFN activations whose backward can prune and pack its gradient for the up projection's weight gradient.
enum class Activation { swiglu, gelu_tanh, gelu_erf };

class SparseLinear {
 public:
  // w: the masked working weight [N,K] (already multiplied by its transposable mask) on the model's
  // device, in the model's compute dtype; it must stay at this address while its values change.
  // max_tokens bounds M of every call. name labels the autotuner's log lines ("layers.3.mlp.down_proj").
  SparseLinear(const Tensor& w, int64_t max_tokens, std::string name);
  ~SparseLinear();
  SparseLinear(SparseLinear&&) noexcept;
  SparseLinear& operator=(SparseLinear&&) noexcept;

  // After the weight's values changed (every optimizer step, every new mask): prepare W and W^T again.
  void refresh();

  // x[M,K] -> y[M,N], overwritten or added to.
  void forward(const Tensor& x, const Tensor& y, Write mode) const;

  // dy[M,N] -> dx[M,K] = dy W (skipped when dx is empty), computed first from the dense dy; then, when
  // dy_pruned[M,N] is given, dw[N,K] = mvue24(dy, seed)^T x, with dy_pruned (may be dy itself) as the
  // space for the pruned dy: afterwards its contents are unspecified (on cuda the sparse kernel's packing
  // prunes on the fly and writes only what dense GEMMs read there); with an empty dy_pruned, dw = dy^T x.
  // dw may be f32 beside bf16 activations, as in linear_backward.
  // dy_packed: dy came from this layer's activation_backward, which returned true for this dy and seed.
  // prune_only_if_sparse: MVUE only where dw runs on sparse tensor cores (weight_grad_sparse's question,
  // answered by the call it asked about), a plain dw elsewhere.
  void backward(const Tensor& dy, const Tensor& x, const Tensor& dx, Write dx_mode, const Tensor& dw,
                Write dw_mode, const Tensor& dy_pruned, uint64_t seed, bool dy_packed = false,
                bool prune_only_if_sparse = false) const;

  // For the up projection of an FFN (SwiGLU's gate_up, GELU's fc), whose output gradient is the activation's
  // input gradient: dh = the activation's backward of dout [M,F] at its input h (SwiGLU: h, dh [M,2F]; GELU:
  // [M,F]), where this layer's backward will prune dh by MVUE with `seed` into a dw of dtype dw_dtype. Where
  // that weight gradient runs on sparse tensor cores from an operand packtrain packs, the same pass prunes
  // and packs dh for it (the activation's backward fused with MVUE, as in Hu et al.) and this returns true:
  // pass dy_packed to the backward() that follows. False: the plain activation backward ran.
  bool activation_backward(Activation activation, const Tensor& dout, const Tensor& h, const Tensor& dh,
                           uint64_t seed, DType dw_dtype) const;

  // Whether dw of an M-token backward into a dw of dtype dw_dtype runs on sparse tensor cores, the only
  // case where pruning dy by MVUE buys speed: on cuda the autotuner's choice for the shape (true until the
  // first such call has decided), else false.
  bool weight_grad_sparse(int64_t tokens, DType dw_dtype) const;

  const Tensor& weight() const { return w_; }

 private:
  struct Accel;  // cuda: compressed operands, cuSPARSELt plans and the autotuner's choices
  Tensor w_;
  int64_t max_tokens_;
  std::string name_;
  std::unique_ptr<Accel> accel_;
};

}  // namespace pt::ops
