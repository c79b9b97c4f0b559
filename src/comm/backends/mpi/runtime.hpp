// MPI's process-wide state as cohort sees it: who initialised MPI, with which
// thread level, and whether calls must be serialised.
#pragma once

#include <mutex>
#include <string>

namespace cohort::detail::mpi_backend {

/// Why MPI cannot serve cohort in this process ("" when it can), without
/// initialising it: finalized already, or initialised by the program below
/// MPI_THREAD_SERIALIZED.
std::string runtime_unusable_because();

/// Initialises MPI unless the program did (asking for MPI_THREAD_MULTIPLE, or
/// MPI_THREAD_SERIALIZED when COHORT_MPI_THREAD_LEVEL=serialized);
/// when cohort initialised it, MPI_Finalize runs at exit (unless the program
/// finalized it first). Throws Error when MPI cannot be initialised or gives
/// less than MPI_THREAD_SERIALIZED.
void ensure_initialised();

/// Held around every MPI call when MPI gave less than MPI_THREAD_MULTIPLE
/// (each communicator's async thread may call MPI); empty otherwise.
std::unique_lock<std::mutex> serialise_calls();

/// "Open MPI 4.1.4", "MPICH 4.0.2": the library this build uses.
std::string library_name();

}  // namespace cohort::detail::mpi_backend
