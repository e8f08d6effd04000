#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"

#include <cblas.h>

#include <limits>

namespace pt::ops::cpu {

namespace {

// One row-major GEMM, C = op(A) op(B) + beta C, for either element type; BLAS runs its own threads.
template <class R>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const R* a, int64_t lda, const R* b,
          int64_t ldb, Write mode, R* c, int64_t ldc) {
  for (int64_t d : {m, n, k})
    if (d > std::numeric_limits<int>::max()) fail("linear: dimension {} exceeds the BLAS int range", d);
  const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  const R beta = mode == Write::accumulate ? R(1) : R(0);
  const auto i = [](int64_t v) { return static_cast<blasint>(v); };
  if constexpr (sizeof(R) == sizeof(float))
    cblas_sgemm(CblasRowMajor, ta, tb, i(m), i(n), i(k), 1.0f, a, i(lda), b, i(ldb), beta, c, i(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, i(m), i(n), i(k), 1.0, a, i(lda), b, i(ldb), beta, c, i(ldc));
}

}  // namespace

void linear_forward(const Tensor& x, const Tensor& w, const Tensor& y, Write mode) {
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  dispatch_real("linear_forward", x.dtype, [&](auto tag) {
    using R = decltype(tag);
    gemm<R>(false, true, M, N, K, x.ptr<R>(), K, w.ptr<R>(), K, mode, y.ptr<R>(), y.size(1));  // y = x W^T
  });
}

void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& dx, Write dx_mode,
                     const Tensor& dw, Write dw_mode) {
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0), ldy = dy.size(1);
  dispatch_real("linear_backward", x.dtype, [&](auto tag) {
    using R = decltype(tag);
    if (!dx.empty()) gemm<R>(false, false, M, K, N, dy.ptr<R>(), ldy, w.ptr<R>(), K, dx_mode, dx.ptr<R>(), K);
    if (!dw.empty()) gemm<R>(true, false, N, K, M, dy.ptr<R>(), ldy, x.ptr<R>(), K, dw_mode, dw.ptr<R>(), K);
  });
}

}  // namespace pt::ops::cpu
