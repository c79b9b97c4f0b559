#include "env/master_port.hpp"

#include "core/strings.hpp"

namespace cohort::detail {

int derive_port(std::string_view job_id, std::uint64_t step) noexcept {
  std::uint64_t job = 0;
  if (auto number = parse_int(job_id); number && *number >= 0) {
    job = static_cast<std::uint64_t>(*number);
  } else {
    job = 14695981039346656037ull;  // FNV-1a, 64 bit
    for (unsigned char c : job_id)
      job = (job ^ c) * 1099511628211ull;
  }
  const std::uint64_t slot = (job % kDerivedPortCount * 32 + step % 32) % kDerivedPortCount;
  return kDerivedPortBase + static_cast<int>(slot);
}

}  // namespace cohort::detail
