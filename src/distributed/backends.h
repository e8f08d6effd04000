// The communicator implementations behind make_communicator, each built only when its library is found
// (PACKTRAIN_MPI, PACKTRAIN_NCCL).
#pragma once

#include "distributed/communicator.h"

#include <memory>

namespace pt::dist {

#ifdef PACKTRAIN_MPI
// Initializes MPI on first use (MPI_THREAD_FUNNELED: only the calling thread talks MPI); every
// communicator is a duplicate of MPI_COMM_WORLD. Tensors live on the cpu.
std::unique_ptr<Communicator> make_mpi_communicator(const LaunchInfo& launch, double timeout_s);
#endif

#ifdef PACKTRAIN_NCCL
// Selects this rank's GPU, exchanges the unique id over TCP (rank 0 serves it at MASTER_ADDR:MASTER_PORT;
// a world of one needs none) and initializes a non-blocking NCCL communicator. NVLink SHARP multicast is
// switched off (NCCL_NVLS_ENABLE=0) unless the environment says otherwise.
std::unique_ptr<Communicator> make_nccl_communicator(const LaunchInfo& launch, double timeout_s);
#endif

}  // namespace pt::dist
