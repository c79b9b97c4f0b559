// A worker's output as the agent splits it into lines (src/launch/output.cpp):
// whatever bytes a rank writes, in whatever pieces. The first byte chooses
// the pieces' size. Every console line carries the prefix and ends in a
// newline; without a terminal the bytes come through as written, newlines
// added only where a line was cut or the stream ended; terminal_safe() of
// any line holds no control character but tab and the colors' ESC.
#include <cstdlib>
#include <string>
#include <string_view>

#include <sys/mman.h>
#include <unistd.h>

#include "fuzz/fuzz_target.hpp"
#include "launch/output.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(output_lines) {
  if (size < 1) return 0;
  const std::size_t piece = data[0] % 64 + 1;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const int console = memfd_create("console", MFD_CLOEXEC);
  if (console < 0) return 0;
  {
    detail::OutputStream stream(console, "[7] ", detail::Fd(), 3);
    for (std::size_t at = 0; at < input.size(); at += piece)
      stream.feed(input.substr(at, piece));
    stream.finish();
  }
  std::string out(static_cast<std::size_t>(lseek(console, 0, SEEK_END)), '\0');
  if (pread(console, out.data(), out.size(), 0) != static_cast<ssize_t>(out.size())) std::abort();
  close(console);
  std::string bytes;  // the console without prefixes
  for (std::size_t start = 0; start < out.size();) {
    const std::size_t end = out.find('\n', start);
    if (end == std::string::npos || out.compare(start, 4, "[7] ") != 0) std::abort();
    bytes.append(out, start + 4, end + 1 - start - 4);
    const std::string safe =
        detail::terminal_safe(std::string_view(out).substr(start, end + 1 - start));
    for (std::size_t i = 0; i + 1 < safe.size(); ++i) {
      const auto c = static_cast<unsigned char>(safe[i]);
      if ((c < 0x20 && c != '\t' && c != 0x1b) || c == 0x7f) std::abort();
    }
    start = end + 1;
  }
  // The input is the console's bytes with only added newlines taken out.
  std::size_t i = 0;
  for (char c : bytes) {
    if (i < input.size() && input[i] == c) {
      ++i;
    } else if (c != '\n') {
      std::abort();
    }
  }
  if (i != input.size()) std::abort();
  return 0;
}

}  // namespace cohort::fuzz
