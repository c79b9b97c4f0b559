#include "store/relay.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <poll.h>
#include <sys/socket.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/log.hpp"
#include "core/socket.hpp"
#include "core/socket_reader.hpp"
#include "core/strings.hpp"
#include "core/thread_name.hpp"
#include "store/client_handshake.hpp"
#include "store/file_answer.hpp"
#include "store/store_protocol.hpp"

namespace cohort::detail {

namespace wire = store_protocol;

namespace {

// As StoreClient's: how much longer than a wait's own timeout the store may
// take to answer "timeout" before it counts as lost.
constexpr std::chrono::milliseconds kServerGrace{5000};
// The large answers a relay keeps, to be told by the store that a value is
// unchanged rather than be sent it again (GET_VERSIONED).
constexpr std::size_t kKeptBytes = std::size_t{64} << 20;
// A batch's requests together, beyond the first.
constexpr std::size_t kBatchBytes = std::size_t{8} << 20;
// How long one attempt to connect may take (a relay's end waits for that
// at most); a handshake takes the upstream timeout, and the end interrupts
// it.
constexpr std::chrono::milliseconds kConnectAttempt{1000};
// A hop that is another relay (a parent in the agents' tree) published its
// address before the job's rendezvous ended: one that does not take a
// connection within this is passed over for the next.
constexpr std::chrono::milliseconds kHopConnect{1000};
// A hop placed before the rendezvous by its node's name (Hop::name) may not
// listen yet: its agent starts when Slurm or ssh gets to it, maybe after
// this one. Waited for this long, then passed over for the next (the store:
// the relay moves under its parent once the rendezvous names it). A short
// wait, since a parent that listens elsewhere (the job's port was taken on
// its host) costs each of its children this much.
constexpr std::chrono::milliseconds kNamedHopPatience{2000};
// Once connected, a store that refuses a new connection for this long is
// gone (only the first connection waits the upstream timeout for a store
// that does not listen yet).
constexpr std::chrono::milliseconds kStoreReconnect{5000};
// How long the connection made as the relay starts waits for the answer to
// its hello: a store answers at once, and where something else holds the
// port and says nothing, the first request's own try (30 s) names it.
constexpr std::chrono::milliseconds kEarlyHelloAnswer{5000};
// The receive buffer of the connection upstream, where a job's tables come
// (4.4 MB at 100,000 ranks): with the default one a table arrives in a
// window grown a round trip at a time (in rendezvous_scale, the table
// pattern at 16,384 ranks took a median of 1.43 s in six runs, against
// 1.22 s with this one in six runs alternating with them:
// docs/rendezvous.md).
constexpr std::size_t kUpstreamReceiveBuffer = std::size_t{4} << 20;
// The least time between two looks of a connection's reader at its
// requests' deadlines while nothing arrives.
constexpr std::chrono::milliseconds kDeadlineCheck{250};
// A relay's end: how long it waits for the answers to its last quick
// requests (last words among them) before its connection upstream closes.
constexpr std::chrono::milliseconds kFinish{2000};
// The client of an answer nobody waits for (last words said or registered
// again by the relay itself).
constexpr StoreRelay::Id kNobody = 0;

// One answer for every client it goes to.
std::shared_ptr<RelayedAnswer> shared_answer(std::string frame) {
  auto answer = std::make_shared<RelayedAnswer>();
  answer->frame = std::move(frame);
  return answer;
}

std::chrono::milliseconds timeout_field(wire::Reader& reader) {
  return std::chrono::milliseconds(std::max<std::int64_t>(0, reader.i64()));
}

std::string get_frame(const std::string& key, std::chrono::milliseconds timeout) {
  return wire::Writer()
      .u8(static_cast<std::uint8_t>(wire::Op::get))
      .bytes(key)
      .i64(timeout.count())
      .frame();
}

// Requests of one batch as they go up: an ADD may stand for several.
struct Outgoing {
  std::string frame;
  wire::Op op{};
  std::int64_t total = 0;                                     // an ADD's deltas together
  std::vector<std::pair<std::uint64_t, std::int64_t>> parts;  // client, its delta
};

// A relay's batch out: its requests as they went, and their answers as they come.
struct BatchOut {
  std::vector<Outgoing> requests;
  std::vector<std::string> answers;
  std::size_t left = 0;              // answers still to come
  std::vector<std::size_t> to_send;  // not sent on the connection in use
};

// Whether a request out when its hop was lost may go up again on the next:
// carried out twice, it means what it meant once.
bool repeatable(const Outgoing& request) {
  switch (request.op) {
    case wire::Op::add:
      return request.total == 0;  // a read of a counter
    case wire::Op::append:
    case wire::Op::queue_push:
    case wire::Op::queue_pop:
      return false;
    default:
      return true;
  }
}

// The batch as it goes up: the ADDs of one key that are each their client's
// last request in the batch become one, where the last of them was, so that
// every client's requests keep their order (its SET before its ADD).
std::vector<Outgoing> merge_adds(std::vector<std::pair<std::uint64_t, RelayedRequest>>&& batch) {
  std::unordered_map<std::uint64_t, std::size_t> last_of;  // client -> its last request
  for (std::size_t i = 0; i < batch.size(); ++i)
    last_of[batch[i].first] = i;
  struct Shared {
    Outgoing add;
    std::size_t last = 0;  // where it goes
    bool overflows = false;
  };
  std::unordered_map<std::string, Shared> shared;  // key -> the ADD its clients share
  const auto mergeable = [&](std::size_t i) {
    return batch[i].second.op == wire::Op::add && batch[i].first != kNobody &&
           last_of[batch[i].first] == i;
  };
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (!mergeable(i)) continue;
    const RelayedRequest& request = batch[i].second;
    Shared& one = shared[request.key];
    one.overflows =
        one.overflows || __builtin_add_overflow(one.add.total, request.add_delta, &one.add.total);
    one.add.parts.emplace_back(batch[i].first, request.add_delta);
    one.last = i;
  }
  std::vector<Outgoing> out;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    auto& [id, request] = batch[i];
    const auto at = mergeable(i) ? shared.find(request.key) : shared.end();
    if (at == shared.end() || at->second.overflows || at->second.add.parts.size() == 1) {
      const std::int64_t delta = request.op == wire::Op::add ? request.add_delta : 0;
      out.push_back({std::move(request.frame), request.op, delta, {{id, delta}}});
      continue;
    }
    if (i != at->second.last) continue;  // it goes with the last
    Outgoing& add = at->second.add;
    add.op = wire::Op::add;
    add.frame = wire::Writer()
                    .u8(static_cast<std::uint8_t>(wire::Op::add))
                    .bytes(request.key)
                    .i64(add.total)
                    .frame();
    out.push_back(std::move(add));
  }
  return out;
}

