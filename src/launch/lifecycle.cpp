#include "launch/lifecycle.hpp"

#include <signal.h>
#include <sys/wait.h>

#include "core/strings.hpp"
#include "launch/exit_status.hpp"

namespace cohort::detail {

sigset_t signals_that_stop_the_job() noexcept {
  sigset_t stops;
  sigemptyset(&stops);
  for (int signal : {SIGTERM, SIGINT, SIGHUP, SIGQUIT})
    sigaddset(&stops, signal);
  return stops;
}

bool stops_the_job(int signal) noexcept {
  const sigset_t stops = signals_that_stop_the_job();
  return sigismember(&stops, signal) == 1;  // -1 for no signal at all
}

void Lifecycle::begin_attempt(int node_rank) {
  facts_.node_rank = node_rank;
  cause_ = StopCause::none;
  stop_signal_ = 0;
  first_failure_ = -1;
  own_record_.reset();
  first_stop_.reset();
  own_stop_ = false;
}

LifecycleActions Lifecycle::stop(StopCause cause, int signal, int rank, int exit_code,
                                 const std::string& summary) {
  cause_ = cause;
  LifecycleActions actions;
  if (cause == StopCause::timeout) actions.push_back(LifecycleAction::note_running());
  actions.push_back(LifecycleAction::stop(signal));
  tell(rank, exit_code, summary, actions);
  return actions;
}

void Lifecycle::tell(int rank, int exit_code, const std::string& summary,
                     LifecycleActions& actions) {
  StopRecord mine;
  mine.node = facts_.node_rank;
  mine.host = facts_.host;
  mine.rank = rank;
  mine.exit_code = exit_code;
  mine.summary = summary;
  own_record_ = mine;
  if (facts_.multi_node) actions.push_back(LifecycleAction::tell(mine));
}

LifecycleActions Lifecycle::signal(int signal) {
  if (!stops_the_job(signal)) return {LifecycleAction::forward(signal)};
  // Asked again while stopping: the process set takes the grace away.
  if (cause_ != StopCause::none) return {LifecycleAction::stop(signal)};
  stop_signal_ = signal;
  return stop(StopCause::signal, signal, -1, stop_exit_code(signal),
              cat("cohort run on ", facts_.host, " was stopped by ", signal_name(signal)));
}

LifecycleActions Lifecycle::worker_exited(int index, int rank, int wait_status) {
  const bool failed = !(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
  if (!failed || cause_ != StopCause::none) return {};
  first_failure_ = index;
  return stop(StopCause::worker_failed, SIGTERM, rank, shell_exit_code(wait_status),
              cat("rank ", rank, " failed: ", describe_exit_briefly(wait_status)));
}

LifecycleActions Lifecycle::timed_out() {
  if (cause_ != StopCause::none) return {};
  return stop(
      StopCause::timeout, SIGTERM, -1, kTimeoutExitCode,
      cat("the job ran past --timeout ", static_cast<double>(facts_.timeout.count()) / 1000, " s"));
}

LifecycleActions Lifecycle::launcher_gone() {
  if (cause_ != StopCause::none) return {};
  stop_signal_ = SIGHUP;
  return stop(StopCause::signal, SIGTERM, -1, stop_exit_code(SIGHUP),
              cat("the connection to the launcher of the agent on ", facts_.host, " closed"));
}

LifecycleActions Lifecycle::unservable(const std::string& why) {
  if (cause_ != StopCause::none) return {};
  unservable_why_ = why;
  return stop(StopCause::unservable, SIGTERM, -1, 1, cat("a worker can never rendezvous: ", why));
}

LifecycleActions Lifecycle::stopped_elsewhere(const StopRecord& record) {
  if (cause_ != StopCause::none) return {};
  cause_ = StopCause::elsewhere;
  first_stop_ = record;
  return {LifecycleAction::stop(SIGTERM)};
}

LifecycleActions Lifecycle::stopped_between_attempts(int signal) {
  LifecycleActions actions;
  tell(-1, stop_exit_code(signal),
       cat("cohort run on ", facts_.host, " was stopped by ", signal_name(signal)), actions);
  return actions;
}

LifecycleActions Lifecycle::program_unrunnable(int exit_code, const std::string& why) {
  if (cause_ != StopCause::none) return {};
  // No worker runs yet: only the other nodes are told; the exit status is
  // the job's stop's.
  LifecycleActions actions;
  tell(-1, exit_code, why, actions);
  return actions;
}

void Lifecycle::declared(const StopRecord& winner, const StopRecord& mine) {
  first_stop_ = winner;
  own_stop_ =
      winner.node == mine.node && winner.rank == mine.rank && winner.summary == mine.summary;
}

void Lifecycle::settled(const StopRecord& verdict) {
  if (!first_stop_ || verdict.encode() != first_stop_->encode()) own_stop_ = false;
  first_stop_ = verdict;
}

bool Lifecycle::restarts_alone(int attempt) const noexcept {
  return cause_ == StopCause::worker_failed && own_record_ &&
         facts_.budget.restartable(*own_record_, attempt, 1);
}

int Lifecycle::exit_code(int first_failure_status) const noexcept {
  if (first_stop_) return first_stop_->exit_code;
  switch (cause_) {
    case StopCause::signal:
      return stop_exit_code(stop_signal_);
    case StopCause::timeout:
      return kTimeoutExitCode;
    case StopCause::unservable:
      return 1;
    case StopCause::worker_failed:
      return shell_exit_code(first_failure_status);
    case StopCause::elsewhere:
    case StopCause::none:
      break;
  }
  return 0;
}

}  // namespace cohort::detail
