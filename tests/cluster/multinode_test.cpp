// Tier 3, several nodes: a real Slurm cluster of four nodes, each a network
// namespace with its own hostname and address and its own sshd
// (tests/harness/netns-cluster, started and stopped by CTest fixtures).
// Every scenario of docs/launchers/ runs here with the commands shown there:
// srun one task per rank and one agent per node, sbatch (cohort run starting
// srun itself, srun inside, mpirun inside), Open MPI and MPICH over ssh,
// the static form, --hostfile, cohort::spawn, and the failures: a worker
// killed, an agent killed, a cable cut, a node that never arrives, the
// launcher killed. Bounds on waits only separate "ended" from "hung".
// Jobs on fewer than four nodes name them (`-w n[1-2]`): Slurm otherwise
// places a job on whichever nodes are idle, and a node still completing the
// previous test's job would move the ranks the test expects on n1 to n3.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cohort/config.hpp>

#include "core/strings.hpp"
#include "support/files.hpp"
#include "support/skip.hpp"
#include "support/subprocess.hpp"
#include "support/text.hpp"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using test::lines_with;

const fs::path kCluster = COHORT_TEST_NETNS_DIR;
const std::string kCohort = COHORT_CLI_PATH;
const std::string kReduction = COHORT_REDUCTION_PATH;
// The interpreter with PyTorch: Debian 12's, unless the suite names another
// (the "torch2:" tests: Debian 13's PyTorch 2.6, tests/harness/torch2-python).
const std::string kTorchPython =
    std::getenv("COHORT_TEST_PYTHON") ? std::getenv("COHORT_TEST_PYTHON") : "/usr/bin/python3";
const std::string kCommTest = COHORT_COMM_TEST_PATH;
const std::string kSpawn = COHORT_SPAWN_PATH;

// "[n3:gloo] process 5/8" -> "n3": the host each reduction line came from
// (over any backend: mpi under Open MPI's mpirun, shm on one node, hier
// when nodes run several ranks).
std::multiset<std::string> hosts_of(const std::vector<std::string>& lines) {
  std::multiset<std::string> hosts;
  for (const std::string& line : lines) {
    const std::size_t end = line.find("] process ");
    const std::size_t start = line.rfind('[', end);
    const std::size_t colon = line.rfind(':', end);
    if (end == std::string::npos || start == std::string::npos || colon == std::string::npos ||
        colon < start) {
      continue;
    }
    const std::string backend = line.substr(colon + 1, end - colon - 1);
    if (backend == "gloo" || backend == "mpi" || backend == "self" || backend == "shm" ||
        backend == "hier") {
      hosts.insert(line.substr(start + 1, colon - start - 1));
    }
  }
  return hosts;
}

