#include "core/own_files.hpp"

#include <cerrno>
#include <ctime>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/secret_file.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

namespace fs = std::filesystem;

void check_directory(int fd, const std::string& shown, const std::string& what) {
  struct stat info {};
  if (fstat(fd, &info) != 0) throw Error(cat(what, " ", shown, ": ", errno_text(errno)));
  if (const std::string why = unsafe_directory(info); !why.empty()) {
    throw Error(cat(what, " ", shown, " ", why,
                    ": cohort keeps its files only where no other user can replace them; give "
                    "a directory of your own (or chmod o-w,g-w it)"));
  }
}

// mkdir -p with mode 0700 for what it makes.
void make_parents(const fs::path& path, const std::string& what) {
  fs::path prefix;
  for (const fs::path& part : path) {
    prefix /= part;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      throw Error(cat(what, " ", path.string(), ": cannot make ", prefix.string(), ": ",
                      errno_text(errno), "; give a directory you can write to"));
    }
  }
}

}  // namespace

std::string unsafe_directory(const struct stat& info) {
  if (!S_ISDIR(info.st_mode)) return "is not a directory";
  if (info.st_uid != geteuid() && info.st_uid != 0) {
    return cat("belongs to uid ", info.st_uid, ", neither this user (uid ", geteuid(),
               ") nor root");
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (info.st_mode & S_ISVTX) == 0) {
    return cat("can be written by others (mode ", mode_text(info.st_mode), ", no sticky bit)");
  }
  return {};
}

Fd open_own_directory(const std::string& path, const std::string& what) {
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0) {
    make_parents(fs::path(path).lexically_normal(), what);  // only what is missing
  } else if (S_ISLNK(link.st_mode) && link.st_uid != geteuid() && link.st_uid != 0) {
    throw Error(cat(what, " ", path, " is a symbolic link of uid ", link.st_uid,
                    ", not of this user (uid ", geteuid(),
                    "): another user could point it anywhere; give the directory itself"));
  }
  Fd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) throw Error(cat(what, " ", path, ": ", errno_text(errno)));
  check_directory(fd.get(), path, what);
  return fd;
}

Fd open_own_subdirectory(int parent, const std::string& name, const std::string& shown) {
  if (::mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST) {
    throw Error(cat("cannot make ", shown, ": ", errno_text(errno)));
  }
  Fd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    throw Error(cat("cannot open ", shown, ": ",
                    errno == ELOOP || errno == ENOTDIR
                        ? std::string("it is a symbolic link or a file, not a directory; remove it")
                        : errno_text(errno)));
  }
  check_directory(fd.get(), shown, "the directory");
  return fd;
}

Fd open_private_directory(int parent, const std::string& name) {
  struct stat info {};
  if (fstat(parent, &info) != 0 || !unsafe_directory(info).empty()) return {};
  if (::mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST) return {};
  Fd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid() || fstat(fd.get(), &info) != 0 || info.st_uid != geteuid() ||
      (info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return {};
  }
  constexpr time_t kDay = time_t{24} * 60 * 60;
  if (info.st_mtime < ::time(nullptr) - kDay) ::futimens(fd.get(), nullptr);
  return fd;
}

Fd create_own_file(int dir, const std::string& name, const std::string& shown) {
  // Not truncated before it is known to be this user's own.
  Fd fd(::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600));
  if (!fd.valid()) {
    throw Error(
        cat("cannot write ", shown, ": ",
            errno == ELOOP ? std::string("it is a symbolic link; remove it") : errno_text(errno)));
  }
  struct stat info {};
  if (fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_uid != geteuid() ||
      info.st_nlink != 1) {
    throw Error(cat("cannot write ", shown,
                    ": it is not a plain file of this user's own (another user's, a hard link "
                    "or a device); remove it"));
  }
  if (::ftruncate(fd.get(), 0) != 0)
    throw Error(cat("cannot write ", shown, ": ", errno_text(errno)));
  return fd;
}

Fd create_own_file(const std::string& path, const std::string& what) {
  const fs::path file(path);
  const std::string dir = file.has_parent_path() ? file.parent_path().string() : ".";
  Fd parent(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent.valid()) throw Error(cat(what, " ", path, ": ", dir, ": ", errno_text(errno)));
  check_directory(parent.get(), dir, cat(what, " ", path, ": its directory"));
  return create_own_file(parent.get(), file.filename().string(), cat(what, " ", path));
}

}  // namespace cohort::detail
