// 2:4 sparsity on the cpu: the per-block arithmetic is ops/sparse24_common.h, shared with the cuda
// kernels; here are the loops over blocks, groups and elements.
#include "core/float16.h"
#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"
#include "ops/sparse24_common.h"

#include <algorithm>

namespace pt::ops::cpu {

void transposable_mask24(const Tensor& w, const Tensor& mask) {
  const int64_t N = w.size(0), K = w.size(1);
  dispatch_real("transposable_mask24", w.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* wp = w.ptr<R>();
    uint8_t* m = mask.ptr<uint8_t>();
    parallel_for(N / 4, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t br = begin; br < end; ++br)
        for (int64_t k0 = 0; k0 < K; k0 += 4) {
          R block[16];
          for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 4; ++c) block[4 * r + c] = wp[(4 * br + r) * K + k0 + c];
          const unsigned bits = sparse24::best_pattern24(block);
          for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 4; ++c)
              m[(4 * br + r) * K + k0 + c] = static_cast<uint8_t>((bits >> (4 * r + c)) & 1);
        }
    });
  });
}

int64_t mask_flips(const Tensor& a, const Tensor& b) {
  const uint8_t *pa = a.ptr<uint8_t>(), *pb = b.ptr<uint8_t>();
  int64_t flips = 0;
  for (int64_t i = 0, n = a.numel(); i < n; ++i) flips += (pa[i] != 0) != (pb[i] != 0);
  return flips;
}

// Pruned entries become +0 (a select, not a product, so a pruned inf or NaN is gone too).
void apply_mask(const Tensor& w, const Tensor& mask, const Tensor& out) {
  const uint8_t* m = mask.ptr<uint8_t>();
  const int64_t n = w.numel();
  if (out.dtype == DType::bf16) {
    bf16* o = out.ptr<bf16>();
    if (w.dtype == DType::f32) {
      const float* wp = w.ptr<float>();
      for (int64_t i = 0; i < n; ++i) o[i].bits = m[i] ? float_to_bf16(wp[i]) : uint16_t{0};
    } else {
      const bf16* wp = w.ptr<bf16>();
      for (int64_t i = 0; i < n; ++i) o[i].bits = m[i] ? wp[i].bits : uint16_t{0};
    }
    return;
  }
  dispatch_real("apply_mask", w.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* wp = w.ptr<R>();
    R* o = out.ptr<R>();
    for (int64_t i = 0; i < n; ++i) o[i] = m[i] ? wp[i] : R(0);
  });
}

void masked_decay(const Tensor& w, const Tensor& mask, double lambda, const Tensor& grad) {
  dispatch_real("masked_decay", w.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* wp = w.ptr<R>();
    const uint8_t* m = mask.ptr<uint8_t>();
    R* g = grad.ptr<R>();
    const auto l = static_cast<R>(lambda);
    for (int64_t i = 0, n = w.numel(); i < n; ++i)
      if (!m[i]) g[i] += l * wp[i];
  });
}

void mvue24(const Tensor& g, uint64_t seed, const Tensor& out) {
  const int64_t M = g.size(0), N = g.size(1);
  dispatch_real("mvue24", g.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* gp = g.ptr<R>();
    R* o = out.ptr<R>();
    parallel_for((M + 3) / 4, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t q = begin; q < end; ++q) {
        const int rows = static_cast<int>(std::min<int64_t>(4, M - 4 * q));
        for (int64_t n = 0; n < N; ++n) {
          R in[4] = {}, kept[4];
          for (int r = 0; r < rows; ++r) in[r] = gp[(4 * q + r) * N + n];
          sparse24::mvue_group24(in, R(sparse24::mvue_uniform(seed, q, n)), kept);
          for (int r = 0; r < rows; ++r) o[(4 * q + r) * N + n] = kept[r];
        }
      }
    });
  });
}

}  // namespace pt::ops::cpu
