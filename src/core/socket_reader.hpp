// A connection's bytes read ahead: one reader of many small frames takes
// them from one receive instead of a receive each (and a poll when one
// waits), as a node's relay reads a batch's answers.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/socket.hpp"

namespace cohort::detail {

/// Reads a blocking or non-blocking socket `fd` (not owned) ahead, up to
/// kReadAhead bytes at a time. Its only reader: bytes it read ahead are no
/// longer in the socket. Every call that receives gives up at `deadline`
/// and fails as recv_all (false, `*error`; "closed the connection").
class SocketReader {
 public:
  static constexpr std::size_t kReadAhead = std::size_t{16} << 10;

  explicit SocketReader(int fd) : fd_(fd) {}

  int fd() const noexcept { return fd_; }
  /// Bytes already read and not yet taken (what a caller may take without
  /// waiting).
  std::size_t buffered() const noexcept { return bytes_.size() - at_; }

  /// Copies the next `size` bytes into `data`.
  bool read(void* data, std::size_t size, Deadline deadline, std::string* error);
  /// Appends the next `count` bytes to `*out`; past kReadAhead, the rest
  /// goes from the socket straight into `*out`.
  bool append_to(std::string* out, std::size_t count, Deadline deadline, std::string* error);
  /// Reads and drops the next `count` bytes.
  bool skip(std::size_t count, Deadline deadline, std::string* error);
  /// Takes up to `count` of the bytes already read (none is received): valid
  /// until the next call. What is left of `count` is still in the socket.
  std::string_view take_buffered(std::size_t count) noexcept;

 private:
  // Receives what the socket has, at least one byte, after what is buffered.
  bool receive_more(Deadline deadline, std::string* error);

  int fd_;
  std::string bytes_;  // bytes_[at_, size()) not yet taken
  std::size_t at_ = 0;
};

}  // namespace cohort::detail
