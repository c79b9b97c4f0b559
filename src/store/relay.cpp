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

#include <sys/socket.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/socket.hpp"
#include "core/strings.hpp"
#include "store/client_handshake.hpp"
#include "store/file_answer.hpp"
#include "store/store_protocol.hpp"

namespace cohort::detail {

namespace wire = store_protocol;

namespace {

// As StoreClient's: how much longer than a wait's own timeout the store may
// take to answer "timeout" before it counts as lost.
constexpr std::chrono::milliseconds kServerGrace{5000};
constexpr std::size_t kMaxAnswerBytes = 0xffffffffu;
// A large answer goes into its file through a buffer of this size, which
// stays in the cache.
constexpr std::size_t kPieceBytes = std::size_t{64} << 10;
// The large answers a relay keeps, to be told by the store that a value is
// unchanged rather than be sent it again (GET_VERSIONED).
constexpr std::size_t kKeptBytes = std::size_t{64} << 20;
// A batch's requests together, beyond the first.
constexpr std::size_t kBatchBytes = std::size_t{8} << 20;
// A lane idle this long ends, with its connection, while more than
// kIdleLanesKept are idle: a burst of distinct waits (a Gloo mesh's
// addresses, each rank's own) does not leave the store holding a
// connection per wait of every node for the rest of the job, and lanes
// live through the burst.
constexpr std::chrono::seconds kLaneIdleLife{2};
constexpr std::size_t kIdleLanesKept = 1;
// How long a relay's connections made as it starts may take to connect (a
// relay's end waits for that at most); their handshakes take the upstream
// timeout, and the end interrupts them.
constexpr std::chrono::milliseconds kEarlyConnect{1000};

// One answer for every client it goes to.
std::shared_ptr<RelayedAnswer> shared_answer(std::string frame) {
  auto answer = std::make_shared<RelayedAnswer>();
  answer->frame = std::move(frame);
  return answer;
}

std::chrono::milliseconds timeout_field(wire::Reader& reader) {
  return std::chrono::milliseconds(std::max<std::int64_t>(0, reader.i64()));
}

// Requests of one batch as they go up: an ADD may stand for several.
struct Outgoing {
  std::string frame;
  bool add = false;
  std::int64_t total = 0;                                     // an ADD's deltas together
  std::vector<std::pair<std::uint64_t, std::int64_t>> parts;  // client, its delta
};

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
    return batch[i].second.op == wire::Op::add && last_of[batch[i].first] == i;
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
      const bool add = request.op == wire::Op::add;
      out.push_back({std::move(request.frame),
                     add,
                     add ? request.add_delta : 0,
                     {{id, add ? request.add_delta : 0}}});
      continue;
    }
    if (i != at->second.last) continue;  // it goes with the last
    Outgoing& add = at->second.add;
    add.add = true;
    add.frame = wire::Writer()
                    .u8(static_cast<std::uint8_t>(wire::Op::add))
                    .bytes(request.key)
                    .i64(add.total)
                    .frame();
    out.push_back(std::move(add));
  }
  return out;
}

}  // namespace

