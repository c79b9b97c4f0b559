// The launcher's pure pieces: worker command lines and environments, exit
// statuses, output routing and the failure report.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch/error_file.hpp"
#include "launch/exit_status.hpp"
#include "launch/output.hpp"
#include "launch/report.hpp"
#include "launch/worker_setup.hpp"

namespace cohort::detail {
namespace {

// waitpid-style statuses, built the way the kernel encodes them.
constexpr int exited(int code) {
  return code << 8;
}
constexpr int killed(int signal) {
  return signal;
}

TEST(WorkerArgv, ProgramsScriptsAndTheLegacyLocalRank) {
  RunOptions options;
  options.command = {"./train", "--lr", "0.1"};
  EXPECT_EQ(worker_argv(options, 3), (std::vector<std::string>{"./train", "--lr", "0.1"}));
  options.command = {"train.py", "--epochs", "2"};
  options.python = "/usr/bin/python3";
  options.local_rank_arg = RunOptions::LocalRankArg::underscore;
  EXPECT_EQ(worker_argv(options, 1), (std::vector<std::string>{"/usr/bin/python3", "train.py",
                                                               "--epochs", "2", "--local_rank=1"}));
  options.local_rank_arg = RunOptions::LocalRankArg::dash;  // torch.distributed.launch of 2.x
  EXPECT_EQ(worker_argv(options, 1).back(), "--local-rank=1");
  options.command = {".py"};  // a program named ".py" is not a script
  options.local_rank_arg = RunOptions::LocalRankArg::none;
  EXPECT_EQ(worker_argv(options, 0), (std::vector<std::string>{".py"}));
}

// torchrun's -m, --no-python and --run-path.
TEST(WorkerArgv, ModuleNoPythonAndRunPath) {
  RunOptions options;
  options.python = "py";
  options.command = {"pkg.train", "--lr", "1"};
  options.module = true;
  EXPECT_EQ(worker_argv(options, 0),
            (std::vector<std::string>{"py", "-m", "pkg.train", "--lr", "1"}));
  options.module = false;
  options.run_path = true;
  EXPECT_EQ(worker_argv(options, 0), (std::vector<std::string>{"py", "pkg.train", "--lr", "1"}));
  options.run_path = false;
  options.no_python = true;
  options.command = {"./tool.py", "x"};
  EXPECT_EQ(worker_argv(options, 0), (std::vector<std::string>{"./tool.py", "x"}));
  EXPECT_FALSE(runs_with_python(options));
}

TEST(WorkerEnvironment, TorchrunsVariablesAndCohorts) {
  WorkerIdentity worker;
  worker.rank = 5;
  worker.local_rank = 1;
  worker.world_size = 8;
  worker.local_world_size = 2;
  worker.node_rank = 2;
  worker.num_nodes = 4;
  worker.restart_count = 1;
  worker.max_restarts = 3;
  worker.run_id = "run";
  worker.master_addr = "10.0.0.1";
  worker.master_port = 29500;
  worker.store_addr = "10.0.0.1";
  worker.store_port = 4000;
  worker.job_token = "secret";
  worker.error_file = "/tmp/job/attempt_1/rank_5/error.json";
  worker.omp_threads = 4;
  const Environment env = worker_environment(
      {{"PATH", "/bin"}, {"RANK", "stale"}, {"TORCHELASTIC_ERROR_FILE", "/outer.json"}}, worker);
  const Environment expected = {
      {"PATH", "/bin"},
      {"RANK", "5"},
      {"LOCAL_RANK", "1"},
      {"WORLD_SIZE", "8"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"GROUP_RANK", "2"},
      {"GROUP_WORLD_SIZE", "4"},
      {"ROLE_RANK", "5"},
      {"ROLE_WORLD_SIZE", "8"},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29500"},
      {"TORCHELASTIC_RUN_ID", "run"},
      {"TORCHELASTIC_RESTART_COUNT", "1"},
      {"TORCHELASTIC_MAX_RESTARTS", "3"},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"TORCHELASTIC_ERROR_FILE", "/tmp/job/attempt_1/rank_5/error.json"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"COHORT_RUN_ID", "run"},
      {"COHORT_STORE_ADDR", "10.0.0.1"},
      {"COHORT_STORE_PORT", "4000"},
      {"COHORT_JOB_TOKEN", "secret"},
      {"OMP_NUM_THREADS", "4"},
  };
  EXPECT_EQ(env, expected);
  // The launch environment a worker then detects is exactly this one.
  const LaunchInfo info = detect_launch(env);
  EXPECT_EQ(info.launcher.value, Launcher::cohort);
  EXPECT_EQ(info.rank.value, 5);
  EXPECT_EQ(info.node_rank.value, 2);
  EXPECT_EQ(info.master_port.value, 29500);
  // A user's OMP_NUM_THREADS and NCCL error handling are kept.
  const Environment own = worker_environment(
      {{"OMP_NUM_THREADS", "7"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}}, worker);
  EXPECT_EQ(own.at("OMP_NUM_THREADS"), "7");
  EXPECT_EQ(own.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "0");
  EXPECT_EQ(own.count("NCCL_ASYNC_ERROR_HANDLING"), 0u);
  // The agent's store: every rank a client of MASTER_PORT.
  worker.agent_store = true;
  EXPECT_EQ(worker_environment({}, worker).at("TORCHELASTIC_USE_AGENT_STORE"), "True");
  // The store's process on its own host; an outer job's is never inherited.
  EXPECT_EQ(
      worker_environment({{"COHORT_STORE_PROCESS", "1:2"}}, worker).count("COHORT_STORE_PROCESS"),
      0u);
  worker.store_process = "4242:987654";
  EXPECT_EQ(worker_environment({}, worker).at("COHORT_STORE_PROCESS"), "4242:987654");
}

TEST(WorkerEnvironment, TheLibrariesAreToldTheInterfaceThatReachesTheOtherNodes) {
  WorkerIdentity worker;
  worker.socket_interface = "eth1";
  const Environment env = worker_environment({}, worker);
  EXPECT_EQ(env.at("GLOO_SOCKET_IFNAME"), "eth1");
  EXPECT_EQ(env.at("NCCL_SOCKET_IFNAME"), "eth1");
  EXPECT_EQ(env.at("TP_SOCKET_IFNAME"), "eth1");
  // A user's own choice wins, variable by variable.
  const Environment own = worker_environment({{"NCCL_SOCKET_IFNAME", "ib"}}, worker);
  EXPECT_EQ(own.at("NCCL_SOCKET_IFNAME"), "ib");
  EXPECT_EQ(own.at("GLOO_SOCKET_IFNAME"), "eth1");
  // Unknown: left to the libraries.
  worker.socket_interface.clear();
  EXPECT_EQ(worker_environment({}, worker).count("GLOO_SOCKET_IFNAME"), 0U);
}

TEST(ExitStatus, ShellConvention) {
  EXPECT_EQ(shell_exit_code(exited(0)), 0);
  EXPECT_EQ(shell_exit_code(exited(3)), 3);
  EXPECT_EQ(shell_exit_code(killed(SIGKILL)), 137);
  EXPECT_EQ(shell_exit_code(killed(SIGSEGV) | 0x80), 139);  // a core dump changes nothing
  EXPECT_EQ(describe_exit(exited(3)), "exited with code 3");
  EXPECT_NE(describe_exit(killed(SIGKILL)).find("OOM killer"), std::string::npos);
  EXPECT_EQ(describe_exit(killed(SIGSEGV) | 0x80), "killed by SIGSEGV (signal 11), core dumped");
  EXPECT_NE(describe_exit(exited(127)).find("PATH"), std::string::npos);
}

TEST(ExitStatus, SignalNames) {
  EXPECT_EQ(parse_signal("TERM"), SIGTERM);
  EXPECT_EQ(parse_signal("sigusr1"), SIGUSR1);
  EXPECT_EQ(parse_signal("10"), 10);
  EXPECT_EQ(parse_signal("NOPE"), 0);
  EXPECT_EQ(parse_signal("0"), 0);
  EXPECT_EQ(signal_name(SIGQUIT), "SIGQUIT");
  EXPECT_EQ(signal_name(40), "signal 40");
}

// An OutputStream writing its console side into a memory file we read back
// (a pipe would block once its 64 KiB fill up).
class OutputTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_GE(fd_, 0); }
  void TearDown() override { close(fd_); }
  std::string console() {
    std::string out;
    char buffer[4096];
    lseek(fd_, 0, SEEK_SET);
    for (ssize_t n; (n = read(fd_, buffer, sizeof(buffer))) > 0;)
      out.append(buffer, n);
    return out;
  }
  int fd_ = memfd_create("console", MFD_CLOEXEC);
};

