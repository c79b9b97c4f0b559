// What a StoreServer in relay mode (StoreServer::Options::relay_to) does
// with its clients' requests: sends them to the job's store and hands each
// answer back. How a node's ranks meet through their agent, and the agents
// through their tree of relays (docs/rendezvous.md).
//
// Everything goes up on one multiplexed connection (store_protocol
// Op::multiplex): to the job's store, or to the next relay of the path that
// route_through() gave (a parent in the agents' tree), whatever the number
// of clients or of their waits.
//
// Requests that the store answers at once (SET ADD COMPARE_SET CHECK
// DELETE NUM_KEYS APPEND QUEUE_* LIST_KEYS) go up in batches: one batch out
// at a time, what arrives meanwhile goes with the next, and the ADDs of one
// key in a batch go as one ADD whose sum is shared out. Requests that may
// wait (GET WAIT MULTI_GET WAIT_FOR) go up once per distinct request:
// identical ones that arrive while it is out go up together, once, when it
// returns. A GET goes up as GET_VERSIONED naming the version of the relay's
// last large answer for the key, and the store answers "unchanged" while it
// is: the L ranks of a node that read one table, at once or one by one, cost
// the store one copy of it, not L; the GET_VERSIONED of a relay below is
// served the same way, so a tree of relays costs each of them one copy per
// child.
//
// A client's quick requests sent together go in one batch, in its order;
// its other frames wait until its answers are in (the server holds them).
// Requests of different clients in a batch are concurrent, so any order
// among them is one the store could have chosen, and the ADDs of one key
// that are each the last of their client's requests in the batch go as one
// ADD, where the last of them was. A read is never answered from an earlier
// read than its own arrival.
//
// Last words (SET_ON_CLOSE): the relay keeps each client's and sets them
// upstream when that client's connection ends. Those of a client in this
// process (connect_in_process: the agent itself) also go up, on the relay's
// own connection, since this process's end ends the relay too: they are
// said one hop up, by whoever holds that connection, and registered again
// on every new connection. A relay that moves leaves them with the next
// hop before it takes them back from the last one: a process that dies
// while it moves has them said by one or the other (or both).
//
// When a hop that is a relay is lost, the relay goes on through the next
// one of its path (the parent's parent, ..., the job's store) at once,
// whether or not a request is out, so that its in-process clients' last
// words are held there before they ask anything again: its waiting
// requests, and those of its quick ones that mean the same when carried out
// twice, go up again there; the others out at that moment (an ADD, APPEND,
// QUEUE_PUSH or QUEUE_POP) are answered with an error that says they may
// have been carried out. The job's store lost is lost for good.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cohort/store.hpp>

#include "core/fd.hpp"
#include "store/protocol.hpp"

namespace cohort::detail {

/// One client request, as much as the relay needs of it.
struct RelayedRequest {
  store_protocol::Op op{};
  std::string frame;  ///< the request, framed as the client sent it
  std::string key;    ///< an ADD's or a GET's (or GET_VERSIONED's)
  std::int64_t add_delta = 0;
  std::chrono::milliseconds timeout{0};  ///< GET WAIT MULTI_GET WAIT_FOR: the server's own
  /// A GET_VERSIONED's (a relay below this one): the version it holds (0: none).
  std::optional<std::uint64_t> known_version;
  /// Whether the store may hold the answer until keys are set.
  bool may_wait() const noexcept;
};

/// Whether a request of this operation goes up in the relay's batches and
/// may join one behind its client's earlier quick requests (SET ADD
/// COMPARE_SET CHECK DELETE NUM_KEYS APPEND QUEUE_* LIST_KEYS): a batch
/// keeps its requests' order for each client.
bool joins_a_batch(store_protocol::Op op) noexcept;

/// Reads a request's payload as the store would, just enough to relay it:
/// throws store_protocol::ProtocolError where the store would close the
/// connection (so one malformed client never breaks a shared upstream one).
/// ACCEPT_FILES and MULTIPLEX are not relayed (the caller answers).
RelayedRequest relayed_request(std::string_view payload);

/// An answer for the relay's clients: one for all the clients that one
/// request upstream stood for.
struct RelayedAnswer {
  /// The frame; only its header when the payload is in `file` alone, and
  /// nothing when it is `body`'s.
  std::string frame;
  /// The frame's payload as a sealed memory file (store/file_answer.hpp),
  /// sent to each client that takes files instead of the bytes: a large
  /// answer from the store is received into one, else the relay's server
  /// makes one for the first such client.
  Fd file;
  /// The payload's length when it was received into `file`, else 0.
  std::size_t in_file = 0;
  /// A large GET_VERSIONED answer for a relay below: `body`'s payload, then
  /// `tail` (the value's version), without a copy of the value.
  std::shared_ptr<RelayedAnswer> body;
  std::string tail;

