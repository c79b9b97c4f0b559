// What another user on the machine (or on the cluster) would try against a
// job's store. The security tests run it as a second, unprivileged user.
//
//   store_intruder HOST PORT TOKEN [--munge]
//       connects with a token it read or guessed, speaking the wire itself
//       (it checks nothing of the server, as an attacker would not), then
//       joins the job's first barrier and leaves a mark.
//       Exit 0: it got in (and did its damage); 3: the store refused it
//       (the refusal on stderr); 2: usage.
//   store_intruder --listen PORT SECONDS
//       listens first on the port a job will use, on 127.0.0.1, and plays a
//       store: answers each client's hello with a challenge of random bytes
//       and prints, hex-encoded, every byte each client sent ("received
//       HEX" per connection) until SECONDS pass. Exit 0.
#include <cstdio>
#include <cstring>
#include <string>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/socket.hpp"
#include "core/strings.hpp"
#include "store/client_handshake.hpp"
#include "store/munge_credential.hpp"
#include "store/proof.hpp"
#include "store/protocol.hpp"

namespace {

namespace detail = cohort::detail;
namespace wire = detail::store_protocol;
namespace proof = detail::store_proof;
using Clock = std::chrono::steady_clock;

// One request, its answer's payload; throws cohort::Error when refused.
std::string call(int fd, const std::string& frame) {
  const auto deadline = detail::deadline_after(std::chrono::seconds(5));
  std::string error;
  std::string answer;
  if (!detail::send_all(fd, frame.data(), frame.size(), deadline, &error) ||
      !detail::recv_frame(fd, &answer, 1 << 20, deadline, &error) || answer.empty()) {
    throw cohort::Error("the store " +
                        (error.empty() ? std::string("sent an empty answer") : error));
  }
  if (static_cast<wire::Status>(answer[0]) != wire::Status::ok) {
    wire::Reader reader(std::string_view(answer).substr(1));
    throw cohort::Error(std::string(reader.bytes()));
  }
  return answer.substr(1);
}

int intrude(const std::string& host, int port, const std::string& token, bool munge) {
  std::string error;
  const auto deadline = detail::deadline_after(std::chrono::seconds(5));
  detail::Fd fd = detail::connect_tcp(host, port, deadline, &error);
  if (!fd.valid()) {
    std::fprintf(stderr, "could not connect to %s:%d: %s\n", host.c_str(), port, error.c_str());
    return 3;
  }
  try {
    const std::string nonce = proof::nonce();
    const std::string answer = call(fd.get(), wire::hello(nonce));
    wire::Reader challenge(answer);
    const std::string server_nonce(challenge.bytes());
    call(fd.get(), wire::proof(proof::client_proof(token, nonce, server_nonce),
                               munge ? detail::munge_encode(token) : std::string()));
    const auto request = [](wire::Op op) {
      return wire::Writer().u8(static_cast<std::uint8_t>(op));
    };
    call(fd.get(), request(wire::Op::add).bytes("world/barrier/1/arrived").i64(1).frame());
    call(fd.get(), request(wire::Op::set).bytes("world/barrier/1/open").bytes("").frame());
    call(fd.get(), request(wire::Op::set).bytes("intruder").bytes("was here").frame());
  } catch (const std::exception& refusal) {
    std::fprintf(stderr, "refused: %s\n", refusal.what());
    return 3;
  }
  std::printf("joined\n");
  return 0;
}

int listen_first(int port, int seconds) {
  detail::Listener listener = detail::listen_tcp("127.0.0.1", port);
  std::printf("listening\n");
  std::fflush(stdout);
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < end) {
    pollfd ready{listener.fd.get(), POLLIN, 0};
    if (poll(&ready, 1, 100) <= 0) continue;
    detail::Fd client(accept(listener.fd.get(), nullptr, nullptr));
    if (!client.valid()) continue;
    std::string received;
    std::string challenge = wire::Writer()
                                .u8(static_cast<std::uint8_t>(wire::Status::ok))
                                .bytes(proof::nonce())
                                .bytes(proof::nonce())
                                .bytes("")
                                .frame();
    bool answered = false;
    char buffer[4096];
    for (;;) {
      pollfd readable{client.get(), POLLIN, 0};
      if (poll(&readable, 1, 2000) <= 0) break;
      const ssize_t n = recv(client.get(), buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      received.append(buffer, static_cast<std::size_t>(n));
      if (!answered) {
        (void)!send(client.get(), challenge.data(), challenge.size(), MSG_NOSIGNAL);
        answered = true;
      }
    }
    std::string hex;
    for (unsigned char c : received)
      hex += detail::cat(std::hex, (c | 0x100)).substr(1);
    std::printf("received %s\n", hex.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--listen") == 0) {
    return listen_first(std::atoi(argv[2]), std::atoi(argv[3]));
  }
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: store_intruder HOST PORT TOKEN [--munge] | --listen PORT SECONDS\n");
    return 2;
  }
  return intrude(argv[1], std::atoi(argv[2]), argv[3],
                 argc > 4 && std::strcmp(argv[4], "--munge") == 0);
}
