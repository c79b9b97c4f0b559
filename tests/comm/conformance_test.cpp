// Collective conformance, written once and run for every backend: each
// collective × element type × reduction op × element count, checked against
// a plain serial computation over every rank's input (exact for integers;
// floating point within kTolerance of the type). Groups are made through the
// registry, as cohort::init() makes them. A backend joins the whole suite
// with one entry in backends_under_test(): its name, world sizes and how its
// ranks run (threads of this process sharing an in-process store, or
// processes of a launcher that runs this binary once per rank).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <span>
#include <thread>
#include <utility>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cohort/communicator.hpp>
#include <cohort/store.hpp>
#include <cohort/world.hpp>

#include "bootstrap/interface_choice.hpp"
#include "comm/call_check.hpp"
#include "comm/registry.hpp"
#include "support/subprocess.hpp"

namespace cohort {
namespace {

using namespace std::chrono_literals;

// Every group's default timeout. Tests pass it explicitly (or nothing), so
// that backends take the paths of default calls; kOther is a timeout other
// than the default, which takes others (Gloo's legacy algorithms wait on the
// pairs' own timeout, so calls with another one avoid them).
constexpr std::chrono::milliseconds kDefault = 10s;
constexpr std::chrono::milliseconds kOther = 11s;

// Set in the processes a launcher starts: each is one rank of the group.
constexpr const char* kChildVariable = "COHORT_CONFORMANCE_CHILD";

struct BackendUnderTest {
  std::string label;  ///< names the tests: <label>_world<N>
  std::string name;   ///< the backend
  std::vector<int> world_sizes;
  /// The launcher command for `ranks` processes (it gets this binary's
  /// command line appended); nullptr: the ranks are threads of this process.
  std::vector<std::string> (*launcher)(int ranks) = nullptr;
  /// For ranks that are threads: the host each rank declares (so that a
  /// backend for several hosts can be tested in one process); nullptr: the
  /// real one, exchanged.
  std::vector<std::string> (*hosts)(int ranks) = nullptr;
  /// Set when the ranks are processes another test starts (on the test
  /// cluster): its tests exist only in those processes.
  const char* only_from = nullptr;
};

std::vector<std::string> mpirun(int ranks) {
  // Shared memory only: no TCP listeners whose ports other tests could meet.
  return {"mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader",
          "-np",    std::to_string(ranks)};
}

// Calls that time out (COHORT_MPI_WATCH=1: non-blocking ones, tested until
// done), as where mpirun keeps a job alive after a death.
std::vector<std::string> mpirun_watched(int ranks) {
  std::vector<std::string> command = mpirun(ranks);
  command.insert(command.begin() + 1, {"-x", "COHORT_MPI_WATCH=1"});
  return command;
}

// `cohort run`, with every all_reduce, all_gather and gather in single
// copies: shm ranks that read each other's memory across processes ("always",
// so a group that cannot fails to connect).
std::vector<std::string> cohort_run_single_copies(int ranks) {
  return {"env", "COHORT_SHM_SINGLE_COPY=always", COHORT_CLI_PATH, "run",
          "-n",  std::to_string(ranks),           "--no-prefix",   "--"};
}

// `cohort run` with single copies off: shm's messages go through the
// segment's channels, piece by piece (for MessageSizes and ShmMessages only).
std::vector<std::string> cohort_run_through_the_segment(int ranks) {
  return {"env", "COHORT_SHM_SINGLE_COPY=off", COHORT_CLI_PATH, "run",
          "-n",  std::to_string(ranks),        "--no-prefix",   "--"};
}

// Ranks placed round-robin on two hosts ("host-a", "host-b"): a host's
// ranks are not contiguous, and with an odd count the hosts differ in size.
std::vector<std::string> two_hosts(int ranks) {
  std::vector<std::string> hosts;
  for (int r = 0; r < ranks; ++r)
    hosts.push_back(r % 2 == 0 ? "host-a" : "host-b");
  return hosts;
}

// The first half of the ranks (rounded up) on one host, the rest on
// another, as cohort run numbers them: each host's ranks follow one another,
// and with an odd count the hosts differ in size (hier's gather, scatter and
// all_gather in place; with an even count, on rails too).
std::vector<std::string> two_hosts_in_blocks(int ranks) {
  std::vector<std::string> hosts;
  for (int r = 0; r < ranks; ++r)
    hosts.push_back(r < (ranks + 1) / 2 ? "host-a" : "host-b");
  return hosts;
}

// Three hosts of consecutive ranks and three sizes (3, 1 and the rest):
// hier's leaders swap their hosts' blocks pair by pair, and the middle
// host gets the others' from before and after its own.
std::vector<std::string> three_hosts_in_blocks(int ranks) {
  std::vector<std::string> hosts;
  for (int r = 0; r < ranks; ++r)
    hosts.push_back(r < 3 ? "host-a" : r == 3 ? "host-b" : "host-c");
  return hosts;
}

const std::vector<BackendUnderTest>& backends_under_test() {
  static const std::vector<BackendUnderTest> kBackends = {
      {"self", "self", {1}},
      {"shm", "shm", {1, 2, 3, 4, 7}},
      {"shm_single_copy", "shm", {2, 3}, cohort_run_single_copies},
      {"shm_through_segment", "shm", {2}, cohort_run_through_the_segment},
      {"hier", "hier", {3, 4, 7}, nullptr, two_hosts},
      {"hier_blocks", "hier", {3, 4, 7}, nullptr, two_hosts_in_blocks},
      {"hier_three_hosts", "hier", {6}, nullptr, three_hosts_in_blocks},
      {"hier_cluster", "hier", {4}, nullptr, nullptr, "MultiNode.HierPassesTheConformanceSuite"},
      {"gloo", "gloo", {1, 2, 3, 4, 7}},
      {"mpi", "mpi", {1, 2, 3, 4, 7}, mpirun},
      {"mpi_watched", "mpi", {2, 3}, mpirun_watched},
  };
  return kBackends;
}

const BackendUnderTest& backend_under_test(const std::string& label) {
  for (const BackendUnderTest& backend : backends_under_test()) {
    if (backend.label == label) return backend;
  }
  throw std::logic_error("no backend under test labelled " + label);
}

// Why this build cannot run `name`'s groups ("" when it can).
std::string not_built_because(const std::string& name) {
  for (const detail::BackendEntry& entry : detail::backends()) {
    if (entry.name == name) return entry.built ? "" : entry.unviable_because({});
  }
  return "the registry has no backend " + name;
}

// A group of `n` ranks of backend `name`, each a thread of this process
// with its own LaunchInfo and client of one in-process store server; they
// connect concurrently, as separate processes would.
// The store thread groups meet in, and the prefix of the last group made.
StoreServer& thread_groups_store() {
  static StoreServer server([] {
    StoreServer::Options options;
    options.host = "127.0.0.1";
    return options;
  }());
  return server;
}
std::string last_thread_group;

std::vector<std::unique_ptr<Communicator>> thread_group(
    const std::string& name, int n, std::vector<std::string> (*hosts)(int) = nullptr) {
  StoreServer& server = thread_groups_store();
  static int groups = 0;
  const std::string prefix = "group" + std::to_string(++groups);
  last_thread_group = prefix;
  std::vector<std::unique_ptr<Communicator>> group(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      LaunchInfo info;
      info.rank.value = rank;
      info.world_size.value = n;
      StoreClient::Options client;
      client.port = server.port();
      client.timeout = 30s;
      detail::BackendContext context;
      context.info = &info;
      context.timeout = kDefault;
      context.store = std::make_shared<PrefixStore>(prefix, std::make_shared<StoreClient>(client));
      if (hosts != nullptr) context.hosts = hosts(n);
      group[static_cast<std::size_t>(rank)] = detail::create_communicator(context, name);
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  return group;
}

// This process's one rank of a group of backend `name`, in a process a
// launcher started: its World says who it is and lends its store.
std::unique_ptr<Communicator> process_rank(const std::string& name) {
  static World world = init();
  static int groups = 0;
  const std::shared_ptr<Store> store(std::shared_ptr<Store>(), &world.store());  // not owned
  detail::BackendContext context;
  context.info = &world.info();
  context.timeout = kDefault;
  context.store = std::make_shared<PrefixStore>("group" + std::to_string(++groups), store);
  // As World::communicator() does: on several hosts, loopback reaches no one.
  context.address = detail::choose_interface(world.info(), process_environment()).address;
  return detail::create_communicator(context, name);
}

// Closes a group's communicators together, as separate processes would: a
// closing rank waits (briefly) for the others to be done.
void close_all(std::vector<std::unique_ptr<Communicator>>& group) {
  std::vector<std::thread> threads;
  for (std::unique_ptr<Communicator>& member : group)
    threads.emplace_back([&member] { member.reset(); });
  for (std::thread& thread : threads)
    thread.join();
  group.clear();
}

constexpr DataType kTypes[] = {DataType::f32, DataType::f64, DataType::f16, DataType::bf16,
                               DataType::i8,  DataType::u8,  DataType::i32, DataType::i64};
constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                             ReduceOp::avg};
constexpr std::size_t kCounts[] = {0, 1, 7, 1000};

// Relative tolerance of each floating type for results that are not exact
// (avg of integers): a few units in the last place.
double tolerance(DataType type) {
  switch (type) {
    case DataType::f32:
      return 1e-6;
    case DataType::f64:
      return 1e-12;
    case DataType::f16:
      return 2e-3;
    case DataType::bf16:
      return 1.6e-2;
    default:
      return 0;
  }
}

bool is_integer(DataType type) {
  return tolerance(type) == 0;
}

// Input element i of rank r: small integers, so sums and products stay exact
// in every type (f16 and i8 included) for up to 7 ranks.
double input_value(int rank, std::size_t i, ReduceOp op, DataType type) {
  if (op == ReduceOp::prod) return (rank + i) % 7 == 0 ? 2 : 1;
  const int base = static_cast<int>((rank * 7 + i * 3) % 9);
  return type == DataType::u8 ? base : base - 4;
}

// Slice `index` of `count` elements of `whole`.
Buffer slice(const Buffer& whole, std::size_t index, std::size_t count) {
  return {static_cast<unsigned char*>(whole.data) + index * count * size_of(whole.type), count,
          whole.type};
}

// Typed storage for one rank's buffer: its own, or `count` elements at `at`
// (memory from Communicator::allocate).
class Values {
 public:
  Values(DataType type, std::size_t count)
      : type_(type), count_(count), owned_(count * size_of(type)), bytes_(owned_.data()) {}
  Values(DataType type, std::size_t count, void* at)
      : type_(type), count_(count), bytes_(static_cast<unsigned char*>(at)) {}
  Buffer buffer() { return {bytes_, count_, type_}; }
  void set(std::size_t i, double value) {
    void* at = bytes_ + i * size_of(type_);
    switch (type_) {
      case DataType::f32:
        store(at, static_cast<float>(value));
        break;
      case DataType::f64:
        store(at, value);
        break;
      case DataType::f16:
        store(at, Half::from_float(static_cast<float>(value)));
        break;
      case DataType::bf16:
        store(at, BFloat16::from_float(static_cast<float>(value)));
        break;
      case DataType::i8:
        store(at, static_cast<std::int8_t>(value));
        break;
      case DataType::u8:
        store(at, static_cast<std::uint8_t>(value));
        break;
      case DataType::i32:
        store(at, static_cast<std::int32_t>(value));
        break;
      case DataType::i64:
        store(at, static_cast<std::int64_t>(value));
        break;
    }
  }
  double get(std::size_t i) const {
    const void* at = bytes_ + i * size_of(type_);
    switch (type_) {
      case DataType::f32:
        return load<float>(at);
      case DataType::f64:
        return load<double>(at);
      case DataType::f16:
        return load<Half>(at).to_float();
      case DataType::bf16:
        return load<BFloat16>(at).to_float();
      case DataType::i8:
        return load<std::int8_t>(at);
      case DataType::u8:
        return load<std::uint8_t>(at);
      case DataType::i32:
        return load<std::int32_t>(at);
      case DataType::i64:
        return static_cast<double>(load<std::int64_t>(at));
    }
    return 0;
  }

