// Facts about the host for the training log: peak resident memory, and an estimate of the CPU's peak
// fp32 FLOP/s (cores x clock x SIMD lanes x 2 FMA units x 2) used as the MFU denominator on the CPU.
#pragma once

#include <cstdint>

namespace pt {

double peak_host_memory_gib();
// Memory the host can give a process without swapping (MemAvailable of /proc/meminfo), 0 when unknown.
int64_t available_host_memory_bytes();
double cpu_peak_flops_estimate();

}  // namespace pt
