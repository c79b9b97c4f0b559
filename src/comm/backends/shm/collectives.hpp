// The shm backend's collectives, as rounds over a Group (see group.hpp), on
// arguments the Communicator has checked (in-place slices included).
//
// Two protocols for reductions, switched at `small_bytes`:
//   small: one round. Every rank copies its data into its slot, arrives, and
//          reduces all slots itself, in rank order (the same bits everywhere).
//          Latency: one copy in, one synchronisation, one pass over n inputs.
//   large: two rounds per chunk of slot_bytes(). Every rank copies a chunk
//          in; each reduces its 1/n slice of all slots into its slot of the
//          next set (a reduce-scatter, all ranks in parallel); then each copies
//          every rank's reduced slice out (an all-gather). Each rank reads and
//          writes its own data once more than the floor, and the chunks stay
//          in cache.
// The other collectives are one round per chunk: copy in, arrive, copy out.
#pragma once

#include <cstddef>

#include <cohort/communicator.hpp>

#include "comm/backends/shm/group.hpp"

namespace cohort::detail::shm_backend {

/// How the collectives cut their work (the same on every rank of a group).
struct Tuning {
  std::size_t small_bytes = 0;  ///< all_reduce/reduce up to this size: one round
};

void all_reduce(Group& group, const Tuning& tuning, Buffer data, ReduceOp op, const Call& call);
void reduce(Group& group, const Tuning& tuning, Buffer data, ReduceOp op, int root,
            const Call& call);
void broadcast(Group& group, Buffer data, int root, const Call& call);
void all_gather(Group& group, Buffer input, Buffer output, const Call& call);
void gather(Group& group, Buffer input, Buffer output, int root, const Call& call);
void scatter(Group& group, Buffer input, Buffer output, int root, const Call& call);
void reduce_scatter(Group& group, Buffer input, Buffer output, ReduceOp op, const Call& call);
void all_to_all(Group& group, Buffer input, Buffer output, const Call& call);
void barrier(Group& group, const Call& call);

}  // namespace cohort::detail::shm_backend
