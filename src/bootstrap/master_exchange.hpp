// Under mpirun on several nodes nothing in the environment says where rank 0
// is. Rank 0 publishes the store's address through the MPI launcher's own
// key-value service, and every rank reads it there: PMIx (Open MPI's mpirun,
// srun --mpi=pmix) or the PMI-1 wire protocol (MPICH's Hydra, over PMI_FD).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <cohort/launch_env.hpp>

namespace cohort::detail {

struct MasterAddress {
  std::string host;
  int port = 0;
  /// The store's secret: the key-value service reaches only the job's own
  /// processes, so rank 0 hands it out there.
  std::string token;
};

/// "host:port/token", the one value rank 0 publishes; and back (nullopt when
/// `text` is not that). For the two services.
std::string encode_master(const MasterAddress& master);
std::optional<MasterAddress> decode_master(std::string_view text);

/// Which service this process can use: "PMI-1 (PMI_FD)", "PMIx (PMIX_NAMESPACE)",
/// or "" when none is there (or cohort was built without PMIx).
std::string key_value_service(const Environment& env);

/// Rank 0 passes its own store address and gets it back; every other rank
/// gets rank 0's. Collective: every rank of the job must call it. Throws
/// cohort::Error naming the service and what failed.
MasterAddress exchange_master(const LaunchInfo& info, const Environment& env,
                              const MasterAddress& mine);

// The two services (pmi_wire.cpp, pmix.cpp); same contract as exchange_master.
MasterAddress exchange_over_pmi_wire(int fd, int rank, const MasterAddress& mine);
MasterAddress exchange_over_pmix(int rank, const MasterAddress& mine);

}  // namespace cohort::detail
