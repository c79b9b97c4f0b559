// Who may talk to the job's store: a peer on this host must be this job's
// user (the kernel says who owns its socket); a peer on another host must
// prove it belongs to the job, with the job's secret or, where the token is
// no secret, a MUNGE credential. Pure decisions, apart from MUNGE.
#pragma once

#include <string>
#include <string_view>

#include <sys/types.h>

#include <cohort/store.hpp>

#include "core/peer_owner.hpp"

namespace cohort::detail {

/// Why a peer is refused before it speaks, "" when it may go on. `checked`:
/// whether its protocol checks a secret afterwards (cohort's handshake);
/// PyTorch's protocol has none, so its remote peers are let in only with
/// Options::torch_remote.
std::string admission_refusal(const PeerOwner& owner, bool checked,
                              const StoreServer::Options& options, uid_t user);

/// Why a cohort client's handshake is refused, "" when it is accepted.
/// `token_proven`: its proof of the job token (store/proof.hpp) held.
std::string credential_refusal(bool token_proven, std::string_view credential, bool remote,
                               const StoreServer::Options& options, uid_t user);

}  // namespace cohort::detail
