// The store under the multi-node join's own pattern, side by side with
// PyTorch's TCPStore: N clients each wait for all of N keys, then the N keys
// are set; the time is from the first WAIT sent to the last answer
// received. Both servers are driven over raw sockets by the same code, so
// only the servers differ.
//
//   store_scale [--sizes 256,512,1024,2048,4096] [--python /usr/bin/python3] [--json FILE]
//
// PyTorch's column is left out ("-") when its interpreter cannot import torch.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cohort/store.hpp>

#include "core/socket.hpp"
#include "store/protocol.hpp"

namespace {

using cohort::detail::Clock;
using cohort::detail::Fd;
namespace wire = cohort::detail::store_protocol;

constexpr const char* kToken = "bench-token";

std::string u64(std::uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

std::vector<std::string> keys_of(int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i)
    keys.push_back("node/" + std::to_string(i));
  return keys;
}

void send_or_die(int fd, const std::string& bytes) {
  std::string error;
  if (!cohort::detail::send_all(fd, bytes.data(), bytes.size(),
                                Clock::now() + std::chrono::minutes(10), &error)) {
    std::fprintf(stderr, "store_scale: send: %s\n", error.c_str());
    std::exit(1);
  }
}

bool receive(int fd, std::size_t size, std::chrono::seconds limit) {
  std::string buffer(size, '\0');
  std::string error;
  return cohort::detail::recv_all(fd, buffer.data(), size, Clock::now() + limit, &error);
}

Fd connect_or_die(int port) {
  std::string error;
  Fd fd = cohort::detail::connect_tcp("127.0.0.1", port, Clock::now() + std::chrono::seconds(10),
                                      &error);
  if (!fd.valid()) {
    std::fprintf(stderr, "store_scale: connect to port %d: %s\n", port, error.c_str());
    std::exit(1);
  }
  return fd;
}

// One wire protocol: how to open a connection, ask for a wait on all keys,
// set a key, and how long an answer to a wait is.
struct Protocol {
  virtual ~Protocol() = default;
  virtual Fd open(int port) const = 0;
  virtual std::string wait(const std::vector<std::string>& keys) const = 0;
  virtual std::string set(const std::string& key) const = 0;
  virtual std::size_t wait_answer_bytes() const = 0;
};

struct CohortProtocol : Protocol {
  Fd open(int port) const override {
    Fd fd = connect_or_die(port);
    send_or_die(fd.get(), wire::handshake(kToken));
    if (!receive(fd.get(), 5, std::chrono::seconds(30))) std::exit(1);
    return fd;
  }
  std::string wait(const std::vector<std::string>& keys) const override {
    return wire::Writer()
        .u8(static_cast<std::uint8_t>(wire::Op::wait))
        .strings(keys)
        .i64(600000)
        .frame();
  }
  std::string set(const std::string& key) const override {
    return wire::Writer()
        .u8(static_cast<std::uint8_t>(wire::Op::set))
        .bytes(key)
        .bytes("x")
        .frame();
  }
  std::size_t wait_answer_bytes() const override { return 5; }
};

// PyTorch 1.13's TCPStore (docs/store-protocol.md): no handshake, a query
// byte, u64-length-prefixed fields; a wait is answered with one byte.
struct TorchProtocol : Protocol {
  Fd open(int port) const override { return connect_or_die(port); }
  std::string wait(const std::vector<std::string>& keys) const override {
    std::string out(1, static_cast<char>(5));
    out += u64(keys.size());
    for (const std::string& key : keys)
      out += u64(key.size()) + key;
    return out;
  }
  std::string set(const std::string& key) const override {
    return std::string(1, static_cast<char>(0)) + u64(key.size()) + key + u64(1) + "x";
  }
  std::size_t wait_answer_bytes() const override { return 1; }
};

// Seconds from the first WAIT to the last answer; nullopt when an answer
// did not come within the limit.
std::optional<double> wait_all(const Protocol& protocol, int port, int n,
                               std::chrono::seconds limit) {
  const std::vector<std::string> keys = keys_of(n);
  std::vector<Fd> waiters;
  for (int i = 0; i < n; ++i)
    waiters.push_back(protocol.open(port));
  Fd setter = protocol.open(port);
  const std::string wait = protocol.wait(keys);
  std::string sets;
  for (const std::string& key : keys)
    sets += protocol.set(key);
  const auto start = Clock::now();
  for (const Fd& fd : waiters)
    send_or_die(fd.get(), wait);
  send_or_die(setter.get(), sets);
  for (const Fd& fd : waiters) {
    if (!receive(fd.get(), protocol.wait_answer_bytes(), limit)) return std::nullopt;
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// PyTorch's TCPStore server in a child interpreter; its port, or -1.
struct TorchServer {
  pid_t pid = -1;
  Fd stdin_pipe;
  int port = -1;

  explicit TorchServer(const std::string& python) {
    int in[2];
    int out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return;
    pid = fork();
    if (pid == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      const char* code =
          "import sys, torch.distributed as d\n"
          "s = d.TCPStore('127.0.0.1', 0, is_master=True, wait_for_workers=False)\n"
          "print(s.port, flush=True)\n"
          "sys.stdin.read()\n";
      execl(python.c_str(), python.c_str(), "-c", code, static_cast<char*>(nullptr));
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    stdin_pipe = Fd(in[1]);
    std::string line;
    char c = 0;
    while (read(out[0], &c, 1) == 1 && c != '\n')
      line.push_back(c);
    close(out[0]);
    port = line.empty() ? -1 : std::atoi(line.c_str());
  }
  ~TorchServer() {
    stdin_pipe.reset();  // its stdin ends: it exits
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
};

std::string cell(std::optional<double> seconds) {
  if (!seconds) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", *seconds);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes{256, 512, 1024, 2048, 4096};
  std::string python = "/usr/bin/python3";
  std::string json;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--sizes") {
      sizes.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string item; std::getline(list, item, ',');)
        sizes.push_back(std::atoi(item.c_str()));
    } else if (flag == "--python") {
      python = argv[i + 1];
    } else if (flag == "--json") {
      json = argv[i + 1];
    }
  }
  cohort::detail::raise_open_file_limit();
  const auto limit = std::chrono::seconds(120);
  std::printf("wait-all: N clients each wait for all of N keys, then the N keys are set\n");
  std::printf("%8s %14s %14s %10s\n", "N", "cohort (s)", "TCPStore (s)", "ratio");
  std::ofstream out;
  if (!json.empty()) out.open(json);
  if (out) out << "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const int n = sizes[i];
    std::optional<double> ours;
    {
      cohort::StoreServer::Options options;
      options.token = kToken;
      options.max_pending_handshakes = static_cast<std::size_t>(n) + 16;
      cohort::StoreServer server(options);
      ours = wait_all(CohortProtocol(), server.port(), n, limit);
    }
    std::optional<double> theirs;
    {
      TorchServer torch(python);
      if (torch.port > 0) theirs = wait_all(TorchProtocol(), torch.port, n, limit);
    }
    const std::string ratio = ours && theirs ? cell(*theirs / *ours) + "x" : std::string("-");
    std::printf("%8d %14s %14s %10s\n", n, cell(ours).c_str(), cell(theirs).c_str(), ratio.c_str());
    std::fflush(stdout);
    if (out) {
      out << (i ? "," : "") << "{\"n\":" << n << ",\"cohort_s\":" << (ours ? cell(ours) : "null")
          << ",\"tcpstore_s\":" << (theirs ? cell(theirs) : "null") << "}";
    }
  }
  if (out) out << "]\n";
  std::printf(
      "ratio: TCPStore's time over cohort's (above 1: cohort is faster); '-': not measured "
      "or no answer within %lld s\n",
      static_cast<long long>(limit.count()));
  return 0;
}
