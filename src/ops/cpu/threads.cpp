#include "ops/cpu/threads.h"

#include "core/parallel.h"

#include <atomic>

namespace pt::ops {

namespace {
std::atomic<int> configured{0};
}

int cpu_threads() {
  int n = configured.load(std::memory_order_relaxed);
  return n > 0 ? n : hardware_threads();
}

void set_cpu_threads(int threads) { configured.store(threads > 0 ? threads : 0, std::memory_order_relaxed); }

}  // namespace pt::ops
