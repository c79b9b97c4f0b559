// Tier 3, real PyTorch: unmodified torch.distributed scripts (examples/python,
// tests/python/probe.py) under `cohort run`; the same examples under
// torchrun; the DDP example on 2 ranks against 1 rank on the whole batch;
// PyTorch failures in the report. Twice in the suite: with Debian 12's
// PyTorch 1.13 (/usr/bin/python3), and with Debian 13's 2.6
// (COHORT_TEST_PYTHON=tests/harness/torch2-python, ctest's "torch2:" tests).
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
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

// Debian's, with python3-torch, unless the suite names another.
const std::string kPython =
    std::getenv("COHORT_TEST_PYTHON") ? std::getenv("COHORT_TEST_PYTHON") : "/usr/bin/python3";
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
  // A port free on loopback now.
  static int free_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    bind(fd, reinterpret_cast<sockaddr*>(&address), size);
    getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
    close(fd);
    return ntohs(address.sin_port);
  }
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
  // Quoted in the report ("    | "), as PyTorch printed them: 2.x prefixes
  // "[rank1]: " to an uncaught exception's lines.
  EXPECT_EQ(lines_with(result.err, "Traceback (most recent call last):", "    | ").size(), 1u)
      << result.err;
  EXPECT_EQ(
      lines_with(result.err, "RuntimeError: rank 1 cannot go on: batch 17 has no labels", "    | ")
          .size(),
      1u)
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
  // The agent serves MASTER_PORT itself: it says so before any worker starts.
  auto result = cohort_run({"-n", "2", "--master-port", port, example("reduction.py")});
  EXPECT_EQ(result.exit_code, 1) << test::describe(result);
  EXPECT_EQ(lines_with(result.err, "").size(), 1u) << result.err;
  EXPECT_NE(result.err.find("the workers' MASTER_PORT, where the agent serves PyTorch's "
                            "TCPStore: cannot listen on 127.0.0.1:" +
                            port),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("it comes from --master-port: drop it"), std::string::npos)
      << result.err;
  // Without the agent store rank 0 binds it, and the report's why line says it.
  result =
      cohort_run({"-n", "2", "--no-agent-store", "--master-port", port, example("reduction.py")});
  close(holder);
  EXPECT_NE(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(lines_with(result.err, "why           MASTER_PORT " + port + " on ").size(), 1u)
      << result.err;
  EXPECT_NE(result.err.find("is taken by another process, so rank 0 could not listen there: "
                            "drop --master-port"),
            std::string::npos)
      << result.err;
}

// The agent's store speaks PyTorch's TCPStore protocol on MASTER_PORT
// (TORCHELASTIC_USE_AGENT_STORE=True): this PyTorch's own client, 4
// connections and 8 waiters at once per rank, every operation its version
// has checked against its expected answer. The same script against rank 0's
// own PyTorch store (--no-agent-store) expects the same answers.
TEST_F(PyTorch, TheAgentStoreServesTorchsTcpStoreClients) {
  for (const bool agent_store : {true, false}) {
    std::vector<std::string> args{"-n", "3", (kTests / "tcpstore_clients.py").string()};
    if (!agent_store) args.insert(args.begin(), "--no-agent-store");
    const auto result = cohort_run(args);
    ASSERT_EQ(result.exit_code, 0)
        << (agent_store ? "agent store" : "rank 0's store") << ": " << test::describe(result);
    EXPECT_EQ(lines_with(result.out, ": 4 clients and 8 waiters ok, leader ").size(), 3u)
        << result.out;
  }
}

