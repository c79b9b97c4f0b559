#include "core/strings.hpp"

#include <cerrno>
#include <charconv>
#include <random>
#include <vector>

#include <sys/random.h>

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

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> random(bytes);
  std::size_t got = 0;
  while (got < bytes) {  // the kernel's generator: no CPUID (std::random_device's first call)
    const ssize_t more = getrandom(random.data() + got, bytes - got, 0);
    if (more > 0) got += static_cast<std::size_t>(more);
    if (more < 0 && errno != EINTR) break;
  }
  if (got < bytes) {  // no getrandom (a kernel before 3.17)
    std::random_device device;
    for (std::size_t i = got; i < bytes; ++i)
      random[i] = static_cast<unsigned char>(device());
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const unsigned char byte : random) {
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
  }
  return out;
}

}  // namespace cohort::detail
