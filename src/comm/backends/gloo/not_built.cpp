// The `gloo` backend in a build without it: it says how to get it.
#include <cohort/errors.hpp>

#include "comm/backends/gloo/factory.hpp"

namespace cohort::detail::gloo_backend {
namespace {
constexpr const char* kWhy =
    "this build has no gloo backend: install libgloo-dev (scripts/install-deps) and configure "
    "with -DCOHORT_WITH_GLOO=ON";
}  // namespace

std::string unviable_because(const BackendContext&) {
  return kWhy;
}

std::unique_ptr<Communicator> create(const BackendContext&) {
  throw Error(kWhy);
}

}  // namespace cohort::detail::gloo_backend
