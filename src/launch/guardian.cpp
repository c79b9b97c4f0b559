#include "launch/guardian.hpp"

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {
namespace {

// Removes the entries of directory `path` whose names begin with `prefix`
// (files, and directories emptied first), and `path` itself when `prefix`
// is "", with system calls only (the guardian is a fork: no opendir, which
// allocates). Entries are read again from the start until none is left that
// can go.
void remove_job_files(const char* path, const char* prefix) {
  const int dir = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return;  // gone already: the agent removed it
  const std::size_t prefix_length = std::strlen(prefix);
  alignas(dirent64) static char entries[16384];
  for (bool removed = true; removed;) {
    removed = false;
    ::lseek(dir, 0, SEEK_SET);
    for (;;) {
      const ssize_t n = ::getdents64(dir, entries, sizeof(entries));
      if (n <= 0) break;
      for (ssize_t at = 0; at < n;) {
        const auto* entry = reinterpret_cast<const dirent64*>(entries + at);
        at += entry->d_reclen;
        const char* name = entry->d_name;
        if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
        if (std::strncmp(name, prefix, prefix_length) != 0) continue;
        if (::unlinkat(dir, name, 0) == 0 || ::unlinkat(dir, name, AT_REMOVEDIR) == 0) {
          removed = true;
        }
      }
    }
  }
  ::close(dir);
  if (prefix_length == 0) ::rmdir(path);
}

// The pipe's messages: +pgid (watch), -pgid (forget), or kJobFiles followed
// by the directory's and the prefix's lengths (ints) and their bytes.
constexpr int kJobFiles = 0;

// Reads exactly `bytes` into `into`; false at EOF or an error (the agent is gone).
bool read_whole(int input, void* into, std::size_t bytes) {
  auto* at = static_cast<char*>(into);
  while (bytes > 0) {
    const ssize_t n = ::read(input, at, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

// Reads a string of at most `most` bytes, its length first, into `into`
// (most + 1 bytes); false for a longer one or at EOF.
bool read_string(int input, char* into, int most) {
  int length = 0;
  if (!read_whole(input, &length, sizeof(length)) || length < 0 || length > most ||
      !read_whole(input, into, static_cast<std::size_t>(length))) {
    return false;
  }
  into[length] = '\0';
  return true;
}

// The guardian's whole life: read messages until EOF, then kill the groups
// still listed, and remove the job's files if it was told of them. No
// allocation after fork: fixed tables.
[[noreturn]] void guard(int input) {
  constexpr int kMaxGroups = 65536;
  static pid_t groups[kMaxGroups];
  static char job_dir[PATH_MAX + 1];
  static char prefix[NAME_MAX + 1];
  int count = 0;
  for (;;) {
    int message = 0;
    if (!read_whole(input, &message, sizeof(message))) break;  // EOF: the agent is gone
    if (message == kJobFiles) {
      if (!read_string(input, job_dir, PATH_MAX) || !read_string(input, prefix, NAME_MAX)) {
        job_dir[0] = '\0';
        break;
      }
    } else if (message > 0 && count < kMaxGroups) {
      groups[count++] = message;
    } else if (message < 0) {
      for (int i = 0; i < count; ++i) {
        if (groups[i] == -message) {
          groups[i] = groups[--count];
          break;
        }
      }
    }
  }
  for (int i = 0; i < count; ++i)
    ::kill(-groups[i], SIGKILL);
  if (job_dir[0] != '\0') remove_job_files(job_dir, prefix);
  _exit(0);
}

}  // namespace

Guardian::Guardian() {
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0) {
    throw Error(cat("cohort run: pipe2 for the guardian failed: ", errno_text(errno)));
  }
  Fd read_end(ends[0]);
  pipe_ = Fd(ends[1]);
  pid_ = fork();
  if (pid_ < 0) throw Error(cat("cohort run: fork of the guardian failed: ", errno_text(errno)));
  if (pid_ == 0) {
    pipe_.reset();  // only the agent may hold the write end
    // Its own process group: a signal sent to the agent's group (Ctrl-C in a
    // terminal) must not take it away before the workers' groups are gone.
    setpgid(0, 0);
    guard(read_end.get());
  }
}

Guardian::~Guardian() {
  pipe_.reset();
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

void Guardian::send(int message) noexcept {
  // A 4-byte write to a pipe is atomic; the guardian reads as fast as workers start.
  while (::write(pipe_.get(), &message, sizeof(message)) < 0 && errno == EINTR) {
  }
}

void Guardian::remove_at_end(const std::string& dir, const std::string& prefix) {
  if (dir.size() > PATH_MAX || prefix.size() > NAME_MAX) {
    throw Error(cat("cohort run: the job's files ", dir, "/", prefix,
                    "* have a path longer than the system allows (", PATH_MAX, " bytes, ", NAME_MAX,
                    " a name): set TMPDIR to a shorter path, or give a shorter run id"));
  }
  const int header[2] = {kJobFiles, static_cast<int>(dir.size())};
  const int prefix_length = static_cast<int>(prefix.size());
  std::string message(reinterpret_cast<const char*>(header), sizeof(header));
  message += dir;
  message.append(reinterpret_cast<const char*>(&prefix_length), sizeof(prefix_length));
  message += prefix;
  for (std::size_t sent = 0; sent < message.size();) {
    const ssize_t n = ::write(pipe_.get(), message.data() + sent, message.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw Error(cat("cohort run: could not hand the job's files ", dir, "/", prefix,
                      "* to the guardian (pid ", pid_, "): ", errno_text(errno)));
    }
    sent += static_cast<std::size_t>(n);
  }
}

void Guardian::watch(pid_t pgid) noexcept {
  send(static_cast<int>(pgid));
}
void Guardian::forget(pid_t pgid) noexcept {
  send(-static_cast<int>(pgid));
}

}  // namespace cohort::detail
