// Collectives built from point-to-point exchanges, for a backend that has no
// native form of them (or whose native form waits where these do not): a
// ring reduce_scatter (each rank sends (n-1)/n of the input: half of what an
// all-reduce moves), all_gather and all_reduce, a binomial tree broadcast, and direct
// all_to_all, gather and scatter. A backend passes its own Channel: a message path apart from the
// user's send/recv, so that an unreceived user message can never be taken
// for a collective's. Arguments are those the Communicator has checked
// (in-place slices included).
#pragma once

#include <chrono>
#include <cstddef>

#include <cohort/communicator.hpp>

namespace cohort::detail {

/// A backend's internal message path. Messages between two ranks arrive in
/// the order they were sent.
class Channel {
 public:
  using Duration = std::chrono::milliseconds;
  virtual ~Channel() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  /// Sends `send_bytes` from `send` to rank `to` and receives `recv_bytes`
  /// into `recv` from rank `from`, both at once (either may be left out with
  /// a rank of -1), within `timeout`. Throws like the backend's collectives
  /// (PeerLost, Timeout).
  virtual void exchange(const void* send, std::size_t send_bytes, int to, void* recv,
                        std::size_t recv_bytes, int from, Duration timeout) = 0;
};

/// input = size() slices of output.count elements; output may be this
/// rank's slice of input.
void ring_reduce_scatter(Channel& channel, Buffer input, Buffer output, ReduceOp op,
                         Channel::Duration timeout);
/// data summed (or `op`) on every rank: a ring reduce-scatter, then a ring
/// all-gather, of size() parts (their counts differ by one at most); each
/// rank sends 2 (n-1)/n of the data, in 2 (n-1) steps.
void ring_all_reduce(Channel& channel, Buffer data, ReduceOp op, Channel::Duration timeout);
/// output = size() slices of input.count elements; input may be this rank's
/// slice of output. A ring: each rank sends (n-1)/n of the output once.
void ring_all_gather(Channel& channel, Buffer input, Buffer output, Channel::Duration timeout);
/// data from root to every rank down a binomial tree: log2(n) rounds, in
/// each of which every rank that has the data sends it to one that has not.
void tree_broadcast(Channel& channel, Buffer data, int root, Channel::Duration timeout);
/// input and output: size() slices each; they may be the same buffer.
void direct_all_to_all(Channel& channel, Buffer input, Buffer output, Channel::Duration timeout);
/// output (at root): size() slices of input.count; input may be the root's slice.
void direct_gather(Channel& channel, Buffer input, Buffer output, int root,
                   Channel::Duration timeout);
/// input (at root): size() slices of output.count; output may be the root's slice.
void direct_scatter(Channel& channel, Buffer input, Buffer output, int root,
                    Channel::Duration timeout);

}  // namespace cohort::detail
