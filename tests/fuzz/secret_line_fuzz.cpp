// A secret's file (--token-file, ~/.cohort/secret, or standard input;
// src/core/secret_file.cpp): its first line, and whether it can be guessed.
// read_secret_line may refuse (cohort::InvalidArgument) and nothing else.
#include <cstdlib>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/secret_file.hpp"
#include "fuzz/fuzz_target.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(secret_line) {
  const int file = memfd_create("secret", MFD_CLOEXEC);
  if (file < 0) return 0;
  if (write(file, data, size) != static_cast<ssize_t>(size)) std::abort();
  lseek(file, 0, SEEK_SET);
  try {
    const std::string line = detail::read_secret_line(file, "fuzz");
    if (line.size() > detail::kMaxSecretLength || line.find('\n') != std::string::npos) {
      std::abort();
    }
    const std::string weak = detail::weak_secret(line);
    // Fewer than 22 characters never carry 128 bits.
    if (line.size() < 22 && weak.empty()) std::abort();
  } catch (const InvalidArgument&) {
  }
  close(file);
  return 0;
}

}  // namespace cohort::fuzz
