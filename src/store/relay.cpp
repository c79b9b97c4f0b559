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

namespace cohort::detail {

namespace wire = store_protocol;

namespace {

// As StoreClient's: how much longer than a wait's own timeout the store may
// take to answer "timeout" before it counts as lost.
constexpr std::chrono::milliseconds kServerGrace{5000};
constexpr std::size_t kMaxAnswerBytes = 0xffffffffu;
// A batch's requests together, beyond the first.
constexpr std::size_t kBatchBytes = std::size_t{8} << 20;

std::string error_frame(const std::string& text) {
  return wire::Writer().u8(static_cast<std::uint8_t>(wire::Status::error)).bytes(text).frame();
}

// One answer for every client it goes to.
std::shared_ptr<RelayedAnswer> shared_answer(std::string frame) {
  return std::make_shared<RelayedAnswer>(RelayedAnswer{std::move(frame), Fd()});
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

std::vector<Outgoing> merge_adds(std::vector<std::pair<std::uint64_t, RelayedRequest>>&& batch) {
  std::vector<Outgoing> out;
  std::unordered_map<std::string, std::size_t> add_at;  // key -> its ADD in `out`
  for (auto& [id, request] : batch) {
    if (request.op == wire::Op::add) {
      const auto at = add_at.find(request.add_key);
      std::int64_t sum = 0;
      if (at != add_at.end() &&
          !__builtin_add_overflow(out[at->second].total, request.add_delta, &sum)) {
        out[at->second].total = sum;
        out[at->second].parts.emplace_back(id, request.add_delta);
        continue;
      }
      add_at[request.add_key] = out.size();
      out.push_back({std::move(request.frame), true, request.add_delta, {{id, request.add_delta}}});
      continue;
    }
    out.push_back({std::move(request.frame), false, 0, {{id, 0}}});
  }
  for (auto& [key, at] : add_at) {
    if (out[at].parts.size() > 1) {
      out[at].frame = wire::Writer()
                          .u8(static_cast<std::uint8_t>(wire::Op::add))
                          .bytes(key)
                          .i64(out[at].total)
                          .frame();
    }
  }
  return out;
}

}  // namespace

bool RelayedRequest::may_wait() const noexcept {
  return op == wire::Op::get || op == wire::Op::wait || op == wire::Op::multi_get;
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
      reader.bytes();
      request.timeout = timeout_field(reader);
      break;
    case wire::Op::wait:
    case wire::Op::multi_get:
      reader.strings();
      request.timeout = timeout_field(reader);
      break;
    case wire::Op::add:
      request.add_key = std::string(reader.bytes());
      request.add_delta = reader.i64();
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
  std::size_t idle_lanes = 0;
  std::vector<std::thread> threads;
  std::vector<int> open;  // upstream sockets, shut down when stopping

  // One blocking connection to the upstream store.
  class Link {
   public:
    explicit Link(Impl& relay) : relay_(relay) {
      fd_ = connect_to_store(relay.upstream.host, relay.upstream.port,
                             {relay.token, relay.upstream.munge, relay.upstream.process},
                             relay.upstream.timeout);
      std::lock_guard<std::mutex> lock(relay.mutex);
      if (relay.stopping) throw StoreError("the relay is stopping");
      relay.open.push_back(fd_.get());
      ++relay.connections;
    }
    ~Link() {
      std::lock_guard<std::mutex> lock(relay_.mutex);
      relay_.open.erase(std::find(relay_.open.begin(), relay_.open.end(), fd_.get()));
      --relay_.connections;
      fd_.reset();  // under the lock: the number is not shut down once reused
    }
    Link(const Link&) = delete;
    Link& operator=(const Link&) = delete;

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
    Impl& relay_;
    Fd fd_;
  };

  // Remembers that the store is lost, and why; returns the answer that says so.
  std::string lost(const std::string& why) {
    std::string answer =
        error_frame(cat("lost the job's store at ", address, " (through this node's relay): it ",
                        why, why == "timed out" ? "" : " (has the process that hosts it exited?)"));
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
      *error = error_frame(cat(failure.what(), " (through this node's relay)"));
      return false;
    }
  }

  // The quick requests: one batch out at a time, on one connection.
  void run_batches() {
    std::optional<Link> link;
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
      for (std::size_t i = 0; i < outgoing.size(); ++i)
        share(outgoing[i], failed.empty() ? answers[i] : failed);
    }
  }

  // Hands an answer to the clients a request stood for: a shared ADD's sum
  // is counted out in the order of their deltas.
  void share(const Outgoing& request, const std::string& answer) {
    const bool ok = answer.size() > wire::kFrameHeaderBytes &&
                    static_cast<wire::Status>(answer[wire::kFrameHeaderBytes]) == wire::Status::ok;
    if (!request.add || request.parts.size() == 1 || !ok) {
      const auto shared = shared_answer(answer);
      for (const auto& part : request.parts)
        deliver(part.first, shared);
      return;
    }
    std::int64_t value = 0;
    try {
      wire::Reader reader(std::string_view(answer).substr(wire::kFrameHeaderBytes + 1));
      value = reader.i64() - request.total;
    } catch (const wire::ProtocolError&) {
      const auto error = shared_answer(
          error_frame(cat("the job's store at ", address, " answered an ADD without a number")));
      for (const auto& part : request.parts)
        deliver(part.first, error);
      return;
    }
    for (const auto& [id, delta] : request.parts) {
      value += delta;
      deliver(
          id,
          shared_answer(
              wire::Writer().u8(static_cast<std::uint8_t>(wire::Status::ok)).i64(value).frame()));
    }
  }

  // A lane: takes a waiting group, sends its request once for all its
  // clients, and again for those that came meanwhile, until none did.
  void run_lane() {
    std::optional<Link> link;
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      lane_ready.wait(lock, [&] { return stopping || !ready.empty(); });
      if (stopping) break;
      auto& [frame, group] = *ready.front();
      ready.pop_front();
      --idle_lanes;
      group.out = true;
      for (;;) {
        std::vector<Id> going = std::exchange(group.going, {});
        lock.unlock();
        // One answer for all: no client's is a copy.
        const auto answer = shared_answer(call(link, frame, group.timeout));
        for (Id id : going)
          deliver(id, answer);
        lock.lock();
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
  }

  std::string call(std::optional<Link>& link, const std::string& frame,
                   std::chrono::milliseconds server_timeout) {
    std::string error;
    if (!connected(link, &error)) return error;
    const Deadline deadline =
        deadline_after(std::max(upstream.timeout, saturating_sum(server_timeout, kServerGrace)));
    std::vector<std::string> answers;
    if (link->exchange(frame, 1, deadline, &answers, &error)) return std::move(answers[0]);
    link.reset();
    return lost(error);
  }

  void forward(Id id, RelayedRequest request) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!request.may_wait()) {
      batch.emplace_back(id, std::move(request));
      batch_ready.notify_one();
      return;
    }
    auto [at, fresh] = groups.try_emplace(std::move(request.frame));
    Group& group = at->second;
    if (!fresh) {
      (group.out ? group.next : group.going).push_back(id);
      return;
    }
    group.timeout = request.timeout;
    group.going.push_back(id);
    ready.push_back(&*at);
    if (idle_lanes < ready.size()) {
      ++idle_lanes;
      threads.emplace_back([this] { run_lane(); });
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

std::size_t StoreRelay::connection_count() const noexcept {
  return impl_->connections;
}

}  // namespace cohort::detail
