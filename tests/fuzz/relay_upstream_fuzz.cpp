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
#include "store/client_handshake.hpp"
#include "store/proof.hpp"
#include "store/protocol.hpp"

namespace cohort::fuzz {
namespace {

namespace wire = detail::store_protocol;
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

// The server's side of the handshake and of MULTIPLEX, as the store does it.
bool serve_handshake(int fd, detail::Deadline deadline) {
  std::string hello;
  std::string error;
  if (!detail::recv_frame(fd, &hello, wire::kMaxHandshakeBytes, deadline, &error)) return false;
  wire::Reader reader(hello);
  for (std::size_t i = 0; i < wire::kMagic.size() + 1; ++i)
    reader.u8();
  const std::string client_nonce(reader.bytes());
  const std::string server_nonce = detail::store_proof::nonce();
  const std::string challenge =
      wire::Writer()
          .u8(0)
          .bytes(server_nonce)
          .bytes(detail::store_proof::server_proof(kToken, client_nonce, server_nonce))
          .bytes("")
          .frame();
  const std::string ok = wire::Writer().u8(0).frame();
  std::string proof;
  std::string multiplex;
  return detail::send_all(fd, challenge.data(), challenge.size(), deadline, &error) &&
         detail::recv_frame(fd, &proof, wire::kMaxHandshakeBytes, deadline, &error) &&
         detail::send_all(fd, ok.data(), ok.size(), deadline, &error) &&
         detail::recv_frame(fd, &multiplex, wire::kMaxHandshakeBytes, deadline, &error) &&
         detail::send_all(fd, ok.data(), ok.size(), deadline, &error);
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
  if (serve_handshake(fd.get(), deadline)) {
    std::string error;
    detail::send_all(fd.get(), data, size, deadline, &error);
  }
  fd.reset();  // the relay goes on through the store
  if (requests.wait_for(20s) != std::future_status::ready) std::abort();  // one was lost
  return 0;
}

}  // namespace cohort::fuzz
