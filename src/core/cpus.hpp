// How many CPUs this process may run on.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
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

/// The Linux CPU list form ("0-3,8,10-11", as in sysfs's cpulist files and
/// taskset -c): every CPU it names, ascending and without repeats; nullopt
/// when it does not parse, or names a CPU beyond kMaxCpus. "" is no CPU.
inline constexpr int kMaxCpus = 1 << 16;
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

/// The inverse: ascending CPUs as "0-3,8,10-11".
std::string format_cpu_list(const std::vector<int>& cpus);

/// This process's affinity mask as CPU numbers, ascending.
std::vector<int> affinity_cpus();

/// The CPU's vendor as CPUID names it ("GenuineIntel", "AuthenticAMD"); ""
/// where there is no CPUID (not x86-64). For tunings measured to differ by
/// vendor (the shm backend's single copies).
std::string cpu_vendor();

/// Bytes of one core's level-2 cache, as the C library reads it (CPUID on
/// x86-64); 0 where it is not known. For chunks sized to stay in it (the
/// shm backend's broadcast).
std::size_t l2_cache_bytes();

}  // namespace cohort::detail