// Two nodes on this machine (torchrun's rendezvous form): node 1's workers
// reach the store through their agent's relay (MASTER_ADDR 127.0.0.1, the
// relay's TCPStore port), which carries each of their queries to node 0's
// store in cohort's protocol; node 0's use that store itself. The same
// script and answers as above, every operation this PyTorch's client has;
// then with COHORT_TORCH_STORE_RELAY=0, every worker at node 0's store.
TEST_F(PyTorch, TcpStoreClientsWorkThroughTheirNodesRelay) {
  for (const bool relayed : {true, false}) {
    const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
    test::ProcessOptions with_env = options();
    with_env.env = process_environment();
    (*with_env.env)["COHORT_TORCH_STORE_RELAY"] = relayed ? "1" : "0";
    const std::vector<std::string> args{COHORT_CLI_PATH,
                                        "run",
                                        "--python",
                                        kPython,
                                        "--nnodes=2",
                                        "--nproc-per-node=2",
                                        "--rdzv-backend=c10d",
                                        "--rdzv-endpoint=" + endpoint,
                                        (kTests / "tcpstore_clients.py").string()};
    test::Subprocess first(args, with_env);
    test::Subprocess second(args, with_env);
    const test::ProcessResult a = first.finish();
    const test::ProcessResult b = second.finish();
    ASSERT_EQ(a.exit_code, 0) << test::describe(a);
    ASSERT_EQ(b.exit_code, 0) << test::describe(b);
    const std::string out = a.out + b.out;
    EXPECT_EQ(lines_with(out, ": 4 clients and 8 waiters ok, leader ").size(), 4u) << out;
    // "... master 127.0.0.1:PORT" from each rank: node 1's name its relay.
    std::set<std::string> masters;
    for (const std::string& line : lines_with(out, " master "))
      masters.insert(line.substr(line.find(" master ")));
    EXPECT_EQ(masters.size(), relayed ? 2u : 1u) << out;
  }
}

// On a host whose name does not resolve to one of its addresses, gloo (and
// NCCL, TensorPipe) would guess loopback, with a warning on every rank, and
// across hosts hang or be refused: cohort names the interface it reaches
// the other nodes with (GLOO_SOCKET_IFNAME ...), here loopback on purpose.
TEST_F(PyTorch, GlooNeedsNoGuessWhenTheHostNameDoesNotResolve) {
  const test::ProcessResult result = test::run_process(
      {"unshare", "--uts", "sh", "-c", "hostname cohort-unresolvable-host && exec \"$@\"", "sh",
       COHORT_CLI_PATH, "run", "--python", kPython, "-n", "2", example("hello.py"), "--backend",
       "gloo"},
      options());
  if (result.exit_code != 0 && result.err.find("unshare") != std::string::npos) {
    COHORT_SKIP_MISSING("unshare --uts failed (it needs root): " << result.err);
  }
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(lines_with(result.out, "hello from [cohort-unresolvable-host:gloo]").size(), 2u)
      << result.out;
  EXPECT_EQ(result.err.find("Using the loopback address as fallback"), std::string::npos)
      << result.err;
}

// A worker whose client the agent's store cannot serve could never
// rendezvous: the job ends at once (the worker would wait 10 minutes), and
// the report says why.
TEST_F(PyTorch, AWorkerThatCanNeverRendezvousEndsTheJobAtOnce) {
  const auto result = cohort_run({"-n", "2", (kTests / "unservable_client.py").string()});
  EXPECT_EQ(result.exit_code, 1) << test::describe(result);
  EXPECT_EQ(lines_with(result.err,
                       "cohort run: stopped the job at once: a worker can never "
                       "rendezvous: a PyTorch TCPStore client at ")
                .size(),
            1u)
      << result.err;
  EXPECT_NE(result.err.find("(PyTorch 2.1 or later) sent query type 99, newer than any PyTorch "
                            "release cohort's store knows"),
            std::string::npos)
      << result.err;
  EXPECT_EQ(lines_with(result.err, "stopped by cohort (SIGTERM)").size(), 2u) << result.err;
}