 private:
  template <class T>
  static void store(void* at, T value) {
    std::memcpy(at, &value, sizeof(T));
  }
  template <class T>
  static T load(const void* at) {
    T value;
    std::memcpy(&value, at, sizeof(T));
    return value;
  }
  DataType type_;
  std::size_t count_;
  std::vector<unsigned char> owned_;
  unsigned char* bytes_;
};

// The serial answer for element i of a reduction over `ranks` ranks.
double expected_reduction(ReduceOp op, DataType type, int ranks, std::size_t i) {
  double result = input_value(0, i, op, type);
  for (int r = 1; r < ranks; ++r) {
    const double v = input_value(r, i, op, type);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        result += v;
        break;
      case ReduceOp::prod:
        result *= v;
        break;
      case ReduceOp::min:
        result = std::min(result, v);
        break;
      case ReduceOp::max:
        result = std::max(result, v);
        break;
    }
  }
  if (op == ReduceOp::avg) result = is_integer(type) ? std::trunc(result / ranks) : result / ranks;
  return result;
}

void expect_value(DataType type, double got, double want, const std::string& where) {
  if (is_integer(type)) {
    EXPECT_EQ(got, want) << where;
  } else {
    EXPECT_LE(std::fabs(got - want), tolerance(type) * std::max(1.0, std::fabs(want))) << where;
  }
}

class Conformance : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override {
    const BackendUnderTest& backend = backend_under_test(std::get<0>(GetParam()));
    if (const std::string why = not_built_because(backend.name); !why.empty()) GTEST_SKIP() << why;
    const bool child = std::getenv(kChildVariable) != nullptr;
    if (child && (backend.launcher != nullptr || backend.only_from != nullptr)) {
      group_.push_back(process_rank(backend.name));
      ASSERT_EQ(group_.front()->size(), ranks()) << "the launcher started another number of ranks";
      return;
    }
    if (backend.launcher != nullptr) return run_under_launcher(backend);
    group_ = thread_group(backend.name, ranks(), backend.hosts);
    ASSERT_EQ(static_cast<int>(group_.size()), ranks());
  }
  void TearDown() override { close_all(group_); }
  int ranks() const { return std::get<1>(GetParam()); }

  // Runs `body(rank, communicator)` on one thread per rank, or on this
  // process's one rank; failures name the rank. Nothing here when the test
  // ran under a launcher (it passed or failed there).
  void on_every_rank(const std::function<void(int, Communicator&)>& body) {
    if (delegated_) return;
    std::vector<std::thread> threads;
    for (std::unique_ptr<Communicator>& member : group_) {
      threads.emplace_back([&] {
        const int rank = member->rank();
        try {
          body(rank, *member);
        } catch (const std::exception& error) {
          ADD_FAILURE() << "rank " << rank << ": " << error.what();
        }
      });
    }
    for (std::thread& thread : threads)
      thread.join();
  }

  std::vector<std::unique_ptr<Communicator>> group_;

 private:
  // This test, run by the backend's launcher on ranks() processes of this
  // binary; skipped when the launcher is missing.
  void run_under_launcher(const BackendUnderTest& backend) {
    std::vector<std::string> argv = backend.launcher(ranks());
    if (test::find_in_path(argv.front()).empty()) {
      GTEST_SKIP() << argv.front() << " is missing: the " << backend.name
                   << " backend's ranks cannot be started";
    }
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    argv.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
    argv.push_back(std::string("--gtest_filter=") + test->test_suite_name() + "." + test->name());
    test::ProcessOptions options;
    options.env = process_environment();
    options.env->insert_or_assign(kChildVariable, "1");
    options.timeout = 120s;
    const test::ProcessResult result = test::run_process(argv, options);
    EXPECT_EQ(result.exit_code, 0) << test::describe(result);
    delegated_ = true;
  }

  bool delegated_ = false;
};

TEST_P(Conformance, GroupKnowsItsRanks) {
  on_every_rank([&](int rank, Communicator& comm) {
    EXPECT_EQ(comm.rank(), rank);
    EXPECT_EQ(comm.size(), ranks());
    EXPECT_EQ(comm.backend(), backend_under_test(std::get<0>(GetParam())).name);
  });
}

TEST_P(Conformance, AllReduceEveryTypeOpAndCount) {
  for (DataType type : kTypes) {
    for (ReduceOp op : kOps) {
      for (std::size_t count : kCounts) {
        on_every_rank([&](int rank, Communicator& comm) {
          Values data(type, count);
          for (std::size_t i = 0; i < count; ++i)
            data.set(i, input_value(rank, i, op, type));
          comm.all_reduce(data.buffer(), op, kDefault);
          for (std::size_t i = 0; i < count; ++i) {
            expect_value(type, data.get(i), expected_reduction(op, type, ranks(), i),
                         std::string(to_string(type)) + " " + std::string(to_string(op)) +
                             " count " + std::to_string(count) + " element " + std::to_string(i));
          }
        });
      }
    }
  }
}

TEST_P(Conformance, ReduceLandsAtEveryRootForEveryOp) {
  for (DataType type : kTypes) {
    for (ReduceOp op : kOps) {
      for (int root = 0; root < ranks(); ++root) {
        on_every_rank([&](int rank, Communicator& comm) {
          Values data(type, 7);
          for (std::size_t i = 0; i < 7; ++i)
            data.set(i, input_value(rank, i, op, type));
          comm.reduce(data.buffer(), op, root, kDefault);
          for (std::size_t i = 0; i < 7; ++i) {
            const double want = rank == root ? expected_reduction(op, type, ranks(), i)
                                             : input_value(rank, i, op, type);
            expect_value(type, data.get(i), want,
                         std::string(to_string(type)) + " " + std::string(to_string(op)) +
                             " root " + std::to_string(root));
          }
        });
      }
    }
  }
}

TEST_P(Conformance, BroadcastFromEveryRoot) {
  for (DataType type : kTypes) {
    for (int root = 0; root < ranks(); ++root) {
      on_every_rank([&](int rank, Communicator& comm) {
        Values data(type, 1000);
        for (std::size_t i = 0; i < 1000; ++i)
          data.set(i, input_value(rank, i, ReduceOp::sum, type));
        comm.broadcast(data.buffer(), root, kDefault);
        for (std::size_t i = 0; i < 1000; i += 97) {
          expect_value(type, data.get(i), input_value(root, i, ReduceOp::sum, type), "broadcast");
        }
      });
    }
  }
}