TEST_F(OutputTest, WholeLinesWithPrefixesAndAFinalNewline) {
  OutputStream stream(fd_, format_prefix("[{rank}:{local_rank}@{host}] ", 3, 1, "n1"), Fd(), 2);
  stream.feed("one\ntw");
  stream.feed("o\nthr");
  stream.feed("ee");
  stream.finish();
  EXPECT_EQ(console(), "[3:1@n1] one\n[3:1@n1] two\n[3:1@n1] three\n");
  EXPECT_EQ(stream.tail(), (std::deque<std::string>{"two", "three"}));
}

TEST_F(OutputTest, ConsoleOffStillKeepsTheTail) {
  OutputStream stream(-1, "", Fd(), 5);
  stream.feed("a\nb\n");
  EXPECT_EQ(console(), "");
  EXPECT_EQ(stream.tail(), (std::deque<std::string>{"a", "b"}));
}

TEST_F(OutputTest, AnEndlessLineIsCutNotBuffered) {
  OutputStream stream(fd_, "", Fd(), 0);
  stream.feed(std::string(kMaxLineBytes - 1, 'x'));
  stream.feed("\n");  // a line of 1 MiB, its newline included: whole
  EXPECT_EQ(console().size(), kMaxLineBytes);
  stream.feed(std::string(kMaxLineBytes + 100, 'x'));
  const std::string out = console();
  // Flushed with a newline once over the limit without one.
  EXPECT_EQ(out.size(), 2 * kMaxLineBytes + 101);
  EXPECT_EQ(out.back(), '\n');
}

