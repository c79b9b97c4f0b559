#include "launch/orphans.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fd.hpp"
#include "core/socket.hpp"

namespace cohort::detail {
namespace {

// The parent pid and process group in /proc/<pid>/stat: the fields after
// the state, which follows the last ')' (a command name may contain ')').
struct Parentage {
  pid_t parent = -1;
  pid_t group = -1;
};

// Read with two system calls into a buffer on the stack: without
// /proc/self/task/*/children, every process on the node is read at the end
// of every job, and a C++ stream costs several times that (2 ms for 150
// processes).
Parentage parentage_of(int proc, const char* pid) {
  char path[32];
  std::snprintf(path, sizeof(path), "%s/stat", pid);
  const Fd fd(::openat(proc, path, O_RDONLY | O_CLOEXEC));
  Parentage out;
  if (!fd.valid()) return out;
  char stat[1024];
  const ssize_t n = retry_eintr([&] { return ::read(fd.get(), stat, sizeof(stat) - 1); });
  if (n <= 0) return out;
  stat[n] = '\0';
  const char* close = std::strrchr(stat, ')');
  if (close == nullptr || close + 4 >= stat + n) return out;
  char* end = nullptr;
  out.parent = static_cast<pid_t>(std::strtol(close + 4, &end, 10));
  out.group = static_cast<pid_t>(std::strtol(end, nullptr, 10));
  return out;
}

// Reaps the exited children of `running` without waiting and keeps the
// others: a reaped pid may be reused at once, so it is never signalled again.
void reap_exited(std::vector<Orphan>& running) {
  std::erase_if(running, [](const Orphan& orphan) {
    int status = 0;
    return retry_eintr([&] { return waitpid(orphan.pid, &status, WNOHANG); }) != 0;
  });
}

// Every process whose parent is this one: the pids that
// /proc/self/task/*/children list (each thread's: a child belongs to the
// thread that forked it, and an orphan is handed to any live one), or, on a
// kernel without those files (CONFIG_PROC_CHILDREN), a scan of every process
// in /proc: on a node with thousands of processes, milliseconds at the end
// of every job instead of microseconds.
std::vector<pid_t> children_of_this_process(int proc) {
  std::vector<pid_t> pids;
  const std::string tasks = "/proc/self/task/";
  if (::access((tasks + std::to_string(getpid()) + "/children").c_str(), R_OK) == 0) {
    if (DIR* threads = opendir(tasks.c_str())) {
      while (const dirent* thread = readdir(threads)) {
        std::ifstream list(tasks + thread->d_name + "/children");  // "." and ".." have none
        for (pid_t pid = 0; list >> pid;)
          pids.push_back(pid);
      }
      closedir(threads);
      return pids;
    }
  }
  DIR* all = fdopendir(::dup(proc));
  if (all == nullptr) return pids;
  const pid_t self = getpid();
  while (const dirent* entry = readdir(all)) {
    const std::string name = entry->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (parentage_of(proc, name.c_str()).parent == self) pids.push_back(std::atoi(name.c_str()));
  }
  closedir(all);
  return pids;
}

}  // namespace

bool adopt_orphans() noexcept {
  return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
}

std::vector<Orphan> adopted_orphans(const std::set<pid_t>& known) {
  std::vector<Orphan> orphans;
  const Fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!proc.valid()) return orphans;
  const pid_t self = getpid();
  for (const pid_t pid : children_of_this_process(proc.get())) {
    if (known.count(pid) != 0) continue;
    const std::string name = std::to_string(pid);
    const Parentage parentage = parentage_of(proc.get(), name.c_str());
    if (parentage.parent != self) continue;  // reaped and reused since it was listed
    Orphan orphan{pid, "", parentage.group};
    std::ifstream("/proc/" + name + "/comm") >> orphan.command;
    orphans.push_back(orphan);
  }
  return orphans;
}

std::vector<Orphan> stop_orphans(const std::set<pid_t>& known,
                                 const std::set<pid_t>& stopped_groups,
                                 std::chrono::milliseconds grace) {
  std::vector<Orphan> stopped;
  for (;;) {
    std::vector<Orphan> running = adopted_orphans(known);
    if (running.empty()) return stopped;
    for (const Orphan& orphan : running) {
      if (stopped_groups.count(orphan.group) != 0) continue;  // SIGKILLed with its group
      stopped.push_back(orphan);
      kill(orphan.pid, SIGTERM);
    }
    const Deadline deadline = deadline_after(grace);
    for (reap_exited(running); !running.empty() && Clock::now() < deadline; reap_exited(running))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (const Orphan& orphan : running) {
      kill(orphan.pid, SIGKILL);  // still our unreaped child: the pid is its own
      int status = 0;
      retry_eintr([&] { return waitpid(orphan.pid, &status, 0); });
    }
  }
}

}  // namespace cohort::detail
