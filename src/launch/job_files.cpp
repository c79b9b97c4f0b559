#include "launch/job_files.hpp"

#include <cstdlib>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {

namespace fs = std::filesystem;

namespace {

// Says which directory stops --log-dir, before any worker starts: the
// deepest one that exists, and why it cannot be written.
void check_writable(const std::string& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (!error && ::access(dir.c_str(), W_OK | X_OK) == 0) return;
  fs::path existing = fs::absolute(dir, error);
  while (!existing.empty() && existing != existing.root_path() && !fs::exists(existing, error))
    existing = existing.parent_path();
  std::string why;
  if (fs::exists(existing, error) && !fs::is_directory(existing, error)) {
    why = cat(existing.string(), " is a file, not a directory");
  } else if (::access(existing.c_str(), W_OK | X_OK) != 0) {
    why = cat(existing.string(), ": ", errno_text(errno));
  } else {
    why = errno_text(EACCES);
  }
  throw Error(cat("cohort run: cannot write the logs to --log-dir ", dir, ": ", why,
                  "; give a directory you can write to"));
}

}  // namespace

JobFiles::JobFiles(std::string log_dir, const std::string& run_id, bool keep)
    : dir_(std::move(log_dir)), keep_(keep) {
  if (!dir_.empty()) {
    check_writable(dir_);
    return;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      cat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/cohort-", run_id, "-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) {  // mode 0700
    throw Error(cat("cohort run: cannot make a directory for the job's files (", pattern, "): ",
                    errno_text(errno), "; set TMPDIR to a writable directory, or give --log-dir"));
  }
  dir_ = pattern;
  made_ = true;
}

JobFiles::~JobFiles() {
  if (!made_ || keep_) return;
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

std::string JobFiles::rank_dir(int attempt, int rank) {
  const fs::path dir = fs::path(dir_) / cat("attempt_", attempt) / cat("rank_", rank);
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    throw Error(cat("cohort run: cannot make ", dir.string(), ": ", error.message(),
                    made_ ? "" : " (check --log-dir)"));
  }
  return dir.string();
}

std::string JobFiles::error_file(int attempt, int rank) {
  std::string path = rank_dir(attempt, rank) + "/error.json";
  ::unlink(path.c_str());  // a stale file must not be taken for this attempt's
  return path;
}

Fd JobFiles::open_log(int attempt, int rank, const char* stream) {
  const std::string path = cat(rank_dir(attempt, rank), "/", stream, ".log");
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    throw Error(cat("cohort run: cannot write the log file ", path, ": ", errno_text(errno),
                    made_ ? "" : " (check --log-dir)"));
  }
  return fd;
}

}  // namespace cohort::detail
