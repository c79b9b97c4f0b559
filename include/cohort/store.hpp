// The key-value rendezvous store: how the processes of one job find each
// other. A `StoreServer` runs inside the launcher's agent (it outlives every
// worker) or, with no agent, inside rank 0; every process talks to it through
// a `StoreClient`. Keys are strings, values are bytes (std::string holds
// them); every blocking call has a timeout; every error names the store's
// host:port. The wire protocol is in docs/store-protocol.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

/// A value read from the store, held without a copy of its own where the
/// store shares one: through a node's relay, a large answer is a read-only
/// mapping of the node's one copy (docs/rendezvous.md). Cheap to copy.
class StoreValue {
 public:
  StoreValue() = default;
  explicit StoreValue(std::string bytes);
  /// `bytes`, which `owner` keeps alive.
  StoreValue(std::shared_ptr<const void> owner, std::string_view bytes)
      : owner_(std::move(owner)), view_(bytes) {}
  std::string_view view() const noexcept { return view_; }
  /// Part of this value's bytes (`inside` lies within view()), held as long.
  StoreValue part(std::string_view inside) const { return StoreValue(owner_, inside); }

 private:
  std::shared_ptr<const void> owner_;
  std::string_view view_;
};

/// The store's operations. Implementations are thread-safe.
class Store {
 public:
  /// Default for every blocking call when none is given: 5 minutes, enough for
  /// the slowest rank of a large job to start.
  static constexpr std::chrono::milliseconds kDefaultTimeout{300000};

  virtual ~Store() = default;

  /// Sets `key` to `value` and wakes whoever waits for it.
  virtual void set(std::string_view key, std::string_view value) = 0;

  /// The value of `key`, waiting until it is set. Throws cohort::Timeout after
  /// `timeout`.
  virtual std::string get(std::string_view key, std::chrono::milliseconds timeout) = 0;
  std::string get(std::string_view key) { return get(key, kDefaultTimeout); }
  /// get(), without a copy of the value where the store shares one (a
  /// table that every rank of a node reads); this default copies.
  virtual StoreValue get_shared(std::string_view key, std::chrono::milliseconds timeout) {
    return StoreValue(get(key, timeout));
  }

  /// Adds `delta` to the integer at `key` (absent counts as 0) and returns the
  /// sum. The value is stored as decimal text. Throws StoreError when the
  /// current value is not an integer.
  virtual std::int64_t add(std::string_view key, std::int64_t delta) = 0;

  /// set(key, value), then add(counter, delta), whose sum it returns: a
  /// participant's arrival (its value, then the count of those in). A
  /// StoreClient sends both at once, one round trip; this default calls
  /// set() and add().
  virtual std::int64_t set_then_add(std::string_view key, std::string_view value,
                                    std::string_view counter, std::int64_t delta);

  /// Atomically sets `key` to `desired` when its value is `expected` (an
  /// absent key matches an empty `expected`). Returns the value after the
  /// call: `desired` if it was swapped, else the current value ("" if absent).
  virtual std::string compare_set(std::string_view key, std::string_view expected,
                                  std::string_view desired) = 0;

  /// Returns once every key in `keys` is set. Throws cohort::Timeout after
  /// `timeout`, naming the keys still missing.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, kDefaultTimeout); }

  /// The values of `keys`, in order, once every one is set. Throws
  /// cohort::Timeout after `timeout`, naming the keys still missing. A
  /// StoreClient asks in one round trip (MULTI_GET); this default waits,
  /// then GETs each.
  virtual std::vector<std::string> multi_get(const std::vector<std::string>& keys,
                                             std::chrono::milliseconds timeout);

  /// Whether every key in `keys` is set, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;

  /// Removes `key`; returns whether it was set.
  virtual bool delete_key(std::string_view key) = 0;

  /// The number of keys in the whole store (a prefix view counts them all).
  virtual std::int64_t num_keys() = 0;
};

class StoreClient;

