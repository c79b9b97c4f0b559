#include "launch/spawn.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/strings.hpp"
#include "launch/guardian.hpp"

namespace cohort::detail {
namespace {

// Only async-signal-safe calls between fork and exec.
void write_error(const char* what, const char* detail) {
  const char* parts[] = {"cohort run: cannot start worker: ", what, ": ", detail, "\n"};
  for (const char* part : parts)
    (void)!::write(STDERR_FILENO, part, std::strlen(part));
}

}  // namespace

namespace {

// A CPU set for sched_setaffinity, made before fork (the child may not
// allocate); empty `cpus`: none.
class CpuMask {
 public:
  explicit CpuMask(const std::vector<int>& cpus) {
    if (cpus.empty()) return;
    const int count = *std::max_element(cpus.begin(), cpus.end()) + 1;
    set_ = CPU_ALLOC(count);
    size_ = CPU_ALLOC_SIZE(count);
    if (set_ == nullptr) throw Error("cohort run: out of memory for a CPU mask");
    CPU_ZERO_S(size_, set_);
    for (int cpu : cpus)
      CPU_SET_S(cpu, size_, set_);
  }
  ~CpuMask() {
    if (set_ != nullptr) CPU_FREE(set_);
  }
  CpuMask(const CpuMask&) = delete;
  CpuMask& operator=(const CpuMask&) = delete;
  // In the child: async-signal-safe.
  void apply() const {
    if (set_ != nullptr && sched_setaffinity(0, size_, set_) != 0) {
      write_error("sched_setaffinity (--cpu-bind)", std::strerror(errno));
    }
  }

