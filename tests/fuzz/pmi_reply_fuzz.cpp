// What MPICH's process manager answers on PMI_FD (src/bootstrap/pmi_wire.cpp):
// the replies come from the fuzzer over a socket pair.
#include <string>

#include <sys/socket.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "bootstrap/master_exchange.hpp"
#include "fuzz/fuzz_target.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(pmi_reply) {
  if (size == 0) return 0;
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return 0;
  // The first byte picks the rank: 0 publishes, the others read rank 0's.
  const int rank = data[0] % 2;
  const std::string replies(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::size_t sent = 0;
  while (sent < replies.size()) {
    const ssize_t n = write(ends[1], replies.data() + sent, replies.size() - sent);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  shutdown(ends[1], SHUT_WR);
  try {
    (void)detail::exchange_over_pmi_wire(ends[0], rank, {"10.0.0.1", 4242, "token"});
  } catch (const Error&) {
  }
  close(ends[0]);
  close(ends[1]);
  return 0;
}

}  // namespace cohort::fuzz
