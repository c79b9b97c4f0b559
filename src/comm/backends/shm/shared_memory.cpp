#include "comm/backends/shm/shared_memory.hpp"

#include <algorithm>

#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail::shm_backend {
namespace {

// A place is (allocation number + 1) in the high 24 bits and the offset into
// the rank's part (up to 1 TiB) in the low 40: 0 is "in none". Numbers count
// modulo 2^24 - 1: two live allocations would share one only 16 million
// allocations apart.
constexpr int kOffsetBits = 40;
constexpr std::uint64_t kOffsetMask = (std::uint64_t{1} << kOffsetBits) - 1;
constexpr std::uint64_t kNumbers = (std::uint64_t{1} << (64 - kOffsetBits)) - 1;

std::size_t page_rounded(std::size_t bytes) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (std::max<std::size_t>(bytes, 1) + page - 1) / page * page;
}

}  // namespace

struct SharedMemory::Allocation {
  Segment segment;
  std::size_t part = 0;  // bytes of each rank's part
  std::size_t bytes = 0;
  int rank = 0;
  std::uint64_t number = 0;
  unsigned char* part_of(int r) const {
    return segment.data() + static_cast<std::size_t>(r) * part;
  }
};

std::shared_ptr<void> SharedMemory::allocate(const std::shared_ptr<Store>& store, int rank,
                                             int size, std::size_t bytes,
                                             const std::vector<long>& pids,
                                             std::chrono::milliseconds timeout) {
  const std::uint64_t number = made_++ % kNumbers;
  PrefixStore shared(cat("shm/allocation/", number), store);
  if (size == 1) {
    // A group of one may have no store: no one to meet.
  } else if (rank == 0) {
    shared.set("bytes", std::to_string(bytes));
  } else {
    const std::string first = shared.get("bytes", timeout);
    if (first != std::to_string(bytes)) {
      throw InvalidArgument(cat("allocate: rank ", rank, " asked for ", bytes,
                                " bytes and rank 0 for ", first,
                                ": every rank of the communicator must ask for the same size"));
    }
  }
  const std::size_t part = page_rounded(bytes);
  if (part > kOffsetMask) {
    throw InvalidArgument(cat("allocate: ", bytes, " bytes is more than shm can place"));
  }
  auto allocation = std::make_shared<Allocation>(Allocation{
      Segment::share(shared, rank, size, part * static_cast<std::size_t>(size), pids, timeout),
      part, bytes, rank, number});
  if (size > 1 && rank == 0) {
    // Every rank has read both keys once it took the memory from rank 0.
    shared.delete_key("bytes");
    shared.delete_key("shm/socket");
  }
  std::erase_if(allocations_, [](const std::weak_ptr<Allocation>& old) { return old.expired(); });
  allocations_.push_back(allocation);
  unsigned char* mine = allocation->part_of(rank);
  return std::shared_ptr<void>(std::move(allocation), mine);
}

std::uint64_t SharedMemory::place_of(const void* data, std::size_t bytes,
                                     std::shared_ptr<void>& keep) const {
  const auto* begin = static_cast<const unsigned char*>(data);
  for (const std::weak_ptr<Allocation>& weak : allocations_) {
    std::shared_ptr<Allocation> allocation = weak.lock();
    if (!allocation) continue;
    const unsigned char* part = allocation->part_of(allocation->rank);
    if (begin < part || begin + bytes > part + allocation->bytes) continue;
    const auto offset = static_cast<std::uint64_t>(begin - part);
    keep = allocation;
    return ((allocation->number + 1) << kOffsetBits) | offset;
  }
  return 0;
}

unsigned char* SharedMemory::address(const std::shared_ptr<void>& keep, int rank,
                                     std::uint64_t place) {
  const auto* allocation = static_cast<const Allocation*>(keep.get());
  return allocation->part_of(rank) + (place & kOffsetMask);
}

std::uint64_t SharedMemory::allocation_of(std::uint64_t place) noexcept {
  return place >> kOffsetBits;
}

}  // namespace cohort::detail::shm_backend
