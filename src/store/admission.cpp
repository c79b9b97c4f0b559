#include "store/admission.hpp"

#include "core/strings.hpp"
#include "store/munge_credential.hpp"
#include "store/protocol.hpp"

namespace cohort::detail {
std::string admission_refusal(const PeerOwner& owner, bool checked,
                              const StoreServer::Options& options, uid_t user) {
  const bool remote = owner.where != PeerOwner::Where::this_host;
  if (!remote && owner.uid != user) {
    return cat("it runs as uid ", owner.uid, ", and this job's store takes only its own user (uid ",
               user, ") from this host");
  }
  if (remote && !(checked ? options.token_is_secret || options.munge : options.torch_remote)) {
    return cat(owner.where == PeerOwner::Where::unknown
                   ? cat("its owner cannot be told (", owner.error, ")")
                   : std::string("it is on another host"),
               ", and this store has no secret to check it by: give every process of the job "
               "the same secret in COHORT_JOB_TOKEN (or cohort run --token-file FILE); see "
               "docs/security.md");
  }
  return {};
}

std::string credential_refusal(bool token_proven, std::string_view credential, bool remote,
                               const StoreServer::Options& options, uid_t user) {
  if (!token_proven) {
    return cat(store_protocol::kWrongToken,
               " (COHORT_JOB_TOKEN): the client belongs to another job, or another user's");
  }
  if (!remote || options.token_is_secret) return {};
  // The token is no secret here: a peer on another host proves with MUNGE
  // that it runs as this job's user.
  if (credential.empty()) {
    return "a client on another host must present a MUNGE credential (is munged running on "
           "its host?) or the job needs a secret in COHORT_JOB_TOKEN";
  }
  const MungeIdentity identity = munge_decode(credential);
  if (!identity.valid) return cat("its MUNGE credential was refused: ", identity.error);
  if (identity.uid != user) {
    return cat("its MUNGE credential is for uid ", identity.uid,
               ", and this job's store takes only its own user (uid ", user, ")");
  }
  if (identity.payload != options.token) return "its MUNGE credential was made for another job";
  return {};
}

}  // namespace cohort::detail
