// The store handshake's proofs (docs/store-protocol.md, "Handshake"): each
// side proves that it knows the job token without sending it, as an
// HMAC-SHA256 keyed by the token over both sides' fresh nonces, under a
// label that differs by direction (a proof cannot be reflected back).
// OpenSSL's libcrypto does the HMAC (the kernel draws the nonces): a well-kept
// library every Linux distribution ships, already loaded by PyTorch and
// Open MPI in the processes cohort runs beside, FIPS-validated builds on the
// clusters that need them. It is loaded by a process's first proof (most
// cohort processes make none: src/store/CMakeLists.txt).
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

/// Asks for libcrypto's set-up without its legacy tables of every cipher
/// and digest by name (EVP_get_cipherbyname's) and without its error
/// strings, which the proofs do not use: half of the 1.1 ms a first proof
/// took, then 0.2 ms more. Process-wide and for good
/// (another part of the process could not fill them later): for cohort's
/// own programs only (the launcher), never in a user's process. Before the
/// first proof; a no-op after it.
void set_up_lean() noexcept;

/// Finishes libcrypto's one-time set-up now, on this thread. For a process
/// that forks children which compute proofs (cohort::spawn's workers): a
/// fork while another thread is inside that set-up leaves its locks held in
/// the child for ever.
void warm_up();

/// Frees what libcrypto keeps for the calling thread; for a thread that
/// computed proofs and is about to end.
void forget_thread_state() noexcept;

/// Compares two proofs in time that does not depend on where they differ.
bool same(std::string_view a, std::string_view b) noexcept;

}  // namespace cohort::detail::store_proof
