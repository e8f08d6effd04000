#include <algorithm>
#include <span>
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

// Up to two tensors of `heads` x D values a token (q and k) rotated by the same per-token angles, in one
// launch. A token's values start pitch elements after the previous token's: heads * D for a tensor of its
// own, more for a part of a packed q | k | v row.
template <class T>
struct Rotation {
  const T* in[2];
  T* out[2];
  int heads[2];  // heads[1] = 0 rotates one tensor
  int64_t in_pitch[2], out_pitch[2];
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
    const int64_t in = (t0 + token) * r.in_pitch[which] + n * D + i;
    const int64_t row = (t0 + token) * r.out_pitch[which] + n * D + i;
    float lo[kVec], hi[kVec], out_lo[kVec], out_hi[kVec];
    load_floats<kVec>(r.in[which] + in, lo);
    load_floats<kVec>(r.in[which] + in + half, hi);
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

// One tensor of a rotation: `heads` x D values a token, the input's tokens in_pitch elements apart, the
// output's out_pitch (a part of a packed q | k | v row has the row's pitch).
struct RopeRows {
  const void* in;
  int64_t in_pitch;
  void* out;
  int64_t out_pitch, heads;
};

// The rotation of `parts` (1 or 2) tensors of T tokens and head dim D.
void rotate(const char* op, std::span<const RopeRows> parts, int64_t T, int64_t D, DType dtype,
            const Tensor& position_ids, const RopeFrequencies& freq, int sign) {
  int64_t heads = 0;
  for (const RopeRows& p : parts) heads += p.heads;
  if (T * heads * D == 0) return;
  const int64_t half = D / 2, shared_per_token = rope_angles_bytes(1, half) - rope_angles_bytes(0, half),
                shared_fixed = rope_angles_bytes(0, half);
  if (half > kMaxRopeHalf || heads > (1 << 20))
    throw Error(std::string(op) + ": " + std::to_string(heads) + " heads of dim " + std::to_string(D) +
                ": the cuda kernel takes head dims up to " + std::to_string(2 * kMaxRopeHalf) +
                " and up to 2^20 heads per token");
  const RopeTable f = rope_table(freq);
  dispatch_float(op, "input", dtype, [&](auto tag) {
    using E = decltype(tag);
    constexpr int kVec = kPack16<E>;
    bool vector = half % kVec == 0;
    Rotation<E> r{};
    for (size_t w = 0; w < parts.size(); ++w) {
      const RopeRows& p = parts[w];
      vector = vector && aligned16({p.in, p.out}) && p.in_pitch % kVec == 0 && p.out_pitch % kVec == 0;
      r.in[w] = static_cast<const E*>(p.in), r.out[w] = static_cast<E*>(p.out);
      r.heads[w] = static_cast<int>(p.heads), r.in_pitch[w] = p.in_pitch, r.out_pitch[w] = p.out_pitch;
    }
    const int64_t per_token = heads * (vector ? half / kVec : half);
    const int64_t tokens =
        std::min({std::max<int64_t>(1, kItemsPerBlock / per_token), int64_t{kMaxTokensPerBlock},
                  (kMaxSharedBytes - shared_fixed) / shared_per_token, T});
    const int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, (tokens * per_token + 31) / 32 * 32));
    const auto shared = static_cast<size_t>(shared_fixed + tokens * shared_per_token);
    auto kernel = vector ? rotate_kernel<E, kVec> : rotate_kernel<E, 1>;
    kernel<<<blocks_for(T, static_cast<int>(tokens)), threads, shared, current_stream()>>>(
        r, f, data<int32_t>(position_ids), float(sign), T, static_cast<int>(D), static_cast<int>(tokens));
    PT_CUDA_CHECK_LAUNCH();
  });
}

// rows x width elements from src to dst, each side's rows pitch elements apart.
void copy_rows(const void* src, int64_t src_pitch, void* dst, int64_t dst_pitch, int64_t width, int64_t rows,
               DType dtype) {
  if (width * rows == 0) return;
  const auto size = static_cast<size_t>(dtype_size(dtype));
  PT_CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<size_t>(dst_pitch) * size, src,
                                  static_cast<size_t>(src_pitch) * size, static_cast<size_t>(width) * size,
                                  static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, current_stream()));
}

}  // namespace

void rope_rotate(const Tensor& q, const Tensor& k, const Tensor& position_ids, const RopeFrequencies& freq,
                 int sign, const Tensor& q_out, const Tensor& k_out) {
  const int64_t Hq = q.shape[1], D = q.shape[2];
  const RopeRows parts[2] = {{q.data, Hq * D, q_out.data, Hq * D, Hq},
                             {k.data, k.empty() ? 0 : k.shape[1] * D, k_out.data,
                              k.empty() ? 0 : k.shape[1] * D, k.empty() ? 0 : k.shape[1]}};
  rotate(sign > 0 ? "rope_forward" : "rope_backward", std::span(parts, k.empty() ? 1 : 2), q.shape[0], D,
         q.dtype, position_ids, freq, sign);
}

void rope_forward_qkv(const Tensor& qkv, const Tensor& position_ids, const RopeFrequencies& freq,
                      const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t T = q.shape[0], H = q.shape[1], Hkv = k.shape[1], D = q.shape[2], P = qkv.shape[1];
  const int64_t es = dtype_size(qkv.dtype);
  const auto* packed = static_cast<const char*>(qkv.data);
  const RopeRows parts[2] = {{packed, P, q.data, H * D, H}, {packed + H * D * es, P, k.data, Hkv * D, Hkv}};
  rotate("rope_forward_qkv", parts, T, D, qkv.dtype, position_ids, freq, +1);
  copy_rows(packed + (H + Hkv) * D * es, P, v.data, Hkv * D, Hkv * D, T, v.dtype);
}

void rope_backward_qkv(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& position_ids,
                       const RopeFrequencies& freq, const Tensor& dqkv) {
  const int64_t T = dq.shape[0], H = dq.shape[1], Hkv = dk.shape[1], D = dq.shape[2], P = dqkv.shape[1];
  const int64_t es = dtype_size(dqkv.dtype);
  auto* packed = static_cast<char*>(dqkv.data);
  const RopeRows parts[2] = {{dq.data, H * D, packed, P, H}, {dk.data, Hkv * D, packed + H * D * es, P, Hkv}};
  rotate("rope_backward_qkv", parts, T, D, dq.dtype, position_ids, freq, -1);
  copy_rows(dv.data, Hkv * D, packed + (H + Hkv) * D * es, P, Hkv * D, T, dv.dtype);
}

}  // namespace pt::ops::cuda
