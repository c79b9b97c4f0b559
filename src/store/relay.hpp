// What a StoreServer in relay mode (StoreServer::Options::relay_to) does
// with its clients' requests: sends them to the job's store and hands each
// answer back. How a node's ranks meet through their agent
// (docs/rendezvous.md).
//
// Requests that the store answers at once (SET ADD COMPARE_SET CHECK
// DELETE NUM_KEYS APPEND QUEUE_* LIST_KEYS) go up in batches on one
// connection: what arrives while a batch is out goes with the next, and
// the ADDs of one key in a batch go as one ADD whose sum is shared out.
// Requests that may wait (GET WAIT MULTI_GET WAIT_FOR) each take a
// connection of their own (a lane) while they are out, one per distinct
// request: identical ones that arrive meanwhile go up together, once, when
// it returns; a lane idle for 2 s ends while another is idle. A GET goes
// up as GET_VERSIONED naming the version of the relay's last large answer
// for the key, and the store answers "unchanged" while it is: the L ranks
// of a node that read one table, at once or one by one, cost the store one
// copy of it, not L.
//
// A client's quick requests sent together go in one batch, in its order;
// its other frames wait until its answers are in (the server holds them).
// Requests of different clients in a batch are concurrent, so any order
// among them is one the store could have chosen, and the ADDs of one key
// that are each the last of their client's requests in the batch go as one
// ADD, where the last of them was. A read is never answered from an earlier
// read than its own arrival.
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
  std::string key;    ///< an ADD's or a GET's
  std::int64_t add_delta = 0;
  std::chrono::milliseconds timeout{0};  ///< GET WAIT MULTI_GET WAIT_FOR: the server's own
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
/// SET_ON_CLOSE, CLEAR_ON_CLOSE and ACCEPT_FILES are not relayed (the
/// caller answers).
RelayedRequest relayed_request(std::string_view payload);

/// An answer for the relay's clients: one for all the clients that one
/// request upstream stood for.
struct RelayedAnswer {
  /// The frame; only its header when the payload is in `file` alone.
  std::string frame;
  /// The frame's payload as a sealed memory file (store/file_answer.hpp),
  /// sent to each client that takes files instead of the bytes: a large
  /// answer from the store is received into one, else the relay's server
  /// makes one for the first such client.
  Fd file;
  /// The payload's length when it was received into `file`, else 0.
  std::size_t in_file = 0;

  /// The whole frame's length, header and payload.
  std::size_t size() const noexcept { return frame.size() + in_file; }
  /// The payload's bytes, from `frame` or a mapping of `file` made on the
  /// first call (not thread-safe); nullopt and `*error` when it cannot be
  /// mapped.
  std::optional<StoreValue> payload(std::string* error);

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
  /// the background: the batches' connection and one lane's (one attempt
  /// each; where it fails, the first request connects, retrying until the
  /// upstream timeout); the end waits at most a second for an attempt under
  /// way. Otherwise the first request connects.
  StoreRelay(StoreServer::Options::Upstream upstream, std::string token, Deliver deliver);
  /// Ends the upstream connections (requests still out are answered with an
  /// error, or not at all once the relay's owner is gone).
  ~StoreRelay();
  StoreRelay(const StoreRelay&) = delete;
  StoreRelay& operator=(const StoreRelay&) = delete;

  /// Takes a request; a quick one goes up with the next batch, which
  /// leaves at flush().
  void forward(Id id, RelayedRequest request);
  /// Sends the quick requests forwarded since the last batch left, if none
  /// is out. The server's loop calls it after each round of events, so that
  /// requests that arrived together go up as one batch (a node's ranks' SETs
  /// and ADDs of one exchange) rather than the first alone.
  void flush();
  /// Upstream connections open now.
  std::size_t connection_count() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cohort::detail
