// Point-to-point messages on the gloo backend's sync pairs (the legacy
// rings' mesh, legacy_allreduce.hpp), where the calling thread writes and
// reads the socket itself: those of the kit's collectives in every gloo
// group, and every message of the groups whose owner knows each one's size
// on both sides and orders them (hier's leaders, rails and flat group:
// BackendContext::messages_sized_by_owner).
//
// Why: a message on Gloo's unbound buffers passes through the device-loop
// thread, which spins (epoll_wait, then a try_lock on the pair that fails)
// while the calling thread needs the core, and on few cores that spin
// holds it for a scheduler slice: hier's gather of 128 KiB across 2 namespace nodes
// × 2 ranks took 2.0 ms an operation in most jobs, against 0.09 ms for a
// flat gloo gather between the 2 leaders alone (2026-12-08).
//
// Gloo sizes a socket's send buffer (SO_SNDBUF, which the kernel then stops
// tuning) to the largest message sent on it so far. A buffer sized by a
// message of 16 KiB holds a piece of 32 KiB with its preamble only in part,
// and on loopback, where a piece is one segment that the receiver, still
// writing its own, does not read, the rest waited for a delayed ACK: hier's
// all_to_all of 256 KiB on 2 × 2 took 88 ms after one of 64 KiB. So the
// first message each way between two ranks is kWarmUpBytes that size the
// sender's buffer past what a piece needs (the receiver drops it); it is
// written whole before its sender reads, so it must fit in the socket's
// buffers: the kernel allows up to net.core.wmem_max (Debian: 208 KiB).
//
// A message goes in pieces of kMaxSyncBytes, straight from the sender's
// buffer into the receiver's (Gloo buffers made over them for the call),
// each piece a blocking write and, on the other side, a blocking read. So
// both sides must agree on the order and size of their messages, and a
// send returns once its last piece is in the socket, not once it is read:
// two ranks that both send more than their sockets buffer before either
// receives block each other, which exchange() avoids for rings.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include <gloo/context.h>

namespace cohort::detail::gloo_backend {

class SyncPairs {
 public:
  /// `mesh`: pairs in sync mode, shared with the legacy rings; their
  /// timeout (SO_RCVTIMEO, SO_SNDTIMEO) bounds every piece.
  explicit SyncPairs(std::shared_ptr<::gloo::Context> mesh);

  /// `bytes` of `data` to `peer`; gloo's exceptions pass through.
  void send(const void* data, std::size_t bytes, int peer);
  /// `bytes` from `peer` into `data`, which must be what it sent.
  void recv(void* data, std::size_t bytes, int peer);
  /// A piece to `to`, then a piece from `from`, until both messages are
  /// done (-1: none that way): every rank of a ring doing this at once has
  /// at most a piece unread on each pair, which its socket holds, so none
  /// blocks in a write.
  void exchange(const void* out, std::size_t out_bytes, int to, void* in, std::size_t in_bytes,
                int from);

  /// Drops the mesh (its pairs close once the rings let go too).
  void release() noexcept { mesh_.reset(); }

  static constexpr std::size_t kWarmUpBytes = std::size_t{128} << 10;

 private:
  // The first message to `to` and from `from` where none went that way yet.
  void warm_up(int to, int from);

  std::shared_ptr<::gloo::Context> mesh_;
  std::vector<char> warmed_to_, warmed_from_;  // per peer: its first message went
  std::unique_ptr<unsigned char[]> warm_up_;   // kWarmUpBytes, sent and received into
};

}  // namespace cohort::detail::gloo_backend
