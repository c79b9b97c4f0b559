#include "comm/kit/host_identity.hpp"

#include <algorithm>
#include <fstream>
#include <string_view>

#include <unistd.h>

#include "core/strings.hpp"
#include "store/exchange.hpp"

namespace cohort::detail {

std::string this_host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string("?");
}

std::string host_identity() {
  constexpr std::size_t kBootIdDigits = 16;
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  boot_id.erase(std::remove(boot_id.begin(), boot_id.end(), '-'), boot_id.end());
  boot_id.resize(std::min(boot_id.size(), kBootIdDigits));
  char network[64] = {};
  if (::readlink("/proc/self/ns/net", network, sizeof(network) - 1) < 0) network[0] = '?';
  // "net:[4026531840]": the number tells namespaces apart.
  std::string_view namespace_id(network);
  const std::size_t open = namespace_id.find('[');
  if (open != std::string_view::npos && namespace_id.back() == ']')
    namespace_id = namespace_id.substr(open + 1, namespace_id.size() - open - 2);
  return cat(this_host_name(), " ", boot_id.empty() ? "?" : boot_id, " ", namespace_id);
}

std::vector<std::string> exchange_host_identities(Store& store, int rank, int size,
                                                  std::chrono::milliseconds timeout) {
  return exchange_values(store, "host", rank, size, host_identity(), timeout);
}

std::string host_name_of(const std::string& identity) {
  return identity.substr(0, identity.find(' '));
}

int ranks_on_same_machine(const std::vector<std::string>& identities, int rank) {
  const auto boot_id = [](const std::string& identity) -> std::string {
    const std::size_t space = identity.find(' ');
    if (space == std::string::npos) return {};
    return identity.substr(space + 1, identity.find(' ', space + 1) - space - 1);
  };
  const std::string mine = boot_id(identities[static_cast<std::size_t>(rank)]);
  if (mine == "?" || mine.empty()) return 1;
  return static_cast<int>(
      std::count_if(identities.begin(), identities.end(),
                    [&](const std::string& other) { return boot_id(other) == mine; }));
}

}  // namespace cohort::detail
