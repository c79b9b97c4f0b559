#include "comm/backends/mpi/staged_buffers.hpp"

#include <algorithm>
#include <cstring>

namespace cohort::detail::mpi_backend {
namespace {

// Copies MPI may still use: never freed (reachable, so not a leak to
// LeakSanitizer), and never destroyed at exit before MPI_Finalize runs.
void abandon_to_mpi(StagingPool::Bytes bytes) {
  static std::mutex mutex;
  static auto* abandoned = new std::vector<StagingPool::Bytes>;
  std::lock_guard<std::mutex> lock(mutex);
  abandoned->push_back(std::move(bytes));
}

}  // namespace

StagingPool::Bytes StagingPool::take(std::size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto fits = std::find_if(spare_.begin(), spare_.end(),
                                   [bytes](const Bytes& spare) { return spare.capacity >= bytes; });
    if (fits != spare_.end()) {
      Bytes taken = std::move(*fits);
      spare_.erase(fits);
      return taken;
    }
  }
  return {std::make_unique_for_overwrite<unsigned char[]>(std::max<std::size_t>(bytes, 1)), bytes};
}

void StagingPool::give(Bytes bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  spare_.push_back(std::move(bytes));
  if (spare_.size() <= 2) return;
  spare_.erase(std::min_element(spare_.begin(), spare_.end(), [](const Bytes& a, const Bytes& b) {
    return a.capacity < b.capacity;
  }));
}

StagedBuffers::~StagedBuffers() {
  for (Copy& copy : copies_) {
    if (lent_ && !done_) {
      abandon_to_mpi(std::move(copy.bytes));
    } else {
      pool_.give(std::move(copy.bytes));
    }
  }
}

Buffer StagedBuffers::stage(Buffer caller, bool in, bool out) {
  if (!watched_ || caller.data == nullptr) return caller;
  Copy& copy = copies_.emplace_back(Copy{caller, pool_.take(caller.bytes()), out});
  if (in) std::memcpy(copy.bytes.data.get(), caller.data, caller.bytes());
  return {copy.bytes.data.get(), caller.count, caller.type};
}

void StagedBuffers::done() noexcept {
  done_ = true;
  for (const Copy& copy : copies_) {
    if (copy.out) std::memcpy(copy.caller.data, copy.bytes.data.get(), copy.caller.bytes());
  }
}

}  // namespace cohort::detail::mpi_backend
