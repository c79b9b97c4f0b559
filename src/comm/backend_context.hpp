// What a backend is given to connect a group: who this rank is, the job's
// store and an address. Every backends/<name>/factory.hpp takes it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <cohort/launch_env.hpp>
#include <cohort/store.hpp>

namespace cohort::detail {

struct BackendContext {
  const LaunchInfo* info = nullptr;
  /// The default bound of every call of the communicator made.
  std::chrono::milliseconds timeout{};
  /// The job's store, through which ranks exchange addresses: a view no
  /// other group shares (may be null for a world of one, and for backends
  /// that bring their own rendezvous).
  std::shared_ptr<Store> store;
  /// This rank's address for peers to connect to.
  std::string address = "127.0.0.1";
  /// Every rank's host identity (kit/host_identity.hpp), indexed by rank:
  /// exchanged through the store by create_communicator before it chooses,
  /// so that every rank judges on the same facts. Empty where nothing was
  /// exchanged (choosing without connecting: `cohort env`, World::backend);
  /// a backend then goes by the launcher's word.
  std::vector<std::string> hosts;
  /// How many of the job's ranks run on this machine's CPUs when that is
  /// more than this group's own (0: the group's size): hier's host group on
  /// hosts that are namespaces or containers of one machine.
  int machine_ranks = 0;
  /// The group's point-to-point messages are its owner's own, of sizes both
  /// sides know by construction and in an order both sides follow, never
  /// two ranks each sending more than their sockets hold before either
  /// receives (hier's leaders, rails and flat group): gloo sends them
  /// without the header that lets a recv check a message's size
  /// (gloo/sized_messages.hpp), and on its sync pairs, the calling thread
  /// writing and reading the sockets (gloo/sync_pairs.hpp), where Gloo's
  /// loop thread cost hier's collectives across hosts a scheduler slice
  /// (2-4 ms) a message on few cores.
  bool messages_sized_by_owner = false;
};

}  // namespace cohort::detail
