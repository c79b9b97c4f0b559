// The agents' tree (docs/rendezvous.md, "The agents' tree"): on a job of
// many nodes, each agent's relay of the job's store connects to another
// agent's relay, not to the store, so that no process holds more than
// `width` connections from other nodes.
//
// The agents that have a relay (every agent but the one that serves the
// store), in the order of their ids, take the places 1, 2, ... of a heap
// whose place 0 is the store: place p's parent is place (p - 1) / width.
// The store and every relay then have at most `width` children, and a job
// of N nodes is ceil(log_width(N)) hops deep. Pure: the same members give
// every agent the same tree, whatever their arrival.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace cohort::detail {

/// How many relays of other nodes connect to one relay, or to the store,
/// unless the job says otherwise (COHORT_TREE_WIDTH). 32: at 12,500 nodes
/// (100,000 ranks, 8 a node) 3 hops; the 4.4 MB table of 100,000 ranks goes
/// out of a node 32 times, 141 MB (0.11 s at 10 Gb/s); and a process's
/// connections from other nodes stay far under the store's 512 handshake
/// slots and a default `ulimit -n` of 1,024.
inline constexpr int kDefaultTreeWidth = 32;

/// A member of the job's tree: its agent's id, and where its relay listens
/// for the relays under it ("host:port"; "" for the agent that serves the
/// store, or one without a relay).
struct TreeMember {
  int id = 0;
  std::string relay;
};

/// The relays that agent `id` reaches the store through, nearest first:
/// its parent, that one's parent, ..., not the store itself; empty when its
/// parent is the store (or `id` has no relay). `members` in any order.
std::vector<std::string> tree_path(int id, const std::vector<TreeMember>& members, int width);

/// Before the rendezvous, in a job whose node ranks are known from the
/// start: the node rank of agent `id`'s parent, as tree_path() will place
/// it once every agent of nodes 0 .. nnodes - 1 but the store's joined
/// with a relay; `store_node` is the node rank whose agent serves the
/// store, -1 where none does (the launcher). -1 when the parent is the
/// store, or `id` has no relay.
int tree_parent_ahead(int id, int nnodes, int store_node, int width);

/// Agent `id`'s place (1: the first relay) in the tree the rendezvous will
/// name if every agent but the store's (`store_node`, -1: none) joins with a
/// relay; 0 for the store's own agent.
std::size_t tree_place_ahead(int id, int store_node);

/// The places above `place` (1: the first relay), nearest first, without
/// the store's (0).
std::vector<std::size_t> tree_ancestors(std::size_t place, int width);

/// Whether a relay may have others under it in a job of `nnodes` agents:
/// then it listens where other nodes reach it.
bool tree_has_inner_nodes(int nnodes, int width);

}  // namespace cohort::detail
