// Which accelerators this process can use. Built from device.cu when CUDA is part of the build, from
// device_nocuda.cpp otherwise; GPU tests skip themselves when cuda_device_count() is 0.
#pragma once

#include <string>

namespace pt {

bool built_with_cuda();
int cuda_device_count();              // 0 without CUDA, a driver or a GPU
std::string cuda_device_name(int i);  // "" when unavailable

}  // namespace pt
