#include <algorithm>
#include <string>

#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda {

namespace {

constexpr int kMaxThreads = 256;
constexpr int kItemsPerBlock = 512;  // vector pairs a block rotates: 2 per thread
constexpr int kMaxTokensPerBlock = 64;
constexpr int kMaxSharedBytes = 48 << 10;
constexpr int kMaxHalf = 256;  // head dims up to 512

// Up to two tensors [T, heads, D] (q and k) rotated by the same per-token angles, in one launch.
template <class T>
struct Rotation {
  const T* in[2];
  T* out[2];
  int heads[2];  // heads[1] = 0 rotates one tensor
};

// The frequency table passed by value: it rides in the kernel's parameter space (2 KB of its 4 KB), so a
// launch needs no device buffer and no copy of its own.
struct Frequencies {
  double inv_freq[kMaxHalf];
  double scale;
};

// Each block takes `tokens` consecutive tokens and its threads rotate pairs (i..i+kVec, i+D/2..i+D/2+kVec)
// of every head of those tokens with kVec-wide accesses, kItems pairs a thread per round. A round's loads
// are issued first; only then does the first round compute the scaled cos and sin of every (token,
// i < D/2) angle in double, as the cpu does, into shared memory, so the angles' latency overlaps the loads
// instead of preceding them. A thread reads a pair before writing it, so out may be in.
template <class T, int kVec>
__global__ void rotate_kernel(Rotation<T> r, Frequencies f, const int32_t* __restrict__ pos, float sign,
                              int64_t T_, int D, int tokens) {
  constexpr int kItems = 2;
  extern __shared__ double shared[];
  const int half = D / 2;
  double* inv_freq = shared;
  float* cos_t = reinterpret_cast<float*>(inv_freq + half);
  float* sin_t = cos_t + tokens * half;
  const int64_t t0 = int64_t{blockIdx.x} * tokens;
  tokens = static_cast<int>(min(int64_t{tokens}, T_ - t0));
  const int vectors = half / kVec, per_token = (r.heads[0] + r.heads[1]) * vectors;
  const int total = tokens * per_token, stride = kItems * static_cast<int>(blockDim.x);
  for (int round = 0; round < total; round += stride) {
    float lo[kItems][kVec], hi[kItems][kVec];
    int64_t row[kItems];
    int which[kItems], token[kItems], i[kItems];
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      const int j = round + u * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
      token[u] = j / per_token;
      if (j >= total) continue;
      const int rest = j - token[u] * per_token, head = rest / vectors;
      i[u] = (rest - head * vectors) * kVec, which[u] = head < r.heads[0] ? 0 : 1;
      row[u] = ((t0 + token[u]) * r.heads[which[u]] + head - which[u] * r.heads[0]) * D + i[u];
      load_floats<kVec>(r.in[which[u]] + row[u], lo[u]);
      load_floats<kVec>(r.in[which[u]] + row[u] + half, hi[u]);
    }
    if (round == 0) {  // the same for every thread of the block
      for (int k = threadIdx.x; k < half; k += blockDim.x) inv_freq[k] = f.inv_freq[k];
      __syncthreads();
      for (int k = threadIdx.x; k < tokens * half; k += blockDim.x) {
        double s, c;
        sincos(double(pos[t0 + k / half]) * inv_freq[k % half], &s, &c);
        cos_t[k] = float(c * f.scale);
        sin_t[k] = sign * float(s * f.scale);
      }
      __syncthreads();
    }
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      if (round + u * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x) >= total) continue;
      const float *c = cos_t + token[u] * half + i[u], *s = sin_t + token[u] * half + i[u];
      float out_lo[kVec], out_hi[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        out_lo[k] = lo[u][k] * c[k] - hi[u][k] * s[k];
        out_hi[k] = hi[u][k] * c[k] + lo[u][k] * s[k];
      }
      store_floats<kVec>(r.out[which[u]] + row[u], out_lo);
      store_floats<kVec>(r.out[which[u]] + row[u] + half, out_hi);
    }
  }
}

}  // namespace

void rope_rotate(const Tensor& q, const Tensor& k, const Tensor& position_ids, const RopeFrequencies& freq,
                 int sign, const Tensor& q_out, const Tensor& k_out) {
  const int64_t T = q.shape[0], D = q.shape[2];
  const int64_t heads = q.shape[1] + (k.empty() ? 0 : k.shape[1]);
  if (T * heads * D == 0) return;
  const char* op = sign > 0 ? "rope_forward" : "rope_backward";
  const int64_t half = D / 2, shared_per_token = half * 2 * int64_t{sizeof(float)},
                shared_fixed = half * int64_t{sizeof(double)};
  if (half > kMaxHalf || heads > (1 << 20))
    throw Error(std::string(op) + ": " + std::to_string(heads) + " heads of dim " + std::to_string(D) +
                ": the cuda kernel takes head dims up to " + std::to_string(2 * kMaxHalf) +
                " and up to 2^20 heads per token");
  Frequencies f{};
  std::copy(freq.inv_freq.begin(), freq.inv_freq.end(), f.inv_freq);
  f.scale = freq.attention_scale;
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
