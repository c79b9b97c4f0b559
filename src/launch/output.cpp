#include "launch/output.hpp"

#include <cctype>
#include <cerrno>

#include <unistd.h>

#include "launch/console.hpp"

namespace cohort::detail {
namespace {

// Lines kept for the report are cut to this length.
constexpr std::size_t kMaxTailLine = 1000;
// Lines emitted by every stream of this process, in order: tells which of a
// worker's two streams spoke last.
std::uint64_t lines_seen = 0;

void replace_all(std::string& text, std::string_view key, std::string_view value) {
  for (std::size_t at = text.find(key); at != std::string::npos;
       at = text.find(key, at + value.size())) {
    text.replace(at, key.size(), value);
  }
}

}  // namespace

std::string format_prefix(std::string_view pattern, int rank, int local_rank,
                          std::string_view host) {
  std::string out(pattern);
  replace_all(out, "{rank}", std::to_string(rank));
  replace_all(out, "{local_rank}", std::to_string(local_rank));
  replace_all(out, "{host}", host);
  return out;
}

void write_fully(int fd, std::string_view data) noexcept {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return;
    }
  }
}

std::string terminal_safe(std::string_view line) {
  std::string_view text = line.substr(0, line.size() - 1);
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (const std::size_t cr = text.rfind('\r'); cr != std::string_view::npos) {
    text.remove_prefix(cr + 1);
  }
  std::string out;
  out.reserve(text.size() + 1);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == 0x1b && i + 1 < text.size() && text[i + 1] == '[') {
      // A color (SGR): ESC [ digits and semicolons, then 'm'.
      std::size_t end = i + 2;
      while (end < text.size() &&
             (std::isdigit(static_cast<unsigned char>(text[end])) != 0 || text[end] == ';'))
        ++end;
      if (end < text.size() && text[end] == 'm') {
        out.append(text.substr(i, end + 1 - i));
        i = end;
        continue;
      }
    }
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      out.push_back('^');
      out.push_back(c == 0x7f ? '?' : static_cast<char>(c + 0x40));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('\n');
  return out;
}

OutputStream::OutputStream(int console_fd, std::string prefix, Fd log_fd, std::size_t keep_tail)
    : console_fd_(console_fd),
      prefix_(std::move(prefix)),
      log_fd_(std::move(log_fd)),
      keep_tail_(keep_tail),
      terminal_(console_fd >= 0 && ::isatty(console_fd) == 1) {}

void OutputStream::feed(std::string_view data) {
  if (log_fd_.valid()) write_fully(log_fd_.get(), data);
  partial_.append(data);
  const std::size_t last_newline = partial_.rfind('\n');
  if (last_newline != std::string::npos) {
    emit_lines(std::string_view(partial_).substr(0, last_newline + 1));
    partial_.erase(0, last_newline + 1);
  }
  if (partial_.size() >= kMaxLineBytes) {
    partial_.push_back('\n');
    emit_lines(partial_);
    partial_.clear();
  }
}

void OutputStream::finish() {
  if (partial_.empty()) return;
  partial_.push_back('\n');
  emit_lines(partial_);
  partial_.clear();
}

void OutputStream::emit_lines(std::string_view lines) {
  std::string batch;
  if (console_fd_ >= 0) batch.reserve(lines.size() + prefix_.size() * 8);
  std::size_t start = 0;
  while (start < lines.size()) {
    const std::size_t end = lines.find('\n', start) + 1;  // every line ends in '\n'
    const std::string_view line = lines.substr(start, end - start);
    if (console_fd_ >= 0) {
      batch.append(prefix_);
      if (terminal_) {
        batch.append(terminal_safe(line));
      } else {
        batch.append(line);
      }
    }
    if (keep_tail_ > 0) remember(line.substr(0, line.size() - 1));
    start = end;
    if (start == lines.size()) {
      last_line_.assign(line.substr(0, std::min(line.size() - 1, kMaxTailLine)));
      last_line_at_ = ++lines_seen;
    }
  }
  if (console_fd_ >= 0) console_write(console_fd_, batch, /*droppable=*/true);
}

void OutputStream::remember(std::string_view line) {
  tail_.emplace_back(line.substr(0, kMaxTailLine));
  if (tail_.size() > keep_tail_) tail_.pop_front();
}

}  // namespace cohort::detail
