#include "launch/process_set.hpp"

#include <algorithm>

#include <signal.h>
#include <sys/wait.h>

#include "core/fd.hpp"

namespace cohort::detail {
namespace {

class SystemProcesses : public ProcessControl {
 public:
  void signal_group(pid_t pgid, int signal) override { killpg(pgid, signal); }

  bool ended(pid_t pid) override {
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid != 0;
  }

  int reap(pid_t pid) override {
    int status = 0;
    retry_eintr([&] { return waitpid(pid, &status, 0); });
    return status;
  }
};

}  // namespace

ProcessControl& system_processes() {
  static SystemProcesses processes;
  return processes;
}

ProcessSet::ProcessSet(EventLoop& loop, ProcessControl& control, int deadline)
    : loop_(loop), control_(control), deadline_(deadline) {}

ProcessSet::~ProcessSet() {
  for (Member& member : members_) {
    if (!member.running) continue;
    control_.signal_group(member.pid, SIGKILL);
    control_.reap(member.pid);
  }
}

std::size_t ProcessSet::add(pid_t pid) {
  Member member;
  member.pid = pid;
  member.running = true;
  members_.push_back(member);
  return members_.size() - 1;
}

void ProcessSet::clear() {
  members_.clear();
  stopping_ = false;
  loop_.cancel_deadline(deadline_);
}

bool ProcessSet::any_running() const {
  return std::any_of(members_.begin(), members_.end(),
                     [](const Member& member) { return member.running; });
}

void ProcessSet::reap(const std::function<void(std::size_t)>& before_reap,
                      const std::function<void(std::size_t)>& ended) {
  for (std::size_t i = 0; i < members_.size(); ++i) {
    Member& member = members_[i];
    if (!member.running || !control_.ended(member.pid)) continue;
    control_.signal_group(member.pid, SIGKILL);
    before_reap(i);
    member.wait_status = control_.reap(member.pid);
    member.running = false;
    member.ended = std::chrono::system_clock::now();
    ended(i);
  }
  if (!any_running()) loop_.cancel_deadline(deadline_);
}

void ProcessSet::signal_all(int signal, bool stopping) {
  for (Member& member : members_) {
    if (!member.running) continue;
    if (stopping) member.signalled = true;
    control_.signal_group(member.pid, signal);
  }
}

void ProcessSet::stop(int signal, std::chrono::milliseconds grace) {
  if (stopping_) {
    signal_all(SIGKILL, true);  // asked twice: no more grace
    return;
  }
  stopping_ = true;
  signal_all(signal, true);
  if (any_running()) {
    loop_.set_deadline(deadline_, grace, [this] { signal_all(SIGKILL, true); });
  }
}

}  // namespace cohort::detail
