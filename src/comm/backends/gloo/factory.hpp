// The `gloo` backend: collectives over Gloo's TCP transport (Debian's
// libgloo-dev), its ranks found and connected through cohort's store.
#pragma once

#include <memory>
#include <string>

#include <cohort/communicator.hpp>
#include <cohort/store.hpp>

namespace cohort::detail::gloo_backend {

struct Options {
  int rank = 0;
  int size = 1;
  /// Where the ranks of this group publish their addresses: a view no other
  /// group shares.
  std::shared_ptr<Store> store;
  /// The local address peers reach this rank at ("127.0.0.1" on one node).
  std::string address = "127.0.0.1";
  Communicator::Duration timeout{};
};

/// Connects the group: collective, every rank of it calls create together.
/// Throws StoreError / Timeout when the rendezvous fails, PeerLost when a
/// peer vanishes while connecting.
std::unique_ptr<Communicator> create(const Options& options);

}  // namespace cohort::detail::gloo_backend
