// MUNGE credentials: how a store proves, across hosts and without a shared
// secret, that a client runs as the job's user. Under Slurm every node runs
// munged with the cluster's key (Slurm itself authenticates with it), so a
// credential one node encodes, the store's node can decode and trust. A
// credential is restricted to the encoding user, carries the job's token as
// its payload, and munged refuses to decode one twice (no replay).
#pragma once

#include <string>
#include <string_view>

#include <sys/types.h>

namespace cohort::detail {

/// munged's socket: COHORT_MUNGE_SOCKET, else `AuthInfo=socket=` in Slurm's
/// configuration ($SLURM_CONF, /etc/slurm/slurm.conf), else "" (libmunge's
/// default, /run/munge/munge.socket.2).
std::string munge_socket();

/// A fresh credential carrying `payload` that only this process's user can
/// decode. Throws cohort::StoreError naming the socket and what to do when
/// munged cannot be reached or cohort was built without MUNGE.
std::string munge_encode(std::string_view payload);

struct MungeIdentity {
  bool valid = false;
  uid_t uid = 0;
  std::string payload;
  std::string error;  ///< why `valid` is false ("replayed credential", ...)
};

/// What a credential says, after munged checked it. Never throws.
MungeIdentity munge_decode(std::string_view credential);

}  // namespace cohort::detail
