#include "store/protocol.hpp"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "store/proof.hpp"

namespace cohort::detail::store_protocol {
namespace {

std::string hex(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    out += "0123456789abcdef"[c >> 4];
    out += "0123456789abcdef"[c & 15];
  }
  return out;
}

TEST(StoreProtocol, FramesRoundTrip) {
  Writer writer;
  writer.u8(7).i64(-42).bytes(std::string("a\0b", 3)).strings({"x", "", "yz"});
  const std::string frame = writer.frame();
  ASSERT_EQ(frame_length(frame.data()), frame.size() - kFrameHeaderBytes);
  Reader reader(std::string_view(frame).substr(kFrameHeaderBytes));
  EXPECT_EQ(reader.u8(), 7);
  EXPECT_EQ(reader.i64(), -42);
  EXPECT_EQ(reader.bytes(), std::string_view("a\0b", 3));
  EXPECT_EQ(reader.strings(), (std::vector<std::string>{"x", "", "yz"}));
  EXPECT_NO_THROW(reader.expect_end());
}

TEST(StoreProtocol, LittleEndianOnTheWire) {
  Writer writer;
  writer.i64(0x0102030405060708);
  const std::string frame = writer.frame();
  EXPECT_EQ(frame, std::string("\x08\x00\x00\x00\x08\x07\x06\x05\x04\x03\x02\x01", 12));
}

TEST(StoreProtocol, TruncatedOrOverlongPayloadsAreErrors) {
  EXPECT_THROW(Reader("").u8(), ProtocolError);
  EXPECT_THROW(Reader("\x01\x02").i64(), ProtocolError);
  const std::string short_bytes{'\x05', '\0', '\0', '\0', 'a', 'b'};  // 5 announced, 2 sent
  EXPECT_THROW(Reader(short_bytes).bytes(), ProtocolError);
  EXPECT_THROW(Reader(std::string("\xff\xff\xff\x7f", 4)).strings(), ProtocolError);
  Reader extra("\x01\x02");
  extra.u8();
  EXPECT_THROW(extra.expect_end(), ProtocolError);
}

TEST(StoreProtocol, HelloCarriesMagicVersionAndNonceButNoToken) {
  const std::string frame = hello("nonce");
  Reader reader(std::string_view(frame).substr(kFrameHeaderBytes));
  std::string magic;
  for (int i = 0; i < 4; ++i)
    magic.push_back(static_cast<char>(reader.u8()));
  EXPECT_EQ(magic, kMagic);
  EXPECT_EQ(reader.u8(), kVersion);
  EXPECT_EQ(reader.bytes(), "nonce");
  EXPECT_NO_THROW(reader.expect_end());
}

TEST(StoreProtocol, ProofCarriesTheProofAndCredential) {
  const std::string frame = proof("proof", "MUNGE:cred");
  Reader reader(std::string_view(frame).substr(kFrameHeaderBytes));
  EXPECT_EQ(reader.bytes(), "proof");
  EXPECT_EQ(reader.bytes(), "MUNGE:cred");
  EXPECT_NO_THROW(reader.expect_end());
}

// The proofs differ by direction (one cannot be sent back as the other),
// by token and by either nonce; their bytes are docs/store-protocol.md's
// HMAC-SHA256 (the expected values from Python's hmac module).
TEST(StoreProof, ProofsBindTokenNoncesAndDirection) {
  namespace proof = detail::store_proof;
  const std::string a = proof::nonce();
  const std::string b = proof::nonce();
  EXPECT_EQ(a.size(), proof::kNonceBytes);
  EXPECT_NE(a, b);
  const std::string server = proof::server_proof("token", a, b);
  EXPECT_EQ(server.size(), proof::kProofBytes);
  EXPECT_TRUE(proof::same(server, proof::server_proof("token", a, b)));
  EXPECT_FALSE(proof::same(server, proof::client_proof("token", a, b)));
  EXPECT_FALSE(proof::same(server, proof::server_proof("tokem", a, b)));
  EXPECT_FALSE(proof::same(server, proof::server_proof("token", b, a)));
  EXPECT_FALSE(proof::same(server, server.substr(1)));
  const std::string c(32, 'c');
  const std::string s(32, 's');
  EXPECT_EQ(hex(proof::server_proof("token", c, s)),
            "5abed02950b5acf3ebaad72e464262b148cfd98e923bc080be17a06db4c78172");
  EXPECT_EQ(hex(proof::client_proof("token", c, s)),
            "d20b4ffc5f57a1f73ad4f31292f236618d9389e8d9320617b082bc95e2b57d2b");
}

// docs/store-protocol.md's example, byte for byte: the page a client in
// another language would be written from says what the encoder writes.
// The page's indented example lines named `names`: name -> their hex.
std::map<std::string, std::string> documented_bytes(const std::set<std::string>& names) {
  std::ifstream page(COHORT_SOURCE_DIR "/docs/store-protocol.md");
  std::map<std::string, std::string> documented;
  for (std::string line; std::getline(page, line);) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    if (names.count(name) == 0) continue;
    if (line.rfind("    ", 0) != 0) continue;
    std::string bytes;
    for (std::string word; words >> word;)
      bytes += word;
    // The example's lines, not the formulas' (server_proof = HMAC...).
    if (bytes.find_first_not_of("0123456789abcdef") == std::string::npos) documented[name] = bytes;
  }
  return documented;
}

TEST(StoreProtocol, TheDocumentedHandshakeIsWhatTheEncoderWrites) {
  auto documented = documented_bytes({"hello", "server_proof", "client_proof"});
  const std::string c(32, 'c');
  const std::string s(32, 's');
  EXPECT_EQ(documented["hello"], hex(hello(c)));
  EXPECT_EQ(documented["server_proof"], hex(detail::store_proof::server_proof("token", c, s)));
  EXPECT_EQ(documented["client_proof"], hex(detail::store_proof::client_proof("token", c, s)));
}

TEST(StoreProtocol, TheDocumentedMultiplexedFramesAreWhatTheEncoderWrites) {
  auto documented = documented_bytes({"tagged_set", "tagged_answer"});
  EXPECT_EQ(documented["tagged_set"],
            hex(tagged(
                7, Writer().u8(static_cast<std::uint8_t>(Op::set)).bytes("k").bytes("v").frame())));
  EXPECT_EQ(documented["tagged_answer"],
            hex(tagged(7, Writer().u8(static_cast<std::uint8_t>(Status::ok)).frame())));
  EXPECT_EQ(tagged(std::nullopt, "same"), "same");
  const std::string tag("\x07\x00\x00\x00", 4);
  Reader reader(tag);
  EXPECT_EQ(reader.u32(), 7u);
}

}  // namespace
}  // namespace cohort::detail::store_protocol
