// The files an agent keeps for its workers, under one directory:
// DIR/attempt_K/rank_R/{stdout,stderr}.log (--log-dir, --redirects, --tee)
// and DIR/attempt_K/rank_R/error.json (each worker's TORCHELASTIC_ERROR_FILE).
// DIR is --log-dir; without it, a directory of the job's own in $TMPDIR
// (mode 0700: error messages may hold secrets), removed at the end unless
// --redirects or --tee put logs there (by the guardian when the agent is
// SIGKILLed: guardian.hpp). A directory that holds nothing but
// error files and goes at the end has them side by side instead,
// DIR/attempt_K.rank_R.error.json: a directory per attempt and rank cost a
// one-worker job 0.5 ms of its 6 to make and remove (ext4). Every directory
// below DIR is made 0700 and every file 0600, opened relative to its
// directory, never through a symbolic link, and only in directories no other
// user can write to (core/own_files.hpp): a file another user prepared there
// is refused.
#pragma once

#include <string>
#include <vector>

#include "core/fd.hpp"

namespace cohort::detail {

class JobFiles {
 public:
  /// `keep`: logs go to the directory even without `log_dir` (redirects or
  /// tee), so a directory made for the job stays. Throws cohort::Error when
  /// it cannot be made, or `log_dir` is another user's or others may write
  /// to it.
  JobFiles(std::string log_dir, const std::string& run_id, bool keep);
  ~JobFiles();
  JobFiles(const JobFiles&) = delete;
  JobFiles& operator=(const JobFiles&) = delete;

  const std::string& dir() const noexcept { return dir_; }
  /// Whether dir() was made for this job (and not given as --log-dir).
  bool made_for_the_job() const noexcept { return made_; }
  /// Whether dir() holds nothing but the job's files and is removed at its
  /// end (made for it, and no logs kept there).
  bool goes_with_the_job() const noexcept { return flat(); }

  /// The error file of `rank` in `attempt`; its directory exists afterwards.
  std::string error_file(int attempt, int rank);
  /// The log file of `stream` ("stdout", "stderr"), truncated. Throws
  /// cohort::Error naming it when it cannot be written.
  Fd open_log(int attempt, int rank, const char* stream);

 private:
  /// DIR/attempt_K/rank_R, made when missing; its path in `*path`.
  Fd rank_dir(int attempt, int rank, std::string* path);
  /// Whether error files lie in DIR itself (nothing else is kept there).
  bool flat() const noexcept { return made_ && !keep_; }

  std::string dir_;
  Fd dir_fd_;
  int attempt_ = -1;  // whose directory attempt_dir_ is
  Fd attempt_dir_;
  bool made_ = false;
  bool keep_ = false;
  std::vector<std::string> error_names_;  // in DIR, when flat()
};

}  // namespace cohort::detail
