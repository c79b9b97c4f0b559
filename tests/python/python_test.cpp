// Tier 3, real PyTorch: unmodified torch.distributed scripts (examples/python,
// tests/python/probe.py) under `cohort run`, with Debian's torch interpreter
// (/usr/bin/python3); the same examples under torchrun; the DDP example on 2
// ranks against 1 rank on the whole batch; PyTorch failures in the report.
#include <filesystem>
#include <sstream>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/files.hpp"
#include "support/skip.hpp"
#include "support/subprocess.hpp"
#include "support/text.hpp"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using test::lines_with;
using namespace std::chrono_literals;

const std::string kPython = "/usr/bin/python3";  // Debian's, with python3-torch
const fs::path kExamples = fs::path(COHORT_SOURCE_DIR) / "examples" / "python";
const fs::path kTests = fs::path(COHORT_SOURCE_DIR) / "tests" / "python";

class PyTorch : public ::testing::Test {
 protected:
  void SetUp() override {
    const test::ProcessResult probe =
        test::run_process({kPython, "-c", "import torch.distributed"}, options());
    if (probe.exit_code != 0) {
      COHORT_SKIP_MISSING(kPython << " cannot import torch (scripts/install-deps test installs "
                                     "python3-torch)");
    }
  }

  static test::ProcessOptions options() {
    test::ProcessOptions out;
    out.timeout = 180s;
    return out;
  }

  // cohort run ARGS with Debian's torch interpreter for .py programs.
  static test::ProcessResult cohort_run(std::vector<std::string> args) {
    args.insert(args.begin(), {COHORT_CLI_PATH, "run", "--python", kPython});
    return test::run_process(args, options());
  }

  static std::string example(const char* name) { return (kExamples / name).string(); }
  static std::string probe() { return (kTests / "probe.py").string(); }
};

TEST_F(PyTorch, ReductionPrintsTheWorldSizeOnEveryRank) {
  const auto result = cohort_run({"-n", "2", example("reduction.py")});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  const auto lines = lines_with(result.out, "has data tensor([2.])");
  EXPECT_EQ(lines.size(), 2u) << result.out;
  EXPECT_EQ(lines_with(result.out, "process 0/2").size(), 1u) << result.out;
  EXPECT_EQ(lines_with(result.out, "process 1/2").size(), 1u) << result.out;
}

TEST_F(PyTorch, HelloAndMessagePassing) {
  const auto hello = cohort_run({"-n", "4", example("hello.py"), "--backend", "gloo"});
  ASSERT_EQ(hello.exit_code, 0) << test::describe(hello);
  EXPECT_EQ(lines_with(hello.out, "] hello from [").size(), 4u) << hello.out;
  const auto ring = cohort_run({"-n", "3", example("message_passing.py")});
  ASSERT_EQ(ring.exit_code, 0) << test::describe(ring);
  for (const char* line : {"process 0/3 received 2 from 2", "process 1/3 received 0 from 0",
                           "process 2/3 received 1 from 1",
                           "process 0/3 ping-pong with 2: ball is 4 after 3 round trips"}) {
    EXPECT_EQ(lines_with(ring.out, line).size(), 1u) << line << "\n" << ring.out;
  }
}

// The same script under torchrun (Debian's needs --redirects 9:0 --tee 9:0 to start).
TEST_F(PyTorch, TheExamplesRunUnderTorchrunToo) {
  const auto result =
      test::run_process({kPython, "-m", "torch.distributed.run", "--redirects", "9:0", "--tee",
                         "9:0", "--standalone", "--nproc_per_node", "2", example("reduction.py")},
                        options());
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  // Counted as text, not lines: torchrun's workers share one stdout, and
  // print() writes the text and its newline separately, so lines can mix.
  EXPECT_EQ(test::count_of(result.out, "has data tensor([2.])"), 2u) << result.out;
}

TEST_F(PyTorch, LegacyLocalRankArgument) {
  const auto result = cohort_run({"-n", "2", "--local-rank-arg", probe()});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(lines_with(result.out, "probe rank 0/2 restart 0 local_rank_arg 0 sum 2").size(), 1u)
      << result.out;
  EXPECT_EQ(lines_with(result.out, "probe rank 1/2 restart 0 local_rank_arg 1 sum 2").size(), 1u)
      << result.out;
}

TEST_F(PyTorch, ARestartIsWhatTorchelasticRestartCountSays) {
  const auto result =
      cohort_run({"-n", "2", "--max-restarts", "1", probe(), "--exit-on-first-attempt", "1"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_NE(result.err.find("restarting all 2 workers (restart 1 of 1)"), std::string::npos)
      << result.err;
  EXPECT_EQ(lines_with(result.out, "restart 1 local_rank_arg None sum 2").size(), 2u) << result.out;
}

TEST_F(PyTorch, AnExceptionInRankOneIsInTheReport) {
  const auto result = cohort_run({"-n", "2", probe(), "--raise-in", "1"});
  EXPECT_EQ(result.exit_code, 1) << test::describe(result);
  EXPECT_NE(result.err.find("cohort run: rank 1 failed: exited with code 1"), std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("host "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("| Traceback (most recent call last):"), std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("| RuntimeError: rank 1 cannot go on: batch 17 has no labels"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("exit status   1"), std::string::npos) << result.err;
}

TEST_F(PyTorch, ATakenMasterPortIsSaidInOneLine) {
  // Something else listens on the port the user asked for.
  const int holder = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t size = sizeof(address);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(listen(holder, 1), 0);
  getsockname(holder, reinterpret_cast<sockaddr*>(&address), &size);
  const std::string port = std::to_string(ntohs(address.sin_port));
  const auto result = cohort_run({"-n", "2", "--master-port", port, example("reduction.py")});
  close(holder);
  EXPECT_NE(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(lines_with(result.err, "why           MASTER_PORT " + port + " on ").size(), 1u)
      << result.err;
  EXPECT_NE(result.err.find("is taken by another process"), std::string::npos) << result.err;
}

// DDP on 2 ranks, each with half of every batch, ends where 1 rank with the
// whole batch ends: gradients are averaged, so the updates are the same up
// to float rounding (documented tolerance: 1e-6; measured about 1e-8).
TEST_F(PyTorch, DdpOnTwoRanksMatchesOneRankOnTheWholeBatch) {
  test::TempDir dir("cohort-ddp");
  const std::string two = (dir.path() / "two.pt").string();
  const std::string one = (dir.path() / "one.pt").string();
  const auto ranks2 = cohort_run({"-n", "2", example("ddp.py"), "--steps", "5", "--save", two});
  ASSERT_EQ(ranks2.exit_code, 0) << test::describe(ranks2);
  EXPECT_EQ(lines_with(ranks2.out, ": loss ").size(), 5u) << ranks2.out;
  const auto ranks1 = cohort_run({"-n", "1", example("ddp.py"), "--steps", "5", "--save", one});
  ASSERT_EQ(ranks1.exit_code, 0) << test::describe(ranks1);
  const auto compared = test::run_process(
      {kPython, (kTests / "compare_parameters.py").string(), one, two, "1e-6"}, options());
  EXPECT_EQ(compared.exit_code, 0) << test::describe(compared);
  // Training did something: the loss of the last step is below the first's.
  const auto losses = lines_with(ranks2.out, ": loss ");
  ASSERT_EQ(losses.size(), 5u);
  const auto value = [](const std::string& line) {
    return std::stod(line.substr(line.rfind(' ') + 1));
  };
  EXPECT_LT(value(losses.back()), value(losses.front())) << ranks2.out;
}

}  // namespace
}  // namespace cohort
