#include "comm/backends/gloo/fast_close.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/strings.hpp"

namespace cohort::detail::gloo_backend {

FastClose::FastClose(const std::shared_ptr<::gloo::transport::Device>& device) {
  fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd_ < 0) throw Error(cat("gloo: eventfd failed: ", errno_text(errno)));
  auto& tcp = dynamic_cast<::gloo::transport::tcp::Device&>(*device);
  tcp.registerDescriptor(fd_, EPOLLIN, this);
}

FastClose::~FastClose() {
  if (fd_ >= 0) ::close(fd_);
}

void FastClose::start() noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(fd_, &one, sizeof(one));
}

void FastClose::handleEvents(int) {
  // Nothing to read: staying readable is the point.
}

}  // namespace cohort::detail::gloo_backend
