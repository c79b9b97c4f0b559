// Facts about this machine for `cohort env`: CPUs this process may use, and
// the settings variables that change how cohort and its backends behave.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <cohort/launch_env.hpp>

namespace cohort::cli {

struct CpuInfo {
  int usable = 0;        ///< CPUs in this process's affinity mask
  int online = 0;        ///< CPUs the kernel has online
  std::string affinity;  ///< the mask as a list, "0-3,8"
};
CpuInfo probe_cpus();

/// OMP_NUM_THREADS and CUDA_VISIBLE_DEVICES (set or not, in that order), then
/// every variable set in `env` whose name starts with COHORT_, GLOO_ or NCCL_.
/// Unset variables have an empty second.
std::vector<std::pair<std::string, const std::string*>> settings(const Environment& env);

std::string hostname();

}  // namespace cohort::cli
