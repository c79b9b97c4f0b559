// The files an agent keeps for its workers:
// DIR/attempt_K/rank_R/{stdout,stderr}.log (--log-dir, --redirects, --tee)
// and DIR/attempt_K/rank_R/error.json (each worker's TORCHELASTIC_ERROR_FILE).
// DIR is --log-dir; without it, for --redirects and --tee, a directory of the
// job's own in $TMPDIR that stays (mode 0700: error messages may hold secrets).
// A job that keeps no logs keeps only error files, which go at its end (by
// the guardian when the agent is SIGKILLed: guardian.hpp); they lie side by
// side, PREFIX.attempt_K.rank_R.error.json, in the user's own directory
// $TMPDIR/cohort-UID (0700), which stays from job to job, PREFIX the run id
// and 8 random bytes. Only when that directory cannot be used (another
// user's, open to others) does the job make one of its own there, removed
// at its end. Neither a directory per attempt and rank (0.5 ms of a
// one-worker job's 6 to make and remove, ext4) nor one per job (on an ext4
// /tmp mounted with discard, making and removing a directory took 175 µs,
// its block trimmed at once when freed; a name handed out and never written
// costs nothing). Every directory below DIR is made 0700 and every file
// 0600, opened relative to its directory, never through a symbolic link,
// and only in directories no other user can write to (core/own_files.hpp):
// a file another user prepared there is refused.
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
  /// Whether the job's files go at its end (no logs kept): then they are the
  /// entries of dir() whose names begin with names_prefix(), and dir() goes
  /// too when the prefix is "" (a directory made for the job).
  bool goes_with_the_job() const noexcept { return flat(); }
  const std::string& names_prefix() const noexcept { return prefix_; }

  /// The error file of `rank` in `attempt`; its directory exists afterwards.
  std::string error_file(int attempt, int rank);
  /// The log file of `stream` ("stdout", "stderr"), truncated. Throws
  /// cohort::Error naming it when it cannot be written.
  Fd open_log(int attempt, int rank, const char* stream);

 private:
  /// DIR/attempt_K/rank_R, made when missing; its path in `*path`.
  Fd rank_dir(int attempt, int rank, std::string* path);
  /// Whether error files lie in DIR itself, side by side (no logs kept).
  bool flat() const noexcept { return (made_ || !prefix_.empty()) && !keep_; }
  /// The user's own directory in `tmp` for the job's error files, with
  /// prefix_ set; false when it cannot be used.
  bool use_the_users_directory(const std::string& tmp, const std::string& run_id);

  std::string dir_;
  std::string prefix_;  // of the job's names in the user's directory
  Fd dir_fd_;
  int attempt_ = -1;  // whose directory attempt_dir_ is
  Fd attempt_dir_;
  bool made_ = false;
  bool keep_ = false;
  std::vector<std::string> error_names_;  // in DIR, when flat()
};

}  // namespace cohort::detail
