#include "store/torch_wire.hpp"

#include <array>
#include <span>

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

// What each query carries after its byte, in order.
enum class Field : std::uint8_t { word, number, key, value, expected, keys, pairs };

std::span<const Field> fields_of(Query query) noexcept {
  static constexpr Field kWord[] = {Field::word};
  static constexpr Field kKeyValue[] = {Field::key, Field::value};
  static constexpr Field kCompareSet[] = {Field::key, Field::expected, Field::value};
  static constexpr Field kKey[] = {Field::key};
  static constexpr Field kKeyNumber[] = {Field::key, Field::number};
  static constexpr Field kKeys[] = {Field::keys};
  static constexpr Field kPairs[] = {Field::pairs};
  switch (query) {
    case Query::validate:
    case Query::ping:
      return kWord;
    case Query::set:
    case Query::append:
    case Query::queue_push:
      return kKeyValue;
    case Query::compare_set:
      return kCompareSet;
    case Query::get:
    case Query::delete_key:
    case Query::queue_pop:
    case Query::queue_len:
      return kKey;
    case Query::add:
    case Query::barrier:
      return kKeyNumber;
    case Query::check:
    case Query::wait:
    case Query::multi_get:
      return kKeys;
    case Query::multi_set:
      return kPairs;
    case Query::num_keys:
    case Query::cancel_wait:
    case Query::list_keys:
    case Query::watch_key:  // decode() refuses it
      break;
  }
  return {};
}

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

bool Parser::integer(std::string_view buffer, std::size_t size, std::uint64_t* value) {
  if (buffer.size() < position_ + size) {
    needed_ = position_ + size;
    return false;
  }
  *value = 0;
  for (std::size_t i = 0; i < size; ++i) {
    *value |= static_cast<std::uint64_t>(static_cast<unsigned char>(buffer[position_ + i]))
              << (8 * i);
  }
  position_ += size;
  return true;
}

bool Parser::string(std::string_view buffer, std::string* out, const char* what) {
  const std::size_t start = position_;
  std::uint64_t size = 0;
  if (!integer(buffer, 8, &size)) return false;
  if (size > max_bytes_) {
    throw Unsupported(cat("a ", what, " of ", size, " bytes, over the limit of ", max_bytes_));
  }
  if (buffer.size() - position_ < size) {
    needed_ = position_ + static_cast<std::size_t>(size);
    position_ = start;  // the length is read again with the bytes
    return false;
  }
  out->assign(buffer.substr(position_, static_cast<std::size_t>(size)));
  position_ += static_cast<std::size_t>(size);
  return true;
}

bool Parser::read_field(std::string_view buffer) {
  Request& request = *request_;
  const Field field = fields_of(request.query)[field_];
  switch (field) {
    case Field::word: {
      std::uint64_t word = 0;
      if (!integer(buffer, 4, &word)) return false;
      request.word = static_cast<std::uint32_t>(word);
      return true;
    }
    case Field::number: {
      std::uint64_t bits = 0;
      if (!integer(buffer, 8, &bits)) return false;
      request.number = static_cast<std::int64_t>(bits);
      return true;
    }
    case Field::key:
      if (request.keys.empty()) request.keys.emplace_back();
      return string(buffer, &request.keys[0], "key");
    case Field::value:
      return string(buffer, &request.value, "value");
    case Field::expected:
      return string(buffer, &request.expected, "value");
    case Field::keys:
    case Field::pairs: {
      // A count of items that take at least 8 bytes each (16 a pair): one
      // beyond what a request under the limit can hold is refused.
      const std::size_t item_bytes = field == Field::keys ? 8 : 16;
      if (!count_) {
        std::uint64_t count = 0;
        if (!integer(buffer, 8, &count)) return false;
        if (count > max_bytes_ / item_bytes) throw Unsupported(cat("a list of ", count, " keys"));
        count_ = count;
      }
      std::vector<std::string>& done = field == Field::keys ? request.keys : request.values;
      std::string item;
      while (done.size() < *count_) {
        const bool key = field == Field::keys || request.keys.size() == request.values.size();
        if (!string(buffer, &item, key ? "key" : "value")) return false;
        (key ? request.keys : request.values).push_back(std::move(item));
      }
      count_.reset();
      return true;
    }
  }
  return true;
}

std::optional<Request> Parser::next(std::string_view buffer, std::size_t* consumed) {
  if (buffer.size() < needed_ || buffer.empty()) return std::nullopt;
  if (!request_) {
    const Query query = decode(static_cast<std::uint8_t>(buffer[0]), dialect_);
    request_.emplace();
    request_->query = query;
    field_ = 0;
    position_ = 1;
  }
  const std::span<const Field> fields = fields_of(request_->query);
  while (field_ < fields.size()) {
    if (!read_field(buffer)) return std::nullopt;
    ++field_;
  }
  *consumed = position_;
  needed_ = 0;
  std::optional<Request> done = std::move(request_);
  request_.reset();
  return done;
}

std::optional<Request> parse(std::string_view buffer, Dialect dialect, std::size_t max_bytes,
                             std::size_t* consumed) {
  return Parser(dialect, max_bytes).next(buffer, consumed);
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
