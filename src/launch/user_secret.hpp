// The per-user secret (docs/security.md): what a job on several hosts
// proves itself with when it is given no other secret, as ssh proves a user
// with ~/.ssh/id_* and MUNGE a host with its key. It is a file only its user
// can read, ~/.cohort/secret, made on first use: every node of a cluster
// whose home directories are shared reads the same one, and another user
// has another.
#pragma once

#include <string>

namespace cohort::detail {

struct UserSecret {
  std::string token;
  std::string path;  ///< the file it was read from, for messages
};

/// Reads the per-user secret at `$HOME/.cohort/secret`, making it (32 random
/// hex characters, mode 0600, in a directory of mode 0700) when there is
/// none; several processes making it at once end with one. Throws
/// cohort::InvalidArgument naming the file and what to do when HOME is
/// unknown, the directory or file is not this user's or others can read it,
/// or it holds too short a secret.
UserSecret user_secret();

}  // namespace cohort::detail