// Broadcasts one after another from root after root, of one element to
// more than shm's posts take (then its rounds), one rank late now and then
// and an all_reduce between some: a root that goes on before the others
// have what it sent must never overwrite what a late rank has yet to read.
// In the first 48 turns (their messages fill shm's 32 posts three times,
// those of 36 and 64 KB three and four entries each) nothing waits for
// every rank and the last rank, which sleeps in the second, is no root.
TEST_P(Conformance, BroadcastsBackToBackWhileARankLags) {
  constexpr std::size_t kPosted[] = {1, 1000, 4000, 9000, 16000};  // floats: up to 64 KiB
  constexpr std::size_t kAny[] = {1, 1000, 40000, 70000};
  const auto value = [](int root, int turn, std::size_t i) {
    return static_cast<double>((root * 7 + turn * 5 + static_cast<int>(i % 11) * 3) % 9) - 4;
  };
  on_every_rank([&](int rank, Communicator& comm) {
    const int n = comm.size();
    for (int turn = 0; turn < 72; ++turn) {
      const bool first = turn < 48;
      const int root = first && n > 1 ? turn % (n - 1) : turn % n;
      const auto at = static_cast<std::size_t>(turn);
      const std::size_t count =
          first ? kPosted[at % std::size(kPosted)] : kAny[at % std::size(kAny)];
      if (rank == n - 1 && (turn == 1 || turn % 9 == 4))
        std::this_thread::sleep_for(turn == 1 ? 20ms : 2ms);
      Values data(DataType::f32, count);
      for (std::size_t i = 0; i < count; ++i)
        data.set(i, rank == root ? value(root, turn, i) : 99);
      comm.broadcast(data.buffer(), root, kDefault);
      for (std::size_t i = 0; i < count; i += 1 + count / 50)
        ASSERT_EQ(data.get(i), value(root, turn, i)) << "turn " << turn << ", element " << i;
      if (!first && turn % 7 == 6) {
        Values one(DataType::f32, 1);
        one.set(0, 1);
        comm.all_reduce(one.buffer(), ReduceOp::sum, kDefault);
        ASSERT_EQ(one.get(0), n) << "turn " << turn;
      }
    }
  });
}

TEST_P(Conformance, GatherFamilies) {
  for (DataType type : kTypes) {
    for (std::size_t count : kCounts) {
      on_every_rank([&](int rank, Communicator& comm) {
        const std::size_t n = static_cast<std::size_t>(ranks());
        Values input(type, count);
        for (std::size_t i = 0; i < count; ++i)
          input.set(i, input_value(rank, i, ReduceOp::sum, type));
        Values gathered(type, count * n);
        comm.all_gather(input.buffer(), gathered.buffer(), kDefault);
        for (std::size_t r = 0; r < n; ++r) {
          for (std::size_t i = 0; i < count; ++i) {
            expect_value(type, gathered.get(r * count + i),
                         input_value(static_cast<int>(r), i, ReduceOp::sum, type), "all_gather");
          }
        }
        Values at_root(type, count * n);
        comm.gather(input.buffer(), at_root.buffer(), 0, kDefault);
        if (rank == 0) {
          for (std::size_t i = 0; i < count * n; ++i) {
            expect_value(type, at_root.get(i), gathered.get(i), "gather");
          }
        }
        // scatter and all_to_all: rank r's slice s carries value (s, r, i).
        Values slices(type, count * n);
        for (std::size_t s = 0; s < n; ++s) {
          for (std::size_t i = 0; i < count; ++i) {
            slices.set(s * count + i,
                       input_value(static_cast<int>(s) + rank, i, ReduceOp::sum, type));
          }
        }
        Values mine(type, count);
        comm.scatter(slices.buffer(), mine.buffer(), 0, kDefault);
        for (std::size_t i = 0; i < count; ++i) {
          expect_value(type, mine.get(i), input_value(rank, i, ReduceOp::sum, type), "scatter");
        }
        Values exchanged(type, count * n);
        comm.all_to_all(slices.buffer(), exchanged.buffer(), kDefault);
        for (std::size_t s = 0; s < n; ++s) {
          for (std::size_t i = 0; i < count; ++i) {
            expect_value(type, exchanged.get(s * count + i),
                         input_value(static_cast<int>(s) + rank, i, ReduceOp::sum, type),
                         "all_to_all");
          }
        }
      });
    }
  }
}

// gather and scatter at every root: a root that is not the first of its
// host (hier) takes another path than rank 0; blocks of 5 elements and of
// 512 KiB (hier's over its flat group of every rank, from 512 KiB).
TEST_P(Conformance, GatherAndScatterAtEveryRoot) {
  // Element i of the block that rank `from` holds for rank `to` at `root`.
  const auto value = [](int root, int from, int to, std::size_t i) {
    return static_cast<double>(root * 1000 + from * 100 + to * 10) + static_cast<double>(i);
  };
  // Counts for each of hier's ways: its leaders' sync ring (5), the
  // leaders' way on three hosts, past what a leader sends round the ring in
  // pieces (1024: 8 KiB blocks), a flat group (65536: 512 KiB blocks).
  for (int root = 0; root < ranks(); ++root) {
    for (std::size_t count : {std::size_t{5}, std::size_t{1024}, std::size_t{65536}}) {
      on_every_rank([&](int rank, Communicator& comm) {
        const std::size_t n = static_cast<std::size_t>(ranks());
        Values input(DataType::i64, count), at_root(DataType::i64, count * n);
        Values slices(DataType::i64, count * n), mine(DataType::i64, count);
        for (std::size_t i = 0; i < count; ++i)
          input.set(i, value(root, rank, root, i));
        for (std::size_t s = 0; s < n * count; ++s)
          slices.set(s, value(root, rank, static_cast<int>(s / count), s % count));
        comm.gather(input.buffer(), at_root.buffer(), root, kDefault);
        comm.scatter(slices.buffer(), mine.buffer(), root, kDefault);
        const std::string where = " at root " + std::to_string(root);
        for (std::size_t i = 0; i < count; ++i)
          expect_value(DataType::i64, mine.get(i), value(root, root, rank, i), "scatter" + where);
        if (rank != root) return;
        for (std::size_t s = 0; s < n * count; ++s) {
          expect_value(DataType::i64, at_root.get(s),
                       value(root, static_cast<int>(s / count), root, s % count), "gather" + where);
        }
      });
    }
  }
}

// Collectives that move data move it bit for bit, also where a backend
// moves it as a sum with zeros (gloo's small rings, hier's leaders): a
// float sum would turn -0 into +0 and may quiet a NaN.
TEST_P(Conformance, MovedValuesKeepEveryBit) {
  const std::uint32_t kBits[] = {0x80000000u,   // -0
                                 0x7fa00001u,   // a signalling NaN with a payload
                                 0xffc12345u,   // a negative quiet NaN with a payload
                                 0x00000001u,   // the smallest subnormal
                                 0xff800000u};  // -inf
  constexpr std::size_t kCount = std::size(kBits);
  const auto bits = [&](int rank, std::size_t i) {
    return kBits[i] ^ (static_cast<std::uint32_t>(rank) << 16 & 0x000f0000u);
  };
  on_every_rank([&](int rank, Communicator& comm) {
    const std::size_t n = static_cast<std::size_t>(ranks());
    std::vector<std::uint32_t> input(kCount), gathered(kCount * n), mine(kCount);
    for (std::size_t i = 0; i < kCount; ++i)
      input[i] = bits(rank, i);
    comm.all_gather({input.data(), kCount, DataType::f32},
                    {gathered.data(), kCount * n, DataType::f32}, kDefault);
    for (std::size_t s = 0; s < kCount * n; ++s)
      EXPECT_EQ(gathered[s], bits(static_cast<int>(s / kCount), s % kCount)) << "all_gather " << s;
    std::vector<std::uint32_t> shared = input;
    comm.broadcast({shared.data(), kCount, DataType::f32}, 0, kDefault);
    for (std::size_t i = 0; i < kCount; ++i)
      EXPECT_EQ(shared[i], bits(0, i)) << "broadcast " << i;
    comm.scatter({gathered.data(), kCount * n, DataType::f32}, {mine.data(), kCount, DataType::f32},
                 0, kDefault);
    EXPECT_EQ(mine, input) << "scatter";
  });
}

TEST_P(Conformance, ReduceScatterReducesEachSliceForEveryOp) {
  for (DataType type : kTypes) {
    for (ReduceOp op : kOps) {
      on_every_rank([&](int rank, Communicator& comm) {
        const std::size_t n = static_cast<std::size_t>(ranks()), count = 7;
        Values input(type, count * n);
        for (std::size_t i = 0; i < count * n; ++i)
          input.set(i, input_value(rank, i, op, type));
        Values output(type, count);
        comm.reduce_scatter(input.buffer(), output.buffer(), op, kDefault);
        for (std::size_t i = 0; i < count; ++i) {
          expect_value(type, output.get(i), expected_reduction(op, type, ranks(), rank * count + i),
                       std::string(to_string(type)) + " " + std::string(to_string(op)));
        }
      });
    }
  }
}

TEST_P(Conformance, AllReduceTakesEveryPathBySizeAndTimeout) {
  // Sizes on both sides of each of the gloo backend's thresholds (32 KiB:
  // whole on the sync ring; past it in pieces of 32 KiB while a rank sends
  // (ranks - 1) × the message ≤ 384 KiB, the last piece short (4 ranks:
  // 128 KiB in pieces, 4 bytes more on the loop pairs); else the ring on
  // loop pairs up to 1 MiB; above: new-style), by default and by another
  // timeout.
  const std::size_t counts[] = {8 * 1024,  8 * 1024 + 1,  16 * 1024,  16 * 1024 + 1,
                                32 * 1024, 32 * 1024 + 1, 256 * 1024, 256 * 1024 + 3};
  for (std::chrono::milliseconds timeout : {kDefault, kOther}) {
    for (std::size_t count : counts) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
        on_every_rank([&](int rank, Communicator& comm) {
          Values data(DataType::f32, count);
          for (std::size_t i = 0; i < count; ++i)
            data.set(i, input_value(rank, i, op, DataType::f32));
          comm.all_reduce(data.buffer(), op, timeout);
          for (std::size_t i = 0; i < count; i += 1 + count / 97) {
            expect_value(DataType::f32, data.get(i),
                         expected_reduction(op, DataType::f32, ranks(), i),
                         "count " + std::to_string(count) + " element " + std::to_string(i));
          }
          expect_value(DataType::f32, data.get(count - 1),
                       expected_reduction(op, DataType::f32, ranks(), count - 1), "last element");
        });
      }
    }
  }
}

