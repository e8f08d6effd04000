#include "train/step_in_backward.h"

#include "core/device.h"
#include "core/error.h"
#include "ops/grad_norm.h"

#include <algorithm>
#include <cmath>

namespace pt {

StepInBackward::Sizes StepInBackward::sizes(const ParameterLayout& layout) {
  Sizes s{.embeddings = layout.layer_begin(0)};
  for (const ParameterLayout::Block& b : layout.blocks())
    if (b.begin > 0) s.block = std::max(s.block, b.end - b.begin);
  return s;
}

StepInBackward::StepInBackward(const ParameterLayout& layout, Device device) : arena_(device) {
  const Sizes s = sizes(layout);
  const int e = arena_.reserve(DType::f32, {s.embeddings});
  const int b = arena_.reserve(DType::f32, {std::max<int64_t>(1, s.block)});
  arena_.allocate();
  embeddings_ = arena_.view(e);
  block_ = arena_.view(b);
}

DecoderModel::GradientBlocks StepInBackward::blocks(dist::DataParallelOptimizer& dp,
                                                    const ops::AdamWConfig& config, int64_t step) {
  outcome_ = {};
  sum_of_squares_ = 0;
  const bool gpu = arena_.device() == Device::cuda;
  return {
      .open =
          [this, &dp, gpu](int64_t begin, int64_t end) {
            // The embeddings' buffer is opened first and closed last: their state is fetched at the close.
            if (begin > 0) dp.prefetch_block(begin, end);
            const Tensor& buffer = begin == 0 ? embeddings_ : block_;
            PT_ASSERT(end - begin <= buffer.numel());
            const Tensor g(buffer.data, DType::f32, {end - begin}, buffer.device);
            zero_bytes(g.data, gpu, static_cast<size_t>(g.bytes()));
            return g;
          },
      .close =
          [this, &dp, config, step](int64_t begin, int64_t end, const Tensor& grads) {
            const double norm = ops::global_norm({&grads, 1});
            sum_of_squares_ += norm * norm;
            outcome_.grad_norm = std::sqrt(sum_of_squares_);
            if (outcome_.bad_block_begin >= 0) return;
            if (!std::isfinite(norm)) {
              outcome_.bad_block_begin = begin;
              return;
            }
            dp.step_block(config, step, begin, end, grads);
            outcome_.updated_some = true;
          },
  };
}

}  // namespace pt
