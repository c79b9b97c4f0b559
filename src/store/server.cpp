// StoreServer's transport: one epoll loop on a thread of its own, its
// listeners (cohort's protocol, and PyTorch's on a second port), admission
// by who the peer is (admission.hpp), and each connection's bytes in and
// out. What the bytes mean is the connection's protocol's
// (store_protocol.hpp); the keys and the requests waiting for them are the
// key space's (key_space.hpp). A connection whose request waits keeps its
// later frames buffered until the wait ends.
#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <fcntl.h>
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
#include "core/thread_name.hpp"
#include "store/admission.hpp"
#include "store/cohort_protocol.hpp"
#include "store/file_answer.hpp"
#include "store/handshake_slots.hpp"
#include "store/key_space.hpp"
#include "store/proof.hpp"
#include "store/relay.hpp"
#include "store/store_protocol.hpp"
#include "store/torch_protocol.hpp"
#include "store/torch_relay.hpp"
#include "store/torch_wire.hpp"

namespace cohort {

using detail::cat;
using detail::Clock;
using detail::Connection;
using detail::Deadline;
using detail::Fd;
using detail::LogLevel;

namespace detail {

void release_if_idle(std::string& buffer) {
  constexpr std::size_t kKeepBytes = 4096;
  if (buffer.empty() && buffer.capacity() > kKeepBytes) std::string().swap(buffer);
}

}  // namespace detail

namespace {

constexpr std::uint64_t kListenerId = 0;
constexpr std::uint64_t kWakeId = 1;
constexpr std::uint64_t kTorchListenerId = 2;
constexpr std::uint64_t kTaskId = 3;  // another thread asks something of the loop
// Out of descriptors: how long the listeners rest before accepting again.
constexpr std::chrono::milliseconds kAcceptPause{100};

// "10.0.0.1" of "10.0.0.1:4242" (and "[::1]" of "[::1]:4242").
std::string host_of(const std::string& peer) {
  return peer.substr(0, peer.rfind(':'));
}

}  // namespace

struct StoreServer::Impl final : detail::StoreCore {
  Options server_options;
  detail::Listener listener;
  detail::Listener torch_listener;  // fd invalid when there is none
  Fd epoll;
  Fd wake;
  Fd task;                // eventfd: forget_torch_keys() was asked
  std::mutex task_mutex;  // guards forget_requested
  std::condition_variable task_done;
  bool forget_requested = false;
  bool hand_over_requested = false;  // hand_over(): tell the relays below to move (task_mutex)
  // trusted_socket()'s ends, to adopt (task_mutex), and whether each is
  // connect_in_process()'s.
  std::vector<std::pair<Fd, bool>> in_process;
  std::thread thread;
  std::atomic<std::size_t> open_connections{0};
  // Multiplexed connections (relays below) told to move and not closed
  // yet, once hand_over() asked (idle_mutex).
  std::size_t moving = 0;
  bool moving_told = false;
  std::atomic<std::size_t> waiting{0};  // key_space's waits, after each turn
  std::mutex idle_mutex;
  std::condition_variable idle;
  const uid_t uid = geteuid();

  // The protocol of each listener.
  detail::CohortProtocol cohort_protocol;
  detail::TorchProtocol torch_protocol;
  detail::TorchRelayProtocol torch_relay_protocol;  // a relay's TCPStore port

  std::unordered_map<std::uint64_t, Connection> connections;
  std::uint64_t next_id = 4;
  bool told_unservable = false;  // Options::on_unservable is called once
  detail::KeySpace key_space;
  detail::HandshakeSlots handshakes{server_options.max_pending_handshakes,
                                    server_options.handshake_timeout};
  bool accepting = true;                 // the listeners are watched
  std::optional<Deadline> accept_again;  // out of descriptors: when to retry
  std::vector<std::uint64_t> resumed;    // connections whose wait ended: send, go on
  std::size_t pending_bytes = 0;         // every connection's `counted`
  detail::LogLimiter refusals;           // peers refused or dropped
  detail::LogLimiter descriptors{1, std::chrono::seconds(10)};  // EMFILE
  // Relay mode: answers from the upstream store, for the loop to hand out.
  std::mutex relayed_mutex;
  detail::StoreRelay::Answers relayed;
  struct Alias {
    std::uint64_t connection = 0;
    detail::store_protocol::Tag tag;
  };
  std::unordered_map<std::uint64_t, Alias> aliases;  // alias() -> connection
  // Last: stopped (its threads joined) before what its answers go into.
  std::unique_ptr<detail::StoreRelay> relay_to;

