// copy_bytes: memcpy's result at every distance between the two addresses,
// the short forward ones (its own loop) included.
#include "comm/copy.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace cohort::detail {
namespace {

constexpr std::size_t kPage = 4096;

// A page-aligned place inside `storage`.
unsigned char* page_in(std::vector<unsigned char>& storage) {
  const auto address = reinterpret_cast<std::uintptr_t>(storage.data());
  return storage.data() + ((kPage - address % kPage) % kPage);
}

TEST(CopyBytes, CopiesExactlyTheBytesAtEveryDistanceAndSize) {
  const std::size_t sizes[] = {0, 1, 63, 64, 65, 1023, 1024, 1025, 4096 + 37, 300'000};
  // 1-63 past a page's offset take the vector loop; the rest are memcpy's.
  std::vector<std::size_t> distances;
  for (std::size_t d = 0; d <= 80; ++d)
    distances.push_back(d);
  for (std::size_t d : {4032, 4080, 4095, 4096 + 16})
    distances.push_back(d);
  std::vector<unsigned char> source_storage(300'000 + 2 * kPage);
  unsigned char* source = page_in(source_storage);
  for (std::size_t i = 0; i < 300'000; ++i)
    source[i] = static_cast<unsigned char>(i * 7 + i / 251);
  constexpr std::size_t kGuard = 64;
  // The target a page in, so that `distance` is its offset from the source's.
  std::vector<unsigned char> target_storage(300'000 + 4 * kPage + kGuard);
  for (const std::size_t distance : distances) {
    for (const std::size_t bytes : sizes) {
      std::fill(target_storage.begin(), target_storage.end(), 0xA5);
      unsigned char* target = page_in(target_storage) + kPage + distance;
      copy_bytes(target, source, bytes);
      for (std::size_t i = 0; i < bytes; ++i) {
        ASSERT_EQ(target[i], source[i])
            << "byte " << i << " of " << bytes << ", distance " << distance;
      }
      for (std::size_t i = 1; i <= kGuard; ++i) {
        ASSERT_EQ(*(target - i), 0xA5) << "written before the target, distance " << distance;
        ASSERT_EQ(target[bytes + i - 1], 0xA5)
            << "written past " << bytes << " bytes, distance " << distance;
      }
    }
  }
}

}  // namespace
}  // namespace cohort::detail
