#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/stream.h"

namespace pt::ops::cuda {

namespace {

constexpr int kThreads = 256;

// One thread per (token, pair i < D/2): the angle is computed once in double, as on the cpu, and the
// thread rotates pair (i, i + D/2) of every head. Reads finish before writes, so out may be x.
template <class T>
__global__ void rotate_kernel(const T* x, const int32_t* __restrict__ pos, double theta, float sign, T* out,
                              int64_t T_, int64_t N, int64_t D) {
  const int64_t half = D / 2;
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= T_ * half) return;
  const int64_t t = idx / half, i = idx % half;
  const double angle = double(pos[t]) * pow(theta, -double(2 * i) / double(D));
  double sin_d, cos_d;
  sincos(angle, &sin_d, &cos_d);
  const float c = float(cos_d), s = sign * float(sin_d);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t base = (t * N + n) * D + i;
    const float lo = load(x + base), hi = load(x + base + half);
    store(out + base, lo * c - hi * s);
    store(out + base + half, hi * c + lo * s);
  }
}

}  // namespace

void rope_rotate(const Tensor& x, const Tensor& position_ids, double theta, int sign, const Tensor& out) {
  const int64_t T = x.shape[0], N = x.shape[1], D = x.shape[2];
  if (T * N * D == 0) return;
  dispatch_float(sign > 0 ? "rope_forward" : "rope_backward", "input", x.dtype, [&](auto tag) {
    using E = decltype(tag);
    rotate_kernel<<<blocks_for(T * (D / 2), kThreads), kThreads, 0, current_stream()>>>(
        data<E>(x), data<int32_t>(position_ids), theta, float(sign), data<E>(out), T, N, D);
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::ops::cuda
