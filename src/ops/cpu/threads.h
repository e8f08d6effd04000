// How many threads the CPU backend uses (default: every hardware thread). Results never depend on it:
// kernels split work so each output element is computed by one thread in a fixed order.
#pragma once

namespace pt::ops {

int cpu_threads();
void set_cpu_threads(int threads);  // <= 0 restores the default

}  // namespace pt::ops
