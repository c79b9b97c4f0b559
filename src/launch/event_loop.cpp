#include "launch/event_loop.hpp"

#include <algorithm>
#include <vector>

#include <sys/epoll.h>
#include <sys/signalfd.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {
namespace {

class RealClock : public LoopClock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
};

bool empty(const sigset_t& set) {
  for (int signal = 1; signal < NSIG; ++signal) {
    if (sigismember(&set, signal) == 1) return false;
  }
  return true;
}

}  // namespace

const LoopClock& real_clock() {
  static const RealClock kClock;
  return kClock;
}

EventLoop::EventLoop(const sigset_t& signals, const LoopClock& clock) : clock_(clock) {
  epoll_ = Fd(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) throw Error(cat("cohort run: epoll_create1 failed: ", errno_text(errno)));
  if (empty(signals)) return;
  guard_ = std::make_unique<SignalGuard>(signals);
  signals_ = Fd(signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signals_.valid()) throw Error(cat("cohort run: signalfd failed: ", errno_text(errno)));
  watch(signals_.get(), [this] {
    drain_signalfd(signals_.get(), [this](int signal) {
      if (on_signal_) on_signal_(signal);
      return true;
    });
  });
}

EventLoop::~EventLoop() = default;

void EventLoop::watch(int fd, std::function<void()> readable) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  const bool known = watched_.count(fd) != 0;
  watched_[fd] = std::move(readable);
  if (epoll_ctl(epoll_.get(), known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event) != 0) {
    watched_.erase(fd);
    throw Error(cat("cohort run: epoll_ctl on descriptor ", fd, " failed: ", errno_text(errno)));
  }
}

void EventLoop::unwatch(int fd) {
  if (watched_.erase(fd) == 0) return;
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
}

void EventLoop::set_deadline(int name, std::chrono::milliseconds after,
                             std::function<void()> fire) {
  deadlines_[name] = {clock_.now() + std::max(after, std::chrono::milliseconds(0)),
                      std::move(fire)};
}

void EventLoop::turn(std::optional<std::chrono::milliseconds> limit) {
  long long wait = limit ? std::max<long long>(0, limit->count()) : -1;
  for (const auto& [name, deadline] : deadlines_) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline.when - clock_.now());
    // +1: epoll_wait rounds down, and a deadline must have passed when it fires.
    const long long until = std::max<long long>(0, left.count() + 1);
    wait = wait < 0 ? until : std::min(wait, until);
  }
  epoll_event events[64];
  const int n =
      epoll_wait(epoll_.get(), events, 64, static_cast<int>(std::min<long long>(wait, 1 << 30)));
  if (n < 0 && errno != EINTR) {
    throw Error(cat("cohort run: epoll_wait failed: ", errno_text(errno)));
  }
  for (int i = 0; i < n; ++i) {
    // Looked up again each time: an earlier callback may have unwatched it.
    auto found = watched_.find(events[i].data.fd);
    if (found == watched_.end()) continue;
    const std::function<void()> readable = found->second;  // may unwatch itself
    readable();
  }
  fire_due_deadlines();
}

void EventLoop::fire_due_deadlines() {
  for (;;) {
    auto due = std::find_if(deadlines_.begin(), deadlines_.end(), [this](const auto& entry) {
      return entry.second.when <= clock_.now();
    });
    if (due == deadlines_.end()) return;
    const std::function<void()> fire = std::move(due->second.fire);
    deadlines_.erase(due);  // before firing: `fire` may set it again
    fire();
  }
}

}  // namespace cohort::detail
