// How many CPUs this process may run on.
#pragma once

#include <string>
#include <vector>

namespace cohort::detail {

/// The CPUs of this process's affinity mask (sched_getaffinity), else the
/// online ones; at least 1. Not the cgroup's quota (launch/thread_budget
/// weighs that for the threads it hands out).
int usable_cpus() noexcept;

/// This process's affinity mask as CPU numbers ("0,1,5"; the online CPUs
/// when the mask cannot be read), to compare with other processes' masks.
std::string affinity_list();

/// How many distinct CPUs `lists` (affinity_list()'s form) name together;
/// at least 1. Numbers that do not parse are skipped.
int cpus_in_lists(const std::vector<std::string>& lists);

}  // namespace cohort::detail
