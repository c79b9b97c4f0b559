// The server as a store protocol sees it (store_protocol.hpp), without
// sockets: one key space, the server's default limits; in relay mode
// (relaying(true)) the requests forwarded are kept, for the fuzz target to
// answer. A refused or dropped connection is marked closing.
#pragma once

#include <deque>
#include <string>
#include <unordered_map>
#include <utility>

#include <unistd.h>

#include "store/relay.hpp"
#include "store/store_protocol.hpp"

namespace cohort::fuzz {

class StoreCoreDouble final : public detail::StoreCore {
 public:
  StoreCoreDouble() { options_.token = "fuzz-token"; }  // every limit is the server's default
  detail::KeySpace& keys() override { return keys_; }
  const StoreServer::Options& options() const override { return options_; }
  uid_t user() const override { return geteuid(); }
  void drop(Id, detail::Connection& connection, const std::string&) override {
    connection.closing = true;
  }
  void log_refusal(const std::string&) override {}
  void end_handshake(detail::Connection&) override {}
  bool judged(detail::Connection&, bool) override { return false; }
  void unservable(Id, detail::Connection& connection, const std::string&) override {
    connection.closing = true;
  }
  bool relays() const override { return relaying_; }
  void forward(Id id, detail::RelayedRequest request) override {
    forwarded_.emplace_back(id, std::move(request));
  }
  Id alias(Id connection, detail::store_protocol::Tag tag) override {
    aliases_[next_alias_] = {connection, tag};
    return next_alias_++;
  }
  void forget_alias(Id alias) override { aliases_.erase(alias); }

  void relaying(bool on) { relaying_ = on; }
  /// Requests forwarded and not yet answered, oldest first.
  std::deque<std::pair<Id, detail::RelayedRequest>>& forwarded() { return forwarded_; }
  /// Whether an answer to `id` would reach a connection (not a forgotten alias).
  bool reaches(Id id) const { return id < kFirstAlias || aliases_.count(id) != 0; }
  /// The connection an answer to `id` goes to, as the server finds it: an
  /// alias's (then forgotten, its tag in `*tag`), else `id` itself; 0 for a
  /// forgotten alias.
  Id answer_to(Id id, detail::store_protocol::Tag* tag = nullptr) {
    if (tag != nullptr) *tag = std::nullopt;
    if (id < kFirstAlias) return id;
    const auto at = aliases_.find(id);
    if (at == aliases_.end()) return 0;
    const Id connection = at->second.first;
    if (tag != nullptr) *tag = at->second.second;
    aliases_.erase(at);
    return connection;
  }

 private:
  static constexpr Id kFirstAlias = 1000;  // above every connection's id
  detail::KeySpace keys_;
  StoreServer::Options options_;
  bool relaying_ = false;
  std::deque<std::pair<Id, detail::RelayedRequest>> forwarded_;
  std::unordered_map<Id, std::pair<Id, detail::store_protocol::Tag>> aliases_;
  Id next_alias_ = kFirstAlias;
};

}  // namespace cohort::fuzz