// What a client that holds `known` of a GET_VERSIONED's value (a relay
// below) is answered, once this relay has `answer` at `version`.
std::shared_ptr<RelayedAnswer> versioned(const std::shared_ptr<RelayedAnswer>& answer,
                                         std::uint64_t version, std::uint64_t known,
                                         std::shared_ptr<RelayedAnswer>* unchanged,
                                         std::shared_ptr<RelayedAnswer>* with_version) {
  if (!answer->ok()) return answer;  // an error or a timeout reads the same either way
  if (known == version) {
    if (!*unchanged) {
      *unchanged = shared_answer(
          wire::Writer().u8(static_cast<std::uint8_t>(wire::Status::unchanged)).frame());
    }
    return *unchanged;
  }
  if (*with_version) return *with_version;
  const std::string field = wire::Writer().i64(static_cast<std::int64_t>(version)).fields();
  auto out = std::make_shared<RelayedAnswer>();
  if (answer->size() < kLargeAnswerBytes) {
    out->frame =
        wire::framed(cat(std::string_view(answer->frame).substr(wire::kFrameHeaderBytes), field));
  } else {
    out->body = answer;
    out->tail = field;
  }
  *with_version = out;
  return out;
}

}  // namespace

std::size_t RelayedAnswer::size() const noexcept {
  if (body) return body->size() + tail.size();
  return frame.size() + in_file + tail.size();
}

std::optional<StoreValue> RelayedAnswer::payload(std::string* error) {
  if (body) return body->payload(error);
  if (in_file == 0) {
    return StoreValue(std::shared_ptr<const void>(),
                      std::string_view(frame).substr(wire::kFrameHeaderBytes));
  }
  if (mapped_.view().empty()) {
    auto mapping = map_file(file.get(), in_file, error);
    if (!mapping) return std::nullopt;
    mapped_ = std::move(*mapping);
  }
  return mapped_;
}

bool RelayedAnswer::ok() const noexcept {
  if (body) return body->ok();
  // Only an ok answer is received into a file.
  return in_file != 0 ||
         (frame.size() > wire::kFrameHeaderBytes &&
          static_cast<wire::Status>(frame[wire::kFrameHeaderBytes]) == wire::Status::ok);
}

bool joins_a_batch(wire::Op op) noexcept {
  switch (op) {
    case wire::Op::set:
    case wire::Op::add:
    case wire::Op::compare_set:
    case wire::Op::check:
    case wire::Op::delete_key:
    case wire::Op::num_keys:
    case wire::Op::append:
    case wire::Op::queue_push:
    case wire::Op::queue_pop:
    case wire::Op::queue_len:
    case wire::Op::list_keys:
      return true;
    default:
      return false;
  }
}

bool RelayedRequest::may_wait() const noexcept {
  return op == wire::Op::get || op == wire::Op::get_versioned || op == wire::Op::wait ||
         op == wire::Op::multi_get || op == wire::Op::wait_for;
}

RelayedRequest relayed_request(std::string_view payload) {
  wire::Reader reader(payload);
  RelayedRequest request;
  request.op = static_cast<wire::Op>(reader.u8());
  switch (request.op) {
    case wire::Op::set:
    case wire::Op::set_on_close:
      reader.bytes();
      reader.bytes();
      break;
    case wire::Op::get:
      request.key = std::string(reader.bytes());
      request.timeout = timeout_field(reader);
      break;
    case wire::Op::get_versioned:  // a relay's below: served as a GET, with the version
      request.key = std::string(reader.bytes());
      request.timeout = timeout_field(reader);
      request.known_version = static_cast<std::uint64_t>(reader.i64());
      break;
    case wire::Op::wait:
    case wire::Op::multi_get:
      reader.strings();
      request.timeout = timeout_field(reader);
      break;
    case wire::Op::wait_for:
      reader.strings();
      reader.i64();
      reader.u8();
      request.timeout = timeout_field(reader);
      break;
    case wire::Op::add:
      request.key = std::string(reader.bytes());
      request.add_delta = reader.i64();
      break;
    case wire::Op::append:
    case wire::Op::queue_push:
      reader.bytes();
      reader.bytes();
      break;
    case wire::Op::queue_pop:
    case wire::Op::queue_len:
    case wire::Op::list_keys:
      reader.bytes();
      break;
    case wire::Op::compare_set:
      reader.bytes();
      reader.bytes();
      reader.bytes();
      break;
    case wire::Op::check:
      reader.strings();
      break;
    case wire::Op::delete_key:
      reader.bytes();
      break;
    case wire::Op::num_keys:
    case wire::Op::clear_on_close:
      break;
    default:
      throw wire::ProtocolError(
          cat("unknown operation ", int{static_cast<std::uint8_t>(request.op)}));
  }
  reader.expect_end();
  request.frame = wire::framed(payload);
  return request;
}

struct StoreRelay::Impl {
  StoreServer::Options::Upstream upstream;
  std::string token;
  Deliver deliver;
  std::string address;  // the job's store's, for messages
  std::atomic<std::size_t> connections{0};

  std::mutex mutex;  // guards everything below
  std::condition_variable work;
  std::condition_variable settled;  // the quick requests were answered (finish())
  bool stopping = false;
  // Once the connection to the job's store itself broke, the answer to
  // every later request: it does not come back, and connecting again would
  // take the whole connect timeout to say so.
  std::string lost_answer;

  // Where the store is reached: route_through()'s path, then the store.
  std::vector<StoreServer::Hop> hops;
  std::size_t hop = 0;       // the one in use, or to try next
  bool rerouted = false;     // the path changed under a connection to its old first hop
  std::size_t reroutes = 0;  // route_through() calls so far

  std::vector<std::pair<Id, RelayedRequest>> batch;  // quick requests not yet sent
  std::optional<BatchOut> batch_out;

