// `cohort run` on one machine, as users run it: the workers it starts, their
// environment, output routing, exit codes, failures, signals, restarts and
// teardown. Each test bounds its wait with a timeout well above what the
// behaviour needs: a timeout means "hung", never "slow".
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cohort/launch_env.hpp>

#include "core/socket.hpp"
#include "core/strings.hpp"
#include "support/backends.hpp"
#include "support/files.hpp"
#include "support/subprocess.hpp"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::ProcessResult;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);)
    out.push_back(line);
  return out;
}

// What /proc says of `pid` (its stat line and command line), for a failure message.
std::string describe(pid_t pid) {
  const fs::path proc = "/proc/" + std::to_string(pid);
  std::string cmdline = test::read_file(proc / "cmdline");
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  return test::read_file(proc / "stat") + " cmdline: " + cmdline;
}

// The inodes of the sockets listening on TCP `port` (IPv4 and IPv6) in this
// network namespace: a socket's own identity, which another process that
// later listens on the same port number does not share.
std::set<std::string> listening_inodes(int port) {
  std::set<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream lines(test::read_file(table));
    std::string line;
    std::getline(lines, line);  // the header
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode;
      const std::size_t colon = local.rfind(':');
      if (state == "0A" && colon != std::string::npos &&
          std::stoi(local.substr(colon + 1), nullptr, 16) == port) {
        inodes.insert(inode);
      }
    }
  }
  return inodes;
}

// Waits (bounded) until `predicate` holds.
template <class Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (predicate()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return predicate();
}

class RunTest : public ::testing::Test {
 protected:
  // A TCP port free on loopback a moment ago, below the kernel's range of
  // ports for outgoing connections (ip_local_port_range), where a port
  // picked by binding port 0 lies: there any connection another test opens
  // meanwhile may take it.
  static int free_port() {
    int first_ephemeral = 32768;
    std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> first_ephemeral;
    const int lowest = std::max(1024, first_ephemeral - 16384);
    std::random_device random;
    for (int attempt = 0; attempt < 100; ++attempt) {
      const int port =
          lowest + static_cast<int>(random() % static_cast<unsigned>(first_ephemeral - lowest));
      if (bindable(port)) return port;
    }
    ADD_FAILURE() << "no free port in " << lowest << "-" << first_ephemeral - 1;
    return 0;
  }
  static int bound_socket(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) return fd;
    close(fd);
    return -1;
  }
  static bool bindable(int port) {
    const int fd = bound_socket(port);
    if (fd >= 0) close(fd);
    return fd >= 0;
  }

  static std::vector<std::string> cohort_run(std::vector<std::string> args) {
    args.insert(args.begin(), {COHORT_CLI_PATH, "run"});
    return args;
  }
  // Node `rank` of two in torchrun's static form on this machine, its store
  // at `port`; `more` (options, then the program) follows.
  static std::vector<std::string> static_node(int rank, const std::string& port,
                                              const std::vector<std::string>& more) {
    std::vector<std::string> args{
        "--nnodes",      "2",         "--node-rank",   std::to_string(rank),
        "--master-addr", "127.0.0.1", "--master-port", port};
    args.insert(args.end(), more.begin(), more.end());
    return cohort_run(std::move(args));
  }
  static test::ProcessOptions options(std::chrono::milliseconds timeout = 60s) {
    test::ProcessOptions out;
    out.timeout = timeout;
    return out;
  }
  static ProcessResult run(std::vector<std::string> args, std::chrono::milliseconds timeout = 60s) {
    return test::run_process(cohort_run(std::move(args)), options(timeout));
  }
  // Waits until `count` workers created their file "<name>.<rank>" in dir_.
  bool workers_ready(const std::string& name, int count) {
    return eventually([&] {
      for (int rank = 0; rank < count; ++rank) {
        if (!fs::exists(dir_ / (name + "." + std::to_string(rank)))) return false;
      }
      return true;
    });
  }

  // options() with TMPDIR a new directory `tmp`, where a job without
  // --log-dir makes its own.
  test::ProcessOptions options_with_tmpdir(const fs::path& tmp) {
    fs::create_directory(tmp);
    test::ProcessOptions with_tmp = options();
    with_tmp.env = process_environment();
    (*with_tmp.env)["TMPDIR"] = tmp.string();
    return with_tmp;
  }

  ProcessResult job_with_error_file(const fs::path& tmp);

  // Waits until `count` workers wrote a whole line to "<name>.<rank>": a
  // shell's `echo $$ > FILE` creates FILE empty before it writes.
  bool workers_wrote(const std::string& name, int count) {
    return eventually([&] {
      for (int rank = 0; rank < count; ++rank) {
        const std::string text = test::read_file(dir_ / (name + "." + std::to_string(rank)));
        if (text.empty() || text.back() != '\n') return false;
      }
      return true;
    });
  }

  test::TempDir temp_{"cohort-run"};
  const fs::path& dir_ = temp_.path();
};

TEST_F(RunTest, HelloOnFourWorkers) {
  const ProcessResult result = run({"-n", "4", COHORT_HELLO_PATH});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  std::set<std::string> endings;
  for (const std::string& line : lines_of(result.out)) {
    // "[R] [127.0.0.1:PORT] hello from [HOST:shm] process R/4"
    ASSERT_GT(line.size(), 15u) << line;
    EXPECT_EQ(line.substr(4, 11), "[127.0.0.1:") << line;
    EXPECT_NE(line.find("] hello from ["), std::string::npos) << line;
    EXPECT_NE(line.find(std::string(":") + test::kOneHostBackend + "] process "), std::string::npos)
        << line;
    EXPECT_EQ(line[1], line[line.size() - 3]) << "prefix and rank differ: " << line;
    endings.insert(line.substr(line.size() - 3));
  }
  EXPECT_EQ(endings, (std::set<std::string>{"0/4", "1/4", "2/4", "3/4"}));
}

TEST_F(RunTest, ReductionOnFourWorkersAndOne) {
  for (int n : {4, 1}) {
    const ProcessResult result =
        run({"-n", std::to_string(n), "--no-prefix", COHORT_REDUCTION_PATH});
    ASSERT_EQ(result.exit_code, 0) << test::describe(result);
    const std::vector<std::string> lines = lines_of(result.out);
    ASSERT_EQ(lines.size(), static_cast<std::size_t>(n)) << result.out;
    for (const std::string& line : lines) {
      const std::string ending = " has data " + std::to_string(n);
      EXPECT_EQ(line.substr(line.size() - ending.size()), ending) << line;
      EXPECT_NE(line.find(n == 1 ? ":self] process "
                                 : std::string(":") + test::kOneHostBackend + "] process "),
                std::string::npos)
          << line;
    }
  }
}

