// StoreServer: one epoll loop on a thread of its own. A connection is
// admitted (or refused) by who its peer is, then it is a state machine:
// handshake, then one request at a time; a WAIT or GET for keys not yet set
// parks the connection (its later frames stay buffered) until the keys
// arrive or its deadline passes. A parked request is indexed under one key
// it misses, the first in its list; when that key is set, it scans on from
// there (once per batch of requests handled, so a burst of sets costs one
// scan), and is indexed under the next key it misses. N waiters on N keys
// cost O(N) index entries and O(N^2) key lookups in all, which is the size
// of the question. Connections to the second,
// PyTorch-protocol port skip the handshake and work under "torch:" keys.
#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cohort/errors.hpp>
#include <cohort/store.hpp>

#include "core/fd.hpp"
#include "core/log.hpp"
#include "core/peer_owner.hpp"
#include "core/socket.hpp"
#include "core/strings.hpp"
#include "store/munge_credential.hpp"
#include "store/protocol.hpp"
#include "store/torch_wire.hpp"

namespace cohort {

using detail::cat;
using detail::Clock;
using detail::Deadline;
using detail::Fd;
using detail::LogLevel;
namespace wire = detail::store_protocol;
namespace torch_wire = detail::torch_wire;

namespace {

constexpr std::uint64_t kListenerId = 0;
constexpr std::uint64_t kWakeId = 1;
constexpr std::uint64_t kTorchListenerId = 2;
constexpr std::uint64_t kTaskId = 3;  // another thread asks something of the loop
// Every key a PyTorch TCPStore client names is stored under this prefix.
constexpr std::string_view kTorchPrefix = "torch:";
// CANCEL_WAIT's query byte (PyTorch 2.x): taken even while a WAIT is parked.
constexpr char kCancelWaitByte = 12;
// Out of descriptors: how long the listeners rest before accepting again.
constexpr std::chrono::milliseconds kAcceptPause{100};

using DeadlineIndex = std::multimap<Deadline, std::uint64_t>;  // -> connection id

// Transparent: the maps below are searched with a parked request's
// string_views, not copies.
struct StringHash {
  using is_transparent = void;  // NOLINT(readability-identifier-naming): the standard names it
  // Not noexcept: libstdc++ then keeps each key's hash in its node, as it does
  // for std::hash<std::string>, and a lookup does not hash the keys it passes.
  std::size_t operator()(std::string_view text) const {
    return std::hash<std::string_view>{}(text);
  }
};
template <class T>
using StringMap = std::unordered_map<std::string, T, StringHash, std::equal_to<>>;

// A parked request's keys, packed in one buffer: a WAIT of 4,096 keys by
// each of 4,096 ranks holds 16.7 million of them, which as std::strings
// alone cost 0.5 GB.
class KeyList {
 public:
  KeyList() = default;
  explicit KeyList(const std::vector<std::string>& keys) {
    std::size_t total = 0;
    for (const std::string& key : keys)
      total += key.size();
    bytes_.reserve(total);
    ends_.reserve(keys.size());
    for (const std::string& key : keys) {
      bytes_ += key;
      ends_.push_back(static_cast<std::uint32_t>(bytes_.size()));  // frames are far below 4 GiB
    }
  }
  std::size_t size() const noexcept { return ends_.size(); }
  std::string_view operator[](std::size_t i) const noexcept {
    const std::uint32_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(bytes_).substr(begin, ends_[i] - begin);
  }
  void clear() noexcept { *this = KeyList(); }

 private:
  std::string bytes_;
  std::vector<std::uint32_t> ends_;
};

// A request parked until its keys are set.
struct Parked {
  bool active = false;
  wire::Op op = wire::Op::wait;
  KeyList keys;                              // as asked
  std::size_t cursor = 0;                    // keys before it were set when last scanned
  std::uint64_t deletions = 0;               // the server's deletions when the scan began
  std::optional<std::string> indexed_under;  // the key whose waiter set holds this connection
  std::int64_t at_least = 0;  // a BARRIER: set when the count at keys[0] reaches this
  bool queues_count = false;  // a PyTorch WAIT: a non-empty queue counts as a set key
  std::optional<DeadlineIndex::iterator> deadline;
};

struct Connection {
  Fd fd;
  std::string peer;
  std::string in;   // bytes received, not yet handled
  std::string out;  // bytes to send
  bool authenticated = false;
  bool remote = false;                         // the peer is not on this host
  bool torch = false;                          // a PyTorch TCPStore client (second port)
  std::optional<torch_wire::Dialect> dialect;  // torch: known from its first bytes
  bool closing = false;                        // close once `out` is sent
  bool want_write = false;
  bool eof = false;  // the peer sent end-of-file
  std::optional<DeadlineIndex::iterator> handshake_deadline;
  Parked parked;
};

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return difference == 0;
}

std::string rejection(std::string_view why) {
  return wire::Writer().u8(static_cast<std::uint8_t>(wire::Status::rejected)).bytes(why).frame();
}

}  // namespace

