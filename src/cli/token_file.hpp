// The job's secret from a file (cohort run --token-file): like ssh with a
// private key, a file that others can read is refused, not used.
#pragma once

#include <string>

namespace cohort::detail {

/// The first line of `path` ("-": standard input, read up to its first
/// newline and no further: what follows belongs to someone else). Throws
/// cohort::InvalidArgument naming the file and what to do when it cannot be
/// read, is readable by its group or others, or can be guessed
/// (weak_secret, core/secret_file.hpp).
std::string read_token_file(const std::string& path);

}  // namespace cohort::detail
