#include "store/file_answer.hpp"

#include <cerrno>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/strings.hpp"
#include "store/protocol.hpp"

namespace cohort::detail {

namespace wire = store_protocol;

namespace {

// What a reader needs to hold: nobody can change the bytes or the size
// while it reads them.
constexpr int kSeals = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

}  // namespace

Fd make_answer_file(std::string_view payload, std::string* error) {
  Fd file(memfd_create("cohort-store-answer", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!file.valid()) {
    *error = cat("memfd_create: ", errno_text(errno));
    return Fd();
  }
  for (std::size_t at = 0; at < payload.size();) {
    const ssize_t n = ::write(file.get(), payload.data() + at, payload.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = cat("writing an answer file: ", errno_text(errno));
      return Fd();
    }
    at += static_cast<std::size_t>(n);
  }
  if (fcntl(file.get(), F_ADD_SEALS, kSeals) != 0) {
    *error = cat("sealing an answer file: ", errno_text(errno));
    return Fd();
  }
  return file;
}

std::string in_file_frame(std::size_t length) {
  return wire::Writer()
      .u8(static_cast<std::uint8_t>(wire::Status::in_file))
      .i64(static_cast<std::int64_t>(length))
      .frame();
}

std::optional<StoreValue> map_answer_file(std::string_view fields, std::vector<Fd>* files,
                                          std::string* error) {
  std::int64_t length = 0;
  try {
    wire::Reader reader(fields);
    length = reader.i64();
    reader.expect_end();
  } catch (const wire::ProtocolError& malformed) {
    *error = cat("sent a malformed file answer (", malformed.what(), ")");
    return std::nullopt;
  }
  if (files->empty()) {
    *error = "sent a file answer without its file";
    return std::nullopt;
  }
  const Fd file = std::move(files->front());
  files->erase(files->begin());
  struct stat status {};
  const int seals = fcntl(file.get(), F_GET_SEALS);  // a kernel may add its own (F_SEAL_EXEC)
  if (seals < 0 || (seals & kSeals) != kSeals || fstat(file.get(), &status) != 0 || length <= 0 ||
      status.st_size != length) {
    *error = cat("sent a file answer of ", length,
                 " bytes whose file is not a sealed memory file of that size");
    return std::nullopt;
  }
  const auto size = static_cast<std::size_t>(length);
  void* bytes = mmap(nullptr, size, PROT_READ, MAP_SHARED, file.get(), 0);
  if (bytes == MAP_FAILED) {
    *error = cat("sent a file answer that could not be mapped: ", errno_text(errno));
    return std::nullopt;
  }
  std::shared_ptr<const void> mapping(
      bytes, [size](const void* at) { munmap(const_cast<void*>(at), size); });
  return StoreValue(std::move(mapping), std::string_view(static_cast<const char*>(bytes), size));
}

}  // namespace cohort::detail
