// The rendezvous store over real TCP on loopback: operations, timeouts,
// start order, load (hundreds of clients, thousands of connections), and
// faults (server gone, client killed inside wait, wrong token, oversized
// frame, random bytes): a bad client only ever loses its own connection.
#include <array>
#include <atomic>
#include <fstream>
#include <future>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cohort/errors.hpp>
#include <cohort/store.hpp>

#include "core/peer_owner.hpp"
#include "core/socket.hpp"
#include "core/strings.hpp"
#include "store/client_handshake.hpp"
#include "store/exchange.hpp"
#include "store/protocol.hpp"
#include "store/store_protocol.hpp"
#include "support/cut_cable.hpp"

namespace cohort {
namespace {

using namespace std::chrono_literals;
namespace wire = detail::store_protocol;

constexpr const char* kToken = "test-token";

StoreClient::Options client_options(int port, std::chrono::milliseconds timeout = 10s) {
  StoreClient::Options options;
  options.host = "127.0.0.1";
  options.port = port;
  options.token = kToken;
  options.timeout = timeout;
  return options;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { start_server(-1); }
  // A server on loopback; `torch_port` as in StoreServer::Options.
  void start_server(int torch_port) {
    StoreServer::Options options;
    options.host = "127.0.0.1";
    options.token = kToken;
    options.max_frame_bytes = 1 << 20;
    options.torch_port = torch_port;
    server_ = std::make_unique<StoreServer>(options);
  }
  std::unique_ptr<StoreClient> client(std::chrono::milliseconds timeout = 10s) {
    return std::make_unique<StoreClient>(client_options(server_->port(), timeout));
  }
  // Waits (bounded) until the server holds `count` connections.
  bool waiting_becomes(std::size_t count) {
    for (int i = 0; i < 500; ++i) {
      if (server_->waiting_count() == count) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  bool connections_become(std::size_t count) {
    for (int i = 0; i < 500; ++i) {
      if (server_->connection_count() == count) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  // A raw connection that completed the handshake with `token`.
  detail::Fd raw_connection(const std::string& token = kToken) {
    std::string error;
    const auto deadline = detail::Clock::now() + 5s;
    detail::Fd fd = detail::connect_tcp("127.0.0.1", server_->port(), deadline, &error);
    EXPECT_TRUE(fd.valid()) << error;
    EXPECT_NO_THROW(
        detail::authenticate_to_store(fd.get(), "the test's store", {.token = token}, deadline));
    return fd;
  }
  // Whether the server closed `fd` (reads until EOF, bounded).
  static bool closed_by_server(int fd) {
    std::string error;
    char buffer[256];
    const auto deadline = detail::Clock::now() + 5s;
    while (detail::recv_all(fd, buffer, 1, deadline, &error)) {
    }
    return error == "closed the connection";
  }
  void expect_server_healthy() {
    auto good = client();
    good->set("health", "ok");
    EXPECT_EQ(good->get("health", 1s), "ok");
  }

  std::unique_ptr<StoreServer> server_;
};

// How a test's clients reach the store.
enum class Path { direct, relay, in_process };

// The operations, as a client sees them, on the store itself, through a
// node's relay of it (StoreServer::Options::relay_to), and from the process
// that serves it (connect_in_process): the same answers, errors and timeouts
// every way.
class StoreOperationsTest : public StoreTest, public ::testing::WithParamInterface<Path> {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (GetParam() != Path::relay) return;
    StoreServer::Options options;
    options.token = kToken;
    options.relay_to = StoreServer::Options::Upstream{"127.0.0.1", server_->port(), false, "", 10s};
    relay_ = std::make_unique<StoreServer>(options);
  }
  // Where the clients connect: the relay when there is one.
  int port() const { return relay_ ? relay_->port() : server_->port(); }
  std::unique_ptr<StoreClient> client(std::chrono::milliseconds timeout = 10s) {
    if (GetParam() == Path::in_process) return server_->connect_in_process(timeout);
    return std::make_unique<StoreClient>(client_options(port(), timeout));
  }

  std::unique_ptr<StoreServer> relay_;
};

INSTANTIATE_TEST_SUITE_P(Store, StoreOperationsTest,
                         ::testing::Values(Path::direct, Path::relay, Path::in_process),
                         [](const ::testing::TestParamInfo<Path>& param) {
                           switch (param.param) {
                             case Path::direct:
                               return "Direct";
                             case Path::relay:
                               return "ThroughARelay";
                             case Path::in_process:
                               break;
                           }
                           return "InProcess";
                         });

TEST_P(StoreOperationsTest, Operations) {
  auto store = client();
  store->set("a", std::string("bytes\0with nul", 14));
  EXPECT_EQ(store->get("a", 1s), std::string("bytes\0with nul", 14));
  EXPECT_EQ(store->add("n", 5), 5);
  EXPECT_EQ(store->add("n", -2), 3);
  EXPECT_EQ(store->get("n", 1s), "3");
  EXPECT_TRUE(store->check({"a", "n"}));
  EXPECT_FALSE(store->check({"a", "missing"}));
  EXPECT_EQ(store->num_keys(), 2);
  EXPECT_TRUE(store->delete_key("a"));
  EXPECT_FALSE(store->delete_key("a"));
  EXPECT_EQ(store->num_keys(), 1);
  store->set("text", "abc");
  EXPECT_THROW(store->add("text", 1), StoreError);
  store->set("empty", "");
  EXPECT_EQ(store->get("empty", 1s), "");
}

TEST_P(StoreOperationsTest, CompareSet) {
  auto store = client();
  EXPECT_EQ(store->compare_set("k", "x", "y"), "");  // absent, expected not empty: no swap
  EXPECT_FALSE(store->check({"k"}));
  EXPECT_EQ(store->compare_set("k", "", "first"), "first");  // absent matches ""
  EXPECT_EQ(store->compare_set("k", "wrong", "second"), "first");
  EXPECT_EQ(store->compare_set("k", "first", "second"), "second");
  EXPECT_EQ(store->get("k", 1s), "second");
}

TEST_P(StoreOperationsTest, GetAndWaitBlockUntilSet) {
  auto waiter = client();
  auto setter = client();
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    setter->set("x", "1");
    std::this_thread::sleep_for(50ms);
    setter->set("y", "2");
  });
  const auto start = std::chrono::steady_clock::now();
  waiter->wait({"x", "y"}, 10s);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 140ms);
  EXPECT_EQ(waiter->get("y", 1s), "2");
  later.join();
}

// MULTI_GET: every value in the keys' order, in one request, once the last
// key is set; a timeout names the keys still missing and the connection
// goes on; a prefix view and the Store default (WAIT, then GETs) agree.
TEST_P(StoreOperationsTest, MultiGetWaitsForEveryKeyAndAnswersInOrder) {
  auto waiter = client();
  auto setter = client();
  setter->set("m/0", std::string("nul\0inside", 11));
  setter->set("m/2", "");
  std::thread later([&] {
    ASSERT_TRUE(waiting_becomes(1));  // parked on the missing key
    setter->set("m/1", "one");
  });
  EXPECT_EQ(waiter->multi_get({"m/2", "m/0", "m/1", "m/0"}, 10s),
            (std::vector<std::string>{"", std::string("nul\0inside", 11), "one",
                                      std::string("nul\0inside", 11)}));
  later.join();
  EXPECT_TRUE(waiter->multi_get({}, 1s).empty());
  try {
    waiter->multi_get({"m/0", "never"}, 200ms);
    ADD_FAILURE() << "a MULTI_GET of a missing key returned";
  } catch (const Timeout& timeout) {
    EXPECT_NE(std::string(timeout.what()).find("still missing 'never'"), std::string::npos)
        << timeout.what();
  }
  EXPECT_EQ(waiter->get("m/1", 1s), "one");  // the connection goes on
  PrefixStore view("m", std::shared_ptr<Store>(client()));
  EXPECT_EQ(view.multi_get({"1", "2"}, 1s), (std::vector<std::string>{"one", ""}));
  EXPECT_EQ(view.Store::multi_get({"1", "2"}, 1s), (std::vector<std::string>{"one", ""}));
}

// A parked WAIT scans its keys on as they are set; a key deleted after the
// scan passed it counts as missing again: the keys must all be set at once.
TEST_P(StoreOperationsTest, AWaitEndsOnlyWhenEveryKeyIsSetAtOnce) {
  auto waiter = client();
  auto setter = client();
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);  // the WAIT is parked by then (either way, "a" is missing)
    setter->set("a", "1");
    setter->delete_key("a");
    setter->set("b", "2");
    setter->set("c", "3");
  });
  try {
    waiter->wait({"a", "b", "c"}, 800ms);
    ADD_FAILURE() << "the WAIT ended though 'a' was deleted";
  } catch (const Timeout& timeout) {
    EXPECT_NE(std::string(timeout.what()).find("still missing 'a' after"), std::string::npos)
        << timeout.what();
  }
  later.join();
  setter->set("a", "again");
  waiter->wait({"a", "b", "c"}, 10s);
}

TEST_P(StoreOperationsTest, TimeoutNamesMissingKeysAndKeepsTheConnection) {
  auto store = client();
  store->set("present", "1");
  try {
    store->wait({"present", "absent"}, 200ms);
    FAIL() << "no timeout";
  } catch (const Timeout& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("'absent'"), std::string::npos) << message;
    EXPECT_EQ(message.find("'present'"), std::string::npos) << message;
    EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port())), std::string::npos);
  }
  EXPECT_THROW(store->get("absent", 50ms), Timeout);
  EXPECT_EQ(store->get("present", 1s), "1");  // still usable
}

