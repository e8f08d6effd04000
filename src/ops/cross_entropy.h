// Softmax cross-entropy over a vocabulary, loss and gradient in one pass per row. Targets are already
// aligned with the logits (the model shifts Hugging Face labels); -100 (pt::kIgnoreLabel) ignores a row.
#pragma once

#include "core/tensor.h"

#include <cstdint>

namespace pt::ops {

struct CrossEntropyResult {
  double loss_sum = 0;  // sum of -log p(target) over non-ignored rows
  int64_t tokens = 0;   // non-ignored rows
};

// logits[T,V], targets[T] (i32 in [0, V) or -100). dlogits[T,V] receives (softmax - onehot) * grad_scale
// and zeros on ignored rows; pass grad_scale = 1 / (loss tokens of the whole optimizer step) so gradient
// accumulation over micro-batches equals one large batch. dlogits may be logits itself (overwritten in
// place, no extra [T,V] buffer) or an empty Tensor() for the loss alone. The loss uses a max-subtracted
// log-sum-exp and is summed in token order (deterministic).
// With vocab > 0 the rows may be padded past it (logits[T, >= vocab], as linear_forward writes them for
// an odd vocabulary): the first vocab columns are the classes, the rest are not read as logits and are set
// to 0 in dlogits, so a GEMM over the padded rows adds nothing for them. vocab = 0 takes every column.
CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, double grad_scale,
                                 const Tensor& dlogits, int64_t vocab = 0);

// As cross_entropy, without waiting for the device: adds the sum of -log p(target) and the number of
// non-ignored rows to sums (f64 [2] on the logits' device: {loss_sum, tokens}). The targets must be known
// valid (in [0, V) or -100; the caller checked them on the host): a bad target is not reported here.
void cross_entropy_accumulate(const Tensor& logits, const Tensor& targets, double grad_scale,
                              const Tensor& dlogits, const Tensor& sums, int64_t vocab = 0);

}  // namespace pt::ops
