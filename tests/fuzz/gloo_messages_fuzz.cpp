// The header of a point-to-point message over gloo, as a recv reads it from
// its peer (src/comm/backends/gloo/sized_messages.hpp).
#include <cstdlib>
#include <span>

#include "comm/backends/gloo/sized_messages.hpp"
#include "fuzz/fuzz_target.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(gloo_messages) {
  using namespace detail::gloo_backend;
  const auto said = read_message_header(std::span<const unsigned char>(data, size));
  if (!said) return 0;
  // Its first piece fits the room every recv posts for one, and with the
  // rest makes the whole message.
  const std::size_t first = first_piece_bytes(*said);
  if (first > kFirstPieceBytes || first > *said) std::abort();
  if (first < kFirstPieceBytes && first != *said) std::abort();
  unsigned char header[kMessageHeaderBytes];
  write_message_header(header, *said);
  if (read_message_header(header) != said) std::abort();
  return 0;
}

}  // namespace cohort::fuzz
