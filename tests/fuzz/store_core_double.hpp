// The server as a store protocol sees it (store_protocol.hpp), without
// sockets: one key space, the server's default limits, no relay. A refused
// or dropped connection is marked closing.
#pragma once

#include <string>

#include <unistd.h>

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
  detail::StoreRelay* relay() override { return nullptr; }

 private:
  detail::KeySpace keys_;
  StoreServer::Options options_;
};

}  // namespace cohort::fuzz
