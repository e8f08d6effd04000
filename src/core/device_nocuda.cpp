#include "core/device.h"

namespace pt {

bool built_with_cuda() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_name(int) { return ""; }

}  // namespace pt
