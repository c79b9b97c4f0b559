#include "store/cohort_protocol.hpp"

#include <algorithm>

#include <cohort/errors.hpp>

#include "core/strings.hpp"
#include "store/admission.hpp"
#include "store/munge_credential.hpp"
#include "store/proof.hpp"
#include "store/protocol.hpp"
#include "store/relay.hpp"

namespace cohort::detail {

namespace wire = store_protocol;

namespace {

// An answer's first fields: its tag on a multiplexed connection, its status.
wire::Writer answer(wire::Tag tag, wire::Status status = wire::Status::ok) {
  wire::Writer writer;
  if (tag) writer.u32(*tag);
  writer.u8(static_cast<std::uint8_t>(status));
  return writer;
}

// The refusal of a SET_ON_CLOSE past what one connection may leave.
std::string on_close_limit(wire::Tag tag) {
  return answer(tag, wire::Status::error)
      .bytes(cat("a connection may leave at most ", wire::kMaxOnCloseSets,
                 " keys to set when it ends"))
      .frame();
}

// Whether a request may be handled while the connection's earlier ones are
// out with a relay's upstream: a quick one behind quick ones joins their
// batch, in order; so do an in-process client's last words, which the relay
// sends up with them.
bool joins_in_order(const Connection& connection, wire::Op op) {
  return joins_a_batch(op) || (connection.in_process &&
                               (op == wire::Op::set_on_close || op == wire::Op::clear_on_close));
}

}  // namespace

std::string CohortProtocol::refusal(const std::string& why) const {
  return wire::Writer().u8(static_cast<std::uint8_t>(wire::Status::rejected)).bytes(why).frame();
}

std::size_t CohortProtocol::receive_limit(const StoreCore& core,
                                          const Connection& connection) const {
  // Before its handshake a client may send one handshake frame; after, it
  // may send ahead while waiting, but not without bound.
  return connection.authenticated ? std::size_t{core.options().max_frame_bytes} * 2 + 64
                                  : std::size_t{wire::kMaxHandshakeBytes} + wire::kFrameHeaderBytes;
}

bool CohortProtocol::handle(StoreCore& core, Id id, Connection& connection) {
  std::size_t used = 0;
  while (!core.keys().waiting(id) && !connection.closing && connection.held_answer.empty()) {
    const std::size_t available = connection.in.size() - used;
    if (available < wire::kFrameHeaderBytes) break;
    const std::uint32_t length = wire::frame_length(connection.in.data() + used);
    if (connection.relayed > 0 && !connection.multiplexed &&
        (connection.relayed_wait || length == 0 || available == wire::kFrameHeaderBytes ||
         !joins_in_order(connection,
                         static_cast<wire::Op>(connection.in[used + wire::kFrameHeaderBytes])))) {
      break;
    }
    const std::uint32_t limit =
        connection.authenticated ? core.options().max_frame_bytes : wire::kMaxHandshakeBytes;
    if (length > limit) {
      core.drop(id, connection,
                cat("a frame of ", length, " bytes exceeds the limit of ", limit, " bytes",
                    connection.authenticated ? "" : " for a handshake"));
      return false;
    }
    if (available < wire::kFrameHeaderBytes + length) break;
    const std::string_view payload(connection.in.data() + used + wire::kFrameHeaderBytes, length);
    used += wire::kFrameHeaderBytes + length;
    try {
      if (connection.authenticated) {
        request(core, id, connection, payload);
      } else {
        handshake(core, connection, payload);
      }
    } catch (const wire::ProtocolError& error) {
      core.drop(id, connection, cat("malformed request: ", error.what()));
      return false;
    }
  }
  connection.in.erase(0, used);
  release_if_idle(connection.in);
  return true;
}

void CohortProtocol::handshake(StoreCore& core, Connection& connection, std::string_view payload) {
  if (connection.challenge.empty()) return hello(core, connection, payload);
  wire::Reader reader(payload);
  const std::string_view proof = reader.bytes();
  const std::string_view credential = reader.bytes();
  reader.expect_end();
  const std::string_view client_nonce =
      std::string_view(connection.challenge).substr(0, store_proof::kNonceBytes);
  const std::string_view server_nonce =
      std::string_view(connection.challenge).substr(store_proof::kNonceBytes);
  const bool proven = store_proof::same(
      proof, store_proof::client_proof(core.options().token, client_nonce, server_nonce));
  const std::string why =
      credential_refusal(proven, credential, connection.remote, core.options(), core.user());
  const bool held = core.judged(connection, proven);
  if (!why.empty()) {
    if (!held) return refuse(core, connection, why);
    core.log_refusal(cat("rejected the connection from ", connection.peer, ": ", why));
    connection.held_answer = refusal(why);
    connection.close_after_held = true;
    return;
  }
  connection.authenticated = true;
  connection.challenge.clear();
  connection.challenge.shrink_to_fit();
  const std::string ok = wire::Writer().u8(static_cast<std::uint8_t>(wire::Status::ok)).frame();
  if (held) {
    connection.held_answer = ok;  // the slot is kept until it is sent
    return;
  }
  core.end_handshake(connection);
  connection.out += ok;
}

// The client's first frame: the server answers with its nonce and its
// proof of the token, before the client proves anything.
void CohortProtocol::hello(StoreCore& core, Connection& connection, std::string_view payload) {
  wire::Reader reader(payload);
  std::string magic;
  for (std::size_t i = 0; i < wire::kMagic.size(); ++i)
    magic.push_back(static_cast<char>(reader.u8()));
  const std::uint8_t version = reader.u8();
  if (magic != wire::kMagic || version != wire::kVersion) {
    return refuse(core, connection,
                  magic != wire::kMagic ? std::string("not a cohort store client (bad magic)")
                                        : cat("protocol version ", int{version},
                                              ", this server speaks ", int{wire::kVersion},
                                              ": every process of a job must run the same cohort"));
  }
  const std::string_view client_nonce = reader.bytes();
  reader.expect_end();
  if (client_nonce.size() != store_proof::kNonceBytes) {
    throw wire::ProtocolError(cat("a nonce of ", client_nonce.size(), " bytes (",
                                  store_proof::kNonceBytes, " expected)"));
  }
  const std::string server_nonce = store_proof::nonce();
  std::string credential;
  if (core.options().munge && connection.remote && !core.options().token_is_secret) {
    try {
      credential = munge_encode(store_proof::server_munge_payload(client_nonce));
    } catch (const StoreError& error) {
      return refuse(
          core, connection,
          cat("this store cannot prove its user to a client on another host: ", error.what()));
    }
  }
  connection.challenge = cat(client_nonce, server_nonce);
  connection.out +=
      wire::Writer()
          .u8(static_cast<std::uint8_t>(wire::Status::ok))
          .bytes(server_nonce)
          .bytes(store_proof::server_proof(core.options().token, client_nonce, server_nonce))
          .bytes(credential)
          .frame();
}

void CohortProtocol::refuse(StoreCore& core, Connection& connection, const std::string& why) {
  core.log_refusal(cat("rejected the connection from ", connection.peer, ": ", why));
  connection.out += refusal(why);
  connection.closing = true;
}

void CohortProtocol::request(StoreCore& core, Id id, Connection& connection,
                             std::string_view payload) {
  KeySpace& keys = core.keys();
  wire::Reader reader(payload);
  const wire::Tag tag = connection.multiplexed ? wire::Tag(reader.u32()) : std::nullopt;
  const std::string_view body = payload.substr(tag ? wire::kTagBytes : 0);
  const auto op = static_cast<wire::Op>(reader.u8());
  wire::Writer reply = answer(tag);
  if (op == wire::Op::accept_files || op == wire::Op::multiplex) {
    // A relay below that placed this hop by its node's name alone (the
    // agents' tree before the rendezvous) names it: nobody else may take it.
    const std::string_view expected =
        op == wire::Op::multiplex && !reader.at_end() ? reader.bytes() : std::string_view();
    reader.expect_end();
    const std::string& name = core.options().name;
    if (expected != name && !expected.empty()) {
      connection.out += wire::error_frame(
          cat("this is not ", expected, " but ",
              name.empty() ? (core.relays() ? "another relay" : "the job's store") : name));
      connection.closing = true;
      return;
    }
    if (op == wire::Op::multiplex) {
      // Its own answer is the last frame without a tag.
      connection.multiplexed = true;
      connection.takes_files = false;
    } else {
      connection.takes_files = connection.socket_pair && !connection.multiplexed;
    }
    connection.out += reply.frame();
    return;
  }
  if (core.relays()) {
    // Last words are the relay's to keep; an in-process client's also go up
    // (relay.hpp), and are answered from there.
    const bool last_words = op == wire::Op::set_on_close || op == wire::Op::clear_on_close;
    if (!last_words || connection.in_process) {
      RelayedRequest relayed = relayed_request(body);
      // An in-process client's last words count against the relay's own
      // connection's limit upstream, whose answer comes in its order.
      if (op == wire::Op::set_on_close) {
        wire::Reader fields(body.substr(1));
        std::string key(fields.bytes());
        connection.on_close.emplace_back(std::move(key), fields.bytes());
      } else if (op == wire::Op::clear_on_close) {
        connection.on_close.clear();
      }
      if (tag) {  // answered when it comes, whatever else is out
        core.forward(core.alias(id, tag), std::move(relayed));
        return;
      }
      connection.relayed_wait = connection.relayed_wait || relayed.may_wait();
      ++connection.relayed;
      core.forward(id, std::move(relayed));
      return;
    }
  }
  switch (op) {
    case wire::Op::set: {
      std::string key(reader.bytes());
      std::string value(reader.bytes());
      reader.expect_end();
      keys.set(key, std::move(value));
      break;
    }
    case wire::Op::get:
    case wire::Op::get_versioned:
    case wire::Op::wait:
    case wire::Op::multi_get: {
      std::vector<std::string> names;
      const bool get = op == wire::Op::get || op == wire::Op::get_versioned;
      if (get) {
        names.emplace_back(reader.bytes());
      } else {
        names = reader.strings();
      }
      const std::int64_t timeout_ms = reader.i64();
      Wait wait;
      if (op == wire::Op::get_versioned) {
        wait.versioned = true;
        wait.known_version = static_cast<std::uint64_t>(reader.i64());
      }
      reader.expect_end();
      wait.keys = KeyList(names);
      wait.get = get;
      wait.get_all = op == wire::Op::multi_get;
      return wait_for(core, id, connection, wait, timeout_ms, tag);
    }
    case wire::Op::add: {
      std::string key(reader.bytes());
      const std::int64_t delta = reader.i64();
      reader.expect_end();
      std::string error;
      const std::optional<std::int64_t> sum = keys.add(key, delta, &error);
      if (!sum) {
        reply = answer(tag, wire::Status::error);
        reply.bytes(error);
        break;
      }
      reply.i64(*sum);
      break;
    }
    case wire::Op::compare_set: {
      std::string key(reader.bytes());
      const std::string_view expected = reader.bytes();
      const std::string_view desired = reader.bytes();
      reader.expect_end();
      const std::string* current = keys.find(key);
      if (current == nullptr ? expected.empty() : *current == expected) {
        keys.set(key, std::string(desired));
        reply.bytes(desired).u8(1);
      } else {
        // u8 0: the key is not set (a relay answers PyTorch's clients
        // `expected` then, as PyTorch's server does).
        reply.bytes(current == nullptr ? std::string_view() : std::string_view(*current))
            .u8(current != nullptr ? 1 : 0);
      }
      break;
    }
    case wire::Op::check: {
      const std::vector<std::string> names = reader.strings();
      reader.expect_end();
      reply.u8(keys.all_set(names) ? 1 : 0);
      break;
    }
    case wire::Op::delete_key: {
      const std::string key(reader.bytes());
      reader.expect_end();
      reply.u8(keys.erase(key) ? 1 : 0);
      break;
    }
    case wire::Op::append: {
      const std::string key(reader.bytes());
      const std::string_view value = reader.bytes();
      reader.expect_end();
      keys.append(key, value);
      break;
    }
    case wire::Op::queue_push: {
      const std::string key(reader.bytes());
      std::string value(reader.bytes());
      reader.expect_end();
      keys.push(key, std::move(value));
      break;
    }
    case wire::Op::queue_pop: {
      const std::string key(reader.bytes());
      reader.expect_end();
      std::string item;
      const std::size_t length = keys.pop(key, &item);
      reply.i64(static_cast<std::int64_t>(length));
      if (length != 0) reply.bytes(item);
      break;
    }
    case wire::Op::queue_len: {
      const std::string key(reader.bytes());
      reader.expect_end();
      reply.i64(static_cast<std::int64_t>(keys.queue_length(key)));
      break;
    }
    case wire::Op::list_keys: {
      const std::string_view prefix = reader.bytes();
      reader.expect_end();
      std::vector<std::string> listed;
      keys.for_each_key([&](const std::string& key) {
        if (key.compare(0, prefix.size(), prefix) == 0) listed.push_back(key);
      });
      reply.strings(listed);
      break;
    }
    case wire::Op::wait_for: {
      Wait wait;
      wait.keys = KeyList(reader.strings());
      wait.at_least = reader.i64();
      wait.queues_count = reader.u8() != 0;
      const std::int64_t timeout_ms = reader.i64();
      reader.expect_end();
      return wait_for(core, id, connection, wait, timeout_ms, tag);
    }
    case wire::Op::set_on_close: {
      std::string key(reader.bytes());
      std::string value(reader.bytes());
      reader.expect_end();
      if (connection.on_close.size() >= wire::kMaxOnCloseSets) {
        connection.out += on_close_limit(tag);
        return;
      }
      connection.on_close.emplace_back(std::move(key), std::move(value));
      break;
    }
    case wire::Op::clear_on_close:
      reader.expect_end();
      connection.on_close.clear();
      break;
    case wire::Op::num_keys:
      reader.expect_end();
      reply.i64(static_cast<std::int64_t>(keys.size()));
      break;
    default:
      throw wire::ProtocolError(cat("unknown operation ", int{static_cast<std::uint8_t>(op)}));
  }
  connection.out += reply.frame();
}

void CohortProtocol::wait_for(StoreCore& core, Id id, Connection& connection, Wait& wait,
                              std::int64_t timeout_ms, wire::Tag tag) {
  const Deadline deadline =
      deadline_after(std::chrono::milliseconds(std::max<std::int64_t>(0, timeout_ms)));
  // A multiplexed connection's wait holds nothing behind it: it waits
  // under a name of its own.
  const Id waiter = tag ? core.alias(id, tag) : id;
  if (core.keys().wait(waiter, wait, deadline)) {
    if (tag) core.forget_alias(waiter);
    return answer_wait(core, connection, wait, tag);
  }
  if (tag) connection.tagged_waits.push_back(waiter);
}

void CohortProtocol::answer_wait(StoreCore& core, Connection& connection, const Wait& wait,
                                 wire::Tag tag) {
  wire::Writer reply = answer(tag);
  if (wait.get) {
    const std::string& value = *core.keys().find(wait.keys[0]);
    const std::uint64_t version = wait.versioned ? *core.keys().version(wait.keys[0]) : 0;
    if (wait.versioned && version == wait.known_version) {
      connection.out += answer(tag, wire::Status::unchanged).frame();
      return;
    }
    if (value.size() >= kLargeAnswerBytes) {
      // Many connections GET one table as it is set: one copy for them all.
      // A relay's version follows it.
      const std::string version_field =
          wait.versioned ? wire::Writer().i64(static_cast<std::int64_t>(version)).fields() : "";
      reply.u32(static_cast<std::uint32_t>(value.size()));
      connection.out += reply.frame_before(value.size() + version_field.size());
      connection.splice(core.keys().shared(wait.keys[0]));
      connection.out += version_field;
      return;
    }
    reply.bytes(value);
    if (wait.versioned) reply.i64(static_cast<std::int64_t>(version));
  }
  if (wait.get_all) {
    reply.u32(static_cast<std::uint32_t>(wait.keys.size()));
    for (std::size_t i = 0; i < wait.keys.size(); ++i)
      reply.bytes(*core.keys().find(wait.keys[i]));
  }
  connection.out += reply.frame();
}

void CohortProtocol::answer_timeout(Connection& connection, const std::vector<std::string>& missing,
                                    wire::Tag tag) {
  connection.out += answer(tag, wire::Status::timeout).strings(missing).frame();
}

}  // namespace cohort::detail
