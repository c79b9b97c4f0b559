// The `cohort` binary as users run it: outputs, exit statuses (0 ok, 1 error,
// 2 usage) and one-line error messages.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cohort/config.hpp>

#include "support/backends.hpp"
#include "support/files.hpp"
#include "support/launch_examples.hpp"
#include "support/subprocess.hpp"

namespace cohort {
namespace {

using test::ProcessResult;

// Runs `cohort ARGS...` with exactly `env` (plus PATH), as `env -i` would.
ProcessResult cohort_cli(const std::vector<std::string>& args, Environment env = {},
                         const std::string& stdin_text = "") {
  std::vector<std::string> argv{COHORT_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  env["PATH"] = "/usr/bin:/bin";
  test::ProcessOptions options;
  options.env = env;
  options.stdin_text = stdin_text;
  options.timeout = std::chrono::seconds(30);
  return test::run_process(argv, options);
}

void expect_one_line_error(const ProcessResult& result, int exit_code) {
  EXPECT_EQ(result.exit_code, exit_code) << test::describe(result);
  ASSERT_FALSE(result.err.empty());
  EXPECT_EQ(result.err.find('\n'), result.err.size() - 1) << "not one line: " << result.err;
  EXPECT_EQ(result.out, "");
}

TEST(CliHostlist, ExpandPrintsOneHostPerLine) {
  const ProcessResult result = cohort_cli({"hostlist", "expand", "rack[1-2]-n[01-02],login"});
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(result.out, "rack1-n01\nrack1-n02\nrack2-n01\nrack2-n02\nlogin\n");
}

TEST(CliHostlist, CompressCountFirstAndStdin) {
  EXPECT_EQ(cohort_cli({"hostlist", "compress", "n1,n2,n3,n7", "login"}).out, "n[1-3,7],login\n");
  EXPECT_EQ(cohort_cli({"hostlist", "count", "node[001-003,010],login"}).out, "5\n");
  EXPECT_EQ(cohort_cli({"hostlist", "first", "gpu-a[1-2]-ib"}).out, "gpu-a1-ib\n");
  EXPECT_EQ(cohort_cli({"hostlist", "compress", "-"}, {}, "n1\nn2\nn3\n").out, "n[1-3]\n");
  EXPECT_EQ(cohort_cli({"hostlist", "expand", "-d", ",", "n[1-3]"}).out, "n1,n2,n3\n");
}

TEST(CliHostlist, BadExpressionIsAnErrorNamingIt) {
  const ProcessResult result = cohort_cli({"hostlist", "expand", "n[1-"});
  expect_one_line_error(result, 1);
  EXPECT_NE(result.err.find("n[1-"), std::string::npos) << result.err;
  expect_one_line_error(cohort_cli({"hostlist", "first", ""}), 1);
}

TEST(CliUsage, UsageErrorsExitTwoWithOneLine) {
  expect_one_line_error(cohort_cli({}), 2);
  expect_one_line_error(cohort_cli({"frobnicate"}), 2);
  expect_one_line_error(cohort_cli({"env", "--bogus"}), 2);
  expect_one_line_error(cohort_cli({"hostlist"}), 2);
  expect_one_line_error(cohort_cli({"hostlist", "expand"}), 2);
  expect_one_line_error(cohort_cli({"hostlist", "shuffle", "n1"}), 2);
  const ProcessResult result = cohort_cli({"hostlist", "expand"});
  EXPECT_NE(result.err.find("cohort hostlist expand --help"), std::string::npos) << result.err;
}

TEST(CliUsage, HelpAndVersion) {
  const ProcessResult version = cohort_cli({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out, "cohort " COHORT_VERSION "\n");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--help"},
                                               {"env", "--help"},
                                               {"hostlist", "--help"},
                                               {"hostlist", "expand", "--help"}}) {
    const ProcessResult help = cohort_cli(args);
    EXPECT_EQ(help.exit_code, 0) << test::describe(help);
    EXPECT_NE(help.out.find("Usage"), std::string::npos) << help.out;
  }
  EXPECT_NE(cohort_cli({"hostlist", "--help"}).out.find("compress"), std::string::npos);
}

// `cohort --help` lists env and bench, which cohort-comm runs; a `cohort`
// without it beside (a copy on its own) says what is missing in one line.
TEST(CliUsage, EnvAndBenchAreListedAndAMissingCohortCommIsNamed) {
  const ProcessResult help = cohort_cli({"--help"});
  for (const char* command : {"run", "env", "hostlist", "bench"}) {
    EXPECT_NE(help.out.find(std::string("\n  ") + command + " "), std::string::npos)
        << command << "\n"
        << help.out;
  }
  const test::TempDir dir("cohort-cli-alone");
  const std::filesystem::path alone = dir.path() / "bin" / "cohort";
  std::filesystem::create_directories(alone.parent_path());
  std::filesystem::copy_file(COHORT_CLI_PATH, alone);
  std::filesystem::permissions(alone, std::filesystem::perms::owner_all);
  test::ProcessOptions options;
  options.env = {{"PATH", "/usr/bin:/bin"}, {"LD_LIBRARY_PATH", COHORT_BUILD_LIBDIR}};
  const ProcessResult result = test::run_process({alone.string(), "env"}, options);
  expect_one_line_error(result, 1);
  EXPECT_NE(result.err.find("cohort env: cannot run " + dir.path().string() + "/bin/"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("/cohort/cohort-comm ("), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("install cohort again"), std::string::npos) << result.err;
}

TEST(CliEnv, InconsistentEnvironmentNamesTheVariables) {
  const ProcessResult result = cohort_cli({"env"}, {{"RANK", "3"}, {"WORLD_SIZE", "2"}});
  expect_one_line_error(result, 1);
  EXPECT_NE(result.err.find("RANK=3"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("WORLD_SIZE=2"), std::string::npos) << result.err;
}

TEST(CliEnv, JsonForTheSlurmExample) {
  const ProcessResult result = cohort_cli({"env", "--json"}, test::slurm_step_example());
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  const auto json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["rank"], 5);
  EXPECT_EQ(json["world_size"], 8);
  EXPECT_EQ(json["local_rank"], 1);
  EXPECT_EQ(json["local_world_size"], 2);
  EXPECT_EQ(json["node_rank"], 2);
  EXPECT_EQ(json["num_nodes"], 4);
  EXPECT_EQ(json["master_addr"], "n1");
  EXPECT_EQ(json["launcher"], "slurm");
  EXPECT_EQ(json["job_id"], "1234");
  EXPECT_EQ(json["sources"]["rank"], "SLURM_PROCID");
  EXPECT_TRUE(json["master_port"].is_number_integer());
  for (const char* key : {"hostname", "interfaces", "route_to_master", "cpus", "gpus", "settings",
                          "backends", "notes", "restart_count", "version"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  // n1 does not resolve here: the route says so instead of failing.
  EXPECT_TRUE(json["route_to_master"].contains("error"));
}

// A node of 8 GPUs on 2 NUMA nodes (tests/data/gpu/), 4 of them allowed:
// cohort env names the 4, where each sits, and what each local rank gets.
TEST(CliEnv, TheGpusThisProcessMayUseAndEachLocalRanksShare) {
  const std::string fixture = std::string(COHORT_SOURCE_DIR) + "/tests/data/gpu/dgx-h100-x8";
  const Environment env{{"COHORT_SYSFS_ROOT", fixture},
                        {"COHORT_NVML_LIBRARY", "none"},
                        {"CUDA_VISIBLE_DEVICES", "2,3,6,7"}};
  ProcessResult result = cohort_cli({"env", "--json"}, env);
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  auto gpus = nlohmann::json::parse(result.out)["gpus"];
  ASSERT_EQ(gpus["devices"].size(), 8u) << gpus;
  EXPECT_EQ(gpus["usable"], 4);
  EXPECT_EQ(gpus["visible_by"], "CUDA_VISIBLE_DEVICES=2,3,6,7");
  EXPECT_EQ(gpus["devices"][6]["bus_id"], "0000:d1:00.0");
  EXPECT_EQ(gpus["devices"][6]["numa_node"], 1);
  EXPECT_EQ(gpus["devices"][6]["cuda_ordinal"], 2);
  EXPECT_TRUE(gpus["devices"][0]["cuda_ordinal"].is_null());
  EXPECT_EQ(gpus["numa_nodes"]["1"], "56-111,168-223");
  const auto& ranks = gpus["placement"]["local_ranks"];
  ASSERT_EQ(ranks.size(), 4u) << gpus;
  EXPECT_EQ(ranks[2]["gpus"], "6");
  EXPECT_EQ(ranks[2]["cuda_visible_devices"], "");  // as torchrun: set_device(LOCAL_RANK)
  // Two workers with two GPUs each, each on a fair share of this process's CPUs.
  result =
      cohort_cli({"env", "--json", "-n", "2", "--gpus-per-proc", "2", "--cpu-bind", "cores"}, env);
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  gpus = nlohmann::json::parse(result.out)["gpus"];
  EXPECT_EQ(gpus["placement"]["local_ranks"][1]["cuda_visible_devices"], "6,7") << gpus;
  EXPECT_FALSE(gpus["placement"]["local_ranks"][1]["cpus"].get<std::string>().empty()) << gpus;
  // The text form says the same.
  result = cohort_cli({"env"}, env);
  EXPECT_NE(result.out.find("usable                 4                      "
                            "(CUDA_VISIBLE_DEVICES=2,3,6,7)"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("local rank 3           gpu 7"), std::string::npos) << result.out;
}

// cohort run applies what cohort env shows, and refuses, before anything
// starts, what the node cannot give.
TEST(CliRun, EachWorkerGetsItsOwnGpusAndTheNodeMustHaveThem) {
  const std::string fixture = std::string(COHORT_SOURCE_DIR) + "/tests/data/gpu/dgx-h100-x8";
  Environment env{{"COHORT_SYSFS_ROOT", fixture}, {"CUDA_VISIBLE_DEVICES", "2,3,6,7"}};
  ProcessResult result =
      cohort_cli({"run", "-n", "2", "--gpus-per-proc", "2", "--cpu-bind", "cores", "--", "sh", "-c",
                  "echo $LOCAL_RANK $CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER $COHORT_CPUS "
                  "$(grep Cpus_allowed_list /proc/self/status | cut -f2)"},
                 env);
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < result.out.size();) {
    const std::size_t end = result.out.find('\n', start);
    lines.push_back(result.out.substr(start, end - start));
    start = end + 1;
  }
  std::sort(lines.begin(), lines.end());
  ASSERT_EQ(lines.size(), 2u) << result.out;
  EXPECT_EQ(lines[0].rfind("[0] 0 2,3 PCI_BUS_ID ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("[1] 1 6,7 PCI_BUS_ID ", 0), 0u) << lines[1];
  // The CPUs it was given are the ones it runs on.
  for (const std::string& line : lines) {
    const std::vector<std::string> words = [&line] {
      std::vector<std::string> out;
      std::size_t start = 0;
      for (std::size_t space; (space = line.find(' ', start)) != std::string::npos;
           start = space + 1)
        out.push_back(line.substr(start, space - start));
      out.push_back(line.substr(start));
      return out;
    }();
    ASSERT_EQ(words.size(), 6u) << line;
    EXPECT_EQ(words[4], words[5]) << line;
  }
  // -n gpu: one worker per GPU this process may use.
  result =
      cohort_cli({"run", "-n", "gpu", "--", "sh", "-c", "echo workers=$LOCAL_WORLD_SIZE"}, env);
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(std::count(result.out.begin(), result.out.end(), '\n'), 4) << result.out;
  EXPECT_NE(result.out.find("workers=4"), std::string::npos) << result.out;
  env["CUDA_VISIBLE_DEVICES"] = "2";
  result = cohort_cli({"run", "-n", "2", "--gpus-per-proc", "1", "--", "true"}, env);
  expect_one_line_error(result, 2);
  EXPECT_NE(result.err.find("2 workers with --gpus-per-proc 1 need 2 GPUs on this node, but it "
                            "allows 1 (CUDA_VISIBLE_DEVICES=2)"),
            std::string::npos)
      << result.err;
}

// A worker that dies of a CUDA error on a node whose driver logged an Xid
// meanwhile: the report names both, with the GPU's index and bus id. The
// node is the recorded one-H100 tree, with a kernel log written here.
TEST(CliRun, TheReportNamesTheGpuOfACudaErrorAndTheDriversXid) {
  const std::string fixture = std::string(COHORT_SOURCE_DIR) + "/tests/data/gpu/h100-x1";
  char dir_template[] = "/tmp/cohort-gpu-root.XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string root = dir_template;
  ASSERT_EQ(::symlink((fixture + "/sys").c_str(), (root + "/sys").c_str()), 0);
  ASSERT_EQ(::symlink((fixture + "/proc").c_str(), (root + "/proc").c_str()), 0);
  ASSERT_EQ(::mkdir((root + "/dev").c_str(), 0700), 0);
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const long long later = (static_cast<long long>(now.tv_sec) + 5) * 1000000;  // in the job
  std::ofstream(root + "/dev/kmsg")
      << "4,10,1000,-;NVRM: Xid (PCI:0000:17:00): 13, before the job\n"
      << "4,11," << later
      << ",-;NVRM: Xid (PCI:0000:17:00): 79, pid=77, name=python3, GPU has fallen off the bus.\n";
  const ProcessResult result =
      cohort_cli({"run", "--", "sh", "-c",
                  "echo 'RuntimeError: CUDA error: unspecified launch failure' >&2; exit 1"},
                 {{"COHORT_SYSFS_ROOT", root}});
  EXPECT_EQ(result.exit_code, 1) << test::describe(result);
  EXPECT_NE(result.err.find("  gpu           CUDA error on GPU 0 (0000:17:00.0): RuntimeError: "
                            "CUDA error: unspecified launch failure\n"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("  gpu           kernel log, GPU 0 (0000:17:00.0): NVRM: Xid "
                            "(PCI:0000:17:00): 79, pid=77, name=python3, GPU has fallen off the "
                            "bus.\n"),
            std::string::npos)
      << result.err;
  EXPECT_EQ(result.err.find("before the job"), std::string::npos) << result.err;
  std::filesystem::remove_all(root);
}

TEST(CliEnv, JsonUnderOpenMpiInsideSlurm) {
  Environment env = test::slurm_step_example();
  env.merge(test::openmpi_rank2_of4());
  const ProcessResult result = cohort_cli({"env", "--json"}, env);
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  const auto json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["rank"], 2);
  EXPECT_EQ(json["world_size"], 4);
  EXPECT_EQ(json["launcher"], "openmpi");
  EXPECT_TRUE(json["node_rank"].is_null());  // Open MPI exports no node index
  ASSERT_EQ(json["notes"].size(), 1u);
}

TEST(CliEnv, TextShowsValuesSourcesAndHostFacts) {
  const ProcessResult result = cohort_cli(
      {"env"}, {{"MASTER_ADDR", "127.0.0.1"}, {"OMP_NUM_THREADS", "3"}, {"NCCL_DEBUG", "INFO"}});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  for (const char* expected : {"launcher", "single", "master_addr", "127.0.0.1", "MASTER_ADDR",
                               "interface lo", "routes to the master", "cpus", "usable", "gpus",
                               "OMP_NUM_THREADS", "3", "NCCL_DEBUG", "INFO", "backends"}) {
    EXPECT_NE(result.out.find(expected), std::string::npos) << expected << " in\n" << result.out;
  }
}

TEST(CliEnv, JsonRouteToALoopbackMaster) {
  const ProcessResult result = cohort_cli({"env", "--json"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  const auto json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["launcher"], "single");
  EXPECT_EQ(json["route_to_master"]["source_address"], "127.0.0.1");
  bool routed = false;
  for (const auto& interface : json["interfaces"])
    routed = routed || interface["routes_to_master"];
  EXPECT_TRUE(routed);
}

// The backend `cohort env` names is the registry's own choice: one that
// cohort::init() would refuse is reported refused, with init()'s reason.
TEST(CliEnv, TheBackendIsWhatInitWouldChooseOrRefuse) {
  const auto backend = [](const Environment& env) {
    const ProcessResult result = cohort_cli({"env", "--json"}, env);
    EXPECT_EQ(result.exit_code, 0) << test::describe(result);
    return nlohmann::json::parse(result.out)["backend"];
  };
  const auto alone = backend({});
  EXPECT_EQ(alone["chosen"], "self") << alone;
  const auto asked = backend({{"COHORT_BACKEND", "gloo"}});
  EXPECT_EQ(asked["chosen"], "gloo") << asked;
  EXPECT_EQ(asked["reason"], "COHORT_BACKEND");
  const auto unknown = backend({{"COHORT_BACKEND", "nccl"}});
  EXPECT_TRUE(unknown["chosen"].is_null()) << unknown;
  EXPECT_NE(unknown["reason"].get<std::string>().find("unknown backend 'nccl' (COHORT_BACKEND)"),
            std::string::npos)
      << unknown;
  // A backend this job cannot use says who started it, in words.
  const auto mpi = backend({{"COHORT_BACKEND", "mpi"}});
  EXPECT_TRUE(mpi["chosen"].is_null()) << mpi;
  const std::string why = mpi["reason"];
  EXPECT_TRUE(why.find("started by no launcher (a single process)") != std::string::npos ||
              why.find("unknown backend 'mpi'") != std::string::npos)  // a build without MPI
      << why;
}

TEST(CliBench, AllreduceTableAndJson) {
  const std::string json_path = "/tmp/cohort-bench-test-" + std::to_string(getpid()) + ".json";
  Environment env;
  env["HOME"] = "/tmp";
  const ProcessResult result = cohort_cli(
      {"bench", "allreduce", "-n", "2", "--sizes", "4K:16K", "--iters", "3", "--json", json_path},
      env);
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_NE(result.out.find(std::string("2 ranks, backend ") + test::kOneHostBackend),
            std::string::npos)
      << result.out;
  std::ifstream file(json_path);
  const auto json = nlohmann::json::parse(file);
  std::remove(json_path.c_str());
  EXPECT_EQ(json["ranks"], 2);
  ASSERT_EQ(json["results"].size(), 3u);  // 4K, 8K, 16K
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& row = json["results"][i];
    EXPECT_EQ(row["bytes"], 4096u << i);
    EXPECT_EQ(row["count"], 1024u << i);
    EXPECT_GT(row["time_us"].get<double>(), 0);
    // nccl-tests' convention: busbw = algbw × 2(n−1)/n, which is algbw for n = 2.
    EXPECT_DOUBLE_EQ(row["busbw_gbps"].get<double>(), row["algbw_gbps"].get<double>());
  }
  expect_one_line_error(cohort_cli({"bench", "allreduce", "--sizes", "1M:4K"}), 2);
  expect_one_line_error(cohort_cli({"bench", "allreduce", "--sizes", "2"}), 2);
}

// --allocate: every op on buffers from Communicator::allocate.
TEST(CliBench, AllocatedBuffersForEveryOp) {
  for (const char* op : {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "gather",
                         "scatter", "all_to_all", "send_recv"}) {
    const ProcessResult result = cohort_cli({"bench", "allreduce", "-n", "2", "--sizes", "4K:64K",
                                             "--iters", "3", "--op", op, "--allocate"});
    ASSERT_EQ(result.exit_code, 0) << op << ": " << test::describe(result);
    EXPECT_NE(result.out.find("buffers from Communicator::allocate"), std::string::npos)
        << result.out;
    EXPECT_EQ(std::count(result.out.begin(), result.out.end(), '\n'), 3 + 5) << result.out;
  }
}

// As mpirun binds its ranks: each worker on its own core, the workers'
// affinity as cohort run --cpu-bind cores gives it; a mode it lacks is refused.
TEST(CliBench, WorkersBoundToCoresWhenAsked) {
  const ProcessResult bound = cohort_cli(
      {"bench", "allreduce", "-n", "2", "--sizes", "4K:4K", "--iters", "3", "--cpu-bind", "cores"});
  ASSERT_EQ(bound.exit_code, 0) << test::describe(bound);
  EXPECT_EQ(std::count(bound.out.begin(), bound.out.end(), '\n'), 3 + 1) << bound.out;
  const ProcessResult refused =
      cohort_cli({"bench", "allreduce", "-n", "2", "--cpu-bind", "sockets"});
  EXPECT_EQ(refused.exit_code, 2) << test::describe(refused);
  EXPECT_NE(refused.err.find("--cpu-bind"), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace cohort