 private:
  cpu_set_t* set_ = nullptr;
  std::size_t size_ = 0;
};

// What a worker's process does before it runs anything of its own: its
// process group, parent-death signal, standard streams, default signals and
// CPUs. Async-signal-safe, and writes no memory of this process's: it also
// runs in a child that shares it (start_program).
struct ChildSetup {
  int stdout_fd = -1;
  int stderr_fd = -1;
  int stdin_fd = -1;  // -1: /dev/null
  int dev_null = -1;
  int kept_fd = -1;  // cleared of close-on-exec
  Guardian* guardian = nullptr;
  const CpuMask* cpus = nullptr;
  pid_t parent = 0;
};

void set_up_child(const ChildSetup& setup) {
  setpgid(0, 0);
  // Here, not in the parent after fork returns: under load the parent may
  // not run again before the worker has started children and the agent is
  // SIGKILLed, and a group the guardian never heard of outlives the job.
  if (setup.guardian != nullptr) setup.guardian->watch(getpid());
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != setup.parent) _exit(127);  // the agent died before prctl took effect
  if (setup.stdin_fd >= 0) {
    dup2(setup.stdin_fd, STDIN_FILENO);
  } else {
    dup2(setup.dev_null >= 0 ? setup.dev_null : STDIN_FILENO, STDIN_FILENO);
  }
  dup2(setup.stdout_fd, STDOUT_FILENO);
  dup2(setup.stderr_fd, STDERR_FILENO);
  if (setup.kept_fd >= 0) fcntl(setup.kept_fd, F_SETFD, 0);
  for (int signal = 1; signal < NSIG; ++signal) {
    if (signal != SIGKILL && signal != SIGSTOP) ::signal(signal, SIG_DFL);
  }
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  setup.cpus->apply();
}

// Fork, then set_up_child; returns 0 in the worker, its pid in the parent.
pid_t fork_worker(int stdout_fd, int stderr_fd, Guardian* guardian, const CpuMask& cpus) {
  Fd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const ChildSetup setup{stdout_fd, stderr_fd, -1, dev_null.get(), -1, guardian, &cpus, getpid()};
  const pid_t pid = fork();
  if (pid < 0)
    throw Error(cat("fork failed: ", errno_text(errno), " (out of processes or memory?)"));
  if (pid > 0) {
    setpgid(pid, pid);  // also in the child: whichever runs first
    return pid;
  }
  set_up_child(setup);
  return 0;
}

struct ProgramStart {
  ChildSetup setup;
  char** argv = nullptr;
  char** envp = nullptr;
};

int run_program(void* start) {
  const auto& program = *static_cast<const ProgramStart*>(start);
  set_up_child(program.setup);
  execvpe(program.argv[0], program.argv, program.envp);
  write_error(program.argv[0], std::strerror(errno));
  _exit(127);
}

// Starts a program as posix_spawn does: a child that shares this process's
// memory, on a stack of its own, while this thread waits for its exec. A
// fork would copy the page tables of an agent that maps its libraries and
// threads (about 0.4 ms a worker here), only for exec to drop them. Every
// signal is blocked meanwhile, so no handler of this process runs in the
// child before set_up_child sets the defaults.
pid_t start_program(ProgramStart& start) {
  // Room for execvpe's PATH search and its argv for a script without #!.
  constexpr std::size_t kStackBytes = std::size_t{256} * 1024;
  void* stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
  if (stack == MAP_FAILED) {
    throw Error(cat("cannot start a worker: no memory for its stack: ", errno_text(errno)));
  }
  sigset_t all;
  sigset_t was;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &was);
  const pid_t pid = clone(run_program, static_cast<char*>(stack) + kStackBytes,
                          CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
  const int error = errno;
  pthread_sigmask(SIG_SETMASK, &was, nullptr);
  munmap(stack, kStackBytes);
  if (pid < 0) {
    throw Error(cat("cannot start a worker: clone failed: ", errno_text(error),
                    " (out of processes or memory?)"));
  }
  setpgid(pid, pid);  // also in the child: whichever runs first
  return pid;
}

// A forked worker keeps what an exec'd one would: every descriptor marked
// close-on-exec is closed. cohort opens all of its own that way (the
// guardian's pipe, the store's listening sockets, other workers' pipes):
// held by a worker, they would keep the guardian from noticing the agent's
// death and the store's port bound after the job.
void close_what_exec_would_close() {
  std::vector<int> marked;
  if (DIR* dir = opendir("/proc/self/fd")) {
    const int own = dirfd(dir);
    while (const dirent* entry = readdir(dir)) {
      const int fd = std::atoi(entry->d_name);
      if (fd > STDERR_FILENO && fd != own && (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0) {
        marked.push_back(fd);
      }
    }
    closedir(dir);
  }
  for (int fd : marked)
    ::close(fd);
}

}  // namespace

pid_t spawn_function(const std::function<int()>& entry, const Environment& env, int stdout_fd,
                     int stderr_fd, Guardian* guardian, const std::vector<int>& cpus) {
  const CpuMask mask(cpus);
  const pid_t pid = fork_worker(stdout_fd, stderr_fd, guardian, mask);
  if (pid > 0) return pid;
  // The worker: a copy of this process, with only the forking thread.
  close_what_exec_would_close();
  clearenv();
  for (const auto& [name, value] : env)
    setenv(name.c_str(), value.c_str(), 1);
  int code = 1;
  try {
    code = entry();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "cohort::spawn: the worker function threw: %s\n", error.what());
  } catch (...) {
    std::fprintf(stderr,
                 "cohort::spawn: the worker function threw something not a std::exception\n");
  }
  std::fflush(nullptr);
  _exit(code);
}

pid_t spawn_worker(const std::vector<std::string>& argv, const Environment& env, int stdout_fd,
                   int stderr_fd, int stdin_fd, Guardian* guardian, const std::vector<int>& cpus,
                   int kept_fd) {
  // Everything the child needs is built before it starts: it may not allocate.
  std::vector<std::string> env_entries;
  env_entries.reserve(env.size());
  for (const auto& [name, value] : env)
    env_entries.push_back(cat(name, "=", value));
  std::vector<char*> c_env;
  c_env.reserve(env_entries.size() + 1);
  for (std::string& entry : env_entries)
    c_env.push_back(entry.data());
  c_env.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> c_argv;
  c_argv.reserve(args.size() + 1);
  for (std::string& arg : args)
    c_argv.push_back(arg.data());
  c_argv.push_back(nullptr);
  const CpuMask mask(cpus);
  const Fd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ProgramStart start{
      {stdout_fd, stderr_fd, stdin_fd, dev_null.get(), kept_fd, guardian, &mask, getpid()},
      c_argv.data(),
      c_env.data()};
  return start_program(start);
}

}  // namespace cohort::detail
