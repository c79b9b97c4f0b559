// PyTorch's TCPStore wire protocol, in both of its dialects
// (docs/store-protocol.md, "PyTorch's TCPStore protocol"): PyTorch 1.13's
// (Debian 12) and 2.1-and-later's, which opens every connection with
// VALIDATE and numbers its queries differently. The agent's store serves
// either on MASTER_PORT so that workers started with
// TORCHELASTIC_USE_AGENT_STORE=True rendezvous through cohort's store.
//
// A request is one query byte and its fields, with no framing: a string or
// byte vector is a u64 length then the bytes, a key list is a u64 count then
// strings, integers are 8 bytes (VALIDATE's and PING's 4). Everything is
// little-endian (PyTorch sends host order; cohort runs on little-endian
// hosts only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <cohort/errors.hpp>

namespace cohort::detail::torch_wire {

/// StoreServer could not listen on its TCPStore port (Options::torch_port):
/// for `cohort run`, the workers' MASTER_PORT.
class PortError : public Error {
 public:
  using Error::Error;
};

/// Which PyTorch's client is on a connection, told from its first bytes.
enum class Dialect : std::uint8_t {
  v1,  ///< PyTorch 1.13 (and 1.x before it)
  v2,  ///< PyTorch 2.1 and later: opens with VALIDATE
};

/// What a request asks, whatever its number on the wire in its dialect.
enum class Query : std::uint8_t {
  validate,     ///< v2: the first request of every connection; no answer
  set,          ///< key, value; no answer
  compare_set,  ///< key, expected, desired -> bytes
  get,          ///< key -> bytes
  add,          ///< key, i64 -> i64
  check,        ///< keys -> u8 kReady/kNotReady
  wait,         ///< keys -> u8 kStopWaiting once all are set
  num_keys,     ///< -> i64
  watch_key,    ///< v1 only; not served
  delete_key,   ///< key -> i64
  append,       ///< v2: key, value; no answer
  multi_get,    ///< v2: keys -> one bytes per key
  multi_set,    ///< v2: count, then key and value pairs; no answer
  cancel_wait,  ///< v2: -> u8 kWaitCanceled
  ping,         ///< v2: u32 nonce -> the same u32
  queue_push,   ///< v2: key, value; no answer
  queue_pop,    ///< v2: key -> i64 length before the pop, then bytes when it was not 0
  queue_len,    ///< v2: key -> i64
  list_keys,    ///< v2: -> i64 count, then strings
  barrier,      ///< v2: key, i64 world size -> u8 kStopWaiting once that many arrived
};

/// CHECK answers: every key set, or not.
inline constexpr std::uint8_t kReady = 0;
inline constexpr std::uint8_t kNotReady = 1;
/// WAIT's answer once every key is set; CANCEL_WAIT's answer.
inline constexpr std::uint8_t kStopWaiting = 0;
inline constexpr std::uint8_t kWaitCanceled = 1;

/// A newer client (PyTorch >= 2.1) opens every connection with VALIDATE (0)
/// and this number, which no 1.13 request can start with.
inline constexpr std::uint32_t kValidateMagic = 0x3C85F7CE;

struct Request {
  Query query = Query::set;
  std::vector<std::string> keys;    ///< one key, or a list (CHECK, WAIT, MULTI_*)
  std::string value;                ///< SET, APPEND, QUEUE_PUSH; COMPARE_SET's desired value
  std::string expected;             ///< COMPARE_SET's expected value
  std::vector<std::string> values;  ///< MULTI_SET's, one per key
  std::int64_t number = 0;          ///< ADD's delta, BARRIER's world size
  std::uint32_t word = 0;           ///< VALIDATE's magic, PING's nonce
};

/// A request cohort does not serve (a query it does not know, one it does
/// not serve, a length over the limit); the message names it and, for a
/// query, the PyTorch version that sends it. The connection is then closed,
/// and the client can never rendezvous.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Reads a connection's requests as their bytes arrive. A request not yet
/// complete is resumed where it stopped, and the parser says how many bytes
/// it needs before it tries again, so bytes that arrive one at a time cost
/// O(1) each; a list grows with the keys that arrived, never with the count
/// it announced. Every length and count is checked against `max_bytes`.
class Parser {
 public:
  Parser(Dialect dialect, std::size_t max_bytes) : dialect_(dialect), max_bytes_(max_bytes) {}
  /// The request at the front of `buffer`, which begins where the last
  /// complete request ended and holds at least the bytes the previous call
  /// saw: nullopt when more bytes are needed, else the request and, in
  /// `*consumed`, its size. Throws Unsupported.
  std::optional<Request> next(std::string_view buffer, std::size_t* consumed);

 private:
  bool read_field(std::string_view buffer);
  bool integer(std::string_view buffer, std::size_t size, std::uint64_t* value);
  bool string(std::string_view buffer, std::string* out, const char* what);

  Dialect dialect_;
  std::size_t max_bytes_;
  std::optional<Request> request_;      // the one under way
  std::size_t field_ = 0;               // its fields read so far
  std::size_t position_ = 0;            // its bytes read so far
  std::optional<std::uint64_t> count_;  // the current list's announced length
  std::size_t needed_ = 0;              // bytes needed before the next try
};

/// The request at the front of `buffer`, all its bytes at hand (a fresh
/// Parser's first answer).
std::optional<Request> parse(std::string_view buffer, Dialect dialect, std::size_t max_bytes,
                             std::size_t* consumed);

/// Whether a connection's first bytes are a newer client's VALIDATE: false
/// while fewer than 5 bytes have arrived.
bool opens_like_newer_client(std::string_view first_bytes) noexcept;

/// The query's name as PyTorch's source spells it ("MULTI_GET").
std::string_view name(Query query) noexcept;

/// Answers: a byte vector (u64 length, bytes), an i64, a u32, one byte.
std::string bytes_reply(std::string_view value);
std::string i64_reply(std::int64_t value);
std::string u32_reply(std::uint32_t value);
std::string u8_reply(std::uint8_t value);

}  // namespace cohort::detail::torch_wire
