#include "core/host.h"

#include "core/parallel.h"

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace pt {

double peak_host_memory_gib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is in KiB on Linux
}

int64_t available_host_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);)
    if (line.rfind("MemAvailable:", 0) == 0) return std::stoll(line.substr(line.find(':') + 1)) * 1024;  // kB
  return 0;
}

double cpu_peak_flops_estimate() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  double mhz = 0;
  bool avx512 = false;
  for (std::string line; std::getline(cpuinfo, line);) {
    if (mhz == 0 && line.rfind("cpu MHz", 0) == 0) mhz = std::stod(line.substr(line.find(':') + 1));
    if (line.rfind("flags", 0) == 0 && line.find(" avx512f") != std::string::npos) avx512 = true;
  }
  if (mhz == 0) return 0;
  const double lanes = avx512 ? 16 : 8;
  return hardware_threads() * mhz * 1e6 * lanes * 2 /*FMA units*/ * 2 /*FLOPs per FMA*/;
}

}  // namespace pt