std::optional<StoreValue> RelayedAnswer::payload(std::string* error) {
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
      reader.bytes();
      reader.bytes();
      break;
    case wire::Op::get:
      request.key = std::string(reader.bytes());
      request.timeout = timeout_field(reader);
      break;
    case wire::Op::get_versioned:  // a relay's, passed on as it came
      reader.bytes();
      request.timeout = timeout_field(reader);
      reader.i64();
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
  std::string address;
  std::atomic<std::size_t> connections{0};

  std::mutex mutex;  // guards everything below
  std::condition_variable batch_ready;
  std::condition_variable lane_ready;
  bool stopping = false;
  // Once a connection to the store broke, the answer to every later request:
  // the job's store does not come back, and connecting again would take the
  // whole connect timeout to say so.
  std::string lost_answer;
  std::vector<std::pair<Id, RelayedRequest>> batch;  // quick requests not yet sent
  // Requests that may wait, by their frame: `going` go up together on the
  // next call; `next` came while one was out, and go when it returns.
  struct Group {
    std::chrono::milliseconds timeout{0};
    std::string get_key;  // a GET's: it goes up as GET_VERSIONED
    bool out = false;
    std::vector<Id> going;
    std::vector<Id> next;
  };
  using Groups = std::unordered_map<std::string, Group>;
  Groups groups;
  // Groups that wait for a lane. An element of `groups` stays where it is
  // until a lane erases it: its frame (a MULTI_GET's can be 200 KB) is
  // neither copied nor hashed again.
  std::deque<Groups::value_type*> ready;
  // The last large answer to a GET of each key, for the next GET of it
  // (above). A job's tables: kKeptBytes is far more than they hold.
  struct Kept {
    std::uint64_t version = 0;
    std::shared_ptr<RelayedAnswer> answer;
  };
  std::unordered_map<std::string, Kept> last_answers;
  std::size_t kept_bytes = 0;
  std::size_t idle_lanes = 0;
  std::vector<std::thread::id> ended_lanes;  // idle beyond kIdleLanesKept, and gone
  std::vector<std::thread> threads;
  std::vector<int> open;  // upstream sockets, shut down when stopping

  // One blocking connection to the upstream store.
  class Link {
   public:
    // Connects, retrying until the upstream timeout (the store may not
    // listen yet).
    explicit Link(Impl& relay) : relay_(relay) {
      adopt(connect_to_store(relay.upstream.host, relay.upstream.port, expected(),
                             relay.upstream.timeout));
    }
    struct Early {};
    // Connects as the relay starts, before any request needs it: one
    // attempt, within kEarlyConnect, that the relay's end interrupts once
    // connected. Throws when it fails; the first request then connects.
    Link(Impl& relay, Early) : relay_(relay) {
      std::string error;
      Fd fd = connect_tcp(relay.upstream.host, relay.upstream.port,
                          deadline_after(std::min(relay.upstream.timeout, kEarlyConnect)), &error);
      if (!fd.valid()) throw StoreError(error);
      const int socket = fd.get();
      adopt(std::move(fd));  // the relay's end shuts the handshake down
      try {
        authenticate_to_store(socket, relay.address, expected(),
                              deadline_after(relay.upstream.timeout));
      } catch (const Error&) {
        forget();
        throw;
      }
    }
    ~Link() { forget(); }
    Link(const Link&) = delete;
    Link& operator=(const Link&) = delete;

    // Sends `request`, one that may wait, and reads its answer: a large one
    // straight into a memory file, which its clients that take files get,
    // and the others' bytes are sent from. With `version`, `request` is a
    // GET_VERSIONED that names `*version` (0: none): the version an ok
    // answer ends with goes into `*version`, not into the answer, and an
    // unchanged answer is null with `*unchanged`. Null and `*error` when
    // the connection failed.
    std::shared_ptr<RelayedAnswer> call(const std::string& request, Deadline deadline,
                                        std::uint64_t* version, bool* unchanged,
                                        std::string* error) {
      if (!send_all(fd_.get(), request.data(), request.size(), deadline, error)) return nullptr;
      char header[wire::kFrameHeaderBytes + 1];  // and the answer's status
      if (!recv_all(fd_.get(), header, sizeof(header) - 1, deadline, error)) return nullptr;
      const std::size_t length = wire::frame_length(header);
      if (length == 0) {
        *error = "sent an empty answer";
        return nullptr;
      }
      if (!recv_all(fd_.get(), header + wire::kFrameHeaderBytes, 1, deadline, error)) {
        return nullptr;
      }
      const auto status = static_cast<wire::Status>(header[wire::kFrameHeaderBytes]);
      std::size_t kept = length;  // what the clients get, status included
      if (version != nullptr && *version != 0 && status == wire::Status::unchanged && length == 1) {
        *unchanged = true;
        return nullptr;
      }
      if (version != nullptr && status == wire::Status::ok) {
        if (length < 1 + 4 + 8) {
          *error = cat("sent an answer of ", length, " bytes to GET_VERSIONED, too short");
          return nullptr;
        }
        kept = length - 8;
      }
      auto answer = std::make_shared<RelayedAnswer>();
      answer->frame = wire::Writer().frame_before(kept);
      if (!receive(kept - 1, deadline, answer.get(), header[wire::kFrameHeaderBytes], error)) {
        return nullptr;
      }
      if (version != nullptr && status == wire::Status::ok) {
        char field[8];
        if (!recv_all(fd_.get(), field, sizeof(field), deadline, error)) return nullptr;
        // An answer this relay could not keep (receive() made it an error)
        // has no version here: the next GET of the key asks for the value.
        const bool held =
            answer->in_file != 0 ||
            static_cast<wire::Status>(answer->frame[wire::kFrameHeaderBytes]) == wire::Status::ok;
        if (held) {
          *version = static_cast<std::uint64_t>(wire::Reader(std::string_view(field, 8)).i64());
        }
      }
      return answer;
    }

    // The `count` bytes after an answer's `status` into `answer`: a large
    // answer into a memory file, a piece at a time (its frame then keeps
    // only its header), else after its frame's header. False and `*error`
    // when the connection failed; when no file could be kept, the bytes are
    // read and dropped and `answer` becomes an error that says so.
    bool receive(std::size_t count, Deadline deadline, RelayedAnswer* answer, char status,
                 std::string* error) {
      std::string why;  // no file: the bytes go into memory, as a small answer's
      std::optional<AnswerFileWriter> writer;
      if (wire::kFrameHeaderBytes + 1 + count >= kLargeAnswerBytes) writer.emplace(&why);
      if (!writer || !writer->valid()) {
        // The store proved the job's token: its length is taken as it says.
        const std::size_t at = answer->frame.size() + 1;
        answer->frame.resize(at + count);
        answer->frame[at - 1] = status;
        return recv_all(fd_.get(), answer->frame.data() + at, count, deadline, error);
      }
      bool kept = writer->write(std::string_view(&status, 1), &why);
      for (std::size_t left = count; left > 0;) {
        buffer_.resize(std::min(left, kPieceBytes));
        if (!recv_all(fd_.get(), buffer_.data(), buffer_.size(), deadline, error)) return false;
        kept = kept && writer->write(buffer_, &why);
        left -= buffer_.size();
      }
      answer->file = kept ? writer->seal(&why) : Fd();
      if (!answer->file.valid()) {
        answer->frame = wire::error_frame(cat("this node's relay could not keep an answer of ",
                                              count + 1, " bytes from the job's store at ",
                                              relay_.address, " (", why, "); ask again"));
        return true;
      }
      answer->in_file = count + 1;
      return true;
    }

    // Sends `requests` (`count` frames), then reads their `count` answers.
    bool exchange(const std::string& requests, std::size_t count, Deadline deadline,
                  std::vector<std::string>* answers, std::string* error) {
      if (!send_all(fd_.get(), requests.data(), requests.size(), deadline, error)) return false;
      for (std::size_t i = 0; i < count; ++i) {
        std::string frame;
        if (!recv_framed(fd_.get(), &frame, kMaxAnswerBytes, deadline, error)) return false;
        if (frame.size() == wire::kFrameHeaderBytes) {
          *error = "sent an empty answer";
          return false;
        }
        answers->push_back(std::move(frame));
      }
      return true;
    }

   private:
    ExpectedStore expected() const {
      return {relay_.token, relay_.upstream.munge, relay_.upstream.process};
    }
    void adopt(Fd fd) {
      std::lock_guard<std::mutex> lock(relay_.mutex);
      if (relay_.stopping) throw StoreError("the relay is stopping");
      fd_ = std::move(fd);
      relay_.open.push_back(fd_.get());
      ++relay_.connections;
    }
    void forget() {
      std::lock_guard<std::mutex> lock(relay_.mutex);
      relay_.open.erase(std::find(relay_.open.begin(), relay_.open.end(), fd_.get()));
      --relay_.connections;
      fd_.reset();  // under the lock: the number is not shut down once reused
    }

    Impl& relay_;
    Fd fd_;
    std::string buffer_;  // a piece of a large answer on its way into a file
  };

  // Remembers that the store is lost, and why; returns the answer that says so.
  std::string lost(const std::string& why) {
    std::string answer = wire::error_frame(
        cat("lost the job's store at ", address, " (through this node's relay): it ", why,
            why == "timed out" ? "" : " (has the process that hosts it exited?)"));
    std::lock_guard<std::mutex> lock(mutex);
    if (lost_answer.empty()) lost_answer = answer;
    return answer;
  }

  // Connects `link` if it is not; false and `*error` (an answer frame) when
  // it cannot, or the store was lost.
  bool connected(std::optional<Link>& link, std::string* error) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!lost_answer.empty()) {
        *error = lost_answer;
        return false;
      }
    }
    if (link) return true;
    try {
      link.emplace(*this);
      return true;
    } catch (const Error& failure) {
      *error = wire::error_frame(cat(failure.what(), " (through this node's relay)"));
      return false;
    }
  }

  // Connects `link` as the relay starts: its node's first requests then do
  // not wait for a connection and a handshake (a relay starts before the
  // ranks it serves). Quietly nothing when that fails (the store does not
  // listen yet, the relay ends): the first request connects, or says why not.
  void connect_early(std::optional<Link>& link) {
    try {
      link.emplace(*this, Link::Early{});
    } catch (const Error&) {
    }
  }

  // The quick requests: one batch out at a time, on one connection.
  void run_batches() {
    std::optional<Link> link;
    if (upstream.connect_at_start) connect_early(link);
    for (;;) {
      std::vector<std::pair<Id, RelayedRequest>> taken;
      {
        std::unique_lock<std::mutex> lock(mutex);
        batch_ready.wait(lock, [&] { return stopping || !batch.empty(); });
        if (stopping) return;
        // At most kBatchBytes of requests (one, however large): the store
        // takes no more than two largest frames ahead of what it handled.
        std::size_t bytes = 0;
        std::size_t count = 0;
        while (count < batch.size() && (count == 0 || bytes < kBatchBytes))
          bytes += batch[count++].second.frame.size();
        if (count == batch.size()) {
          taken.swap(batch);
        } else {
          taken.assign(std::make_move_iterator(batch.begin()),
                       std::make_move_iterator(batch.begin() + static_cast<std::ptrdiff_t>(count)));
          batch.erase(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(count));
        }
      }
      std::vector<Outgoing> outgoing = merge_adds(std::move(taken));
      std::string requests;
      for (const Outgoing& request : outgoing)
        requests += request.frame;
      std::vector<std::string> answers;
      std::string failed;  // the answer for all, when the batch did not go
      std::string why;
      if (connected(link, &failed) &&
          !link->exchange(requests, outgoing.size(), deadline_after(upstream.timeout), &answers,
                          &why)) {
        failed = lost(why);
        link.reset();
      }
      Answers out;
      for (std::size_t i = 0; i < outgoing.size(); ++i)
        share(outgoing[i], failed.empty() ? answers[i] : failed, &out);
      deliver(std::move(out));
    }
  }

  // The answers to the clients a request stood for, into `out`: a shared
  // ADD's sum is counted out in the order of their deltas.
  void share(const Outgoing& request, const std::string& answer, Answers* out) {
    const bool ok = answer.size() > wire::kFrameHeaderBytes &&
                    static_cast<wire::Status>(answer[wire::kFrameHeaderBytes]) == wire::Status::ok;
    if (!request.add || request.parts.size() == 1 || !ok) {
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

  // A lane: takes a waiting group, sends its request once for all its
  // clients, and again for those that came meanwhile, until none did.
  void run_lane(bool early) {
    std::optional<Link> link;
    if (early) connect_early(link);
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      if (!lane_ready.wait_for(lock, kLaneIdleLife, [&] { return stopping || !ready.empty(); })) {
        if (idle_lanes <= kIdleLanesKept) continue;
        --idle_lanes;
        break;
      }
      if (stopping) break;
      auto& [frame, group] = *ready.front();
      ready.pop_front();
      --idle_lanes;
      group.out = true;
      // A GET's last answer, kept or of this group's last round: the store
      // says whether the value is still this one (a table every rank of a
      // node reads then comes once, however its ranks' GETs fall).
      std::shared_ptr<RelayedAnswer> last;
      std::uint64_t last_version = 0;
      if (const auto at = last_answers.find(group.get_key); at != last_answers.end()) {
        last = at->second.answer;
        last_version = at->second.version;
      }
      for (;;) {
        bool fresh = false;  // a new answer for `last_answers`
        std::vector<Id> going = std::exchange(group.going, {});
        lock.unlock();
        // One answer for all: no client's is a copy.
        std::shared_ptr<RelayedAnswer> answer;
        if (group.get_key.empty()) {
          answer = call(link, frame, group.timeout, nullptr);
        } else {
          std::uint64_t version = last_version;
          answer = call(link,
                        wire::Writer()
                            .u8(static_cast<std::uint8_t>(wire::Op::get_versioned))
                            .bytes(group.get_key)
                            .i64(group.timeout.count())
                            .i64(static_cast<std::int64_t>(last ? last_version : 0))
                            .frame(),
                        group.timeout, &version);
          if (!answer) {  // unchanged: asked only with a value in hand
            answer = last;
          } else if (version != last_version) {
            last = answer;
            last_version = version;
            fresh = answer->size() >= kLargeAnswerBytes;
          }
        }
        Answers out;
        out.reserve(going.size());
        for (Id id : going)
          out.emplace_back(id, answer);
        deliver(std::move(out));
        lock.lock();
        if (fresh) keep(group.get_key, last_version, last);
        if (group.next.empty() || stopping) {
          groups.erase(groups.find(frame));  // not by key: `frame` is the element's own
          break;
        }
        group.going = std::exchange(group.next, {});
      }
      ++idle_lanes;
    }
    lock.unlock();
    link.reset();
    lock.lock();
    ended_lanes.push_back(std::this_thread::get_id());  // joined by the next lane's start
  }

  // Joins the lanes that ended (under `mutex`: they only return after it).
  void join_ended_lanes() {
    for (const std::thread::id ended : ended_lanes) {
      const auto at = std::find_if(threads.begin(), threads.end(),
                                   [ended](const std::thread& t) { return t.get_id() == ended; });
      if (at == threads.end()) continue;
      at->join();
      threads.erase(at);
    }
    ended_lanes.clear();
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

  // The answer to `frame`, or one that says why there is none. With
  // `version` (a GET_VERSIONED that names `*version`): null when the value
  // is unchanged, else `*version` is the answer's (unchanged if it is no
  // value: an error, a timeout).
  std::shared_ptr<RelayedAnswer> call(std::optional<Link>& link, const std::string& frame,
                                      std::chrono::milliseconds server_timeout,
                                      std::uint64_t* version) {
    std::string error;
    if (!connected(link, &error)) return shared_answer(std::move(error));
    const Deadline deadline =
        deadline_after(std::max(upstream.timeout, saturating_sum(server_timeout, kServerGrace)));
    bool unchanged = false;
    if (auto answer = link->call(frame, deadline, version, &unchanged, &error)) return answer;
    if (unchanged) return nullptr;
    link.reset();
    return shared_answer(lost(error));
  }

  void forward(Id id, RelayedRequest request) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!request.may_wait()) {
      batch.emplace_back(id, std::move(request));  // it leaves at flush()
      return;
    }
    auto [at, fresh] = groups.try_emplace(std::move(request.frame));
    Group& group = at->second;
    if (!fresh) {
      (group.out ? group.next : group.going).push_back(id);
      return;
    }
    group.timeout = request.timeout;
    if (request.op == wire::Op::get) group.get_key = std::move(request.key);
    group.going.push_back(id);
    ready.push_back(&*at);
    if (idle_lanes < ready.size()) {
      join_ended_lanes();
      ++idle_lanes;
      threads.emplace_back([this] { run_lane(false); });
    }
    lane_ready.notify_one();
  }
};