  // A socket pair's end for a client, the other adopted by the loop; `own`:
  // the client is this process (connect_in_process).
  int socket_pair(bool own);

  explicit Impl(Options opts) : server_options(std::move(opts)) {
    detail::raise_open_file_limit();
    listener = detail::listen_tcp(server_options.host, server_options.port);
    epoll = Fd(epoll_create1(EPOLL_CLOEXEC));
    wake = Fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    task = Fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!epoll.valid() || !wake.valid() || !task.valid()) {
      throw Error(cat("store server: epoll/eventfd failed: ", detail::errno_text(errno)));
    }
    watch(listener.fd.get(), kListenerId, EPOLLIN);
    if (server_options.torch_port >= 0) {
      try {
        torch_listener = detail::listen_tcp(
            server_options.torch_host.empty() ? server_options.host : server_options.torch_host,
            server_options.torch_port);
      } catch (const Error& error) {
        throw detail::torch_wire::PortError(error.what());
      }
      watch(torch_listener.fd.get(), kTorchListenerId, EPOLLIN);
    }
    watch(wake.get(), kWakeId, EPOLLIN);
    watch(task.get(), kTaskId, EPOLLIN);
    if (server_options.relay_to) {
      relay_to = std::make_unique<detail::StoreRelay>(
          *server_options.relay_to, server_options.token,
          [this](detail::StoreRelay::Answers answers) {
            bool waiting_already = false;  // answers the loop has not taken yet woke it
            {
              std::lock_guard<std::mutex> lock(relayed_mutex);
              waiting_already = !relayed.empty();
              relayed.insert(relayed.end(), std::make_move_iterator(answers.begin()),
                             std::make_move_iterator(answers.end()));
            }
            if (waiting_already) return;
            const std::uint64_t one = 1;
            (void)!::write(task.get(), &one, sizeof(one));
          });
    }
    thread = std::thread([this] {
      detail::name_this_thread(relay_to ? "cohort-relay" : "cohort-store");
      run();
    });
  }

  ~Impl() {
    const std::uint64_t one = 1;
    (void)!::write(wake.get(), &one, sizeof(one));
    thread.join();
  }

  // --- StoreCore: what the protocols ask --------------------------------
  detail::KeySpace& keys() override { return key_space; }
  const Options& options() const override { return server_options; }
  uid_t user() const override { return uid; }

  void drop(std::uint64_t id, Connection& connection, const std::string& why) override {
    log_refusal(cat("closed the connection from ", connection.peer, ": ", why));
    close_connection(id);
  }

  void log_refusal(const std::string& text) override {
    refusals.log(LogLevel::warn, "store", text);
  }

  void end_handshake(Connection& connection) override { handshakes.release(connection.id); }

  bool judged(Connection& connection, bool proven) override {
    // A peer on this host is the job's own user (admission.hpp), who can
    // read the token anyway: only peers elsewhere are slowed.
    if (!connection.remote) return false;
    const auto hold = handshakes.judged(connection.id, proven, Clock::now());
    if (!proven) {
      log_refusal(cat(handshakes.failures_of(connection.id),
                      " failed proofs of the job token from the address of ", connection.peer,
                      " so far", hold.count() == 0 ? "" : "; its answers now wait ",
                      hold.count() == 0 ? std::string() : cat(hold.count(), " ms")));
    }
    return hold.count() != 0;
  }

  void unservable(std::uint64_t id, Connection& connection, const std::string& why) override {
    if (told_unservable || !server_options.on_unservable) return drop(id, connection, why);
    told_unservable = true;
    close_connection(id);
    server_options.on_unservable(why);  // whoever runs the job says it, in its report
  }

  bool relays() const override { return relay_to != nullptr; }

  void forward(std::uint64_t id, detail::RelayedRequest request) override {
    relay_to->forward(id, std::move(request));
  }

