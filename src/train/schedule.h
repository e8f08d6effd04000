// Learning-rate schedule: linear warmup to the peak, then cosine decay to min_lr at the last step.
#pragma once

#include <cstdint>

namespace pt {

struct LrSchedule {
  double peak = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  // lr for the optimizer step `step` (1-based, like AdamW's step count).
  double at(int64_t step) const;
};

}  // namespace pt
