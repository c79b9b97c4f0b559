// The PMI-1 wire protocol that MPICH's Hydra speaks on the socket in PMI_FD:
// text lines "cmd=NAME key=value ...\n". Used once at start-up, then
// finalized, so the socket is free again for an MPI library in the process.
#include <map>

#include <unistd.h>

#include <cohort/errors.hpp>

#include "bootstrap/master_exchange.hpp"
#include "core/fd.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

constexpr const char* kKey = "cohort_master";

class PmiConnection {
 public:
  explicit PmiConnection(int fd) : fd_(fd) {}

  // Sends one command and returns the reply's fields; checks rc=0 and the
  // expected reply name.
  std::map<std::string, std::string> ask(const std::string& command, const std::string& reply) {
    const std::string line = command + "\n";
    for (std::size_t sent = 0; sent < line.size();) {
      const ssize_t n =
          retry_eintr([&] { return ::write(fd_, line.data() + sent, line.size() - sent); });
      if (n <= 0) fail(command, cat("cannot be written to: ", errno_text(errno)));
      sent += static_cast<std::size_t>(n);
    }
    auto fields = read_reply(command);
    if (fields["cmd"] != reply) fail(command, cat("answered cmd=", fields["cmd"]));
    if (fields.count("rc") && fields["rc"] != "0") {
      fail(command,
           cat("answered rc=", fields["rc"], fields.count("msg") ? " " + fields["msg"] : ""));
    }
    return fields;
  }

 private:
  std::map<std::string, std::string> read_reply(const std::string& command) {
    std::string line;
    for (;;) {
      const std::size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        break;
      }
      char chunk[1024];
      const ssize_t n = retry_eintr([&] { return ::read(fd_, chunk, sizeof(chunk)); });
      if (n <= 0) fail(command, n == 0 ? "closed the connection" : errno_text(errno));
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
    std::map<std::string, std::string> fields;
    std::size_t start = 0;
    while (start < line.size()) {
      std::size_t end = line.find(' ', start);
      if (end == std::string::npos) end = line.size();
      const std::string item = line.substr(start, end - start);
      const std::size_t equals = item.find('=');
      if (equals != std::string::npos) fields[item.substr(0, equals)] = item.substr(equals + 1);
      start = end + 1;
    }
    return fields;
  }

  [[noreturn]] void fail(const std::string& command, const std::string& what) const {
    throw Error(cat("PMI-1 on PMI_FD=", fd_, ": '", command, "' failed: the process manager ", what,
                    " (is this process started by MPICH's mpirun/mpiexec.hydra?)"));
  }

  int fd_;
  std::string buffer_;
};

}  // namespace

MasterAddress exchange_over_pmi_wire(int fd, int rank, const MasterAddress& mine) {
  PmiConnection pmi(fd);
  pmi.ask("cmd=init pmi_version=1 pmi_subversion=1", "response_to_init");
  const std::string kvs = pmi.ask("cmd=get_my_kvsname", "my_kvsname")["kvsname"];
  if (rank == 0) {
    pmi.ask(cat("cmd=put kvsname=", kvs, " key=", kKey, " value=", encode_master(mine)),
            "put_result");
  }
  pmi.ask("cmd=barrier_in", "barrier_out");
  MasterAddress master = mine;
  if (rank != 0) {
    const std::string value =
        pmi.ask(cat("cmd=get kvsname=", kvs, " key=", kKey), "get_result")["value"];
    auto published = decode_master(value);
    if (!published) {
      throw Error(cat("PMI-1 on PMI_FD=", fd, ": rank 0 published '", value,
                      "' as its address, expected host:port/token (do all ranks run the same "
                      "cohort?)"));
    }
    master = *published;
  }
  pmi.ask("cmd=finalize", "finalize_ack");
  return master;
}

}  // namespace cohort::detail
