// PROGRAM is checked once, before any worker starts: a typo then costs one
// line and the shell's status (127 not found, 126 not executable) instead of
// one exec error per rank and a failure report.
#pragma once

#include <cohort/launch.hpp>
#include <cohort/launch_env.hpp>

namespace cohort::detail {

/// Checks what worker_argv would exec: the interpreter for the Python forms
/// (and that a .py script exists), PROGRAM itself otherwise, searched in
/// `env`'s PATH when it has no '/'. Throws cohort::ProgramError.
void check_program(const RunOptions& options, const Environment& env);

}  // namespace cohort::detail
