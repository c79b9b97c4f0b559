#include "launch/console.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include <signal.h>
#include <unistd.h>

#include "core/fd.hpp"
#include "core/strings.hpp"
#include "core/thread_name.hpp"
#include "launch/output.hpp"

namespace cohort::detail {
namespace {

using Clock = std::chrono::steady_clock;

// A reader takes this much at a time at most: progress is seen per piece.
constexpr std::size_t kPieceBytes = std::size_t{64} << 10;

struct Stream {
  int fd = -1;
  const char* name = "";
  std::deque<std::string> queue;
  std::size_t bytes = 0;            // queued
  std::uint64_t dropped_lines = 0;  // since the last marker
  bool writing = false;             // the writer holds a chunk of it
  // When the reader last took a piece; while it takes nothing for
  // kStalledReader with bytes pending, it counts as stalled.
  std::atomic<Clock::rep> progress{0};
};

// One writer thread per stream, started at the first write and never
// joined: it may be blocked in write(2) on a reader that is gone for good,
// and the process must be able to exit all the same. Two, so that a stdout
// nobody reads never holds back stderr (and the launcher's report on it).
class Console {
 public:
  static Console& instance() {
    static Console* console = new Console();  // outlives static destructors on purpose
    return *console;
  }

  void write(int fd, std::string_view text, bool droppable) {
    std::lock_guard<std::mutex> lock(mutex_);
    const int index = fd == STDOUT_FILENO ? 0 : 1;
    Stream& stream = streams_[index];
    if (droppable && stream.bytes + text.size() > kConsoleBufferBytes) {
      std::uint64_t lines = 0;
      for (char c : text)
        lines += c == '\n';
      stream.dropped_lines += lines == 0 ? 1 : lines;
      return;
    }
    if (stream.queue.empty() && !stream.writing && stream.dropped_lines == 0) {
      // Nothing ahead of it: what the reader takes at once goes now, from
      // this thread, with no writer thread to start or wake (a one-rank
      // job's only line started one at the job's end: 6.78 -> 6.59 ms for
      // `cohort run -n 1` of the hello, 80 starts each). The rest goes
      // through the writer, as everything does where the reader cannot
      // take a write without waiting (a terminal, most files).
      text.remove_prefix(write_without_waiting(stream.fd, text));
      if (text.empty()) return;
    }
    if (stream.queue.empty()) stream.progress = Clock::now().time_since_epoch().count();
    stream.queue.emplace_back(text);
    stream.bytes += text.size();
    if (!started_[index]) {
      started_[index] = true;
      std::thread([this, index] {
        name_this_thread("cohort-console");
        run(streams_[index]);
      }).detach();
    }
    wake_.notify_all();
  }

  bool behind(int fd) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Stream& stream = fd == STDOUT_FILENO ? streams_[0] : streams_[1];
    if (stream.bytes < kConsoleHighWater) return false;
    const Clock::time_point last{Clock::duration(stream.progress.load())};
    return Clock::now() - last < kStalledReader;
  }

  bool flush(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return idle_.wait_for(lock, timeout, [this] {
      for (const Stream& stream : streams_) {
        if (!stream.queue.empty() || stream.writing || stream.dropped_lines > 0) return false;
      }
      return true;
    });
  }

 private:
  Console() {
    streams_[0].fd = STDOUT_FILENO;
    streams_[0].name = "standard output";
    streams_[1].fd = STDERR_FILENO;
    streams_[1].name = "standard error";
  }

  void run(Stream& stream) {
    // No signal is this thread's business: a job's SIGTERM must reach the
    // agent's signalfd, and a reader that went away must make write(2) fail
    // with EPIPE here, not kill the process with SIGPIPE.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return !stream.queue.empty() || stream.dropped_lines > 0; });
      std::string chunk;
      if (stream.dropped_lines > 0) {
        chunk =
            cat("cohort run: ", stream.dropped_lines, " line", stream.dropped_lines == 1 ? "" : "s",
                " of output dropped here: the reader of ", stream.name, " took nothing for ",
                kStalledReader.count(), " s (--log-dir keeps every line)\n");
        stream.dropped_lines = 0;
      }
      while (!stream.queue.empty() && chunk.size() < (std::size_t{1} << 20)) {
        chunk += stream.queue.front();
        stream.queue.pop_front();
      }
      stream.writing = true;
      lock.unlock();
      for (std::string_view left = chunk; !left.empty();) {
        const std::string_view piece = left.substr(0, kPieceBytes);
        write_fully(stream.fd, piece);  // may block: only this thread waits
        left.remove_prefix(piece.size());
        stream.progress = Clock::now().time_since_epoch().count();
        std::lock_guard<std::mutex> count(mutex_);
        stream.bytes -= std::min(stream.bytes, piece.size());
      }
      lock.lock();
      stream.writing = false;
      idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  Stream streams_[2];
  bool started_[2] = {false, false};
};

}  // namespace

void console_write(int fd, std::string_view text, bool droppable) {
  if (fd != STDOUT_FILENO && fd != STDERR_FILENO) return write_fully(fd, text);
  Console::instance().write(fd, text, droppable);
}

bool console_behind(int fd) {
  if (fd != STDOUT_FILENO && fd != STDERR_FILENO) return false;
  return Console::instance().behind(fd);
}

bool console_flush(std::chrono::milliseconds timeout) {
  return Console::instance().flush(timeout);
}

}  // namespace cohort::detail
