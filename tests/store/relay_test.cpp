// A node's relay of the job's store (StoreServer::Options::relay_to) over
// real TCP on loopback: every operation reaches the store, ADDs that go up
// as one still give each client its own count, a node's ranks and all their
// waits hold one connection to the store instead of one each, last words
// are said when their client goes, a lost store is named to every client;
// and relays in a tree (route_through): one connection per child, one copy
// of a table per child, last words said one hop up, a lost relay passed
// over for the next hop.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cohort/errors.hpp>
#include <cohort/store.hpp>

#include "core/socket.hpp"
#include "store/client_handshake.hpp"
#include "store/file_answer.hpp"
#include "store/protocol.hpp"
#include "support/store_upstream.hpp"

namespace cohort {
namespace {

using namespace std::chrono_literals;

constexpr const char* kToken = "relay-test-token";

class StoreRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreServer::Options options;
    options.token = kToken;
    store_ = std::make_unique<StoreServer>(options);
    StoreServer::Options relay;
    relay.token = kToken;
    relay.relay_to = StoreServer::Options::Upstream{"127.0.0.1", store_->port(), false, "", 10s};
    relay.relay_to->connect_at_start = true;
    relay_ = std::make_unique<StoreServer>(relay);
  }
  static std::unique_ptr<StoreClient> client_of(const StoreServer& server) {
    StoreClient::Options options;
    options.port = server.port();
    options.token = kToken;
    options.timeout = 10s;
    return std::make_unique<StoreClient>(options);
  }
  // Waits (bounded) until `count()` is `wanted`.
  template <class Count>
  static bool becomes(Count count, std::size_t wanted) {
    for (int i = 0; i < 500 && count() != wanted; ++i)
      std::this_thread::sleep_for(10ms);
    return count() == wanted;
  }

  std::unique_ptr<StoreServer> store_;
  std::unique_ptr<StoreServer> relay_;
};

TEST_F(StoreRelayTest, EveryOperationReachesTheStore) {
  auto through = client_of(*relay_);
  auto direct = client_of(*store_);
  through->set("a", std::string("bytes\0nul", 9));
  EXPECT_EQ(direct->get("a", 1s), std::string("bytes\0nul", 9));
  direct->set("b", "from the store");
  EXPECT_EQ(through->get("b", 1s), "from the store");
  EXPECT_EQ(through->add("n", 5), 5);
  EXPECT_EQ(through->add("n", -2), 3);
  EXPECT_EQ(through->compare_set("k", "", "first"), "first");
  EXPECT_EQ(through->compare_set("k", "wrong", "second"), "first");
  EXPECT_EQ(through->multi_get({"a", "b", "k"}, 1s),
            (std::vector<std::string>{std::string("bytes\0nul", 9), "from the store", "first"}));
  EXPECT_TRUE(through->check({"a", "n"}));
  EXPECT_FALSE(through->check({"a", "missing"}));
  EXPECT_EQ(through->num_keys(), direct->num_keys());
  EXPECT_TRUE(through->delete_key("a"));
  EXPECT_FALSE(direct->check({"a"}));
  direct->set("text", "abc");
  EXPECT_THROW(through->add("text", 1), StoreError);  // the store's own error, passed on
  try {
    through->get("never", 50ms);
    ADD_FAILURE() << "a GET of a key never set returned";
  } catch (const Timeout& timeout) {
    EXPECT_NE(std::string(timeout.what()).find("'never'"), std::string::npos) << timeout.what();
  }
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    direct->set("late", "1");
  });
  through->wait({"late"}, 10s);
  later.join();
  through->clear_on_close();  // nothing was asked: no error
}

// A burst of distinct waits, each its own request at the store, all on the
// relay's one connection: a wait holds none behind it, and the store does
// not hold a connection per wait of every node.
TEST_F(StoreRelayTest, ABurstOfWaitsGoesUpOnTheRelaysOneConnection) {
  ASSERT_TRUE(becomes([&] { return store_->connection_count(); }, 1));
  std::vector<std::thread> waiters;
  for (int i = 0; i < 6; ++i) {
    waiters.emplace_back([this, i] { client_of(*relay_)->wait({"key" + std::to_string(i)}, 10s); });
  }
  ASSERT_TRUE(becomes([&] { return store_->waiting_count(); }, 6));
  EXPECT_EQ(store_->connection_count(), 1u);
  auto through = client_of(*relay_);
  through->set("quick", "while six wait");  // goes up past them
  auto direct = client_of(*store_);
  EXPECT_EQ(direct->get("quick", 1s), "while six wait");
  for (int i = 5; i >= 0; --i)  // answered in any order
    direct->set("key" + std::to_string(i), "1");
  for (std::thread& waiter : waiters)
    waiter.join();
  EXPECT_EQ(relay_->upstream_connection_count(), 1u);
}

