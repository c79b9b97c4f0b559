// What a node's relay reads from the relay above it in the agents' tree
// (src/store/relay.cpp): the tagged answers of a multiplexed connection,
// Status::moving, large answers received into memory files, GET_VERSIONED's
// versions. The harness plays that parent: the relay moves under it
// (route_through), it does the server's side of the handshake and of
// MULTIPLEX, then sends the input's bytes as everything its upstream says,
// and closes. Meanwhile a client of the relay has a GET, a WAIT, a SET and
// an ADD out. Whatever the bytes, the relay must not crash or hang, and
// every request must be answered: by the bytes, or, once they broke the
// connection, by the job's store, the next hop (a real StoreServer), where
// the relay goes on.
//
// Each input starts about three threads (the client's requests, the
// relay's readers of the harness and of the store), so a process that
// took 11,000 inputs would have started more threads than a pid_max of
// 32,768 gives ids to, and clang 14's LeakSanitizer then no longer finds a
// live thread by its id and reports its stack's objects as leaked
// (docs/testing.md):
// fuzz: at most 5000 inputs a process
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <initializer_list>
#include <memory>
#include <string>

#include <poll.h>
#include <sys/socket.h>

#include <cohort/errors.hpp>
#include <cohort/store.hpp>

#include "core/fd.hpp"
#include "core/socket.hpp"
#include "fuzz/fuzz_target.hpp"
#include "support/store_upstream.hpp"

namespace cohort::fuzz {
namespace {

using namespace std::chrono_literals;

constexpr const char* kToken = "fuzz-token";

struct Tree {
  Tree() {
    StoreServer::Options store_options;
    store_options.token = kToken;
    store = std::make_unique<StoreServer>(store_options);
    StoreServer::Options relay_options;
    relay_options.token = kToken;
    relay_options.relay_to =
        StoreServer::Options::Upstream{"127.0.0.1", store->port(), false, "", 5s};
    relay_options.relay_to->hop_timeout = 2s;
    relay = std::make_unique<StoreServer>(relay_options);
    parents[0] = detail::listen_tcp("127.0.0.1", 0);
    parents[1] = detail::listen_tcp("127.0.0.1", 0);
    agent = relay->connect_in_process(10s);
    agent->set_on_close("agent/gone", "");  // left on every connection the relay makes
    client = relay->connect_in_process(10s);
    StoreClient::Options direct;
    direct.port = store->port();
    direct.token = kToken;
    StoreClient(direct).set("k", std::string(70000, 'v'));  // a large answer to GET
  }
  std::unique_ptr<StoreServer> store;
  std::unique_ptr<StoreServer> relay;
  // The parent of each input, in turn: the relay moves at once to one that
  // is not where it is, even before it saw the last one close.
  detail::Listener parents[2];
  int turn = 0;
  std::unique_ptr<StoreClient> agent;
  std::unique_ptr<StoreClient> client;
};

Tree& tree() {
  static Tree instance;
  return instance;
}

}  // namespace

COHORT_FUZZ_TARGET(relay_upstream) {
  Tree& relays = tree();
  const auto deadline = detail::Clock::now() + 10s;
  const detail::Listener& parent = relays.parents[relays.turn++ % 2];
  relays.relay->route_through({{"127.0.0.1", parent.port}});
  // The client's requests, out while the relay moves under the harness.
  auto requests = std::async(std::launch::async, [&relays] {
    auto& client = *relays.client;
    for (const auto& request : std::initializer_list<std::function<void()>>{
             [&] { (void)client.get("k", 0ms); }, [&] { client.wait({"never"}, 1ms); },
             [&] { client.set("s", "v"); }, [&] { (void)client.add("n", 1); }}) {
      try {
        request();
      } catch (const Error&) {  // a refusal, a timeout, a lost hop: all answers
      }
    }
  });
  pollfd incoming{parent.fd.get(), POLLIN, 0};
  if (::poll(&incoming, 1, 10000) != 1) std::abort();  // the relay never came
  detail::Fd fd(::accept4(parent.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd.valid()) std::abort();
  if (test::serve_store_handshake(fd.get(), kToken, deadline)) {
    std::string error;
    detail::send_all(fd.get(), data, size, deadline, &error);
  }
  fd.reset();  // the relay goes on through the store
  if (requests.wait_for(20s) != std::future_status::ready) std::abort();  // one was lost
  return 0;
}

}  // namespace cohort::fuzz
