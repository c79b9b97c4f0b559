// Routes one worker stream (stdout or stderr) to the console and to its log
// file. Console output goes out in whole lines, each with the rank's prefix,
// in one write per batch, so lines of different workers never mix mid-line.
// The last lines of stderr are kept for the failure report.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "core/fd.hpp"

namespace cohort::detail {

/// A line is cut (and goes on as the next) only once this many bytes came
/// without a newline: a worker that never prints one must not make the
/// agent buffer without bound.
inline constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;

/// What a terminal is shown of a worker's line (`line` ends in '\n'): a
/// rank must not be able to move the cursor, overwrite its prefix, retitle
/// the window or forge a line of the launcher's. A carriage return keeps
/// what follows the last one (what the terminal would have shown, but after
/// the prefix; "\r\n" is a newline); colors (ESC [ ... m) pass; every other
/// control character but tab is shown as ^X (DEL as ^?), as `cat -v` does.
/// Log files and a console that is no terminal get the bytes as written.
std::string terminal_safe(std::string_view line);

/// "[{rank}] " with {rank}, {local_rank} and {host} replaced.
std::string format_prefix(std::string_view pattern, int rank, int local_rank,
                          std::string_view host);

class OutputStream {
 public:
  /// `console_fd` < 0: this stream does not reach the console. `log_fd` may be
  /// invalid (no --log-dir). `keep_tail` > 0 keeps that many last lines.
  OutputStream(int console_fd, std::string prefix, Fd log_fd, std::size_t keep_tail);

  /// Takes bytes read from the worker's pipe.
  void feed(std::string_view data);
  /// The pipe reached EOF: an unterminated last line goes out with a newline.
  void finish();

  const std::deque<std::string>& tail() const noexcept { return tail_; }
  /// Where its lines go on the console, -1 for nowhere.
  int console_fd() const noexcept { return console_fd_; }
  /// The last complete line (without '\n', cut at 1000 bytes), and how many
  /// lines of any stream came before it: which stream spoke last.
  const std::string& last_line() const noexcept { return last_line_; }
  std::uint64_t last_line_at() const noexcept { return last_line_at_; }

 private:
  void emit_lines(std::string_view lines);  // complete lines, each ending in '\n'
  void remember(std::string_view line);

  int console_fd_;
  std::string prefix_;
  Fd log_fd_;
  std::size_t keep_tail_;
  bool terminal_ = false;  // the console is a terminal: lines are terminal_safe()
  std::string partial_;
  std::deque<std::string> tail_;
  std::string last_line_;
  std::uint64_t last_line_at_ = 0;
};

/// Writes all of `data` to `fd`, retrying short writes and EINTR; gives up
/// silently when the reader is gone (EPIPE): output must never stop a job.
void write_fully(int fd, std::string_view data) noexcept;

}  // namespace cohort::detail
