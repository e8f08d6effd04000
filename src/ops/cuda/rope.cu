#include <algorithm>
#include <string>

#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/rope_angles.cuh"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda {

namespace {

constexpr int kMaxThreads = 256;
constexpr int kItemsPerBlock = 512;  // vector pairs a block rotates: ~2 per thread
constexpr int kMaxTokensPerBlock = 64;
constexpr int kMaxSharedBytes = 48 << 10;

// Up to two tensors [T, heads, D] (q and k) rotated by the same per-token angles, in one launch.
template <class T>
struct Rotation {
  const T* in[2];
  T* out[2];
  int heads[2];  // heads[1] = 0 rotates one tensor
};

// Each block takes `tokens` consecutive tokens. It first computes the scaled cos and sin of every (token,
// i < D/2) angle into shared memory (rope_angles); then its threads rotate pairs (i..i+kVec,
// i+D/2..i+D/2+kVec) of every head of those tokens with kVec-wide accesses. A thread reads a pair before
// writing it, so out may be in.
template <class T, int kVec>
__global__ void rotate_kernel(Rotation<T> r, RopeTable f, const int32_t* __restrict__ pos, float sign,
                              int64_t T_, int D, int tokens) {
  extern __shared__ double shared[];
  const int half = D / 2;
  const int64_t t0 = int64_t{blockIdx.x} * tokens;
  tokens = static_cast<int>(min(int64_t{tokens}, T_ - t0));
  float *cos_t, *sin_t;
  rope_angles(f, pos, t0, tokens, half, sign, shared, cos_t, sin_t);
  const int vectors = half / kVec, per_token = (r.heads[0] + r.heads[1]) * vectors;
  for (int j = threadIdx.x; j < tokens * per_token; j += blockDim.x) {
    const int token = j / per_token, rest = j - token * per_token, head = rest / vectors;
    const int i = (rest - head * vectors) * kVec, which = head < r.heads[0] ? 0 : 1;
    const int n = head - which * r.heads[0];
    const int64_t row = ((t0 + token) * r.heads[which] + n) * D + i;
    float lo[kVec], hi[kVec], out_lo[kVec], out_hi[kVec];
    load_floats<kVec>(r.in[which] + row, lo);
    load_floats<kVec>(r.in[which] + row + half, hi);
    const float *c = cos_t + token * half + i, *s = sin_t + token * half + i;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      out_lo[k] = lo[k] * c[k] - hi[k] * s[k];
      out_hi[k] = hi[k] * c[k] + lo[k] * s[k];
    }
    store_floats<kVec>(r.out[which] + row, out_lo);
    store_floats<kVec>(r.out[which] + row + half, out_hi);
  }
}

}  // namespace

void rope_rotate(const Tensor& q, const Tensor& k, const Tensor& position_ids, const RopeFrequencies& freq,
                 int sign, const Tensor& q_out, const Tensor& k_out) {
  const int64_t T = q.shape[0], D = q.shape[2];
  const int64_t heads = q.shape[1] + (k.empty() ? 0 : k.shape[1]);
  if (T * heads * D == 0) return;
  const char* op = sign > 0 ? "rope_forward" : "rope_backward";
  const int64_t half = D / 2, shared_per_token = rope_angles_bytes(1, half) - rope_angles_bytes(0, half),
                shared_fixed = rope_angles_bytes(0, half);
  if (half > kMaxRopeHalf || heads > (1 << 20))
    throw Error(std::string(op) + ": " + std::to_string(heads) + " heads of dim " + std::to_string(D) +
                ": the cuda kernel takes head dims up to " + std::to_string(2 * kMaxRopeHalf) +
                " and up to 2^20 heads per token");
  const RopeTable f = rope_table(freq);
  dispatch_float(op, "input", q.dtype, [&](auto tag) {
    using E = decltype(tag);
    constexpr int kVec = kPack16<E>;
    const bool vector = half % kVec == 0 && aligned16({q.data, q_out.data, k.data, k_out.data});
    const int64_t per_token = heads * (vector ? half / kVec : half);
    const int64_t tokens =
        std::min({std::max<int64_t>(1, kItemsPerBlock / per_token), int64_t{kMaxTokensPerBlock},
                  (kMaxSharedBytes - shared_fixed) / shared_per_token, T});
    const int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, (tokens * per_token + 31) / 32 * 32));
    const auto shared = static_cast<size_t>(shared_fixed + tokens * shared_per_token);
    Rotation<E> r{{data<E>(q), k.empty() ? nullptr : data<E>(k)},
                  {data<E>(q_out), k.empty() ? nullptr : data<E>(k_out)},
                  {static_cast<int>(q.shape[1]), k.empty() ? 0 : static_cast<int>(k.shape[1])}};
    auto kernel = vector ? rotate_kernel<E, kVec> : rotate_kernel<E, 1>;
    kernel<<<blocks_for(T, static_cast<int>(tokens)), threads, shared, current_stream()>>>(
        r, f, data<int32_t>(position_ids), float(sign), T, static_cast<int>(D), static_cast<int>(tokens));
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::ops::cuda