/// Serves a store over TCP from a thread of its own: one epoll loop, no
/// thread per client, so it holds thousands of connections. Who may connect
/// is decided before anything is read (docs/security.md): a peer on this
/// host must run as this process's user; a peer on another host must hold a
/// secret token or a MUNGE credential of this user. Every connection then
/// presents the job token. A wrong token, a frame over the size limit, bytes
/// that break the protocol or a handshake that does not come in time close
/// that connection only (and are logged, at a bounded rate), never the
/// server. Out of descriptors, it stops accepting for a moment rather than
/// spinning.
class StoreServer {
 public:
  /// A relay of the job's store on the way to it (a node's agent's, in the
  /// agents' tree: docs/rendezvous.md).
  struct Hop {
    std::string host;
    int port = 0;
    /// The relay expected there (its Options::name), for a hop placed
    /// before the rendezvous from node ranks and host names alone: another
    /// server that answers there is passed over, and one that does not
    /// answer yet is waited for a while (its node's agent may start later).
    /// Empty: whoever proves the token.
    std::string name{};
  };
  struct Options {
    std::string host = "127.0.0.1";  ///< address to listen on
    int port = 0;                    ///< 0: any free port (see port())
    std::string token;               ///< the job token clients must present
    /// Peers on other hosts that present `token` are let in: it is a secret
    /// (random, and never on a command line or in a world-readable file).
    bool token_is_secret = false;
    /// Peers on other hosts that present a MUNGE credential of this user,
    /// made for `token`, are let in (under Slurm: the cluster's own trust).
    bool munge = false;
    /// What a relay answers to (its node: "node 17"), for relays below it
    /// that connect expecting it (Hop::name).
    std::string name{};
    std::uint32_t max_frame_bytes = 64u << 20;  ///< largest request accepted
    /// A client that has not finished its handshake by then is closed.
    std::chrono::milliseconds handshake_timeout{5000};
    /// Connections in their handshake at once; a new one past it takes the
    /// oldest slot of the address that holds the most (docs/security.md).
    std::size_t max_pending_handshakes = 512;
    /// Bytes received on all connections together and not yet handled
    /// (requests still arriving, or sent ahead behind a wait). Past it, the
    /// connection holding the most is closed, and named in the log: many
    /// peers announcing large requests cannot exhaust the server's memory
    /// (each connection alone is bounded by max_frame_bytes). What a PyTorch
    /// request under way holds besides its bytes is at most 4 times them.
    std::size_t max_pending_bytes = std::size_t{1} << 30;
    /// Also serve PyTorch's TCPStore protocol (1.13's, and 2.1-and-later's,
    /// told apart by a connection's first bytes; see docs/store-protocol.md)
    /// on a second port: -1 none, 0 any free port. PyTorch's clients present
    /// no token, so their keys live apart, under "torch:", where they can
    /// neither read nor change cohort's own.
    int torch_port = -1;
    std::string torch_host;  ///< where that port listens; "" = `host`
    /// PyTorch clients on other hosts may use that port (their protocol has
    /// no secret; a job on several hosts needs it). Local ones must always
    /// be this process's user.
    bool torch_remote = false;
    /// Called once, on the server's thread, when a PyTorch client sends a
    /// request this server cannot serve (a query it does not know): that
    /// client can never rendezvous. The text names the client, the query and
    /// what to do. It must not call back into this server.
    std::function<void(const std::string&)> on_unservable;

    /// The store a relay forwards to, with `token` (docs/rendezvous.md).
    struct Upstream {
      std::string host;
      int port = 0;
      bool munge = false;   ///< as StoreClient::Options::munge
      std::string process;  ///< as StoreClient::Options::server_process
      std::chrono::milliseconds timeout = Store::kDefaultTimeout;  ///< connecting, and quick calls
      /// How long a relay on the path (route_through) may leave a request
      /// unanswered, a quick one or a wait past its own timeout, before this
      /// relay counts it lost and goes on through the next hop (a node cut
      /// off from the network closes nothing). The store itself has
      /// `timeout`: once lost, it is lost for good.
      std::chrono::milliseconds hop_timeout{5000};
      /// Connect as the relay starts (in the background, one attempt), so
      /// that its clients' first requests find the connection open;
      /// otherwise, and where the attempt fails, at the first request. For
      /// a relay whose clients will use it: idle, it holds one of the
      /// store's connections.
      bool connect_at_start = false;
      /// Relays on the way to this store from the start, nearest first (as
      /// route_through() gives them later): the agents' tree, where it is
      /// known before the rendezvous (docs/rendezvous.md).
      std::vector<Hop> through{};
    };
    /// Relay mode: this server keeps no keys of its own; every request of
    /// cohort's protocol goes to `relay_to` (or through the relays that
    /// route_through() names), on one multiplexed connection: quick ones
    /// in batches (ADDs of one key in a batch as one ADD), and each distinct
    /// request that may wait once while it is out (identical ones that
    /// arrive meanwhile go up together, once, when it returns). How a
    /// node's agent lets its workers meet through it: the job's store sees
    /// one connection per node, or per child in the agents' tree, and one
    /// node's ranks reading one table cost it one copy, not one per rank.
    /// A client's SET_ON_CLOSE is kept by the relay and set upstream when
    /// the client's connection ends; an in-process client's
    /// (connect_in_process) is also registered upstream, since this
    /// process's end is the relay's. With `torch_port`, PyTorch's TCPStore clients are relayed
    /// too: each query is carried in cohort's protocol to the keys PyTorch's
    /// clients of the job's store's own TCPStore port use, and answered as
    /// PyTorch's server would (a WAIT asks again every 30 s while its client
    /// waits).
    std::optional<Upstream> relay_to;
  };

