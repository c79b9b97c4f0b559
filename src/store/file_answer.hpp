// Large answers as memory files (store_protocol Status::in_file): a node's
// relay writes an answer that many of its clients read (a table every rank
// GETs) once into a sealed memory file, and sends each client that took
// Op::accept_files the file instead of the bytes, over its socket pair. The
// node's ranks then share one copy of the answer instead of receiving one
// each through the socket (docs/rendezvous.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cohort/store.hpp>

#include "core/fd.hpp"

namespace cohort::detail {

/// A sealed (read-only, fixed-size) memory file holding `payload`; an
/// invalid Fd, and `*error`, when none can be made (the caller sends the
/// bytes instead).
Fd make_answer_file(std::string_view payload, std::string* error);

/// A memory file written as a large answer arrives, then sealed: a relay
/// receives the store's answer into the file its node's clients get, a
/// piece at a time through a small buffer, instead of into a buffer of the
/// answer's size first.
class AnswerFileWriter {
 public:
  /// invalid(), and `*error`, when no file can be made.
  explicit AnswerFileWriter(std::string* error);
  bool valid() const noexcept { return file_.valid(); }
  /// The file, to append to in place (recv_into_file).
  int file() const noexcept { return file_.get(); }
  /// Appends `bytes`; false and `*error` when the file cannot take them.
  bool write(std::string_view bytes, std::string* error);
  /// The file, sealed as make_answer_file's; invalid and `*error` when it
  /// cannot be.
  Fd seal(std::string* error);

 private:
  Fd file_;
};

/// A read-only mapping of the first `length` bytes of `file`, unmapped with
/// its last holder; nullopt and `*error` when it cannot be mapped.
std::optional<StoreValue> map_file(int file, std::size_t length, std::string* error);

/// The frame that stands for a `length`-byte payload in a file.
std::string in_file_frame(std::size_t length);

/// The payload an in_file answer stands for, as a read-only mapping of its
/// file (no copy): `fields` is the frame's payload after its status byte;
/// its file is the first of `files` (taken from it). Nullopt and `*error`
/// (what is wrong, for a message that names the store) when the file is
/// missing, unsealed or not the length announced.
std::optional<StoreValue> map_answer_file(std::string_view fields, std::vector<Fd>* files,
                                          std::string* error);

}  // namespace cohort::detail