  std::uint64_t alias(std::uint64_t connection, detail::store_protocol::Tag tag) override {
    const std::uint64_t id = next_id++;  // never a connection's
    aliases.emplace(id, Alias{connection, tag});
    return id;
  }

  // The connection an answer to `id` goes to (an alias's, which is then
  // forgotten), and its tag; null when it is closed or the alias forgotten.
  Connection* answered(std::uint64_t id, detail::store_protocol::Tag* tag) {
    *tag = std::nullopt;
    if (const auto alias = aliases.find(id); alias != aliases.end()) {
      id = alias->second.connection;
      *tag = alias->second.tag;
      aliases.erase(alias);
    }
    const auto it = connections.find(id);
    return it == connections.end() ? nullptr : &it->second;
  }

  // A multiplexed connection's wait in the key space ended (`waiter`, its alias).
  Connection& wait_ended(std::uint64_t waiter, detail::store_protocol::Tag* tag) {
    Connection* connection = answered(waiter, tag);  // closing one cancels its waits
    auto& waits = connection->tagged_waits;
    if (const auto at = std::find(waits.begin(), waits.end(), waiter); at != waits.end()) {
      waits.erase(at);
    }
    return *connection;
  }

  void forget_alias(std::uint64_t alias) override { aliases.erase(alias); }

  // --- the loop -----------------------------------------------------------
  void watch(int fd, std::uint64_t id, std::uint32_t events, int op = EPOLL_CTL_ADD) {
    epoll_event event{};
    event.events = events;
    event.data.u64 = id;
    epoll_ctl(epoll.get(), op, fd, &event);
  }

  // Milliseconds until the next deadline of any kind, -1 for none.
  int wait_timeout() const {
    std::optional<Deadline> next = accept_again;
    for (std::optional<Deadline> other : {key_space.next_deadline(), handshakes.next_deadline()}) {
      if (other && (!next || *other < *next)) next = other;
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
      expire_waits();
      expire_handshakes();
      if (accept_again && *accept_again <= Clock::now()) {
        accept_again.reset();
        update_accepting();
      }
      // The waits that the requests just handled completed (a burst of
      // sets costs each waiter one scan), then what their clients sent ahead.
      while (!resumed.empty() || key_space.may_resume()) {
        key_space.resume_ready([this](std::uint64_t id, const detail::Wait& wait) {
          detail::store_protocol::Tag tag;
          Connection& connection = wait_ended(id, &tag);
          connection.protocol->answer_wait(*this, connection, wait, tag);
          resumed.push_back(connection.id);
        });
        std::vector<std::uint64_t> batch;
        batch.swap(resumed);
        for (std::uint64_t id : batch)
          handle_frames(id);
      }
      if (relay_to) relay_to->flush();  // what this round forwarded goes up together
      waiting = key_space.waiting_count();
    }
  }

  // What other threads asked (StoreServer::forget_torch_keys), and the
  // relay's answers: each to its connection, whose later frames go on.
  void run_tasks() {
    std::uint64_t count = 0;
    (void)!::read(task.get(), &count, sizeof(count));
    detail::StoreRelay::Answers answers;
    {
      std::lock_guard<std::mutex> lock(relayed_mutex);
      answers.swap(relayed);
    }
    for (auto& [named, answer] : answers) {
      detail::store_protocol::Tag tag;
      Connection* connection = answered(named, &tag);  // none for a forgotten alias
      if (connection == nullptr) continue;             // closed while its request was out
      const std::uint64_t id = connection->id;
      if (tag) {  // a multiplexed connection's: as it comes
        hand_out(*connection, std::move(answer), tag);
        resumed.push_back(id);
        continue;
      }
      if (!connection->protocol->translates_relayed_answers()) {
        hand_out(*connection, std::move(answer), tag);
      } else if (!connection->protocol->relayed_answer(*this, id, *connection, answer)) {
        continue;  // closed
      }
      if (--connection->relayed > 0) continue;  // its next answer comes in order
      connection->relayed_wait = false;
      resumed.push_back(id);
    }
    bool hand_over = false;
    {
      std::lock_guard<std::mutex> lock(task_mutex);
      for (auto& [fd, own] : in_process)
        adopt(std::move(fd), own);
      in_process.clear();
      hand_over = std::exchange(hand_over_requested, false);
      if (forget_requested) {
        key_space.forget_prefix(detail::kTorchKeyPrefix);
        forget_requested = false;
        task_done.notify_all();
      }
    }
    if (hand_over) tell_relays_to_move();
  }

