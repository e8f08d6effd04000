#include "ops/sparse_linear.h"

#include "ops/arg_check.h"
#include "ops/gelu.h"
#include "ops/linear.h"
#include "ops/sparse24.h"
#include "ops/swiglu.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/sparse_gemm.h"
#endif

namespace pt::ops {

// On cuda: the weight's compressed copies (ops/cuda/sparse_gemm.h, which also holds the plans and the
// autotuner's choices, shared by all layers of one shape). On cpu the masked dense GEMMs are the
// implementation and there is nothing to hold.
struct SparseLinear::Accel {
#ifdef PACKTRAIN_CUDA
  explicit Accel(const Tensor& w) : weight(w) {}
  cuda::SparseWeight weight;
#endif
};

bool sparse_weight_grad_gemm(Device device) {
#ifdef PACKTRAIN_CUDA
  using cuda::SparseGemmMode;
  const SparseGemmMode mode = cuda::sparse_gemm_mode();  // wgmma and dense leave dW to cuBLASLt
  return device == Device::cuda && cuda::sparse_gemm_available() && mode != SparseGemmMode::dense &&
         mode != SparseGemmMode::wgmma;
#else
  (void)device;
  return false;
#endif
}

SparseLinear::SparseLinear(const Tensor& w, int64_t max_tokens, std::string name)
    : w_(w), max_tokens_(max_tokens), name_(std::move(name)) {
  if (w.ndim != 2 || w.size(0) % 4 != 0 || w.size(1) % 4 != 0)
    fail("{}: a 2:4 sparse weight must be [N,K] with N and K multiples of 4, got {}", name_, w.str());
  if (max_tokens < 0) fail("{}: max_tokens must be >= 0, got {}", name_, max_tokens);
#ifdef PACKTRAIN_CUDA
  if (w.device == Device::cuda) accel_ = std::make_unique<Accel>(w);
#endif
}

SparseLinear::~SparseLinear() = default;
SparseLinear::SparseLinear(SparseLinear&&) noexcept = default;
SparseLinear& SparseLinear::operator=(SparseLinear&&) noexcept = default;

void SparseLinear::refresh() {
#ifdef PACKTRAIN_CUDA
  if (accel_) accel_->weight.invalidate();
#endif
}

namespace {

void check_tokens(const std::string& name, const char* what, int64_t M, int64_t max_tokens) {
  if (M > max_tokens)
    fail("{}: {} has {} tokens but the layer was built for at most {}; raise max_tokens", name, what, M,
         max_tokens);
}

}  // namespace

bool SparseLinear::weight_grad_sparse(int64_t tokens, DType dw_dtype) const {
#ifdef PACKTRAIN_CUDA
  if (accel_ && w_.dtype == DType::bf16)
    return cuda::sparse_weight_grad_runs_sparse(tokens, w_.size(0), w_.size(1), dw_dtype);
#endif
  (void)tokens, (void)dw_dtype;
  return false;
}

void SparseLinear::forward(const Tensor& x, const Tensor& y, Write mode) const {
  ArgCheck a("SparseLinear::forward");
  a.real("x", x, {-1, w_.size(1)}).real("w", w_, {-1, -1}).real("y", y, {x.size(0), w_.size(0)});
  check_tokens(name_, "x", x.size(0), max_tokens_);
#ifdef PACKTRAIN_CUDA
  if (accel_) return cuda::sparse_linear_forward(x, accel_->weight, y, mode, name_);
#endif
  linear_forward(x, w_, y, mode);
}

bool SparseLinear::activation_backward(Activation activation, const Tensor& dout, const Tensor& h,
                                       const Tensor& dh, uint64_t seed, DType dw_dtype) const {
  const bool swiglu = activation == Activation::swiglu;
  ArgCheck a("SparseLinear::activation_backward");
  a.real("dh", dh, {-1, w_.size(0)})
      .real("h", h, {dh.size(0), w_.size(0)})
      .real("dout", dout, {dh.size(0), swiglu ? w_.size(0) / 2 : w_.size(0)});
  check_tokens(name_, "dh", dh.size(0), max_tokens_);
  const auto plain = [&] {
    if (activation == Activation::swiglu) return ops::swiglu_backward(dout, h, dh);
    if (activation == Activation::gelu_tanh) return ops::gelu_backward(dout, h, dh);
    ops::gelu_erf_backward(dout, h, dh);
  };
#ifdef PACKTRAIN_CUDA
  if (accel_ && w_.dtype == DType::bf16) {
    const int64_t M = dh.size(0), N = w_.size(0), K = w_.size(1);
    const auto fused = [&](void* packed, int64_t rows) {
      if (activation == Activation::swiglu)
        return cuda::swiglu_backward_mvue_packed(dout, h, dh, seed, rows, packed);
      if (activation == Activation::gelu_tanh)
        return cuda::gelu_backward_mvue_packed(dout, h, dh, seed, rows, packed);
      return cuda::gelu_erf_backward_mvue_packed(dout, h, dh, seed, rows, packed);
    };
    // Before the autotuner's first decision on this weight gradient: what packing adds to this pass.
    cuda::sparse_weight_grad_note_producer(M, N, K, dw_dtype, plain, fused);
    if (const cuda::PackedGrad packed = cuda::sparse_weight_grad_packed_operand(M, N, K, dw_dtype);
        packed.rows > 0)
      return fused(packed.data, packed.rows);
  }
#endif
  (void)seed, (void)dw_dtype;
  plain();
  return false;
}

void SparseLinear::backward(const Tensor& dy, const Tensor& x, const Tensor& dx, Write dx_mode,
                            const Tensor& dw, Write dw_mode, const Tensor& dy_pruned, uint64_t seed,
                            bool dy_packed, bool prune_only_if_sparse) const {
  ArgCheck a("SparseLinear::backward");
  const int64_t N = w_.size(0), K = w_.size(1);
  a.real("x", x, {-1, K}).real("w", w_, {N, K}).real("dy", dy, {x.size(0), N});
  if (!dx.empty()) a.real("dx", dx, {x.size(0), K});
  if (!dw.empty()) a.real_or_f32("dw", dw, {N, K});
  check_tokens(name_, "dy", x.size(0), max_tokens_);

  if (!dx.empty()) {
#ifdef PACKTRAIN_CUDA
    if (accel_)
      cuda::sparse_linear_input_grad(dy, accel_->weight, dx, dx_mode, name_);
    else
#endif
      linear_backward(dy, x, w_, dx, dx_mode, Tensor(), dw_mode);
  }
  if (dw.empty()) return;
  if (dy_pruned.empty()) return linear_backward(dy, x, w_, Tensor(), dx_mode, dw, dw_mode);
#ifdef PACKTRAIN_CUDA
  if (accel_)
    return cuda::sparse_linear_weight_grad_mvue(dy, seed, dy_pruned, x, dw, dw_mode, name_, dy_packed,
                                                prune_only_if_sparse);
#endif
  (void)dy_packed;  // only cuda packs
  if (prune_only_if_sparse)
    return linear_backward(dy, x, w_, Tensor(), dx_mode, dw, dw_mode);  // no sparse dw here
  mvue24(dy, seed, dy_pruned);
  linear_backward(dy_pruned, x, w_, Tensor(), dx_mode, dw, dw_mode);
}

}  // namespace pt::ops
