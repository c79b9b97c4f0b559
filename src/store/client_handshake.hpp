// The client's side of the store's handshake (protocol.hpp): it checks who
// the server is before it proves anything itself, so that a process that
// listened first on the job's port learns neither the token nor a MUNGE
// credential, and the client fails at once, naming the port.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/fd.hpp"
#include "core/socket.hpp"

namespace cohort::detail {

/// Reads one frame's payload from blocking `fd`; the buffer grows with the
/// bytes that arrive, not with the length the header announces. False and
/// `*error` on end of stream, timeout, or a length over `limit`. With
/// `files`, descriptors that come with the frame are appended to it.
bool recv_frame(int fd, std::string* payload, std::size_t limit, Deadline deadline,
                std::string* error, std::vector<Fd>* files = nullptr);

/// recv_frame, keeping the frame's header before its payload (a frame
/// passed on as it came).
bool recv_framed(int fd, std::string* frame, std::size_t limit, Deadline deadline,
                 std::string* error);

/// What a client expects of the store it connects to.
struct ExpectedStore {
  std::string_view token{};
  bool munge = false;          ///< one on another host shows a MUNGE credential
  std::string_view process{};  ///< process_identity() of one on this host, or ""
  /// How long the store may take to answer the hello: one answers at once,
  /// a busy one within seconds; a process that accepts and says nothing
  /// (another program on the port) would otherwise hold the client for its
  /// whole timeout.
  std::chrono::milliseconds hello_answer{30000};
};

/// Runs the handshake on `fd`, connected to the store at `address`
/// (host:port): a server on this host must run as this user, and be
/// `expected.process` when that is known; every server must prove it knows
/// the token; with `munge`, one on another host must also show a MUNGE
/// credential of this user. Then this client proves the token (and sends
/// its own credential with `munge`). Throws cohort::StoreError saying
/// which check failed.
void authenticate_to_store(int fd, const std::string& address, const ExpectedStore& expected,
                           Deadline deadline);

/// Connects to the store at host:port and runs the handshake, retrying with
/// backoff (1 ms doubling to 500 ms) until `timeout`: the server may not be
/// listening yet. Throws cohort::StoreError naming host:port.
Fd connect_to_store(const std::string& host, int port, const ExpectedStore& expected,
                    std::chrono::milliseconds timeout);

}  // namespace cohort::detail