// An agent ends while its heartbeat thread's wait is out at the store: the
// relay lets the connection go at once (its last words reach the store now),
// rather than keep it, unread and ready, until the wait's answer: its loop
// spun on that socket (2.6 ms straight in a traced agent's end).
TEST_F(StoreRelayTest, AClientThatEndsWhileItsWaitIsUpstreamIsLetGoAtOnce) {
  auto through = client_of(*relay_);
  through->set_on_close("gone", "");
  std::thread waiter([&] {
    try {
      through->wait({"never"}, 60s);
    } catch (const Error&) {  // its connection was shut down under it
    }
  });
  ASSERT_TRUE(becomes([&] { return store_->waiting_count(); }, 1));
  through->shut_down();
  waiter.join();
  client_of(*store_)->wait({"gone"}, 5s);  // not after the wait's 60 s
  EXPECT_TRUE(becomes([&] { return relay_->connection_count(); }, 0));
}

TEST_F(StoreRelayTest, ARelayConnectsToTheStoreAsItStarts) {
  // Before any request: a node's ranks' first requests find it open (the
  // store counts it from its accept, the relay once the handshake is over).
  ASSERT_TRUE(becomes([&] { return store_->connection_count(); }, 1));
  EXPECT_TRUE(becomes([&] { return relay_->upstream_connection_count(); }, 1));
}

