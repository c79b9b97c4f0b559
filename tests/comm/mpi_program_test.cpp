// cohort beside a program's own use of MPI, under Open MPI's mpirun: whoever
// initialises MPI, both the program's MPI_Allreduce and cohort's all_reduce
// work, MPI is finalized once, and every rank exits 0.
#include <gtest/gtest.h>

#include "support/subprocess.hpp"
#include "support/text.hpp"

namespace cohort {
namespace {

test::ProcessResult run_program(const std::string& mode) {
  test::ProcessOptions options;
  options.timeout = std::chrono::seconds(60);
  return test::run_process(
      {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "3", COHORT_MPI_PROGRAM, mode},
      options);
}

class MpiProgram : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(MpiProgram, BothUsesOfMpiWork) {
  if (test::find_in_path("mpirun").empty()) GTEST_SKIP() << "mpirun (openmpi-bin) is missing";
  const auto& [mode, backend] = GetParam();
  const test::ProcessResult result = run_program(mode);
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(test::lines_with(result.out, "backend " + backend + " cohort 3 mpi 3").size(), 3u)
      << test::describe(result);
}

INSTANTIATE_TEST_SUITE_P(WhoInitialises, MpiProgram,
                         ::testing::Values(std::tuple<std::string, std::string>{"multiple", "mpi"},
                                           std::tuple<std::string, std::string>{"single", "gloo"},
                                           std::tuple<std::string, std::string>{"cohort", "mpi"}),
                         [](const auto& test_info) { return std::get<0>(test_info.param); });

}  // namespace
}  // namespace cohort
