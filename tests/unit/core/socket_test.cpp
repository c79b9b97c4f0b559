// core/socket's sends that the store server makes without MSG_NOSIGNAL's
// help: a file's bytes from its pages, to a peer that may have gone.
#include "core/socket.hpp"

#include <string>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/fd.hpp"

namespace cohort::detail {
namespace {

// A memory file holding `bytes`.
Fd file_of(const std::string& bytes) {
  Fd file(memfd_create("socket-test", MFD_CLOEXEC));
  EXPECT_EQ(write(file.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  return file;
}

bool sigpipe_pending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}

TEST(SendFilePart, SendsTheFilesBytesFromTheOffsetGiven) {
  int ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  const Fd mine(ends[0]), peer(ends[1]);
  const Fd file = file_of("0123456789");
  ASSERT_EQ(send_file_part(mine.get(), file.get(), 3, 5), 5);
  char got[8] = {};
  ASSERT_EQ(read(peer.get(), got, sizeof(got)), 5);
  EXPECT_EQ(std::string(got, 5), "34567");
}

TEST(SendFilePart, APeerThatWentIsEpipeAndNoSignal) {
  int ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  const Fd mine(ends[0]);
  close(ends[1]);
  const Fd file = file_of(std::string(1 << 16, 'x'));
  sigset_t mask_before, mask_after;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask_before);
  // SIGPIPE's default action ends the process: this test dies if one comes.
  errno = 0;
  EXPECT_EQ(send_file_part(mine.get(), file.get(), 0, 1 << 16), -1);
  EXPECT_EQ(errno, EPIPE);
  EXPECT_FALSE(sigpipe_pending()) << "the SIGPIPE it raised is taken, not left pending";
  pthread_sigmask(SIG_BLOCK, nullptr, &mask_after);
  EXPECT_EQ(sigismember(&mask_after, SIGPIPE), sigismember(&mask_before, SIGPIPE))
      << "the thread's signal mask is as it was";
}

}  // namespace
}  // namespace cohort::detail
