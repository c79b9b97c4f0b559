// PyTorch TCPStore requests from the network (src/store/torch_wire.cpp), at
// the server's own limit. The same bytes go through two parsers: one given
// everything at once, one given the bytes in pieces whose sizes the input
// chooses (as a slow peer sends them), resuming where it stopped. Both must
// read the same requests, and the piecewise one must never hold more keys
// than the bytes that arrived can carry.
#include <cstdlib>
#include <string_view>

#include <cohort/store.hpp>

#include "fuzz/fuzz_target.hpp"
#include "store/torch_wire.hpp"

namespace cohort::fuzz {
namespace {

namespace wire = detail::torch_wire;

bool same(const wire::Request& a, const wire::Request& b) {
  return a.query == b.query && a.keys == b.keys && a.values == b.values && a.value == b.value &&
         a.expected == b.expected && a.number == b.number && a.word == b.word;
}

}  // namespace

COHORT_FUZZ_TARGET(torch_wire) {
  const std::size_t limit = StoreServer::Options{}.max_frame_bytes;
  if (size < 1) return 0;
  // The first byte: how many bytes each piece holds (1 to 16).
  const std::size_t piece = data[0] % 16 + 1;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto dialect = wire::opens_like_newer_client(input) ? wire::Dialect::v2 : wire::Dialect::v1;
  wire::Parser whole(dialect, limit);
  wire::Parser pieces(dialect, limit);
  std::size_t arrived = 0;  // of `input`, for the piecewise parser
  // As the server does: request after request until one is incomplete.
  while (!input.empty()) {
    std::size_t used = 0;
    std::optional<wire::Request> request;
    try {
      request = whole.next(input, &used);
    } catch (const wire::Unsupported&) {
      // The piecewise parser must refuse it too, once the bytes arrived.
      try {
        std::size_t ignored = 0;
        for (arrived = 0; arrived < input.size();) {
          arrived = std::min(input.size(), arrived + piece);
          if (pieces.next(input.substr(0, arrived), &ignored)) std::abort();
        }
      } catch (const wire::Unsupported&) {
        return 0;  // the server closes the connection
      }
      std::abort();
    }
    if (!request) break;
    if (used == 0 || used > input.size()) std::abort();
    for (const auto& key : request->keys) {
      if (key.size() > limit) std::abort();
    }
    if (request->query == wire::Query::multi_set && request->values.size() != request->keys.size())
      std::abort();
    std::optional<wire::Request> again;
    std::size_t used_again = 0;
    for (arrived = 0; !again;) {
      if (arrived >= used) std::abort();  // complete, yet not read
      arrived = std::min(used, arrived + piece);
      again = pieces.next(input.substr(0, arrived), &used_again);
    }
    if (used_again != used || !same(*request, *again)) std::abort();
    input.remove_prefix(used);
  }
  return 0;
}

}  // namespace cohort::fuzz
