// A process that tries to take a job's shared-memory segment: it connects to
// the abstract socket @NAME (argv[1]) that the shm backend's rank 0 listens
// on, claims rank argv[2], and waits for the segment's descriptor.
//   exit 0  it got a descriptor (the segment is open to it)
//   exit 3  refused: the connection closed without one
//   exit 4  it could not connect
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: shm_intruder NAME RANK\n");
    return 2;
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::size_t length = std::strlen(argv[1]);
  std::memcpy(address.sun_path + 1, argv[1], length);
  const auto size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), size) != 0) {
    std::perror("connect");
    return 4;
  }
  const std::int32_t rank = std::atoi(argv[2]);
  (void)!::send(fd, &rank, sizeof(rank), MSG_NOSIGNAL);
  pollfd polled{fd, POLLIN, 0};
  ::poll(&polled, 1, 10000);
  char byte = 0;
  iovec data{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  const ssize_t got = ::recvmsg(fd, &message, 0);
  const cmsghdr* header = got > 0 ? CMSG_FIRSTHDR(&message) : nullptr;
  if (header != nullptr && header->cmsg_type == SCM_RIGHTS) {
    std::printf("got the segment's descriptor\n");
    return 0;
  }
  std::printf("refused: the connection closed without a descriptor\n");
  return 3;
}