  // Requests that may wait, by their frame (a GET's as a GET, whoever asked
  // with which version): `going` go up together on the next call; `next`
  // came while one was out, and go when it returns.
  struct Client {
    Id id = 0;
    std::optional<std::uint64_t> known;  // a GET_VERSIONED's (a relay below)
  };
  struct Group {
    std::chrono::milliseconds timeout{0};
    std::string get_key;  // a GET's: it goes up as GET_VERSIONED
    bool out = false;
    std::vector<Client> going;
    std::vector<Client> next;
    std::shared_ptr<RelayedAnswer> last;  // the last round's answer to a GET
    std::uint64_t last_version = 0;
  };
  using Groups = std::unordered_map<std::string, Group>;
  Groups groups;
  // Groups to send. An element of `groups` stays where it is until its last
  // answer erases it: its frame (a MULTI_GET's can be 200 KB) is neither
  // copied nor hashed again.
  std::deque<Groups::value_type*> ready;
  // The last large answer to a GET of each key, for the next GET of it
  // (above). A job's tables: kKeptBytes is far more than they hold.
  struct Kept {
    std::uint64_t version = 0;
    std::shared_ptr<RelayedAnswer> answer;
  };
  std::unordered_map<std::string, Kept> last_answers;
  std::size_t kept_bytes = 0;
  // The SET_ON_CLOSE frames of clients in this process, registered on every
  // connection upstream.
  std::unordered_map<Id, std::vector<std::string>> last_words;

  // A request on the connection, by its tag.
  struct Pending {
    enum class Kind { batch, group, own } kind = Kind::own;
    std::size_t index = 0;                // kind batch: its place in batch_out
    Groups::value_type* group = nullptr;  // kind group
    Deadline deadline;
    Clock::time_point sent;                // for reports (describe)
    std::shared_ptr<RelayedAnswer> known;  // a GET's: what "unchanged" means
    std::uint64_t known_version = 0;
    static Pending of(Kind kind, Deadline deadline, std::size_t index = 0,
                      Groups::value_type* group = nullptr) {
      Pending pending;
      pending.kind = kind;
      pending.deadline = deadline;
      pending.index = index;
      pending.group = group;
      return pending;
    }
  };
  // One multiplexed connection upstream, and the thread that reads it.
  struct Link {
    Fd fd;
    std::string address;  // host:port
    bool to_store = false;
    std::size_t hop = 0;
    std::unordered_map<std::uint32_t, Pending> pending;
    std::uint32_t next_tag = 1;  // 0 is the other end's own (Status::moving)
    std::thread reader;
    bool ended = false;    // its reader returned
    bool leaving = false;  // the relay at its other end is going away
    // When its reader last had the start of an answer (Clock ticks, 0:
    // never), for reports (describe).
    std::atomic<Clock::rep> heard{0};
  };
  std::shared_ptr<Link> link;
  std::vector<std::shared_ptr<Link>> retired;  // their readers end, then are joined
  // The loop sends what a round forwarded itself when the connection takes
  // it at once (send_now): a wake-up of the sender fewer for each round.
  // `sending`: the sender is writing to the connection (outside `mutex`);
  // `unsent`: what the loop could not send on `unsent_on`, which goes out
  // before anything else on it.
  bool sending = false;
  std::string unsent;
  std::shared_ptr<Link> unsent_on;
  // The connection this relay moved off, which holds its in-process
  // clients' last words until the next one does (install): a process that
  // dies while it moves has them said by one end or the other.
  std::shared_ptr<Link> handing_over;
  bool connected_once = false;
  // A relay between here and the store was lost: connect to the next hop
  // now, not at the next request, so that this process's last words are
  // held upstream again (its agent may die before it asks anything).
  bool reconnect = false;
  int opening = -1;  // a connection in its handshake, shut down by the relay's end
  std::thread sender;

  ExpectedStore expected(bool to_store, bool once) const {
    ExpectedStore store{token, upstream.munge, to_store ? std::string_view(upstream.process) : ""};
    if (once) store.hello_answer = std::min(store.hello_answer, kEarlyHelloAnswer);
    return store;
  }

  // --- sending ----------------------------------------------------------

  // Whether the sender has something to do (under `mutex`).
  bool has_work() const {
    return (!batch.empty() && !batch_out) || (batch_out && !batch_out->to_send.empty()) ||
           !ready.empty() || ((rerouted || (link && link->leaving)) && !batch_out) ||
           (reconnect && !link) || !unsent.empty();
  }

