// StoreServer: one epoll loop on a thread of its own. A connection is a
// state machine: handshake, then one request at a time; a WAIT or GET for
// keys not yet set parks the connection (its later frames stay buffered)
// until the keys arrive or its deadline passes. Connections to the second,
// PyTorch-protocol port skip the handshake and work under "torch:" keys.
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cohort/errors.hpp>
#include <cohort/store.hpp>

#include "core/fd.hpp"
#include "core/log.hpp"
#include "core/socket.hpp"
#include "core/strings.hpp"
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
// Every key a PyTorch TCPStore client names is stored under this prefix.
constexpr std::string_view kTorchPrefix = "torch:";

// A request parked until its keys are set.
struct Parked {
  bool active = false;
  wire::Op op = wire::Op::wait;
  std::vector<std::string> keys;
  Deadline deadline;
  std::uint64_t serial = 0;  // tells a current deadline entry from a stale one
};

struct Connection {
  Fd fd;
  std::string peer;
  std::string in;   // bytes received, not yet handled
  std::string out;  // bytes to send
  bool authenticated = false;
  bool torch = false;         // a PyTorch TCPStore client (second port)
  bool seen_request = false;  // torch: its first request was checked for VALIDATE
  bool closing = false;       // close once `out` is sent
  bool want_write = false;
  Parked parked;
};

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return difference == 0;
}

}  // namespace

struct StoreServer::Impl {
  Options options;
  detail::Listener listener;
  detail::Listener torch_listener;  // fd invalid when there is none
  Fd epoll;
  Fd wake;
  std::thread thread;
  std::atomic<std::size_t> open_connections{0};
  std::mutex idle_mutex;
  std::condition_variable idle;

  std::unordered_map<std::uint64_t, Connection> connections;
  std::uint64_t next_id = 3;
  bool told_newer_torch = false;  // say it once per server, not per connection
  std::uint64_t next_serial = 1;
  std::unordered_map<std::string, std::string> data;
  std::unordered_map<std::string, std::vector<std::uint64_t>> waiters;         // key -> parked ids
  std::multimap<Deadline, std::pair<std::uint64_t, std::uint64_t>> deadlines;  // -> id, serial
  std::vector<std::uint64_t> resumed;  // parked connections whose keys arrived

  explicit Impl(Options opts) : options(std::move(opts)) {
    detail::raise_open_file_limit();
    listener = detail::listen_tcp(options.host, options.port);
    epoll = Fd(epoll_create1(EPOLL_CLOEXEC));
    wake = Fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!epoll.valid() || !wake.valid()) {
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

  void run() {
    epoll_event events[256];
    for (;;) {
      int timeout = -1;
      if (!deadlines.empty()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadlines.begin()->first - Clock::now());
        timeout = static_cast<int>(std::max<long long>(0, left.count() + 1));
      }
      const int n = epoll_wait(epoll.get(), events, 256, timeout);
      if (n < 0 && errno != EINTR) {
        detail::log(LogLevel::error, "store",
                    cat("epoll_wait failed: ", detail::errno_text(errno), "; the server stops"));
        return;
      }
      for (int i = 0; i < n; ++i) {
        const std::uint64_t id = events[i].data.u64;
        if (id == kWakeId) return;
        if (id == kListenerId || id == kTorchListenerId) {
          accept_all(id == kTorchListenerId);
        } else {
          on_event(id, events[i].events);
        }
      }
      expire_deadlines();
      while (!resumed.empty()) {
        std::vector<std::uint64_t> batch;
        batch.swap(resumed);
        for (std::uint64_t id : batch)
          handle_frames(id);
      }
    }
  }

