// Tier 3: `cohort env --json` under the real launchers — srun on a Slurm
// cluster that the test harness starts and stops itself (tests/harness/
// slurm-cluster, run by CTest fixtures), Open MPI's mpirun, MPICH's
// mpirun.mpich, and mpirun inside an sbatch job. Each rank writes its report
// to its own file; the test checks every rank's fields. A launcher that is not
// installed makes its test skip with the reason.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>
#include <unistd.h>

#include <cohort/config.hpp>

#include "support/backends.hpp"
#include "support/files.hpp"
#include "support/skip.hpp"
#include "support/subprocess.hpp"
#include "support/text.hpp"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

class LauncherEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directory(out_dir_);
    env_ = process_environment();
    env_.erase("SLURM_CONF");
    // Open MPI: loopback only, and the 4 ranks may outnumber the cores.
    env_["OMPI_MCA_oob_tcp_if_include"] = "lo";
    env_["OMPI_MCA_btl_tcp_if_include"] = "lo";
    env_["OMPI_MCA_rmaps_base_oversubscribe"] = "1";
    if (geteuid() == 0) {
      env_["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
      env_["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
    }
  }

  // Helpers that skip (or fail, in CI): the test checks IsSkipped() and
  // HasFatalFailure() after them.
  void require_tool(const std::string& tool) {
    if (test::find_in_path(tool).empty()) {
      COHORT_SKIP_MISSING(tool << " is not installed (scripts/install-deps test installs it)");
    }
  }

  // Uses the cluster the slurm_cluster fixture started, or skips with its reason.
  void use_slurm_cluster() {
    const fs::path dir = COHORT_TEST_SLURM_DIR;
    const std::string status = test::read_file(dir / "status");
    if (status.rfind("up", 0) != 0) {
      COHORT_SKIP_MISSING("no Slurm cluster: " << (status.empty()
                                                       ? "the slurm_cluster_up fixture did not run"
                                                       : status));
    }
    env_["SLURM_CONF"] = (dir / "etc" / "slurm.conf").string();
  }

  // The command each rank runs: its report into a file of its own, named by pid.
  std::vector<std::string> rank_command() const {
    return {"sh", "-c", "exec \"$0\" env --json > \"$1/$$.json\"", COHORT_CLI_PATH,
            out_dir_.string()};
  }

  test::ProcessResult launch(std::vector<std::string> launcher) {
    for (std::string& arg : rank_command())
      launcher.push_back(std::move(arg));
    test::ProcessOptions options;
    options.env = env_;
    options.timeout = std::chrono::seconds(120);
    return test::run_process(launcher, options);
  }

  // Every rank's report, keyed by rank; fails on duplicates.
  std::map<int, Json> reports() {
    std::map<int, Json> out;
    for (const auto& entry : fs::directory_iterator(out_dir_)) {
      Json report = Json::parse(test::read_file(entry.path()));
      const int rank = report["rank"].get<int>();
      EXPECT_TRUE(out.emplace(rank, std::move(report)).second) << "rank " << rank << " twice";
    }
    return out;
  }

  // Ranks 0..world-1 once each, all agreeing on the world, launcher, master,
  // port and job; on one node, local rank == rank.
  std::map<int, Json> check_one_node_world(const std::string& launcher, int world) {
    std::map<int, Json> ranks = reports();
    EXPECT_EQ(static_cast<int>(ranks.size()), world);
    const Json& first = ranks.begin()->second;
    for (const auto& [rank, report] : ranks) {
      SCOPED_TRACE("rank " + std::to_string(rank) + ": " + report.dump());
      EXPECT_EQ(report["launcher"], launcher);
      EXPECT_EQ(report["world_size"], world);
      EXPECT_EQ(report["local_rank"], rank);
      EXPECT_EQ(report["local_world_size"], world);
      EXPECT_EQ(report["node_rank"], 0);
      EXPECT_EQ(report["num_nodes"], 1);
      EXPECT_EQ(report["master_addr"], first["master_addr"]);
      EXPECT_EQ(report["master_port"], first["master_port"]);
      EXPECT_EQ(report["job_id"], first["job_id"]);
      EXPECT_FALSE(report["route_to_master"].contains("error"));
    }
    for (int rank = 0; rank < world; ++rank)
      EXPECT_TRUE(ranks.count(rank)) << "rank " << rank;
    return ranks;
  }

  test::TempDir temp_{"cohort-launcher"};
  fs::path out_dir_ = temp_.path() / "reports";
  Environment env_;
};

