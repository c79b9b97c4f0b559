#include "core/config.hpp"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {

std::chrono::milliseconds seconds_from_env(const char* name, std::chrono::milliseconds fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds >= 0) || seconds > 1e9) {
    throw InvalidArgument(cat(name, "='", text, "' is not a number of seconds; fix or unset it"));
  }
  return std::chrono::milliseconds(std::llround(seconds * 1000));
}

std::size_t bytes_from_env(const char* name, std::size_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  const std::optional<std::size_t> bytes = parse_byte_size(text);
  if (!bytes) {
    throw InvalidArgument(
        cat(name, "='", text, "' is not a number of bytes (like 65536 or 64K); fix or unset it"));
  }
  return *bytes;
}

}  // namespace cohort::detail
