#include "store/torch_relay.hpp"

#include <algorithm>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/strings.hpp"
#include "store/protocol.hpp"
#include "store/relay.hpp"
#include "store/torch_protocol.hpp"
#include "store/torch_wire.hpp"

namespace cohort::detail {
namespace {

namespace wire = store_protocol;
using torch_wire::Dialect;
using torch_wire::Query;

// A query whose answers from the store are still to come.
struct Out {
  torch_wire::Request request;
  std::size_t answers = 0;  // cohort answers still to come for it
  bool waits = false;       // went up on a lane: nothing joins it
  bool counted = false;     // a BARRIER whose ADD was answered: now it waits
  StoreCore::Id alias = 0;  // a WAIT's: the name it went up under (StoreCore::alias)
};

struct TorchRelayConnection final : ConnectionState {
  TorchRelayConnection(Dialect of, std::size_t max_bytes) : dialect(of), parser(of, max_bytes) {}
  Dialect dialect;
  torch_wire::Parser parser;
  std::optional<torch_wire::Request> held;  // read, and waiting for the answers before it
  std::deque<Out> out;                      // in the order of the queries
};

TorchRelayConnection& relay_state(Connection& connection) {
  return static_cast<TorchRelayConnection&>(*connection.state);
}

std::vector<std::string> torch_keys(const std::vector<std::string>& keys) {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const std::string& key : keys)
    prefixed.push_back(cat(kTorchKeyPrefix, key));
  return prefixed;
}

wire::Writer op(wire::Op what) {
  wire::Writer writer;
  writer.u8(static_cast<std::uint8_t>(what));
  return writer;
}

// PyTorch's WAIT (queues count, as on PyTorch's server), CHECK (a WAIT
// that does not wait) and BARRIER's wait (`at_least` arrived).
std::string wait_for(const std::vector<std::string>& keys, std::int64_t at_least,
                     std::chrono::milliseconds timeout) {
  return op(wire::Op::wait_for)
      .strings(torch_keys(keys))
      .i64(at_least)
      .u8(at_least == 0 ? 1 : 0)
      .i64(timeout.count())
      .fields();
}

// The cohort requests a query sends first (a BARRIER's wait follows its ADD).
std::vector<std::string> requests_for(const torch_wire::Request& request) {
  const auto key = [&request] { return cat(kTorchKeyPrefix, request.keys.at(0)); };
  switch (request.query) {
    case Query::set:
      return {op(wire::Op::set).bytes(key()).bytes(request.value).fields()};
    case Query::multi_set: {
      std::vector<std::string> sets;
      for (std::size_t i = 0; i < request.keys.size(); ++i) {
        sets.push_back(op(wire::Op::set)
                           .bytes(cat(kTorchKeyPrefix, request.keys[i]))
                           .bytes(request.values[i])
                           .fields());
      }
      return sets;
    }
    case Query::append:
      return {op(wire::Op::append).bytes(key()).bytes(request.value).fields()};
    case Query::compare_set:
      return {op(wire::Op::compare_set)
                  .bytes(key())
                  .bytes(request.expected)
                  .bytes(request.value)
                  .fields()};
    case Query::get:  // its client WAITed first: the key is there, or was deleted since
      return {op(wire::Op::get).bytes(key()).i64(0).fields()};
    case Query::multi_get:
      return {op(wire::Op::multi_get).strings(torch_keys(request.keys)).i64(0).fields()};
    case Query::add:
      return {op(wire::Op::add).bytes(key()).i64(request.number).fields()};
    case Query::barrier:
      return {op(wire::Op::add).bytes(key()).i64(1).fields()};
    case Query::check:
      return {wait_for(request.keys, 0, std::chrono::milliseconds(0))};
    case Query::wait:
      return {wait_for(request.keys, 0, TorchRelayProtocol::kWaitSlice)};
    case Query::num_keys:
    case Query::list_keys:
      return {op(wire::Op::list_keys).bytes(kTorchKeyPrefix).fields()};
    case Query::delete_key:
      return {op(wire::Op::delete_key).bytes(key()).fields()};
    case Query::queue_push:
      return {op(wire::Op::queue_push).bytes(key()).bytes(request.value).fields()};
    case Query::queue_pop:
      return {op(wire::Op::queue_pop).bytes(key()).fields()};
    case Query::queue_len:
      return {op(wire::Op::queue_len).bytes(key()).fields()};
    case Query::validate:
    case Query::ping:
    case Query::cancel_wait:
    case Query::watch_key:
      break;
  }
  return {};
}

// One request to the job's store, answered later (relayed_answer).
void forward(StoreCore& core, StoreCore::Id id, Connection& connection, std::string_view payload) {
  RelayedRequest relayed = relayed_request(payload);
  connection.relayed_wait = connection.relayed_wait || relayed.may_wait();
  ++connection.relayed;
  core.forward(id, std::move(relayed));
}

enum class Taken { yes, held, closed };

// A query read from the client: answered here, sent up, or held until the
// answers before it are in.
Taken take(StoreCore& core, StoreCore::Id id, Connection& connection,
           torch_wire::Request& request) {
  TorchRelayConnection& state = relay_state(connection);
  const bool busy = !state.out.empty();
  switch (request.query) {
    case Query::validate:
      if (busy) return Taken::held;
      if (request.word != torch_wire::kValidateMagic) {
        core.drop(id, connection,
                  cat("PyTorch TCPStore client sent VALIDATE with ", request.word,
                      " in place of PyTorch's number"));
        return Taken::closed;
      }
      return Taken::yes;
    case Query::ping:  // the client checks that its nonce comes back
      if (busy) return Taken::held;
      connection.out += torch_wire::u32_reply(request.word);
      return Taken::yes;
    case Query::cancel_wait:
      // While its WAIT is out (the one query out then), or after it was
      // answered: either way the client reads this after any STOP_WAITING.
      if (busy && state.out.back().request.query != Query::wait) return Taken::held;
      if (busy) {
        // Its answer, when the key is set or the slice is over, goes nowhere:
        // the client's next queries need not wait for it.
        core.forget_alias(state.out.back().alias);
        if (--connection.relayed == 0) connection.relayed_wait = false;
        state.out.pop_back();
      }
      connection.out += torch_wire::u8_reply(torch_wire::kWaitCanceled);
      return Taken::yes;
    default:
      break;
  }
  const std::vector<std::string> requests = requests_for(request);
  bool quick = request.query != Query::barrier;  // its ADD, then its wait
  for (const std::string& payload : requests)
    quick = quick && joins_a_batch(static_cast<wire::Op>(payload.at(0)));
  // Quick queries join quick ones in the relay's batch, in order; one that
  // may wait goes up alone.
  if (busy && (!quick || state.out.back().waits)) return Taken::held;
  if (requests.empty()) return Taken::yes;  // MULTI_SET of nothing
  Out sent{std::move(request), requests.size(), !quick};
  if (sent.request.query == Query::wait) sent.alias = core.alias(id);
  for (const std::string& payload : requests)
    forward(core, sent.alias != 0 ? sent.alias : id, connection, payload);
  state.out.push_back(std::move(sent));
  return Taken::yes;
}

}  // namespace

