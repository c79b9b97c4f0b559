#include "comm/backends/shm/segment.hpp"

#include <cstring>
#include <utility>

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

namespace cohort::detail::shm_backend {
namespace {

using Clock = std::chrono::steady_clock;

// An abstract socket address: no file, gone with the socket.
sockaddr_un abstract_address(const std::string& name, socklen_t& length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return address;
}

std::string random_name() {
  return cat("cohort-shm-", ::getpid(), "-", random_hex(16));
}

// Waits until `fd` is readable (or, with `out`, writable) before `deadline`.
bool ready(int fd, Clock::time_point deadline, bool out = false) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd polled{fd, static_cast<short>(out ? POLLOUT : POLLIN), 0};
    const int n = ::poll(&polled, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

ucred peer_credentials(int fd) {
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    credentials.pid = -1;
  }
  return credentials;
}

// One byte with room for one descriptor beside it: what SCM_RIGHTS travels in.
struct DescriptorMessage {
  char byte = 0;
  iovec data{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  DescriptorMessage() {
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
  }
  DescriptorMessage(const DescriptorMessage&) = delete;
  DescriptorMessage& operator=(const DescriptorMessage&) = delete;
};

unsigned char* map(int fd, std::size_t bytes) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    throw Error(cat("shm: mapping the group's segment of ", bytes,
                    " bytes failed: ", errno_text(errno), " (check ulimit -v)"));
  }
  return static_cast<unsigned char*>(data);
}

// Rank 0: sends the segment to every rank that proves to be one of the group.
void hand_out(int listener, int memfd, int size, const std::vector<long>& pids,
              Clock::time_point deadline, std::chrono::milliseconds timeout) {
  std::vector<bool> served(static_cast<std::size_t>(size), false);
  for (int left = size - 1; left > 0;) {
    if (!ready(listener, deadline)) {
      std::vector<std::string> missing;
      for (int r = 1; r < size; ++r) {
        if (!served[static_cast<std::size_t>(r)]) missing.push_back(std::to_string(r));
      }
      throw Timeout(cat("shm: rank 0 waited ", timeout.count(), " ms for rank(s) ",
                        join(missing, ", "), " to take the group's segment"));
    }
    Fd connection(retry_eintr([&] { return ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC); }));
    if (!connection.valid()) continue;
    std::int32_t claimed = -1;
    // A second to say who it is: a stranger that says nothing stalls no one.
    if (!ready(connection.get(), std::min(deadline, Clock::now() + std::chrono::seconds(1))) ||
        ::recv(connection.get(), &claimed, sizeof(claimed), MSG_WAITALL) != sizeof(claimed)) {
      continue;
    }
    const ucred peer = peer_credentials(connection.get());
    const bool member = claimed > 0 && claimed < size &&
                        !served[static_cast<std::size_t>(claimed)] && peer.uid == ::geteuid() &&
                        peer.pid == pids[static_cast<std::size_t>(claimed)];
    if (!member) {
      log(LogLevel::warn, "shm",
          cat("refused a process (pid ", peer.pid, ", uid ", peer.uid, ") that claimed rank ",
              claimed, " of the group: it is not that rank's process"));
      continue;
    }
    DescriptorMessage out;
    cmsghdr* header = CMSG_FIRSTHDR(&out.message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &memfd, sizeof(int));
    if (retry_eintr([&] { return ::sendmsg(connection.get(), &out.message, MSG_NOSIGNAL); }) == 1) {
      served[static_cast<std::size_t>(claimed)] = true;
      --left;
    }
  }
}

// Every other rank: connects to rank 0 and takes the segment's descriptor.
Fd take(const std::string& name, int rank, long owner, Clock::time_point deadline,
        std::chrono::milliseconds timeout) {
  Fd connection(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  socklen_t length = 0;
  const sockaddr_un address = abstract_address(name, length);
  if (!connection.valid() ||
      retry_eintr([&] {
        return ::connect(connection.get(), reinterpret_cast<const sockaddr*>(&address), length);
      }) != 0) {
    throw Error(cat("shm: rank ", rank, " cannot reach rank 0's socket @", name, ": ",
                    errno_text(errno),
                    " (are both in the same network namespace? set COHORT_BACKEND=gloo)"));
  }
  const ucred server = peer_credentials(connection.get());
  if (server.uid != ::geteuid() || server.pid != owner) {
    throw Error(cat("shm: the socket @", name, " belongs to pid ", server.pid, " (uid ", server.uid,
                    "), not to rank 0 (pid ", owner, "): refusing its segment"));
  }
  const std::int32_t claimed = rank;
  if (::send(connection.get(), &claimed, sizeof(claimed), MSG_NOSIGNAL) != sizeof(claimed)) {
    throw Error(cat("shm: rank ", rank, " cannot write to rank 0's socket: ", errno_text(errno)));
  }
  if (!ready(connection.get(), deadline)) {
    throw Timeout(cat("shm: rank ", rank, " waited ", timeout.count(),
                      " ms for the group's segment from rank 0"));
  }
  DescriptorMessage in;
  if (retry_eintr([&] { return ::recvmsg(connection.get(), &in.message, MSG_CMSG_CLOEXEC); }) !=
      1) {
    throw Error(cat("shm: rank ", rank, " got no segment from rank 0: ", errno_text(errno)));
  }
  const cmsghdr* header = CMSG_FIRSTHDR(&in.message);
  if (header == nullptr || header->cmsg_type != SCM_RIGHTS) {
    throw Error(cat("shm: rank ", rank, " got a message without a descriptor from rank 0"));
  }
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(header), sizeof(int));
  return Fd(fd);
}

}  // namespace

Segment Segment::share(Store& store, int rank, int size, std::size_t bytes,
                       const std::vector<long>& pids, std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  if (rank == 0) {
    Fd memfd(::memfd_create("cohort-shm", MFD_CLOEXEC));
    if (!memfd.valid() || ::ftruncate(memfd.get(), static_cast<off_t>(bytes)) != 0) {
      throw Error(
          cat("shm: memfd_create/ftruncate of ", bytes, " bytes failed: ", errno_text(errno)));
    }
    Segment segment(map(memfd.get(), bytes), bytes);
    if (size > 1) {
      Fd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
      const std::string name = random_name();
      socklen_t length = 0;
      const sockaddr_un address = abstract_address(name, length);
      if (!listener.valid() ||
          ::bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0 ||
          ::listen(listener.get(), size) != 0) {
        throw Error(cat("shm: cannot listen on @", name, ": ", errno_text(errno)));
      }
      store.set("shm/socket", name);
      hand_out(listener.get(), memfd.get(), size, pids, deadline, timeout);
    }
    return segment;
  }
  const std::string name = store.get("shm/socket", timeout);
  const Fd memfd = take(name, rank, pids[0], deadline, timeout);
  struct stat facts {};
  if (::fstat(memfd.get(), &facts) != 0 || static_cast<std::size_t>(facts.st_size) < bytes) {
    throw Error(cat("shm: the segment from rank 0 has ", facts.st_size, " bytes, not ", bytes));
  }
  return Segment(map(memfd.get(), bytes), bytes);
}

Segment::Segment(Segment&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Segment::~Segment() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace cohort::detail::shm_backend
