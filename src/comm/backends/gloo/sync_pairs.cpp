#include "comm/backends/gloo/sync_pairs.hpp"

#include <algorithm>
#include <utility>

#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

#include "comm/backends/gloo/sync_ring.hpp"

namespace cohort::detail::gloo_backend {
namespace {

// The slot of messages from `from` to `to`: one per direction of a pair, so
// that a rank's buffer for sending and its buffer for receiving on the same
// pair never share one (a Gloo buffer unregisters its slot when destroyed).
// Far above the legacy rings' slots, which Context::nextSlot counts up
// from 0.
constexpr int kFirstSlot = 0x7ff00000;
int slot_of(int from, int to) {
  return kFirstSlot + (from < to ? 0 : 1);
}

// Pieces of a message of `bytes`: at least one, so that an empty message
// still arrives.
std::size_t pieces_of(std::size_t bytes) {
  return std::max<std::size_t>(1, (bytes + kMaxSyncBytes - 1) / kMaxSyncBytes);
}

}  // namespace

SyncPairs::SyncPairs(std::shared_ptr<::gloo::Context> mesh)
    : mesh_(std::move(mesh)),
      warmed_to_(static_cast<std::size_t>(mesh_->size)),
      warmed_from_(static_cast<std::size_t>(mesh_->size)) {}

void SyncPairs::warm_up(int to, int from) {
  const int me = mesh_->rank;
  const bool out = to >= 0 && warmed_to_[static_cast<std::size_t>(to)] == 0;
  const bool in = from >= 0 && warmed_from_[static_cast<std::size_t>(from)] == 0;
  if (!out && !in) return;
  if (!warm_up_) warm_up_ = std::make_unique<unsigned char[]>(kWarmUpBytes);  // zeros
  if (out) {
    // One write, whole: the send buffer Gloo sizes for it takes it at once.
    auto message =
        mesh_->getPair(to)->createSendBuffer(slot_of(me, to), warm_up_.get(), kWarmUpBytes);
    message->send(0, kWarmUpBytes, 0);
    message->waitSend();
    warmed_to_[static_cast<std::size_t>(to)] = 1;
  }
  if (in) {
    auto message =
        mesh_->getPair(from)->createRecvBuffer(slot_of(from, me), warm_up_.get(), kWarmUpBytes);
    message->waitRecv();
    warmed_from_[static_cast<std::size_t>(from)] = 1;
  }
}

void SyncPairs::send(const void* data, std::size_t bytes, int peer) {
  exchange(data, bytes, peer, nullptr, 0, -1);
}

void SyncPairs::recv(void* data, std::size_t bytes, int peer) {
  exchange(nullptr, 0, -1, data, bytes, peer);
}

void SyncPairs::exchange(const void* out, std::size_t out_bytes, int to, void* in,
                         std::size_t in_bytes, int from) {
  warm_up(to, from);
  const int me = mesh_->rank;
  std::unique_ptr<::gloo::transport::Buffer> outgoing, incoming;
  std::size_t pieces_out = 0, pieces_in = 0;
  if (to >= 0) {
    // Gloo reads it only; its buffers take a mutable pointer.
    outgoing =
        mesh_->getPair(to)->createSendBuffer(slot_of(me, to), const_cast<void*>(out), out_bytes);
    pieces_out = pieces_of(out_bytes);
  }
  if (from >= 0) {
    incoming = mesh_->getPair(from)->createRecvBuffer(slot_of(from, me), in, in_bytes);
    pieces_in = pieces_of(in_bytes);
  }
  for (std::size_t piece = 0; piece < std::max(pieces_out, pieces_in); ++piece) {
    const std::size_t offset = piece * kMaxSyncBytes;
    if (piece < pieces_out) {
      outgoing->send(offset, std::min(kMaxSyncBytes, out_bytes - offset), offset);
      outgoing->waitSend();
    }
    if (piece < pieces_in) incoming->waitRecv();
  }
}

}  // namespace cohort::detail::gloo_backend