// A user's `top -H` or gdb tells the store's threads from the program's.
TEST_F(StoreRelayTest, TheStoresAndTheRelaysThreadsAreNamed) {
  ASSERT_TRUE(becomes([&] { return relay_->upstream_connection_count(); }, 1));
  std::vector<std::string> names;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name)) names.push_back(name);
  }
  for (const char* name : {"cohort-store", "cohort-relay", "cohort-relay-tx", "cohort-relay-up"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
}

TEST_F(StoreRelayTest, ARelayNotToConnectAtStartConnectsAtItsFirstRequest) {
  StoreServer::Options lazy;
  lazy.token = kToken;
  lazy.relay_to = StoreServer::Options::Upstream{"127.0.0.1", store_->port(), false, "", 10s};
  ASSERT_TRUE(becomes([&] { return store_->connection_count(); }, 1));  // the fixture's relay
  StoreServer relay(lazy);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(relay.upstream_connection_count(), 0u);
  client_of(relay)->set("k", "v");
  EXPECT_EQ(relay.upstream_connection_count(), 1u);
  EXPECT_EQ(store_->connection_count(), 2u);
}

TEST_F(StoreRelayTest, ARelayStartedBeforeItsStoreConnectsAtTheFirstRequest) {
  const int port = detail::pick_free_port("127.0.0.1");
  StoreServer::Options early;
  early.token = kToken;
  early.relay_to = StoreServer::Options::Upstream{"127.0.0.1", port, false, "", 10s};
  early.relay_to->connect_at_start = true;
  StoreServer relay(early);  // its connections at the start are refused
  ASSERT_TRUE(becomes([&] { return relay.upstream_connection_count(); }, 0));
  StoreServer::Options late;
  late.host = "127.0.0.1";
  late.port = port;
  late.token = kToken;
  StoreServer store(late);
  auto through = client_of(relay);
  through->set("k", "v");
  EXPECT_EQ(through->get("k", 1s), "v");
  EXPECT_EQ(client_of(store)->get("k", 1s), "v");
}

TEST_F(StoreRelayTest, AddsOfManyClientsAtOnceEachGetTheirOwnCount) {
  constexpr int kClients = 24;
  constexpr int kAdds = 60;
  std::vector<std::vector<std::int64_t>> seen(kClients);
  std::vector<std::thread> threads;
  threads.reserve(kClients);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto through = client_of(*relay_);
      for (int i = 0; i < kAdds; ++i)
        seen[c].push_back(through->add("counter", c % 2 == 0 ? 1 : 2));
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  // Each count a client saw is the counter's value just after its own ADD:
  // all distinct, each client's increasing, and the last one is the total.
  std::vector<std::int64_t> all;
  for (const auto& mine : seen) {
    EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "two clients saw one count";
  const std::int64_t total = (kClients / 2) * kAdds * 1 + (kClients / 2) * kAdds * 2;
  EXPECT_EQ(all.back(), total);
  EXPECT_EQ(client_of(*store_)->get("counter", 1s), std::to_string(total));
}

// A client's requests sent together (a batch) go up in the relay's batches
// in its order, also when the ADDs of many clients go as one: the client
// whose ADD completes a round's count finds every client's SET of that
// round there, and each client's own counter counts its ADDs in order.
TEST_F(StoreRelayTest, AClientsBatchKeepsItsOrderWhenAddsGoUpAsOne) {
  constexpr int kClients = 16;
  constexpr int kRounds = 40;
  std::atomic<int> completed{0};
  const auto run_rounds = [&](int c) {
    auto through = client_of(*relay_);
    for (int round = 0; round < kRounds; ++round) {
      const std::string prefix = "round/" + std::to_string(round);
      // Its ADD is its last request: it may go up as one with the others'.
      const auto arrived = through->run(StoreClient::Batch()
                                            .set(prefix + "/entry/" + std::to_string(c), "here")
                                            .add(prefix + "/arrived", 1));
      ASSERT_EQ(arrived.size(), 1u);
      if (arrived[0] == kClients) {
        std::vector<std::string> entries;
        for (int other = 0; other < kClients; ++other)
          entries.push_back(prefix + "/entry/" + std::to_string(other));
        EXPECT_TRUE(through->check(entries)) << "an ADD overtook its client's SET";
        ++completed;
      }
      // Its ADD is not its last request: it goes up as it came.
      const auto mine = through->run(StoreClient::Batch()
                                         .add("mine/" + std::to_string(c), 1)
                                         .set("last/" + std::to_string(c), prefix));
      ASSERT_EQ(mine, (std::vector<std::int64_t>{round + 1}));
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(kClients);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      try {
        run_rounds(c);
      } catch (const std::exception& error) {  // an answer out of step
        ADD_FAILURE() << "client " << c << ": " << error.what();
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  EXPECT_EQ(completed.load(), kRounds);
  auto direct = client_of(*store_);
  for (int c = 0; c < kClients; ++c)
    EXPECT_EQ(direct->get("last/" + std::to_string(c), 1s), "round/" + std::to_string(kRounds - 1));
}

TEST_F(StoreRelayTest, ANodesRanksWaitingForOneTableHoldOneConnectionAndOneWaitAtTheStore) {
  constexpr int kRanks = 16;
  const std::string table(200000, 't');
  std::vector<std::unique_ptr<StoreClient>> ranks;
  ranks.reserve(kRanks);
  for (int r = 0; r < kRanks; ++r)
    ranks.push_back(client_of(*relay_));
  std::atomic<int> right{0};
  std::vector<std::thread> threads;
  threads.reserve(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      ranks[r]->wait({"table"}, 20s);
      if (ranks[r]->get("table", 1s) == table) ++right;
    });
  }
  // Every rank waits: the store holds one wait for all of them, on the
  // relay's one connection (made as the relay started).
  ASSERT_TRUE(becomes([&] { return store_->waiting_count(); }, 1));
  EXPECT_EQ(store_->connection_count(), 1u);
  EXPECT_EQ(relay_->upstream_connection_count(), 1u);
  client_of(*store_)->set("table", table);
  for (std::thread& thread : threads)
    thread.join();
  EXPECT_EQ(right, kRanks);
  EXPECT_EQ(relay_->upstream_connection_count(), 1u);
  EXPECT_EQ(relay_->connection_count(), static_cast<std::size_t>(kRanks));
}

// Ranks that ask for a large value at once and read their answers one after
// another, as a process that drives them in turn does: each answer arrives
// whole, however long its client left it in the relay's socket.
TEST_F(StoreRelayTest, LargeAnswersReachClientsThatReadThemInTurn) {
  namespace wire = detail::store_protocol;
  constexpr int kRanks = 8;
  const std::string table(400000, 'v');
  client_of(*store_)->set("table", table);
  std::vector<detail::Fd> ranks;
  ranks.reserve(kRanks);
  const auto deadline = [] { return detail::Clock::now() + 10s; };
  for (int r = 0; r < kRanks; ++r) {
    std::string error;
    ranks.push_back(detail::connect_tcp("127.0.0.1", relay_->port(), deadline(), &error));
    ASSERT_TRUE(ranks.back().valid()) << error;
    detail::authenticate_to_store(ranks.back().get(), "the relay", {.token = kToken}, deadline());
  }
  const std::string get =
      wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::get)).bytes("table").i64(10000).frame();
  for (const detail::Fd& rank : ranks) {
    std::string error;
    ASSERT_TRUE(detail::send_all(rank.get(), get.data(), get.size(), deadline(), &error)) << error;
  }
  std::this_thread::sleep_for(200ms);  // every answer waits in the relay
  for (int r = 0; r < kRanks; ++r) {
    std::string payload;
    std::string error;
    ASSERT_TRUE(detail::recv_frame(ranks[r].get(), &payload, 1 << 20, deadline(), &error))
        << "rank " << r << ": " << error;
    EXPECT_EQ(payload.size(), 1 + 4 + table.size()) << "rank " << r;
  }
}

// Requests larger than the connection up takes at once: the relay's loop
// writes what the socket takes and its sender the rest, before anything
// else on it (StoreRelay::flush), while other clients' requests and waits
// come in meanwhile; every value arrives whole and every wait is answered.
TEST_F(StoreRelayTest, RequestsLargerThanTheSocketTakesAtOnceGoUpWhole) {
  constexpr int kClients = 4;
  constexpr int kRounds = 3;
  constexpr std::size_t kBytes = std::size_t{6} << 20;
  auto direct = client_of(*store_);
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      try {
        auto through = client_of(*relay_);
        for (int round = 0; round < kRounds; ++round) {
          const std::string key = "big/" + std::to_string(c) + "/" + std::to_string(round);
          std::string value(kBytes, static_cast<char>('a' + c));
          value.replace(0, key.size(), key);  // no two alike
          through->set(key, value);
          EXPECT_EQ(through->add("small/" + std::to_string(c), 1), round + 1);
          // A wait that goes up while other clients' large SETs are on their way.
          EXPECT_EQ(through->get("go/" + std::to_string(round), 10s), "now");
        }
      } catch (const std::exception& error) {
        ADD_FAILURE() << "client " << c << ": " << error.what();
      }
    });
  }
  for (int round = 0; round < kRounds; ++round) {
    std::this_thread::sleep_for(20ms);
    direct->set("go/" + std::to_string(round), "now");
  }
  for (std::thread& thread : threads)
    thread.join();
  for (int c = 0; c < kClients; ++c) {
    for (int round = 0; round < kRounds; ++round) {
      const std::string key = "big/" + std::to_string(c) + "/" + std::to_string(round);
      const std::string value = direct->get(key, 1s);
      ASSERT_EQ(value.size(), kBytes) << key;
      EXPECT_EQ(value.substr(0, key.size()), key);
      EXPECT_EQ(value.find_first_not_of(static_cast<char>('a' + c), key.size()), std::string::npos)
          << key;
    }
  }
}

