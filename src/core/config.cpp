#include "core/config.hpp"

#include <cmath>
#include <cstdlib>
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
  char* end = nullptr;
  const unsigned long long bytes = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || text[0] == '-') {
    throw InvalidArgument(cat(name, "='", text, "' is not a number of bytes; fix or unset it"));
  }
  return static_cast<std::size_t>(bytes);
}

}  // namespace cohort::detail
