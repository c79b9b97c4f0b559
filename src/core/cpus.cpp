#include "core/cpus.hpp"

#include <algorithm>
#include <thread>

#include <sched.h>

namespace cohort::detail {

int usable_cpus() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace cohort::detail
