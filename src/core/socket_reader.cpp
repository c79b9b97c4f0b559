#include "core/socket_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <poll.h>
#include <sys/socket.h>

#include "core/strings.hpp"

namespace cohort::detail {

bool SocketReader::receive_more(Deadline deadline, std::string* error) {
  if (at_ == bytes_.size()) {
    bytes_.clear();
    at_ = 0;
  } else if (at_ > 0) {  // the part of a frame not yet read goes first
    bytes_.erase(0, at_);
    at_ = 0;
  }
  const std::size_t had = bytes_.size();
  const std::size_t room = std::max(kReadAhead, had + 1) - had;
  bytes_.resize(had + room);
  for (;;) {
    const ssize_t n = recv(fd_, bytes_.data() + had, room, MSG_DONTWAIT);
    if (n > 0) {
      bytes_.resize(had + static_cast<std::size_t>(n));
      return true;
    }
    if (n == 0) {
      bytes_.resize(had);
      *error = "closed the connection";
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (wait_ready(fd_, POLLIN, deadline, error)) continue;
    } else {
      *error = errno == ECONNRESET ? "closed the connection" : errno_text(errno);
    }
    bytes_.resize(had);
    return false;
  }
}

std::string_view SocketReader::take_buffered(std::size_t count) noexcept {
  const std::size_t taken = std::min(count, buffered());
  const std::string_view out(bytes_.data() + at_, taken);
  at_ += taken;
  return out;
}

bool SocketReader::read(void* data, std::size_t size, Deadline deadline, std::string* error) {
  char* into = static_cast<char*>(data);
  for (;;) {
    const std::string_view part = take_buffered(size);
    std::memcpy(into, part.data(), part.size());
    into += part.size();
    size -= part.size();
    if (size == 0) return true;
    if (size >= kReadAhead) return recv_all(fd_, into, size, deadline, error);
    if (!receive_more(deadline, error)) return false;
  }
}

bool SocketReader::append_to(std::string* out, std::size_t count, Deadline deadline,
                             std::string* error) {
  const std::string_view part = take_buffered(count);
  out->append(part);
  count -= part.size();
  if (count == 0) return true;
  const std::size_t had = out->size();
  // Grown with what arrives, not with what a frame's header announces.
  for (std::size_t left = count; left > 0;) {
    const std::size_t piece = std::min(left, kReadAhead * 16);
    out->resize(out->size() + piece);
    if (!read(out->data() + out->size() - piece, piece, deadline, error)) {
      out->resize(had);
      return false;
    }
    left -= piece;
  }
  return true;
}

bool SocketReader::skip(std::size_t count, Deadline deadline, std::string* error) {
  for (;;) {
    count -= take_buffered(count).size();
    if (count == 0) return true;
    if (!receive_more(deadline, error)) return false;
  }
}

}  // namespace cohort::detail