std::size_t TorchRelayProtocol::receive_limit(const StoreCore& core, const Connection&) const {
  return torch_receive_limit(core);
}

bool TorchRelayProtocol::handle(StoreCore& core, Id id, Connection& connection) {
  std::size_t used = 0;
  while (!connection.closing) {
    const std::string_view pending = std::string_view(connection.in).substr(used);
    if (!connection.state) {
      const std::optional<Dialect> dialect = torch_dialect(pending);
      if (!dialect) break;
      connection.state =
          std::make_unique<TorchRelayConnection>(*dialect, core.options().max_frame_bytes);
    }
    TorchRelayConnection& state = relay_state(connection);
    std::optional<torch_wire::Request> request = std::exchange(state.held, std::nullopt);
    if (!request) {
      if (pending.empty()) break;
      std::size_t size = 0;
      try {
        request = state.parser.next(pending, &size);
      } catch (const torch_wire::Unsupported& error) {
        refuse_unsupported(core, id, connection, state.dialect, error);
        return false;
      }
      if (!request) break;
      used += size;
    }
    const Taken taken = take(core, id, connection, *request);
    if (taken == Taken::closed) return false;
    if (taken == Taken::held) {
      state.held = std::move(request);
      break;
    }
  }
  connection.in.erase(0, used);
  release_if_idle(connection.in);
  return true;
}

