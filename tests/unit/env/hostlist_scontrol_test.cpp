// cohort's hostlists against the real `scontrol` (it needs a slurm.conf, not a
// running cluster). Skips, saying why, when Slurm's client is not installed.
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cohort/errors.hpp>
#include <cohort/launch_env.hpp>

#include "support/files.hpp"
#include "support/skip.hpp"
#include "support/subprocess.hpp"
#include "unit/env/hostlist_cases.hpp"

namespace cohort {
namespace {

class ScontrolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::find_in_path("scontrol").empty()) {
      COHORT_SKIP_MISSING("scontrol is not installed (scripts/install-deps test installs it)");
    }
    std::ofstream(dir_ / "slurm.conf") << "ClusterName=hostlisttest\nSlurmctldHost=localhost\n"
                                          "NodeName=localhost CPUs=1\nPartitionName=p Nodes=ALL\n";
    env_ = process_environment();
    env_["SLURM_CONF"] = (dir_ / "slurm.conf").string();
  }

  test::ProcessResult scontrol(const std::string& verb, const std::string& argument) {
    test::ProcessOptions options;
    options.env = env_;
    options.timeout = std::chrono::seconds(20);
    return test::run_process({"scontrol", "show", verb, argument}, options);
  }

  static std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream stream(text);
    for (std::string line; std::getline(stream, line);)
      out.push_back(line);
    return out;
  }

  test::TempDir temp_{"cohort-scontrol"};
  const std::filesystem::path& dir_ = temp_.path();
  Environment env_;
};

TEST_F(ScontrolTest, SameExpansionAsScontrolShowHostnames) {
  int compared = 0;
  for (const test::HostlistCase& c : test::hostlist_cases()) {
    if (c.expression.empty()) continue;  // scontrol reads an empty argument as "all nodes"
    const test::ProcessResult result = scontrol("hostnames", c.expression);
    if (c.scontrol_accepts) {
      ASSERT_EQ(result.exit_code, 0) << c.expression << ": " << test::describe(result);
      EXPECT_EQ(lines(result.out), hostlist::expand(c.expression)) << c.expression;
      ++compared;
    } else {
      // Still rejected by this Slurm? Then docs/hostlist.md's list of
      // extensions stays true.
      EXPECT_TRUE(result.exit_code != 0 ||
                  result.err.find("Invalid hostlist") != std::string::npos ||
                  result.out.find("Invalid hostlist") != std::string::npos)
          << c.expression << " is now accepted by scontrol: " << test::describe(result);
    }
  }
  EXPECT_GE(compared, 39);
}

TEST_F(ScontrolTest, BothRejectInvalidExpressions) {
  for (const std::string& expression : test::invalid_hostlists()) {
    const test::ProcessResult result = scontrol("hostnames", expression);
    EXPECT_NE(result.out + result.err, "") << expression;
    EXPECT_NE((result.out + result.err).find("Invalid hostlist"), std::string::npos)
        << expression << ": " << test::describe(result);
    EXPECT_THROW(hostlist::expand(expression), InvalidArgument) << expression;
  }
}

TEST_F(ScontrolTest, SameCompressionAsScontrolShowHostlist) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int i = 0; i < 60; ++i) {
    // Runs with gaps, padding and a second prefix: what allocations look like.
    std::vector<std::string> hosts;
    int number = static_cast<int>(rng() % 200);
    const int count = 1 + static_cast<int>(rng() % 25);
    for (int k = 0; k < count; ++k) {
      number += rng() % 4 == 0 ? static_cast<int>(rng() % 7) : 1;
      std::string digits = std::to_string(number);
      if (rng() % 3 == 0 && digits.size() < 3) digits.insert(0, 3 - digits.size(), '0');
      hosts.push_back((rng() % 5 == 0 ? "gpu" : "node") + digits);
    }
    std::string plain;
    for (const std::string& host : hosts)
      plain += (plain.empty() ? "" : ",") + host;
    const test::ProcessResult result = scontrol("hostlist", plain);
    ASSERT_EQ(result.exit_code, 0) << plain << ": " << test::describe(result);
    EXPECT_EQ(result.out, hostlist::compress(hosts) + "\n") << "seed " << seed << ": " << plain;
  }
}

}  // namespace
}  // namespace cohort
