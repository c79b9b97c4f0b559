// The rendezvous at scale, side by side with PyTorch's TCPStore: N
// simulated ranks (one connection each, driven over raw sockets by the same
// code, so only the servers differ) against a store server in a child
// process, in the two patterns a job's start is made of:
//
//   barrier   each rank ADDs 1 to a counter and WAITs for a "done" key, which
//             the rank that brought the counter to N sets (torch.distributed's
//             store barrier, cohort's World::barrier)
//   table     each rank SETs its entry and ADDs itself in; the one that
//             completes the count GETs every entry and SETs one table, which
//             every rank GETs (store/exchange.cpp: cohort's agents' join and
//             host exchange since 2026-11-25). O(N) requests, N × table bytes.
//   hosts     the same with a host's ranks sharing one entry, as
//             cohort::init()'s exchange of host identities: the table holds
//             each distinct entry once and a run of ranks per entry
//             (store/exchange.hpp). A host's ranks: --ranks-per-host H, else
//             --ranks-per-node L (each simulated node is one host), else 8.
//   wait-all  each rank WAITs for all of N keys, then the N keys are set (the
//             multi-node join's pattern: every agent waits for every agent's
//             entry). Its requests alone are N² keys: 16,384 ranks would send
//             3.7 GB, so sizes above --wait-all-max are left out.
//
// Per pattern and N: seconds from the first request sent to the last answer
// received, the most descriptors the server held open (through relays,
// sampled while the agents' tree forms too), and its resident memory grown
// from before the ranks connected to its peak.
//
//   rendezvous_scale [--sizes 256,1024,4096,16384] [--patterns barrier,table,hosts,wait-all]
//                    [--wait-all-max 4096] [--python /usr/bin/python3] [--json FILE] [--cold]
//                    [--phases] [--ranks-per-node L] [--tree-width W] [--tree-by-arrival]
//                    [--processes P|nodes] [--ranks-per-host H] [--entries join|random]
//
// With --ranks-per-node L, cohort's ranks meet through their nodes' relays
// as `cohort run`'s workers do: on socket pairs that take large answers as
// files, read in place as Store::get_shared reads them (docs/rendezvous.md);
// and the relays form the agents' tree of --tree-width W (32, as cohort
// run's; 0: every relay connects to the store itself), each under its
// parent as launch/agent_tree.hpp places them: connected there from the
// start, as where cohort run knows every node's rank and host before the
// rendezvous (Slurm, --hosts), or, with --tree-by-arrival, first to the
// store, taking the next place as it arrives and moving under its parent
// once that one is published (launch/tree_arrival.hpp), as where it does not
// (elastic jobs, torchrun's c10d form, mpirun's).
//
// --processes P: the relays run in P processes (threads of each, as an
// agent runs its relay), or in as many as the open-file limit needs if
// that is more; `--processes nodes`: each simulated node's relay in a
// process of its own, as each node's agent is. The default: as few
// processes as the open-file limit allows.
//
// Before each run of a table pattern it touches as much memory as the run's
// copies of the table take, and frees it (warm_memory: a virtual machine's
// host backs memory left free anew at its next touch); --cold does not.
//
// --phases: through relays, each process that drives ranks also prints
// when, in a table pattern's run, its requests were all sent, the count
// was complete (the completer's process), the completer had every entry
// and sent the table, and its first and last rank had the table: the
// fan-in and the fan-out apart; and, for every pattern, the CPU its
// threads took from the start until every process's pattern ended, by
// thread name (the relays' loops, upstream readers and senders, and the
// main thread, which drives the simulated ranks).
//
// Raises its own open-file limit (ulimit -n) to the hard limit. PyTorch's
// columns are "-" when its interpreter cannot import torch, or when an answer
// did not come within the limit.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cohort/errors.hpp>
#include <cohort/store.hpp>

#include "core/socket.hpp"
#include "core/strings.hpp"
#include "launch/agent_tree.hpp"
#include "launch/tree_arrival.hpp"
#include "store/client_handshake.hpp"
#include "store/exchange.hpp"
#include "store/file_answer.hpp"
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

std::int64_t i64_at(const std::string& bytes, std::size_t at) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = (value << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
  return static_cast<std::int64_t>(value);
}

std::vector<std::string> keys_of(int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i)
    keys.push_back("node/" + std::to_string(i));
  return keys;
}

// A process that drives simulated nodes (measure_through_relays) ends at
// once on failure: its relays' threads run, and exit()'s destructors would
// end them in the middle.
bool in_shard = false;

[[noreturn]] void fail() {
  if (!in_shard) std::exit(1);
  std::fflush(stderr);
  _exit(1);
}

void send_or_die(int fd, const std::string& bytes) {
  std::string error;
  if (!cohort::detail::send_all(fd, bytes.data(), bytes.size(),
                                Clock::now() + std::chrono::minutes(10), &error)) {
    std::fprintf(stderr, "rendezvous_scale: send: %s\n", error.c_str());
    fail();
  }
}

std::optional<std::string> receive(int fd, std::size_t size, std::chrono::seconds limit) {
  std::string buffer(size, '\0');
  std::string error;
  if (!cohort::detail::recv_all(fd, buffer.data(), size, Clock::now() + limit, &error)) {
    return std::nullopt;
  }
  return buffer;
}

Fd connect_or_die(int port) {
  std::string error;
  Fd fd = cohort::detail::connect_tcp("127.0.0.1", port, Clock::now() + std::chrono::seconds(30),
                                      &error);
  if (!fd.valid()) {
    std::fprintf(stderr, "rendezvous_scale: connect to port %d: %s\n", port, error.c_str());
    fail();
  }
  return fd;
}

// --phases (above).
bool print_phases = false;

// CPU time of this process's threads so far, ns, summed by thread name.
std::map<std::string, long long> cpu_by_thread_name() {
  std::map<std::string, long long> sums;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::ifstream comm(task.path() / "comm");
    std::ifstream schedstat(task.path() / "schedstat");  // its first field: ns on a CPU
    std::string name;
    long long ns = 0;
    if (std::getline(comm, name) && (schedstat >> ns)) sums[name] += ns;
  }
  return sums;
}
// The ranks that share a host identity in the hosts pattern (above).
int ranks_per_host = 8;

