// A kernel profile of any CUDA process, without nsys: a CUPTI injection library that records every kernel,
// memcpy, memset and CUDA API call, and prints at exit
//   - how busy the GPU was over the process's span of GPU activity,
//   - how long kernels waited between their launch call returning and starting (small: the GPU waits on
//     the CPU, launch-bound; large: work is queued, GPU-bound),
//   - the API calls that took the most host time (synchronous copies and syncs show up here),
//   - the kernels by total time.
// Usage: CUDA_INJECTION64_PATH=build/libpacktrain_cupti_profile.so build/bench_train_gpu --examples 16
//        (PACKTRAIN_PROFILE_TOP=N kernels, default 30). The report goes to stderr.
#include <cupti.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace pt::profile {
namespace {

struct Total {
  double ns = 0;
  int64_t count = 0;
};

struct Records {
  std::mutex mutex;
  std::map<std::string, Total> kernels, apis;
  Total memcpy, memset;
  std::vector<std::pair<uint64_t, uint64_t>> busy;          // [start, end) of every GPU activity
  std::map<uint32_t, uint64_t> api_end;                     // correlation id -> end of its API call
  std::vector<std::pair<uint32_t, uint64_t>> kernel_start;  // correlation id, kernel start
};

Records& records() {
  static Records* r = new Records();  // never destroyed: the report runs at exit
  return *r;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = size_t{8} << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void add(Total& t, uint64_t start, uint64_t end) {
  t.ns += static_cast<double>(end - start);
  ++t.count;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Records& r = records();
  const std::lock_guard lock(r.mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        const uint64_t start = k->start, end = k->end;
        add(r.kernels[k->name ? k->name : "?"], start, end);
        r.busy.emplace_back(start, end);
        r.kernel_start.emplace_back(static_cast<uint32_t>(k->correlationId), start);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        add(r.memcpy, m->start, m->end);
        r.busy.emplace_back(m->start, m->end);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        add(r.memset, m->start, m->end);
        r.busy.emplace_back(m->start, m->end);
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        const bool runtime = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
        const char* name = nullptr;
        cuptiGetCallbackName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid,
                             &name);
        add(r.apis[std::string(runtime ? "runtime " : "driver ") + (name ? name : "?")], a->start, a->end);
        r.api_end[static_cast<uint32_t>(a->correlationId)] = a->end;
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
}

// Largest first, at most `top` of them.
std::vector<std::pair<std::string, Total>> largest(const std::map<std::string, Total>& totals, size_t top) {
  std::vector<std::pair<std::string, Total>> v(totals.begin(), totals.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  if (v.size() > top) v.resize(top);
  return v;
}

void report() {
  cuptiActivityFlushAll(1);
  Records& r = records();
  const std::lock_guard lock(r.mutex);
  if (r.busy.empty()) return;
  std::sort(r.busy.begin(), r.busy.end());
  double busy = 0;
  uint64_t first = r.busy.front().first, last = 0, run_start = r.busy.front().first, run_end = 0;
  for (const auto& [start, end] : r.busy) {  // the union of the intervals
    if (start > run_end && run_end != 0) {
      busy += static_cast<double>(run_end - run_start);
      run_start = start;
    }
    run_end = std::max(run_end, end);
    last = std::max(last, end);
  }
  busy += static_cast<double>(run_end - run_start);
  const double span = static_cast<double>(last - first);
  std::fprintf(stderr,
               "\n[profile] GPU busy %.1f of %.1f ms (%.0f%%); memcpy %.1f ms (%ld), memset %.1f ms (%ld)\n",
               busy / 1e6, span / 1e6, 100 * busy / span, r.memcpy.ns / 1e6,
               static_cast<long>(r.memcpy.count), r.memset.ns / 1e6, static_cast<long>(r.memset.count));

  std::vector<double> waits;  // microseconds from the launch call's return to the kernel's start
  for (const auto& [id, start] : r.kernel_start)
    if (const auto it = r.api_end.find(id); it != r.api_end.end())
      waits.push_back((static_cast<double>(start) - static_cast<double>(it->second)) / 1e3);
  if (!waits.empty()) {
    std::sort(waits.begin(), waits.end());
    const auto at = [&](double q) {
      return waits[static_cast<size_t>(q * static_cast<double>(waits.size() - 1))];
    };
    std::fprintf(stderr,
                 "[profile] launch return -> kernel start, us: p10 %.1f, p50 %.1f, p90 %.1f (small: the GPU "
                 "waits on the CPU)\n",
                 at(0.1), at(0.5), at(0.9));
  }
  for (const auto& [name, t] : largest(r.apis, 12))
    std::fprintf(stderr, "[profile] api %9.2f ms %8ld x %8.1f us  %s\n", t.ns / 1e6,
                 static_cast<long>(t.count), t.ns / 1e3 / static_cast<double>(t.count), name.c_str());
  double kernels = 0;
  for (const auto& [name, t] : r.kernels) kernels += t.ns;
  const char* top = std::getenv("PACKTRAIN_PROFILE_TOP");
  for (const auto& [name, t] : largest(r.kernels, top ? std::strtoul(top, nullptr, 10) : 30))
    std::fprintf(stderr, "[profile] %9.2f ms %5.1f%% %8ld x %8.1f us  %.100s\n", t.ns / 1e6,
                 100 * t.ns / kernels, static_cast<long>(t.count), t.ns / 1e3 / static_cast<double>(t.count),
                 name.c_str());
}

}  // namespace
}  // namespace pt::profile

// Called by the CUDA driver when CUDA_INJECTION64_PATH names this library.
extern "C" int InitializeInjection() {
  using namespace pt::profile;
  cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
        CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER})
    cuptiActivityEnable(kind);
  std::atexit(report);
  return 1;
}
