// docs/security.md, tried by a second user: another local account (nobody,
// through setpriv) attacks a job's store with the token it read or guessed.
// Needs root to become that user; skips with the reason otherwise.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

#include <cohort/communicator.hpp>
#include <cohort/config.hpp>
#include <cohort/errors.hpp>
#include <cohort/launch_env.hpp>
#include <cohort/store.hpp>

#include "comm/kit/host_identity.hpp"
#include "comm/kit/peers.hpp"
#include "comm/registry.hpp"
#include "core/cpus.hpp"
#include "core/socket.hpp"
#include "core/strings.hpp"
#include "store/exchange.hpp"
#include "support/files.hpp"
#include "support/skip.hpp"
#include "support/subprocess.hpp"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A rank started with plain torchrun variables and no agent, one of 2, its
// store at 127.0.0.1:`port`, 4 s to meet; nothing of an outer job's.
test::ProcessOptions without_agent(int port) {
  test::ProcessOptions options;
  options.env = process_environment();
  for (const char* name :
       {"COHORT_RUN_ID", "TORCHELASTIC_RUN_ID", "COHORT_JOB_TOKEN", "SLURM_JOB_ID",
        "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "COHORT_STORE_ADDR"}) {
    options.env->erase(name);
  }
  (*options.env)["WORLD_SIZE"] = "2";
  (*options.env)["MASTER_ADDR"] = "127.0.0.1";
  (*options.env)["MASTER_PORT"] = std::to_string(port);
  (*options.env)["COHORT_TIMEOUT"] = "4";
  return options;
}

class SecondUser : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      COHORT_SKIP_MISSING("acting as a second user needs root (setpriv to nobody)");
    }
    if (test::find_in_path("setpriv").empty())
      COHORT_SKIP_MISSING("setpriv (util-linux) is missing");
    // The intruder where nobody can run it, whatever the build tree's modes.
    fs::permissions(dir_.path(), fs::perms::owner_all | fs::perms::group_read |
                                     fs::perms::group_exec | fs::perms::others_read |
                                     fs::perms::others_exec);
    fs::copy_file(COHORT_STORE_INTRUDER_PATH, intruder_);
    fs::copy_file(COHORT_SHM_INTRUDER_PATH, shm_intruder_);
  }

  // The intruder as uid/gid 65534 (nobody), with no supplementary groups.
  test::ProcessResult intrude(const std::string& host, int port, const std::string& token,
                              bool as_nobody = true) {
    std::vector<std::string> argv;
    if (as_nobody) argv = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
    argv.insert(argv.end(), {intruder_.string(), host, std::to_string(port), token});
    return test::run_process(argv);
  }

  test::TempDir dir_{"cohort-security"};
  fs::path intruder_ = dir_.path() / "store_intruder";
  fs::path shm_intruder_ = dir_.path() / "shm_intruder";
};

