#include "comm/kit/peers.hpp"

#include <cctype>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "comm/kit/host_identity.hpp"
#include "core/strings.hpp"
#include "store/exchange.hpp"

namespace cohort::detail {
namespace {

// "1.2.3.4" from "[1.2.3.4]:5678".
std::string ip_of(const std::string& address) {
  const std::size_t open = address.find('[');
  const std::size_t close = address.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return {};
  return address.substr(open + 1, close - open - 1);
}

// "[1.2.3.4]:5678" from a text that holds it.
std::string address_in(const std::string& text) {
  const std::size_t open = text.find('[');
  const std::size_t close = text.find("]:", open);
  if (open == std::string::npos || close == std::string::npos) return {};
  std::size_t end = close + 2;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])))
    ++end;
  return text.substr(open, end - open);
}

}  // namespace

std::string Peers::entry() {
  return cat(this_host_name(), " ", ::getpid());
}

void Peers::publish(Store& store, int rank) {
  store.set(cat("peer/", rank), entry());
}

Peers::Peers(int rank, const std::vector<std::string>& entries)
    : rank_(rank), host_(this_host_name()), peers_(entries.size()) {
  for (std::size_t r = 0; r < entries.size(); ++r) {
    std::istringstream entry(entries[r]);
    entry >> peers_[r].host >> peers_[r].pid;
  }
}

Peers::Peers(Store& store, int rank, std::vector<std::string> addresses,
             std::chrono::milliseconds timeout)
    : rank_(rank), host_(this_host_name()), peers_(addresses.size()) {
  // Every entry in one request, not one GET per rank: N ranks ask N
  // questions of the store, not N².
  const std::vector<std::string> entries =
      store.multi_get(ranked_keys("peer", addresses.size()), timeout);
  for (std::size_t r = 0; r < addresses.size(); ++r) {
    Peer& peer = peers_[r];
    peer.ip = ip_of(addresses[r]);
    peer.address = address_in(addresses[r]);
    std::istringstream entry(entries[r]);
    entry >> peer.host >> peer.pid;
  }
}

bool Peers::is_gone(const Peer& peer) const {
  if (peer.host != host_ || peer.pid <= 0) return false;  // cannot tell from here
  std::ifstream stat(cat("/proc/", peer.pid, "/stat"));
  if (!stat) return true;
  // "pid (comm) S ...": the state follows the last ')'. Z and X are dead.
  std::string line;
  std::getline(stat, line);
  const std::size_t close = line.rfind(')');
  const char state = close + 2 < line.size() ? line[close + 2] : '?';
  return state == 'Z' || state == 'X';
}

int Peers::gone_on_this_host(int unlikely) const {
  int found = -1;
  for (std::size_t r = 0; r < peers_.size(); ++r) {
    if (static_cast<int>(r) == rank_ || !is_gone(peers_[r])) continue;
    if (static_cast<int>(r) != unlikely) return static_cast<int>(r);
    found = static_cast<int>(r);
  }
  return found;
}

bool Peers::any_on_this_host() const {
  for (std::size_t r = 0; r < peers_.size(); ++r) {
    if (static_cast<int>(r) != rank_ && peers_[r].host == host_) return true;
  }
  return false;
}

int Peers::named_in(const std::string& transport_error) const {
  const std::string address = address_in(transport_error);
  const std::string ip = ip_of(transport_error);
  std::vector<int> at_ip;
  for (std::size_t r = 0; r < peers_.size(); ++r) {
    if (static_cast<int>(r) == rank_) continue;
    if (!address.empty() && peers_[r].address == address) return static_cast<int>(r);
    if (!ip.empty() && peers_[r].ip == ip) at_ip.push_back(static_cast<int>(r));
  }
  return at_ip.size() == 1 ? at_ip.front() : -1;
}

long Peers::pid(int rank) const {
  if (rank < 0 || static_cast<std::size_t>(rank) >= peers_.size()) return 0;
  return peers_[static_cast<std::size_t>(rank)].pid;
}

std::vector<long> Peers::pids() const {
  std::vector<long> all;
  all.reserve(peers_.size());
  for (const Peer& peer : peers_)
    all.push_back(peer.pid);
  return all;
}

std::string Peers::describe(int rank) const {
  if (rank < 0 || static_cast<std::size_t>(rank) >= peers_.size()) return {};
  const Peer& peer = peers_[static_cast<std::size_t>(rank)];
  return cat(" (host ", peer.host.empty() ? "?" : peer.host, ", pid ", peer.pid, ")");
}

namespace {

// The first blame, per find_lost_peer; `blamed`: the peer this rank pinned.
int first_blame(Store& store, const Peers& peers, const std::string& transport_error,
                bool timed_out, int& blamed) {
  constexpr int kChecks = 50;  // every 4 ms: 200 ms at most, on the failure path only
  const bool can_see_deaths = peers.any_on_this_host();
  for (int check = 1;; ++check) {
    if (store.check({"lost"})) return std::stoi(store.get("lost", std::chrono::milliseconds(500)));
    if (timed_out) return -1;
    blamed = peers.gone_on_this_host();
    if (blamed < 0 && (!can_see_deaths || check == kChecks)) {
      blamed = peers.named_in(transport_error);
    }
    if (blamed >= 0) return std::stoi(store.compare_set("lost", "", std::to_string(blamed)));
    if (check >= kChecks) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(4));
  }
}

}  // namespace

int find_lost_peer(Store& store, const Peers& peers, const std::string& transport_error,
                   bool timed_out) {
  int blamed = -1;
  try {
    return first_blame(store, peers, transport_error, timed_out, blamed);
  } catch (const std::exception&) {
    // The store is gone too. Without a launcher it lived in rank 0, which
    // may have exited after its own PeerLost: another dead peer went first.
    // `blamed` may be that rank 0 itself, found gone after the store still
    // said nobody was lost, between its answer and rank 0's exit.
    const int gone = peers.gone_on_this_host(0);
    if (gone > 0) return gone;
    return blamed >= 0 ? blamed : gone;
  }
}

}  // namespace cohort::detail
