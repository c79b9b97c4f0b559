// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) for the store
// handshake's proofs (proof.hpp), in cohort itself rather than from
// OpenSSL's libcrypto: loading and setting up libcrypto took 1.1-1.3 ms of
// CPU and about 180 page faults in every process that made a proof (each
// agent of a job on several nodes, and the store), where one proof here
// takes a few microseconds (docs/security.md, "The handshake's HMAC").
// Checked against the RFC 4231 and FIPS 180-2 example vectors and against
// libcrypto on every length up to several blocks
// (tests/unit/store/sha256_test.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cohort::detail::sha256 {

inline constexpr std::size_t kDigestBytes = 32;
inline constexpr std::size_t kBlockBytes = 64;

using Digest = std::array<unsigned char, kDigestBytes>;

/// A running SHA-256: update() with the message in pieces of any size, then
/// finish() once (the object is spent after it).
class Hash {
 public:
  Hash() noexcept;
  void update(std::string_view bytes) noexcept;
  Digest finish() noexcept;

 private:
  void compress(const unsigned char* block) noexcept;
  std::array<std::uint32_t, 8> state_;
  std::array<unsigned char, kBlockBytes> pending_{};
  std::size_t pending_bytes_ = 0;
  std::uint64_t total_bytes_ = 0;
};

/// SHA-256 of `message`.
Digest hash(std::string_view message) noexcept;

/// HMAC-SHA256 of `message` keyed by `key` (a key longer than a block is
/// hashed first, as RFC 2104 says).
Digest hmac(std::string_view key, std::string_view message) noexcept;

}  // namespace cohort::detail::sha256
