// The shm backend's collectives, as rounds over a Group (see group.hpp), on
// arguments the Communicator has checked (in-place slices included).
//
// Four protocols for all_reduce (reduce takes them all, with its own bound
// for the first, and writes each slice into the root alone), chosen by
// size (Tuning) and where the buffers are:
//   small: one round. Every rank copies its data into its slot, arrives, and
//          reduces all slots itself, in rank order (the same bits everywhere).
//          Latency: one copy in, one synchronisation, one pass over n inputs.
//   large: two rounds per chunk of slot_bytes(). Every rank copies a chunk
//          in; each reduces its 1/n slice of all slots into its slot of the
//          next set (a reduce-scatter, all ranks in parallel), and its own
//          slice into its buffer a block at a time, while it is in L1; then
//          each copies the others' reduced slices out (an all-gather). Each
//          rank reads and writes its own data once more than the floor, and
//          the chunks stay in cache.
//   single copies: one round to say where each rank's buffer is; each rank
//          reduces its 1/n slice of every buffer, cut on cache lines, a
//          piece at a time: it reads the peers' pieces straight from their
//          memory into scratch in cache (process_vm_readv), reduces them with
//          its own into its buffer, and writes the result straight into
//          every peer's buffer (process_vm_writev) while it is still in
//          cache; a last round waits until every slice is written.
//   shared memory: the same, when every rank's buffer is in one allocation
//          that every rank maps (Group::memory, Communicator::allocate), at
//          any size (Tuning::shared_memory), with loads and stores instead
//          of the kernel's copies. Otherwise, after the first round, the
//          protocols above.
// The other collectives are one round per chunk: copy in, arrive, copy out;
// or in single copies, between a round that publishes where each rank's
// buffer is and one that keeps them still until every peer has read them:
// all_gather reads every peer's input straight into the output, gather's
// ranks write theirs into the root's output (all at once, where the root
// reading them would copy one after another), broadcast and scatter read the
// root's data, all_to_all every peer's block for this rank, reduce_scatter
// every peer's slice for this rank (a piece at a time into scratch, as
// all_reduce does) and reduces it into the output.
// When every rank's published buffer is in one allocation of the group's
// shared memory, they read it so, with loads instead of the kernel's copies
// (reduce_scatter straight from the peers' slices), in the sizes of
// Tuning::shared_memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cohort/communicator.hpp>

#include "comm/backends/shm/group.hpp"

namespace cohort::detail::shm_backend {

/// Sizes between which a collective takes single copies, in bytes of each
/// rank's block: all_reduce and broadcast the buffer, all_gather/gather the
/// input, scatter/reduce_scatter the output, all_to_all one of the n blocks.
struct Window {
  std::size_t min = SIZE_MAX;  ///< SIZE_MAX: never
  std::size_t max = SIZE_MAX;
  bool contains(std::size_t bytes) const noexcept {
    return min != SIZE_MAX && bytes >= min && bytes <= max;
  }
};

/// How the collectives cut their work (the same on every rank of a group).
struct Tuning {
  std::size_t small_bytes = 0;  ///< all_reduce up to this size: one round
  /// reduce up to this size (or small_bytes, the larger): one round, in
  /// which only the root reduces
  std::size_t reduce_small_bytes = 0;
  /// broadcast's rounds carry at most this many bytes each (0: a whole slot),
  /// so that a round's piece of the slot and of a rank's buffer fit in one
  /// core's L2 cache together.
  std::size_t broadcast_chunk_bytes = 0;
  /// broadcast up to this size (at most Group::kMaxPostBytes) goes through
  /// the posts (Group::post), not the rounds (0: never).
  std::size_t posted_broadcast_bytes = 0;
  /// A window per collective that has one.
  struct Windows {
    Window all_reduce, broadcast, gather, all_gather, scatter, reduce_scatter, all_to_all;
  };
  /// Single copies, when the group has them (Group::single_copy).
  Windows single_copies;
  /// Buffers in shared memory, when every rank's is in one allocation
  /// (Group::memory); outside these windows they take the protocols above.
  Windows shared_memory;
};

void all_reduce(Group& group, const Tuning& tuning, Buffer data, ReduceOp op, const Call& call);
void reduce(Group& group, const Tuning& tuning, Buffer data, ReduceOp op, int root,
            const Call& call);
void broadcast(Group& group, const Tuning& tuning, Buffer data, int root, const Call& call);
void all_gather(Group& group, const Tuning& tuning, Buffer input, Buffer output, const Call& call);
void gather(Group& group, const Tuning& tuning, Buffer input, Buffer output, int root,
            const Call& call);
void scatter(Group& group, const Tuning& tuning, Buffer input, Buffer output, int root,
             const Call& call);
void reduce_scatter(Group& group, const Tuning& tuning, Buffer input, Buffer output, ReduceOp op,
                    const Call& call);
void all_to_all(Group& group, const Tuning& tuning, Buffer input, Buffer output, const Call& call);
void barrier(Group& group, const Call& call);

}  // namespace cohort::detail::shm_backend
