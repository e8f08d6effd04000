// `packtrain info`: what this build can use.
#include "cli/commands.h"
#include "core/device.h"
#include "core/parallel.h"

#include <fmt/format.h>

namespace pt::cli {

void register_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the build's features and the devices it can use");
  cmd->callback([] {
    fmt::print("packtrain\n  cpu threads: {}\n  cuda in build: {}\n", hardware_threads(),
               built_with_cuda() ? "yes" : "no");
    int n = cuda_device_count();
    fmt::print("  cuda devices: {}\n", n);
    for (int i = 0; i < n; ++i) fmt::print("    {}: {}\n", i, cuda_device_name(i));
  });
}

}  // namespace pt::cli
