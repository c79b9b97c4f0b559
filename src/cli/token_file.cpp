#include "cli/token_file.hpp"

#include <cstdio>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

constexpr std::size_t kMaxTokenLength = 4096;

// Reads byte by byte up to the first newline: on standard input, whatever
// follows the line must stay unread.
std::string first_line(int fd, const std::string& name) {
  std::string line;
  for (;;) {
    char c = 0;
    const ssize_t n = retry_eintr([&] { return ::read(fd, &c, 1); });
    if (n < 0) throw InvalidArgument(cat("--token-file ", name, ": ", errno_text(errno)));
    if (n == 0 || c == '\n') break;
    if (line.size() == kMaxTokenLength) {
      throw InvalidArgument(cat("--token-file ", name, ": the first line is longer than ",
                                kMaxTokenLength, " bytes; a token is one short line"));
    }
    line.push_back(c);
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.pop_back();
  return line;
}

}  // namespace

std::string read_token_file(const std::string& path) {
  std::string token;
  if (path == "-") {
    token = first_line(STDIN_FILENO, "- (standard input)");
  } else {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd.valid()) {
      throw InvalidArgument(cat("--token-file ", path, ": ", errno_text(errno)));
    }
    struct stat info {};
    if (fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
      throw InvalidArgument(cat("--token-file ", path, ": not a regular file"));
    }
    if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
      throw InvalidArgument(cat("--token-file ", path, " can be read by others (mode ", mode,
                                "): a secret must not be; chmod 600 ", path));
    }
    token = first_line(fd.get(), path);
  }
  if (token.size() < kMinTokenLength) {
    throw InvalidArgument(cat(
        "--token-file ", path, ": the token is ", token.size(), " characters; use at least ",
        kMinTokenLength, " random ones (head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n')"));
  }
  return token;
}

}  // namespace cohort::detail
