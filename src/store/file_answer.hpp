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
