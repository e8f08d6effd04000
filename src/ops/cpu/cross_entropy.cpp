#include "core/parallel.h"
#include "data/packing/batch.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pt::ops::cpu {

CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, double grad_scale,
                                 const Tensor& dlogits, int64_t V) {
  const int64_t T = logits.size(0), ld = logits.size(1);
  const int32_t* target = targets.ptr<int32_t>();
  CrossEntropyResult result;
  for (int64_t t = 0; t < T; ++t) {
    if (target[t] == kIgnoreLabel) continue;
    if (target[t] < 0 || target[t] >= V)
      fail(
          "cross_entropy: target of token {} is {}, outside the vocabulary [0, {}) and not the ignore label "
          "{}",
          t, target[t], V, kIgnoreLabel);
    ++result.tokens;
  }
  // Per-token losses are summed afterwards in token order, so the total is independent of threading.
  std::vector<double> token_loss(static_cast<size_t>(T), 0.0);
  dispatch_real("cross_entropy", logits.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* in = logits.ptr<R>();
    R* grad = dlogits.empty() ? nullptr : dlogits.ptr<R>();
    parallel_for(T, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const R* row = in + t * ld;
        R* grow = grad ? grad + t * ld : nullptr;
        if (grow) std::fill(grow + V, grow + ld, R(0));  // the rows' padding
        if (target[t] == kIgnoreLabel) {
          if (grow) std::fill_n(grow, V, R(0));
          continue;
        }
        const double max = double(*std::max_element(row, row + V));
        double sum = 0;
        for (int64_t j = 0; j < V; ++j) sum += std::exp(double(row[j]) - max);
        const double lse = max + std::log(sum);
        token_loss[static_cast<size_t>(t)] = lse - double(row[target[t]]);
        if (!grow) continue;
        // Reads each logit before overwriting it, so grad may alias the logits.
        for (int64_t j = 0; j < V; ++j) grow[j] = R(std::exp(double(row[j]) - lse) * grad_scale);
        grow[target[t]] -= R(grad_scale);
      }
    });
  });
  for (double l : token_loss) result.loss_sum += l;
  return result;
}

void cross_entropy_accumulate(const Tensor& logits, const Tensor& targets, double grad_scale,
                              const Tensor& dlogits, const Tensor& sums, int64_t V) {
  const CrossEntropyResult r = cross_entropy(logits, targets, grad_scale, dlogits, V);
  double* sum = sums.ptr<double>();
  sum[0] += r.loss_sum;
  sum[1] += double(r.tokens);
}

}  // namespace pt::ops::cpu
