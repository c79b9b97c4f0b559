#include "comm/backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace cohort::detail {

std::shared_ptr<void> Backend::allocate(std::size_t bytes, Duration /*timeout*/) {
  // aligned_alloc wants a multiple of the alignment.
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
  void* memory = std::aligned_alloc(64, rounded);
  if (memory == nullptr) throw std::bad_alloc();
  std::memset(memory, 0, rounded);
  return std::shared_ptr<void>(memory, [](void* data) { std::free(data); });
}

}  // namespace cohort::detail
