// cohort beside a program's own use of MPI, under Open MPI's mpirun: whoever
// initialises MPI, both the program's MPI_Allreduce and cohort's all_reduce
// work, MPI is finalized once, and every rank exits 0.
#include <filesystem>

#include <gtest/gtest.h>

#include <cohort/launch_env.hpp>

#include "support/backends.hpp"
#include "support/files.hpp"
#include "support/subprocess.hpp"
#include "support/text.hpp"

namespace cohort {
namespace {

// `backend`: COHORT_BACKEND ("" leaves the choice to cohort).
test::ProcessResult run_program(const std::string& mode, const std::string& backend,
                                const std::string& level = "") {
  test::ProcessOptions options;
  options.timeout = std::chrono::seconds(60);
  options.env = process_environment();
  if (!backend.empty()) options.env->insert_or_assign("COHORT_BACKEND", backend);
  if (!level.empty()) options.env->insert_or_assign("COHORT_MPI_THREAD_LEVEL", level);
  return test::run_process({"mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl",
                            "self,vader", "-np", "3", COHORT_MPI_PROGRAM, mode},
                           options);
}

// (mode, backend, MPI's thread level at the end)
using Case = std::tuple<std::string, std::string, std::string>;

class MpiProgram : public ::testing::TestWithParam<Case> {};

TEST_P(MpiProgram, BothUsesOfMpiWork) {
  if (test::find_in_path("mpirun").empty()) GTEST_SKIP() << "mpirun (openmpi-bin) is missing";
  const auto& [mode, backend, level] = GetParam();
  // The mpi backend is asked for by name: on one host shm would come first.
  const test::ProcessResult result = run_program(mode, backend == "mpi" ? "mpi" : "");
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  const std::string line = "backend " + backend + " cohort 3 mpi 3 level " + level;
  EXPECT_EQ(test::lines_with(result.out, line).size(), 3u) << test::describe(result);
}

INSTANTIATE_TEST_SUITE_P(WhoInitialises, MpiProgram,
                         ::testing::Values(Case{"multiple", "mpi", "multiple"},
                                           Case{"single", test::kOneHostBackend, "single"},
                                           Case{"cohort", "mpi", "multiple"}),
                         [](const auto& test_info) { return std::get<0>(test_info.param); });

// COHORT_MPI_THREAD_LEVEL=serialized: cohort asks MPI for less; an unknown
// level is an error that names the variable.
TEST(MpiProgramLevel, SerializedWhenAskedAndAnUnknownLevelIsNamed) {
  if (test::find_in_path("mpirun").empty()) GTEST_SKIP() << "mpirun (openmpi-bin) is missing";
  test::ProcessResult result = run_program("cohort", "mpi", "serialized");
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(test::lines_with(result.out, "backend mpi cohort 3 mpi 3 level serialized").size(), 3u)
      << test::describe(result);
  result = run_program("cohort", "mpi", "funneled");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("COHORT_MPI_THREAD_LEVEL='funneled' is not a thread level"),
            std::string::npos)
      << test::describe(result);
}

// A job that hangs until the test's deadline is ended so that mpirun cleans
// up after it: its ranks' shared-memory files (here in a directory of the
// test's own, btl_vader_backing_directory; /dev/shm by default) are gone.
// A SIGKILLed mpirun leaves them behind (test::Subprocess sends SIGTERM
// first).
TEST(MpiProgramDeadline, AJobEndedAtItsDeadlineLeavesNoSharedMemoryFiles) {
  if (test::find_in_path("mpirun").empty()) GTEST_SKIP() << "mpirun (openmpi-bin) is missing";
  const test::TempDir segments("cohort-vader");
  test::ProcessOptions options;
  options.timeout = std::chrono::seconds(5);
  const test::ProcessResult result =
      test::run_process({"mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl",
                         "self,vader", "--mca", "btl_vader_backing_directory",
                         segments.path().string(), "-np", "3", COHORT_MPI_PROGRAM, "hang"},
                        options);
  ASSERT_TRUE(result.timed_out) << test::describe(result);
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(segments.path()))
    left.push_back(entry.path().filename().string());
  EXPECT_TRUE(left.empty()) << left.size() << " files left, the first " << left.front();
}

}  // namespace
}  // namespace cohort
