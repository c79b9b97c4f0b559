#include "store/torch_protocol.hpp"

#include <algorithm>

#include "core/strings.hpp"
#include "store/torch_wire.hpp"

namespace cohort::detail {
namespace {

using torch_wire::Dialect;
using torch_wire::Query;

// CANCEL_WAIT's query byte (PyTorch 2.x): taken even while a WAIT waits.
constexpr char kCancelWaitByte = 12;

bool is_torch_key(const std::string& key) {
  return key.compare(0, kTorchKeyPrefix.size(), kTorchKeyPrefix) == 0;
}

// COMPARE_SET as PyTorch's server answers it: the value after the call; for
// a missing key, `desired` after setting it when `expected` is empty, else
// `expected` (its clients rely on that).
std::string compare_set(KeySpace& keys, const std::string& key, const std::string& expected,
                        const std::string& desired) {
  const std::string* current = keys.find(key);
  if (current == nullptr) {
    if (!expected.empty()) return expected;
    keys.set(key, desired);
    return desired;
  }
  if (*current == expected) {
    keys.set(key, desired);
    return desired;
  }
  return *current;
}

// A connection's dialect, told from its first bytes, and the request its
// bytes are read into.
struct TorchConnection final : ConnectionState {
  TorchConnection(Dialect of, std::size_t max_bytes) : dialect(of), parser(of, max_bytes) {}
  Dialect dialect;
  torch_wire::Parser parser;
};

TorchConnection& torch_state(Connection& connection) {
  return static_cast<TorchConnection&>(*connection.state);
}

// One request; false when the connection was closed.
bool execute(StoreCore& core, KeySpace::Id id, Connection& connection,
             const torch_wire::Request& request) {
  KeySpace& store = core.keys();
  const bool v2 = torch_state(connection).dialect == Dialect::v2;
  std::vector<std::string> keys;
  keys.reserve(request.keys.size());
  for (const std::string& key : request.keys)
    keys.push_back(cat(kTorchKeyPrefix, key));
  std::string& out = connection.out;
  switch (request.query) {
    case Query::validate:
      if (request.word != torch_wire::kValidateMagic) {
        core.drop(id, connection,
                  cat("PyTorch TCPStore client sent VALIDATE with ", request.word,
                      " in place of PyTorch's number"));
        return false;
      }
      break;
    case Query::ping:  // the client checks that its nonce comes back
      out += torch_wire::u32_reply(request.word);
      break;
    case Query::set:
      store.set(keys[0], request.value);
      break;
    case Query::multi_set:
      for (std::size_t i = 0; i < keys.size(); ++i)
        store.set(keys[i], request.values[i]);
      break;
    case Query::append:
      store.append(keys[0], request.value);
      break;
    case Query::compare_set:
      out += torch_wire::bytes_reply(compare_set(store, keys[0], request.expected, request.value));
      break;
    case Query::get: {
      const std::string* value = store.find(keys[0]);
      if (value == nullptr && !v2) {
        core.drop(id, connection,
                  cat("PyTorch TCPStore client asked for key '", request.keys[0],
                      "', which is not set (its client always waits for a key first)"));
        return false;
      }
      // 2.x's libuv server answers nothing for a missing key, as here.
      out += torch_wire::bytes_reply(value == nullptr ? std::string_view() : *value);
      break;
    }
    case Query::multi_get:  // the client waits for the keys first
      for (const std::string& key : keys) {
        const std::string* value = store.find(key);
        out += torch_wire::bytes_reply(value == nullptr ? std::string_view() : *value);
      }
      break;
    case Query::add: {
      std::string error;
      const std::optional<std::int64_t> sum = store.add(keys[0], request.number, &error);
      if (!sum) {
        core.drop(id, connection, cat("PyTorch TCPStore client: ", error));
        return false;
      }
      out += torch_wire::i64_reply(*sum);
      break;
    }
    case Query::check:
      out += torch_wire::u8_reply(
          std::all_of(keys.begin(), keys.end(),
                      [&store](const std::string& k) { return store.is_set(k); })
              ? torch_wire::kReady
              : torch_wire::kNotReady);
      break;
    case Query::wait: {
      Wait wait;
      wait.keys = KeyList(keys);
      wait.queues_count = true;
      // No deadline: the client keeps its own.
      if (store.wait(id, wait, Deadline::max()))
        out += torch_wire::u8_reply(torch_wire::kStopWaiting);
      break;
    }
    case Query::barrier: {
      std::string error;
      if (!store.add(keys[0], 1, &error)) {
        core.drop(id, connection, cat("PyTorch TCPStore client: BARRIER: ", error));
        return false;
      }
      Wait wait;
      wait.keys = KeyList(keys);
      wait.at_least = std::max<std::int64_t>(request.number, 1);
      if (store.wait(id, wait, Deadline::max()))
        out += torch_wire::u8_reply(torch_wire::kStopWaiting);
      break;
    }
    case Query::cancel_wait:
      // After the wait was answered, or while it waits: either way the
      // client reads this after any STOP_WAITING already sent.
      store.cancel(id);
      out += torch_wire::u8_reply(torch_wire::kWaitCanceled);
      break;
    case Query::num_keys: {
      std::int64_t count = 0;
      store.for_each_key([&count](const std::string& key) { count += is_torch_key(key); });
      out += torch_wire::i64_reply(count);
      break;
    }
    case Query::list_keys: {
      std::string listed;
      std::int64_t count = 0;
      store.for_each_key([&](const std::string& key) {
        if (!is_torch_key(key)) return;
        ++count;
        listed += torch_wire::bytes_reply(std::string_view(key).substr(kTorchKeyPrefix.size()));
      });
      out += torch_wire::i64_reply(count) + listed;
      break;
    }
    case Query::delete_key:
      out += torch_wire::i64_reply(store.erase(keys[0]) ? 1 : 0);
      break;
    case Query::queue_push:
      store.push(keys[0], request.value);
      break;
    case Query::queue_pop: {
      std::string item;
      const std::size_t length = store.pop(keys[0], &item);
      out += torch_wire::i64_reply(static_cast<std::int64_t>(length));
      if (length != 0) out += torch_wire::bytes_reply(item);
      break;
    }
    case Query::queue_len:
      out += torch_wire::i64_reply(static_cast<std::int64_t>(store.queue_length(keys[0])));
      break;
    case Query::watch_key:  // parse() refuses it
      break;
  }
  return true;
}

}  // namespace

std::optional<Dialect> torch_dialect(std::string_view first_bytes) noexcept {
  if (first_bytes.empty() || (first_bytes.size() < 5 && first_bytes[0] == 0)) {
    return std::nullopt;  // VALIDATE, or not yet known
  }
  return torch_wire::opens_like_newer_client(first_bytes) ? Dialect::v2 : Dialect::v1;
}

std::size_t torch_receive_limit(const StoreCore& core) {
  return std::size_t{core.options().max_frame_bytes} * 2 + 64;
}

void refuse_unsupported(StoreCore& core, KeySpace::Id id, Connection& connection, Dialect dialect,
                        const torch_wire::Unsupported& error) {
  const std::string why =
      cat("a PyTorch TCPStore client at ", connection.peer, " (",
          dialect == Dialect::v2 ? "PyTorch 2.1 or later" : "PyTorch 1.13 or earlier", ") sent ",
          error.what());
  // Anyone the network reaches may speak on this port (PyTorch's protocol
  // has no secret): only a client of this host's user, one of the job's
  // own, can end the job by asking what is not served.
  if (connection.remote) {
    core.drop(id, connection, why);
  } else {
    core.unservable(id, connection, why);
  }
}

std::size_t TorchProtocol::receive_limit(const StoreCore& core, const Connection&) const {
  return torch_receive_limit(core);
}

bool TorchProtocol::handle(StoreCore& core, Id id, Connection& connection) {
  std::size_t used = 0;
  while (!connection.closing) {
    const std::string_view pending = std::string_view(connection.in).substr(used);
    if (pending.empty()) break;
    if (!connection.state) {
      const std::optional<Dialect> dialect = torch_dialect(pending);
      if (!dialect) break;
      connection.state =
          std::make_unique<TorchConnection>(*dialect, core.options().max_frame_bytes);
    }
    const Dialect dialect = torch_state(connection).dialect;
    if (core.keys().waiting(id) && !(dialect == Dialect::v2 && pending[0] == kCancelWaitByte)) {
      break;
    }
    std::size_t size = 0;
    std::optional<torch_wire::Request> request;
    try {
      request = torch_state(connection).parser.next(pending, &size);
    } catch (const torch_wire::Unsupported& error) {
      refuse_unsupported(core, id, connection, dialect, error);
      return false;
    }
    if (!request) break;
    used += size;
    if (!execute(core, id, connection, *request)) return false;
  }
  connection.in.erase(0, used);
  release_if_idle(connection.in);
  return true;
}

void TorchProtocol::answer_wait(StoreCore&, Connection& connection, const Wait&,
                                store_protocol::Tag) {
  connection.out += torch_wire::u8_reply(torch_wire::kStopWaiting);
}

void TorchProtocol::answer_timeout(Connection&, const std::vector<std::string>&,
                                   store_protocol::Tag) {
  // Never called: PyTorch's waits have no deadline on the server.
}

}  // namespace cohort::detail
