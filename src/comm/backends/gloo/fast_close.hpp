// Closing a Gloo TCP context without its waits.
//
// Each tcp::Pair, when closed, waits for the device loop's next tick, and
// the loop's epoll_wait sleeps up to 10 ms between ticks; destroying the
// device then waits for one more. A group of n ranks so spends up to
// 10 ms × n in every rank's teardown. A FastClose registers an eventfd with
// the device's loop; while it is readable (level-triggered, never read) the
// loop ticks without sleeping, so every wait ends at once.
#pragma once

#include <memory>

#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/loop.h>

namespace cohort::detail::gloo_backend {

class FastClose final : public ::gloo::transport::tcp::Handler {
 public:
  /// Registers with `device`'s loop; throws Error when no eventfd can be made.
  explicit FastClose(const std::shared_ptr<::gloo::transport::Device>& device);
  /// Closes the eventfd: destroy it after the device.
  ~FastClose() override;
  FastClose(const FastClose&) = delete;
  FastClose& operator=(const FastClose&) = delete;

  /// From now on the loop spins: call right before destroying pairs and device.
  void start() noexcept;

  void handleEvents(int events) override;

 private:
  int fd_ = -1;
};

}  // namespace cohort::detail::gloo_backend
