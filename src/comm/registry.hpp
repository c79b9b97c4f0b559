// The backend registry: every backend, its priority and its viability check,
// listed explicitly (no static initialisers). Selection: the name asked for
// (COHORT_BACKEND or an option), else the viable backend of highest priority.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <cohort/communicator.hpp>
#include <cohort/launch_env.hpp>
#include <cohort/store.hpp>

namespace cohort::detail {

/// What a backend needs to connect a group.
struct BackendContext {
  const LaunchInfo* info = nullptr;
  std::chrono::milliseconds timeout{};
  /// The job's store, through which ranks exchange addresses (may be null
  /// for a world of one).
  std::shared_ptr<Store> store;
  /// This rank's address for peers to connect to.
  std::string address = "127.0.0.1";
};

struct BackendEntry {
  std::string_view name;
  int priority = 0;  ///< higher wins
  /// Empty when the backend can serve this context, else why not.
  std::string (*unviable_because)(const BackendContext& context);
  std::unique_ptr<Communicator> (*create)(const BackendContext& context);
};

/// Every backend compiled in, in priority order.
const std::vector<BackendEntry>& backends();

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
