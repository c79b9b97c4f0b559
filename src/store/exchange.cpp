#include "store/exchange.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <zstd.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {

std::string exchanged_key(std::string_view prefix, int rank) {
  return cat(prefix, "/", rank);
}

std::vector<std::string> ranked_keys(std::string_view prefix, std::size_t count) {
  std::vector<std::string> keys;
  keys.reserve(count);
  for (std::size_t rank = 0; rank < count; ++rank)
    keys.push_back(cat(prefix, "/", rank));
  return keys;
}

namespace {

void put_u32(std::string& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::optional<std::uint32_t> take_u32(std::string_view table, std::size_t& at) {
  if (table.size() - at < 4) return std::nullopt;
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i)
    value = (value << 8) | static_cast<unsigned char>(table[at + static_cast<std::size_t>(i)]);
  at += 4;
  return value;
}

// A stretch: values first, first + 1, ... first + count - 1 (indexes into
// the distinct values), `per` participants each, in rank order.
struct Stretch {
  std::uint32_t first = 0;
  std::uint32_t per = 0;
  std::uint32_t count = 0;
  std::uint32_t end() const noexcept { return first + count; }
};

// The first 4 bytes of a compressed table: as a count of distinct values it
// would be more than any exchange's participants.
constexpr std::uint32_t kCompressed = 0xffffffffu;
// zstd's fastest positive level: the bench's table of 100,000 agents'
// entries (4.7 MB) went 3.2 times smaller, encoded and compressed by the
// completer in 0.12 s, and every node's copy shrinks with it
// (docs/rendezvous.md).
constexpr int kCompressionLevel = 1;

std::string encode_plain(const std::vector<std::string>& values) {
  std::unordered_map<std::string_view, std::uint32_t> index;
  std::vector<std::string_view> distinct;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> runs;  // value's index, how many
  for (const std::string& value : values) {
    const auto [it, inserted] = index.emplace(value, static_cast<std::uint32_t>(distinct.size()));
    if (inserted) distinct.push_back(value);
    if (!runs.empty() && runs.back().first == it->second) {
      ++runs.back().second;
    } else {
      runs.emplace_back(it->second, 1);
    }
  }
  std::vector<Stretch> stretches;
  for (const auto& [value, length] : runs) {
    if (!stretches.empty() && stretches.back().end() == value && stretches.back().per == length) {
      ++stretches.back().count;
    } else {
      stretches.push_back({value, length, 1});
    }
  }
  std::string table;
  put_u32(table, static_cast<std::uint32_t>(distinct.size()));
  for (std::string_view value : distinct) {
    put_u32(table, static_cast<std::uint32_t>(value.size()));
    table += value;
  }
  put_u32(table, static_cast<std::uint32_t>(stretches.size()));
  for (const Stretch& stretch : stretches) {
    put_u32(table, stretch.first);
    put_u32(table, stretch.per);
    put_u32(table, stretch.count);
  }
  return table;
}

// The plain table inside a compressed one; nullopt unless `frame` is one
// whole zstd frame that says its size, within kMaxTableBytes.
std::optional<std::string> decompressed(std::string_view frame) {
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_UNKNOWN || size == ZSTD_CONTENTSIZE_ERROR ||
      size < kCompressTablesFrom || size > kMaxTableBytes ||
      ZSTD_findFrameCompressedSize(frame.data(), frame.size()) != frame.size()) {
    return std::nullopt;
  }
  std::string plain(static_cast<std::size_t>(size), '\0');
  const std::size_t made = ZSTD_decompress(plain.data(), plain.size(), frame.data(), frame.size());
  if (ZSTD_isError(made) || made != plain.size()) return std::nullopt;
  return plain;
}

