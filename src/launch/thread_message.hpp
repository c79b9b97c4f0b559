// A line of text that another thread (the store's) hands to an event loop:
// `post` from any thread, then the loop finds `fd()` readable and `take`s
// the latest text.
#pragma once

#include <cerrno>
#include <cstdint>
#include <mutex>
#include <string>

#include <sys/eventfd.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/strings.hpp"

namespace cohort::detail {

class ThreadMessage {
 public:
  ThreadMessage() : event_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (!event_.valid()) throw Error(cat("cohort run: eventfd failed: ", errno_text(errno)));
  }

  int fd() const noexcept { return event_.get(); }

  void post(const std::string& text) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      text_ = text;
    }
    const std::uint64_t one = 1;
    (void)!::write(event_.get(), &one, sizeof(one));
  }

  std::string take() {
    std::uint64_t count = 0;
    (void)!::read(event_.get(), &count, sizeof(count));
    const std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 private:
  Fd event_;
  std::mutex mutex_;
  std::string text_;
};

}  // namespace cohort::detail
