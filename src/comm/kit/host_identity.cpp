#include "comm/kit/host_identity.hpp"

#include <fstream>

#include <unistd.h>

#include "core/strings.hpp"
#include "store/exchange.hpp"

namespace cohort::detail {

std::string this_host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string("?");
}

std::string host_identity() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  char network[64] = {};
  if (::readlink("/proc/self/ns/net", network, sizeof(network) - 1) < 0) network[0] = '?';
  return cat(this_host_name(), " ", boot_id.empty() ? "?" : boot_id, " ", network);
}

std::vector<std::string> exchange_host_identities(Store& store, int rank, int size,
                                                  std::chrono::milliseconds timeout) {
  return exchange_values(store, "host", rank, size, host_identity(), timeout);
}

std::string host_name_of(const std::string& identity) {
  return identity.substr(0, identity.find(' '));
}

}  // namespace cohort::detail
