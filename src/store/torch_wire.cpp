#include "store/torch_wire.hpp"

#include <array>

#include "core/strings.hpp"

namespace cohort::detail::torch_wire {
namespace {

// The queries by their number on the wire, per dialect.
constexpr std::array kV1{Query::set,      Query::compare_set, Query::get,
                         Query::add,      Query::check,       Query::wait,
                         Query::num_keys, Query::watch_key,   Query::delete_key};
constexpr std::array kV2{Query::validate,    Query::set,       Query::compare_set, Query::get,
                         Query::add,         Query::check,     Query::wait,        Query::num_keys,
                         Query::delete_key,  Query::append,    Query::multi_get,   Query::multi_set,
                         Query::cancel_wait, Query::ping,      Query::queue_push,  Query::queue_pop,
                         Query::queue_len,   Query::list_keys, Query::barrier};

// Reads fields from the front of a buffer that may hold only part of a
// request: every read says whether the bytes were there.
class Cursor {
 public:
  Cursor(std::string_view data, std::size_t max_bytes) : data_(data), max_bytes_(max_bytes) {}

  template <class Unsigned>
  bool integer(Unsigned* value) {
    if (data_.size() - position_ < sizeof(Unsigned)) return false;
    *value = 0;
    for (std::size_t i = 0; i < sizeof(Unsigned); ++i) {
      *value |= static_cast<Unsigned>(static_cast<unsigned char>(data_[position_ + i])) << (8 * i);
    }
    position_ += sizeof(Unsigned);
    return true;
  }
  bool i64(std::int64_t* value) {
    std::uint64_t bits = 0;
    if (!integer(&bits)) return false;
    *value = static_cast<std::int64_t>(bits);
    return true;
  }

  bool string(std::string* out, const char* what) {
    std::uint64_t size = 0;
    if (!integer(&size)) return false;
    if (size > max_bytes_) {
      throw Unsupported(cat("a ", what, " of ", size, " bytes, over the limit of ", max_bytes_));
    }
    if (data_.size() - position_ < size) return false;
    out->assign(data_.substr(position_, static_cast<std::size_t>(size)));
    position_ += static_cast<std::size_t>(size);
    return true;
  }

  // A count of items that take at least `item_bytes` each: one beyond what
  // a request under the limit can hold is refused before anything is kept.
  bool count(std::uint64_t* value, std::size_t item_bytes) {
    if (!integer(value)) return false;
    if (*value > max_bytes_ / item_bytes) throw Unsupported(cat("a list of ", *value, " keys"));
    return true;
  }

  bool keys(std::vector<std::string>* out) {
    std::uint64_t n = 0;
    if (!count(&n, 8)) return false;
    out->resize(static_cast<std::size_t>(n));
    for (std::string& key : *out) {
      if (!string(&key, "key")) return false;
    }
    return true;
  }

  bool pairs(std::vector<std::string>* keys, std::vector<std::string>* values) {
    std::uint64_t n = 0;
    if (!count(&n, 16)) return false;
    keys->resize(static_cast<std::size_t>(n));
    values->resize(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < keys->size(); ++i) {
      if (!string(&(*keys)[i], "key") || !string(&(*values)[i], "value")) return false;
    }
    return true;
  }

  std::size_t position() const noexcept { return position_; }

