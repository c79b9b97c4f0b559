// PyTorch's TCPStore wire protocol, as PyTorch 1.13 speaks it (the version
// Debian 12 ships; docs/store-protocol.md, "PyTorch's TCPStore protocol"):
// the agent's store serves it on MASTER_PORT so that workers started with
// TORCHELASTIC_USE_AGENT_STORE=True rendezvous through cohort's store.
//
// A request is one query byte and its fields, with no framing: a string or
// byte vector is a u64 length then the bytes, a key list is a u64 count then
// strings, integers are 8 bytes. Everything is little-endian (PyTorch sends
// host order; cohort runs on little-endian hosts only).
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

/// PyTorch 1.13's QueryType. PyTorch 2.1 and later renumbered it (VALIDATE = 0).
enum class Query : std::uint8_t {
  set = 0,
  compare_set = 1,
  get = 2,
  add = 3,
  check = 4,
  wait = 5,
  num_keys = 6,
  watch_key = 7,
  delete_key = 8,
};

/// CHECK answers: every key set, or not.
inline constexpr std::uint8_t kReady = 0;
inline constexpr std::uint8_t kNotReady = 1;
/// WAIT's only answer, sent once every key is set.
inline constexpr std::uint8_t kStopWaiting = 0;

/// A newer client (PyTorch >= 2.1) opens every connection with VALIDATE (0)
/// and this number, which no 1.13 request can start with.
inline constexpr std::uint32_t kValidateMagic = 0x3C85F7CE;

struct Request {
  Query query = Query::set;
  std::vector<std::string> keys;  ///< one key, or CHECK/WAIT's list
  std::string value;              ///< SET's value; COMPARE_SET's desired value
  std::string expected;           ///< COMPARE_SET's expected value
  std::int64_t delta = 0;         ///< ADD
};

/// A request cohort does not serve (unknown or unsupported query, a length
/// over the limit); the message says which. The connection is then closed.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses the request at the front of `buffer`: nullopt when more bytes are
/// needed, else the request and, in `*consumed`, its size. Every length and
/// count is checked against `max_bytes` before anything is allocated.
/// Throws Unsupported.
std::optional<Request> parse(std::string_view buffer, std::size_t max_bytes, std::size_t* consumed);

/// Whether a connection's first bytes are a newer client's VALIDATE: false
/// while fewer than 5 bytes have arrived.
bool opens_like_newer_client(std::string_view first_bytes) noexcept;

/// Answers: a byte vector (u64 length, bytes), an i64, one byte.
std::string bytes_reply(std::string_view value);
std::string i64_reply(std::int64_t value);
std::string u8_reply(std::uint8_t value);

}  // namespace cohort::detail::torch_wire
