#include "store/proof.hpp"

#include <atomic>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"
#if defined(COHORT_CRYPTO_LIBRARY)
#include "core/shared_library.hpp"
#endif

namespace cohort::detail::store_proof {
namespace {

// libcrypto's calls: from the library loaded by the first proof this process
// makes or checks, or linked in (a static libcrypto).
struct Crypto {
#if defined(COHORT_CRYPTO_LIBRARY)
  SharedLibrary library{COHORT_CRYPTO_LIBRARY, "the store handshake's HMAC-SHA256",
                        COHORT_CRYPTO_LIBRARY_PACKAGE};
  decltype(HMAC)* hmac = COHORT_LIBRARY_FUNCTION(library, HMAC);
  decltype(EVP_sha256)* sha256 = COHORT_LIBRARY_FUNCTION(library, EVP_sha256);
  decltype(OPENSSL_thread_stop)* thread_stop =
      COHORT_LIBRARY_FUNCTION(library, OPENSSL_thread_stop);
  decltype(OPENSSL_init_crypto)* init = COHORT_LIBRARY_FUNCTION(library, OPENSSL_init_crypto);
#else
  decltype(HMAC)* hmac = HMAC;
  decltype(EVP_sha256)* sha256 = EVP_sha256;
  decltype(OPENSSL_thread_stop)* thread_stop = OPENSSL_thread_stop;
  decltype(OPENSSL_init_crypto)* init = OPENSSL_init_crypto;
#endif
};

std::atomic<const Crypto*> loaded{nullptr};
std::atomic<bool> lean{false};

const Crypto& crypto() {
  static const Crypto kCrypto = [] {
    Crypto made;
    // Before libcrypto's own set-up: the configuration is still read (a
    // FIPS provider named there still serves), its legacy name tables of
    // every cipher and digest are not filled, nor its error strings (a
    // failed HMAC is reported in cohort's words): 0.95 -> 0.74 ms for the
    // set-up and first HMAC, median of 40 starts each (2026-12-03).
    if (lean.load(std::memory_order_relaxed)) {
      made.init(OPENSSL_INIT_NO_ADD_ALL_CIPHERS | OPENSSL_INIT_NO_ADD_ALL_DIGESTS |
                    OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS,
                nullptr);
    }
    return made;
  }();
  loaded.store(&kCrypto, std::memory_order_release);
  return kCrypto;
}

std::string hmac(std::string_view label, std::string_view token, std::string_view client_nonce,
                 std::string_view server_nonce) {
  std::string message;
  message.reserve(label.size() + client_nonce.size() + server_nonce.size());
  message.append(label).append(client_nonce).append(server_nonce);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  const Crypto& calls = crypto();
  if (calls.hmac(calls.sha256(), token.data(), static_cast<int>(token.size()),
                 reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest,
                 &length) == nullptr ||
      length != kProofBytes) {
    throw StoreError("the store handshake could not compute its HMAC-SHA256 (OpenSSL's libcrypto)");
  }
  return std::string(reinterpret_cast<const char*>(digest), length);
}

}  // namespace

// The kernel's generator, not OpenSSL's: RAND_bytes sets up its own
// generators on first use, about 1 ms in every process that connects.
std::string nonce() {
  try {
    return random_bytes(kNonceBytes);
  } catch (const Error& failed) {
    throw StoreError(cat("the store handshake ", failed.what()));
  }
}

std::string server_proof(std::string_view token, std::string_view client_nonce,
                         std::string_view server_nonce) {
  return hmac("cohort store: the server knows the token\n", token, client_nonce, server_nonce);
}

std::string client_proof(std::string_view token, std::string_view client_nonce,
                         std::string_view server_nonce) {
  return hmac("cohort store: the client knows the token\n", token, client_nonce, server_nonce);
}

std::string server_munge_payload(std::string_view client_nonce) {
  std::string payload("cohort store: the server runs as this user\n");
  return payload.append(client_nonce);
}

void set_up_lean() noexcept {
  lean.store(true, std::memory_order_relaxed);
}

void warm_up() {
  (void)hmac("cohort store: warming up\n", "token", "", "");
}

void forget_thread_state() noexcept {
  // Not worth loading libcrypto for: a process that never loaded it has
  // nothing to free.
  if (const Crypto* calls = loaded.load(std::memory_order_acquire)) calls->thread_stop();
}

bool same(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  // Every byte compared, whatever differs first (CRYPTO_memcmp's contract,
  // without loading libcrypto to compare).
  volatile unsigned char difference = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    difference = difference | static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

}  // namespace cohort::detail::store_proof
