// Names for the threads cohort starts in a user's process, so that `top -H`,
// `ps -L`, gdb and perf tell them from the program's own ("cohort-relay").
#pragma once

#include <string_view>

namespace cohort::detail {

/// Names the calling thread: the first 15 bytes of `name` (the kernel's
/// limit). Best effort: a name that cannot be set changes nothing else.
void name_this_thread(std::string_view name) noexcept;

}  // namespace cohort::detail