std::optional<std::vector<std::string>> decode_plain(std::string_view table, int size) {
  std::size_t at = 0;
  const auto count = take_u32(table, at);
  if (!count || size < 0 || *count > static_cast<std::uint32_t>(size)) return std::nullopt;
  std::vector<std::string_view> distinct;
  std::unordered_set<std::string_view> seen;
  for (std::uint32_t i = 0; i < *count; ++i) {
    const auto length = take_u32(table, at);
    if (!length || table.size() - at < *length) return std::nullopt;
    distinct.push_back(table.substr(at, *length));
    if (!seen.insert(distinct.back()).second) return std::nullopt;  // listed twice
    at += *length;
  }
  const auto stretches = take_u32(table, at);
  if (!stretches || *stretches > static_cast<std::uint32_t>(size) ||
      table.size() - at != 12 * static_cast<std::size_t>(*stretches)) {
    return std::nullopt;
  }
  std::vector<std::string> values;
  values.reserve(static_cast<std::size_t>(size));
  std::uint64_t next_new = 0;  // values appear in the order they are first used
  std::optional<Stretch> previous;
  for (std::uint32_t s = 0; s < *stretches; ++s) {
    Stretch stretch;
    stretch.first = *take_u32(table, at);
    stretch.per = *take_u32(table, at);
    stretch.count = *take_u32(table, at);
    const std::uint64_t end = std::uint64_t{stretch.first} + stretch.count;
    const std::uint64_t left = static_cast<std::uint64_t>(size) - values.size();
    if (stretch.first > next_new || end > *count || stretch.per == 0 || stretch.count == 0 ||
        std::uint64_t{stretch.per} * stretch.count > left) {
      return std::nullopt;
    }
    // Runs and stretches are as long as they can be: one encoding per table.
    if (previous && (std::uint64_t{stretch.first} + 1 == previous->end() ||
                     (stretch.first == previous->end() && stretch.per == previous->per))) {
      return std::nullopt;
    }
    next_new = std::max(next_new, end);
    for (std::uint32_t value = stretch.first; value < end; ++value)
      values.insert(values.end(), stretch.per, std::string(distinct[value]));
    previous = stretch;
  }
  if (next_new != *count || values.size() != static_cast<std::size_t>(size)) return std::nullopt;
  return values;
}

}  // namespace

std::string encode_table(const std::vector<std::string>& values) {
  std::string plain = encode_plain(values);
  if (plain.size() < kCompressTablesFrom || plain.size() > kMaxTableBytes) return plain;
  std::string table;
  put_u32(table, kCompressed);
  table.resize(4 + ZSTD_compressBound(plain.size()));
  const std::size_t made = ZSTD_compress(table.data() + 4, table.size() - 4, plain.data(),
                                         plain.size(), kCompressionLevel);
  // Values that do not compress (random bytes: only their lengths would)
  // travel as they are, and every participant is spared the decompression.
  if (ZSTD_isError(made) || 4 + made > plain.size() / 8 * 7) return plain;
  table.resize(4 + made);
  return table;
}

std::optional<std::vector<std::string>> decode_table(std::string_view table, int size) {
  std::size_t at = 0;
  if (take_u32(table, at) != kCompressed) return decode_plain(table, size);
  const auto plain = decompressed(table.substr(4));
  if (!plain) return std::nullopt;
  return decode_plain(*plain, size);
}

std::vector<std::string> exchange_values(Store& store, std::string_view prefix, int rank, int size,
                                         const std::string& value,
                                         std::chrono::milliseconds timeout) {
  const std::string table_key = cat(prefix, "/table");
  // One round trip where the store can: a relay sends a node's arrivals
  // up as one batch.
  if (store.set_then_add(exchanged_key(prefix, rank), value, cat(prefix, "/arrived"), 1) == size) {
    // Everyone's value is set by now: one request reads them all.
    std::vector<std::string> values =
        store.multi_get(ranked_keys(prefix, static_cast<std::size_t>(size)), timeout);
    store.set(table_key, encode_table(values));
    return values;
  }
  // Through a node's relay the table is the node's one copy, read in place.
  auto values = decode_table(store.get_shared(table_key, timeout).view(), size);
  if (!values) {
    throw Error(cat("the exchange under '", prefix, "' published a table that is not ", size,
                    " values: another job or program uses the same store keys"));
  }
  return *values;
}

}  // namespace cohort::detail
