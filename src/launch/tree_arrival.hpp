// The agents' tree where it is not known before the rendezvous (elastic
// jobs, torchrun's c10d form, mpirun's, --rdzv-endpoint under Slurm):
// docs/rendezvous.md, "The agents' tree".
//
// A relay takes the next place of the heap (agent_tree.hpp) as it arrives,
// an ADD at the store, and publishes there where it listens and its name;
// it then moves under the relays of the places above its own, which arrived
// before it and published theirs a round trip after their ADD. So the store
// holds each relay's connection for a few round trips as it arrives, not
// one per node until the rendezvous ends. Arrival order, not agent ids:
// each place's parent is an earlier arrival, so no circle can form, and no
// relay waits for others that come later. Where node ranks (and the node
// that serves the store) are known but hosts are not (torchrun's static
// form), a relay takes the place its node rank gives it instead, the one
// the rendezvous will name, and learns its parent's address the same way.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <cohort/store.hpp>

namespace cohort::detail {

/// The relay at `place` as published: "host\tport\tname"; "" once its agent
/// is gone (its connection's last words).
std::string tree_place_entry(const StoreServer::Hop& relay);
/// The hop an entry names; none (port 0) for "" or anything malformed.
StoreServer::Hop tree_place_hop(const std::string& entry);

/// Where a relay that just arrived goes: its place (1: the first relay),
/// and the relays above it, nearest first, as route_through() takes them;
/// an empty path under the store.
struct TreeArrival {
  std::int64_t place = 0;
  std::vector<StoreServer::Hop> path;
};

/// Publishes `relay` (where it listens, and its name) at `place` of a tree
/// of `width`, or at the next place by arrival where `place` is 0, through
/// `store`, the relay's own agent's connection (the entry is cleared when
/// that connection ends), and reads the places above it: those not
/// published within `patience` are passed over (by arrival, an agent that
/// died between its ADD and its SET; by a place known ahead, also one that
/// starts later), those cleared too. Two or three round trips when every
/// place above is published. Throws what the store throws.
TreeArrival arrive_in_tree(StoreClient& store, const StoreServer::Hop& relay, std::int64_t place,
                           int width, std::chrono::milliseconds patience);

}  // namespace cohort::detail
