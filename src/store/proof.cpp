#include "store/proof.hpp"

#include <cohort/errors.hpp>

#include "core/strings.hpp"
#include "store/sha256.hpp"

namespace cohort::detail::store_proof {
namespace {

std::string hmac(std::string_view label, std::string_view token, std::string_view client_nonce,
                 std::string_view server_nonce) {
  std::string message;
  message.reserve(label.size() + client_nonce.size() + server_nonce.size());
  message.append(label).append(client_nonce).append(server_nonce);
  const sha256::Digest digest = sha256::hmac(token, message);
  return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

}  // namespace

// The kernel's generator: no user-space generator to seed (OpenSSL's
// RAND_bytes set its own up on first use, about 1 ms in every process).
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

bool same(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  // Every byte compared, whatever differs first (as OpenSSL's CRYPTO_memcmp).
  volatile unsigned char difference = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    difference = difference | static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

}  // namespace cohort::detail::store_proof
