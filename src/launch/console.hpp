// The launcher's own standard output and error, as seen by whoever reads
// them (a terminal, a pipe into `tee`, a log collector). Written from a
// thread of their own through a bounded buffer, so that a reader that stops
// reading never stops the launcher: signals, --grace and --timeout are
// enforced whatever the console does.
//
// When the buffer of a stream is full, what comes next is dropped in whole
// writes (whole lines: callers write lines) and counted; once the reader
// takes output again, one line says how many lines were dropped before the
// output goes on. Log files (--log-dir) are written directly and lose nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>

namespace cohort::detail {

/// Bytes held for one stream before output is dropped.
inline constexpr std::size_t kConsoleBufferBytes = std::size_t{8} << 20;

/// Queues `text` for `fd` (STDOUT_FILENO or STDERR_FILENO); never blocks.
/// Other descriptors are written directly.
void console_write(int fd, std::string_view text);

/// Waits until everything queued was written, or `timeout` passes; returns
/// whether everything was. Called before the launcher returns.
bool console_flush(std::chrono::milliseconds timeout);

}  // namespace cohort::detail
