#include "core/secret_file.hpp"

#include <cerrno>
#include <cstdio>

#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/strings.hpp"

namespace cohort::detail {

std::string read_secret_line(int fd, const std::string& name) {
  std::string line;
  for (;;) {
    char c = 0;
    const ssize_t n = retry_eintr([&] { return ::read(fd, &c, 1); });
    if (n < 0) throw InvalidArgument(cat(name, ": ", errno_text(errno)));
    if (n == 0 || c == '\n') break;
    if (line.size() == kMaxSecretLength) {
      throw InvalidArgument(cat(name, ": the first line is longer than ", kMaxSecretLength,
                                " bytes; a secret is one short line"));
    }
    line.push_back(c);
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.pop_back();
  return line;
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

namespace {
constexpr std::size_t kLeastDistinct = 8;
}  // namespace

std::string weak_secret(std::string_view secret) {
  const bool hex = secret.find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos;
  const std::size_t needed = hex ? 32 : 22;
  if (secret.size() < needed) {
    return cat(secret.size(), " characters", hex ? " of hex digits" : "",
               " carry fewer than 128 bits (", needed,
               hex ? " hex digits" : " characters of a wider alphabet", " do)");
  }
  // Against a secret typed by hand ("aaaa...", "abab..."), not a drawn one:
  // one character in more than a quarter of 32 hex places refused 1 in 600
  // secrets drawn from /dev/urandom (kMakeASecret's, and cohort's own);
  // more than half, or fewer than 8 distinct characters, about 1 in 10^12.
  std::size_t counts[256] = {};
  std::size_t distinct = 0;
  for (unsigned char c : secret) {
    if (counts[c]++ == 0) ++distinct;
    if (counts[c] * 2 > secret.size()) {
      return cat("one character fills more than half of its ", secret.size(), " places");
    }
  }
  if (distinct < kLeastDistinct) {
    return cat("it has only ", distinct, " different characters (a drawn one has ", kLeastDistinct,
               " or more)");
  }
  return {};
}

}  // namespace cohort::detail
