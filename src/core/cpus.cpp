#include "core/cpus.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <thread>

#include <sched.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "core/strings.hpp"

namespace cohort::detail {

int usable_cpus() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string affinity_list() {
  std::vector<std::string> cpus;
  for (int cpu : affinity_cpus())
    cpus.push_back(std::to_string(cpu));
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

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.remove_suffix(1);
  if (text.empty()) return std::vector<int>{};
  const auto number = [](std::string_view item) -> std::optional<int> {
    int value = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (error != std::errc() || end != item.data() + item.size() || value < 0 ||
        value >= kMaxCpus) {
      return std::nullopt;
    }
    return value;
  };
  std::vector<std::pair<int, int>> ranges;
  int highest = 0;
  for (const std::string& item : split_at(std::string(text), ',')) {
    const std::size_t dash = item.find('-');
    const auto low = number(std::string_view(item).substr(0, dash));
    const auto high =
        dash == std::string::npos ? low : number(std::string_view(item).substr(dash + 1));
    if (!low || !high || *high < *low) return std::nullopt;
    ranges.emplace_back(*low, *high);
    highest = std::max(highest, *high);
  }
  // Many overlapping ranges cost no more than one: each marks where it opens
  // and closes, and one pass counts the ranges open at every CPU.
  std::vector<int> opened(static_cast<std::size_t>(highest) + 2, 0);
  for (const auto& [low, high] : ranges) {
    ++opened[static_cast<std::size_t>(low)];
    --opened[static_cast<std::size_t>(high) + 1];
  }
  std::vector<int> cpus;
  int open = 0;
  for (int cpu = 0; cpu <= highest; ++cpu) {
    open += opened[static_cast<std::size_t>(cpu)];
    if (open > 0) cpus.push_back(cpu);
  }
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::vector<std::string> ranges;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t last = i;
    while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1)
      ++last;
    ranges.push_back(last == i ? cat(cpus[i]) : cat(cpus[i], "-", cpus[last]));
    i = last + 1;
  }
  return join(ranges, ",");
}

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  } else {
    for (int cpu = 0; cpu < usable_cpus(); ++cpu)
      cpus.push_back(cpu);
  }
  return cpus;
}

std::string cpu_vendor() {
#if defined(__x86_64__)
  unsigned int highest = 0;
  unsigned int vendor[3] = {};  // EBX, EDX, ECX: the name's three parts in order
  if (__get_cpuid(0, &highest, &vendor[0], &vendor[2], &vendor[1]) != 0) {
    return std::string(reinterpret_cast<const char*>(vendor), sizeof(vendor));
  }
#endif
  return "";
}

std::size_t l2_cache_bytes() {
  const long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return bytes > 0 ? static_cast<std::size_t>(bytes) : 0;
}

}  // namespace cohort::detail
