// Rank 0's "host:port/token" as other ranks read it from mpirun's key-value
// service (PMIx or PMI-1; src/bootstrap/master_exchange.cpp).
#include <cstdlib>
#include <string_view>

#include "bootstrap/master_exchange.hpp"
#include "fuzz/fuzz_target.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(master_address) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto master = detail::decode_master(input);
  if (!master) return 0;
  if (master->port < 1 || master->port > 65535) std::abort();
  const auto again = detail::decode_master(detail::encode_master(*master));
  if (!again || again->host != master->host || again->port != master->port ||
      again->token != master->token) {
    std::abort();
  }
  return 0;
}

}  // namespace cohort::fuzz
