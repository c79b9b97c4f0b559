// detect_launch on hand-written environments: each launcher's variables,
// precedence, overrides, and the errors for partial or inconsistent input.
#include <set>

#include <gtest/gtest.h>

#include <cohort/errors.hpp>
#include <cohort/launch_env.hpp>

#include "env/master_port.hpp"
#include "support/launch_examples.hpp"

namespace cohort {
namespace {

Environment with(Environment env, const Environment& more) {
  for (const auto& [name, value] : more)
    env[name] = value;
  return env;
}

// Detects `env`, expecting a LaunchEnvError whose message names every one of
// `names` with its value ("NAME=value", or the name alone for unset ones).
void expect_error_naming(const Environment& env, const std::vector<std::string>& names) {
  try {
    const LaunchInfo info = detect_launch(env);
    ADD_FAILURE() << "no error; detected rank " << info.rank.value;
  } catch (const LaunchEnvError& error) {
    const std::string message = error.what();
    for (const std::string& name : names) {
      auto it = env.find(name);
      const std::string expected = it == env.end() ? name : name + "=" + it->second;
      const std::string quoted = it == env.end() ? name : name + "='" + it->second + "'";
      EXPECT_TRUE(message.find(expected) != std::string::npos ||
                  message.find(quoted) != std::string::npos)
          << "message does not name " << expected << ": " << message;
      bool listed = false;
      for (const auto& [variable, value] : error.variables())
        listed = listed || variable == name;
      EXPECT_TRUE(listed) << name << " missing from variables() of: " << message;
    }
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  }
}

TEST(DetectLaunch, NothingSetIsASingleProcess) {
  const LaunchInfo info = detect_launch(Environment{});
  EXPECT_EQ(info.launcher.value, Launcher::single);
  EXPECT_EQ(info.rank.value, 0);
  EXPECT_EQ(info.world_size.value, 1);
  EXPECT_EQ(info.local_rank.value, 0);
  EXPECT_EQ(info.local_world_size.value, 1);
  EXPECT_EQ(info.node_rank.value, 0);
  EXPECT_EQ(info.num_nodes.value, 1);
  EXPECT_EQ(info.master_addr.value, "127.0.0.1");
  EXPECT_EQ(info.master_port.value, 0);
  EXPECT_TRUE(info.notes.empty());
}

TEST(DetectLaunch, SlurmStepFromTheIssueExample) {
  const LaunchInfo info = detect_launch(test::slurm_step_example());
  EXPECT_EQ(info.launcher.value, Launcher::slurm);
  EXPECT_EQ(info.rank.value, 5);
  EXPECT_EQ(info.rank.source, "SLURM_PROCID");
  EXPECT_EQ(info.world_size.value, 8);
  EXPECT_EQ(info.world_size.source, "SLURM_NTASKS");
  EXPECT_EQ(info.local_rank.value, 1);
  EXPECT_EQ(info.local_world_size.value, 2);
  EXPECT_EQ(info.node_rank.value, 2);
  EXPECT_EQ(info.num_nodes.value, 4);
  EXPECT_EQ(info.master_addr.value, "n1");
  EXPECT_EQ(info.master_addr.source, "first host of SLURM_JOB_NODELIST");
  EXPECT_EQ(info.master_port.value, detail::derive_port("1234", 0));
  EXPECT_EQ(info.job_id.value, "1234");
}

TEST(DetectLaunch, OpenMpiWinsOverSlurm) {
  const LaunchInfo info =
      detect_launch(with(test::slurm_step_example(), test::openmpi_rank2_of4()));
  EXPECT_EQ(info.launcher.value, Launcher::openmpi);
  EXPECT_EQ(info.rank.value, 2);
  EXPECT_EQ(info.rank.source, "OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(info.world_size.value, 4);
  EXPECT_EQ(info.local_world_size.value, 2);
  EXPECT_EQ(info.node_rank.value, kUnknown);  // Open MPI exports no node index
  ASSERT_EQ(info.notes.size(), 1u);
  EXPECT_NE(info.notes[0].find("Slurm variables are set too"), std::string::npos) << info.notes[0];
}

TEST(DetectLaunch, TorchrunWinsOverEverything) {
  const Environment env = with(test::slurm_step_example(), {{"RANK", "1"},
                                                            {"WORLD_SIZE", "2"},
                                                            {"LOCAL_RANK", "1"},
                                                            {"LOCAL_WORLD_SIZE", "2"},
                                                            {"MASTER_ADDR", "10.0.0.1"},
                                                            {"MASTER_PORT", "29500"},
                                                            {"TORCHELASTIC_RUN_ID", "abc"},
                                                            {"PMI_RANK", "0"},
                                                            {"PMI_SIZE", "1"}});
  const LaunchInfo info = detect_launch(env);
  EXPECT_EQ(info.launcher.value, Launcher::torchrun);
  EXPECT_EQ(info.rank.value, 1);
  EXPECT_EQ(info.node_rank.value, 0);
  EXPECT_EQ(info.num_nodes.value, 1);
  EXPECT_EQ(info.master_addr.value, "10.0.0.1");
  EXPECT_EQ(info.master_port.value, 29500);
  EXPECT_EQ(info.job_id.value, "abc");
  EXPECT_EQ(info.notes.size(), 2u);  // MPICH and Slurm set aside
}

// RANK exported into every rank of an mpirun job contradicts mpirun's own
// numbering of the same world: an error naming both. A launcher nested in
// mpirun (its own run id), or another world size, is not that.
TEST(DetectLaunch, AnExportedRankContradictingMpirunsIsAnError) {
  const Environment env{{"RANK", "0"},
                        {"WORLD_SIZE", "2"},
                        {"MASTER_ADDR", "h"},
                        {"MASTER_PORT", "29500"},
                        {"OMPI_COMM_WORLD_RANK", "1"},
                        {"OMPI_COMM_WORLD_SIZE", "2"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  expect_error_naming(env, {"RANK", "OMPI_COMM_WORLD_RANK"});
  EXPECT_EQ(detect_launch(with(env, {{"TORCHELASTIC_RUN_ID", "r"}})).rank.value, 0);
  EXPECT_EQ(detect_launch(with(env, {{"WORLD_SIZE", "4"}})).rank.value, 0);
  EXPECT_EQ(detect_launch(with(env, {{"RANK", "1"}})).rank.value, 1);
}

TEST(DetectLaunch, CohortRunIdMeansCohort) {
  const LaunchInfo info = detect_launch({{"RANK", "0"},
                                         {"WORLD_SIZE", "4"},
                                         {"LOCAL_RANK", "0"},
                                         {"LOCAL_WORLD_SIZE", "2"},
                                         {"GROUP_RANK", "0"},
                                         {"GROUP_WORLD_SIZE", "2"},
                                         {"MASTER_ADDR", "127.0.0.1"},
                                         {"MASTER_PORT", "4242"},
                                         {"TORCHELASTIC_RUN_ID", "r1"},
                                         {"TORCHELASTIC_RESTART_COUNT", "2"},
                                         {"COHORT_RUN_ID", "r1"}});
  EXPECT_EQ(info.launcher.value, Launcher::cohort);
  EXPECT_EQ(info.num_nodes.value, 2);
  EXPECT_EQ(info.num_nodes.source, "GROUP_WORLD_SIZE");
  EXPECT_EQ(info.restart_count.value, 2);
}

TEST(DetectLaunch, LegacyLaunchWithoutLocalWorldSize) {
  // torch.distributed.launch before 1.9 set only these five.
  const LaunchInfo info = detect_launch({{"RANK", "3"},
                                         {"WORLD_SIZE", "4"},
                                         {"LOCAL_RANK", "1"},
                                         {"MASTER_ADDR", "h0"},
                                         {"MASTER_PORT", "29500"}});
  EXPECT_EQ(info.launcher.value, Launcher::torchrun);
  EXPECT_EQ(info.local_rank.value, 1);
  EXPECT_EQ(info.local_world_size.value, kUnknown);
  EXPECT_EQ(info.node_rank.value, kUnknown);
  EXPECT_EQ(info.num_nodes.value, kUnknown);
}

TEST(DetectLaunch, RankAndWorldSizeAloneMeanOneProcessPerMachine) {
  // Kubeflow's PyTorchJob sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT per pod.
  const LaunchInfo info = detect_launch({{"RANK", "2"},
                                         {"WORLD_SIZE", "3"},
                                         {"MASTER_ADDR", "job-master-0"},
                                         {"MASTER_PORT", "23456"}});
  EXPECT_EQ(info.local_rank.value, 0);
  EXPECT_EQ(info.local_world_size.value, 1);
  EXPECT_EQ(info.node_rank.value, 2);
  EXPECT_EQ(info.num_nodes.value, 3);
}

TEST(DetectLaunch, MpichOnOneNode) {
  const LaunchInfo info = detect_launch(
      {{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "3"}, {"MPI_LOCALNRANKS", "4"}});
  EXPECT_EQ(info.launcher.value, Launcher::mpich);
  EXPECT_EQ(info.rank.value, 3);
  EXPECT_EQ(info.num_nodes.value, 1);
  EXPECT_EQ(info.master_addr.value, "127.0.0.1");
}

TEST(DetectLaunch, MpichAcrossNodesLeavesNodeIndexUnknown) {
  const LaunchInfo info = detect_launch(
      {{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}});
  EXPECT_EQ(info.node_rank.value, kUnknown);
  EXPECT_EQ(info.num_nodes.value, kUnknown);
  EXPECT_EQ(info.master_addr.value, "");
}

TEST(DetectLaunch, PmixUnderSrun) {
  const LaunchInfo info = detect_launch(with(test::slurm_step_example(), {{"PMIX_RANK", "5"}}));
  EXPECT_EQ(info.launcher.value, Launcher::pmix);
  EXPECT_EQ(info.rank.source, "PMIX_RANK");
  EXPECT_EQ(info.world_size.value, 8);
  EXPECT_TRUE(info.notes.empty()) << info.notes[0];
}

TEST(DetectLaunch, BatchScriptIsASingleProcessWithANote) {
  const LaunchInfo info = detect_launch({{"SLURM_JOB_ID", "77"},
                                         {"SLURM_PROCID", "0"},
                                         {"SLURM_NTASKS", "4"},
                                         {"SLURM_JOB_NODELIST", "n[1-2]"},
                                         {"SLURM_TASKS_PER_NODE", "2(x2)"}});
  EXPECT_EQ(info.launcher.value, Launcher::single);
  EXPECT_EQ(info.world_size.value, 1);
  EXPECT_EQ(info.job_id.value, "77");
  ASSERT_EQ(info.notes.size(), 1u);
  EXPECT_NE(info.notes[0].find("not in a job step"), std::string::npos) << info.notes[0];
}

TEST(DetectLaunch, MasterAddrAndPortOverrideSlurm) {
  const LaunchInfo info = detect_launch(
      with(test::slurm_step_example(), {{"MASTER_ADDR", "10.1.1.1"}, {"MASTER_PORT", "40000"}}));
  EXPECT_EQ(info.launcher.value, Launcher::slurm);
  EXPECT_EQ(info.master_addr.value, "10.1.1.1");
  EXPECT_EQ(info.master_addr.source, "MASTER_ADDR");
  EXPECT_EQ(info.master_port.value, 40000);
}

TEST(DetectLaunch, SlurmStepNodelistBeatsTheJobNodelist) {
  const LaunchInfo info =
      detect_launch(with(test::slurm_step_example(), {{"SLURM_STEP_NODELIST", "n[3-4]"},
                                                      {"SLURM_STEP_NUM_NODES", "2"},
                                                      {"SLURM_STEP_TASKS_PER_NODE", "3,5"},
                                                      {"SLURM_NODEID", "1"},
                                                      {"SLURM_STEP_ID", "4294967290"}}));
  EXPECT_EQ(info.master_addr.value, "n3");
  EXPECT_EQ(info.num_nodes.value, 2);
  EXPECT_EQ(info.local_world_size.value, 5);
  EXPECT_EQ(info.master_port.value, detail::derive_port("1234", 4294967290u));
}

TEST(DerivedPort, IsDeterministicInRangeAndSeparatesStepsAndJobs) {
  EXPECT_EQ(detail::derive_port("1234", 0), 12000 + (1234 * 32) % 20000);
  for (int job = 0; job < 5000; ++job) {
    const int port = detail::derive_port(std::to_string(job), 0);
    EXPECT_GE(port, 12000);
    EXPECT_LT(port, 32000);  // below Linux's ephemeral range
  }
  EXPECT_NE(detail::derive_port("1234", 0), detail::derive_port("1234", 1));
  std::set<int> ports;
  for (int job = 1000; job < 1625; ++job)
    ports.insert(detail::derive_port(std::to_string(job), 0));
  EXPECT_EQ(ports.size(), 625u);  // 625 consecutive jobs never share a port
  EXPECT_EQ(detail::derive_port("slurm.pmix.18.0", 0), detail::derive_port("slurm.pmix.18.0", 0));
}

// ---------------------------------------------------------------- errors

TEST(DetectLaunchErrors, RankNotBelowWorldSize) {
  expect_error_naming({{"RANK", "3"}, {"WORLD_SIZE", "2"}}, {"RANK", "WORLD_SIZE"});
}

TEST(DetectLaunchErrors, RankWithoutWorldSize) {
  expect_error_naming({{"RANK", "1"}}, {"RANK", "WORLD_SIZE"});
}

TEST(DetectLaunchErrors, WorldSizeWithoutRank) {
  expect_error_naming({{"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}}, {"WORLD_SIZE", "RANK"});
}

TEST(DetectLaunchErrors, LocalRankNotBelowLocalWorldSize) {
  expect_error_naming({{"RANK", "1"},
                       {"WORLD_SIZE", "4"},
                       {"LOCAL_RANK", "2"},
                       {"LOCAL_WORLD_SIZE", "2"},
                       {"MASTER_ADDR", "h"},
                       {"MASTER_PORT", "1"}},
                      {"LOCAL_RANK", "LOCAL_WORLD_SIZE"});
}

TEST(DetectLaunchErrors, LocalWorldSizeAboveWorldSize) {
  expect_error_naming({{"RANK", "0"},
                       {"WORLD_SIZE", "2"},
                       {"LOCAL_RANK", "0"},
                       {"LOCAL_WORLD_SIZE", "4"},
                       {"MASTER_ADDR", "h"},
                       {"MASTER_PORT", "1"}},
                      {"LOCAL_WORLD_SIZE", "WORLD_SIZE"});
}

TEST(DetectLaunchErrors, ZeroWorldSize) {
  expect_error_naming({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, {"WORLD_SIZE"});
}

TEST(DetectLaunchErrors, NotANumber) {
  expect_error_naming({{"RANK", "one"}, {"WORLD_SIZE", "2"}}, {"RANK"});
  expect_error_naming({{"RANK", "1"}, {"WORLD_SIZE", "2 "}}, {"WORLD_SIZE"});
  expect_error_naming({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, {"RANK"});
  expect_error_naming(with(test::slurm_step_example(), {{"SLURM_LOCALID", "x"}}),
                      {"SLURM_LOCALID"});
  expect_error_naming(with(test::slurm_step_example(), {{"SLURM_JOB_ID", "12a"}}),
                      {"SLURM_JOB_ID"});
  expect_error_naming({{"OMPI_COMM_WORLD_RANK", "0"},
                       {"OMPI_COMM_WORLD_SIZE", "99999999999"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}},
                      {"OMPI_COMM_WORLD_SIZE"});
}

TEST(DetectLaunchErrors, MasterAddrMissingUnderTorchrunVariables) {
  expect_error_naming({{"RANK", "0"}, {"WORLD_SIZE", "2"}}, {"RANK", "WORLD_SIZE", "MASTER_ADDR"});
  expect_error_naming({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}},
                      {"MASTER_ADDR", "MASTER_PORT"});
}

TEST(DetectLaunchErrors, MasterPortOutOfRange) {
  expect_error_naming(with(test::slurm_step_example(), {{"MASTER_PORT", "70000"}}),
                      {"MASTER_PORT"});
  expect_error_naming(with(test::slurm_step_example(), {{"MASTER_PORT", "0"}}), {"MASTER_PORT"});
}

TEST(DetectLaunchErrors, NodelistThatDoesNotParse) {
  expect_error_naming(with(test::slurm_step_example(), {{"SLURM_JOB_NODELIST", "n[1-4"}}),
                      {"SLURM_JOB_NODELIST"});
  expect_error_naming(with(test::slurm_step_example(), {{"SLURM_JOB_NODELIST", "n[4-1]"}}),
                      {"SLURM_JOB_NODELIST"});
}

TEST(DetectLaunchErrors, SlurmCountsThatDisagree) {
  expect_error_naming(with(test::slurm_step_example(), {{"SLURM_STEP_TASKS_PER_NODE", "2(x3)"}}),
                      {"SLURM_STEP_TASKS_PER_NODE", "SLURM_NNODES"});
  expect_error_naming(with(test::slurm_step_example(), {{"SLURM_STEP_TASKS_PER_NODE", "3(x4)"}}),
                      {"SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS"});
  expect_error_naming(with(test::slurm_step_example(), {{"SLURM_STEP_TASKS_PER_NODE", "2(x"}}),
                      {"SLURM_STEP_TASKS_PER_NODE"});
  expect_error_naming(with(test::slurm_step_example(), {{"SLURM_NODEID", "4"}}),
                      {"SLURM_NODEID", "SLURM_NNODES"});
  expect_error_naming(with(test::slurm_step_example(), {{"SLURM_PROCID", "8"}}),
                      {"SLURM_PROCID", "SLURM_NTASKS"});
}

TEST(DetectLaunchErrors, SlurmStepWithoutRank) {
  Environment env = test::slurm_step_example();
  env.erase("SLURM_PROCID");
  expect_error_naming(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_PROCID"});
}

TEST(DetectLaunchErrors, PartialMpiVariables) {
  expect_error_naming({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
                      {"OMPI_COMM_WORLD_LOCAL_RANK"});
  expect_error_naming({{"PMI_RANK", "0"}}, {"PMI_RANK", "PMI_SIZE"});
  expect_error_naming({{"PMIX_RANK", "0"}}, {"PMIX_RANK"});
  expect_error_naming(with(test::slurm_step_example(), {{"PMIX_RANK", "4"}}),
                      {"PMIX_RANK", "SLURM_PROCID"});
}

}  // namespace
}  // namespace cohort
