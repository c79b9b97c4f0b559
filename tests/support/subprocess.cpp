#include "support/subprocess.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cohort::test {
namespace {

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Ends the process group led by `pid` and reaps its leader into `*status`:
// SIGTERM first, so that a launcher cleans up after its job (mpirun removes
// its ranks' shared-memory files from /dev/shm, which a SIGKILLed job
// leaves behind), then SIGKILL to whatever is left after kStopGrace.
constexpr auto kStopGrace = std::chrono::seconds(3);

void stop_group(pid_t pid, int* status) {
  kill(-pid, SIGTERM);
  kill(-pid, SIGCONT);  // a stopped member takes its SIGTERM now
  const auto give_up = std::chrono::steady_clock::now() + kStopGrace;
  pid_t reaped = 0;
  while ((reaped = waitpid(pid, status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < give_up) {
    usleep(10'000);
  }
  kill(-pid, SIGKILL);  // members that outlived the leader, or the leader itself
  if (reaped == 0) {
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace

Subprocess::Subprocess(const std::vector<std::string>& argv, const ProcessOptions& options)
    : deadline_(std::chrono::steady_clock::now() + options.timeout) {
  int out_pipe[2], err_pipe[2], in_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 ||
      pipe2(in_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  }
  std::vector<std::string> env_strings;
  if (options.env) {
    for (const auto& [name, value] : *options.env)
      env_strings.push_back(name + "=" + value);
  }
  std::vector<char*> c_argv, c_env;
  for (const std::string& arg : argv)
    c_argv.push_back(const_cast<char*>(arg.c_str()));
  c_argv.push_back(nullptr);
  for (const std::string& entry : env_strings)
    c_env.push_back(const_cast<char*>(entry.c_str()));
  c_env.push_back(nullptr);

  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    setpgid(0, 0);  // its own group, so a timeout reaches srun's or mpirun's children too
    dup2(in_pipe[0], STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    if (!options.working_directory.empty() && chdir(options.working_directory.c_str()) != 0) {
      _exit(126);
    }
    if (options.env) {
      execvpe(c_argv[0], c_argv.data(), c_env.data());
    } else {
      execvp(c_argv[0], c_argv.data());
    }
    const std::string message = std::string("exec ") + argv[0] + ": " + std::strerror(errno) + "\n";
    (void)!write(STDERR_FILENO, message.data(), message.size());
    _exit(127);
  }
  setpgid(pid_, pid_);
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(in_pipe[0]);
  if (!options.stdin_text.empty()) {
    (void)!write(in_pipe[1], options.stdin_text.data(), options.stdin_text.size());
  }
  close(in_pipe[1]);
  out_ = out_pipe[0];
  err_ = err_pipe[0];
}

Subprocess::~Subprocess() {
  if (!finished_ && pid_ > 0) {
    int status = 0;
    stop_group(pid_, &status);
  }
  close_fd(out_);
  close_fd(err_);
}

ProcessResult Subprocess::finish() {
  ProcessResult result;
  int fds[2] = {out_, err_};
  out_ = err_ = -1;
  std::string* sinks[2] = {&result.out, &result.err};
  int status = 0;
  while (fds[0] >= 0 || fds[1] >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline_ - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      stop_group(pid_, &status);
      break;
    }
    pollfd polled[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (poll(polled, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || polled[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i], buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close_fd(fds[i]);
      }
    }
  }
  close_fd(fds[0]);
  close_fd(fds[1]);
  while (!result.timed_out && waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  finished_ = true;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  return Subprocess(argv, options).finish();
}

std::string describe(const ProcessResult& result) {
  std::ostringstream text;
  if (result.timed_out) text << "timed out; ";
  if (result.signal != 0) {
    text << "killed by signal " << result.signal;
  } else {
    text << "exit " << result.exit_code;
  }
  text << "\n--- stdout ---\n" << result.out << "\n--- stderr ---\n" << result.err;
  return text.str();
}

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    struct stat info {};
    const std::string candidate = dir + "/" + name;
    if (stat(candidate.c_str(), &info) == 0 && (info.st_mode & S_IXUSR)) return dir;
  }
  return {};
}

}  // namespace cohort::test