// The shm backend's segment is handed out over an abstract Unix socket,
// which anyone on the host can find (/proc/net/unix) and connect to while
// the group meets. A second user who claims to be rank 1 is refused, and so
// is a process of the job's own user whose pid is not rank 1's; the group
// then meets and works as if nothing happened.
TEST_F(SecondUser, CannotTakeTheShmSegment) {
  if (!COHORT_WITH_SHM) GTEST_SKIP() << "no shm backend in this build";
  StoreServer::Options options;
  options.host = "127.0.0.1";
  StoreServer server(options);
  const auto client = [&] {
    StoreClient::Options connect;
    connect.port = server.port();
    connect.timeout = 20s;
    return std::make_shared<PrefixStore>("job", std::make_shared<StoreClient>(connect));
  };
  std::unique_ptr<Communicator> members[2];
  const auto join = [&](int rank) {
    LaunchInfo info;
    info.rank.value = rank;
    info.world_size.value = 2;
    detail::BackendContext context;
    context.info = &info;
    context.timeout = 20s;
    context.store = client();
    try {
      members[rank] = detail::create_communicator(context, "shm");
    } catch (const std::exception& error) {
      ADD_FAILURE() << "rank " << rank << ": " << error.what();
    }
  };
  // Rank 1 as rank 0 sees it once it has said who it is, before it connects:
  // what rank 1's own join publishes below (this process, this host, its
  // CPUs), and its arrival in the host exchange (store/exchange.hpp), so
  // that rank 0 completes it.
  client()->set(detail::exchanged_key("host", 1), detail::host_identity());
  client()->add("host/arrived", 1);
  client()->set("peer/1", detail::Peers::entry());
  client()->set("shm/cpus/1", detail::affinity_list());  // the CPUs it may run on
  std::thread rank0(join, 0);                            // listens, and waits for rank 1 to connect
  const std::string name = client()->get("shm/socket", 20s);
  const auto nobody = test::run_process({"setpriv", "--reuid=65534", "--regid=65534",
                                         "--clear-groups", shm_intruder_.string(), name, "1"});
  EXPECT_EQ(nobody.exit_code, 3) << test::describe(nobody);
  const auto same_user = test::run_process({shm_intruder_.string(), name, "1"});
  EXPECT_EQ(same_user.exit_code, 3) << test::describe(same_user);
  std::thread rank1(join, 1);
  rank0.join();
  rank1.join();
  ASSERT_TRUE(members[0] && members[1]);
  std::int32_t values[2][1] = {{1}, {2}};
  std::thread reduce0([&] { members[0]->all_reduce(std::span(values[0]), ReduceOp::sum); });
  members[1]->all_reduce(std::span(values[1]), ReduceOp::sum);
  reduce0.join();
  EXPECT_EQ(values[0][0], 3);
  EXPECT_EQ(values[1][0], 3);
}

// Even with the job's token in hand, another user on the host is refused:
// the store asks the kernel who owns the peer's socket.
TEST_F(SecondUser, IsRefusedByTheStoreEvenWithTheToken) {
  StoreServer::Options options;
  options.token = "0123456789abcdef0123456789abcdef";
  options.token_is_secret = true;
  StoreServer server(options);
  const auto refused = intrude("127.0.0.1", server.port(), options.token);
  EXPECT_EQ(refused.exit_code, 3) << test::describe(refused);
  EXPECT_NE(refused.err.find("runs as uid 65534"), std::string::npos) << refused.err;
  // The same program as the job's own user gets in: the refusal above is
  // about the user, nothing else.
  const auto joined = intrude("127.0.0.1", server.port(), options.token, false);
  EXPECT_EQ(joined.exit_code, 0) << test::describe(joined);
}

// The same over IPv6 (MASTER_ADDR=::1): the kernel is asked about IPv6
// sockets the same way.
TEST_F(SecondUser, IsRefusedOverIpv6Too) {
  StoreServer::Options options;
  options.host = "::1";
  options.token = "0123456789abcdef0123456789abcdef";
  std::unique_ptr<StoreServer> server;
  try {
    server = std::make_unique<StoreServer>(options);
  } catch (const Error& error) {
    COHORT_SKIP_MISSING("no IPv6 loopback here: " << error.what());
  }
  const auto refused = intrude("::1", server->port(), options.token);
  EXPECT_EQ(refused.exit_code, 3) << test::describe(refused);
  EXPECT_NE(refused.err.find("runs as uid 65534"), std::string::npos) << refused.err;
  const auto joined = intrude("[::1]", server->port(), options.token, false);
  EXPECT_EQ(joined.exit_code, 0) << test::describe(joined);
}

