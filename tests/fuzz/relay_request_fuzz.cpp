// What a node's relay reads of a client's request (store/relay.hpp) against
// what the store itself accepts: the relay must refuse exactly the requests
// the store would close a connection for, since it sends the rest up on
// connections it shares with every other client of the node.
//
// Input: one request's payload (an operation byte, then its fields). It is
// read by relayed_request() and, framed, handled by cohort's protocol on an
// authenticated connection as the store would; a disagreement aborts.
// ACCEPT_FILES and MULTIPLEX are the relay's own to answer: skipped.
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz/fuzz_target.hpp"
#include "fuzz/store_core_double.hpp"
#include "store/cohort_protocol.hpp"
#include "store/protocol.hpp"
#include "store/relay.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(relay_request) {
  namespace wire = detail::store_protocol;
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  if (!payload.empty() && (static_cast<wire::Op>(payload[0]) == wire::Op::multiplex ||
                           static_cast<wire::Op>(payload[0]) == wire::Op::accept_files)) {
    return 0;
  }
  bool relayed = true;
  try {
    const detail::RelayedRequest request = detail::relayed_request(payload);
    if (request.frame != wire::framed(payload)) std::abort();
  } catch (const wire::ProtocolError&) {
    relayed = false;
  }
  static detail::CohortProtocol protocol;
  StoreCoreDouble core;
  detail::Connection connection;
  connection.id = 4;
  connection.protocol = &protocol;
  connection.authenticated = true;
  connection.in = wire::framed(payload);
  const bool open = protocol.handle(core, connection.id, connection) && !connection.closing;
  // An empty payload is no request to either (the store reads no operation).
  if (relayed != open) std::abort();
  return 0;
}

}  // namespace cohort::fuzz
