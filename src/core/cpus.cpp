#include "core/cpus.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <thread>

#include <sched.h>

#include "core/strings.hpp"

namespace cohort::detail {

int usable_cpus() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string affinity_list() {
  cpu_set_t set;
  std::vector<std::string> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(std::to_string(cpu));
    }
  } else {
    for (unsigned cpu = 0; cpu < std::max(1u, std::thread::hardware_concurrency()); ++cpu)
      cpus.push_back(std::to_string(cpu));
  }
  return join(cpus, ",");
}

int cpus_in_lists(const std::vector<std::string>& lists) {
  std::set<int> cpus;
  for (const std::string& list : lists) {
    for (const std::string& item : split_at(list, ',')) {
      int cpu = 0;
      const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), cpu);
      if (error == std::errc() && end == item.data() + item.size()) cpus.insert(cpu);
    }
  }
  return std::max<int>(1, static_cast<int>(cpus.size()));
}

}  // namespace cohort::detail
