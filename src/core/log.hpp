// cohort's own diagnostics on stderr: one write(2) per line, so lines from
// many processes and threads never interleave, each prefixed with who wrote
// it. The level comes from COHORT_LOG (error, warn, info, debug; default warn).
#pragma once

#include <string_view>

namespace cohort::detail {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

/// Whether messages of `level` are written (reads COHORT_LOG once).
bool log_enabled(LogLevel level) noexcept;

/// Writes "cohort[<pid>] <component>: <message>\n" in one write, if enabled.
void log(LogLevel level, std::string_view component, std::string_view message) noexcept;

}  // namespace cohort::detail
