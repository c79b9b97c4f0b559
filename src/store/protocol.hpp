// The store's wire protocol (docs/store-protocol.md): length-prefixed frames,
// little-endian integers, length-prefixed byte strings.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail::store_protocol {

inline constexpr std::uint8_t kVersion = 7;
inline constexpr std::string_view kMagic = "COHS";
/// How a rejection for a wrong job token begins: a client that used the
/// per-user secret says then what to do.
inline constexpr std::string_view kWrongToken = "wrong job token";
/// Largest handshake frame: magic, version and a nonce; proofs and a MUNGE
/// credential.
inline constexpr std::uint32_t kMaxHandshakeBytes = 4096;
inline constexpr std::size_t kFrameHeaderBytes = 4;
/// On a multiplexed connection (Op::multiplex), every frame's payload
/// begins with this many bytes of tag.
inline constexpr std::size_t kTagBytes = 4;
/// A request's tag on a multiplexed connection; nullopt on any other.
using Tag = std::optional<std::uint32_t>;

enum class Op : std::uint8_t {
  set = 1,
  get = 2,
  add = 3,
  compare_set = 4,
  wait = 5,
  check = 6,
  delete_key = 7,
  num_keys = 8,
  set_on_close = 9,     ///< since version 3
  clear_on_close = 10,  ///< since version 3
  multi_get = 11,       ///< since version 3
  /// The client takes large answers as memory files (Status::in_file);
  /// answered ok. Only a socket pair (StoreServer::trusted_socket) carries
  /// files: another connection is answered ok and never sent one.
  accept_files = 12,
  /// A relay's GET: key, timeout, and the version of the value it holds
  /// (0: none). Answered as GET is, with the value's version (an i64) after
  /// the value, or with Status::unchanged alone when the value's version is
  /// still the one it holds. What a node's relay sends for its clients' GETs.
  get_versioned = 13,
  // Since version 5: what PyTorch's TCPStore clients ask a node's relay
  // (store/torch_relay.hpp), carried to the job's store.
  append = 14,      ///< key, value: appended (a missing key is set)
  queue_push = 15,  ///< key, value: onto the key's queue (queues live apart from keys)
  /// key: the queue's length before the pop (i64), then its first item
  /// (bytes) when that was not 0. Never waits.
  queue_pop = 16,
  queue_len = 17,  ///< key: the queue's length (i64)
  list_keys = 18,  ///< prefix: the keys that begin with it (strings)
  /// keys, i64 at_least, u8 queues_count, i64 timeout: WAIT as PyTorch's
  /// server waits (a non-empty queue counts as a set key when
  /// queues_count is 1; with at_least above 0, until each key's count,
  /// as ADD keeps it, reaches it: a BARRIER).
  wait_for = 19,
  /// Since version 6: from its answer on, every frame in both directions
  /// carries a u32 tag first (kTagBytes), a request's answer the request's
  /// tag; a request that waits holds none behind it, so answers may come in
  /// any order. A node's relay speaks it to its upstream, one connection
  /// for all its clients (docs/store-protocol.md). No files on it. Since
  /// version 7 it may name the relay its client means to reach (bytes,
  /// StoreServer::Options::name): any other server answers Status::error.
  multiplex = 20,
};

/// SETs one connection may leave for its end (Op::set_on_close).
inline constexpr std::size_t kMaxOnCloseSets = 8;

enum class Status : std::uint8_t {
  ok = 0,
  timeout = 1,   ///< followed by the keys still missing
  error = 2,     ///< followed by a message
  rejected = 3,  ///< handshake refused, followed by a message; the server closes
  /// Followed by an i64 length: the answer's payload (its status and fields)
  /// is that long and is in a sealed memory file that came with this frame
  /// (SCM_RIGHTS), to a client that sent Op::accept_files.
  in_file = 4,
  unchanged = 5,  ///< to Op::get_versioned: the value is still the one the client holds
  /// Since version 6, unasked, under tag 0 on a multiplexed connection: the
  /// relay that sends it is going away; go on through the next hop, as
  /// when it is lost, but once the requests out on it are answered.
  moving = 6,
};

/// A frame that does not follow the protocol.
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Builds one frame: the 4-byte length is filled in by frame().
class Writer {
 public:
  Writer() : buffer_(kFrameHeaderBytes, '\0') {}
  Writer& u8(std::uint8_t value);
  /// A count written ahead of items added one by one (what strings() writes first).
  Writer& u32(std::uint32_t value);
  Writer& i64(std::int64_t value);
  Writer& bytes(std::string_view value);
  Writer& strings(const std::vector<std::string>& values);
  /// The complete frame, header included; the writer is empty afterwards.
  std::string frame();
  /// The frame's first part, when `tail_bytes` more of its payload follow
  /// apart from it (a large value sent from a copy of its own).
  std::string frame_before(std::size_t tail_bytes);
  /// The fields written, without a header (a frame's tail, sent after a
  /// part of it that went apart); the writer is empty afterwards.
  std::string fields();

 private:
  std::string buffer_;
};

/// Reads the fields of one frame's payload; throws ProtocolError when the
/// payload ends early.
class Reader {
 public:
  explicit Reader(std::string_view payload) : data_(payload) {}
  std::uint8_t u8();
  std::uint32_t u32();
  std::int64_t i64();
  std::string_view bytes();
  std::vector<std::string> strings();
  /// Throws ProtocolError when bytes are left over.
  void expect_end() const;
  /// Whether every byte was read.
  bool at_end() const noexcept { return position_ == data_.size(); }

 private:
  std::string_view take(std::size_t size);
  std::string_view data_;
  std::size_t position_ = 0;
};

/// The payload length in a frame header.
std::uint32_t frame_length(const char* header) noexcept;
/// `payload` as one frame, header included.
std::string framed(std::string_view payload);
/// An answer of Status::error with `text`, framed.
std::string error_frame(std::string_view text);
/// The frame's first bytes for a payload of `length` bytes under `tag`: the
/// header (counting the tag when there is one), then the tag.
std::string tagged_header(Tag tag, std::size_t length);
/// `frame` (header and payload) under `tag`: the same frame with the tag
/// after its header; `frame` itself when there is no tag.
std::string tagged(Tag tag, std::string frame);

// The handshake (docs/store-protocol.md): neither side sends the job token,
// each proves it knows it (store/proof.hpp).
//   client: hello(client nonce)
//   server: ok, server nonce, server proof, server MUNGE credential ("" for
//           none), or rejected and why
//   client: proof(client proof, client MUNGE credential ("" for none))
//   server: ok, or rejected and why; then requests.

/// The frame a client sends first.
std::string hello(std::string_view client_nonce);
/// The client's second frame, once the server proved itself.
std::string proof(std::string_view client_proof, std::string_view credential = {});

}  // namespace cohort::detail::store_protocol
