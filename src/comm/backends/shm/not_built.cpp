// The `shm` backend in a build without it: it says how to get it.
#include <cohort/errors.hpp>

#include "comm/backends/shm/factory.hpp"

namespace cohort::detail::shm_backend {
namespace {
constexpr const char* kWhy =
    "this build has no shm backend: it needs Linux (memfd_create, futex); configure with "
    "-DCOHORT_WITH_SHM=ON";
}  // namespace

std::string unviable_because(const BackendContext&) {
  return kWhy;
}

std::unique_ptr<Communicator> create(const BackendContext&) {
  throw Error(kWhy);
}

}  // namespace cohort::detail::shm_backend
