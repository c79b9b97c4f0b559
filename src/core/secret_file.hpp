// What every secret kept in a file shares (cohort run --token-file, the
// per-user secret in ~/.cohort/secret): one short first line, read without
// taking what follows, trailing whitespace dropped; a length below which it
// can be guessed; a mode, shown as people write it.
#pragma once

#include <string>

#include <sys/types.h>

namespace cohort::detail {

/// Secrets shorter than this are refused: they can be guessed.
inline constexpr std::size_t kMinSecretLength = 16;
/// A secret is one short line; a longer first line is refused.
inline constexpr std::size_t kMaxSecretLength = 4096;

/// The first line of `fd`, read byte by byte up to its newline and no
/// further (on standard input, what follows belongs to someone else),
/// without trailing spaces, tabs or a carriage return. Throws
/// cohort::InvalidArgument starting with `name` when it cannot be read or
/// is longer than kMaxSecretLength.
std::string read_secret_line(int fd, const std::string& name);

/// "0644".
std::string mode_text(mode_t mode);

}  // namespace cohort::detail
