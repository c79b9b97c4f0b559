#include "store/proof.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cohort/errors.hpp>

namespace cohort::detail::store_proof {
namespace {

std::string hmac(std::string_view label, std::string_view token, std::string_view client_nonce,
                 std::string_view server_nonce) {
  std::string message;
  message.reserve(label.size() + client_nonce.size() + server_nonce.size());
  message.append(label).append(client_nonce).append(server_nonce);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest,
           &length) == nullptr ||
      length != kProofBytes) {
    throw StoreError("the store handshake could not compute its HMAC-SHA256 (OpenSSL's libcrypto)");
  }
  return std::string(reinterpret_cast<const char*>(digest), length);
}

}  // namespace

std::string nonce() {
  std::string bytes(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(bytes.size())) !=
      1) {
    throw StoreError("the store handshake could not draw random bytes (OpenSSL's RAND_bytes)");
  }
  return bytes;
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

void forget_thread_state() noexcept {
  OPENSSL_thread_stop();
}

bool same(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace cohort::detail::store_proof