// One wire protocol: how to open a connection, the requests, and the size
// of their answers.
struct Protocol {
  virtual ~Protocol() = default;
  virtual Fd open(int port) const = 0;
  virtual std::string wait(const std::vector<std::string>& keys) const = 0;
  virtual std::string set(const std::string& key) const = 0;
  virtual std::string set(const std::string& key, const std::string& value) const = 0;
  virtual std::string add(const std::string& key) const = 0;
  // A GET of a key that is set.
  virtual std::string get(const std::string& key) const = 0;
  virtual std::size_t wait_answer_bytes() const = 0;
  virtual std::size_t set_answer_bytes() const = 0;
  virtual std::size_t add_answer_bytes() const = 0;
  virtual std::int64_t sum_of(const std::string& answer) const = 0;
  // The value a GET answered with; nullopt past the limit.
  virtual std::optional<cohort::StoreValue> read_value(int fd,
                                                       std::chrono::seconds limit) const = 0;
  // Every key's value, as the protocol's client asks for many at once.
  virtual std::string get_all(const std::vector<std::string>& keys) const {
    std::string gets;
    for (const std::string& key : keys)
      gets += get(key);
    return gets;
  }
  virtual bool read_all(int fd, std::size_t count, std::chrono::seconds limit) const {
    for (std::size_t i = 0; i < count; ++i) {
      if (!read_value(fd, limit)) return false;
    }
    return true;
  }
};

struct CohortProtocol : Protocol {
  Fd open(int port) const override {
    Fd fd = connect_or_die(port);
    try {
      cohort::detail::authenticate_to_store(
          fd.get(), cohort::detail::cat("127.0.0.1:", port), {.token = kToken},
          cohort::detail::deadline_after(std::chrono::seconds(60)));
    } catch (const cohort::Error& error) {
      std::fprintf(stderr, "rendezvous_scale: %s\n", error.what());
      fail();
    }
    return fd;
  }
  std::string wait(const std::vector<std::string>& keys) const override {
    return of_keys(wire::Op::wait, keys);
  }
  std::string set(const std::string& key) const override { return set(key, "x"); }
  std::string set(const std::string& key, const std::string& value) const override {
    return wire::Writer()
        .u8(static_cast<std::uint8_t>(wire::Op::set))
        .bytes(key)
        .bytes(value)
        .frame();
  }
  std::string get(const std::string& key) const override {
    return wire::Writer()
        .u8(static_cast<std::uint8_t>(wire::Op::get))
        .bytes(key)
        .i64(600000)
        .frame();
  }
  std::string add(const std::string& key) const override {
    return wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::add)).bytes(key).i64(1).frame();
  }
  std::size_t wait_answer_bytes() const override { return 5; }
  std::size_t set_answer_bytes() const override { return 5; }
  std::size_t add_answer_bytes() const override { return 13; }  // length, status, i64
  std::int64_t sum_of(const std::string& answer) const override { return i64_at(answer, 5); }
  // As StoreClient::get_shared, which store/exchange.cpp's ranks call: the
  // value stays where it came (a mapping of its node's one copy).
  std::optional<cohort::StoreValue> read_value(int fd, std::chrono::seconds limit) const override {
    auto payload = read_frame(fd, limit);
    if (!payload || payload->view().size() < 5) return std::nullopt;
    return payload->part(payload->view().substr(5));  // status, the value's length, the value
  }
  // One MULTI_GET, as store/exchange.cpp's completer asks since 2026-11-27.
  std::string get_all(const std::vector<std::string>& keys) const override {
    return of_keys(wire::Op::multi_get, keys);
  }
  bool read_all(int fd, std::size_t count, std::chrono::seconds limit) const override {
    auto payload = read_frame(fd, limit);
    if (!payload || payload->view().empty()) return false;
    wire::Reader reader(payload->view().substr(1));
    return reader.strings().size() == count;
  }

 private:
  // WAIT or MULTI_GET of `keys`, with the pattern's long timeout.
  static std::string of_keys(wire::Op op, const std::vector<std::string>& keys) {
    return wire::Writer().u8(static_cast<std::uint8_t>(op)).strings(keys).i64(600000).frame();
  }
  // One answer's payload: status, then its fields; an answer that came as
  // a file (from a node's relay) is mapped as StoreClient maps it.
  static std::optional<cohort::StoreValue> read_frame(int fd, std::chrono::seconds limit) {
    std::string payload;
    std::string error;
    std::vector<Fd> files;
    if (!cohort::detail::recv_frame(fd, &payload, 0xffffffffu, Clock::now() + limit, &error,
                                    &files) ||
        payload.empty()) {
      return std::nullopt;
    }
    if (static_cast<wire::Status>(payload[0]) != wire::Status::in_file) {
      return cohort::StoreValue(std::move(payload));
    }
    auto answer =
        cohort::detail::map_answer_file(std::string_view(payload).substr(1), &files, &error);
    if (!answer) std::fprintf(stderr, "rendezvous_scale: a relay %s\n", error.c_str());
    return answer;
  }
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
  std::string set(const std::string& key) const override { return set(key, "x"); }
  std::string set(const std::string& key, const std::string& value) const override {
    return std::string(1, static_cast<char>(0)) + u64(key.size()) + key + u64(value.size()) + value;
  }
  // 1.13's GET of a missing key closes the connection (its client WAITs,
  // reads the answer, then GETs), and it reads a connection's next request
  // while a WAIT is parked: never pipeline a GET behind a WAIT.
  std::string get(const std::string& key) const override {
    return std::string(1, static_cast<char>(2)) + u64(key.size()) + key;
  }
  std::string add(const std::string& key) const override {
    return std::string(1, static_cast<char>(3)) + u64(key.size()) + key + u64(1);
  }
  std::size_t wait_answer_bytes() const override { return 1; }
  std::size_t set_answer_bytes() const override { return 0; }
  std::size_t add_answer_bytes() const override { return 8; }
  std::int64_t sum_of(const std::string& answer) const override { return i64_at(answer, 0); }
  std::optional<cohort::StoreValue> read_value(int fd, std::chrono::seconds limit) const override {
    auto length = receive(fd, 8, limit);
    if (!length) return std::nullopt;
    auto value = receive(fd, static_cast<std::size_t>(i64_at(*length, 0)), limit);
    if (!value) return std::nullopt;
    return cohort::StoreValue(std::move(*value));
  }
};

