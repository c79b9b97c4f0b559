// Small string helpers shared by every part.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail {

/// Streams every argument into one string: cat("rank ", 3, " of ", 4).
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

/// A strict base-10 integer: optional '-', digits, nothing else (no spaces,
/// no '+', no trailing text). std::nullopt when `text` is not one or overflows.
std::optional<std::int64_t> parse_int(std::string_view text) noexcept;

/// A byte size: digits with an optional K, M or G (binary; either case):
/// "4096", "4K", "256M". std::nullopt for anything else, or past 2^62.
std::optional<std::size_t> parse_byte_size(std::string_view text) noexcept;

/// `parts` joined with `separator` in between.
std::string join(std::span<const std::string> parts, std::string_view separator);

/// A duration for a message: "300 s", or "1500 ms" where it is not whole seconds.
std::string duration_text(std::chrono::milliseconds time);

/// `text` cut at every `separator`, empty fields kept: "a\t\tb" is
/// {"a", "", "b"}, "" is {""}.
std::vector<std::string> split_at(std::string_view text, char separator);

/// `bytes` random bytes from the kernel's generator (getrandom: no CPUID,
/// as std::random_device's first call makes, and no generator of its own
/// to set up, as OpenSSL's RAND_bytes has). Throws cohort::Error when the kernel has none.
std::string random_bytes(std::size_t bytes);

/// random_bytes(bytes) as 2 * bytes hex digits (run ids, job tokens).
std::string random_hex(std::size_t bytes);

}  // namespace cohort::detail
