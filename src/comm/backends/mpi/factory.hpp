// The `mpi` backend: collectives over the MPI library that started the job
// (Debian's libopenmpi-dev; MPICH builds too), one MPI call per collective.
#pragma once

#include <memory>
#include <string>

#include <cohort/communicator.hpp>

#include "comm/backend_context.hpp"

namespace cohort::detail::mpi_backend {

/// Empty when this process was started by the launcher of this build's MPI
/// (Open MPI's mpirun/mpiexec or srun --mpi=pmix; MPICH's mpiexec) and MPI
/// can still be used (not finalized, or initialised by the program with a
/// thread level cohort can work with); else why not.
std::string unviable_because(const BackendContext& context);

/// Initialises MPI when the program has not (MPI_THREAD_MULTIPLE asked,
/// MPI_THREAD_SERIALIZED at least; finalized at exit when cohort initialised
/// it) and duplicates MPI_COMM_WORLD, so the program's own MPI traffic never
/// meets cohort's. Collective over the job's ranks. Throws Error when MPI's
/// world is not the one the launch environment describes.
std::unique_ptr<Communicator> create(const BackendContext& context);

}  // namespace cohort::detail::mpi_backend