// A node's ranks on socket pairs (as cohort run's workers reach their
// agent) that wait for one large value share the memory file of each
// answer that came up, not a copy each; small answers, and a client that did not ask for files,
// get bytes.
TEST_F(StoreRelayTest, RanksOnSocketPairsShareOneFileOfALargeAnswer) {
  namespace wire = detail::store_protocol;
  constexpr int kRanks = 6;
  const std::string table(200000, 't');
  const auto deadline = [] { return detail::Clock::now() + 10s; };
  const auto send = [&](const detail::Fd& rank, const std::string& frame) {
    std::string error;
    ASSERT_TRUE(detail::send_all(rank.get(), frame.data(), frame.size(), deadline(), &error))
        << error;
  };
  const std::string accept =
      wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::accept_files)).frame();
  const std::string get =
      wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::get)).bytes("table").i64(10000).frame();
  std::vector<detail::Fd> ranks;
  for (int r = 0; r <= kRanks; ++r) {  // the last one does not take files
    ranks.emplace_back(relay_->trusted_socket());
    if (r < kRanks) {
      send(ranks.back(), accept);
      std::string payload;
      std::string error;
      ASSERT_TRUE(detail::recv_frame(ranks.back().get(), &payload, 64, deadline(), &error))
          << error;
      EXPECT_EQ(payload, std::string(1, '\0'));
    }
    send(ranks.back(), get);
  }
  ASSERT_TRUE(becomes([&] { return store_->waiting_count(); }, 1)) << "one request for all";
  client_of(*store_)->set("table", table);
  std::vector<ino_t> files;
  for (int r = 0; r <= kRanks; ++r) {
    std::string payload;
    std::string error;
    std::vector<detail::Fd> received;
    ASSERT_TRUE(
        detail::recv_frame(ranks[r].get(), &payload, 1 << 20, deadline(), &error, &received))
        << "rank " << r << ": " << error;
    ASSERT_FALSE(payload.empty());
    if (r == kRanks) {
      EXPECT_TRUE(received.empty());
      EXPECT_EQ(payload.size(), 1 + 4 + table.size()) << "bytes for the one without files";
      continue;
    }
    ASSERT_EQ(static_cast<wire::Status>(payload[0]), wire::Status::in_file) << "rank " << r;
    ASSERT_EQ(received.size(), 1u) << "rank " << r;
    struct stat file {};
    ASSERT_EQ(fstat(received[0].get(), &file), 0);
    files.push_back(file.st_ino);
    const auto answer =
        detail::map_answer_file(std::string_view(payload).substr(1), &received, &error);
    ASSERT_TRUE(answer) << error;
    wire::Reader reader(answer->view().substr(1));
    EXPECT_EQ(reader.bytes(), table) << "rank " << r;
  }
  // The first GET may go up alone, the others together when it returns;
  // the store then says the table is unchanged: one file for every rank.
  std::sort(files.begin(), files.end());
  EXPECT_EQ(std::unique(files.begin(), files.end()) - files.begin(), 1) << "one file for all";
  // A small value comes as bytes, to a rank that takes files too.
  client_of(*store_)->set("small", "s");
  const std::string small =
      wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::get)).bytes("small").i64(10000).frame();
  send(ranks[0], small);
  std::string payload;
  std::string error;
  std::vector<detail::Fd> received;
  ASSERT_TRUE(detail::recv_frame(ranks[0].get(), &payload, 1 << 20, deadline(), &error, &received))
      << error;
  EXPECT_TRUE(received.empty());
  EXPECT_EQ(static_cast<wire::Status>(payload[0]), wire::Status::ok);
}