TEST_F(StoreTest, ClientStartedFirstConnectsWhenTheServerComes) {
  const int port = detail::pick_free_port("127.0.0.1");
  std::unique_ptr<StoreServer> late;
  std::thread starter([&] {
    std::this_thread::sleep_for(300ms);
    StoreServer::Options options;
    options.host = "127.0.0.1";
    options.port = port;
    options.token = kToken;
    late = std::make_unique<StoreServer>(options);
  });
  StoreClient early(client_options(port, 10s));
  early.set("k", "v");
  EXPECT_EQ(early.get("k", 1s), "v");
  starter.join();
}

TEST_F(StoreTest, NoServerFailsWithinTheTimeoutNamingTheAddress) {
  const int port = detail::pick_free_port("127.0.0.1");
  const auto start = std::chrono::steady_clock::now();
  try {
    StoreClient nobody(client_options(port, 300ms));
    FAIL() << "connected to nothing";
  } catch (const StoreError& error) {
    EXPECT_NE(std::string(error.what()).find("127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST_F(StoreTest, ServerGoneFailsTheWaitingClient) {
  auto store = client();
  std::thread stopper([&] {
    std::this_thread::sleep_for(200ms);
    server_.reset();
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(store->wait({"never"}, 60s), StoreError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  stopper.join();
  EXPECT_THROW(store->set("after", "x"), StoreError);  // and every later call
}

// A process of this user listened first on the job's port and plays the
// store (the same as another user's, which the client refuses before it
// sends anything: tests/security). It cannot prove the token, so the client
// fails at once, naming the port, and all it received is a hello: no token
// bytes, no proof it could test guesses against.
TEST(StoreClientCheck, AServerThatCannotProveTheTokenLearnsNothing) {
  detail::Listener fake = detail::listen_tcp("127.0.0.1", 0);
  std::string received;
  std::thread play([&] {
    pollfd ready{fake.fd.get(), POLLIN, 0};
    if (poll(&ready, 1, 10000) != 1) return;
    detail::Fd client(accept(fake.fd.get(), nullptr, nullptr));
    const std::string challenge = wire::Writer()
                                      .u8(static_cast<std::uint8_t>(wire::Status::ok))
                                      .bytes(std::string(32, 'n'))
                                      .bytes(std::string(32, 'p'))
                                      .bytes("")
                                      .frame();
    bool answered = false;
    char buffer[4096];
    for (;;) {
      pollfd readable{client.get(), POLLIN, 0};
      if (poll(&readable, 1, 10000) != 1) return;
      const ssize_t n = recv(client.get(), buffer, sizeof(buffer), 0);
      if (n <= 0) return;
      received.append(buffer, static_cast<std::size_t>(n));
      if (!answered) (void)!send(client.get(), challenge.data(), challenge.size(), MSG_NOSIGNAL);
      answered = true;
    }
  });
  StoreClient::Options options;
  options.port = fake.port;
  options.token = "0123456789abcdef0123456789abcdef";
  options.timeout = 30s;
  std::string message;
  try {
    StoreClient victim(options);
  } catch (const StoreError& error) {
    message = error.what();
  }
  play.join();
  EXPECT_NE(message.find(detail::cat("store at 127.0.0.1:", fake.port)), std::string::npos)
      << message;
  EXPECT_NE(message.find("another process holds this port"), std::string::npos) << message;
  EXPECT_EQ(received, wire::hello(received.substr(13, 32)));  // its hello, and nothing after
  EXPECT_EQ(received.find("0123456789abcdef"), std::string::npos);
}

// Another program holds the job's port and says nothing (the kernel
// accepts for it): the client gives up after the hello's patience, not its
// whole timeout, and says what is likely there.
TEST(StoreClientCheck, AListenerThatNeverAnswersIsNamedAfterTheHellosPatience) {
  detail::Listener silent = detail::listen_tcp("127.0.0.1", 0);
  detail::ExpectedStore expected;
  expected.token = "0123456789abcdef0123456789abcdef";
  expected.hello_answer = 300ms;
  try {
    (void)detail::connect_to_store("127.0.0.1", silent.port, expected, 60s);
    FAIL() << "a listener that never answered passed for the store";
  } catch (const StoreError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(detail::cat("store at 127.0.0.1:", silent.port,
                                       " accepted the connection but did not answer cohort's "
                                       "handshake within 300 ms: another program holds this port")),
              std::string::npos)
        << message;
  }
}

// The same user's other job serves a store on this job's port, with the
// same token (one token file for both): its proof holds, but it is not the
// process the launcher named (COHORT_STORE_PROCESS), so the client refuses
// it, naming the port. The named process itself is let in; a name that no
// longer matches a process here (gone, another pid namespace) checks only
// the user and the token.
TEST_F(StoreTest, AnotherStoreOfThisUserIsRefusedWhenTheLaunchersIsNamed) {
  const std::string parent = detail::process_identity(getppid());
  ASSERT_FALSE(parent.empty());
  auto options = client_options(server_->port(), 5s);
  options.server_process = parent;
  try {
    StoreClient misled(options);
    FAIL() << "connected to a store that is not process " << parent;
  } catch (const StoreError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(detail::cat("store at 127.0.0.1:", server_->port(),
                                       ": the process listening there is not this job's store "
                                       "(process ",
                                       getppid())),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("another process of this user holds this port"), std::string::npos)
        << message;
  }
  options.server_process = detail::process_identity(getpid());
  EXPECT_NO_THROW(StoreClient(options).set("named", "1"));
  options.server_process = detail::cat(getpid(), ":1");  // this pid, another start: not here
  EXPECT_NO_THROW(StoreClient(options).set("stale", "1"));
  expect_server_healthy();
}

TEST_F(StoreTest, WrongTokenIsRejectedAndOthersAreServed) {
  auto options = client_options(server_->port(), 2s);
  options.token = "another job";
  try {
    StoreClient stranger(options);
    FAIL() << "accepted a wrong token";
  } catch (const StoreError& error) {
    EXPECT_NE(std::string(error.what()).find("wrong job token"), std::string::npos) << error.what();
  }
  expect_server_healthy();
}

TEST_F(StoreTest, OversizedFrameClosesOnlyThatConnection) {
  auto bystander = client();
  detail::Fd fd = raw_connection();
  const char header[4] = {'\xff', '\xff', '\xff', '\x7f'};  // ~2 GiB
  std::string error;
  ASSERT_TRUE(detail::send_all(fd.get(), header, 4, detail::Clock::now() + 1s, &error)) << error;
  EXPECT_TRUE(closed_by_server(fd.get()));
  bystander->set("still", "here");
  EXPECT_EQ(bystander->get("still", 1s), "here");
  // An oversized handshake is refused too (the limit before the token is 4 KiB).
  std::string raw_error;
  detail::Fd early =
      detail::connect_tcp("127.0.0.1", server_->port(), detail::Clock::now() + 1s, &raw_error);
  const char big[4] = {'\x00', '\x00', '\x01', '\x00'};  // 64 KiB
  ASSERT_TRUE(detail::send_all(early.get(), big, 4, detail::Clock::now() + 1s, &raw_error));
  EXPECT_TRUE(closed_by_server(early.get()));
}

TEST_F(StoreTest, RandomBytesCloseOnlyThatConnection) {
  auto bystander = client();
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 200; ++i) {
    // Half before the handshake, half after it; lengths that fit the limit.
    detail::Fd fd;
    std::string error;
    if (i % 2 == 0) {
      fd = detail::connect_tcp("127.0.0.1", server_->port(), detail::Clock::now() + 1s, &error);
    } else {
      fd = raw_connection();
    }
    std::string junk(1 + rng() % 64, '\0');
    for (char& c : junk)
      c = static_cast<char>(rng());
    const std::uint32_t length = static_cast<std::uint32_t>(junk.size());
    std::string frame(reinterpret_cast<const char*>(&length), 4);  // well-formed header
    frame += junk;
    if (i % 4 == 1) frame = junk;  // and sometimes not even that
    ASSERT_TRUE(
        detail::send_all(fd.get(), frame.data(), frame.size(), detail::Clock::now() + 1s, &error))
        << error;
    ::shutdown(fd.get(), SHUT_WR);
  }
  bystander->set("survived", "yes");
  EXPECT_EQ(bystander->get("survived", 1s), "yes");
  expect_server_healthy();
}

TEST_F(StoreTest, ClientKilledInsideWait) {
  auto store = client();
  const std::size_t before = server_->connection_count();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      StoreClient doomed(client_options(server_->port(), 10s));
      doomed.wait({"never-set"}, 60s);
    } catch (...) {
    }
    _exit(0);
  }
  ASSERT_TRUE(connections_become(before + 1)) << "the child did not connect";
  std::this_thread::sleep_for(100ms);  // let it park in wait
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(connections_become(before)) << "the killed client's connection stayed open";
  store->set("never-set", "now set");  // wakes nobody, harms nothing
  expect_server_healthy();
}

// Last words: a process SIGKILLed inside a wait leaves keys that the server
// sets when its connection closes, and they wake whoever waits for them.
TEST_F(StoreTest, AKilledClientsLastWordsAreSetAndWakeTheWaiters) {
  auto watcher = client();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      StoreClient doomed(client_options(server_->port(), 10s));
      doomed.set_on_close("gone/child", "killed");
      doomed.set_on_close("wake", "");
      doomed.set("registered", "");
      doomed.wait({"never-set"}, 60s);
    } catch (...) {
    }
    _exit(0);
  }
  watcher->wait({"registered"}, 10s);
  EXPECT_FALSE(watcher->check({"gone/child"}));  // said, not yet done
  std::thread killer([child] {
    std::this_thread::sleep_for(100ms);
    kill(child, SIGKILL);
  });
  watcher->wait({"wake"}, 10s);  // woken by the closed connection, not a timeout
  killer.join();
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(watcher->get("gone/child", 1s), "killed");
}

