// /proc/loadavg as a waiting shm rank reads it (src/comm/backends/shm/waiting.hpp).
#include <cstdlib>
#include <string_view>

#include "comm/backends/shm/waiting.hpp"
#include "fuzz/fuzz_target.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(loadavg) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto running = detail::shm_backend::runnable_in_loadavg(text);
  if (running && *running < 0) std::abort();
  return 0;
}

}  // namespace cohort::fuzz