// shm's single copies lend every rank's buffer to its peers, who read it and
// write their reduced slices into it until the call's last round. Rank 0
// gives up (a deadline of 1 ms) in the first round, which it has arrived at,
// while the last rank is still on its way: once rank 0's call has thrown,
// its buffer is its own again, however far the others get; they fail
// instead of copying into or out of it.
// Instantiated below from 2 ranks (one lends its buffer to nobody) for the
// backends whose peers, or whose threads, write into a rank's buffer: shm's
// single copies and shared memory, gloo's pairs (they receive into the
// buffer a rank registered), hier (both), and mpi with watched calls (the
// only ones that time out; MPI cannot cancel a collective, and may go on
// with it in any later MPI call of the rank). The others' deadline is 2 s,
// so that a backend whose peers learn of rank 0's leaving only from their
// own deadline (hier's leaders, mpi) ends soon; their calls may end either
// way (MPI's may finish: rank 0 had sent its part). Then every rank meets
// once more on another communicator, made before (the later call in which
// MPI would go on with the first), and rank 0 looks 800 ms after that.
class LentBuffers : public Conformance {};

TEST_P(LentBuffers, ARankThatGivesUpOnAnAllReduceHasItsBufferLeftAlone) {
  constexpr std::size_t kCount = std::size_t{16} << 20;  // 64 MiB of f32
  on_every_rank([&](int rank, Communicator& comm) {
    std::vector<float> data(kCount, 1.0F);
    const Buffer buffer{data.data(), kCount, DataType::f32};
    const std::unique_ptr<Communicator> after = comm.split(0, rank);
    comm.barrier(kDefault);
    if (rank != 0) {
      if (rank == ranks() - 1) std::this_thread::sleep_for(200ms);
      try {
        comm.all_reduce(buffer, ReduceOp::sum, 2s);  // MPI's may end: rank 0 sent its part
      } catch (const Error&) {
      }
      after->barrier(kDefault);
      return;
    }
    EXPECT_THROW(comm.all_reduce(buffer, ReduceOp::sum, 1ms), Timeout);
    std::fill(data.begin(), data.end(), -7.0F);
    after->barrier(kDefault);
    std::this_thread::sleep_for(800ms);  // the others' copies, were any left
    const auto written =
        std::count_if(data.begin(), data.end(), [](float v) { return v != -7.0F; });
    EXPECT_EQ(written, 0) << "elements of rank 0's buffer written after its all_reduce threw";
  });
}

// The same for the other collectives, each on a communicator of its own
// (one that gave up is unusable after): rank 0 gives up on each while the
// last rank, whose data it waits for (the root where there is one, else
// one of many), is 200 ms late, and its output must be left alone. (shm's
// peers only read a rank's input in these, and its own thread writes its
// output: there the test checks that this stays so.) The others give up
// after 500 ms, the late rank's data sent by then.
class LentOutputs : public Conformance {};

TEST_P(LentOutputs, EveryCollectiveThatGivesUpLeavesTheCallersOutputAlone) {
  constexpr std::size_t kBlock = std::size_t{2} << 20;  // 8 MiB of f32: a rank's block
  using Calls = std::function<void(Communicator&, Buffer, Buffer, int, Communicator::Duration)>;
  const std::vector<std::pair<std::string, Calls>> collectives = {
      {"broadcast",
       [](Communicator& c, Buffer, Buffer out, int late, Communicator::Duration t) {
         c.broadcast({out.data, kBlock, out.type}, late, t);
       }},
      {"reduce",
       [](Communicator& c, Buffer, Buffer out, int, Communicator::Duration t) {
         c.reduce({out.data, kBlock, out.type}, ReduceOp::sum, 0, t);
       }},
      {"all_gather",
       [](Communicator& c, Buffer in, Buffer out, int, Communicator::Duration t) {
         c.all_gather({in.data, kBlock, in.type}, out, t);
       }},
      {"gather",
       [](Communicator& c, Buffer in, Buffer out, int, Communicator::Duration t) {
         c.gather({in.data, kBlock, in.type}, out, 0, t);
       }},
      {"scatter",
       [](Communicator& c, Buffer in, Buffer out, int late, Communicator::Duration t) {
         c.scatter(in, {out.data, kBlock, out.type}, late, t);
       }},
      {"reduce_scatter",
       [](Communicator& c, Buffer in, Buffer out, int, Communicator::Duration t) {
         c.reduce_scatter(in, {out.data, kBlock, out.type}, ReduceOp::sum, t);
       }},
      {"all_to_all", [](Communicator& c, Buffer in, Buffer out, int,
                        Communicator::Duration t) { c.all_to_all(in, out, t); }},
  };
  on_every_rank([&](int rank, Communicator& comm) {
    const int late = ranks() - 1;
    const std::size_t count = kBlock * static_cast<std::size_t>(ranks());
    std::vector<float> input(count, 1.0F);
    std::vector<float> output(count, 1.0F);
    const Buffer in{input.data(), count, DataType::f32};
    const Buffer out{output.data(), count, DataType::f32};
    std::vector<std::unique_ptr<Communicator>> each;
    for (std::size_t i = 0; i < collectives.size(); ++i)
      each.push_back(comm.split(0, rank));
    const std::unique_ptr<Communicator> after = comm.split(0, rank);
    for (std::size_t i = 0; i < collectives.size(); ++i) {
      const auto& [name, run] = collectives[i];
      Communicator& on = *each[i];
      on.barrier(kDefault);
      if (rank != 0) {
        if (rank == late) std::this_thread::sleep_for(200ms);
        try {
          run(on, in, out, late, 500ms);
        } catch (const Error&) {
        }
      } else {
        EXPECT_THROW(run(on, in, out, late, 1ms), Timeout) << name;
        std::fill(output.begin(), output.end(), -7.0F);
      }
      after->barrier(kDefault);
      if (rank != 0) continue;
      std::this_thread::sleep_for(200ms);  // the others' copies, were any left
      const auto written =
          std::count_if(output.begin(), output.end(), [](float v) { return v != -7.0F; });
      EXPECT_EQ(written, 0) << "elements of rank 0's output written after its " << name << " threw";
    }
  });
}

// Messages larger than a backend's staging buffers (the shm backend's
// slots are 1 MiB at most): every collective in several chunks, with a count
// that divides evenly into neither chunks nor ranks, and in place; with
// every buffer in the rank's own memory, or each from Communicator::allocate
// (which shm reads in place in the peers' memory).
void every_collective_in_several_chunks(int rank, int ranks, Communicator& comm, bool allocated) {
  constexpr std::size_t kCount = 300 * 1024 + 5;  // 1.2 MiB of i32 per slice
  const DataType type = DataType::i32;
  const std::size_t n = static_cast<std::size_t>(ranks);
  const auto value = [](std::size_t slice, int from, std::size_t i) {
    return static_cast<double>((slice * 131 + static_cast<std::size_t>(from) * 17 + i) % 1000);
  };
  std::vector<std::shared_ptr<void>> memory;
  const auto make = [&](std::size_t count) {
    if (!allocated) return Values(type, count);
    memory.push_back(comm.allocate(count * size_of(type), kDefault));
    return Values(type, count, memory.back().get());
  };
  Values data = make(kCount);
  for (std::size_t i = 0; i < kCount; ++i)
    data.set(i, value(0, rank, i));
  comm.all_reduce(data.buffer(), ReduceOp::sum, kDefault);
  for (std::size_t i = 0; i < kCount; ++i) {  // every element: the chunks' and blocks' edges
    double want = 0;
    for (int r = 0; r < ranks; ++r)
      want += value(0, r, i);
    expect_value(type, data.get(i), want, "all_reduce element " + std::to_string(i));
  }
  // reduce: the sum at the root, every other rank's data as it was.
  for (std::size_t i = 0; i < kCount; ++i)
    data.set(i, value(2, rank, i));
  comm.reduce(data.buffer(), ReduceOp::sum, ranks - 1, kDefault);
  for (std::size_t i = 0; i < kCount; ++i) {
    double want = value(2, rank, i);
    if (rank == ranks - 1) {
      want = 0;
      for (int r = 0; r < ranks; ++r)
        want += value(2, r, i);
    }
    expect_value(type, data.get(i), want, "reduce element " + std::to_string(i));
  }
  for (std::size_t i = 0; i < kCount; ++i)
    data.set(i, value(0, rank, i));
  comm.broadcast(data.buffer(), ranks - 1, kDefault);
  for (std::size_t i = 0; i < kCount; i += 997)
    expect_value(type, data.get(i), value(0, ranks - 1, i), "broadcast");
  // In place: each rank's input is its slice of the output.
  Values gathered = make(kCount * n);
  for (std::size_t i = 0; i < kCount; ++i)
    gathered.set(static_cast<std::size_t>(rank) * kCount + i, value(0, rank, i));
  comm.all_gather(slice(gathered.buffer(), static_cast<std::size_t>(rank), kCount),
                  gathered.buffer(), kDefault);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < kCount; i += 997)
      expect_value(type, gathered.get(r * kCount + i), value(0, static_cast<int>(r), i),
                   "all_gather");
  }
  Values slices = make(kCount * n);
  for (std::size_t s = 0; s < n; ++s) {
    for (std::size_t i = 0; i < kCount; ++i)
      slices.set(s * kCount + i, value(s, rank, i));
  }
  Values mine = make(kCount);
  comm.reduce_scatter(slices.buffer(), mine.buffer(), ReduceOp::max, kDefault);
  for (std::size_t i = 0; i < kCount; i += 997) {
    double want = 0;
    for (int r = 0; r < ranks; ++r)
      want = std::max(want, value(static_cast<std::size_t>(rank), r, i));
    expect_value(type, mine.get(i), want, "reduce_scatter");
  }
  Values exchanged = make(kCount * n);
  comm.all_to_all(slices.buffer(), exchanged.buffer(), kDefault);
  for (std::size_t s = 0; s < n; ++s) {
    for (std::size_t i = 0; i < kCount; i += 997)
      expect_value(type, exchanged.get(s * kCount + i),
                   value(static_cast<std::size_t>(rank), static_cast<int>(s), i), "all_to_all");
  }
  comm.scatter(slices.buffer(), mine.buffer(), 0, kDefault);
  for (std::size_t i = 0; i < kCount; i += 997)
    expect_value(type, mine.get(i), value(static_cast<std::size_t>(rank), 0, i), "scatter");
  comm.gather(mine.buffer(), exchanged.buffer(), 0, kDefault);
  if (rank == 0) {
    for (std::size_t s = 0; s < n; ++s) {
      for (std::size_t i = 0; i < kCount; i += 997)
        expect_value(type, exchanged.get(s * kCount + i), value(s, 0, i), "gather");
    }
  }
  // Point to point in several pieces: a ring, even ranks sending first.
  if (ranks > 1) {
    const int next = (rank + 1) % ranks, previous = (rank + ranks - 1) % ranks;
    for (std::size_t i = 0; i < kCount; ++i)
      data.set(i, value(1, rank, i));
    Values received = make(kCount);
    if (rank % 2 == 0) {
      comm.send(data.buffer(), next, 5, kDefault);
      comm.recv(received.buffer(), previous, 5, kDefault);
    } else {
      comm.recv(received.buffer(), previous, 5, kDefault);
      comm.send(data.buffer(), next, 5, kDefault);
    }
    for (std::size_t i = 0; i < kCount; i += 997)
      expect_value(type, received.get(i), value(1, previous, i), "recv");
  }
}

