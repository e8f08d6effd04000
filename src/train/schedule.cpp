#include "train/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace pt {

double LrSchedule::at(int64_t step) const {
  if (warmup_steps > 0 && step <= warmup_steps)
    return peak * static_cast<double>(step) / static_cast<double>(warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  const double progress =
      std::clamp(static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps), 0.0, 1.0);
  return min_lr + 0.5 * (peak - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace pt
