#include "launch/console.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include <signal.h>
#include <unistd.h>

#include "core/strings.hpp"
#include "launch/output.hpp"

namespace cohort::detail {
namespace {

struct Stream {
  int fd = -1;
  const char* name = "";
  std::deque<std::string> queue;
  std::size_t bytes = 0;            // queued
  std::uint64_t dropped_lines = 0;  // since the last marker
  bool writing = false;             // the writer holds a chunk of it
};

// One writer thread for both streams, started at the first write and never
// joined: it may be blocked in write(2) on a reader that is gone for good,
// and the process must be able to exit all the same.
class Console {
 public:
  static Console& instance() {
    static Console* console = new Console();  // outlives static destructors on purpose
    return *console;
  }

  void write(int fd, std::string_view text) {
    std::lock_guard<std::mutex> lock(mutex_);
    Stream& stream = fd == STDOUT_FILENO ? streams_[0] : streams_[1];
    if (stream.bytes + text.size() > kConsoleBufferBytes) {
      std::uint64_t lines = 0;
      for (char c : text)
        lines += c == '\n';
      stream.dropped_lines += lines == 0 ? 1 : lines;
      return;
    }
    stream.queue.emplace_back(text);
    stream.bytes += text.size();
    if (!thread_started_) {
      thread_started_ = true;
      std::thread([this] { run(); }).detach();
    }
    wake_.notify_all();
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

  void run() {
    // No signal is this thread's business: a job's SIGTERM must reach the
    // agent's signalfd, and a reader that went away must make write(2) fail
    // with EPIPE here, not kill the process with SIGPIPE.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] {
        return !streams_[0].queue.empty() || !streams_[1].queue.empty() ||
               streams_[0].dropped_lines > 0 || streams_[1].dropped_lines > 0;
      });
      for (Stream& stream : streams_) {
        std::string chunk;
        if (stream.dropped_lines > 0) {
          chunk =
              cat("cohort run: ", stream.dropped_lines, " line",
                  stream.dropped_lines == 1 ? "" : "s", " of output dropped here: the reader of ",
                  stream.name, " stopped reading (--log-dir keeps every line)\n");
          stream.dropped_lines = 0;
        }
        while (!stream.queue.empty() && chunk.size() < (std::size_t{1} << 20)) {
          chunk += stream.queue.front();
          stream.bytes -= stream.queue.front().size();
          stream.queue.pop_front();
        }
        if (chunk.empty()) continue;
        stream.writing = true;
        lock.unlock();
        write_fully(stream.fd, chunk);  // may block: only this thread waits
        lock.lock();
        stream.writing = false;
      }
      idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  Stream streams_[2];
  bool thread_started_ = false;
};

}  // namespace

void console_write(int fd, std::string_view text) {
  if (fd != STDOUT_FILENO && fd != STDERR_FILENO) return write_fully(fd, text);
  Console::instance().write(fd, text);
}

bool console_flush(std::chrono::milliseconds timeout) {
  return Console::instance().flush(timeout);
}

}  // namespace cohort::detail
