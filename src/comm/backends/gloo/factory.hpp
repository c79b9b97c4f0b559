// The `gloo` backend: collectives over Gloo's TCP transport (Debian's
// libgloo-dev), its ranks found and connected through cohort's store.
#pragma once

#include <memory>
#include <string>

#include <cohort/communicator.hpp>

#include "comm/backend_context.hpp"

namespace cohort::detail::gloo_backend {

/// Empty when the context has a store (the ranks meet there); else why not.
std::string unviable_because(const BackendContext& context);

/// Connects the group: collective, every rank of it calls create together
/// with a store view of its own. Throws StoreError / Timeout when the
/// rendezvous fails, PeerLost when a peer vanishes while connecting.
std::unique_ptr<Communicator> create(const BackendContext& context);

}  // namespace cohort::detail::gloo_backend
