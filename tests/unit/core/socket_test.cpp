// core/socket's moves of large answers between sockets and memory files:
// a file's bytes from its pages to a peer that may have gone (without
// MSG_NOSIGNAL's help), and a socket's bytes into a file through a pipe;
// a connection's receive buffer made for large answers; and core/fd's
// write that never waits (the console's first try at a line).
#include "core/socket.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/fd.hpp"
#include "support/files.hpp"

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

// A pipe: {read end, write end}.
std::pair<Fd, Fd> make_pipe() {
  int ends[2];
  EXPECT_EQ(pipe2(ends, O_CLOEXEC), 0);
  return {Fd(ends[0]), Fd(ends[1])};
}

TEST(WriteWithoutWaiting, APipeWithRoomTakesItAll) {
  const auto [reader, writer] = make_pipe();
  EXPECT_EQ(write_without_waiting(writer.get(), "a line\n"), 7u);
  char got[16] = {};
  ASSERT_EQ(read(reader.get(), got, sizeof(got)), 7);
  EXPECT_EQ(std::string(got, 7), "a line\n");
}

// The console's writer thread then takes the rest: this call must not wait
// for a reader that is not reading.
TEST(WriteWithoutWaiting, AFullPipeTakesWhatFitsAndNoWaiting) {
  const auto [reader, writer] = make_pipe();
  const int room = fcntl(writer.get(), F_GETPIPE_SZ);
  ASSERT_GT(room, 0);
  const std::string more(static_cast<std::size_t>(room) + 4096, 'x');
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(write_without_waiting(writer.get(), more), static_cast<std::size_t>(room));
  EXPECT_EQ(write_without_waiting(writer.get(), "y"), 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

TEST(WriteWithoutWaiting, AReaderThatWentTakesNothingAndNoSignal) {
  auto [reader, writer] = make_pipe();
  reader.reset();
  // SIGPIPE's default action ends the process: this test dies if one comes.
  EXPECT_EQ(write_without_waiting(writer.get(), "lost\n"), 0u);
  EXPECT_FALSE(sigpipe_pending()) << "the SIGPIPE it raised is taken, not left pending";
}

// A connected pair of Unix stream sockets, non-blocking on the reader's side
// as the relay's upstream sockets are.
struct SocketPair {
  SocketPair() {
    int ends[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
    reader = Fd(ends[0]);
    writer = Fd(ends[1]);
    fcntl(reader.get(), F_SETFL, fcntl(reader.get(), F_GETFL) | O_NONBLOCK);
  }
  Fd reader, writer;
};

Deadline soon() {
  return Clock::now() + std::chrono::seconds(10);
}

TEST(RecvIntoFile, TheBytesGoToTheFilesEndAndNoFurther) {
  SocketPair pair;
  const Fd file = file_of("head:");
  const std::string body(300 << 10, 'b');  // more than a pipe's default 64 KiB
  // Sent a piece at a time while the reader waits: it waits for the rest.
  std::thread sender([&] {
    for (std::size_t at = 0; at < body.size(); at += 100 << 10) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ASSERT_EQ(write(pair.writer.get(), body.data() + at, 100 << 10), 100 << 10);
    }
    ASSERT_EQ(write(pair.writer.get(), "next", 4), 4);
  });
  std::string error, file_error;
  EXPECT_TRUE(
      recv_into_file(pair.reader.get(), file.get(), body.size(), soon(), &error, &file_error))
      << error;
  sender.join();
  EXPECT_EQ(file_error, "");
  EXPECT_EQ(test::read_file("/proc/self/fd/" + std::to_string(file.get())), "head:" + body);
  char next[4];
  ASSERT_TRUE(recv_all(pair.reader.get(), next, sizeof(next), soon(), &error)) << error;
  EXPECT_EQ(std::string(next, 4), "next") << "what follows stays in the socket";
}

TEST(RecvIntoFile, BytesAFileCannotTakeAreReadAndDroppedAndSaidWhy) {
  SocketPair pair;
  const Fd file = file_of("");
  const Fd read_only(
      open(("/proc/self/fd/" + std::to_string(file.get())).c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(read_only.valid());
  ASSERT_EQ(write(pair.writer.get(), "droppednext", 11), 11);
  std::string error, file_error;
  EXPECT_TRUE(recv_into_file(pair.reader.get(), read_only.get(), 7, soon(), &error, &file_error))
      << error;
  EXPECT_NE(file_error.find("writing an answer file"), std::string::npos) << file_error;
  char next[4];
  ASSERT_TRUE(recv_all(pair.reader.get(), next, sizeof(next), soon(), &error)) << error;
  EXPECT_EQ(std::string(next, 4), "next");
}

TEST(RecvIntoFile, APeerThatClosesEarlyIsAnError) {
  SocketPair pair;
  const Fd file = file_of("");
  ASSERT_EQ(write(pair.writer.get(), "short", 5), 5);
  pair.writer = Fd();
  std::string error, file_error;
  EXPECT_FALSE(recv_into_file(pair.reader.get(), file.get(), 100, soon(), &error, &file_error));
  EXPECT_EQ(error, "closed the connection");
}

int receive_buffer_of(const Fd& fd) {
  int size = 0;
  socklen_t length = sizeof(size);
  EXPECT_EQ(getsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &size, &length), 0);
  return size;
}

// As far as net.core.rmem_max allows (the kernel gives twice what is asked),
// and never less than a connection has without asking.
TEST(ConnectTcp, RaisesTheReceiveBufferAsFarAsTheSystemAllows) {
  const Listener listener = listen_tcp("127.0.0.1", 0);
  std::string error;
  const Fd plain = connect_tcp("127.0.0.1", listener.port, soon(), &error);
  ASSERT_TRUE(plain.valid()) << error;
  const int by_default = receive_buffer_of(plain);
  long limit = 0;
  std::ifstream("/proc/sys/net/core/rmem_max") >> limit;
  ASSERT_GT(limit, 0) << "/proc/sys/net/core/rmem_max";
  const Fd large = connect_tcp("127.0.0.1", listener.port, soon(), &error, 4 << 20);
  ASSERT_TRUE(large.valid()) << error;
  EXPECT_EQ(receive_buffer_of(large),
            std::max<long>(by_default, 2 * std::min<long>(limit, 4 << 20)));
  const Fd small = connect_tcp("127.0.0.1", listener.port, soon(), &error, 1);
  ASSERT_TRUE(small.valid()) << error;
  EXPECT_EQ(receive_buffer_of(small), by_default) << "not lowered";
}

}  // namespace
}  // namespace cohort::detail