// A store server in a child process: its port, its descriptors and memory.
class ServerProcess {
 public:
  // `serve` runs in the child: it starts a server, writes its port as a
  // line to `out`, and returns once `in` ends.
  explicit ServerProcess(const std::function<void(int in, int out)>& serve) {
    int in[2];
    int out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(in[1]);
      close(out[0]);
      serve(in[0], out[1]);
      _exit(0);
    }
    close(in[0]);
    close(out[1]);
    stdin_pipe_ = Fd(in[1]);
    std::string line;
    char buffer[4096];
    for (ssize_t got = 0;
         line.find('\n') == std::string::npos && (got = read(out[0], buffer, sizeof(buffer))) > 0;)
      line.append(buffer, static_cast<std::size_t>(got));
    close(out[0]);
    std::stringstream ports(line);
    for (int port = 0; ports >> port;)
      ports_.push_back(port);
    rss_before_kib_ = status_kib("VmRSS:");
  }
  ~ServerProcess() {
    stdin_pipe_.reset();  // its stdin ends: it exits
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return ports_.empty() ? -1 : ports_[0]; }
  // Every port it wrote (a process of relays writes one per relay).
  const std::vector<int>& ports() const { return ports_; }
  long descriptors() const {
    std::error_code error;
    long count = 0;
    for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid_) + "/fd", error),
         end;
         !error && it != end; it.increment(error))
      ++count;
    return count;
  }
  // Peak resident memory over what it held before the ranks connected.
  long grown_kib() const { return status_kib("VmHWM:") - rss_before_kib_; }

 private:
  long status_kib(const char* field) const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field));
    }
    return 0;
  }

  pid_t pid_ = -1;
  Fd stdin_pipe_;
  std::vector<int> ports_;
  long rss_before_kib_ = 0;
};

void serve_cohort(int in, int out, int n) {
  cohort::StoreServer::Options options;
  options.token = kToken;
  options.max_pending_handshakes = static_cast<std::size_t>(n) + 16;
  cohort::StoreServer server(options);
  const std::string line = std::to_string(server.port()) + "\n";
  (void)!write(out, line.data(), line.size());
  close(out);
  char c = 0;
  while (read(in, &c, 1) > 0) {
  }
}

void serve_torch(int in, int out, const std::string& python) {
  dup2(in, 0);
  dup2(out, 1);
  const char* code =
      "import sys, torch.distributed as d\n"
      "s = d.TCPStore('127.0.0.1', 0, is_master=True, wait_for_workers=False)\n"
      "print(s.port, flush=True)\n"
      "sys.stdin.read()\n";
  execl(python.c_str(), python.c_str(), "-c", code, static_cast<char*>(nullptr));
  _exit(127);
}

