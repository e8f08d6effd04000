// Facts about the host for the training log: peak resident memory, and an estimate of the CPU's peak
// fp32 FLOP/s (cores x clock x SIMD lanes x 2 FMA units x 2) used as the MFU denominator on the CPU.
#pragma once

namespace pt {

double peak_host_memory_gib();
double cpu_peak_flops_estimate();

}  // namespace pt
