// What every secret kept in a file shares (cohort run --token-file, the
// per-user secret in ~/.cohort/secret): one short first line, read without
// taking what follows, trailing whitespace dropped; what makes one too easy
// to guess; a mode, shown as people write it.
#pragma once

#include <string>
#include <string_view>

#include <sys/types.h>

namespace cohort::detail {

/// How a secret that carries too little is made instead.
inline constexpr const char* kMakeASecret = "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'";

/// Why `secret` can be guessed, "" when it carries at least 16 bytes of
/// entropy as far as its characters can tell: 32 characters when all are
/// hex digits (4 bits each), 22 of a wider alphabet (6 bits each, as
/// base64), no character in more than half of the places and at least 8
/// different characters (a secret drawn at random passes but about once in
/// 10^12).
std::string weak_secret(std::string_view secret);
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