// This VM's host takes back memory the guest left free for a few seconds,
// and backs it anew at its next touch: here 1.3-1.8 ms per MiB, more than
// the fan-out of a table itself, and it varies from day to day (the table
// at 100,000 ranks took 12.9-16.7 s cold, 7.4-10.5 s warm). A cluster's node has
// its memory. So before each measured run (cohort's, TCPStore's, the
// floor's) the bench touches `bytes` (as much as the nodes' copies of the
// table take) and frees them for the run to take, outside the time
// measured; --cold leaves it out. Returns the seconds it took.
double warm_memory(std::size_t bytes) {
  const auto start = Clock::now();
  if (bytes == 0) return 0;
  void* at = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (at == MAP_FAILED) return 0;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> touching;
  for (unsigned t = 0; t < threads; ++t) {
    touching.emplace_back([at, bytes, t, threads] {
      for (std::size_t page = std::size_t{4096} * t; page < bytes;
           page += std::size_t{4096} * threads)
        static_cast<volatile char*>(at)[page] = 1;
    });
  }
  for (std::thread& thread : touching)
    thread.join();
  munmap(at, bytes);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Result {
  std::optional<double> seconds;
  double warm_seconds = 0;  // warm_memory's, before the run
  long descriptors = 0;
  long grown_kib = 0;
};

// Which of the N ranks one process drives: ranks first .. first + its
// count - 1; `whole` when it drives them all. A process that drives a
// slice knows its own ranks only: whichever completes a count does what
// the one that completes it does.
struct Slice {
  int first = 0;
  bool whole = true;
  // The ranks take large answers as files (through their node's relay):
  // a GET's answer holds no table in a socket buffer.
  bool files = false;
};

// The pattern's requests from every rank, then its answers; seconds from
// the first request sent to the last answer, nullopt past `limit`.
using Pattern = std::optional<double> (*)(const Protocol&, std::vector<Fd>&, const Fd&, int,
                                          std::chrono::seconds, const Slice&);

std::optional<double> wait_all(const Protocol& protocol, std::vector<Fd>& ranks, const Fd& setter,
                               int n, std::chrono::seconds limit, const Slice& slice) {
  const std::vector<std::string> keys = keys_of(n);
  const std::string wait = protocol.wait(keys);
  std::string sets;
  for (const std::string& key : keys)
    sets += protocol.set(key);
  const auto start = Clock::now();
  for (const Fd& fd : ranks)
    send_or_die(fd.get(), wait);
  if (slice.first == 0) send_or_die(setter.get(), sets);
  for (const Fd& fd : ranks) {
    if (!receive(fd.get(), protocol.wait_answer_bytes(), limit)) return std::nullopt;
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::optional<double> barrier(const Protocol& protocol, std::vector<Fd>& ranks, const Fd& setter,
                              int n, std::chrono::seconds limit, const Slice& slice) {
  const std::string arrive = protocol.add("count") + protocol.wait({"done"});
  const auto start = Clock::now();
  for (const Fd& fd : ranks)
    send_or_die(fd.get(), arrive);
  bool last_seen = false;
  for (const Fd& fd : ranks) {
    auto answer = receive(fd.get(), protocol.add_answer_bytes(), limit);
    if (!answer) return std::nullopt;
    // The rank that brought the count to N sets "done" (on its own
    // connection the WAIT is already queued, so the setter stands in).
    if (protocol.sum_of(*answer) == n) {
      send_or_die(setter.get(), protocol.set("done"));
      last_seen = true;
    }
  }
  if (!last_seen && slice.whole) return std::nullopt;
  for (const Fd& fd : ranks) {
    if (!receive(fd.get(), protocol.wait_answer_bytes(), limit)) return std::nullopt;
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The agents' join and the ranks' host exchange (src/store/exchange.cpp):
// each rank SETs its 40-byte entry and ADDs itself in; the rank that
// completes the count GETs every entry and SETs them as one table (in
// exchange_values' encoding); every other rank WAITs for the table, then
// GETs it, all at once as ranks do. Through relays, whose answers come as
// files, each rank sends one GET that waits for the table, as
// store/exchange.cpp's ranks do. `ranks_per_entry` ranks share an entry
// (a host's identity).
//
// An entry is shaped as what it stands for (--entries join): one rank's
// alone as an agent's in the join (launch/node_rendezvous.cpp: its ranks,
// host, pid, node and relay's address, about 46 bytes), a host's as its
// identity (comm/kit/host_identity.cpp: name, 16 hex digits of its boot id,
// network namespace; 40 bytes, as every entry was until 2026-12-07). Pids,
// ports and boot ids are pseudo-random, as a cluster's are. `--entries
// random`: 40 random bytes, which no compression shrinks (exchange.hpp
// compresses a large table).
bool random_entries = false;

std::uint64_t mixed(std::uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string entry_of(std::size_t rank, int ranks_per_entry) {
  const std::size_t owner = rank / static_cast<std::size_t>(ranks_per_entry);
  if (random_entries) {
    std::string entry;
    for (std::uint64_t word = 0; entry.size() < 40; ++word) {
      const std::uint64_t bits = mixed(owner * 8 + word);
      entry.append(reinterpret_cast<const char*>(&bits), sizeof(bits));
    }
    entry.resize(40);
    return entry;
  }
  char host[32];
  std::snprintf(host, sizeof(host), "node-%07zu", owner);
  const std::uint64_t bits = mixed(owner);
  if (ranks_per_entry > 1) {
    char boot_id[17];
    std::snprintf(boot_id, sizeof(boot_id), "%016llx", static_cast<unsigned long long>(bits));
    return cohort::detail::cat(host, " ", boot_id, " 4026531840");
  }
  return cohort::detail::cat(8, '\t', host, '\t', 1000 + bits % 4'000'000, '\t', owner, "\t10.",
                             (owner >> 16) & 255, ".", (owner >> 8) & 255, ".", owner & 255, ":",
                             20000 + (bits >> 32) % 40000);
}

// Ranks with a connection each that GET a table at a time: all of them at
// once would hold N × the table in this one kernel's socket buffers (past
// its TCP memory limit, it drops packets).
constexpr int kTableWindow = 256;

// What a pattern's table holds and what it takes in the store: its
// entries' bytes, and the table as sent (store/exchange.hpp compresses it
// from 256 KiB where that makes it smaller).
std::string table_line(const std::string& pattern, int n, int per_entry, const std::string& table) {
  const std::size_t entries = (static_cast<std::size_t>(n) + per_entry - 1) / per_entry;
  std::size_t bytes = 0;
  for (std::size_t e = 0; e < entries; ++e)
    bytes += entry_of(e * static_cast<std::size_t>(per_entry), per_entry).size();
  const bool compressed = table.size() >= 4 && table.compare(0, 4, "\xff\xff\xff\xff") == 0;
  char line[256];
  std::snprintf(line, sizeof(line), "%s %d: %zu %s entries, %.2f MB; the table %.2f MB%s",
                pattern.c_str(), n, entries, random_entries ? "random" : "distinct",
                static_cast<double>(bytes) / 1e6, static_cast<double>(table.size()) / 1e6,
                compressed ? " (zstd)" : "");
  return line;
}

// The table the pattern's completer sets.
std::string table_of(int n, int ranks_per_entry) {
  std::vector<std::string> entries;
  for (int r = 0; r < n; ++r)
    entries.push_back(entry_of(static_cast<std::size_t>(r), ranks_per_entry));
  return cohort::detail::encode_table(entries);
}

std::optional<double> exchange_table(const Protocol& protocol, std::vector<Fd>& ranks,
                                     const Fd& setter, int n, std::chrono::seconds limit,
                                     const Slice& slice, int ranks_per_entry) {
  const auto entry_of = [ranks_per_entry](std::size_t rank) {
    return ::entry_of(rank, ranks_per_entry);
  };
  const auto start = Clock::now();
  const auto first = static_cast<std::size_t>(slice.first);
  const auto phase = [&](const char* what) {
    if (!print_phases || !slice.files) return;
    // With the clock's own reading, to line up with a profile's
    // (perf record -k CLOCK_MONOTONIC).
    const auto now = Clock::now();
    std::fprintf(stderr, "phase: ranks %zu-%zu: %s at %.3f s (monotonic %.6f)\n", first,
                 first + ranks.size() - 1, what, std::chrono::duration<double>(now - start).count(),
                 std::chrono::duration<double>(now.time_since_epoch()).count());
  };
  // Says which answer did not come, so that a "-" in the table has a reason.
  const auto missing = [&](const char* what, std::size_t r) -> std::optional<double> {
    std::fprintf(stderr, "rendezvous_scale: %s of rank %zu: no answer within %lld s\n", what,
                 first + r, static_cast<long long>(limit.count()));
    return std::nullopt;
  };
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    send_or_die(ranks[r].get(),
                protocol.set("node/" + std::to_string(first + r), entry_of(first + r)) +
                    protocol.add("arrived"));
  }
  phase("every SET and ADD sent");
  std::size_t last = ranks.size();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (protocol.set_answer_bytes() > 0 &&
        !receive(ranks[r].get(), protocol.set_answer_bytes(), limit)) {
      return missing("the SET", r);
    }
    auto answer = receive(ranks[r].get(), protocol.add_answer_bytes(), limit);
    if (!answer) return missing("the ADD", r);
    if (protocol.sum_of(*answer) == n) {
      last = r;
      phase("the count complete");
    } else if (slice.files) {
      send_or_die(ranks[r].get(),
                  protocol.get("table"));  // as exchange.cpp asks: answered once set
    } else {
      send_or_die(ranks[r].get(), protocol.wait({"table"}));  // parks until the table is set
    }
  }
  if (last == ranks.size() && slice.whole) return std::nullopt;
  if (last != ranks.size()) {
    std::vector<std::string> names;
    for (int r = 0; r < n; ++r)
      names.push_back("node/" + std::to_string(r));
    send_or_die(ranks[last].get(), protocol.get_all(names));
    if (!protocol.read_all(ranks[last].get(), names.size(), limit)) {
      return missing("the completer's read of every entry", last);
    }
    phase("the completer had every entry");
    send_or_die(setter.get(), protocol.set("table", table_of(n, ranks_per_entry)));
    phase("the table sent");
  }
  if (slice.files) {
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      if (r != last && !protocol.read_value(ranks[r].get(), limit)) {
        return missing("the GET of the table", r);
      }
      if (r == 0) phase("its first rank had the table");
    }
    phase("its last rank had the table");
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  // Else the ranks GET the table as they learn it is there, kTableWindow at
  // a time.
  const auto window = static_cast<std::size_t>(kTableWindow);
  for (std::size_t begin = 0; begin < ranks.size(); begin += window) {
    const std::size_t end = std::min(ranks.size(), begin + window);
    for (std::size_t r = begin; r < end; ++r) {
      if (r == last) continue;
      if (!receive(ranks[r].get(), protocol.wait_answer_bytes(), limit)) {
        return missing("the WAIT for the table", r);
      }
      send_or_die(ranks[r].get(), protocol.get("table"));
    }
    for (std::size_t r = begin; r < end; ++r) {
      if (r != last && !protocol.read_value(ranks[r].get(), limit)) {
        return missing("the GET of the table", r);
      }
    }
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Every entry its own (the agents' join: one per node).
std::optional<double> table(const Protocol& protocol, std::vector<Fd>& ranks, const Fd& setter,
                            int n, std::chrono::seconds limit, const Slice& slice) {
  return exchange_table(protocol, ranks, setter, n, limit, slice, 1);
}

// A host's ranks per host identity (cohort::init()'s host exchange).
std::optional<double> hosts(const Protocol& protocol, std::vector<Fd>& ranks, const Fd& setter,
                            int n, std::chrono::seconds limit, const Slice& slice) {
  return exchange_table(protocol, ranks, setter, n, limit, slice, ranks_per_host);
}

Result measure(ServerProcess& server, const Protocol& protocol, Pattern pattern, int n,
               std::chrono::seconds limit, std::size_t warm_bytes) {
  Result result;
  if (server.port() <= 0) return result;
  std::vector<Fd> ranks;
  ranks.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    ranks.push_back(protocol.open(server.port()));
  const Fd setter = protocol.open(server.port());
  // Before and after: a server may leave connections in its backlog until
  // the requests come.
  result.descriptors = server.descriptors();
  result.warm_seconds = warm_memory(warm_bytes);
  result.seconds = pattern(protocol, ranks, setter, n, limit, Slice{});
  result.descriptors = std::max(result.descriptors, server.descriptors());
  result.grown_kib = server.grown_kib();
  return result;
}

// Simulated node i's own loopback address, as its host's: 127.1.0.0 on
// (127.0.0.1 is the store's).
std::string loopback_of(int node) {
  const unsigned at = 0x7f010000u + static_cast<unsigned>(node);
  return cohort::detail::cat(at >> 24, ".", (at >> 16) & 255, ".", (at >> 8) & 255, ".", at & 255);
}

// The ranks through their nodes' relays (StoreServer::Options::relay_to),
// `per_node` ranks to a node: `shards` processes each run the relays of
// their nodes (threads, as agents run them) and drive those nodes' ranks,
// all starting at one moment. Seconds from then to the last answer of any.
// Several processes, as a job's ranks are on many machines: one process
// here may not hold 2 descriptors for each of 100,000 ranks.
//
// In a tree (tree_width > 0), node i's relay listens on the store's port at
// a loopback address of its own (loopback_of), as an agent's listens on
// the job's port at its host's, and connects to its parent's there from
// the start, as where cohort run knows every node's rank and host ahead of
// the rendezvous; `by_arrival`, it connects to the store, takes the next
// place, and moves under its parent as soon as it is published, as where it
// does not: each shard's relays arrive one after another, the shards' at
// once.
Result measure_through_relays(ServerProcess& server, Pattern pattern, int n, int per_node,
                              int shards, int tree_width, bool by_arrival,
                              std::chrono::seconds limit, std::size_t warm_bytes) {
  Result result;
  if (server.port() <= 0) return result;
  const int nodes = (n + per_node - 1) / per_node;

  struct Shard {
    pid_t pid = -1;
    Fd go;       // a line once every shard's relays listen; then a byte: start; end of file: exit
    Fd answers;  // "placed\n"; "ready\n"; then when its pattern ended (ns), or "-"
  };
  const auto line_of = [](int fd) {
    std::string line;
    char c = 0;
    while (read(fd, &c, 1) == 1 && c != '\n')
      line.push_back(c);
    return line;
  };
  std::vector<Shard> running;
  std::fflush(nullptr);  // else a shard that exits prints what this process had not yet written
  for (int s = 0; s < shards; ++s) {
    const int first_node = nodes * s / shards;
    const int end_node = nodes * (s + 1) / shards;
    int go[2];
    int answers[2];
    if (pipe(go) != 0 || pipe(answers) != 0) std::exit(1);
    const pid_t pid = fork();
    if (pid == 0) {
      in_shard = true;
      std::set_terminate([] {  // what a relay or the tree threw, in any of its threads
        try {
          if (const std::exception_ptr thrown = std::current_exception())
            std::rethrow_exception(thrown);
        } catch (const std::exception& error) {
          std::fprintf(stderr, "rendezvous_scale: a process of simulated nodes: %s\n",
                       error.what());
        }
        fail();
      });
      close(go[1]);
      close(answers[0]);
      for (Shard& other : running) {  // their ends: the others' end of file is the parent's
        other.go.reset();
        other.answers.reset();
      }
      std::vector<std::unique_ptr<cohort::StoreServer>> relays;
      // By arrival: each relay's own agent's connection, whose end would
      // clear its place.
      std::vector<std::unique_ptr<cohort::StoreClient>> agents;
      for (int node = first_node; node < end_node; ++node) {
        cohort::StoreServer::Options options;
        options.token = kToken;
        options.relay_to = cohort::StoreServer::Options::Upstream{"127.0.0.1", server.port(), false,
                                                                  "", std::chrono::minutes(10)};
        options.relay_to->connect_at_start = true;  // as an agent's
        // Thousands of simulated nodes share two cores here: a parent's
        // answer may take longer than the 5 s after which a relay counts
        // it lost (a cut cable) and goes on without it. Not a loss here.
        options.relay_to->hop_timeout = std::chrono::minutes(10);
        if (tree_width > 0 && !by_arrival) {
          options.host = loopback_of(node);
          options.port = server.port();
          options.name = cohort::detail::cat("node ", node);
          const int parent = cohort::detail::tree_parent_ahead(node, nodes, -1, tree_width);
          if (parent >= 0) {
            options.relay_to->through = {
                {loopback_of(parent), server.port(), cohort::detail::cat("node ", parent)}};
          }
        }
        if (tree_width > 0 && by_arrival) options.name = cohort::detail::cat("node ", node);
        relays.push_back(std::make_unique<cohort::StoreServer>(options));
        if (tree_width > 0 && by_arrival) {
          cohort::StoreServer& relay = *relays.back();
          agents.push_back(relay.connect_in_process(std::chrono::minutes(1)));
          auto arrival = cohort::detail::arrive_in_tree(*agents.back(),
                                                        {"127.0.0.1", relay.port(), options.name},
                                                        0, tree_width, std::chrono::seconds(10));
          if (!arrival.path.empty()) relay.route_through(std::move(arrival.path));
        }
      }
      (void)!write(answers[1], "placed\n", 7);
      (void)line_of(go[0]);  // every shard's relays placed and listening
      // Every relay connected (a parent in another shard listens by now).
      for (const auto& relay : relays)
        (void)relay->connect_in_process(std::chrono::minutes(1))->num_keys();
      const CohortProtocol protocol;
      std::vector<Fd> ranks;
      const int first = first_node * per_node;
      for (int r = first; r < std::min(n, end_node * per_node); ++r) {
        // As cohort run's workers reach their agent (COHORT_STORE_FD), and
        // take large answers as files, as StoreClient does there.
        Fd rank(relays[static_cast<std::size_t>(r / per_node - first_node)]->trusted_socket());
        send_or_die(rank.get(),
                    wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::accept_files)).frame());
        if (!receive(rank.get(), 5, limit)) _exit(1);
        ranks.push_back(std::move(rank));
      }
      // What a completer sets goes through its node's relay, as from a
      // worker (until 2026-12-06 on a connection of its own to the store,
      // one for each of these processes).
      const Fd setter(relays.front()->trusted_socket());
      (void)!write(answers[1], "ready\n", 6);
      char c = 0;
      if (read(go[0], &c, 1) != 1) _exit(1);
      const auto cpu_before =
          print_phases ? cpu_by_thread_name() : std::map<std::string, long long>{};
      const auto seconds = pattern(protocol, ranks, setter, n, limit, Slice{first, false, true});
      const std::string line =
          seconds ? std::to_string(Clock::now().time_since_epoch().count()) + "\n" : "-\n";
      (void)!write(answers[1], line.data(), line.size());
      // Measured. The shards end one after another: relays whose parents
      // were another shard's would say that they lost them.
      const Fd said(dup(STDERR_FILENO));  // for --phases' CPU, once every shard ended
      const Fd quiet(open("/dev/null", O_WRONLY | O_CLOEXEC));
      if (quiet.valid()) dup2(quiet.get(), STDERR_FILENO);
      while (read(go[0], &c, 1) > 0) {
        if (c != 'c' || !said.valid()) continue;
        std::string cpu = cohort::detail::cat("phase: ranks ", first, "-", first + ranks.size() - 1,
                                              ": CPU by thread name, ms:");
        for (const auto& [name, ns] : cpu_by_thread_name()) {
          const auto before = cpu_before.find(name);
          cpu += cohort::detail::cat(
              " ", name, " ", (ns - (before == cpu_before.end() ? 0 : before->second)) / 1'000'000);
        }
        cpu += "\n";
        (void)!write(said.get(), cpu.data(), cpu.size());
      }
      _exit(0);
    }
    close(go[0]);
    close(answers[1]);
    running.push_back({pid, Fd(go[1]), Fd(answers[0])});
  }
  // The store's descriptors, sampled while the relays connect and the tree
  // forms (from here: no fork after this thread starts): the most it held,
  // not only what it holds once formed.
  std::atomic<bool> formed{false};
  std::thread sampler([&] {
    while (!formed) {
      result.descriptors = std::max(result.descriptors, server.descriptors());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  for (Shard& shard : running)
    (void)line_of(shard.answers.get());  // "placed"
  for (Shard& shard : running)
    (void)!write(shard.go.get(), "\n", 1);
  bool answered = true;
  for (Shard& shard : running)
    answered = line_of(shard.answers.get()) == "ready" && answered;
  formed = true;
  sampler.join();
  result.descriptors = std::max(result.descriptors, server.descriptors());
  result.warm_seconds = warm_memory(warm_bytes);
  const auto start = Clock::now();
  for (Shard& shard : running)
    (void)!write(shard.go.get(), "g", 1);
  Clock::rep last = 0;
  for (Shard& shard : running) {
    const std::string line = line_of(shard.answers.get());
    if (line.empty() || line == "-") {
      answered = false;
    } else {
      last = std::max<Clock::rep>(last, std::stoll(line));
    }
  }
  if (answered) {
    result.seconds =
        std::chrono::duration<double>(Clock::time_point(Clock::duration(last)) - start).count();
  }
  result.descriptors = std::max(result.descriptors, server.descriptors());
  result.grown_kib = server.grown_kib();
  if (print_phases) {
    for (Shard& shard : running)
      (void)!write(shard.go.get(), "c", 1);  // each prints its threads' CPU
  }
  for (Shard& shard : running) {
    shard.go.reset();
    waitpid(shard.pid, nullptr, 0);
  }
  return result;
}

// The least time any design takes on this machine to give each of `nodes`
// simulated nodes its own copy of `table`: the copies written once into
// fresh sealed memory files (as a relay writes its node's), on every core
// at once, each held until the last is written (as its node holds it).
// No socket, no request, no store is counted: the simulation's floor for
// the table patterns through relays, where one machine plays every node.
// In a child process, whose memory goes with it. After `idle` with nothing
// running, first: see kColdIdle.
std::optional<double> copy_floor(int nodes, const std::string& table, std::size_t warm_bytes,
                                 std::chrono::seconds idle = std::chrono::seconds(0)) {
  int answer[2];
  if (pipe(answer) != 0) return std::nullopt;
  std::this_thread::sleep_for(idle);
  warm_memory(warm_bytes);
  const pid_t pid = fork();
  if (pid == 0) {
    close(answer[0]);
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::vector<Fd>> held(threads);
    std::vector<std::thread> workers;
    const auto start = Clock::now();
    for (unsigned t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        for (int node = static_cast<int>(t); node < nodes; node += static_cast<int>(threads)) {
          std::string error;
          held[t].push_back(cohort::detail::make_answer_file(table, &error));
          if (!held[t].back().valid()) _exit(1);
        }
      });
    }
    for (std::thread& worker : workers)
      worker.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    (void)!write(answer[1], &seconds, sizeof(seconds));
    _exit(0);
  }
  close(answer[1]);
  double seconds = 0;
  const bool read_it = pid > 0 && read(answer[0], &seconds, sizeof(seconds)) == sizeof(seconds);
  close(answer[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  if (!read_it) return std::nullopt;
  return seconds;
}

// The floor once more, cold: memory this machine's host has taken back.
// Here (a virtual machine on 2026-12-03) memory freed by the guest stays
// quick to take again for about a second; a run that writes 6.9 GB of
// copies after 1.5 s of idle took 3.9-5.3 s, after 4 s 7.1-8.3 s, after
// 10 s 12.1-14.0 s, and 1.2-1.5 s at once. A run of the table pattern at
// 100,000 ranks takes its memory over seconds, most of it after the warmed
// memory has gone back: the cold floor is what the copies alone cost
// then. Only where the copies take kColdFrom or more (below a GiB the
// host here took nothing back).
constexpr auto kColdIdle = std::chrono::seconds(10);
constexpr std::size_t kColdFrom = std::size_t{1} << 30;

std::string seconds_cell(const std::optional<double>& seconds) {
  if (!seconds) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", *seconds);
  return text;
}

std::string mib_cell(const Result& result) {
  if (result.descriptors == 0) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", static_cast<double>(result.grown_kib) / 1024);
  return text;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');)
    out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // One process here plays thousands of ranks, each of which reads a table
  // of up to megabytes and drops it: left to itself, the allocator hands
  // each one fresh pages (mmap, or a heap it trimmed after the last) and
  // takes them back, which a rank in its own process pays once, not
  // thousands of times (it doubled the table pattern's time, and made it
  // vary 2x from run to run). So freed memory stays with the process.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  std::vector<int> sizes{256, 1024, 4096, 16384};
  std::vector<std::string> patterns{"barrier", "table", "hosts", "wait-all"};
  int wait_all_max = 4096;
  int ranks_per_node = 0;  // 0: every rank connects to the store itself
  int torch_max = 16384;
  int tree_width = cohort::detail::kDefaultTreeWidth;
  int processes = 0;  // through relays: 0, as few as the open-file limit allows
  std::string python = "/usr/bin/python3";
  std::string json;
  bool cold = false;
  bool tree_by_arrival = false;
  bool host_given = false;  // --ranks-per-host
  const auto usage = [] {
    std::printf(
        "rendezvous_scale [--sizes 256,1024,4096,16384] [--patterns barrier,table,hosts,wait-all]\n"
        "                 [--ranks-per-node L] [--tree-width 32] [--tree-by-arrival]\n"
        "                 [--processes P|nodes] [--ranks-per-host H] [--entries join|random]\n"
        "                 [--wait-all-max 4096]\n"
        "                 [--torch-max 16384] [--cold] [--phases]\n"
        "                 [--python /usr/bin/python3] [--json FILE]\n"
        "N simulated ranks against cohort's store and PyTorch's TCPStore; bench/README.md\n");
  };
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      usage();
      return 0;
    }
    if (flag == "--cold" || flag == "--phases" || flag == "--tree-by-arrival") {
      (flag == "--cold" ? cold : flag == "--phases" ? print_phases : tree_by_arrival) = true;
      --i;  // takes no value
      continue;
    }
    if (i + 1 >= argc || flag.rfind("--", 0) != 0 ||
        (flag != "--sizes" && flag != "--patterns" && flag != "--wait-all-max" &&
         flag != "--python" && flag != "--json" && flag != "--ranks-per-node" &&
         flag != "--torch-max" && flag != "--tree-width" && flag != "--processes" &&
         flag != "--ranks-per-host" && flag != "--entries")) {
      std::fprintf(stderr, "rendezvous_scale: %s%s\n", flag.c_str(),
                   i + 1 >= argc ? " needs a value" : ": unknown flag");
      usage();
      return 2;
    }
    if (flag == "--sizes") {
      sizes.clear();
      for (const std::string& item : split(argv[i + 1]))
        sizes.push_back(std::atoi(item.c_str()));
    } else if (flag == "--patterns") {
      patterns = split(argv[i + 1]);
    } else if (flag == "--wait-all-max") {
      wait_all_max = std::atoi(argv[i + 1]);
    } else if (flag == "--ranks-per-node") {
      ranks_per_node = std::max(0, std::atoi(argv[i + 1]));
    } else if (flag == "--ranks-per-host") {
      ranks_per_host = std::atoi(argv[i + 1]);
      if (ranks_per_host < 1) {
        std::fprintf(stderr, "rendezvous_scale: --ranks-per-host %s: give a number from 1\n",
                     argv[i + 1]);
        return 2;
      }
      host_given = true;
    } else if (flag == "--entries") {
      const std::string value = argv[i + 1];
      if (value != "join" && value != "random") {
        std::fprintf(stderr, "rendezvous_scale: --entries %s: give join or random\n",
                     value.c_str());
        return 2;
      }
      random_entries = value == "random";
    } else if (flag == "--torch-max") {
      torch_max = std::atoi(argv[i + 1]);
    } else if (flag == "--tree-width") {
      tree_width = std::max(0, std::atoi(argv[i + 1]));
    } else if (flag == "--processes") {
      const std::string value = argv[i + 1];
      processes = value == "nodes" ? -1 : std::atoi(value.c_str());
      if (value != "nodes" && (processes < 1 || std::to_string(processes) != value)) {
        std::fprintf(stderr, "rendezvous_scale: --processes %s: give a number from 1, or 'nodes'\n",
                     value.c_str());
        return 2;
      }
    } else if (flag == "--python") {
      python = argv[i + 1];
    } else if (flag == "--json") {
      json = argv[i + 1];
    }
  }
  if (!host_given && ranks_per_node > 0) ranks_per_host = ranks_per_node;
  const int largest = *std::max_element(sizes.begin(), sizes.end());
  // This process holds a connection per rank, the server (a child) one
  // more each, or the relays (another child) one more each and a few per
  // relay: raise the hard limit too where allowed (root), then the soft.
  // Through relays, the ranks and relays are spread over enough processes.
  const rlim_t needed =
      static_cast<rlim_t>(ranks_per_node > 0 ? std::min(largest, torch_max) : largest) + 256;
  rlimit wanted{};
  getrlimit(RLIMIT_NOFILE, &wanted);
  if (wanted.rlim_max < needed) {
    wanted.rlim_max = needed;
    setrlimit(RLIMIT_NOFILE, &wanted);  // refused without privilege: checked below
  }
  const long files = cohort::detail::raise_open_file_limit();
  if (files < static_cast<long>(needed) - 192) {
    std::fprintf(stderr,
                 "rendezvous_scale: the open-file limit is %ld; %d ranks need about %ld: raise the "
                 "hard limit (ulimit -Hn) or ask for fewer\n",
                 files, largest, static_cast<long>(needed));
    return 1;
  }
  if (ranks_per_node > 0) {
    std::string relays =
        "relays are threads, as agents run them, of as few processes as the "
        "open-file limit allows, that also drive their nodes' ranks";
    if (processes < 0) {
      relays =
          "each relay a thread, as agents run them, of a process of its own that also "
          "drives its node's ranks, as each node's agent is";
    } else if (processes > 0) {
      relays = cohort::detail::cat("relays are threads, as agents run them, of ", processes,
                                   " processes, or as many as the open-file limit needs, that "
                                   "also drive their nodes' ranks");
    }
    std::printf(
        "cohort: the ranks meet through their node's relay, %d ranks per node (%s), %s; "
        "TCPStore: every rank connects to it\n",
        ranks_per_node, relays.c_str(),
        tree_width == 0 ? "every relay connected to the store"
        : tree_by_arrival
            ? cohort::detail::cat(
                  "the relays in a tree of width ", tree_width,
                  ", formed as the relays arrive (each connected to the store, then under its "
                  "parent once that one is published)")
                  .c_str()
            : cohort::detail::cat("the relays in a tree of width ", tree_width,
                                  ", formed before the rendezvous (each connected to its parent "
                                  "from the start)")
                  .c_str());
  }
  const auto limit = std::chrono::seconds(120);
  std::printf("%-9s %6s  %10s %10s %9s  %10s %10s %9s  %8s  %8s  %9s\n", "pattern", "N", "cohort s",
              "fds", "grew MiB", "TCPStore s", "fds", "grew MiB", "ratio", "floor s", "cold s");
  std::ofstream out;
  if (!json.empty()) out.open(json);
  if (out) out << "[";
  bool first = true;
  std::pair<std::size_t, double> warmed_most{0, 0.0};  // bytes, seconds: for the closing line
  std::vector<std::string> tables_said;                // table_line's, for the closing lines
  for (const std::string& name : patterns) {
    const Pattern pattern = name == "barrier"    ? barrier
                            : name == "table"    ? table
                            : name == "hosts"    ? hosts
                            : name == "wait-all" ? wait_all
                                                 : nullptr;
    if (pattern == nullptr) {
      std::fprintf(stderr,
                   "rendezvous_scale: unknown pattern '%s' (barrier, table, hosts, wait-all)\n",
                   name.c_str());
      return 2;
    }
    const bool has_table = name == "table" || name == "hosts";
    for (const int n : sizes) {
      if (name == "wait-all" && n > wait_all_max) {
        std::printf("%-9s %6d  (left out: above --wait-all-max %d)\n", name.c_str(), n,
                    wait_all_max);
        continue;
      }
      // As much memory as every simulated node's copy of the table (or, with
      // a connection per rank, the bench's ranks' copies at a time) takes.
      const int per_entry = name == "hosts" ? ranks_per_host : 1;
      const std::string table = has_table ? table_of(n, per_entry) : "";
      if (has_table) tables_said.push_back(table_line(name, n, per_entry, table));
      const int nodes = ranks_per_node > 0 ? (n + ranks_per_node - 1) / ranks_per_node : 0;
      const int copies = ranks_per_node > 0 ? nodes : std::min(n, kTableWindow);
      const std::size_t warm_bytes = cold ? 0 : table.size() * static_cast<std::size_t>(copies);
      Result ours;
      {
        ServerProcess server([n](int in, int out_fd) { serve_cohort(in, out_fd, n); });
        if (ranks_per_node > 0) {
          // A shard holds 2 descriptors per rank and 6 per relay (its
          // listener, epoll, 2 eventfds, its connection up and, in a tree,
          // a child's on average).
          const long descriptors = 2L * n + 8L * n / ranks_per_node;
          const long per_shard = std::max(1000L, files - 1024);
          const int fewest = static_cast<int>((descriptors + per_shard - 1) / per_shard);
          const int shards = std::clamp(processes < 0 ? nodes : processes, fewest, nodes);
          ours = measure_through_relays(server, pattern, n, ranks_per_node, shards, tree_width,
                                        tree_by_arrival, limit, warm_bytes);
        } else {
          ours = measure(server, CohortProtocol(), pattern, n, limit, warm_bytes);
        }
      }
      Result theirs;
      if (n <= torch_max) {
        ServerProcess server([&python](int in, int out_fd) { serve_torch(in, out_fd, python); });
        theirs = measure(server, TorchProtocol(), pattern, n, limit, warm_bytes);
      }
      const std::string ratio = ours.seconds && theirs.seconds
                                    ? seconds_cell(*theirs.seconds / *ours.seconds) + "x"
                                    : std::string("-");
      if (warm_bytes > warmed_most.first) warmed_most = {warm_bytes, ours.warm_seconds};
      std::optional<double> floor_seconds;
      std::optional<double> cold_floor_seconds;
      if (ranks_per_node > 0 && has_table) {
        floor_seconds = copy_floor(copies, table, warm_bytes);
        if (table.size() * static_cast<std::size_t>(copies) >= kColdFrom)
          cold_floor_seconds = copy_floor(copies, table, 0, kColdIdle);
      }
      std::printf("%-9s %6d  %10s %10ld %9s  %10s %10ld %9s  %8s  %8s  %9s\n", name.c_str(), n,
                  seconds_cell(ours.seconds).c_str(), ours.descriptors, mib_cell(ours).c_str(),
                  seconds_cell(theirs.seconds).c_str(), theirs.descriptors,
                  mib_cell(theirs).c_str(), ratio.c_str(), seconds_cell(floor_seconds).c_str(),
                  seconds_cell(cold_floor_seconds).c_str());
      std::fflush(stdout);
      if (out) {
        out << (first ? "" : ",") << "{\"pattern\":\"" << name << "\",\"n\":" << n
            << ",\"cohort_s\":" << (ours.seconds ? seconds_cell(ours.seconds) : "null")
            << ",\"cohort_fds\":" << ours.descriptors << ",\"cohort_grew_kib\":" << ours.grown_kib
            << ",\"tcpstore_s\":" << (theirs.seconds ? seconds_cell(theirs.seconds) : "null")
            << ",\"tcpstore_fds\":" << theirs.descriptors
            << ",\"tcpstore_grew_kib\":" << theirs.grown_kib
            << ",\"floor_s\":" << (floor_seconds ? seconds_cell(floor_seconds) : "null")
            << ",\"cold_floor_s\":"
            << (cold_floor_seconds ? seconds_cell(cold_floor_seconds) : "null") << "}";
        first = false;
      }
    }
  }
  if (out) out << "]\n";
  std::printf(
      "ratio: TCPStore's time over cohort's (above 1: cohort is faster); fds: the most open "
      "descriptors the server held (through relays: sampled from their first connections on, "
      "the tree's forming included); grew: its peak resident memory over before; floor: "
      "through relays, the time this machine takes only to write every simulated node's copy "
      "of the table into a memory file of its own, on all cores (no request, socket or store); "
      "cold: the floor again after %lld s of idle, its memory not warmed, where the copies take "
      "a GiB or more (the host of a virtual machine takes back memory left free); '-': not "
      "measured, or no answer within %lld s\n",
      static_cast<long long>(kColdIdle.count()), static_cast<long long>(limit.count()));
  for (const std::string& line : tables_said)
    std::printf("%s\n", line.c_str());
  if (std::find(patterns.begin(), patterns.end(), "hosts") != patterns.end()) {
    std::printf("hosts: %d ranks share a host identity (%s)\n", ranks_per_host,
                host_given           ? "--ranks-per-host"
                : ranks_per_node > 0 ? "a simulated node's ranks, --ranks-per-node"
                                     : "without --ranks-per-node or --ranks-per-host");
  }
  if (cold) {
    std::printf(
        "memory: not warmed (--cold): each run took fresh pages from this machine's host\n");
  } else if (warmed_most.first > 0) {
    std::printf(
        "memory: before each run of a table pattern the bench touched as much memory as its "
        "copies of the table take, and freed it for the run (not timed; the host of a virtual "
        "machine backs memory left free anew at its next touch); the most, %.0f MiB, took "
        "%.2f s; --cold: not\n",
        static_cast<double>(warmed_most.first) / (1 << 20), warmed_most.second);
  }
  return 0;
}
