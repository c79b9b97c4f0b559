#include "comm/registry.hpp"

#include <cohort/errors.hpp>

#include "comm/backends/self/factory.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

std::string self_unviable(const BackendContext& context) {
  const int size = context.info->world_size.value;
  return size == 1 ? std::string() : cat("it serves a world of one, this one has ", size, " ranks");
}

std::unique_ptr<Communicator> self_create(const BackendContext& context) {
  return self_backend::create(context.timeout);
}

}  // namespace

const std::vector<BackendEntry>& backends() {
  // The order is the priority order. `gloo` (TCP) joins with the next step;
  // a shared-memory backend will rank above it for ranks on one node.
  static const std::vector<BackendEntry> kBackends = {
      {"self", 100, self_unviable, self_create},
  };
  return kBackends;
}

std::unique_ptr<Communicator> create_communicator(const BackendContext& context,
                                                  std::string_view name) {
  std::vector<std::string> names;
  std::vector<std::string> reasons;
  for (const BackendEntry& entry : backends()) {
    names.emplace_back(entry.name);
    if (!name.empty() && entry.name != name) continue;
    const std::string why = entry.unviable_because(context);
    if (why.empty()) return entry.create(context);
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

}  // namespace cohort::detail

namespace cohort {

std::vector<std::string> compiled_backends() {
  std::vector<std::string> names;
  for (const detail::BackendEntry& entry : detail::backends())
    names.emplace_back(entry.name);
  return names;
}

}  // namespace cohort
