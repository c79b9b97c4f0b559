#include "core/cpus.hpp"

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

}  // namespace
}  // namespace cohort::detail
