// Directories and files cohort writes for its user (--log-dir, the job's
// own directory, --trace): opened relative to a directory descriptor, never
// through a symbolic link another user could have planted, in directories
// no other user can write to, and made private (0700, 0600). Root runs
// cohort too: a file another user prepared must not turn its writes
// against it.
#pragma once

#include <string>

#include <sys/stat.h>

#include "core/fd.hpp"

namespace cohort::detail {

/// Why files of this user must not be kept in a directory that `info`
/// describes, "" when they may: it is not a directory, belongs to another
/// user than this one or root, or others may write to it without the
/// sticky bit (as /tmp has, where no user can replace another's files).
std::string unsafe_directory(const struct stat& info);

/// Opens directory `path` (made, with any missing parents, mode 0700 when
/// it does not exist). A symbolic link in its last component is followed
/// only when it belongs to this user or root. Throws cohort::Error naming
/// `what` and `path` when it cannot be made or is unsafe_directory().
Fd open_own_directory(const std::string& path, const std::string& what);

/// Opens subdirectory `name` (one component) of directory `parent`, made
/// mode 0700 when missing, never through a symbolic link. Throws
/// cohort::Error naming `shown` (its path, for people) as above.
Fd open_own_subdirectory(int parent, const std::string& name, const std::string& shown);

/// Opens directory `name` (one component) of directory `parent`, made mode
/// 0700 when missing, as a place for this user's files that lasts from job
/// to job: only when `parent` is not unsafe_directory(), and `name` is a
/// directory, not a symbolic link, of this user (not root's, unless this is
/// root) that nobody else may read, write or enter (mode 0700 or narrower).
/// Otherwise (or when it cannot be made) an invalid Fd: the caller makes a
/// place of its own instead. A directory unchanged for a day is touched, so
/// that a /tmp cleaner that goes by age does not remove it under a job.
Fd open_private_directory(int parent, const std::string& name);

/// Creates or truncates file `name` in directory `dir`, mode 0600, never
/// through a symbolic link, and refuses one that belongs to another user or
/// has other names (a hard link). Throws cohort::Error naming `shown`.
Fd create_own_file(int dir, const std::string& name, const std::string& shown);

/// The same for a file given by its path: its directory is opened as
/// open_own_directory() does, without making it.
Fd create_own_file(const std::string& path, const std::string& what);

}  // namespace cohort::detail
