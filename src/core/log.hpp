// cohort's own diagnostics on stderr: one write(2) per line, so lines from
// many processes and threads never interleave, each prefixed with who wrote
// it. The level comes from COHORT_LOG (error, warn, info, debug; default warn).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace cohort::detail {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

/// Whether messages of `level` are written (reads COHORT_LOG once).
bool log_enabled(LogLevel level) noexcept;

/// Writes "cohort[<pid>] <component>: <message>\n" in one write, if enabled.
void log(LogLevel level, std::string_view component, std::string_view message) noexcept;

/// Lines about one kind of event that outside peers can cause (a refused
/// connection, a full descriptor table): at most `burst` per `window`, the
/// rest counted and said as "(N more like it since ...)" on the next line
/// written, so that nobody can flood a job's stderr through it. Not
/// thread-safe: one per event loop.
class LogLimiter {
 public:
  explicit LogLimiter(int burst = 5, std::chrono::seconds window = std::chrono::seconds(10))
      : burst_(burst), window_(window) {}
  /// Logs `message` unless this window's budget is spent; returns whether it did.
  bool log(LogLevel level, std::string_view component, std::string_view message);
  std::uint64_t suppressed() const noexcept { return suppressed_total_; }

 private:
  int burst_;
  std::chrono::steady_clock::duration window_;
  std::chrono::steady_clock::time_point window_start_{};
  int written_ = 0;
  std::uint64_t suppressed_ = 0;        ///< since the last line written
  std::uint64_t suppressed_total_ = 0;  ///< over the limiter's life
};

}  // namespace cohort::detail
