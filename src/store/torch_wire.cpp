#include "store/torch_wire.hpp"

#include "core/strings.hpp"

namespace cohort::detail::torch_wire {
namespace {

// Reads fields from the front of a buffer that may hold only part of a
// request: every read says whether the bytes were there.
class Cursor {
 public:
  Cursor(std::string_view data, std::size_t max_bytes) : data_(data), max_bytes_(max_bytes) {}

  bool u64(std::uint64_t* value) {
    if (data_.size() - position_ < 8) return false;
    *value = 0;
    for (int i = 0; i < 8; ++i) {
      *value |= static_cast<std::uint64_t>(static_cast<unsigned char>(data_[position_ + i]))
                << (8 * i);
    }
    position_ += 8;
    return true;
  }

  bool string(std::string* out, const char* what) {
    std::uint64_t size = 0;
    if (!u64(&size)) return false;
    if (size > max_bytes_) {
      throw Unsupported(cat("a ", what, " of ", size, " bytes, over the limit of ", max_bytes_));
    }
    if (data_.size() - position_ < size) return false;
    out->assign(data_.substr(position_, static_cast<std::size_t>(size)));
    position_ += static_cast<std::size_t>(size);
    return true;
  }

  bool keys(std::vector<std::string>* out) {
    std::uint64_t count = 0;
    if (!u64(&count)) return false;
    // Each key takes at least its 8-byte length, so a count beyond this can
    // never be satisfied by a request under the limit.
    if (count > max_bytes_ / 8) throw Unsupported(cat("a list of ", count, " keys"));
    out->resize(static_cast<std::size_t>(count));
    for (std::string& key : *out) {
      if (!string(&key, "key")) return false;
    }
    return true;
  }

  std::size_t position() const noexcept { return position_; }

 private:
  std::string_view data_;
  std::size_t max_bytes_;
  std::size_t position_ = 1;  // after the query byte
};

}  // namespace

std::optional<Request> parse(std::string_view buffer, std::size_t max_bytes,
                             std::size_t* consumed) {
  if (buffer.empty()) return std::nullopt;
  const auto query = static_cast<std::uint8_t>(buffer[0]);
  Request request;
  request.query = static_cast<Query>(query);
  Cursor in(buffer, max_bytes);
  bool complete = false;
  switch (request.query) {
    case Query::set:
      request.keys.resize(1);
      complete = in.string(&request.keys[0], "key") && in.string(&request.value, "value");
      break;
    case Query::compare_set:
      request.keys.resize(1);
      complete = in.string(&request.keys[0], "key") && in.string(&request.expected, "value") &&
                 in.string(&request.value, "value");
      break;
    case Query::get:
    case Query::delete_key:
      request.keys.resize(1);
      complete = in.string(&request.keys[0], "key");
      break;
    case Query::add: {
      request.keys.resize(1);
      std::uint64_t delta = 0;
      complete = in.string(&request.keys[0], "key") && in.u64(&delta);
      request.delta = static_cast<std::int64_t>(delta);
      break;
    }
    case Query::check:
    case Query::wait:
      complete = in.keys(&request.keys);
      break;
    case Query::num_keys:
      complete = true;
      break;
    default:
      throw Unsupported(cat(request.query == Query::watch_key ? "WATCH_KEY" : "an unknown query",
                            " (query type ", int{query}, "), which cohort's store does not serve"));
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

std::string i64_reply(std::int64_t value) {
  std::string out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff));
  return out;
}

std::string bytes_reply(std::string_view value) {
  return i64_reply(static_cast<std::int64_t>(value.size())).append(value);
}

std::string u8_reply(std::uint8_t value) {
  return std::string(1, static_cast<char>(value));
}

}  // namespace cohort::detail::torch_wire