class MultiNode : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string status = test::read_file(kCluster / "status");
    if (status.rfind("up", 0) != 0) {
      COHORT_SKIP_MISSING("no multi-node cluster: " << (status.empty()
                                                            ? "the netns_cluster_up fixture did "
                                                              "not run"
                                                            : status));
    }
    env_ = process_environment();
    env_["SLURM_CONF"] = (kCluster / "etc" / "slurm.conf").string();
    // Open MPI and Hydra on the nodes' own network only.
    env_["OMPI_MCA_oob_tcp_if_include"] = "10.77.0.0/24";
    env_["OMPI_MCA_btl_tcp_if_include"] = "10.77.0.0/24";
    env_["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
    env_["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
    fs::create_directories(pids_);
  }

  // Runs argv on `node` ("head", "n1" ...), in this directory.
  test::ProcessResult on(const std::string& node, std::vector<std::string> argv,
                         seconds timeout = seconds(120)) {
    argv.insert(argv.begin(), {(kCluster / "bin" / "on").string(), node});
    test::ProcessOptions options;
    options.env = env_;
    options.timeout = timeout;
    return test::run_process(argv, options);
  }

  std::unique_ptr<test::Subprocess> start_on(const std::string& node, std::vector<std::string> argv,
                                             seconds timeout = seconds(120)) {
    argv.insert(argv.begin(), {(kCluster / "bin" / "on").string(), node});
    test::ProcessOptions options;
    options.env = env_;
    options.timeout = timeout;
    return std::make_unique<test::Subprocess>(argv, options);
  }

  std::string ssh() const { return (kCluster / "bin" / "cluster-ssh").string(); }
  std::string hostfile() const { return (kCluster / "etc" / "hostfile").string(); }

  // `sbatch --wait ARGS` of a script holding `body`, from the login node:
  // sbatch's result (the job's exit code), with the job's output as `out`.
  test::ProcessResult sbatch(std::vector<std::string> args, const std::string& body) {
    const fs::path script = temp_.path() / "job.sh";
    const fs::path output = temp_.path() / "job.out";
    std::ofstream(script) << "#!/bin/bash\n" << body << "\n";
    fs::permissions(script, fs::perms::owner_all);
    args.insert(args.begin(), {"sbatch", "--wait", "-o", output.string()});
    args.push_back(script.string());
    test::ProcessResult result = on("head", args);
    result.out = test::read_file(output);
    return result;
  }

  // srun with its tasks' output in files (srun -o/-e), which `with_task_output`
  // adds to the result afterwards. When one task is killed and the others
  // end within about 100 ms, srun can get the job's end ("srun: Force
  // Terminated StepId=…") before it has forwarded their last lines, and
  // loses them: the agents' own logs show the job went as it should.
  std::vector<std::string> srun_to_files(std::vector<std::string> argv) const {
    argv.insert(argv.begin() + 1, {"-o", (temp_.path() / "task%t.out").string(), "-e",
                                   (temp_.path() / "task%t.err").string()});
    return argv;
  }
  test::ProcessResult with_task_output(test::ProcessResult result) const {
    for (const auto& entry : fs::directory_iterator(temp_.path())) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("task", 0) != 0) continue;
      (name.find(".out") != std::string::npos ? result.out : result.err) +=
          test::read_file(entry.path());
      fs::remove(entry.path());
    }
    return result;
  }

  // A worker that records its pid (to check later that it is gone), then
  // runs `then` in the shell.
  std::vector<std::string> recording_worker(const std::string& then) const {
    // Written aside, then renamed: a reader never sees a half-written file.
    return {"sh", "-c", "echo $$ > \"$0/.$RANK\" && mv \"$0/.$RANK\" \"$0/$RANK\"; " + then,
            pids_.string()};
  }

  // Waits until every recorded worker is gone; false if some outlive `bound`.
  bool recorded_workers_end(seconds bound) const {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    for (;;) {
      bool any = false;
      for (const auto& entry : fs::directory_iterator(pids_)) {
        if (entry.path().filename().string().front() == '.') continue;
        any = any || test::process_runs(std::stoi(test::read_file(entry.path())));
      }
      if (!any) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  std::vector<test::ProcessResult> cut_job(const std::string& port, const std::string& heartbeat,
                                           const std::string& cut, const std::string& nnodes = "4",
                                           const std::string& worker = "exec sleep 120");

  std::size_t recorded_workers() const {
    std::size_t count = 0;
    for (const auto& entry : fs::directory_iterator(pids_))
      count += entry.path().filename().string().front() != '.';
    return count;
  }

  // One line "has data N" per rank, from the expected hosts.
  void expect_reduction(const test::ProcessResult& result, int ranks,
                        const std::multiset<std::string>& hosts) {
    EXPECT_EQ(result.exit_code, 0) << test::describe(result);
    const auto lines = lines_with(result.out, "has data " + std::to_string(ranks));
    EXPECT_EQ(lines.size(), static_cast<std::size_t>(ranks)) << test::describe(result);
    EXPECT_EQ(hosts_of(lines), hosts) << test::describe(result);
  }

  test::TempDir temp_{"cohort-multinode"};
  fs::path pids_ = temp_.path() / "pids";
  Environment env_;
};

const std::multiset<std::string> kFourNodesTwoEach{"n1", "n1", "n2", "n2", "n3", "n3", "n4", "n4"};
const std::multiset<std::string> kTwoNodesTwoEach{"n1", "n1", "n2", "n2"};

// docs/launchers/srun.md
TEST_F(MultiNode, SrunOneAgentPerNodeRunsEightRanksOnFourHosts) {
  auto result =
      on("head", {"srun", "-N4", "--ntasks-per-node=1", kCohort, "run", "-n", "2", kReduction});
  expect_reduction(result, 8, kFourNodesTwoEach);
  // Ranks are contiguous per node: the console prefix is [host:rank].
  for (auto [host, first] :
       std::map<std::string, int>{{"n1", 0}, {"n2", 2}, {"n3", 4}, {"n4", 6}}) {
    EXPECT_EQ(lines_with(result.out, "[" + host + ":" + std::to_string(first) + "]").size(), 1u)
        << host << "\n"
        << result.out;
  }
}

// Workers on the nodes that do not serve the job's store reach it through
// their own agent's relay (a port on loopback, docs/rendezvous.md), and the
// job runs as before; COHORT_STORE_RELAY=0 sends them to the store itself.
TEST_F(MultiNode, WorkersMeetThroughTheirNodesRelay) {
  const std::vector<std::string> job{"srun",
                                     "-N4",
                                     "--ntasks-per-node=1",
                                     kCohort,
                                     "run",
                                     "-n",
                                     "2",
                                     "sh",
                                     "-c",
                                     "echo store $COHORT_STORE_ADDR; exec \"$0\"",
                                     kReduction};
  // Of `host`'s lines, those that say the store is on loopback.
  const auto on_loopback = [](const std::string& out, const std::string& host) {
    std::size_t count = 0;
    for (const std::string& line : lines_with(out, "store 127.0.0.1"))
      count += line.find("[" + host + ":") != std::string::npos ? 1 : 0;
    return count;
  };
  auto relayed = on("head", job);
  expect_reduction(relayed, 8, kFourNodesTwoEach);
  EXPECT_EQ(on_loopback(relayed.out, "n1"), 0u) << relayed.out;  // the store's own node
  for (const std::string host : {"n2", "n3", "n4"})
    EXPECT_EQ(on_loopback(relayed.out, host), 2u) << host << "\n" << relayed.out;
  // Over ssh the store is the launching process's, so both nodes relay; their
  // agents learn COHORT_STORE_RELAY from the run's plan, not their environment.
  std::vector<std::string> over_ssh{kCohort, "run", "--hosts", "n1:2,n2:2", "--ssh", ssh()};
  over_ssh.insert(over_ssh.end(), job.begin() + 7, job.end());
  auto relayed_over_ssh = on("head", over_ssh);
  expect_reduction(relayed_over_ssh, 4, kTwoNodesTwoEach);
  for (const std::string host : {"n1", "n2"}) {
    EXPECT_EQ(on_loopback(relayed_over_ssh.out, host), 2u) << host << "\n" << relayed_over_ssh.out;
  }
  env_["COHORT_STORE_RELAY"] = "0";
  auto direct = on("head", job);
  expect_reduction(direct, 8, kFourNodesTwoEach);
  EXPECT_EQ(lines_with(direct.out, "store 127.0.0.1").size(), 0u) << direct.out;
  auto direct_over_ssh = on("head", over_ssh);
  expect_reduction(direct_over_ssh, 4, kTwoNodesTwoEach);
  EXPECT_EQ(lines_with(direct_over_ssh.out, "store 127.0.0.1").size(), 0u) << direct_over_ssh.out;
}

// The hier backend passes the collective conformance suite with its ranks
// as processes on two hosts, two each (tests/comm/conformance_test.cpp, entry
// hier_cluster), and is what cohort::init() chooses for such a job.
TEST_F(MultiNode, HierPassesTheConformanceSuite) {
  if (!COHORT_WITH_HIER) GTEST_SKIP() << "no hier backend in this build";
  auto chosen = on("head", {"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=2", kReduction});
  expect_reduction(chosen, 4, kTwoNodesTwoEach);
  EXPECT_EQ(lines_with(chosen.out, ":hier] process ").size(), 4u) << chosen.out;
  env_["COHORT_CONFORMANCE_CHILD"] = "1";
  const std::string filter = "--gtest_filter=Backends/Conformance.*/hier_cluster_world4";
  auto result =
      on("head", {"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=2", kCommTest, filter},
         seconds(300));
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(lines_with(result.out,
                       "[       OK ] Backends/Conformance.AllReduceEveryTypeOpAndCount/"
                       "hier_cluster_world4")
                .size(),
            4u)
      << test::describe(result);
  EXPECT_TRUE(lines_with(result.out, "[  FAILED  ]").empty()) << test::describe(result);
}

TEST_F(MultiNode, SrunOneTaskPerRankNeedsNoLauncher) {
  expect_reduction(on("head", {"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=2", kReduction}),
                   4, kTwoNodesTwoEach);
}

TEST_F(MultiNode, SrunOneTaskManyWorkers) {
  auto result =
      on("head", {"srun", "-N1", "-w", "n1", "-n1", kCohort, "run", "-n", "2", kReduction});
  expect_reduction(result, 2, {"n1", "n1"});
}

TEST_F(MultiNode, SrunGeometryThatMakesNoSenseIsRefusedWithTheTwoWorkingForms) {
  auto result = on("head", {"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=2", kCohort, "run",
                            "-n", "2", kReduction});
  EXPECT_NE(result.exit_code, 0) << test::describe(result);
  EXPECT_NE(result.err.find("srun -N2 --ntasks-per-node=1 cohort run -n 4 PROGRAM"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("srun -N2 --ntasks-per-node=4 cohort run PROGRAM` (one worker per "
                            "task)"),
            std::string::npos)
      << result.err;
  EXPECT_TRUE(lines_with(result.out, "has data").empty()) << result.out;
}

TEST_F(MultiNode, SpawnStartsTheWorkersOfEachNode) {
  auto result = on("head", {"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=1", kSpawn, "2"});
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  const auto lines = lines_with(result.out, "of 4 has data 4");
  ASSERT_EQ(lines.size(), 4u) << test::describe(result);
  for (const char* expected :
       {"[n1] spawned worker 0 (local 0)", "[n1] spawned worker 1 (local 1)",
        "[n2] spawned worker 2 (local 0)", "[n2] spawned worker 3 (local 1)"}) {
    EXPECT_NE(result.out.find(expected), std::string::npos) << expected << "\n" << result.out;
  }
}

// docs/launchers/sbatch.md: the tutorial form, and cohort run starting srun itself.
TEST_F(MultiNode, SbatchWithSrunInsideAndWithCohortRunAlone) {
  for (const std::string& line : {"srun --ntasks-per-node=1 " + kCohort + " run -n 2 " + kReduction,
                                  kCohort + " run -n 2 " + kReduction}) {
    SCOPED_TRACE(line);
    expect_reduction(sbatch({"-N4", "--ntasks-per-node=1"}, line), 8, kFourNodesTwoEach);
  }
}

TEST_F(MultiNode, SbatchPassesTheFailedWorkersExitCodeThrough) {
  const auto result = sbatch({"-N2", "-w", "n[1-2]", "--ntasks-per-node=1"},
                             kCohort + " run -n 2 sh -c '[ $RANK = 3 ] && exit 3; sleep 30'");
  EXPECT_EQ(result.exit_code, 3) << test::describe(result);
  EXPECT_NE(result.out.find("rank 3 failed: exited with code 3"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("host n2, rank 3"), std::string::npos) << result.out;
}

// docs/launchers/mpirun.md
TEST_F(MultiNode, SbatchWithMpirunInside) {
  expect_reduction(
      sbatch({"-N2", "-w", "n[1-2]", "--ntasks-per-node=2"}, "mpirun -np 4 " + kReduction), 4,
      kTwoNodesTwoEach);
}

TEST_F(MultiNode, OpenMpiOverSshFindsRankZeroThroughPmix) {
  if (test::find_in_path("mpirun").empty()) COHORT_SKIP_MISSING("Open MPI's mpirun is missing");
  expect_reduction(on("head", {"mpirun", "--hostfile", hostfile(), "--mca", "plm_rsh_agent", ssh(),
                               "-np", "4", kReduction}),
                   4, kTwoNodesTwoEach);
}

TEST_F(MultiNode, MpichOverSshFindsRankZeroThroughPmiWire) {
  if (test::find_in_path("mpirun.mpich").empty()) COHORT_SKIP_MISSING("mpirun.mpich is missing");
  expect_reduction(on("head", {"mpirun.mpich", "-launcher", "ssh", "-launcher-exec", ssh(),
                               "-iface", "eth0", "-hosts", "n1:2,n2:2", "-np", "4", kReduction}),
                   4, kTwoNodesTwoEach);
}

// docs/launchers/static.md
TEST_F(MultiNode, StaticFormOneCommandPerNode) {
  const std::vector<std::string> common{kCohort, "run",           "--nnodes", "2",  "--master-addr",
                                        "n1",    "--master-port", "29400",    "-n", "2"};
  // The job's secret, one way on each node: a file only its owner reads,
  // and the variable.
  const std::string secret = "0123456789abcdef0123456789abcdef";
  const fs::path token_file = temp_.path() / "token";
  std::ofstream(token_file) << secret << "\n";
  fs::permissions(token_file, fs::perms::owner_read | fs::perms::owner_write);
  auto second = common;
  second.insert(second.end(), {"--node-rank", "1", kReduction});
  auto first = common;
  first.insert(first.end(), {"--token-file", token_file.string(), "--node-rank", "0", kReduction});
  env_["COHORT_JOB_TOKEN"] = secret;
  auto node1 = start_on("n2", second);
  env_.erase("COHORT_JOB_TOKEN");
  auto node0 = on("n1", first);
  auto other = node1->finish();
  EXPECT_EQ(other.exit_code, 0) << test::describe(other);
  node0.out += other.out;
  expect_reduction(node0, 4, kTwoNodesTwoEach);
  // Workers get a MASTER_PORT of their own, never the agents' store port.
  EXPECT_EQ(node0.out.find("[n1:29400]"), std::string::npos) << node0.out;
}

// A tutorial's static two-node command with `cohort run` in place of
// `python -m torch.distributed.launch`, nothing else: with no secret given,
// the agents use the per-user one, which the nodes (one home directory
// here, as on a cluster with shared homes) read alike. Another user's agent
// has another secret, and the store refuses it with what to do.
TEST_F(MultiNode, TheStaticFormUsesThePerUserSecretAndRefusesAnotherUser) {
  if (geteuid() != 0) COHORT_SKIP_MISSING("running an agent as another user needs root");
  const fs::path home = temp_.path() / "home";
  const fs::path other_home = temp_.path() / "other-home";
  fs::create_directories(home);
  fs::create_directories(other_home);
  ASSERT_EQ(chown(other_home.c_str(), 65534, 65534), 0);                         // nobody's
  fs::permissions(temp_.path(), fs::perms::others_exec, fs::perm_options::add);  // to reach it
  env_["HOME"] = home.string();
  env_["PET_PYTHON"] = kTorchPython;
  const std::string script = std::string(COHORT_SOURCE_DIR) + "/examples/python/reduction.py";
  const auto node = [&](int rank) {
    return std::vector<std::string>{kCohort,
                                    "run",
                                    "--nproc_per_node=2",
                                    "--nnodes=2",
                                    "--node_rank=" + std::to_string(rank),
                                    "--master_addr=n1",
                                    "--master_port=1234",
                                    script};
  };
  auto node0 = start_on("n1", node(0));
  // Another user, on the other node, with the same command line.
  auto intruder = node(1);
  intruder.insert(intruder.begin(), {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                     "env", "HOME=" + other_home.string()});
  const auto refused = on("n2", intruder);
  EXPECT_EQ(refused.exit_code, 2) << test::describe(refused);
  EXPECT_NE(refused.err.find("refused node 1's secret, the per-user one in " +
                             (other_home / ".cohort" / "secret").string()),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("--token-file"), std::string::npos) << refused.err;
  const auto node1 = on("n2", node(1));
  EXPECT_EQ(node1.exit_code, 0) << test::describe(node1);
  auto first = node0->finish();
  EXPECT_EQ(first.exit_code, 0) << test::describe(first);
  const auto lines = lines_with(first.out + node1.out, "has data tensor([4.])");
  EXPECT_EQ(lines.size(), 4u) << first.out << node1.out;
  EXPECT_EQ(hosts_of(lines), kTwoNodesTwoEach) << first.out << node1.out;
  // Made on first use, only the user's: the file 0600 in a directory 0700.
  struct stat info {};
  ASSERT_EQ(stat((home / ".cohort").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((home / ".cohort" / "secret").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

// A per-user secret that others can read is refused, not used; --insecure
// runs without one.
TEST_F(MultiNode, AnOpenPerUserSecretIsRefused) {
  const fs::path home = temp_.path() / "home";
  fs::create_directories(home / ".cohort");
  fs::permissions(home / ".cohort", fs::perms::owner_all);
  std::ofstream(home / ".cohort" / "secret") << "0123456789abcdef0123456789abcdef\n";
  fs::permissions(home / ".cohort" / "secret",
                  fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
  env_["HOME"] = home.string();
  auto result = on("n1", {kCohort, "run", "--nnodes", "2", "--node-rank", "0", "--master-addr",
                          "n1", "-n", "1", "true"});
  EXPECT_EQ(result.exit_code, 2) << test::describe(result);
  EXPECT_NE(result.err.find("can be reached by others (mode 0604): a secret must not be; chmod "
                            "600 " +
                            (home / ".cohort" / "secret").string()),
            std::string::npos)
      << result.err;
}

TEST_F(MultiNode, ANodeThatNeverArrivesIsNamedWithTheAddress) {
  auto result = on("n1", {kCohort, "run", "--insecure", "--nnodes", "3", "--node-rank", "0",
                          "--master-addr", "n1", "--rdzv-timeout", "2", "-n", "1", "true"});
  EXPECT_NE(result.exit_code, 0) << test::describe(result);
  EXPECT_NE(result.err.find("2 of 3 nodes did not arrive within 2 s: node 1, node 2."),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("n1:29500"), std::string::npos) << result.err;
}

// docs/launchers/hostfile.md
TEST_F(MultiNode, HostfileStartsAnAgentPerHostAndForwardsTheNamedVariables) {
  env_["FOO_A"] = "a";
  env_["FOO_B"] = "b";
  env_["BAR"] = "bar";
  env_["NOT_FORWARDED"] = "secret";
  auto result = on("head", {kCohort, "run", "--hostfile", hostfile(), "--ssh", ssh(), "--env",
                            "BAR", "--env-prefix", "FOO_", "-n", "2", "sh", "-c",
                            "echo vars $FOO_A $FOO_B $BAR ${NOT_FORWARDED:-none}"});
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(lines_with(result.out, "vars a b bar none").size(), 8u) << test::describe(result);
  expect_reduction(on("head", {kCohort, "run", "--hosts", "n1:2,n2:2", "--ssh", ssh(), kReduction}),
                   4, kTwoNodesTwoEach);
}

TEST_F(MultiNode, KillingTheHostfileLauncherLeavesNoWorkerOnAnyNode) {
  auto launcher = start_on("head", [&] {
    std::vector<std::string> argv{kCohort, "run", "--hostfile", hostfile(),
                                  "--ssh", ssh(), "-n",         "2"};
    for (std::string& word : recording_worker("exec sleep 120"))
      argv.push_back(std::move(word));
    return argv;
  }());
  for (int i = 0; i < 200 && recorded_workers() < 8; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(recorded_workers(), 8u);
  // `on` execs nsenter, which execs cohort: the Subprocess's pid is the launcher.
  kill(launcher->pid(), SIGKILL);
  launcher->finish();
  EXPECT_TRUE(recorded_workers_end(seconds(30)));
}

// --max-restarts across nodes, job-wide: a failure on one node restarts every
// node's workers, with the next TORCHELASTIC_RESTART_COUNT, a fresh
// MASTER_PORT and the same run id; the budget counts the job's restarts, not
// each node's; the exit status is the last attempt's first failure.
// Each worker says who it is, then waits until all `ranks` of its attempt
// did (files in `dir`), so that a failure never cuts another's line off.
std::string restart_worker(const fs::path& dir, int ranks, const std::string& fail_when) {
  fs::create_directories(dir);
  const std::string said =
      detail::cat("ls ", dir.string(), " | grep -c \"^$TORCHELASTIC_RESTART_COUNT\\.\"");
  return detail::cat(
      "echo \"attempt $TORCHELASTIC_RESTART_COUNT rank $RANK port $MASTER_PORT run "
      "$TORCHELASTIC_RUN_ID\"; touch ",
      dir.string(), "/$TORCHELASTIC_RESTART_COUNT.$RANK; while [ $(", said, ") -lt ", ranks,
      " ]; do sleep 0.05; done; ", fail_when, "; exit 0");
}

// Every line "attempt A rank R port P run I" of `out`, as (A, P, I) per rank.
std::map<std::pair<int, int>, std::pair<std::string, std::string>> attempts_of(
    const std::string& out) {
  std::map<std::pair<int, int>, std::pair<std::string, std::string>> seen;
  for (const std::string& line : lines_with(out, "attempt ")) {
    std::istringstream words(line.substr(line.find("attempt ")));
    std::string word, port, run;
    int attempt = -1, rank = -1;
    words >> word >> attempt >> word >> rank >> word >> port >> word >> run;
    seen[{attempt, rank}] = {port, run};
  }
  return seen;
}

TEST_F(MultiNode, RestartsEveryNodeTogetherOnceAFailureAnywhere) {
  // Rank 3 (node n2) fails in the first attempt only.
  const std::string fail = "[ \"$RANK:$TORCHELASTIC_RESTART_COUNT\" = 3:0 ] && exit 3";
  const std::vector<std::string> srun{"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=1"};
  struct Form {
    std::vector<std::string> argv;
    bool fresh_port;  // rank 0 listens on MASTER_PORT; else it is the agent store's
  };
  std::vector<Form> forms{
      {{kCohort, "run", "-n", "2"}, false},
      {{kCohort, "run", "-n", "2", "--no-agent-store"}, true},
      {{kCohort, "run", "--hosts", "n1:2,n2:2", "--ssh", ssh()}, false},
  };
  forms[0].argv.insert(forms[0].argv.begin(), srun.begin(), srun.end());
  forms[1].argv.insert(forms[1].argv.begin(), srun.begin(), srun.end());
  for (std::size_t i = 0; i < forms.size(); ++i) {
    Form& form = forms[i];
    const std::string worker = restart_worker(temp_.path() / detail::cat("said", i), 4, fail);
    form.argv.insert(form.argv.end(), {"--max-restarts", "1", "sh", "-c", worker});
    SCOPED_TRACE(detail::join(form.argv, " "));
    const auto result = on("head", form.argv, seconds(180));
    EXPECT_EQ(result.exit_code, 0) << test::describe(result);
    const auto seen = attempts_of(result.out);
    ASSERT_EQ(seen.size(), 8u) << test::describe(result);  // 4 ranks × 2 attempts
    std::set<std::string> ports[2], runs;
    for (const auto& [key, value] : seen) {
      ports[key.first].insert(value.first);
      runs.insert(value.second);
    }
    ASSERT_EQ(ports[0].size(), 1u) << result.out;
    ASSERT_EQ(ports[1].size(), 1u) << result.out;
    EXPECT_GT(std::stoi(*ports[1].begin()), 0) << result.out;
    EXPECT_EQ(*ports[0].begin() != *ports[1].begin(), form.fresh_port) << result.out;
    EXPECT_EQ(runs.size(), 1u) << result.out;
    EXPECT_NE(result.err.find("restarting"), std::string::npos) << test::describe(result);
  }
}

// The static form (one command per node), as docs/launchers/static.md starts it.
TEST_F(MultiNode, TheStaticFormRestartsBothNodes) {
  const std::string worker = restart_worker(
      temp_.path() / "said", 4, "[ \"$RANK:$TORCHELASTIC_RESTART_COUNT\" = 0:0 ] && exit 3");
  env_["COHORT_JOB_TOKEN"] = "0123456789abcdef0123456789abcdef";
  auto node_argv = [&](int node) {
    return std::vector<std::string>{kCohort,
                                    "run",
                                    "--nnodes",
                                    "2",
                                    "--node-rank",
                                    std::to_string(node),
                                    "--master-addr",
                                    "n1",
                                    "--master-port",
                                    "29412",
                                    "-n",
                                    "2",
                                    "--max-restarts",
                                    "1",
                                    "sh",
                                    "-c",
                                    worker};
  };
  auto second = start_on("n2", node_argv(1), seconds(180));
  auto first = on("n1", node_argv(0), seconds(180));
  auto other = second->finish();
  EXPECT_EQ(first.exit_code, 0) << test::describe(first);
  EXPECT_EQ(other.exit_code, 0) << test::describe(other);
  const auto seen = attempts_of(first.out + other.out);
  EXPECT_EQ(seen.size(), 8u) << first.out << other.out;
  EXPECT_NE(first.err.find("the job restarted 1 time"), std::string::npos) << first.err;
}

TEST_F(MultiNode, TheRestartBudgetIsTheJobsNotEachNodes) {
  // Rank 1 (n1) fails in attempt 0, rank 3 (n2) in attempt 1: one restart
  // for the job, so the second failure ends it, with its exit code.
  const std::string worker = restart_worker(
      temp_.path() / "said", 4,
      "case \"$RANK:$TORCHELASTIC_RESTART_COUNT\" in 1:0) exit 3;; 3:1) exit 4;; esac; sleep 30");
  const auto result = on("head",
                         {"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=1", kCohort, "run",
                          "-n", "2", "--max-restarts", "1", "sh", "-c", worker},
                         seconds(180));
  EXPECT_EQ(result.exit_code, 4) << test::describe(result);
  const auto seen = attempts_of(result.out);
  EXPECT_EQ(seen.count({2, 0}), 0u) << "a third attempt ran\n" << result.out;
  EXPECT_NE(result.err.find("the job restarted 1 time"), std::string::npos)
      << test::describe(result);
  EXPECT_NE(result.err.find("attempt 1: rank 1 failed: exited with code 3"), std::string::npos)
      << test::describe(result);
  EXPECT_NE(result.err.find("attempt 2: rank 3 failed: exited with code 4"), std::string::npos)
      << test::describe(result);
}

// An unmodified PyTorch script across nodes, under srun and over ssh. On
// n2, whose agent does not serve the job's store, MASTER_ADDR:MASTER_PORT
// is the agent's relay (127.0.0.1), and gloo still connects across nodes.
TEST_F(MultiNode, PyTorchScriptUnderSrunAndHostfile) {
  const std::string python = kTorchPython;
  if (test::run_process({python, "-c", "import torch.distributed"}).exit_code != 0) {
    COHORT_SKIP_MISSING(python << " cannot import torch (scripts/install-deps test)");
  }
  const std::string script = std::string(COHORT_SOURCE_DIR) + "/examples/python/reduction.py";
  for (const auto& command :
       {std::vector<std::string>{"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=1", kCohort,
                                 "run", "--python", python, "-n", "2", script},
        std::vector<std::string>{kCohort, "run", "--hosts", "n1:2,n2:2", "--ssh", ssh(), "--python",
                                 python, script}}) {
    SCOPED_TRACE(command.front());
    const auto result = on("head", command);
    EXPECT_EQ(result.exit_code, 0) << test::describe(result);
    const auto lines = lines_with(result.out, "has data tensor([4.])");
    EXPECT_EQ(lines.size(), 4u) << test::describe(result);
    EXPECT_EQ(hosts_of(lines), kTwoNodesTwoEach) << result.out;
    for (const std::string& line : lines_with(result.out, "[n2:gloo] process"))
      EXPECT_NE(line.find("] [127.0.0.1:"), std::string::npos) << line;
  }
}

// gloo, NCCL and TensorPipe are told the interface that reaches the other
// nodes (not loopback, whatever the host name resolves to), under srun and
// over ssh; a user's own choice is kept.
TEST_F(MultiNode, TheWorkersAreToldTheInterfaceBetweenNodes) {
  const std::string show =
      "echo $(hostname) $GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME $TP_SOCKET_IFNAME";
  for (const auto& command :
       {std::vector<std::string>{"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=1", kCohort,
                                 "run", "-n", "1", "--", "sh", "-c", show},
        std::vector<std::string>{kCohort, "run", "--hosts", "n1:1,n2:1", "--ssh", ssh(), "--", "sh",
                                 "-c", show}}) {
    SCOPED_TRACE(command.front());
    const auto result = on("head", command);
    ASSERT_EQ(result.exit_code, 0) << test::describe(result);
    for (const std::string node : {"n1", "n2"}) {
      const auto lines = lines_with(result.out, "] " + node + " ");
      ASSERT_EQ(lines.size(), 1u) << result.out;
      const std::vector<std::string> words = detail::split_at(
          lines[0].substr(lines[0].find("] " + node + " ") + node.size() + 3), ' ');
      ASSERT_EQ(words.size(), 3u) << lines[0];
      EXPECT_NE(words[0], "lo") << lines[0];
      EXPECT_EQ(words[1], words[0]) << lines[0];
      EXPECT_EQ(words[2], words[0]) << lines[0];
    }
  }
  const auto own = on("head", {"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=1",
                               "--export=ALL,GLOO_SOCKET_IFNAME=mine", kCohort, "run", "-n", "1",
                               "--", "sh", "-c", "echo gloo=$GLOO_SOCKET_IFNAME"});
  ASSERT_EQ(own.exit_code, 0) << test::describe(own);
  EXPECT_EQ(lines_with(own.out, "gloo=mine").size(), 2u) << own.out;
}

// "[n2:3] [n1:40271] [n2:gloo] process 3/4 has data tensor([4.]) (local rank 1)"
// -> "n2/1": where each rank of a reduction example ran, and its local rank.
std::multiset<std::string> places_of(const std::vector<std::string>& lines) {
  std::multiset<std::string> places;
  for (const std::string& line : lines) {
    const std::size_t process = line.find("] process ");
    const std::size_t open = line.rfind('[', process);
    const std::size_t colon = line.find(':', open);
    const std::size_t local = line.find("(local rank ");
    if (process == std::string::npos || open == std::string::npos || local == std::string::npos) {
      continue;
    }
    places.insert(line.substr(open + 1, colon - open - 1) + "/" +
                  line.substr(local + 12, line.find(')', local) - local - 12));
  }
  return places;
}

class MultiNodePython : public MultiNode {
 protected:
  void SetUp() override {
    MultiNode::SetUp();
    if (IsSkipped()) return;
    if (test::run_process({kPython, "-c", "import torch.distributed"}).exit_code != 0) {
      COHORT_SKIP_MISSING(kPython << " cannot import torch (scripts/install-deps test)");
    }
  }
  static std::string example(const char* name) {
    return std::string(COHORT_SOURCE_DIR) + "/examples/python/" + name;
  }
  const std::string kPython = kTorchPython;
  const std::multiset<std::string> kTwoPlacesEach = {"n1/0", "n1/1", "n2/0", "n2/1"};
};

// docs/launchers/srun.md, one worker per task: `srun ... cohort run PROGRAM`
// runs one worker per task, and LOCAL_RANK is each task's place on its node.
TEST_F(MultiNodePython, SrunOneWorkerPerTask) {
  if (IsSkipped()) return;
  for (const char* script : {"reduction.py", "reduction_slurm.py"}) {
    SCOPED_TRACE(script);
    const auto result = on("head", {"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=2", kCohort,
                                    "run", "--python", kPython, example(script)});
    EXPECT_EQ(result.exit_code, 0) << test::describe(result);
    const auto lines = lines_with(result.out, "has data tensor([4.])");
    EXPECT_EQ(lines.size(), 4u) << test::describe(result);
    EXPECT_EQ(places_of(lines), kTwoPlacesEach) << result.out;
  }
}

// docs/launchers/mpirun.md: `mpirun ... cohort run PROGRAM` over ssh, Open
// MPI and MPICH; the script that reads only OMPI_COMM_WORLD_* too.
TEST_F(MultiNodePython, MpirunOneWorkerPerRankOverSsh) {
  if (IsSkipped()) return;
  std::vector<std::vector<std::string>> commands;
  if (!test::find_in_path("mpirun").empty()) {
    for (const char* script : {"reduction.py", "reduction_mpi.py"}) {
      commands.push_back({"mpirun", "--hostfile", hostfile(), "--mca", "plm_rsh_agent", ssh(),
                          "-np", "4", kCohort, "run", "--python", kPython, example(script)});
    }
  }
  if (!test::find_in_path("mpirun.mpich").empty()) {
    commands.push_back({"mpirun.mpich", "-launcher", "ssh", "-launcher-exec", ssh(), "-iface",
                        "eth0", "-hosts", "n1:2,n2:2", "-np", "4", kCohort, "run", "--python",
                        kPython, example("reduction.py")});
  }
  if (commands.empty()) COHORT_SKIP_MISSING("neither Open MPI's nor MPICH's mpirun is installed");
  for (const auto& command : commands) {
    SCOPED_TRACE(command.front() + " " + command.back());
    const auto result = on("head", command);
    EXPECT_EQ(result.exit_code, 0) << test::describe(result);
    const auto lines = lines_with(result.out, "has data tensor([4.])");
    EXPECT_EQ(lines.size(), 4u) << test::describe(result);
    EXPECT_EQ(places_of(lines), kTwoPlacesEach) << result.out;
  }
}

// A script that takes its rank from SLURM_* under one agent per node with two
// workers: srun's variables are rewritten to describe each worker, so
// Ignite's idist rules hold (RANK == SLURM_PROCID ... on several nodes) and
// the Slurm-reading reduction finds four distinct ranks.
TEST_F(MultiNodePython, ScriptsThatReadSlurmSeeTheWorker) {
  if (IsSkipped()) return;
  for (const std::string per_node : {"1", "2"}) {
    const std::vector<std::string> workers =
        per_node == "1" ? std::vector<std::string>{"-n", "2"} : std::vector<std::string>{};
    std::vector<std::string> idist{
        "srun",  "-N2", "-w",       "n[1-2]", "--ntasks-per-node=" + per_node,
        kCohort, "run", "--python", kPython};
    idist.insert(idist.end(), workers.begin(), workers.end());
    idist.push_back(std::string(COHORT_SOURCE_DIR) + "/tests/python/idist_rules.py");
    auto result = on("head", idist);
    EXPECT_EQ(result.exit_code, 0) << test::describe(result);
    EXPECT_EQ(lines_with(result.out, "idist rules hold: rank ").size(), 4u) << result.out;
    for (int rank = 0; rank < 4; ++rank) {
      EXPECT_EQ(lines_with(result.out, "idist rules hold: rank " + std::to_string(rank) +
                                           "/4 local " + std::to_string(rank % 2) + " on 2 nodes")
                    .size(),
                1u)
          << result.out;
    }
  }
  const auto result =
      on("head", {"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=1", kCohort, "run", "--python",
                  kPython, "-n", "2", example("reduction_slurm.py")});
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(places_of(lines_with(result.out, "has data tensor([4.])")), kTwoPlacesEach)
      << result.out;
}

// torchrun's c10d form, no --node-rank: the same command on both nodes (the
// DDP tutorial's multinode line), and pytorch/examples' sbatch_run.sh under srun.
TEST_F(MultiNodePython, TorchrunsRendezvousFormAcrossNodes) {
  if (IsSkipped()) return;
  const std::vector<std::string> line{kCohort,
                                      "run",
                                      "--python",
                                      kPython,
                                      "--nnodes=2",
                                      "--nproc_per_node=2",
                                      "--rdzv_id=456",
                                      "--rdzv_backend=c10d",
                                      "--rdzv_endpoint=n1:29603",
                                      example("reduction.py")};
  env_["COHORT_JOB_TOKEN"] = "0123456789abcdef0123456789abcdef";
  auto second = start_on("n2", line);
  auto first = start_on("n1", line);
  const auto one = first->finish();
  const auto two = second->finish();
  EXPECT_EQ(one.exit_code, 0) << test::describe(one);
  EXPECT_EQ(two.exit_code, 0) << test::describe(two);
  EXPECT_EQ(places_of(lines_with(one.out + two.out, "has data tensor([4.])")), kTwoPlacesEach)
      << one.out << two.out;
  env_.erase("COHORT_JOB_TOKEN");  // under srun, MUNGE vouches for the nodes
  const auto result = on("head", {"srun",
                                  "-N2",
                                  "-w",
                                  "n[1-2]",
                                  "--ntasks-per-node=1",
                                  kCohort,
                                  "run",
                                  "--python",
                                  kPython,
                                  "--nnodes",
                                  "2",
                                  "--nproc_per_node",
                                  "1",
                                  "--rdzv_id",
                                  "4242",
                                  "--rdzv_backend",
                                  "c10d",
                                  "--rdzv_endpoint",
                                  "n1:29500",
                                  example("reduction.py")});
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(lines_with(result.out, "has data tensor([2.])").size(), 2u) << test::describe(result);
}

// One TORCHELASTIC_RUN_ID for the whole job, on every node, in every form;
// a nested srun inside a worker still starts (Slurm's task count describes
// the workers now, so it runs one task per worker, as under a per-task srun).
TEST_F(MultiNode, OneRunIdPerJobAndNestedSrun) {
  const std::string echo = "echo \"run $TORCHELASTIC_RUN_ID\"";
  auto result = on("head", {"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=1", kCohort, "run",
                            "-n", "2", "sh", "-c", echo});
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  std::set<std::string> ids;
  for (const std::string& line : lines_with(result.out, "run "))
    ids.insert(line.substr(line.find("run ")));
  EXPECT_EQ(ids.size(), 1u) << result.out;
  result = on("head", {"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=1", kCohort, "run", "-n",
                       "2", "sh", "-c",
                       "[ $RANK = 0 ] || exit 0; srun --overlap -n1 -w $(hostname) hostname; "
                       "srun --overlap hostname | sort | uniq -c | tr -s ' '"});
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(lines_with(result.out, "[n1:0] n1").size(), 1u) << result.out;
  EXPECT_EQ(lines_with(result.out, "[n1:0]  2 n1").size(), 1u) << result.out;
  EXPECT_EQ(lines_with(result.out, "[n1:0]  2 n2").size(), 1u) << result.out;
}

// The cohort::torch example, unchanged, one rank per task: srun across two
// nodes, Open MPI's mpirun over ssh.
TEST_F(MultiNode, ResNet50ExampleUnderSrunAndMpirun) {
  const std::string resnet50 = COHORT_RESNET50_PATH;
  if (resnet50.empty()) COHORT_SKIP_MISSING("built without LibTorch: no resnet50_ddp");
  const std::vector<std::string> args{resnet50,       "--synthetic", "--steps",      "2",
                                      "--batch-size", "2",           "--image-size", "32"};
  std::vector<std::vector<std::string>> commands{
      {"srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=1"}};
  if (!test::find_in_path("mpirun").empty()) {
    commands.push_back({"mpirun", "--hostfile", hostfile(), "--mca", "plm_rsh_agent", ssh(),
                        "--map-by", "node", "-np", "2"});
  }
  for (auto& command : commands) {
    SCOPED_TRACE(command.front());
    command.insert(command.end(), args.begin(), args.end());
    const auto result = on("head", command);
    EXPECT_EQ(result.exit_code, 0) << test::describe(result);
    EXPECT_EQ(lines_with(result.out, ": loss ").size(), 2u) << test::describe(result);
    EXPECT_EQ(lines_with(result.out, "images/s on 2 ranks").size(), 1u) << test::describe(result);
  }
}

// docs/security.md across hosts, tried by a second user (nobody): the
// --hostfile job's token is on no command line anywhere on the machine, and
// a Slurm job's guessable token gets nobody in, from its own node (another
// user) or from another node (no MUNGE credential of the job's user).
class MultiNodeSecurity : public MultiNode {
 protected:
  void SetUp() override {
    MultiNode::SetUp();
    if (IsSkipped()) return;
    if (geteuid() != 0) COHORT_SKIP_MISSING("acting as a second user needs root (setpriv)");
    fs::permissions(public_.path(), fs::perms::owner_all | fs::perms::group_read |
                                        fs::perms::group_exec | fs::perms::others_read |
                                        fs::perms::others_exec);
    fs::copy_file(COHORT_STORE_INTRUDER_PATH, intruder_);
  }
  // What a job's worker 0 knows: "<token> <store host> <store port> <job id>".
  std::vector<std::string> job_secrets(const fs::path& file) {
    for (int i = 0; i < 600 && !fs::exists(file); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(file);
    std::vector<std::string> words(4);
    in >> words[0] >> words[1] >> words[2] >> words[3];
    return words;
  }
  // A worker that tells the test what it knows, then stays a while.
  std::vector<std::string> telling_worker(const fs::path& file) const {
    return {"sh", "-c",
            "if [ $RANK = 0 ]; then echo \"$COHORT_JOB_TOKEN $COHORT_STORE_ADDR "
            "$COHORT_STORE_PORT ${SLURM_JOB_ID:-none}\" > " +
                file.string() + ".part && mv " + file.string() + ".part " + file.string() +
                "; fi; sleep 4"};
  }
  test::ProcessResult as_nobody(const std::string& node, std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
    return on(node, argv);
  }
  test::TempDir public_{"cohort-intruder"};
  fs::path intruder_ = public_.path() / "store_intruder";
};

TEST_F(MultiNodeSecurity, TheHostfileTokenIsOnNoCommandLine) {
  const fs::path told = temp_.path() / "told";
  std::vector<std::string> argv{kCohort, "run", "--hosts", "n1:1,n2:1", "--ssh", ssh()};
  for (std::string& word : telling_worker(told))
    argv.push_back(std::move(word));
  auto job = start_on("head", argv);
  const auto secrets = job_secrets(told);
  ASSERT_GE(secrets[0].size(), 16u) << "no token from the job";
  // Every command line on the machine (the network namespaces share one
  // process table), read as nobody reads them.
  const auto listing = as_nobody(
      "head", {"sh", "-c", "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done"});
  EXPECT_EQ(listing.exit_code, 0) << test::describe(listing);
  EXPECT_NE(listing.out.find("cohort agent"), std::string::npos)  // the agents were seen
      << listing.out;
  EXPECT_EQ(listing.out.find(secrets[0]), std::string::npos) << "the token is on a command line";
  // And with the token, nobody still cannot get in.
  const auto refused = as_nobody("head", {intruder_.string(), secrets[1], secrets[2], secrets[0]});
  EXPECT_EQ(refused.exit_code, 3) << test::describe(refused);
  EXPECT_EQ(job->finish().exit_code, 0);
}

TEST_F(MultiNodeSecurity, AGuessedSlurmTokenIsRefused) {
  const fs::path told = temp_.path() / "told";
  std::vector<std::string> argv{"srun",  "-N2", "-w", "n[1-2]", "--ntasks-per-node=1",
                                kCohort, "run", "-n", "1"};
  for (std::string& word : telling_worker(told))
    argv.push_back(std::move(word));
  auto job = start_on("head", argv);
  const auto secrets = job_secrets(told);
  const std::string guess = "slurm:" + secrets[3] + ":" + secrets[2];
  ASSERT_EQ(secrets[0], guess) << "the token is no longer the guessable one this test is about";
  // Another user on the store's node, with the guessed token...
  auto refused = as_nobody("n1", {intruder_.string(), secrets[1], secrets[2], guess});
  EXPECT_EQ(refused.exit_code, 3) << test::describe(refused);
  EXPECT_NE(refused.err.find("runs as uid 65534"), std::string::npos) << refused.err;
  // ... and on another node, with a MUNGE credential of its own user ...
  refused = as_nobody("n3", {intruder_.string(), secrets[1], secrets[2], guess, "--munge"});
  EXPECT_EQ(refused.exit_code, 3) << test::describe(refused);
  // (munged itself refuses to decode it: it was made for nobody's eyes only)
  EXPECT_NE(refused.err.find("its MUNGE credential"), std::string::npos) << refused.err;
  // ... or as the job's own user on another node, but without MUNGE.
  refused = on("n3", {intruder_.string(), secrets[1], secrets[2], guess});
  EXPECT_EQ(refused.exit_code, 3) << test::describe(refused);
  EXPECT_NE(refused.err.find("must present a MUNGE credential"), std::string::npos) << refused.err;
  // With MUNGE, the job's own user gets in: what vouches for the nodes.
  const auto joined = on("n3", {intruder_.string(), secrets[1], secrets[2], guess, "--munge"});
  EXPECT_EQ(joined.exit_code, 0) << test::describe(joined);
  job->finish();
}

// The one fate of a job, docs/launchers/srun.md "When something fails".
TEST_F(MultiNode, AWorkerKilledOnOneNodeEndsTheJobOnEveryNode) {
  auto result = on("head", [&] {
    std::vector<std::string> argv{"srun", "-N4", "--ntasks-per-node=1", kCohort, "run", "-n", "2"};
    for (std::string& word : recording_worker(
             "if [ $RANK = 5 ]; then until [ $(ls \"$0\" | wc -l) = 8 ]; do sleep 0.05; done; "
             "echo 'rank 5 goes down' >&2; kill -9 $$; fi; exec sleep 120"))
      argv.push_back(std::move(word));
    return argv;
  }());
  EXPECT_EQ(result.exit_code, 137) << test::describe(result);
  EXPECT_NE(result.err.find("cohort run: rank 5 failed: killed by SIGKILL"), std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("host n3, rank 5 (local rank 1)"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("| rank 5 goes down"), std::string::npos) << result.err;
  for (const char* host : {"n1", "n2", "n4"}) {
    EXPECT_NE(result.err.find(std::string("cohort run [") + host + "]: stopped ranks"),
              std::string::npos)
        << host << "\n"
        << result.err;
  }
  EXPECT_EQ(recorded_workers(), 8u);
  EXPECT_TRUE(recorded_workers_end(seconds(10)));
}

// A lost agent ends the job even with restarts left: only a worker's
// failure restarts (without elastic membership). Its connection to the
// store closes with it, so node 0 knows at once: the heartbeat timeout is a
// minute here, and the job's end comes long before it (the test's limit).
TEST_F(MultiNode, AnAgentKilledIsNoticedAtOnceByItsConnection) {
  for (const char* restarts : {"0", "1"}) {
    SCOPED_TRACE(std::string("--max-restarts ") + restarts);
    auto result = with_task_output(on("head", [&] {
      std::vector<std::string> argv =
          srun_to_files({"srun", "-N4", "--ntasks-per-node=1", kCohort, "run",
                         "--heartbeat-timeout", "60", "--max-restarts", restarts, "-n", "2"});
      for (std::string& word :
           recording_worker("if [ $RANK = 5 ]; then kill -9 $PPID; fi; exec sleep 120"))
        argv.push_back(std::move(word));
      return argv;
    }()));
    EXPECT_NE(result.exit_code, 0) << test::describe(result);
    EXPECT_NE(result.err.find("node 2 (n3) stopped answering: its cohort run's connection to "
                              "the job's store closed"),
              std::string::npos)
        << result.err;
    EXPECT_EQ(result.err.find("restarting"), std::string::npos) << result.err;
    EXPECT_TRUE(recorded_workers_end(seconds(10)));
  }
}

// The agents' tree (docs/rendezvous.md): with COHORT_TREE_WIDTH=2 the
// relays of nodes 1 and 2 connect to the store, node 3's to node 1's. An
// agent killed on node 1 (inside the tree) is noticed at once through the
// store's connection from it, and node 3 goes on under the store without
// losing it; killed on node 3 (a leaf), node 1's relay says its last words.
TEST_F(MultiNode, InATreeOfRelaysAKilledAgentIsNoticedAtOnceWhereverItIs) {
  env_["COHORT_TREE_WIDTH"] = "2";
  for (const auto& [rank, node] : {std::pair{"2", "node 1 (n2)"}, std::pair{"6", "node 3 (n4)"}}) {
    SCOPED_TRACE(std::string("killed: ") + node);
    fs::remove_all(pids_);
    fs::create_directories(pids_);
    auto result = with_task_output(on("head", [&, rank = std::string(rank)] {
      std::vector<std::string> argv =
          srun_to_files({"srun", "-N4", "--ntasks-per-node=1", kCohort, "run",
                         "--heartbeat-timeout", "60", "-n", "2"});
      for (std::string& word : recording_worker(
               "if [ $RANK = " + rank + " ]; then sleep 1; kill -9 $PPID; fi; exec sleep 120"))
        argv.push_back(std::move(word));
      return argv;
    }()));
    EXPECT_NE(result.exit_code, 0) << test::describe(result);
    EXPECT_NE(
        result.err.find(std::string(node) + " stopped answering: its cohort run's connection to "
                                            "the job's store closed"),
        std::string::npos)
        << result.err;
    EXPECT_EQ(result.err.find("lost the job's store"), std::string::npos) << result.err;
    if (std::string(rank) == "2") {  // node 3's relay was under it, and moved
      EXPECT_NE(result.err.find("this node's relay lost the relay at 10.77.0."), std::string::npos)
          << result.err;
    }
    EXPECT_TRUE(recorded_workers_end(seconds(10)));
  }
}

// Each relay's first connection, by process: the first of the lines a
// relay writes under COHORT_LOG=debug when it connects ("is connected to
// the job's store at ...", "reaches the job's store through the relay at
// ... (node N)"), for each "cohort[PID]" that wrote one. A relay that
// passed over the parent it was placed under by name ("could not reach the
// relay at ... by its host's name": that agent had not answered within the
// relay's patience, as on a loaded machine) went on through the store and
// moves under its parent once the rendezvous names it: for it, the first
// connection through a relay after that (which names no node: the
// rendezvous placed it by address).
struct FirstConnection {
  std::string words;         ///< from "this node's relay"
  bool passed_over = false;  ///< its named parent first
};
std::map<std::string, FirstConnection> first_connections(const std::string& log) {
  std::map<std::string, FirstConnection> first;
  std::set<std::string> passed_over;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t said = line.find("] store: this node's relay ");
    if (line.rfind("cohort[", 0) != 0 || said == std::string::npos) continue;
    const std::string pid = line.substr(7, said - 7);
    const std::string words = line.substr(said + 9);  // from "this node's"
    if (words.find("could not reach the relay at ") != std::string::npos &&
        words.find("by its host's name") != std::string::npos && first.count(pid) == 0) {
      passed_over.insert(pid);
      continue;
    }
    const bool to_store = words.find("connected to the job's store") != std::string::npos;
    if (!to_store && words.find("reaches the job's store through") == std::string::npos) continue;
    if (to_store && passed_over.count(pid) != 0) continue;
    first.emplace(pid, FirstConnection{words, passed_over.count(pid) != 0});
  }
  return first;
}

// Where every node's rank and host are known before the rendezvous (Slurm's
// node list, --hosts), the agents' tree forms before it: each relay
// connects to its parent's on the job's port at the parent's host from the
// start, and only the store's own children ever connect to it.
TEST_F(MultiNode, WhereHostsAreKnownTheRelaysMeetTheirParentsBeforeTheRendezvous) {
  env_["COHORT_TREE_WIDTH"] = "2";
  env_["COHORT_LOG"] = "debug";
  // Under Slurm node 0 serves: nodes 1 and 2 under it, node 3 under node 1 (n2).
  auto result = on("head", srun_to_files({"srun", "-N4", "--ntasks-per-node=1", kCohort, "run",
                                          "-n", "2", kReduction}));
  std::vector<FirstConnection> firsts;
  for (int task = 1; task <= 3; ++task) {
    const auto connections =
        first_connections(test::read_file(temp_.path() / ("task" + std::to_string(task) + ".err")));
    firsts.push_back(connections.size() == 1 ? connections.begin()->second : FirstConnection{});
  }
  result = with_task_output(std::move(result));
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  for (int node : {1, 2}) {
    EXPECT_EQ(
        firsts[node - 1].words.rfind("this node's relay is connected to the job's store at n1:", 0),
        0U)
        << firsts[node - 1].words;
  }
  EXPECT_EQ(firsts[2].words.rfind(
                "this node's relay reaches the job's store through the relay at 10.77.0.12:", 0),
            0U)
      << firsts[2].words;
  if (!firsts[2].passed_over) {
    EXPECT_NE(firsts[2].words.find(" (node 1)"), std::string::npos) << firsts[2].words;
  }

  // Over ssh the launcher (on head) serves: nodes 0 and 1 under it, 2 and 3
  // under node 0 (n1).
  const auto over_ssh = on("head", {kCohort, "run", "--hosts", "n1:1,n2:1,n3:1,n4:1", "--ssh",
                                    ssh(), "--env", "COHORT_LOG", kReduction});
  EXPECT_EQ(over_ssh.exit_code, 0) << test::describe(over_ssh);
  std::map<std::string, int> counted;
  for (const auto& [pid, first] : first_connections(over_ssh.err)) {
    const std::string& words = first.words;
    const bool under_node_0 = words.find("through the relay at 10.77.0.11:") != std::string::npos &&
                              (first.passed_over || words.find(" (node 0)") != std::string::npos);
    ++counted[words.find("connected to the job's store at 10.77.0.1:") != std::string::npos
                  ? "store"
              : under_node_0 ? "node 0"
                             : words];
  }
  const std::map<std::string, int> expected{{"node 0", 2}, {"store", 2}};
  EXPECT_EQ(counted, expected) << over_ssh.err;
}

// "world W rank R host H" lines of an elastic job -> rank -> host, for world W.
std::map<int, std::string> ranks_in_world(const std::string& out, int world) {
  std::map<int, std::string> ranks;
  for (const std::string& line : lines_with(out, "world " + std::to_string(world) + " ")) {
    std::istringstream words(line.substr(line.find("world ")));
    std::string word, host;
    int size = 0, rank = -1;
    words >> word >> size >> word >> rank >> word >> host;
    if (size == world) ranks[rank] = host;
  }
  return ranks;
}

const std::string kElasticWorker =
    "echo \"world $WORLD_SIZE rank $RANK host $(hostname) attempt $TORCHELASTIC_RESTART_COUNT\"; ";

// --nnodes 2:4 under srun and over ssh: the agent on n3 is killed in the
// first round; the other three restart their workers with 6 ranks,
// numbered densely.
TEST_F(MultiNode, AnElasticJobGoesOnWithoutALostNode) {
  const std::vector<std::string> srun{"srun", "-N4", "--ntasks-per-node=1", kCohort, "run",
                                      "-n",   "2"};
  const std::vector<std::string> hosts{kCohort, "run", "--hosts", "n1:2,n2:2,n3:2,n4:2",
                                       "--ssh", ssh()};
  for (const auto& form : {srun, hosts}) {
    std::vector<std::string> argv = form;
    argv.insert(argv.end(), {"--nnodes", "2:4", "--heartbeat-timeout", "2"});
    for (std::string& word : recording_worker(
             kElasticWorker + "if [ $WORLD_SIZE = 8 ]; then [ $RANK = 5 ] && kill -9 $PPID; "
                              "exec sleep 120; fi"))
      argv.push_back(std::move(word));
    if (form == srun) argv = srun_to_files(argv);
    SCOPED_TRACE(detail::join(argv, " "));
    const auto result = with_task_output(on("head", argv, seconds(180)));
    // srun's own status is the killed task's (137): there the job's verdict
    // is the report's.
    if (form == hosts) {
      EXPECT_EQ(result.exit_code, 0) << test::describe(result);
    }
    const std::map<int, std::string> expected{{0, "n1"}, {1, "n1"}, {2, "n2"},
                                              {3, "n2"}, {4, "n4"}, {5, "n4"}};
    EXPECT_EQ(ranks_in_world(result.out, 6), expected) << test::describe(result);
    EXPECT_NE(result.err.find("node 2 (n3) stopped answering"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("attempt 2 runs on 3 nodes, 6 workers"), std::string::npos)
        << result.err;
    EXPECT_NE(result.err.find("attempt 2: every rank succeeded"), std::string::npos) << result.err;
    EXPECT_TRUE(recorded_workers_end(seconds(10)));
  }
}

// An elastic job whose relays form a tree (width 2, by arrival: whichever
// relay arrives third goes under the first) loses node 1, inside it or a
// leaf: the three others restart with 6 ranks, any relay that was under
// node 1's now under the store.
TEST_F(MultiNode, AnElasticJobInATreeGoesOnWithoutALostInnerNode) {
  env_["COHORT_TREE_WIDTH"] = "2";
  std::vector<std::string> argv =
      srun_to_files({"srun", "-N4", "--ntasks-per-node=1", kCohort, "run", "--nnodes", "2:4",
                     "--heartbeat-timeout", "2", "-n", "2"});
  for (std::string& word : recording_worker(
           kElasticWorker + "if [ $WORLD_SIZE = 8 ]; then [ $RANK = 2 ] && kill -9 $PPID; "
                            "exec sleep 120; fi"))
    argv.push_back(std::move(word));
  const auto result = with_task_output(on("head", argv, seconds(180)));
  const std::map<int, std::string> expected{{0, "n1"}, {1, "n1"}, {2, "n3"},
                                            {3, "n3"}, {4, "n4"}, {5, "n4"}};
  EXPECT_EQ(ranks_in_world(result.out, 6), expected) << test::describe(result);
  EXPECT_NE(result.err.find("node 1 (n2) stopped answering"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("attempt 2: every rank succeeded"), std::string::npos) << result.err;
  EXPECT_TRUE(recorded_workers_end(seconds(10)));
}

// --nnodes 3:4: after the first loss 3 nodes remain, after the second 2,
// fewer than MIN: the job ends, naming the second lost node.
TEST_F(MultiNode, AnElasticJobEndsWhenFewerThanMinNodesRemain) {
  auto result = with_task_output(on(
      "head",
      [&] {
        std::vector<std::string> argv =
            srun_to_files({"srun", "-N4", "--ntasks-per-node=1", kCohort, "run", "--nnodes", "3:4",
                           "--heartbeat-timeout", "2", "-n", "2"});
        for (std::string& word :
             recording_worker(kElasticWorker +
                              "if [ $WORLD_SIZE = 8 ] && [ $RANK = 5 ]; then kill -9 $PPID; fi; "
                              "if [ $WORLD_SIZE = 6 ] && [ $RANK = 2 ]; then kill -9 $PPID; fi; "
                              "exec sleep 120"))
          argv.push_back(std::move(word));
        return argv;
      }(),
      seconds(180)));
  EXPECT_NE(result.exit_code, 0) << test::describe(result);
  EXPECT_NE(result.err.find("attempt 2 runs on 3 nodes"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("node 1 (n2) stopped answering"), std::string::npos) << result.err;
  EXPECT_TRUE(ranks_in_world(result.out, 4).empty()) << result.out;
  EXPECT_TRUE(recorded_workers_end(seconds(10)));
}

// torchrun's c10d form with --nnodes 2:4: three nodes start the job; a
// fourth started later is noticed at node 0's next heartbeat check, and
// every node restarts with 8 ranks, the newcomer's last.
TEST_F(MultiNode, AnElasticJobTakesInANodeThatStartsLate) {
  env_["COHORT_JOB_TOKEN"] = "0123456789abcdef0123456789abcdef";
  std::vector<std::string> line{kCohort,
                                "run",
                                "--nnodes",
                                "2:4",
                                "--rdzv-endpoint",
                                "n1:29615",
                                "--rdzv-conf",
                                "last_call_timeout=3",
                                "-n",
                                "2"};
  for (std::string& word :
       recording_worker(kElasticWorker + "[ $WORLD_SIZE = 8 ] && exit 0; exec sleep 120"))
    line.push_back(std::move(word));
  std::vector<std::unique_ptr<test::Subprocess>> nodes;
  for (const char* node : {"n2", "n3", "n1"})
    nodes.push_back(start_on(node, line, seconds(180)));
  // The first round runs (6 workers recorded) before the fourth node starts.
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (recorded_workers() < 6 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(recorded_workers(), 6u);
  nodes.push_back(start_on("n4", line, seconds(180)));
  std::string out, err;
  for (auto& node : nodes) {
    const auto result = node->finish();
    EXPECT_EQ(result.exit_code, 0) << test::describe(result);
    out += result.out;
    err += result.err;
  }
  EXPECT_EQ(ranks_in_world(out, 6).size(), 6u) << out;
  // n2 and n3 take node ranks 1 and 2 in the order they reached n1.
  std::map<int, std::string> world = ranks_in_world(out, 8);
  ASSERT_EQ(world.size(), 8u) << out << err;
  EXPECT_EQ(world[0] + world[1] + world[6] + world[7], "n1n1n4n4") << out;
  EXPECT_EQ((std::multiset<std::string>{world[2], world[3], world[4], world[5]}),
            (std::multiset<std::string>{"n2", "n2", "n3", "n3"}))
      << out;
  EXPECT_NE(err.find("started without this one"), std::string::npos) << err;
  EXPECT_NE(err.find("is waiting to join"), std::string::npos) << err;
  EXPECT_TRUE(recorded_workers_end(seconds(10)));
}

// Four agents of a job of `nnodes` (static: 4), this test's children
// (nothing waits on a cut node's Slurm daemon), 2 workers each running
// `worker`, on `port`; once all 8 workers run, `cut` is cut off from the
// network; each agent's end, then it is mended.
std::vector<test::ProcessResult> MultiNode::cut_job(const std::string& port,
                                                    const std::string& heartbeat,
                                                    const std::string& cut,
                                                    const std::string& nnodes,
                                                    const std::string& worker) {
  std::vector<std::unique_ptr<test::Subprocess>> agents;
  env_["COHORT_JOB_TOKEN"] = "0123456789abcdef0123456789abcdef";
  for (int node = 0; node < 4; ++node) {
    std::vector<std::string> argv{kCohort,
                                  "run",
                                  "--nnodes",
                                  nnodes,
                                  "--node-rank",
                                  std::to_string(node),
                                  "--master-addr",
                                  "n1",
                                  "--master-port",
                                  port,
                                  "--heartbeat-timeout",
                                  heartbeat,
                                  "--grace",
                                  "1",
                                  "-n",
                                  "2"};
    for (std::string& word : recording_worker(worker))
      argv.push_back(std::move(word));
    agents.push_back(start_on("n" + std::to_string(node + 1), argv, seconds(60)));
  }
  for (int i = 0; i < 200 && recorded_workers() < 8; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(recorded_workers(), 8u);
  const std::string harness = COHORT_NETNS_HARNESS;
  EXPECT_EQ(test::run_process({harness, "cut", kCluster.string(), cut}).exit_code, 0);
  std::vector<test::ProcessResult> ends;
  for (auto& agent : agents)
    ends.push_back(agent->finish());
  test::run_process({harness, "mend", kCluster.string(), cut});
  for (std::size_t node = 0; node < ends.size(); ++node)
    EXPECT_FALSE(ends[node].timed_out) << "node " << node << ": " << test::describe(ends[node]);
  return ends;
}

// n3 cut off: node 0 loses it by heartbeat, n3 loses the store, both after
// --heartbeat-timeout.
TEST_F(MultiNode, ACutCableIsNoticedOnBothSides) {
  const std::vector<test::ProcessResult> ends = cut_job("29411", "2", "n3");
  for (std::size_t node = 0; node < ends.size(); ++node)
    EXPECT_NE(ends[node].exit_code, 0) << "node " << node;
  EXPECT_NE(ends[0].err.find("node 2 (n3) stopped answering"), std::string::npos) << ends[0].err;
  EXPECT_NE(ends[2].err.find("lost the job's store at n1:29411"), std::string::npos) << ends[2].err;
  // Its heartbeat's WAIT (1 s) had no answer by --heartbeat-timeout.
  EXPECT_NE(ends[2].err.find(": it gave no answer in 2 s;"), std::string::npos) << ends[2].err;
  // Its relay says who stopped answering: nothing came from the store.
  EXPECT_NE(ends[2].err.find("; this node's relay at 127.0.0.1:"), std::string::npos)
      << ends[2].err;
  EXPECT_NE(ends[2].err.find(": its connection to the job's store at n1:29411: "),
            std::string::npos)
      << ends[2].err;
  EXPECT_NE(ends[2].err.find(" (the oldest sent "), std::string::npos) << ends[2].err;
  EXPECT_TRUE(recorded_workers_end(seconds(10)));
}

// The same cut in an elastic job (--nnodes 2:4): the other three go on
// with 6 ranks; n3, which can reach no verdict nor round, ends at once
// with its report (until 2026-12-06 it asked the store for a verdict
// first, and printed that request's failure on a line of its own).
TEST_F(MultiNode, ACutOffNodeOfAnElasticJobEndsWithItsReport) {
  const std::vector<test::ProcessResult> ends =
      cut_job("29413", "2", "n3", "2:4",
              kElasticWorker + "if [ $WORLD_SIZE = 8 ]; then exec sleep 120; fi");
  for (const std::size_t node : {0u, 1u, 3u})
    EXPECT_EQ(ends[node].exit_code, 0) << "node " << node << ": " << test::describe(ends[node]);
  EXPECT_NE(ends[0].err.find("attempt 2 runs on 3 nodes, 6 workers"), std::string::npos)
      << ends[0].err;
  EXPECT_NE(ends[2].exit_code, 0);
  EXPECT_NE(ends[2].err.find("lost the job's store at n1:29413"), std::string::npos) << ends[2].err;
  for (const std::string& line : test::lines_with(ends[2].err, ""))
    EXPECT_EQ(line.rfind("cohort run [n3]: ", 0), 0u) << line;
  EXPECT_TRUE(recorded_workers_end(seconds(10)));
}

// The same cut inside the agents' tree (width 2: node 3's relay under node
// 1's): node 1 is lost by heartbeat; node 3's relay passes over it after
// half the heartbeat timeout and goes on under the store, so node 3's
// heartbeats arrive in time and it is not counted lost, nor loses the store.
TEST_F(MultiNode, ACutCableInsideTheTreeLosesOnlyThatNode) {
  env_["COHORT_TREE_WIDTH"] = "2";
  const std::vector<test::ProcessResult> ends = cut_job("29412", "4", "n2");
  EXPECT_NE(ends[0].err.find("node 1 (n2) stopped answering: no heartbeat"), std::string::npos)
      << ends[0].err;
  EXPECT_EQ(ends[0].err.find("node 3 (n4) stopped answering"), std::string::npos) << ends[0].err;
  EXPECT_NE(ends[3].err.find("this node's relay lost the relay at 10.77.0."), std::string::npos)
      << ends[3].err;
  EXPECT_NE(ends[3].err.find("node 1 (n2) stopped answering"), std::string::npos) << ends[3].err;
  EXPECT_EQ(ends[3].err.find("lost the job's store"), std::string::npos) << ends[3].err;
  EXPECT_TRUE(recorded_workers_end(seconds(10)));
}

// An unauthenticated peer on a third node floods node 0's two ports while a
// 2-node static job (with a secret) starts and runs: 2,000 silent
// connections to the agents' store, and 64 to the PyTorch port that each
// announce a CHECK of 8,388,608 keys and then send a byte per round. The
// job finishes as it would have, and the flood's own handshakes with the
// token (a joining node's) are answered throughout; their times are in the
// test's output. Then it guesses the token: from its third wrong guess on,
// every answer to its address waits (100 ms, then 200), the right one too.
TEST_F(MultiNode, AStaticJobOutlastsAFloodOfItsStoreFromAnotherNode) {
  const fs::path port_file = temp_.path() / "torch_port";
  const fs::path done = temp_.path() / "flood_done";  // the workers wait for it
  env_["COHORT_JOB_TOKEN"] = "0123456789abcdef0123456789abcdef";
  std::vector<std::unique_ptr<test::Subprocess>> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(start_on(
        node == 0 ? "n1" : "n2",
        {kCohort,
         "run",
         "--nnodes",
         "2",
         "--node-rank",
         std::to_string(node),
         "--master-addr",
         "n1",
         "--master-port",
         "29421",
         "--heartbeat-timeout",
         "3",
         "-n",
         "2",
         "sh",
         "-c",
         "[ $RANK = 0 ] && echo $MASTER_PORT > \"$0\"; until [ -e \"$1\" ]; do sleep 0.1; done; "
         "exec \"$2\"",
         port_file.string(),
         done.string(),
         kReduction},
        seconds(180)));
  }
  const auto flood = on("n3",
                        {"/usr/bin/python3", COHORT_TEST_DATA_DIR "/store_flood.py", "n1", "29421",
                         port_file.string(), "5", done.string()},
                        seconds(150));
  EXPECT_EQ(flood.exit_code, 0) << test::describe(flood);
  std::ofstream{done};  // whatever became of the flood
  EXPECT_NE(flood.out.find("handshake under flood"), std::string::npos) << flood.out;
  std::cout << flood.out;
  const auto milliseconds = [&](const std::string& label) {
    const std::size_t at = flood.out.find(label);
    return at == std::string::npos ? -1.0 : std::stod(flood.out.substr(at + label.size()));
  };
  EXPECT_GE(milliseconds("guess 3: "), 100.0) << flood.out;
  EXPECT_GE(milliseconds("guess 4: "), 200.0) << flood.out;
  EXPECT_GE(milliseconds("right after guesses: "), 200.0) << flood.out;
  auto node1 = nodes[1]->finish();
  auto node0 = nodes[0]->finish();
  EXPECT_EQ(node1.exit_code, 0) << test::describe(node1);
  node0.out += node1.out;
  expect_reduction(node0, 4, kTwoNodesTwoEach);
}

// The check: srun -N4, one agent per node, two workers each, a worker
// SIGKILLed on node 3 of 4 with --max-restarts 1: every node restarts once,
// every rank resumes from the snapshot, and the job exits 0.
TEST_F(MultiNodePython, ASnapshotTrainingScriptResumesOnEveryNodeAfterAKill) {
  if (IsSkipped()) return;
  const std::string snapshot = (temp_.path() / "snapshot.pt").string();
  const auto result = on("head",
                         {"srun",
                          "-N4",
                          "--ntasks-per-node=1",
                          kCohort,
                          "run",
                          "--python",
                          kPython,
                          "-n",
                          "2",
                          "--max-restarts",
                          "1",
                          example("snapshot_train.py"),
                          "--epochs",
                          "3",
                          "--snapshot",
                          snapshot,
                          "--kill-rank",
                          "5",
                          "--kill-at-epoch",
                          "1"},
                         seconds(400));
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(lines_with(result.out, "killing myself (SIGKILL)").size(), 1u)
      << test::describe(result);
  EXPECT_EQ(lines_with(result.out, "Resuming training from snapshot at Epoch 1").size(), 8u)
      << test::describe(result);
  EXPECT_EQ(lines_with(result.out, "done: 3 epochs (restart 1, world size 8)").size(), 8u)
      << test::describe(result);
  EXPECT_NE(result.err.find("killed by SIGKILL"), std::string::npos) << test::describe(result);
}

// The same script, unmodified, in torchrun's elastic form (--nnodes 1:2):
// rank 3 kills its node's agent at epoch 1; node n1 goes on alone, with 2
// ranks, from the last snapshot, and no restart budget.
TEST_F(MultiNodePython, AnElasticTrainingGoesOnFromItsSnapshotWithoutALostNode) {
  if (IsSkipped()) return;
  env_["COHORT_JOB_TOKEN"] = "0123456789abcdef0123456789abcdef";
  const std::string snapshot = (temp_.path() / "snapshot.pt").string();
  const std::vector<std::string> line{kCohort,
                                      "run",
                                      "--python",
                                      kPython,
                                      "--nnodes",
                                      "1:2",
                                      "--rdzv-backend",
                                      "c10d",
                                      "--rdzv-endpoint",
                                      "n1:29616",
                                      "--heartbeat-timeout",
                                      "2",
                                      "-n",
                                      "2",
                                      example("snapshot_train.py"),
                                      "--epochs",
                                      "3",
                                      "--snapshot",
                                      snapshot,
                                      "--kill-rank",
                                      "3",
                                      "--kill-at-epoch",
                                      "1",
                                      "--kill-agent"};
  auto second = start_on("n2", line, seconds(300));
  const auto first = on("n1", line, seconds(300));
  const auto lost = second->finish();
  EXPECT_EQ(first.exit_code, 0) << test::describe(first) << test::describe(lost);
  // Rank 3's last line went down with its agent, which did not relay it.
  EXPECT_NE(lost.exit_code, 0) << test::describe(lost);
  EXPECT_EQ(lines_with(first.out, "Resuming training from snapshot at Epoch 1").size(), 2u)
      << test::describe(first);
  EXPECT_EQ(lines_with(first.out, "done: 3 epochs (restart 1, world size 2)").size(), 2u)
      << test::describe(first);
  EXPECT_NE(first.err.find("attempt 2 runs on 1 node, 2 workers"), std::string::npos) << first.err;
}

}  // namespace
}  // namespace cohort