// Plain torchrun variables and no secret (the token is the empty run id):
// rank 0's store listens on MASTER_ADDR only, and another user who opens
// the barrier is refused, so rank 0 waits for rank 1 and times out instead
// of finishing a job that never ran.
TEST_F(SecondUser, CannotOpenTheBarrierOfAJobWithoutAgent) {
  const int port = detail::pick_free_port("127.0.0.1");
  test::ProcessOptions options = without_agent(port);
  (*options.env)["RANK"] = "0";
  test::Subprocess rank0({COHORT_HELLO_PATH}, options);
  test::ProcessResult attempt;
  for (int i = 0; i < 100; ++i) {  // until rank 0 listens
    attempt = intrude("127.0.0.1", port, "");
    if (attempt.err.find("could not connect") == std::string::npos) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(attempt.exit_code, 3) << test::describe(attempt);
  EXPECT_NE(attempt.err.find("runs as uid 65534"), std::string::npos) << attempt.err;
  // Rank 0 listens on loopback, as MASTER_ADDR says, not on every interface.
  std::ifstream tcp("/proc/net/tcp");
  std::string table((std::istreambuf_iterator<char>(tcp)), std::istreambuf_iterator<char>());
  char loopback[32];
  char wildcard[32];
  std::snprintf(loopback, sizeof(loopback), "0100007F:%04X 00000000:0000 0A", port);
  std::snprintf(wildcard, sizeof(wildcard), "00000000:%04X 00000000:0000 0A", port);
  EXPECT_NE(table.find(loopback), std::string::npos) << table;
  EXPECT_EQ(table.find(wildcard), std::string::npos) << table;
  const auto result = rank0.finish();
  EXPECT_NE(result.exit_code, 0) << test::describe(result);
}

// Another process listened first on the port a job without agent will
// use, and plays its store: rank 0 cannot serve (the port is taken), and
// rank 1, which would have joined the fake's barrier and exited 0 for a job
// that never ran, fails at once naming the port. The listener learns
// nothing: as another user it is refused before a byte is sent (the kernel
// says who owns it); as the job's own user (a stale process, another job)
// it gets only a hello, for it cannot prove the token.
TEST_F(SecondUser, ListeningFirstOnAJobsPortLearnsNothing) {
  const std::string token = "5f0c2a8e9b7d4613a0e1f2d3c4b5a697";
  for (const bool as_nobody : {true, false}) {
    SCOPED_TRACE(as_nobody ? "the listener is nobody" : "the listener is the job's user");
    const int port = detail::pick_free_port("127.0.0.1");
    std::vector<std::string> listen{intruder_.string(), "--listen", std::to_string(port), "3"};
    if (as_nobody) {
      listen.insert(listen.begin(),
                    {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
    }
    test::Subprocess listener(listen);
    char entry[32];
    std::snprintf(entry, sizeof(entry), "0100007F:%04X 00000000:0000 0A", port);
    for (int i = 0; i < 200; ++i) {  // until it listens
      std::ifstream tcp("/proc/net/tcp");
      const std::string table((std::istreambuf_iterator<char>(tcp)),
                              std::istreambuf_iterator<char>());
      if (table.find(entry) != std::string::npos) break;
      std::this_thread::sleep_for(25ms);
    }
    test::ProcessOptions options = without_agent(port);
    (*options.env)["COHORT_JOB_TOKEN"] = token;
    (*options.env)["RANK"] = "1";
    test::Subprocess rank1({COHORT_HELLO_PATH}, options);
    (*options.env)["RANK"] = "0";
    const auto rank0 = test::run_process({COHORT_HELLO_PATH}, options);
    const auto joined = rank1.finish();
    EXPECT_NE(rank0.exit_code, 0) << test::describe(rank0);
    EXPECT_NE(joined.exit_code, 0) << test::describe(joined);
    EXPECT_NE(joined.err.find(detail::cat("store at 127.0.0.1:", port)), std::string::npos)
        << joined.err;
    EXPECT_NE(joined.err.find("another process holds this port"), std::string::npos) << joined.err;
    const auto heard = listener.finish();
    EXPECT_NE(heard.out.find("received"), std::string::npos) << test::describe(heard);
    std::string token_hex;
    for (unsigned char c : token)
      token_hex += detail::cat(std::hex, (c | 0x100)).substr(1);
    EXPECT_EQ(heard.out.find(token_hex), std::string::npos) << heard.out;
    EXPECT_EQ(heard.out.find(token), std::string::npos) << heard.out;
    // The job's user got a hello (45 bytes), nobody not a byte.
    EXPECT_EQ(heard.out.find(as_nobody ? "received 2d" : "received \n"), std::string::npos)
        << heard.out;
  }
}

// --log-dir as root, where another user prepared the files it writes: a
// link to a root-only file in place of rank 0's stdout.log. Whether the
// link sits in a directory of that user's (--log-dir itself, or an
// attempt_0 in a shared sticky directory), cohort run refuses before any
// worker starts, names the directory, and the file the link points to is
// untouched; nothing is made where it points.
TEST_F(SecondUser, CannotTurnLogFilesAgainstTheirUser) {
  const fs::path target = dir_.path() / "root-only";
  std::ofstream(target) << "precious\n";
  fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write);
  const fs::path shared = dir_.path() / "shared";  // as /tmp is: 1777
  fs::create_directory(shared);
  fs::permissions(shared, fs::perms::all | fs::perms::sticky_bit);
  const auto as_nobody = [](const std::string& script) {
    return test::run_process(
        {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script});
  };
  struct Case {
    fs::path log_dir;
    std::string refused;
  };
  for (const Case& trap : {Case{shared / "nobodys", "belongs to uid 65534"},
                           Case{shared, "attempt_0 belongs to uid 65534"}}) {
    SCOPED_TRACE(trap.log_dir.string());
    const fs::path rank_dir = trap.log_dir / "attempt_0" / "rank_0";
    const auto planted = as_nobody(detail::cat(
        "mkdir -p ", rank_dir.string(), " && chmod -R 777 ",
        trap.log_dir == shared ? rank_dir.parent_path().string() : trap.log_dir.string(),
        " && ln -s ", target.string(), " ", (rank_dir / "stdout.log").string(), " && ln -s ",
        (dir_.path() / "made-by-root").string(), " ", (rank_dir / "stderr.log").string()));
    ASSERT_EQ(planted.exit_code, 0) << test::describe(planted);
    const auto result =
        test::run_process({COHORT_CLI_PATH, "run", "-n", "1", "--log-dir", trap.log_dir.string(),
                           "--redirects", "3", "--", "echo", "a secret of root's"});
    EXPECT_NE(result.exit_code, 0) << test::describe(result);
    EXPECT_NE(result.err.find(trap.refused), std::string::npos) << result.err;
    EXPECT_EQ(test::read_file(target), "precious\n");
    EXPECT_FALSE(fs::exists(dir_.path() / "made-by-root"));
    std::error_code ignored;
    fs::remove_all(shared / "attempt_0", ignored);
  }
}

// The user's directory for error files, $TMPDIR/cohort-UID, has a name
// anyone can guess: nobody makes it first in a shared sticky directory, as
// a directory of its own and as a symbolic link to one of root's. Root's job
// uses neither (it makes a directory of the job's own beside them), runs,
// and writes nothing into them.
TEST_F(SecondUser, CannotHandTheUsersErrorDirectoryToRoot) {
  const fs::path shared = dir_.path() / "shared";  // as /tmp is: 1777
  fs::create_directory(shared);
  fs::permissions(shared, fs::perms::all | fs::perms::sticky_bit);
  const fs::path roots = dir_.path() / "roots";
  fs::create_directory(roots);
  fs::permissions(roots, fs::perms::owner_all);
  const fs::path planted = shared / "cohort-0";
  for (const std::string& plant : {detail::cat("mkdir -m 700 ", planted.string()),
                                   detail::cat("ln -s ", roots.string(), " ", planted.string())}) {
    SCOPED_TRACE(plant);
    const auto made = test::run_process(
        {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", plant});
    ASSERT_EQ(made.exit_code, 0) << test::describe(made);
    test::ProcessOptions options;
    options.env = process_environment();
    (*options.env)["TMPDIR"] = shared.string();
    const auto result =
        test::run_process({COHORT_CLI_PATH, "run", "-n", "1", "--", "sh", "-c",
                           "echo $TORCHELASTIC_ERROR_FILE; echo '{}' > $TORCHELASTIC_ERROR_FILE"},
                          options);
    EXPECT_EQ(result.exit_code, 0) << test::describe(result);
    EXPECT_NE(result.out.find(shared.string() + "/cohort-"), std::string::npos) << result.out;
    EXPECT_EQ(result.out.find(planted.string() + "/"), std::string::npos) << result.out;
    EXPECT_TRUE(fs::is_empty(roots)) << "root's job wrote through nobody's link";
    if (!fs::is_symlink(planted)) {
      EXPECT_TRUE(fs::is_empty(planted)) << "root's job wrote in nobody's directory";
    }
    EXPECT_EQ(std::distance(fs::directory_iterator(shared), fs::directory_iterator()), 1)
        << "left beside nobody's: " << fs::directory_iterator(shared)->path();
    fs::remove_all(planted);
  }
}

// COHORT_JOB_TOKEN=a was found from another host in 11 tries: a rank
// without agent refuses a token that can be guessed before it serves or
// connects to anything, and says how to make one.
TEST(JobToken, AGuessableOneIsRefusedByEveryRank) {
  test::ProcessOptions options = without_agent(detail::pick_free_port("127.0.0.1"));
  (*options.env)["COHORT_JOB_TOKEN"] = "a";
  for (const char* rank : {"0", "1"}) {
    (*options.env)["RANK"] = rank;
    const auto result = test::run_process({COHORT_HELLO_PATH}, options);
    EXPECT_NE(result.exit_code, 0) << test::describe(result);
    EXPECT_NE(result.err.find("COHORT_JOB_TOKEN can be guessed"), std::string::npos)
        << test::describe(result);
    EXPECT_NE(result.err.find("/dev/urandom"), std::string::npos) << result.err;
  }
}

// Descriptors run out (prlimit) while 200 idle peers hold connections to
// the store: it neither spins nor floods stderr; the job ends as it would.
TEST(StoreUnderAttack, OutOfDescriptorsItWritesABoundedNumberOfLines) {
  if (test::find_in_path("prlimit").empty()) COHORT_SKIP_MISSING("prlimit (util-linux) is missing");
  test::TempDir dir("cohort-emfile");
  const fs::path told = dir.path() / "port";
  test::Subprocess job({"prlimit", "--nofile=128", COHORT_CLI_PATH, "run", "-n", "2", "sh", "-c",
                        "[ $RANK = 0 ] && echo $COHORT_STORE_PORT > " + told.string() +
                            ".part && mv " + told.string() + ".part " + told.string() +
                            "; sleep 8"});
  for (int i = 0; i < 200 && !fs::exists(told); ++i)
    std::this_thread::sleep_for(50ms);
  int port = 0;
  std::ifstream(told) >> port;
  ASSERT_GT(port, 0);
  std::vector<detail::Fd> idle;
  std::string error;
  for (int i = 0; i < 200; ++i) {
    idle.push_back(detail::connect_tcp("127.0.0.1", port, detail::Clock::now() + 5s, &error));
  }
  const auto result = job.finish();
  EXPECT_EQ(result.exit_code, 0) << test::describe(result);
  std::size_t lines = 0;
  for (std::size_t at = result.err.find("store:"); at != std::string::npos;
       at = result.err.find("store:", at + 1))
    ++lines;
  // At most 5 refusals and 1 descriptor warning per 10 s, over about 8 s.
  EXPECT_LE(lines, 12u) << result.err;
  EXPECT_NE(result.err.find("Too many open files"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace cohort
