// The pure pieces of running on several nodes: how cohort run places itself
// (alone, by flags, at the rendezvous, under srun and mpirun), when it starts srun, the stop record
// agents exchange, hostfiles, and the command that starts a remote agent over ssh.
#include <gtest/gtest.h>

#include <cohort/errors.hpp>

#include "launch/node_group.hpp"
#include "launch/node_plan.hpp"
#include "launch/ssh_launch.hpp"

namespace cohort::detail {
namespace {

// What srun gives task `rank` of `nodes` nodes with `per_node` tasks each.
Environment srun_task(int rank, int nodes, int per_node) {
  const int tasks = nodes * per_node;
  return {
      {"SLURM_JOB_ID", "77"},
      {"SLURM_STEP_ID", "0"},
      {"SLURM_PROCID", std::to_string(rank)},
      {"SLURM_LOCALID", std::to_string(rank % per_node)},
      {"SLURM_NODEID", std::to_string(rank / per_node)},
      {"SLURM_NTASKS", std::to_string(tasks)},
      {"SLURM_STEP_NUM_TASKS", std::to_string(tasks)},
      {"SLURM_STEP_NUM_NODES", std::to_string(nodes)},
      {"SLURM_STEP_TASKS_PER_NODE", std::to_string(per_node) + "(x" + std::to_string(nodes) + ")"},
      {"SLURM_STEP_NODELIST", "n[1-" + std::to_string(nodes) + "]"}};
}

AgentPlan planned(Environment env, int nproc, int gpus = -1) {
  RunOptions options;
  options.command = {"./train"};
  options.nproc_per_node = nproc;
  if (gpus >= 0) env["CUDA_VISIBLE_DEVICES"] = gpus == 0 ? "" : gpus == 1 ? "0" : "0,1";
  return plan_agent(options, {}, detect_launch(env), env);
}

// What Open MPI's mpirun gives rank `rank` of `size`, `local_size` per node.
Environment mpirun_rank(int rank, int size, int local_size) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank % local_size)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local_size)},
          {"OMPI_MCA_ess_base_jobid", "5"},
          {"PMIX_NAMESPACE", "prterun-vm-5@1"},
          {"PMIX_RANK", std::to_string(rank)}};
}

TEST(PlanAgent, OneTaskPerNodeMakesOneAgentPerNode) {
  const Environment env = srun_task(2, 4, 1);
  const AgentPlan plan = planned(env, 2);
  EXPECT_EQ(plan.group.nnodes, 4);
  EXPECT_EQ(plan.group.node_rank, 2);
  EXPECT_FALSE(plan.group.serve_store);
  EXPECT_TRUE(planned(srun_task(0, 4, 1), 2).group.serve_store);
  EXPECT_EQ(plan.group.store_host, "n1");
  EXPECT_EQ(plan.group.store_port, detect_launch(env).master_port.value);
  EXPECT_EQ(plan.group.unit, "node");
  EXPECT_EQ(plan.group.node_hosts, (std::vector<std::string>{"n1", "n2", "n3", "n4"}));
  EXPECT_EQ(plan.group.token, planned(srun_task(0, 4, 1), 2).group.token);
  EXPECT_EQ(plan.node_name, AgentPlan::NodeName::launcher_node);
  EXPECT_EQ(plan.launcher_node, 2);
  EXPECT_FALSE(plan.one_worker_per_task);  // 2 workers: srun's variables describe the agent
}

TEST(PlanAgent, OneTaskOneNodeOrNoLauncherIsOneNode) {
  for (const Environment& env : {Environment{}, srun_task(0, 1, 1)}) {
    const AgentPlan plan = planned(env, 3);
    EXPECT_EQ(plan.group.nnodes, 1);
    EXPECT_EQ(plan.group.bind_host, "127.0.0.1");
    EXPECT_EQ(plan.master_addr, "127.0.0.1");
    EXPECT_EQ(plan.group.torch_port, 0);  // the agent store, on a free port
  }
}

TEST(PlanAgent, OneWorkerPerSlurmTask) {
  const AgentPlan plan = planned(srun_task(3, 2, 2), 1);
  EXPECT_EQ(plan.group.nnodes, 4);
  EXPECT_EQ(plan.group.node_rank, 3);
  EXPECT_EQ(plan.group.unit, "task");
  EXPECT_EQ(plan.launcher_node, 1);
  EXPECT_TRUE(plan.one_worker_per_task);
}