TEST_F(LauncherEnv, SrunOneTaskPerRank) {
  use_slurm_cluster();
  if (IsSkipped() || HasFatalFailure()) return;
  const test::ProcessResult result = launch({"srun", "--quiet", "-n4"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  const auto ranks = check_one_node_world("slurm", 4);
  for (const auto& [rank, report] : ranks) {
    EXPECT_EQ(report["sources"]["rank"], "SLURM_PROCID");
    EXPECT_EQ(report["master_addr"], "localhost");  // the cluster's one node
    EXPECT_FALSE(report["job_id"].get<std::string>().empty());
    EXPECT_GE(report["master_port"], 12000);
    EXPECT_LT(report["master_port"], 32000);
  }
}

TEST_F(LauncherEnv, SrunWithPmix) {
  use_slurm_cluster();
  if (IsSkipped() || HasFatalFailure()) return;
  const test::ProcessResult result = launch({"srun", "--quiet", "--mpi=pmix", "-n4"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  for (const auto& [rank, report] : check_one_node_world("pmix", 4)) {
    EXPECT_EQ(report["sources"]["rank"], "PMIX_RANK");
  }
}

TEST_F(LauncherEnv, OpenMpiMpirun) {
  require_tool("mpirun.openmpi");
  if (IsSkipped() || HasFatalFailure()) return;
  const test::ProcessResult result = launch({"mpirun.openmpi", "-np", "4"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  for (const auto& [rank, report] : check_one_node_world("openmpi", 4)) {
    EXPECT_EQ(report["sources"]["rank"], "OMPI_COMM_WORLD_RANK");
    EXPECT_EQ(report["master_addr"], "127.0.0.1");
    EXPECT_TRUE(report["notes"].empty()) << report["notes"].dump();
    // Every rank on this host: shm serves it (ahead of the job's own MPI),
    // and `cohort env` says why not self.
    EXPECT_EQ(report["backend"]["chosen"],
              COHORT_WITH_SHM ? "shm" : (COHORT_WITH_MPI ? "mpi" : "gloo"));
    EXPECT_EQ(report["backend"]["refused"]["self"],
              "it serves a world of one, this one has 4 ranks");
  }
}

TEST_F(LauncherEnv, MpichHydra) {
  require_tool("mpirun.mpich");
  if (IsSkipped() || HasFatalFailure()) return;
  const test::ProcessResult result = launch({"mpirun.mpich", "-iface", "lo", "-np", "4"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  for (const auto& [rank, report] : check_one_node_world("mpich", 4)) {
    EXPECT_EQ(report["sources"]["rank"], "PMI_RANK");
    EXPECT_EQ(report["master_addr"], "127.0.0.1");
    // This build's MPI is Open MPI: under MPICH's launcher it says so, and
    // shm (or gloo) serves.
    EXPECT_EQ(report["backend"]["chosen"], test::kOneHostBackend);
    if (COHORT_WITH_MPI) {
      EXPECT_NE(
          report["backend"]["refused"]["mpi"].get<std::string>().find("started by MPICH's mpiexec"),
          std::string::npos)
          << report["backend"].dump();
    }
  }
}

// mpirun inside a batch job: the ranks inherit the batch script's
// SLURM_PROCID=0 and SLURM_NTASKS=4; Open MPI's variables must win.
TEST_F(LauncherEnv, OpenMpiMpirunInsideSbatch) {
  use_slurm_cluster();
  require_tool("mpirun.openmpi");
  if (IsSkipped() || HasFatalFailure()) return;
  std::string wrapped = "mpirun.openmpi -np 4";
  for (const std::string& arg : rank_command())
    wrapped += " '" + arg + "'";
  test::ProcessOptions options;
  options.env = env_;
  options.timeout = std::chrono::seconds(120);
  const std::string log_path = (temp_.path() / "job.log").string();  // not among the reports
  const test::ProcessResult result = test::run_process(
      {"sbatch", "--wait", "--quiet", "-n4", "-o", log_path, "--wrap", wrapped}, options);
  const std::string log = test::read_file(log_path);
  ASSERT_EQ(result.exit_code, 0) << test::describe(result) << "\n--- job output ---\n" << log;
  for (const auto& [rank, report] : check_one_node_world("openmpi", 4)) {
    EXPECT_EQ(report["sources"]["rank"], "OMPI_COMM_WORLD_RANK");
    ASSERT_EQ(report["notes"].size(), 1u) << report["notes"].dump();
    EXPECT_NE(report["notes"][0].get<std::string>().find("SLURM_PROCID=0"), std::string::npos);
  }
}

// The hello example joins its peers through cohort::init() under each
// launcher: every rank prints its line and passes the barrier.
class LauncherHello : public LauncherEnv {
 protected:
  void expect_hello(const test::ProcessResult& result, int world) {
    ASSERT_EQ(result.exit_code, 0) << test::describe(result);
    std::set<std::string> endings;
    std::istringstream lines(result.out);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_NE(line.find("] hello from ["), std::string::npos) << line;
      endings.insert(line.substr(line.rfind(' ') + 1));
    }
    std::set<std::string> expected;
    for (int rank = 0; rank < world; ++rank) {
      expected.insert(std::to_string(rank) + "/" + std::to_string(world));
    }
    EXPECT_EQ(endings, expected) << result.out;
  }
  test::ProcessResult launch_hello(std::vector<std::string> launcher) {
    launcher.push_back(COHORT_HELLO_PATH);
    test::ProcessOptions options;
    options.env = env_;
    options.timeout = std::chrono::seconds(120);
    return test::run_process(launcher, options);
  }
};

TEST_F(LauncherHello, UnderSrun) {
  use_slurm_cluster();
  if (IsSkipped() || HasFatalFailure()) return;
  expect_hello(launch_hello({"srun", "--quiet", "-n4"}), 4);
}

TEST_F(LauncherHello, UnderOpenMpi) {
  require_tool("mpirun.openmpi");
  if (IsSkipped() || HasFatalFailure()) return;
  expect_hello(launch_hello({"mpirun.openmpi", "-np", "4"}), 4);
}

// The reduction example all-reduces under srun (gloo), Open MPI's mpirun (mpi:
// this build's MPI started the job) and MPICH's (gloo; its ranks find rank
// 0's port through PMI: MPICH exports no job id to derive one from): every
// rank ends with the number of ranks.
TEST_F(LauncherHello, ReductionUnderSrunOpenMpiAndMpich) {
  use_slurm_cluster();
  require_tool("mpirun.openmpi");
  require_tool("mpirun.mpich");
  if (IsSkipped() || HasFatalFailure()) return;
  for (const std::vector<std::string>& launcher :
       {std::vector<std::string>{"srun", "--quiet", "-n3", COHORT_REDUCTION_PATH},
        {"mpirun.openmpi", "-np", "3", COHORT_REDUCTION_PATH},
        {"mpirun.mpich", "-np", "3", COHORT_REDUCTION_PATH}}) {
    test::ProcessOptions options;
    options.env = env_;
    options.timeout = std::chrono::seconds(120);
    const test::ProcessResult result = test::run_process(launcher, options);
    ASSERT_EQ(result.exit_code, 0) << launcher[0] << ": " << test::describe(result);
    std::istringstream lines(result.out);
    int count = 0;
    for (std::string line; std::getline(lines, line); ++count) {
      // One host: shm, else the job's own MPI, else gloo.
      const bool own_mpi = launcher[0] == "mpirun.openmpi" && COHORT_WITH_MPI;
      const std::string backend = COHORT_WITH_SHM ? "shm" : (own_mpi ? "mpi" : "gloo");
      EXPECT_NE(line.find(":" + backend + "] process "), std::string::npos) << line;
      EXPECT_EQ(line.substr(line.size() - 11), " has data 3") << line;
    }
    EXPECT_EQ(count, 3) << result.out;
  }
}

TEST_F(LauncherHello, CohortRunInsideAnSrunStep) {
  use_slurm_cluster();
  if (IsSkipped() || HasFatalFailure()) return;
  expect_hello(
      launch_hello({"srun", "--quiet", "-n1", COHORT_CLI_PATH, "run", "-n", "3", "--no-prefix"}),
      3);
}

// `cohort run` started by another launcher, one worker per task: each copy
// supervises one worker whose RANK, LOCAL_RANK ... are the task's, with one
// MASTER_ADDR:MASTER_PORT and one run id for the job.
class OneWorkerPerTask : public LauncherEnv {
 protected:
  test::ProcessResult launch(std::vector<std::string> argv) {
    test::ProcessOptions options;
    options.env = env_;
    options.timeout = std::chrono::seconds(120);
    return test::run_process(argv, options);
  }
  void require_torch() {
    if (test::run_process({kPython, "-c", "import torch.distributed"}).exit_code != 0) {
      COHORT_SKIP_MISSING(kPython << " cannot import torch (scripts/install-deps test)");
    }
  }
  static std::string example(const char* name) {
    return std::string(COHORT_SOURCE_DIR) + "/examples/python/" + name;
  }
  // "... process 2/4 has data tensor([4.]) (local rank 2)" once for each rank.
  static void expect_reduction(const test::ProcessResult& result, int world) {
    ASSERT_EQ(result.exit_code, 0) << test::describe(result);
    for (int rank = 0; rank < world; ++rank) {
      const std::string line = "process " + std::to_string(rank) + "/" + std::to_string(world) +
                               " has data tensor([" + std::to_string(world) + ".]) (local rank " +
                               std::to_string(rank) + ")";
      EXPECT_NE(result.out.find(line), std::string::npos) << line << "\n" << result.out;
    }
  }
  const std::string kPython = "/usr/bin/python3";
};

// The issue's own check: mpirun of an unmodified torch script, Open MPI and
// MPICH; and a script that reads only OMPI_COMM_WORLD_*.
TEST_F(OneWorkerPerTask, MpirunOfAnUnmodifiedTorchScript) {
  require_tool("mpirun.openmpi");
  require_tool("mpirun.mpich");
  require_torch();
  if (IsSkipped() || HasFatalFailure()) return;
  expect_reduction(launch({"mpirun.openmpi", "-np", "4", COHORT_CLI_PATH, "run", "--python",
                           kPython, example("reduction.py")}),
                   4);
  expect_reduction(launch({"mpirun.openmpi", "-np", "4", COHORT_CLI_PATH, "run", "--python",
                           kPython, example("reduction_mpi.py")}),
                   4);
  expect_reduction(launch({"mpirun.mpich", "-iface", "lo", "-np", "3", COHORT_CLI_PATH, "run",
                           "--python", kPython, example("reduction.py")}),
                   3);
}

TEST_F(OneWorkerPerTask, SrunOfAnUnmodifiedTorchScript) {
  use_slurm_cluster();
  require_torch();
  if (IsSkipped() || HasFatalFailure()) return;
  for (const char* script : {"reduction.py", "reduction_slurm.py"}) {
    expect_reduction(launch({"srun", "--quiet", "-n3", COHORT_CLI_PATH, "run", "--python", kPython,
                             example(script)}),
                     3);
  }
  // One task with three workers: srun's variables are rewritten for each.
  expect_reduction(launch({"srun", "--quiet", "-n1", COHORT_CLI_PATH, "run", "-n", "3", "--python",
                           kPython, example("reduction_slurm.py")}),
                   3);
}

TEST_F(OneWorkerPerTask, EveryWorkerSeesOneJob) {
  require_tool("mpirun.openmpi");
  if (IsSkipped() || HasFatalFailure()) return;
  const auto result = launch({"mpirun.openmpi", "-np", "4", COHORT_CLI_PATH, "run", "sh", "-c",
                              "echo $RANK/$WORLD_SIZE $LOCAL_RANK/$LOCAL_WORLD_SIZE "
                              "$GROUP_RANK/$GROUP_WORLD_SIZE $MASTER_ADDR:$MASTER_PORT "
                              "$TORCHELASTIC_RUN_ID $TORCHELASTIC_USE_AGENT_STORE"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  std::set<std::string> jobs;
  std::set<std::string> ranks;
  std::istringstream lines(result.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line.substr(line.find(']') + 2));
    std::string rank, local, group, master, run_id, agent_store;
    words >> rank >> local >> group >> master >> run_id >> agent_store;
    ranks.insert(rank + " " + local + " " + group);
    jobs.insert(master + " " + run_id + " " + agent_store);
  }
  EXPECT_EQ(ranks,
            (std::set<std::string>{"0/4 0/4 0/1", "1/4 1/4 0/1", "2/4 2/4 0/1", "3/4 3/4 0/1"}))
      << result.out;
  ASSERT_EQ(jobs.size(), 1u) << result.out;
  EXPECT_EQ(jobs.begin()->rfind("127.0.0.1:", 0), 0u) << result.out;
  EXPECT_NE(jobs.begin()->find(" True"), std::string::npos) << result.out;
}

// A failure in one rank ends every rank at once, with cohort's report.
TEST_F(OneWorkerPerTask, AFailureUnderMpirunEndsTheJobWithTheReport) {
  require_tool("mpirun.openmpi");
  if (IsSkipped() || HasFatalFailure()) return;
  const auto result =
      launch({"mpirun.openmpi", "-np", "3", COHORT_CLI_PATH, "run", "sh", "-c",
              "[ $RANK = 1 ] && { echo 'rank 1 gives up' >&2; exit 3; }; exec sleep 100"});
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 3) << test::describe(result);
  EXPECT_NE(result.err.find("cohort run: rank 1 failed: exited with code 3"), std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("| rank 1 gives up"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("told to stop: 2 other tasks"), std::string::npos) << result.err;
}

// OMP_NUM_THREADS follows the task's CPUs under srun, and cohort env says so.
TEST_F(OneWorkerPerTask, ThreadsFollowSlurmsCpusPerTask) {
  use_slurm_cluster();
  if (IsSkipped() || HasFatalFailure()) return;
  auto result = launch({"srun", "--quiet", "-n1", "--cpus-per-task=1", COHORT_CLI_PATH, "run", "-n",
                        "2", "sh", "-c", "echo threads $OMP_NUM_THREADS"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(test::count_of(result.out, "threads 1\n"), 2u) << result.out;
  result =
      launch({"srun", "--quiet", "-n1", "--cpus-per-task=1", COHORT_CLI_PATH, "env", "--json"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  const Json report = Json::parse(result.out);
  EXPECT_EQ(report["threads"]["source"], "SLURM_CPUS_PER_TASK=1 shared by 1 worker of this task")
      << result.out;
}

}  // namespace
}  // namespace cohort
