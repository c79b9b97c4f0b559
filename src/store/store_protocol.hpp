// The seam between the store's transport (server.cpp: sockets, epoll,
// admission) and a wire protocol spoken on it (cohort_protocol.cpp, and
// torch_protocol.cpp for PyTorch's TCPStore, every version). A protocol
// reads a connection's bytes, acts on the key space, and writes answers;
// the server owns connections, waits' wake-ups and closing. Adding a wire
// protocol is one file implementing StoreProtocol and one listener row.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sys/types.h>

#include <cohort/store.hpp>

#include "core/fd.hpp"
#include "core/socket.hpp"
#include "store/key_space.hpp"
#include "store/protocol.hpp"

namespace cohort::detail {

class StoreProtocol;
struct RelayedAnswer;
struct RelayedRequest;

/// What a protocol keeps of one connection between arrivals of its bytes.
class ConnectionState {
 public:
  virtual ~ConnectionState() = default;
};

/// Answers at least this long are large: the server sends them from one
/// copy shared by every connection that gets them (Connection::splice), and
/// a relay sends them as files to clients that take them. Below it, a
/// copy costs less than sharing, or than making and reading a file.
inline constexpr std::size_t kLargeAnswerBytes = std::size_t{64} << 10;

struct Connection {
  std::uint64_t id = 0;  // the server's name for it
  Fd fd;
  std::string peer;
  std::string in;   // bytes received, not yet handled
  std::string out;  // bytes to send, from out_at (protocols append)
  std::size_t out_at = 0;
  StoreProtocol* protocol = nullptr;
  bool authenticated = false;
  // Its requests with the relay's upstream store, answered in order. Later
  // frames wait, but for quick ones behind quick ones: they join them, so
  // that a client's SET and ADD sent together go up in one batch.
  std::size_t relayed = 0;
  bool relayed_wait = false;  // one of them may wait (a lane's)
  // During the handshake, after the client's hello: its nonce, then the
  // server's (each store_proof::kNonceBytes).
  std::string challenge;
  bool remote = false;                     // the peer is not on this host
  std::unique_ptr<ConnectionState> state;  // the protocol's own
  bool closing = false;                    // close once `out` is sent
  bool want_write = false;
  bool eof = false;         // the peer sent end-of-file
  bool watched = true;      // its descriptor is in the server's epoll set
  std::size_t counted = 0;  // of `in`, what the server's total of pending bytes holds
  // SETs the server does when this connection ends (StoreClient::set_on_close).
  std::vector<std::pair<std::string, std::string>> on_close;
  // A handshake's answer held back (StoreCore::judged): sent when its time
  // comes; later frames wait for it. Then the connection closes, or not.
  std::string held_answer;
  bool close_after_held = false;
  bool socket_pair = false;  // StoreServer::trusted_socket()'s: it can carry files
  bool takes_files = false;  // and its client asked for them (Op::accept_files)
  // StoreServer::connect_in_process()'s: its client is this process, whose
  // end is the end of a relay's own connections too.
  bool in_process = false;
  // Op::multiplex: every frame carries a tag, and answers come as they can.
  bool multiplexed = false;
  bool told_to_move = false;  // StoreServer::hand_over() sent it Status::moving
  // A multiplexed connection's waits in the key space, each under an alias
  // (StoreCore::alias) that names it and the request's tag.
  std::vector<std::uint64_t> tagged_waits;
  // What goes out at a point of `out` without being copied into it, in
  // order of `at`: a large answer's bytes, one copy for every connection
  // that gets them, sent before out[at]; or an answer's file, which goes
  // with the byte out[at] (the first of the frame that stands for it).
  struct Splice {
    std::size_t at = 0;
    StoreValue bytes;      // when not a file
    std::size_t sent = 0;  // of `bytes`, or of `from_file`'s
    std::shared_ptr<RelayedAnswer> file;
    // Or an answer received into its file, whose bytes go from the file's
    // pages (send_file_part), with no mapping or copy of them here.
    std::shared_ptr<const RelayedAnswer> from_file;
  };
  std::deque<Splice> splices;
  /// Appends `bytes` to what goes out, without a copy.
  void splice(StoreValue bytes) {
    splices.push_back({out.size(), std::move(bytes), 0, nullptr, nullptr});
  }
  /// Appends the bytes of `answer`'s file (its in_file bytes), without a
  /// copy.
  void splice(std::shared_ptr<const RelayedAnswer> answer) {
    splices.push_back({out.size(), {}, 0, nullptr, std::move(answer)});
  }
  void splice(std::shared_ptr<const std::string> bytes) {
    const std::string_view view = *bytes;
    splice(StoreValue(std::move(bytes), view));
  }
  /// Whether anything is left to send.
  bool sending() const noexcept { return out_at < out.size() || !splices.empty(); }
};

/// What a protocol may ask of the server it runs in.
class StoreCore {
 public:
  using Id = KeySpace::Id;
  virtual KeySpace& keys() = 0;
  virtual const StoreServer::Options& options() const = 0;
  virtual uid_t user() const = 0;
  /// Closes the connection that broke the protocol, logging why.
  virtual void drop(Id id, Connection& connection, const std::string& why) = 0;
  /// Logs (rate-limited) that a peer was refused.
  virtual void log_refusal(const std::string& text) = 0;
  /// The handshake is over: the connection no longer counts as pending.
  virtual void end_handshake(Connection& connection) = 0;
  /// The connection's proof of the token was judged (`proven`: it held):
  /// true when the answer must be held back for a while, in
  /// `connection.held_answer` (handshake_slots.hpp), false to send it now.
  virtual bool judged(Connection& connection, bool proven) = 0;
  /// A client asked what this store can never serve: closes it, and tells
  /// whoever runs the job (once), who can end it now.
  virtual void unservable(Id id, Connection& connection, const std::string& why) = 0;
  /// Relay mode (StoreServer::Options::relay_to): requests go to the job's
  /// store (forward), not to keys().
  virtual bool relays() const = 0;
  /// In relay mode: sends `request` to the job's store (StoreRelay::forward);
  /// its answer reaches the protocol later, for the connection `id` names
  /// (StoreProtocol::relayed_answer, or handed out as it came).
  virtual void forward(Id id, RelayedRequest request) = 0;
  /// Another name for `connection`, for one request: to forward it under
  /// in relay mode when its answer may stop being wanted (a PyTorch WAIT its
  /// client gives up: the answer reaches the connection unless
  /// forget_alias() came first), or a multiplexed connection's request
  /// under its `tag` (a wait in keys(), or forwarded), whose answer goes to
  /// the connection with that tag. An alias is forgotten once answered.
  virtual Id alias(Id connection, store_protocol::Tag tag = std::nullopt) = 0;
  virtual void forget_alias(Id alias) = 0;

