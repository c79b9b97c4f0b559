#include "store/file_answer.hpp"

#include <cerrno>
#include <utility>

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

AnswerFileWriter::AnswerFileWriter(std::string* error)
    : file_(memfd_create("cohort-store-answer", MFD_CLOEXEC | MFD_ALLOW_SEALING)) {
  if (!file_.valid()) *error = cat("memfd_create: ", errno_text(errno));
}

bool AnswerFileWriter::write(std::string_view bytes, std::string* error) {
  if (const int failed = write_all(file_.get(), bytes); failed != 0) {
    *error = cat("writing an answer file: ", errno_text(failed));
    return false;
  }
  return true;
}

Fd AnswerFileWriter::seal(std::string* error) {
  if (fcntl(file_.get(), F_ADD_SEALS, kSeals) != 0) {
    *error = cat("sealing an answer file: ", errno_text(errno));
    return Fd();
  }
  return std::move(file_);
}

std::optional<StoreValue> map_file(int file, std::size_t length, std::string* error) {
  void* bytes = mmap(nullptr, length, PROT_READ, MAP_SHARED, file, 0);
  if (bytes == MAP_FAILED) {
    *error = cat("mapping an answer file: ", errno_text(errno));
    return std::nullopt;
  }
  std::shared_ptr<const void> mapping(
      bytes, [length](const void* at) { munmap(const_cast<void*>(at), length); });
  return StoreValue(std::move(mapping), std::string_view(static_cast<const char*>(bytes), length));
}

Fd make_answer_file(std::string_view payload, std::string* error) {
  AnswerFileWriter writer(error);
  if (!writer.valid() || !writer.write(payload, error)) return Fd();
  return writer.seal(error);
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
  std::string why;
  auto bytes = map_file(file.get(), static_cast<std::size_t>(length), &why);
  if (!bytes) *error = cat("sent a file answer that could not be mapped (", why, ")");
  return bytes;
}

}  // namespace cohort::detail
