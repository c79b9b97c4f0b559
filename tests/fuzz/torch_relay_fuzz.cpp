// A node's relay serving PyTorch's TCPStore clients (store/torch_relay.hpp)
// without sockets: what a client sends is read, answered at once or
// forwarded, and the forwarded requests are answered in order with bytes
// from the input, as the job's store might answer them or not. Besides not
// crashing: every answer reaches the connection of the request it answers
// (or nobody, for a canceled WAIT), and the connection's count of requests
// out is always the number forwarded for it and not yet answered.
//
// Input: records. A byte whose bit 7 says what follows and whose low 7 bits
// are a length n: bit 7 clear, n bytes the client sends (n = 0: its end of
// file); set, the job's store's answer to the oldest request forwarded and
// not answered yet: n bytes of payload (a status byte, then its fields).
#include <cstdlib>
#include <memory>
#include <string>

#include "fuzz/fuzz_target.hpp"
#include "fuzz/store_core_double.hpp"
#include "store/protocol.hpp"
#include "store/relay.hpp"
#include "store/torch_relay.hpp"

namespace cohort::fuzz {
namespace {

constexpr detail::StoreCore::Id kClient = 4;

// What the server would count as out for the client.
std::size_t out_for_client(StoreCoreDouble& core) {
  std::size_t out = 0;
  for (const auto& [id, request] : core.forwarded())
    out += core.reaches(id) ? 1 : 0;
  return out;
}

}  // namespace

COHORT_FUZZ_TARGET(torch_relay) {
  static detail::TorchRelayProtocol protocol;
  StoreCoreDouble core;
  core.relaying(true);
  detail::Connection connection;
  connection.id = kClient;
  connection.peer = "127.0.0.1:40000";
  connection.protocol = &protocol;
  connection.authenticated = true;
  bool open = true;
  const auto handle = [&] {
    open = protocol.handle(core, kClient, connection) && !connection.closing;
    connection.out.clear();  // sent
    connection.splices.clear();
  };
  std::size_t at = 0;
  while (open && at < size) {
    const bool answer = (data[at] & 0x80) != 0;
    const std::size_t length = std::min<std::size_t>(data[at] & 0x7f, size - at - 1);
    const std::string_view bytes(reinterpret_cast<const char*>(data) + at + 1, length);
    at += 1 + length;
    if (!answer) {
      if (bytes.empty()) {
        connection.eof = true;
      } else {
        connection.in.append(bytes);
        if (connection.in.size() > protocol.receive_limit(core, connection)) break;
      }
      handle();
    } else if (!core.forwarded().empty()) {
      const StoreCoreDouble::Id to = core.answer_to(core.forwarded().front().first);
      core.forwarded().pop_front();
      if (to == 0) continue;  // a canceled WAIT's: it goes nowhere
      if (to != kClient || connection.relayed == 0) std::abort();
      auto relayed = std::make_shared<detail::RelayedAnswer>();
      relayed->frame = detail::store_protocol::framed(bytes);
      if (!protocol.relayed_answer(core, kClient, connection, relayed)) break;
      connection.out.clear();
      connection.splices.clear();
      if (--connection.relayed == 0) {
        connection.relayed_wait = false;
        handle();
      }
    }
    if (open && connection.relayed != out_for_client(core)) std::abort();
  }
  return 0;
}

}  // namespace cohort::fuzz