struct StoreServer::Impl {
  Options options;
  detail::Listener listener;
  detail::Listener torch_listener;  // fd invalid when there is none
  Fd epoll;
  Fd wake;
  Fd task;                // eventfd: forget_torch_keys() was asked
  std::mutex task_mutex;  // guards forget_requested
  std::condition_variable task_done;
  bool forget_requested = false;
  std::thread thread;
  std::atomic<std::size_t> open_connections{0};
  std::mutex idle_mutex;
  std::condition_variable idle;
  const uid_t user = geteuid();

  std::unordered_map<std::uint64_t, Connection> connections;
  std::uint64_t next_id = 4;
  bool told_unservable = false;  // Options::on_unservable is called once
  StringMap<std::string> data;
  StringMap<std::deque<std::string>> queues;  // PyTorch's QUEUE_PUSH/POP, apart from `data`
  StringMap<std::unordered_set<std::uint64_t>> waiters;  // key -> parked ids
  DeadlineIndex deadlines;                               // parked requests
  DeadlineIndex handshake_deadlines;                     // connections still in their handshake
  std::size_t pending_handshakes = 0;
  bool accepting = true;                 // the listeners are watched
  std::optional<Deadline> accept_again;  // out of descriptors: when to retry
  std::vector<std::uint64_t> resumed;    // parked connections whose keys arrived
  std::vector<std::uint64_t> rescan;     // parked connections whose indexed key was set
  std::uint64_t deletions = 0;           // keys deleted so far
  detail::LogLimiter refusals;           // peers refused or dropped
  detail::LogLimiter descriptors{1, std::chrono::seconds(10)};  // EMFILE

