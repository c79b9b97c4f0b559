#include "launch/job_files.hpp"

#include <cctype>
#include <cstdlib>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/own_files.hpp"
#include "core/strings.hpp"

namespace cohort::detail {

namespace fs = std::filesystem;

namespace {

// `run_id` as part of a file's name, to tell jobs apart by eye: at most 64
// bytes, of letters, digits, '.', '-' and '_' (others become '_').
std::string name_part(const std::string& run_id) {
  std::string part = run_id.substr(0, 64);
  for (char& c : part) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '.' && c != '-') c = '_';
  }
  return part;
}

}  // namespace

JobFiles::JobFiles(std::string log_dir, const std::string& run_id, bool keep)
    : dir_(std::move(log_dir)), keep_(keep) {
  if (!dir_.empty()) {
    dir_fd_ = open_own_directory(dir_, "cohort run: --log-dir");
    if (::faccessat(dir_fd_.get(), ".", W_OK | X_OK, AT_EACCESS) != 0) {
      throw Error(cat("cohort run: cannot write the logs to --log-dir ", dir_, ": ",
                      errno_text(errno), "; give a directory you can write to"));
    }
    return;
  }
  const char* tmp_env = std::getenv("TMPDIR");
  const std::string tmp = tmp_env != nullptr && *tmp_env != '\0' ? tmp_env : "/tmp";
  if (!keep_ && use_the_users_directory(tmp, run_id)) return;
  std::string pattern = cat(tmp, "/cohort-", run_id, "-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) {  // mode 0700
    throw Error(cat("cohort run: cannot make a directory for the job's files (", pattern, "): ",
                    errno_text(errno), "; set TMPDIR to a writable directory, or give --log-dir"));
  }
  dir_ = pattern;
  made_ = true;
  dir_fd_ = open_own_directory(dir_, "cohort run: the job's directory");
}

bool JobFiles::use_the_users_directory(const std::string& tmp, const std::string& run_id) {
  const Fd parent(::open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent.valid()) return false;  // mkdtemp says why
  const std::string name = cat("cohort-", ::geteuid());
  dir_fd_ = open_private_directory(parent.get(), name);
  if (!dir_fd_.valid()) return false;
  dir_ = cat(tmp, "/", name);
  // Unique among the user's jobs on this host, as mkdtemp's name would be.
  prefix_ = cat(name_part(run_id), "-", random_hex(8), ".");
  return true;
}

JobFiles::~JobFiles() {
  if (!flat()) return;
  for (const std::string& name : error_names_)
    ::unlinkat(dir_fd_.get(), name.c_str(), 0);
  if (!made_ || ::rmdir(dir_.c_str()) == 0) return;
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

Fd JobFiles::rank_dir(int attempt, int rank, std::string* path) {
  const std::string attempt_name = cat("attempt_", attempt);
  const std::string rank_name = cat("rank_", rank);
  *path = cat(dir_, "/", attempt_name, "/", rank_name);
  try {
    if (attempt != attempt_) {  // every worker of an attempt asks for it three times
      attempt_dir_ =
          open_own_subdirectory(dir_fd_.get(), attempt_name, cat(dir_, "/", attempt_name));
      attempt_ = attempt;
    }
    return open_own_subdirectory(attempt_dir_.get(), rank_name, *path);
  } catch (const Error& error) {
    throw Error(cat("cohort run: ", error.what(), made_ ? "" : " (check --log-dir)"));
  }
}

std::string JobFiles::error_file(int attempt, int rank) {
  if (flat()) {
    // DIR is new (mkdtemp) or the prefix new, and each name handed out
    // once: nothing stale.
    std::string name = cat(prefix_, "attempt_", attempt, ".rank_", rank, ".error.json");
    std::string path = cat(dir_, "/", name);
    error_names_.push_back(std::move(name));
    return path;
  }
  std::string path;
  const Fd dir = rank_dir(attempt, rank, &path);
  ::unlinkat(dir.get(), "error.json", 0);  // a stale file must not be taken for this attempt's
  return path + "/error.json";
}

Fd JobFiles::open_log(int attempt, int rank, const char* stream) {
  std::string path;
  const Fd dir = rank_dir(attempt, rank, &path);
  const std::string name = cat(stream, ".log");
  try {
    return create_own_file(dir.get(), name, cat("the log file ", path, "/", name));
  } catch (const Error& error) {
    throw Error(cat("cohort run: ", error.what(), made_ ? "" : " (check --log-dir)"));
  }
}

}  // namespace cohort::detail
