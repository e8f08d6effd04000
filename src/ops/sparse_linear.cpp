#include "ops/sparse_linear.h"

#include "ops/linear.h"
#include "ops/sparse24.h"

namespace pt::ops {

// Without CUDA there is nothing to accelerate: the masked dense GEMMs are the implementation.
struct SparseLinear::Accel {};

SparseLinear::SparseLinear(const Tensor& w, int64_t max_tokens, std::string name)
    : w_(w), max_tokens_(max_tokens), name_(std::move(name)) {
  if (w.ndim != 2 || w.size(0) % 4 != 0 || w.size(1) % 4 != 0)
    fail("{}: a 2:4 sparse weight must be [N,K] with N and K multiples of 4, got {}", name_, w.str());
}

SparseLinear::~SparseLinear() = default;
SparseLinear::SparseLinear(SparseLinear&&) noexcept = default;
SparseLinear& SparseLinear::operator=(SparseLinear&&) noexcept = default;

void SparseLinear::refresh() {}

void SparseLinear::forward(const Tensor& x, const Tensor& y, Write mode) const {
  linear_forward(x, w_, y, mode);
}

void SparseLinear::backward(const Tensor& dy, const Tensor& x, const Tensor& dx, Write dx_mode,
                            const Tensor& dw, Write dw_mode, const Tensor& dy_pruned, uint64_t seed) const {
  if (!dx.empty()) linear_backward(dy, x, w_, dx, dx_mode, Tensor(), dw_mode);
  if (dw.empty()) return;
  const Tensor* g = &dy;
  if (!dy_pruned.empty()) {
    mvue24(dy, seed, dy_pruned);
    g = &dy_pruned;
  }
  linear_backward(*g, x, w_, Tensor(), dx_mode, dw, dw_mode);
}

}  // namespace pt::ops