bool TorchRelayProtocol::relayed_answer(StoreCore& core, Id id, Connection& connection,
                                        const std::shared_ptr<RelayedAnswer>& answer) {
  TorchRelayConnection& state = relay_state(connection);
  if (state.out.empty()) return true;  // every answer stands for a query sent up
  Out& front = state.out.front();
  const std::string_view query = torch_wire::name(front.request.query);
  std::string error;
  const std::optional<StoreValue> payload = answer->payload(&error);
  if (!payload) {
    core.drop(id, connection,
              cat("could not read the job store's answer to its ", query, ": ", error));
    return false;
  }
  const torch_wire::Request& request = front.request;
  std::string& out = connection.out;
  // A wait that ran its slice asks again while its client waits.
  const auto wait_again = [&](std::int64_t at_least) {
    front.answers = 1;
    if (front.alias != 0) front.alias = core.alias(id);
    forward(core, front.alias != 0 ? front.alias : id, connection,
            wait_for(request.keys, at_least, kWaitSlice));
    return true;
  };
  try {
    wire::Reader reader(payload->view());
    const auto status = static_cast<wire::Status>(reader.u8());
    if (status == wire::Status::error) {
      core.drop(id, connection, cat("its ", query, ": ", reader.bytes()));
      return false;
    }
    if (--front.answers > 0) return true;  // MULTI_SET's SETs before the last
    const bool timed_out = status == wire::Status::timeout;
    switch (request.query) {
      case Query::compare_set: {
        const std::string_view value = reader.bytes();
        // A missing key: PyTorch's server answers `expected`, which its clients rely on.
        out +=
            torch_wire::bytes_reply(reader.u8() != 0 ? value : std::string_view(request.expected));
        break;
      }
      case Query::get: {
        if (timed_out && state.dialect == Dialect::v1) {
          core.drop(id, connection,
                    cat("PyTorch TCPStore client asked for key '", request.keys[0],
                        "', which is not set (its client always waits for a key first)"));
          return false;
        }
        const std::string_view value = timed_out ? std::string_view() : reader.bytes();
        if (value.size() < kLargeAnswerBytes) {
          out += torch_wire::bytes_reply(value);
          break;
        }
        out += torch_wire::i64_reply(static_cast<std::int64_t>(value.size()));
        connection.splice(StoreValue(answer, value));  // no copy of a table
        break;
      }
      case Query::multi_get:
        if (timed_out) {
          core.drop(id, connection,
                    "PyTorch TCPStore client's MULTI_GET named keys that are not set (its "
                    "client waits for them first)");
          return false;
        }
        for (const std::string& value : reader.strings())
          out += torch_wire::bytes_reply(value);
        break;
      case Query::add:
        out += torch_wire::i64_reply(reader.i64());
        break;
      case Query::check:
        out += torch_wire::u8_reply(timed_out ? torch_wire::kNotReady : torch_wire::kReady);
        break;
      case Query::wait:
        if (timed_out) return wait_again(0);
        out += torch_wire::u8_reply(torch_wire::kStopWaiting);
        break;
      case Query::barrier:
        if (!front.counted || timed_out) {
          front.counted = true;
          return wait_again(std::max<std::int64_t>(request.number, 1));
        }
        out += torch_wire::u8_reply(torch_wire::kStopWaiting);
        break;
      case Query::num_keys:
        out += torch_wire::i64_reply(static_cast<std::int64_t>(reader.strings().size()));
        break;
      case Query::list_keys: {
        const std::vector<std::string> keys = reader.strings();
        out += torch_wire::i64_reply(static_cast<std::int64_t>(keys.size()));
        for (const std::string& key : keys) {  // each under the prefix asked for
          out += torch_wire::bytes_reply(
              std::string_view(key).substr(std::min(key.size(), kTorchKeyPrefix.size())));
        }
        break;
      }
      case Query::delete_key:
        out += torch_wire::i64_reply(reader.u8());
        break;
      case Query::queue_pop: {
        const std::int64_t length = reader.i64();
        out += torch_wire::i64_reply(length);
        if (length != 0) out += torch_wire::bytes_reply(reader.bytes());
        break;
      }
      case Query::queue_len:
        out += torch_wire::i64_reply(reader.i64());
        break;
      default:  // SET, MULTI_SET, APPEND, QUEUE_PUSH: no answer
        break;
    }
  } catch (const wire::ProtocolError& malformed) {
    core.drop(id, connection,
              cat("the job store's answer to its ", query, " was malformed: ", malformed.what()));
    return false;
  }
  state.out.pop_front();
  return true;
}

}  // namespace cohort::detail
