// The cgroup's CPU quota files (cgroup v2's cpu.max; v1's cpu.cfs_quota_us
// and cpu.cfs_period_us, split at the input's first newline;
// src/launch/thread_budget.cpp): a quota is positive and finite, or none.
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "fuzz/fuzz_target.hpp"
#include "launch/thread_budget.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(cgroup_quota) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto check = [](std::optional<double> quota) {
    if (quota && !(std::isfinite(*quota) && *quota > 0)) std::abort();
  };
  check(detail::parse_cpu_max(input));
  const std::size_t newline = input.find('\n');
  check(detail::parse_cfs_quota(input.substr(0, newline), newline == std::string_view::npos
                                                              ? ""
                                                              : input.substr(newline + 1)));
  return 0;
}

}  // namespace cohort::fuzz