// A rank that GETs a large value later than the others gets the file they
// got while the value is unchanged (the relay asks the store whether it
// is: GET_VERSIONED), and the new value once it changed; a client's own
// GET_VERSIONED (a relay below this one, over TCP) gets the value and its
// version.
TEST_F(StoreRelayTest, ALaterGetOfAnUnchangedLargeValueGetsTheSameFile) {
  namespace wire = detail::store_protocol;
  const auto deadline = [] { return detail::Clock::now() + 10s; };
  const auto ask = [&](const std::string& frame, std::vector<detail::Fd>* files) {
    detail::Fd rank(relay_->trusted_socket());
    std::string payload;
    std::string error;
    const std::string accept =
        wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::accept_files)).frame();
    const std::string requests = (files != nullptr ? accept : "") + frame;
    EXPECT_TRUE(detail::send_all(rank.get(), requests.data(), requests.size(), deadline(), &error))
        << error;
    if (files != nullptr) {
      EXPECT_TRUE(detail::recv_frame(rank.get(), &payload, 64, deadline(), &error)) << error;
    }
    EXPECT_TRUE(detail::recv_frame(rank.get(), &payload, 1 << 21, deadline(), &error, files))
        << error;
    return payload;
  };
  const auto get = [&](std::string* value) {
    std::vector<detail::Fd> files;
    const std::string payload = ask(wire::Writer()
                                        .u8(static_cast<std::uint8_t>(wire::Op::get))
                                        .bytes("table")
                                        .i64(10000)
                                        .frame(),
                                    &files);
    EXPECT_EQ(static_cast<wire::Status>(payload.at(0)), wire::Status::in_file);
    EXPECT_EQ(files.size(), 1u);
    struct stat file {};
    EXPECT_EQ(fstat(files.at(0).get(), &file), 0);
    std::string error;
    const auto answer =
        detail::map_answer_file(std::string_view(payload).substr(1), &files, &error);
    EXPECT_TRUE(answer) << error;
    wire::Reader reader(answer->view().substr(1));
    *value = std::string(reader.bytes());
    return file.st_ino;
  };
  const std::string first(200000, '1');
  client_of(*store_)->set("table", first);
  std::string value;
  const ino_t file = get(&value);
  EXPECT_TRUE(value == first);
  EXPECT_EQ(get(&value), file) << "unchanged: the same file";
  EXPECT_TRUE(value == first);
  const std::string second(200000, '2');
  client_of(*store_)->set("table", second);
  get(&value);
  EXPECT_TRUE(value == second) << "changed: the new value";
  const std::string versioned = ask(wire::Writer()
                                        .u8(static_cast<std::uint8_t>(wire::Op::get_versioned))
                                        .bytes("table")
                                        .i64(10000)
                                        .i64(0)
                                        .frame(),
                                    nullptr);
  ASSERT_EQ(versioned.size(), 1 + 4 + second.size() + 8) << "the value and its version";
  EXPECT_TRUE(versioned.substr(5, second.size()) == second);
}

// StoreClient over a socket pair asks for files and reads them as answers:
// copied out by get(), mapped in place by get_shared() (also through a
// PrefixStore).
TEST_F(StoreRelayTest, AClientOnASocketPairReadsALargeAnswerFromItsFile) {
  const std::string table(300000, 'x');
  client_of(*store_)->set("table", table);
  StoreClient::Options options;
  options.timeout = 10s;
  std::shared_ptr<StoreClient> rank =
      StoreClient::over_trusted_socket(options, relay_->trusted_socket());
  EXPECT_EQ(rank->get("table", 1s), table);
  StoreValue shared = rank->get_shared("table", 1s);
  EXPECT_EQ(shared.view(), table);
  PrefixStore prefixed("job", rank);
  client_of(*store_)->set("job/table", table + "!");
  EXPECT_EQ(prefixed.get_shared("table", 1s).view(), table + "!");
  EXPECT_EQ(rank->multi_get({"table", "table"}, 1s), (std::vector<std::string>{table, table}));
}

// A client's last words are its relay's to keep: said when its connection
// ends, not when the relay's does; taken back with CLEAR_ON_CLOSE.
TEST_F(StoreRelayTest, AClientsLastWordsAreSaidWhenItsConnectionToTheRelayEnds) {
  auto direct = client_of(*store_);
  auto quiet = client_of(*relay_);
  quiet->set_on_close("quiet/gone", "1");
  quiet->clear_on_close();
  quiet->set("quiet/after", "still fine");
  quiet.reset();
  auto leaving = client_of(*relay_);
  leaving->run(StoreClient::Batch().set_on_close("gone", "1").set_on_close("gone/too", "2"));
  EXPECT_FALSE(direct->check({"gone"}));
  leaving.reset();
  direct->wait({"gone", "gone/too"}, 10s);
  EXPECT_EQ(direct->get("gone/too", 1s), "2");
  EXPECT_EQ(direct->get("quiet/after", 1s), "still fine");
  EXPECT_FALSE(direct->check({"quiet/gone"}));
  auto many = client_of(*relay_);
  for (int i = 0; i < 8; ++i)
    many->set_on_close("k" + std::to_string(i), "");
  EXPECT_THROW(many->set_on_close("one/too/many", ""), StoreError);  // as the store's limit
}

