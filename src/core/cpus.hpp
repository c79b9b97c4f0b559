// How many CPUs this process may run on.
#pragma once

namespace cohort::detail {

/// The CPUs of this process's affinity mask (sched_getaffinity), else the
/// online ones; at least 1. Not the cgroup's quota (launch/thread_budget
/// weighs that for the threads it hands out).
int usable_cpus() noexcept;

}  // namespace cohort::detail
