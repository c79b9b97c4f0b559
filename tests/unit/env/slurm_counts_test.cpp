#include "env/slurm_counts.hpp"

#include <gtest/gtest.h>

namespace cohort::detail {
namespace {

TEST(SlurmCounts, ExpandsRepeats) {
  EXPECT_EQ(parse_slurm_counts("4"), (std::vector<int>{4}));
  EXPECT_EQ(parse_slurm_counts("2(x3)"), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(parse_slurm_counts("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(parse_slurm_counts("4,1"), (std::vector<int>{4, 1}));
  EXPECT_EQ(parse_slurm_counts("1,3(x2),2"), (std::vector<int>{1, 3, 3, 2}));
}

TEST(SlurmCounts, RejectsMalformedText) {
  for (const char* bad : {"", ",", "2,", ",2", "2(x)", "2(x0)", "2(3)", "(x2)", "a", "2(x2", "-1",
                          "2(x-1)", "1(x2000000)"}) {
    EXPECT_EQ(parse_slurm_counts(bad), std::nullopt) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace cohort::detail