  /// The whole frame's length, header and payload.
  std::size_t size() const noexcept;
  /// The payload's bytes (before `tail`), from `frame`, `body` or a mapping
  /// of `file` made on the first call (not thread-safe); nullopt and
  /// `*error` when it cannot be mapped.
  std::optional<StoreValue> payload(std::string* error);
  /// Whether the store's answer is ok (status 0).
  bool ok() const noexcept;

 private:
  StoreValue mapped_;
};

class StoreRelay {
 public:
  using Id = std::uint64_t;
  /// Answers, each for the client of one forward(): the store's, or one the
  /// relay made (the shared ADD's share, or an error naming the upstream
  /// store). A client's answers come in the order of its requests.
  using Answers = std::vector<std::pair<Id, std::shared_ptr<RelayedAnswer>>>;
  /// Called on the relay's own threads with the answers that came together
  /// (a batch's, a waiting group's): one hand-over, one wake-up of the
  /// loop, for all of them. Every forward() is answered once.
  using Deliver = std::function<void(Answers)>;

  /// With `upstream.connect_at_start`, connects to the store at once, in
  /// the background (one attempt; where it fails, the first request
  /// connects, retrying until the upstream timeout); the end waits at most
  /// a second for an attempt under way. Otherwise the first request
  /// connects.
  StoreRelay(StoreServer::Options::Upstream upstream, std::string token, Deliver deliver);
  /// First waits, at most 2 s, until every quick request forwarded so far
  /// (a SET of a client's last words among them) is answered, going on
  /// through the next hop where one is lost meanwhile, unless the store is
  /// lost: what its clients said last is not left in its batch. Requests
  /// that may wait are not waited for. Then ends the upstream connection
  /// (requests still out are answered with an error, or not at all once the
  /// relay's owner is gone).
  ~StoreRelay();
  StoreRelay(const StoreRelay&) = delete;
  StoreRelay& operator=(const StoreRelay&) = delete;

  /// Takes a request; it goes up at the next flush(): a quick one with the
  /// next batch, one that may wait with the others of its round. A
  /// SET_ON_CLOSE or CLEAR_ON_CLOSE is an in-process client's, whose last
  /// words also go up (above).
  void forward(Id id, RelayedRequest request);
  /// Sends what was forwarded since: the quick requests as one batch if
  /// none is out, and the requests that may wait. The server's loop calls
  /// it after each round of events, so that requests that arrived together
  /// go up as one batch (a node's ranks' SETs and ADDs of one exchange)
  /// rather than the first alone. The caller's thread writes them itself
  /// when the connection upstream takes them at once; else the relay's
  /// sender does.
  void flush();
  /// The connection of client `id` ended with `words` (its SET_ON_CLOSE
  /// keys and values): they are set upstream; `own`: a client in this
  /// process, whose words are no longer registered upstream either.
  void say_last_words(Id id, bool own,
                      const std::vector<std::pair<std::string, std::string>>& words);
  /// Reaches the store through `path`, nearest first, then the store
  /// itself: moves there at once (after the batch out) when the first hop
  /// changed.
  void route_through(std::vector<StoreServer::Hop> path);
  /// Upstream connections open now (one, or none; two while it moves).
  std::size_t connection_count() const noexcept;
  /// Where its requests stand upstream, for a report ("its connection to
  /// the job's store at H:P: quick requests out 0, waiting ones out 1 (the
  /// oldest sent 6012 ms ago), more to go up 0, last answer 6008 ms ago"):
  /// who stopped answering a request that timed out.
  std::string describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cohort::detail
