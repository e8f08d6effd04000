#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"

#include <cmath>
#include <vector>

namespace pt::ops::cpu {

void rope_rotate(const Tensor& x, const Tensor& position_ids, const RopeFrequencies& freq, int sign,
                 const Tensor& out) {
  const int64_t T = x.size(0), N = x.size(1), D = x.size(2), half = D / 2;
  const int32_t* pos = position_ids.ptr<int32_t>();
  for (int64_t t = 0; t < T; ++t)
    if (pos[t] < 0) fail("rope: position id of token {} is {}; positions must be >= 0", t, pos[t]);
  const double scale = freq.attention_scale;
  dispatch_real("rope", x.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* in = x.ptr<R>();
    R* o = out.ptr<R>();
    parallel_for(T, cpu_threads(), [&](int64_t begin, int64_t end) {
      std::vector<R> cos_t(static_cast<size_t>(half)), sin_t(static_cast<size_t>(half));
      for (int64_t t = begin; t < end; ++t) {
        for (size_t i = 0; i < cos_t.size(); ++i) {
          const double angle = double(pos[t]) * freq.inv_freq[i];
          cos_t[i] = R(std::cos(angle) * scale);
          sin_t[i] = R(double(sign) * std::sin(angle) * scale);
        }
        for (int64_t n = 0; n < N; ++n) {
          const R* a = in + (t * N + n) * D;
          R* b = o + (t * N + n) * D;
          for (int64_t i = 0; i < half; ++i) {
            const R lo = a[i], hi = a[i + half], c = cos_t[static_cast<size_t>(i)],
                    s = sin_t[static_cast<size_t>(i)];
            b[i] = lo * c - hi * s;
            b[i + half] = hi * c + lo * s;
          }
        }
      }
    });
  });
}

}  // namespace pt::ops::cpu