  /// Binds, then serves until destroyed. Throws cohort::Error naming
  /// host:port when the port cannot be bound.
  explicit StoreServer(Options options);
  /// In relay mode, first waits (2 s at most) until its quick requests
  /// upstream are answered, the last words of clients that left among
  /// them, going on through the next hop where one is lost meanwhile.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  /// The port it listens on.
  int port() const noexcept;
  /// The address it listens on (Options::host).
  const std::string& host() const noexcept;
  /// The TCPStore-protocol port, or -1 when there is none.
  int torch_port() const noexcept;

  /// Forgets every key PyTorch's clients set on the TCPStore port, and their
  /// queues; returns once done. For a job that starts its workers again:
  /// PyTorch 2.x's clients no longer prefix their keys with the attempt, so
  /// the new ones would read the old ones' (rank 0's address, a barrier).
  void forget_torch_keys();

  /// A client of this server for this process, over a socket pair: no TCP
  /// and no handshake (the process that holds the server needs no proof),
  /// so it is ready at once. Calls wait at most `timeout` as
  /// StoreClient::Options::timeout does; it works while the server lives.
  std::unique_ptr<StoreClient> connect_in_process(
      std::chrono::milliseconds timeout = Store::kDefaultTimeout);
  /// One end of such a socket pair, for a process this one starts to
  /// inherit (cohort run's workers: COHORT_STORE_FD): whoever holds it is
  /// trusted as this process is. The caller owns the descriptor, which is
  /// close-on-exec. Throws StoreError when no socket pair can be made.
  int trusted_socket();

  /// Connections currently open (for tests and diagnostics).
  std::size_t connection_count() const noexcept;
  /// Requests waiting for keys (GET, WAIT, BARRIER), as of the server's
  /// last turn (for tests and diagnostics).
  std::size_t waiting_count() const noexcept;

  /// In relay mode, the connections open to the upstream store (for tests
  /// and diagnostics); 0 otherwise.
  std::size_t upstream_connection_count() const noexcept;
  /// In relay mode, where the requests it forwarded stand, as a clause for
  /// a report: on which connection upstream, how many are out and since
  /// when, and when an answer last came (whether the store stopped
  /// answering or this relay did); empty otherwise.
  std::string upstream_state() const;

  /// Relay mode: reaches the job's store through `path`, nearest first (a
  /// node's parent in the agents' tree, that one's parent, ...), and
  /// `relay_to` itself last: moves there at once when the first hop
  /// changed. When a hop is lost the relay goes on through the next
  /// (docs/rendezvous.md, "The agents' tree"). Ignored by a server that is
  /// not a relay.
  void route_through(std::vector<Hop> path);
  /// Relay mode: tells every relay connected to this one (its children in
  /// the agents' tree) to go on through their next hop, and waits until
  /// all of them have, or `at_most` passes; returns whether they did. For a
  /// relay whose process ends while other nodes still reach the store
  /// through it: they move once their requests out are answered, and none
  /// is lost. Returns true at once for a server that is not a relay.
  bool hand_over(std::chrono::milliseconds at_most);

