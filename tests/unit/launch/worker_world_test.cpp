// What each worker is told about the world: its place among the workers of
// every agent (local ranks shared by agents on one node), the launcher
// variables rewritten to describe it, and its share of the CPUs.
#include <gtest/gtest.h>

#include "env/slurm_counts.hpp"
#include "launch/launcher_variables.hpp"
#include "launch/thread_budget.hpp"
#include "launch/worker_layout.hpp"

namespace cohort::detail {
namespace {

TEST(WorkerLayout, OneAgentPerNodeWithSeveralWorkers) {
  const std::vector<AgentEntry> agents = {{2, "node 0"}, {2, "node 1"}, {2, "node 2"}};
  const WorkerLayout layout = lay_out_workers(agents, 1);
  EXPECT_EQ(layout.world_size, 6);
  EXPECT_EQ(layout.num_nodes, 3);
  EXPECT_EQ(layout.workers_per_node, (std::vector<int>{2, 2, 2}));
  ASSERT_EQ(layout.mine.size(), 2u);
  EXPECT_EQ(layout.mine[1].rank, 3);
  EXPECT_EQ(layout.mine[1].local_rank, 1);
  EXPECT_EQ(layout.mine[1].local_world_size, 2);
  EXPECT_EQ(layout.mine[1].node_rank, 1);
  EXPECT_EQ(layout.ranks_on_my_node, (std::vector<int>{2, 3}));
}

// mpirun -np 4 --map-by node cohort run: agents 0 and 2 on one host, 1 and 3
// on the other; each runs one worker.
TEST(WorkerLayout, OneWorkerPerTaskSharesTheNodesLocalRanks) {
  const std::vector<AgentEntry> agents = {
      {1, "host a"}, {1, "host b"}, {1, "host a"}, {1, "host b"}};
  const WorkerLayout layout = lay_out_workers(agents, 2);
  EXPECT_EQ(layout.num_nodes, 2);
  ASSERT_EQ(layout.mine.size(), 1u);
  EXPECT_EQ(layout.mine[0].rank, 2);
  EXPECT_EQ(layout.mine[0].local_rank, 1);
  EXPECT_EQ(layout.mine[0].local_world_size, 2);
  EXPECT_EQ(layout.mine[0].node_rank, 0);
  EXPECT_EQ(layout.ranks_on_my_node, (std::vector<int>{0, 2}));
  EXPECT_EQ(lay_out_workers(agents, 3).mine[0].local_rank, 1);
  EXPECT_EQ(lay_out_workers(agents, 1).mine[0].local_rank, 0);
}

TEST(SlurmCounts, FormatIsTheInverseOfParse) {
  EXPECT_EQ(format_slurm_counts(std::vector<int>{2, 2, 2, 1}), "2(x3),1");
  EXPECT_EQ(format_slurm_counts(std::vector<int>{4}), "4");
  EXPECT_EQ(format_slurm_counts(std::vector<int>{1, 2, 1}), "1,2,1");
  for (const char* text : {"2(x3),1", "1,2(x2)", "8"}) {
    EXPECT_EQ(format_slurm_counts(*parse_slurm_counts(text)), text);
  }
}

// srun -N2 --ntasks-per-node=1 cohort run -n 2: what srun set for node 1's
// task, as it reaches that node's second worker.
TEST(LauncherVariables, SlurmsDescribeTheWorker) {
  Environment env{{"SLURM_JOB_ID", "7"},
                  {"SLURM_PROCID", "1"},
                  {"SLURM_LOCALID", "0"},
                  {"SLURM_NODEID", "1"},
                  {"SLURM_NTASKS", "2"},
                  {"SLURM_NPROCS", "2"},
                  {"SLURM_STEP_NUM_TASKS", "2"},
                  {"SLURM_TASKS_PER_NODE", "1(x2)"},
                  {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
                  {"SLURM_GTIDS", "1"},
                  {"SLURM_JOB_NUM_NODES", "2"},
                  {"SLURM_STEP_NODELIST", "n[1-2]"}};
  const WorkerLayout layout = lay_out_workers({{2, "node 0"}, {2, "node 1"}}, 1);
  describe_worker_to_launchers(env, layout.mine[1], layout);
  const Environment expected{{"SLURM_JOB_ID", "7"},
                             {"SLURM_PROCID", "3"},
                             {"SLURM_LOCALID", "1"},
                             {"SLURM_NODEID", "1"},
                             {"SLURM_NTASKS", "4"},
                             {"SLURM_NPROCS", "4"},
                             {"SLURM_STEP_NUM_TASKS", "4"},
                             {"SLURM_TASKS_PER_NODE", "2(x2)"},
                             {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                             {"SLURM_GTIDS", "2,3"},
                             {"SLURM_JOB_NUM_NODES", "2"},
                             {"SLURM_STEP_NODELIST", "n[1-2]"},
                             {"SLURM_OVERCOMMIT", "1"}};
  EXPECT_EQ(env, expected);
  // The worker then detects, from Slurm's variables alone, exactly its place.
  const LaunchInfo info = detect_launch(env);
  EXPECT_EQ(info.rank.value, 3);
  EXPECT_EQ(info.world_size.value, 4);
  EXPECT_EQ(info.local_rank.value, 1);
  EXPECT_EQ(info.local_world_size.value, 2);
  EXPECT_EQ(info.node_rank.value, 1);
}

TEST(LauncherVariables, MpisDescribeTheWorkerAndAbsentOnesStayAbsent) {
  Environment env{{"OMPI_COMM_WORLD_RANK", "0"},       {"OMPI_COMM_WORLD_SIZE", "1"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                  {"OMPI_COMM_WORLD_NODE_RANK", "0"},  {"PMIX_RANK", "0"}};
  const WorkerLayout layout = lay_out_workers({{3, "host a"}}, 0);
  describe_worker_to_launchers(env, layout.mine[2], layout);
  EXPECT_EQ(env.at("OMPI_COMM_WORLD_RANK"), "2");
  EXPECT_EQ(env.at("OMPI_COMM_WORLD_SIZE"), "3");
  EXPECT_EQ(env.at("OMPI_COMM_WORLD_LOCAL_RANK"), "2");
  EXPECT_EQ(env.at("OMPI_COMM_WORLD_LOCAL_SIZE"), "3");
  EXPECT_EQ(env.at("OMPI_COMM_WORLD_NODE_RANK"), "2");
  EXPECT_EQ(env.at("PMIX_RANK"), "2");
  EXPECT_EQ(env.count("SLURM_PROCID"), 0u);
  EXPECT_EQ(env.count("PMI_RANK"), 0u);
}

TEST(ThreadBudget, SlurmsCpusThenAffinityThenTheQuota) {
  const CpuFacts eight{8, 8, 0.0};
  // Alone on a laptop: the cores, shared by the workers.
  ThreadBudget budget = thread_budget({}, eight, 2, 2);
  EXPECT_EQ(budget.threads, 4);
  EXPECT_EQ(budget.source, "CPU affinity: all 8 CPUs shared by 2 workers on this node");
  // srun --cpus-per-task=4 cohort run -n 2: the task's 4, not the host's 8.
  budget = thread_budget({{"SLURM_CPUS_PER_TASK", "4"}}, eight, 2, 2);
  EXPECT_EQ(budget.threads, 2);
  EXPECT_EQ(budget.source, "SLURM_CPUS_PER_TASK=4 shared by 2 workers of this task");
  // The job's CPUs on this node, shared by every worker there.
  budget = thread_budget({{"SLURM_CPUS_ON_NODE", "2"}}, eight, 1, 4);
  EXPECT_EQ(budget.threads, 1);
  EXPECT_EQ(budget.source, "SLURM_CPUS_ON_NODE=2 shared by 4 workers on this node");
  // A task bound to 2 cores by its launcher keeps them for its own workers.
  budget = thread_budget({}, CpuFacts{8, 2, 0.0}, 1, 4);
  EXPECT_EQ(budget.threads, 2);
  EXPECT_EQ(budget.source,
            "CPU affinity: 2 of 8 CPUs (this task's) shared by 1 worker of this task");
  // A container's quota of 3 CPUs beats the 8 it can see.
  budget = thread_budget({}, CpuFacts{8, 8, 3.0}, 3, 3);
  EXPECT_EQ(budget.threads, 1);
  EXPECT_NE(budget.source.find("cgroup CPU quota of 3 CPUs"), std::string::npos) << budget.source;
  // Never 0.
  EXPECT_EQ(thread_budget({}, CpuFacts{2, 2, 0.0}, 4, 4).threads, 1);
}

TEST(ThreadBudget, CgroupFiles) {
  EXPECT_EQ(parse_cpu_max("max 100000\n"), std::nullopt);
  EXPECT_EQ(parse_cpu_max("250000 100000\n"), 2.5);
  EXPECT_EQ(parse_cpu_max(""), std::nullopt);
  EXPECT_EQ(parse_cfs_quota("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(parse_cfs_quota("200000\n", "100000\n"), 2.0);
}

}  // namespace
}  // namespace cohort::detail