TEST_P(Conformance, EveryCollectiveInSeveralChunks) {
  on_every_rank([&](int rank, Communicator& comm) {
    every_collective_in_several_chunks(rank, ranks(), comm, false);
  });
}

TEST_P(Conformance, EveryCollectiveInSeveralChunksOnAllocatedMemory) {
  on_every_rank([&](int rank, Communicator& comm) {
    every_collective_in_several_chunks(rank, ranks(), comm, true);
  });
}

// Memory from allocate(): zero-filled and aligned; an all_reduce on it is
// right for every type and op, at another offset on each rank (shm reduces
// such buffers in place, in the peers' memory), async too; and where the
// ranks' buffers are not all in one allocation (a rank's in another one, or
// in its own memory), the result is the same.
TEST_P(Conformance, AllReduceOnAllocatedMemory) {
  const std::size_t counts[] = {1, 7, 1000, 300 * 1024 + 5};
  for (DataType type : kTypes) {
    for (ReduceOp op : kOps) {
      for (std::size_t count : counts) {
        if (count > 1000 && type != DataType::f32 && type != DataType::bf16) continue;
        on_every_rank([&](int rank, Communicator& comm) {
          const std::size_t element = size_of(type);
          const std::size_t offset = static_cast<std::size_t>(rank % 3) * element;
          const std::size_t bytes = (count + 2) * element;
          std::shared_ptr<void> memory = comm.allocate(bytes, kDefault);
          ASSERT_NE(memory, nullptr);
          EXPECT_EQ(reinterpret_cast<std::uintptr_t>(memory.get()) % 64, 0u);
          const auto* raw = static_cast<const unsigned char*>(memory.get());
          EXPECT_EQ(std::count(raw, raw + bytes, 0), static_cast<std::ptrdiff_t>(bytes))
              << "allocate's memory is zero-filled";
          Values data(type, count, static_cast<unsigned char*>(memory.get()) + offset);
          for (std::size_t i = 0; i < count; ++i)
            data.set(i, input_value(rank, i, op, type));
          if (count == 7) {
            comm.all_reduce_async(data.buffer(), op, kDefault).wait();
          } else {
            comm.all_reduce(data.buffer(), op, kDefault);
          }
          const std::string what = std::string(to_string(type)) + " " + std::string(to_string(op)) +
                                   " count " + std::to_string(count);
          for (std::size_t i = 0; i < count; i += 1 + count / 211) {
            expect_value(type, data.get(i), expected_reduction(op, type, ranks(), i),
                         what + " element " + std::to_string(i));
          }
          expect_value(type, data.get(count - 1), expected_reduction(op, type, ranks(), count - 1),
                       what + " last element");
        });
      }
    }
  }
  constexpr std::size_t kCount = 100 * 1024 + 3;
  on_every_rank([&](int rank, Communicator& comm) {
    std::shared_ptr<void> first = comm.allocate(kCount * 4, kDefault);
    std::shared_ptr<void> second = comm.allocate(kCount * 4, kDefault);
    for (int layout = 0; layout < 2; ++layout) {
      // 0: rank 0 in the first allocation, the others in the second;
      // 1: the last rank in its own memory.
      Values own(DataType::i32, kCount);
      void* at = layout == 0           ? (rank == 0 ? first.get() : second.get())
                 : rank == ranks() - 1 ? own.buffer().data
                                       : first.get();
      Values data(DataType::i32, kCount, at);
      for (std::size_t i = 0; i < kCount; ++i)
        data.set(i, input_value(rank, i, ReduceOp::sum, DataType::i32));
      comm.all_reduce(data.buffer(), ReduceOp::sum, kDefault);
      for (std::size_t i = 0; i < kCount; i += 997) {
        expect_value(DataType::i32, data.get(i),
                     expected_reduction(ReduceOp::sum, DataType::i32, ranks(), i),
                     "layout " + std::to_string(layout) + " element " + std::to_string(i));
      }
    }
  });
}

TEST_P(Conformance, AsyncOperationsRunInCallOrder) {
  on_every_rank([&](int rank, Communicator& comm) {
    // Queued: three all_reduces, a broadcast; then a blocking barrier, which
    // runs after them; then the Works report their results.
    std::vector<Values> buffers;
    for (int k = 0; k < 3; ++k) {
      buffers.emplace_back(DataType::i32, 5);
      for (std::size_t i = 0; i < 5; ++i)
        buffers.back().set(i, rank + k * 100);
    }
    Values shared(DataType::i64, 3);
    for (std::size_t i = 0; i < 3; ++i)
      shared.set(i, rank == ranks() - 1 ? 42 : 0);
    std::vector<Work> works;
    for (Values& values : buffers)
      works.push_back(comm.all_reduce_async(values.buffer(), ReduceOp::sum));
    works.push_back(comm.broadcast_async(shared.buffer(), ranks() - 1));
    comm.barrier();
    for (Work& work : works) {
      EXPECT_TRUE(work.completed());  // the barrier waited for the queue
      work.wait();
    }
    const int rank_sum = ranks() * (ranks() - 1) / 2;
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(buffers[static_cast<std::size_t>(k)].get(4), rank_sum + k * 100 * ranks());
    }
    EXPECT_EQ(shared.get(2), 42);
    // A queued operation's error reaches its Work: a receive from oneself
    // with nothing sent times out at once.
    Values nothing(DataType::u8, 1);
    Work lonely = comm.recv_async(nothing.buffer(), rank, 99, 50ms);
    EXPECT_THROW(lonely.wait(), Timeout);
    EXPECT_THROW(lonely.wait(), Timeout);  // every time
    // Arguments are checked at the call, not later.
    EXPECT_THROW(comm.broadcast_async(shared.buffer(), ranks()), InvalidArgument);
    EXPECT_TRUE(Work().completed());
  });
}

// Small slices, and large ones that take the backends' paths for large
// messages (hier's all_gather in place from 64 KiB, on rails from 1 MiB).
TEST_P(Conformance, InPlaceSlicesAreAllowedAndOtherOverlapsRejected) {
  for (auto [type, count] :
       {std::pair{DataType::f32, std::size_t{5}}, std::pair{DataType::i8, std::size_t{5}},
        std::pair{DataType::f32, std::size_t{100000}}}) {
    on_every_rank([&](int rank, Communicator& comm) {
      const std::size_t n = static_cast<std::size_t>(ranks());
      const std::size_t me = static_cast<std::size_t>(rank);
      // all_gather: this rank's contribution already sits in its slice.
      Values gathered(type, count * n);
      for (std::size_t i = 0; i < count; ++i)
        gathered.set(me * count + i, input_value(rank, i, ReduceOp::sum, type));
      comm.all_gather(slice(gathered.buffer(), me, count), gathered.buffer());
      for (std::size_t i = 0; i < count * n; ++i) {
        expect_value(type, gathered.get(i),
                     input_value(static_cast<int>(i / count), i % count, ReduceOp::sum, type),
                     "all_gather in place");
      }
      // gather at root 0, in place there.
      Values at_root(type, count * n);
      for (std::size_t i = 0; i < count; ++i)
        at_root.set(me * count + i, input_value(rank, i, ReduceOp::sum, type));
      comm.gather(slice(at_root.buffer(), me, count), at_root.buffer(), 0);
      if (rank == 0) {
        for (std::size_t i = 0; i < count * n; ++i)
          expect_value(type, at_root.get(i), gathered.get(i), "gather in place");
      }
      // scatter from root 0: the root's own slice stays where it is.
      Values slices(type, count * n);
      for (std::size_t i = 0; i < count * n; ++i)
        slices.set(i, input_value(static_cast<int>(i / count), i % count, ReduceOp::sum, type));
      comm.scatter(slices.buffer(), slice(slices.buffer(), me, count), 0);
      for (std::size_t i = 0; i < count; ++i) {
        expect_value(type, slices.get(me * count + i), input_value(rank, i, ReduceOp::sum, type),
                     "scatter in place");
      }
      // reduce_scatter: the output is this rank's slice of the input.
      Values sums(type, count * n);
      for (std::size_t i = 0; i < count * n; ++i)
        sums.set(i, input_value(rank, i, ReduceOp::sum, type));
      comm.reduce_scatter(sums.buffer(), slice(sums.buffer(), me, count), ReduceOp::sum);
      for (std::size_t i = 0; i < count; ++i) {
        expect_value(type, sums.get(me * count + i),
                     expected_reduction(ReduceOp::sum, type, ranks(), me * count + i),
                     "reduce_scatter in place");
      }
      // all_to_all: the same buffer in and out.
      Values exchanged(type, count * n);
      for (std::size_t i = 0; i < count * n; ++i)
        exchanged.set(
            i, input_value(static_cast<int>(i / count) + rank, i % count, ReduceOp::sum, type));
      comm.all_to_all(exchanged.buffer(), exchanged.buffer());
      for (std::size_t i = 0; i < count * n; ++i) {
        expect_value(
            type, exchanged.get(i),
            input_value(static_cast<int>(i / count) + rank, i % count, ReduceOp::sum, type),
            "all_to_all in place");
      }
      // Overlaps that are not the slice: refused before anything moves.
      Values big(type, count * n + 1);
      const Buffer shifted{static_cast<unsigned char*>(big.buffer().data) + size_of(type),
                           count * n, type};
      EXPECT_THROW(comm.all_gather(slice(big.buffer(), me, count), shifted), InvalidArgument);
      EXPECT_THROW(comm.all_to_all(slice(big.buffer(), 0, count * n), shifted), InvalidArgument);
      EXPECT_THROW(comm.reduce_scatter(shifted, slice(big.buffer(), me, count), ReduceOp::sum),
                   InvalidArgument);
    });
  }
}

