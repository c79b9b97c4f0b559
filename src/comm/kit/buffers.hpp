// Byte-range facts about collective buffers, shared by the Communicator's
// argument checks and the backends that must copy around an overlap.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cohort/communicator.hpp>

namespace cohort::detail {

/// Whether the bytes of `a` and `b` intersect (never for an empty buffer).
inline bool overlaps(const Buffer& a, const Buffer& b) noexcept {
  const auto a_begin = reinterpret_cast<std::uintptr_t>(a.data);
  const auto b_begin = reinterpret_cast<std::uintptr_t>(b.data);
  return a.bytes() != 0 && b.bytes() != 0 && a_begin < b_begin + b.bytes() &&
         b_begin < a_begin + a.bytes();
}

/// The bytes at `data` as 32-bit integers where they divide evenly, else as
/// bytes: a sum with zeros carries every bit as it was sent (a float sum
/// would turn -0 into +0 and may quiet a NaN).
inline Buffer as_integers(void* data, std::size_t bytes) noexcept {
  return bytes % 4 == 0 ? Buffer{data, bytes / 4, DataType::i32}
                        : Buffer{data, bytes, DataType::u8};
}

}  // namespace cohort::detail
