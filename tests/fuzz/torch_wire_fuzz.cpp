// PyTorch TCPStore requests from the network (src/store/torch_wire.cpp).
#include <cstdlib>
#include <string_view>

#include "fuzz/fuzz_target.hpp"
#include "store/torch_wire.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(torch_wire) {
  namespace wire = detail::torch_wire;
  constexpr std::size_t kLimit = 1 << 16;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto dialect = wire::opens_like_newer_client(input) ? wire::Dialect::v2 : wire::Dialect::v1;
  // As the server does: request after request until one is incomplete.
  while (!input.empty()) {
    std::size_t used = 0;
    try {
      const auto request = wire::parse(input, dialect, kLimit, &used);
      if (!request) break;
      if (used == 0 || used > input.size()) std::abort();
      for (const auto& key : request->keys) {
        if (key.size() > kLimit) std::abort();
      }
      if (request->query == wire::Query::multi_set &&
          request->values.size() != request->keys.size()) {
        std::abort();
      }
      input.remove_prefix(used);
    } catch (const wire::Unsupported&) {
      break;  // the server closes the connection
    }
  }
  return 0;
}

}  // namespace cohort::fuzz
