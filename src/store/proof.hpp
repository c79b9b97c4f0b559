// The store handshake's proofs (docs/store-protocol.md, "Handshake"): each
// side proves that it knows the job token without sending it, as an
// HMAC-SHA256 keyed by the token over both sides' fresh nonces, under a
// label that differs by direction (a proof cannot be reflected back).
// The HMAC is cohort's own (sha256.hpp: libcrypto's set-up cost every
// process that made a proof more than a millisecond); the kernel draws the
// nonces.
#pragma once

#include <string>
#include <string_view>

namespace cohort::detail::store_proof {

inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kProofBytes = 32;  // SHA-256

/// `kNonceBytes` bytes from the operating system's generator.
std::string nonce();

/// What the server sends to prove it holds `token`, for this pair of nonces.
std::string server_proof(std::string_view token, std::string_view client_nonce,
                         std::string_view server_nonce);
/// What the client sends to prove it holds `token`.
std::string client_proof(std::string_view token, std::string_view client_nonce,
                         std::string_view server_nonce);

/// What a server's MUNGE credential carries for this client nonce, where
/// the token is no secret (a job id) and MUNGE proves the server's user.
std::string server_munge_payload(std::string_view client_nonce);

/// Compares two proofs in time that does not depend on where they differ.
bool same(std::string_view a, std::string_view b) noexcept;

}  // namespace cohort::detail::store_proof