// torchrun parity, against this PyTorch's own torchrun: every option of
// its argument parser, in both spellings, is one of cohort run's.
TEST_F(PyTorch, EveryOptionOfThisTorchrunIsCohortRuns) {
  const auto options_of_torchrun =
      test::run_process({kPython, (kTests / "torchrun_options.py").string()}, options());
  ASSERT_EQ(options_of_torchrun.exit_code, 0) << test::describe(options_of_torchrun);
  const auto help = test::run_process({COHORT_CLI_PATH, "run", "--help"}, options());
  std::set<std::string> cohorts;  // "  -n,--nproc-per-node,--nproc_per_node  ..." -> each
  for (const std::string& line : lines_with(help.out, "-", "  -")) {
    const std::string names = line.substr(2, line.find(' ', 2) - 2);
    for (std::size_t start = 0; start < names.size();) {
      const std::size_t end = std::min(names.find(',', start), names.size());
      cohorts.insert(names.substr(start, std::min(names.find('{', start), end) - start));
      start = end + 1;
    }
  }
  std::istringstream stream(options_of_torchrun.out);
  int count = 0;
  for (std::string option; std::getline(stream, option); ++count)
    EXPECT_EQ(cohorts.count(option), 1u) << option << " (torchrun's) is not cohort run's";
  EXPECT_GT(count, 20) << options_of_torchrun.out;
}

// The variables this PyTorch's torchrun sets for its workers (--standalone,
// 2 workers; Debian 12's needs --redirects 9:0 --tee 9:0 to start) are what
// cohort run sets, with the same values where they do not name the store's
// address, a file or the job's id.
TEST_F(PyTorch, WorkersGetTheVariablesThisTorchrunSets) {
  Environment base;
  for (const char* name : {"PATH", "HOME", "LANG"}) {
    if (const char* value = std::getenv(name)) base[name] = value;
  }
  test::ProcessOptions clean = options();
  clean.env = base;
  const std::string script = (kTests / "worker_env.py").string();
  const auto torchrun =
      test::run_process({kPython, "-m", "torch.distributed.run", "--redirects", "9:0", "--tee",
                         "9:0", "--standalone", "--nproc_per_node", "2", script},
                        clean);
  ASSERT_EQ(torchrun.exit_code, 0) << test::describe(torchrun);
  const auto cohort =
      test::run_process({COHORT_CLI_PATH, "run", "--python", kPython, "-n", "2", script}, clean);
  ASSERT_EQ(cohort.exit_code, 0) << test::describe(cohort);
  // "env 1 NAME=VALUE", maybe behind cohort's "[1] " prefix -> {rank, NAME} -> VALUE
  const auto parse = [](const std::string& out) {
    std::map<std::pair<std::string, std::string>, std::string> vars;
    for (const std::string& line : lines_with(out, "env ")) {
      const std::size_t at = line.find("env ");
      const std::size_t space = line.find(' ', at + 4);
      const std::size_t equals = line.find('=', space);
      if (space == std::string::npos || equals == std::string::npos) continue;
      vars[{line.substr(at + 4, space - at - 4), line.substr(space + 1, equals - space - 1)}] =
          line.substr(equals + 1);
    }
    return vars;
  };
  const auto theirs = parse(torchrun.out);
  const auto ours = parse(cohort.out);
  // Where the store is (torchrun --standalone says localhost, cohort
  // 127.0.0.1) and who serves it (1.13's torchrun has rank 0 serve it,
  // TORCHELASTIC_USE_AGENT_STORE=False; 2.x's agent, as cohort's does), the
  // job's id and files.
  const std::set<std::string> differ_by_design = {"MASTER_ADDR", "MASTER_PORT",
                                                  "TORCHELASTIC_USE_AGENT_STORE",
                                                  "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE"};
  int compared = 0;
  for (const auto& [key, value] : theirs) {
    if (base.count(key.second) != 0 || key.second.rfind("PYTHON", 0) == 0) continue;
    ++compared;
    // 1.13's torchrun sets NCCL_ASYNC_ERROR_HANDLING; cohort sets only its
    // PyTorch 2.2 name, as 2.x's torchrun does: 2.x warns on every rank
    // that the old name is deprecated (docs/run.md).
    const bool renamed = key.second == "NCCL_ASYNC_ERROR_HANDLING";
    const auto found = ours.find(renamed ? std::make_pair(key.first, "TORCH_" + key.second) : key);
    if (found == ours.end()) {
      ADD_FAILURE() << "rank " << key.first << ": torchrun sets " << key.second << "=" << value
                    << ", cohort run does not";
    } else if (differ_by_design.count(key.second) == 0) {
      EXPECT_EQ(found->second, value) << "rank " << key.first << ": " << key.second;
    }
  }
  EXPECT_GT(compared, 2 * 14) << torchrun.out;  // RANK ... TORCHELASTIC_USE_AGENT_STORE, twice
}