 protected:
  ~StoreCore() = default;
};

class StoreProtocol {
 public:
  using Id = KeySpace::Id;
  virtual ~StoreProtocol() = default;
  /// Bytes received on a new connection before any request: whether it
  /// must authenticate first (a handshake), or is let in by who its peer is.
  virtual bool has_handshake() const = 0;
  /// The answer sent to a peer refused before it spoke ("" for none).
  virtual std::string refusal(const std::string& why) const = 0;
  /// Handles the complete requests in `connection.in`, in order, until one
  /// waits or none is left. Returns false when the connection was closed.
  virtual bool handle(StoreCore& core, Id id, Connection& connection) = 0;
  /// A wait of `connection` holds: its answer into `connection.out`, under
  /// `tag` on a multiplexed connection.
  virtual void answer_wait(StoreCore& core, Connection& connection, const Wait& wait,
                           store_protocol::Tag tag) = 0;
  /// A wait's deadline passed with `missing` keys still unset.
  virtual void answer_timeout(Connection& connection, const std::vector<std::string>& missing,
                              store_protocol::Tag tag) = 0;
  /// Bytes a client may send ahead while it waits or before its handshake.
  virtual std::size_t receive_limit(const StoreCore& core, const Connection& connection) const = 0;
  /// In relay mode: whether the protocol writes its own replies from the
  /// store's answers (relayed_answer), rather than the server handing each
  /// answer out as it came (cohort's protocol, spoken on both sides).
  virtual bool translates_relayed_answers() const { return false; }
  /// One of the connection's relayed answers, in the order of its requests:
  /// the reply into `connection.out` (the protocol may forward more, as
  /// part of the same request). Returns false when it closed the connection.
  virtual bool relayed_answer(StoreCore& /*core*/, Id /*id*/, Connection& /*connection*/,
                              const std::shared_ptr<RelayedAnswer>& /*answer*/) {
    return true;
  }
};

/// An empty buffer gives back what a large request or answer made it grow
/// to: thousands of idle connections must not each keep their peak (a
/// 180 KB table GET by 4,096 ranks kept 720 MB).
void release_if_idle(std::string& buffer);

}  // namespace cohort::detail
