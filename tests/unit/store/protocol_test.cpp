#include "store/protocol.hpp"

#include <gtest/gtest.h>

namespace cohort::detail::store_protocol {
namespace {

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

TEST(StoreProtocol, HandshakeCarriesMagicVersionTokenAndCredential) {
  const std::string frame = handshake("tok", "MUNGE:cred");
  Reader reader(std::string_view(frame).substr(kFrameHeaderBytes));
  std::string magic;
  for (int i = 0; i < 4; ++i)
    magic.push_back(static_cast<char>(reader.u8()));
  EXPECT_EQ(magic, kMagic);
  EXPECT_EQ(reader.u8(), kVersion);
  EXPECT_EQ(reader.bytes(), "tok");
  EXPECT_EQ(reader.bytes(), "MUNGE:cred");
  EXPECT_NO_THROW(reader.expect_end());
}

}  // namespace
}  // namespace cohort::detail::store_protocol
