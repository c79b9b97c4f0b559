// A cable on loopback that a test can cut: what a node cut off from the
// network looks like to its connections, without network namespaces.
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <poll.h>
#include <sys/socket.h>

#include "core/fd.hpp"
#include "core/socket.hpp"

namespace cohort::test {

// A cable on loopback to the store on `to_port` that can be cut: it passes
// bytes both ways until cut(), then passes nothing and closes nothing, as a
// cut network does (a cut-off node's connections stay open, silent), until
// it is destroyed.
class Cable {
 public:
  explicit Cable(int to_port)
      : listener_(detail::listen_tcp("127.0.0.1", 0)),
        to_port_(to_port),
        thread_([this] { run(); }) {}
  ~Cable() {
    quit_ = true;
    thread_.join();
  }
  int port() const { return listener_.port; }
  void cut() { cut_ = true; }

 private:
  void run() {
    std::vector<std::pair<detail::Fd, detail::Fd>> ends;  // (accepted, to the store)
    while (!quit_) {
      if (cut_) {  // nothing passes, nothing closes, nobody new gets through
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      std::vector<pollfd> fds{{listener_.fd.get(), POLLIN, 0}};
      for (const auto& [near, far] : ends) {
        fds.push_back({near.get(), POLLIN, 0});
        fds.push_back({far.get(), POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      const std::size_t polled = ends.size();  // a pair accepted now was not
      if (fds[0].revents & POLLIN) {
        detail::Fd near(::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
        std::string error;
        detail::Fd far = detail::connect_tcp(
            "127.0.0.1", to_port_, detail::deadline_after(std::chrono::milliseconds(2000)), &error);
        if (near.valid() && far.valid()) ends.emplace_back(std::move(near), std::move(far));
      }
      // Both ends of a pair close when either does (the other sees it).
      for (std::size_t i = polled; i-- > 0;) {
        bool closed = false;
        for (int side = 0; side < 2 && !closed; ++side) {
          if (!(fds[1 + 2 * i + side].revents & (POLLIN | POLLHUP | POLLERR))) continue;
          const int from = side == 0 ? ends[i].first.get() : ends[i].second.get();
          const int to = side == 0 ? ends[i].second.get() : ends[i].first.get();
          char bytes[65536];
          const ssize_t got = ::recv(from, bytes, sizeof(bytes), MSG_DONTWAIT);
          std::string error;
          closed =
              got == 0 || (got < 0 && errno != EAGAIN) ||
              (got > 0 &&
               !detail::send_all(to, bytes, static_cast<std::size_t>(got),
                                 detail::deadline_after(std::chrono::milliseconds(2000)), &error));
        }
        if (closed) ends.erase(ends.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  }

  detail::Listener listener_;
  int to_port_;
  std::atomic<bool> cut_{false};
  std::atomic<bool> quit_{false};
  std::thread thread_;
};

}  // namespace cohort::test
