#include "comm/copy.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace cohort::detail {
namespace {

// `to` just past `from` modulo a page: where rep movsb crawls.
bool short_forward_distance(const void* to, const void* from) noexcept {
  const std::uintptr_t distance =
      (reinterpret_cast<std::uintptr_t>(to) - reinterpret_cast<std::uintptr_t>(from)) & 4095;
  return distance != 0 && distance < 64;
}

}  // namespace

void copy_bytes(void* to, const void* from, std::size_t bytes) noexcept {
#if defined(__x86_64__)
  // Below 1 KiB glibc copies with vector moves already.
  if (bytes >= 1024 && short_forward_distance(to, from)) {
    auto* out = static_cast<unsigned char*>(to);
    const auto* in = static_cast<const unsigned char*>(from);
    std::size_t done = 0;
    for (; done + 64 <= bytes; done += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done + 48));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + done), a);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + done + 16), b);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + done + 32), c);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + done + 48), d);
    }
    std::memcpy(out + done, in + done, bytes - done);
    return;
  }
#endif
  std::memcpy(to, from, bytes);
}

}  // namespace cohort::detail
