// The store handshake's SHA-256 and HMAC-SHA256 (src/store/sha256.hpp):
// the published example vectors, every way of feeding a message in pieces,
// and OpenSSL's libcrypto on every key and message length around the block
// boundaries.
#include "store/sha256.hpp"

#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#if defined(COHORT_TEST_WITH_LIBCRYPTO)
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif

#include "store/proof.hpp"

namespace cohort::detail {
namespace {

std::string hex(const sha256::Digest& digest) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (const unsigned char byte : digest) {
    text += kDigits[byte >> 4];
    text += kDigits[byte & 0xf];
  }
  return text;
}

std::string bytes_from(std::uint8_t first, std::size_t count) {
  std::string bytes;
  for (std::size_t i = 0; i < count; ++i)
    bytes += static_cast<char>(first + i);
  return bytes;
}

// FIPS 180-2, appendix B, and the empty message.
TEST(Sha256, HashesThePublishedExamples) {
  EXPECT_EQ(hex(sha256::hash("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256::hash("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256::hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(sha256::hash(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// RFC 4231, section 4: test cases 1-4, 6 and 7 (5 truncates its output).
TEST(Sha256, HmacMatchesRfc4231) {
  EXPECT_EQ(hex(sha256::hmac(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(sha256::hmac("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hex(sha256::hmac(std::string(20, '\xaa'), std::string(50, '\xdd'))),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  EXPECT_EQ(hex(sha256::hmac(bytes_from(1, 25), std::string(50, '\xcd'))),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  EXPECT_EQ(hex(sha256::hmac(std::string(131, '\xaa'),
                             "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(hex(sha256::hmac(std::string(131, '\xaa'),
                             "This is a test using a larger than block-size key and a larger "
                             "than block-size data. The key needs to be hashed before being "
                             "used by the HMAC algorithm.")),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

// A message fed in two pieces, cut anywhere, hashes as it does whole.
TEST(Sha256, PiecesHashAsTheWhole) {
  const std::string message = bytes_from(0, 200);
  for (std::size_t length : {0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 200}) {
    const std::string_view whole(message.data(), length);
    const sha256::Digest expected = sha256::hash(whole);
    for (std::size_t cut = 0; cut <= length; ++cut) {
      sha256::Hash running;
      running.update(whole.substr(0, cut));
      running.update(whole.substr(cut));
      EXPECT_EQ(hex(running.finish()), hex(expected)) << "length " << length << ", cut " << cut;
    }
  }
}

// The proofs are the HMAC of their label and both nonces, keyed by the token:
// what every cohort since the handshake began sends, so old and new meet.
TEST(Sha256, ProofsAreTheHmacOfTheirLabelAndNonces) {
  const std::string token = "0123456789abcdef0123456789abcdef";
  const std::string client_nonce(store_proof::kNonceBytes, 'c');
  const std::string server_nonce(store_proof::kNonceBytes, 's');
  const sha256::Digest server = sha256::hmac(
      token, "cohort store: the server knows the token\n" + client_nonce + server_nonce);
  EXPECT_EQ(store_proof::server_proof(token, client_nonce, server_nonce),
            std::string(reinterpret_cast<const char*>(server.data()), server.size()));
  const sha256::Digest client = sha256::hmac(
      token, "cohort store: the client knows the token\n" + client_nonce + server_nonce);
  EXPECT_EQ(store_proof::client_proof(token, client_nonce, server_nonce),
            std::string(reinterpret_cast<const char*>(client.data()), client.size()));
}

TEST(Sha256, HmacMatchesLibcryptoOnEveryLengthAroundTheBlocks) {
#if defined(COHORT_TEST_WITH_LIBCRYPTO)
  std::mt19937 generator(20261204);
  std::uniform_int_distribution<int> byte(0, 255);
  const auto random_string = [&](std::size_t length) {
    std::string bytes(length, '\0');
    for (char& b : bytes)
      b = static_cast<char>(byte(generator));
    return bytes;
  };
  for (std::size_t key_length = 0; key_length <= 140; ++key_length) {
    for (std::size_t message_length = 0; message_length <= 200; message_length += 1) {
      const std::string key = random_string(key_length);
      const std::string message = random_string(message_length);
      unsigned char expected[EVP_MAX_MD_SIZE];
      unsigned int expected_length = 0;
      ASSERT_NE(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                     reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                     expected, &expected_length),
                nullptr);
      ASSERT_EQ(expected_length, sha256::kDigestBytes);
      const sha256::Digest ours = sha256::hmac(key, message);
      ASSERT_TRUE(std::equal(ours.begin(), ours.end(), expected))
          << "key of " << key_length << " bytes, message of " << message_length << " bytes";
    }
  }
#else
  GTEST_SKIP() << "built without OpenSSL's libcrypto to compare with (install libssl-dev: "
                  "scripts/install-deps test)";
#endif
}

}  // namespace
}  // namespace cohort::detail
