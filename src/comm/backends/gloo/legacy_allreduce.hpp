// Small and medium all_reduces on Gloo's legacy AllreduceRing, built once per
// (type, op, count) and reused.
//
// Why: Gloo's new-style collectives (gloo::allreduce, what PyTorch uses) hand
// every message between the calling thread and the device-loop thread, which
// spins on a try_lock; with few cores that stalls operations for a scheduler
// tick (about 4 ms), so PyTorch's gloo all_reduce takes milliseconds at any
// size up to a few MiB. The legacy ring registers its buffers with the peers
// once, at construction, and touches the caller's buffer only while it runs
// (it sends from an outbox of its own), so one ring serves any buffer of its
// size:
//   - up to kMaxSyncBytes (sync_ring.hpp), on pairs in sync mode: the calling thread writes
//     and reads the sockets itself, tens of microseconds;
//   - larger, while each rank sends at most kMaxAllReduceSyncRingSend in all
//     ((ranks - 1) × the message: the ring passes every rank's whole
//     buffer on), in pieces of kMaxSyncBytes on the sync pairs, one after
//     another;
//   - else up to kMaxBytes, on pairs served by the loop thread.
// (Gloo's AllreduceHalvingDoubling, tried for the middle range, took 50 ms
// per operation at 256 KiB with 4 ranks.) The rings run on full meshes of
// their own: a legacy message that arrives before its buffer is registered
// blocks its pair, and would block new-style operations queued behind it.
//
// Constructing an algorithm is collective, so the cache is used only where
// every rank makes the same decisions: the key is the same on every rank (the
// collective's arguments must agree anyway), and the least-recently-used entry
// is evicted deterministically.
#pragma once

#include <cstddef>
#include <list>
#include <memory>

#include <gloo/context.h>

#include <cohort/communicator.hpp>

#include "comm/backends/gloo/sync_ring.hpp"

namespace cohort::detail::gloo_backend {

class LegacyAllreduce {
 public:
  /// Above this, Gloo's new-style allreduce is as fast (bandwidth bound).
  static constexpr std::size_t kMaxBytes = std::size_t{1024} * 1024;

  /// `sync_mesh`: pairs in sync mode; `loop_mesh`: pairs served by the
  /// device loop. Both connected with the default timeout, which
  /// every operation here waits on.
  LegacyAllreduce(std::shared_ptr<::gloo::Context> sync_mesh,
                  std::shared_ptr<::gloo::Context> loop_mesh, std::size_t max_entries);
  ~LegacyAllreduce();
  LegacyAllreduce(const LegacyAllreduce&) = delete;
  LegacyAllreduce& operator=(const LegacyAllreduce&) = delete;

  /// In-place all_reduce of `data`, at most kMaxBytes (avg
  /// sums; the caller divides). Collective. Throws gloo exceptions.
  void run(Buffer data, ReduceOp op);

  /// Drops every algorithm and both meshes: before the device goes. Unusable
  /// afterwards.
  void release() noexcept;

 private:
  struct Entry;
  // One ring for the whole of `data` (sums for avg).
  void run_whole(Buffer data, ReduceOp op);
  // Whether a message of `bytes` goes round the sync ring in pieces.
  bool in_pieces(std::size_t bytes) const noexcept;
  std::shared_ptr<::gloo::Context> sync_mesh_;
  std::shared_ptr<::gloo::Context> loop_mesh_;
  std::size_t max_entries_;
  std::list<Entry> entries_;  // most recently used first
};

}  // namespace cohort::detail::gloo_backend
