#include "store/protocol.hpp"

#include <cstring>
#include <utility>

namespace cohort::detail::store_protocol {
namespace {

void append_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::uint64_t read_le(const char* data, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= static_cast<std::uint64_t>(static_cast<unsigned char>(data[i])) << (8 * i);
  }
  return value;
}

// Counts and lengths on the wire never exceed a frame, itself under 4 GiB.
constexpr std::size_t kMaxStrings = 1u << 20;

}  // namespace

Writer& Writer::u8(std::uint8_t value) {
  buffer_.push_back(static_cast<char>(value));
  return *this;
}

Writer& Writer::u32(std::uint32_t value) {
  append_le(buffer_, value, 4);
  return *this;
}

Writer& Writer::i64(std::int64_t value) {
  append_le(buffer_, static_cast<std::uint64_t>(value), 8);
  return *this;
}

Writer& Writer::bytes(std::string_view value) {
  append_le(buffer_, value.size(), 4);
  buffer_.append(value);
  return *this;
}

Writer& Writer::strings(const std::vector<std::string>& values) {
  append_le(buffer_, values.size(), 4);
  for (const std::string& value : values)
    bytes(value);
  return *this;
}

std::string Writer::frame() {
  return frame_before(0);
}

std::string Writer::frame_before(std::size_t tail_bytes) {
  const std::uint64_t length = buffer_.size() - kFrameHeaderBytes + tail_bytes;
  for (std::size_t i = 0; i < kFrameHeaderBytes; ++i) {
    buffer_[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  }
  return std::exchange(buffer_, std::string(kFrameHeaderBytes, '\0'));
}

std::string Writer::fields() {
  return std::exchange(buffer_, std::string(kFrameHeaderBytes, '\0')).substr(kFrameHeaderBytes);
}

std::string_view Reader::take(std::size_t size) {
  if (data_.size() - position_ < size) {
    throw ProtocolError("frame ends inside a field");
  }
  std::string_view out = data_.substr(position_, size);
  position_ += size;
  return out;
}

std::uint8_t Reader::u8() {
  return static_cast<std::uint8_t>(take(1)[0]);
}

std::uint32_t Reader::u32() {
  return static_cast<std::uint32_t>(read_le(take(4).data(), 4));
}

std::int64_t Reader::i64() {
  return static_cast<std::int64_t>(read_le(take(8).data(), 8));
}

std::string_view Reader::bytes() {
  const auto size = static_cast<std::size_t>(read_le(take(4).data(), 4));
  return take(size);
}

std::vector<std::string> Reader::strings() {
  const auto count = static_cast<std::size_t>(read_le(take(4).data(), 4));
  // Each string takes 4 bytes at least: a count the rest of the frame cannot
  // hold is refused before anything is reserved for it.
  if (count > kMaxStrings || count > (data_.size() - position_) / 4) {
    throw ProtocolError("implausible key count");
  }
  std::vector<std::string> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    out.emplace_back(bytes());
  return out;
}

void Reader::expect_end() const {
  if (position_ != data_.size()) throw ProtocolError("bytes after the last field");
}

std::uint32_t frame_length(const char* header) noexcept {
  return static_cast<std::uint32_t>(read_le(header, 4));
}

std::string framed(std::string_view payload) {
  std::string frame(kFrameHeaderBytes, '\0');
  for (std::size_t i = 0; i < kFrameHeaderBytes; ++i)
    frame[i] = static_cast<char>((std::uint64_t{payload.size()} >> (8 * i)) & 0xff);
  return frame.append(payload);
}

std::string error_frame(std::string_view text) {
  return Writer().u8(static_cast<std::uint8_t>(Status::error)).bytes(text).frame();
}

std::string tagged_header(Tag tag, std::size_t length) {
  std::string header;
  append_le(header, length + (tag ? kTagBytes : 0), 4);
  if (tag) append_le(header, *tag, 4);
  return header;
}

std::string tagged(Tag tag, std::string frame) {
  if (!tag) return frame;
  std::string out = tagged_header(tag, frame.size() - kFrameHeaderBytes);
  out.append(frame, kFrameHeaderBytes);
  return out;
}

std::string hello(std::string_view client_nonce) {
  Writer writer;
  for (char c : kMagic)
    writer.u8(static_cast<std::uint8_t>(c));
  writer.u8(kVersion).bytes(client_nonce);
  return writer.frame();
}

std::string proof(std::string_view client_proof, std::string_view credential) {
  return Writer().bytes(client_proof).bytes(credential).frame();
}

}  // namespace cohort::detail::store_protocol