// A connection that cleared its last words ends quietly; one that ends
// without clearing them (its owner destroyed it) leaves them; more than
// eight is an error that leaves the connection usable.
TEST_F(StoreTest, LastWordsClearedAreNotSetAndAreBounded) {
  {
    auto quiet = client();
    quiet->set_on_close("quiet", "1");
    quiet->clear_on_close();
  }
  {
    auto loud = client();
    loud->set_on_close("loud", "1");
    for (std::size_t i = 1; i < detail::store_protocol::kMaxOnCloseSets; ++i)
      loud->set_on_close("more/" + std::to_string(i), "1");
    EXPECT_THROW(loud->set_on_close("one/too/many", "1"), StoreError);
    loud->set("still", "usable");
  }
  auto store = client();
  EXPECT_EQ(store->get("loud", 5s), "1");
  EXPECT_EQ(store->get("still", 1s), "usable");
  EXPECT_FALSE(store->check({"quiet"}));
  EXPECT_FALSE(store->check({"one/too/many"}));
}

// A batch goes out at once and is carried out in order, as its calls one by
// one would be: an ADD sees the ADDs before it, a later SET overwrites an
// earlier one, and the connection goes on afterwards.
TEST_P(StoreOperationsTest, ABatchIsCarriedOutInOrderAndAnsweredWhole) {
  auto store = client();
  StoreClient::Batch batch;
  batch.set("b/first", "1").add("b/count", 2).set("b/first", "2").add("b/count", 3);
  batch.add("b/other", -1);
  EXPECT_EQ(batch.size(), 5u);
  EXPECT_EQ(store->run(batch), (std::vector<std::int64_t>{2, 5, -1}));
  EXPECT_EQ(store->get("b/first", 1s), "2");
  EXPECT_EQ(store->add("b/count", 0), 5);
  EXPECT_TRUE(store->run(StoreClient::Batch()).empty());  // nothing sent
  store->set("b/after", "yes");
  EXPECT_EQ(store->get("b/after", 1s), "yes");
}

// A participant's arrival (store/exchange.cpp): its value is set before
// its count, on the client's one batch, and through a prefix view both keys
// are the view's; the default (two calls) means the same.
TEST_P(StoreOperationsTest, SetThenAddSetsTheValueBeforeTheCount) {
  std::shared_ptr<Store> store(client());
  auto watcher = client();
  std::thread arrival([&] {
    watcher->wait({"a/count"}, 5s);
    EXPECT_TRUE(watcher->check({"a/0"}));  // set before the count existed
  });
  EXPECT_EQ(store->set_then_add("a/0", "zero", "a/count", 1), 1);
  arrival.join();
  EXPECT_EQ(store->Store::set_then_add("a/1", "one", "a/count", 2), 3);
  PrefixStore view("v", store);
  EXPECT_EQ(view.set_then_add("a/2", "two", "a/count", 1), 1);
  EXPECT_EQ(store->get("v/a/2", 1s), "two");
  EXPECT_EQ(store->multi_get({"a/0", "a/1"}, 1s), (std::vector<std::string>{"zero", "one"}));
  EXPECT_EQ(store->add("a/count", 0), 3);
}

// A request of a batch that the server refuses is thrown once every answer
// is in: the requests after it were carried out, and the stream is in step.
TEST_F(StoreTest, ABatchWithARefusedRequestThrowsAfterTheRest) {
  auto store = client();
  StoreClient::Batch batch;
  for (std::size_t i = 0; i <= detail::store_protocol::kMaxOnCloseSets; ++i)
    batch.set_on_close("last/" + std::to_string(i), "1");
  batch.add("after/refusal", 7);
  EXPECT_THROW(store->run(batch), StoreError);
  EXPECT_EQ(store->add("after/refusal", 0), 7);
  store->clear_on_close();
}

// shut_down() ends a WAIT that another thread is in, at once, and the server
// sees the connection end: its last words are set.
TEST_F(StoreTest, ShuttingDownEndsAWaitInAnotherThreadAndSaysTheLastWords) {
  auto store = client();
  store->set_on_close("ended", "yes");
  std::promise<std::string> failure;
  std::thread waiter([&] {
    try {
      store->wait({"never/set"}, 60s);
      failure.set_value("the wait returned");
    } catch (const StoreError& error) {
      failure.set_value(error.what());
    } catch (const std::exception& error) {
      failure.set_value(std::string("another error: ") + error.what());
    }
  });
  ASSERT_TRUE(waiting_becomes(1));
  store->shut_down();
  auto outcome = failure.get_future();
  ASSERT_EQ(outcome.wait_for(10s), std::future_status::ready);
  EXPECT_NE(outcome.get().find("lost the store at"), std::string::npos);
  waiter.join();
  EXPECT_THROW(store->set("after", "shut down"), StoreError);
  auto other = client();
  EXPECT_EQ(other->get("ended", 5s), "yes");
}

