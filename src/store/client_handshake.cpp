#include "store/client_handshake.hpp"

#include <algorithm>
#include <thread>

#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/peer_owner.hpp"
#include "core/strings.hpp"
#include "store/munge_credential.hpp"
#include "store/proof.hpp"
#include "store/protocol.hpp"

namespace cohort::detail {
namespace {

namespace wire = store_protocol;

// Grows a frame's buffer this much at a time at most.
constexpr std::size_t kReceiveStep = std::size_t{1} << 20;

std::string find_the_listener(const std::string& address) {
  const std::size_t colon = address.rfind(':');
  return cat("find it with `ss -ltnp 'sport = :", address.substr(colon + 1),
             "'` on that host, or give the job another port");
}

// One handshake answer: an ok one, or a StoreError with the server's reason.
std::string expect_ok(int fd, const std::string& address, Deadline deadline,
                      std::string_view munge_error) {
  std::string payload;
  std::string error;
  if (!recv_frame(fd, &payload, wire::kMaxHandshakeBytes, deadline, &error) || payload.empty()) {
    throw StoreError(cat("store at ", address, " sent no valid handshake answer: ",
                         error.empty() ? "an empty frame" : error));
  }
  if (static_cast<wire::Status>(payload[0]) != wire::Status::ok) {
    wire::Reader reader(std::string_view(payload).substr(1));
    std::string why;
    try {
      why = reader.bytes();
    } catch (const wire::ProtocolError&) {
      why = "no reason given";
    }
    throw StoreError(cat("store at ", address, " rejected this client: ", why,
                         munge_error.empty() ? "" : " (this client has no credential: ",
                         munge_error, munge_error.empty() ? "" : ")"));
  }
  payload.erase(0, 1);
  return payload;
}

void send_or_throw(int fd, const std::string& frame, const std::string& address,
                   Deadline deadline) {
  std::string error;
  if (!send_all(fd, frame.data(), frame.size(), deadline, &error)) {
    throw StoreError(cat("store at ", address, " ", error, " during the handshake"));
  }
}

// A server on this host is this user's; the kernel says who owns its socket.
void check_owner(const PeerOwner& owner, const std::string& address) {
  if (owner.where != PeerOwner::Where::this_host || owner.uid == geteuid()) return;
  throw StoreError(cat("store at ", address, ": the process listening there runs as uid ",
                       owner.uid, ", not as this job's user (uid ", geteuid(),
                       "): another process holds this port, and nothing was sent to it; ",
                       find_the_listener(address)));
}

// A server on this host that answered has accepted the connection: its
// socket is among its process's descriptors, which must be the store's.
void check_process(int fd, const std::string& process, const std::string& address) {
  const PeerOwner accepted = owner_of_peer(fd);
  if (process_holding(process, accepted.inode) != SocketHolding::not_held) return;
  throw StoreError(cat("store at ", address,
                       ": the process listening there is not this job's store (process ",
                       process.substr(0, process.find(':')),
                       ", named in COHORT_STORE_PROCESS): another process of this user holds this "
                       "port, perhaps another job's store, and it was sent only a nonce; ",
                       find_the_listener(address)));
}

}  // namespace

namespace {

// One frame into `*out`, after its header when `keep_header`.
bool receive_frame(int fd, std::string* out, bool keep_header, std::size_t limit, Deadline deadline,
                   std::string* error, std::vector<Fd>* files) {
  char header[wire::kFrameHeaderBytes];
  if (!recv_all(fd, header, sizeof(header), deadline, error, files)) return false;
  const std::size_t length = wire::frame_length(header);
  if (length > limit) {
    *error = cat("announced a frame of ", length, " bytes, over the limit of ", limit);
    return false;
  }
  out->assign(keep_header ? header : "", keep_header ? sizeof(header) : 0);
  const std::size_t end = out->size() + length;
  while (out->size() < end) {
    const std::size_t have = out->size();
    const std::size_t step = std::min(end - have, kReceiveStep);
    out->resize(have + step);
    if (!recv_all(fd, out->data() + have, step, deadline, error, files)) return false;
  }
  return true;
}

}  // namespace

bool recv_frame(int fd, std::string* payload, std::size_t limit, Deadline deadline,
                std::string* error, std::vector<Fd>* files) {
  return receive_frame(fd, payload, false, limit, deadline, error, files);
}

bool recv_framed(int fd, std::string* frame, std::size_t limit, Deadline deadline,
                 std::string* error) {
  return receive_frame(fd, frame, true, limit, deadline, error, nullptr);
}

void authenticate_to_store(int fd, const std::string& address, const ExpectedStore& expected,
                           Deadline deadline) {
  const std::string_view token = expected.token;
  const PeerOwner owner = owner_of_peer(fd);
  check_owner(owner, address);
  const std::string client_nonce = store_proof::nonce();
  send_or_throw(fd, wire::hello(client_nonce), address, deadline);

  const Deadline answer_by = std::min(deadline, deadline_after(expected.hello_answer));
  std::string answer;
  try {
    answer = expect_ok(fd, address, answer_by, {});
  } catch (const StoreError&) {
    if (answer_by == deadline || Clock::now() < answer_by) throw;
    throw StoreError(cat("store at ", address, " accepted the connection but did not answer ",
                         "cohort's handshake within ", duration_text(expected.hello_answer),
                         ": another program holds this port, or the store's process is ",
                         "stopped; ", find_the_listener(address)));
  }
  if (!expected.process.empty() && owner.where == PeerOwner::Where::this_host) {
    check_process(fd, std::string(expected.process), address);
  }
  wire::Reader challenge(answer);
  std::string server_nonce;
  std::string server_proof;
  std::string server_credential;
  try {
    server_nonce = challenge.bytes();
    server_proof = challenge.bytes();
    server_credential = challenge.bytes();
    challenge.expect_end();
  } catch (const wire::ProtocolError& error) {
    throw StoreError(cat("store at ", address, " sent a malformed challenge (", error.what(),
                         "): another process holds this port, or one of another cohort version; ",
                         find_the_listener(address)));
  }
  if (server_nonce.size() != store_proof::kNonceBytes ||
      !store_proof::same(server_proof,
                         store_proof::server_proof(token, client_nonce, server_nonce))) {
    // The real store of another job fails the same way: name both.
    throw StoreError(cat("store at ", address,
                         " could not prove that it holds this client's job token: a ",
                         wire::kWrongToken,
                         " (COHORT_JOB_TOKEN differs between this process and the store's), or "
                         "another process holds this port; the token was not sent to it; ",
                         find_the_listener(address)));
  }
  std::string credential;
  std::string munge_error;
  if (expected.munge && owner.where != PeerOwner::Where::this_host) {
    // The token is no secret here (a job id): the server on another host
    // shows, with MUNGE, that it runs as this user, before this client
    // hands it a credential of its own.
    const MungeIdentity identity = munge_decode(server_credential);
    if (!identity.valid || identity.uid != getuid() ||
        identity.payload != store_proof::server_munge_payload(client_nonce)) {
      throw StoreError(cat("store at ", address,
                           " did not prove with MUNGE that it runs as this job's user (uid ",
                           getuid(), "): ",
                           !identity.valid ? identity.error
                           : identity.uid != getuid()
                               ? cat("its credential is for uid ", identity.uid)
                               : std::string("its credential was made for another connection"),
                           "; another process may hold this port: ", find_the_listener(address)));
    }
    // A credential is good once: each connection makes its own. Without
    // munged the client goes on: the server says why it refuses.
    try {
      credential = munge_encode(token);
    } catch (const StoreError& failure) {
      munge_error = failure.what();
    }
  }
  send_or_throw(
      fd, wire::proof(store_proof::client_proof(token, client_nonce, server_nonce), credential),
      address, deadline);
  expect_ok(fd, address, deadline, munge_error);
}

Fd connect_to_store(const std::string& host, int port, const ExpectedStore& expected,
                    std::chrono::milliseconds timeout) {
  const std::string address = cat(host, ":", port);
  const auto deadline = deadline_after(timeout);
  // The store may not listen yet: the agents of a job start at once, and the
  // one that serves it may be the last. Retries start at 1 ms, so that a
  // client is late by about as long as it has already waited, not by a fixed
  // 10 ms (a refused connection costs the server's kernel one reset).
  auto backoff = std::chrono::milliseconds(1);
  std::string error;
  for (;;) {
    Fd fd = connect_tcp(host, port, deadline, &error);
    if (fd.valid()) {
      authenticate_to_store(fd.get(), address, expected, deadline);
      return fd;
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  throw StoreError(cat("could not connect to the store at ", address, " within ", timeout.count(),
                       " ms: ", error,
                       "; is the process that hosts it (cohort run's agent, or rank 0) running, "
                       "and does this host reach it (`cohort env` shows the route)?"));
}

}  // namespace cohort::detail