// An in-process client's (the agent's own) last words go up with the
// relay's connection: said when the relay's process ends, as when its own
// connection ends, and not after CLEAR_ON_CLOSE.
TEST_F(StoreRelayTest, AnInProcessClientsLastWordsAreSaidWhenItsRelayEnds) {
  auto direct = client_of(*store_);
  {
    auto agent = relay_->connect_in_process(10s);
    agent->run(StoreClient::Batch().set_on_close("agent/gone", "").set_on_close("someone", ""));
    auto quiet = relay_->connect_in_process(10s);
    quiet->set_on_close("quiet/gone", "");
    quiet->clear_on_close();
    EXPECT_FALSE(direct->check({"agent/gone"}));
    relay_.reset();  // as its process is killed: nothing said by the relay itself
  }
  direct->wait({"agent/gone", "someone"}, 10s);
  EXPECT_FALSE(direct->check({"quiet/gone"}));
  SetUp();
  auto leaving = relay_->connect_in_process(10s);
  leaving->set_on_close("left", "");
  auto staying = relay_->connect_in_process(10s);
  staying->set_on_close("stayed", "");
  leaving->shut_down();  // said at once, and no longer the relay's own
  client_of(*store_)->wait({"left"}, 10s);
  direct = client_of(*store_);
  direct->delete_key("left");
  relay_.reset();
  direct->wait({"stayed"}, 10s);
  EXPECT_FALSE(direct->check({"left"})) << "said twice";
}

TEST_F(StoreRelayTest, ALostStoreIsNamedToEveryClient) {
  auto waiting = client_of(*relay_);
  auto asking = client_of(*relay_);
  asking->set("up", "1");  // the relay's quick connection is open
  std::string waiting_error;
  std::thread waiter([&] {
    try {
      waiting->wait({"never"}, 20s);
    } catch (const StoreError& error) {
      waiting_error = error.what();
    }
  });
  ASSERT_TRUE(becomes([&] { return store_->waiting_count(); }, 1));
  const std::string address = "127.0.0.1:" + std::to_string(store_->port());
  store_.reset();
  waiter.join();
  EXPECT_NE(waiting_error.find(address), std::string::npos) << waiting_error;
  EXPECT_NE(waiting_error.find("relay"), std::string::npos) << waiting_error;
  try {
    asking->add("n", 1);
    ADD_FAILURE() << "an ADD through a relay whose store is gone returned";
  } catch (const StoreError& error) {
    EXPECT_NE(std::string(error.what()).find(address), std::string::npos) << error.what();
  }
  // A new waiting request is told at once, not after trying to connect again.
  try {
    client_of(*relay_)->wait({"later"}, 20s);
    ADD_FAILURE() << "a WAIT through a relay whose store is gone returned";
  } catch (const StoreError& error) {
    EXPECT_NE(std::string(error.what()).find("lost the job's store at " + address),
              std::string::npos)
        << error.what();
  }
}

// Where a relay's requests stand upstream (StoreServer::upstream_state),
// which an agent's report of a lost store adds: a store that answers, and
// one that takes a request and never answers.
TEST_F(StoreRelayTest, ARelaySaysWhereItsRequestsStandUpstream) {
  client_of(*relay_)->set("up", "1");
  const std::string answered = relay_->upstream_state();
  EXPECT_NE(answered.find(
                "its connection to the job's store at 127.0.0.1:" + std::to_string(store_->port()) +
                ": quick requests out 0, waiting ones out 0, more to go up 0, "
                "last answer "),
            std::string::npos)
      << answered;
  EXPECT_TRUE(store_->upstream_state().empty()) << "a store that is not a relay";

  const detail::Listener mute = detail::listen_tcp("127.0.0.1", 0);
  StoreServer::Options options;
  options.token = kToken;
  options.relay_to = StoreServer::Options::Upstream{"127.0.0.1", mute.port, false, "", 10s};
  options.relay_to->connect_at_start = true;
  StoreServer relay(options);
  pollfd incoming{mute.fd.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&incoming, 1, 10000), 1) << "the relay never connected";
  detail::Fd upstream(::accept4(mute.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(test::serve_store_handshake(upstream.get(), kToken, detail::deadline_after(10s)));
  auto asking = client_of(relay);
  std::thread adder([&] {
    try {
      asking->add("n", 1);
    } catch (const StoreError&) {  // its store went, unanswered
    }
  });
  std::string stuck;
  for (int i = 0; i < 500 && stuck.find("quick requests out 1") == std::string::npos; ++i) {
    std::this_thread::sleep_for(10ms);
    stuck = relay.upstream_state();
  }
  upstream.reset();  // the relay loses its store, and answers the ADD with that
  adder.join();
  EXPECT_NE(stuck.find("its connection to the job's store at 127.0.0.1:" +
                       std::to_string(mute.port) + ": quick requests out 1 (the oldest sent "),
            std::string::npos)
      << stuck;
  EXPECT_NE(stuck.find(" ago), waiting ones out 0, more to go up 0, no answer yet"),
            std::string::npos)
      << stuck;
}

// Relays in a tree, as the agents of a large job form one: the store, A
// under it, B under A, C under B (each route_through() its way up).
class StoreRelayTreeTest : public StoreRelayTest {
 protected:
  std::unique_ptr<StoreServer> relay_under(std::vector<StoreServer::Hop> path) {
    StoreServer::Options options;
    options.token = kToken;
    options.relay_to = StoreServer::Options::Upstream{"127.0.0.1", store_->port(), false, "", 10s};
    auto relay = std::make_unique<StoreServer>(options);
    relay->route_through(std::move(path));
    return relay;
  }
  static StoreServer::Hop hop(const StoreServer& relay) { return {"127.0.0.1", relay.port()}; }
  // A rank of `relay` that waits for `key`: `*outcome` is "ok", or why not.
  static std::thread waiting_rank(StoreServer& relay, std::string key, std::string* outcome) {
    return std::thread([&relay, key = std::move(key), outcome] {
      try {
        client_of(relay)->wait({key}, 20s);
        *outcome = "ok";
      } catch (const Error& error) {
        *outcome = error.what();
      }
    });
  }
  void grow() {
    b_ = relay_under({hop(*relay_)});
    c_ = relay_under({hop(*b_), hop(*relay_)});
  }
  // C under B, and A the next hop of C's path, while B is under the store
  // itself: A holds no connection until C goes on through it, so that its
  // count says when C did.
  void grow_beside() {
    b_ = relay_under({});
    c_ = relay_under({hop(*b_), hop(*relay_)});
  }
  std::unique_ptr<StoreServer> b_;
  std::unique_ptr<StoreServer> c_;
};

TEST_F(StoreRelayTreeTest, EachRelayHoldsOneConnectionUpAndTheStoreOneForItsChild) {
  grow();
  auto leaf = client_of(*c_);
  leaf->set("k", "v");
  EXPECT_EQ(client_of(*store_)->get("k", 1s), "v");
  EXPECT_EQ(leaf->add("n", 3), 3);
  EXPECT_EQ(client_of(*b_)->add("n", 4), 7);
  EXPECT_EQ(leaf->compare_set("k", "v", "w"), "w");
  EXPECT_EQ(leaf->multi_get({"k", "n"}, 1s), (std::vector<std::string>{"w", "7"}));
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i)
    waiters.emplace_back([&, i] { client_of(*c_)->wait({"w" + std::to_string(i)}, 10s); });
  ASSERT_TRUE(becomes([&] { return store_->waiting_count(); }, 4));
  EXPECT_EQ(store_->connection_count(), 1u) << "A's alone";
  EXPECT_EQ(relay_->connection_count(), 1u) << "B's alone";
  EXPECT_EQ(b_->connection_count(), 1u) << "C's alone";
  for (const auto* relay : {relay_.get(), b_.get(), c_.get()})
    EXPECT_EQ(relay->upstream_connection_count(), 1u);
  auto direct = client_of(*store_);
  for (int i = 0; i < 4; ++i)
    direct->set("w" + std::to_string(i), "");
  for (std::thread& waiter : waiters)
    waiter.join();
}

