#include "store/sha256.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace cohort::detail::sha256 {
namespace {

// FIPS 180-4, 4.2.2: the first 32 bits of the fractional parts of the cube
// roots of the first 64 primes.
constexpr std::array<std::uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// FIPS 180-4, 5.3.3: the first 32 bits of the fractional parts of the
// square roots of the first 8 primes.
constexpr std::array<std::uint32_t, 8> kInitial = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

std::uint32_t load_big_endian(const unsigned char* bytes) noexcept {
  return std::uint32_t{bytes[0]} << 24 | std::uint32_t{bytes[1]} << 16 |
         std::uint32_t{bytes[2]} << 8 | std::uint32_t{bytes[3]};
}

}  // namespace

Hash::Hash() noexcept : state_(kInitial) {}

// FIPS 180-4, 6.2.2.
void Hash::compress(const unsigned char* block) noexcept {
  std::array<std::uint32_t, 64> w;
  for (std::size_t t = 0; t < 16; ++t)
    w[t] = load_big_endian(block + 4 * t);
  for (std::size_t t = 16; t < 64; ++t) {
    const std::uint32_t s0 = std::rotr(w[t - 15], 7) ^ std::rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const std::uint32_t s1 = std::rotr(w[t - 2], 17) ^ std::rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  auto [a, b, c, d, e, f, g, h] = state_;
  for (std::size_t t = 0; t < 64; ++t) {
    const std::uint32_t big_s1 = std::rotr(e, 6) ^ std::rotr(e, 11) ^ std::rotr(e, 25);
    const std::uint32_t choose = (e & f) ^ (~e & g);
    const std::uint32_t t1 = h + big_s1 + choose + kRound[t] + w[t];
    const std::uint32_t big_s0 = std::rotr(a, 2) ^ std::rotr(a, 13) ^ std::rotr(a, 22);
    const std::uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    const std::uint32_t t2 = big_s0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  const std::array<std::uint32_t, 8> worked = {a, b, c, d, e, f, g, h};
  for (std::size_t i = 0; i < 8; ++i)
    state_[i] += worked[i];
}

void Hash::update(std::string_view bytes) noexcept {
  total_bytes_ += bytes.size();
  auto next = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t left = bytes.size();
  if (pending_bytes_ > 0) {
    const std::size_t taken = std::min(left, kBlockBytes - pending_bytes_);
    std::memcpy(pending_.data() + pending_bytes_, next, taken);
    pending_bytes_ += taken;
    next += taken;
    left -= taken;
    if (pending_bytes_ < kBlockBytes) return;
    compress(pending_.data());
    pending_bytes_ = 0;
  }
  for (; left >= kBlockBytes; next += kBlockBytes, left -= kBlockBytes)
    compress(next);
  std::memcpy(pending_.data(), next, left);
  pending_bytes_ = left;
}

// FIPS 180-4, 5.1.1: a 1 bit, zeros to 56 bytes past a block's start, the
// message's length in bits as 8 big-endian bytes.
Digest Hash::finish() noexcept {
  const std::uint64_t bits = total_bytes_ * 8;
  pending_[pending_bytes_++] = 0x80;
  if (pending_bytes_ > kBlockBytes - 8) {
    std::fill(pending_.begin() + static_cast<std::ptrdiff_t>(pending_bytes_), pending_.end(), 0);
    compress(pending_.data());
    pending_bytes_ = 0;
  }
  std::fill(pending_.begin() + static_cast<std::ptrdiff_t>(pending_bytes_), pending_.end() - 8, 0);
  for (std::size_t i = 0; i < 8; ++i)
    pending_[kBlockBytes - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  compress(pending_.data());
  Digest digest;
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t j = 0; j < 4; ++j)
      digest[4 * i + j] = static_cast<unsigned char>(state_[i] >> (24 - 8 * j));
  return digest;
}

Digest hash(std::string_view message) noexcept {
  Hash running;
  running.update(message);
  return running.finish();
}

// RFC 2104: H((K ^ opad) || H((K ^ ipad) || message)), K zero-padded to a
// block.
Digest hmac(std::string_view key, std::string_view message) noexcept {
  std::array<unsigned char, kBlockBytes> block{};
  if (key.size() > kBlockBytes) {
    const Digest hashed = hash(key);
    std::copy(hashed.begin(), hashed.end(), block.begin());
  } else {
    std::memcpy(block.data(), key.data(), key.size());
  }
  const auto as_view = [](const std::array<unsigned char, kBlockBytes>& bytes) {
    return std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  };
  std::array<unsigned char, kBlockBytes> pad;
  for (std::size_t i = 0; i < kBlockBytes; ++i)
    pad[i] = block[i] ^ 0x36;
  Hash inner;
  inner.update(as_view(pad));
  inner.update(message);
  const Digest inner_digest = inner.finish();
  for (std::size_t i = 0; i < kBlockBytes; ++i)
    pad[i] = block[i] ^ 0x5c;
  Hash outer;
  outer.update(as_view(pad));
  outer.update(
      std::string_view(reinterpret_cast<const char*>(inner_digest.data()), inner_digest.size()));
  return outer.finish();
}

}  // namespace cohort::detail::sha256