TEST_F(RunTest, MessagePassingRingAndPingPong) {
  const ProcessResult result = run({"-n", "3", COHORT_MESSAGE_PASSING_PATH, "50"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_NE(result.out.find("[0] rank 0: the token went around 3 ranks and came back as 3 "
                            "(expected 3)"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find(std::string("[0] rank 0: ping-pong with rank 1 over ") +
                            test::kOneHostBackend + ", 50 round trips"),
            std::string::npos)
      << result.out;
}

TEST_F(RunTest, WorkersGetTorchrunsEnvironmentAndCohorts) {
  const ProcessResult result =
      run({"-n", "2", "--run-id", "job42", "--no-prefix", "sh", "-c",
           "echo $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $GROUP_WORLD_SIZE "
           "$ROLE_RANK $ROLE_WORLD_SIZE $ROLE_NAME $TORCHELASTIC_RUN_ID $COHORT_RUN_ID "
           "$TORCHELASTIC_RESTART_COUNT $TORCHELASTIC_MAX_RESTARTS $MASTER_ADDR "
           "$([ \"$MASTER_PORT\" != \"$COHORT_STORE_PORT\" ] && echo ports-differ) "
           "$([ -n \"$COHORT_JOB_TOKEN\" ] && echo token) $(readlink /proc/self/fd/0)"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  std::vector<std::string> lines = lines_of(result.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines,
            (std::vector<std::string>{
                "0 0 2 2 0 1 0 2 default job42 job42 0 0 127.0.0.1 ports-differ token /dev/null",
                "1 1 2 2 0 1 1 2 default job42 job42 0 0 127.0.0.1 ports-differ token /dev/null"}));
}

// A program inherits a connection its store already trusts
// (COHORT_STORE_FD): a socket, not a TCP connection to make and prove. One
// that closes it meets the others over TCP as before.
TEST_F(RunTest, AProgramInheritsAConnectionToTheStore) {
  ProcessResult result =
      run({"-n", "2", "--no-prefix", "sh", "-c", "readlink /proc/self/fd/$COHORT_STORE_FD"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  const std::vector<std::string> lines = lines_of(result.out);
  ASSERT_EQ(lines.size(), 2u) << result.out;
  for (const std::string& line : lines)
    EXPECT_EQ(line.rfind("socket:[", 0), 0u) << line;
  // bash: dash closes only descriptors 0-9.
  result = run({"-n", "2", "--no-prefix", "bash", "-c",
                "eval \"exec $COHORT_STORE_FD>&-\"; exec \"$0\"", COHORT_REDUCTION_PATH});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  const std::vector<std::string> met = lines_of(result.out);
  ASSERT_EQ(met.size(), 2u) << result.out;
  for (const std::string& line : met)
    EXPECT_NE(line.find(" has data 2"), std::string::npos) << line;
}

TEST_F(RunTest, LegacyLocalRankArgumentAndPythonPrograms) {
  ProcessResult result = run({"-n", "2", "--no-prefix", "--local-rank-arg", "echo", "x"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  std::vector<std::string> lines = lines_of(result.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"x --local_rank=0", "x --local_rank=1"}));
  // A .py PROGRAM runs with --python (echo shows the command line it got).
  const std::string script = (dir_ / "train.py").string();
  std::ofstream(script) << "\n";
  result = run({"--python", "echo", script, "--lr", "0.1"});
  EXPECT_EQ(result.out, script + " --lr 0.1\n");
  // PyTorch 2.x's torch.distributed.launch spelling, and torchrun's -m.
  result = run({"--local-rank-arg=dash", "echo", "x"});
  EXPECT_EQ(result.out, "x --local-rank=0\n");
  result = run({"--python", "echo", "-m", "pkg.train"});
  EXPECT_EQ(result.out, "-m pkg.train\n");
  // Options after PROGRAM are PROGRAM's; `--` may come before PROGRAM, and a
  // `--` after PROGRAM is PROGRAM's own.
  result = run({"--grace", "1", "--", "printf", "%s|", "-n", "4", "--", "x"});
  EXPECT_EQ(result.out, "-n|4|--|x|\n");
  result = run({"printf", "%s|", "--grace", "--"});
  EXPECT_EQ(result.out, "--grace|--|\n");
}

TEST_F(RunTest, PythonScriptsRunWithPython3) {
  const fs::path script = dir_ / "rank.py";
  // Python speaks PyTorch's protocol: no connection of cohort's is handed to it.
  std::ofstream(script) << "import os\nprint('python rank', os.environ['RANK'], "
                           "os.environ.get('COHORT_STORE_FD', 'none'))\n";
  const ProcessResult result = run({"-n", "2", "--no-prefix", script.string()});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  std::vector<std::string> lines = lines_of(result.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"python rank 0 none", "python rank 1 none"}));
}

TEST_F(RunTest, NprocCpuMeansTheUsableCpus) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  const ProcessResult result = run({"-n", "cpu", "--no-prefix", "sh", "-c", "echo $WORLD_SIZE"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_EQ(lines_of(result.out).size(), static_cast<std::size_t>(CPU_COUNT(&mask)));
  EXPECT_EQ(lines_of(result.out).front(), std::to_string(CPU_COUNT(&mask)));
}

TEST_F(RunTest, UnderscoreSpellingsAndPetVariables) {
  ProcessResult result =
      run({"--nproc_per_node", "3", "--no_prefix", "sh", "-c", "echo $WORLD_SIZE"});
  EXPECT_EQ(lines_of(result.out), (std::vector<std::string>{"3", "3", "3"}));
  test::ProcessOptions with_env = options();
  with_env.env = process_environment();
  (*with_env.env)["PET_NPROC_PER_NODE"] = "2";
  (*with_env.env)["PET_MASTER_PORT"] = "23456";
  result =
      test::run_process(cohort_run({"--no-prefix", "sh", "-c", "echo $MASTER_PORT"}), with_env);
  EXPECT_EQ(lines_of(result.out), (std::vector<std::string>{"23456", "23456"}));
}

// Every option of torchrun (and torch.distributed.launch) the issue names,
// in the dash and underscore spellings and from its PET_ variable, on a real
// run: accepted, and the job runs.
TEST_F(RunTest, TorchrunsWholeCommandLineInEverySpelling) {
  struct Flag {
    std::string name;   // dash spelling, without "--"
    std::string value;  // "" for a flag without value
  };
  const std::vector<Flag> flags = {{"rdzv-backend", "c10d"},
                                   {"rdzv-endpoint", "localhost:29400"},
                                   {"rdzv-id", "job-1"},
                                   {"rdzv-conf", "join_timeout=60,read_timeout=60"},
                                   {"no-python", ""},
                                   {"use-env", ""},
                                   {"redirects", "0"},
                                   {"tee", "0"},
                                   {"local-ranks-filter", "0"},
                                   {"monitor-interval", "5"},
                                   {"start-method", "spawn"},
                                   {"role", "trainer"},
                                   {"local-addr", "127.0.0.1"},
                                   {"logs-specs", "default"},
                                   {"heartbeat-timeout", "10"},
                                   {"env-prefix", "NCCL_"},
                                   {"no-srun", ""},
                                   {"nproc-per-node", "2"},
                                   {"max-restarts", "0"},
                                   {"master-port", "0"},
                                   {"no-agent-store", ""},
                                   {"rdzv-timeout", "30"}};
  for (const Flag& flag : flags) {
    std::string underscore = flag.name;
    std::replace(underscore.begin(), underscore.end(), '-', '_');
    std::string variable = "PET_" + underscore;
    std::transform(variable.begin(), variable.end(), variable.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    for (const std::string& spelling : {"--" + flag.name, "--" + underscore}) {
      std::vector<std::string> args{spelling};
      if (!flag.value.empty()) args.push_back(flag.value);
      args.insert(args.end(), {"sh", "-c", "echo ran"});
      const ProcessResult result = run(args);
      EXPECT_EQ(result.exit_code, 0) << spelling << ": " << test::describe(result);
    }
    test::ProcessOptions with_env = options();
    with_env.env = process_environment();
    (*with_env.env)[variable] = flag.value.empty() ? "1" : flag.value;
    const ProcessResult result = test::run_process(cohort_run({"sh", "-c", "echo ran"}), with_env);
    EXPECT_EQ(result.exit_code, 0) << variable << ": " << test::describe(result);
  }
  // -m and --run-path run PROGRAM with Python; -r/-t are the short spellings.
  EXPECT_EQ(run({"--python", "echo", "-m", "pkg"}).out, "-m pkg\n");
  const std::string script = (dir_ / "script").string();
  std::ofstream(script) << "\n";
  EXPECT_EQ(run({"--python", "echo", "--run_path", script}).out, script + "\n");
  EXPECT_EQ(run({"-r", "1", "-t", "2", "sh", "-c", "echo hidden"}).out, "");
}

TEST_F(RunTest, ExitCodesFollowTheShell) {
  EXPECT_EQ(run({"-n", "2", "true"}).exit_code, 0);
  EXPECT_EQ(run({"-n", "3", "sh", "-c", "[ $RANK = 1 ] && exit 3; sleep 30"}).exit_code, 3);
  EXPECT_EQ(run({"-n", "2", "sh", "-c", "[ $RANK = 0 ] && kill -KILL $$; sleep 30"}).exit_code,
            137);
  EXPECT_EQ(run({"-n", "2", "sh", "-c", "[ $RANK = 1 ] && kill -SEGV $$; sleep 30"}).exit_code,
            139);
}

// PROGRAM is checked once, before any worker starts: one line, the shell's
// status, no report.
TEST_F(RunTest, AProgramThatCannotRunIsOneLineAndTheShellsStatus) {
  ProcessResult result = run({"-n", "2", "/nonexistent/program"});
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_EQ(result.err, "cohort run: PROGRAM /nonexistent/program does not exist\n");
  result = run({"-n", "2", "no-such-program-here"});
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_EQ(
      result.err.rfind("cohort run: PROGRAM 'no-such-program-here' is not found in PATH (", 0), 0u)
      << result.err;
  const fs::path text = dir_ / "notes.txt";
  std::ofstream(text) << "not a program\n";
  result = run({"-n", "2", text.string()});
  EXPECT_EQ(result.exit_code, 126);
  EXPECT_EQ(lines_of(result.err).size(), 1u) << result.err;
  EXPECT_NE(result.err.find(" is not executable"), std::string::npos) << result.err;
  result = run({"-n", "2", (dir_ / "missing.py").string()});
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_NE(result.err.find("the script " + (dir_ / "missing.py").string() + " does not exist"),
            std::string::npos)
      << result.err;
  result = run({"--python", "/nonexistent/python", "-m", "json.tool"});
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_NE(result.err.find("the Python interpreter /nonexistent/python does not exist (check "
                            "--python)"),
            std::string::npos)
      << result.err;
}

TEST_F(RunTest, AKilledWorkerEndsTheJobAndTheReportNamesIt) {
  const ProcessResult result = run({"-n", "3", "sh", "-c",
                                    "echo \"rank $RANK starting\" >&2; if [ \"$RANK\" = 1 ]; then "
                                    "kill -9 $$; fi; exec sleep 30"},
                                   25s);
  ASSERT_FALSE(result.timed_out) << "the job outlived its killed worker";
  EXPECT_EQ(result.exit_code, 137);
  EXPECT_NE(result.err.find("cohort run: rank 1 failed: killed by SIGKILL (signal 9)"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("OOM killer"), std::string::npos);
  EXPECT_NE(result.err.find("rank 1 (local rank 1), pid "), std::string::npos);
  EXPECT_NE(result.err.find("    | rank 1 starting"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("stopped by cohort (SIGTERM)"), std::string::npos);
  EXPECT_NE(result.err.find("exit status   137"), std::string::npos);
}

// Workers die with a SIGKILLed launcher (PR_SET_PDEATHSIG), and so does what
// they started (the guardian kills their process groups).
TEST_F(RunTest, KillingTheLauncherLeavesNoWorkerAlive) {
  const std::string dir = dir_.string();
  test::Subprocess launcher(cohort_run({"-n", "2", "sh", "-c",
                                        "sleep 30 & echo $! > " + dir + "/child.$RANK; echo $$ > " +
                                            dir + "/pid.$RANK; wait"}),
                            options());
  ASSERT_TRUE(workers_wrote("pid", 2));
  ASSERT_TRUE(workers_wrote("child", 2));
  std::vector<pid_t> processes;
  for (const char* name : {"pid.0", "pid.1", "child.0", "child.1"}) {
    processes.push_back(std::stoi(test::read_file(dir_ / name)));
  }
  for (pid_t pid : processes)
    ASSERT_TRUE(test::process_runs(pid)) << pid;
  kill(launcher.pid(), SIGKILL);
  launcher.finish();
  for (pid_t pid : processes) {
    // Generous: the bound only ends a failing test, a passing one returns at once.
    EXPECT_TRUE(eventually([&] { return !test::process_runs(pid); }, 20s))
        << "process " << pid << " outlived: " << describe(pid);
  }
}

// A SIGKILLed launcher cannot remove the workers' error files from the
// user's directory in $TMPDIR: its guardian does, once it has killed them.
TEST_F(RunTest, ASigkilledLaunchersFilesGoWithItsGuardian) {
  const fs::path tmp = dir_ / "tmp";
  const test::ProcessOptions with_tmp = options_with_tmpdir(tmp);
  const fs::path users = tmp / ("cohort-" + std::to_string(geteuid()));
  const std::string dir = dir_.string();
  test::Subprocess launcher(cohort_run({"-n", "2", "sh", "-c",
                                        "printf '{}' > $TORCHELASTIC_ERROR_FILE; echo $$ > " + dir +
                                            "/pid.$RANK.part && mv " + dir + "/pid.$RANK.part " +
                                            dir + "/pid.$RANK; exec sleep 30"}),
                            with_tmp);
  ASSERT_TRUE(workers_wrote("pid", 2));
  ASSERT_TRUE(fs::is_directory(users) && !fs::is_empty(users))
      << "the workers wrote no error files in " << users;
  kill(launcher.pid(), SIGKILL);
  launcher.finish();
  EXPECT_TRUE(eventually([&] { return fs::is_empty(users); }, 20s))
      << "left in " << users << ": " << fs::directory_iterator(users)->path();
}

// The ranks on the store's host are told which process the store is (the
// launcher itself, by pid and start time), and their clients, which check
// it, connect.
TEST_F(RunTest, RanksAreToldTheStoresProcessAndFindItThere) {
  const std::string dir = dir_.string();
  test::Subprocess launcher(
      cohort_run({"-n", "2", "sh", "-c",
                  "echo $COHORT_STORE_PROCESS > " + dir + "/store.$RANK.part && mv " + dir +
                      "/store.$RANK.part " + dir + "/store.$RANK && exec " +
                      COHORT_REDUCTION_PATH}),
      options());
  const auto result = launcher.finish();
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  EXPECT_NE(result.out.find("has data 2"), std::string::npos) << test::describe(result);
  for (const char* rank : {"0", "1"}) {
    const std::string told = test::read_file(dir_ / (std::string("store.") + rank));
    EXPECT_EQ(told.substr(0, told.find(':')), std::to_string(launcher.pid())) << told;
    EXPECT_GT(told.size(), std::to_string(launcher.pid()).size() + 2) << told;  // and its start
  }
}

// cohort::spawn's workers are forks: they close the descriptors that are
// cohort's (as exec would), so a SIGKILLed spawner takes its guardian, its
// workers and its store's port with it.
TEST_F(RunTest, KillingASpawnerLeavesNothingBehind) {
  test::Subprocess spawner({COHORT_SPAWN_SLEEPER_PATH, dir_.string()}, options());
  ASSERT_TRUE(workers_wrote("pid", 2));
  ASSERT_TRUE(workers_wrote("port", 2));
  const int port = std::stoi(test::read_file(dir_ / "port.0"));
  const std::set<std::string> store_sockets = listening_inodes(port);
  ASSERT_FALSE(store_sockets.empty()) << "nothing listens on the store's port " << port;
  kill(spawner.pid(), SIGKILL);
  spawner.finish();
  // Every process that runs spawn_sleeper (the workers, the guardian).
  const auto left = [&] {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator("/proc")) {
      const std::string pid = entry.path().filename();
      if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string cmdline = test::read_file(entry.path() / "cmdline");
      if (cmdline.find(dir_.string()) != std::string::npos && test::process_runs(std::stoi(pid))) {
        found.push_back(pid);
      }
    }
    return found;
  };
  EXPECT_TRUE(eventually([&] { return left().empty(); }, 10s)) << left().size() << " left";
  // The store's own listening socket goes too (the port number itself may
  // already serve another test's process). Eventually: a process in exit
  // has an empty command line (its memory goes first), so it can drop out
  // of left() a moment before its descriptors close.
  const auto still_listening = [&] {
    for (const std::string& inode : listening_inodes(port)) {
      if (store_sockets.count(inode) != 0) return true;
    }
    return false;
  };
  EXPECT_TRUE(eventually([&] { return !still_listening(); }, 10s))
      << "the store's socket still listens on " << port;
}

// --timeout ends a hung job: the report names the ranks still running and
// what each printed last, and the status is 124, as mpirun's --timeout.
TEST_F(RunTest, TimeoutEndsAHungJobAndSaysWhatEachRankWasDoing) {
  const auto result = run({"--timeout", "1", "--grace", "0.5", "-n", "3", "sh", "-c",
                           "echo \"rank $RANK starts\"; [ $RANK = 1 ] && exit 0; "
                           "echo \"rank $RANK waits for rank 1\" >&2; exec sleep 30"});
  EXPECT_EQ(result.exit_code, 124) << test::describe(result);
  EXPECT_NE(result.err.find("the job ran past --timeout 1 s"), std::string::npos) << result.err;
  for (const char* rank : {"0", "2"}) {
    EXPECT_NE(result.err.find(std::string("rank ") + rank + " (pid "), std::string::npos);
    EXPECT_NE(result.err.find(std::string("| rank ") + rank + " waits for rank 1"),
              std::string::npos)
        << result.err;
  }
  EXPECT_EQ(result.err.find("| rank 1"), std::string::npos) << result.err;  // it had finished
}

// --hosts over an "ssh" that runs the command here: each agent gets its
// plan on standard input, the options with it (the --timeout case once
// stopped at the launcher's command line), its host's share of the ranks.
class OverSshTest : public RunTest {
 protected:
  std::string fake_ssh() {
    const fs::path path = dir_ / "fake-ssh";
    std::ofstream(path)
        << "#!/bin/sh\n# ssh HOST COMMAND: run COMMAND here\nshift\nexec sh -c \"$*\"\n";
    fs::permissions(path, fs::perms::owner_all);
    return path.string();
  }
};

TEST_F(OverSshTest, TheTimeoutReachesTheRemoteAgents) {
  const auto start = std::chrono::steady_clock::now();
  const fs::path file = dir_ / "trace.json";
  const auto result = run({"--hosts", "127.0.0.1:1", "--ssh", fake_ssh(), "--timeout", "1",
                           "--trace", file.string(), "--", "sleep", "20"});
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(result.exit_code, 124) << test::describe(result);
  EXPECT_NE(result.err.find("the job ran past --timeout 1 s"), std::string::npos) << result.err;
  EXPECT_LT(took, 15s) << "the sleep ran to its end";
  // The one host's agent keeps a store of its own; its events reach the
  // launcher's file all the same.
  bool stop = false;
  const auto trace = nlohmann::json::parse(test::read_file(file));
  for (const auto& event : trace["traceEvents"]) {
    if (event["pid"] == 1 && event["name"] == "stop") {
      EXPECT_EQ(event["args"]["reason"], "the job ran past --timeout 1 s");
      stop = true;
    }
  }
  EXPECT_TRUE(stop) << test::read_file(file);
}

TEST_F(OverSshTest, EveryNodeRunsTheOptionsOfTheCommandLine) {
  const fs::path logs = dir_ / "logs";
  const auto result = run({"--hosts",
                           "127.0.0.1:2,127.0.0.1:1",
                           "--ssh",
                           fake_ssh(),
                           "--role",
                           "trainer",
                           "--run-id",
                           "job9",
                           "--prefix",
                           "<{rank}> ",
                           "--log-dir",
                           logs.string(),
                           "--local-ranks-filter",
                           "0",
                           "--max-restarts",
                           "1",
                           "--",
                           "sh",
                           "-c",
                           "echo $ROLE_NAME $TORCHELASTIC_RUN_ID $RANK/$WORLD_SIZE "
                           "$TORCHELASTIC_MAX_RESTARTS $LOCAL_WORLD_SIZE"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  std::vector<std::string> lines = lines_of(result.out);
  std::sort(lines.begin(), lines.end());
  // Local rank 0 of each host on the console, every rank in the logs.
  EXPECT_EQ(lines,
            (std::vector<std::string>{"<0> trainer job9 0/3 1 2", "<2> trainer job9 2/3 1 1"}));
  EXPECT_EQ(test::read_file(logs / "attempt_0" / "rank_1" / "stdout.log"),
            "trainer job9 1/3 1 2\n");
}

// The --hostfile launcher serves the workers' PyTorch store: a client it
// cannot serve (here a PyTorch newer than cohort: query type 99) ends the
// job at once, saying why, rather than leaving every rank to wait out its
// own timeout.
TEST_F(OverSshTest, AWorkerThatCanNeverRendezvousEndsTheJobAtOnce) {
  const fs::path client = dir_ / "newer_pytorch.py";
  std::ofstream(client) << "import os, socket, struct, time\n"
                           "address = (os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT']))\n"
                           "connection = socket.create_connection(address)\n"
                           "connection.sendall(b'\\x00' + struct.pack('<I', 0x3C85F7CE) + "
                           "bytes([99]))\n"
                           "time.sleep(120)\n";
  const auto start = std::chrono::steady_clock::now();
  const auto result = run({"--hosts", "127.0.0.1:1,127.0.0.1:1", "--ssh", fake_ssh(), "--timeout",
                           "60", "--", "python3", client.string()});
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(result.exit_code, 1) << test::describe(result);
  EXPECT_NE(result.err.find("a worker can never rendezvous: a PyTorch TCPStore client at "),
            std::string::npos)
      << result.err;
  EXPECT_LT(took, 50s) << "the job waited for its --timeout";
}

// cohort run --trace of a 2-node job whose rank 3 fails once, then
// succeeds: one file of Chrome trace events (what ui.perfetto.dev and
// chrome://tracing read) with every node's tracks, in the order it happened.
TEST_F(OverSshTest, TheTraceOfATwoNodeJobWithARestartHasEveryNodeInOrder) {
  const fs::path file = dir_ / "trace.json";
  const auto result = run({"--hosts", "127.0.0.1:2,127.0.0.1:2", "--ssh", fake_ssh(),
                           "--max-restarts", "1", "--trace", file.string(), "--", "sh", "-c",
                           "[ $TORCHELASTIC_RESTART_COUNT = 0 ] && [ $RANK = 3 ] && exit 3; "
                           "sleep 0.2"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  const auto trace = nlohmann::json::parse(test::read_file(file));
  ASSERT_TRUE(trace["traceEvents"].is_array()) << trace;
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  // The Trace Event Format's fields, as its readers need them.
  std::map<std::pair<int, int>, std::string> tracks;  // (pid, tid) -> name
  std::map<int, std::string> processes;
  using Event = nlohmann::json;
  std::vector<Event> events;
  for (const Event& event : trace["traceEvents"]) {
    ASSERT_TRUE(event["name"].is_string() && event["pid"].is_number_integer() &&
                event["tid"].is_number_integer() && event["ph"].is_string())
        << event;
    const std::string ph = event["ph"];
    if (ph == "M") {
      if (event["name"] == "thread_name")
        tracks[{event["pid"], event["tid"]}] = event["args"]["name"];
      if (event["name"] == "process_name") processes[event["pid"]] = event["args"]["name"];
      continue;
    }
    ASSERT_TRUE(ph == "X" || ph == "i") << event;
    ASSERT_TRUE(event["ts"].is_number_integer() && event["ts"] >= 0) << event;
    if (ph == "X") {
      ASSERT_TRUE(event["dur"].is_number_integer() && event["dur"] >= 0) << event;
    }
    events.push_back(event);
  }
  EXPECT_EQ(processes.size(), 3u) << "the launcher and two nodes";
  EXPECT_NE(processes[0].find("cohort run --hostfile"), std::string::npos);
  EXPECT_EQ(processes[2].rfind("node 1 (", 0), 0u) << processes[2];
  EXPECT_EQ(tracks[std::make_pair(2, 4)], "rank 3");
  // When each thing happened, by its track and name.
  const auto find = [&events](int pid, int tid, const std::string& name,
                              const std::string& arg = "", const std::string& value = "") {
    for (const Event& event : events) {
      if (event["pid"] == pid && event["tid"] == tid && event["name"] == name &&
          (arg.empty() || event["args"][arg] == value)) {
        return event;
      }
    }
    ADD_FAILURE() << "no " << name << " on pid " << pid << " tid " << tid;
    return Event();
  };
  const auto ts = [](const Event& event) { return event.value("ts", -1LL); };
  const auto end = [](const Event& event) {
    return event.value("ts", -1LL) + event.value("dur", 0LL);
  };
  const Event failed = find(2, 4, "attempt 0");
  EXPECT_EQ(failed["args"]["exit"], "exited with code 3");
  const Event stop = find(2, 0, "stop");
  EXPECT_EQ(stop["args"]["reason"], "rank 3 failed: exited with code 3");
  const Event launcher_stop = find(0, 0, "stop");
  EXPECT_EQ(launcher_stop["args"]["reason"], "rank 3 failed: exited with code 3");
  for (int pid : {1, 2}) {
    const Event rendezvous = find(pid, 0, "rendezvous");
    const Event first = find(pid, 0, "attempt 0");
    const Event restart = find(pid, 0, "restart");
    const Event second = find(pid, 0, "attempt 1");
    const Event exit = find(pid, 0, "exit");
    EXPECT_LE(end(rendezvous), ts(first)) << pid;
    EXPECT_LE(ts(failed), ts(stop));
    EXPECT_LE(end(failed), end(first)) << pid;
    EXPECT_LE(end(first), ts(restart)) << pid;
    EXPECT_LE(ts(restart), ts(second)) << pid;
    EXPECT_LE(end(second), ts(exit)) << pid;
    EXPECT_EQ(exit["args"]["exit_status"], "0");
    // Every rank of the node: killed or failed in attempt 0, a success in 1.
    for (int tid : {pid * 2 - 1, pid * 2}) {
      EXPECT_LE(ts(find(pid, tid, "attempt 0")), ts(restart));
      const Event again = find(pid, tid, "attempt 1");
      EXPECT_GE(ts(again), ts(restart));
      EXPECT_EQ(again["args"]["exit"], "exited with code 0");
    }
  }
  EXPECT_LE(ts(find(1, 0, "exit")), ts(find(0, 0, "exit"))) << "the launcher ends last";
}

TEST_F(RunTest, TheTraceOfOneNodeNamesTheStopAndItsReason) {
  const fs::path file = dir_ / "one.json";
  const auto result =
      run({"-n", "2", "--trace", file.string(), "sh", "-c", "[ $RANK = 1 ] && exit 4; sleep 30"});
  EXPECT_EQ(result.exit_code, 4) << test::describe(result);
  const auto trace = nlohmann::json::parse(test::read_file(file));
  bool stop = false;
  for (const auto& event : trace["traceEvents"]) {
    if (event["name"] == "stop") {
      EXPECT_EQ(event["args"]["reason"], "rank 1 failed: exited with code 4");
      stop = true;
    }
  }
  EXPECT_TRUE(stop) << trace.dump(1);
  EXPECT_EQ(trace["otherData"]["exit_status"], "4");
}

// Static nodes where only node 0, whose agent serves the store, has
// --trace (each node's command typed by hand): its file holds node 1's
// tracks too. --trace on node 1 alone writes nothing, and says so.
TEST_F(RunTest, TraceOnNodeZeroAloneGathersEveryNode) {
  const fs::path file = dir_ / "job.json";
  const auto pair = [&](int traced) {
    const std::string port = std::to_string(free_port());
    std::vector<std::unique_ptr<test::Subprocess>> nodes;
    for (int rank : {1, 0}) {
      std::vector<std::string> args{"-n", "1"};
      if (rank == traced) args.insert(args.end(), {"--trace", file.string()});
      args.insert(args.end(), {"sh", "-c", "exit 0"});
      nodes.push_back(std::make_unique<test::Subprocess>(static_node(rank, port, args), options()));
    }
    std::vector<ProcessResult> results;
    for (auto& node : nodes)
      results.push_back(node->finish());
    for (const ProcessResult& result : results)
      EXPECT_EQ(result.exit_code, 0) << test::describe(result);
    return results;  // node 1's, node 0's
  };
  const std::vector<ProcessResult> gathered = pair(0);
  const auto trace = nlohmann::json::parse(test::read_file(file));
  std::set<std::pair<int, std::string>> events;  // (pid: node id + 1, name)
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] != "M") events.insert({event["pid"].get<int>(), event["name"]});
  }
  for (int pid : {1, 2}) {
    for (const char* name : {"rendezvous", "attempt 0", "exit"})
      EXPECT_EQ(events.count({pid, name}), 1u) << "node " << pid - 1 << ": " << name << "\n"
                                               << trace.dump(1);
  }
  for (const ProcessResult& result : gathered)
    EXPECT_EQ(result.err.find("--trace"), std::string::npos) << result.err;

  fs::remove(file);
  const std::vector<ProcessResult> alone = pair(1);
  EXPECT_NE(alone[0].err.find("--trace " + file.string() +
                              ": nothing is written here: the job's "
                              "timeline is written where its store is served (127.0.0.1), whose "
                              "cohort run has no --trace"),
            std::string::npos)
      << alone[0].err;
  EXPECT_FALSE(fs::exists(file));
}

// A node whose agent is killed sends no events: node 0's trace shows its
// track anyway, saying why it is empty, rather than leaving it out (and
// node 0 does not wait for events that cannot come).
TEST_F(RunTest, TheTraceShowsANodeWhoseAgentWasKilled) {
  const fs::path file = dir_ / "lost.json";
  const std::string port = std::to_string(free_port());
  const std::vector<std::string> program{
      "-n", "1", "sh", "-c", "touch \"$0/up.$RANK\"; exec sleep 30", dir_.string()};
  std::vector<std::string> traced{"--trace", file.string()};
  traced.insert(traced.end(), program.begin(), program.end());
  test::Subprocess node1(static_node(1, port, program), options());
  test::Subprocess node0(static_node(0, port, traced), options());
  ASSERT_TRUE(workers_ready("up", 2));
  kill(node1.pid(), SIGKILL);
  const ProcessResult zero = node0.finish();
  (void)node1.finish();
  EXPECT_NE(zero.exit_code, 0) << test::describe(zero);
  const auto trace = nlohmann::json::parse(test::read_file(file));
  std::string why;
  std::map<int, std::string> names;  // pid -> "node N (host)"
  for (const auto& event : trace["traceEvents"]) {
    if (event["name"] == "process_name") names[event["pid"]] = event["args"]["name"];
    if (event["pid"] == 2 && event["name"] == "no events") why = event["args"]["why"];
  }
  EXPECT_EQ(why, "its agent ended without sending them") << trace.dump(1);
  ASSERT_EQ(names[1].rfind("node 0 (", 0), 0u) << trace.dump(1);
  EXPECT_EQ(names[2], "node 1 (" + names[1].substr(8)) << "the same host";
}

// A console that stops reading (a pipe nobody drains) never freezes the
// launcher: SIGTERM still stops the job within --grace, and the launcher exits.
TEST_F(RunTest, AStalledConsoleDoesNotStopTheLauncher) {
  int ends[2];
  ASSERT_EQ(pipe(ends), 0);
  const std::string done = (dir_ / "flooded").string();
  const std::vector<std::string> argv =
      cohort_run({"--grace", "1", "-n", "2", "sh", "-c",
                  "head -c 30000000 /dev/zero | tr '\\0' 'x' | fold -w 100; touch " + done +
                      ".$RANK; exec sleep 60"});
  const pid_t launcher = fork();
  if (launcher == 0) {
    dup2(ends[1], STDOUT_FILENO);
    close(ends[0]);
    std::vector<char*> args;
    for (const std::string& arg : argv)
      args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(ends[1]);  // ends[0] stays open and unread: the stalled console
  ASSERT_TRUE(eventually([&] { return fs::exists(done + ".0") && fs::exists(done + ".1"); }, 60s));
  kill(launcher, SIGTERM);
  int status = 0;
  const bool ended =
      eventually([&] { return waitpid(launcher, &status, WNOHANG) == launcher; }, 20s);
  if (!ended) {
    kill(launcher, SIGKILL);
    waitpid(launcher, &status, 0);
  }
  close(ends[0]);
  EXPECT_TRUE(ended) << "the launcher hung on its stalled console";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 143) << status;
}

// Out of descriptors half-way through starting the workers: the ones
// already started are stopped, and the error names the limit. 64 workers
// need 128 pipe ends, four times the limit, whatever the launcher holds
// besides (that depends on what it inherits: 8 workers fitted in CI).
TEST_F(RunTest, ASpawnThatFailsHalfWayLeavesNoWorker) {
  if (test::find_in_path("prlimit").empty()) GTEST_SKIP() << "prlimit (util-linux) is missing";
  const std::string dir = dir_.string();
  const auto result =
      test::run_process({"prlimit", "--nofile=32", COHORT_CLI_PATH, "run", "-n", "64", "sh", "-c",
                         "echo $$ > " + dir + "/pid.$RANK; exec sleep 30"},
                        options());
  EXPECT_EQ(result.exit_code, 1) << test::describe(result);
  EXPECT_NE(result.err.find("pipe2 failed: Too many open files (the open-file limit is 32"),
            std::string::npos)
      << result.err;
  // Those that got as far as writing their pid are gone.
  // (A shell stopped between creating its file and writing it leaves it empty.)
  for (const auto& entry : fs::directory_iterator(dir_)) {
    const std::string pid = test::read_file(entry.path());
    if (pid.empty()) continue;
    EXPECT_TRUE(eventually([&] { return !test::process_runs(std::stoi(pid)); }, 5s))
        << entry.path();
  }
}

// A reader that goes away (`| head`) costs the workers' output, not the
// job: the launcher exits with the job's status, not SIGPIPE's.
TEST_F(RunTest, AConsoleThatGoesAwayDoesNotKillTheLauncher) {
  const auto result = test::run_process(
      {"bash", "-c",
       std::string(COHORT_CLI_PATH) +
           " run -n 4 sh -c 'for i in $(seq 1 3000); do echo line $i; done' | head -2; "
           "echo \"launcher status ${PIPESTATUS[0]}\""},
      options());
  EXPECT_NE(result.out.find("launcher status 0"), std::string::npos) << test::describe(result);
}

// No launcher, MASTER_ADDR an IPv6 address (both spellings): rank 0's store
// listens there and the other rank finds it.
TEST_F(RunTest, PlainVariablesWithAnIpv6MasterAddress) {
  for (const char* master : {"::1", "[::1]"}) {
    SCOPED_TRACE(master);
    const int port = free_port();
    std::vector<std::unique_ptr<test::Subprocess>> ranks;
    for (int rank = 0; rank < 2; ++rank) {
      test::ProcessOptions options = this->options();
      options.env = process_environment();
      for (const char* name : {"COHORT_RUN_ID", "TORCHELASTIC_RUN_ID", "COHORT_STORE_ADDR"})
        options.env->erase(name);
      (*options.env)["RANK"] = std::to_string(rank);
      (*options.env)["WORLD_SIZE"] = "2";
      (*options.env)["LOCAL_RANK"] = std::to_string(rank);
      (*options.env)["LOCAL_WORLD_SIZE"] = "2";
      (*options.env)["MASTER_ADDR"] = master;
      (*options.env)["MASTER_PORT"] = std::to_string(port);
      ranks.push_back(std::make_unique<test::Subprocess>(
          std::vector<std::string>{COHORT_REDUCTION_PATH}, options));
    }
    for (auto& rank : ranks) {
      const auto result = rank->finish();
      EXPECT_EQ(result.exit_code, 0) << test::describe(result);
      EXPECT_NE(result.out.find("has data 2"), std::string::npos) << test::describe(result);
    }
  }
}

// A worker that daemonizes (a new session, a double fork) leaves its process
// group; the agent, its subreaper, stops what it left at the end and says so.
// The worker ends only once the daemon is `sleep` itself: before that, the
// daemon is still its shell, or its `mv` is still exiting, and the agent
// would rightly stop and name those.
TEST_F(RunTest, ADaemonizedWorkerIsStoppedAtTheEnd) {
  const std::string pid_file = (dir_ / "daemon").string();
  const auto result = run({"-n", "1", "sh", "-c",
                           "setsid -f sh -c 'echo $$ > " + pid_file + ".part; mv " + pid_file +
                               ".part " + pid_file + "; exec sleep 60'; while [ ! -e " + pid_file +
                               " ] || [ \"$(cat /proc/$(cat " + pid_file +
                               ")/comm 2>/dev/null)\" != sleep ]; do sleep 0.01; done"});
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  const pid_t daemon = std::stoi(test::read_file(pid_file));
  EXPECT_FALSE(test::process_runs(daemon)) << "the daemon " << daemon << " outlived the job";
  EXPECT_NE(result.err.find("stopped 1 process the workers left running outside their process "
                            "groups: pid " +
                            std::to_string(daemon) + " (sleep)"),
            std::string::npos)
      << result.err;
}

TEST_F(RunTest, SigtermReachesWorkersAndAWorkerThatIgnoresItIsKilled) {
  // Rank 0 exits on SIGTERM; rank 1 ignores it and must be SIGKILLed after --grace.
  test::Subprocess launcher(
      cohort_run({"-n", "2", "--grace", "0.5", "sh", "-c",
                  "if [ $RANK = 0 ]; then trap 'echo rank 0 got TERM; exit 0' TERM; "
                  "else trap '' TERM; fi; touch " +
                      (dir_ / "ready").string() + ".$RANK; sleep 30 & wait; sleep 30 & wait"}),
      options(30s));
  ASSERT_TRUE(workers_ready("ready", 2));
  kill(launcher.pid(), SIGTERM);
  const ProcessResult result = launcher.finish();
  ASSERT_FALSE(result.timed_out) << test::describe(result);
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << test::describe(result);
  EXPECT_NE(result.out.find("[0] rank 0 got TERM"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("stopped by SIGTERM"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("rank 1 (pid "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("stopped by cohort (SIGKILL)"), std::string::npos) << result.err;
}

TEST_F(RunTest, Usr1ReachesWorkersWithoutEndingTheJob) {
  test::Subprocess launcher(cohort_run({"-n", "2", "sh", "-c",
                                        "trap 'echo got USR1; exit 0' USR1; touch " +
                                            (dir_ / "ready").string() + ".$RANK; sleep 30 & wait"}),
                            options(30s));
  ASSERT_TRUE(workers_ready("ready", 2));
  kill(launcher.pid(), SIGUSR1);
  const ProcessResult result = launcher.finish();
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  std::vector<std::string> lines = lines_of(result.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"[0] got USR1", "[1] got USR1"}));
}

TEST_F(RunTest, MaxRestartsRestartsTheGroupWithTheCountIncremented) {
  const std::vector<std::string> flaky = {
      "-n", "2", "sh", "-c",
      "echo attempt $TORCHELASTIC_RESTART_COUNT; [ $TORCHELASTIC_RESTART_COUNT = 0 ] && "
      "[ $RANK = 1 ] && exit 7; exit 0"};
  std::vector<std::string> with_restart = {"--max-restarts", "1"};
  with_restart.insert(with_restart.end(), flaky.begin(), flaky.end());
  const ProcessResult restarted = run(with_restart);
  EXPECT_EQ(restarted.exit_code, 0) << test::describe(restarted);
  EXPECT_NE(restarted.err.find("restarting all 2 workers (restart 1 of 1)"), std::string::npos)
      << restarted.err;
  EXPECT_NE(restarted.out.find("[1] attempt 1"), std::string::npos) << restarted.out;
  EXPECT_EQ(run(flaky).exit_code, 7);
}

TEST_F(RunTest, LogDirPrefixAndRanks) {
  const ProcessResult result =
      run({"-n", "3", "--log-dir", dir_.string(), "--prefix", "<{rank}/{local_rank}> ", "--ranks",
           "1-2", "sh", "-c", "echo out $RANK; echo err $RANK >&2"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  std::vector<std::string> out = lines_of(result.out);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<std::string>{"<1/1> out 1", "<2/2> out 2"}));
  for (int rank = 0; rank < 3; ++rank) {
    const fs::path files = dir_ / "attempt_0" / ("rank_" + std::to_string(rank));
    EXPECT_EQ(test::read_file(files / "stdout.log"), "out " + std::to_string(rank) + "\n");
    EXPECT_EQ(test::read_file(files / "stderr.log"), "err " + std::to_string(rank) + "\n");
  }
}

// Runs a job of 2 workers in which rank 1 fails after writing its
// TORCHELASTIC_ERROR_FILE, with TMPDIR `tmp`; each worker prints the path.
ProcessResult RunTest::job_with_error_file(const fs::path& tmp) {
  const test::ProcessOptions with_tmp = options_with_tmpdir(tmp);
  // Rank 1 fails once rank 0 has said its line: else its failure may stop
  // rank 0 first (one run in a few beside another test).
  const std::string said = (dir_ / "rank0-said").string();
  const ProcessResult result =
      test::run_process(cohort_run({"-n", "2", "sh", "-c",
                                    "echo $TORCHELASTIC_ERROR_FILE; if [ $RANK = 0 ]; then touch " +
                                        said + "; exit 0; fi; while [ ! -e " + said +
                                        " ]; do sleep 0.01; done; "
                                        "printf '{\"message\": \"ValueError: rank 1 gave up\"}' "
                                        "> $TORCHELASTIC_ERROR_FILE; exit 3"}),
                        with_tmp);
  EXPECT_EQ(result.exit_code, 3) << test::describe(result);
  EXPECT_NE(result.err.find("ValueError: rank 1 gave up"), std::string::npos)
      << test::describe(result);
  return result;
}

// Without --log-dir each worker's TORCHELASTIC_ERROR_FILE lies in the user's
// own directory in $TMPDIR, made 0700 and kept from job to job (a directory
// per job cost a start 175 µs on an ext4 /tmp with discard); the report
// quotes what a worker wrote there, and the job's files are gone at the end.
TEST_F(RunTest, ErrorFilesLieInTheUsersDirectoryAndGoWithTheJob) {
  const fs::path tmp = dir_ / "tmp";
  const fs::path users = tmp / ("cohort-" + std::to_string(geteuid()));
  const ProcessResult result = job_with_error_file(tmp);
  for (const char* rank : {"0", "1"}) {
    const std::string name = std::string(".attempt_0.rank_") + rank + ".error.json";
    EXPECT_NE(result.out.find(users.string() + "/"), std::string::npos) << result.out;
    EXPECT_NE(result.out.find(name), std::string::npos) << result.out;
  }
  struct stat info {};
  ASSERT_EQ(stat(users.c_str(), &info), 0) << users;
  EXPECT_EQ(info.st_mode & 0777, 0700u) << users;
  EXPECT_TRUE(fs::is_empty(users))
      << "left in " << users << ": " << fs::directory_iterator(users)->path();
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp), fs::directory_iterator()), 1)
      << "left in TMPDIR: " << fs::directory_iterator(tmp)->path();
}

// A directory of that name that others may enter is not used (another user
// could have made it, or a umask left it open): the job makes one of its
// own beside it, removed at the end, and leaves the other as it was.
TEST_F(RunTest, AnOpenUsersDirectoryIsPassedOver) {
  const fs::path tmp = dir_ / "tmp";
  const fs::path users = tmp / ("cohort-" + std::to_string(geteuid()));
  fs::create_directories(users);
  fs::permissions(users, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
  const ProcessResult result = job_with_error_file(tmp);
  EXPECT_EQ(result.out.find(users.string() + "/"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find(tmp.string() + "/cohort-"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("/attempt_0.rank_1.error.json"), std::string::npos) << result.out;
  EXPECT_TRUE(fs::is_empty(users)) << "the job wrote in " << users;
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp), fs::directory_iterator()), 1)
      << "left in TMPDIR: " << fs::directory_iterator(tmp)->path();
}

TEST_F(RunTest, OutputLinesNeverMixMidLine) {
  // Four workers write long lines as fast as they can, in small pieces.
  const ProcessResult result =
      run({"-n", "4", "sh", "-c",
           "i=0; while [ $i -lt 300 ]; do printf 'rank%s-' $RANK; printf 'x%.0s' $(seq 200); "
           "echo; i=$((i+1)); done"});
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  const std::vector<std::string> lines = lines_of(result.out);
  EXPECT_EQ(lines.size(), 1200u);
  for (const std::string& line : lines) {
    // "[R] rankR-" and 200 x: a line is whole, and its prefix is its writer's.
    ASSERT_EQ(line.size(), 10u + 200u) << line.substr(0, 120);
    const std::string rank(1, line[1]);
    EXPECT_EQ(line.substr(0, 10), "[" + rank + "] rank" + rank + "-") << line.substr(0, 120);
    EXPECT_EQ(line.substr(10), std::string(200, 'x')) << line.substr(0, 120);
  }
}

// A reader that is merely slow (20 MB/s here, a log shipper or a remote
// terminal) gets every line: the workers wait for it, as they would writing
// to it themselves. Before, it got the first 8 MiB and a marker saying it
// "stopped reading". Lines of 1 MiB come whole.
TEST_F(RunTest, ASlowReaderGetsEveryLine) {
  const std::string workers =
      "head -c 15000000 /dev/zero | tr '\\0' 'x' | fold -w 99; head -c 1048560 /dev/zero | tr "
      "'\\0' 'y'; echo";
  std::string command;
  for (const std::string& word : cohort_run({"-n", "2", "--", "sh", "-c", workers}))
    command += "'" + word + "' ";
  command += "| /usr/bin/python3 " COHORT_TEST_DATA_DIR "/slow_reader.py 20e6";
  const ProcessResult result = test::run_process({"sh", "-c", command}, options());
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  // Per worker 151,515 lines of 99 x, then one of 15 x and 1,048,560 y:
  // 1 MiB with its newline. Each line has its "[R] " prefix.
  const std::uint64_t lines = 2 * (151515 + 1);
  const std::uint64_t bytes = 2 * (15000000 + 151515 + 1048560 + 1 + (151515 + 1) * 4);
  EXPECT_NE(result.out.find(detail::cat("lines ", lines, " bytes ", bytes, " ")), std::string::npos)
      << result.out;
  EXPECT_EQ(result.out.find("dropped"), std::string::npos) << result.out;
}

// A standard output nobody reads (a pipe into a stuck process) holds the
// workers back for as long as its reader might wake (10 s), then their
// lines are dropped, and the job goes on; the launcher's report of the
// failure reaches standard error all the same, which has a writer of its
// own. Before, one writer served both, and the report waited forever behind
// stdout.
TEST_F(RunTest, AStalledStdoutNeitherStopsTheJobNorSwallowsTheReport) {
  const fs::path err = dir_ / "stderr";
  std::string command;
  for (const std::string& word :
       cohort_run({"-n", "1", "--", "sh", "-c",
                   "head -c 20000000 /dev/zero | tr '\\0' 'x' | fold -w 99; exit 3"}))
    command += "'" + word + "' ";
  command += "2> '" + err.string() + "' | sleep 16";
  const ProcessResult result = test::run_process({"sh", "-c", command}, options());
  const std::string report = test::read_file(err);
  EXPECT_NE(report.find("rank 0 failed: exited with code 3"), std::string::npos) << report;
}

TEST_F(RunTest, TwoJobsAtOnceNeverClash) {
  test::Subprocess first(cohort_run({"-n", "2", COHORT_HELLO_PATH}), options());
  test::Subprocess second(cohort_run({"-n", "2", COHORT_HELLO_PATH}), options());
  const ProcessResult one = first.finish();
  const ProcessResult two = second.finish();
  EXPECT_EQ(one.exit_code, 0) << test::describe(one);
  EXPECT_EQ(two.exit_code, 0) << test::describe(two);
  const auto port = [](const std::string& out) { return out.substr(out.find(':'), 8); };
  EXPECT_NE(port(one.out), port(two.out));
}

// Two ranks of mpirun on this node, each asked for 2 workers: a usage error
// that names the forms that work.
TEST_F(RunTest, SeveralRanksPerNodeEachWithSeveralWorkersIsRefused) {
  test::ProcessOptions inside = options();
  inside.env = process_environment();
  inside.env->insert({{"OMPI_COMM_WORLD_RANK", "1"},
                      {"OMPI_COMM_WORLD_SIZE", "2"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  const ProcessResult result = test::run_process(cohort_run({"-n", "2", "true"}), inside);
  EXPECT_EQ(result.exit_code, 2) << test::describe(result);
  EXPECT_EQ(result.err.rfind("cohort run: openmpi started 2 tasks on this node and each would "
                             "start -n 2 workers",
                             0),
            0u)
      << result.err;
  EXPECT_NE(result.err.find("`mpirun -np 4 cohort run PROGRAM` (one worker per rank)"),
            std::string::npos)
      << result.err;
  EXPECT_EQ(lines_of(result.err).size(), 1u) << result.err;
}

// Two "nodes" on this machine, torchrun's static form: one job of 4 ranks,
// contiguous per node; a failure on one node stops the other.
TEST_F(RunTest, StaticNodesMakeOneJob) {
  const std::string port = std::to_string(free_port());
  const auto node = [&](int rank, std::vector<std::string> program) {
    std::vector<std::string> args{"-n", "2", "--prefix", "[{rank}] "};
    args.insert(args.end(), program.begin(), program.end());
    return std::make_unique<test::Subprocess>(static_node(rank, port, args), options());
  };
  {
    auto second = node(1, {COHORT_REDUCTION_PATH});
    auto first = node(0, {COHORT_REDUCTION_PATH});
    const ProcessResult a = first->finish();
    const ProcessResult b = second->finish();
    ASSERT_EQ(a.exit_code, 0) << test::describe(a);
    ASSERT_EQ(b.exit_code, 0) << test::describe(b);
    for (const std::string& line : lines_of(a.out + b.out)) {
      EXPECT_EQ(line.substr(line.size() - 11), " has data 4") << line;
    }
    EXPECT_EQ(lines_of(a.out).size(), 2u);
    EXPECT_EQ(a.out.find("[2]"), std::string::npos) << a.out;  // ranks 0-1 on node 0
    EXPECT_NE(b.out.find("[3]"), std::string::npos) << b.out;  // ranks 2-3 on node 1
  }
  auto second = node(1, {"sh", "-c", "[ $RANK = 3 ] && exit 3; exec sleep 60"});
  auto first = node(0, {"sleep", "60"});
  const ProcessResult a = first->finish();
  const ProcessResult b = second->finish();
  EXPECT_EQ(a.exit_code, 3) << test::describe(a);
  EXPECT_EQ(b.exit_code, 3) << test::describe(b);
  EXPECT_NE(b.err.find("cohort run: rank 3 failed: exited with code 3"), std::string::npos)
      << b.err;
  EXPECT_NE(a.err.find("stopped ranks 0-1 here: rank 3 failed: exited with code 3"),
            std::string::npos)
      << a.err;
}

// torchrun's rendezvous form on this machine: the same command twice, no
// --node-rank; the agent that binds the endpoint is node 0, the other node 1.
TEST_F(RunTest, NodeRanksAreGivenAtTheRendezvousWithoutNodeRank) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  const std::vector<std::string> args{"--nnodes=2",
                                      "--nproc_per_node=2",
                                      "--rdzv_backend=c10d",
                                      "--rdzv_endpoint=" + endpoint,
                                      "--rdzv_id=job-7",
                                      "--prefix",
                                      "[{rank}] ",
                                      "sh",
                                      "-c",
                                      "echo $RANK/$WORLD_SIZE node $GROUP_RANK/$GROUP_WORLD_SIZE "
                                      "local $LOCAL_RANK run $TORCHELASTIC_RUN_ID"};
  test::Subprocess first(cohort_run(args), options());
  test::Subprocess second(cohort_run(args), options());
  const ProcessResult a = first.finish();
  const ProcessResult b = second.finish();
  ASSERT_EQ(a.exit_code, 0) << test::describe(a);
  ASSERT_EQ(b.exit_code, 0) << test::describe(b);
  std::vector<std::string> lines = lines_of(a.out + b.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines,
            (std::vector<std::string>{
                "[0] 0/4 node 0/2 local 0 run job-7", "[1] 1/4 node 0/2 local 1 run job-7",
                "[2] 2/4 node 1/2 local 0 run job-7", "[3] 3/4 node 1/2 local 1 run job-7"}));
}

// The same, when another process holds the endpoint's port as the agents
// start (as an outgoing connection may, for a moment): neither can bind it,
// so both connect; once it is free again one of them binds it and serves,
// instead of both waiting for the rendezvous timeout.
TEST_F(RunTest, AgentsMeetOnceTheEndpointsPortIsFreeAgain) {
  const int port = free_port();
  const int holder = bound_socket(port);  // bound, not listening: connections are refused
  ASSERT_GE(holder, 0);
  const std::vector<std::string> args{"--nnodes=2",
                                      "--nproc_per_node=1",
                                      "--rdzv_backend=c10d",
                                      "--rdzv_endpoint=127.0.0.1:" + std::to_string(port),
                                      "sh",
                                      "-c",
                                      "echo $RANK/$WORLD_SIZE"};
  test::Subprocess first(cohort_run(args), options());
  test::Subprocess second(cohort_run(args), options());
  std::this_thread::sleep_for(1500ms);  // only an order: the agents meet whenever it is freed
  close(holder);
  const ProcessResult a = first.finish();
  const ProcessResult b = second.finish();
  ASSERT_EQ(a.exit_code, 0) << test::describe(a);
  ASSERT_EQ(b.exit_code, 0) << test::describe(b);
  std::vector<std::string> lines = lines_of(a.out + b.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"[0] 0/2", "[1] 1/2"}));
}

// Static nodes that wait at the rendezvous, before any worker runs: node 1
// for a store no one serves, node 0 for a node that never comes. A stop
// signal ends the wait at once (the rendezvous timeout is 300 s), each with
// the shell's status for it.
TEST_F(RunTest, AStopSignalEndsTheWaitForTheStoreOrForTheOtherNodes) {
  const auto node = [&](int rank, int port) {
    return static_node(rank, std::to_string(port),
                       {"-n", "1", "sh", "-c", "touch \"$0/ran.$RANK\"", dir_.string()});
  };
  test::Subprocess without_store(node(1, free_port()), options());
  test::Subprocess without_peer(node(0, free_port()), options());
  std::this_thread::sleep_for(500ms);  // only an order: a signal ends the wait whenever it comes
  kill(without_store.pid(), SIGTERM);
  kill(without_peer.pid(), SIGINT);
  const ProcessResult store = without_store.finish();
  const ProcessResult peer = without_peer.finish();
  EXPECT_EQ(store.exit_code, 128 + SIGTERM) << test::describe(store);
  EXPECT_NE(store.err.find("stopped by SIGTERM while waiting to join the job"), std::string::npos)
      << store.err;
  EXPECT_EQ(peer.exit_code, 128 + SIGINT) << test::describe(peer);
  EXPECT_NE(peer.err.find("stopped by SIGINT while waiting to join the job"), std::string::npos)
      << peer.err;
  EXPECT_FALSE(fs::exists(dir_ / "ran.0"));
  EXPECT_FALSE(fs::exists(dir_ / "ran.1"));
}

// Elastic membership on this machine (--nnodes 1:2): two agents make the
// job; two more come late and wait to be taken in. One is told to stop
// (SIGTERM) while it waits, the other leaves when the job ends.
TEST_F(RunTest, AgentsThatComeLateWaitAndLeaveWhenStoppedOrWhenTheJobEnds) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  const std::vector<std::string> args{"--nnodes",   "1:2", "--rdzv-endpoint",
                                      endpoint,     "-n",  "1",
                                      "sh",         "-c",  "touch \"$0/member.$RANK\"; sleep 3",
                                      dir_.string()};
  test::Subprocess first(cohort_run(args), options());
  test::Subprocess second(cohort_run(args), options());
  ASSERT_TRUE(workers_ready("member", 2));  // the job runs on its two nodes (its maximum)
  test::Subprocess stopped(cohort_run(args), options());
  test::Subprocess waiting(cohort_run(args), options());
  std::this_thread::sleep_for(500ms);  // only an order: the SIGTERM works whenever it comes
  kill(stopped.pid(), SIGTERM);
  const ProcessResult told = stopped.finish();
  EXPECT_EQ(told.exit_code, 128 + SIGTERM) << test::describe(told);
  EXPECT_NE(told.err.find("stopped by SIGTERM while waiting to join the job"), std::string::npos)
      << told.err;
  const ProcessResult a = first.finish();
  const ProcessResult b = second.finish();
  EXPECT_EQ(a.exit_code, 0) << test::describe(a);
  EXPECT_EQ(b.exit_code, 0) << test::describe(b);
  const ProcessResult left = waiting.finish();
  EXPECT_EQ(left.exit_code, 0) << test::describe(left);
  EXPECT_NE(left.err.find("started without this one"), std::string::npos) << left.err;
  EXPECT_NE(left.err.find("the job ended before this node was taken in"), std::string::npos)
      << left.err;
  EXPECT_FALSE(fs::exists(dir_ / "member.2"));  // neither ran a worker
}

TEST_F(RunTest, SpawnRunsTheFunctionInEachWorker) {
  const ProcessResult result = test::run_process({COHORT_SPAWN_PATH, "3"}, options());
  ASSERT_EQ(result.exit_code, 0) << test::describe(result);
  const std::vector<std::string> lines = lines_of(result.out);
  ASSERT_EQ(lines.size(), 3u) << result.out;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(result.out.find("spawned worker " + std::to_string(rank) + " (local " +
                              std::to_string(rank) + ") of 3 has data 3"),
              std::string::npos)
        << result.out;
  }
}

// Every bad option value, and a missing PROGRAM, is a usage error: exit 2
// and one line (the value from a PET_ variable names the variable).
TEST_F(RunTest, UsageErrors) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{},
                                               {"-n", "0", "true"},
                                               {"-n", "lots", "true"},
                                               {"--signals", "NOPE", "true"},
                                               {"--ranks", "5", "-n", "2", "true"},
                                               {"--grace", "-1", "true"},
                                               {"--max-restarts", "x", "true"},
                                               {"--rdzv-backend", "etcd-v2", "true"},
                                               {"--rdzv-conf", "colour=blue", "true"},
                                               {"--redirects", "4", "true"},
                                               {"--nnodes", "2", "--node-rank", "2", "true"},
                                               {"--bogus", "true"}}) {
    const ProcessResult result = run(args);
    EXPECT_EQ(result.exit_code, 2) << test::describe(result);
    EXPECT_EQ(lines_of(result.err).size(), 1u) << "not one line: " << result.err;
  }
  test::ProcessOptions with_env = options();
  with_env.env = process_environment();
  (*with_env.env)["PET_MAX_RESTARTS"] = "many";
  const ProcessResult result = test::run_process(cohort_run({"true"}), with_env);
  EXPECT_EQ(result.exit_code, 2) << test::describe(result);
  EXPECT_NE(result.err.find("PET_MAX_RESTARTS 'many'"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace cohort