TEST(PlanAgent, SeveralTasksPerNodeAndSeveralWorkersIsRefusedWithBothForms) {
  try {
    planned(srun_task(1, 2, 2), 2);
    FAIL() << "accepted";
  } catch (const InvalidArgument& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("SLURM_STEP_TASKS_PER_NODE=2(x2)"), std::string::npos) << text;
    EXPECT_NE(text.find("`srun -N2 --ntasks-per-node=1 cohort run -n 4 PROGRAM`"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("`srun -N2 --ntasks-per-node=4 cohort run PROGRAM` (one worker per task)"),
              std::string::npos)
        << text;
  }
  try {
    planned(mpirun_rank(1, 4, 2), 2);
    FAIL() << "accepted";
  } catch (const InvalidArgument& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("`mpirun -np 8 cohort run PROGRAM` (one worker per rank)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("--map-by ppr:1:node cohort run -n 4 PROGRAM`"), std::string::npos) << text;
  }
}

TEST(PlanAgent, MoreWorkersThanTheGpusSlurmGaveIsRefused) {
  Environment env = srun_task(0, 2, 1);
  env["SLURM_GPUS_ON_NODE"] = "2";
  EXPECT_EQ(planned(env, 2).group.nnodes, 2);
  try {
    planned(env, 4);
    FAIL() << "accepted";
  } catch (const InvalidArgument& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("-n 4 workers but Slurm gave this node 2 GPUs (SLURM_GPUS_ON_NODE=2)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("--ntasks-per-node=1 cohort run"), std::string::npos) << text;
  }
}

// mpirun -np 4 cohort run: one agent per rank; rank 0's serves a store on a
// free port and tells the others through PMIx.
TEST(PlanAgent, OneWorkerPerMpiRank) {
  const AgentPlan plan = planned(mpirun_rank(1, 4, 4), 1);
  EXPECT_EQ(plan.group.nnodes, 4);
  EXPECT_EQ(plan.group.node_rank, 1);
  EXPECT_FALSE(plan.group.serve_store);
  EXPECT_TRUE(planned(mpirun_rank(0, 4, 4), 1).group.serve_store);
  EXPECT_EQ(plan.group.bind_host, "127.0.0.1");  // every rank is on this node
  EXPECT_EQ(plan.group.store_port, 0);
  EXPECT_TRUE(static_cast<bool>(plan.group.exchange));
  EXPECT_EQ(plan.node_name, AgentPlan::NodeName::host);
  EXPECT_EQ(plan.group.unit, "task");
  EXPECT_TRUE(plan.one_worker_per_task);
  // Without a key-value service, rank 0's address must come from somewhere.
  Environment bare = mpirun_rank(1, 4, 2);
  bare.erase("PMIX_NAMESPACE");
  EXPECT_THROW(planned(bare, 1), InvalidArgument);
}

TEST(PlanAgent, InsideAnotherCohortRunEveryCopyWouldRunItsOwnJob) {
  const Environment env{{"RANK", "1"},        {"WORLD_SIZE", "2"},
                        {"LOCAL_RANK", "1"},  {"LOCAL_WORLD_SIZE", "2"},
                        {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}};
  EXPECT_THROW(planned(env, 1), InvalidArgument);
}

TEST(PlanAgent, StaticAndRendezvousForms) {
  RunOptions options;
  options.command = {"./train"};
  options.nnodes = 2;
  options.master_addr = "localhost";
  options.node_rank = 1;
  AgentPlan plan = plan_agent(options, {}, detect_launch(Environment{}), {});
  EXPECT_EQ(plan.group.node_rank, 1);
  EXPECT_EQ(plan.group.store_port, 29500);
  EXPECT_FALSE(plan.group.serve_store);
  // No --node-rank: given at the rendezvous; the agent that can bind serves.
  options.node_rank = -1;
  options.rdzv_host = "localhost";
  options.rdzv_port = 5972;
  plan = plan_agent(options, {}, detect_launch(Environment{}), {});
  EXPECT_EQ(plan.group.node_rank, kNodeRankAtJoin);
  EXPECT_TRUE(plan.group.serve_if_bindable);
  EXPECT_EQ(plan.group.bind_host, "127.0.0.1");
  EXPECT_EQ(plan.group.store_port, 5972);
  // --nnodes under srun must agree with srun.
  options.nnodes = 3;
  const Environment env = srun_task(0, 2, 1);
  EXPECT_THROW(plan_agent(options, {}, detect_launch(env), env), InvalidArgument);
}

TEST(SrunForAllocation, OnlyInABatchScriptOrSallocShellOfSeveralNodes) {
  const std::vector<std::string> self{"/bin/cohort", "run", "-n", "2", "./train"};
  const Environment batch{{"SLURM_JOB_ID", "9"}, {"SLURM_JOB_NUM_NODES", "4"}};
  EXPECT_EQ(srun_for_allocation(batch, self),
            (std::vector<std::string>{"srun", "--nodes=4", "--ntasks=4", "--ntasks-per-node=1",
                                      "--kill-on-bad-exit=0", "--unbuffered", "/bin/cohort", "run",
                                      "-n", "2", "./train"}));
  Environment one_node = batch;
  one_node["SLURM_JOB_NUM_NODES"] = "1";
  EXPECT_FALSE(srun_for_allocation(one_node, self));
  Environment in_step = batch;
  in_step["SLURM_STEP_ID"] = "0";
  EXPECT_FALSE(srun_for_allocation(in_step, self));
  Environment under_mpirun = batch;
  under_mpirun["OMPI_COMM_WORLD_SIZE"] = "4";
  EXPECT_FALSE(srun_for_allocation(under_mpirun, self));
  EXPECT_FALSE(srun_for_allocation({}, self));
}

TEST(StopRecord, RoundTripsAndRefusesGarbage) {
  StopRecord record;
  record.node = 2;
  record.host = "n3";
  record.rank = 5;
  record.exit_code = 137;
  record.node_lost = false;
  record.summary = "rank 5 failed:\tkilled\nby SIGKILL";
  const auto back = StopRecord::decode(record.encode());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->node, 2);
  EXPECT_EQ(back->host, "n3");
  EXPECT_EQ(back->rank, 5);
  EXPECT_EQ(back->exit_code, 137);
  EXPECT_FALSE(back->node_lost);
  EXPECT_EQ(back->summary, "rank 5 failed: killed by SIGKILL");
  EXPECT_FALSE(StopRecord::decode(""));
  EXPECT_FALSE(StopRecord::decode("x\tn3\t5\t1\t0\tsummary"));
}

TEST(Hostfile, HostsSlotsCommentsAndMistakes) {
  const auto hosts = parse_hostfile(
      "# the cluster\nn1 slots=2\n\n  n2   # no slots\nn3 slots=4 max_slots=8\n", "hosts.txt");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "n1");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].name, "n2");
  EXPECT_EQ(hosts[1].slots, 0);
  EXPECT_EQ(hosts[2].slots, 4);
  try {
    parse_hostfile("n1\nn2 slots=two\n", "hosts.txt");
    FAIL() << "accepted";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("hosts.txt line 2"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(parse_hostfile("n1 cpus=2\n", "f"), InvalidArgument);
  EXPECT_THROW(parse_hostfile("# nothing\n", "f"), InvalidArgument);
  const auto list = parse_host_list("a:2,b,c:1");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[1].name, "b");
  EXPECT_EQ(list[1].slots, 0);
  EXPECT_THROW(parse_host_list("a:0"), InvalidArgument);
}

TEST(RemoteAgent, TheCommandCarriesOnlyTheNamedVariablesAndNeverTheToken) {
  RunOptions options;
  options.forward_env = {"BAR"};
  options.forward_env_prefixes = {"NCCL_"};
  const Environment env{{"BAR", "1"}, {"NCCL_DEBUG", "INFO"}, {"SECRET", "x"}, {"BARX", "2"}};
  const std::string command = remote_agent_command(options, "/work dir", "/bin/cohort", env);
  EXPECT_EQ(command,
            "cd '/work dir' && exec 'env' 'BAR=1' 'NCCL_DEBUG=INFO' '/bin/cohort' 'agent'");
}

TEST(RemoteAgent, ThePlanIsTheJobWithThisHostsShare) {
  RunOptions options;
  options.command = {"./train", "it's"};
  options.nproc_per_node = 2;
  options.hosts = {{"n1", 0}, {"n2", 3}};
  options.run_id = "r1";
  options.timeout = std::chrono::seconds(3);
  options.forward_env = {"BAR"};
  options.local_addr = "10.0.0.9";
  const RunPlan plan1 = remote_agent_plan(options, 1, {"10.0.0.1", 4242});
  const RunOptions& node1 = plan1.options;
  EXPECT_EQ(node1.command, options.command);
  EXPECT_EQ(node1.nproc_per_node, 3);
  EXPECT_EQ(node1.nnodes, 2);
  EXPECT_EQ(node1.node_rank, 1);
  EXPECT_EQ(node1.master_addr, "n1");
  EXPECT_EQ(node1.rdzv_host, "10.0.0.1");
  EXPECT_EQ(node1.rdzv_port, 4242);
  EXPECT_TRUE(plan1.role.store_served_elsewhere);
  EXPECT_TRUE(plan1.role.stop_on_stdin_eof);
  EXPECT_EQ(node1.timeout, std::chrono::seconds(3));
  EXPECT_EQ(node1.run_id, "r1");
  EXPECT_EQ(plan1.role.node_hosts, (std::vector<std::string>{"n1", "n2"}));
  // It starts workers, not more agents; this host's address is not its.
  EXPECT_TRUE(node1.hosts.empty());
  EXPECT_TRUE(node1.forward_env.empty());
  EXPECT_EQ(node1.local_addr, "");
  // A host without slots runs nproc_per_node workers.
  EXPECT_EQ(remote_agent_plan(options, 0, {"h", 1}).options.nproc_per_node, 2);
}

}  // namespace
}  // namespace cohort::detail
