// COHORT_STORE_FD: a worker takes the connection its agent handed it only
// when it is what the agent said, once (src/store/inherited_socket.cpp).
#include "store/inherited_socket.hpp"

#include <string>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/fd.hpp"
#include "core/peer_owner.hpp"

namespace cohort::detail {
namespace {

TEST(InheritedStoreSocket, OnlyADescriptorNumberFromThreeIsRead) {
  EXPECT_EQ(parse_store_fd("14"), 14);
  EXPECT_EQ(parse_store_fd("3"), 3);
  for (const char* bad : {"", "2", "0", "-4", "+4", " 4", "4 ", "0x10", "99999999999", "4a"})
    EXPECT_FALSE(parse_store_fd(bad).has_value()) << bad;
}

// One test, in order: what a process took is gone for the next cohort::init.
TEST(InheritedStoreSocket, TakenOnceOnlyWhenItsPeerIsTheNamedProcess) {
  int ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, ends), 0);
  const Fd mine(ends[0]);
  const Fd theirs(ends[1]);
  const std::string self = process_identity(getpid());
  const std::string number = std::to_string(mine.get());
  const Fd file(::open("/dev/null", O_RDONLY));
  EXPECT_EQ(take_inherited_store_socket(std::to_string(file.get()), self), -1);  // no socket
  EXPECT_EQ(take_inherited_store_socket(number, "1:1"), -1);  // another process's
  EXPECT_EQ(take_inherited_store_socket(number, ""), -1);     // nobody named
  EXPECT_EQ(take_inherited_store_socket("999", self), -1);    // not open
  EXPECT_EQ(fcntl(mine.get(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_EQ(take_inherited_store_socket(number, self), mine.get());
  EXPECT_NE(fcntl(mine.get(), F_GETFD) & FD_CLOEXEC, 0);     // this process's children connect
  EXPECT_EQ(take_inherited_store_socket(number, self), -1);  // a second init
}

}  // namespace
}  // namespace cohort::detail
