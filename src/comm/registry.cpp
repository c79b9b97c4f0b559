#include "comm/registry.hpp"

#include <algorithm>

#include <cohort/config.hpp>
#include <cohort/errors.hpp>

#include "comm/backends/gloo/factory.hpp"
#include "comm/backends/hier/factory.hpp"
#include "comm/backends/mpi/factory.hpp"
#include "comm/backends/self/factory.hpp"
#include "comm/backends/shm/factory.hpp"
#include "comm/kit/host_identity.hpp"
#include "core/strings.hpp"

namespace cohort::detail {

namespace {

// One row per backend: name, priority (higher wins), its factory's two
// functions, whether this build has it. A backend left out of the build
// stays listed, so that asking for it by name says how to build it.
std::vector<BackendEntry> rows() {
  return {
      {"self", 100, self_backend::unviable_because, self_backend::create, true, "a world of one"},
      {"shm", 90, shm_backend::unviable_because, shm_backend::create, COHORT_WITH_SHM,
       "ranks that all run on one host, through shared memory"},
      {"hier", 85, hier_backend::unviable_because, hier_backend::create, COHORT_WITH_HIER,
       "ranks on several hosts that share hosts: shared memory inside, gloo between"},
      {"mpi", 80, mpi_backend::unviable_because, mpi_backend::create, COHORT_WITH_MPI,
       "a job started by this build's MPI launcher, through MPI"},
      {"gloo", 50, gloo_backend::unviable_because, gloo_backend::create, COHORT_WITH_GLOO,
       "any group, over TCP"},
  };
}

}  // namespace

const std::vector<BackendEntry>& backends() {
  static const std::vector<BackendEntry> kBackends = [] {
    std::vector<BackendEntry> sorted = rows();
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.priority > b.priority; });
    return sorted;
  }();
  return kBackends;
}

std::vector<std::pair<std::string_view, std::string>> judge_backends(
    const BackendContext& context) {
  std::vector<std::pair<std::string_view, std::string>> verdicts;
  for (const BackendEntry& entry : backends()) {
    if (entry.built) verdicts.emplace_back(entry.name, entry.unviable_because(context));
  }
  return verdicts;
}

std::string_view choose_backend(const BackendContext& context, std::string_view name) {
  std::vector<std::string> names;
  std::vector<std::string> reasons;
  for (const BackendEntry& entry : backends()) {
    if (entry.built) names.emplace_back(entry.name);
    if (!name.empty() && entry.name != name) continue;
    if (!entry.built && name.empty()) continue;
    const std::string why = entry.unviable_because(context);
    if (why.empty()) return entry.name;
    if (!name.empty()) {
      throw InvalidArgument(cat("backend '", name, "' cannot serve this job: ", why));
    }
    reasons.push_back(cat(entry.name, ": ", why));
  }
  if (!name.empty()) {
    throw InvalidArgument(cat("unknown backend '", name,
                              "' (COHORT_BACKEND); the backends of this "
                              "build are: ",
                              join(names, ", ")));
  }
  throw Error(cat("no backend of this build can serve ", context.info->world_size.value, " ranks (",
                  join(reasons, "; "), ")"));
}

std::unique_ptr<Communicator> create_communicator(const BackendContext& context,
                                                  std::string_view name) {
  BackendContext judged = context;
  const int size = context.info->world_size.value;
  if (judged.hosts.empty() && judged.store && size > 1) {
    judged.hosts =
        exchange_host_identities(*judged.store, context.info->rank.value, size, context.timeout);
  }
  const std::string_view chosen = choose_backend(judged, name);
  for (const BackendEntry& entry : backends()) {
    if (entry.name == chosen) return entry.create(judged);
  }
  throw Error(cat("backend '", chosen, "' vanished from the registry"));  // unreachable
}

}  // namespace cohort::detail

namespace cohort {

std::vector<std::string> compiled_backends() {
  std::vector<std::string> names;
  for (const detail::BackendEntry& entry : detail::backends()) {
    if (entry.built) names.emplace_back(entry.name);
  }
  return names;
}

}  // namespace cohort
