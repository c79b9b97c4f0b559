// A live StoreServer driven over a loopback connection: the handshake and
// the requests after it (src/store/server.cpp, protocol.cpp). The first byte
// chooses whether the harness first does the handshake itself (its proofs
// depend on the server's fresh nonce) to reach the requests, or the
// fuzzer's bytes are the handshake. The server must answer or close,
// and never crash; the connection ends when the input does.
#include <cstdlib>
#include <memory>
#include <string>

#include <sys/socket.h>

#include <cohort/errors.hpp>
#include <cohort/store.hpp>

#include "core/socket.hpp"
#include "fuzz/fuzz_target.hpp"
#include "store/client_handshake.hpp"

namespace cohort::fuzz {
namespace {

constexpr const char* kToken = "fuzz-token";

StoreServer& server() {
  static std::unique_ptr<StoreServer> instance;
  static int uses = 0;
  if (!instance || ++uses % 20000 == 0) {  // now and then a fresh one: keys pile up
    instance.reset();
    StoreServer::Options options;  // the real limits, as a job's store has them
    options.token = kToken;
    options.handshake_timeout = std::chrono::seconds(2);
    instance = std::make_unique<StoreServer>(options);
  }
  return *instance;
}

}  // namespace

COHORT_FUZZ_TARGET(store_server) {
  if (size == 0) return 0;
  const auto deadline = detail::Clock::now() + std::chrono::seconds(10);
  std::string error;
  detail::Fd fd = detail::connect_tcp("127.0.0.1", server().port(), deadline, &error);
  if (!fd.valid()) std::abort();  // the server stopped accepting
  if (data[0] % 2 == 0) {
    try {
      detail::authenticate_to_store(fd.get(), "the fuzzed store", {.token = kToken}, deadline);
    } catch (const Error&) {
      std::abort();  // a server that refuses its own token
    }
  }
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  detail::send_all(fd.get(), bytes.data(), bytes.size(), deadline, &error);
  shutdown(fd.get(), SHUT_WR);
  // Until the server closes: after end-of-file it answers what came before
  // and leaves; a server that keeps the connection open past the deadline hangs.
  char sink[4096];
  while (detail::recv_all(fd.get(), sink, 1, deadline, &error)) {
  }
  if (error == "timed out") std::abort();
  return 0;
}

}  // namespace cohort::fuzz
