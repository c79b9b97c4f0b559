// The backend registry: every backend, its priority and its viability check,
// listed explicitly (no static initialisers). Selection: the name asked for
// (COHORT_BACKEND or an option), else the viable backend of highest priority.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cohort/communicator.hpp>

#include "comm/backend_context.hpp"

namespace cohort::detail {

/// One row of the registry: what every backends/<name>/factory.hpp exports.
struct BackendEntry {
  std::string_view name;
  int priority = 0;  ///< higher wins
  /// Empty when the backend can serve this context, else why not. A backend
  /// left out of the build says so (and how to build it) here.
  std::string (*unviable_because)(const BackendContext& context);
  /// Connects the group: collective over the context's ranks.
  std::unique_ptr<Communicator> (*create)(const BackendContext& context);
  /// Whether this build has it (its COHORT_WITH_<NAME> option).
  bool built = true;
  /// What it serves, for people ("ranks that all run on one host").
  std::string_view serves;
};

/// Every backend, built or not, highest priority first.
const std::vector<BackendEntry>& backends();

/// Every built backend's verdict on `context`, highest priority first: an
/// empty reason when it can serve, else why not. For explaining a choice.
std::vector<std::pair<std::string_view, std::string>> judge_backends(const BackendContext& context);

/// The backend create_communicator would use, without connecting anything.
/// Throws like create_communicator.
std::string_view choose_backend(const BackendContext& context, std::string_view name);

/// The communicator for `context`: backend `name` ("" = the best viable one).
/// Throws InvalidArgument for an unknown name (listing the valid ones) or a
/// backend that cannot serve this context (saying why), and Error when no
/// backend can (saying why each cannot).
std::unique_ptr<Communicator> create_communicator(const BackendContext& context,
                                                  std::string_view name);

}  // namespace cohort::detail
