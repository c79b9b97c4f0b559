#include "core/cpus.hpp"

#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace cohort::detail {
namespace {

TEST(Cpus, ThisProcessesListNamesAsManyCpusAsItMayUse) {
  EXPECT_EQ(cpus_in_lists({affinity_list()}), usable_cpus());
}

TEST(Cpus, ListsCountEachCpuOnce) {
  // Ranks bound to a core each (as mpirun and srun bind them) together run on
  // as many CPUs as there are ranks; ranks that share one mask, on its CPUs.
  EXPECT_EQ(cpus_in_lists({"0", "1", "2", "3"}), 4);
  EXPECT_EQ(cpus_in_lists({"0,1", "0,1", "0,1"}), 2);
  EXPECT_EQ(cpus_in_lists({"0,1", "1,2"}), 3);
}

TEST(Cpus, WhatDoesNotParseIsSkippedAndTheCountIsAtLeastOne) {
  EXPECT_EQ(cpus_in_lists({}), 1);
  EXPECT_EQ(cpus_in_lists({""}), 1);
  EXPECT_EQ(cpus_in_lists({"x,3,3y,-", "4"}), 2);
}

// As the kernel names it in /proc/cpuinfo (x86-64; elsewhere "").
TEST(Cpus, TheVendorIsTheOneCpuinfoNames) {
  std::string vendor;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; vendor.empty() && std::getline(cpuinfo, line);) {
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
  }
#if defined(__x86_64__)
  ASSERT_FALSE(vendor.empty()) << "no vendor_id in /proc/cpuinfo";
#endif
  EXPECT_EQ(cpu_vendor(), vendor);
}

}  // namespace
}  // namespace cohort::detail
