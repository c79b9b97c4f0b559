#include "core/log.hpp"

#include <cstdlib>
#include <string>

#include <unistd.h>

namespace cohort::detail {
namespace {

// COHORT_LOG, else torchrun's LOGLEVEL (Python's names: DEBUG, INFO,
// WARNING, ERROR, CRITICAL), else warn.
LogLevel level_from_environment() {
  const char* text = std::getenv("COHORT_LOG");
  const std::string_view value = text ? text : "";
  if (value == "error") return LogLevel::error;
  if (value == "info") return LogLevel::info;
  if (value == "debug") return LogLevel::debug;
  if (!value.empty()) return LogLevel::warn;
  const char* python = std::getenv("LOGLEVEL");
  const std::string_view torchrun = python ? python : "";
  if (torchrun == "ERROR" || torchrun == "CRITICAL") return LogLevel::error;
  if (torchrun == "INFO") return LogLevel::info;
  if (torchrun == "DEBUG") return LogLevel::debug;
  return LogLevel::warn;
}

}  // namespace

bool log_enabled(LogLevel level) noexcept {
  static const LogLevel kThreshold = level_from_environment();
  return static_cast<int>(level) <= static_cast<int>(kThreshold);
}

void log(LogLevel level, std::string_view component, std::string_view message) noexcept {
  if (!log_enabled(level)) return;
  try {
    std::string line = "cohort[" + std::to_string(getpid()) + "] ";
    line.append(component).append(": ").append(message).push_back('\n');
    // One write: a line from this process never mixes with another's.
    const char* data = line.data();
    std::size_t left = line.size();
    while (left > 0) {
      const ssize_t n = ::write(STDERR_FILENO, data, left);
      if (n <= 0) return;
      data += n;
      left -= static_cast<std::size_t>(n);
    }
  } catch (...) {
    // Logging never throws; a message lost under memory exhaustion is acceptable.
  }
}

bool LogLimiter::log(LogLevel level, std::string_view component, std::string_view message) {
  const auto now = std::chrono::steady_clock::now();
  if (now - window_start_ >= window_) {
    window_start_ = now;
    written_ = 0;
  }
  if (written_ >= burst_) {
    ++suppressed_;
    ++suppressed_total_;
    return false;
  }
  ++written_;
  if (suppressed_ == 0) {
    detail::log(level, component, message);
  } else {
    std::string line(message);
    line += " (and " + std::to_string(suppressed_) + " more like it not shown)";
    detail::log(level, component, line);
    suppressed_ = 0;
  }
  return true;
}

}  // namespace cohort::detail
