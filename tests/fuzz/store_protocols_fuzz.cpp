// The store's wire protocols without sockets: cohort's (handshake and
// requests) and PyTorch's TCPStore, each driven as server.cpp drives it
// (receive limit, handle, resumed waits, expired waits, last words on
// close; a multiplexed connection's waits under their aliases) over two
// connections that share one key space, at the server's real limits. store_server_fuzz.cpp drives
// the same code through a live server and its transport, about 100 times slower.
//
// Input: a flags byte (bit 0: PyTorch's protocol, else cohort's; bit 1:
// cohort's connections start authenticated, as after a handshake), then
// records: a byte whose bit 7 picks connection B over A and whose low
// 7 bits are a length n, then n bytes that connection receives; n = 0 is
// its end-of-file. When the records end, every wait's deadline passes and
// both connections close.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <string>

#include <unistd.h>

#include "fuzz/fuzz_target.hpp"
#include "fuzz/store_core_double.hpp"
#include "store/cohort_protocol.hpp"
#include "store/torch_protocol.hpp"

namespace cohort::fuzz {
namespace {

using detail::Connection;
using Core = StoreCoreDouble;

struct Peer {
  Connection connection;
  bool open = true;
};

class Driver {
 public:
  Driver(detail::StoreProtocol& protocol, bool authenticated) {
    for (std::size_t i = 0; i < peers_.size(); ++i) {
      Connection& connection = peers_[i].connection;
      connection.id = i + 4;
      connection.peer = "127.0.0.1:" + std::to_string(40000 + i);
      connection.protocol = &protocol;
      connection.authenticated = authenticated || !protocol.has_handshake();
    }
  }

  void receive(std::size_t which, std::string_view bytes) {
    Peer& peer = peers_[which];
    if (!peer.open || peer.connection.eof) return;
    Connection& connection = peer.connection;
    if (bytes.empty()) {
      connection.eof = true;
    } else {
      connection.in.append(bytes);
      if (connection.in.size() > connection.protocol->receive_limit(core_, connection)) {
        return close(which);
      }
    }
    handle(which);
  }

  // Every wait's deadline passes, then both connections end.
  void finish() {
    core_.keys().expire(detail::Clock::now() + std::chrono::hours(24),
                        [this](Id id, const std::vector<std::string>& missing) {
                          detail::store_protocol::Tag tag;
                          Peer& peer = waiter(id, &tag);
                          peer.connection.protocol->answer_timeout(peer.connection, missing, tag);
                        });
    for (std::size_t which = 0; which < peers_.size(); ++which) {
      handle(which);
      close(which);
    }
    resume();
  }

 private:
  using Id = detail::KeySpace::Id;

  void handle(std::size_t which) {
    Peer& peer = peers_[which];
    if (!peer.open) return;
    Connection& connection = peer.connection;
    if (!connection.protocol->handle(core_, connection.id, connection) || connection.closing) {
      return close(which);
    }
    connection.out.clear();  // sent
    connection.splices.clear();
    if (connection.eof && !core_.keys().waiting(connection.id)) return close(which);
    resume();
  }

  void resume() {
    while (core_.keys().may_resume()) {
      std::vector<std::size_t> resumed;
      core_.keys().resume_ready([&](Id id, const detail::Wait& wait) {
        detail::store_protocol::Tag tag;
        Peer& peer = waiter(id, &tag);
        if (!peer.open) std::abort();  // a closed connection's wait was cancelled
        peer.connection.protocol->answer_wait(core_, peer.connection, wait, tag);
        resumed.push_back(peer.connection.id - 4);
      });
      for (std::size_t which : resumed)
        handle(which);
    }
  }

  // The peer whose wait `id` is (a multiplexed one's alias, as the server
  // finds it), its tag in `*tag`.
  Peer& waiter(Id id, detail::store_protocol::Tag* tag) {
    const Id connection = core_.answer_to(id, tag);
    if (connection < 4 || connection - 4 >= peers_.size()) std::abort();  // a forgotten alias
    Peer& peer = peers_[connection - 4];
    auto& waits = peer.connection.tagged_waits;
    if (*tag) {
      const auto at = std::find(waits.begin(), waits.end(), id);
      if (at == waits.end()) std::abort();  // every tagged wait is listed
      waits.erase(at);
    }
    return peer;
  }

  void close(std::size_t which) {
    Peer& peer = peers_[which];
    if (!peer.open) return;
    peer.open = false;
    core_.keys().cancel(peer.connection.id);
    for (const Id waiter : peer.connection.tagged_waits) {
      core_.keys().cancel(waiter);
      (void)core_.answer_to(waiter);
    }
    peer.connection.tagged_waits.clear();
    for (auto& [key, value] : peer.connection.on_close)
      core_.keys().set(key, std::move(value));
    peer.connection.on_close.clear();
  }

  Core core_;
  std::array<Peer, 2> peers_;
};

}  // namespace

COHORT_FUZZ_TARGET(store_protocols) {
  if (size == 0) return 0;
  static detail::CohortProtocol cohort_protocol;
  static detail::TorchProtocol torch_protocol;
  detail::StoreProtocol& protocol =
      (data[0] & 1) != 0 ? static_cast<detail::StoreProtocol&>(torch_protocol) : cohort_protocol;
  Driver driver(protocol, (data[0] & 2) != 0);
  std::size_t at = 1;
  while (at < size) {
    const std::size_t which = data[at] >> 7;
    const std::size_t length = std::min<std::size_t>(data[at] & 0x7f, size - at - 1);
    ++at;
    driver.receive(which, std::string_view(reinterpret_cast<const char*>(data) + at, length));
    at += length;
  }
  driver.finish();
  return 0;
}

}  // namespace cohort::fuzz
