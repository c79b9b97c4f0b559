#include "cli/token_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/secret_file.hpp"
#include "core/strings.hpp"

namespace cohort::detail {

std::string read_token_file(const std::string& path) {
  std::string token;
  if (path == "-") {
    token = read_secret_line(STDIN_FILENO, "--token-file - (standard input)");
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
      throw InvalidArgument(cat("--token-file ", path, " can be read by others (mode ",
                                mode_text(info.st_mode), "): a secret must not be; chmod 600 ",
                                path));
    }
    token = read_secret_line(fd.get(), cat("--token-file ", path));
  }
  if (const std::string weak = weak_secret(token); !weak.empty()) {
    throw InvalidArgument(cat("--token-file ", path, ": the token can be guessed: ", weak,
                              "; make one with ", kMakeASecret));
  }
  return token;
}

}  // namespace cohort::detail
