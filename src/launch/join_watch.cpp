// JoinWatch: a thread that polls a signalfd of the stop signals and an
// eventfd that finish() writes, and wakes for its notes.
#include "launch/join_watch.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"
#include "core/thread_name.hpp"
#include "launch/lifecycle.hpp"
#include "launch/signal_guard.hpp"

namespace cohort::detail {

JoinWatch::JoinWatch(Say say, std::chrono::milliseconds patience,
                     std::chrono::milliseconds first_note, std::chrono::milliseconds every)
    : say_(std::move(say)), patience_(patience), first_note_(first_note), every_(every) {
  const sigset_t stops = signals_that_stop_the_job();
  signals_ = Fd(signalfd(-1, &stops, SFD_CLOEXEC | SFD_NONBLOCK));
  done_ = Fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!signals_.valid() || !done_.valid()) {
    throw Error(cat("cohort run: cannot watch for stop signals while joining the job: ",
                    errno_text(errno)));
  }
  thread_ = std::thread([this] { watch(); });
}

JoinWatch::~JoinWatch() {
  finish();
}

void JoinWatch::end_on_stop(const std::shared_ptr<StoreClient>& connection) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (signal_ != 0 && !finished_) connection->shut_down();
  connections_.push_back(connection);
}

void JoinWatch::waiting_for(std::string what) {
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_for_ = std::move(what);
}

bool JoinWatch::stopped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return signal_ != 0;
}

int JoinWatch::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return signal_;
    finished_ = true;
    connections_.clear();
  }
  const std::uint64_t one = 1;
  (void)!::write(done_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  return signal_;
}

void JoinWatch::watch() {
  name_this_thread("cohort-join");
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_note = start + first_note_;
  pollfd fds[2] = {{signals_.get(), POLLIN, 0}, {done_.get(), POLLIN, 0}};
  for (;;) {
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(next_note - Clock::now());
    const int ready = ::poll(fds, 2, static_cast<int>(std::max<long long>(wait.count(), 0)));
    if (ready < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if (fds[0].revents != 0) {
      bool taken = false;
      drain_signalfd(signals_.get(), [&](int signal) {
        std::lock_guard<std::mutex> lock(mutex_);
        taken = true;
        if (finished_) {
          // The join ended meanwhile: the event loop takes it from here.
          ::kill(::getpid(), signal);
          return false;
        }
        signal_ = signal;
        for (const std::weak_ptr<StoreClient>& held : connections_) {
          if (const std::shared_ptr<StoreClient> connection = held.lock()) connection->shut_down();
        }
        return false;
      });
      if (taken) return;  // any later one stays pending
      continue;
    }
    if (Clock::now() < next_note) continue;
    std::string what;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      what = waiting_for_;
    }
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start);
    if (!what.empty()) {
      say_(cat("cohort run: ", what, ": ", waited.count(), " s so far, up to ",
               duration_text(patience_), " (--rdzv-timeout)\n"));
    }
    next_note += every_;
  }
}

}  // namespace cohort::detail