  // hand_over(): every multiplexed connection (a relay below this one) is
  // told to go on through its next hop; the waiter counts them as they close.
  void tell_relays_to_move() {
    namespace wire = detail::store_protocol;
    const std::string moving_frame =
        wire::tagged(0, wire::Writer().u8(static_cast<std::uint8_t>(wire::Status::moving)).frame());
    std::vector<std::uint64_t> told;
    for (auto& [id, connection] : connections) {
      if (!connection.multiplexed || connection.told_to_move) continue;
      connection.told_to_move = true;
      connection.out += moving_frame;
      told.push_back(id);
    }
    {
      std::lock_guard<std::mutex> lock(idle_mutex);
      moving += told.size();
      moving_told = true;
    }
    idle.notify_all();
    for (const std::uint64_t id : told)
      handle_frames(id);  // sends it
  }

  // Watches the listeners unless out of descriptors; connections then wait
  // in the kernel's backlog.
  void update_accepting() {
    const bool wanted = !accept_again;
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
      // Answers are small and come in bursts (every waiting WAIT of a key
      // at once, or a pipelining client's ADD then WAIT): none waits for the
      // peer's delayed ACK of the last (Nagle), up to 40 ms each.
      const int one = 1;
      setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      admit(std::move(fd), !torch     ? static_cast<detail::StoreProtocol&>(cohort_protocol)
                           : relay_to ? static_cast<detail::StoreProtocol&>(torch_relay_protocol)
                                      : torch_protocol);
    }
  }

  // Decides from who the peer is whether it may talk at all.
  void admit(Fd fd, detail::StoreProtocol& protocol) {
    const std::string peer = detail::peer_name(fd.get());
    const detail::PeerOwner owner = detail::owner_of_peer(fd.get());
    const std::string refusal =
        detail::admission_refusal(owner, protocol.has_handshake(), server_options, uid);
    if (!refusal.empty()) {
      log_refusal(cat("refused the connection from ", peer, ": ", refusal));
      const std::string answer = protocol.refusal(refusal);
      (void)!send(fd.get(), answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      return;
    }
    const std::uint64_t id = next_id++;
    if (protocol.has_handshake()) {
      // The slot first: one given up closes before this one counts.
      if (const auto evicted = handshakes.take(id, host_of(peer), Clock::now())) {
        Connection& old = connections.at(*evicted);
        drop(*evicted, old,
             cat("its handshake slot went to a newer connection: all ",
                 server_options.max_pending_handshakes, " were taken, the most by its address (",
                 host_of(old.peer), ")"));
      }
    }
    open_connection(id, std::move(fd), peer, protocol,
                    owner.where != detail::PeerOwner::Where::this_host, !protocol.has_handshake());
  }

  // A relayed answer into the connection's output: as a file for a client
  // that takes them (the answer's one file, made for the first), else as
  // bytes, a large answer's sent from the one copy all its clients share.
  void hand_out(Connection& connection, std::shared_ptr<detail::RelayedAnswer> answer,
                detail::store_protocol::Tag tag) {
    namespace wire = detail::store_protocol;
    const bool large = answer->size() >= detail::kLargeAnswerBytes;
    std::string error;
    if (connection.takes_files && large && !tag && !answer->body) {
      const std::size_t length = answer->size() - detail::store_protocol::kFrameHeaderBytes;
      if (!answer->file.valid()) {
        answer->file = detail::make_answer_file(
            std::string_view(answer->frame).substr(detail::store_protocol::kFrameHeaderBytes),
            &error);
      }
      if (answer->file.valid()) {
        connection.splices.push_back({connection.out.size(), {}, 0, std::move(answer), nullptr});
        connection.out += detail::in_file_frame(length);
        return;
      }
      refusals.log(LogLevel::warn, "store",
                   cat("store server: sending an answer of ", answer->size(),
                       " bytes as bytes, not as a file: ", error));
    }
    if (!large) {
      connection.out += wire::tagged(tag, answer->frame);
      return;
    }
    // Bytes received into a file go from its pages: a relay's answer to
    // the relays below it is not copied once more for each of them.
    if (auto received = answer->body ? answer->body : answer; received->in_file != 0) {
      connection.out += wire::tagged_header(tag, answer->size() - wire::kFrameHeaderBytes);
      connection.splice(std::shared_ptr<const detail::RelayedAnswer>(std::move(received)));
      connection.out += answer->tail;
      return;
    }
    auto payload = answer->payload(&error);
    if (!payload) {
      connection.out += wire::tagged(
          tag,
          wire::error_frame(cat("this node's relay could not read an answer of ", answer->size(),
                                " bytes from its file (", error, "); ask again")));
      return;
    }
    const std::string tail = answer->tail;
    // The answer holds the bytes (its frame or its file's mapping).
    connection.splice(StoreValue(std::move(answer), payload->view()));
    connection.out += tail;
  }

  // A connection made by trusted_socket(): cohort's protocol, already
  // trusted (this process, or a worker it started).
  void adopt(Fd fd, bool own) {
    const std::uint64_t id = next_id++;
    open_connection(id, std::move(fd), "a socket pair of this process", cohort_protocol,
                    /*remote=*/false, /*authenticated=*/true);
    connections[id].socket_pair = true;
    connections[id].in_process = own;
  }

  void open_connection(std::uint64_t id, Fd fd, std::string peer, detail::StoreProtocol& protocol,
                       bool remote, bool authenticated) {
    Connection& connection = connections[id];
    connection.id = id;
    connection.peer = std::move(peer);
    connection.protocol = &protocol;
    connection.remote = remote;
    connection.authenticated = authenticated;
    connection.fd = std::move(fd);
    watch(connection.fd.get(), id, EPOLLIN | EPOLLRDHUP);
    ++open_connections;
  }

  void close_connection(std::uint64_t id) {
    auto it = connections.find(id);
    if (it == connections.end()) return;
    key_space.cancel(id);
    for (const std::uint64_t waiter : it->second.tagged_waits) {
      key_space.cancel(waiter);
      aliases.erase(waiter);
    }
    // Its last words: set now, so that whoever waits for them wakes at once
    // (the loop resumes the waits these sets complete), or through the relay.
    if (relay_to && !it->second.on_close.empty()) {
      relay_to->say_last_words(id, it->second.in_process, it->second.on_close);
    } else {
      for (auto& [key, value] : it->second.on_close)
        key_space.set(key, std::move(value));
    }
    end_handshake(it->second);
    pending_bytes -= it->second.counted;
    epoll_ctl(epoll.get(), EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
    const bool told_to_move = it->second.told_to_move;
    connections.erase(it);
    {
      std::lock_guard<std::mutex> lock(idle_mutex);
      --open_connections;
      if (told_to_move) --moving;
    }
    idle.notify_all();
  }

  void on_event(std::uint64_t id, std::uint32_t events) {
    auto it = connections.find(id);
    if (it == connections.end()) return;
    Connection& connection = it->second;
    if (events & EPOLLOUT) {
      if (!flush(id, connection)) return;
    }
    if (connection.eof || !(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
    const std::size_t limit = connection.protocol->receive_limit(*this, connection);
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
        // A short read emptied the socket as it stood: what comes later is
        // the next readiness's (level-triggered), not a recv that fails
        // with EAGAIN here, one system call per request saved.
        if (static_cast<std::size_t>(n) < sizeof(buffer)) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) return close_connection(id);  // reset: its waiting request goes too
      connection.eof = true;                   // requests that came with it still count
      break;
    }
    recount(connection);
    if (pending_bytes > server_options.max_pending_bytes && !drop_the_largest(id)) return;
    handle_frames(id);
  }

  // The server's total follows what `connection` holds unhandled.
  void recount(Connection& connection) {
    pending_bytes += connection.in.size();
    pending_bytes -= connection.counted;
    connection.counted = connection.in.size();
  }

  // Over max_pending_bytes: closes the connection that holds the most.
  // Returns false when that was `current`.
  bool drop_the_largest(std::uint64_t current) {
    auto largest = connections.begin();
    for (auto it = connections.begin(); it != connections.end(); ++it) {
      if (it->second.counted > largest->second.counted) largest = it;
    }
    const std::uint64_t id = largest->first;
    drop(id, largest->second,
         cat("it held ", largest->second.counted,
             " bytes of unfinished requests when all "
             "connections together held more than ",
             server_options.max_pending_bytes,
             " (StoreServer::Options::max_pending_bytes), the most of any"));
    return id != current;
  }

  // After end-of-file: the requests that came before it were handled; send
  // their answers, then close. A request that would wait is abandoned: its
  // client has stopped talking and cannot be woken.
  // One relayed upstream that may wait is abandoned the same way. Other
  // relayed requests are answered first, and meanwhile the connection is
  // not read: a socket whose peer has shut it down is ready for ever, and
  // the loop would spin on it (an agent's end on the 4-node start, traced
  // 2026-12-03: its relay ran 2.6 ms straight).
  void finish_after_eof(std::uint64_t id, Connection& connection) {
    if (connection.relayed > 0 && !connection.relayed_wait) {
      return set_interest(id, connection);  // its answers come, then this again
    }
    if (connection.relayed > 0 || key_space.waiting(id) || connection.multiplexed ||
        !connection.sending()) {
      return close_connection(id);
    }
    connection.closing = true;
    connection.want_write = true;
    set_interest(id, connection);
  }

  // Reads until end-of-file, writes while there is output; neither: out of
  // the epoll set.
  void set_interest(std::uint64_t id, Connection& connection) {
    const std::uint32_t events =
        (connection.eof ? 0u : EPOLLIN | EPOLLRDHUP) | (connection.want_write ? EPOLLOUT : 0u);
    if (events == 0) {
      if (connection.watched) epoll_ctl(epoll.get(), EPOLL_CTL_DEL, connection.fd.get(), nullptr);
      connection.watched = false;
      return;
    }
    watch(connection.fd.get(), id, events, connection.watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD);
    connection.watched = true;
  }

  // Handles complete requests until one waits or none is left.
  void handle_frames(std::uint64_t id) {
    auto it = connections.find(id);
    if (it == connections.end()) return;
    Connection& connection = it->second;
    if (!connection.protocol->handle(*this, id, connection)) return;
    recount(connection);
    if (!flush(id, connection)) return;
    if (connection.eof && !connection.closing) finish_after_eof(id, connection);
  }

  void expire_waits() {
    key_space.expire(Clock::now(),
                     [this](std::uint64_t id, const std::vector<std::string>& missing) {
                       detail::store_protocol::Tag tag;
                       Connection& connection = wait_ended(id, &tag);
                       connection.protocol->answer_timeout(connection, missing, tag);
                       resumed.push_back(connection.id);
                     });
  }

  // Connections silent past the handshake deadline are closed; answers
  // held back are sent, and what their clients sent since is handled.
  void expire_handshakes() {
    for (const std::uint64_t id : handshakes.expired(Clock::now())) {
      Connection& connection = connections.at(id);
      if (connection.held_answer.empty()) {
        drop(id, connection,
             cat("no handshake within ", server_options.handshake_timeout.count(), " ms"));
        continue;
      }
      handshakes.release(id);
      connection.out += std::exchange(connection.held_answer, {});
      connection.closing = connection.close_after_held;
      handle_frames(id);
    }
  }

  // Sends what it can; returns false when the connection was closed. What
  // is left stays where it is (out_at moves on): a large answer that goes
  // out a socket buffer at a time is not moved once per turn.
  bool flush(std::uint64_t id, Connection& connection) {
    std::size_t sent = connection.out_at;
    auto& splices = connection.splices;
    const int fd = connection.fd.get();
    for (;;) {
      ssize_t n = 0;
      const bool at_splice = !splices.empty() && splices.front().at == sent;
      if (at_splice && !splices.front().file) {
        Connection::Splice& splice = splices.front();
        const std::string_view bytes = splice.bytes.view();
        const std::size_t size = splice.from_file ? splice.from_file->in_file : bytes.size();
        if (splice.sent == size) {
          splices.pop_front();
          continue;
        }
        n = splice.from_file ? detail::send_file_part(fd, splice.from_file->file.get(), splice.sent,
                                                      size - splice.sent)
                             : send(fd, bytes.data() + splice.sent, size - splice.sent,
                                    MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
          splice.sent += static_cast<std::size_t>(n);
          continue;
        }
      } else {
        if (sent == connection.out.size()) break;
        // Bytes of `out` up to the next splice; a file goes with the first.
        std::size_t end = connection.out.size();
        for (const Connection::Splice& splice : splices) {
          if (splice.at > sent) {
            end = std::min(end, splice.at);
            break;
          }
        }
        n = at_splice
                ? detail::send_with_file(fd, connection.out.data() + sent, end - sent,
                                         splices.front().file->file.get())
                : send(fd, connection.out.data() + sent, end - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
          sent += static_cast<std::size_t>(n);
          if (at_splice) splices.pop_front();
          continue;
        }
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      close_connection(id);
      return false;
    }
    // What was sent is dropped once it is most of the buffer: each byte is
    // moved at most once on average.
    constexpr std::size_t kMoveAfter = std::size_t{1} << 20;
    if (sent == connection.out.size() || (sent > kMoveAfter && sent * 2 > connection.out.size())) {
      connection.out.erase(0, sent);
      for (Connection::Splice& splice : splices)
        splice.at -= sent;
      connection.out_at = 0;
    } else {
      connection.out_at = sent;
    }
    detail::release_if_idle(connection.out);
    if (!connection.sending() && connection.closing) {
      close_connection(id);
      return false;
    }
    const bool want_write = connection.sending();
    if (want_write != connection.want_write) {
      connection.want_write = want_write;
      set_interest(id, connection);
    }
    return true;
  }
};

StoreServer::StoreServer(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}
StoreServer::~StoreServer() = default;
int StoreServer::port() const noexcept {
  return impl_->listener.port;
}
const std::string& StoreServer::host() const noexcept {
  return impl_->server_options.host;
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

int StoreServer::trusted_socket() {
  return impl_->socket_pair(false);
}

int StoreServer::Impl::socket_pair(bool own) {
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
    throw StoreError(
        cat("store server: socketpair for a trusted client failed: ", detail::errno_text(errno)));
  }
  Fd server(ends[1]);
  const int flags = fcntl(server.get(), F_GETFL);
  fcntl(server.get(), F_SETFL, flags | O_NONBLOCK);
  {
    std::lock_guard<std::mutex> lock(task_mutex);
    in_process.emplace_back(std::move(server), own);
  }
  const std::uint64_t one = 1;
  (void)!::write(task.get(), &one, sizeof(one));
  return ends[0];
}

std::unique_ptr<StoreClient> StoreServer::connect_in_process(std::chrono::milliseconds timeout) {
  StoreClient::Options options;
  options.host = impl_->server_options.host.empty() ? "127.0.0.1" : impl_->server_options.host;
  options.port = port();
  options.timeout = timeout;
  Fd socket(impl_->socket_pair(true));
  return StoreClient::over_trusted_socket(std::move(options), socket.release());
}

std::size_t StoreServer::connection_count() const noexcept {
  return impl_->open_connections;
}

void StoreServer::route_through(std::vector<Hop> path) {
  if (impl_->relay_to) impl_->relay_to->route_through(std::move(path));
}

std::size_t StoreServer::upstream_connection_count() const noexcept {
  return impl_->relay_to ? impl_->relay_to->connection_count() : 0;
}

std::string StoreServer::upstream_state() const {
  return impl_->relay_to ? impl_->relay_to->describe() : std::string();
}

std::size_t StoreServer::waiting_count() const noexcept {
  return impl_->waiting;
}

bool StoreServer::hand_over(std::chrono::milliseconds at_most) {
  if (!impl_->relay_to) return true;
  {
    std::lock_guard<std::mutex> lock(impl_->task_mutex);
    impl_->hand_over_requested = true;
  }
  const std::uint64_t one = 1;
  (void)!::write(impl_->task.get(), &one, sizeof(one));
  std::unique_lock<std::mutex> lock(impl_->idle_mutex);
  return impl_->idle.wait_for(lock, at_most,
                              [this] { return impl_->moving_told && impl_->moving == 0; });
}

bool StoreServer::wait_until_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->idle_mutex);
  return impl_->idle.wait_for(lock, timeout, [this] { return impl_->open_connections == 0; });
}

}  // namespace cohort
