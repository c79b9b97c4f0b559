// A store answer that stands for a memory file (Status::in_file), as a
// client on a socket pair reads it (store/file_answer.hpp): the frame's
// fields after its status, and the file that came with it, or none.
//
// Input: a byte of flags (1: a file came; 2: it is sealed), then the
// fields; the file, when one came, holds the fields' own bytes. A file
// answer is taken only when the file is sealed and exactly as long as
// the fields announce, and then reads as those bytes; anything else is
// refused with a reason.
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/fd.hpp"
#include "fuzz/fuzz_target.hpp"
#include "store/file_answer.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(file_answer) {
  if (size == 0) return 0;
  const std::uint8_t flags = data[0];
  const std::string_view fields(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<detail::Fd> files;
  if ((flags & 1) != 0) {
    detail::Fd file(memfd_create("fuzz-answer", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!file.valid() ||
        write(file.get(), fields.data(), fields.size()) != static_cast<ssize_t>(fields.size())) {
      std::abort();
    }
    if ((flags & 2) != 0 && fcntl(file.get(), F_ADD_SEALS,
                                  F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
      std::abort();
    }
    files.push_back(std::move(file));
  }
  std::string error;
  const auto value = detail::map_answer_file(fields, &files, &error);
  if (value) {
    if ((flags & 3) != 3 || value->view() != fields || !files.empty()) std::abort();
  } else if (error.empty()) {
    std::abort();
  }
  return 0;
}

}  // namespace cohort::fuzz