  // The sender: connects, and sends what is ready, one batch out at a time.
  void run_sender() {
    if (upstream.connect_at_start) connect_early();
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      join_ended(lock);
      work.wait(lock, [&] { return stopping || has_work(); });
      if (stopping) return;
      if (!unsent.empty()) {
        // The loop's rest goes first, on the connection its requests are
        // pending on (lose() drops it with that connection), before any move.
        const std::shared_ptr<Link> on = std::exchange(unsent_on, nullptr);
        send_out(on, std::exchange(unsent, {}), lock);
        continue;
      }
      if (rerouted && !batch_out) {
        move_on(0);
      } else if (link && link->leaving && !batch_out) {
        move_on(link->hop + 1);
      }
      if (!link) {
        if (!lost_answer.empty()) {
          fail_all(lost_answer);
          continue;
        }
        if (!connect(lock)) continue;
      }
      const std::shared_ptr<Link> current = link;
      std::string out = take_frames(*current);
      if (!out.empty()) send_out(current, std::move(out), lock);
    }
  }

  // Writes `out` to `on` outside `mutex` (held by `lock`).
  void send_out(const std::shared_ptr<Link>& on, std::string out,
                std::unique_lock<std::mutex>& lock) {
    sending = true;
    lock.unlock();
    std::string why;
    const bool sent =
        send_all(on->fd.get(), out.data(), out.size(), deadline_after(upstream.timeout), &why);
    lock.lock();
    sending = false;
    if (!sent) lose(on, why);
  }

  // What the loop's round forwarded, sent by the loop itself (under
  // `mutex`) when the connection is up, nothing else is on its way on it
  // and its socket takes all of it at once; otherwise, or for the rest,
  // the sender is woken. The socket is never written by both.
  void send_now() {
    if (!link || sending || !unsent.empty() || link->leaving || rerouted || stopping) {
      if (has_work()) work.notify_one();
      return;
    }
    std::string out = take_frames(*link);
    if (out.empty()) return;
    const ssize_t n = ::send(link->fd.get(), out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(out.size())) return;
    // Full, or failed: the sender sends the rest, or meets the failure.
    unsent = out.substr(n > 0 ? static_cast<std::size_t>(n) : 0);
    unsent_on = link;
    work.notify_one();
  }

  // Where its requests stand (under `mutex`), for a report of a request
  // that took too long: whether the store or a relay above stopped
  // answering, or this relay did not pass an answer on.
  std::string describe() const {
    if (!link) {
      return lost_answer.empty()
                 ? cat("not connected upstream, more to go up ", batch.size() + ready.size())
                 : cat("lost the job's store at ", address);
    }
    // The requests of each kind out, and since when the oldest.
    struct Out {
      std::size_t count = 0;
      Clock::time_point oldest = Clock::time_point::max();
    } quick, waiting;
    for (const auto& [tag, pending] : link->pending) {
      if (pending.kind == Pending::Kind::own) continue;
      Out& out = pending.kind == Pending::Kind::batch ? quick : waiting;
      ++out.count;
      out.oldest = std::min(out.oldest, pending.sent);
    }
    const Clock::time_point now = Clock::now();
    const auto ago = [&now](Clock::time_point then) {
      return cat(duration_text(std::chrono::duration_cast<std::chrono::milliseconds>(now - then)),
                 " ago");
    };
    const auto out = [&ago](const Out& of) {
      return of.count == 0 ? std::string("0")
                           : cat(of.count, " (the oldest sent ", ago(of.oldest), ")");
    };
    const Clock::rep heard = link->heard.load(std::memory_order_relaxed);
    return cat("its connection to ", link->to_store ? "the job's store" : "the relay", " at ",
               link->address, ": quick requests out ", out(quick), ", waiting ones out ",
               out(waiting), ", more to go up ", batch.size() + ready.size(), ", ",
               heard == 0 ? "no answer yet"
                          : cat("last answer ", ago(Clock::time_point(Clock::duration(heard)))));
  }

  // How long the other end of `to` may take to answer a quick request.
  std::chrono::milliseconds answer_time(const Link& to) const {
    return to.to_store ? upstream.timeout : upstream.hop_timeout;
  }

  // Tags `frame` for `to` and registers it as `pending`.
  static std::string tagged(Link& to, const std::string& frame, Pending pending) {
    const std::uint32_t tag = to.next_tag++;
    pending.sent = Clock::now();
    to.pending.emplace(tag, std::move(pending));
    return wire::tagged(tag, frame);
  }

  // What goes out next on `to` (under `mutex`): the batch, if none is out
  // (or what of the one out was not sent on it), and the waiting requests.
  std::string take_frames(Link& to) {
    std::string out;
    const Deadline quick = deadline_after(answer_time(to));
    if (!batch_out && !batch.empty()) {
      // At most kBatchBytes of requests (one, however large): the store
      // takes no more than two largest frames ahead of what it handled.
      std::size_t bytes = 0;
      std::size_t count = 0;
      while (count < batch.size() && (count == 0 || bytes < kBatchBytes))
        bytes += batch[count++].second.frame.size();
      std::vector<std::pair<Id, RelayedRequest>> taken;
      if (count == batch.size()) {
        taken.swap(batch);
      } else {
        taken.assign(std::make_move_iterator(batch.begin()),
                     std::make_move_iterator(batch.begin() + static_cast<std::ptrdiff_t>(count)));
        batch.erase(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(count));
      }
      BatchOut& going = batch_out.emplace();
      going.requests = merge_adds(std::move(taken));
      going.answers.resize(going.requests.size());
      going.left = going.requests.size();
      for (std::size_t i = 0; i < going.requests.size(); ++i)
        going.to_send.push_back(i);
    }
    if (batch_out) {
      for (const std::size_t i : std::exchange(batch_out->to_send, {})) {
        out +=
            tagged(to, batch_out->requests[i].frame, Pending::of(Pending::Kind::batch, quick, i));
      }
    }
    while (!ready.empty()) {
      Groups::value_type* entry = ready.front();
      ready.pop_front();
      auto& [frame, group] = *entry;
      group.out = true;
      Pending pending = Pending::of(
          Pending::Kind::group,
          deadline_after(
              to.to_store ? std::max(upstream.timeout, saturating_sum(group.timeout, kServerGrace))
                          : saturating_sum(group.timeout, upstream.hop_timeout)),
          0, entry);
      if (group.get_key.empty()) {
        out += tagged(to, frame, std::move(pending));
        continue;
      }
      // A GET's last answer, of this group's last round or kept: the store
      // says whether the value is still this one (a table every rank of a
      // node reads then comes once, however its ranks' GETs fall).
      pending.known = group.last;
      pending.known_version = group.last_version;
      if (!pending.known) {
        if (const auto at = last_answers.find(group.get_key); at != last_answers.end()) {
          pending.known = at->second.answer;
          pending.known_version = at->second.version;
        }
      }
      const std::uint64_t known = pending.known ? pending.known_version : 0;
      out += tagged(to,
                    wire::Writer()
                        .u8(static_cast<std::uint8_t>(wire::Op::get_versioned))
                        .bytes(group.get_key)
                        .i64(group.timeout.count())
                        .i64(static_cast<std::int64_t>(known))
                        .frame(),
                    std::move(pending));
    }
    return out;
  }

  // --- connecting -----------------------------------------------------------

  // Connects to `target`, retrying a refused connection until `timeout`
  // (the store may not listen yet; `once`: one attempt), runs the handshake
  // and asks for a multiplexed connection. The relay's end interrupts it.
  // Throws StoreError.
  Fd open(const StoreServer::Hop& target, bool to_store, std::chrono::milliseconds timeout,
          bool once) {
    const std::string at = cat(target.host, ":", target.port);
    const Deadline deadline = deadline_after(timeout);
    auto backoff = std::chrono::milliseconds(1);  // as connect_to_store's
    std::string error;
    Fd fd;
    for (;;) {
      // A second at a time, so that the relay's end waits no longer for it.
      fd =
          connect_tcp(target.host, target.port, std::min(deadline, deadline_after(kConnectAttempt)),
                      &error, kUpstreamReceiveBuffer);
      if (fd.valid() || once || Clock::now() >= deadline) break;
      std::unique_lock<std::mutex> lock(mutex);
      if (work.wait_for(lock, std::min<Clock::duration>(backoff, deadline - Clock::now()),
                        [&] { return stopping; })) {
        break;
      }
      backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
    }
    if (!fd.valid()) {
      throw StoreError(cat("could not connect to the store at ", at, " within ", timeout.count(),
                           " ms: ", error,
                           "; is the process that hosts it (cohort run's agent, or rank 0) "
                           "running, and does this host reach it (`cohort env` shows the route)?"));
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (stopping) throw StoreError("the relay is stopping");
      opening = fd.get();
    }
    struct Opened {  // the handshake is over, however it ended
      Impl& relay;
      ~Opened() {
        std::lock_guard<std::mutex> lock(relay.mutex);
        relay.opening = -1;
      }
    } opened{*this};
    authenticate_to_store(fd.get(), at, expected(to_store, once), deadline);
    wire::Writer multiplex;
    multiplex.u8(static_cast<std::uint8_t>(wire::Op::multiplex));
    if (!target.name.empty()) multiplex.bytes(target.name);
    const std::string request = multiplex.frame();
    std::string answer;
    if (!send_all(fd.get(), request.data(), request.size(), deadline, &error) ||
        !recv_frame(fd.get(), &answer, wire::kMaxHandshakeBytes, deadline, &error)) {
      throw StoreError(cat("store at ", at, ": ", error));
    }
    if (answer.empty() || static_cast<wire::Status>(answer[0]) != wire::Status::ok) {
      std::string why = "refused a multiplexed connection";
      if (answer.size() > 1) {
        try {
          why = wire::Reader(std::string_view(answer).substr(1)).bytes();
        } catch (const wire::ProtocolError&) {
        }
      }
      throw StoreError(cat("store at ", at, ": ", why));
    }
    return fd;
  }

  // Makes `fd` the connection in use (under `mutex`), with its reader, and
  // registers this process's clients' last words on it first.
  void install(Fd fd, std::size_t at, bool to_store) {
    auto made = std::make_shared<Link>();
    made->fd = std::move(fd);
    made->hop = at;
    made->to_store = to_store;
    made->address = cat(hops[at].host, ":", hops[at].port);
    log(LogLevel::debug, "store",
        to_store ? cat("this node's relay is connected to the job's store at ", made->address)
                 : cat("this node's relay reaches the job's store through the relay at ",
                       made->address, hops[at].name.empty() ? "" : cat(" (", hops[at].name, ")")));
    link = made;
    ++connections;
    connected_once = true;
    std::string words;
    for (const auto& [client, frames] : last_words) {
      for (const std::string& frame : frames)
        words +=
            tagged(*made, frame, Pending::of(Pending::Kind::own, deadline_after(upstream.timeout)));
    }
    made->reader = std::thread([this, made] {
      name_this_thread("cohort-relay-up");
      run_reader(made);
    });
    std::string why;  // sent before any request: a relay's clients' words hold from the start
    if (!words.empty() && !send_all(made->fd.get(), words.data(), words.size(),
                                    deadline_after(upstream.timeout), &why)) {
      lose(made, why);
      return;
    }
    // The words are on their way before this connection's end: whoever is
    // at its other end reads them before it sees this process go.
    if (const std::shared_ptr<Link> old = std::exchange(handing_over, nullptr)) retire(*old);
  }

  // The first connection, as the relay starts (connect_at_start): its
  // node's first requests then do not wait for a connection and a
  // handshake. Quietly nothing when that fails (the store does not listen
  // yet, the relay ends): the first request connects, or says why not.
  void connect_early() {
    StoreServer::Hop target;
    bool to_store = false;
    std::size_t generation = 0;
    {
      std::lock_guard<std::mutex> lock(mutex);
      target = hops[hop];
      to_store = hop + 1 == hops.size();
      generation = reroutes;
    }
    try {
      Fd fd = open(target, to_store, upstream.timeout, true);
      std::lock_guard<std::mutex> lock(mutex);
      // route_through() meanwhile: the first request connects to its path.
      if (stopping || link || generation != reroutes) return;
      install(std::move(fd), hop, to_store);
    } catch (const Error&) {
    }
  }

  // Connects to the first hop that answers (under `mutex`, released while
  // connecting). False when none did: the work waiting is then answered
  // with why (the store unreachable within the upstream timeout).
  bool connect(std::unique_lock<std::mutex>& lock) {
    reconnect = false;
    while (!stopping) {
      const std::size_t at = std::min(hop, hops.size() - 1);
      const StoreServer::Hop target = hops[at];
      const bool to_store = at + 1 == hops.size();
      const std::size_t generation = reroutes;
      const std::chrono::milliseconds timeout = !target.name.empty() ? kNamedHopPatience
                                                : !to_store          ? kHopConnect
                                                : connected_once
                                                    ? std::min(upstream.timeout, kStoreReconnect)
                                                    : upstream.timeout;
      lock.unlock();
      Fd fd;
      std::string failure;
      try {
        fd = open(target, to_store, timeout, false);
      } catch (const Error& error) {
        failure = error.what();
      }
      lock.lock();
      if (stopping) return false;
      if (generation != reroutes) continue;  // route_through() came meanwhile: try its path
      if (failure.empty()) {
        install(std::move(fd), at, to_store);
        return link != nullptr;
      }
      if (to_store) {
        fail_all(wire::error_frame(cat(failure, " (through this node's relay)")));
        return false;
      }
      // A hop placed by name alone that is not there is no surprise (the
      // rendezvous places the relay again).
      log(target.name.empty() ? LogLevel::warn : LogLevel::debug, "store",
          cat("this node's relay could not reach the relay at ", target.host, ":", target.port,
              target.name.empty() ? "" : cat(" (", target.name, "'s, by its host's name)"),
              " on its way to the job's store (", failure, "); going on through the next"));
      hop = at + 1;
    }
    return false;
  }

  // The path changed under the connection in use, or the relay at its other
  // end is going away (under `mutex`, with no batch out): the relay goes on
  // through hop `next`, where the connection's waiting requests go up again;
  // it keeps the last words until the next connection holds them, then
  // they are taken back, and it ends (retire).
  void move_on(std::size_t next) {
    rerouted = false;
    hop = std::min(next, hops.size() - 1);
    if (!link) return;
    const std::shared_ptr<Link> old = std::exchange(link, nullptr);
    --connections;
    take_back(*old);
    retired.push_back(old);
    // Ended once the next connection holds the words (install()), unless
    // one before it still holds them.
    if (handing_over) {
      retire(*old);
    } else {
      handing_over = old;
    }
  }

  // Takes this relay's last words back from `old` and ends it (under
  // `mutex`): its reader reads on until the other end closes, and hands
  // out nothing.
  void retire(Link& old) {
    const std::string clear =
        tagged(old, wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::clear_on_close)).frame(),
               Pending::of(Pending::Kind::own, deadline_after(upstream.timeout)));
    std::string why;  // a few bytes: a socket that cannot take them within a second is stuck
    if (send_all(old.fd.get(), clear.data(), clear.size(), deadline_after(kConnectAttempt), &why)) {
      ::shutdown(old.fd.get(), SHUT_WR);
    } else {
      ::shutdown(old.fd.get(), SHUT_RDWR);
    }
  }

  // Takes `old`'s requests back (under `mutex`): its waiting ones to go up
  // again, its batch's to be sent again, or answered with `lost_with` (why
  // it is lost) where they cannot be.
  void take_back(Link& old, const std::string& lost_with = {}) {
    for (auto& [tag, pending] : old.pending) {
      if (pending.kind == Pending::Kind::group) {
        pending.group->second.out = false;
        ready.push_back(pending.group);
      } else if (pending.kind == Pending::Kind::batch && batch_out) {
        if (lost_with.empty() || repeatable(batch_out->requests[pending.index])) {
          batch_out->to_send.push_back(pending.index);
        } else {
          answered_in_batch(pending.index, wire::error_frame(lost_with));
        }
      }
    }
    old.pending.clear();
  }

  // The connection `lost` broke (`why`), under `mutex`: the next hop takes
  // its requests; the job's store itself is lost for good.
  void lose(const std::shared_ptr<Link>& lost, const std::string& why) {
    ::shutdown(lost->fd.get(), SHUT_RDWR);  // its reader returns, if it has not
    if (unsent_on == lost) {                // its requests are taken back below, or failed
      unsent.clear();
      unsent_on.reset();
    }
    if (stopping) return;
    const std::string lost_with =
        cat("this node's relay lost the relay at ", lost->address,
            " on its way to the job's store (", why,
            ") while this request was out: it may have been carried out or not, and was not sent "
            "again");
    if (lost != link) {  // moved on already: what its reader held goes up on the new one
      take_back(*lost, lost_with);
      work.notify_one();
      return;
    }
    link.reset();
    --connections;
    retired.push_back(lost);
    if (lost->to_store) {
      take_back(*lost);
      lost_answer = wire::error_frame(
          cat("lost the job's store at ", address, " (through this node's relay): it ", why,
              why == "timed out" ? "" : " (has the process that hosts it exited?)"));
      fail_all(lost_answer);
    } else {
      const StoreServer::Hop next = hops[std::min(lost->hop + 1, hops.size() - 1)];
      log(LogLevel::warn, "store",
          cat("this node's relay lost the relay at ", lost->address,
              " on its way to the job's store (", why, "); going on through ", next.host, ":",
              next.port));
      take_back(*lost, lost_with);
      hop = lost->hop + 1;
      reconnect = true;
    }
    work.notify_one();
  }

  // Answers everything waiting to go up with `frame` (under `mutex`).
  void fail_all(const std::string& frame) {
    const auto answer = shared_answer(frame);
    Answers out;
    if (batch_out) {
      for (const std::size_t i : std::exchange(batch_out->to_send, {}))
        answered_in_batch(i, frame);
    }
    for (auto& [id, request] : std::exchange(batch, {}))
      out.emplace_back(id, answer);
    if (!batch_out) settled.notify_all();
    while (!ready.empty()) {
      Groups::value_type* entry = ready.front();
      ready.pop_front();
      for (const Client& client : entry->second.going)
        out.emplace_back(client.id, answer);
      groups.erase(groups.find(entry->first));  // not by key: the key is the element's own
    }
    if (!out.empty()) deliver(std::move(out));
  }

  // Joins the readers that returned (under `mutex`, released meanwhile).
  void join_ended(std::unique_lock<std::mutex>& lock) {
    std::vector<std::shared_ptr<Link>> ended;
    for (auto it = retired.begin(); it != retired.end();) {
      if ((*it)->ended) {
        ended.push_back(std::move(*it));
        it = retired.erase(it);
      } else {
        ++it;
      }
    }
    if (ended.empty()) return;
    lock.unlock();
    for (const auto& done : ended)
      done->reader.join();
    lock.lock();
  }

  // --- receiving ------------------------------------------------------------

  // Waits until `fd` has bytes, looking at the requests' deadlines when the
  // earliest has come. A request sent meanwhile has at least the shortest
  // answer time (or kDeadlineCheck) left: a wait no longer than that is
  // never late for it. (Every 250 ms, as until 2026-12-06, 1,563 relays
  // woke 6,000 times a second in rendezvous_scale at 100,000 ranks.)
  bool readable(Link& from, std::string* why) {
    const auto longest = std::max<std::chrono::milliseconds>(
        kDeadlineCheck, std::min(upstream.timeout, upstream.hop_timeout));
    const std::int64_t most = std::min<std::int64_t>(longest.count(), 1 << 30);
    Deadline look = Clock::now() + kDeadlineCheck;
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(look - Clock::now());
      pollfd one{from.fd.get(), POLLIN, 0};
      const int n =
          ::poll(&one, 1, static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, most)));
      if (n > 0) return true;
      if (n < 0 && errno != EINTR) {
        *why = errno_text(errno);
        return false;
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (stopping) return false;
      const Deadline now = Clock::now();
      look = deadline_after(longest);
      for (const auto& [tag, pending] : from.pending) {
        if (pending.deadline <= now) {
          *why = "timed out";
          return false;
        }
        look = std::min(look, pending.deadline);
      }
    }
  }

  // A connection's reader: each answer to the request its tag names.
  void run_reader(const std::shared_ptr<Link>& from) {
    std::string why = "closed the connection";
    // A batch's answers come as many small frames: read ahead, most of them
    // cost no system call of their own.
    SocketReader in(from->fd.get());
    std::optional<Pending> pending;  // the request whose answer is being read
    for (;;) {
      pending.reset();
      if (in.buffered() == 0 && !readable(*from, &why)) break;
      const Deadline deadline = deadline_after(upstream.timeout);
      char header[wire::kFrameHeaderBytes + wire::kTagBytes + 1];  // and the status
      if (!in.read(header, sizeof(header), deadline, &why)) break;
      from->heard.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
      const std::size_t length = wire::frame_length(header);
      if (length < wire::kTagBytes + 1) {
        why = cat("sent an answer of ", length, " bytes");
        break;
      }
      const std::uint32_t tag = wire::frame_length(header + wire::kFrameHeaderBytes);
      const char status = header[sizeof(header) - 1];
      const std::size_t rest = length - wire::kTagBytes - 1;  // after the status
      if (tag == 0 && static_cast<wire::Status>(status) == wire::Status::moving && rest == 0) {
        std::lock_guard<std::mutex> lock(mutex);
        from->leaving = !from->to_store;  // the store itself has nowhere to send it
        work.notify_one();
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (const auto at = from->pending.find(tag); at != from->pending.end()) {
          pending = std::move(at->second);
          from->pending.erase(at);
        }
      }
      if (!pending || pending->kind == Pending::Kind::own) {
        // Ours (last words registered), or a request taken back: dropped.
        if (!in.skip(rest, deadline, &why)) break;
        continue;
      }
      if (pending->kind == Pending::Kind::batch) {
        std::string frame = wire::Writer().frame_before(rest + 1);
        frame.push_back(status);
        if (!in.append_to(&frame, rest, deadline, &why)) break;
        std::lock_guard<std::mutex> lock(mutex);
        if (batch_out) answered_in_batch(pending->index, std::move(frame));
        continue;
      }
      const bool get = !pending->group->second.get_key.empty();
      std::uint64_t version = 0;
      bool unchanged = false;
      std::shared_ptr<RelayedAnswer> answer;
      if (get && static_cast<wire::Status>(status) == wire::Status::unchanged && rest == 0) {
        if (!pending->known) {
          why = "answered that a value it never sent is unchanged";
          break;
        }
        unchanged = true;
      } else if (get && static_cast<wire::Status>(status) == wire::Status::ok) {
        if (rest < 4 + 8) {
          why = cat("sent an answer of ", length, " bytes to GET_VERSIONED, too short");
          break;
        }
        answer = receive(in, rest - 8, deadline, status, &why);
        char field[8];
        if (!answer || !in.read(field, sizeof(field), deadline, &why)) break;
        // An answer this relay could not keep (receive() made it an error)
        // has no version here: the next GET of the key asks for the value.
        if (answer->ok()) {
          version = static_cast<std::uint64_t>(wire::Reader(std::string_view(field, 8)).i64());
        }
      } else {
        answer = receive(in, rest, deadline, status, &why);
        if (!answer) break;
      }
      group_answered(*pending, std::move(answer), unchanged, version);
    }
    std::lock_guard<std::mutex> lock(mutex);
    // The request whose answer broke off is taken back with the others.
    if (pending && pending->kind != Pending::Kind::own)
      from->pending.emplace(0, std::move(*pending));
    lose(from, why);
    from->ended = true;
    work.notify_one();
  }

  // The `count` bytes after an answer's `status`: a large answer into a
  // memory file, from the socket through a pipe (its frame then keeps only
  // its header), else after its frame's header. Null and `*why` when the
  // connection failed; when no file could be kept, the bytes are read and
  // dropped and the answer is an error that says so.
  std::shared_ptr<RelayedAnswer> receive(SocketReader& in, std::size_t count, Deadline deadline,
                                         char status, std::string* why) {
    auto answer = std::make_shared<RelayedAnswer>();
    answer->frame = wire::Writer().frame_before(count + 1);
    std::string error;  // no file: the bytes go into memory, as a small answer's
    std::optional<AnswerFileWriter> writer;
    if (wire::kFrameHeaderBytes + 1 + count >= kLargeAnswerBytes) writer.emplace(&error);
    if (!writer || !writer->valid()) {
      answer->frame.push_back(status);
      if (!in.append_to(&answer->frame, count, deadline, why)) return nullptr;
      return answer;
    }
    // Its first bytes may have been read ahead with the frame before it.
    const std::string_view ahead = in.take_buffered(count);
    const bool kept =
        writer->write(std::string_view(&status, 1), &error) && writer->write(ahead, &error);
    std::string file_error = kept ? "" : error;  // set: the bytes are read and dropped
    if (!recv_into_file(in.fd(), writer->file(), count - ahead.size(), deadline, why,
                        &file_error)) {
      return nullptr;
    }
    if (!file_error.empty()) error = file_error;
    answer->file = file_error.empty() ? writer->seal(&error) : Fd();
    if (!answer->file.valid()) {
      answer->frame = wire::error_frame(cat("this node's relay could not keep an answer of ",
                                            count + 1, " bytes from the job's store at ", address,
                                            " (", error, "); ask again"));
      return answer;
    }
    answer->in_file = count + 1;
    return answer;
  }

  // One answer of the batch out (under `mutex`); the last hands them all out.
  void answered_in_batch(std::size_t index, std::string frame) {
    BatchOut& going = *batch_out;
    going.answers[index] = std::move(frame);
    if (--going.left > 0) return;
    Answers out;
    for (std::size_t i = 0; i < going.requests.size(); ++i)
      share(going.requests[i], going.answers[i], &out);
    batch_out.reset();
    work.notify_one();
    if (batch.empty()) settled.notify_all();
    deliver(std::move(out));
  }

  // The answers to the clients a request stood for, into `out`: a shared
  // ADD's sum is counted out in the order of their deltas.
  void share(const Outgoing& request, const std::string& answer, Answers* out) {
    const bool ok = answer.size() > wire::kFrameHeaderBytes &&
                    static_cast<wire::Status>(answer[wire::kFrameHeaderBytes]) == wire::Status::ok;
    if (request.op != wire::Op::add || request.parts.size() == 1 || !ok) {
      const auto shared = shared_answer(answer);
      for (const auto& part : request.parts)
        out->emplace_back(part.first, shared);
      return;
    }
    std::int64_t value = 0;
    try {
      wire::Reader reader(std::string_view(answer).substr(wire::kFrameHeaderBytes + 1));
      value = reader.i64() - request.total;
    } catch (const wire::ProtocolError&) {
      const auto error = shared_answer(wire::error_frame(
          cat("the job's store at ", address, " answered an ADD without a number")));
      for (const auto& part : request.parts)
        out->emplace_back(part.first, error);
      return;
    }
    for (const auto& [id, delta] : request.parts) {
      value += delta;
      out->emplace_back(
          id,
          shared_answer(
              wire::Writer().u8(static_cast<std::uint8_t>(wire::Status::ok)).i64(value).frame()));
    }
  }

  // A waiting group's answer (`unchanged`: the value `pending` named is
  // still the store's): to every client it stood for, then, for those that
  // came meanwhile, the request goes up again.
  void group_answered(const Pending& pending, std::shared_ptr<RelayedAnswer> answer, bool unchanged,
                      std::uint64_t version) {
    Answers out;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto& [frame, group] = *pending.group;
      bool fresh = false;  // a new answer for `last_answers`
      if (unchanged) {
        answer = pending.known;
        version = pending.known_version;
      } else if (!group.get_key.empty() && answer->ok()) {
        fresh = version != pending.known_version && answer->size() >= kLargeAnswerBytes;
        group.last = answer;
        group.last_version = version;
      }
      std::shared_ptr<RelayedAnswer> unchanged_answer;
      std::shared_ptr<RelayedAnswer> with_version;
      out.reserve(group.going.size());
      for (const Client& client : group.going) {
        out.emplace_back(client.id, client.known ? versioned(answer, version, *client.known,
                                                             &unchanged_answer, &with_version)
                                                 : answer);
      }
      if (fresh) keep(group.get_key, version, answer);
      if (group.next.empty() || stopping) {
        groups.erase(groups.find(pending.group->first));  // not by key: the key is its own
      } else {
        group.going = std::exchange(group.next, {});
        group.out = false;
        ready.push_back(pending.group);
        work.notify_one();
      }
    }
    deliver(std::move(out));
  }

  // Keeps `answer` as the last of `key`'s (under `mutex`), forgetting the
  // others' when all would be more than kKeptBytes.
  void keep(const std::string& key, std::uint64_t version, std::shared_ptr<RelayedAnswer> answer) {
    Kept& slot = last_answers[key];
    if (slot.answer) kept_bytes -= slot.answer->size();
    kept_bytes += answer->size();
    slot = {version, std::move(answer)};
    if (kept_bytes <= kKeptBytes) return;
    Kept mine = std::move(slot);
    last_answers.clear();
    kept_bytes = mine.answer->size();
    last_answers.emplace(key, std::move(mine));
  }

  // --- from the server's loop --------------------------------------------------

  void forward(Id id, RelayedRequest request) {
    std::lock_guard<std::mutex> lock(mutex);
    if (request.op == wire::Op::set_on_close) {
      last_words[id].push_back(request.frame);
    } else if (request.op == wire::Op::clear_on_close) {
      return take_back_last_words(id, id);
    }
    if (!request.may_wait()) {
      batch.emplace_back(id, std::move(request));  // it leaves at flush()
      return;
    }
    const bool get = request.op == wire::Op::get || request.op == wire::Op::get_versioned;
    auto [at, fresh] = groups.try_emplace(get ? get_frame(request.key, request.timeout)
                                              : std::move(request.frame));
    Group& group = at->second;
    const Client client{id, request.known_version};
    if (!fresh) {
      (group.out ? group.next : group.going).push_back(client);
      return;
    }
    group.timeout = request.timeout;
    if (get) group.get_key = std::move(request.key);
    group.going.push_back(client);
    ready.push_back(&*at);  // it leaves at flush(), with the round's others
  }

  // Client `id`'s last words are no longer this process's to leave (under
  // `mutex`): the relay's connection takes back every in-process client's
  // and leaves the others' again, in one batch; `answer_to` is told.
  void take_back_last_words(Id id, Id answer_to) {
    last_words.erase(id);
    RelayedRequest clear;
    clear.op = wire::Op::clear_on_close;
    clear.frame = wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::clear_on_close)).frame();
    batch.emplace_back(answer_to, std::move(clear));
    for (const auto& [client, frames] : last_words) {
      for (const std::string& frame : frames) {
        RelayedRequest again;
        again.op = wire::Op::set_on_close;
        again.frame = frame;
        batch.emplace_back(kNobody, std::move(again));
      }
    }
  }

  void say_last_words(Id id, bool own,
                      const std::vector<std::pair<std::string, std::string>>& words) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [key, value] : words) {
      RelayedRequest set;
      set.op = wire::Op::set;
      set.frame = wire::Writer()
                      .u8(static_cast<std::uint8_t>(wire::Op::set))
                      .bytes(key)
                      .bytes(value)
                      .frame();
      batch.emplace_back(kNobody, std::move(set));
    }
    if (own && last_words.count(id) != 0) take_back_last_words(id, kNobody);
    work.notify_one();
  }

  // Waits until the quick requests forwarded so far are answered, or the
  // store is lost, or `at_most` passes (the relay's end).
  void finish(std::chrono::milliseconds at_most) {
    std::unique_lock<std::mutex> lock(mutex);
    settled.wait_for(lock, at_most,
                     [this] { return !lost_answer.empty() || (batch.empty() && !batch_out); });
  }

  void route_through(std::vector<StoreServer::Hop> path) {
    std::lock_guard<std::mutex> lock(mutex);
    const StoreServer::Hop store = hops.back();
    path.push_back(store);
    const bool moved = link && (path.front().host != hops[link->hop].host ||
                                path.front().port != hops[link->hop].port);
    hops = std::move(path);
    ++reroutes;
    if (moved) {
      rerouted = true;
      work.notify_one();
    } else {
      hop = 0;
      if (link) link->hop = 0;
    }
  }
};

