// One group's shared memory, mapped in every rank of the group.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include <cohort/store.hpp>

namespace cohort::detail::shm_backend {

class Segment {
 public:
  /// Collective over `size` ranks. Rank 0 creates an anonymous memfd of
  /// `bytes` (zero-filled) and hands it to every other rank over an abstract
  /// Unix socket whose random name it publishes under "shm/socket" in the
  /// group's store. It admits a connection only from a process of this user
  /// whose pid is `pids[r]` for the rank r it claims; a rank takes the segment
  /// only from `pids[0]`. Every rank maps it and closes its descriptor: the
  /// memory lives while some rank maps it, and has no name anywhere.
  /// Throws Timeout when a rank does not come within `timeout`, Error when
  /// the kernel refuses (naming the call and the limit to raise).
  static Segment share(Store& store, int rank, int size, std::size_t bytes,
                       const std::vector<long>& pids, std::chrono::milliseconds timeout);

  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  unsigned char* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }

 private:
  Segment(unsigned char* data, std::size_t size) noexcept : data_(data), size_(size) {}
  unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace cohort::detail::shm_backend
