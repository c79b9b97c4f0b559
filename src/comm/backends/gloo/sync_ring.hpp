// When the gloo backend's legacy rings run on its sync pairs, where the
// calling thread writes and reads the sockets itself (legacy_allreduce.hpp),
// instead of waiting on Gloo's loop thread. No Gloo header: hier, whose
// leaders are a gloo group, chooses its own paths by the same rule.
#pragma once

#include <cstddef>

namespace cohort::detail::gloo_backend {

/// In sync mode a ring step is a blocking write to the right, then a read
/// from the left: the message must fit in what the sockets buffer, or every
/// rank of the ring blocks in its write.
inline constexpr std::size_t kMaxSyncBytes = std::size_t{32} * 1024;

/// What a rank may send in all for a larger message to go round the sync
/// ring in pieces of kMaxSyncBytes (the ring passes every rank's whole
/// buffer on: (ranks - 1) × the message), for the collectives carried as
/// one all_reduce (below). Measured on the namespace cluster
/// (docs/communicator.md, "How the gloo backend avoids Gloo's traps"): 2
/// ranks were faster in pieces up to 1 MiB, 4 ranks at 64 KiB but slower at
/// 256 KiB, 3 ranks slower at 256 KiB.
inline constexpr std::size_t kMaxSyncRingSend = std::size_t{256} * 1024;

/// The same bound for all_reduce itself, 384 KiB since 2026-12-05: 4 ranks'
/// 128 KiB go in pieces. hier's all_reduce of 256 KiB on 4 hosts × 2 ranks
/// runs two rails of 4 ranks at 128 KiB at once, which took 5.1-9.7 ms on
/// the loop thread's ring and 2.4-2.6 ms in pieces; a flat job of 4 ranks
/// at 128 KiB took 1.4-2.8 ms either way.
inline constexpr std::size_t kMaxAllReduceSyncRingSend = std::size_t{384} * 1024;

/// A collective carried as one all_reduce of every rank's whole buffer
/// (all_gather and reduce_scatter: zeros but a rank's own blocks) rides the
/// sync ring only up to this: from 128 KiB two ranks with cores to spare
/// were faster Gloo's way, which sends each block once.
inline constexpr std::size_t kMaxRingSumBytes = std::size_t{64} * 1024;

/// Whether an all_reduce of `bytes` among `ranks` goes round the sync ring,
/// whole or in pieces.
constexpr bool all_reduce_on_sync_ring(std::size_t bytes, std::size_t ranks) noexcept {
  return bytes <= kMaxSyncBytes || (ranks > 1 && bytes * (ranks - 1) <= kMaxAllReduceSyncRingSend);
}

}  // namespace cohort::detail::gloo_backend
