// Point-to-point messages over Gloo that say their size, so that a recv whose
// buffer is not the message's size raises InvalidArgument, as on shm and mpi.
//
// A Gloo recv is posted with room for its message, and Gloo's loop thread
// checks what comes against it: a longer message ends the process from
// that thread (GLOO_ENFORCE "op.preamble.length <= op.nbytes"), where no
// caller can catch it, and a shorter one fills the front of the buffer
// without saying so. Gloo never tells the caller a message's size.
//
// So a message goes as up to three Gloo messages, each on a slot of its own
// (per tag), posted at once by the sender:
//   1. its header: the message's size, 8 bytes, little-endian;
//   2. its first piece: the first kFirstPieceBytes of it, or all of it;
//   3. the rest, when there is more.
// A recv posts the header's and the first piece's receives at once, the
// piece's with room for a whole first piece: into the caller's buffer when
// that is at least a piece long, else into a room of a piece, then copied.
// So no first piece can overrun what it lands in, whatever size it has. The
// header tells the recv whether a rest comes and how long it is; it posts
// that receive while the first piece is still on its way: into the caller's
// buffer when the sizes agree, else into scratch, so that the next message
// between the two comes as sent. Gloo sends only to a posted receive, so
// the rest waits for that round trip where the first piece takes less.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>

namespace cohort::detail::gloo_backend {

inline constexpr std::size_t kMessageHeaderBytes = 8;
/// Long enough that its transfer covers the rest's round trip; the room a
/// recv of a shorter buffer takes it into (and copies from).
inline constexpr std::size_t kFirstPieceBytes = std::size_t{256} << 10;

/// How much of a message of `bytes` its first piece carries.
inline constexpr std::size_t first_piece_bytes(std::uint64_t bytes) noexcept {
  return static_cast<std::size_t>(std::min<std::uint64_t>(bytes, kFirstPieceBytes));
}

inline void write_message_header(unsigned char* to, std::uint64_t bytes) noexcept {
  for (std::size_t i = 0; i < kMessageHeaderBytes; ++i)
    to[i] = static_cast<unsigned char>(bytes >> (8 * i));
}

/// The size a received header states, or nothing when `received` is too
/// short to hold one, or states more than a buffer can be (a pair out of
/// step, or not framed this way).
inline std::optional<std::uint64_t> read_message_header(
    std::span<const unsigned char> received) noexcept {
  if (received.size() < kMessageHeaderBytes) return std::nullopt;
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < kMessageHeaderBytes; ++i)
    bytes |= std::uint64_t{received[i]} << (8 * i);
  if (bytes > static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()))
    return std::nullopt;
  return bytes;
}

}  // namespace cohort::detail::gloo_backend