StoreRelay::StoreRelay(StoreServer::Options::Upstream upstream, std::string token, Deliver deliver)
    : impl_(std::make_unique<Impl>()) {
  impl_->address = cat(upstream.host, ":", upstream.port);
  impl_->hops = upstream.through;
  impl_->hops.push_back({upstream.host, upstream.port, ""});
  impl_->upstream = std::move(upstream);
  impl_->token = std::move(token);
  impl_->deliver = std::move(deliver);
  impl_->sender = std::thread([this] {
    name_this_thread("cohort-relay-tx");
    impl_->run_sender();
  });
}

StoreRelay::~StoreRelay() {
  impl_->finish(kFinish);
  std::vector<std::shared_ptr<Impl::Link>> links;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
    links = impl_->retired;
    if (impl_->link) links.push_back(impl_->link);
    for (const auto& one : links)
      ::shutdown(one->fd.get(), SHUT_RDWR);  // a reader blocked in a long answer returns now
    if (impl_->opening >= 0) ::shutdown(impl_->opening, SHUT_RDWR);  // a handshake, too
  }
  impl_->work.notify_all();
  impl_->sender.join();
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    links = impl_->retired;  // the sender may have made one meanwhile, and retired it
    if (impl_->link) links.push_back(impl_->link);
    for (const auto& one : links)
      ::shutdown(one->fd.get(), SHUT_RDWR);
  }
  for (const auto& one : links)
    if (one->reader.joinable()) one->reader.join();
}

void StoreRelay::forward(Id id, RelayedRequest request) {
  impl_->forward(id, std::move(request));
}

void StoreRelay::flush() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (!impl_->batch.empty() || !impl_->ready.empty()) impl_->send_now();
}

void StoreRelay::say_last_words(Id id, bool own,
                                const std::vector<std::pair<std::string, std::string>>& words) {
  impl_->say_last_words(id, own, words);
}

void StoreRelay::route_through(std::vector<StoreServer::Hop> path) {
  impl_->route_through(std::move(path));
}

std::size_t StoreRelay::connection_count() const noexcept {
  return impl_->connections;
}

std::string StoreRelay::describe() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->describe();
}

}  // namespace cohort::detail
