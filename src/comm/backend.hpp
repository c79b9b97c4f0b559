// What a backend implements: the collectives of one group, on arguments the
// Communicator in front of it has already checked (ranks in range, element
// types and counts consistent, overlaps allowed, timeouts resolved). Calls
// with nothing to move (zero elements) never reach a backend, barrier aside.
// Backends do not queue: the Communicator runs `*_async` operations on its own
// thread, one at a time, so a backend sees one call at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string_view>

#include <cohort/communicator.hpp>

namespace cohort::detail {

class Backend {
 public:
  using Duration = std::chrono::milliseconds;

  virtual ~Backend() = default;

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual std::string_view name() const noexcept = 0;
  virtual Duration default_timeout() const noexcept = 0;

  virtual void all_reduce(Buffer data, ReduceOp op, Duration timeout) = 0;
  virtual void broadcast(Buffer data, int root, Duration timeout) = 0;
  virtual void reduce(Buffer data, ReduceOp op, int root, Duration timeout) = 0;
  /// `input` may be this rank's slice of `output`.
  virtual void all_gather(Buffer input, Buffer output, Duration timeout) = 0;
  /// At the root, `input` may be the root's slice of `output`.
  virtual void gather(Buffer input, Buffer output, int root, Duration timeout) = 0;
  /// At the root, `output` may be the root's slice of `input`.
  virtual void scatter(Buffer input, Buffer output, int root, Duration timeout) = 0;
  /// `output` may be this rank's slice of `input`.
  virtual void reduce_scatter(Buffer input, Buffer output, ReduceOp op, Duration timeout) = 0;
  /// `input` and `output` may be the same buffer.
  virtual void all_to_all(Buffer input, Buffer output, Duration timeout) = 0;
  virtual void barrier(Duration timeout) = 0;
  /// `peer` may be this rank (see LocalMailbox).
  virtual void send(Buffer data, int peer, int tag, Duration timeout) = 0;
  virtual void recv(Buffer data, int peer, int tag, Duration timeout) = 0;

  /// The members of this rank's color, ordered by key then rank; nullptr for
  /// a negative color. Collective.
  virtual std::unique_ptr<Backend> split(int color, int key) = 0;

  /// Communicator::allocate: memory where this backend's collectives work on
  /// buffers fastest, collective where it is shared. By default ordinary
  /// memory (zero-filled, 64-byte aligned), no communication.
  virtual std::shared_ptr<void> allocate(std::size_t bytes, Duration timeout);
};

}  // namespace cohort::detail