  explicit Impl(Options opts) : options(std::move(opts)) {
    detail::raise_open_file_limit();
    listener = detail::listen_tcp(options.host, options.port);
    epoll = Fd(epoll_create1(EPOLL_CLOEXEC));
    wake = Fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    task = Fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!epoll.valid() || !wake.valid() || !task.valid()) {
      throw Error(cat("store server: epoll/eventfd failed: ", detail::errno_text(errno)));
    }
    watch(listener.fd.get(), kListenerId, EPOLLIN);
    if (options.torch_port >= 0) {
      try {
        torch_listener = detail::listen_tcp(
            options.torch_host.empty() ? options.host : options.torch_host, options.torch_port);
      } catch (const Error& error) {
        throw torch_wire::PortError(error.what());
      }
      watch(torch_listener.fd.get(), kTorchListenerId, EPOLLIN);
    }
    watch(wake.get(), kWakeId, EPOLLIN);
    watch(task.get(), kTaskId, EPOLLIN);
    thread = std::thread([this] { run(); });
  }

  ~Impl() {
    const std::uint64_t one = 1;
    (void)!::write(wake.get(), &one, sizeof(one));
    thread.join();
  }

  void watch(int fd, std::uint64_t id, std::uint32_t events, int op = EPOLL_CTL_ADD) {
    epoll_event event{};
    event.events = events;
    event.data.u64 = id;
    epoll_ctl(epoll.get(), op, fd, &event);
  }

  // Milliseconds until the next deadline of any kind, -1 for none.
  int wait_timeout() const {
    std::optional<Deadline> next = accept_again;
    for (const DeadlineIndex* index : {&deadlines, &handshake_deadlines}) {
      if (!index->empty() && (!next || index->begin()->first < *next)) next = index->begin()->first;
    }
    if (!next) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*next - Clock::now());
    return static_cast<int>(std::clamp<long long>(left.count() + 1, 0, 1 << 30));
  }

  void run() {
    epoll_event events[256];
    for (;;) {
      const int n = epoll_wait(epoll.get(), events, 256, wait_timeout());
      if (n < 0 && errno != EINTR) {
        detail::log(LogLevel::error, "store",
                    cat("epoll_wait failed: ", detail::errno_text(errno), "; the server stops"));
        return;
      }
      for (int i = 0; i < n; ++i) {
        const std::uint64_t id = events[i].data.u64;
        if (id == kWakeId) return;
        if (id == kTaskId) {
          run_tasks();
          continue;
        }
        if (id == kListenerId || id == kTorchListenerId) {
          accept_all(id == kTorchListenerId);
        } else {
          on_event(id, events[i].events);
        }
      }
      expire_deadlines();
      expire_handshakes();
      if (accept_again && *accept_again <= Clock::now()) {
        accept_again.reset();
        update_accepting();
      }
      while (!resumed.empty() || !rescan.empty()) {
        rescan_waiters();
        std::vector<std::uint64_t> batch;
        batch.swap(resumed);
        for (std::uint64_t id : batch)
          handle_frames(id);
      }
    }
  }

  // What other threads asked (StoreServer::forget_torch_keys).
  void run_tasks() {
    std::uint64_t count = 0;
    (void)!::read(task.get(), &count, sizeof(count));
    std::lock_guard<std::mutex> lock(task_mutex);
    if (!forget_requested) return;
    for (auto it = data.begin(); it != data.end();) {
      if (is_torch_key(it->first)) {
        it = data.erase(it);
        ++deletions;
      } else {
        ++it;
      }
    }
    queues.clear();
    forget_requested = false;
    task_done.notify_all();
  }

  // Watches the listeners unless out of descriptors or too many handshakes
  // are under way; connections then wait in the kernel's backlog.
  void update_accepting() {
    const bool wanted = !accept_again && pending_handshakes < options.max_pending_handshakes;
    if (wanted == accepting) return;
    accepting = wanted;
    const std::uint32_t events = wanted ? EPOLLIN : 0u;
    watch(listener.fd.get(), kListenerId, events, EPOLL_CTL_MOD);
    if (torch_listener.fd.valid()) {
      watch(torch_listener.fd.get(), kTorchListenerId, events, EPOLL_CTL_MOD);
    }
  }

  void accept_all(bool torch) {
    const int listening = torch ? torch_listener.fd.get() : listener.fd.get();
    while (accepting) {
      Fd fd(accept4(listening, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!fd.valid()) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          descriptors.log(
              LogLevel::warn, "store",
              cat("cannot accept a connection on port ", listener.port, ": ",
                  detail::errno_text(errno), "; clients wait in the backlog (raise ulimit -n, now ",
                  detail::raise_open_file_limit(), ")"));
          accept_again = Clock::now() + kAcceptPause;
          update_accepting();
        }
        return;  // EAGAIN, or a transient error: the next readiness retries
      }
      // Answers are small and come in bursts (every parked WAIT of a key at
      // once, or a pipelining client's ADD then WAIT): none waits for the
      // peer's delayed ACK of the last (Nagle), up to 40 ms each.
      const int one = 1;
      setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      admit(std::move(fd), torch);
    }
  }

  // Decides from who the peer is whether it may talk at all.
  void admit(Fd fd, bool torch) {
    const std::string peer = detail::peer_name(fd.get());
    const detail::PeerOwner owner = detail::owner_of_peer(fd.get());
    const bool remote = owner.where != detail::PeerOwner::Where::this_host;
    std::string refusal;
    if (!remote && owner.uid != user) {
      refusal =
          cat("it runs as uid ", owner.uid, ", and this job's store takes only its own user (uid ",
              user, ") from this host");
    } else if (remote &&
               !(torch ? options.torch_remote : options.token_is_secret || options.munge)) {
      refusal = cat(owner.where == detail::PeerOwner::Where::unknown
                        ? cat("its owner cannot be told (", owner.error, ")")
                        : std::string("it is on another host"),
                    ", and this store has no secret to check it by: give every process of the job "
                    "the same secret in COHORT_JOB_TOKEN (or cohort run --token-file FILE); see "
                    "docs/security.md");
    }
    if (!refusal.empty()) {
      refusals.log(LogLevel::warn, "store",
                   cat("refused the connection from ", peer, ": ", refusal));
      if (!torch) {
        const std::string answer = rejection(refusal);
        (void)!send(fd.get(), answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      return;
    }
    const std::uint64_t id = next_id++;
    Connection& connection = connections[id];
    connection.peer = peer;
    connection.torch = torch;
    connection.remote = remote;
    connection.authenticated = torch;  // PyTorch's protocol has no handshake
    connection.fd = std::move(fd);
    if (!torch) {
      ++pending_handshakes;
      connection.handshake_deadline =
          handshake_deadlines.emplace(detail::deadline_after(options.handshake_timeout), id);
      update_accepting();
    }
    watch(connection.fd.get(), id, EPOLLIN | EPOLLRDHUP);
    ++open_connections;
  }

  void end_handshake(Connection& connection) {
    if (!connection.handshake_deadline) return;
    handshake_deadlines.erase(*connection.handshake_deadline);
    connection.handshake_deadline.reset();
    --pending_handshakes;
    update_accepting();
  }

  void close_connection(std::uint64_t id) {
    auto it = connections.find(id);
    if (it == connections.end()) return;
    unpark(id, it->second);
    end_handshake(it->second);
    epoll_ctl(epoll.get(), EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
    connections.erase(it);
    {
      std::lock_guard<std::mutex> lock(idle_mutex);
      --open_connections;
    }
    idle.notify_all();
  }

  // Closes a connection that broke the protocol, saying why.
  void drop(std::uint64_t id, Connection& connection, const std::string& why) {
    refusals.log(LogLevel::warn, "store",
                 cat("closed the connection from ", connection.peer, ": ", why));
    close_connection(id);
  }

  void on_event(std::uint64_t id, std::uint32_t events) {
    auto it = connections.find(id);
    if (it == connections.end()) return;
    Connection& connection = it->second;
    if (events & EPOLLOUT) {
      if (!flush(id, connection)) return;
    }
    if (connection.eof || !(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
    // Before its handshake a client may send one handshake frame; after, it
    // may send ahead while parked, but not without bound.
    const std::size_t limit = connection.authenticated
                                  ? std::size_t{options.max_frame_bytes} * 2 + 64
                                  : std::size_t{wire::kMaxHandshakeBytes} + wire::kFrameHeaderBytes;
    char buffer[65536];
    for (;;) {
      const ssize_t n = recv(connection.fd.get(), buffer, sizeof(buffer), 0);
      if (n > 0) {
        connection.in.append(buffer, static_cast<std::size_t>(n));
        if (connection.in.size() > limit) {
          return drop(id, connection,
                      connection.authenticated ? "sent far more than one request ahead"
                                               : "sent more than a handshake before its answer");
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) return close_connection(id);  // reset: its parked request goes too
      connection.eof = true;                   // requests that came with it still count
      break;
    }
    handle_frames(id);
  }

  // After end-of-file: the requests that came before it were handled; send
  // their answers, then close. A request that would wait is abandoned: its
  // client has stopped talking and cannot be woken.
  void finish_after_eof(std::uint64_t id, Connection& connection) {
    if (connection.parked.active || connection.out.empty()) return close_connection(id);
    connection.closing = true;
    connection.want_write = true;
    watch(connection.fd.get(), id, EPOLLOUT, EPOLL_CTL_MOD);
  }

  // Handles complete frames until one parks the connection or none is left.
  void handle_frames(std::uint64_t id) {
    auto it = connections.find(id);
    if (it == connections.end()) return;
    Connection& connection = it->second;
    if (connection.torch) {
      if (!handle_torch_requests(id, connection)) return;
    } else if (!handle_cohort_requests(id, connection)) {
      return;
    }
    if (!flush(id, connection)) return;
    if (connection.eof && !connection.closing) finish_after_eof(id, connection);
  }

  // Returns false when the connection was closed.
  bool handle_cohort_requests(std::uint64_t id, Connection& connection) {
    std::size_t used = 0;
    while (!connection.parked.active && !connection.closing) {
      const std::size_t available = connection.in.size() - used;
      if (available < wire::kFrameHeaderBytes) break;
      const std::uint32_t length = wire::frame_length(connection.in.data() + used);
      const std::uint32_t limit =
          connection.authenticated ? options.max_frame_bytes : wire::kMaxHandshakeBytes;
      if (length > limit) {
        drop(id, connection,
             cat("a frame of ", length, " bytes exceeds the limit of ", limit, " bytes",
                 connection.authenticated ? "" : " for a handshake"));
        return false;
      }
      if (available < wire::kFrameHeaderBytes + length) break;
      const std::string_view payload(connection.in.data() + used + wire::kFrameHeaderBytes, length);
      used += wire::kFrameHeaderBytes + length;
      try {
        if (connection.authenticated) {
          handle_request(id, connection, payload);
        } else {
          handle_handshake(connection, payload);
        }
      } catch (const wire::ProtocolError& error) {
        drop(id, connection, cat("malformed request: ", error.what()));
        return false;
      }
    }
    connection.in.erase(0, used);
    release_if_idle(connection.in);
    return true;
  }

  void handle_handshake(Connection& connection, std::string_view payload) {
    wire::Reader reader(payload);
    std::string magic;
    for (std::size_t i = 0; i < wire::kMagic.size(); ++i)
      magic.push_back(static_cast<char>(reader.u8()));
    const std::uint8_t version = reader.u8();
    if (magic != wire::kMagic || version != wire::kVersion) {
      return refuse(connection, magic != wire::kMagic
                                    ? std::string("not a cohort store client (bad magic)")
                                    : cat("protocol version ", int{version},
                                          ", this server speaks ", int{wire::kVersion},
                                          ": every process of a job must run the same cohort"));
    }
    const std::string_view token = reader.bytes();
    const std::string_view credential = reader.bytes();
    reader.expect_end();
    if (!equal_in_constant_time(token, options.token)) {
      return refuse(connection, cat(wire::kWrongToken,
                                    " (COHORT_JOB_TOKEN): the client belongs to another job, or "
                                    "another user's"));
    }
    if (connection.remote && !options.token_is_secret) {
      // The token is no secret here: a peer on another host proves with
      // MUNGE that it runs as this job's user.
      if (credential.empty()) {
        return refuse(connection,
                      "a client on another host must present a MUNGE credential (is munged "
                      "running on its host?) or the job needs a secret in COHORT_JOB_TOKEN");
      }
      const detail::MungeIdentity identity = detail::munge_decode(credential);
      if (!identity.valid || identity.uid != user || identity.payload != options.token) {
        return refuse(connection,
                      !identity.valid ? cat("its MUNGE credential was refused: ", identity.error)
                      : identity.uid != user
                          ? cat("its MUNGE credential is for uid ", identity.uid,
                                ", and this job's store takes only its own user (uid ", user, ")")
                          : std::string("its MUNGE credential was made for another job"));
      }
    }
    connection.authenticated = true;
    end_handshake(connection);
    connection.out += wire::Writer().u8(static_cast<std::uint8_t>(wire::Status::ok)).frame();
  }

  void refuse(Connection& connection, const std::string& why) {
    refusals.log(LogLevel::warn, "store",
                 cat("rejected the connection from ", connection.peer, ": ", why));
    connection.out += rejection(why);
    connection.closing = true;
  }

  void handle_request(std::uint64_t id, Connection& connection, std::string_view payload) {
    wire::Reader reader(payload);
    const auto op = static_cast<wire::Op>(reader.u8());
    wire::Writer reply;
    reply.u8(static_cast<std::uint8_t>(wire::Status::ok));
    switch (op) {
      case wire::Op::set: {
        std::string key(reader.bytes());
        std::string value(reader.bytes());
        reader.expect_end();
        data[key] = std::move(value);
        notify(key);
        break;
      }
      case wire::Op::get:
      case wire::Op::wait: {
        std::vector<std::string> keys;
        if (op == wire::Op::get) {
          keys.emplace_back(reader.bytes());
        } else {
          keys = reader.strings();
        }
        const std::int64_t timeout_ms = reader.i64();
        reader.expect_end();
        connection.parked.op = op;
        connection.parked.keys = KeyList(keys);
        park(id, connection,
             detail::deadline_after(
                 std::chrono::milliseconds(std::max<std::int64_t>(0, timeout_ms))));
        return;
      }
      case wire::Op::add: {
        std::string key(reader.bytes());
        const std::int64_t delta = reader.i64();
        reader.expect_end();
        std::string error;
        const std::optional<std::int64_t> sum = add(key, delta, &error);
        if (!sum) {
          reply = wire::Writer();
          reply.u8(static_cast<std::uint8_t>(wire::Status::error)).bytes(error);
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
        auto it = data.find(key);
        const bool matches = it == data.end() ? expected.empty() : it->second == expected;
        if (matches) {
          data[key] = std::string(desired);
          notify(key);
          reply.bytes(desired);
        } else {
          reply.bytes(it == data.end() ? std::string_view() : std::string_view(it->second));
        }
        break;
      }
      case wire::Op::check: {
        const std::vector<std::string> keys = reader.strings();
        reader.expect_end();
        reply.u8(all_set(keys) ? 1 : 0);
        break;
      }
      case wire::Op::delete_key: {
        const std::string key(reader.bytes());
        reader.expect_end();
        const bool erased = data.erase(key) != 0;
        deletions += erased ? 1 : 0;
        reply.u8(erased ? 1 : 0);
        break;
      }
      case wire::Op::num_keys:
        reader.expect_end();
        reply.i64(static_cast<std::int64_t>(data.size()));
        break;
      default:
        throw wire::ProtocolError(cat("unknown operation ", int{static_cast<std::uint8_t>(op)}));
    }
    connection.out += reply.frame();
  }

  // ADD for both protocols: the integer at `key` (absent: 0) plus `delta`,
  // or nullopt and `*error` when the value is no integer or the sum would
  // not fit in 64 bits (the value is then left as it was).
  std::optional<std::int64_t> add(const std::string& key, std::int64_t delta, std::string* error) {
    std::int64_t current = 0;
    if (auto it = data.find(key); it != data.end()) {
      auto number = detail::parse_int(it->second);
      if (!number) {
        *error = cat("add on key '", key, "', whose value is not an integer");
        return std::nullopt;
      }
      current = *number;
    }
    std::int64_t sum = 0;
    if (__builtin_add_overflow(current, delta, &sum)) {
      *error = cat("add of ", delta, " to key '", key, "' (now ", current,
                   ") would overflow a 64-bit integer; the value is unchanged");
      return std::nullopt;
    }
    data[key] = std::to_string(sum);
    notify(key);
    return sum;
  }

  bool all_set(const std::vector<std::string>& keys) const {
    return std::all_of(keys.begin(), keys.end(),
                       [this](const std::string& key) { return data.count(key) != 0; });
  }

  // PyTorch TCPStore requests (torch_wire.hpp), answered as PyTorch's own
  // server does, on keys under kTorchPrefix. Its waits have no timeouts on
  // the server: a client gives up by itself, then sends CANCEL_WAIT (2.x),
  // which is the one request taken while a connection is parked.
  // Returns false when the connection was closed.
  bool handle_torch_requests(std::uint64_t id, Connection& connection) {
    std::size_t used = 0;
    while (!connection.closing) {
      const std::string_view pending = std::string_view(connection.in).substr(used);
      if (pending.empty()) break;
      if (!connection.dialect) {
        if (pending.size() < 5 && pending[0] == 0) break;  // VALIDATE, or not yet known
        connection.dialect = torch_wire::opens_like_newer_client(pending) ? torch_wire::Dialect::v2
                                                                          : torch_wire::Dialect::v1;
      }
      if (connection.parked.active &&
          !(connection.dialect == torch_wire::Dialect::v2 && pending[0] == kCancelWaitByte)) {
        break;
      }
      std::size_t size = 0;
      std::optional<torch_wire::Request> request;
      try {
        request = torch_wire::parse(pending, *connection.dialect, options.max_frame_bytes, &size);
      } catch (const torch_wire::Unsupported& error) {
        unservable(id, connection, error.what());
        return false;
      }
      if (!request) break;
      used += size;
      if (!execute_torch(id, connection, *request)) return false;
    }
    connection.in.erase(0, used);
    release_if_idle(connection.in);
    return true;
  }

  // A PyTorch client sent what this store cannot serve: it can never
  // rendezvous, so whoever runs the job is told (once) and can end it now
  // rather than when the client's own timeout passes.
  void unservable(std::uint64_t id, Connection& connection, const std::string& what) {
    const std::string why =
        cat("a PyTorch TCPStore client at ", connection.peer, " (",
            connection.dialect == torch_wire::Dialect::v2 ? "PyTorch 2.1 or later"
                                                          : "PyTorch 1.13 or earlier",
            ") sent ", what);
    if (told_unservable || !options.on_unservable) return drop(id, connection, why);
    told_unservable = true;
    close_connection(id);
    options.on_unservable(why);  // whoever runs the job says it, in its report
  }

  bool is_set(std::string_view key) const {
    if (data.find(key) != data.end()) return true;
    const auto queue = queues.find(key);
    return queue != queues.end() && !queue->second.empty();
  }

  // Returns false when the connection was closed.
  bool execute_torch(std::uint64_t id, Connection& connection, const torch_wire::Request& request) {
    using torch_wire::Query;
    const bool v2 = connection.dialect == torch_wire::Dialect::v2;
    std::vector<std::string> keys;
    keys.reserve(request.keys.size());
    for (const std::string& key : request.keys)
      keys.push_back(cat(kTorchPrefix, key));
    std::string& out = connection.out;
    switch (request.query) {
      case Query::validate:
        if (request.word != torch_wire::kValidateMagic) {
          drop(id, connection,
               cat("PyTorch TCPStore client sent VALIDATE with ", request.word,
                   " in place of PyTorch's number"));
          return false;
        }
        break;
      case Query::ping:  // the client checks that its nonce comes back
        out += torch_wire::u32_reply(request.word);
        break;
      case Query::set:
        data[keys[0]] = request.value;
        notify(keys[0]);
        break;
      case Query::multi_set:
        for (std::size_t i = 0; i < keys.size(); ++i) {
          data[keys[i]] = request.values[i];
          notify(keys[i]);
        }
        break;
      case Query::append:
        data[keys[0]] += request.value;
        notify(keys[0]);
        break;
      case Query::compare_set:
        out += torch_wire::bytes_reply(compare_set(keys[0], request.expected, request.value));
        break;
      case Query::get: {
        auto it = data.find(keys[0]);
        if (it == data.end() && !v2) {
          drop(id, connection,
               cat("PyTorch TCPStore client asked for key '", request.keys[0],
                   "', which is not set (its client always waits for a key first)"));
          return false;
        }
        // 2.x's libuv server answers nothing for a missing key, as here.
        out += torch_wire::bytes_reply(it == data.end() ? std::string_view() : it->second);
        break;
      }
      case Query::multi_get:  // the client waits for the keys first
        for (const std::string& key : keys) {
          auto it = data.find(key);
          out += torch_wire::bytes_reply(it == data.end() ? std::string_view() : it->second);
        }
        break;
      case Query::add: {
        std::string error;
        const std::optional<std::int64_t> sum = add(keys[0], request.number, &error);
        if (!sum) {
          drop(id, connection, cat("PyTorch TCPStore client: ", error));
          return false;
        }
        out += torch_wire::i64_reply(*sum);
        break;
      }
      case Query::check:
        out += torch_wire::u8_reply(std::all_of(keys.begin(), keys.end(),
                                                [this](const std::string& k) { return is_set(k); })
                                        ? torch_wire::kReady
                                        : torch_wire::kNotReady);
        break;
      case Query::wait:
        connection.parked.op = wire::Op::wait;
        connection.parked.at_least = 0;
        connection.parked.queues_count = true;
        connection.parked.keys = KeyList(keys);
        park(id, connection, Deadline::max());  // no deadline: the client keeps its own
        break;
      case Query::barrier: {
        std::string error;
        if (!add(keys[0], 1, &error)) {
          drop(id, connection, cat("PyTorch TCPStore client: BARRIER: ", error));
          return false;
        }
        connection.parked.op = wire::Op::wait;
        connection.parked.at_least = std::max<std::int64_t>(request.number, 1);
        connection.parked.keys = KeyList(keys);
        park(id, connection, Deadline::max());
        break;
      }
      case Query::cancel_wait:
        // After the wait was answered, or while it is parked: either way the
        // client reads this after any STOP_WAITING already sent.
        if (connection.parked.active) {
          unpark(id, connection);
          connection.parked.keys.clear();
        }
        out += torch_wire::u8_reply(torch_wire::kWaitCanceled);
        break;
      case Query::num_keys: {
        std::int64_t count = 0;
        for (const auto& entry : data)
          count += is_torch_key(entry.first);
        out += torch_wire::i64_reply(count);
        break;
      }
      case Query::list_keys: {
        std::string listed;
        std::int64_t count = 0;
        for (const auto& entry : data) {
          if (!is_torch_key(entry.first)) continue;
          ++count;
          listed +=
              torch_wire::bytes_reply(std::string_view(entry.first).substr(kTorchPrefix.size()));
        }
        out += torch_wire::i64_reply(count) + listed;
        break;
      }
      case Query::delete_key: {
        const std::size_t erased = data.erase(keys[0]);
        deletions += erased;
        out += torch_wire::i64_reply(static_cast<std::int64_t>(erased));
        break;
      }
      case Query::queue_push:
        queues[keys[0]].push_back(request.value);
        notify_one(keys[0]);  // one item: one waiter pops it
        break;
      case Query::queue_pop: {
        auto it = queues.find(keys[0]);
        const std::size_t length = it == queues.end() ? 0 : it->second.size();
        out += torch_wire::i64_reply(static_cast<std::int64_t>(length));
        if (length != 0) {
          out += torch_wire::bytes_reply(it->second.front());
          it->second.pop_front();
          if (it->second.empty()) queues.erase(it);
        }
        break;
      }
      case Query::queue_len: {
        auto it = queues.find(keys[0]);
        out += torch_wire::i64_reply(
            static_cast<std::int64_t>(it == queues.end() ? 0 : it->second.size()));
        break;
      }
      case Query::watch_key:  // parse() refuses it
        break;
    }
    return true;
  }

  static bool is_torch_key(const std::string& key) {
    return key.compare(0, kTorchPrefix.size(), kTorchPrefix) == 0;
  }

  // COMPARE_SET as PyTorch's server answers it: the value after the call;
  // for a missing key, `desired` after setting it when `expected` is empty,
  // else `expected` (its clients rely on that).
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) {
    auto it = data.find(key);
    if (it == data.end()) {
      if (!expected.empty()) return expected;
      data[key] = desired;
      notify(key);
      return desired;
    }
    if (it->second == expected) {
      it->second = desired;
      notify(key);
    }
    return it->second;
  }

  // Answers a GET/WAIT whose keys are all set, or parks it under the first
  // key it misses until `deadline` (Deadline::max(): none).
  void park(std::uint64_t id, Connection& connection, Deadline deadline) {
    Parked& parked = connection.parked;
    parked.cursor = 0;
    parked.deletions = deletions;
    if (scan_on(id, parked)) return answer(connection);
    parked.active = true;
    if (deadline != Deadline::max()) parked.deadline = deadlines.emplace(deadline, id);
  }

  // Scans a parked request's keys on from its cursor: true when every one is
  // set (and none was deleted since the scan began: they are all set at
  // once), else indexes it under the first it misses.
  bool scan_on(std::uint64_t id, Parked& parked) {
    for (;;) {
      while (parked.cursor < parked.keys.size() && ready(parked, parked.cursor))
        ++parked.cursor;
      if (parked.cursor < parked.keys.size()) {
        const std::string_view key = parked.keys[parked.cursor];
        auto it = waiters.find(key);
        if (it == waiters.end()) it = waiters.try_emplace(std::string(key)).first;
        it->second.insert(id);
        parked.indexed_under = it->first;
        return false;
      }
      if (parked.deletions == deletions) return true;
      parked.deletions = deletions;  // a key seen set may be gone: look again
      parked.cursor = 0;
    }
  }

  // Whether a parked request's key `i` is as it waits for it to be: set (or
  // a non-empty queue), or for a BARRIER, counted up to its world size.
  bool ready(const Parked& parked, std::size_t i) const {
    if (parked.at_least == 0) {
      return parked.queues_count ? is_set(parked.keys[i]) : data.count(parked.keys[i]) != 0;
    }
    const auto it = data.find(parked.keys[i]);
    if (it == data.end()) return false;
    const auto count = detail::parse_int(it->second);
    return count && *count >= parked.at_least;
  }

  // The parked requests whose indexed key was set, after the requests that
  // set it (a burst of sets costs each waiter one scan).
  void rescan_waiters() {
    std::vector<std::uint64_t> batch;
    batch.swap(rescan);
    for (std::uint64_t id : batch) {
      auto found = connections.find(id);
      if (found == connections.end()) continue;
      Connection& connection = found->second;
      Parked& parked = connection.parked;
      if (!parked.active || parked.indexed_under) continue;
      if (!scan_on(id, parked)) continue;
      unpark(id, connection);
      answer(connection);
      resumed.push_back(id);  // sends the answer, then frames sent ahead
    }
  }

  // Takes a parked request out of every index it is in.
  void unpark(std::uint64_t id, Connection& connection) {
    Parked& parked = connection.parked;
    if (parked.indexed_under) {
      auto it = waiters.find(*parked.indexed_under);
      if (it != waiters.end()) {
        it->second.erase(id);
        if (it->second.empty()) waiters.erase(it);
      }
    }
    parked.indexed_under.reset();
    if (parked.deadline) deadlines.erase(*parked.deadline);
    parked.deadline.reset();
    parked.active = false;
  }

  // The answer to a GET/WAIT whose keys are all set.
  void answer(Connection& connection) {
    Parked& parked = connection.parked;
    if (connection.torch) {
      connection.out += torch_wire::u8_reply(torch_wire::kStopWaiting);
    } else {
      wire::Writer reply;
      reply.u8(static_cast<std::uint8_t>(wire::Status::ok));
      if (parked.op == wire::Op::get) reply.bytes(data.find(parked.keys[0])->second);
      connection.out += reply.frame();
    }
    parked.keys.clear();
  }

  // A queue item arrived at `key`: wakes one of its waiters, which pops it.
  void notify_one(const std::string& key) {
    auto it = waiters.find(key);
    if (it == waiters.end()) return;
    const std::uint64_t id = *it->second.begin();
    it->second.erase(it->second.begin());
    if (it->second.empty()) waiters.erase(it);
    auto found = connections.find(id);
    if (found == connections.end()) return;
    found->second.parked.indexed_under.reset();
    rescan.push_back(id);
  }

  void notify(const std::string& key) {
    auto it = waiters.find(key);
    if (it == waiters.end()) return;
    for (std::uint64_t id : it->second) {
      auto found = connections.find(id);
      if (found == connections.end()) continue;
      found->second.parked.indexed_under.reset();  // no longer indexed
      rescan.push_back(id);
    }
    waiters.erase(it);
  }

  void expire_deadlines() {
    const Deadline now = Clock::now();
    while (!deadlines.empty() && deadlines.begin()->first <= now) {
      const std::uint64_t id = deadlines.begin()->second;
      Connection& connection = connections.at(id);  // closing a connection unparks it
      std::vector<std::string> missing;
      const KeyList& keys = connection.parked.keys;
      for (std::size_t i = 0; i < keys.size(); ++i) {
        if (data.count(keys[i]) == 0) missing.emplace_back(keys[i]);
      }
      connection.out += wire::Writer()
                            .u8(static_cast<std::uint8_t>(wire::Status::timeout))
                            .strings(missing)
                            .frame();
      unpark(id, connection);
      connection.parked.keys.clear();
      resumed.push_back(id);
    }
  }

  void expire_handshakes() {
    const Deadline now = Clock::now();
    while (!handshake_deadlines.empty() && handshake_deadlines.begin()->first <= now) {
      const std::uint64_t id = handshake_deadlines.begin()->second;
      drop(id, connections.at(id),
           cat("no handshake within ", options.handshake_timeout.count(), " ms"));
    }
  }

  // An empty buffer gives back what a large request or answer made it
  // grow to: thousands of idle connections must not each keep their peak
  // (a 180 KB table GET by 4,096 ranks kept 720 MB).
  static void release_if_idle(std::string& buffer) {
    constexpr std::size_t kKeepBytes = 4096;
    if (buffer.empty() && buffer.capacity() > kKeepBytes) std::string().swap(buffer);
  }

  // Sends what it can; returns false when the connection was closed.
  bool flush(std::uint64_t id, Connection& connection) {
    std::size_t sent = 0;
    while (sent < connection.out.size()) {
      const ssize_t n = send(connection.fd.get(), connection.out.data() + sent,
                             connection.out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else {
        close_connection(id);
        return false;
      }
    }
    connection.out.erase(0, sent);
    release_if_idle(connection.out);
    if (connection.out.empty() && connection.closing) {
      close_connection(id);
      return false;
    }
    const bool want_write = !connection.out.empty();
    if (want_write != connection.want_write) {
      connection.want_write = want_write;
      watch(connection.fd.get(), id, EPOLLIN | EPOLLRDHUP | (want_write ? EPOLLOUT : 0u),
            EPOLL_CTL_MOD);
    }
    return true;
  }
};

StoreServer::StoreServer(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}
StoreServer::~StoreServer() = default;
int StoreServer::port() const noexcept {
  return impl_->listener.port;
}
int StoreServer::torch_port() const noexcept {
  return impl_->torch_listener.fd.valid() ? impl_->torch_listener.port : -1;
}
void StoreServer::forget_torch_keys() {
  std::unique_lock<std::mutex> lock(impl_->task_mutex);
  impl_->forget_requested = true;
  const std::uint64_t one = 1;
  (void)!::write(impl_->task.get(), &one, sizeof(one));
  impl_->task_done.wait(lock, [this] { return !impl_->forget_requested; });
}

std::size_t StoreServer::connection_count() const noexcept {
  return impl_->open_connections;
}

bool StoreServer::wait_until_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->idle_mutex);
  return impl_->idle.wait_for(lock, timeout, [this] { return impl_->open_connections == 0; });
}

}  // namespace cohort