TEST_P(Conformance, SendAndReceive) {
  on_every_rank([&](int rank, Communicator& comm) {
    // A ring: send to the next rank, receive from the previous (to oneself in a group of one).
    const int next = (rank + 1) % ranks(), previous = (rank + ranks() - 1) % ranks();
    std::vector<std::int64_t> token{rank * 100 + 7}, received{0};
    // A send may wait for its matching recv: even ranks send first, odd ranks
    // receive first, so the ring never waits in a circle.
    if (rank % 2 == 0) {
      comm.send(Buffer::of(std::span(token)), next, 3, kDefault);
      comm.recv(Buffer::of(std::span(received)), previous, 3, kDefault);
    } else {
      comm.recv(Buffer::of(std::span(received)), previous, 3, kDefault);
      comm.send(Buffer::of(std::span(token)), next, 3, kDefault);
    }
    EXPECT_EQ(received[0], previous * 100 + 7);
  });
}

// A recv's buffer must be the size of the message sent. One that is not is
// a misuse, said at once (InvalidArgument naming the buffer's size) rather
// than by a hang, a crash or a broken group, and the message is taken: the
// next ones between the two ranks arrive as sent. Instantiated below for
// every backend that sends messages: shm (its messages say their size), mpi
// (MPI's status and MPI_ERR_TRUNCATE), gloo (each message says its size
// first: gloo/sized_messages.hpp) and hier, between ranks of one host (shm)
// and of two (a gloo pair).
class MessageSizes : public Conformance {};

TEST_P(MessageSizes, ARecvWhoseBufferIsNotTheMessagesSizeIsAnErrorAndTheRanksGoOn) {
  on_every_rank([&](int rank, Communicator& comm) {
    if (rank == 0) {
      std::vector<std::int32_t> four{1, 2, 3, 4}, twelve(12, 5), last{6, 7, 8, 9};
      comm.send(Buffer::of(std::span(four)), 1, 5, kDefault);
      comm.send(Buffer::of(std::span(twelve)), 1, 6, kDefault);
      comm.send(Buffer::of(std::span(last)), 1, 7, kDefault);
    } else if (rank == 1) {
      std::vector<std::int32_t> eight(8, -1);
      const auto says_its_size = [](const std::function<void()>& recv) {
        try {
          recv();
          ADD_FAILURE() << "a recv into 32 bytes took a message of another size";
        } catch (const InvalidArgument& error) {
          const std::string said = error.what();
          EXPECT_NE(said.find("the buffer"), std::string::npos) << said;
          EXPECT_NE(said.find("32"), std::string::npos) << said;
        }
      };
      says_its_size([&] { comm.recv(Buffer::of(std::span(eight)), 0, 5, kDefault); });  // shorter
      says_its_size([&] { comm.recv(Buffer::of(std::span(eight)), 0, 6, kDefault); });  // longer
      std::vector<std::int32_t> four(4, -1);
      comm.recv(Buffer::of(std::span(four)), 0, 7, kDefault);
      EXPECT_EQ(four, (std::vector<std::int32_t>{6, 7, 8, 9}));
    }
    std::vector<std::int32_t> one{1};
    comm.all_reduce(Buffer::of(std::span(one)), ReduceOp::sum, kDefault);
    EXPECT_EQ(one[0], ranks());
  });
}

// The same with messages of 64 and 128 KiB, which shm's peers read straight
// from the sender's memory (Group::send, from 32 KiB where single copies
// work), and which Open MPI's vader copies in one (until 2026-12-07 the mpi
// backend received the longer one into the shorter buffer, and Open MPI
// wrote past its end: the test's rank 1 crashed, its heap corrupted); then
// of 1 and 2 MiB, which gloo sends in a first piece and a rest; then of
// 64 KiB and 1 MiB, on either side of gloo's first piece.
TEST_P(MessageSizes, ALargeMessageOfTheWrongSizeIsAnErrorToo) {
  constexpr std::size_t kKi = 1024;  // i32s: 4 KiB
  for (const auto& [shorter, longer] :
       {std::pair{16 * kKi, 32 * kKi}, std::pair{256 * kKi, 512 * kKi},
        std::pair{16 * kKi, 256 * kKi}}) {
    SCOPED_TRACE(testing::Message()
                 << "messages of " << shorter * 4 << " and " << longer * 4 << " bytes");
    on_every_rank([&](int rank, Communicator& comm) {
      if (rank == 0) {
        std::vector<std::int32_t> long_one(longer, 5), short_one(shorter, 6), last(shorter);
        std::iota(last.begin(), last.end(), 0);
        comm.send(Buffer::of(std::span(long_one)), 1, 5, kDefault);
        comm.send(Buffer::of(std::span(short_one)), 1, 6, kDefault);
        comm.send(Buffer::of(std::span(last)), 1, 7, kDefault);
      } else if (rank == 1) {
        std::vector<std::int32_t> short_one(shorter, -1), long_one(longer, -1);
        EXPECT_THROW(comm.recv(Buffer::of(std::span(short_one)), 0, 5, kDefault), InvalidArgument);
        EXPECT_THROW(comm.recv(Buffer::of(std::span(long_one)), 0, 6, kDefault), InvalidArgument);
        comm.recv(Buffer::of(std::span(short_one)), 0, 7, kDefault);
        std::vector<std::int32_t> want(shorter);
        std::iota(want.begin(), want.end(), 0);
        EXPECT_EQ(short_one, want);
      }
      std::vector<std::int32_t> one{1};
      comm.all_reduce(Buffer::of(std::span(one)), ReduceOp::sum, kDefault);
      EXPECT_EQ(one[0], ranks());
    });
  }
}

// shm's large messages (Group::send): received out of order, each is kept
// for its own recv. A send that gives up before the peer began to read
// takes its message back where the peer reads from the sender's memory: the
// peer never gets it, and the next message arrives. Through the segment's
// channel the message was cut off part-way: every later send to that peer
// says so, rather than let the peer take another message's pieces for it.
class ShmMessages : public Conformance {};

TEST_P(ShmMessages, LargeMessagesWaitForTheirRecvAndAGivenUpSendTakesItsOwnBack) {
  constexpr std::size_t kCount = std::size_t{64} << 10;  // 256 KiB of i32: 4 pieces of a channel
  const bool by_address = std::get<0>(GetParam()) != "shm_through_segment";
  on_every_rank([&](int rank, Communicator& comm) {
    if (rank == 0) {
      for (int tag = 1; tag <= 3; ++tag) {
        std::vector<std::int32_t> message(kCount, tag);
        comm.send(Buffer::of(std::span(message)), 1, tag, kDefault);
      }
      std::vector<std::int32_t> given_up(kCount, 8);
      EXPECT_THROW(comm.send(Buffer::of(std::span(given_up)), 1, 8, 1ms), Timeout);
      std::fill(given_up.begin(), given_up.end(), -7);
      std::vector<std::int32_t> next(kCount, 9);
      if (by_address) {
        comm.send(Buffer::of(std::span(next)), 1, 9, kDefault);
      } else {
        try {
          comm.send(Buffer::of(std::span(next)), 1, 9, kDefault);
          ADD_FAILURE() << "a send after one cut off part-way went out";
        } catch (const Timeout& error) {
          EXPECT_NE(std::string(error.what()).find("out of step"), std::string::npos)
              << error.what();
        }
      }
    } else if (rank == 1) {
      for (int tag : {3, 1, 2}) {
        std::vector<std::int32_t> message(kCount, -1);
        comm.recv(Buffer::of(std::span(message)), 0, tag, kDefault);
        EXPECT_EQ(std::count(message.begin(), message.end(), tag),
                  static_cast<std::ptrdiff_t>(kCount))
            << "tag " << tag;
      }
      std::this_thread::sleep_for(300ms);  // rank 0's send of tag 8 gives up meanwhile
      std::vector<std::int32_t> next(kCount, -1);
      if (by_address) {
        comm.recv(Buffer::of(std::span(next)), 0, 9, kDefault);
        EXPECT_EQ(std::count(next.begin(), next.end(), 9), static_cast<std::ptrdiff_t>(kCount));
        EXPECT_THROW(comm.recv(Buffer::of(std::span(next)), 0, 8, 200ms), Timeout);
      } else {
        EXPECT_THROW(comm.recv(Buffer::of(std::span(next)), 0, 9, 500ms), Timeout);
        EXPECT_EQ(std::count(next.begin(), next.end(), 9), 0) << "pieces of tag 8 taken for 9";
      }
    }
    comm.barrier(kDefault);
  });
}