  void accept_all(bool torch) {
    const int listening = torch ? torch_listener.fd.get() : listener.fd.get();
    for (;;) {
      Fd fd(accept4(listening, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!fd.valid()) {
        if (errno == EMFILE || errno == ENFILE) {
          detail::log(LogLevel::warn, "store",
                      "out of file descriptors: a client waits in the backlog (raise ulimit -n)");
        }
        return;  // EAGAIN, or a transient error: the next readiness retries
      }
      const std::uint64_t id = next_id++;
      Connection& connection = connections[id];
      connection.peer = detail::peer_name(fd.get());
      connection.torch = torch;
      connection.fd = std::move(fd);
      watch(connection.fd.get(), id, EPOLLIN | EPOLLRDHUP);
      ++open_connections;
    }
  }

  void close_connection(std::uint64_t id) {
    auto it = connections.find(id);
    if (it == connections.end()) return;
    epoll_ctl(epoll.get(), EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
    connections.erase(it);  // parked entries of `id` in waiters/deadlines go stale
    {
      std::lock_guard<std::mutex> lock(idle_mutex);
      --open_connections;
    }
    idle.notify_all();
  }

  // Closes a connection that broke the protocol, saying why.
  void drop(std::uint64_t id, Connection& connection, const std::string& why) {
    detail::log(LogLevel::warn, "store",
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
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      char buffer[65536];
      for (;;) {
        const ssize_t n = recv(connection.fd.get(), buffer, sizeof(buffer), 0);
        if (n > 0) {
          connection.in.append(buffer, static_cast<std::size_t>(n));
          // A client may send ahead while parked, but not without bound.
          if (connection.in.size() > std::size_t{options.max_frame_bytes} * 2 + 64) {
            return drop(id, connection, "sent far more than one request ahead");
          }
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        close_connection(id);  // the client closed or reset: its parked request goes too
        return;
      }
      handle_frames(id);
    }
  }

  // Handles complete frames until one parks the connection or none is left.
  void handle_frames(std::uint64_t id) {
    auto it = connections.find(id);
    if (it == connections.end()) return;
    Connection& connection = it->second;
    if (connection.torch) return handle_torch_requests(id, connection);
    std::size_t used = 0;
    while (!connection.parked.active && !connection.closing) {
      const std::size_t available = connection.in.size() - used;
      if (available < wire::kFrameHeaderBytes) break;
      const std::uint32_t length = wire::frame_length(connection.in.data() + used);
      const std::uint32_t limit =
          connection.authenticated ? options.max_frame_bytes : wire::kMaxHandshakeBytes;
      if (length > limit) {
        return drop(id, connection,
                    cat("a frame of ", length, " bytes exceeds the limit of ", limit, " bytes",
                        connection.authenticated ? "" : " for a handshake"));
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
        return drop(id, connection, cat("malformed request: ", error.what()));
      }
    }
    connection.in.erase(0, used);
    flush(id, connection);
  }

  void handle_handshake(Connection& connection, std::string_view payload) {
    wire::Reader reader(payload);
    std::string magic;
    for (std::size_t i = 0; i < wire::kMagic.size(); ++i)
      magic.push_back(static_cast<char>(reader.u8()));
    const std::uint8_t version = reader.u8();
    const std::string_view token = reader.bytes();
    reader.expect_end();
    std::string refusal;
    if (magic != wire::kMagic) {
      refusal = "not a cohort store client (bad magic)";
    } else if (version != wire::kVersion) {
      refusal =
          cat("protocol version ", int{version}, ", this server speaks ", int{wire::kVersion});
    } else if (!equal_in_constant_time(token, options.token)) {
      refusal = "wrong job token (COHORT_JOB_TOKEN): the client belongs to another job";
    }
    if (refusal.empty()) {
      connection.authenticated = true;
      connection.out += wire::Writer().u8(static_cast<std::uint8_t>(wire::Status::ok)).frame();
      return;
    }
    detail::log(LogLevel::warn, "store",
                cat("rejected the connection from ", connection.peer, ": ", refusal));
    connection.out +=
        wire::Writer().u8(static_cast<std::uint8_t>(wire::Status::rejected)).bytes(refusal).frame();
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
        Parked& parked = connection.parked;
        parked.op = op;
        parked.keys = std::move(keys);
        if (try_complete(connection)) return;
        parked.active = true;
        parked.serial = next_serial++;
        parked.deadline =
            Clock::now() + std::chrono::milliseconds(std::max<std::int64_t>(0, timeout_ms));
        deadlines.emplace(parked.deadline, std::make_pair(id, parked.serial));
        park_on_missing_key(id, connection);
        return;
      }
      case wire::Op::add: {
        std::string key(reader.bytes());
        const std::int64_t delta = reader.i64();
        reader.expect_end();
        std::int64_t current = 0;
        if (auto it = data.find(key); it != data.end()) {
          auto number = detail::parse_int(it->second);
          if (!number) {
            reply = wire::Writer();
            reply.u8(static_cast<std::uint8_t>(wire::Status::error))
                .bytes(cat("add on key '", key, "', whose value is not an integer"));
            break;
          }
          current = *number;
        }
        current += delta;
        data[key] = std::to_string(current);
        notify(key);
        reply.i64(current);
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
        bool all = true;
        for (const std::string& key : keys)
          all = all && data.count(key) != 0;
        reply.u8(all ? 1 : 0);
        break;
      }
      case wire::Op::delete_key: {
        const std::string key(reader.bytes());
        reader.expect_end();
        reply.u8(data.erase(key) ? 1 : 0);
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

  // PyTorch TCPStore requests (torch_wire.hpp), answered as PyTorch 1.13's
  // own server does, on keys under kTorchPrefix. They have no timeouts of
  // their own: a client gives up by itself and closes its connection.
  void handle_torch_requests(std::uint64_t id, Connection& connection) {
    std::size_t used = 0;
    while (!connection.parked.active && !connection.closing) {
      const std::string_view pending = std::string_view(connection.in).substr(used);
      if (pending.empty()) break;
      if (!connection.seen_request) {
        if (pending.size() < 5 && pending[0] == 0) break;  // VALIDATE, or not yet known
        connection.seen_request = true;
        if (torch_wire::opens_like_newer_client(pending)) return refuse_newer_torch(id, connection);
      }
      std::size_t size = 0;
      std::optional<torch_wire::Request> request;
      try {
        request = torch_wire::parse(pending, options.max_frame_bytes, &size);
      } catch (const torch_wire::Unsupported& error) {
        return drop(id, connection, cat("PyTorch TCPStore client sent ", error.what()));
      }
      if (!request) break;
      used += size;
      if (!execute_torch(id, connection, *request)) return;
    }
    connection.in.erase(0, used);
    flush(id, connection);
  }

  void refuse_newer_torch(std::uint64_t id, Connection& connection) {
    if (!told_newer_torch) {
      told_newer_torch = true;
      detail::log(LogLevel::error, "store",
                  cat("a PyTorch 2.1 or later TCPStore client (it opened with VALIDATE) "
                      "connected to MASTER_PORT ",
                      torch_listener.port, " from ", connection.peer,
                      "; cohort serves PyTorch 1.13's TCPStore protocol only: run cohort run with "
                      "--no-agent-store (rank 0 then serves PyTorch's own store)"));
    }
    close_connection(id);
  }

  // Returns false when the connection was closed.
  bool execute_torch(std::uint64_t id, Connection& connection, const torch_wire::Request& request) {
    using torch_wire::Query;
    std::vector<std::string> keys;
    keys.reserve(request.keys.size());
    for (const std::string& key : request.keys)
      keys.push_back(cat(kTorchPrefix, key));
    switch (request.query) {
      case Query::set:
        data[keys[0]] = request.value;
        notify(keys[0]);
        break;
      case Query::compare_set: {
        auto it = data.find(keys[0]);
        if (it == data.end()) {
          // PyTorch 1.13 answers `expected` for a missing key unless it is
          // empty (then it sets the key): its clients rely on that.
          if (request.expected.empty()) {
            data[keys[0]] = request.value;
            notify(keys[0]);
            connection.out += torch_wire::bytes_reply(request.value);
          } else {
            connection.out += torch_wire::bytes_reply(request.expected);
          }
        } else {
          if (it->second == request.expected) {
            it->second = request.value;
            notify(keys[0]);
          }
          connection.out += torch_wire::bytes_reply(data[keys[0]]);
        }
        break;
      }
      case Query::get: {
        auto it = data.find(keys[0]);
        if (it == data.end()) {
          drop(id, connection,
               cat("PyTorch TCPStore client asked for key '", request.keys[0],
                   "', which is not set (its client always waits for a key first)"));
          return false;
        }
        connection.out += torch_wire::bytes_reply(it->second);
        break;
      }
      case Query::add: {
        std::int64_t current = 0;
        if (auto it = data.find(keys[0]); it != data.end()) {
          auto number = detail::parse_int(it->second);
          if (!number) {
            drop(id, connection,
                 cat("PyTorch TCPStore client added to key '", request.keys[0],
                     "', whose value is not an integer"));
            return false;
          }
          current = *number;
        }
        current += request.delta;
        data[keys[0]] = std::to_string(current);
        notify(keys[0]);
        connection.out += torch_wire::i64_reply(current);
        break;
      }
      case Query::check: {
        bool all = true;
        for (const std::string& key : keys)
          all = all && data.count(key) != 0;
        connection.out += torch_wire::u8_reply(all ? torch_wire::kReady : torch_wire::kNotReady);
        break;
      }
      case Query::wait: {
        Parked& parked = connection.parked;
        parked.op = wire::Op::wait;
        parked.keys = std::move(keys);
        if (try_complete(connection)) break;
        parked.active = true;  // no deadline: the client keeps its own
        park_on_missing_key(id, connection);
        break;
      }
      case Query::num_keys: {
        std::int64_t count = 0;
        for (const auto& entry : data)
          count += entry.first.compare(0, kTorchPrefix.size(), kTorchPrefix) == 0;
        connection.out += torch_wire::i64_reply(count);
        break;
      }
      case Query::delete_key:
        connection.out += torch_wire::i64_reply(static_cast<std::int64_t>(data.erase(keys[0])));
        break;
      case Query::watch_key:  // parse() refuses it
        break;
    }
    return true;
  }

  // Answers a parked GET/WAIT if all its keys are set; returns whether it did.
  bool try_complete(Connection& connection) {
    Parked& parked = connection.parked;
    for (const std::string& key : parked.keys) {
      if (data.count(key) == 0) return false;
    }
    if (connection.torch) {
      connection.out += torch_wire::u8_reply(torch_wire::kStopWaiting);
    } else {
      wire::Writer reply;
      reply.u8(static_cast<std::uint8_t>(wire::Status::ok));
      if (parked.op == wire::Op::get) reply.bytes(data[parked.keys.front()]);
      connection.out += reply.frame();
    }
    parked.active = false;
    parked.keys.clear();
    return true;
  }

  // Registers a parked connection under the first key it still misses.
  void park_on_missing_key(std::uint64_t id, Connection& connection) {
    for (const std::string& key : connection.parked.keys) {
      if (data.count(key) == 0) {
        waiters[key].push_back(id);
        return;
      }
    }
  }

  void notify(const std::string& key) {
    auto it = waiters.find(key);
    if (it == waiters.end()) return;
    std::vector<std::uint64_t> ids = std::move(it->second);
    waiters.erase(it);
    for (std::uint64_t id : ids) {
      auto connection = connections.find(id);
      if (connection == connections.end() || !connection->second.parked.active) continue;
      if (try_complete(connection->second)) {
        resumed.push_back(id);  // sends the answer, then handles frames sent ahead
      } else {
        park_on_missing_key(id, connection->second);
      }
    }
  }

  void expire_deadlines() {
    const Deadline now = Clock::now();
    while (!deadlines.empty() && deadlines.begin()->first <= now) {
      const auto [id, serial] = deadlines.begin()->second;
      deadlines.erase(deadlines.begin());
      auto it = connections.find(id);
      if (it == connections.end()) continue;
      Parked& parked = it->second.parked;
      if (!parked.active || parked.serial != serial) continue;
      std::vector<std::string> missing;
      for (const std::string& key : parked.keys) {
        if (data.count(key) == 0) missing.push_back(key);
      }
      it->second.out += wire::Writer()
                            .u8(static_cast<std::uint8_t>(wire::Status::timeout))
                            .strings(missing)
                            .frame();
      parked.active = false;
      parked.keys.clear();
      resumed.push_back(id);
    }
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
std::size_t StoreServer::connection_count() const noexcept {
  return impl_->open_connections;
}

bool StoreServer::wait_until_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->idle_mutex);
  return impl_->idle.wait_for(lock, timeout, [this] { return impl_->open_connections == 0; });
}

}  // namespace cohort