// A rank's control characters, on a terminal: no cursor moves, no prefix
// overwritten, no window title, no forged launcher line; colors pass.
TEST(TerminalSafe, ControlCharactersAreShownNotObeyed) {
  EXPECT_EQ(terminal_safe("plain\ttext\n"), "plain\ttext\n");
  EXPECT_EQ(terminal_safe("\rcohort run: rank 1 failed\n"), "cohort run: rank 1 failed\n");
  EXPECT_EQ(terminal_safe("10%\r50%\r100%\n"), "100%\n");  // a progress bar's last state
  EXPECT_EQ(terminal_safe("windows\r\n"), "windows\n");
  EXPECT_EQ(terminal_safe("\x1b[31mred\x1b[0m\n"), "\x1b[31mred\x1b[0m\n");
  EXPECT_EQ(terminal_safe("\x1b]0;title\x07\x1b[2J\x1b[H\n"), "^[]0;title^G^[[2J^[[H\n");
  EXPECT_EQ(terminal_safe(std::string("nul\0bell\x07"
                                      "del\x7f\n",
                                      14)),
            "nul^@bell^Gdel^?\n");
}

TEST(Report, NamesTheFailureItsPlaceAndItsLastWords) {
  ReportInput input;
  input.host = "n1";
  input.first_failure = 1;
  input.grace = std::chrono::milliseconds(5000);
  input.exit_code = 137;
  input.workers.resize(2);
  input.workers[0].rank = 0;
  input.workers[0].pid = 100;
  input.workers[0].wait_status = killed(SIGTERM);
  input.workers[0].stopped_by_cohort = true;
  input.workers[1].rank = 1;
  input.workers[1].local_rank = 1;
  input.workers[1].pid = 101;
  input.workers[1].wait_status = killed(SIGKILL);
  input.workers[1].stderr_tail = {"allocating 80 GiB", "Killed"};
  const std::string report = failure_report(input);
  EXPECT_NE(report.find("cohort run: rank 1 failed: killed by SIGKILL (signal 9)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("host n1, rank 1 (local rank 1), pid 101, at "), std::string::npos);
  EXPECT_NE(report.find("last 2 lines of rank 1:\n    | allocating 80 GiB\n    | Killed\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("rank 0 (pid 100): stopped by cohort (SIGTERM)"), std::string::npos);
  EXPECT_NE(report.find("exit status   137"), std::string::npos);
}

TEST(Report, ATakenMasterPortAndOtherNodesGetALineEach) {
  ReportInput input;
  input.host = "n1";
  input.first_failure = 0;
  input.exit_code = 1;
  input.master_port = 29777;
  input.other_nodes = "told to stop: 3 other nodes, ranks outside 0-1";
  input.workers.resize(1);
  input.workers[0].wait_status = exited(1);
  input.workers[0].stderr_tail = {
      "RuntimeError: The server socket has failed to listen on any local network address. The "
      "server socket has failed to bind to 0.0.0.0:29777 (errno: 98 - Address already in use)."};
  std::string report = failure_report(input);
  EXPECT_NE(report.find("  why           MASTER_PORT 29777 on n1 is taken by another process"),
            std::string::npos)
      << report;
  // Only a --master-port the user gave is blamed.
  EXPECT_EQ(report.find("drop --master-port"), std::string::npos) << report;
  EXPECT_NE(report.find("a second rank 0 of this one"), std::string::npos) << report;
  input.master_port_given = true;
  EXPECT_NE(failure_report(input).find("drop --master-port"), std::string::npos);
  input.agent_store = true;  // the agent holds it: the script listened there itself
  EXPECT_NE(failure_report(input).find("is served by cohort's agent"), std::string::npos);
  input.agent_store = false;
  input.master_port_given = false;
  EXPECT_NE(report.find("  other nodes   told to stop: 3 other nodes, ranks outside 0-1\n"
                        "  exit status   1"),
            std::string::npos)
      << report;
  input.workers[0].stderr_tail = {"ValueError: bad batch"};
  report = failure_report(input);
  EXPECT_EQ(report.find("why"), std::string::npos) << report;
  input.under_mpirun = true;
  input.workers[0].stderr_tail = {"*** An error occurred in MPI_Init"};
  EXPECT_NE(failure_report(input).find("start MPI programs with mpirun alone"), std::string::npos);
  input.under_mpirun = false;
  input.interpreter = "python3";
  input.workers[0].stderr_tail = {"ModuleNotFoundError: No module named 'torch'"};
  report = failure_report(input);
  EXPECT_NE(report.find("  why           the script ran with python3, which lacks a module it "
                        "imports: give --python"),
            std::string::npos)
      << report;
}

// An error file written by @record is quoted instead of the stderr lines.
// "Address already in use" from another rank's connections is not the
// master port: the hint names what ran out instead, with its limit.
TEST(Report, ThePortHintOnlyWhenItIsTheMasterPort) {
  ReportInput input;
  input.host = "n1";
  input.first_failure = 0;
  input.exit_code = 1;
  input.master_port = 29777;
  input.ephemeral_ports = "32768-60999";
  input.open_files_limit = 1024;
  input.workers.resize(1);
  input.workers[0].rank = 42;
  input.workers[0].wait_status = exited(1);
  input.workers[0].stderr_tail = {"gloo: connect [127.0.0.1]:41234: Address already in use"};
  std::string report = failure_report(input);
  EXPECT_EQ(report.find("MASTER_PORT"), std::string::npos) << report;
  EXPECT_NE(report.find("ran out of ephemeral ports"), std::string::npos) << report;
  EXPECT_NE(report.find("ports 32768-60999"), std::string::npos) << report;
  input.workers[0].stderr_tail = {"socket: Too many open files"};
  report = failure_report(input);
  EXPECT_NE(report.find("rank 42 ran out of file descriptors (the limit is 1024"),
            std::string::npos)
      << report;
  // Rank 42 naming the master port: that one is taken.
  input.workers[0].stderr_tail = {"bind 0.0.0.0:29777: Address already in use"};
  EXPECT_NE(failure_report(input).find("MASTER_PORT 29777 on n1 is taken"), std::string::npos);
}

TEST(Report, QuotesTheRecordedError) {
  ReportInput input;
  input.host = "n1";
  input.first_failure = 0;
  input.exit_code = 1;
  input.workers.resize(1);
  input.workers[0].wait_status = exited(1);
  input.workers[0].stderr_tail = {"Traceback (most recent call last):", "..."};
  RecordedError recorded;
  recorded.message = "ValueError: batch 17 has no labels";
  recorded.frames = {"File \"train.py\", line 9, in step", "  raise ValueError(...)"};
  recorded.frame_count = 4;
  input.recorded = recorded;
  const std::string report = failure_report(input);
  EXPECT_NE(report.find("  error         ValueError: batch 17 has no labels\n"
                        "  traceback     last 1 of 4 frames (from TORCHELASTIC_ERROR_FILE, written "
                        "by @record):\n"
                        "    | File \"train.py\", line 9, in step\n"
                        "    |   raise ValueError(...)\n"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("Traceback (most recent"), std::string::npos) << report;
}

TEST(ErrorFile, PyTorchsFormatAndItsLastFrames) {
  const std::string json = R"({"message": {"message": "RuntimeError: boom", "extraInfo": {
      "py_callstack": "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    main()\n  File \"a.py\", line 5, in main\n    step()\n  File \"a.py\", line 9, in step\n    raise RuntimeError(\"boom\")\nRuntimeError: boom\n",
      "timestamp": "1700000000"}}})";
  const auto error = parse_error_file(json, 2);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->message, "RuntimeError: boom");
  EXPECT_EQ(error->frame_count, 3);
  EXPECT_EQ(error->frames, (std::vector<std::string>{"File \"a.py\", line 5, in main", "  step()",
                                                     "File \"a.py\", line 9, in step",
                                                     "  raise RuntimeError(\"boom\")"}));
  // The newer format with a plain message; garbage is no error file.
  EXPECT_EQ(parse_error_file(R"({"message": "SIGSEGV in worker"})", 3)->message,
            "SIGSEGV in worker");
  EXPECT_FALSE(parse_error_file("not json", 3));
  EXPECT_FALSE(parse_error_file(R"({"other": 1})", 3));
  EXPECT_FALSE(read_error_file("/nonexistent/error.json", 3));
}

TEST(Report, UtcTimestamps) {
  EXPECT_EQ(format_utc(std::chrono::system_clock::time_point(std::chrono::milliseconds(1234))),
            "1970-01-01 00:00:01.234 UTC");
}

}  // namespace
}  // namespace cohort::detail