// Checked calls (Communicator::check_calls, COHORT_CHECK_CALLS=1): a rank
// whose collective differs from the others' (count, collective, root, a
// count of 0) is refused on every rank, naming both calls, before anyone
// makes it, and the communicator goes on. Unchecked, the first mismatch
// here returns wrong sums under shm, ends the process under gloo and breaks
// the group under mpi.
TEST_P(Conformance, CheckedCallsRefuseACallThatDiffersFromAnotherRanks) {
  on_every_rank([&](int rank, Communicator& comm) {
    comm.check_calls(true);
    std::vector<float> four(4, 1.0F), eight(8, 1.0F), none;
    comm.all_reduce(Buffer::of(std::span(four)), ReduceOp::sum, kDefault);
    EXPECT_EQ(four[0], static_cast<float>(ranks()));
    if (ranks() < 2) return comm.check_calls(false);
    const auto refused = [&](const std::function<void()>& call, const std::string& named) {
      try {
        call();
        ADD_FAILURE() << "a call that differs from another rank's was made";
      } catch (const InvalidArgument& error) {
        const std::string said = error.what();
        EXPECT_NE(said.find(named), std::string::npos) << said;
        EXPECT_NE(said.find("COHORT_CHECK_CALLS"), std::string::npos) << said;
      }
    };
    // Rank 0 gives 4 elements, the others 8.
    refused(
        [&] {
          comm.all_reduce(Buffer::of(rank == 0 ? std::span(four) : std::span(eight)), ReduceOp::sum,
                          kDefault);
        },
        rank == 0 ? "rank 1 called all_reduce (sum) of 8 f32"
                  : "rank 0 called all_reduce (sum) of 4 f32");
    // The last rank broadcasts where the others all-reduce.
    const int last = ranks() - 1;
    refused(
        [&] {
          if (rank == last) return comm.broadcast(Buffer::of(std::span(four)), 0, kDefault);
          comm.all_reduce(Buffer::of(std::span(four)), ReduceOp::max, kDefault);
        },
        rank == last ? "all_reduce (max) of 4 f32" : "broadcast from rank 0 of 4 f32");
    // Nothing to move on rank 0: it still tells the others, who would wait.
    refused(
        [&] {
          comm.all_reduce(Buffer::of(rank == 0 ? std::span(none) : std::span(four)), ReduceOp::sum,
                          kDefault);
        },
        rank == 0 ? "rank 1 called all_reduce (sum) of 4 f32"
                  : "rank 0 called all_reduce (sum) of 0 f32");
    std::fill(four.begin(), four.end(), 2.0F);
    comm.all_reduce(Buffer::of(std::span(four)), ReduceOp::sum, kDefault);
    EXPECT_EQ(four[3], 2.0F * static_cast<float>(ranks()));
    comm.check_calls(false);
  });
}

TEST_P(Conformance, MisuseIsAnErrorNamingTheProblem) {
  on_every_rank([&](int, Communicator& comm) {
    Values small(DataType::f32, 3), large(DataType::f32, 3 * ranks() + 1), other(DataType::i32, 3);
    EXPECT_THROW(comm.all_gather(small.buffer(), large.buffer(), 1s), InvalidArgument);
    EXPECT_THROW(comm.all_gather(small.buffer(), other.buffer(), 1s), InvalidArgument);
    EXPECT_THROW(comm.broadcast(small.buffer(), ranks(), 1s), InvalidArgument);
    EXPECT_THROW(comm.reduce(small.buffer(), ReduceOp::sum, -1, 1s), InvalidArgument);
    EXPECT_THROW(comm.send(small.buffer(), ranks() + 3, 0, 1s), InvalidArgument);
  });
}

TEST_P(Conformance, SplitMakesSubgroupsAndBarrierPasses) {
  on_every_rank([&](int rank, Communicator& comm) {
    comm.barrier(10s);
    std::unique_ptr<Communicator> half = comm.split(rank % 2, -rank);
    ASSERT_NE(half, nullptr);
    const int members = (ranks() + 1 - rank % 2) / 2;
    EXPECT_EQ(half->size(), members);
    std::vector<std::int32_t> one{1};
    half->all_reduce(Buffer::of(std::span(one)), ReduceOp::sum, kDefault);
    EXPECT_EQ(one[0], members);
    EXPECT_EQ(comm.split(-1, 0), nullptr);
  });
}

// Two communicators one after the other in one process: the first is closed
// before the second connects, and both work.
TEST(ConformanceGloo, TwoCommunicatorsOneAfterTheOther) {
  if (const std::string why = not_built_because("gloo"); !why.empty()) GTEST_SKIP() << why;
  for (int round = 0; round < 2; ++round) {
    std::vector<std::unique_ptr<Communicator>> group = thread_group("gloo", 3);
    std::vector<std::thread> threads;
    std::vector<std::int32_t> results(3);
    for (int rank = 0; rank < 3; ++rank) {
      threads.emplace_back([&, rank] {
        std::int32_t value[] = {rank + round};
        group[static_cast<std::size_t>(rank)]->all_reduce(std::span(value), ReduceOp::sum);
        results[static_cast<std::size_t>(rank)] = value[0];
      });
    }
    for (std::thread& thread : threads)
      thread.join();
    for (std::int32_t result : results)
      EXPECT_EQ(result, 3 + 3 * round) << "round " << round;
    close_all(group);
  }
}

// COHORT_CHECK_CALLS=1 turns checked calls on for every communicator made
// while it is set (and for their subgroups); any value but 1, 0 or nothing
// is refused when one is made, naming the variable.
TEST(CheckedCalls, TheVariableTurnsThemOnAndOtherValuesAreRefused) {
  ::setenv("COHORT_CHECK_CALLS", "1", 1);
  std::vector<std::unique_ptr<Communicator>> group = thread_group("shm", 2);
  ::unsetenv("COHORT_CHECK_CALLS");
  std::vector<std::thread> threads;
  std::vector<std::string> said(2);
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      Communicator& comm = *group[static_cast<std::size_t>(rank)];
      const std::unique_ptr<Communicator> half = comm.split(0, rank);
      std::vector<std::int32_t> values(static_cast<std::size_t>(rank + 1), 1);
      try {
        half->all_reduce(std::span(values), ReduceOp::sum);
      } catch (const InvalidArgument& error) {
        said[static_cast<std::size_t>(rank)] = error.what();
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  close_all(group);
  EXPECT_NE(said[0].find("rank 1 called all_reduce (sum) of 2 i32"), std::string::npos) << said[0];
  EXPECT_NE(said[1].find("rank 0 called all_reduce (sum) of 1 i32"), std::string::npos) << said[1];

  ::setenv("COHORT_CHECK_CALLS", "yes", 1);
  try {
    (void)detail::check_calls_from_environment();  // as each Communicator reads it
    ADD_FAILURE() << "COHORT_CHECK_CALLS=yes was taken";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("COHORT_CHECK_CALLS='yes'"), std::string::npos)
        << error.what();
  }
  ::unsetenv("COHORT_CHECK_CALLS");
}

// A rank's mesh entry is where its pairs listen and a port per peer, read
// with one request: O(size) bytes a rank, not Gloo's own 136 bytes for every
// pair of every peer (docs/rendezvous.md), and no host name per rank.
TEST(ConformanceGloo, AMeshEntryIsOneAddressAndAPortPerPeer) {
  if (const std::string why = not_built_because("gloo"); !why.empty()) GTEST_SKIP() << why;
  constexpr int kRanks = 5;
  std::vector<std::unique_ptr<Communicator>> group = thread_group("gloo", kRanks);
  StoreClient::Options options;
  options.port = thread_groups_store().port();
  StoreClient store(options);
  const std::string mesh = last_thread_group + "/comm/gloo/mesh/";
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(store.get(mesh + std::to_string(rank), 1s).size(),
              sizeof(sockaddr_storage) + (kRanks - 1) * sizeof(std::uint16_t))
        << "rank " << rank;
  }
  EXPECT_FALSE(store.check({mesh + "rank_0"})) << "Gloo's own host-name keys";
  std::vector<std::thread> threads;
  std::vector<std::int32_t> results(kRanks);
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      std::int32_t value[] = {rank};
      group[static_cast<std::size_t>(rank)]->all_reduce(std::span(value), ReduceOp::sum);
      results[static_cast<std::size_t>(rank)] = value[0];
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  for (std::int32_t result : results)
    EXPECT_EQ(result, 0 + 1 + 2 + 3 + 4);
  close_all(group);
}