 private:
  std::string_view data_;
  std::size_t max_bytes_;
  std::size_t position_ = 1;  // after the query byte
};

Query decode(std::uint8_t byte, Dialect dialect) {
  if (dialect == Dialect::v1) {
    if (byte < kV1.size() && kV1[byte] != Query::watch_key) return kV1[byte];
    if (byte < kV1.size()) {
      throw Unsupported(
          "WATCH_KEY (PyTorch 1.13's query 7, for watch_key callbacks), which cohort's store does "
          "not serve");
    }
    throw Unsupported(cat("query type ", int{byte},
                          ", which PyTorch 1.13's client never sends (its last is DELETE_KEY, 8): "
                          "not a PyTorch TCPStore client, or a newer one that did not open with "
                          "VALIDATE"));
  }
  if (byte < kV2.size()) return kV2[byte];
  throw Unsupported(cat("query type ", int{byte},
                        ", newer than any PyTorch release cohort's store knows (the newest it "
                        "serves is BARRIER, 18): update cohort, or run cohort run with "
                        "--no-agent-store (rank 0 then serves PyTorch's own store)"));
}

}  // namespace

std::optional<Request> parse(std::string_view buffer, Dialect dialect, std::size_t max_bytes,
                             std::size_t* consumed) {
  if (buffer.empty()) return std::nullopt;
  Request request;
  request.query = decode(static_cast<std::uint8_t>(buffer[0]), dialect);
  Cursor in(buffer, max_bytes);
  const auto one_key = [&] {
    request.keys.resize(1);
    return in.string(&request.keys[0], "key");
  };
  bool complete = false;
  switch (request.query) {
    case Query::validate:
    case Query::ping:
      complete = in.integer(&request.word);
      break;
    case Query::set:
    case Query::append:
    case Query::queue_push:
      complete = one_key() && in.string(&request.value, "value");
      break;
    case Query::compare_set:
      complete =
          one_key() && in.string(&request.expected, "value") && in.string(&request.value, "value");
      break;
    case Query::get:
    case Query::delete_key:
    case Query::queue_pop:
    case Query::queue_len:
      complete = one_key();
      break;
    case Query::add:
    case Query::barrier:
      complete = one_key() && in.i64(&request.number);
      break;
    case Query::check:
    case Query::wait:
    case Query::multi_get:
      complete = in.keys(&request.keys);
      break;
    case Query::multi_set:
      complete = in.pairs(&request.keys, &request.values);
      break;
    case Query::num_keys:
    case Query::cancel_wait:
    case Query::list_keys:
      complete = true;
      break;
    case Query::watch_key:  // decode() refuses it
      break;
  }
  if (!complete) return std::nullopt;
  *consumed = in.position();
  return request;
}

bool opens_like_newer_client(std::string_view first_bytes) noexcept {
  if (first_bytes.size() < 5 || first_bytes[0] != 0) return false;
  std::uint32_t magic = 0;
  for (int i = 0; i < 4; ++i) {
    magic |= static_cast<std::uint32_t>(static_cast<unsigned char>(first_bytes[1 + i])) << (8 * i);
  }
  return magic == kValidateMagic;
}

std::string_view name(Query query) noexcept {
  switch (query) {
    case Query::validate:
      return "VALIDATE";
    case Query::set:
      return "SET";
    case Query::compare_set:
      return "COMPARE_SET";
    case Query::get:
      return "GET";
    case Query::add:
      return "ADD";
    case Query::check:
      return "CHECK";
    case Query::wait:
      return "WAIT";
    case Query::num_keys:
      return "GETNUMKEYS";
    case Query::watch_key:
      return "WATCH_KEY";
    case Query::delete_key:
      return "DELETE_KEY";
    case Query::append:
      return "APPEND";
    case Query::multi_get:
      return "MULTI_GET";
    case Query::multi_set:
      return "MULTI_SET";
    case Query::cancel_wait:
      return "CANCEL_WAIT";
    case Query::ping:
      return "PING";
    case Query::queue_push:
      return "QUEUE_PUSH";
    case Query::queue_pop:
      return "QUEUE_POP";
    case Query::queue_len:
      return "QUEUE_LEN";
    case Query::list_keys:
      return "LIST_KEYS";
    case Query::barrier:
      return "BARRIER";
  }
  return "?";
}

std::string i64_reply(std::int64_t value) {
  std::string out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff));
  return out;
}

std::string u32_reply(std::uint32_t value) {
  std::string out;
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  return out;
}

std::string bytes_reply(std::string_view value) {
  return i64_reply(static_cast<std::int64_t>(value.size())).append(value);
}

std::string u8_reply(std::uint8_t value) {
  return std::string(1, static_cast<char>(value));
}

}  // namespace cohort::detail::torch_wire
