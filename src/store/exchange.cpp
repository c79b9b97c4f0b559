#include "store/exchange.hpp"

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {

std::string exchanged_key(std::string_view prefix, int rank) {
  return cat(prefix, "/", rank);
}

std::string encode_table(const std::vector<std::string>& values) {
  std::string table;
  for (const std::string& value : values) {
    const auto length = static_cast<std::uint32_t>(value.size());
    for (int i = 0; i < 4; ++i)
      table.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
    table += value;
  }
  return table;
}

std::optional<std::vector<std::string>> decode_table(std::string_view table, int size) {
  std::vector<std::string> values;
  std::size_t at = 0;
  while (at < table.size()) {
    if (table.size() - at < 4 || static_cast<int>(values.size()) == size) return std::nullopt;
    std::uint32_t length = 0;
    for (int i = 3; i >= 0; --i)
      length = (length << 8) | static_cast<unsigned char>(table[at + static_cast<std::size_t>(i)]);
    at += 4;
    if (table.size() - at < length) return std::nullopt;
    values.emplace_back(table.substr(at, length));
    at += length;
  }
  if (static_cast<int>(values.size()) != size) return std::nullopt;
  return values;
}

std::vector<std::string> exchange_values(Store& store, std::string_view prefix, int rank, int size,
                                         const std::string& value,
                                         std::chrono::milliseconds timeout) {
  const std::string table_key = cat(prefix, "/table");
  store.set(exchanged_key(prefix, rank), value);
  if (store.add(cat(prefix, "/arrived"), 1) == size) {
    // Everyone's value is set by now: these reads do not wait.
    std::vector<std::string> values;
    values.reserve(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r)
      values.push_back(store.get(exchanged_key(prefix, r), timeout));
    store.set(table_key, encode_table(values));
    return values;
  }
  auto values = decode_table(store.get(table_key, timeout), size);
  if (!values) {
    throw Error(cat("the exchange under '", prefix, "' published a table that is not ", size,
                    " values: another job or program uses the same store keys"));
  }
  return *values;
}

}  // namespace cohort::detail
