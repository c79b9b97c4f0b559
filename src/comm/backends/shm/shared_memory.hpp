// Memory that every rank of a group maps (Communicator::allocate), so that a
// collective on it reads and writes peers' buffers with plain loads and
// stores: no copy through the segment, no system call.
//
// One allocation is one anonymous memfd (Segment::share) of `size` equal
// parts, page-aligned; rank r's memory is part r. Allocations are numbered
// in call order, the same on every rank, so a rank tells its peers where its
// buffer is by (allocation, offset) in one word (Group::exchange).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <cohort/store.hpp>

#include "comm/backends/shm/segment.hpp"

namespace cohort::detail::shm_backend {

class SharedMemory {
 public:
  /// Collective over the group (`rank` of `size`, processes `pids`): `bytes`
  /// of zero-filled memory, 64-byte aligned, in this rank's part of a new
  /// allocation. It stays mapped while the returned pointer lives, and every
  /// rank keeps the peers' parts mapped for as long as its own. InvalidArgument
  /// when ranks ask for different sizes; Timeout, Error as Segment::share.
  std::shared_ptr<void> allocate(const std::shared_ptr<Store>& store, int rank, int size,
                                 std::size_t bytes, const std::vector<long>& pids,
                                 std::chrono::milliseconds timeout);

  /// Whether the group ever allocated (the same answer on every rank, so
  /// every rank takes or skips the round that compares places).
  bool any() const noexcept { return made_ > 0; }

  /// Where a buffer is, for its peers: one word, 0 when [data, data + bytes)
  /// is not inside this rank's part of an allocation that is still alive.
  /// `keep` then holds that allocation mapped while the peers use it.
  std::uint64_t place_of(const void* data, std::size_t bytes, std::shared_ptr<void>& keep) const;

  /// The address, in this rank's mapping, of the buffer that `rank` placed
  /// at `place` (place_of on that rank, non-zero), within the allocation
  /// that this rank placed its own buffer in (`keep` of place_of).
  static unsigned char* address(const std::shared_ptr<void>& keep, int rank, std::uint64_t place);
  /// Which allocation a place is in.
  static std::uint64_t allocation_of(std::uint64_t place) noexcept;

  struct Allocation;

 private:
  std::vector<std::weak_ptr<Allocation>> allocations_;  // the live ones among them
  std::uint64_t made_ = 0;
};

}  // namespace cohort::detail::shm_backend