// @record writes TORCHELASTIC_ERROR_FILE; the report quotes it.
TEST_F(PyTorch, RecordWritesTheErrorFileAndTheReportQuotesIt) {
  test::TempDir logs("cohort-record");
  const auto result = cohort_run(
      {"-n", "2", "--log-dir", logs.path().string(), probe(), "--raise-in", "1", "--record"});
  EXPECT_EQ(result.exit_code, 1) << test::describe(result);
  EXPECT_NE(result.err.find("  error         RuntimeError: rank 1 cannot go on: batch 17 has no "
                            "labels\n  traceback     its frame (from TORCHELASTIC_ERROR_FILE, "
                            "written by @record):\n"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("probe.py\", line "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("raise RuntimeError(f\"rank {rank} cannot go on"), std::string::npos)
      << result.err;
  const std::string recorded = test::read_file(logs.path() / "attempt_0" / "rank_1" / "error.json");
  EXPECT_NE(recorded.find("\"py_callstack\""), std::string::npos) << recorded;
}

// torchrun's own command lines, with `torchrun` replaced by `cohort run`:
// pytorch/examples' distributed README and run_example.sh, the legacy
// launcher's --use_env, and one line with every flag in the underscore
// spelling (output options included).
TEST_F(PyTorch, TorchrunsOwnCommandLinesRunUnchanged) {
  const std::vector<std::vector<std::string>> lines = {
      {"--nnodes=1", "--nproc_per_node=2", "--rdzv_id=101", "--rdzv_endpoint=localhost:5972",
       example("reduction.py")},
      {"--standalone", "--nproc_per_node=2", example("reduction.py")},
      {"--nproc_per_node=2", "--use_env", example("reduction.py")},
      {"--nnodes=1", "--max_restarts=0", "--rdzv_id=7", "--rdzv_backend=c10d", "--nproc_per_node=2",
       "--rdzv_endpoint=localhost:29403", "-m", "reduction"}};
  for (const auto& line : lines) {
    test::ProcessOptions in_examples = options();
    in_examples.working_directory = kExamples.string();  // for -m reduction
    std::vector<std::string> argv{COHORT_CLI_PATH, "run", "--python", kPython};
    argv.insert(argv.end(), line.begin(), line.end());
    const auto result = test::run_process(argv, in_examples);
    ASSERT_EQ(result.exit_code, 0) << line.front() << ": " << test::describe(result);
    EXPECT_EQ(lines_with(result.out, "has data tensor([2.])").size(), 2u) << result.out;
  }
  test::TempDir logs("cohort-torchrun-flags");
  const auto result = cohort_run(
      {"--nnodes=1", "--nproc_per_node=2", "--rdzv_backend=c10d", "--rdzv_endpoint=localhost:29400",
       "--rdzv_id=all-flags", "--rdzv_conf=join_timeout=60,read_timeout=30,timeout=60",
       "--max_restarts=0", "--monitor_interval=5", "--start_method=spawn", "--role=trainer",
       "--log_dir=" + logs.path().string(), "--redirects=0:1", "--tee=1:1",
       "--local_ranks_filter=0,1", "--local_addr=127.0.0.1", "--logs_specs=default", "--run_path",
       "--local_rank_arg", probe()});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  // Local rank 0's stdout went to its file only; local rank 1's to both.
  EXPECT_EQ(lines_with(result.out, "probe rank 0/2").size(), 0u) << result.out;
  EXPECT_EQ(lines_with(result.out, "probe rank 1/2 restart 0 local_rank_arg 1 sum 2").size(), 1u)
      << result.out;
  EXPECT_NE(test::read_file(logs.path() / "attempt_0" / "rank_0" / "stdout.log")
                .find("probe rank 0/2 restart 0 local_rank_arg 0 sum 2"),
            std::string::npos);
  EXPECT_NE(
      test::read_file(logs.path() / "attempt_0" / "rank_1" / "stdout.log").find("probe rank 1/2"),
      std::string::npos);
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
