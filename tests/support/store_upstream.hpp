// The job's store's side of a connection's start, for tests that play a
// store (or a relay above another) by hand: the handshake with `token`,
// then MULTIPLEX accepted, as a relay's connection upstream expects. What
// the test then sends, or does not, is the store's every answer.
#pragma once

#include <string>

#include "core/socket.hpp"
#include "store/client_handshake.hpp"
#include "store/proof.hpp"
#include "store/protocol.hpp"

namespace cohort::test {

/// Runs the server's side of the handshake and of MULTIPLEX on `fd`;
/// false when the other end broke off or `deadline` passed.
inline bool serve_store_handshake(int fd, const std::string& token, detail::Deadline deadline) {
  namespace wire = detail::store_protocol;
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
          .bytes(detail::store_proof::server_proof(token, client_nonce, server_nonce))
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

}  // namespace cohort::test