StoreRelay::StoreRelay(StoreServer::Options::Upstream upstream, std::string token, Deliver deliver)
    : impl_(std::make_unique<Impl>()) {
  impl_->address = cat(upstream.host, ":", upstream.port);
  impl_->upstream = std::move(upstream);
  impl_->token = std::move(token);
  impl_->deliver = std::move(deliver);
  impl_->threads.emplace_back([this] { impl_->run_batches(); });
  if (!impl_->upstream.connect_at_start) return;
  // One lane from the start: a node's ranks' first wait (a barrier's, a
  // table's) finds it connected.
  impl_->idle_lanes = 1;
  impl_->threads.emplace_back([this] { impl_->run_lane(true); });
}

StoreRelay::~StoreRelay() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
    for (int fd : impl_->open)
      ::shutdown(fd, SHUT_RDWR);  // a lane blocked in a long wait returns now
    threads.swap(impl_->threads);
  }
  impl_->batch_ready.notify_all();
  impl_->lane_ready.notify_all();
  for (std::thread& thread : threads)
    thread.join();
}

void StoreRelay::forward(Id id, RelayedRequest request) {
  impl_->forward(id, std::move(request));
}

void StoreRelay::flush() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (!impl_->batch.empty()) impl_->batch_ready.notify_one();
}

std::size_t StoreRelay::connection_count() const noexcept {
  return impl_->connections;
}

}  // namespace cohort::detail