// store/exchange.hpp: every participant gets every value, in rank order,
// whatever the order they arrive in; values with any bytes survive the table,
// and a value three ranks share (a host's identity) is in it once.
TEST_P(StoreOperationsTest, AnExchangeGivesEveryoneEveryValueInRankOrder) {
  constexpr int kSize = 24;
  std::vector<std::vector<std::string>> seen(kSize);
  std::vector<std::thread> threads;
  for (int rank = kSize - 1; rank >= 0; --rank) {
    threads.emplace_back([&, rank] {
      StoreClient store(client_options(port(), 30s));
      std::string value = detail::cat("host ", rank / 3, '\t');
      value.push_back('\0');
      seen[static_cast<std::size_t>(rank)] =
          detail::exchange_values(store, "x", rank, kSize, value, 30s);
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  for (int rank = 0; rank < kSize; ++rank) {
    ASSERT_EQ(seen[static_cast<std::size_t>(rank)].size(), static_cast<std::size_t>(kSize));
    for (int r = 0; r < kSize; ++r) {
      std::string expected = detail::cat("host ", r / 3, '\t');
      expected.push_back('\0');
      EXPECT_EQ(seen[static_cast<std::size_t>(rank)][static_cast<std::size_t>(r)], expected);
    }
  }
}

// Values whose table is compressed (store/exchange.hpp) come back as they
// were, every way a client reaches the store; compressed to more than the
// store's large answers, so that a relay hands its clients the table as a
// file (hex digits compress about twice).
TEST_P(StoreOperationsTest, AnExchangeOfLargeValuesComesBackWholeThroughItsCompressedTable) {
  constexpr int kSize = 8;
  const auto value_of = [](int rank) {
    std::mt19937_64 bits(static_cast<std::uint64_t>(rank));
    std::string value = detail::cat("rank ", rank, ":");
    while (value.size() < (std::size_t{64} << 10))
      value += "0123456789abcdef"[bits() % 16];
    return value;
  };
  std::vector<std::string> all;
  for (int rank = 0; rank < kSize; ++rank)
    all.push_back(value_of(rank));
  const std::string table = detail::encode_table(all);
  ASSERT_EQ(table.substr(0, 4), std::string(4, '\xff'));
  ASSERT_GE(table.size(), detail::kLargeAnswerBytes);
  std::vector<std::vector<std::string>> seen(kSize);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kSize; ++rank) {
    threads.emplace_back([&, rank] {
      auto store = client(30s);
      seen[static_cast<std::size_t>(rank)] =
          detail::exchange_values(*store, "big", rank, kSize, value_of(rank), 30s);
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  for (int rank = 0; rank < kSize; ++rank)
    EXPECT_EQ(seen[static_cast<std::size_t>(rank)], all) << "rank " << rank;
}

TEST(ExchangeTable, RepeatedValuesTravelOnce) {
  const std::vector<std::string> values(8, std::string(40, 'h'));
  const std::string table = detail::encode_table(values);
  EXPECT_EQ(table.size(), 4u + 4u + 40u + 4u + 12u);  // one value, one stretch
  EXPECT_EQ(detail::decode_table(table, 8), values);
  EXPECT_FALSE(detail::decode_table(table, 7));
  EXPECT_FALSE(detail::decode_table(table, 9));
  // The same value listed twice: not a table.
  std::string twice = detail::encode_table({"a", "b"});
  twice[13] = 'a';
  EXPECT_FALSE(detail::decode_table(twice, 2));
}

// A table of 256 KiB or more travels compressed where that makes it
// smaller (store/exchange.hpp): agents' entries shrink several times, random
// bytes travel as they are, and a frame that is cut, lengthened or says
// another size is refused.
TEST(ExchangeTable, LargeTablesTravelCompressedAndComeBackExactly) {
  std::vector<std::string> agents;  // as launch/node_rendezvous.cpp's entries
  std::mt19937_64 bits(7);
  std::size_t plain_bytes = 4 + 4 + 12;
  for (int node = 0; node < 8000; ++node) {
    agents.push_back(detail::cat(8, '\t', "node", 10000 + node, '\t', bits() % 4'000'000, '\t',
                                 node, "\t10.1.", node / 256, ".", node % 256, ":",
                                 20000 + bits() % 40000));
    plain_bytes += 4 + agents.back().size();
  }
  ASSERT_GE(plain_bytes, detail::kCompressTablesFrom);
  const std::string table = detail::encode_table(agents);
  EXPECT_EQ(table.substr(0, 4), std::string(4, '\xff'));
  EXPECT_LT(table.size() * 3, plain_bytes)
      << "8,000 agents' entries compressed to " << table.size();
  EXPECT_EQ(detail::decode_table(table, 8000), agents);
  EXPECT_FALSE(detail::decode_table(table, 7999));
  EXPECT_FALSE(detail::decode_table(table.substr(0, table.size() - 1), 8000));  // cut
  EXPECT_FALSE(detail::decode_table(table + '\0', 8000));                       // lengthened
  EXPECT_FALSE(detail::decode_table(table.substr(0, 4), 8000));                 // no frame

  std::vector<std::string> random;  // incompressible: as they are
  for (int rank = 0; rank < 8000; ++rank) {
    std::string value(40, '\0');
    for (char& c : value)
      c = static_cast<char>(bits());
    random.push_back(value);
  }
  const std::string plain = detail::encode_table(random);
  EXPECT_NE(plain.substr(0, 4), std::string(4, '\xff'));
  ASSERT_GE(plain.size(), detail::kCompressTablesFrom);
  EXPECT_EQ(plain.size(), 4u + 8000u * 44u + 4u + 12u);
  EXPECT_EQ(detail::decode_table(plain, 8000), random);

  // A small table is never compressed, and the marker before a plain
  // table's bytes is not a frame.
  const std::string small = detail::encode_table({"a", "b"});
  EXPECT_EQ(small.size(), 4u + 2u * 5u + 4u + 12u);
  EXPECT_FALSE(detail::decode_table(std::string(4, '\xff') + small, 2));
}

TEST(ExchangeTable, RanksNumberedHostByHostMakeARunPerHost) {
  std::vector<std::string> blocks;  // 3 hosts of 4 ranks, then the first again
  for (int rank = 0; rank < 14; ++rank)
    blocks.push_back(detail::cat("host ", rank < 12 ? rank / 4 : 0));
  const std::string table = detail::encode_table(blocks);
  // Hosts 0-2 of 4 ranks each (one stretch), then host 0 for 2 ranks.
  EXPECT_EQ(table.size(), 4u + 3u * (4u + 6u) + 4u + 2u * 12u);
  EXPECT_EQ(detail::decode_table(table, 14), blocks);
  // Every value distinct: one stretch for all.
  std::vector<std::string> distinct;
  for (int rank = 0; rank < 100; ++rank)
    distinct.push_back(detail::cat("rank ", rank));
  const std::string each = detail::encode_table(distinct);
  EXPECT_EQ(each.size() - 4 - 4 * 100 - 4, 12u * 1 + (6 * 10 + 7 * 90));
  EXPECT_EQ(detail::decode_table(each, 100), distinct);
  // Round robin: a stretch per round, and still the same values back.
  std::vector<std::string> dealt;
  for (int rank = 0; rank < 12; ++rank)
    dealt.push_back(detail::cat("host ", rank % 3));
  EXPECT_EQ(detail::decode_table(detail::encode_table(dealt), 12), dealt);
  // The values of {"a", "a", "b"}, then stretches: the encoding's, and
  // others that decode to the same values but are not the encoding.
  const std::string values = detail::encode_table({"a", "a", "b"}).substr(0, 14);
  const auto stretches = [&](const std::vector<std::array<std::uint32_t, 3>>& list) {
    std::string out = values;
    const auto put = [&out](std::uint32_t number) {
      for (int i = 0; i < 4; ++i)
        out.push_back(static_cast<char>((number >> (8 * i)) & 0xff));
    };
    put(static_cast<std::uint32_t>(list.size()));
    for (const auto& [first, per, count] : list) {
      put(first);
      put(per);
      put(count);
    }
    return out;
  };
  EXPECT_EQ(stretches({{0, 2, 1}, {1, 1, 1}}), detail::encode_table({"a", "a", "b"}));
  EXPECT_TRUE(detail::decode_table(stretches({{0, 2, 1}, {1, 1, 1}}), 3));
  EXPECT_FALSE(detail::decode_table(stretches({{0, 1, 1}, {0, 1, 1}, {1, 1, 1}}), 3))
      << "a run split";
  EXPECT_FALSE(detail::decode_table(stretches({{0, 2, 1}, {1, 0, 1}}), 2)) << "a run of none";
  EXPECT_FALSE(detail::decode_table(stretches({{0, 2, 1}, {1, 1, 0}}), 2)) << "no values";
  EXPECT_TRUE(detail::decode_table(stretches({{0, 1, 2}}), 2));  // {"a", "b"}
  EXPECT_FALSE(detail::decode_table(stretches({{0, 1, 1}, {1, 1, 1}}), 2)) << "a stretch split";
  EXPECT_FALSE(detail::decode_table(stretches({{0, 2, 1}, {1, 0x80000000u, 2}}), 3))
      << "more participants than the table holds";
}

TEST_P(StoreOperationsTest, AnExchangeWithAParticipantMissingTimesOutAndTheKeysSayWho) {
  auto store = client();
  EXPECT_THROW(detail::exchange_values(*store, "x", 0, 2, "mine", 300ms), Timeout);
  EXPECT_TRUE(store->check({detail::exchanged_key("x", 0)}));
  EXPECT_FALSE(store->check({detail::exchanged_key("x", 1)}));
}

TEST_P(StoreOperationsTest, HundredsOfClientsThousandsOfOperationsNothingLost) {
  constexpr int kClients = 256;
  constexpr int kOperations = 1000;  // per client: 250 rounds of set, add, get, check
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      try {
        StoreClient store(client_options(port(), 60s));
        for (int i = 0; i < kOperations / 4; ++i) {
          const std::string key = detail::cat("c", c, "/", i);
          store.set(key, std::to_string(i));
          store.add("counter", 1);
          if (store.get(key, 10s) != std::to_string(i)) ++failures;
          if (!store.check({key})) ++failures;
        }
      } catch (const std::exception& error) {
        ADD_FAILURE() << "client " << c << ": " << error.what();
        ++failures;
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  EXPECT_EQ(failures, 0);
  auto store = client();
  EXPECT_EQ(store->get("counter", 1s), std::to_string(kClients * kOperations / 4));
  EXPECT_EQ(store->num_keys(), kClients * kOperations / 4 + 1);
}

TEST_F(StoreTest, ThousandsOfConcurrentConnections) {
  detail::raise_open_file_limit();
  constexpr int kConnections = 2000;
  std::vector<detail::Fd> connections;
  for (int i = 0; i < kConnections; ++i)
    connections.push_back(raw_connection());
  EXPECT_TRUE(connections_become(kConnections));
  // Every one of them parked in a wait at once, then woken by one set.
  const std::string wait = wire::Writer()
                               .u8(static_cast<std::uint8_t>(wire::Op::wait))
                               .strings({"go", "also"})
                               .i64(30000)
                               .frame();
  std::string error;
  for (const detail::Fd& fd : connections) {
    ASSERT_TRUE(
        detail::send_all(fd.get(), wait.data(), wait.size(), detail::Clock::now() + 5s, &error))
        << error;
  }
  auto store = client();
  EXPECT_FALSE(store->check({"go"}));  // answered after every wait above was parked
  store->set("go", "1");
  store->set("also", "1");
  int woken = 0;
  for (const detail::Fd& fd : connections) {
    char answer[5];
    woken +=
        detail::recv_all(fd.get(), answer, sizeof(answer), detail::Clock::now() + 10s, &error) &&
        answer[4] == static_cast<char>(wire::Status::ok);
  }
  EXPECT_EQ(woken, kConnections);
}

// Requests that arrive together with end-of-file are all carried out.
TEST_F(StoreTest, RequestsSentBeforeEndOfFileAllCount) {
  detail::Fd fd = raw_connection();
  std::string requests;
  for (int i = 0; i < 300; ++i) {
    requests += wire::Writer()
                    .u8(static_cast<std::uint8_t>(wire::Op::set))
                    .bytes(detail::cat("k", i))
                    .bytes("v")
                    .frame();
  }
  std::string error;
  ASSERT_TRUE(detail::send_all(fd.get(), requests.data(), requests.size(),
                               detail::Clock::now() + 5s, &error));
  shutdown(fd.get(), SHUT_WR);
  EXPECT_TRUE(closed_by_server(fd.get()));
  EXPECT_EQ(client()->num_keys(), 300);
}

// Connections that GET one large value as it is set are answered from one
// copy of it: each gets every byte, in order with its other answers, however
// slowly it reads; and a value set again is what later GETs see.
TEST_F(StoreTest, ManyGetsOfOneLargeValueAreAnsweredWholeAndInOrder) {
  constexpr int kClients = 16;
  std::string table(600000, '\0');
  for (std::size_t i = 0; i < table.size(); ++i)
    table[i] = static_cast<char>('a' + i % 26);
  const auto get = [](const std::string& key) {
    return wire::Writer()
        .u8(static_cast<std::uint8_t>(wire::Op::get))
        .bytes(key)
        .i64(10000)
        .frame();
  };
  client()->set("small", "s");
  std::vector<detail::Fd> clients;
  const std::string requests = get("table") + get("small") + get("table");
  for (int c = 0; c < kClients; ++c) {
    clients.push_back(raw_connection());
    std::string error;
    ASSERT_TRUE(detail::send_all(clients.back().get(), requests.data(), requests.size(),
                                 detail::Clock::now() + 5s, &error))
        << error;
  }
  ASSERT_TRUE(waiting_becomes(kClients));
  client()->set("table", table);
  std::this_thread::sleep_for(100ms);  // the answers fill the sockets; the rest waits
  const auto value_of = [](const std::string& payload) {
    wire::Reader reader(std::string_view(payload).substr(1));
    return std::string(reader.bytes());
  };
  for (int c = 0; c < kClients; ++c) {
    for (const std::string& expected : {table, std::string("s"), table}) {
      std::string payload;
      std::string error;
      ASSERT_TRUE(detail::recv_frame(clients[c].get(), &payload, 1 << 20,
                                     detail::Clock::now() + 10s, &error))
          << "client " << c << ": " << error;
      ASSERT_EQ(static_cast<wire::Status>(payload[0]), wire::Status::ok);
      EXPECT_TRUE(value_of(payload) == expected) << "client " << c;
    }
  }
  std::string changed = table;
  changed[12345] = '!';
  client()->set("table", changed);
  EXPECT_TRUE(client()->get("table", 1s) == changed);
}

// GET_VERSIONED (a relay's GET): the value with its version after it, small
// or large (sent from the shared copy, the version after it); only
// "unchanged" while the version is the one named; the value again once the
// key changed, even to the same bytes.
TEST_F(StoreTest, AVersionedGetSendsAValueOnlyWhenItChanged) {
  const auto ask = [this](detail::Fd& connection, const std::string& key, std::int64_t known) {
    const std::string request = wire::Writer()
                                    .u8(static_cast<std::uint8_t>(wire::Op::get_versioned))
                                    .bytes(key)
                                    .i64(10000)
                                    .i64(known)
                                    .frame();
    std::string error;
    std::string payload;
    EXPECT_TRUE(detail::send_all(connection.get(), request.data(), request.size(),
                                 detail::Clock::now() + 5s, &error))
        << error;
    EXPECT_TRUE(
        detail::recv_frame(connection.get(), &payload, 1 << 21, detail::Clock::now() + 10s, &error))
        << error;
    return payload;
  };
  struct Versioned {
    std::string value;
    std::int64_t version = 0;
  };
  const auto read = [](const std::string& payload) {
    EXPECT_EQ(static_cast<wire::Status>(payload.at(0)), wire::Status::ok);
    wire::Reader reader(std::string_view(payload).substr(1));
    Versioned out;
    out.value = std::string(reader.bytes());
    out.version = reader.i64();
    reader.expect_end();
    return out;
  };
  const std::string unchanged(1, static_cast<char>(wire::Status::unchanged));
  detail::Fd connection = raw_connection();
  for (const std::string& value : {std::string("small"), std::string(300000, 'L')}) {
    client()->set("k", value);
    const Versioned first = read(ask(connection, "k", 0));
    EXPECT_TRUE(first.value == value);
    EXPECT_NE(first.version, 0);
    EXPECT_EQ(ask(connection, "k", first.version), unchanged);
    EXPECT_TRUE(read(ask(connection, "k", first.version + 1)).value == value) << "another version";
    client()->set("k", value);
    const Versioned again = read(ask(connection, "k", first.version));
    EXPECT_TRUE(again.value == value);
    EXPECT_NE(again.version, first.version) << "set again, to the same bytes";
  }
  // One that waits is answered when the key is set, with its version.
  detail::Fd waiting = raw_connection();
  std::thread set_later([this] {
    std::this_thread::sleep_for(100ms);
    client()->set("later", "v");
  });
  EXPECT_EQ(read(ask(waiting, "later", 0)).value, "v");
  set_later.join();
}

// A multiplexed connection (Op::multiplex, what a relay speaks upstream):
// every answer carries its request's tag and comes when it can, a wait
// holding nothing behind it; a wait's timeout and a large value come
// tagged too, and a connection that ends takes its waits with it.
TEST_F(StoreTest, AMultiplexedConnectionAnswersEachTagWhenItCan) {
  detail::Fd connection = raw_connection();
  const auto send = [&](const std::string& frame) {
    std::string error;
    ASSERT_TRUE(detail::send_all(connection.get(), frame.data(), frame.size(),
                                 detail::Clock::now() + 5s, &error))
        << error;
  };
  const auto next = [&] {  // the next answer: its tag, and what follows it
    std::string payload;
    std::string error;
    EXPECT_TRUE(
        detail::recv_frame(connection.get(), &payload, 1 << 21, detail::Clock::now() + 10s, &error))
        << error;
    wire::Reader reader(payload);
    const std::uint32_t tag = reader.u32();
    return std::make_pair(tag, payload.substr(wire::kTagBytes));
  };
  const auto tagged = [](std::uint32_t tag, wire::Writer request) {
    return wire::tagged(tag, request.frame());
  };
  const auto op = [](wire::Op what) {
    wire::Writer writer;
    writer.u8(static_cast<std::uint8_t>(what));
    return writer;
  };
  send(op(wire::Op::multiplex).frame());
  std::string payload;
  std::string error;
  ASSERT_TRUE(
      detail::recv_frame(connection.get(), &payload, 64, detail::Clock::now() + 5s, &error));
  EXPECT_EQ(payload, std::string(1, '\0')) << "its own answer has no tag";
  const std::string ok(1, '\0');
  send(tagged(7, op(wire::Op::wait).strings({"later"}).i64(10000)) +
       tagged(8, op(wire::Op::set).bytes("now").bytes("1")) +
       tagged(9, op(wire::Op::get).bytes("never").i64(50)) +
       tagged(10, op(wire::Op::get).bytes("now").i64(0)));
  EXPECT_EQ(next(), std::make_pair(8u, ok)) << "past the wait before it";
  EXPECT_EQ(next(), std::make_pair(10u, ok + wire::Writer().bytes("1").fields()));
  const auto timed_out = next();
  EXPECT_EQ(timed_out.first, 9u);
  EXPECT_EQ(static_cast<wire::Status>(timed_out.second.at(0)), wire::Status::timeout);
  EXPECT_TRUE(waiting_becomes(1));
  const std::string large(300000, 'L');
  client()->set("large", large);
  send(tagged(11, op(wire::Op::get).bytes("large").i64(0)));
  EXPECT_EQ(next(), std::make_pair(11u, ok + wire::Writer().bytes(large).fields()));
  client()->set("later", "");
  EXPECT_EQ(next(), std::make_pair(7u, ok));
  send(tagged(12, op(wire::Op::wait).strings({"never"}).i64(60000)));
  EXPECT_TRUE(waiting_becomes(1));
  connection.reset();
  EXPECT_TRUE(waiting_becomes(0)) << "its wait went with it";
  expect_server_healthy();
}

// A timeout too long to represent waits (it saturates), and a sum past
// 64 bits is an error naming the key, not undefined behaviour.
TEST_P(StoreOperationsTest, HugeTimeoutsWaitAndAnOverflowingAddIsRefused) {
  auto store = client();
  auto waiting = client();
  std::thread set_later([this] {
    std::this_thread::sleep_for(100ms);
    client()->set("k", "v");
  });
  EXPECT_EQ(waiting->get("k", std::chrono::milliseconds::max()), "v");
  set_later.join();
  waiting->wait({"k"}, std::chrono::hours(24 * 365 * 300));
  EXPECT_EQ(store->add("n", std::numeric_limits<std::int64_t>::max()),
            std::numeric_limits<std::int64_t>::max());
  try {
    store->add("n", 1);
    ADD_FAILURE() << "an add past INT64_MAX succeeded";
  } catch (const StoreError& error) {
    EXPECT_NE(std::string(error.what()).find("key 'n'"), std::string::npos) << error.what();
  }
  EXPECT_EQ(store->add("n", 0), std::numeric_limits<std::int64_t>::max());  // unchanged
}

// A client that should prove itself with MUNGE but finds no munged (a
// Slurm without it) still reaches a store on its own host, which needs no
// credential from its own user.
TEST_F(StoreTest, NoMungedIsNoObstacleOnTheSameHost) {
  setenv("COHORT_MUNGE_SOCKET", "/nonexistent/munge.socket", 1);
  StoreClient::Options options = client_options(server_->port());
  options.munge = true;
  StoreClient store(options);
  store.set("k", "v");
  EXPECT_EQ(store.get("k", 1s), "v");
  unsetenv("COHORT_MUNGE_SOCKET");
}

// Guards before the handshake: a peer that connects and says nothing is
// closed after the handshake deadline, and idle ones never hold more than
// the cap of pending handshakes: a newer connection takes the oldest's
// slot, and a real client gets in at once.
TEST_F(StoreTest, SilentPeersAreClosedAndCannotCrowdOthersOut) {
  StoreServer::Options options;
  options.token = kToken;
  options.handshake_timeout = 300ms;
  options.max_pending_handshakes = 4;
  server_ = std::make_unique<StoreServer>(options);
  std::vector<detail::Fd> silent;
  std::string error;
  for (int i = 0; i < 10; ++i) {
    silent.push_back(
        detail::connect_tcp("127.0.0.1", server_->port(), detail::Clock::now() + 5s, &error));
    ASSERT_TRUE(silent.back().valid()) << error;
  }
  EXPECT_LE(server_->connection_count(), 4u);
  auto store = client();  // gets in once the silent ones are closed
  store->set("k", "v");
  EXPECT_EQ(store->get("k", 1s), "v");
  for (const detail::Fd& fd : silent)
    EXPECT_TRUE(closed_by_server(fd.get()));
  EXPECT_TRUE(connections_become(1));
}

// 2,000 silent connections from another address (another namespace in the
// probe; 127.3.0.1 here, an address no other test binds: these 2,000 ports
// there are taken while it runs) with a handshake deadline longer than the client's
// whole patience: the job's client is served at once all the same, for
// the silent address holds the most slots and gives them up first.
TEST_F(StoreTest, ASilentFloodFromOneAddressDelaysNoOtherHandshake) {
  StoreServer::Options options;
  options.host = "0.0.0.0";
  options.token = kToken;
  options.handshake_timeout = 120s;
  server_ = std::make_unique<StoreServer>(options);
  std::vector<detail::Fd> silent;
  for (int i = 0; i < 2000; ++i) {
    detail::Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl(0x7f030001);  // 127.3.0.1
    ASSERT_EQ(bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(static_cast<std::uint16_t>(server_->port()));
    ASSERT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
    silent.push_back(std::move(fd));
  }
  auto store = client(10s);  // within 10 s, with every silent peer still there
  store->set("k", "v");
  EXPECT_EQ(store->get("k", 1s), "v");
  EXPECT_LE(server_->connection_count(), options.max_pending_handshakes + 1);
}

// The process hosting the store leaves only once its peers are done with it
// (the race where rank 0 exits while another rank still waits for the answer
// to the last barrier); a killed peer never keeps it waiting.
TEST_F(StoreTest, WaitUntilIdleWaitsForConnectedClientsOnly) {
  EXPECT_TRUE(server_->wait_until_idle(0ms));
  auto store = client();
  EXPECT_FALSE(server_->wait_until_idle(50ms));
  std::thread leaver([&] {
    std::this_thread::sleep_for(100ms);
    store.reset();
  });
  EXPECT_TRUE(server_->wait_until_idle(10s));
  leaver.join();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    StoreClient doomed(client_options(server_->port(), 10s));
    pause();
    _exit(0);
  }
  ASSERT_TRUE(connections_become(1));
  kill(child, SIGKILL);
  EXPECT_TRUE(server_->wait_until_idle(10s));
  waitpid(child, nullptr, 0);
}

// The serving process's own client (connect_in_process) is a connection
// like any other: counted while open, and told, naming the store, when the
// server is gone.
TEST_F(StoreTest, AClientInTheServingProcessCountsAndLearnsOfItsEnd) {
  auto own = server_->connect_in_process(2s);
  own->set("k", "v");
  EXPECT_EQ(own->get("k", 1s), "v");
  EXPECT_EQ(server_->connection_count(), 1u);
  const std::string address = own->address();
  EXPECT_EQ(address, "127.0.0.1:" + std::to_string(server_->port()));
  server_.reset();
  try {
    (void)own->get("k", 1s);
    ADD_FAILURE() << "a GET after the server was gone succeeded";
  } catch (const StoreError& error) {
    EXPECT_NE(std::string(error.what()).find("lost the store at " + address), std::string::npos)
        << error.what();
  }
}

// A server that stops answering (its cable cut) is lost after the WAIT's
// own timeout and the client's grace (Options::server_grace, or
// set_server_grace() on a connection already made), and the error says
// how long it waited.
TEST_F(StoreTest, AServerThatGoesQuietIsLostAfterTheWaitAndTheGrace) {
  test::Cable cable(server_->port());
  StoreClient::Options options;
  options.port = cable.port();
  options.token = kToken;
  options.timeout = 100ms;
  options.server_grace = 200ms;
  StoreClient graced(options);
  options.server_grace = 5s;
  StoreClient regraced(options);
  regraced.set_server_grace(300ms);
  graced.set("k", "v");
  regraced.set("k", "w");
  cable.cut();
  const std::string address = "127.0.0.1:" + std::to_string(cable.port());
  for (auto& [client, says] : {std::pair{&graced, " gave no answer in 500 ms"},
                               {&regraced, " gave no answer in 600 ms"}}) {
    try {
      client->wait({"never"}, 300ms);
      ADD_FAILURE() << "a WAIT through a cut cable returned";
    } catch (const StoreError& error) {
      EXPECT_EQ(std::string(error.what()), "lost the store at " + address + ": it" + says);
    }
  }
}

TEST_P(StoreOperationsTest, PrefixViewsDoNotClash) {
  std::shared_ptr<Store> base = client();
  PrefixStore first("attempt0", base);
  PrefixStore second("attempt1", base);
  first.set("rank0", "a");
  second.set("rank0", "b");
  EXPECT_EQ(first.get("rank0", 1s), "a");
  EXPECT_EQ(second.get("rank0", 1s), "b");
  EXPECT_EQ(base->get("attempt0/rank0", 1s), "a");
  EXPECT_EQ(first.add("n", 2), 2);
  EXPECT_TRUE(second.check({"rank0"}));
  EXPECT_FALSE(second.check({"n"}));
  first.wait({"rank0", "n"}, 1s);
  EXPECT_TRUE(first.delete_key("n"));
  EXPECT_EQ(first.num_keys(), 2);  // the whole store: attempt0/rank0, attempt1/rank0
}

// PyTorch's TCPStore protocol on a second port (torch_wire.hpp): the raw
// bytes of Debian's 1.13 client, its keys kept apart from cohort's, and a
// query the store cannot serve, told once, without harm to the others.
class TorchPortTest : public StoreTest {
 protected:
  void SetUp() override { start_server(0); }
  detail::Fd torch_connection() {
    std::string error;
    detail::Fd fd = detail::connect_tcp("127.0.0.1", (relay_ ? relay_ : server_)->torch_port(),
                                        detail::Clock::now() + 5s, &error);
    EXPECT_TRUE(fd.valid()) << error;
    return fd;
  }
  static void send(int fd, const std::string& bytes) {
    std::string error;
    EXPECT_TRUE(detail::send_all(fd, bytes.data(), bytes.size(), detail::Clock::now() + 5s, &error))
        << error;
  }
  static std::string receive(int fd, std::size_t size) {
    std::string out(size, '\0');
    std::string error;
    EXPECT_TRUE(detail::recv_all(fd, out.data(), size, detail::Clock::now() + 5s, &error)) << error;
    return out;
  }
  static std::string u64(std::uint64_t value) {
    std::string out;
    for (int i = 0; i < 8; ++i)
      out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
    return out;
  }
  static std::string text(const std::string& value) { return u64(value.size()) + value; }
  static std::string validate() { return std::string("\x00\xCE\xF7\x85\x3C", 5); }
  // A node's relay of server_, with a TCPStore port of its own: where
  // torch_connection() connects once it is there.
  void start_relay() {
    StoreServer::Options options;
    options.token = kToken;
    options.torch_port = 0;
    options.relay_to = StoreServer::Options::Upstream{"127.0.0.1", server_->port(), false, "", 10s};
    relay_ = std::make_unique<StoreServer>(options);
  }
  std::unique_ptr<StoreServer> relay_;
};

// The flood a probe stopped jobs with: 64 unauthenticated connections each
// announce a CHECK of 8,388,608 keys (what the server's real 64 MiB limit
// allows), then send a byte at a time. The store keeps only what arrived
// (it allocated 256 MB per connection ahead, then re-read each request from
// its start at every byte) and goes on serving the job's own client.
TEST_F(TorchPortTest, AnnouncedListsCostOnlyTheBytesThatArrived) {
  const auto resident = [] {
    std::ifstream statm("/proc/self/statm");
    long pages = 0;
    statm >> pages >> pages;
    return pages * sysconf(_SC_PAGESIZE);
  };
  StoreServer::Options options;
  options.host = "127.0.0.1";
  options.token = kToken;
  options.torch_port = 0;  // and the default, real, request limit
  server_ = std::make_unique<StoreServer>(options);
  const long before = resident();
  std::vector<detail::Fd> flood;
  for (int i = 0; i < 64; ++i) {
    flood.push_back(torch_connection());
    send(flood.back().get(), std::string(1, '\x04') + u64(8388608));
  }
  auto store = client();
  for (int round = 0; round < 40; ++round) {
    for (detail::Fd& fd : flood)
      send(fd.get(), std::string(1, '\0'));  // every 8: one more (empty) key
    store->set("alive", std::to_string(round));
  }
  EXPECT_EQ(store->get("alive", 10s), "39");
  EXPECT_EQ(server_->connection_count(), 65u);  // none of them was dropped: they broke no rule
  EXPECT_LT(resident() - before, 64L << 20);
}

// Many peers each sending most of a large SET (under the per-request
// limit) cannot together exhaust the server: past max_pending_bytes the
// connection holding the most is closed, and the others, and a client that
// comes after, are served.
TEST_F(TorchPortTest, ManyLargeRequestsUnderWayAreBoundedTogether) {
  StoreServer::Options options;
  options.host = "127.0.0.1";
  options.token = kToken;
  options.torch_port = 0;
  options.max_frame_bytes = 4 << 20;
  options.max_pending_bytes = 3 << 20;
  server_ = std::make_unique<StoreServer>(options);
  const auto set_under_way = [](std::size_t size, std::size_t sent) {
    return std::string(1, '\x00') + text("/big") + u64(size) + std::string(sent, 'v');
  };
  std::vector<detail::Fd> senders;
  for (int i = 0; i < 3; ++i) {
    senders.push_back(torch_connection());
    send(senders.back().get(), set_under_way(400 << 10, 300 << 10));
  }
  auto store = client();
  store->set("alive", "1");  // the three are in: 900 KiB of 3 MiB
  EXPECT_EQ(server_->connection_count(), 4u);
  // Past 3 MiB together this one holds more than 2 MiB: the most.
  detail::Fd largest = torch_connection();
  std::string error;
  detail::send_all(largest.get(), set_under_way(3 << 20, 3 << 20).data(), (3 << 20) + 21,
                   detail::Clock::now() + 5s, &error);  // fails once the server closes it
  EXPECT_TRUE(closed_by_server(largest.get()));
  EXPECT_EQ(store->get("alive", 10s), "1");
  EXPECT_EQ(server_->connection_count(), 4u);
  // One of the three finishes its SET; a torch GET (1.13's waits) reads it.
  send(senders[0].get(), std::string(100 << 10, 'v'));
  detail::Fd reader = torch_connection();
  send(reader.get(), std::string(1, '\x02') + text("/big"));
  EXPECT_EQ(receive(reader.get(), 8 + (400 << 10)), u64(400 << 10) + std::string(400 << 10, 'v'));
}

TEST_F(TorchPortTest, TorchClientsWorkInAKeySpaceOfTheirOwn) {
  ASSERT_GT(server_->torch_port(), 0);
  ASSERT_NE(server_->torch_port(), server_->port());
  auto cohort = client();
  cohort->set("agents/stop", "secret");
  detail::Fd torch = torch_connection();
  // WAIT for a key nobody set yet parks; a SET from another torch client wakes it.
  send(torch.get(), std::string(1, '\x05') + u64(1) + text("/k"));
  detail::Fd other = torch_connection();
  send(other.get(), std::string(1, '\x00') + text("/k") + text("value"));
  EXPECT_EQ(receive(torch.get(), 1), std::string(1, '\x00'));  // STOP_WAITING
  send(torch.get(), std::string(1, '\x02') + text("/k"));      // GET
  EXPECT_EQ(receive(torch.get(), 13), text("value"));
  send(torch.get(), std::string(1, '\x03') + text("/n") + u64(5));  // ADD
  EXPECT_EQ(receive(torch.get(), 8), u64(5));
  // cohort's own keys are out of reach: CHECK says no, GET of them is refused.
  send(torch.get(), std::string(1, '\x04') + u64(1) + text("agents/stop"));
  EXPECT_EQ(receive(torch.get(), 1), std::string(1, '\x01'));  // NOT_READY
  send(torch.get(), std::string(1, '\x06'));                   // NUM_KEYS: only its own
  EXPECT_EQ(receive(torch.get(), 8), u64(2));
  // And torch's keys live under "torch:" for cohort's clients.
  EXPECT_EQ(cohort->get("torch:/k", 1s), "value");
  EXPECT_EQ(cohort->get("agents/stop", 1s), "secret");
  send(torch.get(), std::string(1, '\x02') + text("agents/stop"));
  EXPECT_TRUE(closed_by_server(torch.get()));
  expect_server_healthy();
}

TEST_F(TorchPortTest, AQueryItCannotServeIsToldOnceAndTheOthersGoOn) {
  std::vector<std::string> told;
  std::mutex mutex;
  StoreServer::Options options;
  options.torch_port = 0;
  options.on_unservable = [&](const std::string& why) {
    const std::lock_guard<std::mutex> lock(mutex);
    told.push_back(why);
  };
  server_ = std::make_unique<StoreServer>(options);
  detail::Fd watch = torch_connection();
  send(watch.get(), std::string(1, '\x07') + text("/k"));  // 1.13's WATCH_KEY: not served
  EXPECT_TRUE(closed_by_server(watch.get()));
  detail::Fd newest = torch_connection();
  send(newest.get(), validate() + std::string(1, '\x63'));  // a query from the future
  EXPECT_TRUE(closed_by_server(newest.get()));
  detail::Fd torch = torch_connection();
  send(torch.get(), std::string(1, '\x03') + text("/n") + u64(1));
  EXPECT_EQ(receive(torch.get(), 8), u64(1));
  const std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(told.size(), 1u);  // once per server: the job ends at the first
  EXPECT_NE(told[0].find("WATCH_KEY"), std::string::npos) << told[0];
  EXPECT_NE(told[0].find("PyTorch 1.13 or earlier"), std::string::npos) << told[0];
}

// A relay's TCPStore port refuses what the store's own would, and says so
// the same way (the agent then ends the job).
TEST_F(TorchPortTest, ARelaysTorchPortTellsOfAQueryItCannotServe) {
  std::vector<std::string> told;
  std::mutex mutex;
  StoreServer::Options options;
  options.token = kToken;
  options.torch_port = 0;
  options.relay_to = StoreServer::Options::Upstream{"127.0.0.1", server_->port(), false, "", 10s};
  options.on_unservable = [&](const std::string& why) {
    const std::lock_guard<std::mutex> lock(mutex);
    told.push_back(why);
  };
  relay_ = std::make_unique<StoreServer>(options);
  detail::Fd newest = torch_connection();
  send(newest.get(), validate() + std::string(1, '\x63'));  // a query from the future
  EXPECT_TRUE(closed_by_server(newest.get()));
  detail::Fd torch = torch_connection();
  send(torch.get(), validate() + std::string(1, '\x04') + text("/n") + u64(1));  // ADD
  EXPECT_EQ(receive(torch.get(), 8), u64(1));
  const std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_NE(told[0].find("(PyTorch 2.1 or later) sent query type 99"), std::string::npos)
      << told[0];
}

// What the relay's TCPStore port is for: a node's PyTorch clients cost the
// job's store one connection (the relay's, their one wait on it), not one
// each.
TEST_F(TorchPortTest, ANodesTorchClientsCostTheStoreOneConnectionThroughItsRelay) {
  start_relay();
  std::vector<detail::Fd> clients;
  for (int i = 0; i < 16; ++i) {
    clients.push_back(torch_connection());
    send(clients.back().get(), validate() + std::string(1, '\x04') + text("/n") + u64(1));
    EXPECT_EQ(receive(clients.back().get(), 8).size(), 8u);                     // ADD's sum
    send(clients.back().get(), std::string(1, '\x06') + u64(1) + text("/go"));  // WAIT
  }
  EXPECT_TRUE(waiting_becomes(1));
  EXPECT_EQ(server_->connection_count(), 1u);
  auto cohort = client();
  EXPECT_EQ(cohort->add("torch:/n", 0), 16);  // every ADD counted once
  cohort->set("torch:/go", "1");
  for (const detail::Fd& fd : clients)
    EXPECT_EQ(receive(fd.get(), 1), std::string(1, '\x00'));  // STOP_WAITING
}

// PyTorch 2.1-and-later's dialect (VALIDATE first, queries renumbered), with
// what 2.6's client does not send yet (queues, LIST_KEYS, BARRIER) that
// later ones do: on the store's own TCPStore port, and through a node's
// relay (its TCPStore port), which carries each query to the store in
// cohort's protocol; the answers must be the same.
class Torch2PortTest : public TorchPortTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    TorchPortTest::SetUp();
    if (GetParam()) start_relay();
  }
  detail::Fd torch2_connection() {
    detail::Fd fd = torch_connection();
    send(fd.get(), validate() + std::string(1, '\x0d') + u32(77));  // VALIDATE, PING
    EXPECT_EQ(receive(fd.get(), 4), u32(77));
    return fd;
  }
  static std::string u32(std::uint32_t value) { return u64(value).substr(0, 4); }
  static std::string keys(const std::vector<std::string>& names) {
    std::string out = u64(names.size());
    for (const std::string& name : names)
      out += text(name);
    return out;
  }
};

TEST_P(Torch2PortTest, EveryQueryAnswersAsPyTorchsOwnServer) {
  detail::Fd a = torch2_connection();
  detail::Fd b = torch2_connection();
  send(a.get(), std::string(1, '\x01') + text("/k") + text("v"));  // SET
  send(a.get(), std::string(1, '\x03') + text("/k"));              // GET
  EXPECT_EQ(receive(a.get(), 9), text("v"));
  send(a.get(), std::string(1, '\x03') + text("/missing"));  // GET of a missing key: empty
  EXPECT_EQ(receive(a.get(), 8), u64(0));
  send(a.get(), std::string(1, '\x02') + text("/k") + text("v") + text("w"));  // COMPARE_SET
  EXPECT_EQ(receive(a.get(), 9), text("w"));
  send(a.get(), std::string(1, '\x04') + text("/n") + u64(-3));  // ADD
  EXPECT_EQ(receive(a.get(), 8), u64(-3));
  send(a.get(), std::string(1, '\x09') + text("/log") + text("ab"));  // APPEND twice
  send(a.get(), std::string(1, '\x09') + text("/log") + text("cd"));
  send(a.get(), std::string(1, '\x0b') + u64(2) + text("/x") + text("1") + text("/y") +
                    text("22"));                                       // MULTI_SET
  send(a.get(), std::string(1, '\x0a') + keys({"/log", "/x", "/y"}));  // MULTI_GET
  EXPECT_EQ(receive(a.get(), 8 + 4 + 8 + 1 + 8 + 2), text("abcd") + text("1") + text("22"));
  send(a.get(), std::string(1, '\x05') + keys({"/x", "/nope"}));  // CHECK
  EXPECT_EQ(receive(a.get(), 1), std::string(1, '\x01'));         // NOT_READY
  send(a.get(), std::string(1, '\x07'));                          // GETNUMKEYS
  EXPECT_EQ(receive(a.get(), 8), u64(5));                         // k n log x y
  send(a.get(), std::string(1, '\x08') + text("/x"));             // DELETE_KEY
  EXPECT_EQ(receive(a.get(), 8), u64(1));
  send(a.get(), std::string(1, '\x11'));  // LIST_KEYS
  const std::int64_t count = static_cast<std::int64_t>(receive(a.get(), 8)[0]);
  EXPECT_EQ(count, 4);
  std::set<std::string> listed;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::string size = receive(a.get(), 8);
    listed.insert(receive(a.get(), static_cast<std::size_t>(size[0])));
  }
  EXPECT_EQ(listed, (std::set<std::string>{"/k", "/n", "/log", "/y"}));
  // A WAIT parks until another client sets the key; many wait at once.
  std::vector<detail::Fd> waiters;
  for (int i = 0; i < 16; ++i) {
    waiters.push_back(torch2_connection());
    send(waiters.back().get(), std::string(1, '\x06') + keys({"/go", "/k"}));
  }
  send(b.get(), std::string(1, '\x01') + text("/go") + text("1"));
  for (const detail::Fd& waiter : waiters)
    EXPECT_EQ(receive(waiter.get(), 1), std::string(1, '\x00'));  // STOP_WAITING
  expect_server_healthy();
}

TEST_P(Torch2PortTest, ACanceledWaitAnswersCanceledAndTheClientGoesOn) {
  detail::Fd a = torch2_connection();
  send(a.get(), std::string(1, '\x06') + keys({"/never"}));  // WAIT
  send(a.get(), std::string(1, '\x0c'));                     // its timeout: CANCEL_WAIT
  EXPECT_EQ(receive(a.get(), 1), std::string(1, '\x01'));    // WAIT_CANCELED
  detail::Fd b = torch2_connection();
  send(b.get(), std::string(1, '\x01') + text("/never") + text("x"));
  send(a.get(), std::string(1, '\x04') + text("/n") + u64(1));  // the next request: no stale answer
  EXPECT_EQ(receive(a.get(), 8), u64(1));
  // A wait answered before the cancel arrived: STOP_WAITING, then WAIT_CANCELED.
  send(a.get(), std::string(1, '\x06') + keys({"/never"}));
  EXPECT_EQ(receive(a.get(), 1), std::string(1, '\x00'));
  send(a.get(), std::string(1, '\x0c'));
  EXPECT_EQ(receive(a.get(), 1), std::string(1, '\x01'));
  // A client that leaves mid-wait leaves nothing behind.
  {
    detail::Fd gone = torch2_connection();
    send(gone.get(), std::string(1, '\x06') + keys({"/later"}));
  }
  if (!GetParam()) {
    EXPECT_TRUE(connections_become(2));  // a relay's wait ends with its key
  }
  send(b.get(), std::string(1, '\x01') + text("/later") + text("x"));
  send(b.get(), std::string(1, '\x04') + text("/n") + u64(1));
  EXPECT_EQ(receive(b.get(), 8), u64(2));
}

// Between attempts the agent forgets PyTorch's keys (2.x no longer
// prefixes them by attempt); cohort's own stay.
TEST_P(Torch2PortTest, ForgettingTorchKeysLeavesCohortsOwn) {
  auto cohort = client();
  cohort->set("agents/stop", "kept");
  detail::Fd a = torch2_connection();
  send(a.get(), std::string(1, '\x01') + text("/default_pg/0") + text("old address"));
  send(a.get(), std::string(1, '\x0e') + text("/q") + text("old item"));
  send(a.get(), std::string(1, '\x07'));  // GETNUMKEYS: the SET was served before it
  EXPECT_EQ(receive(a.get(), 8), u64(1));
  server_->forget_torch_keys();
  send(a.get(), std::string(1, '\x05') + keys({"/default_pg/0"}));  // CHECK
  EXPECT_EQ(receive(a.get(), 1), std::string(1, '\x01'));           // NOT_READY
  send(a.get(), std::string(1, '\x10') + text("/q"));               // QUEUE_LEN
  EXPECT_EQ(receive(a.get(), 8), u64(0));
  EXPECT_EQ(cohort->get("agents/stop", 1s), "kept");
}

TEST_P(Torch2PortTest, QueuesWakeOneWaiterPerItemAndBarriersWaitForTheWorld) {
  detail::Fd a = torch2_connection();
  detail::Fd b = torch2_connection();
  detail::Fd c = torch2_connection();
  // Two blocking pops: WAIT on the queue's name, then QUEUE_POP.
  send(a.get(), std::string(1, '\x06') + keys({"/q"}));
  send(b.get(), std::string(1, '\x06') + keys({"/q"}));
  // Both wait before the item comes (else each would find it there); a
  // relay's two are one request, the second going up after the first.
  ASSERT_TRUE(waiting_becomes(GetParam() ? 1 : 2));
  send(c.get(), std::string(1, '\x0e') + text("/q") + text("one"));  // QUEUE_PUSH
  send(c.get(), std::string(1, '\x10') + text("/q"));                // QUEUE_LEN
  EXPECT_EQ(receive(c.get(), 8), u64(1));
  // Exactly one waiter is woken for one item (through a relay, maybe both:
  // the one that then finds the queue empty waits again for its next item).
  pollfd both[2] = {{a.get(), POLLIN, 0}, {b.get(), POLLIN, 0}};
  if (GetParam()) {
    ASSERT_GE(poll(both, 2, 5000), 1);
  } else {
    ASSERT_EQ(poll(both, 2, 5000), 1);
  }
  detail::Fd& first = (both[0].revents & POLLIN) ? a : b;
  detail::Fd& second = (both[0].revents & POLLIN) ? b : a;
  EXPECT_EQ(receive(first.get(), 1), std::string(1, '\x00'));
  send(first.get(), std::string(1, '\x0f') + text("/q"));  // QUEUE_POP: length, then the item
  EXPECT_EQ(receive(first.get(), 8 + 8 + 3), u64(1) + text("one"));
  send(c.get(), std::string(1, '\x0e') + text("/q") + text("two"));
  send(c.get(), std::string(1, '\x10') + text("/q"));  // the item is in before the pop
  EXPECT_EQ(receive(c.get(), 8), u64(1));
  EXPECT_EQ(receive(second.get(), 1), std::string(1, '\x00'));
  send(second.get(), std::string(1, '\x0f') + text("/q"));
  EXPECT_EQ(receive(second.get(), 8 + 8 + 3), u64(1) + text("two"));
  send(second.get(), std::string(1, '\x0f') + text("/q"));  // empty: 0 and nothing else
  EXPECT_EQ(receive(second.get(), 8), u64(0));
  // BARRIER of 3: the first two wait until the third arrives.
  send(a.get(), std::string(1, '\x12') + text("/b") + u64(3));
  send(b.get(), std::string(1, '\x12') + text("/b") + u64(3));
  ASSERT_TRUE(waiting_becomes(GetParam() ? 1 : 2));  // a relay's two: one request
  pollfd early[2] = {{a.get(), POLLIN, 0}, {b.get(), POLLIN, 0}};
  EXPECT_EQ(poll(early, 2, 0), 0);
  send(c.get(), std::string(1, '\x12') + text("/b") + u64(3));
  for (const detail::Fd* fd : {&a, &b, &c})
    EXPECT_EQ(receive(fd->get(), 1), std::string(1, '\x00'));
}

// A table of 300 KB read by several clients (through a relay: received
// once, sent to each from that one copy); COMPARE_SET of a missing key
// answers `expected`, as PyTorch's server does.
TEST_P(Torch2PortTest, ALargeValueComesBackWholeToEveryReader) {
  std::string table(300 << 10, '\0');
  for (std::size_t i = 0; i < table.size(); ++i)
    table[i] = static_cast<char>(i * 7 + 3);
  detail::Fd writer = torch2_connection();
  send(writer.get(), std::string(1, '\x01') + text("/table") + text(table));
  std::vector<detail::Fd> readers;
  for (int i = 0; i < 4; ++i) {
    readers.push_back(torch2_connection());
    send(readers.back().get(), std::string(1, '\x06') + keys({"/table"}));  // WAIT, then GET
    EXPECT_EQ(receive(readers.back().get(), 1), std::string(1, '\x00'));
    send(readers.back().get(), std::string(1, '\x03') + text("/table"));
  }
  for (const detail::Fd& reader : readers)
    EXPECT_EQ(receive(reader.get(), 8 + table.size()), text(table));
  send(writer.get(), std::string(1, '\x02') + text("/none") + text("expected") + text("desired"));
  EXPECT_EQ(receive(writer.get(), 16), text("expected"));
  send(writer.get(), std::string(1, '\x02') + text("/none") + text("") + text("desired"));
  EXPECT_EQ(receive(writer.get(), 15), text("desired"));
}

INSTANTIATE_TEST_SUITE_P(StoreAndRelay, Torch2PortTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "ThroughARelay" : "OnTheStore";
                         });

// What StoreClient makes of a file answer (Status::in_file) that is not
// what it says, from a server played by the test on the other end of a
// socket pair: the call fails naming the store and what is wrong, and the
// connection goes on.
TEST(StoreClientFiles, AFileAnswerWithoutItsFileOrUnsealedIsNamed) {
  int ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  detail::Fd server(ends[1]);
  const auto deadline = [] { return detail::Clock::now() + 10s; };
  const std::string ok = wire::Writer().u8(static_cast<std::uint8_t>(wire::Status::ok)).frame();
  const std::string value =
      wire::Writer().u8(static_cast<std::uint8_t>(wire::Status::ok)).bytes("fine").frame();
  std::thread serve([&] {
    // Each request read, then its answer: ok to accept_files; a file answer
    // without a file; one with a file that is not sealed; then bytes.
    int unsealed = memfd_create("unsealed", MFD_CLOEXEC);
    (void)!write(unsealed, value.data() + 4, value.size() - 4);
    for (int request = 0; request < 4; ++request) {
      std::string payload;
      std::string error;
      if (!detail::recv_frame(server.get(), &payload, 1 << 20, deadline(), &error)) break;
      const std::string file_frame = wire::Writer()
                                         .u8(static_cast<std::uint8_t>(wire::Status::in_file))
                                         .i64(static_cast<std::int64_t>(value.size() - 4))
                                         .frame();
      if (request == 0 || request == 3) {
        const std::string& answer = request == 0 ? ok : value;
        (void)!detail::send_all(server.get(), answer.data(), answer.size(), deadline(), &error);
      } else if (request == 1) {
        (void)!detail::send_all(server.get(), file_frame.data(), file_frame.size(), deadline(),
                                &error);
      } else {
        (void)!detail::send_with_file(server.get(), file_frame.data(), file_frame.size(), unsealed);
      }
    }
    close(unsealed);
  });
  StoreClient::Options options;
  options.timeout = 10s;
  auto client = StoreClient::over_trusted_socket(options, ends[0]);
  const auto fails_with = [&](const std::string& words) {
    try {
      client->get("key", 1s);
      ADD_FAILURE() << "a bad file answer was taken";
    } catch (const StoreError& error) {
      EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find("store at"), std::string::npos) << error.what();
    }
  };
  fails_with("without its file");
  fails_with("not a sealed memory file");
  EXPECT_EQ(client->get("key", 1s), "fine");
  serve.join();
}

}  // namespace
}  // namespace cohort
