#include "bootstrap/master_exchange.hpp"

#include <cohort/config.hpp>
#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {
namespace {

std::string value_of(const Environment& env, const char* name) {
  auto found = env.find(name);
  return found == env.end() ? std::string() : found->second;
}

}  // namespace

std::string encode_master(const MasterAddress& master) {
  return cat(master.host, ":", master.port, "/", master.token);
}

std::optional<MasterAddress> decode_master(std::string_view text) {
  const std::size_t slash = text.find('/');
  const std::string_view address = text.substr(0, slash);
  const std::size_t colon = address.rfind(':');
  if (slash == std::string_view::npos || colon == std::string_view::npos) return std::nullopt;
  const auto port = parse_int(address.substr(colon + 1));
  if (!port || *port < 1 || *port > 65535) return std::nullopt;
  return MasterAddress{std::string(address.substr(0, colon)), static_cast<int>(*port),
                       std::string(text.substr(slash + 1))};
}

std::string key_value_service(const Environment& env) {
  if (!value_of(env, "PMI_FD").empty()) return "PMI-1 (PMI_FD)";
  if (COHORT_WITH_PMIX && !value_of(env, "PMIX_NAMESPACE").empty()) {
    return "PMIx (PMIX_NAMESPACE)";
  }
  return "";
}

MasterAddress exchange_master(const LaunchInfo& info, const Environment& env,
                              const MasterAddress& mine) {
  const int rank = info.rank.value;
  if (auto fd = parse_int(value_of(env, "PMI_FD"))) {
    return exchange_over_pmi_wire(static_cast<int>(*fd), rank, mine);
  }
  if (COHORT_WITH_PMIX && !value_of(env, "PMIX_NAMESPACE").empty()) {
    return exchange_over_pmix(rank, mine);
  }
  throw LaunchEnvError(
      cat("rank ", rank, " of ", info.world_size.value, " under ", to_string(info.launcher.value),
          " on several nodes: rank 0's address is not in the environment and no key-value "
          "service is reachable (no PMI_FD, no PMIX_NAMESPACE",
          COHORT_WITH_PMIX ? "" : "; this cohort was built without PMIx (libpmix-dev)",
          "): set MASTER_ADDR to rank 0's host and MASTER_PORT to a free port there (mpirun -x "
          "MASTER_ADDR -x MASTER_PORT)"),
      {{"MASTER_ADDR", value_of(env, "MASTER_ADDR")}});
}

#if !COHORT_WITH_PMIX
MasterAddress exchange_over_pmix(int, const MasterAddress&) {
  throw Error("cohort was built without PMIx (install libpmix-dev and rebuild)");
}
#endif

}  // namespace cohort::detail