// Ranks on every relay of the tree GET one large table: the store sends it
// once, to A, whose own ranks' GETs and B's GET_VERSIONED are one request
// (B's for its ranks and for C and D's); a later GET through a leaf is told
// by each hop that the value is unchanged, and a changed one comes down.
TEST_F(StoreRelayTreeTest, ATableGoesDownTheTreeOneCopyPerChild) {
  grow();
  auto d = relay_under({hop(*b_), hop(*relay_)});  // C's sibling
  const std::string table(300000, 't');
  std::vector<std::thread> ranks;
  std::atomic<int> right{0};
  for (StoreServer* relay : {relay_.get(), b_.get(), c_.get(), d.get()}) {
    for (int r = 0; r < 3; ++r) {
      ranks.emplace_back([&, relay] {
        if (client_of(*relay)->get("table", 10s) == table) ++right;
      });
    }
  }
  ASSERT_TRUE(becomes([&] { return store_->waiting_count(); }, 1));
  std::this_thread::sleep_for(200ms);  // every rank asked
  EXPECT_EQ(store_->waiting_count(), 1u) << "one GET for all twelve";
  client_of(*store_)->set("table", table);
  for (std::thread& rank : ranks)
    rank.join();
  EXPECT_EQ(right, 12);
  EXPECT_EQ(client_of(*d)->get("table", 1s), table);
  client_of(*store_)->set("table", table + "!");
  EXPECT_EQ(client_of(*c_)->get("table", 1s), table + "!");
}

// C's agent's last words are held by B, C's parent: said when C goes, at
// once, while the store never saw C's connection.
TEST_F(StoreRelayTreeTest, AChildsLastWordsAreSaidByItsParent) {
  grow();
  auto direct = client_of(*store_);
  auto agent = c_->connect_in_process(10s);
  agent->set_on_close("c/gone", "");
  agent->set("c/here", "");
  c_.reset();  // C's process killed
  direct->wait({"c/gone"}, 10s);
}

// C's process is killed and B's ends right after, as the last nodes of a
// job end together: C's words, which B says through its own relay, go up
// before B's connection does; not left in B's batch for a store that would
// wait for them until its timeout (CI, 2026-12-07: a 4-node job under
// Slurm whose launcher waited for node 3's).
TEST_F(StoreRelayTreeTest, AChildsLastWordsGoUpWhenItsParentEndsRightAfterIt) {
  for (int round = 0; round < 5; ++round) {
    grow();
    const std::string key = "c/gone/" + std::to_string(round);
    auto agent = c_->connect_in_process(10s);
    agent->set_on_close(key, "");
    c_.reset();  // C's process killed
    b_.reset();  // B's ends
    client_of(*store_)->wait({key}, 10s);
    agent.reset();
  }
}

