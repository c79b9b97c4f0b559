#include "store/munge_credential.hpp"

#include <cctype>
#include <cstdlib>
#include <fstream>

#include <unistd.h>

#include <cohort/config.hpp>
#include <cohort/errors.hpp>

#include "core/strings.hpp"

#if COHORT_WITH_MUNGE
#include <munge.h>

#include "core/shared_library.hpp"
#endif

namespace cohort::detail {

std::string munge_socket() {
  if (const char* socket = std::getenv("COHORT_MUNGE_SOCKET"); socket && *socket) return socket;
  const char* conf = std::getenv("SLURM_CONF");
  std::ifstream in(conf && *conf ? conf : "/etc/slurm/slurm.conf");
  std::string line;
  while (std::getline(in, line)) {
    // "AuthInfo=socket=/run/munge/munge.socket.2,ttl=60" (keys in any case)
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.size() - start < 9) continue;
    std::string key = line.substr(start, 9);
    for (char& c : key)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (key != "authinfo=") continue;
    const std::string items = line.substr(start + 9);
    for (std::size_t at = 0; at < items.size();) {
      const std::size_t end = std::min(items.find(',', at), items.size());
      const std::string item = items.substr(at, end - at);
      if (item.rfind("socket=", 0) == 0) return item.substr(7);
      at = end + 1;
    }
  }
  return "";
}

#if COHORT_WITH_MUNGE
namespace {

// libmunge, loaded by the first process that makes or checks a credential.
struct Munge {
  SharedLibrary library{COHORT_MUNGE_LIBRARY, "MUNGE credentials", COHORT_MUNGE_LIBRARY_PACKAGE};
  decltype(munge_ctx_create)* ctx_create = COHORT_LIBRARY_FUNCTION(library, munge_ctx_create);
  decltype(munge_ctx_destroy)* ctx_destroy = COHORT_LIBRARY_FUNCTION(library, munge_ctx_destroy);
  decltype(munge_ctx_set)* ctx_set = COHORT_LIBRARY_FUNCTION(library, munge_ctx_set);
  // ::, past this file's own munge_encode and munge_decode.
  decltype(::munge_encode)* encode = library.function<decltype(::munge_encode)>("munge_encode");
  decltype(::munge_decode)* decode = library.function<decltype(::munge_decode)>("munge_decode");
  decltype(munge_strerror)* strerror = COHORT_LIBRARY_FUNCTION(library, munge_strerror);
};

const Munge& munge() {
  static const Munge kMunge;
  return kMunge;
}

struct Context {
  munge_ctx_t ctx = munge().ctx_create();
  ~Context() { munge().ctx_destroy(ctx); }
  bool ready(std::string* error) {
    if (ctx == nullptr) {
      *error = "munge_ctx_create failed";
      return false;
    }
    if (const std::string socket = munge_socket(); !socket.empty()) {
      if (munge().ctx_set(ctx, MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS) {
        *error = cat("cannot use munged's socket ", socket);
        return false;
      }
    }
    return true;
  }
  std::string where() const {
    const std::string socket = munge_socket();
    return socket.empty() ? "munged (its default socket)" : cat("munged at ", socket);
  }
};

}  // namespace

std::string munge_encode(std::string_view payload) {
  Context context;
  std::string error;
  if (!context.ready(&error)) throw StoreError(cat("MUNGE: ", error));
  munge().ctx_set(context.ctx, MUNGE_OPT_UID_RESTRICTION, getuid());
  char* credential = nullptr;
  const munge_err_t status =
      munge().encode(&credential, context.ctx, payload.data(), static_cast<int>(payload.size()));
  if (status != EMUNGE_SUCCESS) {
    throw StoreError(cat("MUNGE: ", context.where(),
                         " could not encode a credential: ", munge().strerror(status),
                         "; set COHORT_MUNGE_SOCKET to munged's socket, or give the job a "
                         "secret in COHORT_JOB_TOKEN (docs/security.md)"));
  }
  std::string text(credential);
  std::free(credential);
  return text;
}

MungeIdentity munge_decode(std::string_view credential) {
  MungeIdentity identity;
  Context context;
  if (!context.ready(&identity.error)) return identity;
  const std::string text(credential);
  void* payload = nullptr;
  int length = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  const munge_err_t status =
      munge().decode(text.c_str(), context.ctx, &payload, &length, &uid, &gid);
  if (payload != nullptr) {
    identity.payload.assign(static_cast<const char*>(payload), static_cast<std::size_t>(length));
    std::free(payload);
  }
  if (status != EMUNGE_SUCCESS) {
    identity.error = cat(context.where(), ": ", munge().strerror(status));
    return identity;
  }
  identity.valid = true;
  identity.uid = uid;
  return identity;
}

#else

std::string munge_encode(std::string_view) {
  throw StoreError(
      "MUNGE: this cohort was built without MUNGE (libmunge-dev), so it cannot prove its "
      "user to a store on another host; rebuild with libmunge-dev installed, or give the job a "
      "secret in COHORT_JOB_TOKEN (docs/security.md)");
}

MungeIdentity munge_decode(std::string_view) {
  MungeIdentity identity;
  identity.error = "this cohort was built without MUNGE (libmunge-dev)";
  return identity;
}

#endif

}  // namespace cohort::detail
