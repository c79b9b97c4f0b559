// The `shm` backend: collectives through one shared-memory segment per group,
// for groups whose ranks all run on this host (same kernel boot, same network
// namespace). The segment is an anonymous memfd handed from rank 0 to the
// others over an abstract Unix socket that admits only this user's processes
// the store names as the group's ranks: nothing in /dev/shm, nothing another
// user can open, nothing a crash can leave behind. See docs/communicator.md.
#pragma once

#include <memory>
#include <string>

#include <cohort/communicator.hpp>

#include "comm/backend_context.hpp"

namespace cohort::detail::shm_backend {

/// Empty when every rank runs on this host: by the exchanged host identities
/// when the context has them, else by the launcher's word (one node, or as
/// many local ranks as ranks); else why not.
std::string unviable_because(const BackendContext& context);

/// Connects the group: collective over the context's ranks, through the
/// store. Throws Error when a rank turns out to run elsewhere, StoreError /
/// Timeout when the rendezvous fails.
std::unique_ptr<Communicator> create(const BackendContext& context);

}  // namespace cohort::detail::shm_backend
