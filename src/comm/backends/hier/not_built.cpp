// The `hier` backend in a build without it: it says how to get it.
#include <cohort/errors.hpp>

#include "comm/backends/hier/factory.hpp"

namespace cohort::detail::hier_backend {
namespace {
constexpr const char* kWhy =
    "this build has no hier backend: it needs the shm and gloo backends (Linux, libgloo-dev: "
    "scripts/install-deps); configure with -DCOHORT_WITH_HIER=ON";
}  // namespace

std::string unviable_because(const BackendContext&) {
  return kWhy;
}

std::unique_ptr<Communicator> create(const BackendContext&) {
  throw Error(kWhy);
}

}  // namespace cohort::detail::hier_backend