  /// Waits until no client is connected, or `timeout` passes; returns whether
  /// none is. For a process that hosts the store and is done with it: its
  /// peers may still need it, and a peer that died has its connection closed
  /// by the kernel, so this never waits for the dead.
  bool wait_until_idle(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A connection to a StoreServer. Construction connects, retrying with
/// backoff until `timeout` (1 ms after a refusal, doubling up to 0.5 s),
/// so the order in which server and clients start does not matter.
/// Thread-safe: calls are serialized on one connection.
class StoreClient : public Store {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 0;
    std::string token;
    /// Also present a MUNGE credential of this user: how a client on another
    /// host proves itself to a server that accepts MUNGE (under Slurm).
    bool munge = false;
    /// The store's process when it runs on this host, as its launcher names
    /// it to the ranks (COHORT_STORE_PROCESS, "pid:start"): a server here
    /// that is not that process is refused, even with the right token (the
    /// same user's other job on the port). "" checks only the user.
    std::string server_process;
    /// Bound on connecting and on every call that takes no timeout of its own.
    std::chrono::milliseconds timeout = kDefaultTimeout;
    /// How much longer than a GET's or WAIT's own timeout a call waits for
    /// the server's answer that it timed out (and at least `timeout`)
    /// before it takes the server for lost: a loaded server answers late.
    std::chrono::milliseconds server_grace{5000};
  };

  /// Throws StoreError naming host:port when no connection is made within
  /// `timeout`, or when the server rejects the token.
  explicit StoreClient(Options options);
  ~StoreClient() override;

  using Store::get;
  using Store::wait;
  void set(std::string_view key, std::string_view value) override;
  std::string get(std::string_view key, std::chrono::milliseconds timeout) override;
  StoreValue get_shared(std::string_view key, std::chrono::milliseconds timeout) override;
  std::int64_t add(std::string_view key, std::int64_t delta) override;
  std::int64_t set_then_add(std::string_view key, std::string_view value, std::string_view counter,
                            std::int64_t delta) override;
  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys,
                                     std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(std::string_view key) override;
  std::int64_t num_keys() override;

  /// When this connection ends without clear_on_close() first, for any
  /// reason (this process killed, or ended without a word, its host
  /// rebooted), the server sets `key` to `value`, waking whoever waits for
  /// it: how the others learn at once that this process is gone. At most 8
  /// per connection (StoreError beyond). A host that vanishes from the
  /// network (a cut cable) closes nothing: that needs a timeout of its own.
  void set_on_close(std::string_view key, std::string_view value);
  /// Forgets what set_on_close() asked: the connection may end quietly now.
  void clear_on_close();

  /// Requests that go out together: run() sends them at once and then reads
  /// their answers, one round trip for all. The server carries them out in
  /// order, as if they were called one by one on this connection.
  class Batch {
   public:
    Batch& set(std::string_view key, std::string_view value);
    Batch& add(std::string_view key, std::int64_t delta);
    Batch& set_on_close(std::string_view key, std::string_view value);
    std::size_t size() const noexcept { return requests_.size(); }

   private:
    friend class StoreClient;
    std::vector<std::string> requests_;  // frames
    std::vector<bool> adds_;             // which of them are ADDs
  };
  /// Sends every request of `batch` at once, then reads their answers; returns
  /// what each ADD returned, in the batch's order. A request the server
  /// refuses (set_on_close() past its limit) throws StoreError once every
  /// answer is read: the others were carried out. An empty batch sends
  /// nothing.
  std::vector<std::int64_t> run(const Batch& batch);

  /// Ends the connection now, from any thread: a call under way in another
  /// thread (a WAIT) and every later call fail with StoreError, and the
  /// server sees the connection close (set_on_close() takes effect). For a
  /// process that stops a thread which waits on this connection, without a
  /// round trip to wake it.
  void shut_down() noexcept;

  /// A client on a connection its server already trusts (an end of
  /// StoreServer::trusted_socket()); takes `connected_fd`. `options` name
  /// the server in messages and bound the calls; nothing is checked.
  static std::unique_ptr<StoreClient> over_trusted_socket(Options options, int connected_fd);

  /// "host:port" of the server.
  const std::string& address() const noexcept { return address_; }
  /// From now on, the bound on every call that takes no timeout of its own
  /// (Options::timeout after connecting): a patient connection becomes a
  /// watchful one without connecting again.
  void set_timeout(std::chrono::milliseconds timeout);
  /// From now on, Options::server_grace: a watchful connection that waits
  /// in short WAITs takes a server that does not answer for lost sooner.
  void set_server_grace(std::chrono::milliseconds grace);

 private:
  StoreClient(Options options, int connected_fd);
  /// The answer's fields after its status (errors and timeouts thrown).
  StoreValue call(std::string request, std::chrono::milliseconds server_timeout);
  // With mutex_ held: one answer frame, whole (a memory file mapped);
  // a failure breaks the connection for good.
  // `patience`: how long the deadline gave the answer (for the message).
  StoreValue receive(std::chrono::steady_clock::time_point deadline,
                     std::chrono::milliseconds patience);
  [[noreturn]] void break_connection(const std::string& error, std::chrono::milliseconds patience);
  // The fields of `answer` after its status; a refusal or timeout thrown.
  StoreValue fields_of(const StoreValue& answer, std::chrono::milliseconds server_timeout) const;

  Options options_;
  std::string address_;
  std::mutex mutex_;
  int fd_ = -1;
  bool takes_files_ = false;  ///< large answers may come as files (a socket pair)
  std::string broken_;        ///< why the connection is unusable, "" while it is fine
};

/// A view of another store in which every key is "<prefix>/<key>": lets parts
/// of a job (a restart attempt, a subgroup) share one server without clashes.
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);

  using Store::get;
  using Store::wait;
  void set(std::string_view key, std::string_view value) override;
  std::string get(std::string_view key, std::chrono::milliseconds timeout) override;
  StoreValue get_shared(std::string_view key, std::chrono::milliseconds timeout) override;
  std::int64_t add(std::string_view key, std::int64_t delta) override;
  std::int64_t set_then_add(std::string_view key, std::string_view value, std::string_view counter,
                            std::int64_t delta) override;
  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys,
                                     std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(std::string_view key) override;
  std::int64_t num_keys() override;

 private:
  std::string full(std::string_view key) const;
  std::vector<std::string> full(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace cohort
