#include "cli/host_probe.hpp"

#include <algorithm>
#include <climits>

#include <sched.h>
#include <unistd.h>

#include "core/strings.hpp"

namespace cohort::cli {

CpuInfo probe_cpus() {
  CpuInfo info;
  info.online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return info;
  std::vector<std::string> ranges;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mask)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &mask))
      ++last;
    info.usable += last - cpu + 1;
    ranges.push_back(last == cpu ? std::to_string(cpu) : detail::cat(cpu, "-", last));
    cpu = last;
  }
  info.affinity = detail::join(ranges, ",");
  return info;
}

std::vector<std::pair<std::string, const std::string*>> settings(const Environment& env) {
  std::vector<std::pair<std::string, const std::string*>> out;
  for (const char* name : {"OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES"}) {
    auto it = env.find(name);
    out.emplace_back(name, it == env.end() ? nullptr : &it->second);
  }
  for (const auto& [name, value] : env) {
    for (std::string_view prefix : {"COHORT_", "GLOO_", "NCCL_"}) {
      if (name.rfind(prefix, 0) == 0) out.emplace_back(name, &value);
    }
  }
  return out;
}

std::string hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "(unknown)";
  return name;
}

}  // namespace cohort::cli
