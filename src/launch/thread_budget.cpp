#include "launch/thread_budget.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include <sched.h>
#include <unistd.h>

#include "core/strings.hpp"

namespace cohort::detail {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string trimmed(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.remove_suffix(1);
  return std::string(text);
}

// The cgroup path of this process for a v2 hierarchy ("0::/a/b") or for the
// v1 controller list containing "cpu".
std::string cgroup_path(bool v2) {
  std::istringstream lines(read_text("/proc/self/cgroup"));
  std::string line;
  while (std::getline(lines, line)) {
    const std::size_t first = line.find(':');
    const std::size_t second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const bool cpu = ("," + controllers + ",").find(",cpu,") != std::string::npos;
    if (v2 ? controllers.empty() : cpu) return line.substr(second + 1);
  }
  return "";
}

std::optional<double> probe_quota() {
  const std::string v2 = cgroup_path(true);
  for (const std::string& dir : {"/sys/fs/cgroup" + v2, std::string("/sys/fs/cgroup")}) {
    if (auto quota = parse_cpu_max(read_text(dir + "/cpu.max"))) return quota;
  }
  const std::string v1 = cgroup_path(false);
  for (const char* mount : {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}) {
    for (const std::string& dir : {mount + v1, std::string(mount)}) {
      if (auto quota = parse_cfs_quota(read_text(dir + "/cpu.cfs_quota_us"),
                                       read_text(dir + "/cpu.cfs_period_us"))) {
        return quota;
      }
    }
  }
  return std::nullopt;
}

std::optional<int> positive(const Environment& env, const char* name) {
  auto found = env.find(name);
  if (found == env.end()) return std::nullopt;
  auto value = parse_int(found->second);
  if (!value || *value < 1) return std::nullopt;
  return static_cast<int>(std::min<std::int64_t>(*value, 1 << 20));
}

std::string workers(int count, const char* where) {
  return cat(count, count == 1 ? " worker " : " workers ", where);
}

}  // namespace

std::optional<double> parse_cpu_max(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string quota;
  std::string period;
  if (!(in >> quota >> period) || quota == "max") return std::nullopt;
  auto q = parse_int(quota);
  auto p = parse_int(period);
  if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;
  return static_cast<double>(*q) / static_cast<double>(*p);
}

std::optional<double> parse_cfs_quota(std::string_view quota, std::string_view period) {
  auto q = parse_int(trimmed(quota));
  auto p = parse_int(trimmed(period));
  if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;
  return static_cast<double>(*q) / static_cast<double>(*p);
}

CpuFacts probe_cpu_facts() {
  CpuFacts facts;
  facts.online = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  cpu_set_t mask;
  CPU_ZERO(&mask);
  facts.affinity =
      sched_getaffinity(0, sizeof(mask), &mask) == 0 ? std::max(1, CPU_COUNT(&mask)) : facts.online;
  facts.cgroup_quota = probe_quota().value_or(0.0);
  return facts;
}

ThreadBudget thread_budget(const Environment& env, const CpuFacts& cpus, int agent_workers,
                           int node_workers) {
  agent_workers = std::max(1, agent_workers);
  node_workers = std::max(agent_workers, node_workers);
  struct Share {
    double cpus;
    int sharers;
    std::string source;
  };
  std::vector<Share> shares;
  if (auto per_task = positive(env, "SLURM_CPUS_PER_TASK")) {
    shares.push_back({static_cast<double>(*per_task), agent_workers,
                      cat("SLURM_CPUS_PER_TASK=", *per_task, " shared by ",
                          workers(agent_workers, "of this task"))});
  } else if (auto on_node = positive(env, "SLURM_CPUS_ON_NODE")) {
    shares.push_back({static_cast<double>(*on_node), node_workers,
                      cat("SLURM_CPUS_ON_NODE=", *on_node, " shared by ",
                          workers(node_workers, "on this node"))});
  }
  if (cpus.affinity < cpus.online) {
    shares.push_back(
        {static_cast<double>(cpus.affinity), agent_workers,
         cat("CPU affinity: ", cpus.affinity, " of ", cpus.online, " CPUs (this task's) shared by ",
             workers(agent_workers, "of this task"))});
  } else {
    shares.push_back({static_cast<double>(cpus.affinity), node_workers,
                      cat("CPU affinity: all ", cpus.online, " CPUs shared by ",
                          workers(node_workers, "on this node"))});
  }
  if (cpus.cgroup_quota > 0) {
    shares.push_back({cpus.cgroup_quota, node_workers,
                      cat("cgroup CPU quota of ", cpus.cgroup_quota, " CPUs shared by ",
                          workers(node_workers, "on this node"))});
  }
  ThreadBudget best{0, ""};
  for (const Share& share : shares) {
    const int threads = std::max(1, static_cast<int>(std::floor(share.cpus / share.sharers)));
    if (best.threads == 0 || threads < best.threads) best = {threads, share.source};
  }
  return best;
}

}  // namespace cohort::detail
