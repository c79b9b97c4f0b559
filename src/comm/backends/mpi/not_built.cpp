// The `mpi` backend in a build without it: it says how to get it.
#include <cohort/errors.hpp>

#include "comm/backends/mpi/factory.hpp"

namespace cohort::detail::mpi_backend {
namespace {
constexpr const char* kWhy =
    "this build has no mpi backend: install libopenmpi-dev (scripts/install-deps) and configure "
    "with -DCOHORT_WITH_MPI=ON";
}  // namespace

std::string unviable_because(const BackendContext&) {
  return kWhy;
}

std::unique_ptr<Communicator> create(const BackendContext&) {
  throw Error(kWhy);
}

}  // namespace cohort::detail::mpi_backend
