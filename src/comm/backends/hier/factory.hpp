// The `hier` backend, for jobs on several hosts whose ranks share hosts:
// the shm backend inside each host, one leader per host (its lowest rank)
// and a rail per local index, that reduce across hosts over gloo. See
// docs/communicator.md.
#pragma once

#include <memory>
#include <string>

#include <cohort/communicator.hpp>

#include "comm/backend_context.hpp"

namespace cohort::detail::hier_backend {

/// Empty when the ranks span several hosts and at least two share one (by
/// the exchanged host identities, else by the launcher's word); else why not.
std::string unviable_because(const BackendContext& context);

/// Connects, in this order and each collective over its own ranks: the
/// group of every host (shm, or self for a host with one rank), the group
/// of the hosts' leaders (gloo), when every host runs as many ranks the
/// rails (one gloo group per local index, the leaders' being theirs), and
/// a flat gloo group of every rank for the collectives that are not yet
/// hierarchical.
std::unique_ptr<Communicator> create(const BackendContext& context);

}  // namespace cohort::detail::hier_backend
