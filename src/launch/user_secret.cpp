#include "launch/user_secret.hpp"

#include <cerrno>
#include <cstdlib>

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/secret_file.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

std::string home_directory() {
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') return home;
  const passwd* entry = getpwuid(geteuid());
  if (entry != nullptr && entry->pw_dir != nullptr && entry->pw_dir[0] == '/') {
    return entry->pw_dir;
  }
  throw InvalidArgument(
      "cohort run: a job on several hosts needs a secret, and with none given it uses the "
      "per-user one in ~/.cohort/secret, but this user has no home directory (HOME is unset): "
      "set HOME, or give every node --token-file FILE (docs/security.md)");
}

// Like ssh with ~/.ssh: what others may read or write is refused, not used.
void check_private(const struct stat& info, const std::string& path, bool directory) {
  if (info.st_uid != geteuid()) {
    throw InvalidArgument(cat("cohort run: ", path, " belongs to uid ", info.st_uid,
                              ", not to this user (uid ", geteuid(),
                              "): a secret must be its user's own; remove it (cohort makes a "
                              "new one) or give --token-file FILE"));
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw InvalidArgument(cat("cohort run: ", path, " can be reached by others (mode ",
                              mode_text(info.st_mode), "): a secret must not be; chmod ",
                              directory ? "700 " : "600 ", path));
  }
}

void make_directory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw InvalidArgument(cat("cohort run: cannot make ", dir, " for the per-user secret: ",
                              errno_text(errno), "; give every node --token-file FILE instead"));
  }
  struct stat info {};
  if (::lstat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    throw InvalidArgument(cat("cohort run: ", dir,
                              " is not a directory; the per-user secret is "
                              "kept in it"));
  }
  check_private(info, dir, true);
}

// Writes a new secret beside `path`, then links it there: link() fails if
// another process made one first (over NFS too), and that one is used.
void make_secret(const std::string& path) {
  std::string temporary = path + ".XXXXXX";
  Fd fd(::mkstemp(temporary.data()));  // mode 0600
  if (!fd.valid()) {
    throw InvalidArgument(
        cat("cohort run: cannot write the per-user secret beside ", path, ": ", errno_text(errno)));
  }
  const std::string secret = random_hex(16) + "\n";
  const bool written =
      ::write(fd.get(), secret.data(), secret.size()) == static_cast<ssize_t>(secret.size()) &&
      ::fsync(fd.get()) == 0;
  const int link_error = written && ::link(temporary.c_str(), path.c_str()) != 0 ? errno : 0;
  ::unlink(temporary.c_str());
  if (!written || (link_error != 0 && link_error != EEXIST)) {
    throw InvalidArgument(cat("cohort run: cannot write the per-user secret ", path, ": ",
                              errno_text(written ? link_error : errno)));
  }
}

}  // namespace

UserSecret user_secret() {
  const std::string dir = home_directory() + "/.cohort";
  UserSecret secret;
  secret.path = dir + "/secret";
  make_directory(dir);
  Fd fd(::open(secret.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY));
  if (!fd.valid() && errno == ENOENT) {
    make_secret(secret.path);
    fd = Fd(::open(secret.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY));
  }
  if (!fd.valid()) {
    throw InvalidArgument(
        cat("cohort run: cannot read the per-user secret ", secret.path, ": ", errno_text(errno)));
  }
  struct stat info {};
  if (fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    throw InvalidArgument(cat("cohort run: ", secret.path, " is not a regular file"));
  }
  check_private(info, secret.path, false);
  const std::string text = read_secret_line(fd.get(), cat("cohort run: ", secret.path));
  if (const std::string weak = weak_secret(text); !weak.empty()) {
    throw InvalidArgument(cat("cohort run: the per-user secret ", secret.path, " can be guessed: ",
                              weak, "; remove it, and cohort makes a new one"));
  }
  secret.token = text;
  return secret;
}

}  // namespace cohort::detail
