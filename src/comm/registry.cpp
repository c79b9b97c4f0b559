#include "comm/registry.hpp"

#include <cohort/config.hpp>
#include <cohort/errors.hpp>

#include "comm/backends/self/factory.hpp"
#if COHORT_WITH_GLOO
#include "comm/backends/gloo/factory.hpp"
#endif
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

#if COHORT_WITH_GLOO
std::string gloo_unviable(const BackendContext& context) {
  return context.store ? std::string() : "it needs the job's store to connect the ranks";
}

std::unique_ptr<Communicator> gloo_create(const BackendContext& context) {
  gloo_backend::Options options;
  options.rank = context.info->rank.value;
  options.size = context.info->world_size.value;
  options.store = std::make_shared<PrefixStore>("comm/gloo", context.store);
  options.address = context.address;
  options.timeout = context.timeout;
  return gloo_backend::create(options);
}
#endif

}  // namespace

const std::vector<BackendEntry>& backends() {
  // The order is the priority order: `self` for a world of one, then `gloo`
  // (TCP). A shared-memory backend will rank above gloo for ranks on one node.
  static const std::vector<BackendEntry> kBackends = {
    {"self", 100, self_unviable, self_create},
#if COHORT_WITH_GLOO
    {"gloo", 50, gloo_unviable, gloo_create},
#endif
  };
  return kBackends;
}

std::string_view choose_backend(const BackendContext& context, std::string_view name) {
  std::vector<std::string> names;
  std::vector<std::string> reasons;
  for (const BackendEntry& entry : backends()) {
    names.emplace_back(entry.name);
    if (!name.empty() && entry.name != name) continue;
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
  const std::string_view chosen = choose_backend(context, name);
  for (const BackendEntry& entry : backends()) {
    if (entry.name == chosen) return entry.create(context);
  }
  throw Error(cat("backend '", chosen, "' vanished from the registry"));  // unreachable
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