// C's agent ends, and C's parent B ends while C's last words are on their
// way through it: C's relay sends them on through A before its own
// process ends.
TEST_F(StoreRelayTreeTest, ARelaysLastRequestsGoOnThroughTheNextHopWhenItsParentEndsMeanwhile) {
  for (int round = 0; round < 5; ++round) {
    grow();
    const std::string key = "c/gone/" + std::to_string(round);
    auto agent = c_->connect_in_process(10s);
    agent->set_on_close(key, "");
    agent.reset();  // said through B
    b_.reset();
    c_.reset();
    client_of(*store_)->wait({key}, 10s);
  }
}

// B is lost while C's ranks wait and C's agent left its last words with B:
// C goes on through A, where its ranks' waits go up again and its agent's
// words are registered again.
TEST_F(StoreRelayTreeTest, ALostRelayIsPassedOverForTheNextHop) {
  grow_beside();
  auto direct = client_of(*store_);
  auto agent = c_->connect_in_process(10s);
  agent->set_on_close("c/gone", "");
  std::string waited;
  std::thread rank = waiting_rank(*c_, "later", &waited);
  ASSERT_TRUE(becomes([&] { return store_->waiting_count(); }, 1));
  b_.reset();  // C's parent killed
  ASSERT_TRUE(becomes([&] { return relay_->connection_count(); }, 1)) << "C, now under A";
  EXPECT_EQ(agent->add("counted", 1), 1);
  direct->set("later", "");
  rank.join();
  EXPECT_EQ(waited, "ok");
  EXPECT_FALSE(direct->check({"c/gone"})) << "C lives";
  c_.reset();
  direct->wait({"c/gone"}, 10s);
}

// B is lost while nothing of C's is out: C goes on through A at once, not
// at its next request, so that its agent's last words are held again (an
// agent that dies before it asks anything is still named).
TEST_F(StoreRelayTreeTest, ARelayWithNothingOutGoesOnAtOnceWhenItsParentIsLost) {
  grow_beside();
  auto agent = c_->connect_in_process(10s);
  agent->set_on_close("c/gone", "");
  ASSERT_TRUE(becomes([&] { return b_->connection_count(); }, 1)) << "C, under B";
  ASSERT_EQ(relay_->connection_count(), 0u);
  b_.reset();  // C's parent killed
  ASSERT_TRUE(becomes([&] { return relay_->connection_count(); }, 1)) << "C, now under A";
  // A round trip on C's new connection, after the words it registers there.
  EXPECT_EQ(agent->add("counted", 1), 1);
  auto direct = client_of(*store_);
  EXPECT_FALSE(direct->check({"c/gone"})) << "C lives";
  c_.reset();
  direct->wait({"c/gone"}, 10s);
}

// B ends while C's ranks wait through it and C's agent left its last
// words with it: B hands C over (Status::moving), C goes on through A with
// nothing lost or asked twice, and its words move with it.
TEST_F(StoreRelayTreeTest, ARelayThatEndsHandsItsChildrenOver) {
  grow();
  auto direct = client_of(*store_);
  auto agent = c_->connect_in_process(10s);
  agent->set_on_close("c/gone", "");
  EXPECT_EQ(agent->add("counted", 1), 1);
  std::string waited;
  std::thread rank = waiting_rank(*c_, "later", &waited);
  ASSERT_TRUE(becomes([&] { return store_->waiting_count(); }, 1));
  EXPECT_TRUE(b_->hand_over(5s));
  EXPECT_EQ(b_->connection_count(), 0u) << "C moved";
  EXPECT_TRUE(StoreServer(StoreServer::Options{}).hand_over(0s)) << "no relay: nothing to hand";
  b_.reset();
  EXPECT_EQ(agent->add("counted", 1), 2);
  direct->set("later", "");
  rank.join();
  EXPECT_EQ(waited, "ok");
  EXPECT_FALSE(direct->check({"c/gone"}));
  c_.reset();
  direct->wait({"c/gone"}, 10s);
}

// A relay whose path changes moves at once: its waits go up again on the
// new first hop, its agent's last words move with it (taken back at the
// old one), and nothing is asked twice.
TEST_F(StoreRelayTreeTest, ARelayMovesToItsNewParent) {
  auto agent = relay_->connect_in_process(10s);  // A, straight under the store
  agent->set_on_close("a/gone", "");
  std::string waited;
  std::thread rank = waiting_rank(*relay_, "later", &waited);
  ASSERT_TRUE(becomes([&] { return store_->waiting_count(); }, 1));
  auto parent = relay_under({});
  relay_->route_through({hop(*parent)});
  ASSERT_TRUE(becomes([&] { return parent->connection_count(); }, 1)) << "A, now under it";
  ASSERT_TRUE(becomes([&] { return store_->connection_count(); }, 1)) << "the parent's alone";
  auto direct = client_of(*store_);
  EXPECT_FALSE(direct->check({"a/gone"})) << "taken back at the store, not said";
  direct->set("later", "");
  rank.join();
  EXPECT_EQ(waited, "ok");
  EXPECT_EQ(agent->add("once", 1), 1);
  relay_.reset();
  direct->wait({"a/gone"}, 10s);
}

}  // namespace
}  // namespace cohort
