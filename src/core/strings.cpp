#include "core/strings.hpp"

#include <cerrno>
#include <charconv>

#include <sys/random.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"

namespace cohort::detail {

std::optional<std::int64_t> parse_int(std::string_view text) noexcept {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::optional<std::size_t> parse_byte_size(std::string_view text) noexcept {
  int shift = 0;
  const char suffix = text.empty() ? '\0' : text.back();
  if (suffix == 'K' || suffix == 'k') shift = 10;
  if (suffix == 'M' || suffix == 'm') shift = 20;
  if (suffix == 'G' || suffix == 'g') shift = 30;
  if (shift != 0) text.remove_suffix(1);
  const std::optional<std::int64_t> number = parse_int(text);
  if (!number || *number < 0 || *number > (std::int64_t{1} << (62 - shift))) return std::nullopt;
  return static_cast<std::size_t>(*number) << shift;
}

std::vector<std::string> split_at(std::string_view text, char separator) {
  std::vector<std::string> fields;
  for (;;) {
    const std::size_t at = text.find(separator);
    fields.emplace_back(text.substr(0, at));
    if (at == std::string_view::npos) return fields;
    text.remove_prefix(at + 1);
  }
}

std::string join(std::span<const std::string> parts, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i != 0) out += separator;
    out += parts[i];
  }
  return out;
}

std::string duration_text(std::chrono::milliseconds time) {
  return time.count() % 1000 == 0 ? cat(time.count() / 1000, " s") : cat(time.count(), " ms");
}

std::string random_bytes(std::size_t bytes) {
  std::string out(bytes, '\0');
  for (std::size_t drawn = 0; drawn < bytes;) {
    const ssize_t got = getrandom(out.data() + drawn, bytes - drawn, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw Error(cat("could not draw random bytes (getrandom: ", errno_text(errno), ")"));
    drawn += static_cast<std::size_t>(got);
  }
  return out;
}

std::string random_hex(std::size_t bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const unsigned char byte : random_bytes(bytes)) {
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
  }
  return out;
}

}  // namespace cohort::detail