// shm's allocate is collective: a rank that asks for another size than rank
// 0 is told so (rank 0 waits for it to take the memory until its timeout),
// and the memory outlives the communicator.
TEST(ConformanceShm, AllocateAsksEveryRankForTheSameSizeAndOutlivesTheGroup) {
  if (const std::string why = not_built_because("shm"); !why.empty()) GTEST_SKIP() << why;
  std::vector<std::unique_ptr<Communicator>> group = thread_group("shm", 2);
  std::vector<std::shared_ptr<void>> memory(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      const auto index = static_cast<std::size_t>(rank);
      try {
        memory[index] = group[index]->allocate(4096);
        group[index]->allocate(rank == 0 ? 1000 : 2000, 1s);
      } catch (const std::exception& error) {
        errors[index] = error.what();
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  EXPECT_NE(errors[1].find("rank 1 asked for 2000 bytes and rank 0 for 1000"), std::string::npos)
      << errors[1];
  EXPECT_FALSE(errors[0].empty()) << "rank 0 waited for rank 1 to take the memory";
  close_all(group);
  static_cast<char*>(memory[0].get())[4095] = 1;
  EXPECT_EQ(static_cast<char*>(memory[1].get())[0], 0);
}

// The name of this process's mapping that holds `address` ("" when none
// does), from /proc/self/maps.
std::string mapping_of(const void* address) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  for (std::string line; std::getline(maps, line);) {
    std::uintptr_t begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%zx-%zx", &begin, &end) != 2 || at < begin || at >= end)
      continue;
    const std::size_t name = line.find('/');
    return name == std::string::npos ? std::string("(anonymous)") : line.substr(name);
  }
  return "";
}

// hier hands out its host group's memory: on two hosts of two ranks each,
// every rank's allocation is in the shm backend's memfd, which its host's
// other rank maps too, so the steps inside each host work in place.
TEST(ConformanceHier, AllocateGivesTheHostsSharedMemory) {
  if (const std::string why = not_built_because("hier"); !why.empty()) GTEST_SKIP() << why;
  if (const std::string why = not_built_because("shm"); !why.empty()) GTEST_SKIP() << why;
  std::vector<std::unique_ptr<Communicator>> group = thread_group("hier", 4, two_hosts);
  std::vector<std::shared_ptr<void>> memory(4);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      memory[static_cast<std::size_t>(rank)] =
          group[static_cast<std::size_t>(rank)]->allocate(1 << 20);
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(mapping_of(memory[static_cast<std::size_t>(rank)].get()).find("memfd:cohort-shm"),
              std::string::npos)
        << "rank " << rank << ": " << mapping_of(memory[static_cast<std::size_t>(rank)].get());
  }
  close_all(group);
}

// hier connects no group of every rank at the start (a gloo group holds a
// port and a connection per pair of its ranks): two ranks on different
// hosts meet in a group of their own when one first sends to the other,
// and all_to_all connects every rank when first called.
TEST(ConformanceHier, RanksOnOtherHostsConnectWhenTheyFirstTalk) {
  if (const std::string why = not_built_because("hier"); !why.empty()) GTEST_SKIP() << why;
  std::vector<std::unique_ptr<Communicator>> group = thread_group("hier", 4, two_hosts);
  StoreClient::Options options;
  options.port = thread_groups_store().port();
  StoreClient store(options);
  // A gloo group's rank r publishes "comm/gloo/peer/r" as it connects.
  const auto connected = [&](const std::string& view, int rank) {
    return store.check(
        {last_thread_group + "/hier/" + view + "/comm/gloo/peer/" + std::to_string(rank)});
  };
  EXPECT_FALSE(connected("flat", 0));
  EXPECT_FALSE(connected("pair/0/1", 0));

  // Ranks 0 and 1 are on hosts a and b.
  std::vector<std::int32_t> sent{1, 2, 3};
  std::vector<std::int32_t> received(3);
  std::thread receiver([&] { group[1]->recv(std::span(received), 0); });
  group[0]->send(std::span(sent), 1);
  receiver.join();
  EXPECT_EQ(received, sent);
  EXPECT_TRUE(connected("pair/0/1", 0));
  EXPECT_TRUE(connected("pair/0/1", 1));
  EXPECT_FALSE(connected("pair/2/3", 0)) << "ranks 2 and 3 never talked";
  EXPECT_FALSE(connected("flat", 0));

  std::vector<std::thread> threads;
  std::vector<std::vector<std::int32_t>> blocks(4, std::vector<std::int32_t>(4));
  std::vector<std::vector<std::int32_t>> gathered(4, std::vector<std::int32_t>(4));
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      auto& mine = blocks[static_cast<std::size_t>(rank)];
      for (int to = 0; to < 4; ++to)
        mine[static_cast<std::size_t>(to)] = rank * 10 + to;
      group[static_cast<std::size_t>(rank)]->all_to_all(
          Buffer::of(std::span(mine)),
          Buffer::of(std::span(gathered[static_cast<std::size_t>(rank)])));
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  for (int rank = 0; rank < 4; ++rank) {
    for (int from = 0; from < 4; ++from)
      EXPECT_EQ(gathered[static_cast<std::size_t>(rank)][static_cast<std::size_t>(from)],
                from * 10 + rank);
  }
  EXPECT_TRUE(connected("flat", 3));
  close_all(group);
}

// A ring across two hosts (round robin: every message crosses), in the
// order that a send which completes only once its receive is posted needs:
// even ranks send, then receive; odd ranks the other way round. The pair
// groups connect as the ring goes (a rank waits in the connection for no
// longer than it would wait for the receive).
TEST(ConformanceHier, ARingBetweenHostsConnectsAsItGoes) {
  if (const std::string why = not_built_because("hier"); !why.empty()) GTEST_SKIP() << why;
  constexpr int kRanks = 4;
  std::vector<std::unique_ptr<Communicator>> group = thread_group("hier", kRanks, two_hosts);
  std::vector<std::int32_t> got(kRanks, -1);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      Communicator& mine = *group[static_cast<std::size_t>(rank)];
      std::int32_t out[] = {rank};
      std::int32_t in[] = {-1};
      const int next = (rank + 1) % kRanks;
      const int previous = (rank + kRanks - 1) % kRanks;
      if (rank % 2 == 0) {
        mine.send(std::span(out), next, 0, 20s);
        mine.recv(std::span(in), previous, 0, 20s);
      } else {
        mine.recv(std::span(in), previous, 0, 20s);
        mine.send(std::span(out), next, 0, 20s);
      }
      got[static_cast<std::size_t>(rank)] = in[0];
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  for (int rank = 0; rank < kRanks; ++rank)
    EXPECT_EQ(got[static_cast<std::size_t>(rank)], (rank + kRanks - 1) % kRanks) << rank;
  close_all(group);
}

// A first message to a rank on another host that never comes to meet it
// (it ended before the two ever talked): a Timeout that names that rank,
// after the group's timeout.
TEST(ConformanceHier, AFirstMessageToARankThatNeverComesNamesIt) {
  if (const std::string why = not_built_because("hier"); !why.empty()) GTEST_SKIP() << why;
  std::vector<std::unique_ptr<Communicator>> group = thread_group("hier", 4, two_hosts);
  std::int32_t out[] = {1};
  try {
    group[0]->send(std::span(out), 1, 0);  // rank 1 (host b) never receives
    ADD_FAILURE() << "the send returned";
  } catch (const Timeout& timeout) {
    EXPECT_NE(std::string(timeout.what()).find("rank 1 of 4 (on host-b) did not come"),
              std::string::npos)
        << timeout.what();
  }
  close_all(group);
}

std::vector<std::tuple<std::string, int>> combinations() {
  std::vector<std::tuple<std::string, int>> out;
  for (const BackendUnderTest& backend : backends_under_test()) {
    // Processes another test starts: registered only in them, so that the
    // suite here does not list tests it never runs.
    if (backend.only_from != nullptr && std::getenv(kChildVariable) == nullptr) continue;
    for (int size : backend.world_sizes)
      out.emplace_back(backend.label, size);
  }
  return out;
}

std::string combination_name(
    const ::testing::TestParamInfo<std::tuple<std::string, int>>& test_info) {
  return std::get<0>(test_info.param) + "_world" + std::to_string(std::get<1>(test_info.param));
}

// The whole suite, but for the backends that only some tests take.
std::vector<std::tuple<std::string, int>> conformance_combinations() {
  std::vector<std::tuple<std::string, int>> out;
  for (const auto& combination : combinations()) {
    if (std::get<0>(combination) != "shm_through_segment") out.push_back(combination);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::ValuesIn(conformance_combinations()),
                         combination_name);

std::vector<std::tuple<std::string, int>> lending_combinations() {
  std::vector<std::tuple<std::string, int>> out;
  for (const auto& [label, size] : combinations()) {
    const bool lends = label == "shm" || label == "shm_single_copy" || label == "gloo" ||
                       label == "hier" || label == "mpi_watched";
    if (lends && size >= 2) out.emplace_back(label, size);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, LentBuffers, ::testing::ValuesIn(lending_combinations()),
                         combination_name);

// Every backend that sends messages (MessageSizes); under hier, ranks 0 and
// 1 share a host in blocks and are on two hosts otherwise.
std::vector<std::tuple<std::string, int>> size_checking_combinations() {
  std::vector<std::tuple<std::string, int>> out;
  for (const auto& [label, size] : combinations()) {
    const bool checks = label != "self" && label != "hier_cluster";
    if (checks && size >= 2) out.emplace_back(label, size);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, MessageSizes, ::testing::ValuesIn(size_checking_combinations()),
                         combination_name);

// shm alone (ShmMessages): its ranks threads of one process, processes with
// single copies, and processes without.
std::vector<std::tuple<std::string, int>> shm_combinations() {
  std::vector<std::tuple<std::string, int>> out;
  for (const auto& [label, size] : combinations()) {
    if ((label == "shm" || label == "shm_single_copy" || label == "shm_through_segment") &&
        size >= 2 && size <= 3)
      out.emplace_back(label, size);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, ShmMessages, ::testing::ValuesIn(shm_combinations()),
                         combination_name);

// Fewer sizes: each test gives up on seven collectives.
std::vector<std::tuple<std::string, int>> lending_combinations_up_to_3() {
  std::vector<std::tuple<std::string, int>> out;
  for (const auto& combination : lending_combinations()) {
    if (std::get<1>(combination) <= 3) out.push_back(combination);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, LentOutputs, ::testing::ValuesIn(lending_combinations_up_to_3()),
                         combination_name);

}  // namespace
}  // namespace cohort
