// Starting one worker process.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <sys/types.h>

#include <cohort/launch_env.hpp>

namespace cohort::detail {

class Guardian;

/// Starts `argv` (searched in PATH) with exactly `env`, as posix_spawn does
/// (a child that shares this process's memory until its exec: no copy of
/// the agent's page tables). The worker
/// leads a process group of its own (its pid), reads stdin from `stdin_fd`
/// (/dev/null when -1),
/// writes stdout and stderr to the given pipe ends, has every signal
/// unblocked and at its default, and gets SIGKILL when the thread that
/// spawned it dies (PR_SET_PDEATHSIG), so no worker outlives a SIGKILLed
/// agent. With a `guardian`, the worker tells it its group itself, before it
/// runs anything: a worker that starts children and is seen running by
/// someone who then SIGKILLs the agent is always in the guardian's list.
/// With `cpus`, the worker runs on those CPUs only (--cpu-bind), as it
/// starts. When exec fails the worker writes why to its stderr and exits
/// 127. Returns the pid; throws cohort::Error when no process can be made.
/// `kept_fd`, when not -1, stays open in the worker under its number (its
/// close-on-exec flag is cleared there, not here).
pid_t spawn_worker(const std::vector<std::string>& argv, const Environment& env, int stdout_fd,
                   int stderr_fd, int stdin_fd = -1, Guardian* guardian = nullptr,
                   const std::vector<int>& cpus = {}, int kept_fd = -1);

/// The same with a function instead of a program (cohort::spawn): the worker
/// is a fork of this process that closes every close-on-exec descriptor (as
/// exec would: cohort's own, so that none outlives the agent in a worker),
/// sets `env` as its environment, runs
/// `entry` and exits with what it returns (1 when it throws, after printing
/// what() on stderr). `guardian` and `cpus` as for spawn_worker.
pid_t spawn_function(const std::function<int()>& entry, const Environment& env, int stdout_fd,
                     int stderr_fd, Guardian* guardian = nullptr,
                     const std::vector<int>& cpus = {});

}  // namespace cohort::detail
