// The launcher's own standard output and error, as seen by whoever reads
// them (a terminal, a pipe into `tee`, a log collector). Written from a
// thread per stream through a buffer, so that a reader that stops reading
// never stops the launcher (signals, --grace and --timeout are enforced
// whatever the console does), and stdout and stderr never wait for each
// other; a write with nothing queued before it that the reader takes at
// once (a pipe or a socket with room: write_without_waiting) goes straight
// from the caller instead.
//
// Workers' output is held back, not dropped, while the reader is merely
// slow: past kConsoleHighWater bytes queued for a stream, console_behind()
// says so, the agent stops reading the workers' pipes, and the workers
// wait in write(2) as they would on a slow terminal. Only when the reader
// takes nothing at all for kStalledReader is workers' output dropped, in
// whole writes (whole lines), past kConsoleBufferBytes; once the reader
// takes output again, one line says how many lines were dropped. The
// launcher's own lines (its report) are never dropped. Log files
// (--log-dir) are written directly and lose nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>

namespace cohort::detail {

/// Bytes queued for one stream past which workers' output waits.
inline constexpr std::size_t kConsoleHighWater = std::size_t{4} << 20;
/// Bytes held for one stream before workers' output is dropped (only once
/// the reader stalled).
inline constexpr std::size_t kConsoleBufferBytes = std::size_t{8} << 20;
/// A reader that takes nothing for this long with output pending stalled.
inline constexpr std::chrono::seconds kStalledReader{10};

/// Queues `text` for `fd` (STDOUT_FILENO or STDERR_FILENO); never blocks.
/// Other descriptors are written directly. `droppable`: workers' output,
/// which a stalled reader loses (counted); the launcher's own never is.
void console_write(int fd, std::string_view text, bool droppable = false);
/// Whether the reader of `fd` is behind but taking output: workers'
/// output for it should wait (the agent stops reading their pipes).
bool console_behind(int fd);

/// Waits until everything queued was written, or `timeout` passes; returns
/// whether everything was. Called before the launcher returns.
bool console_flush(std::chrono::milliseconds timeout);

}  // namespace cohort::detail
