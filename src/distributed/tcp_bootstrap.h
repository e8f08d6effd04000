// Rank 0 hands a small blob (the NCCL unique id) to every other rank over TCP, for launches without MPI:
// it listens on MASTER_PORT, every other rank connects to MASTER_ADDR:MASTER_PORT (retrying until rank 0
// is up), says who it is, and receives the blob. Everything is bounded by a timeout whose error names the
// ranks that never connected (on rank 0) or the address that could not be reached (on the others).
#pragma once

#include "distributed/launch.h"

#include <cstdint>
#include <span>
#include <vector>

namespace pt::dist {

// On rank 0 `blob` is sent and returned; elsewhere it is ignored and the received blob is returned. An
// unset MASTER_ADDR means 127.0.0.1 (one host).
std::vector<uint8_t> tcp_broadcast_blob(const LaunchInfo& launch, std::span<const uint8_t> blob,
                                        double timeout_s);

}  // namespace pt::dist
